/*
 * test_borrow.c — a medium or big class with no free block takes one of a
 * larger class's free blocks before it touches fresh pages (issue 18:
 * each class's high-water mark; heap.c's heap_borrow,
 * HAKMEM_BORROW_CLASSES).
 *
 *   test_borrow PART [off]    parts: medium big
 *
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0
 * (nothing cools while the test looks). N blocks of the lender's size
 * (one class above the borrower's) are allocated and written, all within
 * the first slab of that class, and all but the last are freed: the
 * lender's current slab holds N-1 free blocks, resident. Then N-1 blocks
 * of the borrower's size, a class this thread never used, are allocated
 * and written whole.
 * By default every one of them must be one of the freed blocks (usable
 * size the lender's), and RSS must grow by less than a third of what
 * N-1 fresh blocks would add. With "off" (run with
 * HAKMEM_BORROW_CLASSES=0) none may be: the option turns it off, and the
 * test can tell the two apart.
 * Then an aligned allocation whose alignment the lender's blocks do not
 * all have (32 KiB from the 40 KiB class) must come back aligned, while
 * plain mallocs of that size borrow the unaligned blocks too; every
 * block reads back its pattern, no address is handed out twice, and
 * another thread frees the borrowed blocks (a remote free into the
 * lender's slab) while this one allocates them again.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define N 16
#define KiB ((size_t)1 << 10)

static void *lend[N], *got[N];
static size_t borrower_size;

static void *free_got(void *arg)
{
  (void)arg;
  for (unsigned i = 0; i + 1 < N; i++) free(got[i]);
  return NULL;
}

static int intact(size_t lender_size)
{
  int bad = 0;
  if (pat_check_range(lend[N - 1], 0, lender_size, N - 1) != (size_t)-1) bad++;
  for (unsigned i = 0; i + 1 < N; i++)
    if (pat_check_range(got[i], 0, borrower_size, 100 + i) != (size_t)-1) bad++;
  return bad;
}

/* 40 KiB blocks start on 8 KiB multiples: most are not 32 KiB-aligned.
 * With seven of them free (the list's head at 240 KiB, not aligned),
 * posix_memalign(32 KiB, 32 KiB) must come back aligned; then, with the
 * 32 KiB class's blocks all live, plain mallocs of 32 KiB borrow the
 * 40 KiB blocks (usable size 40 KiB), aligned or not: only an aligned
 * allocation holds a borrowed block to an alignment. Returns the failures. */
static int aligned_ok(int off)
{
  void *keep[8], *a[8], *m[7];
  int misaligned = 0;
  unsigned borrowed = 0, odd = 0;
  for (unsigned i = 0; i < 8; i++) keep[i] = malloc(40 * KiB);
  for (unsigned i = 0; i + 1 < 8; i++) free(keep[i]);
  for (unsigned i = 0; i < 8; i++) {
    if (posix_memalign(&a[i], 32 * KiB, 32 * KiB) != 0 || ((uintptr_t)a[i] & (32 * KiB - 1)) != 0) {
      misaligned++;
      a[i] = NULL;
    } else {
      memset(a[i], 0x5a, 32 * KiB);
    }
  }
  for (unsigned i = 0; i < 7; i++) {
    m[i] = malloc(32 * KiB);
    if (m[i] == NULL) return 1;
    memset(m[i], 0xa5, 32 * KiB);
    if (malloc_usable_size(m[i]) == 40 * KiB) {
      borrowed++;
      if ((uintptr_t)m[i] & (32 * KiB - 1)) odd++;
    }
  }
  printf("aligned: %d of 8 posix_memalign(32 KiB, 32 KiB) misaligned or failed; %u of 7 mallocs of "
         "32 KiB borrowed 40 KiB blocks, %u of them not 32 KiB-aligned\n",
         misaligned, borrowed, odd);
  int fail = 0;
  if (misaligned != 0) {
    fprintf(stderr, "FAIL: an aligned allocation came back misaligned\n");
    fail = 1;
  }
  if (!off && (borrowed != 7 || odd == 0)) {
    fprintf(stderr, "FAIL: plain mallocs did not borrow the larger class's blocks, unaligned ones too\n");
    fail = 1;
  }
  if (off && borrowed != 0) {
    fprintf(stderr, "FAIL: a plain malloc borrowed with HAKMEM_BORROW_CLASSES=0\n");
    fail = 1;
  }
  for (unsigned i = 0; i < 8; i++) free(a[i]);
  for (unsigned i = 0; i < 7; i++) free(m[i]);
  free(keep[7]);
  return fail;
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "medium";
  int off = argc > 2 && strcmp(argv[2], "off") == 0;
  size_t lender_size;
  if (strcmp(part, "medium") == 0) {
    borrower_size = 20 * KiB; /* class 20 KiB; 24 KiB the next; 21 to a 512 KiB slab */
    lender_size = 24 * KiB;
  } else if (strcmp(part, "big") == 0) {
    borrower_size = 80 * KiB; /* the first big class; 96 KiB the next; 42 to a 4 MiB slab */
    lender_size = 96 * KiB;
  } else {
    fprintf(stderr, "usage: test_borrow medium|big [off]\n");
    return 2;
  }
  tu_alloc_filled(lend, N, lender_size, 0);
  for (unsigned i = 0; i + 1 < N; i++) free(lend[i]);

  /* The first read faults in the C library's pages it runs on (about
   * 256 KiB): read once before the figure that counts. */
  (void)tu_rss_bytes();
  size_t r0 = tu_rss_bytes();
  unsigned borrowed = 0, twice = 0;
  for (unsigned i = 0; i + 1 < N; i++) {
    got[i] = malloc(borrower_size);
    if (got[i] == NULL) {
      fprintf(stderr, "FAIL: malloc(%zu) returned NULL\n", borrower_size);
      return 1;
    }
    pat_fill_range(got[i], 0, borrower_size, 100 + i);
    for (unsigned j = 0; j + 1 < N; j++)
      if (got[i] == lend[j] && malloc_usable_size(got[i]) == lender_size) borrowed++;
    if (got[i] == lend[N - 1]) twice++;
    for (unsigned j = 0; j < i; j++)
      if (got[i] == got[j]) twice++;
  }
  size_t r1 = tu_rss_bytes();
  size_t grew = r1 > r0 ? r1 - r0 : 0, limit = (size_t)(N - 1) * borrower_size / 3;
  int bad = intact(lender_size);
  printf("%s%s: %u of %u blocks of %zu KiB borrowed from the %zu KiB class; RSS %zu -> %zu KiB "
         "(+%zu KiB, limit %zu); %u handed out twice, %d blocks damaged\n",
         part, off ? " (off)" : "", borrowed, N - 1, borrower_size / KiB, lender_size / KiB, r0 / KiB,
         r1 / KiB, grew / KiB, limit / KiB, twice, bad);
  int fail = 0;
  if (!off && (borrowed != N - 1 || grew >= limit)) {
    fprintf(stderr, "FAIL: the new blocks did not all reuse the larger class's free ones\n");
    fail = 1;
  }
  if (off && borrowed != 0) {
    fprintf(stderr, "FAIL: a block was borrowed with HAKMEM_BORROW_CLASSES=0\n");
    fail = 1;
  }
  if (twice != 0 || bad != 0) {
    fprintf(stderr, "FAIL: a block was handed out twice or damaged\n");
    fail = 1;
  }
  if (aligned_ok(off) != 0) fail = 1;

  /* The borrowed blocks go home from another thread while this one
   * allocates the borrower's size again. */
  pthread_t t;
  if (pthread_create(&t, NULL, free_got, NULL) != 0) {
    fprintf(stderr, "FAIL: the freeing thread did not start\n");
    return 1;
  }
  void *again[N];
  tu_alloc_filled(again, N, borrower_size, 200);
  pthread_join(t, NULL);
  for (unsigned i = 0; i < N; i++) {
    if (pat_check_range(again[i], 0, borrower_size, 200 + i) != (size_t)-1) {
      fprintf(stderr, "FAIL: a block allocated during the remote frees was damaged\n");
      fail = 1;
    }
    for (unsigned j = 0; j < i; j++)
      if (again[i] == again[j]) {
        fprintf(stderr, "FAIL: a block was handed out twice during the remote frees\n");
        fail = 1;
      }
    free(again[i]);
  }
  free(lend[N - 1]);
  return fail;
}
