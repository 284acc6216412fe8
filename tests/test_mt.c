/*
 * test_mt.c — multi-threaded tests; every block's contents are verified by
 * the thread that frees it (usually not the thread that allocated it).
 *
 *   test_mt <pc|a2a|churn|fork|collect|tsd|wide|exit|naps|dozes|all> [--scale=N] [--threads=N] [--seed=S]
 *     pc     producers allocate+fill, pass blocks through a queue, consumers
 *            verify, sometimes realloc, and free (cross-thread frees)
 *     a2a    all-to-all: every thread frees blocks allocated by all others
 *     churn  thousands of short-lived threads; survivors freed later by others
 *     fork   fork() while other threads allocate/free; the child verifies and
 *            frees blocks allocated before the fork, allocates, exits 0
 *     collect  pc while another thread keeps calling hak_collect(0/1)
 *     tsd    malloc/free inside pthread key destructors at thread exit
 *     wide   a few hundred threads alive at once, freeing each other's blocks
 *     exit   exit() (atexit handlers, destructors) while threads allocate
 *     naps   owners that allocate a burst, hand half of it to consumers,
 *            nap (the purge pass then takes their listed slabs whose
 *            blocks all came back), and wake to free the other half and
 *            allocate again, racing that collection; a thread calls
 *            hak_collect(0) all the time
 *     dozes  owners of big blocks (8..96 KiB) that free most of a burst
 *            and doze, so that the purge pass gives back the pages inside
 *            their free blocks (current slabs included) while they sleep;
 *            they wake to allocate at once, racing that pass, and check
 *            every block they hold; a thread calls hak_collect(0) all the
 *            time
 *   env: HAKMEM_TEST_SEED, HAKMEM_TEST_SCALE
 *
 * Built against libhakmem.so (standard names) and, with -DUSE_HAK_API and
 * -fsanitize=thread, against a ThreadSanitizer build of the core.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static uint64_t g_seed;
static unsigned g_scale;
static unsigned g_threads;

typedef struct {
  unsigned char *p;
  size_t n;
  uint64_t key;
} blk_t;

static size_t mt_size(rng_t *r)
{
  uint64_t x = rng_below(r, 1000);
  if (x < 800) return rng_logsize(r, 1, 512);
  if (x < 990) return rng_logsize(r, 513, 32 * 1024);
  if (x < 997) return rng_logsize(r, 32 * 1024 + 1, 1024 * 1024);
  return rng_logsize(r, 1024 * 1024 + 1, 4 * 1024 * 1024); /* large mappings */
}

static blk_t blk_new(rng_t *r, uint64_t key)
{
  blk_t b;
  b.n = mt_size(r);
  b.key = key;
  uint64_t x = rng_below(r, 10);
  if (x < 6) b.p = malloc(b.n);
  else if (x < 8) {
    b.p = calloc(1, b.n);
    CHECK(b.p != NULL, "calloc(1, %zu) NULL", b.n);
    size_t nz = first_nonzero(b.p, b.n);
    CHECK(nz == (size_t)-1, "calloc(1, %zu): byte %zu nonzero", b.n, nz);
  } else {
    size_t a = (size_t)32 << rng_below(r, 7);
    b.p = aligned_alloc(a, b.n);
    CHECK(b.p != NULL && ((uintptr_t)b.p & (a - 1)) == 0, "aligned_alloc(%zu, %zu) = %p", a, b.n, (void *)b.p);
  }
  CHECK(b.p != NULL, "allocation of %zu bytes failed (errno %d)", b.n, errno);
  CHECK(((uintptr_t)b.p & 15) == 0, "block %p (size %zu) not 16-byte aligned", (void *)b.p, b.n);
  CHECK(malloc_usable_size(b.p) >= b.n, "usable size %zu < %zu", malloc_usable_size(b.p), b.n);
  blk_fill(b.p, b.n, key);
  return b;
}

static void blk_verify(const blk_t *b, const char *who)
{
  CHECK(OWNS(b->p), "%s: block %p not owned by hakmem", who, (void *)b->p);
  size_t bad = blk_check(b->p, b->n, b->n, b->key);
  CHECK(bad == (size_t)-1, "%s: block %p size %zu key %llx corrupted at offset %zu (0x%02x, expected 0x%02x)",
        who, (void *)b->p, b->n, (unsigned long long)b->key, bad, b->p[bad], pat_byte(b->key, bad));
}

static void blk_free(blk_t *b, rng_t *r)
{
  if (rng_below(r, 4) == 0) free_sized(b->p, b->n);
  else free(b->p);
  b->p = NULL;
}

/* verify, maybe realloc (from a thread that did not allocate it), free */
static void blk_consume(blk_t *b, rng_t *r, const char *who)
{
  blk_verify(b, who);
  if (rng_below(r, 5) == 0) {
    size_t n = mt_size(r);
    unsigned char *q = realloc(b->p, n);
    CHECK(q != NULL, "%s: realloc(%zu -> %zu) NULL", who, b->n, n);
    size_t keep = b->n < n ? b->n : n;
    size_t bad = blk_check(q, b->n, keep, b->key);
    CHECK(bad == (size_t)-1, "%s: cross-thread realloc(%zu -> %zu) lost contents at %zu", who, b->n, n, bad);
    b->p = q;
    b->n = n;
    b->key ^= 0xfeed;
    blk_fill(q, n, b->key);
    blk_verify(b, who);
  }
  blk_free(b, r);
}

/* ================= (a) producer / consumer ================= */
#define QCAP 1024
static struct {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  blk_t item[QCAP];
  size_t head, count;
} q = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, { { 0, 0, 0 } }, 0, 0 };

static void q_push(blk_t b)
{
  pthread_mutex_lock(&q.mu);
  while (q.count == QCAP) pthread_cond_wait(&q.not_full, &q.mu);
  q.item[(q.head + q.count) % QCAP] = b;
  q.count++;
  pthread_cond_signal(&q.not_empty);
  pthread_mutex_unlock(&q.mu);
}

static blk_t q_pop(void)
{
  pthread_mutex_lock(&q.mu);
  while (q.count == 0) pthread_cond_wait(&q.not_empty, &q.mu);
  blk_t b = q.item[q.head];
  q.head = (q.head + 1) % QCAP;
  q.count--;
  pthread_cond_signal(&q.not_full);
  pthread_mutex_unlock(&q.mu);
  return b;
}

static unsigned pc_items;
static atomic_ullong pc_consumed;

static void *producer(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x100 + id));
  for (unsigned i = 0; i < pc_items; i++) {
    blk_t b = blk_new(&r, ((uint64_t)id << 48) | i);
    q_push(b);
  }
  return NULL;
}

static void *consumer(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x200 + id));
  for (;;) {
    blk_t b = q_pop();
    if (!b.p) break;
    blk_consume(&b, &r, "pc consumer");
    atomic_fetch_add(&pc_consumed, 1);
  }
  return NULL;
}

static void part_pc(void)
{
  unsigned np = g_threads / 2 ? g_threads / 2 : 1, nc = g_threads - np ? g_threads - np : 1;
  pc_items = 25000 * g_scale;
  pthread_t pt[64], ct[64];
  for (unsigned i = 0; i < np; i++) CHECK(pthread_create(&pt[i], NULL, producer, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < nc; i++) CHECK(pthread_create(&ct[i], NULL, consumer, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < np; i++) pthread_join(pt[i], NULL);
  for (unsigned i = 0; i < nc; i++) q_push((blk_t){ NULL, 0, 0 });
  for (unsigned i = 0; i < nc; i++) pthread_join(ct[i], NULL);
  unsigned long long got = atomic_load(&pc_consumed);
  CHECK(got == (unsigned long long)np * pc_items, "consumed %llu of %llu blocks", got,
        (unsigned long long)np * pc_items);
  printf("pc: %u producers, %u consumers, %llu blocks\n", np, nc, got);
}

/* ---- pc with a thread calling hak_collect() all the time ---- */
static atomic_int collect_stop;
static atomic_ullong collect_calls;

static void *collector(void *arg)
{
  (void)arg;
  unsigned i = 0;
  while (!atomic_load(&collect_stop)) {
    hak_collect((int)(i++ & 1));
    atomic_fetch_add(&collect_calls, 1);
    usleep(300);
  }
  return NULL;
}

static void part_collect(void)
{
  pthread_t ct;
  CHECK(pthread_create(&ct, NULL, collector, NULL) == 0, "pthread_create(collector)");
  part_pc();
  atomic_store(&collect_stop, 1);
  pthread_join(ct, NULL);
  printf("collect: %llu concurrent hak_collect calls\n", (unsigned long long)atomic_load(&collect_calls));
}

/* ---- owners that nap: the collector of idle heaps' listed slabs ---- */
/* A burst fills several slabs of each class, so that most of them leave
 * the current slot for the lists; the first part goes to the consumers
 * (whole slabs of it come back entirely: the collector's to take while
 * the owner naps), the rest stays with the owner. */
#define NAP_BURST 3000
#define NAP_KEEP 1000
static atomic_int naps_stop;

static void *napper(void *arg)
{
  static const size_t sizes[] = {256, 512, 1024};
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x300 + id));
  static _Thread_local blk_t kept[NAP_KEEP];
  unsigned rounds = 12 * g_scale;
  uint64_t key = (uint64_t)(0x40 + id) << 48;
  for (unsigned round = 0; round < rounds; round++) {
    unsigned nk = 0;
    for (unsigned i = 0; i < NAP_BURST; i++) {
      blk_t b = {NULL, sizes[i % 3] - rng_below(&r, 64), key++};
      b.p = malloc(b.n);
      CHECK(b.p != NULL, "malloc(%zu)", b.n);
      blk_fill(b.p, b.n, b.key);
      if (i < NAP_BURST - NAP_KEEP)
        q_push(b); /* a consumer frees it: a remote free into this thread's slabs */
      else
        kept[nk++] = b;
    }
    /* Idle for several of the collector's gaps (an eighth of the purge
     * delay): no refill, no CPU. */
    usleep((useconds_t)(2000 + rng_below(&r, 12000)));
    /* Awake: local frees into the listed slabs, then the refills of the
     * next burst, while the collector may be at the lists. */
    while (nk > 0) {
      blk_t *b = &kept[--nk];
      blk_verify(b, "napper (own block)");
      blk_free(b, &r);
    }
  }
  return NULL;
}

static void *nap_collector(void *arg)
{
  (void)arg;
  while (!atomic_load(&naps_stop)) {
    hak_collect(0);
    usleep(500);
  }
  return NULL;
}

static void part_naps(void)
{
  unsigned np = g_threads / 2 ? g_threads / 2 : 1, nc = g_threads - np ? g_threads - np : 1;
  pthread_t pt[64], ct[64], cl;
  atomic_store(&pc_consumed, 0);
  CHECK(pthread_create(&cl, NULL, nap_collector, NULL) == 0, "pthread_create");
  for (unsigned i = 0; i < nc; i++) CHECK(pthread_create(&ct[i], NULL, consumer, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < np; i++) CHECK(pthread_create(&pt[i], NULL, napper, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < np; i++) pthread_join(pt[i], NULL);
  for (unsigned i = 0; i < nc; i++) q_push((blk_t){ NULL, 0, 0 });
  for (unsigned i = 0; i < nc; i++) pthread_join(ct[i], NULL);
  atomic_store(&naps_stop, 1);
  pthread_join(cl, NULL);
  unsigned long long want = (unsigned long long)np * 12 * g_scale * (NAP_BURST - NAP_KEEP);
  unsigned long long got = atomic_load(&pc_consumed);
  CHECK(got == want, "naps: consumed %llu of %llu blocks", got, want);
  printf("naps: %u napping owners, %u consumers, %llu blocks freed remotely\n", np, nc, got);
}

/* ---- owners that doze with big free blocks: the pass that gives back
 * the pages inside them (heap_idle_cool) ---- */
#define DOZE_BURST 96
#define DOZE_KEEP 24

static void *dozer(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x500 + id));
  blk_t held[DOZE_BURST];
  unsigned rounds = 40 * g_scale;
  uint64_t key = (uint64_t)(0x60 + id) << 48;
  for (unsigned round = 0; round < rounds; round++) {
    for (unsigned i = 0; i < DOZE_BURST; i++) {
      held[i] = (blk_t){NULL, rng_logsize(&r, 8192, 96 * 1024), key++};
      held[i].p = malloc(held[i].n);
      CHECK(held[i].p != NULL, "malloc(%zu)", held[i].n);
      blk_fill(held[i].p, held[i].n, held[i].key);
    }
    /* Most of the burst back into the slabs (local frees, the current
     * slabs' lists among them), then asleep in the kernel. */
    for (unsigned i = DOZE_KEEP; i < DOZE_BURST; i++) blk_free(&held[i], &r);
    usleep((useconds_t)(200 + rng_below(&r, 6000)));
    /* Awake: pops from the same classes at once, while the pass may be
     * at those lists. */
    for (unsigned i = DOZE_KEEP; i < DOZE_BURST; i++) {
      held[i] = (blk_t){NULL, rng_logsize(&r, 8192, 96 * 1024), key++};
      held[i].p = malloc(held[i].n);
      CHECK(held[i].p != NULL, "malloc(%zu)", held[i].n);
      blk_fill(held[i].p, held[i].n, held[i].key);
    }
    usleep((useconds_t)rng_below(&r, 3000));
    for (unsigned i = 0; i < DOZE_BURST; i++) {
      blk_verify(&held[i], "dozer");
      blk_free(&held[i], &r);
    }
  }
  return NULL;
}

static void part_dozes(void)
{
  unsigned n = g_threads < 64 ? g_threads : 64;
  pthread_t t[64], cl;
  atomic_store(&naps_stop, 0);
  CHECK(pthread_create(&cl, NULL, nap_collector, NULL) == 0, "pthread_create");
  for (unsigned i = 0; i < n; i++) CHECK(pthread_create(&t[i], NULL, dozer, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < n; i++) pthread_join(t[i], NULL);
  atomic_store(&naps_stop, 1);
  pthread_join(cl, NULL);
  printf("dozes: %u threads, %u rounds each\n", n, 40 * g_scale);
}

/* ================= (b) all-to-all ================= */
#define A2A_K 512
static blk_t (*a2a_blk)[A2A_K];
static pthread_barrier_t a2a_bar;
static unsigned a2a_rounds, a2a_n;

static void *a2a_thread(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg, n = a2a_n;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x300 + t));
  for (unsigned round = 0; round < a2a_rounds; round++) {
    for (unsigned j = 0; j < A2A_K; j++)
      a2a_blk[t][j] = blk_new(&r, ((uint64_t)t << 56) ^ ((uint64_t)round << 20) ^ j);
    pthread_barrier_wait(&a2a_bar);
    /* block j of thread s is freed by thread (s + 1 + (j + round) % (n-1)) % n */
    for (unsigned s = 0; s < n; s++) {
      if (s == t) continue;
      for (unsigned j = 0; j < A2A_K; j++) {
        if ((s + 1 + (j + round) % (n - 1)) % n != t) continue;
        blk_consume(&a2a_blk[s][j], &r, "a2a");
      }
    }
    pthread_barrier_wait(&a2a_bar);
  }
  return NULL;
}

static void part_a2a(void)
{
  a2a_n = g_threads < 2 ? 2 : g_threads;
  a2a_rounds = 12 * g_scale;
  a2a_blk = calloc(a2a_n, sizeof *a2a_blk);
  CHECK(a2a_blk != NULL, "calloc");
  pthread_barrier_init(&a2a_bar, NULL, a2a_n);
  pthread_t th[64];
  for (unsigned i = 0; i < a2a_n; i++) CHECK(pthread_create(&th[i], NULL, a2a_thread, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < a2a_n; i++) pthread_join(th[i], NULL);
  for (unsigned s = 0; s < a2a_n; s++)
    for (unsigned j = 0; j < A2A_K; j++)
      CHECK(a2a_blk[s][j].p == NULL, "a2a: block [%u][%u] never freed", s, j);
  pthread_barrier_destroy(&a2a_bar);
  free(a2a_blk);
  printf("a2a: %u threads x %u rounds x %u blocks\n", a2a_n, a2a_rounds, A2A_K);
}

/* ================= (c) thread churn ================= */
typedef struct surv { blk_t b; struct surv *next; } surv_t;
static pthread_mutex_t surv_mu = PTHREAD_MUTEX_INITIALIZER;
static surv_t *surv_head;
static atomic_int churn_done;
static atomic_ullong surv_made, surv_freed;

static surv_t *surv_take(unsigned max)
{
  pthread_mutex_lock(&surv_mu);
  surv_t *h = surv_head, *tail = NULL, *c = h;
  unsigned k = 0;
  while (c && k < max) { tail = c; c = c->next; k++; }
  if (tail) { surv_head = c; tail->next = NULL; } else h = NULL;
  pthread_mutex_unlock(&surv_mu);
  return h;
}

static void surv_free_list(surv_t *h, rng_t *r, const char *who)
{
  while (h) {
    surv_t *nx = h->next;
    blk_consume(&h->b, r, who);
    free(h);
    atomic_fetch_add(&surv_freed, 1);
    h = nx;
  }
}

static void *churn_thread(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x400 + (uint64_t)id));
  enum { M = 48 };
  blk_t b[M];
  for (unsigned i = 0; i < M; i++) b[i] = blk_new(&r, ((uint64_t)id << 32) | i);
  /* free old survivors left by threads that have already exited */
  surv_free_list(surv_take(4), &r, "churn (other thread's survivor)");
  for (unsigned i = 0; i < M; i++) {
    if (rng_below(&r, 8) == 0) {
      surv_t *s = malloc(sizeof *s);
      CHECK(s != NULL, "malloc(surv)");
      s->b = b[i];
      pthread_mutex_lock(&surv_mu);
      s->next = surv_head;
      surv_head = s;
      pthread_mutex_unlock(&surv_mu);
      atomic_fetch_add(&surv_made, 1);
    } else {
      blk_verify(&b[i], "churn (own block)");
      blk_free(&b[i], &r);
    }
  }
  return NULL;
}

static void *reaper(void *arg)
{
  (void)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ 0x4ff);
  while (!atomic_load(&churn_done)) {
    surv_free_list(surv_take(16), &r, "reaper");
    usleep(200);
  }
  return NULL;
}

static void part_churn(void)
{
  unsigned total = 1500 * g_scale, conc = g_threads * 2;
  if (conc > 64) conc = 64;
  pthread_t rp, th[64];
  CHECK(pthread_create(&rp, NULL, reaper, NULL) == 0, "pthread_create(reaper)");
  for (unsigned base = 0; base < total; base += conc) {
    unsigned k = total - base < conc ? total - base : conc;
    for (unsigned i = 0; i < k; i++)
      CHECK(pthread_create(&th[i], NULL, churn_thread, (void *)(uintptr_t)(base + i)) == 0,
            "pthread_create #%u", base + i);
    for (unsigned i = 0; i < k; i++) pthread_join(th[i], NULL);
  }
  atomic_store(&churn_done, 1);
  pthread_join(rp, NULL);
  rng_t r;
  rng_seed(&r, g_seed ^ 0x4fe);
  surv_free_list(surv_take(~0u), &r, "main (survivor)");
  CHECK(atomic_load(&surv_made) == atomic_load(&surv_freed), "survivors made %llu freed %llu",
        (unsigned long long)atomic_load(&surv_made), (unsigned long long)atomic_load(&surv_freed));
  printf("churn: %u threads, %llu survivor blocks freed by other threads\n", total,
         (unsigned long long)atomic_load(&surv_freed));
}

/* ================= (e) allocation in thread-exit destructors ================= */
/* pthread key destructors run after the allocator's own thread-exit hook when
 * their key was created later (as here): malloc/realloc/free must still work,
 * including through the extra destructor rounds a re-set key triggers. */
/* Under TSan only one round: TSan finishes its own per-thread state in the
 * last destructor round (PTHREAD_DESTRUCTOR_ITERATIONS), and any intercepted
 * call after that (the allocator's re-armed exit hook locking a mutex)
 * crashes inside the TSan runtime itself. */
#define TSD_ROUNDS (UNDER_TSAN ? 1u : 3u)
static pthread_key_t tsd_key;
static atomic_ullong tsd_rounds;
typedef struct { blk_t b[16]; unsigned round; uint64_t seed; } tsd_t;

static void tsd_destructor(void *arg)
{
  tsd_t *t = arg;
  rng_t r;
  rng_seed(&r, t->seed + t->round);
  for (unsigned i = 0; i < 16; i++) {
    blk_consume(&t->b[i], &r, "tsd destructor");
    t->b[i] = blk_new(&r, t->seed ^ ((uint64_t)t->round << 8) ^ i);
  }
  atomic_fetch_add(&tsd_rounds, 1);
  if (++t->round < TSD_ROUNDS) {
    pthread_setspecific(tsd_key, t); /* run again in the next destructor round */
    return;
  }
  for (unsigned i = 0; i < 16; i++) blk_consume(&t->b[i], &r, "tsd destructor (last round)");
  free(t);
}

static void *tsd_thread(void *arg)
{
  uint64_t id = (uint64_t)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x700 + id));
  tsd_t *t = calloc(1, sizeof *t);
  CHECK(t != NULL, "calloc");
  t->seed = g_seed ^ (id << 20);
  for (unsigned i = 0; i < 16; i++) t->b[i] = blk_new(&r, t->seed ^ i);
  /* some work so the thread has a heap with partly used slabs */
  blk_t w[64];
  for (unsigned i = 0; i < 64; i++) w[i] = blk_new(&r, id * 1000 + i);
  for (unsigned i = 0; i < 64; i += 2) blk_consume(&w[i], &r, "tsd thread");
  pthread_setspecific(tsd_key, t);
  /* the odd blocks are returned to the main thread, freed after we exit */
  blk_t *out = malloc(32 * sizeof *out);
  CHECK(out != NULL, "malloc");
  for (unsigned i = 0; i < 32; i++) out[i] = w[2 * i + 1];
  return out;
}

static void part_tsd(void)
{
  /* hakmem creates its key when it initialises: make sure it has */
  free(malloc(1));
  CHECK(pthread_key_create(&tsd_key, tsd_destructor) == 0, "pthread_key_create");
  unsigned n = 200 * g_scale;
  rng_t r;
  rng_seed(&r, g_seed ^ 0x7ff);
  for (unsigned i = 0; i < n; i += 4) {
    pthread_t th[4];
    for (unsigned k = 0; k < 4; k++)
      CHECK(pthread_create(&th[k], NULL, tsd_thread, (void *)(uintptr_t)(i + k)) == 0, "pthread_create");
    for (unsigned k = 0; k < 4; k++) {
      blk_t *out;
      pthread_join(th[k], (void **)&out);
      for (unsigned j = 0; j < 32; j++) blk_consume(&out[j], &r, "main (exited thread's block)");
      free(out);
    }
  }
  pthread_key_delete(tsd_key);
  CHECK(atomic_load(&tsd_rounds) == (unsigned long long)TSD_ROUNDS * n, "destructor rounds %llu, want %u",
        (unsigned long long)atomic_load(&tsd_rounds), TSD_ROUNDS * n);
  printf("tsd: %u threads allocated and freed in %u round(s) of thread-exit destructors\n", n, TSD_ROUNDS);
}

/* ================= (f) many threads alive at once ================= */
static pthread_barrier_t wide_bar;
static blk_t (*wide_blk)[64];
static unsigned wide_n;

static void *wide_thread(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x800 + (uint64_t)t));
  for (unsigned i = 0; i < 64; i++) wide_blk[t][i] = blk_new(&r, ((uint64_t)t << 16) | i);
  pthread_barrier_wait(&wide_bar);
  unsigned victim = (t + 37) % wide_n; /* a permutation: every block freed once */
  for (unsigned i = 0; i < 64; i++) blk_consume(&wide_blk[victim][i], &r, "wide");
  return NULL;
}

static void part_wide(void)
{
  wide_n = 100 * (g_scale < 4 ? g_scale : 4) + 56;
  if (UNDER_TSAN && wide_n > 120) wide_n = 120;
  wide_blk = calloc(wide_n, sizeof *wide_blk);
  CHECK(wide_blk != NULL, "calloc");
  pthread_barrier_init(&wide_bar, NULL, wide_n);
  pthread_t *th = malloc(wide_n * sizeof *th);
  CHECK(th != NULL, "malloc");
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 256 * 1024);
  for (unsigned i = 0; i < wide_n; i++)
    CHECK(pthread_create(&th[i], &at, wide_thread, (void *)(uintptr_t)i) == 0, "pthread_create #%u", i);
  for (unsigned i = 0; i < wide_n; i++) pthread_join(th[i], NULL);
  pthread_attr_destroy(&at);
  pthread_barrier_destroy(&wide_bar);
  for (unsigned i = 0; i < wide_n; i++)
    for (unsigned j = 0; j < 64; j++) CHECK(wide_blk[i][j].p == NULL, "wide: block [%u][%u] not freed", i, j);
  free(th);
  free(wide_blk);
  printf("wide: %u threads alive at once, each freeing another's blocks\n", wide_n);
}

/* ================= (g) exit() while threads allocate ================= */
/* A process that calls exit() while other threads are still in malloc/free
 * (atexit handlers and library destructors running concurrently) must exit
 * cleanly with its status, not crash or hang. Each round runs in a child. */
static void *exit_spinner(void *arg)
{
  rng_t r;
  rng_seed(&r, (uint64_t)(uintptr_t)arg);
  blk_t w[32];
  memset(w, 0, sizeof w);
  for (;;) {
    unsigned i = (unsigned)rng_below(&r, 32);
    if (w[i].p) { blk_verify(&w[i], "exit spinner"); blk_free(&w[i], &r); }
    else w[i] = blk_new(&r, rng_next(&r));
  }
  return NULL;
}

static void *exit_atexit_blk;
static void exit_handler(void)
{
  /* free and allocate from an atexit handler while the spinners run */
  free(exit_atexit_blk);
  void *p = malloc(12345);
  CHECK(p != NULL, "malloc in atexit handler");
  memset(p, 7, 12345);
  free(p);
}

static void part_exit(void)
{
  unsigned rounds = 10 * g_scale;
  for (unsigned it = 0; it < rounds; it++) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: errno %d", errno);
    if (pid == 0) {
      exit_atexit_blk = malloc(1000);
      atexit(exit_handler);
      for (unsigned i = 0; i < g_threads; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, exit_spinner, (void *)(uintptr_t)(g_seed + it * 64 + i)) == 0, "pthread_create");
        pthread_detach(t);
      }
      usleep(20000 + (useconds_t)(it % 5) * 5000);
      exit(42);
    }
    int status = 0;
    CHECK(tu_wait_child(pid, &status, 30.0) != 0,
          "exit round %u: process calling exit() with busy threads did not terminate in 30 s", it);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42,
          "exit round %u: exit(42) with threads in malloc/free ended with %s %d", it,
          WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
  printf("exit: %u processes exited cleanly while %u threads allocated\n", rounds, g_threads);
}

/* ================= (d) fork while allocating ================= */
#define FK_STABLE 96
static blk_t fk_main[FK_STABLE];   /* allocated by the main thread */
static blk_t fk_bg[FK_STABLE];     /* allocated by background thread 0 */
static atomic_int fk_bg_ready, fk_stop;
static atomic_ullong fk_bg_ops;

static void *fork_bg(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, g_seed ^ (0x500 + id));
  if (id == 0) {
    for (unsigned i = 0; i < FK_STABLE; i++) fk_bg[i] = blk_new(&r, 0xb6000000ull + i);
    atomic_store(&fk_bg_ready, 1);
  }
  enum { W = 64 };
  blk_t w[W];
  memset(w, 0, sizeof w);
  while (!atomic_load(&fk_stop)) {
    unsigned i = (unsigned)rng_below(&r, W);
    if (w[i].p) { blk_verify(&w[i], "fork bg"); blk_free(&w[i], &r); }
    else w[i] = blk_new(&r, ((uint64_t)id << 40) ^ rng_next(&r));
    atomic_fetch_add(&fk_bg_ops, 1);
  }
  for (unsigned i = 0; i < W; i++)
    if (w[i].p) { blk_verify(&w[i], "fork bg"); blk_free(&w[i], &r); }
  return NULL;
}

#if !UNDER_TSAN
static void *child_thread(void *arg)
{
  rng_t *r = arg;
  for (int i = 0; i < 500; i++) {
    blk_t b = blk_new(r, 0xc4000000ull + (uint64_t)i);
    blk_consume(&b, r, "fork child thread");
  }
  return NULL;
}
#endif

static void fork_child(unsigned iter)
{
  rng_t r;
  rng_seed(&r, g_seed ^ (0x600 + iter));
  blk_t nb[200];
  for (unsigned i = 0; i < 200; i++) nb[i] = blk_new(&r, 0xc0000000ull + i);
  for (unsigned i = 0; i < FK_STABLE; i++) blk_verify(&fk_main[i], "fork child (main's pre-fork block)");
  for (unsigned i = 0; i < FK_STABLE; i++) blk_verify(&fk_bg[i], "fork child (bg thread's pre-fork block)");
  for (unsigned i = 0; i < FK_STABLE; i++) blk_consume(&fk_main[i], &r, "fork child (main's pre-fork block)");
  for (unsigned i = 0; i < FK_STABLE; i++) blk_consume(&fk_bg[i], &r, "fork child (bg thread's pre-fork block)");
  for (unsigned i = 0; i < 200; i++) blk_consume(&nb[i], &r, "fork child (own block)");
#if !UNDER_TSAN
  /* a thread in the child: the allocator must be fully usable after fork.
   * Not under TSan: it refuses to start threads in the child of a
   * multi-threaded fork (die_after_fork). The rest of the fork test runs
   * under TSan unchanged. */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, child_thread, &r) == 0, "pthread_create in child");
  pthread_join(t, NULL);
#endif
  void *big = malloc(8u << 20);
  CHECK(big != NULL, "child malloc(8 MiB)");
  memset(big, 1, 8u << 20);
  free(big);
  _exit(0);
}

static void part_fork(void)
{
  unsigned nbg = g_threads > 1 ? g_threads - 1 : 1, iters = 25 * g_scale;
  if (nbg > 8) nbg = 8;
  rng_t r;
  rng_seed(&r, g_seed ^ 0x5ff);
  for (unsigned i = 0; i < FK_STABLE; i++) fk_main[i] = blk_new(&r, 0xa0000000ull + i);
  pthread_t th[8];
  for (unsigned i = 0; i < nbg; i++) CHECK(pthread_create(&th[i], NULL, fork_bg, (void *)(uintptr_t)i) == 0, "pthread_create");
  while (!atomic_load(&fk_bg_ready)) usleep(100);
  for (unsigned it = 0; it < iters; it++) {
    usleep((useconds_t)rng_below(&r, 3000));
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed: errno %d", errno);
    if (pid == 0) fork_child(it);
    int status = 0;
    pid_t w = tu_wait_child(pid, &status, 30.0);
    CHECK(w != 0, "fork iteration %u: child %d did not finish within 30 s (deadlock after fork?)", it, (int)pid);
    CHECK(w == pid, "waitpid: errno %d", errno);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "fork iteration %u: child %s %d", it, WIFEXITED(status) ? "exited with" : "killed by signal",
          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    /* parent: its pre-fork blocks are untouched by the child; renew a few */
    for (unsigned i = 0; i < FK_STABLE; i++) blk_verify(&fk_main[i], "fork parent");
    for (unsigned k = 0; k < 8; k++) {
      unsigned i = (unsigned)rng_below(&r, FK_STABLE);
      blk_consume(&fk_main[i], &r, "fork parent");
      fk_main[i] = blk_new(&r, 0xa1000000ull + ((uint64_t)it << 8) + i);
    }
  }
  atomic_store(&fk_stop, 1);
  for (unsigned i = 0; i < nbg; i++) pthread_join(th[i], NULL);
  for (unsigned i = 0; i < FK_STABLE; i++) blk_consume(&fk_main[i], &r, "fork parent (end)");
  for (unsigned i = 0; i < FK_STABLE; i++) blk_consume(&fk_bg[i], &r, "fork parent (end, bg's block)");
  printf("fork: %u forks with %u busy threads (%llu background ops)\n", iters, nbg,
         (unsigned long long)atomic_load(&fk_bg_ops));
}

int main(int argc, char **argv)
{
  const char *part = "all";
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-') part = argv[i];
  g_seed = test_param(argc, argv, "seed", "HAKMEM_TEST_SEED", 0);
  if (!g_seed) g_seed = 777;
  g_scale = (unsigned)test_param(argc, argv, "scale", "HAKMEM_TEST_SCALE", 1);
  g_threads = (unsigned)test_param(argc, argv, "threads", NULL, 4);
  if (g_threads < 2) g_threads = 2;
  if (g_threads > 32) g_threads = 32;
  if (g_scale < 1) g_scale = 1;
  check_set_seed(g_seed);
  printf("test_mt [%s]%s: part=%s seed=%llu scale=%u threads=%u\n", TEST_API_NAME, UNDER_TSAN ? " (tsan)" : "",
         part, (unsigned long long)g_seed, g_scale, g_threads);
  fflush(stdout);
  double t0 = tu_now_s();
  int all = strcmp(part, "all") == 0, ran = 0;
  if (all || !strcmp(part, "pc")) { part_pc(); ran = 1; }
  if (all || !strcmp(part, "a2a")) { part_a2a(); ran = 1; }
  if (all || !strcmp(part, "churn")) { part_churn(); ran = 1; }
  if (all || !strcmp(part, "fork")) { part_fork(); ran = 1; }
  if (all || !strcmp(part, "tsd")) { part_tsd(); ran = 1; }
  if (all || !strcmp(part, "exit")) { part_exit(); ran = 1; }
  if (all || !strcmp(part, "wide")) { part_wide(); ran = 1; }
  if (all || !strcmp(part, "collect")) { atomic_store(&pc_consumed, 0); part_collect(); ran = 1; }
  if (all || !strcmp(part, "naps")) { part_naps(); ran = 1; }
  if (all || !strcmp(part, "dozes")) { part_dozes(); ran = 1; }
  CHECK(ran, "unknown part '%s' (pc, a2a, churn, fork, collect, tsd, wide, exit, naps, dozes, all)", part);
  printf("test_mt: passed (%.2f s)\n", tu_now_s() - t0);
  return 0;
}
