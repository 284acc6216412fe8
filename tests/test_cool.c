/*
 * test_cool.c — free blocks give their pages back while their slab stays
 * in use (large classes block by block, smaller ones as whole free pages) (issue 18: page-level decommit inside slabs in
 * use; heap_purge.c's heap_cool, a slab's cold list).
 *
 *   test_cool PART    parts: collect step refill content runs pages quiet
 *
 * Run with HAKMEM_PURGE_DELAY_MS=50 and HAKMEM_BACKGROUND_THREAD=0 (nothing
 * but the owner thread may touch the free lists). Each part allocates 24
 * blocks of 896 KiB (three to a 4 MiB slab) and writes every page, then
 * frees two of every three: each slab keeps one live block, so no slab
 * becomes free and only the cold lists can give the 14 MiB back.
 * collect   hak_collect(0) right away gives back nothing (the blocks have
 *           not been free a purge delay); after the delay, two more (the
 *           first pass tags the blocks, the next one a delay later finds
 *           them still free) must bring RSS down by at least half of the
 *           freed bytes; hak_collect(1) gives the rest at once.
 * step      the same blocks go back within 40 ms (three hak_collect(0)
 *           20 ms apart): the tags count quarter delays.
 * refill    no hak_collect: the thread keeps allocating small blocks (a few
 *           refills every 5 ms, what runs the pass) for up to 5 s; RSS must
 *           fall by at least half of the freed bytes.
 * content   after a forced collection, the cooled blocks come back (the
 *           class's next allocations) intact as blocks: written whole and
 *           read back, calloc of them reads zero, and the live blocks kept
 *           their contents throughout.
 * runs      smaller blocks (512 B, 64 KiB slabs): 24 MiB written, then 31
 *           of every 32 freed, so every slab keeps a live block and sits on
 *           its heap's partial list. hak_collect(0) at once gives back
 *           nothing; after two purge delays (one pass sees the slabs on the
 *           list, the next cools them) the whole pages of the runs of free
 *           blocks must have gone back, at least half of the freed bytes;
 *           then every freed block is handed out again (the class's next
 *           allocations: no block twice, each written whole and read back,
 *           calloc of them zero) and the live blocks kept their contents.
 * pages     as runs, with one block in 16 kept: each run of free blocks
 *           (15 of 512 B, 7.5 KiB, after a live block at the start of
 *           every other page) covers exactly one whole page past its first
 *           block (53 % of the freed bytes), which must go back too: at
 *           least a third of the freed bytes (a rule of two pages gave
 *           back none).
 * quiet     the current slabs of classes that go quiet: 100 blocks of each
 *           of four sizes in 512 KiB slabs (3-6 KiB), written, then all but
 *           the first of each freed, so each class's current slab holds 99
 *           free blocks and is on no list. After two purge delays with
 *           hak_collect(0), at least half of the freed bytes went back; the
 *           classes then allocate again, intact.
 * Every figure is printed, on success too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define NBLK 24
#define BSZ ((size_t)896 << 10)
#define MiB ((size_t)1 << 20)

static void *blk[NBLK];

static void sleep_ms(unsigned ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double mib(size_t x) { return (double)x / MiB; }

static void fill(void *p, size_t n, unsigned char v) { memset(p, v, n); }

static int check_fill(const unsigned char *p, size_t n, unsigned char v)
{
  for (size_t i = 0; i < n; i += 512)
    if (p[i] != v) return 0;
  return p[n - 1] == v;
}

/* Two purge delays with hak_collect(0) after each (the first pass sees
 * what is idle, the one a delay later gives it back): RSS must have come
 * down from base by at least half of freed. Returns the RSS after. */
static size_t after_two_delays_want(const char *part, size_t base, size_t want, const char *what)
{
  sleep_ms(120);
  hak_collect(0);
  sleep_ms(120);
  hak_collect(0);
  size_t r1 = tu_rss_bytes();
  printf("%s: after two purge delays and hak_collect(0): RSS %.1f -> %.1f MiB (%+.1f MiB, want <= -%.1f)\n", part,
         mib(base), mib(r1), mib(r1) - mib(base), mib(want));
  CHECK(base > r1 && base - r1 >= want, "%s: %s: RSS %.1f -> %.1f MiB", part, what, mib(base), mib(r1));
  return r1;
}

static size_t after_two_delays(const char *part, size_t base, size_t freed, const char *what)
{
  return after_two_delays_want(part, base, freed / 2, what);
}

/* Allocate and write the blocks, free two of every three; returns the RSS
 * right after the frees. */
static size_t setup(size_t *freed)
{
  for (int i = 0; i < NBLK; i++) {
    blk[i] = malloc(BSZ);
    CHECK(blk[i] != NULL, "malloc(%zu)", BSZ);
    fill(blk[i], BSZ, (unsigned char)(i + 1));
  }
  size_t before = tu_rss_bytes();
  *freed = 0;
  for (int i = 0; i < NBLK; i++)
    if (i % 3 != 0) {
      free(blk[i]);
      blk[i] = NULL;
      *freed += BSZ;
    }
  size_t after = tu_rss_bytes();
  printf("setup: %d blocks of %zu KiB written, %zu MiB freed (one live block per slab); RSS %.1f -> %.1f MiB\n",
         NBLK, BSZ >> 10, *freed >> 20, mib(before), mib(after));
  CHECK(after + *freed / 2 > before, "RSS fell by more than half the freed bytes at the frees themselves");
  return after;
}

static void check_live(void)
{
  for (int i = 0; i < NBLK; i += 3)
    CHECK(check_fill(blk[i], BSZ, (unsigned char)(i + 1)), "live block %d lost its contents", i);
}

static void part_collect(void)
{
  size_t freed, base = setup(&freed);
  hak_collect(0);
  size_t r0 = tu_rss_bytes();
  printf("collect: hak_collect(0) at once: RSS %.1f MiB\n", mib(r0));
  CHECK(r0 + freed / 2 > base, "hak_collect(0) gave back blocks freed less than a purge delay ago");
  after_two_delays("collect", base, freed, "free blocks of slabs in use kept their pages");
  check_live();
  hak_collect(1);
  printf("collect: hak_collect(1): RSS %.1f MiB\n", mib(tu_rss_bytes()));
  check_live();
}

/* The big blocks' tags count steps of the cooling (a quarter of the
 * purge delay), not whole delays: three hak_collect(0) 20 ms apart, 40 ms
 * in all with a 50 ms delay (the first pass that tags may be the second
 * call, if a refill's pass ran less than a step before the first), give
 * back at least half of the freed bytes. A loaded machine that sleeps
 * longer only makes it easier. */
static void part_step(void)
{
  size_t freed, base = setup(&freed);
  hak_collect(0);
  sleep_ms(20);
  hak_collect(0);
  sleep_ms(20);
  hak_collect(0);
  size_t r1 = tu_rss_bytes();
  printf("step: three hak_collect(0) 20 ms apart: RSS %.1f -> %.1f MiB (%+.1f MiB, want <= -%.1f)\n", mib(base),
         mib(r1), mib(r1) - mib(base), mib(freed / 2));
  CHECK(base > r1 && base - r1 >= freed / 2, "step: big free blocks kept their pages for 40 ms: RSS %.1f -> %.1f MiB",
        mib(base), mib(r1));
  check_live();
}

static void part_refill(void)
{
  size_t freed, base = setup(&freed);
  enum { KEEP = 20000 };
  static void *keep[KEEP];
  size_t nk = 0, r = base;
  double waited = 0;
  for (int round = 0; round < 1000; round++) {
    /* a few carve refills of a small class: what runs the pass */
    for (int k = 0; k < 20 && nk < KEEP; k++) {
      keep[nk] = malloc(100);
      CHECK(keep[nk] != NULL, "malloc(100)");
      nk++;
    }
    sleep_ms(5);
    waited += 5;
    r = tu_rss_bytes();
    if (base > r && base - r >= freed / 2) break;
  }
  printf("refill: RSS %.1f -> %.1f MiB after %.0f ms of small allocations (%zu blocks kept; want >= %.1f MiB back)\n",
         mib(base), mib(r), waited, nk, mib(freed / 2));
  CHECK(base > r && base - r >= freed / 2, "the refills never gave back the free blocks' pages: RSS %.1f -> %.1f MiB",
        mib(base), mib(r));
  check_live();
  for (size_t i = 0; i < nk; i++) free(keep[i]);
}

/* Every NULL slot's block comes back: allocate one of sz for each (calloc
 * for every other one, which must read zero), write it whole with its own
 * pattern, then read them all back (a block handed out twice would hold
 * the later pattern). again gets them; returns how many. */
static int hand_out_again(void *const *slot, int nslots, size_t sz, void **again, unsigned char seed)
{
  int n = 0;
  for (int i = 0; i < nslots; i++)
    if (slot[i] == NULL) {
      again[n] = (n & 1) ? calloc(1, sz) : malloc(sz);
      CHECK(again[n] != NULL, "allocation %d", n);
      if (n & 1) CHECK(check_fill(again[n], sz, 0), "calloc of a cooled block is not zero");
      fill(again[n], sz, (unsigned char)(seed + n));
      n++;
    }
  for (int i = 0; i < n; i++)
    CHECK(check_fill(again[i], sz, (unsigned char)(seed + i)), "reused block %d lost what was written (given twice?)",
          i);
  return n;
}

static void part_content(void)
{
  size_t freed;
  setup(&freed);
  hak_collect(1); /* every free block of the class goes cold */
  size_t r0 = tu_rss_bytes();
  void *again[NBLK];
  int n = hand_out_again(blk, NBLK, BSZ, again, 0x80);
  check_live();
  printf("content: %d cooled blocks handed out again (RSS %.1f -> %.1f MiB), written and read back; calloc zero\n", n,
         mib(r0), mib(tu_rss_bytes()));
  for (int i = 0; i < n; i++) free(again[i]);
}

/* runs and pages: 512 B blocks, one in keep kept live. */
static void runs_case(const char *part, int keep, unsigned want_div)
{
  enum { RN = 48 * 1024 };
  const size_t rsz = 512;
  static void *r[RN];
  for (int i = 0; i < RN; i++) {
    r[i] = malloc(rsz);
    CHECK(r[i] != NULL, "malloc(%zu)", rsz);
    fill(r[i], rsz, (unsigned char)i);
  }
  size_t before = tu_rss_bytes(), freed = 0;
  for (int i = 0; i < RN; i++)
    if (i % keep != 0) {
      free(r[i]);
      r[i] = NULL;
      freed += rsz;
    }
  size_t base = tu_rss_bytes();
  /* Nothing allocated before hak_collect: stdout's buffer would be a heap
   * growth, whose pass marks these slabs idle (heap_cool_grow), and a
   * test slowed past the purge delay would then see them cooled. */
  hak_collect(0);
  size_t r0 = tu_rss_bytes();
  printf("%s: %d blocks of %zu B written, %.1f MiB freed (one in %d kept); RSS %.1f -> %.1f MiB\n", part, RN, rsz,
         mib(freed), keep, mib(before), mib(base));
  printf("%s: hak_collect(0) at once: RSS %.1f MiB\n", part, mib(r0));
  CHECK(r0 + freed / 4 > base, "%s: hak_collect(0) gave back the pages of slabs freed into less than a purge delay ago", part);
  after_two_delays_want(part, base, freed / want_div, "the free pages of partial slabs stayed resident");
  for (int i = 0; i < RN; i += keep)
    CHECK(check_fill(r[i], rsz, (unsigned char)i), "live block %d lost its contents", i);
  /* Every freed block comes back, once: the class's next allocations are
   * the free and cold blocks of its slabs before any fresh one. */
  static void *again[RN];
  int n = hand_out_again(r, RN, rsz, again, 0x55);
  for (int i = 0; i < RN; i += keep)
    CHECK(check_fill(r[i], rsz, (unsigned char)i), "live block %d lost its contents", i);
  printf("%s: %d freed blocks handed out again, written and read back (RSS %.1f MiB)\n", part, n, mib(tu_rss_bytes()));
  for (int i = 0; i < n; i++) free(again[i]);
  for (int i = 0; i < RN; i += keep) free(r[i]);
}

static void part_runs(void) { runs_case("runs", 32, 2); }
static void part_pages(void) { runs_case("pages", 16, 3); }

static void part_quiet(void)
{
  static const size_t qsz[] = {3000, 3500, 5000, 6000};
  enum { QN = 100, QS = sizeof qsz / sizeof qsz[0] };
  static unsigned char *q[QS][QN];
  size_t freed = 0;
  for (int k = 0; k < QS; k++)
    for (int i = 0; i < QN; i++) {
      q[k][i] = malloc(qsz[k]);
      CHECK(q[k][i] != NULL, "malloc(%zu)", qsz[k]);
      fill(q[k][i], qsz[k], (unsigned char)(k * 16 + i));
    }
  for (int k = 0; k < QS; k++)
    for (int i = 1; i < QN; i++) {
      free(q[k][i]);
      q[k][i] = NULL;
      freed += qsz[k];
    }
  printf("quiet: %.2f MiB freed in the current slabs of %d classes\n", mib(freed), (int)QS);
  after_two_delays("quiet", tu_rss_bytes(), freed, "the free pages of quiet classes' current slabs stayed resident");
  for (int k = 0; k < QS; k++) {
    CHECK(check_fill(q[k][0], qsz[k], (unsigned char)(k * 16)), "live block of class %d lost its contents", k);
    for (int i = 1; i < QN; i++) {
      q[k][i] = malloc(qsz[k]);
      CHECK(q[k][i] != NULL, "malloc(%zu) again", qsz[k]);
      fill(q[k][i], qsz[k], (unsigned char)(0xa0 ^ i));
    }
    for (int i = 1; i < QN; i++)
      CHECK(check_fill(q[k][i], qsz[k], (unsigned char)(0xa0 ^ i)), "block %d of class %d lost what was written", i, k);
    for (int i = 0; i < QN; i++) free(q[k][i]);
  }
  printf("quiet: the classes allocated %d blocks each again, written and read back\n", QN - 1);
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "";
  void *w = malloc(100); /* start-up state in the baseline */
  free(w);
  if (!strcmp(part, "collect"))
    part_collect();
  else if (!strcmp(part, "refill"))
    part_refill();
  else if (!strcmp(part, "content"))
    part_content();
  else if (!strcmp(part, "runs"))
    part_runs();
  else if (!strcmp(part, "pages"))
    part_pages();
  else if (!strcmp(part, "quiet"))
    part_quiet();
  else if (!strcmp(part, "step"))
    part_step();
  else
    CHECK(0, "unknown part '%s' (collect step refill content runs pages quiet)", part);
  printf("test_cool %s: passed\n", part);
  return 0;
}
