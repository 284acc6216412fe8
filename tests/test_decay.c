/*
 * test_decay.c — idle memory goes back to the OS by time (a decay window),
 * never because a count of freed bytes was exceeded; the background purge
 * thread (HAKMEM_BACKGROUND_THREAD) returns an idle process's memory, and
 * survives fork and exit.
 *
 *   test_decay PART [--mib=N] [--rounds=N] [--steps=N] [--forks=N]
 *   parts: steady background nobackground fork exit
 *
 * steady        (run with HAKMEM_PURGE_DELAY_MS=1000) a working set of 64
 *               slots of 1 KiB..1 MiB plus 8 slots of 1..16 MiB is warmed up,
 *               then --steps (200 000) frees+mallocs of the same sizes in
 *               random batches run; the hak_stats deltas of madvise_calls,
 *               mmap_calls and munmap_calls over the loop must all be 0
 *               (the order of reallocation is LIFO within a batch and the
 *               sizes per slot are fixed, so the footprint cannot grow).
 *               Then the same with 10 slots of 1 MiB+4 KiB..24 MiB (arena
 *               spans and dedicated mappings) plus two small ones
 *               (--steps/10), and single sizes 64 KiB..1 MiB on 2 threads,
 *               each with its own 32-slot working set: the same three deltas
 *               must be 0.
 * background    (HAKMEM_BACKGROUND_THREAD=1, HAKMEM_PURGE_DELAY_MS=50)
 *               allocate and touch --mib (512) MiB in sizes 16 B..256 KiB
 *               plus 8 blocks of 4 MiB, free it all, then make NO allocator
 *               call for 10 x delay: RSS (raw /proc/self/statm) must be
 *               within 32 MiB of the level before the phase. --rounds (2).
 *               --hold-ms (0): the memory stays live that long, with no
 *               allocator call, before the frees (the purge thread must
 *               still run then: frees never start it).
 *               --big=1: blocks of 256 KiB..2 MiB instead, all in the
 *               arenas, whose frees alone must wake the waiting thread.
 * nobackground  (HAKMEM_BACKGROUND_THREAD=0) the same phase; after the
 *               10 x delay sleep the RSS is printed, not bounded, and the
 *               process must have 1 thread (no purge thread); then
 *               malloc_trim(0) (round 0) or hak_collect(1) (round 1) must
 *               bring RSS within 32 MiB of the baseline.
 * fork          (background thread on) free a 64 MiB phase and fork at once
 *               (memory in its decay window, purge under way); the child
 *               allocates, touches and frees --mib (256) MiB, sleeps
 *               10 x delay without allocator calls and must be within 32 MiB
 *               of its own post-fork baseline, then exit(0); the parent does
 *               the same concurrently (bound: its start-of-test baseline) and
 *               waitpid-checks the child (exit status 0 within 30 s).
 *               --forks (5) times.
 * exit          (background thread on) children re-executed from this
 *               program: (a) main frees a 256 MiB phase (then sleeps, or
 *               keeps calling malloc/free) while another thread calls exit(7)
 *               0..250 ms after the frees began (the background thread is
 *               purging); (b) main frees 512 MiB and returns from main at
 *               once or 25..80 ms later with status 10+k; (c) the only
 *               thread ends with pthread_exit after freeing 256 MiB, or
 *               with 64 MiB still live (the purge thread idle, nothing to
 *               purge) at once or 1.5 s later. Each must end with
 *               its status within 15 s of being started and within 5 s of
 *               its exit()/return (the child reports the time of the call
 *               through a pipe).
 * Every figure is printed, on success too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static int fails;
static size_t g_mib;
static unsigned g_rounds, g_forks, g_hold_ms, g_big;
static unsigned long long g_steps;

/* ---------------------------------------------------------------- helpers */

/* read a whole /proc file into buf with open/read: no allocation */
static size_t proc_read(const char *path, char *buf, size_t cap)
{
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open %s: errno %d", path, errno);
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    CHECK(n >= 0, "read %s: errno %d", path, errno);
    if (n == 0 || got + (size_t)n >= cap - 1) {
      got += (size_t)n;
      break;
    }
    got += (size_t)n;
  }
  close(fd);
  buf[got] = 0;
  return got;
}

/* number of threads of this process ("Threads:" of /proc/self/status) */
static long threads_raw(void)
{
  char buf[8192];
  proc_read("/proc/self/status", buf, sizeof buf);
  char *p = strstr(buf, "\nThreads:");
  CHECK(p != NULL, "no Threads: line in /proc/self/status");
  return strtol(p + 9, NULL, 10);
}

static unsigned delay_ms(void)
{
  const char *e = getenv("HAKMEM_PURGE_DELAY_MS");
  return e && *e ? (unsigned)strtoul(e, NULL, 10) : 100; /* the documented default */
}

static const char *bg_opt(void)
{
  const char *e = getenv("HAKMEM_BACKGROUND_THREAD");
  return e && *e ? e : "(default)";
}

static void sleep_ms(unsigned ms)
{
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static double now_ms(void) { return tu_now_s() * 1e3; }

static double mib(size_t x) { return (double)x / MiB; }

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "FAIL ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  fails++;
}

typedef struct {
  size_t mmap, munmap, madvise, mremap, purged;
} oscount_t;

static oscount_t os_counts(void)
{
  static struct hak_stats s; /* ~3 KiB: not on small thread stacks */
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  CHECK(hak_stats_get(&s) == 0, "hak_stats_get failed");
  oscount_t c = {s.mmap_calls, s.munmap_calls, s.madvise_calls, s.mremap_calls, s.purged_bytes};
  pthread_mutex_unlock(&mu);
  return c;
}

/* An allocation phase: an intrusive list (no side table), every byte touched. */

static node_t *phase_alloc(size_t total, size_t lo, size_t hi, unsigned nbig, size_t bigsz, uint64_t seed,
                           size_t *count)
{
  rng_t r;
  rng_seed(&r, seed);
  node_t *head = NULL;
  size_t got = 0, n = 0, small_total = total > nbig * bigsz ? total - nbig * bigsz : 0;
  size_t big_every = nbig ? small_total / nbig + 1 : 0, next_big = big_every / 2;
  unsigned bigs = 0;
  while (got < total) {
    size_t sz;
    if (bigs < nbig && (got >= next_big || got >= small_total)) {
      sz = bigsz;
      bigs++;
      next_big += big_every;
    } else {
      sz = rng_logsize(&r, lo, hi);
    }
    node_push_touched(&head, sz, got);
    got += sz;
    n++;
  }
  if (count) *count = n;
  return head;
}


/* Sleep `total` ms without any allocator call, sampling RSS every 5 ms;
 * *first gets the time (ms) at which RSS first was <= bound (-1: never). */
static size_t idle_wait(unsigned total, size_t bound, double *first)
{
  double t0 = now_ms();
  *first = -1;
  for (;;) {
    double t = now_ms() - t0;
    size_t r = tu_rss_bytes();
    if (*first < 0 && r <= bound) *first = t;
    if (t >= total) return r;
    sleep_ms(5);
  }
}

/* ----------------------------------------------------------------- steady */

#define ST_SMALL 64
#define ST_BIG 8
#define ST_SLOTS (ST_SMALL + ST_BIG)

typedef struct {
  void *p;
  size_t n;
} slot_t;

static void slot_fill(slot_t *s, size_t i)
{
  s->p = malloc(s->n);
  CHECK(s->p != NULL, "malloc(%zu) failed", s->n);
  /* touch the head and tail; tag with the slot index */
  memset(s->p, (int)(i & 0xff), s->n < 64 ? s->n : 64);
  ((unsigned char *)s->p)[s->n - 1] = (unsigned char)i;
}

static void slot_drop(slot_t *s, size_t i)
{
  const unsigned char *b = s->p;
  CHECK(b[0] == (unsigned char)i && b[s->n - 1] == (unsigned char)i, "slot %zu (%zu bytes) content lost", i, s->n);
  free(s->p);
  s->p = NULL;
}

/* `steps` frees+mallocs: random batches of 1..8 distinct slots freed in
 * random order, then allocated again (same sizes) in reverse order. */
static void steady_steps(slot_t *sl, size_t nslots, unsigned long long steps, rng_t *r)
{
  size_t batch[8];
  unsigned long long done = 0;
  while (done < steps) {
    size_t nb = (size_t)rng_range(r, 1, 8);
    if (nb > steps - done) nb = (size_t)(steps - done);
    size_t k = 0;
    while (k < nb) {
      size_t i = (size_t)rng_below(r, nslots);
      if (sl[i].p == NULL) continue;
      slot_drop(&sl[i], i);
      batch[k++] = i;
    }
    while (k > 0) {
      k--;
      slot_fill(&sl[batch[k]], batch[k]);
    }
    done += nb;
  }
}

static int steady_verdict(const char *what, oscount_t a, oscount_t b, unsigned long long steps, double ms)
{
  size_t dmadv = b.madvise - a.madvise, dmmap = b.mmap - a.mmap, dmunmap = b.munmap - a.munmap;
  int ok = dmadv == 0 && dmmap == 0 && dmunmap == 0;
  printf("steady %-22s %llu malloc/free steps in %.0f ms: madvise +%zu, mmap +%zu, munmap +%zu (mremap +%zu, "
         "purged %+.1f MiB)  %s\n",
         what, steps, ms, dmadv, dmmap, dmunmap, b.mremap - a.mremap, mib(b.purged - a.purged), ok ? "ok" : "FAIL");
  fflush(stdout);
  if (!ok)
    fail("steady %s: a steady malloc/free loop made system calls: madvise_calls +%zu, mmap_calls +%zu, "
         "munmap_calls +%zu (all must be 0)", what, dmadv, dmmap, dmunmap);
  return ok;
}

typedef struct {
  size_t size;
  unsigned long long steps;
  uint64_t seed;
  pthread_barrier_t *bar;
} st_thread_arg_t;

#define ST_T_SLOTS 32

static void *steady_thread(void *argp)
{
  st_thread_arg_t *a = argp;
  rng_t r;
  rng_seed(&r, a->seed);
  slot_t sl[ST_T_SLOTS];
  for (size_t i = 0; i < ST_T_SLOTS; i++) {
    sl[i].n = a->size;
    slot_fill(&sl[i], i);
  }
  steady_steps(sl, ST_T_SLOTS, 20000, &r);
  pthread_barrier_wait(a->bar); /* 1: warmed up; main trims */
  pthread_barrier_wait(a->bar); /* 2: trimmed */
  steady_steps(sl, ST_T_SLOTS, 5000, &r);
  pthread_barrier_wait(a->bar); /* 3: main takes the "before" figures */
  pthread_barrier_wait(a->bar); /* 4: go */
  steady_steps(sl, ST_T_SLOTS, a->steps, &r);
  pthread_barrier_wait(a->bar); /* 5: main takes the "after" figures */
  pthread_barrier_wait(a->bar); /* 6 */
  for (size_t i = 0; i < ST_T_SLOTS; i++) slot_drop(&sl[i], i);
  return NULL;
}

static void part_steady(void)
{
  printf("steady: HAKMEM_PURGE_DELAY_MS=%u, HAKMEM_BACKGROUND_THREAD=%s%s\n", delay_ms(), bg_opt(),
         delay_ms() < 1000 ? " (expected 1000: idle memory may legitimately decay during the loop)" : "");
  rng_t r;
  rng_seed(&r, 8001);
  static slot_t sl[ST_SLOTS];
  size_t ws = 0;
  for (size_t i = 0; i < ST_SLOTS; i++) {
    sl[i].n = i < ST_SMALL ? rng_logsize(&r, KiB, MiB) : rng_logsize(&r, MiB + 1, 16 * MiB);
    ws += sl[i].n;
    slot_fill(&sl[i], i);
  }
  printf("steady: working set %d slots of 1 KiB..1 MiB + %d of 1..16 MiB = %.1f MiB; big blocks (KiB):", ST_SMALL,
         ST_BIG, mib(ws));
  for (size_t i = ST_SMALL; i < ST_SLOTS; i++) printf(" %zu", sl[i].n / KiB);
  printf("\n");
  steady_steps(sl, ST_SLOTS, 50000, &r);
  /* nothing left over from the warm-up may decay during the measured loop */
  malloc_trim(0);
  steady_steps(sl, ST_SLOTS, 10000, &r);
  oscount_t a = os_counts();
  double t0 = now_ms();
  steady_steps(sl, ST_SLOTS, g_steps, &r);
  double ms = now_ms() - t0;
  oscount_t b = os_counts();
  steady_verdict("mixed 1 KiB..16 MiB", a, b, g_steps, ms);
  for (size_t i = 0; i < ST_SLOTS; i++) slot_drop(&sl[i], i);

  /* big blocks only: arena spans (1..16 MiB) and dedicated mappings (16 MiB
   * and above, within the default 64 MiB mapping cache), small blocks between */
  static const size_t big[] = {MiB + 4096, 3 * MiB, 5 * MiB + 12345, 8 * MiB, 12 * MiB,
                               16 * MiB - 4096, 16 * MiB, 24 * MiB, 1000, 50000};
  slot_t bs[sizeof big / sizeof big[0]];
  size_t nbs = sizeof big / sizeof big[0];
  for (size_t i = 0; i < nbs; i++) {
    bs[i].n = big[i];
    slot_fill(&bs[i], i);
  }
  steady_steps(bs, nbs, 5000, &r);
  malloc_trim(0);
  steady_steps(bs, nbs, 2000, &r);
  a = os_counts();
  t0 = now_ms();
  steady_steps(bs, nbs, g_steps / 10, &r);
  ms = now_ms() - t0;
  b = os_counts();
  steady_verdict("big 1..24 MiB", a, b, g_steps / 10, ms);
  for (size_t i = 0; i < nbs; i++) slot_drop(&bs[i], i);

  /* one size at a time, two threads with their own working sets */
  static const size_t sizes[] = {64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, MiB};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    st_thread_arg_t ta[2];
    pthread_t th[2];
    unsigned long long per = g_steps;
    for (int t = 0; t < 2; t++) {
      ta[t] = (st_thread_arg_t){sizes[k], per, 9000 + k * 2 + (uint64_t)t, &bar};
      CHECK(pthread_create(&th[t], NULL, steady_thread, &ta[t]) == 0, "pthread_create");
    }
    pthread_barrier_wait(&bar); /* 1 */
    malloc_trim(0);
    pthread_barrier_wait(&bar); /* 2 */
    pthread_barrier_wait(&bar); /* 3 */
    a = os_counts();
    t0 = now_ms();
    pthread_barrier_wait(&bar); /* 4 */
    pthread_barrier_wait(&bar); /* 5 */
    ms = now_ms() - t0;
    b = os_counts();
    pthread_barrier_wait(&bar); /* 6 */
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar);
    char what[64];
    snprintf(what, sizeof what, "%zu KiB x 2 threads", sizes[k] / KiB);
    steady_verdict(what, a, b, 2 * per, ms);
  }
}

/* ------------------------------------------------------------ background */

static const size_t slack = 32 * MiB;

/* one phase: returns the RSS after the idle wait; prints the figures */
static size_t bg_phase(const char *what, unsigned round, size_t base, uint64_t seed)
{
  size_t n;
  double t0 = now_ms();
  /* --big: every block in the arenas (128 KiB and up), whose frees tell
   * the purge thread under their group's lock (decay_note_idle_locked);
   * a slab's free would wake it as well. */
  size_t lo = g_big ? 256 * KiB : 16, hi = g_big ? 2 * MiB : 256 * KiB;
  node_t *h = phase_alloc(g_mib * MiB, lo, hi, 8, 4 * MiB, seed, &n);
  size_t peak = tu_rss_bytes();
  /* --hold-ms: the memory stays live, with no allocator call, for longer
   * than the purge thread's quiet spells: it must still be there (or come
   * back) for the frees, which never start it. */
  if (g_hold_ms) sleep_ms(g_hold_ms);
  node_list_free(h);
  double tf = now_ms() - t0;
  double first;
  /* from here until idle_wait returns: no allocator call */
  size_t after = idle_wait(10 * delay_ms(), base + slack, &first);
  long thr = threads_raw();
  printf("%s round %u: %zu blocks (%zu MiB, %zu B..%zu KiB + 8 x 4 MiB) allocated+freed in %.0f ms; RSS base "
         "%.1f, peak %.1f, after %u ms idle %.1f MiB (%+.1f); within +32 MiB after ",
         what, round, n, g_mib, lo, hi / KiB, tf, mib(base), mib(peak), 10 * delay_ms(), mib(after),
         mib(after) - mib(base));
  if (first >= 0) printf("%.0f ms", first); else printf("never");
  printf("; threads %ld\n", thr);
  fflush(stdout);
  return after;
}

static void part_background(void)
{
  printf("background: HAKMEM_PURGE_DELAY_MS=%u, HAKMEM_BACKGROUND_THREAD=%s, %u round(s) of %zu MiB, held %u ms "
         "before the frees\n", delay_ms(), bg_opt(), g_rounds, g_mib, g_hold_ms);
  fflush(stdout);
  size_t base = tu_rss_bytes();
  printf("background: baseline RSS %.1f MiB, threads %ld\n", mib(base), threads_raw());
  fflush(stdout);
  for (unsigned r = 0; r < g_rounds; r++) {
    size_t after = bg_phase("background", r, base, 100 + r);
    if (after > base + slack)
      fail("background round %u: RSS %.1f MiB after %u ms without allocator calls, baseline %.1f MiB (allowed "
           "+32 MiB): the idle process did not get its memory back", r, mib(after), 10 * delay_ms(), mib(base));
  }
}

static void part_nobackground(void)
{
  printf("nobackground: HAKMEM_PURGE_DELAY_MS=%u, HAKMEM_BACKGROUND_THREAD=%s, %zu MiB\n", delay_ms(), bg_opt(),
         g_mib);
  fflush(stdout);
  size_t base = tu_rss_bytes();
  printf("nobackground: baseline RSS %.1f MiB, threads %ld\n", mib(base), threads_raw());
  fflush(stdout);
  for (unsigned r = 0; r < 2; r++) {
    bg_phase("nobackground", r, base, 200 + r);
    long thr = threads_raw();
    if (thr != 1) fail("nobackground round %u: %ld threads with HAKMEM_BACKGROUND_THREAD=0 (want 1)", r, thr);
    const char *how = r == 0 ? "malloc_trim(0)" : "hak_collect(1)";
    double t0 = now_ms();
    if (r == 0) malloc_trim(0); else hak_collect(1);
    double tt = now_ms() - t0;
    size_t after = tu_rss_bytes();
    int ok = after <= base + slack;
    printf("nobackground round %u: after %s (%.1f ms): RSS %.1f MiB (%+.1f)  %s\n", r, how, tt, mib(after),
           mib(after) - mib(base), ok ? "ok" : "FAIL");
    fflush(stdout);
    if (!ok)
      fail("nobackground round %u: RSS %.1f MiB after %s, baseline %.1f MiB (allowed +32 MiB)", r, mib(after), how,
           mib(base));
  }
}

/* ------------------------------------------------------------------- fork */

/* allocate/touch/free g_mib MiB, idle 10 x delay; returns RSS after */
static size_t fork_phase(uint64_t seed, size_t *peak, double *first, size_t bound)
{
  node_t *h = phase_alloc(g_mib * MiB, 16, 256 * KiB, 4, 4 * MiB, seed, NULL);
  *peak = tu_rss_bytes();
  node_list_free(h);
  return idle_wait(10 * delay_ms(), bound, first);
}

static void part_fork(void)
{
  printf("fork: HAKMEM_PURGE_DELAY_MS=%u, HAKMEM_BACKGROUND_THREAD=%s, %u forks, %zu MiB per phase\n", delay_ms(),
         bg_opt(), g_forks, g_mib);
  fflush(stdout);
  size_t base = tu_rss_bytes();
  for (unsigned f = 0; f < g_forks; f++) {
    /* a phase freed just now: in its decay window when we fork */
    node_t *pre = phase_alloc(64 * MiB, 16, 256 * KiB, 2, 4 * MiB, 300 + f, NULL);
    node_list_free(pre);
    if (f & 1) sleep_ms(delay_ms()); /* odd forks: the purge is due / under way */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: errno %d", errno);
    if (pid == 0) {
      size_t cbase = tu_rss_bytes(), peak;
      double first;
      size_t after = fork_phase(400 + f, &peak, &first, cbase + slack);
      int ok = after <= cbase + slack;
      printf("fork %u child:  RSS at fork %.1f MiB, peak %.1f, after %u ms idle %.1f MiB (%+.1f; %+.1f vs the "
             "parent's start); within +32 MiB after %.0f ms  %s\n",
             f, mib(cbase), mib(peak), 10 * delay_ms(), mib(after), mib(after) - mib(cbase),
             mib(after) - mib(base), first, ok ? "ok" : "FAIL");
      fflush(stdout);
      CHECK(ok, "fork %u child: RSS %.1f MiB after freeing %zu MiB and %u ms without allocator calls; %.1f MiB "
            "after the fork (allowed +32 MiB)", f, mib(after), g_mib, 10 * delay_ms(), mib(cbase));
      exit(0);
    }
    double t0 = now_ms();
    size_t peak;
    double first;
    size_t after = fork_phase(500 + f, &peak, &first, base + slack);
    int ok = after <= base + slack;
    printf("fork %u parent: RSS base %.1f MiB, peak %.1f, after %u ms idle %.1f MiB (%+.1f); within +32 MiB "
           "after %.0f ms  %s\n",
           f, mib(base), mib(peak), 10 * delay_ms(), mib(after), mib(after) - mib(base), first, ok ? "ok" : "FAIL");
    fflush(stdout);
    if (!ok)
      fail("fork %u parent: RSS %.1f MiB after freeing %zu MiB and %u ms without allocator calls, baseline %.1f "
           "MiB (allowed +32 MiB)", f, mib(after), g_mib, 10 * delay_ms(), mib(base));
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < 30000) sleep_ms(2);
    if (w == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fail("fork %u: the child did not exit within 30 s (deadlock after fork?)", f);
      continue;
    }
    CHECK(w == pid, "waitpid: errno %d", errno);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail("fork %u: the child ended with %s %d (want exit status 0)", f, WIFEXITED(status) ? "exit status" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
}

/* ------------------------------------------------------------------- exit */

static int g_report_fd = -1;

/* tell the parent when exit()/return is called (CLOCK_MONOTONIC ms) */
static void report_exit_time(void)
{
  if (g_report_fd < 0) return;
  double t = now_ms();
  ssize_t rc = write(g_report_fd, &t, sizeof t);
  (void)rc;
}

static atomic_int exit_go;
static unsigned exit_after_ms;

static void *exit_caller(void *arg)
{
  (void)arg;
  while (!atomic_load(&exit_go)) sleep_ms(1);
  sleep_ms(exit_after_ms);
  report_exit_time();
  exit(7);
}

/* child: test_decay exit-thread AFTER_MS MODE FD */
static int child_exit_thread(int argc, char **argv)
{
  CHECK(argc >= 5, "exit-thread: arguments");
  exit_after_ms = (unsigned)strtoul(argv[2], NULL, 10);
  int mode = atoi(argv[3]);
  g_report_fd = atoi(argv[4]);
  node_t *h = phase_alloc(256 * MiB, 16, 256 * KiB, 4, 4 * MiB, 600 + exit_after_ms, NULL);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, exit_caller, NULL) == 0, "pthread_create");
  atomic_store(&exit_go, 1);
  node_list_free(h);
  rng_t r;
  rng_seed(&r, 1);
  for (;;) {
    if (mode == 0) {
      sleep_ms(1000); /* idle: only the background thread works */
    } else {
      void *p = malloc(rng_logsize(&r, 16, 65536));
      CHECK(p != NULL, "malloc");
      free(p);
    }
  }
}

/* child: test_decay exit-return SLEEP_MS CODE FD — returns CODE from main */
static int child_exit_return(int argc, char **argv)
{
  CHECK(argc >= 5, "exit-return: arguments");
  unsigned ms = (unsigned)strtoul(argv[2], NULL, 10);
  int code = atoi(argv[3]);
  g_report_fd = atoi(argv[4]);
  node_t *h = phase_alloc(512 * MiB, 16, 256 * KiB, 8, 4 * MiB, 700 + ms, NULL);
  node_list_free(h);
  if (ms) sleep_ms(ms);
  report_exit_time();
  return code;
}

/* child: test_decay exit-pthread SLEEP_MS 0 FD — the only thread ends with
 * pthread_exit while the purge thread has work: glibc ends the process
 * when its last thread ends, so the purge thread must not outlive it. */
static int child_exit_pthread(int argc, char **argv)
{
  CHECK(argc >= 5, "exit-pthread: arguments");
  unsigned ms = (unsigned)strtoul(argv[2], NULL, 10);
  g_report_fd = atoi(argv[4]);
  node_t *h = phase_alloc(256 * MiB, 16, 256 * KiB, 4, 4 * MiB, 800 + ms, NULL);
  node_list_free(h);
  if (ms) sleep_ms(ms);
  report_exit_time();
  pthread_exit(NULL);
}

/* child: test_decay exit-pthread-idle SLEEP_MS 0 FD — the same, but the
 * memory stays live and nothing is idle: the purge thread sleeps with no
 * work when the only other thread ends, and must end too. */
static int child_exit_pthread_idle(int argc, char **argv)
{
  CHECK(argc >= 5, "exit-pthread-idle: arguments");
  unsigned ms = (unsigned)strtoul(argv[2], NULL, 10);
  g_report_fd = atoi(argv[4]);
  node_t *h = phase_alloc(64 * MiB, 16, 256 * KiB, 4, 4 * MiB, 900 + ms, NULL);
  if (ms) sleep_ms(ms);
  report_exit_time();
  (void)h; /* still live */
  pthread_exit(NULL);
}

static double exit_worst_latency, exit_worst_total;

static void exit_run(const char *kind, unsigned ms, int arg, int want)
{
  int pfd[2];
  CHECK(pipe(pfd) == 0, "pipe");
  char a1[32], a2[32], a3[32];
  snprintf(a1, sizeof a1, "%u", ms);
  snprintf(a2, sizeof a2, "%d", arg);
  snprintf(a3, sizeof a3, "%d", pfd[1]);
  fflush(stdout);
  fflush(stderr);
  double t0 = now_ms();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: errno %d", errno);
  if (pid == 0) {
    close(pfd[0]);
    execl("/proc/self/exe", "test_decay", kind, a1, a2, a3, (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  int status = 0;
  pid_t w;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < 15000) sleep_ms(1);
  double t_end = now_ms();
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  double t_exit = -1; /* every write end is closed now: read cannot block */
  ssize_t n = read(pfd[0], &t_exit, sizeof t_exit);
  close(pfd[0]);
  if (w == 0) {
    fail("exit %s(%u ms, %d): the process did not end within 15 s%s", kind, ms, arg,
         n == (ssize_t)sizeof t_exit ? " of being started (exit()/return had been called)" : "");
    return;
  }
  double lat = n == (ssize_t)sizeof t_exit ? t_end - t_exit : -1;
  int ok = WIFEXITED(status) && WEXITSTATUS(status) == want && lat >= 0 && lat < 5000;
  printf("exit %-11s %3u ms %s: ended with %s %d (want %d) %.0f ms after start, %.1f ms after the call  %s\n", kind,
         ms, strcmp(kind, "exit-thread") == 0 ? (arg ? "main churns" : "main idle  ") : "           ",
         WIFEXITED(status) ? "status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), want,
         t_end - t0, lat, ok ? "ok" : "FAIL");
  fflush(stdout);
  if (lat > exit_worst_latency) exit_worst_latency = lat;
  if (t_end - t0 > exit_worst_total) exit_worst_total = t_end - t0;
  if (!ok)
    fail("exit %s(%u ms, %d): ended with %s %d (want exit status %d), %.1f ms after the exit call (limit 5000; -1: "
         "the call was never reported)", kind, ms, arg, WIFEXITED(status) ? "exit status" : "signal",
         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), want, lat);
}

static void part_exit(void)
{
  printf("exit: HAKMEM_PURGE_DELAY_MS=%u, HAKMEM_BACKGROUND_THREAD=%s\n", delay_ms(), bg_opt());
  static const unsigned after[] = {0, 20, 45, 55, 70, 100, 150, 250};
  for (size_t k = 0; k < sizeof after / sizeof after[0]; k++)
    exit_run("exit-thread", after[k] * delay_ms() / 50, (int)(k & 1), 7);
  static const unsigned sl[] = {0, 25, 55, 80};
  for (size_t k = 0; k < sizeof sl / sizeof sl[0]; k++)
    exit_run("exit-return", sl[k] * delay_ms() / 50, 10 + (int)k, 10 + (int)k);
  for (size_t k = 0; k < 2; k++) exit_run("exit-pthread", sl[k * 2] * delay_ms() / 50, 0, 0);
  /* The purge thread idle, with nothing to purge, for 0 and 1.5 s. */
  exit_run("exit-pthread-idle", 0, 0, 0);
  exit_run("exit-pthread-idle", 1500, 0, 0);
  printf("exit: worst %.1f ms from exit()/return to the end of the process, worst %.0f ms in all\n",
         exit_worst_latency, exit_worst_total);
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "exit-thread") == 0) return child_exit_thread(argc, argv);
  if (argc > 1 && strcmp(argv[1], "exit-return") == 0) return child_exit_return(argc, argv);
  if (argc > 1 && strcmp(argv[1], "exit-pthread") == 0) return child_exit_pthread(argc, argv);
  if (argc > 1 && strcmp(argv[1], "exit-pthread-idle") == 0) return child_exit_pthread_idle(argc, argv);

  const char *part = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
  int is_fork = strcmp(part, "fork") == 0;
  g_mib = (size_t)test_param(argc, argv, "mib", NULL, is_fork ? 256 : 512);
  g_rounds = (unsigned)test_param(argc, argv, "rounds", NULL, 2);
  g_forks = (unsigned)test_param(argc, argv, "forks", NULL, 5);
  g_steps = test_param(argc, argv, "steps", NULL, 200000);
  g_hold_ms = (unsigned)test_param(argc, argv, "hold-ms", NULL, 0);
  g_big = (unsigned)test_param(argc, argv, "big", NULL, 0);
  /* warm up: the allocator's start-up state and stdio's buffer are part of the baseline */
  void *w = malloc(100);
  free(w);
  printf("test_decay %s\n", part);
  fflush(stdout);
  static const struct { const char *name; void (*fn)(void); } parts[] = {
      {"steady", part_steady}, {"background", part_background}, {"nobackground", part_nobackground},
      {"fork", part_fork},     {"exit", part_exit}};
  int ran = 0;
  for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
    if (strcmp(part, parts[k].name) == 0) {
      double t0 = now_ms();
      parts[k].fn();
      printf("test_decay %s: %.1f s\n", part, (now_ms() - t0) / 1e3);
      ran++;
    }
  CHECK(ran > 0, "unknown part '%s' (steady background nobackground fork exit)", part);
  printf("test_decay %s: %d failure(s)\n", part, fails);
  return fails != 0;
}
