/*
 * test_prof_fork.c — the heap profiler across fork (issue 21), against
 * libhakmem.so with HAKMEM_PROF=1 (set by CTest; the test fails if the
 * profiler is not active, so it cannot pass vacuously).
 *
 *   test_prof_fork [--forks=N] [--blocks=N] [--threads=N] [--dir=D] [--seed=S]
 *
 * THREADS threads allocate and free blocks of 8 B..64 KiB (so, with a
 * small HAKMEM_PROF_SAMPLE, they take the sampler's table lock all the
 * time), one more writes profile dumps into D in a loop (the dump lock,
 * the symbolizer), while the main thread forks FORKS times. Each child
 * allocates BLOCKS blocks (many of them sampled), checks their contents,
 * frees them, writes a dump of its own (one child in 16) when D is given, and exits 0. A
 * lock the fork left held in the child shows as a hang: every child arms
 * alarm(30) first, so a hang kills it with SIGALRM and the parent fails
 * (a timeout is only a backstop, never a pass).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static atomic_bool g_stop;
static atomic_ullong g_bg_ops, g_dumps;
static uint64_t g_seed = 21;
static const char *g_dir;

static void *churn(void *arg) {
  rng_t r;
  rng_seed(&r, g_seed + (uintptr_t)arg);
  enum { N = 512 };
  void *slot[N] = {0};
  size_t len[N] = {0};
  while (!atomic_load(&g_stop)) {
    unsigned i = (unsigned)rng_below(&r, N);
    if (slot[i] != NULL) {
      CHECK(pat_check(slot[i], len[i], (uintptr_t)slot[i]) == (size_t)-1, "worker: block %p overwritten", slot[i]);
      free(slot[i]);
    }
    len[i] = rng_logsize(&r, 8, 64 << 10);
    slot[i] = malloc(len[i]);
    CHECK(slot[i] != NULL, "worker: malloc(%zu) failed", len[i]);
    pat_fill(slot[i], len[i], (uintptr_t)slot[i]);
    atomic_fetch_add_explicit(&g_bg_ops, 1, memory_order_relaxed);
  }
  for (unsigned i = 0; i < N; i++) free(slot[i]);
  return NULL;
}

static void *dumper(void *arg) {
  (void)arg;
  char path[4096];
  while (!atomic_load(&g_stop)) {
    snprintf(path, sizeof path, "%s/parent", g_dir);
    CHECK(hak_prof_dump(path) == 0, "parent dump to %s failed", path);
    atomic_fetch_add_explicit(&g_dumps, 1, memory_order_relaxed);
    usleep(10000); /* most forks meet no dump: the test is about the locks, not dump speed */
  }
  return NULL;
}

static void child(unsigned long n, unsigned long blocks) {
  alarm(30); /* default action: the child dies of SIGALRM, the parent reports it */
  void **b = malloc(blocks * sizeof *b);
  CHECK(b != NULL, "child: malloc of the pointer array failed");
  rng_t r;
  rng_seed(&r, g_seed ^ (n * 0x9E3779B97F4A7C15ull));
  for (unsigned long i = 0; i < blocks; i++) {
    size_t s = rng_logsize(&r, 8, 4096);
    b[i] = malloc(s);
    CHECK(b[i] != NULL, "child: malloc(%zu) failed", s);
    memset(b[i], (int)(i & 0xff), s < 16 ? s : 16);
  }
  for (unsigned long i = 0; i < blocks; i++) {
    CHECK(((unsigned char *)b[i])[0] == (unsigned char)(i & 0xff), "child: block %lu overwritten", i);
    free(b[i]);
  }
  free(b);
  if (g_dir != NULL && n % 16 == 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/child%lu", g_dir, n);
    CHECK(hak_prof_dump(path) == 0, "child dump to %s failed", path);
  }
  _exit(0);
}

int main(int argc, char **argv) {
  unsigned long forks = 300, blocks = 20000, threads = 2;
  for (int i = 1; i < argc; i++) {
    if (sscanf(argv[i], "--forks=%lu", &forks) == 1) continue;
    if (sscanf(argv[i], "--blocks=%lu", &blocks) == 1) continue;
    if (sscanf(argv[i], "--threads=%lu", &threads) == 1) continue;
    if (strncmp(argv[i], "--dir=", 6) == 0) {
      g_dir = argv[i] + 6;
      continue;
    }
    if (sscanf(argv[i], "--seed=%llu", (unsigned long long *)&g_seed) == 1) continue;
    fprintf(stderr, "usage: %s [--forks=N] [--blocks=N] [--threads=N] [--dir=D] [--seed=S]\n", argv[0]);
    return 2;
  }
  check_set_seed(g_seed);
  free(malloc(1)); /* start the allocator: options in force */
  bool active = false;
  size_t len = sizeof active;
  CHECK(hak_ctl("prof.active", &active, &len, NULL, 0) == 0 && active,
        "the profiler is not active: run with HAKMEM_PROF=1");

  pthread_t t[64 + 1];
  if (threads > 64) threads = 64;
  for (unsigned long i = 0; i < threads; i++)
    CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0, "pthread_create");
  if (g_dir != NULL) CHECK(pthread_create(&t[threads], NULL, dumper, NULL) == 0, "pthread_create");

  for (unsigned long n = 0; n < forks; n++) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork #%lu: %s", n, strerror(errno));
    if (pid == 0) child(n, blocks);
    int st;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    CHECK(w == pid, "waitpid: %s", strerror(errno));
    CHECK(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM),
          "fork #%lu: the child hung (killed by its 30 s alarm): a lock held across fork", n);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork #%lu: child status 0x%x", n, st);
  }
  atomic_store(&g_stop, true);
  for (unsigned long i = 0; i < threads; i++) pthread_join(t[i], NULL);
  if (g_dir != NULL) pthread_join(t[threads], NULL);
  printf("test_prof_fork: %lu forks x %lu blocks, %lu threads: %llu background ops, %llu parent dumps: OK\n", forks,
         blocks, threads, (unsigned long long)g_bg_ops, (unsigned long long)g_dumps);
  return 0;
}
