/*
 * testutil.h — helpers shared by the hakmem tests: a seeded PRNG, content
 * patterns derived from a 64-bit key, argument/env parsing, the clock, a
 * deadline for forked children, lists and arrays of filled blocks, and the
 * USE_HAK_API mapping of the standard allocator names onto the hak_ API.
 *
 * Include this AFTER every system header: with USE_HAK_API it #defines
 * malloc, free, ... to their hak_ counterparts so one test source can be
 * built both against the malloc override (standard names) and against a
 * sanitized copy of the core (hak_ names, system allocator left alone).
 */
#ifndef HAKMEM_TESTS_TESTUTIL_H
#define HAKMEM_TESTS_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hakmem.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A statistics snapshot (hak_stats_get with the caller's full size). */
static inline void tu_stats(struct hak_stats *st)
{
  memset(st, 0, sizeof *st);
  st->size = sizeof *st;
  CHECK(hak_stats_get(st) == 0, "hak_stats_get failed");
}

/* A 64-bit value read with hak_ctl (a statistic or a setting); the test
 * stops, failed, if the name cannot be read. */
static inline uint64_t tu_ctl_u64(const char *name)
{
  uint64_t v = 0;
  size_t len = sizeof v;
  if (hak_ctl(name, &v, &len, NULL, 0) != 0) {
    fprintf(stderr, "FAIL: hak_ctl could not read %s\n", name);
    exit(1);
  }
  return v;
}

/* The process's resident bytes (/proc/self/statm), read with open/read into
 * a stack buffer: no allocation, so it may be called between any two
 * allocator calls (and in a forked child). */
static inline size_t tu_rss_bytes(void)
{
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  CHECK(fd >= 0, "open /proc/self/statm");
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  CHECK(n > 0, "read /proc/self/statm");
  buf[n] = 0;
  char *q = buf;
  while (*q && *q != ' ') q++;
  return (size_t)strtoul(q, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

/* Seconds on the monotonic clock: for deadlines and durations. */
static inline double tu_now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits for the child pid at most secs seconds: waitpid's result (pid, or
 * -1 with errno), or 0 when the child was still running then; it is killed
 * and reaped, so that a child hung (a lock held across fork, exit blocked)
 * fails its test instead of hanging it. *status as waitpid sets it. */
static inline pid_t tu_wait_child(pid_t pid, int *status, double secs)
{
  double deadline = tu_now_s() + secs;
  pid_t w;
  while ((w = waitpid(pid, status, WNOHANG)) == 0) {
    if (tu_now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, status, 0);
      return 0;
    }
    usleep(500);
  }
  return w;
}

/* A figure's verdict: 1 (and msg on stderr) when bad, else 0; a test ORs
 * them, so that every failed check is told, not only the first. */
static inline int tu_fail_if(int bad, const char *msg)
{
  if (bad) fprintf(stderr, "FAIL: %s\n", msg);
  return bad != 0;
}

/* The calling thread's heap maps its first superslab now (the block is
 * returned, for the caller to free), then ms milliseconds pass: a heap
 * purges before it grows at most once a quarter of the purge delay, so
 * its next growth after them purges. Then fn starts on a thread of its
 * own (*t). Exits on failure. */
static inline void *tu_heap_then_thread(long ms, pthread_t *t, void *(*fn)(void *))
{
  void *first = malloc(64);
  struct timespec q = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&q, NULL);
  if (first == NULL || pthread_create(t, NULL, fn, NULL) != 0) {
    fprintf(stderr, "FAIL: malloc(64) or pthread_create\n");
    exit(1);
  }
  return first;
}

/* The live sampled blocks of a profile dump: the first count of
 * PREFIX.heap's header line ("heap profile: N: ..."); -1 without one. */
static inline long tu_heap_samples(const char *prefix)
{
  char path[600], line[256];
  snprintf(path, sizeof path, "%s.heap", prefix);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "%s not written", path);
  long n = -1;
  if (fgets(line, sizeof line, f)) sscanf(line, "heap profile: %ld:", &n);
  fclose(f);
  return n;
}

#ifdef USE_HAK_API
#define malloc hak_malloc
#define calloc hak_calloc
#define realloc hak_realloc
#define reallocarray hak_reallocarray
#define free hak_free
#define free_sized hak_free_sized
#define free_aligned_sized hak_free_aligned_sized
#define aligned_alloc hak_aligned_alloc
#define memalign hak_memalign
#define posix_memalign hak_posix_memalign
#define valloc hak_valloc
#define pvalloc hak_pvalloc
#define malloc_usable_size hak_usable_size
#define TEST_API_NAME "hak_ API"
#else
/* C23 names; glibc < 2.39 does not declare them, libhakmem exports them. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t alignment, size_t size);
#define TEST_API_NAME "standard names (override)"
#endif

/* hak_owns() on a pointer laundered through opaque_ptr (see check.h) */
#define OWNS(p) hak_owns(opaque_ptr(p))

/* ---- blocks chained through their first word (no side table to allocate) ---- */
typedef struct node { struct node *next; } node_t;

/* A block of sz bytes with every page written (resident), pushed on *head;
 * got (bytes so far) only names the point of a failure. */
static inline void node_push_touched(node_t **head, size_t sz, size_t got)
{
  node_t *b = (node_t *)malloc(sz);
  CHECK(b != NULL, "malloc(%zu) after %zu MiB", sz, got >> 20);
  memset(b, 0x5a, sz);
  b->next = *head;
  *head = b;
}

static inline void node_list_free(node_t *h)
{
  while (h) {
    node_t *nx = h->next;
    free(h);
    h = nx;
  }
}

/* ---- PRNG: xoshiro256** seeded by splitmix64 ---- */
typedef struct { uint64_t s[4]; } rng_t;

static inline uint64_t splitmix64(uint64_t *x)
{
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *r, uint64_t seed)
{
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rng_next(rng_t *r)
{
  uint64_t *s = r->s;
  uint64_t t = s[1] << 17;
  uint64_t res = s[1] * 5;
  res = ((res << 7) | (res >> 57)) * 9;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return res;
}

/* uniform in [0, n) (n > 0) */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
  return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

/* uniform in [lo, hi] */
static inline uint64_t rng_range(rng_t *r, uint64_t lo, uint64_t hi)
{
  return lo + rng_below(r, hi - lo + 1);
}

/* log-uniform in [lo, hi] (lo >= 1) */
static inline size_t rng_logsize(rng_t *r, size_t lo, size_t hi)
{
  unsigned blo = 63 - (unsigned)__builtin_clzll(lo);
  unsigned bhi = 63 - (unsigned)__builtin_clzll(hi);
  unsigned b = (unsigned)rng_range(r, blo, bhi);
  size_t a = (size_t)1 << b, z = ((size_t)2 << b) - 1;
  if (a < lo) a = lo;
  if (z > hi) z = hi;
  return (size_t)rng_range(r, a, z);
}

/* ---- content patterns ----
 * Byte i of a block with key k is byte (i % 8) of pat_word(k, i / 8), so any
 * sub-range can be filled or checked independently. */
static inline uint64_t pat_word(uint64_t key, uint64_t j)
{
  uint64_t x = key ^ (j * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

static inline uint8_t pat_byte(uint64_t key, size_t i)
{
  return (uint8_t)(pat_word(key, i >> 3) >> ((i & 7) * 8));
}

/* fill [from, to) of p */
static inline void pat_fill_range(void *p, size_t from, size_t to, uint64_t key)
{
  uint8_t *b = (uint8_t *)p;
  size_t i = from;
  while (i < to && (i & 7)) { b[i] = pat_byte(key, i); i++; }
  for (; i + 8 <= to; i += 8) {
    uint64_t w = pat_word(key, i >> 3);
    memcpy(b + i, &w, 8);
  }
  while (i < to) { b[i] = pat_byte(key, i); i++; }
}

/* check [from, to) of p; returns offset of first bad byte or (size_t)-1 */
static inline size_t pat_check_range(const void *p, size_t from, size_t to, uint64_t key)
{
  const uint8_t *b = (const uint8_t *)p;
  size_t i = from;
  while (i < to && (i & 7)) { if (b[i] != pat_byte(key, i)) return i; i++; }
  for (; i + 8 <= to; i += 8) {
    uint64_t w = pat_word(key, i >> 3), v;
    memcpy(&v, b + i, 8);
    if (v != w) {
      for (size_t k = 0; k < 8; k++)
        if (b[i + k] != pat_byte(key, i + k)) return i + k;
    }
  }
  while (i < to) { if (b[i] != pat_byte(key, i)) return i; i++; }
  return (size_t)-1;
}

static inline void pat_fill(void *p, size_t n, uint64_t key) { pat_fill_range(p, 0, n, key); }
static inline size_t pat_check(const void *p, size_t n, uint64_t key) { return pat_check_range(p, 0, n, key); }

/* n blocks of sz bytes in blk[], block i filled whole with key key0 + i */
static inline void tu_alloc_filled(void **blk, unsigned n, size_t sz, uint64_t key0)
{
  for (unsigned i = 0; i < n; i++) {
    blk[i] = malloc(sz);
    CHECK(blk[i] != NULL, "malloc(%zu) returned NULL", sz);
    pat_fill(blk[i], sz, key0 + i);
  }
}

/* One run: n blocks of sz bytes in blk[], filled whole (keys key0 + i),
 * checked and freed; returns how many lost their pattern. */
static inline int tu_run_filled(void **blk, unsigned n, size_t sz, uint64_t key0)
{
  tu_alloc_filled(blk, n, sz, key0);
  int bad = 0;
  for (unsigned i = 0; i < n; i++)
    if (pat_check(blk[i], sz, key0 + i) != (size_t)-1) bad++;
  for (unsigned i = 0; i < n; i++) free(blk[i]);
  return bad;
}

/* Runs of run_bytes of each of the nsizes sizes in turn (tu_run_filled,
 * blk[] big enough for the smallest size), one right after the other: adds to *bad
 * the blocks that lost their pattern, prints RSS after each run and
 * returns how much RSS after the last run exceeds RSS after the first
 * (the largest excess after any run if max). The figures are printed
 * at the end: stdio's first output would touch pages of its own between
 * two readings, and so would the first call of each libc function
 * tu_rss_bytes uses (a fault-around window of libc's text each): it runs
 * once before the first reading. */
static inline size_t tu_runs_growth(const size_t *sizes, unsigned nsizes, size_t run_bytes, void **blk, int *bad,
                                    bool max)
{
  size_t rss[64], top = 0;
  CHECK(nsizes >= 1 && nsizes <= 64, "%u sizes, 1 to 64 allowed", nsizes);
  (void)tu_rss_bytes();
  for (unsigned k = 0; k < nsizes; k++) {
    *bad += tu_run_filled(blk, (unsigned)(run_bytes / sizes[k]), sizes[k], (uint64_t)(k + 1) << 32);
    rss[k] = tu_rss_bytes();
    if (rss[k] > rss[0] && rss[k] - rss[0] > top) top = rss[k] - rss[0];
  }
  for (unsigned k = 0; k < nsizes; k++) printf("after run %u (%zu B): RSS %zu KiB\n", k + 1, sizes[k], rss[k] >> 10);
  if (max) return top;
  return rss[nsizes - 1] > rss[0] ? rss[nsizes - 1] - rss[0] : 0;
}

static inline int tu_cmp_ptr(const void *a, const void *b)
{
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

/* per blocks of every one of the nsizes sizes live at once (at most 1024
 * in all), each filled whole with key0 + its index: counts the blocks that
 * lost their pattern (*corrupt) and the addresses handed out twice
 * (*twice), then frees them. After a test moved slabs between classes,
 * each block must still be its class's alone. */
static inline void tu_sizes_at_once(const size_t *sizes, unsigned nsizes, unsigned per, uint64_t key0, int *corrupt,
                                    int *twice)
{
  static void *all[1024];
  unsigned m = 0;
  CHECK(nsizes * per <= 1024, "%u blocks asked for, at most 1024", nsizes * per);
  for (unsigned i = 0; i < per; i++)
    for (unsigned k = 0; k < nsizes; k++, m++) {
      all[m] = malloc(sizes[k]);
      CHECK(all[m] != NULL, "malloc(%zu) returned NULL", sizes[k]);
      CHECK(hak_usable_size(all[m]) >= sizes[k], "usable size of a %zu B block is %zu", sizes[k],
            hak_usable_size(all[m]));
      pat_fill(all[m], sizes[k], key0 + m);
    }
  *corrupt = 0;
  for (unsigned j = 0; j < m; j++)
    if (pat_check(all[j], sizes[j % nsizes], key0 + j) != (size_t)-1) (*corrupt)++;
  qsort(all, m, sizeof all[0], tu_cmp_ptr);
  *twice = 0;
  for (unsigned j = 1; j < m; j++)
    if (all[j] == all[j - 1]) (*twice)++;
  for (unsigned j = 0; j < m; j++) free(all[j]);
}

/* Blocks above PAT_SAMPLE_MIN are filled/checked only in "probe" regions:
 * the first and last 256 bytes and PAT_PROBES 64-byte windows spread evenly. */
#define PAT_SAMPLE_MIN ((size_t)256 * 1024)
#define PAT_PROBES 32

/* calls fn(p, from, to, key) on every probe region of an n-byte block that
 * lies inside [0, limit) */
#define PAT_FOR_PROBES(n, limit, FROM, TO, BODY)                              \
  do {                                                                        \
    size_t n_ = (n), lim_ = (limit);                                          \
    for (int k_ = -1; k_ <= PAT_PROBES; k_++) {                               \
      size_t FROM, TO;                                                        \
      if (k_ == -1) { FROM = 0; TO = 256; }                                   \
      else if (k_ == PAT_PROBES) { FROM = n_ - 256; TO = n_; }                \
      else { FROM = (n_ / (PAT_PROBES + 1)) * (size_t)(k_ + 1) & ~(size_t)63; \
             TO = FROM + 64; }                                                \
      if (TO > lim_) TO = lim_;                                               \
      if (FROM >= TO) continue;                                               \
      BODY;                                                                   \
    }                                                                         \
  } while (0)

/* fill a block of n bytes: fully if small, probe regions if big */
static inline void blk_fill(void *p, size_t n, uint64_t key)
{
  if (n <= PAT_SAMPLE_MIN) { pat_fill(p, n, key); return; }
  PAT_FOR_PROBES(n, n, f, t, pat_fill_range(p, f, t, key));
}

/* check the first `limit` bytes of a block that was blk_fill'ed with size n */
static inline size_t blk_check(const void *p, size_t n, size_t limit, uint64_t key)
{
  if (limit > n) limit = n;
  if (n <= PAT_SAMPLE_MIN) return pat_check(p, limit, key);
  size_t bad = (size_t)-1;
  PAT_FOR_PROBES(n, limit, f, t, {
    size_t r = pat_check_range(p, f, t, key);
    if (r != (size_t)-1) { bad = r; break; }
  });
  return bad;
}

/* glibc's own definition of name (its malloc, free...): hakmem exports
 * the standard names and glibc's __libc_* ones, so only a lookup in
 * glibc's object reaches glibc's allocator. Exits if it is missing. */
#include <dlfcn.h>
static inline void *glibc_fn(const char *name)
{
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *f = libc ? dlsym(libc, name) : NULL;
  if (f == NULL) {
    fprintf(stderr, "glibc_fn: no %s in libc.so.6\n", name);
    exit(1);
  }
  return f;
}
#define GLIBC_FN(type, name) ((type)(uintptr_t)glibc_fn(name))

/* first nonzero byte offset in [0, n) or (size_t)-1 */
static inline size_t first_nonzero(const void *p, size_t n)
{
  const uint8_t *b = (const uint8_t *)p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, b + i, 8);
    if (v) break;
  }
  for (; i < n; i++) if (b[i]) return i;
  return (size_t)-1;
}

/* ---- parameters: "--name=value" argument, else environment, else default ---- */
static inline unsigned long long test_param(int argc, char **argv, const char *name,
                                            const char *env, unsigned long long dflt)
{
  size_t nl = strlen(name);
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1] == '-' && strncmp(argv[i] + 2, name, nl) == 0 &&
        argv[i][2 + nl] == '=')
      return strtoull(argv[i] + 3 + nl, NULL, 0);
  }
  if (env) {
    const char *v = getenv(env);
    if (v && *v) return strtoull(v, NULL, 0);
  }
  return dflt;
}

#endif /* HAKMEM_TESTS_TESTUTIL_H */
