/*
 * test_park_steal.c — a program that runs through its sizes one after
 * another reuses the same pages for each (issue 18: heap.c's
 * heap_steal_parked, a parked slab of another class taken before fresh
 * pages).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0
 * (nothing goes back or cools while the test looks). One thread, NSIZES
 * small classes in turn: a run allocates about 3.75 slabs of 64 KiB of one
 * size, writes every block whole, checks them and frees them all. The
 * three exhausted slabs become free slabs, warm, which the next run takes;
 * the current slab empties with 48 KiB carved and is parked for its class
 * (heap_park). Before the steal the next run's fourth slab came from fresh
 * pages, so each run left a parked slab resident: the 11 runs after the
 * first added 560 KiB. Now the next run takes the parked slab (+4 KiB):
 * RSS after the last run may exceed RSS after the first by at most
 * GROWTH_MAX. Then a block of every size is allocated at once, and every
 * block of a last round: no address is handed out twice, and every block
 * reads back its pattern. Every figure is printed, on success too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define NSIZES 12
#define RUN_BYTES (3 * 64 * KiB + 48 * KiB)
#define GROWTH_MAX (160 * KiB)
#define NMAX (RUN_BYTES / 64)

static const size_t sizes[NSIZES] = {64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1536};
static void *blk[NMAX];

int main(void)
{
  int bad = 0;
  size_t growth = tu_runs_growth(sizes, NSIZES, RUN_BYTES, blk, &bad, false);
  printf("growth over %u runs: %zu KiB (at most %zu)\n", NSIZES - 1, growth / KiB, GROWTH_MAX / KiB);

  /* Every class at once, some blocks of each: the slabs that changed class
   * serve their new class only. */
  int corrupt, twice;
  tu_sizes_at_once(sizes, NSIZES, 40, 7000, &corrupt, &twice);
  printf("runs' blocks bad %d; mixed blocks corrupt %d, handed out twice %d\n", bad, corrupt, twice);

  int fail = 0;
  fail |= tu_fail_if(bad != 0, "a run's block lost its pattern");
  fail |= tu_fail_if(corrupt != 0, "a block of the mixed round lost its pattern");
  fail |= tu_fail_if(twice != 0, "an address was handed out twice");
  fail |= tu_fail_if(growth > GROWTH_MAX, "each run left its class's last slab resident: fresh pages for the next");
  if (!fail) printf("PASS\n");
  return fail;
}
