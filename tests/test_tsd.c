/*
 * test_tsd.c — thread-local destructors of other libraries that call
 * malloc/free at thread exit, before and after hakmem's own thread cleanup
 * (hakmem frees its per-thread heap from a pthread key destructor created at
 * its initialisation; glibc runs key destructors in key order, up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds).
 *
 *   key_early  created before hakmem's key (lower index: its destructor
 *              runs before hakmem's cleanup in each round). Only possible
 *              with the hak_ API build, where hakmem initialises at the
 *              first hak_ call; in the override build it is created as
 *              early as the program can (a constructor).
 *   key_late   created after the first malloc (higher index: runs after
 *              hakmem's cleanup). Re-arms itself in every round, so it
 *              also allocates in the last round, after hakmem has cleaned
 *              up the thread more than once.
 * Every destructor frees blocks the thread allocated, frees blocks other
 * threads allocated, allocates new blocks and hands some to the main
 * thread, which verifies and frees them. Thousands of threads: RSS bounded.
 *
 *   test_tsd [--threads=N] [--rounds=N] [--late-rounds=1..4]
 *   (--late-rounds: destructor rounds the late key re-arms for; 4, the
 *   default, allocates in glibc's last round)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)

static pthread_key_t key_early, key_late;
static int early_created_before_init;
static unsigned late_rounds = PTHREAD_DESTRUCTOR_ITERATIONS; /* --late-rounds */

#ifndef USE_HAK_API
/* as early as a program can: before main, before any malloc of ours */
__attribute__((constructor(101))) static void make_early_key(void);
#endif

typedef struct out {
  struct out *next;
  size_t n;
  uint64_t key;
} out_t;

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static out_t *out_head;
static atomic_ullong out_count, dtor_early_calls, dtor_late_calls, late_last_round_allocs;

static void hand_out(size_t n, uint64_t key)
{
  if (n < sizeof(out_t)) n = sizeof(out_t);
  out_t *o = malloc(n);
  CHECK(o != NULL, "malloc(%zu) in a key destructor", n);
  o->n = n;
  o->key = key;
  pat_fill((char *)o + sizeof *o, n - sizeof *o, key);
  pthread_mutex_lock(&out_mu);
  o->next = out_head;
  out_head = o;
  pthread_mutex_unlock(&out_mu);
  atomic_fetch_add(&out_count, 1);
}

typedef struct {
  unsigned round;
  uint64_t id;
  void *own[8];    /* allocated by the thread itself */
  size_t own_n[8];
  void *foreign;   /* allocated by the main thread */
  size_t foreign_n;
} tsd_t;

static void tsd_work(tsd_t *t, const char *who)
{
  for (int i = 0; i < 8; i++)
    if (t->own[i]) {
      size_t bad = pat_check(t->own[i], t->own_n[i], t->id * 8 + (uint64_t)i);
      CHECK(bad == (size_t)-1, "%s: thread's block %d damaged at %zu", who, i, bad);
      free(t->own[i]);
      t->own[i] = NULL;
    }
  if (t->foreign) {
    size_t bad = pat_check(t->foreign, t->foreign_n, ~t->id);
    CHECK(bad == (size_t)-1, "%s: main thread's block damaged at %zu", who, bad);
    free(t->foreign);
    t->foreign = NULL;
  }
  /* allocate, use, free and hand out, in several size classes */
  for (int i = 0; i < 16; i++) {
    size_t n = (size_t)24 << (i % 10);
    void *p = malloc(n);
    CHECK(p != NULL, "%s: malloc(%zu)", who, n);
    memset(p, i, n);
    void *q = realloc(p, n * 3);
    CHECK(q != NULL, "%s: realloc", who);
    free(q);
  }
  hand_out(64 + (t->id % 5000), t->id * 131 + t->round);
}

static void dtor_early(void *arg)
{
  tsd_t *t = arg;
  atomic_fetch_add(&dtor_early_calls, 1);
  tsd_work(t, "early key destructor");
  free(t);
}

static void dtor_late(void *arg)
{
  tsd_t *t = arg;
  atomic_fetch_add(&dtor_late_calls, 1);
  tsd_work(t, "late key destructor");
  t->round++;
  if (t->round < late_rounds) {
    /* run again in the next round (after hakmem's cleanup ran again) */
    for (int i = 0; i < 8; i++) {
      t->own_n[i] = (size_t)16 << i;
      t->own[i] = malloc(t->own_n[i]);
      CHECK(t->own[i] != NULL, "malloc in late destructor");
      pat_fill(t->own[i], t->own_n[i], t->id * 8 + (uint64_t)i);
    }
    CHECK(pthread_setspecific(key_late, t) == 0, "pthread_setspecific in a destructor");
  } else {
    atomic_fetch_add(&late_last_round_allocs, 1); /* the hand_out above was in the last round */
    free(t);
  }
}

static tsd_t *tsd_new(uint64_t id)
{
  tsd_t *t = calloc(1, sizeof *t);
  CHECK(t != NULL, "calloc");
  t->id = id;
  for (int i = 0; i < 8; i++) {
    t->own_n[i] = (size_t)40 << i;
    t->own[i] = malloc(t->own_n[i]);
    CHECK(t->own[i] != NULL, "malloc");
    pat_fill(t->own[i], t->own_n[i], id * 8 + (uint64_t)i);
  }
  return t;
}

static void *thread_fn(void *arg)
{
  tsd_t **slot = arg;
  tsd_t *te = tsd_new((uint64_t)(uintptr_t)slot[0]);
  tsd_t *tl = tsd_new((uint64_t)(uintptr_t)slot[0] + (1ull << 32));
  te->foreign = slot[1];
  te->foreign_n = 3000;
  tl->foreign = slot[2];
  tl->foreign_n = 3000;
  /* some ordinary work so the heap has partly used slabs */
  void *w[100];
  for (int i = 0; i < 100; i++) w[i] = malloc((size_t)(i * 53 % 4000) + 1);
  for (int i = 0; i < 100; i += 2) free(w[i]);
  /* the odd ones are freed by the main thread later */
  pthread_mutex_lock(&out_mu);
  for (int i = 1; i < 100; i += 2) {
    out_t *o = w[i];
    if ((size_t)(i * 53 % 4000) + 1 < sizeof(out_t)) { free(o); continue; }
    o->n = sizeof(out_t);
    o->key = 0;
    o->next = out_head;
    out_head = o;
    atomic_fetch_add(&out_count, 1);
  }
  pthread_mutex_unlock(&out_mu);
  CHECK(pthread_setspecific(key_early, te) == 0, "setspecific");
  CHECK(pthread_setspecific(key_late, tl) == 0, "setspecific");
  return NULL;
}

static unsigned long long drain(void)
{
  pthread_mutex_lock(&out_mu);
  out_t *h = out_head;
  out_head = NULL;
  pthread_mutex_unlock(&out_mu);
  unsigned long long n = 0;
  while (h) {
    out_t *nx = h->next;
    size_t bad = pat_check((char *)h + sizeof *h, h->n - sizeof *h, h->key);
    CHECK(h->key == 0 || bad == (size_t)-1, "block handed out by a destructor damaged at %zu", bad);
    free(h);
    n++;
    h = nx;
  }
  return n;
}

#ifndef USE_HAK_API
static void make_early_key(void)
{
  CHECK(pthread_key_create(&key_early, dtor_early) == 0, "pthread_key_create");
}
#endif

int main(int argc, char **argv)
{
  unsigned width = (unsigned)test_param(argc, argv, "threads", NULL, 8);
  unsigned rounds = (unsigned)test_param(argc, argv, "rounds", NULL, 250);
  late_rounds = (unsigned)test_param(argc, argv, "late-rounds", NULL, PTHREAD_DESTRUCTOR_ITERATIONS);
  if (late_rounds < 1 || late_rounds > PTHREAD_DESTRUCTOR_ITERATIONS) late_rounds = PTHREAD_DESTRUCTOR_ITERATIONS;
  if (width > 64) width = 64;
#ifdef USE_HAK_API
  /* nothing has called hak_ yet: this key precedes hakmem's */
  CHECK(pthread_key_create(&key_early, dtor_early) == 0, "pthread_key_create");
  early_created_before_init = 1;
  void *first = malloc(100); /* hakmem initialises: its key is created now */
  free(first);
#endif
  void *p = malloc(10);
  free(p);
  /* created after the first malloc: runs after hakmem's destructor */
  CHECK(pthread_key_create(&key_late, dtor_late) == 0, "pthread_key_create");
  printf("test_tsd [%s]: early key %u (%s), late key %u; %u x %u threads\n", TEST_API_NAME, (unsigned)key_early,
         early_created_before_init ? "before hakmem's" : "as early as possible", (unsigned)key_late, rounds, width);
  size_t rss0 = 0, peak = 0;
  unsigned long long freed = 0;
  for (unsigned r = 0; r < rounds; r++) {
    pthread_t th[64];
    void *slots[64][3];
    for (unsigned i = 0; i < width; i++) {
      slots[i][0] = (void *)(uintptr_t)(r * 64 + i + 1);
      for (int k = 1; k < 3; k++) {
        slots[i][k] = malloc(3000);
        CHECK(slots[i][k] != NULL, "malloc");
        uint64_t id = (uint64_t)(r * 64 + i + 1) + (k == 2 ? (1ull << 32) : 0);
        pat_fill(slots[i][k], 3000, ~id);
      }
      CHECK(pthread_create(&th[i], NULL, thread_fn, slots[i]) == 0, "pthread_create");
    }
    for (unsigned i = 0; i < width; i++) pthread_join(th[i], NULL);
    freed += drain();
    if (r == rounds / 10) rss0 = tu_rss_bytes();
    if (r > rounds / 10) {
      size_t now = tu_rss_bytes();
      if (now > peak) peak = now;
    }
  }
  unsigned long long threads = (unsigned long long)rounds * width;
  printf("test_tsd: %llu threads; early destructor ran %llu times, late %llu times (%llu last-round allocations); "
         "%llu blocks from destructors freed by main; RSS %.1f -> peak %.1f MiB\n",
         threads, (unsigned long long)dtor_early_calls, (unsigned long long)dtor_late_calls,
         (unsigned long long)late_last_round_allocs, freed, (double)rss0 / MiB, (double)peak / MiB);
  CHECK(dtor_early_calls == threads, "early destructor ran %llu times for %llu threads",
        (unsigned long long)dtor_early_calls, threads);
  CHECK(dtor_late_calls == threads * late_rounds, "late destructor ran %llu times, want %llu",
        (unsigned long long)dtor_late_calls, threads * late_rounds);
  CHECK(freed == out_count, "handed out %llu, freed %llu", (unsigned long long)out_count, freed);
  CHECK(peak < rss0 + 48 * MiB, "RSS grew from %.1f to %.1f MiB: heaps of exited threads (re-created by destructors) leak",
        (double)rss0 / MiB, (double)peak / MiB);
  return 0;
}
