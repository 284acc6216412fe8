/*
 * test_realloc_rss.c — realloc growth does not keep a trail of freed blocks
 * resident (issue 18): a buffer grown by small appends past
 * HAKMEM_REALLOC_ARENA moves to the coalescing arenas once and then grows in
 * place; many buffers grown and freed at random keep the resident set within
 * a generous multiple of the bytes they hold. Contents are checked at every
 * step; a block grown by small steps ends in the class after the one its
 * size needs at most (room). Linked against libhakmem.so; no timing
 * assertions.
 *
 *   test_realloc_rss [inplace|many|fragment|all|room] [--scale=N]
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static unsigned scale = 1;

/* 1. One string grown by 100-byte appends from 16 B to 8 MiB: past 64 KiB
 * (the default threshold is 16 KiB; the margin leaves room for a changed
 * default) it moves a handful of times, not once per size class. */
static void inplace(void)
{
  size_t len = 0, moves_past = 0, moves = 0;
  char *p = malloc(16);
  CHECK(p != NULL, "malloc(16)");
  while (len < 8 * MiB) {
    size_t n = 100;
    char *q = realloc(p, len + n + 1);
    CHECK(q != NULL, "realloc(%zu)", len + n + 1);
    if (q != p) {
      moves++;
      if (len > 64 * KiB) moves_past++;
      CHECK(pat_check_range(q, 0, len, 7) == (size_t)-1, "realloc lost the contents at %zu bytes", len);
    }
    p = q;
    pat_fill_range(p, len, len + n, 7);
    len += n;
    p[len] = 0;
  }
  CHECK(pat_check_range(p, 0, len, 7) == (size_t)-1, "contents");
  free(p);
  printf("inplace: %zu moves in all, %zu past 64 KiB (grown to 8 MiB by 100 B)\n", moves, moves_past);
  /* Size classes alone would move it about 4 times per doubling from
   * 64 KiB to 1 MiB (16 moves). */
  CHECK(moves_past <= 6, "a growing buffer moved %zu times past 64 KiB: it does not grow in place", moves_past);
}

/* 2. 256 buffers, each appended to at random (1..64 bytes per realloc) up
 * to a log-uniform limit of 256 B..256 KiB, then freed and started again:
 * the resident set over the baseline stays within 1.75x the most bytes the
 * buffers held at once, plus 4 MiB. Measured on a fresh process (it runs
 * first; after `inplace` its 8 MiB of warm arena hid 8 MiB of growth, and
 * the stress form, which runs this part alone, failed the 1.5x bound that
 * figure had set): 1.64x, under glibc 1.20x, jemalloc 1.31x, mimalloc 1.46x,
 * tcmalloc 2.12x; size classes alone (HAKMEM_REALLOC_ARENA=0) 2.01x, which
 * fails. The gap to glibc is issue 18's realloc row: at the peak, free
 * blocks the buffers left in the classes they grew through (8 MiB), arena
 * spans freed within the purge delay (6 MiB) and warm granules under the
 * arena blocks' room (5.5 MiB). */
static void many(void)
{
  enum { B = 256 };
  static char *p[B];
  static size_t len[B], lim[B];
  rng_t r;
  rng_seed(&r, 18);
  size_t base = tu_rss_bytes(), peak = base, live = 0, live_max = 0;
  for (uint64_t i = 0; i < 2000000ull * scale; i++) {
    unsigned k = (unsigned)rng_below(&r, B);
    if (p[k] == NULL) {
      p[k] = malloc(16);
      CHECK(p[k] != NULL, "malloc(16)");
      len[k] = 0;
      lim[k] = rng_logsize(&r, 256, 256 * KiB);
    }
    size_t n = 1 + (size_t)rng_below(&r, 64);
    char *q = realloc(p[k], len[k] + n + 1);
    CHECK(q != NULL, "realloc(%zu)", len[k] + n + 1);
    CHECK(len[k] == 0 || (uint8_t)q[len[k] - 1] == pat_byte(k, len[k] - 1), "realloc lost byte %zu of buffer %u",
          len[k] - 1, k);
    p[k] = q;
    pat_fill_range(q, len[k], len[k] + n, k);
    len[k] += n;
    live += n;
    if (live > live_max) live_max = live;
    if (len[k] > lim[k]) {
      CHECK(pat_check_range(q, 0, len[k], k) == (size_t)-1, "contents of buffer %u", k);
      live -= len[k];
      free(q);
      p[k] = NULL;
    }
    if ((i & 4095) == 0) {
      size_t now = tu_rss_bytes();
      if (now > peak) peak = now;
    }
  }
  for (unsigned k = 0; k < B; k++) free(p[k]);
  size_t grow = peak > base ? peak - base : 0;
  printf("many: peak RSS %.1f MiB over baseline, at most %.1f MiB held (ratio %.2f)\n", (double)grow / MiB,
         (double)live_max / MiB, (double)grow / (double)live_max);
  CHECK(grow <= live_max + live_max * 3 / 4 + 4 * MiB, "growing buffers: RSS grew by %zu KiB for at most %zu KiB held", grow / KiB,
        live_max / KiB);
}

/* 3. Arena blocks of one 64 KiB granule, many: 3000 buffers grown past the
 * threshold (20 KiB each), every other one freed, the rest grown again and
 * checked. The arenas' free-span tables then hold a gap beside every block
 * (more than 1000 per arena), which the 1 MiB minimum of before never
 * produced. */
static void fragment(void)
{
  enum { N = 3000 };
  static char *p[N];
  for (unsigned i = 0; i < N; i++) {
    p[i] = malloc(100);
    CHECK(p[i] != NULL, "malloc(100)");
    pat_fill(p[i], 100, i);
    char *q = realloc(p[i], 20 * KiB);
    CHECK(q != NULL, "realloc(20 KiB)");
    CHECK(pat_check(q, 100, i) == (size_t)-1, "realloc lost buffer %u", i);
    pat_fill(q, 20 * KiB, i);
    p[i] = q;
  }
  for (unsigned i = 0; i < N; i += 2) {
    free(p[i]);
    p[i] = NULL;
  }
  for (unsigned i = 1; i < N; i += 2) {
    char *q = realloc(p[i], 90 * KiB);
    CHECK(q != NULL, "realloc(90 KiB)");
    CHECK(pat_check(q, 20 * KiB, i) == (size_t)-1, "realloc lost buffer %u", i);
    p[i] = q;
  }
  for (unsigned i = 1; i < N; i += 2) {
    CHECK(malloc_usable_size(p[i]) >= 90 * KiB, "usable size of buffer %u", i);
    free(p[i]);
  }
  printf("fragment: %u arena blocks, every other one freed, the rest regrown: ok\n", N);
}

/* 4. redis's list nodes: listpacks grown 204 B at a time from 6739 B up to
 * 8167 B. A quarter more room than a 7.5 KiB block is 9.4 KiB, which took
 * a 10 KiB block; from 1 KiB growth takes the class the size needs, so
 * 8167 B ends in an 8 KiB block. And every start size from 100 B to 12 KiB
 * grown by eight 3 % steps (below HAKMEM_REALLOC_ARENA's 16 KiB: past it,
 * growth goes to the arenas' 64 KiB granules) ends in a block at most 1.5
 * times the size asked for (the class after the next, at four classes per
 * power of two, is at most 1.56 times it). Run with HAKMEM_BORROW_CLASSES=0
 * (its own ctest): a class with no free block may hand out a larger
 * class's, which says nothing of what realloc asked for; not part of
 * "all". */
static void room(void)
{
  unsigned n = 2000 * scale;
  char **v = calloc(n, sizeof *v);
  CHECK(v != NULL, "calloc");
  size_t worst = 0;
  for (unsigned i = 0; i < n; i++) {
    size_t len = 6739;
    v[i] = malloc(len);
    CHECK(v[i] != NULL, "malloc");
    memset(v[i], (int)(i & 0xff), len);
    while (len + 204 <= 8167) {
      char *q = realloc(v[i], len + 204);
      CHECK(q != NULL, "realloc(%zu)", len + 204);
      memset(q + len, (int)(i & 0xff), 204);
      v[i] = q;
      len += 204;
    }
    size_t u = malloc_usable_size(v[i]);
    if (u > worst) worst = u;
  }
  for (unsigned i = 0; i < n; i++) {
    for (size_t k = 0; k < 8167; k += 511) CHECK((unsigned char)v[i][k] == (i & 0xff), "node %u byte %zu", i, k);
    free(v[i]);
  }
  free(v);
  printf("room: %u nodes grown 6739 -> 8167 B by 204 B, largest block %zu B\n", n, worst);
  CHECK(worst <= 8192, "a node grown to 8167 B sits in a %zu B block (want <= 8192)", worst);
  double ratio = 0;
  for (size_t start = 100; start <= 12 * KiB; start += start / 7) {
    size_t len = start;
    char *p = malloc(len);
    CHECK(p != NULL, "malloc(%zu)", len);
    for (int k = 0; k < 8; k++) {
      size_t to = len + len / 33 + 1;
      char *q = realloc(p, to);
      CHECK(q != NULL, "realloc(%zu)", to);
      p = q;
      len = to;
      double r = (double)malloc_usable_size(p) / (double)len;
      if (r > ratio) ratio = r;
    }
    free(p);
  }
  printf("room: usable / size after small growth steps at most %.2f\n", ratio);
  CHECK(ratio <= 1.5, "a block grown by small steps holds %.2f times its size (want <= 1.5)", ratio);
  /* A vector that multiplies its capacity by 1.5 asks past any room at its
   * next growth: from 512 KiB its block holds what it asked for, rounded to
   * the arenas' 64 KiB granules, not a quarter more (that room was resident
   * waste: bench_realloc's vectors). Contents survive every move. A
   * block taken after each growth (freed at the end) keeps the span
   * behind the vector busy, so each growth moves it. */
  size_t cap = 16 * KiB, extra = 0;
  char *blockers[32];
  unsigned nb = 0;
  char *vec = malloc(cap);
  CHECK(vec != NULL, "malloc(%zu)", cap);
  memset(vec, 0x5a, cap);
  while (cap < 8 * MiB) {
    size_t to = cap + cap / 2;
    char *q = realloc(vec, to);
    CHECK(q != NULL, "realloc(%zu)", to);
    for (size_t k = 0; k < cap; k += 4093) CHECK((unsigned char)q[k] == 0x5a, "vector byte %zu after growth to %zu", k, to);
    memset(q + cap, 0x5a, to - cap);
    vec = q;
    cap = to;
    size_t u = malloc_usable_size(vec);
    CHECK(u >= cap, "usable %zu below the %zu asked", u, cap);
    if (cap >= 512 * KiB && u - cap > extra) extra = u - cap;
    CHECK(nb < 32, "blockers");
    blockers[nb] = malloc(192 * KiB);
    CHECK(blockers[nb] != NULL, "malloc(192 KiB)");
    nb++;
  }
  free(vec);
  while (nb > 0) free(blockers[--nb]);
  printf("room: a vector grown by half each time holds at most %zu B past what it asked (from 512 KiB)\n", extra);
  CHECK(extra <= 68 * KiB, "a vector grown by half holds %zu B of room (want <= 68 KiB: a granule)", extra);
}

int main(int argc, char **argv)
{
  const char *part = "all";
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--scale=", 8) == 0)
      scale = (unsigned)atoi(argv[i] + 8);
    else
      part = argv[i];
  }
  if (scale == 0) scale = 1;
  bool all = strcmp(part, "all") == 0;
  if (all || strcmp(part, "many") == 0) many();
  if (all || strcmp(part, "inplace") == 0) inplace();
  if (all || strcmp(part, "fragment") == 0) fragment();
  if (strcmp(part, "room") == 0) room();
  printf("test_realloc_rss: ok\n");
  return 0;
}
