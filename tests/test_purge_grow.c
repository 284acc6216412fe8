/*
 * test_purge_grow.c [WAIT_MS] — a heap about to map a new superslab first
 * decommits the free slabs of every other heap (issue 18: free slabs;
 * heap_purge.c's heap_purge_grow, called by heap.c before a new
 * superslab).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=400 and HAKMEM_BACKGROUND_THREAD=0: by
 * time alone nothing goes back while the test looks.
 * 1. A thread writes 8 MiB of 1 KiB blocks and frees them all: its heap
 *    holds 8 MiB of free slabs, resident. It stays alive (blocked), so
 *    nobody adopts them, and it makes no call that would purge them.
 * 2. After WAIT_MS (default 150) the main thread (whose heap mapped its
 *    first superslab 150 ms before step 1) writes 8 MiB of 1 KiB
 *    blocks: its heap has no superslab and maps new ones. RSS may grow by
 *    less than 4 MiB; before f5c6653, by the whole 8 MiB. With WAIT_MS 0
 *    the other heap's slabs are not a quarter of the delay old, which
 *    the allocator until 428e750 waited for.
 * The statistics count what the growth gave back: stats.grow_purged_bytes
 * at least 4 MiB (unless a loaded machine stretched the test near the
 * purge delay, when the time purge may come first), and never more than
 * stats.decayed_bytes, of which it is a part. Every new block reads back its pattern. Every figure is printed,
 * on success too.
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
static double freed_ms; /* when the owner's 8 MiB became free slabs */

static double now_ms(void) { return tu_now_s() * 1e3; }

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
  freed_ms = now_ms();
  stage = 1;
  pthread_cond_broadcast(&cv);
  while (stage != 2) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(int argc, char **argv)
{
  long wait_ms = argc > 1 ? atol(argv[1]) : 150;
  /* This thread's heap maps its first superslab now, and may purge at its
   * next growth only a quarter of the delay later: that is over before
   * the other thread frees. */
  pthread_t t;
  void *first = tu_heap_then_thread(150, &t, owner);
  pthread_mutex_lock(&mu);
  while (stage != 1) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
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
  /* How long the other heap's slabs had been free when the growth was
   * over: past the purge delay (400 ms; a machine so loaded that the
   * sleep overran), the time purge may have taken them first. */
  double idle_ms = now_ms() - freed_ms;
  /* The growth gave the other heap's slabs back early: counted apart as
   * grow bytes, and always as part of the decayed bytes. */
  size_t grow_b = 0, decayed_b = 0, len = sizeof grow_b;
  int ctl_rc = hak_ctl("stats.grow_purged_bytes", &grow_b, &len, NULL, 0);
  len = sizeof decayed_b;
  ctl_rc |= hak_ctl("stats.decayed_bytes", &decayed_b, &len, NULL, 0);
  int bad = 0;
  for (size_t i = 0; i < NBLK; i++)
    if (pat_check(blk[i], BSZ, i) != (size_t)-1) bad++;
  pthread_mutex_lock(&mu);
  stage = 2;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);

  size_t grew = r1 > r0 ? r1 - r0 : 0, limit = 4 * MiB;
  printf("another thread's 8 MiB of free slabs idle %ld ms; 8 MiB written here: RSS %zu -> %zu KiB "
         "(+%zu KiB, limit %zu); %d blocks damaged\n",
         wait_ms, r0 >> 10, r1 >> 10, grew >> 10, limit >> 10, bad);
  printf("statistics: grow_purged %zu KiB of decayed %zu KiB (the other heap's slabs free for %.0f ms)\n",
         grow_b >> 10, decayed_b >> 10, idle_ms);
  int fail = 0;
  fail |= tu_fail_if(ctl_rc != 0, "hak_ctl could not read stats.grow_purged_bytes or stats.decayed_bytes");
  if (idle_ms < 350)
    fail |= tu_fail_if(grow_b < 4 * MiB, "the early purge of the growth was not counted in stats.grow_purged_bytes");
  else
    printf("the growth ended %.0f ms after the frees, near the 400 ms delay: its count is not checked\n", idle_ms);
  fail |= tu_fail_if(grow_b > decayed_b, "stats.grow_purged_bytes exceeds stats.decayed_bytes, of which it is a part");
  fail |= tu_fail_if(grew >= limit, "new superslabs were mapped while the other heap's idle free slabs stayed resident");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  for (size_t i = 0; i < NBLK; i++) free(blk[i]);
  free(first);
  return fail;
}
