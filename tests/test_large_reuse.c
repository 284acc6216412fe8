/*
 * test_large_reuse.c — a freed big mapping serves the next big blocks
 * before fresh pages do (issue 18: large free; large.c's mapping cache,
 * large_fit_cached and large_cache_put_locked).
 *
 *   test_large_reuse PART    parts: split arena alternate oversize
 *
 * Run with HAKMEM_PURGE_DELAY_MS=600000 and HAKMEM_BACKGROUND_THREAD=0, so
 * that nothing is given back by time while the test looks: every page the
 * process holds is one the allocator kept or faulted in.
 * split      (sort's pattern) one block of 100 MiB is written and freed,
 *            then three of 33 MiB are written: they must take the freed
 *            mapping's pages. Before, the first took the whole mapping and
 *            the other two were fresh: RSS grew by 66 MiB.
 * arena      the same with 50 MiB and three blocks of 17 MiB, a size the
 *            arenas serve: the arenas faulted all three in (+51 MiB).
 * alternate  a block of 80 MiB and one of 36 MiB, one at a time, ten
 *            times: after the first round no more than a few pages may be
 *            faulted in (the split parts of the big mapping join again in
 *            the cache).
 * split and alternate run with HAKMEM_LARGE_CACHE=256M: their mappings are
 * bigger than the default budget (64 MiB).
 * oversize   (the default budget) a written block of 100 MiB goes back to
 *            the kernel when freed, one of 48 MiB stays cached: reused,
 *            a freed mapping keeps resident the pages the next block may
 *            never write (real_sort: peak 106 MB, 86 when it goes back).
 * Every block's pages carry a pattern, checked before it is freed. Every
 * figure is printed, on success too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)

static long minflt(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* A word per page, from key: every page is touched. */
static void fill(unsigned char *p, size_t n, uint64_t key)
{
  for (size_t i = 0; i < n; i += PAGE) memcpy(p + i, &(uint64_t){key ^ i}, sizeof(uint64_t));
}

static int check(const unsigned char *p, size_t n, uint64_t key)
{
  for (size_t i = 0; i < n; i += PAGE) {
    uint64_t w;
    memcpy(&w, p + i, sizeof w);
    if (w != (key ^ i)) return 1;
  }
  return 0;
}

static unsigned char *get(size_t n)
{
  unsigned char *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "FAIL: malloc(%zu) returned NULL\n", n);
    exit(1);
  }
  return p;
}

/* One big block written and freed, then three smaller ones written: RSS
 * may grow by at most limit. */
static int reuse(const char *part, size_t big, size_t small, size_t limit)
{
  unsigned char *b = get(big);
  fill(b, big, 1);
  int bad = check(b, big, 1);
  free(b);
  size_t r0 = tu_rss_bytes();
  unsigned char *s[3];
  for (unsigned i = 0; i < 3; i++) {
    s[i] = get(small);
    fill(s[i], small, 10 + i);
  }
  size_t r1 = tu_rss_bytes();
  for (unsigned i = 0; i < 3; i++) {
    bad += check(s[i], small, 10 + i);
    for (unsigned j = 0; j < i; j++)
      if ((size_t)(s[i] > s[j] ? s[i] - s[j] : s[j] - s[i]) < small) bad++;
  }
  for (unsigned i = 0; i < 3; i++) free(s[i]);
  size_t grew = r1 > r0 ? r1 - r0 : 0;
  printf("%s: freed %zu MiB, then 3 x %zu MiB written: RSS %zu -> %zu MiB (+%zu MiB, limit %zu); "
         "%d blocks damaged or overlapping\n",
         part, big / MiB, small / MiB, r0 / MiB, r1 / MiB, grew / MiB, limit / MiB, bad);
  int fail = 0;
  fail |= tu_fail_if(grew >= limit, "the smaller blocks took fresh pages while the freed mapping stayed resident");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern or overlaps another");
  return fail;
}

static int alternate(void)
{
  const size_t big = 80 * MiB, small = 36 * MiB;
  long f0 = 0;
  int bad = 0;
  for (unsigned round = 0; round < 10; round++) {
    if (round == 1) f0 = minflt();
    unsigned char *b = get(big);
    fill(b, big, 100 + round);
    bad += check(b, big, 100 + round);
    free(b);
    unsigned char *s = get(small);
    fill(s, small, 200 + round);
    bad += check(s, small, 200 + round);
    free(s);
  }
  long faults = minflt() - f0, limit = (long)(big / PAGE / 10);
  printf("alternate: %zu and %zu MiB, 9 rounds after the first: %ld page faults (limit %ld); "
         "%d blocks damaged\n",
         big / MiB, small / MiB, faults, limit, bad);
  int fail = 0;
  fail |= tu_fail_if(faults >= limit, "the rounds fault pages in: the big mapping is not found whole again");
  fail |= tu_fail_if(bad != 0, "a block lost its pattern");
  return fail;
}

/* Written and freed: does RSS drop by (nearly) the block's size? */
static int freed_back(size_t n, int expect_back)
{
  unsigned char *b = get(n);
  fill(b, n, 300);
  int bad = check(b, n, 300);
  size_t r0 = tu_rss_bytes();
  free(b);
  size_t r1 = tu_rss_bytes();
  size_t drop = r0 > r1 ? r0 - r1 : 0;
  int back = drop >= n - 4 * MiB;
  printf("oversize: %zu MiB written and freed: RSS %zu -> %zu MiB (%s; expected %s); %d pages damaged\n", n / MiB,
         r0 / MiB, r1 / MiB, back ? "given back" : "kept", expect_back ? "given back" : "kept", bad);
  int fail = 0;
  fail |= tu_fail_if(back != expect_back, expect_back ? "a mapping above HAKMEM_LARGE_CACHE stayed resident"
                                                      : "a mapping within HAKMEM_LARGE_CACHE was not kept");
  fail |= tu_fail_if(bad != 0, "the block lost its pattern");
  return fail;
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "split";
  if (strcmp(part, "split") == 0) return reuse(part, 100 * MiB, 33 * MiB, 24 * MiB);
  if (strcmp(part, "arena") == 0) return reuse(part, 50 * MiB, 17 * MiB, 26 * MiB);
  if (strcmp(part, "alternate") == 0) return alternate();
  if (strcmp(part, "oversize") == 0) return freed_back(100 * MiB, 1) | freed_back(48 * MiB, 0);
  fprintf(stderr, "usage: test_large_reuse split|arena|alternate|oversize\n");
  return 2;
}
