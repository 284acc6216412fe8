/*
 * test_purge_cold.c — a thread that faults in untouched slabs of a
 * superslab it already has first decommits the free slabs of a thread
 * asleep (issue 18: free slabs; heap.c's heap_grow_turn for a cold slab,
 * heap_purge_grow with idle_only).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=3000: by time alone nothing goes back
 * while the test looks (the idle gap is an eighth of it, 375 ms).
 * 0. The main thread maps (and never touches) a 16 MiB block: with that
 *    much mapped, the next superslab starts the purge thread, whose idle
 *    collector the test needs (decay.c, DECAY_BG_MAPPED_BYTES).
 * 1. A worker W mallocs one 1 KiB block: its heap maps a superslab, most
 *    of whose slabs it has not touched. It waits.
 * 2. The main thread M mallocs a few blocks of two small classes (their
 *    slabs stay M's current ones, in its first superslab, which keeps that
 *    superslab from going to the abandoned list whole), then 3 MiB of 1
 *    KiB blocks, all in that superslab, and joins a thread F that frees
 *    every one of them, checking its pattern. M is asleep from then on.
 * 3. F waits (at most 10 s) until the statistics show a heap holding 2
 *    MiB or more of free slabs (the idle collector found M's slabs empty),
 *    then two idle gaps more, so that the collector lends M's heap.
 * 4. W writes 2 MiB of 1 KiB blocks: slabs of its own superslab, no new
 *    one. Its growth must decommit at least 2 MiB of M's free slabs
 *    (stats.grow_purged_bytes), and the largest heap's free slabs must
 *    fall below 1 MiB. The library before this took only a new
 *    superslab as growth: nothing went back, and RSS grew by the 2 MiB.
 * Every block reads back its pattern; every figure is printed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define BSZ 1024
#define NM ((3 * MiB) / BSZ)
#define NW ((2 * MiB) / BSZ)
#define NSMALL 64

static void *mblk[NM], *small[2][NSMALL], *wblk[NW];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage, bad;
static size_t idle0, idle1, grow0, grow1, rss0, rss1;

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void set_stage(int s)
{
  pthread_mutex_lock(&mu);
  stage = s;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void wait_stage(int s)
{
  pthread_mutex_lock(&mu);
  while (stage < s) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}

static void *worker_w(void *arg)
{
  (void)arg;
  void *first = malloc(BSZ);
  if (first == NULL) {
    fprintf(stderr, "FAIL: malloc(%d) returned NULL\n", BSZ);
    exit(1);
  }
  set_stage(1);
  wait_stage(3);
  struct hak_stats st;
  tu_stats(&st);
  grow0 = st.grow_purged_bytes;
  rss0 = tu_rss_bytes();
  tu_alloc_filled(wblk, NW, BSZ, 1000000);
  rss1 = tu_rss_bytes();
  tu_stats(&st);
  grow1 = st.grow_purged_bytes;
  idle1 = st.heap_idle_max_bytes;
  for (size_t i = 0; i < NW; i++) {
    if (pat_check(wblk[i], BSZ, 1000000 + i) != (size_t)-1) bad++;
    free(wblk[i]);
  }
  free(first);
  return NULL;
}

static void *freer_f(void *arg)
{
  (void)arg;
  for (size_t i = 0; i < NM; i++) {
    if (pat_check(mblk[i], BSZ, i) != (size_t)-1) bad++;
    free(mblk[i]);
  }
  for (int c = 0; c < 2; c++)
    for (int i = 0; i < NSMALL; i++) free(small[c][i]);
  double t0 = tu_now_s();
  struct hak_stats st;
  for (;;) {
    tu_stats(&st);
    if (st.heap_idle_max_bytes >= 2 * MiB || tu_now_s() - t0 > 10) break;
    sleep_ms(20);
  }
  sleep_ms(2 * 375 + 50); /* two idle gaps: the collector lends M's heap */
  tu_stats(&st);
  idle0 = st.heap_idle_max_bytes;
  set_stage(3);
  return NULL;
}

int main(void)
{
  pthread_t w, f;
  void *big = malloc(16 * MiB);
  if (big == NULL) {
    fprintf(stderr, "FAIL: malloc(16 MiB) returned NULL\n");
    return 1;
  }
  if (pthread_create(&w, NULL, worker_w, NULL) != 0) {
    fprintf(stderr, "FAIL: pthread_create\n");
    return 1;
  }
  wait_stage(1);
  for (int i = 0; i < NSMALL; i++) {
    small[0][i] = malloc(16);
    small[1][i] = malloc(48);
    if (small[0][i] == NULL || small[1][i] == NULL) {
      fprintf(stderr, "FAIL: malloc returned NULL\n");
      return 1;
    }
  }
  tu_alloc_filled(mblk, NM, BSZ, 0);
  if (pthread_create(&f, NULL, freer_f, NULL) != 0) {
    fprintf(stderr, "FAIL: pthread_create\n");
    return 1;
  }
  pthread_join(f, NULL);
  pthread_join(w, NULL);
  free(big);

  size_t got = grow1 > grow0 ? grow1 - grow0 : 0;
  long drss = (long)(rss1 >> 10) - (long)(rss0 >> 10);
  printf("the sleeping thread's free slabs %zu KiB (largest heap's); the worker wrote 2 MiB in its own superslab: "
         "grow_purged +%zu KiB, largest heap's free slabs after %zu KiB, RSS %+ld KiB; %d blocks damaged\n",
         idle0 >> 10, got >> 10, idle1 >> 10, drss, bad);
  int fail = 0;
  fail |= tu_fail_if(idle0 < 2 * MiB, "the sleeping thread's heap did not hold 2 MiB of free slabs before the growth");
  fail |= tu_fail_if(got < 2 * MiB, "the growth in the worker's own superslab did not decommit the sleeping thread's free slabs");
  fail |= tu_fail_if(idle1 >= MiB, "a heap still held 1 MiB or more of free slabs after the growth");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  return fail;
}
