/*
 * test_sizes.c — every size class boundary through the aligned, calloc and
 * realloc entry points.
 *
 *   test_sizes PART [--rounds=N] [--steps=N] [--seed=S]
 *   parts: aligned calloc realloc all
 *
 * Size classes (mirrored here, not taken from the library): 16..128 B in
 * 16 B steps, then four per power of two up to 1 MiB (2^k x 1.25, 1.5, 1.75,
 * 2). "Boundaries" below are every class size c and c-1, c+1.
 *
 * aligned  for every alignment 16 B..1 MiB, with aligned_alloc (any size,
 *          not rounded), posix_memalign and memalign, sizes {0, 1, 8, 15,
 *          16, 17, 100, 1000, 1024, 1025, 4095, 4096, 4097, 65535, 65536,
 *          65537, 1 MiB-1, 1 MiB, 1 MiB+1, 3 MiB, 17 MiB} and every boundary:
 *          non-NULL, aligned, malloc_usable_size >= size; a pattern is
 *          written over the whole usable size; all blocks of one alignment
 *          stay live together and are checked before being freed (an overlap
 *          or a short block shows as a broken pattern). Then a steady loop:
 *          200 slots with random alignments 16 B..64 KiB and sizes
 *          1 B..8 KiB (contents checked on every free); slots swap their
 *          (alignment, size) so the multiset of requests stays the same;
 *          after a warm-up, --steps (100 000) aligned allocations + frees
 *          must make no mmap call (mmap_calls delta 0; madvise/munmap
 *          deltas printed).
 * calloc   every boundary up to 1 MiB+1 and 2, 5, 17, 40 MiB: malloc, fill
 *          0xA5 over the usable size, free, then calloc(n, size/n) for
 *          (1,size), (size,1) and up to two more factorizations: all `size`
 *          bytes must be zero; each calloc'ed block is dirtied again before
 *          it is freed. Two threads do this at once and swap one block per
 *          size through a mailbox, so blocks are freed by the other thread
 *          and reused dirty. --rounds (3).
 * realloc  a chain from 1 B up through every boundary to 1 MiB+1, then 2,
 *          16, 64 and 100 MiB (mremap territory), then back down the same
 *          steps to 1 B: at every step the first min(old, new) bytes keep
 *          their position-dependent pattern, usable size >= new, and new
 *          bytes get the pattern. Three chains per round: plain; with a
 *          "blocker" block of the new size allocated after every step (no
 *          room to grow in place); and with the steps done alternately by
 *          two threads. --rounds (1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static unsigned g_rounds_set; /* --rounds given */
static unsigned g_rounds;
static unsigned long long g_steps;
static uint64_t g_seed;

static double now_ms(void) { return tu_now_s() * 1e3; }

typedef struct {
  size_t mmap, munmap, madvise, mremap;
} oscount_t;

static oscount_t os_counts(void)
{
  static struct hak_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  CHECK(hak_stats_get(&s) == 0, "hak_stats_get failed");
  return (oscount_t){s.mmap_calls, s.munmap_calls, s.madvise_calls, s.mremap_calls};
}

/* ---- size classes and boundaries ---- */
#define NCLASS 60

static size_t class_size(unsigned c)
{
  if (c < 8) return 16u * (c + 1);
  unsigned b = 7 + (c - 8) / 4, sub = (c - 8) % 4;
  return (size_t)(5u + sub) << (b - 2);
}

static int cmp_size(const void *a, const void *b)
{
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* sorts and removes duplicates; returns the new count */
static size_t uniq(size_t *v, size_t n)
{
  qsort(v, n, sizeof *v, cmp_size);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (k == 0 || v[k - 1] != v[i]) v[k++] = v[i];
  return k;
}

/* c-1, c, c+1 for every class (c-1 >= min) */
static size_t boundaries(size_t *v, size_t min)
{
  size_t n = 0;
  for (unsigned c = 0; c < NCLASS; c++) {
    size_t s = class_size(c);
    if (s - 1 >= min) v[n++] = s - 1;
    v[n++] = s;
    v[n++] = s + 1;
  }
  return n;
}

/* ================================================================ aligned */

static const char *const fn_name[3] = {"aligned_alloc", "posix_memalign", "memalign"};

static void *aligned_by(int fn, size_t align, size_t n)
{
  void *p = NULL;
  errno = 0;
  switch (fn) {
    case 0: p = aligned_alloc(opaque_size(align), opaque_size(n)); break;
    case 1: {
      int rc = posix_memalign(&p, opaque_size(align), opaque_size(n));
      CHECK(rc == 0, "posix_memalign(%zu, %zu) returned %d", align, n, rc);
      break;
    }
    default: p = memalign(opaque_size(align), opaque_size(n)); break;
  }
  CHECK(p != NULL, "%s(%zu, %zu) returned NULL, errno %d", fn_name[fn], align, n, errno);
  CHECK(((uintptr_t)p & (align - 1)) == 0, "%s(%zu, %zu) returned %p: not %zu-aligned", fn_name[fn], align, n, p,
        align);
  return p;
}

typedef struct {
  unsigned char *p;
  size_t n, us, align;
  uint64_t key;
  int fn;
} ablk_t;

static ablk_t g_ab[3 * 256];

static void part_aligned(void)
{
  static const size_t fixed[] = {0,     1,     8,     15,      16,  17,      100,        1000,       1024,
                                 1025,  4095,  4096,  4097,    65535, 65536, 65537,      MiB - 1,    MiB,
                                 MiB + 1, 3 * MiB, 17 * MiB};
  size_t sizes[256];
  size_t ns = boundaries(sizes, 1);
  for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) sizes[ns++] = fixed[k];
  ns = uniq(sizes, ns);
  CHECK(3 * ns <= sizeof g_ab / sizeof g_ab[0], "too many sizes");
  printf("aligned: %zu sizes (0..17 MiB, every class boundary +-1) x 3 functions x 17 alignments 16 B..1 MiB\n", ns);
  fflush(stdout);
  double t0 = now_ms();
  oscount_t c0 = os_counts();
  size_t checked_bytes = 0;
  for (size_t align = 16; align <= MiB; align <<= 1) {
    size_t nb = 0, live = 0;
    for (int fn = 0; fn < 3; fn++)
      for (size_t i = 0; i < ns; i++) {
        ablk_t *b = &g_ab[nb++];
        b->n = sizes[i];
        b->align = align;
        b->fn = fn;
        b->p = aligned_by(fn, align, sizes[i]);
        b->us = malloc_usable_size(b->p);
        CHECK(b->us >= b->n, "%s(%zu, %zu) = %p: malloc_usable_size %zu < %zu", fn_name[fn], align, b->n,
              (void *)b->p, b->us, b->n);
        b->key = g_seed ^ (align * 1000003u) ^ ((uint64_t)fn << 40) ^ ((uint64_t)i << 48);
        pat_fill(b->p, b->us, b->key);
        live += b->us;
      }
    for (size_t k = 0; k < nb; k++) {
      ablk_t *b = &g_ab[k];
      size_t bad = pat_check(b->p, b->us, b->key);
      CHECK(bad == (size_t)-1,
            "%s(%zu, %zu) = %p (usable %zu): byte %zu overwritten while the other blocks of this alignment were "
            "live (overlap?)", fn_name[b->fn], b->align, b->n, (void *)b->p, b->us, bad);
      checked_bytes += b->us;
      free(b->p);
    }
    printf("aligned: %7zu B alignment: %zu blocks ok, %.1f MiB usable live at once\n", align, nb,
           (double)live / MiB);
    fflush(stdout);
  }
  oscount_t c1 = os_counts();
  printf("aligned: sweep %.0f ms, %.0f MiB pattern-checked; mmap +%zu, munmap +%zu, madvise +%zu (info)\n",
         now_ms() - t0, (double)checked_bytes / MiB, c1.mmap - c0.mmap, c1.munmap - c0.munmap,
         c1.madvise - c0.madvise);

  /* steady loop */
  enum { NSLOT = 200 };
  static ablk_t sl[NSLOT];
  rng_t r;
  rng_seed(&r, g_seed + 77);
  for (size_t i = 0; i < NSLOT; i++) {
    sl[i].align = (size_t)16 << rng_below(&r, 13); /* 16 B .. 64 KiB */
    sl[i].n = rng_logsize(&r, 1, 8 * KiB);
    sl[i].fn = (int)rng_below(&r, 3);
    sl[i].p = NULL;
  }
  uint64_t serial = 1;
#define SLOT_ALLOC(b)                                              \
  do {                                                             \
    (b)->p = aligned_by((b)->fn, (b)->align, (b)->n);              \
    (b)->key = serial++;                                           \
    pat_fill((b)->p, (b)->n, (b)->key);                            \
  } while (0)
#define SLOT_FREE(b)                                                                                       \
  do {                                                                                                     \
    size_t bad_ = pat_check((b)->p, (b)->n, (b)->key);                                                     \
    CHECK(bad_ == (size_t)-1, "%s(%zu, %zu) = %p: byte %zu overwritten", fn_name[(b)->fn], (b)->align,       \
          (b)->n, (void *)(b)->p, bad_);                                                                   \
    free((b)->p);                                                                                          \
    (b)->p = NULL;                                                                                         \
  } while (0)
  for (size_t i = 0; i < NSLOT; i++) SLOT_ALLOC(&sl[i]);
  /* one swap: two slots freed, their (alignment, size, function) exchanged,
   * both allocated again: 2 allocations + 2 frees */
  unsigned long long warm = 50000, meas = g_steps / 2;
  oscount_t a = {0, 0, 0, 0};
  double tm = 0;
  for (unsigned long long s = 0; s < warm + meas; s++) {
    if (s == warm) {
      a = os_counts();
      tm = now_ms();
    }
    size_t i = (size_t)rng_below(&r, NSLOT), j = (size_t)rng_below(&r, NSLOT);
    SLOT_FREE(&sl[i]);
    if (j != i) SLOT_FREE(&sl[j]);
    ablk_t t = sl[i];
    sl[i].align = sl[j].align, sl[i].n = sl[j].n, sl[i].fn = sl[j].fn;
    sl[j].align = t.align, sl[j].n = t.n, sl[j].fn = t.fn;
    SLOT_ALLOC(&sl[i]);
    if (j != i) SLOT_ALLOC(&sl[j]);
  }
  oscount_t b = os_counts();
  tm = now_ms() - tm;
  for (size_t i = 0; i < NSLOT; i++) SLOT_FREE(&sl[i]);
  size_t dm = b.mmap - a.mmap;
  printf("aligned: steady loop, 200 slots (align 16 B..64 KiB, size 1 B..8 KiB): %llu allocations+frees after a "
         "%llu warm-up in %.0f ms: mmap +%zu, munmap +%zu, madvise +%zu  %s\n",
         2 * meas, 2 * warm, tm, dm, b.munmap - a.munmap, b.madvise - a.madvise, dm == 0 ? "ok" : "FAIL");
  fflush(stdout);
  CHECK(dm == 0, "aligned steady loop: mmap_calls +%zu over %llu aligned allocations (want 0: aligned blocks must "
        "come from the normal caches, no mapping per call)", dm, 2 * meas);
#undef SLOT_ALLOC
#undef SLOT_FREE
}

/* ================================================================= calloc */

#define CSIZES 200
static size_t g_csizes[CSIZES];
static size_t g_ncs;
static _Atomic(void *) g_mbox[CSIZES];
static atomic_size_t g_calloc_checked, g_calloc_calls, g_mbox_swaps;

static void calloc_one(size_t n, size_t m, const char *who)
{
  size_t s = n * m;
  unsigned char *c = calloc(opaque_size(n), opaque_size(m));
  CHECK(c != NULL, "%s: calloc(%zu, %zu) returned NULL, errno %d", who, n, m, errno);
  size_t nz = first_nonzero(c, s);
  CHECK(nz == (size_t)-1, "%s: calloc(%zu, %zu) = %p (reused memory): byte %zu of %zu is 0x%02x, not zero", who, n,
        m, (void *)c, nz, s, c[nz]);
  atomic_fetch_add(&g_calloc_checked, s);
  atomic_fetch_add(&g_calloc_calls, 1);
  memset(c, 0xA5, malloc_usable_size(c));
  free(c);
}

static void *calloc_worker(void *arg)
{
  int id = (int)(intptr_t)arg;
  char who[32];
  snprintf(who, sizeof who, "thread %d", id);
  static const size_t divs[] = {2, 3, 4, 5, 8, 16, 64, 4096};
  for (unsigned r = 0; r < g_rounds; r++)
    for (size_t k = 0; k < g_ncs; k++) {
      size_t i = id ? g_ncs - 1 - k : k; /* the two threads walk in opposite directions */
      size_t s = g_csizes[i];
      /* dirty a block of this size and free it */
      unsigned char *p = malloc(s);
      CHECK(p != NULL, "%s: malloc(%zu) NULL", who, s);
      memset(p, 0xA5, malloc_usable_size(p));
      free(p);
      calloc_one(1, s, who);
      calloc_one(s, 1, who);
      int extra = 0;
      for (size_t d = 0; d < sizeof divs / sizeof divs[0] && extra < 2; d++)
        if (s % divs[d] == 0 && s / divs[d] > 1) {
          calloc_one(extra ? s / divs[d] : divs[d], extra ? divs[d] : s / divs[d], who);
          extra++;
        }
      /* a dirty block of this size goes to the other thread; we free what it left */
      p = malloc(s);
      CHECK(p != NULL, "%s: malloc(%zu) NULL", who, s);
      memset(p, 0xA5, malloc_usable_size(p));
      void *q = atomic_exchange(&g_mbox[i], p);
      if (q) {
        free(q);
        atomic_fetch_add(&g_mbox_swaps, 1);
      }
      calloc_one(1, s, who); /* may reuse the block just freed (the other thread's) */
    }
  return NULL;
}

static void part_calloc(void)
{
  size_t n = boundaries(g_csizes, 1);
  g_csizes[n++] = 2 * MiB;
  g_csizes[n++] = 5 * MiB;
  g_csizes[n++] = 17 * MiB;
  g_csizes[n++] = 40 * MiB;
  g_ncs = uniq(g_csizes, n);
  printf("calloc: %zu sizes (every class boundary +-1 up to 1 MiB+1; 2, 5, 17, 40 MiB), %u round(s), 2 threads\n",
         g_ncs, g_rounds);
  fflush(stdout);
  double t0 = now_ms();
  pthread_t t[2];
  for (int k = 0; k < 2; k++)
    CHECK(pthread_create(&t[k], NULL, calloc_worker, (void *)(intptr_t)k) == 0, "pthread_create");
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  for (size_t i = 0; i < g_ncs; i++) free(atomic_exchange(&g_mbox[i], NULL));
  /* and single-threaded, after the other threads' blocks were freed here */
  for (size_t i = 0; i < g_ncs; i++) calloc_one(1, g_csizes[i], "main");
  printf("calloc: %zu calloc calls, %.0f MiB checked zero, %zu blocks freed by the other thread, %.0f ms  ok\n",
         atomic_load(&g_calloc_calls), (double)atomic_load(&g_calloc_checked) / MiB, atomic_load(&g_mbox_swaps),
         now_ms() - t0);
}

/* ================================================================ realloc */

#define RSTEPS 256
static size_t g_rsteps[RSTEPS];
static size_t g_nrs;

typedef struct {
  unsigned char *p;
  size_t cur;
  uint64_t key;
  int chain;
  size_t moved, steps;
} chain_t;

static void chain_step(chain_t *c, size_t to, const char *who)
{
  size_t old = c->cur;
  unsigned char *q = realloc(c->p, opaque_size(to));
  CHECK(q != NULL, "chain %d (%s): realloc(%p, %zu -> %zu) returned NULL, errno %d", c->chain, who, (void *)c->p,
        old, to, errno);
  size_t keep = old < to ? old : to;
  size_t bad = pat_check(q, keep, c->key);
  CHECK(bad == (size_t)-1, "chain %d (%s): realloc %zu -> %zu (%p -> %p): byte %zu of the %zu kept lost its content",
        c->chain, who, old, to, (void *)c->p, (void *)q, bad, keep);
  size_t us = malloc_usable_size(q);
  CHECK(us >= to, "chain %d (%s): realloc(.., %zu) = %p: usable size %zu", c->chain, who, to, (void *)q, us);
  if (to > old) pat_fill_range(q, old, to, c->key);
  if (q != c->p) c->moved++;
  c->steps++;
  c->p = q;
  c->cur = to;
}

/* walk: index sequence 0..N-1 then N-2..0 */
static size_t chain_size_at(size_t k)
{
  return k < g_nrs ? g_rsteps[k] : g_rsteps[2 * g_nrs - 2 - k];
}

static void chain_start(chain_t *c, int chain, uint64_t key)
{
  memset(c, 0, sizeof *c);
  c->chain = chain;
  c->key = key;
  c->p = realloc(NULL, opaque_size(g_rsteps[0]));
  CHECK(c->p != NULL, "realloc(NULL, %zu) NULL", g_rsteps[0]);
  c->cur = g_rsteps[0];
  pat_fill(c->p, c->cur, key);
}

static void chain_end(chain_t *c, const char *what, double ms, oscount_t a)
{
  CHECK(c->cur == 1 && pat_check(c->p, 1, c->key) == (size_t)-1, "chain %d: final byte lost", c->chain);
  free(c->p);
  oscount_t b = os_counts();
  printf("realloc: chain %d (%s): %zu steps 1 B -> 100 MiB -> 1 B, %zu moved, mremap +%zu, %.0f ms  ok\n", c->chain,
         what, c->steps, c->moved, b.mremap - a.mremap, ms);
  fflush(stdout);
}

/* two threads alternate the steps of one chain */
static sem_t g_sem[2];
static chain_t g_alt;

static void *alt_worker(void *arg)
{
  (void)arg;
  for (size_t k = 2; k < 2 * g_nrs - 1; k += 2) {
    sem_wait(&g_sem[1]);
    chain_step(&g_alt, chain_size_at(k), "helper thread");
    sem_post(&g_sem[0]);
  }
  return NULL;
}

static void part_realloc(void)
{
  size_t n = boundaries(g_rsteps, 1);
  g_rsteps[n++] = 1;
  g_rsteps[n++] = 2 * MiB;
  g_rsteps[n++] = 16 * MiB;
  g_rsteps[n++] = 64 * MiB;
  g_rsteps[n++] = 100 * MiB;
  g_nrs = uniq(g_rsteps, n);
  printf("realloc: %zu sizes 1 B .. 100 MiB (every class boundary +-1), up and down, %u round(s)\n", g_nrs,
         g_rounds);
  fflush(stdout);
  for (unsigned r = 0; r < g_rounds; r++) {
    uint64_t key = g_seed * 31 + r;
    chain_t c;

    /* 1: plain */
    oscount_t a = os_counts();
    double t0 = now_ms();
    chain_start(&c, 1, key + 1);
    for (size_t k = 1; k < 2 * g_nrs - 1; k++) chain_step(&c, chain_size_at(k), "plain");
    chain_end(&c, "plain", now_ms() - t0, a);

    /* 2: a blocker of the new size after every step (up to 16 MiB) */
    static void *blk[2 * RSTEPS];
    size_t nblk = 0;
    a = os_counts();
    t0 = now_ms();
    chain_start(&c, 2, key + 2);
    for (size_t k = 1; k < 2 * g_nrs - 1; k++) {
      size_t to = chain_size_at(k);
      chain_step(&c, to, "with blockers");
      if (to <= 16 * MiB) {
        blk[nblk] = malloc(to);
        CHECK(blk[nblk] != NULL, "blocker malloc(%zu)", to);
        memset(blk[nblk], 0xEE, to < 4096 ? to : 4096);
        nblk++;
      }
    }
    chain_end(&c, "with blockers", now_ms() - t0, a);
    for (size_t k = 0; k < nblk; k++) free(blk[k]);

    /* 3: main does the odd steps, a helper thread the even ones */
    a = os_counts();
    t0 = now_ms();
    chain_start(&g_alt, 3, key + 3);
    sem_init(&g_sem[0], 0, 0);
    sem_init(&g_sem[1], 0, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, alt_worker, NULL) == 0, "pthread_create");
    for (size_t k = 1; k < 2 * g_nrs - 1; k += 2) {
      chain_step(&g_alt, chain_size_at(k), "main thread");
      sem_post(&g_sem[1]);
      if (k + 1 < 2 * g_nrs - 1) sem_wait(&g_sem[0]);
    }
    pthread_join(t, NULL);
    sem_destroy(&g_sem[0]);
    sem_destroy(&g_sem[1]);
    chain_end(&g_alt, "2 threads alternating", now_ms() - t0, a);
  }
}

/* ================================================================== main */

int main(int argc, char **argv)
{
  const char *part = argc > 1 && argv[1][0] != '-' ? argv[1] : "all";
  g_seed = test_param(argc, argv, "seed", "HAKMEM_TEST_SEED", 20261122);
  check_set_seed(g_seed);
  g_rounds_set = (unsigned)test_param(argc, argv, "rounds", NULL, 0);
  g_steps = test_param(argc, argv, "steps", NULL, 100000);
  static const struct { const char *name; void (*fn)(void); unsigned rounds; } parts[] = {
      {"aligned", part_aligned, 1}, {"calloc", part_calloc, 3}, {"realloc", part_realloc, 1}};
  int ran = 0;
  for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
    if (strcmp(part, "all") == 0 || strcmp(part, parts[k].name) == 0) {
      g_rounds = g_rounds_set ? g_rounds_set : parts[k].rounds;
      double t0 = now_ms();
      parts[k].fn();
      printf("test_sizes %s: ok, %.1f s\n", parts[k].name, (now_ms() - t0) / 1e3);
      fflush(stdout);
      ran++;
    }
  CHECK(ran > 0, "unknown part '%s' (aligned calloc realloc all)", part);
  return 0;
}
