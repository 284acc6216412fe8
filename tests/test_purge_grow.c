/*
 * test_purge_grow.c — a heap about to map a new superslab first decommits
 * the free slabs that every heap has left idle for a quarter of the purge
 * delay (issue 18: free slabs; heap_purge.c's heap_purge_grow, called by
 * heap.c before a new superslab).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=400 and HAKMEM_BACKGROUND_THREAD=0: by
 * time alone nothing goes back while the test looks.
 * 1. A thread writes 8 MiB of 1 KiB blocks and frees them all: its heap
 *    holds 8 MiB of free slabs, resident. It stays alive (blocked), so
 *    nobody adopts them, and it makes no call that would purge them.
 * 2. After 150 ms the main thread writes 8 MiB of 1 KiB blocks: its heap
 *    has no superslab and maps new ones. RSS may grow by less than 4 MiB;
 *    before, by the whole 8 MiB.
 * Every new block reads back its pattern. Every figure is printed, on
 * success too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define BSZ 1024
#define NBLK ((8 * MiB) / BSZ)

static void *blk[NBLK];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage;

static void *owner(void *arg)
{
  (void)arg;
  static void *mine[NBLK];
  for (size_t i = 0; i < NBLK; i++) {
    mine[i] = malloc(BSZ);
    if (mine[i] == NULL) {
      fprintf(stderr, "FAIL: malloc(%d) returned NULL\n", BSZ);
      exit(1);
    }
    memset(mine[i], 0x5a, BSZ);
  }
  for (size_t i = 0; i < NBLK; i++) free(mine[i]);
  pthread_mutex_lock(&mu);
  stage = 1;
  pthread_cond_broadcast(&cv);
  while (stage != 2) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(void)
{
  pthread_t t;
  if (pthread_create(&t, NULL, owner, NULL) != 0) {
    fprintf(stderr, "FAIL: pthread_create\n");
    return 1;
  }
  pthread_mutex_lock(&mu);
  while (stage != 1) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  struct timespec ts = {0, 150 * 1000000L};
  nanosleep(&ts, NULL);

  size_t r0 = tu_rss_bytes();
  for (size_t i = 0; i < NBLK; i++) {
    blk[i] = malloc(BSZ);
    if (blk[i] == NULL) {
      fprintf(stderr, "FAIL: malloc(%d) returned NULL\n", BSZ);
      return 1;
    }
    pat_fill(blk[i], BSZ, i);
  }
  size_t r1 = tu_rss_bytes();
  int bad = 0;
  for (size_t i = 0; i < NBLK; i++)
    if (pat_check(blk[i], BSZ, i) != (size_t)-1) bad++;
  pthread_mutex_lock(&mu);
  stage = 2;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);

  size_t grew = r1 > r0 ? r1 - r0 : 0, limit = 4 * MiB;
  printf("another thread's 8 MiB of free slabs idle 150 ms; 8 MiB written here: RSS %zu -> %zu KiB "
         "(+%zu KiB, limit %zu); %d blocks damaged\n",
         r0 >> 10, r1 >> 10, grew >> 10, limit >> 10, bad);
  int fail = 0;
  fail |= tu_fail_if(grew >= limit, "new superslabs were mapped while the other heap's idle free slabs stayed resident");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  for (size_t i = 0; i < NBLK; i++) free(blk[i]);
  return fail;
}
