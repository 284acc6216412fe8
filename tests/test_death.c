/*
 * test_death.c — bad frees are reported and (by default) abort.
 *
 *   test_death                 run every case for this build flavour
 *   test_death --case=NAME     run one case in this process (what the parent execs)
 *   test_death --list          list the cases
 *
 * The parent re-executes itself once per case and HAKMEM_ON_ERROR mode (the
 * option is read once at the first allocation, so it must be in the
 * environment of a fresh process) and checks:
 *   abort   the child dies of SIGABRT and stderr holds the exact report
 *           ("hakmem: free(): invalid pointer 0x7ffc...") naming the pointer;
 *   warn    the same report, and the child continues: the bad call did
 *           nothing, later allocations work and earlier blocks are intact;
 *   ignore  no output at all on stderr, the child continues.
 * The child writes the report it expects on stdout ("EXPECT <line>") before
 * the bad call, and "CONTINUED" once it has verified the heap afterwards.
 *
 * Flavours (compile-time DEATH_FLAVOUR): 0 = libhakmem.so (standard names),
 * 1 = secure copy of the core (hak_ API), 2 = debug copy, 3 = the plain
 * (default) core through the hak_ API, 4 = libhakmem_secure.so (standard
 * names and C++ operators). Which kinds a build claims to catch
 * is asked of the library itself (hak_version() names the build: release,
 * secure or debug), so the cases follow the library the test runs against:
 * every case for the secure and debug builds, the default build's claims
 * (README.md, "What each build catches") for it; a case a build does not
 * claim is not run there (the bad call is undefined behaviour).
 *
 * An EXPECT line may hold alternatives separated by '|' (either report is
 * accepted, e.g. "double free of" or "invalid pointer" for a freed large
 * block). In warn/ignore mode continued() also checks that no block is
 * handed out twice afterwards: 20,000 blocks of the case's size class and of
 * its neighbours (fewer for large sizes), each with its own pattern, no two
 * overlapping, twice over.
 *
 *   test_death --group=G       run only the cases of group G (legacy, small,
 *                              large, xthread, corrupt)
 *   test_death --only=NAME     run one case under the three modes (checked)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#ifndef DEATH_FLAVOUR
#define DEATH_FLAVOUR 0
#endif
#define FL_DEFAULT 1
#define FL_SECURE 2
#define FL_DEBUG 4
#define FL_CHECKED (FL_SECURE | FL_DEBUG) /* the builds with every free check (HAK_CHECKED) */
#define FL_ALL (FL_DEFAULT | FL_CHECKED)
/* the build of the library this runs against, from its version string */
static unsigned fl_self(void)
{
  const char *v = hak_version();
  return strstr(v, " debug") ? FL_DEBUG : strstr(v, " secure") ? FL_SECURE : FL_DEFAULT;
}
#define FL_SELF fl_self()
/* linked to a library that replaces malloc and the C++ operators */
#define DEATH_OVERRIDE (DEATH_FLAVOUR == 0 || DEATH_FLAVOUR == 4)
static const char *const flavour_name[] = {"libhakmem.so", "secure (hak_ API)", "debug (hak_ API)",
                                           "default core (hak_ API)", "secure (libhakmem_secure.so)"};

extern void *__libc_malloc(size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

/* ---- child side ---------------------------------------------------------- */

static void expect(const char *call, const char *what, const void *p)
{
  printf("EXPECT hakmem: %s(): %s %p\n", call, what, p);
  fflush(stdout);
}

/* a few live blocks with patterns, verified after the bad call */
enum { NLIVE = 64 };
static void *live[NLIVE];
static size_t live_sz[NLIVE];

static void live_make(void)
{
  for (int i = 0; i < NLIVE; i++) {
    live_sz[i] = (size_t)16 << (i % 12);
    live[i] = malloc(live_sz[i]);
    CHECK(live[i] != NULL, "malloc(%zu)", live_sz[i]);
    pat_fill(live[i], live_sz[i], 0xdead0000u + (unsigned)i);
  }
}

/* ---- no block is handed out twice (warn/ignore, after the bad call) ---- */

static size_t g_cls = 48; /* the size class the case is about */

typedef struct { uintptr_t a; size_t n; uint64_t key; } hand_t;
enum { HAND_MAX = 20000, HAND_SIZES = 3 };
static hand_t hand[HAND_MAX * HAND_SIZES];

static int hand_cmp(const void *x, const void *y)
{
  const hand_t *a = x, *b = y;
  return a->a < b->a ? -1 : a->a > b->a;
}

static void no_double_handout(size_t cls)
{
  size_t sizes[HAND_SIZES] = {cls - cls / 4, cls, cls + cls / 4};
  for (int round = 0; round < 2; round++) {
    size_t k = 0;
    for (int s = 0; s < HAND_SIZES; s++) {
      size_t n = sizes[s] ? sizes[s] : 1, cnt = ((size_t)128 << 20) / n;
      if (cnt > HAND_MAX) cnt = HAND_MAX;
      if (cnt < 2) cnt = 2;
      for (size_t i = 0; i < cnt; i++, k++) {
        void *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu) #%zu after the bad call", n, i);
        hand[k].a = (uintptr_t)p;
        hand[k].n = n;
        hand[k].key = ((uint64_t)round << 40) ^ ((uint64_t)s << 32) ^ i ^ 0x5eed0000000000ull;
        blk_fill(p, n, hand[k].key);
      }
    }
    for (size_t i = 0; i < k; i++) {
      size_t bad = blk_check((void *)hand[i].a, hand[i].n, hand[i].n, hand[i].key);
      CHECK(bad == (size_t)-1, "after the bad call: block %p (%zu B) overwritten at byte %zu: handed out twice?",
            (void *)hand[i].a, hand[i].n, bad);
    }
    qsort(hand, k, sizeof hand[0], hand_cmp);
    for (size_t i = 0; i + 1 < k; i++)
      CHECK(hand[i].a + hand[i].n <= hand[i + 1].a, "after the bad call: blocks %p+%zu and %p+%zu overlap (handed out twice)",
            (void *)hand[i].a, hand[i].n, (void *)hand[i + 1].a, hand[i + 1].n);
    for (size_t i = 0; i < k; i++) free((void *)hand[i].a);
  }
}

static void continued(void)
{
  no_double_handout(g_cls);
  for (int i = 0; i < NLIVE; i++) {
    size_t bad = pat_check(live[i], live_sz[i], 0xdead0000u + (unsigned)i);
    CHECK(bad == (size_t)-1, "live block %d (%zu B) damaged at byte %zu after the bad call", i, live_sz[i], bad);
  }
  /* the allocator still works: allocate, fill, check, free many blocks */
  void *q[2000];
  for (int i = 0; i < 2000; i++) {
    size_t n = (size_t)(i * 37 % 5000) + 1;
    q[i] = malloc(n);
    CHECK(q[i] != NULL, "malloc(%zu) after the bad call", n);
    pat_fill(q[i], n, (uint64_t)i);
  }
  for (int i = 0; i < 2000; i++) {
    size_t n = (size_t)(i * 37 % 5000) + 1;
    CHECK(pat_check(q[i], n, (uint64_t)i) == (size_t)-1, "block %d corrupted after the bad call", i);
    free(q[i]);
  }
  /* and no block is handed out twice */
  void *a = malloc(48), *b = malloc(48);
  CHECK(a != NULL && b != NULL && a != b, "two mallocs returned %p %p", a, b);
  free(a);
  free(b);
  for (int i = 0; i < NLIVE; i++) free(live[i]);
  printf("CONTINUED\n");
  fflush(stdout);
}

static _Alignas(64) unsigned char static_buf[256];

static void case_free_stack(void)
{
  _Alignas(64) unsigned char buf[256];
  memset(buf, 0, sizeof buf);
  void *p = opaque_ptr(buf + 64);
  expect("free", "invalid pointer", p);
  free(p);
  __asm__ volatile("" ::"r"(buf) : "memory");
}

/* A pointer into a reserved PROT_NONE range (glibc's thread arenas and
 * stack guards are such ranges): mapped, so mincore calls it present, but a
 * read of it faults. Vetting it as glibc's crashed; it must be reported. */
static void case_free_protnone(void)
{
  unsigned char *r = mmap(NULL, 65536, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(r != MAP_FAILED, "mmap");
  void *p = opaque_ptr(r + 4096 + 64);
  expect("free", "invalid pointer", p);
  free(p);
}

static void case_free_static(void)
{
  void *p = opaque_ptr(static_buf + 128);
  expect("free", "invalid pointer", p);
  free(p);
}

/* interior of a large block (arena span and dedicated mapping) */
static void interior_large(size_t n, size_t off)
{
  char *p = malloc(n);
  CHECK(p != NULL, "malloc(%zu)", n);
  memset(p, 0, n > 8192 ? 8192 : n);
  void *q = opaque_ptr(p + off);
  expect("free", "invalid pointer", q);
  free(q);
  /* warn/ignore: the block is still valid and can be freed properly */
  free(p);
}
static void case_free_interior_large(void) { interior_large(3 << 20, 4096); }
static void case_free_interior_huge(void) { interior_large(40 << 20, 64); }

/* interior of a small block (the default build's free does not test for a
 * block start: secure and debug only) */
static void case_free_interior_small(void)
{
  g_cls = 64;
  char *p = malloc(64);
  CHECK(p != NULL, "malloc");
  void *q = opaque_ptr(p + 16);
  expect("free", "invalid pointer", q);
  free(q);
  free(p);
}

static void case_realloc_garbage(void)
{
  void *p = opaque_ptr(static_buf + 64);
  expect("realloc", "invalid pointer", p);
  errno = 0;
  void *r = realloc(p, 100);
  CHECK(r == NULL, "realloc of a garbage pointer returned %p", r);
}

static void case_realloc_stack(void)
{
  _Alignas(64) unsigned char buf[128];
  memset(buf, 0, sizeof buf);
  void *p = opaque_ptr(buf + 32);
  expect("realloc", "invalid pointer", p);
  void *r = realloc(p, 5000);
  CHECK(r == NULL, "realloc of a stack pointer returned %p", r);
  __asm__ volatile("" ::"r"(buf) : "memory");
}

static void case_usable_garbage(void)
{
  void *p = opaque_ptr(static_buf + 32);
  expect("malloc_usable_size", "invalid pointer", p);
  size_t n = malloc_usable_size(p);
  CHECK(n == 0, "malloc_usable_size of a garbage pointer = %zu", n);
}
static void expect_corruption(void);

/* free(p); free(p) of a small block: p is at the head of the thread's free
 * list (checked on every build's fast path). */
static void case_double_small(void)
{
  void *p = malloc(48);
  CHECK(p != NULL, "malloc");
  free(p);
  expect("free", "double free of", opaque_ptr(p));
  free(opaque_ptr(p));
}

/* Double free of a block in the middle of a thread's free list (the free
 * mark: secure and debug builds). */
static void case_double_deep(void)
{
  g_cls = 100;
  void *p[32];
  for (int i = 0; i < 32; i++) CHECK((p[i] = malloc(100)) != NULL, "malloc");
  for (int i = 0; i < 32; i++) free(p[i]);
  expect("free", "double free of", opaque_ptr(p[5]));
  free(opaque_ptr(p[5]));
}

/* Default build, slow path: a block of a slab that has been retired (every
 * block freed, the slab given back to its superslab) is freed again. 80
 * blocks of 20000 B span two slabs (51 to a 1 MiB slab of the 20 KiB
 * class); the first 60 are freed, which empties the first slab (no longer
 * the thread's current one); the last 20 keep the superslab mapped. */
static void case_double_retired(void)
{
  g_cls = 20000;
  enum { N = 80, FREED = 60 };
  void *p[N];
  for (int i = 0; i < N; i++) CHECK((p[i] = malloc(20000)) != NULL, "malloc");
  void *first = opaque_ptr(p[0]);
  for (int i = 0; i < FREED; i++) free(p[i]);
  /* today's wording for a retired slab, or either of issue 10's */
  printf("EXPECT hakmem: free(): double free or invalid pointer %p|hakmem: free(): double free of %p|"
         "hakmem: free(): invalid pointer %p\n", first, first, first);
  fflush(stdout);
  free(opaque_ptr(first));
  for (int i = FREED; i < N; i++) free(p[i]);
}

/* Default build, slow path: a block freed twice while its slab is full. The
 * slab is filled completely (so the owner marks it full when it moves on),
 * then one block is freed twice in a row: the first free goes through the
 * slow path (full slab), the second must be recognised as a double free. */
static void case_double_full(void)
{
  g_cls = 4000;
  enum { N = 200 };
  void *p[N];
  for (int i = 0; i < N; i++) CHECK((p[i] = malloc(4000)) != NULL, "malloc");
  void *x = opaque_ptr(p[1]);
  free(x);
  expect("free", "double free of", x);
  free(opaque_ptr(x));
  for (int i = 0; i < N; i++)
    if (i != 1) free(p[i]);
}

/* free_sized with a size larger than the block (debug build) */
static void case_free_sized_wrong(void)
{
  g_cls = 100;
  void *p = malloc(100);
  CHECK(p != NULL, "malloc");
  size_t u = malloc_usable_size(p);
  expect("free_sized (size larger than the block)", "invalid pointer", p);
  free_sized(p, opaque_size(u + 4096));
  free(p); /* warn/ignore: the block was not freed */
}

/* Double free of a large (arena) block and of a dedicated mapping. */
static void double_large(size_t n)
{
  g_cls = n;
  void *keep = malloc(n); /* keeps the arena/mapping cache populated */
  void *p = malloc(n);
  CHECK(p != NULL && keep != NULL, "malloc(%zu)", n);
  memset(p, 1, 4096);
  free(p);
  printf("EXPECT hakmem: free(): double free of %p|hakmem: free(): invalid pointer %p\n", p, p);
  fflush(stdout);
  free(opaque_ptr(p));
  free(keep);
}
static void case_double_large(void) { double_large(3 << 20); }
static void case_double_huge(void) { double_large(40 << 20); }

/* Free list link overwritten after free (use after free): the secure and
 * debug builds decode links with a key and check them; the default build's
 * plain links are followed. */
static void case_corrupt_link(void)
{
  g_cls = 64;
  void *p[8];
  for (int i = 0; i < 8; i++) CHECK((p[i] = malloc(64)) != NULL, "malloc");
  for (int i = 0; i < 8; i++) free(p[i]);
  /* the last freed block is the head of the free list: smash its link */
  void *h = opaque_ptr(p[7]);
  memset(h, 0x41, 16);
  expect_corruption();
  for (int i = 0; i < 8; i++) p[i] = malloc(64);
  for (int i = 0; i < 8; i++) free(p[i]);
}

/* glibc's blocks are forwarded to glibc (no report, no crash) */
static void case_libc_forward(void)
{
  printf("EXPECT \n");
  fflush(stdout);
  for (int round = 0; round < 3; round++) {
    void *(*glibc_malloc)(size_t) = GLIBC_FN(void *(*)(size_t), "malloc");
    char *a = glibc_malloc(100), *b = glibc_malloc(100000), *c = glibc_malloc(5 << 20);
    CHECK(a && b && c, "glibc's malloc");
    memset(a, 1, 100);
    memset(b, 2, 100000);
    CHECK(malloc_usable_size(a) >= 100, "malloc_usable_size(glibc block) = %zu", malloc_usable_size(a));
    a = realloc(a, 200); /* stays glibc's */
    CHECK(a != NULL && a[99] == 1, "realloc of a glibc block");
    free(a);
    free(b);
    free(c);
  }
}

/* ---- issue 10: every kind of bad free through every entry point ---------- */

#if DEATH_OVERRIDE
/* tests/badfree_cxx.cpp: ::operator delete / delete[] of a pointer */
void cxx_delete(void *p);
void cxx_delete_sized(void *p, size_t n);
#endif

enum { E_FREE, E_REALLOC, E_SIZED, E_THREAD, E_CXX, E_USABLE, E_N };
static const char *const entry_name[E_N] = {"free", "realloc", "free_sized", "thread", "cxx", "usable"};
/* the call named in the report */
static const char *const entry_call[E_N] = {"free", "realloc", "free_sized", "free", "free", "malloc_usable_size"};

typedef struct {
  const char *name;
  size_t size, align; /* the block: malloc(size) or aligned_alloc(align, size) */
  size_t off;         /* interior pointer: block + off */
  int freed;          /* 1: free(a) then the bad call on a; 2: free(a); free(b); bad call on a */
  unsigned entries;   /* bit per E_* */
} kind_t;

#define EN(e) (1u << (e))
#define E_SMALL (EN(E_FREE) | EN(E_REALLOC) | EN(E_SIZED) | EN(E_THREAD) | EN(E_CXX))
#define E_LARGE_DBL (E_SMALL | EN(E_USABLE))
static const kind_t kinds[] = {
    {"small_int16", 100, 0, 16, 0, E_SMALL},
    {"small_int8", 100, 0, 8, 0, E_SMALL},
    {"small_int1", 100, 0, 1, 0, E_SMALL},
    {"small_dbl_head", 100, 0, 0, 1, E_SMALL},
    {"small_dbl_deep", 100, 0, 0, 2, E_SMALL},
    {"large2m_dbl", 2 << 20, 0, 0, 1, E_LARGE_DBL},
    {"large2m_int", 2 << 20, 0, 4096, 0, E_SMALL},
    {"huge64m_dbl", 64 << 20, 0, 0, 1, E_LARGE_DBL},
    {"huge64m_int", 64 << 20, 0, 4096, 0, E_SMALL},
    {"al4k_dbl", 3 * 4096, 4096, 0, 1, E_LARGE_DBL},
    {"al4k_int", 3 * 4096, 4096, 4096, 0, E_SMALL},
    {"al64k_dbl", 3 << 20, 65536, 0, 1, E_LARGE_DBL},
    {"al64k_int", 3 << 20, 65536, 4096, 0, E_SMALL},
    /* a dedicated mapping (2 MiB-aligned, 4 KiB) ends inside its 4 MiB region:
     * a pointer past its end must be reported without a read there */
    {"al2m_past", 4096, 2 << 20, 1 << 20, 0, E_SMALL},
};
enum { NKINDS = sizeof kinds / sizeof kinds[0] };

static void *thread_free_fn(void *p)
{
  free(p);
  return NULL;
}

static void free_in_thread(void *p)
{
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_free_fn, p) == 0, "pthread_create");
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
}

static void *kind_alloc(const kind_t *k)
{
  void *p = k->align ? aligned_alloc(k->align, k->size) : malloc(k->size);
  CHECK(p != NULL, "allocating the %s block (%zu B)", k->name, k->size);
  memset(p, 0x33, k->size < 8192 ? k->size : 8192);
  return p;
}

static void run_kind(const kind_t *k, int e)
{
  g_cls = k->size;
  char *a = kind_alloc(k), *bad = a + k->off;
  if (k->freed) {
    void *b = k->freed == 2 ? kind_alloc(k) : NULL;
    free(a);
    if (b) free(b);
  }
  const char *call = entry_call[e];
  /* a block already freed: large ones may say either; realloc/usable_size of a
   * freed small block may say either too; a second free must say double free */
  char ex[512];
  if (!k->freed)
    snprintf(ex, sizeof ex, "EXPECT hakmem: %s(): invalid pointer %p", call, (void *)bad);
  else if (k->size > 4096 * 3 || k->align || e == E_REALLOC || e == E_USABLE)
    snprintf(ex, sizeof ex, "EXPECT hakmem: %s(): double free of %p|hakmem: %s(): invalid pointer %p", call,
             (void *)bad, call, (void *)bad);
  else
    snprintf(ex, sizeof ex, "EXPECT hakmem: %s(): double free of %p", call, (void *)bad);
  if (e == E_CXX) /* the report may name free() or operator delete() */
    snprintf(ex + strlen(ex), sizeof ex - strlen(ex), "|hakmem: operator delete(): %s %p",
             k->freed ? "double free of" : "invalid pointer", (void *)bad);
  printf("%s\n", ex);
  fflush(stdout);
  void *q = opaque_ptr(bad);
  switch (e) {
  case E_FREE: free(q); break;
  case E_REALLOC: {
    void *r = realloc(q, 200);
    CHECK(r == NULL, "realloc of a bad pointer %p returned %p", q, r);
    break;
  }
  case E_SIZED: free_sized(q, k->size); break;
  case E_THREAD: free_in_thread(q); break;
#if DEATH_OVERRIDE
  case E_CXX:
    if (k->freed) cxx_delete_sized(q, k->size);
    else cxx_delete(q);
    break;
#endif
  case E_USABLE: {
    size_t n = malloc_usable_size(q);
    CHECK(n == 0, "malloc_usable_size of a freed pointer %p = %zu", q, n);
    break;
  }
  default: CHECK(0, "entry %d not built here", e);
  }
  /* warn/ignore: the call did nothing; a live block can still be freed */
  if (!k->freed) free(a);
}

/* ---- cross-thread double frees (kind 4) ---- */

/* the report may come from whichever call detects it (the second free, or a
 * later call that drains a remote-free queue); the pointer must be a */
static void expect_xt(void *a)
{
  printf("EXPECT hakmem: free(): double free of %p|(): double free of %p\n", a, a);
  fflush(stdout);
}

static void case_xt_remote_then_local(void)
{
  g_cls = 100;
  void *a = malloc(100);
  CHECK(a != NULL, "malloc");
  free_in_thread(a); /* a remote free */
  expect_xt(a);
  free(opaque_ptr(a));
}

static void case_xt_local_then_remote(void)
{
  g_cls = 100;
  void *a = malloc(100);
  CHECK(a != NULL, "malloc");
  free(a);
  expect_xt(a);
  free_in_thread(opaque_ptr(a)); /* reported by the thread (or aborts there) */
}

static void case_xt_remote_twice(void)
{
  g_cls = 100;
  void *a = malloc(100);
  CHECK(a != NULL, "malloc");
  free_in_thread(a);
  expect_xt(a);
  free_in_thread(opaque_ptr(a));
}

/* the owner is alive and busy elsewhere; this thread frees its block twice */
static pthread_mutex_t xt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t xt_cv = PTHREAD_COND_INITIALIZER;
static void *xt_block;
static int xt_done;

static void *xt_owner(void *arg)
{
  (void)arg;
  void *p = malloc(100);
  void *more[16];
  for (int i = 0; i < 16; i++) more[i] = malloc(100); /* the slab stays in use */
  pthread_mutex_lock(&xt_mu);
  xt_block = p;
  pthread_cond_broadcast(&xt_cv);
  while (!xt_done) pthread_cond_wait(&xt_cv, &xt_mu);
  pthread_mutex_unlock(&xt_mu);
  for (int i = 0; i < 16; i++) free(more[i]);
  return NULL;
}

static void case_xt_foreign_double(void)
{
  g_cls = 100;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, xt_owner, NULL) == 0, "pthread_create");
  pthread_mutex_lock(&xt_mu);
  while (!xt_block) pthread_cond_wait(&xt_cv, &xt_mu);
  void *a = xt_block;
  pthread_mutex_unlock(&xt_mu);
  free(a); /* remote free, the owner is alive */
  expect_xt(a);
  free(opaque_ptr(a));
  pthread_mutex_lock(&xt_mu);
  xt_done = 1;
  pthread_cond_broadcast(&xt_cv);
  pthread_mutex_unlock(&xt_mu);
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
}

/* ---- writes through a dangling pointer into a freed block (kind 5) ---- */

enum { TRACK_MAX = 512 };
static uintptr_t track_a[TRACK_MAX];
static size_t track_n[TRACK_MAX];
static int ntrack;

static void track(const void *p, size_t n)
{
  CHECK(ntrack < TRACK_MAX, "track");
  track_a[ntrack] = (uintptr_t)p;
  track_n[ntrack++] = n;
}

/* malloc(100) many times after the write: nothing returned may be the
 * written value or lie inside a live block */
static void uaf_mallocs(uintptr_t written)
{
  for (int i = 0; i < NLIVE; i++) track(live[i], live_sz[i]);
  void *got[200];
  for (int i = 0; i < 200; i++) {
    void *r = malloc(100);
    CHECK(r != NULL, "malloc(100) #%d after the use-after-free write", i);
    uintptr_t x = (uintptr_t)r;
    CHECK(x != written, "malloc(100) #%d returned the value written into the freed block (%p)", i, r);
    for (int k = 0; k < ntrack; k++)
      CHECK(x + 100 <= track_a[k] || x >= track_a[k] + track_n[k],
            "malloc(100) #%d returned %p, inside the live block %p+%zu", i, r, (void *)track_a[k], track_n[k]);
    memset(r, 0x77, 100);
    track(r, 100);
    got[i] = r;
  }
  for (int i = 0; i < 200; i++) free(got[i]);
}

static void expect_corruption(void)
{
  printf("EXPECT hakmem: malloc(): heap corruption detected at 0x\n");
  fflush(stdout);
}

/* freed block at the head of its list, or deeper, gets a garbage first word */
static void uaf_write(int which, uintptr_t val)
{
  g_cls = 100;
  void *p[8];
  for (int i = 0; i < 8; i++) CHECK((p[i] = malloc(100)) != NULL, "malloc");
  for (int i = 0; i < 8; i++) free(p[i]);
  expect_corruption();
  void *victim = opaque_ptr(p[which]);
  *(volatile uintptr_t *)victim = val;
  uaf_mallocs(val);
}

static void case_uaf_garbage_head(void) { uaf_write(7, (uintptr_t)0x4141414141414141ull); }
static void case_uaf_garbage_deep(void) { uaf_write(3, (uintptr_t)0x4141414141414141ull); }

static void *uaf_live_blk;
static void case_uaf_live_same(void)
{
  uaf_live_blk = malloc(100);
  CHECK(uaf_live_blk != NULL, "malloc");
  pat_fill(uaf_live_blk, 100, 77);
  track(uaf_live_blk, 100);
  uaf_write(7, (uintptr_t)uaf_live_blk);
  CHECK(pat_check(uaf_live_blk, 100, 77) == (size_t)-1, "the live block the freed link pointed to was overwritten");
  free(uaf_live_blk);
}

static void case_uaf_live_other(void)
{
  uaf_live_blk = malloc(1000);
  CHECK(uaf_live_blk != NULL, "malloc");
  pat_fill(uaf_live_blk, 1000, 78);
  track(uaf_live_blk, 1000);
  uaf_write(7, (uintptr_t)uaf_live_blk + 64);
  CHECK(pat_check(uaf_live_blk, 1000, 78) == (size_t)-1, "the live block the freed link pointed into was overwritten");
  free(uaf_live_blk);
}

/* the block sits in its owner's remote-free queue when it is overwritten */
static void case_uaf_remote(void)
{
  g_cls = 100;
  void *p[8];
  for (int i = 0; i < 8; i++) CHECK((p[i] = malloc(100)) != NULL, "malloc");
  for (int i = 0; i < 8; i++) free_in_thread(p[i]);
  expect_corruption();
  *(volatile uintptr_t *)opaque_ptr(p[7]) = (uintptr_t)0x4141414141414141ull;
  *(volatile uintptr_t *)opaque_ptr(p[3]) = (uintptr_t)0x4242424242424240ull;
  uaf_mallocs((uintptr_t)0x4141414141414141ull);
}

typedef struct {
  const char *name;
  void (*fn)(void);
  unsigned flavours; /* builds where the error is detected */
  int always_abort;  /* heap corruption aborts whatever ON_ERROR says */
  int no_error;      /* nothing must be reported at all */
  const char *env;   /* extra environment (NAME=VALUE) */
  const char *group; /* --group=: legacy, small, large, xthread, corrupt */
  const kind_t *kind; /* generated cases: kind x entry */
  int entry;
} dcase_t;

static const dcase_t cases[] = {
    {"free_stack", case_free_stack, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"free_protnone", case_free_protnone, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"free_static", case_free_static, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"free_interior_large", case_free_interior_large, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"free_interior_huge", case_free_interior_huge, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"free_interior_small", case_free_interior_small, FL_CHECKED, 0, 0, NULL, "legacy", NULL, 0},
    {"realloc_garbage", case_realloc_garbage, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"realloc_stack", case_realloc_stack, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"usable_garbage", case_usable_garbage, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    /* free(p); free(p): p is the head of its free list (the fast path checks) */
    {"double_small", case_double_small, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"double_deep", case_double_deep, FL_CHECKED, 0, 0, NULL, "legacy", NULL, 0},
    {"double_retired", case_double_retired, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    /* the profiler sends every free through the slow path (head-of-list check) */
    /* The profiler on, its sampled blocks aside: a sampled block belongs to
     * the profiling heap, not to the thread, and the default build sees a
     * double free only at the head of the calling thread's own list. With
     * the default gap (512 KiB) the block was the sampled one in about one
     * run in twelve (a pending sample goes to the next refill of any class,
     * and this class's first allocation refills); a 1 TiB gap (1024G) makes that
     * about one in ten million. */
    {"double_small_prof", case_double_small, FL_ALL, 0, 0, "HAKMEM_PROF=1 HAKMEM_PROF_SAMPLE=1024G", "legacy", NULL, 0},
    {"double_full", case_double_full, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"free_sized_wrong", case_free_sized_wrong, FL_DEBUG, 0, 0, NULL, "legacy", NULL, 0},
    {"double_large", case_double_large, FL_ALL, 0, 0, NULL, "legacy", NULL, 0},
    {"double_huge", case_double_huge, FL_ALL, 0, 0, "HAKMEM_LARGE_CACHE=0", "legacy", NULL, 0},
    {"corrupt_link", case_corrupt_link, FL_CHECKED, 0, 0, NULL, "corrupt", NULL, 0},
    {"libc_forward", case_libc_forward, FL_ALL, 0, 1, NULL, "legacy", NULL, 0},
    /* issue 10, kind 4: cross-thread double frees (the free mark: the
     * default build reads no other thread's list) */
    {"xt_remote_then_local", case_xt_remote_then_local, FL_CHECKED, 0, 0, NULL, "xthread", NULL, 0},
    {"xt_local_then_remote", case_xt_local_then_remote, FL_CHECKED, 0, 0, NULL, "xthread", NULL, 0},
    {"xt_remote_twice", case_xt_remote_twice, FL_CHECKED, 0, 0, NULL, "xthread", NULL, 0},
    {"xt_foreign_double", case_xt_foreign_double, FL_CHECKED, 0, 0, NULL, "xthread", NULL, 0},
    /* issue 10, kind 5: use-after-free writes of a freed block's first word
     * (encoded links: secure and debug) */
    {"uaf_garbage_head", case_uaf_garbage_head, FL_CHECKED, 0, 0, NULL, "corrupt", NULL, 0},
    {"uaf_garbage_deep", case_uaf_garbage_deep, FL_CHECKED, 0, 0, NULL, "corrupt", NULL, 0},
    {"uaf_live_same", case_uaf_live_same, FL_CHECKED, 0, 0, NULL, "corrupt", NULL, 0},
    {"uaf_live_other", case_uaf_live_other, FL_CHECKED, 0, 0, NULL, "corrupt", NULL, 0},
    {"uaf_remote", case_uaf_remote, FL_CHECKED, 0, 0, NULL, "corrupt", NULL, 0},
};
/* + kinds x entries (issue 10, kinds 1, 2, 3, 6), built by build_cases() */
enum { NMAX = sizeof cases / sizeof cases[0] + NKINDS * E_N };
static dcase_t all[NMAX];
static char all_names[NKINDS * E_N][48];
static int NCASES;

/* Does the default build claim kind k through entry e? Blocks above 1 MiB
 * or aligned above 1 MiB are large.c's: every entry (slow paths). A slab
 * block: a double free only while it heads the freeing thread's own list
 * (not from another thread), an interior pointer only where a slow path
 * looks (realloc, malloc_usable_size, a free from another thread). */
static unsigned kind_default(const kind_t *k, int e)
{
  if (k->size > ((size_t)1 << 20) || k->align > ((size_t)1 << 20)) return FL_DEFAULT;
  if (k->off) return e == E_REALLOC || e == E_USABLE || e == E_THREAD ? FL_DEFAULT : 0;
  return k->freed == 1 && e != E_THREAD ? FL_DEFAULT : 0;
}

static void build_cases(void)
{
  int n = 0, g = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) all[n++] = cases[i];
  for (int k = 0; k < NKINDS; k++)
    for (int e = 0; e < E_N; e++) {
      if (!(kinds[k].entries & EN(e))) continue;
      if (e == E_CXX && !DEATH_OVERRIDE) continue; /* operator delete is hakmem's only in libhakmem*.so */
      snprintf(all_names[g], sizeof all_names[g], "%s_%s", kinds[k].name, entry_name[e]);
      dcase_t c = {all_names[g++], NULL, FL_CHECKED | kind_default(&kinds[k], e), 0, 0, NULL, kinds[k].size > 4096 * 3 || kinds[k].align ? "large" : "small",
                   &kinds[k], e};
      all[n++] = c;
    }
  NCASES = n;
}


/* ---- parent side --------------------------------------------------------- */

enum { CASE_TIMEOUT = 10 }; /* seconds per child */

static char *slurp(int fd)
{
  size_t cap = 4096, n = 0;
  char *b = __libc_malloc(cap);
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    if (n + 1024 > cap) b = __libc_realloc(b, cap *= 2);
    ssize_t r = read(fd, b + n, cap - n - 1);
    if (r <= 0) break;
    n += (size_t)r;
  }
  b[n] = 0;
  return b;
}

/* does stderr hold one of the '|'-separated expected reports? */
static int has_report(const char *err, const char *ex)
{
  char alt[512];
  for (const char *s = ex;;) {
    const char *bar = strchr(s, '|');
    size_t n = bar ? (size_t)(bar - s) : strlen(s);
    if (n >= sizeof alt) n = sizeof alt - 1;
    memcpy(alt, s, n);
    alt[n] = 0;
    if (strstr(err, alt)) return 1;
    if (!bar) return 0;
    s = bar + 1;
  }
}

static int run_case(const char *self, const dcase_t *c, const char *mode)
{
  char tmpo[] = "/tmp/hakdeath.o.XXXXXX", tmpe[] = "/tmp/hakdeath.e.XXXXXX";
  int fo = mkstemp(tmpo), fe = mkstemp(tmpe);
  CHECK(fo >= 0 && fe >= 0, "mkstemp");
  unlink(tmpo);
  unlink(tmpe);
  /* A case run with the profiler writes an exit profile where
   * HAKMEM_PROF_FILE says; a prefix of this run's, removed after the
   * child, keeps hakmem-prof.PID.* out of the working directory. */
  char prof[64];
  snprintf(prof, sizeof prof, "HAKMEM_PROF_FILE=/tmp/hakdeath.p.%d", (int)getpid());
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(fo, 1);
    dup2(fe, 2);
    char arg[128], envm[64];
    snprintf(arg, sizeof arg, "--case=%s", c->name);
    snprintf(envm, sizeof envm, "HAKMEM_ON_ERROR=%s", mode);
    putenv(envm);
    putenv(prof); /* before the case's words, which may set their own */
    if (c->env) { /* NAME=VALUE words, space-separated */
      for (char *w = strtok(strdup(c->env), " "); w != NULL; w = strtok(NULL, " ")) putenv(w);
    }
    alarm(CASE_TIMEOUT); /* kept across exec: a hang (e.g. a cycle in a free list) fails the case */
    execl(self, self, arg, (char *)NULL);
    _exit(127);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
  static const char *const prof_ext[] = {".heap", ".folded", ".txt"};
  for (unsigned k = 0; k < 3; k++) {
    char path[96];
    snprintf(path, sizeof path, "%s%s", prof + strlen("HAKMEM_PROF_FILE="), prof_ext[k]);
    unlink(path);
  }
  char *out = slurp(fo), *err = slurp(fe);
  close(fo);
  close(fe);
  char *ex = strstr(out, "EXPECT ");
  CHECK(ex != NULL, "[%s %s] child printed no EXPECT line (status 0x%x)\nstdout: %s\nstderr: %s", c->name, mode,
        st, out, err);
  ex += 7;
  char *nl = strchr(ex, '\n');
  if (nl) *nl = 0;
  int cont = strstr(nl ? nl + 1 : ex, "CONTINUED") != NULL;
  int detect = (c->flavours & FL_SELF) != 0;
  int failed = 0;
  int hung = WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM;
  CHECK(detect || c->no_error, "case %s is not for this build", c->name);
#define DFAIL(...)                                                             \
  do {                                                                         \
    fprintf(stderr, "FAIL [%s, ON_ERROR=%s]: ", c->name, mode);                \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n  child stdout: %s\n  child stderr: %s\n", out, err);   \
    failed = 1;                                                                \
  } while (0)
  if (hung) {
    DFAIL("the child hung (killed by SIGALRM after %d s)", (int)CASE_TIMEOUT);
  } else if (c->no_error || !detect) {
    /* nothing to report: must run to the end, silently */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      DFAIL("child did not exit 0 (status 0x%x%s%s)", st, WIFSIGNALED(st) ? ", signal " : "",
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
    else if (c->no_error && err[0] != 0)
      DFAIL("unexpected output on stderr");
  } else if (c->always_abort || strcmp(mode, "abort") == 0) {
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
      DFAIL("expected the report \"%s\" and death by SIGABRT, got status 0x%x (%s)", ex, st,
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited");
    else if (!has_report(err, ex))
      DFAIL("stderr lacks \"%s\"", ex);
    else if (cont)
      DFAIL("child continued past the error");
  } else if (strcmp(mode, "warn") == 0) {
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !cont)
      DFAIL("expected the child to report \"%s\" and continue, got status 0x%x (%s)", ex, st,
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited");
    else if (!has_report(err, ex))
      DFAIL("stderr lacks \"%s\"", ex);
  } else {
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !cont)
      DFAIL("expected the child to continue silently, got status 0x%x (%s)", st,
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited");
    else if (err[0] != 0)
      DFAIL("ON_ERROR=ignore printed something");
  }
  if (!failed)
    printf("  ok   %-26s ON_ERROR=%-6s %s%s\n", c->name, mode,
           c->no_error ? "forwarded, nothing reported" : "",
           detect && !c->no_error ? ex : "");
  __libc_free(out);
  __libc_free(err);
  return failed && hung ? 2 : failed;
}

int main(int argc, char **argv)
{
  const char *one = NULL, *group = NULL, *only = NULL;
  build_cases();
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--case=", 7) == 0) one = argv[i] + 7;
    if (strncmp(argv[i], "--group=", 8) == 0) group = argv[i] + 8;
    if (strncmp(argv[i], "--only=", 7) == 0) only = argv[i] + 7;
    if (strcmp(argv[i], "--list") == 0) {
      for (int k = 0; k < NCASES; k++) printf("%-26s %s\n", all[k].name, all[k].group);
      return 0;
    }
  }
  if (one) {
    for (int k = 0; k < NCASES; k++)
      if (strcmp(all[k].name, one) == 0) {
        live_make();
        if (all[k].fn) all[k].fn();
        else run_kind(all[k].kind, all[k].entry);
        continued();
        return 0;
      }
    fprintf(stderr, "unknown case %s\n", one);
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(n > 0, "readlink /proc/self/exe");
  self[n] = 0;
  printf("test_death: %s build (hakmem %s)%s%s\n", flavour_name[DEATH_FLAVOUR], hak_version(), group ? ", group " : "",
         group ? group : "");
  fflush(stdout);
  static const char *const modes[] = {"abort", "warn", "ignore"};
  int fails = 0, runs = 0;
  for (int k = 0; k < NCASES; k++) {
    if (group && strcmp(all[k].group, group) != 0) continue;
    if (only && strcmp(all[k].name, only) != 0) continue;
    if (!(all[k].flavours & FL_SELF)) {
      /* undetected in this build: the call is undefined behaviour, not run */
      printf("  skip %-26s (not detected in this build)\n", all[k].name);
      continue;
    }
    for (int m = 0; m < 3; m++) {
      int r = run_case(self, &all[k], modes[m]);
      fails += r != 0;
      runs++;
      fflush(stdout);
      if (r == 2 && m < 2) { /* a hang: the other modes would hang too; keep the run short */
        printf("FAIL [%s]: other modes not run after the hang\n", all[k].name);
        fails += 2 - m;
        runs += 2 - m;
        break;
      }
    }
  }
  printf("test_death: %d of %d case runs failed\n", fails, runs);
  return fails ? 1 : 0;
}
