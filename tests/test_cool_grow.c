/*
 * test_cool_grow.c — a heap about to take fresh pages first gives back the
 * whole free pages of classes it no longer allocates (issue 18: free blocks
 * in slabs in use; heap_purge.c's heap_cool_grow, called by heap.c before
 * a new superslab).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=400 and HAKMEM_BACKGROUND_THREAD=0: the
 * ordinary pass gives such pages back only after 400 ms of idleness, which
 * the growth below never waits for; growing, after a quarter of that.
 * 1. 40 MiB of 512-byte blocks are written; 63 in 64 are freed (in address
 *    order of allocation), which leaves almost every page of those slabs
 *    free and resident.
 * 2. After 120 ms, 20000 blocks of 64 B are allocated and freed (refills:
 *    the owner's pass sees the 512-byte slabs idle), then 120 ms more.
 * 3. 40 MiB of 2000-byte blocks are written (a phase of another size: new
 *    superslabs). RSS may grow by less than 24 MiB; without the give-back
 *    on growth it grows by the whole 40 MiB.
 * Every block left from phase 1 and every new block reads back its
 * pattern. Every figure is printed, on success too.
 *
 * `test_cool_grow active`: no naps, and phase 3 goes on allocating the old
 * size too (one 512-byte block per 8 big ones, kept): the class stays
 * active, so its partial list's head stays warm for it, but the slabs past
 * the first HEAP_COOL_GROW_KEEP (256 KiB) of free blocks give their free
 * pages back when the heap grows (bench_peak_mem's case). The same bound;
 * before that, +40 MiB here too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define SMALL 512
#define NSMALL ((40 * MiB) / SMALL)
#define BIG 2000
#define NBIG ((40 * MiB) / BIG)

static void *small[NSMALL];
static void *big[NBIG];
static void *more[NBIG / 8 + 1];

static void nap_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *get(size_t n)
{
  void *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "FAIL: malloc(%zu) returned NULL\n", n);
    exit(1);
  }
  return p;
}

int main(int argc, char **argv)
{
  int active = argc > 1 && strcmp(argv[1], "active") == 0;
  for (size_t i = 0; i < NSMALL; i++) {
    small[i] = get(SMALL);
    pat_fill(small[i], SMALL, i);
  }
  for (size_t i = 0; i < NSMALL; i++)
    if (i % 64 != 0) {
      free(small[i]);
      small[i] = NULL;
    }
  if (!active) {
    nap_ms(120);
    static void *tiny[20000];
    for (size_t i = 0; i < 20000; i++) tiny[i] = get(64);
    for (size_t i = 0; i < 20000; i++) free(tiny[i]);
    nap_ms(120);
  }

  size_t r0 = tu_rss_bytes();
  for (size_t i = 0; i < NBIG; i++) {
    big[i] = get(BIG);
    pat_fill(big[i], BIG, 1000000 + i);
    if (active && i % 8 == 0) {
      more[i / 8] = get(SMALL);
      pat_fill(more[i / 8], SMALL, 2000000 + i);
    }
  }
  size_t r1 = tu_rss_bytes();
  int bad = 0;
  for (size_t i = 0; i < NSMALL; i++)
    if (small[i] != NULL && pat_check(small[i], SMALL, i) != (size_t)-1) bad++;
  for (size_t i = 0; i < NBIG; i++)
    if (pat_check(big[i], BIG, 1000000 + i) != (size_t)-1) bad++;
  for (size_t i = 0; active && i < NBIG; i += 8)
    if (pat_check(more[i / 8], SMALL, 2000000 + i) != (size_t)-1) bad++;
  size_t grew = r1 > r0 ? r1 - r0 : 0, limit = 24 * MiB;
  printf("%s: 40 MiB of %d B blocks, 63 in 64 freed; then 40 MiB of %d B blocks: RSS %zu -> %zu MiB "
         "(+%zu MiB, limit %zu); %d blocks damaged\n",
         active ? "active" : "quiet", SMALL, BIG, r0 / MiB, r1 / MiB, grew / MiB, limit / MiB, bad);
  int fail = 0;
  fail |= tu_fail_if(grew >= limit, "the new phase took fresh pages while the old one's free pages stayed resident");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  for (size_t i = 0; i < NSMALL; i++) free(small[i]);
  for (size_t i = 0; i < NBIG; i++) free(big[i]);
  for (size_t i = 0; active && i < NBIG; i += 8) free(more[i / 8]);
  return fail;
}
