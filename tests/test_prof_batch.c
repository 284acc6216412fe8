/*
 * test_prof_batch.c — the profile of blocks the profiling batches hand out
 * is unbiased, even where every batch starts at the same call site
 * (HAKMEM_PROF=1, started by CTest with HAKMEM_PROF_SAMPLE=1024).
 *
 * While profiling, a thread's allocations of a class pop a batch that a
 * refill takes from the slab's free list, and the sampler is told the
 * batch's bytes up front: a sample that falls inside cuts the batch before
 * it, and the next refill takes it. Each round here frees K blocks of a
 * class, so they go back to the slab's list, then allocates one block at
 * a "first" site and K - 1 at a "rest" site: the batch runs dry between
 * rounds, so the refills fall on the first site (always, once the slab
 * has no spare blocks left; early on often). A sampler that took a sample
 * falling anywhere in a batch at the refill that fills it would give the
 * first site most of the samples; an unbiased one gives it 1/K of the
 * bytes. Two classes: 48 B (batches of hundreds of blocks) and 768 B (a
 * few dozen). At the end every site's estimate in the dump's PATH.folded
 * must lie within 15 % of the bytes it holds: the smallest site has about
 * 770 samples, so that is more than 4 standard deviations.
 *
 *   test_prof_batch DIR   (the dump goes to DIR/batch)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define K 8

/* The sites: each touches its block after the call, so that the call is
 * not a tail call and the site keeps its frame in the stack. */
static void *touch(void *p) {
  if (p != NULL) ((volatile char *)p)[0] = 1;
  return p;
}
__attribute__((noinline)) void *first_small(void) { return touch(malloc(48)); }
__attribute__((noinline)) void *rest_small(void) { return touch(malloc(48)); }
__attribute__((noinline)) void *first_big(void) { return touch(malloc(768)); }
__attribute__((noinline)) void *rest_big(void) { return touch(malloc(768)); }

typedef struct {
  void **p;
  unsigned char *first; /* 1: allocated at the first site */
  size_t n;
} pool_t;

/* live blocks of one class: `live` held at the end, `rounds` rounds of
 * K frees and K allocations before that */
static void churn(pool_t *pl, size_t live, size_t rounds, void *(*first)(void), void *(*rest)(void), rng_t *r,
                  size_t *held_first, size_t *held_rest) {
  pl->p = calloc(live, sizeof(void *));
  pl->first = calloc(live, 1);
  CHECK(pl->p != NULL && pl->first != NULL, "calloc");
  for (pl->n = 0; pl->n < live; pl->n++) {
    int f = pl->n % K == 0;
    pl->p[pl->n] = f ? first() : rest();
    CHECK(pl->p[pl->n] != NULL, "malloc");
    pl->first[pl->n] = (unsigned char)f;
  }
  for (size_t i = 0; i < rounds; i++) {
    /* K random live blocks go back to their slab's list ... */
    for (unsigned j = 0; j < K; j++) {
      size_t x = (size_t)rng_below(r, pl->n);
      free(pl->p[x]);
      pl->n--;
      pl->p[x] = pl->p[pl->n];
      pl->first[x] = pl->first[pl->n];
    }
    /* ... and the round's first allocation is the first site's */
    for (unsigned j = 0; j < K; j++) {
      void *q = j == 0 ? first() : rest();
      CHECK(q != NULL, "malloc");
      pl->p[pl->n] = q;
      pl->first[pl->n] = (unsigned char)(j == 0);
      pl->n++;
    }
  }
  size_t nf = 0;
  for (size_t i = 0; i < pl->n; i++) nf += pl->first[i];
  *held_first = nf;
  *held_rest = pl->n - nf;
}

/* The estimated live bytes of the stacks through `site` in PATH.folded
 * ("outer;...;inner bytes" per line). */
static double folded_bytes(const char *path, const char *site) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "%s not written", path);
  static char line[1 << 16];
  double sum = 0;
  size_t len = strlen(site);
  while (fgets(line, sizeof line, f)) {
    char *sp = strrchr(line, ' ');
    if (sp == NULL) continue;
    *sp = 0;
    /* the site as a whole frame name */
    for (char *q = strstr(line, site); q != NULL; q = strstr(q + 1, site)) {
      char before = q == line ? ';' : q[-1], after = q[len];
      if (before == ';' && (after == ';' || after == 0)) {
        sum += strtod(sp + 1, NULL);
        break;
      }
    }
  }
  fclose(f);
  return sum;
}

static int check_site(const char *folded, const char *site, size_t blocks, size_t size) {
  double want = (double)blocks * (double)size, got = folded_bytes(folded, site);
  printf("%-12s held %10.0f bytes, estimated %10.0f (%+.1f %%)\n", site, want, got, 100.0 * (got - want) / want);
  if (got < want * 0.85 || got > want * 1.15) {
    printf("FAIL: %s's estimate is off by more than 15 %%\n", site);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  bool on = false;
  size_t len = sizeof on;
  CHECK(hak_ctl("prof.active", &on, &len, NULL, 0) == 0 && on, "the profiler is not active: is HAKMEM_PROF=1 set?");
  rng_t r;
  rng_seed(&r, 20261125);
  pool_t small, big;
  size_t sf, sr, bf, br;
  churn(&small, 131072, 131072, first_small, rest_small, &r, &sf, &sr);
  churn(&big, 32768, 65536, first_big, rest_big, &r, &bf, &br);
  char prefix[512], folded[600];
  snprintf(prefix, sizeof prefix, "%s/batch", argv[1]);
  CHECK(hak_prof_dump(prefix) == 0, "hak_prof_dump(%s)", prefix);
  snprintf(folded, sizeof folded, "%s.folded", prefix);
  int bad = check_site(folded, "first_small", sf, 48) + check_site(folded, "rest_small", sr, 48) +
            check_site(folded, "first_big", bf, 768) + check_site(folded, "rest_big", br, 768);
  for (size_t i = 0; i < small.n; i++) free(small.p[i]);
  for (size_t i = 0; i < big.n; i++) free(big.p[i]);
  free(small.p);
  free(small.first);
  free(big.p);
  free(big.first);
  if (bad) return 1;
  printf("batch profile unbiased\n");
  return 0;
}
