/*
 * test_reuse_first.c — a class's free blocks are handed out before pages
 * not yet touched (issue 18: free blocks in slabs in use; heap.c's
 * heap_slab_refill, the switch to another slab of the class).
 *
 *   test_reuse_first PART    parts: local remote
 *
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0
 * (nothing goes back or cools while the test looks). Blocks of 16 KiB (32
 * to a 512 KiB slab, one carved per refill): NBLK are allocated and
 * written, which leaves the current slab partly carved and the slabs
 * before it exhausted. Then every other block of the first NFREE is freed,
 * so each of those slabs holds 16 free blocks, resident.
 * local   the owner thread frees them.
 * remote  another thread frees them and exits (its pending frees are
 *         published at exit).
 * Then NNEW blocks are allocated and written whole: at least 7 in 8 must
 * be blocks just freed, and RSS must grow by less than a third of what
 * NNEW fresh blocks would add. Before the switch the current slab was
 * carved to its end first: 24 fresh blocks (384 KiB), 40 of 64 reused.
 * Every block, old and new, then reads back its pattern, and no address
 * is handed out twice. Every figure is printed, on success too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define BSZ ((size_t)16 << 10)
#define NBLK 200
#define NFREE 128
#define NNEW (NFREE / 2)
#define KiB ((size_t)1 << 10)

static void *blk[NBLK];
static void *fresh[NNEW];

static void *free_others(void *arg)
{
  (void)arg;
  for (unsigned i = 0; i < NFREE; i += 2) free(blk[i]);
  return NULL;
}

static int live_intact(void)
{
  int bad = 0;
  for (unsigned i = 0; i < NBLK; i++)
    if (blk[i] != NULL && pat_check_range(blk[i], 0, BSZ, i) != (size_t)-1) bad++;
  for (unsigned i = 0; i < NNEW; i++)
    if (pat_check_range(fresh[i], 0, BSZ, 1000 + i) != (size_t)-1) bad++;
  return bad;
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "local";
  int remote = strcmp(part, "remote") == 0;
  if (!remote && strcmp(part, "local") != 0) {
    fprintf(stderr, "usage: test_reuse_first local|remote\n");
    return 2;
  }
  tu_alloc_filled(blk, NBLK, BSZ, 0);
  void *freed[NFREE / 2];
  for (unsigned i = 0; i < NFREE; i += 2) freed[i / 2] = blk[i];
  if (remote) {
    pthread_t t;
    if (pthread_create(&t, NULL, free_others, NULL) != 0 || pthread_join(t, NULL) != 0) {
      fprintf(stderr, "FAIL: the freeing thread did not run\n");
      return 1;
    }
  } else {
    free_others(NULL);
  }
  for (unsigned i = 0; i < NFREE; i += 2) blk[i] = NULL;

  size_t r0 = tu_rss_bytes();
  unsigned reused = 0, twice = 0;
  tu_alloc_filled(fresh, NNEW, BSZ, 1000);
  for (unsigned i = 0; i < NNEW; i++) {
    for (unsigned j = 0; j < NFREE / 2; j++)
      if (fresh[i] == freed[j]) reused++;
    for (unsigned j = 0; j < NBLK; j++)
      if (fresh[i] == blk[j]) twice++;
    for (unsigned j = 0; j < i; j++)
      if (fresh[i] == fresh[j]) twice++;
  }
  size_t r1 = tu_rss_bytes();
  size_t grew = r1 > r0 ? r1 - r0 : 0, limit = (size_t)NNEW * BSZ / 3;
  int bad = live_intact();
  printf("%s: %u of %u new blocks were freed ones; RSS %zu -> %zu KiB (+%zu KiB, limit %zu); "
         "%u handed out twice, %d blocks damaged\n",
         part, reused, NNEW, r0 / KiB, r1 / KiB, grew / KiB, limit / KiB, twice, bad);
  int fail = 0;
  if (reused < NNEW * 7 / 8) {
    fprintf(stderr, "FAIL: fewer than 7 in 8 of the new blocks reuse freed ones\n");
    fail = 1;
  }
  if (grew >= limit) {
    fprintf(stderr, "FAIL: RSS grew by a third of the new blocks or more\n");
    fail = 1;
  }
  if (twice != 0 || bad != 0) {
    fprintf(stderr, "FAIL: a block was handed out twice or damaged\n");
    fail = 1;
  }
  for (unsigned i = 0; i < NBLK; i++) free(blk[i]);
  for (unsigned i = 0; i < NNEW; i++) free(fresh[i]);
  return fail;
}
