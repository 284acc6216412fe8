/*
 * test_arena_mid.c — blocks of 64 KiB..1 MiB come from the coalescing
 * arenas (HAKMEM_ARENA_MIN, alloc.c; large.c's groups), so that a freed
 * block of one size serves the next of another (issue 18). CTest runs it
 * with HAKMEM_ARENA_MIN=64K, so that every block of the range does; with
 * the default (128K) the blocks up to 128 KiB come from the classes, and
 * the figures (printed) were 1.24x and 1.65x.
 *
 *   test_arena_mid PART    parts: one threads lend
 *
 * one      one thread, 64 slots, 12 000 steps: a random slot's block is
 *          freed if it has one, else a block of 64 KiB + 1 .. 1 MiB
 *          (log-uniform) is allocated and every page of it written. Each
 *          block's pages are checked before its free. The resident growth
 *          must stay within LIMIT_ONE times the largest live total (the
 *          arenas: 1.18 times): the size classes' slabs, where a class's
 *          free blocks serve that class only, held 1.65 times it
 *          (HAKMEM_ARENA_MIN=1M; the figure is printed either way). And a 200 KiB block is an arena
 *          span less its header (a multiple of 64 KiB less 64 B usable),
 *          not a 224 KiB size class.
 * threads  four threads do the same with 32 slots each, and every 8th
 *          step swaps a block with one of 16 shared slots, so that blocks
 *          are freed by other threads than their own (and by other CPUs'
 *          arena groups): every page of every block must hold its pattern
 *          at its free, and the growth stay within LIMIT_THREADS times the
 *          largest live total (the arenas: 1.41; the slabs: 2.58).
 * lend     a thread's freed 512 KiB block, warm in its CPU group's arena,
 *          serves the next thread's malloc of the same size although that
 *          thread takes the other group (large.c, large_borrow_warm: the
 *          same address, where before it mapped an arena of its own and
 *          faulted fresh pages in); written whole, freed by the borrower,
 *          it serves a third malloc again. A calloc does not borrow: a
 *          cold span needs no clearing. Needs two CPUs (one group each),
 *          else it says so and passes.
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0, so
 * that nothing goes back by time: the growth is what the allocator kept.
 * Every figure is printed, on success too.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <sched.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)
#define MIN_SIZE (64 * KiB + 1)
#define MAX_SIZE MiB
#define LIMIT_ONE 1.45
#define LIMIT_THREADS 2.0
#define SHARED 16

/* A block: its size and key in its first words, then a word per page. */
static void fill(unsigned char *p, size_t n, uint64_t key)
{
  memcpy(p, &n, sizeof n);
  memcpy(p + 8, &key, sizeof key);
  for (size_t i = PAGE; i + 8 < n; i += PAGE) memcpy(p + i, &(uint64_t){pat_word(key, i)}, 8);
  p[n - 1] = (unsigned char)key;
}

/* 0 if p holds its pattern; its size in *n. */
static int check(const unsigned char *p, size_t *n)
{
  uint64_t key;
  memcpy(n, p, sizeof *n);
  memcpy(&key, p + 8, sizeof key);
  if (*n < MIN_SIZE || *n > MAX_SIZE) return 1;
  for (size_t i = PAGE; i + 8 < *n; i += PAGE) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    if (w != pat_word(key, i)) return 1;
  }
  return p[*n - 1] != (unsigned char)key;
}

static _Atomic size_t live_bytes, live_max, rss_max;
static _Atomic int damaged;
static void *shared[SHARED];

static void note_max(_Atomic size_t *m, size_t v)
{
  size_t old = atomic_load(m);
  while (v > old && !atomic_compare_exchange_weak(m, &old, v)) {
  }
}

static void drop(unsigned char *p)
{
  size_t n;
  if (check(p, &n)) {
    atomic_fetch_add(&damaged, 1);
    n = 0;
  }
  atomic_fetch_sub(&live_bytes, n);
  free(p);
}

typedef struct {
  unsigned slots, steps, id;
  int swap;
} run_t;

static void *run(void *arg)
{
  const run_t *r = arg;
  unsigned char *slot[64] = {0};
  rng_t g;
  rng_seed(&g, 0x5eed0000u + r->id);
  for (unsigned s = 0; s < r->steps; s++) {
    unsigned i = (unsigned)rng_below(&g, r->slots);
    if (r->swap && s % 8 == 7 && slot[i] != NULL) {
      slot[i] = __atomic_exchange_n((unsigned char **)&shared[rng_below(&g, SHARED)], slot[i], __ATOMIC_ACQ_REL);
      continue;
    }
    if (slot[i] != NULL) {
      drop(slot[i]);
      slot[i] = NULL;
      continue;
    }
    size_t n = rng_logsize(&g, MIN_SIZE, MAX_SIZE);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc of a block of 64 KiB..1 MiB failed");
    fill(p, n, rng_next(&g));
    note_max(&live_max, atomic_fetch_add(&live_bytes, n) + n);
    slot[i] = p;
    if (s % 16 == 0) note_max(&rss_max, tu_rss_bytes());
  }
  for (unsigned i = 0; i < r->slots; i++)
    if (slot[i] != NULL) drop(slot[i]);
  return NULL;
}

static int verdict(const char *part, size_t base, double limit)
{
  double grew = (double)(atomic_load(&rss_max) - base), live = (double)atomic_load(&live_max);
  printf("%s: resident growth %.1f MiB for a live peak of %.1f MiB: %.2fx (limit %.2fx); %d blocks damaged\n",
         part, grew / MiB, live / MiB, grew / live, limit, atomic_load(&damaged));
  return tu_fail_if(atomic_load(&damaged) != 0, "a block lost its pattern") |
         tu_fail_if(grew > limit * live, "the freed blocks did not serve the next sizes");
}

#define LEND_SIZE (512 * KiB)
static unsigned char *lent[3];

/* A block of LEND_SIZE written whole and freed: its address. A new
 * thread's first large block takes the next arena group. */
static unsigned char *lend_cycle(unsigned char fill)
{
  unsigned char *p = malloc(LEND_SIZE);
  CHECK(p != NULL, "malloc");
  memset(p, fill, LEND_SIZE);
  free(p);
  return p;
}

static void *lend_a(void *arg)
{
  (void)arg;
  lent[0] = lend_cycle(0xa5);
  return NULL;
}

static void *lend_b(void *arg)
{
  (void)arg;
  lent[1] = lend_cycle(0x5a);
  unsigned char *z = calloc(1, LEND_SIZE);
  CHECK(z != NULL, "calloc");
  bool zero = true;
  for (size_t i = 0; i < LEND_SIZE; i += 4096) zero &= z[i] == 0 && z[i + 4095] == 0;
  lent[2] = zero ? z : NULL;
  free(z);
  return NULL;
}

static int lend(void)
{
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < cpus) cpus = CPU_COUNT(&set);
  if (cpus < 2) {
    printf("lend: %ld CPU, one arena group: nothing to borrow from (passes)\n", cpus);
    return 0;
  }
  pthread_t t;
  CHECK(pthread_create(&t, NULL, lend_a, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(pthread_create(&t, NULL, lend_b, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  unsigned char *again = lend_cycle(0x3c);
  printf("lend: first %p, other group's malloc %p, its calloc %p, then %p\n", (void *)lent[0], (void *)lent[1],
         (void *)lent[2], (void *)again);
  return tu_fail_if(lent[1] != lent[0], "the other group's malloc did not take the warm span") |
         tu_fail_if(lent[2] == NULL, "calloc's block did not read as zero") |
         tu_fail_if(lent[2] == lent[0], "calloc borrowed a warm span it must clear");
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "one";
  size_t base = tu_rss_bytes();
  atomic_store(&rss_max, base);
  int bad = 0;
  if (strcmp(part, "one") == 0) {
    const char *min = getenv("HAKMEM_ARENA_MIN");
    void *q = malloc(200 * KiB);
    size_t u = malloc_usable_size(q);
    free(q);
    printf("one: a block of 200 KiB has %zu usable bytes (HAKMEM_ARENA_MIN %s)\n", u, min ? min : "unset");
    bool arena = min == NULL || (strcmp(min, "1M") != 0 && strcmp(min, "1048576") != 0);
    if (arena) bad |= tu_fail_if((u + 64) % (64 * KiB) != 0, "a 200 KiB block is not an arena span");
    run_t r = {64, 12000, 1, 0};
    run(&r);
    bad |= verdict(part, base, LIMIT_ONE);
  } else if (strcmp(part, "threads") == 0) {
    pthread_t t[4];
    run_t r[4];
    for (unsigned k = 0; k < 4; k++) {
      r[k] = (run_t){32, 6000, k + 1, 1};
      CHECK(pthread_create(&t[k], NULL, run, &r[k]) == 0, "pthread_create");
    }
    for (unsigned k = 0; k < 4; k++) pthread_join(t[k], NULL);
    for (unsigned i = 0; i < SHARED; i++)
      if (shared[i] != NULL) drop(shared[i]);
    bad |= verdict(part, base, LIMIT_THREADS);
  } else if (strcmp(part, "lend") == 0) {
    bad |= lend();
  } else {
    fprintf(stderr, "usage: test_arena_mid one|threads|lend\n");
    return 2;
  }
  return bad;
}
