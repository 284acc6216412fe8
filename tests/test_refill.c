/*
 * test_refill.c — HAKMEM_REFILL_BYTES sets how much one refill carves
 * (docs/options.md; sizeclass.c: bytes / block size blocks, 1..256).
 *
 * Usage: test_refill BYTES, run with HAKMEM_REFILL_BYTES=BYTES (or unset
 * for 4096, the default). Linked against a statistics build of the core,
 * whose refills counter counts calls into the heap's refill. 8192 blocks
 * of 64 B kept live take one refill per carve batch, BYTES / 64 blocks
 * (at most 256), plus at most two per 64 KiB slab crossed (its last,
 * shorter batch) and the batch in progress when the loop began: 127..145
 * refills at the default, 31..49 at 16 KiB, 2047..2065 at 256 B (127, 31
 * and 2047 measured). The ranges do not overlap, so an option that did not
 * reach the carve would fail here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { N = 8192, SIZE = 64 };

static uint64_t refills(void) {
  struct hak_stats st;
  tu_stats(&st);
  return st.refills;
}

int main(int argc, char **argv) {
  CHECK(argc == 2, "usage: test_refill BYTES");
  unsigned long bytes = strtoul(argv[1], NULL, 10);
  CHECK(bytes >= 256, "BYTES below the option's minimum");
  unsigned long batch = bytes / SIZE;
  if (batch > 256) batch = 256;
  static void *v[N];
  v[0] = hak_malloc(SIZE); /* the class has a current slab from here on */
  CHECK(v[0] != NULL, "hak_malloc failed");
  uint64_t before = refills();
  for (unsigned i = 1; i < N; i++) {
    v[i] = hak_malloc(SIZE);
    CHECK(v[i] != NULL, "hak_malloc failed");
    memset(v[i], (int)i, SIZE);
  }
  uint64_t got = refills() - before;
  /* 512 KiB of blocks cross at most 8 small slabs (64 KiB) and as many
   * shorter batches at their ends, plus the batch in progress. */
  uint64_t lo = (N - 1) / batch, hi = (N + batch - 1) / batch + 2 * 8 + 1;
  printf("HAKMEM_REFILL_BYTES %lu: a batch of %lu blocks; %llu refills for %d mallocs (expected %llu..%llu)\n", bytes,
         batch, (unsigned long long)got, N - 1, (unsigned long long)lo, (unsigned long long)hi);
  CHECK(got >= lo && got <= hi, "%llu refills, expected %llu..%llu", (unsigned long long)got, (unsigned long long)lo,
        (unsigned long long)hi);
  for (unsigned i = 0; i < N; i++) hak_free(v[i]);
  printf("ok\n");
  return 0;
}
