/*
 * test_kind_reuse.c — a program that frees its blocks of one size and then
 * fills blocks of a size served by slabs of another size reuses the
 * resident pages (issue 18: heap.c's heap_foreign_warm, a warm free slab
 * of another kind taken before untouched pages), or gives them back before
 * it takes fresh ones when the other size comes from the arenas.
 *
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0
 * (nothing goes back while the test looks). One thread, runs of RUN_BYTES
 * in turn of sizes whose classes live in slabs of 512 KiB (4096, 3072 B),
 * 64 KiB (64, 1024, 96 B) and 1 MiB (8192, 32768 B); each run writes every
 * block whole, checks them and frees them all. The library before took
 * untouched pages for the first run of each slab size while the first
 * run's pages sat free and resident: RSS after the last run exceeded RSS
 * after the first by about two runs (32 MiB). Now it may exceed it by at
 * most GROWTH_MAX.
 * Then, for the 16-bit counts of a slab: a run of 100 000-byte blocks
 * (4 MiB slabs) and after it a run of 16-byte blocks, which must not take
 * those slabs (196 608 blocks each); and a block of every size at once.
 * With the argument "rekind", from a fresh start, runs whose classes
 * cannot take the slabs the run before freed as they are (heap.c's
 * heap_rekind_warm gives a wholly free superslab their geometry):
 * 100 000 B (4 MiB slabs), 16 B (64 KiB: a 1 MiB or 4 MiB slab would hold
 * more than 65 535), 49 152 B (1 MiB: a 64 KiB slab holds one), 16 B,
 * 100 000 B. The library before grew by 20.7 MiB over them, this one by
 * 5.7 (each change of kind leaves the last class's current slab and one
 * superslab partly used); at most REKIND_GROWTH_MAX.
 * With the argument "pools" (run with HAKMEM_PURGE_DELAY_MS=2000), runs
 * of blocks served by the slabs and by the arenas (above HAKMEM_ARENA_MIN)
 * in turn, one right after the other: 16 B, 200 000 B, 64 B. The two pools
 * answer each other's growth (decay_note_grow): the arenas' fresh pages
 * first have every heap's free slabs decommitted, a slab taken with no
 * resident pages first has the arenas' free spans decommitted, however
 * young. The library before the answers held both pools' pages from the
 * second run on (16 MiB over the first run's RSS; with a fourth run,
 * 300 000 B, 19.7); the one before this form spared spans freed in the
 * last sixteenth of the delay (125 ms here) and failed unless the runs
 * were that far apart. At most POOLS_GROWTH_MAX after any run. (No more runs: a pool that takes back what the other's growth cost
 * it, as an alternation of the two would, is spared from then on.)
 * No address is handed out twice, and every block reads back its pattern.
 * Every figure is printed, on success too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define NSIZES 7
#define RUN_BYTES (16 * MiB)
#define GROWTH_MAX (3 * MiB)
#define NMAX (RUN_BYTES / 16)
#define NREKIND 5
#define REKIND_GROWTH_MAX (8 * MiB)

static const size_t sizes[NSIZES] = {4096, 64, 8192, 1024, 32768, 3072, 96};
static const size_t rekind_sizes[NREKIND] = {100000, 16, 49152, 16, 100000};
#define NPOOLS 3
#define POOLS_GROWTH_MAX (6 * MiB)
static const size_t pools_sizes[NPOOLS] = {16, 200000, 64};
static void *blk[NMAX];

/* The runs of sizes[0..n) (with max, the largest growth
 * after any run, else after the last), then a block of every size at
 * once: fails if a block lost its pattern, an address came twice or RSS
 * grew by more than limit (why: what it means). */
static int runs_within(const size_t *rs, unsigned n, bool max, size_t limit, uint64_t key,
                       const char *why)
{
  for (size_t i = 0; i < NMAX; i++) blk[i] = &blk[i];
  int bad = 0, corrupt, twice;
  size_t growth = tu_runs_growth(rs, n, RUN_BYTES, blk, &bad, max);
  tu_sizes_at_once(rs, n, 40, key, &corrupt, &twice);
  printf("%s over %u runs: %zu KiB (at most %zu); runs' blocks bad %d; mixed blocks corrupt %d, handed out "
         "twice %d\n",
         max ? "largest growth" : "growth", n - 1, growth >> 10, limit >> 10, bad, corrupt, twice);
  int fail = 0;
  fail |= tu_fail_if(bad != 0, "a run's block lost its pattern");
  fail |= tu_fail_if(corrupt != 0, "a block of the mixed round lost its pattern");
  fail |= tu_fail_if(twice != 0, "an address was handed out twice");
  fail |= tu_fail_if(growth > limit, why);
  if (!fail) printf("PASS\n");
  return fail;
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "rekind") == 0)
    return runs_within(rekind_sizes, NREKIND, false, REKIND_GROWTH_MAX, 19000,
                       "a run no free slab fits took untouched pages while wholly free superslabs sat resident");
  if (argc > 1 && strcmp(argv[1], "pools") == 0)
    return runs_within(pools_sizes, NPOOLS, true, POOLS_GROWTH_MAX, 29000,
                       "one pool faulted fresh pages in while the other's free pages sat resident");
  /* The pointer array's own pages (8 MiB), resident before the first
   * reading: the 64-byte run alone would touch 2 MiB of it. */
  for (size_t i = 0; i < NMAX; i++) blk[i] = &blk[i];
  int bad = 0;
  size_t growth = tu_runs_growth(sizes, NSIZES, RUN_BYTES, blk, &bad, false);
  printf("growth over %u runs: %zu KiB (at most %zu)\n", NSIZES - 1, growth >> 10, GROWTH_MAX >> 10);

  int bad_small = tu_run_filled(blk, (unsigned)(RUN_BYTES / 100000), 100000, (uint64_t)100 << 32);
  bad_small += tu_run_filled(blk, (unsigned)(RUN_BYTES / 16), 16, (uint64_t)101 << 32);

  int corrupt, twice;
  tu_sizes_at_once(sizes, NSIZES, 40, 9000, &corrupt, &twice);
  printf("runs' blocks bad %d; 16-byte run after 100 000-byte run bad %d; mixed blocks corrupt %d, handed out "
         "twice %d\n",
         bad, bad_small, corrupt, twice);

  int fail = 0;
  fail |= tu_fail_if(bad != 0, "a run's block lost its pattern");
  fail |= tu_fail_if(bad_small != 0, "a 16-byte block after the big run lost its pattern");
  fail |= tu_fail_if(corrupt != 0, "a block of the mixed round lost its pattern");
  fail |= tu_fail_if(twice != 0, "an address was handed out twice");
  fail |= tu_fail_if(growth > GROWTH_MAX, "a run of another slab size took untouched pages while freed ones sat resident");
  if (!fail) printf("PASS\n");
  return fail;
}
