/*
 * test_badfree_mt.c — remote frees with injected double frees (issue 10),
 * under HAKMEM_ON_ERROR=warn: every injected double free is reported with
 * its pointer, nothing else is reported, and no block is handed out twice.
 *
 *   test_badfree_mt [--threads=4] [--ms=3000] [--ops=N] [--inject=300] [--seed=S]
 *
 * The parent re-executes itself (--child) with HAKMEM_ON_ERROR=warn (read at
 * the first allocation) and stderr in a file. In the child, threads pass
 * blocks through shared slots (atomic exchange) and free what they take, so
 * most frees are remote. A block carries its size and a key in its first 16
 * bytes and a pattern after: checked before every free, so a block handed
 * out twice (its memory filled by two owners) is found.
 * About one operation in --inject is an injected double free, done holding
 * a write lock that every malloc takes for reading (so the block cannot be
 * handed out again between the two frees):
 *   head    p = malloc; free(p); free(p)
 *   deep    p, q = malloc; free(p); free(q); free(p)
 *   remote  take p from a slot (allocated by any thread); free(p); free(p)
 *   remote2 take p, q from slots; free(p); free(q); free(p)
 * The child writes "INJECT <p>" per injection; the parent checks that the
 * multiset of "hakmem: free(): double free of <p>" reports is the same.
 * The default build claims only the head kind (README.md, "What each build
 * catches"): the library names its build (hak_version()), and against the
 * default build only head injections are made; secure and debug get all four.
 * Flavours: libhakmem.so (standard names) or -DUSE_HAK_API (TSan core).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

enum { NSLOTS = 256, MAXINJ = 200000, MAXTHREADS = 64 };

static int nthreads = 4, run_ms = 3000, inject_every = 300;
static long max_ops = 100000000;
static uint64_t seed = 20261124;

static _Atomic(uint64_t *) slots[NSLOTS];
static pthread_rwlock_t inj_lock = PTHREAD_RWLOCK_INITIALIZER;
static void *injected[MAXINJ];
static int ninjected; /* under the write lock */
static atomic_long total_ops;
static int inj_kinds = 4; /* 1 against the default build: head only */

static double now_ms(void) { return tu_now_s() * 1e3; }

/* a block: [0] = size, [1] = key, then the pattern */
static uint64_t *blk_new(rng_t *r, uint64_t key, int locked)
{
  size_t n = (size_t)rng_range(r, 16, 512) & ~(size_t)7;
  if (!locked) pthread_rwlock_rdlock(&inj_lock);
  uint64_t *p = malloc(n);
  if (!locked) pthread_rwlock_unlock(&inj_lock);
  CHECK(p != NULL, "malloc(%zu)", n);
  p[0] = n;
  p[1] = key;
  pat_fill_range(p, 16, n, key);
  return p;
}

static void blk_check_free(uint64_t *p)
{
  size_t n = p[0];
  CHECK(n >= 16 && n <= 512, "block %p: size word %zu overwritten (handed out twice?)", (void *)p, n);
  size_t bad = pat_check_range(p, 16, n, p[1]);
  CHECK(bad == (size_t)-1, "block %p (%zu B) overwritten at byte %zu (handed out twice?)", (void *)p, n, bad);
  free(p);
}

static void inject(rng_t *r, uint64_t key)
{
  pthread_rwlock_wrlock(&inj_lock);
  if (ninjected >= MAXINJ) goto out;
  int kind = (int)rng_below(r, (uint64_t)inj_kinds);
  uint64_t *p = NULL, *q = NULL;
  if (kind >= 2) {
    p = atomic_exchange(&slots[rng_below(r, NSLOTS)], NULL);
    if (kind == 3) q = atomic_exchange(&slots[rng_below(r, NSLOTS)], NULL);
    if (!p || (kind == 3 && !q)) { /* empty slots: fall back to local blocks */
      if (p) blk_check_free(p);
      if (q) blk_check_free(q);
      p = q = NULL;
      kind -= 2;
    }
  }
  if (!p) p = blk_new(r, key, 1);
  if (kind == 1 || kind == 3) {
    if (!q) q = blk_new(r, key + 1, 1);
    blk_check_free(p);
    blk_check_free(q);
  } else {
    blk_check_free(p);
  }
  injected[ninjected++] = p;
  char line[48]; /* written now (no stdio, no malloc): a child that dies still tells what it injected */
  int len = snprintf(line, sizeof line, "INJECT %p\n", (void *)p);
  CHECK(write(1, line, (size_t)len) == len, "write");
  free(opaque_ptr(p)); /* the double free: reported, does nothing */
out:
  pthread_rwlock_unlock(&inj_lock);
}

static void *worker(void *arg)
{
  int id = (int)(intptr_t)arg;
  rng_t r;
  rng_seed(&r, seed * 1000003u + (uint64_t)id);
  double end = now_ms() + run_ms;
  uint64_t ctr = 0;
  long ops = 0;
  for (; ops < max_ops; ops++) {
    if ((ops & 255) == 0 && now_ms() > end) break;
    uint64_t key = ((uint64_t)id << 48) | ++ctr << 1;
    if (rng_below(&r, (uint64_t)inject_every) == 0) {
      inject(&r, key);
      continue;
    }
    uint64_t *p = rng_below(&r, 4) ? blk_new(&r, key, 0) : NULL;
    uint64_t *x = atomic_exchange(&slots[rng_below(&r, NSLOTS)], p);
    if (x) blk_check_free(x);
  }
  atomic_fetch_add(&total_ops, ops);
  return NULL;
}

static int child(void)
{
  const char *v = hak_version();
  if (!strstr(v, " secure") && !strstr(v, " debug")) inj_kinds = 1;
  pthread_t t[MAXTHREADS];
  for (int i = 0; i < nthreads; i++)
    CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < NSLOTS; i++) {
    uint64_t *x = atomic_exchange(&slots[i], NULL);
    if (x) blk_check_free(x);
  }
  /* and once more, single-threaded: nothing handed out twice */
  static uint64_t *blk[20000];
  rng_t r;
  rng_seed(&r, seed);
  for (int i = 0; i < 20000; i++) blk[i] = blk_new(&r, (uint64_t)i << 1 | 1, 0);
  for (int i = 0; i < 20000; i++) blk_check_free(blk[i]);
  printf("DONE ops=%ld injected=%d kinds=%d (hakmem %s)\n", (long)atomic_load(&total_ops), ninjected, inj_kinds, v);
  return 0;
}

/* ---- parent ---- */

static int cmp_ptr(const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static char *slurp_file(FILE *f)
{
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)n + 1);
  CHECK(b != NULL, "malloc");
  size_t got = fread(b, 1, (size_t)n, f);
  b[got] = 0;
  return b;
}

int main(int argc, char **argv)
{
  int is_child = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--child")) is_child = 1;
    else if (!strncmp(a, "--threads=", 10)) nthreads = atoi(a + 10);
    else if (!strncmp(a, "--ms=", 5)) run_ms = atoi(a + 5);
    else if (!strncmp(a, "--ops=", 6)) max_ops = atol(a + 6);
    else if (!strncmp(a, "--inject=", 9)) inject_every = atoi(a + 9);
    else if (!strncmp(a, "--seed=", 7)) seed = strtoull(a + 7, NULL, 0);
    else {
      fprintf(stderr, "usage: %s [--threads=N] [--ms=N] [--ops=N] [--inject=N] [--seed=N]\n", argv[0]);
      return 2;
    }
  }
  if (nthreads < 1 || nthreads > MAXTHREADS || inject_every < 1) return 2;
  if (is_child) return child();

  FILE *fo = tmpfile(), *fe = tmpfile();
  CHECK(fo && fe, "tmpfile");
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    char **av = calloc((size_t)argc + 2, sizeof *av);
    for (int i = 0; i < argc; i++) av[i] = argv[i];
    av[argc] = "--child";
    setenv("HAKMEM_ON_ERROR", "warn", 1);
    alarm((unsigned)(run_ms / 1000) + 30); /* kept across exec: a hang fails the test */
    execv("/proc/self/exe", av);
    _exit(127);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
  char *out = slurp_file(fo), *err = slurp_file(fe);

  static uintptr_t inj[MAXINJ], rep[MAXINJ];
  int ni = 0, nr = 0, fails = 0;
  char *done = strstr(out, "DONE ");
  if (done && strchr(done, '\n')) *strchr(done, '\n') = 0;
  for (char *l = out; (l = strstr(l, "INJECT ")) != NULL && (!done || l < done); l += 7)
    if (ni < MAXINJ) inj[ni++] = (uintptr_t)strtoull(l + 7, NULL, 16);
  const char *tag = "hakmem: free(): double free of ";
  for (char *l = err; *l;) {
    char *nl = strchr(l, '\n');
    if (nl) *nl = 0;
    if (!strncmp(l, tag, strlen(tag))) {
      if (nr < MAXINJ) rep[nr++] = (uintptr_t)strtoull(l + strlen(tag), NULL, 16);
    } else if (*l) {
      fprintf(stderr, "child: %s\n", l); /* other reports, CHECK failures, TSan */
      if (!strncmp(l, "hakmem: ", 8)) fails++;
    }
    if (!nl) break;
    l = nl + 1;
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !done) {
    fprintf(stderr, "FAIL: the child did not finish (status 0x%x%s%s)%s\n", st, WIFSIGNALED(st) ? ", " : "",
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "",
            WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? ": it hung (killed after --ms + 30 s)" : "");
    fails++;
  }
  if (fails == 0 && ni > 0 && nr == 0) fprintf(stderr, "FAIL: none of the %d injected double frees was reported\n", ni);
  qsort(inj, (size_t)ni, sizeof inj[0], cmp_ptr);
  qsort(rep, (size_t)nr, sizeof rep[0], cmp_ptr);
  int i = 0, j = 0, missing = 0, extra = 0;
  while (i < ni || j < nr) {
    if (j >= nr || (i < ni && inj[i] < rep[j])) {
      if (missing++ < 5) fprintf(stderr, "FAIL: injected double free of %#lx not reported\n", (unsigned long)inj[i]);
      i++;
    } else if (i >= ni || rep[j] < inj[i]) {
      if (extra++ < 5) fprintf(stderr, "FAIL: report of %#lx that was not injected\n", (unsigned long)rep[j]);
      j++;
    } else {
      i++;
      j++;
    }
  }
  if (missing || extra) fails++;
  printf("test_badfree_mt: %s; %d double frees injected, %d reported, %d missing, %d unexpected\n",
         done ? done : "child did not finish", ni, nr, missing, extra);
  printf("test_badfree_mt: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}
