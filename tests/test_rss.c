/*
 * test_rss.c — memory is reused and returned: resident set size stays
 * bounded under churn that would leak gigabytes if freed memory were lost
 * (single thread, cross-thread frees, thread exit), hak_collect(1) gives
 * freed large memory back to the OS, and calloc leaves memory the kernel
 * zeroed unwritten. Linked against libhakmem.so.
 *
 *   test_rss [--scale=N]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define MiB ((size_t)1024 * 1024)

static unsigned scale = 1;

/* 1. single thread: allocate ~48 MiB in mixed sizes, touch, free; repeat */
static void single_thread(size_t base)
{
  rng_t r;
  rng_seed(&r, 1);
  enum { N = 20000 };
  static void *p[N];
  size_t peak = 0;
  for (unsigned round = 0; round < 30 * scale; round++) {
    size_t total = 0;
    int n = 0;
    while (total < 48 * MiB && n < N) {
      size_t sz = rng_below(&r, 100) < 97 ? rng_logsize(&r, 1, 16384) : rng_logsize(&r, 16385, 2 * MiB);
      p[n] = malloc(sz);
      CHECK(p[n] != NULL, "malloc(%zu)", sz);
      memset(p[n], 1, sz);
      total += sz;
      n++;
    }
    size_t now = tu_rss_bytes();
    if (now > peak) peak = now;
    for (int i = 0; i < n; i++) free(p[(round & 1) ? i : n - 1 - i]);
  }
  size_t grow = peak > base ? peak - base : 0;
  printf("single thread: peak RSS %.1f MiB over baseline (48 MiB live per round)\n", (double)grow / MiB);
  CHECK(grow < 160 * MiB, "single-thread churn: RSS grew by %zu MiB with 48 MiB live: freed memory not reused",
        grow / MiB);
}

/* 2. producer/consumer: blocks freed by another thread must be reused */
#define RING 4096
static void *ring[RING];
static volatile size_t ring_head, ring_tail;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *consumer(void *arg)
{
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (ring_head == ring_tail && !done) pthread_cond_wait(&cv, &mu);
    if (ring_head == ring_tail && done) { pthread_mutex_unlock(&mu); break; }
    void *p = ring[ring_tail % RING];
    ring_tail++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    free(p);
  }
  return NULL;
}

static void cross_thread(size_t base)
{
  pthread_t t;
  CHECK(pthread_create(&t, NULL, consumer, NULL) == 0, "pthread_create");
  rng_t r;
  rng_seed(&r, 2);
  size_t total = 0, peak = 0;
  for (unsigned long i = 0; i < 400000ul * scale; i++) {
    size_t sz = rng_logsize(&r, 16, 8192);
    void *p = malloc(sz);
    CHECK(p != NULL, "malloc");
    memset(p, 2, sz);
    total += sz;
    pthread_mutex_lock(&mu);
    while (ring_head - ring_tail >= RING) pthread_cond_wait(&cv, &mu);
    ring[ring_head % RING] = p;
    ring_head++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if ((i & 4095) == 0) {
      size_t now = tu_rss_bytes();
      if (now > peak) peak = now;
    }
  }
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);
  size_t grow = peak > base ? peak - base : 0;
  printf("cross-thread: %.0f MiB passed through, peak RSS %.1f MiB over baseline\n", (double)total / MiB,
         (double)grow / MiB);
  CHECK(grow < 128 * MiB, "cross-thread frees: RSS grew by %zu MiB (%zu MiB allocated, <= ~16 MiB live): "
        "remotely freed memory not reused", grow / MiB, total / MiB);
}

/* 3. thread exit: each thread allocates ~1 MiB of small blocks, frees them, exits */
static void *short_thread(void *arg)
{
  rng_t r;
  rng_seed(&r, (uint64_t)(uintptr_t)arg);
  void *p[512];
  for (int k = 0; k < 4; k++) {
    for (int i = 0; i < 512; i++) {
      size_t sz = rng_logsize(&r, 16, 1024);
      p[i] = malloc(sz);
      CHECK(p[i] != NULL, "malloc");
      memset(p[i], 3, sz);
    }
    for (int i = 0; i < 512; i++) free(p[i]);
  }
  /* leave a few blocks for the main thread to free after we exit */
  void **keep = malloc(4 * sizeof(void *));
  CHECK(keep != NULL, "malloc");
  for (int i = 0; i < 4; i++) { keep[i] = malloc(100); CHECK(keep[i] != NULL, "malloc"); }
  return keep;
}

static void thread_exit(size_t base)
{
  unsigned n = 1500 * scale;
  size_t peak = 0;
  for (unsigned i = 0; i < n; i += 4) {
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
      CHECK(pthread_create(&t[k], NULL, short_thread, (void *)(uintptr_t)(i + (unsigned)k + 1)) == 0, "pthread_create");
    for (int k = 0; k < 4; k++) {
      void **keep;
      pthread_join(t[k], (void **)&keep);
      for (int j = 0; j < 4; j++) free(keep[j]);
      free(keep);
    }
    if ((i & 63) == 0) {
      size_t now = tu_rss_bytes();
      if (now > peak) peak = now;
    }
  }
  size_t grow = peak > base ? peak - base : 0;
  printf("thread exit: %u threads, peak RSS %.1f MiB over baseline\n", n, (double)grow / MiB);
  CHECK(grow < 128 * MiB, "thread churn: RSS grew by %zu MiB over %u exited threads: heaps of dead threads leak",
        grow / MiB, n);
}

/* 4. hak_collect(1) returns freed large memory */
static void collect(void)
{
  enum { N = 64 };
  void *p[N];
  for (int i = 0; i < N; i++) {
    size_t sz = (size_t)(1 + i % 4) * MiB + 4096 * (size_t)i;
    p[i] = malloc(sz);
    CHECK(p[i] != NULL, "malloc(%zu)", sz);
    memset(p[i], 4, sz);
  }
  size_t full = tu_rss_bytes();
  for (int i = 0; i < N; i++) free(p[i]);
  hak_collect(1);
  size_t after = tu_rss_bytes();
  printf("collect: RSS %.1f MiB with 160 MiB live, %.1f MiB after free + hak_collect(1)\n", (double)full / MiB,
         (double)after / MiB);
  CHECK(full - after > 100 * MiB || after < full / 3,
        "hak_collect(1) after freeing 160 MiB of large blocks: RSS went from %zu MiB only to %zu MiB",
        full / MiB, after / MiB);
}

/* 5. calloc of memory the kernel zeroed does not write it: a program that
 * callocs big tables and touches a little of each holds only what it
 * touched (as with glibc, whose big callocs are fresh mappings). Every
 * byte reads zero, fresh or reused. */
static int all_zero(const unsigned char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return 0;
  return 1;
}

static void calloc_fresh(void)
{
  static const size_t sizes[] = {20000, 300000, 1000000};
  enum { N = 32, NS = sizeof sizes / sizeof sizes[0] };
  static unsigned char *p[NS][N];
  size_t asked = 0;
  hak_collect(1);
  size_t base = tu_rss_bytes();
  for (int k = 0; k < NS; k++)
    for (int i = 0; i < N; i++) {
      p[k][i] = calloc(1, sizes[k]);
      CHECK(p[k][i] != NULL, "calloc(1, %zu)", sizes[k]);
      CHECK(all_zero(p[k][i], sizes[k]), "calloc(1, %zu) #%d: not all zero", sizes[k], i);
      p[k][i][sizes[k] / 2] = 1;
      asked += sizes[k];
    }
  size_t grew = tu_rss_bytes() - base;
  printf("calloc_fresh: %.1f MiB asked, one byte of each block touched: RSS +%.1f MiB\n", (double)asked / MiB,
         (double)grew / MiB);
  CHECK(grew < asked / 4, "calloc of %zu MiB, one byte touched per block: RSS grew %zu MiB (calloc wrote fresh memory)",
        asked / MiB, grew / MiB);
  for (int k = 0; k < NS; k++)
    for (int i = 0; i < N; i++) {
      memset(p[k][i], 0xa5, sizes[k]);
      free(p[k][i]);
    }
  for (int k = 0; k < NS; k++)
    for (int i = 0; i < N; i++) {
      p[k][i] = calloc(sizes[k], 1);
      CHECK(p[k][i] != NULL, "calloc(%zu, 1)", sizes[k]);
      CHECK(all_zero(p[k][i], sizes[k]), "calloc(%zu, 1) #%d of reused memory: not all zero", sizes[k], i);
    }
  for (int k = 0; k < NS; k++)
    for (int i = 0; i < N; i++) free(p[k][i]);
}

int main(int argc, char **argv)
{
  scale = (unsigned)test_param(argc, argv, "scale", "HAKMEM_TEST_SCALE", 1);
  if (scale < 1) scale = 1;
  void *probe = malloc(16);
  CHECK(OWNS(probe), "malloc is not hakmem's");
  free(probe);
  hak_collect(1);
  size_t base = tu_rss_bytes();
  printf("test_rss: baseline RSS %.1f MiB\n", (double)base / MiB);
  single_thread(base);
  hak_collect(1);
  base = tu_rss_bytes();
  cross_thread(base);
  hak_collect(1);
  base = tu_rss_bytes();
  thread_exit(base);
  collect();
  calloc_fresh();
  printf("test_rss: passed\n");
  return 0;
}
