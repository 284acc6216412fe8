/*
 * test_rss_return.c — freed memory goes back to the OS by itself.
 *
 *   test_rss_return [PART] [--gib=N] [--rounds=N]
 *   parts: small mixed remote idle lists sleepers pool donate exited phases   (default: all)
 *
 * small   allocate 1 GiB in 64-byte blocks (an intrusive list: no side table),
 *         free them all, sleep idle_ms() (3 x HAKMEM_PURGE_DELAY_MS), then poll VmRSS (up to
 *         30 s: a loaded machine may starve the purge thread past the window) with
 *         raw system calls: no allocator call after the last free. RSS must
 *         be within 16 MiB of the level before the phase.
 * mixed   the same with sizes 16 B..32 KiB.
 * remote  a thread allocates 1 GiB of small blocks and exits; the main
 *         thread frees them (remote frees into an abandoned heap): RSS must
 *         be back within 16 MiB after the delay (what later calls and
 *         hak_collect recover is printed too).
 * idle    another thread frees the main thread's 1 GiB while the main
 *         thread only sleeps (remote frees to a live, idle owner, into
 *         its full slabs: its delayed list): with no call by the owner,
 *         RSS must be back within 16 MiB (the purge thread collects an
 *         idle heap's delayed list).
 * lists   the same with 64 MiB, and RSS back within 3 MiB: the idle
 *         owner's partial and waiting slabs go back too, not only its
 *         full ones (the purge thread takes a listed slab once every block
 *         in use in it is on its thread_free list).
 * sleepers 16 threads each allocate a burst of blocks of five sizes
 *         (64 B..8 KiB, small and medium classes), free them all and then
 *         block on a barrier, alive, while the main thread (which never
 *         allocated in the burst) waits: RSS must come back within 4 MiB
 *         of the level before the burst. Each thread's current slab of a
 *         class held its carved pages (up to 64 KiB a small class, 512
 *         KiB a medium one) until the thread's next call or exit: 11 MiB
 *         for the 16 threads here, before heap_park.
 * pool    8 threads each allocate 16 MiB of blocks of 8..96 KiB (the size
 *         classes whose blocks span pages), write them, free nine in ten
 *         and block on a barrier, alive, holding the tenth: a worker pool
 *         after a burst. With no allocator call by anyone, RSS must come
 *         down to the level before the burst plus the blocks still held
 *         plus a quarter of the freed bytes (each freed block keeps the
 *         page with its link) plus 8 MiB; before the collector gave back
 *         the pages inside an idle heap's free blocks they stayed resident
 *         until the threads woke. Then the threads check every byte of
 *         what they kept, allocate and check as much again, and free it.
 * donate  the idle main thread's 64 MiB freed by another thread: once
 *         the collector took them back, at least 8 of its superslabs are
 *         on the abandoned list (no thread exited), and a new thread that
 *         allocates 64 MiB maps at most 32 MiB more (it adopts them);
 *         CTest runs it with HAKMEM_PURGE_DELAY_MS=2000 (what waits on the
 *         abandoned list decays after a quarter of it).
 * exited  memory of exited threads (CTest runs it with
 *         HAKMEM_PURGE_DELAY_MS=2000): one thread frees its 1 MiB and
 *         exits, below the 2 MiB the abandoned list keeps for the whole
 *         delay: after 0.6 delay its pages must still be resident (the next
 *         thread would take them warm); then 4 threads at once each free
 *         their 8 MiB and exit: with no thread adopting, 16 MiB or more
 *         must still be resident after 0.6 delay; then a thread allocates
 *         one block (it adopts a superslab and passes the others over) and
 *         RSS must be back within 8 MiB of the level before the 4 within
 *         0.9 delay of their exits, since what was passed over waits a
 *         quarter.
 * phases  alternating workload (small-block phase, medium-block phase,
 *         large-block phase, each followed by an idle 3 x delay) for several
 *         rounds (256 MiB per phase by default): RSS after each phase is
 *         printed; the second half of the rounds must not use more than the
 *         first (peak +32 MiB, mean after-phase RSS +24 MiB) and every
 *         after-phase figure stays within the retention budgets.
 * Every figure is printed (RSS before / peak / after, MiB).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)

static unsigned delay_ms(void)
{
  const char *e = getenv("HAKMEM_PURGE_DELAY_MS");
  return e && *e ? (unsigned)strtoul(e, NULL, 10) : 100; /* HAKMEM_PURGE_DELAY_MS's default */
}

/* How long the tests stay idle after freeing: the purge delay (memory
 * freed last becomes due then) plus as much again for the kernel to free
 * 1 GiB of pages (about 150 ms on the 2-vCPU test machines, 6-7 GiB/s),
 * plus margin for a loaded machine. */
static unsigned idle_ms(void) { return 3 * delay_ms(); }

static void sleep_ms(unsigned ms)
{
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static double mib(size_t x) { return (double)x / MiB; }

/* After the last free: sleep idle_ms() (3 x the decay window), then, while
 * RSS is still above before + slack, keep polling (no allocator call) up
 * to a generous deadline. The test asserts that the memory goes back by
 * itself, not how fast: on a loaded machine the purge thread may be
 * starved for longer than the window (a shared CI core). */
static unsigned g_waited_ms;
static size_t settle(size_t before, size_t slack)
{
  sleep_ms(idle_ms());
  g_waited_ms = idle_ms();
  size_t r = tu_rss_bytes();
  while (r > before + slack && g_waited_ms < 30000) {
    sleep_ms(50);
    g_waited_ms += 50;
    r = tu_rss_bytes();
  }
  return r;
}

static size_t g_bytes = (size_t)1 << 30;
static unsigned g_rounds = 6;
static int fails;


/* allocate `total` bytes with sizes from gen; returns the list */
static node_t *alloc_list(size_t total, size_t lo, size_t hi, uint64_t seed, size_t *count)
{
  rng_t r;
  rng_seed(&r, seed);
  node_t *head = NULL;
  size_t got = 0, n = 0;
  while (got < total) {
    size_t sz = lo == hi ? lo : rng_logsize(&r, lo, hi);
    node_push_touched(&head, sz, got);
    got += sz;
    n++;
  }
  *count = n;
  return head;
}


static void verdict(const char *what, size_t before, size_t peak, size_t after, size_t slack)
{
  int ok = after <= before + slack;
  printf("%-7s RSS before %7.1f MiB, peak %7.1f MiB, after free + %u ms: %6.1f MiB (%+.1f MiB)  %s\n", what,
         mib(before), mib(peak), g_waited_ms, mib(after), mib(after) - mib(before), ok ? "ok" : "FAIL");
  fflush(stdout);
  if (!ok) {
    fprintf(stderr, "FAIL %s: RSS %.1f MiB after freeing, %.1f MiB before (allowed +%.0f MiB)\n", what, mib(after),
            mib(before), mib(slack));
    fails++;
  }
}

/* what a few more calls recover (printed only) */
static size_t followup(const char *what, size_t before)
{
  for (int k = 0; k < 3; k++) {
    void *w = malloc(4000);
    free(w);
    sleep_ms(idle_ms());
  }
  size_t a = settle(before, 16 * MiB);
  hak_collect(0);
  size_t b = tu_rss_bytes();
  hak_collect(1);
  size_t c = tu_rss_bytes();
  printf("%-7s (info) after 3 more malloc/free calls: %.1f MiB, after hak_collect(0): %.1f MiB, after "
         "hak_collect(1): %.1f MiB (before: %.1f)\n", what, mib(a), mib(b), mib(c), mib(before));
  return a;
}

/* g_bytes in blocks of lo..hi bytes allocated and freed by this thread:
 * back within 16 MiB of the start with no allocator call after the frees */
static void part_one_thread(const char *what, size_t lo, size_t hi, uint64_t seed, const char *blocks)
{
  size_t before = tu_rss_bytes(), n;
  node_t *h = alloc_list(g_bytes, lo, hi, seed, &n);
  size_t peak = tu_rss_bytes();
  node_list_free(h);
  size_t after = settle(before, 16 * MiB); /* no allocator call since the last free */
  printf("%s:  %zu blocks of %s\n", what, n, blocks);
  verdict(what, before, peak, after, 16 * MiB);
}

static void part_small(void) { part_one_thread("small", 64, 64, 1, "64 B"); }
static void part_mixed(void) { part_one_thread("mixed", 16, 32768, 2, "16 B..32 KiB"); }

static node_t *remote_list;
static size_t remote_n;
static void *remote_alloc(void *arg)
{
  (void)arg;
  remote_list = alloc_list(g_bytes, 16, 1024, 3, &remote_n);
  return NULL;
}

static void part_remote(void)
{
  size_t before = tu_rss_bytes();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, remote_alloc, NULL) == 0, "pthread_create");
  pthread_join(t, NULL); /* the allocating thread has exited */
  size_t peak = tu_rss_bytes();
  node_list_free(remote_list);
  size_t after = settle(before, 16 * MiB); /* no allocator call since the last free */
  printf("remote: %zu blocks of 16 B..1 KiB allocated by an exited thread, freed by main\n", remote_n);
  verdict("remote", before, peak, after, 16 * MiB);
  followup("remote", before);
}

static node_t *idle_list;
static void *idle_free(void *arg)
{
  (void)arg;
  node_list_free(idle_list);
  return NULL;
}

static void idle_run(const char *what, size_t total, size_t slack)
{
  size_t before = tu_rss_bytes(), n;
  idle_list = alloc_list(total, 16, 1024, 4, &n);
  size_t peak = tu_rss_bytes();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, idle_free, NULL) == 0, "pthread_create");
  pthread_join(t, NULL); /* the freeing thread has exited; the owner (main) only sleeps */
  /* No allocator call by the owner from here: the purge thread collects
   * the delayed list of a heap whose thread stopped refilling (a thread
   * that sleeps must not keep what others freed into its slabs). */
  size_t after = settle(before, slack);
  printf("%s: %zu blocks of 16 B..1 KiB owned by the (idle) main thread, freed by another thread\n", what, n);
  verdict(what, before, peak, after, slack);
  followup(what, before);
}

static void part_idle(void) { idle_run("idle", g_bytes, 16 * MiB); }

/* The same with 64 MiB and a tight bound: what stays is the idle heap's
 * current slab of each class (about 60 classes here). Its slabs on the
 * partial and waiting lists, whose blocks all came back to their
 * thread_free lists, go back too (heap_collect_lists): before, they
 * stayed until the owner's next refill of their class (+6.1 MiB). */
static void part_lists(void) { idle_run("lists", 64 * MiB, 3 * MiB); }

/* donate: the main thread's 64 MiB of 16 B..1 KiB blocks, freed by
 * another thread while main sleeps, go back to their superslabs (the
 * idle-heap collector, as in idle and lists), and the superslabs that
 * leaves wholly free go to the abandoned list warm (heap_donate_free), no
 * thread having exited; a thread that then allocates 64 MiB adopts them
 * instead of mapping new ones. Run with a 2 s purge delay (CTest) so that
 * nothing decays meanwhile: before, the free slabs stayed in the sleeping
 * heap, and the new thread mapped 64 MiB beside them. */
static size_t ctl_stat(const char *name)
{
  size_t v = 0, len = sizeof v;
  CHECK(hak_ctl(name, &v, &len, NULL, 0) == 0, "hak_ctl(%s)", name);
  return v;
}

static node_t *donate_list;
static size_t donate_n;
static void *donate_alloc(void *arg)
{
  (void)arg;
  donate_list = alloc_list(64 * MiB, 16, 1024, 6, &donate_n);
  return NULL;
}

static size_t donate_base, donate_seen;
static void *donate_watch(void *arg)
{
  (void)arg;
  donate_seen = donate_base;
  for (unsigned waited = 0; donate_seen < donate_base + 8 && waited < 30000; waited += delay_ms() / 16) {
    sleep_ms(delay_ms() / 16);
    donate_seen = ctl_stat("stats.superslabs_abandoned");
  }
  return NULL;
}

static void part_donate(void)
{
  size_t n, abandoned0 = ctl_stat("stats.superslabs_abandoned");
  idle_list = alloc_list(64 * MiB, 16, 1024, 5, &n);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, idle_free, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  /* Main only sleeps (no CPU time: the collector's test of an idle
   * thread) until its superslabs are given away; another thread looks,
   * every sixteenth of the delay: they are given away after an eighth,
   * and 64 MiB on the abandoned list decays after a quarter, so a look a
   * whole delay later would find them gone. */
  donate_base = abandoned0;
  CHECK(pthread_create(&t, NULL, donate_watch, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  size_t abandoned = donate_seen;
  size_t mapped = ctl_stat("stats.mapped_bytes");
  CHECK(pthread_create(&t, NULL, donate_alloc, NULL) == 0, "pthread_create");
  pthread_join(t, NULL); /* its superslabs are abandoned again at its exit */
  size_t grown = ctl_stat("stats.mapped_bytes") - mapped;
  int ok = abandoned >= abandoned0 + 8 && grown <= 32 * MiB;
  printf("donate: %zu blocks of the idle main thread freed by another thread: %zu superslabs given away "
         "(no thread exited); a new thread's %zu blocks (64 MiB) mapped %.1f MiB more  %s\n",
         n, abandoned - abandoned0, donate_n, mib(grown), ok ? "ok" : "FAIL");
  fflush(stdout);
  if (!ok) {
    fprintf(stderr, "FAIL donate: %zu superslabs abandoned (want >= 8), %.1f MiB mapped (want <= 32)\n",
            abandoned - abandoned0, mib(grown));
    fails++;
  }
  node_list_free(donate_list);
}

#define SLEEPERS 16
#define SLEEPER_BLOCKS 600 /* of each size: every class's current slab carves to its end */
static pthread_barrier_t sleep_bar;
static void *sleeper(void *arg)
{
  static const size_t sizes[] = {64, 512, 2048, 4096, 8192};
  node_t *head = NULL;
  pthread_barrier_wait(&sleep_bar); /* the baseline is taken */
  for (unsigned i = 0; i < SLEEPER_BLOCKS; i++)
    for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      node_t *b = malloc(sizes[k]);
      CHECK(b != NULL, "malloc(%zu)", sizes[k]);
      memset(b, 0x5a, sizes[k]);
      b->next = head;
      head = b;
    }
  *(size_t *)arg = tu_rss_bytes();
  node_list_free(head);
  pthread_barrier_wait(&sleep_bar); /* freed */
  pthread_barrier_wait(&sleep_bar); /* sleeps (in the kernel) until main has measured */
  return NULL;
}

static void part_sleepers(void)
{
  pthread_t t[SLEEPERS];
  size_t peak[SLEEPERS];
  CHECK(pthread_barrier_init(&sleep_bar, NULL, SLEEPERS + 1) == 0, "pthread_barrier_init");
  for (unsigned i = 0; i < SLEEPERS; i++) CHECK(pthread_create(&t[i], NULL, sleeper, &peak[i]) == 0, "pthread_create");
  size_t before = tu_rss_bytes(); /* the threads exist, their stacks are in */
  pthread_barrier_wait(&sleep_bar);
  pthread_barrier_wait(&sleep_bar);
  size_t top = 0;
  for (unsigned i = 0; i < SLEEPERS; i++) top = peak[i] > top ? peak[i] : top;
  size_t after = settle(before, 4 * MiB); /* no allocator call by anyone since the frees */
  printf("sleepers: %d threads, each %d blocks of 64 B..8 KiB freed, then asleep\n", SLEEPERS, SLEEPER_BLOCKS * 5);
  verdict("sleepers", before, top, after, 4 * MiB);
  pthread_barrier_wait(&sleep_bar);
  for (unsigned i = 0; i < SLEEPERS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&sleep_bar);
}

#define POOL_THREADS 8
#define POOL_BYTES (16 * MiB)
static pthread_barrier_t pool_bar;
static size_t pool_kept[POOL_THREADS], pool_freed[POOL_THREADS];

static unsigned char pool_byte(uintptr_t id, size_t i) { return (unsigned char)(id * 131 + i * 7 + 1); }

static void pool_fill(unsigned char *p, size_t n, uintptr_t id)
{
  for (size_t i = 0; i < n; i += 512) p[i] = pool_byte(id, i);
  p[n - 1] = pool_byte(id, n - 1);
}

static void pool_check(const unsigned char *p, size_t n, uintptr_t id, const char *what)
{
  for (size_t i = 0; i < n; i += 512) CHECK(p[i] == pool_byte(id, i), "pool: %s block %p lost byte %zu", what, (void *)p, i);
  CHECK(p[n - 1] == pool_byte(id, n - 1), "pool: %s block %p lost its last byte", what, (void *)p);
}

static void *pool_thread(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg;
  rng_t r;
  rng_seed(&r, 0x9001 + t);
  size_t cap = POOL_BYTES / 8192 + 1, n = 0, got = 0;
  unsigned char **blk = malloc(cap * sizeof *blk);
  size_t *sz = malloc(cap * sizeof *sz);
  CHECK(blk != NULL && sz != NULL, "pool: malloc");
  while (got < POOL_BYTES && n < cap) {
    sz[n] = rng_logsize(&r, 8192, 96 * 1024);
    blk[n] = malloc(sz[n]);
    CHECK(blk[n] != NULL, "pool: malloc(%zu)", sz[n]);
    pool_fill(blk[n], sz[n], (uintptr_t)blk[n]);
    got += sz[n++];
  }
  for (size_t i = 0; i < n; i++) {
    if (i % 10 == 9) {
      pool_kept[t] += sz[i];
      continue;
    }
    pool_freed[t] += sz[i];
    free(blk[i]);
    blk[i] = NULL;
  }
  pthread_barrier_wait(&pool_bar); /* freed */
  pthread_barrier_wait(&pool_bar); /* asleep in the kernel until main has measured */
  for (size_t i = 0; i < n; i++)
    if (blk[i] != NULL) pool_check(blk[i], sz[i], (uintptr_t)blk[i], "kept");
  /* The classes' slabs again, their free blocks given back meanwhile. */
  for (size_t i = 0; i < n; i++)
    if (blk[i] == NULL) {
      blk[i] = malloc(sz[i]);
      CHECK(blk[i] != NULL, "pool: malloc(%zu)", sz[i]);
      pool_fill(blk[i], sz[i], (uintptr_t)blk[i]);
    }
  for (size_t i = 0; i < n; i++) {
    pool_check(blk[i], sz[i], (uintptr_t)blk[i], "new");
    free(blk[i]);
  }
  free(blk);
  free(sz);
  return NULL;
}

static void part_pool(void)
{
  pthread_t t[POOL_THREADS];
  CHECK(pthread_barrier_init(&pool_bar, NULL, POOL_THREADS + 1) == 0, "pthread_barrier_init");
  size_t before = tu_rss_bytes();
  for (unsigned i = 0; i < POOL_THREADS; i++)
    CHECK(pthread_create(&t[i], NULL, pool_thread, (void *)(uintptr_t)i) == 0, "pthread_create");
  pthread_barrier_wait(&pool_bar);
  size_t peak = tu_rss_bytes(), kept = 0, freed = 0;
  for (unsigned i = 0; i < POOL_THREADS; i++) kept += pool_kept[i], freed += pool_freed[i];
  /* the threads' stacks and the level the burst started from count as before */
  size_t slack = kept + freed / 4 + 8 * MiB;
  size_t after = settle(before, slack);
  printf("pool: %d threads, %.1f MiB freed, %.1f MiB kept, then asleep\n", POOL_THREADS, mib(freed), mib(kept));
  verdict("pool", before, peak, after, slack);
  pthread_barrier_wait(&pool_bar);
  for (unsigned i = 0; i < POOL_THREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&pool_bar);
}

static size_t exited_mib;
static pthread_barrier_t exited_bar;
static void *exited_thread(void *arg)
{
  size_t n;
  node_t *h = alloc_list(exited_mib ? exited_mib * MiB : 1024, 1024, 1024, (uint64_t)(uintptr_t)arg, &n);
  if (arg != NULL) pthread_barrier_wait(&exited_bar); /* every one at its peak at once */
  node_list_free(h);
  return NULL;
}

static double ms_since(const struct timespec *t0)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static void part_exited(void)
{
  enum { N = 4 };
  pthread_t t[N];
  struct timespec t0;
  /* Below the floor: kept warm past a quarter of the delay. */
  size_t before = tu_rss_bytes();
  exited_mib = 1;
  CHECK(pthread_create(&t[0], NULL, exited_thread, NULL) == 0, "pthread_create");
  pthread_join(t[0], NULL);
  size_t peak = tu_rss_bytes();
  sleep_ms(delay_ms() * 3 / 5);
  size_t after = tu_rss_bytes();
  int ok = after + MiB / 2 >= peak && peak >= before + MiB / 2;
  printf("exited: one thread's 1 MiB: RSS %.1f before, %.1f after its exit, %.1f after %u ms  %s\n", mib(before),
         mib(peak), mib(after), delay_ms() * 3 / 5, ok ? "ok" : "FAIL");
  if (!ok) {
    fprintf(stderr, "FAIL exited: 1 MiB of an exited thread went back before the purge delay (%.1f -> %.1f MiB)\n",
            mib(peak), mib(after));
    fails++;
  }
  /* Above it but with no thread taking any of it (a thread started now
   * and then): kept warm for the next one. */
  before = tu_rss_bytes();
  exited_mib = 8;
  CHECK(pthread_barrier_init(&exited_bar, NULL, N) == 0, "pthread_barrier_init");
  for (uintptr_t i = 0; i < N; i++) CHECK(pthread_create(&t[i], NULL, exited_thread, (void *)(i + 1)) == 0, "pthread_create");
  for (unsigned i = 0; i < N; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&exited_bar);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  peak = tu_rss_bytes();
  sleep_ms(delay_ms() * 3 / 5);
  after = tu_rss_bytes();
  ok = after >= before + 16 * MiB;
  printf("exited: %d threads' 8 MiB each: RSS %.1f before, %.1f after their exits, %.1f after %u ms, no thread "
         "adopting  %s\n", N, mib(before), mib(peak), mib(after), delay_ms() * 3 / 5, ok ? "ok" : "FAIL");
  if (!ok) {
    fprintf(stderr, "FAIL exited: %.1f MiB of exited threads went back before the purge delay with no thread "
            "adopting (%.1f MiB left)\n", mib(peak) - mib(after), mib(after) - mib(before));
    fails++;
  }
  /* A thread adopts one superslab and passes the others over: those go
   * back at once (free for more than a quarter already), well before the
   * delay; what it adopted may stay. */
  exited_mib = 0;
  CHECK(pthread_create(&t[0], NULL, exited_thread, NULL) == 0, "pthread_create");
  pthread_join(t[0], NULL);
  while (after > before + 8 * MiB && ms_since(&t0) < delay_ms() * 0.9) {
    sleep_ms(20);
    after = tu_rss_bytes();
  }
  double waited = ms_since(&t0);
  ok = after <= before + 8 * MiB;
  printf("exited: after a thread adopted: %.1f MiB %.0f ms after the exits  %s\n", mib(after), waited, ok ? "ok" : "FAIL");
  fflush(stdout);
  if (!ok) {
    fprintf(stderr, "FAIL exited: %.1f MiB of exited threads still resident after %.0f ms (delay %u ms)\n",
            mib(after) - mib(before), waited, delay_ms());
    fails++;
  }
}

static void part_phases(void)
{
  size_t base = tu_rss_bytes();
  /* rounds 1..R-1 (round 0 starts from an empty process) split into a first
   * half A and a second half B; the cached amount varies from phase to phase
   * (which spans and mappings happen to be kept), so halves are compared:
   * B's peak <= A's peak + 32 MiB, B's mean after-phase RSS <= A's + 24 MiB,
   * and every after-phase figure within the retention budgets. */
  unsigned half = 1 + (g_rounds - 1) / 2; /* rounds [1, half) = A, [half, R) = B */
  size_t peak_a = 0, peak_b = 0, worst_after = 0;
  double sum_a = 0, sum_b = 0;
  unsigned n_a = 0, n_b = 0;
  printf("phases: baseline %.1f MiB; RSS at the end of each phase (after 3 x delay), MiB:\n", mib(base));
  printf("phases: round   small-peak small-after  medium-peak medium-after  large-peak large-after\n");
  for (unsigned r = 0; r < g_rounds; r++) {
    size_t n, pk[3], af[3];
    node_t *h = alloc_list(g_bytes / 4, 16, 512, 10 + r, &n);
    pk[0] = tu_rss_bytes();
    node_list_free(h);
    sleep_ms(idle_ms());
    af[0] = tu_rss_bytes();
    h = alloc_list(g_bytes / 4, 1024, 1 << 20, 20 + r, &n);
    pk[1] = tu_rss_bytes();
    node_list_free(h);
    sleep_ms(idle_ms());
    af[1] = tu_rss_bytes();
    h = alloc_list(g_bytes / 4, 2 << 20, 24 << 20, 30 + r, &n);
    pk[2] = tu_rss_bytes();
    node_list_free(h);
    sleep_ms(idle_ms());
    af[2] = tu_rss_bytes();
    printf("phases: %5u %12.1f %11.1f %12.1f %12.1f %11.1f %11.1f\n", r, mib(pk[0]), mib(af[0]), mib(pk[1]),
           mib(af[1]), mib(pk[2]), mib(af[2]));
    fflush(stdout);
    for (int k = 0; k < 3; k++) {
      if (af[k] > worst_after) worst_after = af[k];
      if (r == 0) continue;
      if (r < half) {
        if (pk[k] > peak_a) peak_a = pk[k];
        sum_a += (double)af[k];
        n_a++;
      } else {
        if (pk[k] > peak_b) peak_b = pk[k];
        sum_b += (double)af[k];
        n_b++;
      }
    }
  }
  double mean_a = sum_a / n_a / MiB, mean_b = sum_b / n_b / MiB;
  /* Memory goes back by time (the background purge thread), so after the
   * idle 3 x delay little should stay; the bound is generous: what the
   * phase freed last may not be due yet on a loaded machine, plus
   * HAKMEM_LARGE_CACHE (64 MiB) of large mappings. */
  size_t budget = (8 + 32 + 64 + 8) * MiB;
  int ok = peak_b <= peak_a + 32 * MiB && mean_b <= mean_a + 24.0 && worst_after <= base + budget;
  printf("phases: rounds 1..%u: peak %.1f MiB, mean after-phase %.1f MiB; rounds %u..%u: peak %.1f MiB, mean "
         "after-phase %.1f MiB; worst after-phase %.1f MiB (baseline %.1f, retention budget %.0f MiB)  %s\n",
         half - 1, mib(peak_a), mean_a, half, g_rounds - 1, mib(peak_b), mean_b, mib(worst_after), mib(base),
         mib(budget), ok ? "ok" : "FAIL");
  if (!ok) {
    fprintf(stderr, "FAIL phases: RSS grows across rounds or is not returned after a phase\n");
    fails++;
  }
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 && argv[1][0] != '-' ? argv[1] : "all";
  g_bytes = (size_t)test_param(argc, argv, "mib", NULL, 1024) * MiB;
  g_rounds = (unsigned)test_param(argc, argv, "rounds", NULL, 6);
  if (g_rounds < 5) g_rounds = 5;
  /* warm up: the allocator's own start-up state is part of the baseline */
  void *w = malloc(100);
  free(w);
  printf("test_rss_return: %zu MiB per phase, purge delay %u ms\n", g_bytes / MiB, delay_ms());
  fflush(stdout);
  static const struct { const char *name; void (*fn)(void); } parts[] = {
      {"small", part_small}, {"mixed", part_mixed}, {"remote", part_remote}, {"idle", part_idle}, {"lists", part_lists}, {"sleepers", part_sleepers}, {"pool", part_pool},
      {"donate", part_donate}, {"exited", part_exited},
      {"phases", part_phases}};
  int ran = 0;
  for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
    if (strcmp(part, "all") == 0 || strcmp(part, parts[k].name) == 0) {
      parts[k].fn();
      ran++;
    }
  CHECK(ran > 0, "unknown part %s", part);
  printf("test_rss_return: %d failure(s)\n", fails);
  return fails != 0;
}
