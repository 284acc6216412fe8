/*
 * test_young.c — a young heap serves the small classes from the powers of
 * two above them (heap.c, heap_young_pick; HAKMEM_YOUNG_REFILLS), so a
 * thread holding a few blocks of many sizes touches a page for each of 6
 * classes, not each of 20 (issue 19: memory bounded by the program, not by
 * its thread count).
 *
 *   test_young PART [off]    parts: classes threads
 *
 * classes: on a new thread, malloc(48) and malloc(300) get 64 and 512 B
 *   blocks (malloc_usable_size), malloc(64) its own class; after 200
 *   refills (4 KiB blocks, one per refill) the heap has grown up and
 *   malloc(48) and malloc(300) get 48 and 320 B blocks. The young blocks
 *   keep their patterns through it and are freed after it; 64 blocks of
 *   48 B allocated then are distinct and none is a young block still held.
 *   With "off" (run with HAKMEM_YOUNG_REFILLS=0) malloc(48) gets 48 B
 *   from the first call.
 * threads: 64 threads each allocate 50 blocks of 16..512 B, write them
 *   whole and wait at a barrier; the process's RSS growth per thread, read
 *   there, must stay under YOUNG_KIB_PER_THREAD (what a thread's stack,
 *   its heap and its blocks' pages take: 53 KiB measured; 91 with every
 *   class on its own slab, the bound sitting between). With "off" it must
 *   be above it: the test tells the two apart.
 */
#define _GNU_SOURCE
#include "check.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define YOUNG_KIB_PER_THREAD 70
#define NTHREADS 64
#define NBLOCKS 50

static int off;

static long rss_kib(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  CHECK(f != NULL, "open /proc/self/statm");
  CHECK(fscanf(f, "%ld %ld", &pages, &res) == 2, "read /proc/self/statm");
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *classes(void *arg)
{
  (void)arg;
  unsigned char *a = malloc(48), *b = malloc(300), *c = malloc(64);
  CHECK(a && b && c, "malloc");
  size_t ua = malloc_usable_size(a), ub = malloc_usable_size(b), uc = malloc_usable_size(c);
  printf("young: malloc(48) %zu B, malloc(300) %zu B, malloc(64) %zu B\n", ua, ub, uc);
  if (off) {
    CHECK(ua == 48 && ub == 320, "HAKMEM_YOUNG_REFILLS=0: 48 and 320 B blocks, got %zu and %zu", ua, ub);
  } else {
    CHECK(ua == 64 && ub == 512, "a young heap serves 48 and 300 B from 64 and 512 B blocks, got %zu and %zu", ua, ub);
  }
  CHECK(uc == 64, "malloc(64): %zu B", uc);
  memset(a, 0xa1, 48);
  memset(b, 0xb2, 300);
  static void *grown[200];
  for (unsigned i = 0; i < 200; i++) CHECK((grown[i] = malloc(4096)) != NULL, "malloc(4096)");
  for (unsigned i = 0; i < 200; i++) free(grown[i]);
  unsigned char *d = malloc(48), *e = malloc(300);
  CHECK(d && e, "malloc");
  printf("grown up: malloc(48) %zu B, malloc(300) %zu B\n", malloc_usable_size(d), malloc_usable_size(e));
  CHECK(malloc_usable_size(d) == 48 && malloc_usable_size(e) == 320, "grown up: 48 and 320 B blocks, got %zu and %zu",
        malloc_usable_size(d), malloc_usable_size(e));
  for (size_t i = 0; i < 48; i++) CHECK(a[i] == 0xa1, "young block of 48 B: byte %zu overwritten", i);
  for (size_t i = 0; i < 300; i++) CHECK(b[i] == 0xb2, "young block of 300 B: byte %zu overwritten", i);
  void *more[64];
  for (unsigned i = 0; i < 64; i++) {
    more[i] = malloc(48);
    CHECK(more[i] != NULL && more[i] != (void *)a && more[i] != (void *)b && more[i] != (void *)c &&
              more[i] != (void *)d && more[i] != (void *)e,
          "malloc(48) #%u handed out a block still held", i);
    for (unsigned j = 0; j < i; j++) CHECK(more[j] != more[i], "malloc(48) #%u and #%u: the same block", j, i);
  }
  for (unsigned i = 0; i < 64; i++) free(more[i]);
  free(a);
  free(b);
  free(c);
  free(d);
  free(e);
  return NULL;
}

static pthread_barrier_t at_peak, done;

static void *holder(void *arg)
{
  uint64_t s = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  void *p[NBLOCKS];
  for (unsigned i = 0; i < NBLOCKS; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t sz = 16 + (size_t)(s % 497);
    p[i] = malloc(sz);
    CHECK(p[i] != NULL, "malloc(%zu)", sz);
    memset(p[i], (int)i, sz);
  }
  pthread_barrier_wait(&at_peak);
  pthread_barrier_wait(&done);
  for (unsigned i = 0; i < NBLOCKS; i++) free(p[i]);
  return NULL;
}

static void threads(void)
{
  /* One thread first: the thread library's own first-time set-up is not
   * counted against the 64. */
  pthread_t t;
  CHECK(pthread_barrier_init(&at_peak, NULL, 2) == 0 && pthread_barrier_init(&done, NULL, 2) == 0, "barrier");
  CHECK(pthread_create(&t, NULL, holder, (void *)(uintptr_t)999) == 0, "pthread_create");
  pthread_barrier_wait(&at_peak);
  pthread_barrier_wait(&done);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&at_peak);
  pthread_barrier_destroy(&done);

  CHECK(pthread_barrier_init(&at_peak, NULL, NTHREADS + 1) == 0, "barrier");
  CHECK(pthread_barrier_init(&done, NULL, NTHREADS + 1) == 0, "barrier");
  pthread_t th[NTHREADS];
  long before = rss_kib();
  for (uintptr_t i = 0; i < NTHREADS; i++)
    CHECK(pthread_create(&th[i], NULL, holder, (void *)i) == 0, "pthread_create");
  pthread_barrier_wait(&at_peak);
  long peak = rss_kib();
  pthread_barrier_wait(&done);
  for (unsigned i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  double per = (double)(peak - before) / NTHREADS;
  printf("threads: RSS %ld -> %ld KiB with %d threads of %d blocks of 16..512 B: %.1f KiB per thread (bound %d)%s\n",
         before, peak, NTHREADS, NBLOCKS, per, YOUNG_KIB_PER_THREAD, off ? ", young heaps off" : "");
  if (off)
    CHECK(per > YOUNG_KIB_PER_THREAD, "HAKMEM_YOUNG_REFILLS=0: %.1f KiB per thread, expected above %d", per,
          YOUNG_KIB_PER_THREAD);
  else
    CHECK(per <= YOUNG_KIB_PER_THREAD, "%.1f KiB per thread, bound %d", per, YOUNG_KIB_PER_THREAD);
}

int main(int argc, char **argv)
{
  CHECK(argc >= 2, "usage: test_young classes|threads [off]");
  off = argc > 2 && strcmp(argv[2], "off") == 0;
  if (strcmp(argv[1], "classes") == 0) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, classes, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
  } else if (strcmp(argv[1], "threads") == 0) {
    threads();
  } else {
    CHECK(0, "unknown part %s", argv[1]);
  }
  return 0;
}
