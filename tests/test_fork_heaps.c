/*
 * test_fork_heaps.c — a fork child and the heaps of threads that do not
 * exist there. Four threads hold blocks of 8..32 KiB (classes the idle-heap
 * collector looks into) and stay alive while the main thread forks; each
 * child frees every one of those blocks, so the dead threads' superslabs
 * empty and, with HAKMEM_SS_CACHE=0 and a short purge delay (CTest sets
 * both), are unmapped while the child's purge thread keeps walking every
 * heap. Nothing of a dead heap may point into them: before the fix the
 * collector read a dead heap's current slab there and the child died of
 * SIGSEGV (test_stress fork, one child in 500..650). Each child checks the
 * blocks' contents, allocates again, and must exit 0.
 *
 *   test_fork_heaps [ROUNDS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

enum { THREADS = 4, BLOCKS = 300 };

static unsigned char *blk[THREADS][BLOCKS];
static size_t len[THREADS][BLOCKS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, stop;

/* Each block's pattern key (testutil.h's pat_*). */
static uint64_t key(unsigned t, unsigned i) { return (uint64_t)t << 32 | i; }

static void *holder(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg;
  for (unsigned i = 0; i < BLOCKS; i++) {
    len[t][i] = 8192 + (size_t)((i * 2654435761u + t) % (24 * 1024));
    blk[t][i] = malloc(len[t][i]);
    CHECK(blk[t][i] != NULL, "malloc(%zu)", len[t][i]);
    pat_fill(blk[t][i], len[t][i], key(t, i));
  }
  pthread_mutex_lock(&mu);
  ready++;
  pthread_cond_broadcast(&cv);
  while (!stop) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void child(void)
{
  alarm(30);
  for (unsigned t = 0; t < THREADS; t++)
    for (unsigned i = 0; i < BLOCKS; i++) {
      unsigned char *p = blk[t][i];
      CHECK(p[0] == pat_byte(key(t, i), 0) && p[len[t][i] - 1] == pat_byte(key(t, i), len[t][i] - 1),
            "child: block %u of thread %u changed", i, t);
      free(p);
    }
  /* The purge thread's passes run while this thread sleeps and allocates:
   * they walk the dead heaps after their superslabs went back. */
  for (int k = 0; k < 20; k++) {
    usleep(5000);
    void *q = malloc(16384);
    CHECK(q != NULL, "child: malloc(16384)");
    memset(q, k, 16384);
    free(q);
  }
  _exit(0);
}

int main(int argc, char **argv)
{
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  pthread_t th[THREADS];
  for (unsigned t = 0; t < THREADS; t++)
    CHECK(pthread_create(&th[t], NULL, holder, (void *)(uintptr_t)t) == 0, "pthread_create");
  pthread_mutex_lock(&mu);
  while (ready < THREADS) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  for (int r = 0; r < rounds; r++) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) child();
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d: child status 0x%x (%s)", r, st,
          WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exit");
  }
  pthread_mutex_lock(&mu);
  stop = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (unsigned t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (unsigned t = 0; t < THREADS; t++)
    for (unsigned i = 0; i < BLOCKS; i++) free(blk[t][i]);
  printf("test_fork_heaps: %d children freed %u blocks of 4 live threads each and exited cleanly\n", rounds,
         THREADS * BLOCKS);
  return 0;
}
