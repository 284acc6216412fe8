/*
 * test_cur_steal.c — a class's empty current slab serves the next class
 * that needs a slab (issue 18: heap.c's heap_steal_idle_current).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0
 * (nothing goes back or cools while the test looks). One thread, NSIZES
 * small classes in turn: a run allocates 3 slabs of 64 KiB and 20 KiB of
 * one size, writes every block whole, checks them and frees them all. The
 * three exhausted slabs become free slabs, warm, which the next run takes;
 * the current slab empties with 20 KiB carved, too few for heap_park, and
 * stays its class's current slab. Before the steal the next run's fourth
 * slab came from fresh pages, so each run left its last 20 KiB resident
 * for its class alone. Now the next run takes that slab: RSS after the
 * last run may exceed RSS after the first by at most GROWTH_MAX.
 * Then the classes are used in turn, each allocated and freed whole, as a
 * loop over sizes does (classes whose slabs were taken and that come back
 * soon keep them: heap_cur_back), and at the end a block of every size is
 * allocated at once: every block reads back its pattern and no address is
 * handed out twice. Every figure is printed, on success too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define NSIZES 12
#define RUN_BYTES (3 * 64 * KiB + 20 * KiB)
#define GROWTH_MAX (96 * KiB)
#define NMAX (RUN_BYTES / 64)

static const size_t sizes[NSIZES] = {64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1536};
static void *blk[NMAX];

int main(void)
{
  int bad = 0;
  size_t growth = tu_runs_growth(sizes, NSIZES, RUN_BYTES, blk, &bad, false);
  printf("growth over %u runs: %zu KiB (at most %zu)\n", NSIZES - 1, growth / KiB, GROWTH_MAX / KiB);

  /* The classes in turn, many times, runs of one to two slabs: slabs
   * change classes while blocks of the others come and go. */
  for (unsigned r = 0; r < 40; r++)
    for (unsigned k = 0; k < NSIZES; k++)
      bad += tu_run_filled(blk, (unsigned)((64 + 16 * (r % 5)) * KiB / sizes[k]), sizes[k], ((uint64_t)(r + 100) << 40) | k << 20);

  int corrupt, twice;
  tu_sizes_at_once(sizes, NSIZES, 40, 9000, &corrupt, &twice);
  printf("runs' blocks bad %d; mixed blocks corrupt %d, handed out twice %d\n", bad, corrupt, twice);

  int fail = 0;
  fail |= tu_fail_if(bad != 0, "a run's block lost its pattern");
  fail |= tu_fail_if(corrupt != 0, "a block of the mixed round lost its pattern");
  fail |= tu_fail_if(twice != 0, "an address was handed out twice");
  fail |= tu_fail_if(growth > GROWTH_MAX, "each run left its class's last slab resident: fresh pages for the next");
  if (!fail) printf("PASS\n");
  return fail;
}
