/*
 * test_handover.c — a thread that stopped allocating gives its full
 * superslabs to the abandoned list while other threads free into them, and
 * the working threads reuse what came back (issues 18, 19: heap_purge.c,
 * heap_collect_idle's hand-over; stats.superslabs_handed_over).
 *
 * 1. The main thread writes 48 MiB of 256-byte blocks (one class: its
 *    slabs fill one after another and all but the last few are marked
 *    full), starts two workers and waits for them: its heap goes idle.
 * 2. Each worker frees nine of every ten blocks of its half, checking
 *    them. Every slab keeps a tenth of its blocks live, so none comes back
 *    whole and the collector's release of whole slabs frees nothing.
 * 3. The workers wait (at most 5 s) until stats.superslabs_handed_over
 *    says at least eight of the main thread's superslabs (11 measured)
 *    were handed over. Not the first hand-over: the collector's first
 *    look at a thread blocked in the kernel comes when its delayed list
 *    passes the wake mark, while the workers still free, and hands over
 *    only the superslabs with blocks on the list then (3 measured); the
 *    rest go at the next look, a gap later.
 * 4. They write as many 256-byte blocks again. RSS grows by less than half
 *    of the 43 MiB they write: they adopt the superslabs handed over and
 *    fill the blocks that came back, where the library before (which
 *    kept them with the sleeping thread) took fresh pages for all of it.
 * 5. The main thread frees the blocks it kept (now in slabs of the workers
 *    or abandoned: remote frees, or it takes a superslab back) while the
 *    workers check and free theirs.
 * Every block reads back its pattern; every figure is printed.
 *
 * `test_handover rare`: step 1 also keeps, live to the end, a few blocks
 * of eight other classes (320..1024 bytes), which used to keep the main
 * thread's superslabs from the hand-over (heap.h, HEAP_WAIT_TICKS): class
 * k takes its first slab at a tenth of the way times k, half fills it, and
 * at 85 % fills it up and takes a second. Each first slab then waits, not
 * full, in its own superslab: the library before this handed over 3 of
 * the main thread's 13 superslabs, and step 4's RSS grew by 35 of the 43
 * MiB it wrote. Now a slab that waited HEAP_WAIT_TICKS of the thread's
 * refills is marked full, and at least eight superslabs must be handed
 * over (9 measured).
 *
 * Under ThreadSanitizer (test_handover_hak_tsan) the workers wait 300 ms
 * instead of polling, and nothing is measured: a statistics snapshot reads
 * the slabs' counts racily by design (stats.c), which the sanitizer would
 * report against the collector's writes, and its shadow memory is most of
 * RSS. What it checks is the hand-over against the frees around it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define BSZ 256
#define NBLK ((48 * MiB) / BSZ)
#define WORKERS 2
#if defined(__SANITIZE_THREAD__)
#define MEASURE 0
#else
#define MEASURE 1
#endif

static void *blk[NBLK];
static void *fresh[NBLK];
static pthread_barrier_t freed_bar, filled_bar, go_bar;
static int bad;
static pthread_mutex_t bad_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t rss_before, rss_after, handed0, handed1;
static double waited_s;

/* How many superslabs the workers wait for, in both modes (a collection
 * may run while they still free, and find fewer: step 3). */
#define HANDED_NEED 8u
static int rare_mode;

#define RARE_K 8
static const size_t rare_size[RARE_K] = {320, 384, 448, 512, 640, 768, 896, 1024};
static void *rare[RARE_K][256];
static size_t rare_n[RARE_K];

/* The pattern key of rare block i of class k (past the keys of blk[] and
 * fresh[]). */
static uint64_t rare_key(unsigned k, size_t i) { return 3 * (uint64_t)NBLK + k * 256 + i; }

/* n more blocks of rare class k, each filled with its own key. */
static void rare_alloc(unsigned k, size_t n)
{
  tu_alloc_filled(&rare[k][rare_n[k]], (unsigned)n, rare_size[k], rare_key(k, rare_n[k]));
  rare_n[k] += n;
}

/* Step 1 of `rare`: the 256-byte blocks, and the rare classes' slabs as
 * the head comment says (a 64 KiB slab holds at most 65536 / size blocks;
 * 8 more than that at 85 % take a second slab whatever the header's
 * share). */
static void build_rare(void)
{
  for (size_t i = 0; i < NBLK; i++) {
    for (unsigned k = 0; k < RARE_K; k++) {
      size_t half = 65536 / rare_size[k] / 2;
      if (i == NBLK * k / 10) rare_alloc(k, half);
      if (i == NBLK * 85 / 100) rare_alloc(k, 65536 / rare_size[k] - half + 8);
    }
    tu_alloc_filled(&blk[i], 1, BSZ, i);
  }
}

/* The rare blocks' patterns, then free them; returns the damaged ones. */
static int rare_free(void)
{
  int b = 0;
  for (unsigned k = 0; k < RARE_K; k++)
    for (size_t i = 0; i < rare_n[k]; i++) {
      if (pat_check(rare[k][i], rare_size[k], rare_key(k, i)) != (size_t)-1) b++;
      free(rare[k][i]);
    }
  return b;
}

static size_t handed_over(void)
{
  if (!MEASURE) return 0;
  size_t v = 0, len = sizeof v;
  if (hak_ctl("stats.superslabs_handed_over", &v, &len, NULL, 0) != 0) {
    fprintf(stderr, "FAIL: hak_ctl could not read stats.superslabs_handed_over\n");
    exit(1);
  }
  return v;
}

static void add_bad(int n)
{
  pthread_mutex_lock(&bad_mu);
  bad += n;
  pthread_mutex_unlock(&bad_mu);
}

static void *worker(void *arg)
{
  size_t w = (size_t)arg, lo = NBLK * w / WORKERS, hi = NBLK * (w + 1) / WORKERS;
  int b = 0;
  for (size_t i = lo; i < hi; i++) {
    if (i % 10 == 0) continue;
    if (pat_check(blk[i], BSZ, i) != (size_t)-1) b++;
    free(blk[i]);
    blk[i] = NULL;
  }
  if (pthread_barrier_wait(&freed_bar) == PTHREAD_BARRIER_SERIAL_THREAD) {
    double t0 = tu_now_s();
    while (MEASURE ? handed_over() - handed0 < HANDED_NEED && tu_now_s() - t0 < 5.0 : tu_now_s() - t0 < 0.3) {
      struct timespec q = {0, 10 * 1000000L};
      nanosleep(&q, NULL);
    }
    waited_s = tu_now_s() - t0;
    handed1 = handed_over();
    if (MEASURE) rss_before = tu_rss_bytes();
  }
  pthread_barrier_wait(&freed_bar);
  for (size_t i = lo; i < hi; i++) {
    if (i % 10 == 0) continue;
    fresh[i] = malloc(BSZ);
    if (fresh[i] == NULL) {
      fprintf(stderr, "FAIL: malloc(%d) returned NULL\n", BSZ);
      exit(1);
    }
    pat_fill(fresh[i], BSZ, NBLK + i);
  }
  if (pthread_barrier_wait(&filled_bar) == PTHREAD_BARRIER_SERIAL_THREAD && MEASURE) rss_after = tu_rss_bytes();
  pthread_barrier_wait(&go_bar); /* the main thread frees its blocks meanwhile */
  for (size_t i = lo; i < hi; i++) {
    if (fresh[i] == NULL) continue;
    if (pat_check(fresh[i], BSZ, NBLK + i) != (size_t)-1) b++;
    free(fresh[i]);
  }
  add_bad(b);
  return NULL;
}

int main(int argc, char **argv)
{
  rare_mode = argc > 1 && strcmp(argv[1], "rare") == 0;
  if (rare_mode) {
    build_rare();
  } else
    tu_alloc_filled(blk, NBLK, BSZ, 0);
  handed0 = handed_over();
  pthread_barrier_init(&freed_bar, NULL, WORKERS);
  pthread_barrier_init(&filled_bar, NULL, WORKERS + 1);
  pthread_barrier_init(&go_bar, NULL, WORKERS + 1);
  pthread_t t[WORKERS];
  for (size_t w = 0; w < WORKERS; w++)
    if (pthread_create(&t[w], NULL, worker, (void *)w) != 0) {
      fprintf(stderr, "FAIL: pthread_create\n");
      return 1;
    }
  /* Idle until the workers have written their blocks. */
  pthread_barrier_wait(&filled_bar);
  pthread_barrier_wait(&go_bar);
  int b = 0;
  for (size_t i = 0; i < NBLK; i += 10) {
    if (pat_check(blk[i], BSZ, i) != (size_t)-1) b++;
    free(blk[i]);
  }
  if (rare_mode) b += rare_free();
  add_bad(b);
  for (size_t w = 0; w < WORKERS; w++) pthread_join(t[w], NULL);

  size_t wrote = (NBLK - NBLK / 10) * (size_t)BSZ;
  if (!MEASURE) {
    printf("ThreadSanitizer build: the workers waited %.0f ms, nothing measured; %d blocks damaged\n",
           waited_s * 1e3, bad);
    return tu_fail_if(bad != 0, "a block lost its pattern");
  }
  long grew = (long)rss_after - (long)rss_before;
  printf("main wrote %zu MiB; the workers freed nine blocks in ten; %zu superslabs handed over after %.0f ms\n",
         (NBLK * (size_t)BSZ) / MiB, handed1 - handed0, waited_s * 1e3);
  printf("the workers wrote %zu MiB again: RSS %zu -> %zu KiB (grew %ld KiB, limit %zu); %d blocks damaged\n",
         wrote / MiB, rss_before >> 10, rss_after >> 10, grew / 1024, (wrote / 2) >> 10, bad);
  int fail = 0;
  fail |= tu_fail_if(handed1 - handed0 < HANDED_NEED,
                     rare_mode ? "slabs of the rare classes kept most superslabs from the hand-over"
                               : "the idle thread's superslabs were not handed over within 5 s");
  fail |= tu_fail_if(grew > (long)(wrote / 2), "the workers took fresh pages instead of the blocks that came back");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  return fail;
}
