/*
 * test_xreuse.c — blocks freed by threads that do not own them, and reused
 * by those threads (issue 19: the freeing thread's cache of foreign blocks,
 * heap.c), plus many threads with small working sets.
 *
 *   test_xreuse <ring|exit|many|fork|all> [--scale=N] [--threads=N] [--seed=S]
 *     ring   threads in a ring pass pattern-filled blocks to the next one,
 *            which checks and frees them and allocates in their place (the
 *            blocks it may reuse); a block handed out twice shows up as an
 *            overwritten pattern at its next check
 *     exit   threads free blocks the main thread allocated, allocate a few
 *            of the same classes, and exit: over rounds, the small bytes in
 *            use do not grow (nothing is stranded in an exited thread)
 *     many   64 threads alive at once, each with a small working set and
 *            frees across threads: the resident set stays within a bound
 *            (generous: 96 MiB over the start, about 1.5 MiB a thread)
 *     fork   fork while other threads hold foreign blocks they freed; the
 *            child allocates, checks and frees, and exits 0
 * Built against libhakmem.so, and with -DUSE_HAK_API against the core built
 * keeping every foreign block (-DHEAP_XC_ALWAYS=1; the library keeps only
 * an idle owner's) and under ThreadSanitizer.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static unsigned g_scale = 1, g_threads = 4;
static uint64_t g_seed = 1;

typedef struct {
  unsigned char *p;
  size_t n;
  uint64_t key;
} xb_t;

/* A bounded single-lock queue of blocks. */
#define QCAP 512
typedef struct {
  pthread_mutex_t m;
  pthread_cond_t c;
  xb_t q[QCAP];
  unsigned head, n;
  int closed;
} queue_t;

static void q_init(queue_t *q)
{
  pthread_mutex_init(&q->m, NULL);
  pthread_cond_init(&q->c, NULL);
  q->head = q->n = 0;
  q->closed = 0;
}
static int q_push(queue_t *q, xb_t b)
{
  pthread_mutex_lock(&q->m);
  int ok = q->n < QCAP;
  if (ok) {
    q->q[(q->head + q->n) % QCAP] = b;
    q->n++;
  }
  pthread_mutex_unlock(&q->m);
  return ok;
}
static int q_pop(queue_t *q, xb_t *b)
{
  pthread_mutex_lock(&q->m);
  int ok = q->n > 0;
  if (ok) {
    *b = q->q[q->head];
    q->head = (q->head + 1) % QCAP;
    q->n--;
  }
  pthread_mutex_unlock(&q->m);
  return ok;
}

static xb_t xb_new(rng_t *r, size_t lo, size_t hi)
{
  xb_t b;
  b.n = (size_t)rng_range(r, lo, hi);
  b.key = rng_next(r);
  b.p = malloc(b.n);
  CHECK(b.p != NULL, "malloc(%zu)", b.n);
  pat_fill(b.p, b.n, b.key);
  return b;
}
static void xb_free(xb_t b)
{
  size_t bad = pat_check(b.p, b.n, b.key);
  CHECK(bad == (size_t)-1, "block %p (%zu bytes) overwritten at %zu: handed out twice?", (void *)b.p, b.n, bad);
  free(b.p);
}

/* ---- ring ---- */

static queue_t *g_q;
static atomic_uint g_ring_done;

typedef struct {
  unsigned id;
  pthread_t t;
} worker_t;

#define KEEP 64
static void *ring_run(void *arg)
{
  worker_t *w = arg;
  rng_t r;
  rng_seed(&r, g_seed * 977 + w->id);
  queue_t *out = &g_q[(w->id + 1) % g_threads], *in = &g_q[w->id];
  xb_t keep[KEEP];
  for (unsigned i = 0; i < KEEP; i++) keep[i] = xb_new(&r, 16, 2048);
  unsigned long iters = 20000ul * g_scale;
  for (unsigned long it = 0; it < iters; it++) {
    xb_t b = xb_new(&r, 16, rng_below(&r, 8) == 0 ? 8192 : 512);
    if (!q_push(out, b)) xb_free(b);
    xb_t got;
    for (int k = 0; k < 4 && q_pop(in, &got); k++) {
      xb_free(got); /* another thread's block: kept for our next allocations */
      unsigned i = (unsigned)rng_below(&r, KEEP);
      xb_free(keep[i]);
      keep[i] = xb_new(&r, 16, 512); /* may be the block just freed */
    }
  }
  atomic_fetch_add(&g_ring_done, 1);
  /* Drain until every thread is done, then once more. */
  xb_t got;
  while (atomic_load(&g_ring_done) < g_threads)
    if (q_pop(in, &got)) xb_free(got);
  while (q_pop(in, &got)) xb_free(got);
  for (unsigned i = 0; i < KEEP; i++) xb_free(keep[i]);
  return NULL;
}

static void part_ring(void)
{
  g_q = calloc(g_threads, sizeof *g_q);
  CHECK(g_q != NULL, "calloc");
  for (unsigned i = 0; i < g_threads; i++) q_init(&g_q[i]);
  atomic_store(&g_ring_done, 0);
  worker_t *w = calloc(g_threads, sizeof *w);
  CHECK(w != NULL, "calloc");
  for (unsigned i = 0; i < g_threads; i++) {
    w[i].id = i;
    CHECK(pthread_create(&w[i].t, NULL, ring_run, &w[i]) == 0, "pthread_create");
  }
  for (unsigned i = 0; i < g_threads; i++) pthread_join(w[i].t, NULL);
  /* Stragglers pushed after a receiver's last drain. */
  for (unsigned i = 0; i < g_threads; i++) {
    xb_t got;
    while (q_pop(&g_q[i], &got)) xb_free(got);
  }
  free(w);
  free(g_q);
  printf("ring: %u threads ok\n", g_threads);
}

/* ---- exit ---- */

static size_t small_in_use(void)
{
  struct hak_stats st;
  tu_stats(&st);
  return st.small_bytes_in_use;
}

#define EXIT_N 4000
static xb_t *g_exit_blocks;

static void *exit_run(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed * 31 + id);
  xb_t mine[32];
  /* Allocate first, so the classes count as ones this thread uses. */
  for (unsigned i = 0; i < 32; i++) mine[i] = xb_new(&r, 16, 1024);
  for (unsigned i = id; i < EXIT_N; i += g_threads) {
    xb_free(g_exit_blocks[i]);
    if (i % 8 == 0) {
      unsigned k = (unsigned)rng_below(&r, 32);
      xb_free(mine[k]);
      mine[k] = xb_new(&r, 16, 1024);
    }
  }
  for (unsigned i = 0; i < 32; i++) xb_free(mine[i]);
  return NULL; /* exits with foreign blocks freed and nothing held */
}

static void part_exit(void)
{
  /* Blocks freed into the main thread's slabs by other threads count as in
   * use until the main thread next collects them, so one round's figure
   * says little; what must not happen is growth from round to round (a
   * block stranded in an exited thread's cache stays in use forever: 4000
   * blocks are about 2 MiB a round). */
  size_t first = 0, before = small_in_use();
  unsigned rounds = 4 * g_scale;
  for (unsigned round = 0; round < rounds; round++) {
    rng_t r;
    rng_seed(&r, g_seed + round);
    g_exit_blocks = malloc(EXIT_N * sizeof *g_exit_blocks);
    CHECK(g_exit_blocks != NULL, "malloc");
    for (unsigned i = 0; i < EXIT_N; i++) g_exit_blocks[i] = xb_new(&r, 16, 1024);
    pthread_t t[64];
    unsigned n = g_threads < 64 ? g_threads : 64;
    for (unsigned i = 0; i < n; i++)
      CHECK(pthread_create(&t[i], NULL, exit_run, (void *)(uintptr_t)i) == 0, "pthread_create");
    for (unsigned i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(g_exit_blocks);
    hak_collect(1);
    size_t after = small_in_use();
    if (round == 0) first = after;
    CHECK(after <= first + 512 * 1024, "small bytes in use: %zu before, %zu after round 0, %zu after round %u",
          before, first, after, round);
  }
  printf("exit: in-use bytes %zu before, %zu after the first round, no growth over %u rounds\n", before, first,
         rounds);
}

/* ---- many ---- */

#define MANY 64
static pthread_barrier_t g_many_bar;
static queue_t g_many_q[MANY];
static atomic_size_t g_many_peak;

static void *many_run(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed * 7 + id);
  xb_t ws[48]; /* a small working set: about 12 KiB */
  for (unsigned i = 0; i < 48; i++) ws[i] = xb_new(&r, 16, 512);
  pthread_barrier_wait(&g_many_bar);
  for (unsigned long it = 0; it < 3000ul * g_scale; it++) {
    unsigned i = (unsigned)rng_below(&r, 48);
    if (!q_push(&g_many_q[(id + 1) % MANY], ws[i])) xb_free(ws[i]);
    ws[i] = xb_new(&r, 16, 512);
    xb_t got;
    if (q_pop(&g_many_q[id], &got)) xb_free(got);
  }
  size_t rss = tu_rss_bytes(), peak = atomic_load(&g_many_peak);
  while (rss > peak && !atomic_compare_exchange_weak(&g_many_peak, &peak, rss)) {}
  pthread_barrier_wait(&g_many_bar); /* everyone still alive here */
  xb_t got;
  while (q_pop(&g_many_q[id], &got)) xb_free(got);
  pthread_barrier_wait(&g_many_bar);
  while (q_pop(&g_many_q[id], &got)) xb_free(got);
  for (unsigned i = 0; i < 48; i++) xb_free(ws[i]);
  return NULL;
}

static void part_many(void)
{
  size_t start = tu_rss_bytes();
  for (unsigned i = 0; i < MANY; i++) q_init(&g_many_q[i]);
  atomic_store(&g_many_peak, 0);
  pthread_barrier_init(&g_many_bar, NULL, MANY);
  pthread_t t[MANY];
  for (unsigned i = 0; i < MANY; i++)
    CHECK(pthread_create(&t[i], NULL, many_run, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < MANY; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_many_bar);
  size_t peak = atomic_load(&g_many_peak);
  printf("many: RSS %.1f MiB at start, %.1f MiB with %u threads\n", start / 1048576.0, peak / 1048576.0, MANY);
  CHECK(peak <= start + ((size_t)96 << 20), "RSS %zu with %u threads of ~12 KiB each (start %zu)", peak, MANY,
        start);
}

/* ---- fork ---- */

static pthread_barrier_t g_fork_bar;
static xb_t g_fork_blocks[4][256];

static void *fork_run(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed * 13 + id);
  xb_t mine = xb_new(&r, 16, 512);
  xb_free(mine);
  /* Free the next thread's blocks: foreign blocks this thread now holds. */
  for (unsigned i = 0; i < 128; i++) xb_free(g_fork_blocks[(id + 1) % 4][i]);
  pthread_barrier_wait(&g_fork_bar); /* holding them */
  pthread_barrier_wait(&g_fork_bar); /* the fork is done */
  for (unsigned i = 128; i < 256; i++) xb_free(g_fork_blocks[(id + 1) % 4][i]);
  return NULL;
}

static void part_fork(void)
{
  for (unsigned round = 0; round < 4 * g_scale; round++) {
    rng_t r;
    rng_seed(&r, g_seed * 101 + round);
    for (unsigned t = 0; t < 4; t++)
      for (unsigned i = 0; i < 256; i++) g_fork_blocks[t][i] = xb_new(&r, 16, 512);
    pthread_barrier_init(&g_fork_bar, NULL, 5);
    pthread_t t[4];
    for (unsigned i = 0; i < 4; i++)
      CHECK(pthread_create(&t[i], NULL, fork_run, (void *)(uintptr_t)i) == 0, "pthread_create");
    pthread_barrier_wait(&g_fork_bar);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
      /* Only this thread exists: allocate well past what the others held. */
      xb_t b[2000];
      for (int k = 0; k < 3; k++) {
        for (unsigned i = 0; i < 2000; i++) b[i] = xb_new(&r, 16, 512);
        for (unsigned i = 0; i < 2000; i++) xb_free(b[i]);
      }
      for (unsigned i = 128; i < 256; i++) xb_free(g_fork_blocks[0][i]);
      _exit(0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    pthread_barrier_wait(&g_fork_bar);
    for (unsigned i = 0; i < 4; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&g_fork_bar);
  }
  printf("fork: ok\n");
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "all";
  for (int i = 2; i < argc; i++) {
    if (!strncmp(argv[i], "--scale=", 8)) g_scale = (unsigned)strtoul(argv[i] + 8, NULL, 10);
    else if (!strncmp(argv[i], "--threads=", 10)) g_threads = (unsigned)strtoul(argv[i] + 10, NULL, 10);
    else if (!strncmp(argv[i], "--seed=", 7)) g_seed = strtoull(argv[i] + 7, NULL, 10);
  }
  if (g_scale == 0) g_scale = 1;
  if (g_threads < 2) g_threads = 2;
  check_set_seed(g_seed);
  int all = !strcmp(part, "all");
  if (all || !strcmp(part, "ring")) part_ring();
  if (all || !strcmp(part, "exit")) part_exit();
  if (all || !strcmp(part, "many")) part_many();
  if (all || !strcmp(part, "fork")) part_fork();
  return 0;
}
