/*
 * test_arena_regret.c — the arenas' answer to the heaps' growth gives back
 * free spans of any age until the arenas have taken back half of what that
 * cost them; from then on a young span stays (issue 18: large.c's
 * large_answer_grow and its large_grow_lost / large_grow_back counts).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=1000 and HAKMEM_BACKGROUND_THREAD=0: by
 * time alone nothing goes back while the test runs (about 0.2 s). Each of
 * ROUNDS rounds mallocs a BUF-byte buffer (an arena block), writes it
 * whole and frees it, then mallocs SMALL bytes of 64-byte blocks and keeps
 * them, which takes slabs with no resident pages (the heap grows, and the
 * arenas' answer runs), then sleeps 2 ms (a pass runs at most once a
 * millisecond).
 * 1. The first FIRST rounds give the buffer's span back, young as it is
 *    (to the arenas it looks like a phase change): stats.purged_bytes rises
 *    by at least BUF over them. The library before 080b837 kept spans freed
 *    in the last sixteenth of the delay (62 ms here) and gave none back.
 * 2. Each round takes the buffer back cold, so the arenas take back what
 *    was given; once that is half of 4 MiB or more lost, the young span
 *    stays: over the last LATE rounds purged_bytes rises by less than
 *    LATE_MAX (by about LATE * BUF without the regret).
 * Every block reads back its pattern; every figure is printed, on success
 * too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define BUF MiB
#define ROUNDS 40
#define FIRST 4
#define LATE 20
#define LATE_MAX (2 * MiB)
#define BSZ 64
#define SMALL ((size_t)256 << 10)
#define PER_ROUND (SMALL / BSZ)

static void *small[ROUNDS * PER_ROUND];

int main(void)
{
  size_t at[ROUNDS + 1];
  int bad = 0;
  at[0] = (size_t)tu_ctl_u64("stats.purged_bytes");
  for (unsigned r = 0; r < ROUNDS; r++) {
    unsigned char *b = malloc(BUF);
    CHECK(b != NULL, "malloc(%zu) returned NULL", (size_t)BUF);
    memset(b, (int)(r + 1), BUF);
    if (b[0] != (unsigned char)(r + 1) || b[BUF - 1] != (unsigned char)(r + 1)) bad++;
    free(b);
    for (size_t i = 0; i < PER_ROUND; i++) {
      uint64_t *p = malloc(BSZ);
      CHECK(p != NULL, "malloc(%d) returned NULL", BSZ);
      p[0] = ((uint64_t)r << 32) | i;
      small[r * PER_ROUND + i] = p;
    }
    struct timespec q = {0, 2000000L};
    nanosleep(&q, NULL);
    at[r + 1] = (size_t)tu_ctl_u64("stats.purged_bytes");
  }
  for (unsigned r = 0; r < ROUNDS; r++)
    for (size_t i = 0; i < PER_ROUND; i++) {
      uint64_t *p = small[r * PER_ROUND + i];
      if (p[0] != (((uint64_t)r << 32) | i)) bad++;
      free(p);
    }
  size_t first = at[FIRST] - at[0], late = at[ROUNDS] - at[ROUNDS - LATE];
  for (unsigned r = 0; r < ROUNDS; r++) printf("round %2u: purged %zu KiB\n", r + 1, (at[r + 1] - at[r]) >> 10);
  printf("first %d rounds: %zu KiB given back (at least %zu); last %d rounds: %zu KiB (less than %zu); bad blocks %d\n",
         FIRST, first >> 10, (size_t)BUF >> 10, LATE, late >> 10, (size_t)LATE_MAX >> 10, bad);
  int fail = 0;
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  fail |= tu_fail_if(first < BUF, "the heaps' growth left the arenas' young free span resident");
  fail |= tu_fail_if(late >= LATE_MAX, "the arenas kept giving back a span they took back every round");
  if (!fail) printf("PASS\n");
  return fail;
}
