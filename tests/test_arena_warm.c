/*
 * test_arena_warm.c — the arenas know which granules are resident (issue 18):
 *
 *   place:  a block fits both a decommitted hole of exactly its size and a
 *           bigger resident one; it goes to the resident one, so touching
 *           all of it faults nothing in (best fit alone took the cold hole:
 *           +8 MiB resident);
 *   calloc: a freed 4 MiB block coalesces with the never-touched rest of
 *           the arena; calloc of 24 MiB from that span zeroes only the 4 MiB
 *           that may be dirty (a flag per span zeroed all 24 MiB, faulting
 *           in 20 MiB the kernel hands out zeroed anyway). The block reads
 *           as zero throughout;
 *   window: a free span whose warm granules are not at its start: an 8 MiB
 *           block freed next to a decommitted one (cold, then warm), then
 *           between two decommitted ones (cold, warm, cold). A new 8 MiB
 *           block goes onto the warm granules, at the span's end and in its
 *           middle, and touching it faults nothing in (the span's start,
 *           where it went before, was 8 MiB of cold pages);
 *   age:    (its own run, HAKMEM_PURGE_DELAY_MS=50) a freed 4 MiB block
 *           whose free span keeps growing, a neighbour freed into it every
 *           20 ms, still goes back once idle: the span's time was its
 *           newest free, so it never came due (bench_large_churn kept
 *           12-21 MiB of such spans resident with a 1 ms delay). The block
 *           freed last is still resident.
 *
 * place, calloc and window run with a long HAKMEM_PURGE_DELAY_MS (CMake sets it) so
 * that no purge by time changes what is resident meanwhile. RSS bounds are
 * generous: half of what the mechanism saves. Linked against libhakmem.so;
 * no timing bound: a slow machine only makes the first block idler.
 *
 *   test_arena_warm [place|calloc|window|all|age]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define MiB ((size_t)1024 * 1024)

static void touch(unsigned char *p, size_t n, unsigned char v)
{
  for (size_t i = 0; i < n; i += 4096) p[i] = v;
  p[n - 1] = v;
}

static void place(void)
{
  /* Arena blocks (above 1 MiB), kept apart by live 2 MiB blocks. */
  unsigned char *a = malloc(8 * MiB), *b = malloc(2 * MiB), *c = malloc(12 * MiB), *d = malloc(2 * MiB);
  CHECK(a && b && c && d, "malloc");
  touch(a, 8 * MiB, 1), touch(b, 2 * MiB, 2), touch(c, 12 * MiB, 3), touch(d, 2 * MiB, 4);
  free(a);
  malloc_trim(0); /* a's hole is decommitted: cold */
  free(c);        /* c's hole stays resident: warm */
  size_t before = tu_rss_bytes();
  unsigned char *x = malloc(8 * MiB);
  CHECK(x != NULL, "malloc(8 MiB)");
  touch(x, 8 * MiB, 5);
  size_t after = tu_rss_bytes();
  size_t grew = after > before ? after - before : 0;
  printf("place: resident grew by %.1f MiB placing 8 MiB beside a 12 MiB warm hole (x %s c)\n",
         (double)grew / (double)MiB, x == c ? "==" : "!=");
  CHECK(grew < 4 * MiB, "an 8 MiB block faulted in %zu bytes while a warm 12 MiB hole was free", grew);
  free(x), free(b), free(d);
  malloc_trim(0);
}

static void calloc_sparse(void)
{
  unsigned char *p = malloc(4 * MiB);
  CHECK(p != NULL, "malloc(4 MiB)");
  memset(p, 0xa5, 4 * MiB);
  free(p); /* coalesces with the untouched rest of its arena */
  size_t before = tu_rss_bytes();
  unsigned char *q = calloc(1, 24 * MiB);
  CHECK(q != NULL, "calloc(24 MiB)");
  size_t after = tu_rss_bytes();
  size_t grew = after > before ? after - before : 0;
  printf("calloc: resident grew by %.1f MiB for calloc(24 MiB) over a warm 4 MiB\n", (double)grew / (double)MiB);
  CHECK(grew < 10 * MiB, "calloc(24 MiB) faulted in %zu bytes: it zeroed pages that were never touched", grew);
  for (size_t i = 0; i < 24 * MiB; i++)
    if (q[i] != 0) CHECK(0, "calloc memory not zero at offset %zu", i);
  free(q);
  malloc_trim(0);
}

/* Three 8 MiB arena blocks side by side and a 2 MiB one after them that
 * keeps their span apart from the arena's untouched rest; all touched. */
static void window_blocks(unsigned char *b[4])
{
  for (int i = 0; i < 4; i++) {
    b[i] = malloc(i < 3 ? 8 * MiB : 2 * MiB);
    CHECK(b[i] != NULL, "malloc");
    touch(b[i], i < 3 ? 8 * MiB : 2 * MiB, (unsigned char)(i + 1));
  }
  for (int i = 1; i < 4; i++)
    CHECK(b[i] == b[i - 1] + 8 * MiB + 64 * 1024, "blocks not side by side in an arena (%p after %p)",
          (void *)b[i], (void *)b[i - 1]);
}

/* Place 8 MiB and touch it: where it went, and how much resident grew. */
static unsigned char *window_place(size_t *grew)
{
  size_t before = tu_rss_bytes();
  unsigned char *x = malloc(8 * MiB);
  CHECK(x != NULL, "malloc(8 MiB)");
  touch(x, 8 * MiB, 9);
  size_t after = tu_rss_bytes();
  *grew = after > before ? after - before : 0;
  return x;
}

static void window(void)
{
  unsigned char *b[4];
  size_t grew;
  malloc_trim(0);
  window_blocks(b);
  free(b[0]);
  malloc_trim(0); /* b[0]'s granules go back: cold */
  free(b[1]);     /* merges after them, warm: the span is cold, then warm */
  unsigned char *x = window_place(&grew);
  printf("window: end: resident grew by %.1f MiB (block %s the warm end)\n", (double)grew / (double)MiB,
         x == b[1] ? "on" : "not on");
  CHECK(x == b[1] && grew < 4 * MiB, "an 8 MiB block went to %p (warm end %p), faulting in %zu bytes", (void *)x,
        (void *)b[1], grew);
  free(x), free(b[2]), free(b[3]);
  malloc_trim(0);

  window_blocks(b);
  free(b[0]), free(b[2]);
  malloc_trim(0); /* two cold holes */
  free(b[1]);     /* between them, warm: cold, warm, cold */
  x = window_place(&grew);
  printf("window: middle: resident grew by %.1f MiB (block %s the warm middle)\n", (double)grew / (double)MiB,
         x == b[1] ? "on" : "not on");
  CHECK(x == b[1] && grew < 4 * MiB, "an 8 MiB block went to %p (warm middle %p), faulting in %zu bytes", (void *)x,
        (void *)b[1], grew);
  /* The span split around it: both cold holes still serve 8 MiB each. */
  unsigned char *y = malloc(8 * MiB), *z = malloc(8 * MiB);
  CHECK(y != NULL && z != NULL, "malloc(8 MiB)");
  CHECK((y == b[0] || y == b[2]) && (z == b[0] || z == b[2]) && y != z, "the holes beside it did not serve (%p %p)",
        (void *)y, (void *)z);
  touch(y, 8 * MiB, 7), touch(z, 8 * MiB, 8);
  CHECK(x[0] == 9 && x[8 * MiB - 1] == 9, "the middle block changed under its neighbours");
  free(x), free(y), free(z), free(b[3]);
  malloc_trim(0);
}

/* Resident pages of [p, p+n) (page-aligned p), by mincore. */
static size_t resident_pages(const void *p, size_t n)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = n / pg, r = 0;
  unsigned char *v = malloc(np);
  CHECK(v != NULL && mincore((void *)p, n, v) == 0, "mincore");
  for (size_t i = 0; i < np; i++) r += v[i] & 1;
  free(v);
  return r;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

static void age(void)
{
  enum { N = 6 };
  unsigned char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(4 * MiB);
    CHECK(b[i] != NULL, "malloc(4 MiB)");
    touch(b[i], 4 * MiB, (unsigned char)i);
  }
  for (int i = 1; i < N; i++)
    CHECK(b[i] == b[i - 1] + 4 * MiB + 64 * 1024, "blocks not side by side in an arena (%p after %p)",
          (void *)b[i], (void *)b[i - 1]);
  /* b[N-1] stays live: the span b[0..N-2] never merges with the arena's
   * untouched rest. A block's pages are looked at from 64 KiB in (page
   * aligned, clear of the header) to 64 KiB before its end. */
#define INNER(p) ((unsigned char *)(((uintptr_t)(p) + 64 * 1024) & ~(uintptr_t)0xffff))
  const size_t len = 4 * MiB - 128 * 1024;
  unsigned char *first = INNER(b[0]);
  size_t npages = len / (size_t)sysconf(_SC_PAGESIZE);
  CHECK(resident_pages(first, len) == npages, "a touched block is not resident");
  free(b[0]);
  for (int i = 1; i < N - 1; i++) {
    sleep_ms(40);
    free(b[i]); /* merges into b[0]'s span: the span's free time is now */
  }
  size_t last = resident_pages(INNER(b[N - 2]), len);
  size_t old = resident_pages(first, len);
  printf("age: first block (freed %d ms ago, its span grown since) %zu of %zu pages resident; "
         "block freed last %zu\n", 40 * (N - 2), old, npages, last);
  CHECK(last * 2 > npages, "the block freed last went back at once (%zu of %zu pages resident)", last, npages);
  CHECK(old * 10 < npages, "a block free for %d ms (delay 50 ms) is still resident: %zu of %zu pages", 40 * (N - 2),
        old, npages);
  free(b[N - 1]);
}

int main(int argc, char **argv)
{
  const char *what = argc > 1 ? argv[1] : "all";
  if (!strcmp(what, "place") || !strcmp(what, "all")) place();
  if (!strcmp(what, "calloc") || !strcmp(what, "all")) calloc_sparse();
  if (!strcmp(what, "window") || !strcmp(what, "all")) window();
  if (!strcmp(what, "age")) age();
  return 0;
}
