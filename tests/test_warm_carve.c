/*
 * test_warm_carve.c — a slab taken back while its pages are resident is
 * carved up to them at once; one whose pages went back is carved a batch
 * (a page) at a time (superslab.c, ss_slab_carve and warm_pages).
 *
 * Linked against a statistics build of the core, whose refills counter
 * counts calls into the heap's refill. Rounds of N blocks of 1 KiB (ten
 * slabs of 64 KiB), each filled with a pattern, checked and freed before
 * the next round (sh6bench's pattern). Every round but the first takes the
 * nine slabs that emptied back from their superslab:
 *   - warm: one refill per slab, which comes back with the list it was
 *     freed with (measured 10 per round; 20 when each was switched to and
 *     then carved whole). Carved a page at a time (4 blocks), they took
 *     about 17 each: 160 per round.
 *   - after hak_collect(1), which decommits the free slabs: the carve must
 *     not link pages that went back (a fault each, and the memory the purge
 *     just returned), so a round takes a refill per page again, at least
 *     120.
 * A warm slab its own thread emptied keeps its free list while it is free
 * (ss_slab_free) and the class takes it back without a carve
 * (heap_take_slab); rounds of another size between take the same slabs
 * for another class, which must carve afresh, not follow the old list, and
 * the 1 KiB rounds after them must not either.
 * Every round also checks that no block is handed out twice and that the
 * patterns survive (a carve past the slab, or over a live block, or a kept
 * list followed by the wrong class, breaks them).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { N = 640, SIZE = 1024, ROUNDS = 12 };

static uint64_t refills(void) {
  struct hak_stats st;
  tu_stats(&st);
  return st.refills;
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return (x > y) - (x < y);
}

/* One round: N blocks of size bytes allocated, filled, checked for overlap,
 * checked and freed. Returns the refills it took. */
static uint64_t round_of(unsigned r, size_t size) {
  static void *v[N], *sorted[N];
  uint64_t before = refills();
  for (unsigned i = 0; i < N; i++) {
    v[i] = hak_malloc(size);
    CHECK(v[i] != NULL, "round %u: hak_malloc failed", r);
    pat_fill(v[i], size, (uint64_t)r * N + i);
  }
  uint64_t got = refills() - before;
  memcpy(sorted, v, sizeof v);
  qsort(sorted, N, sizeof sorted[0], cmp_ptr);
  for (unsigned i = 1; i < N; i++)
    CHECK((uintptr_t)sorted[i] - (uintptr_t)sorted[i - 1] >= size, "round %u: blocks %p and %p overlap", r,
          sorted[i - 1], sorted[i]);
  for (unsigned i = 0; i < N; i++) {
    CHECK(pat_check(v[i], size, (uint64_t)r * N + i) == (size_t)-1, "round %u: block %u (%p) lost its pattern", r, i,
          v[i]);
    hak_free(v[i]);
  }
  return got;
}
static uint64_t round_once(unsigned r) { return round_of(r, SIZE); }

int main(void) {
  round_once(0); /* fresh slabs: a page at a time, as before */
  uint64_t warm = 0;
  for (unsigned r = 1; r < ROUNDS; r++) warm += round_once(r);
  double per = (double)warm / (ROUNDS - 1);
  printf("warm slabs: %.1f refills per round of %d blocks (at most 60)\n", per, N);
  CHECK(per <= 60, "warm slabs took %.1f refills per round: carved a page at a time", per);

  /* Another class over the emptied slabs, then this one again. */
  unsigned r = ROUNDS;
  for (unsigned k = 0; k < 3; k++) {
    round_of(r++, SIZE - SIZE / 4);
    round_of(r++, SIZE / 2 + 16);
    round_once(r++);
    round_once(r++);
  }

  uint64_t cold = 0;
  for (unsigned k = 0; k < 4; k++, r++) {
    hak_collect(1); /* the free slabs' pages go back */
    cold += round_once(r);
  }
  double cper = (double)cold / 4;
  printf("after hak_collect(1): %.1f refills per round (at least 120)\n", cper);
  CHECK(cper >= 120, "decommitted slabs took %.1f refills per round: carved past their resident pages", cper);
  printf("ok\n");
  return 0;
}
