/*
 * test_oom.c — out of memory: with RLIMIT_AS lowered (in forked children),
 * malloc & co. return NULL with errno ENOMEM, nothing crashes, blocks that
 * were live stay intact, and allocation works again once memory is freed.
 * Absurd sizes fail cleanly without any limit.
 *
 * Beyond RAM and swap, with the kernel's default (heuristic) overcommit,
 * a block fails as glibc's does, instead of mapping address space the
 * machine cannot back.
 *
 *   test_oom [SECTION]     sections: absurd large huge small mixed entry threads overcommit
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)

static size_t vm_size(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  CHECK(f != NULL, "open statm");
  unsigned long size = 0;
  CHECK(fscanf(f, "%lu", &size) == 1, "parse statm");
  fclose(f);
  return (size_t)size * (size_t)sysconf(_SC_PAGESIZE);
}

/* allow `extra` bytes of address space beyond what is mapped now */
static size_t limit_as(size_t extra)
{
  size_t lim = vm_size() + extra;
  struct rlimit rl = {lim, lim};
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(RLIMIT_AS, %zu): %s", lim, strerror(errno));
  return lim;
}

static void sec_absurd(void)
{
  void *p;
  errno = 0;
  p = malloc(opaque_size(SIZE_MAX - 8));
  CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX-8) = %p errno %d", p, errno);
  errno = 0;
  p = malloc(opaque_size(SIZE_MAX));
  CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX) = %p errno %d", p, errno);
  errno = 0;
  p = malloc(opaque_size(SIZE_MAX / 2 + 1));
  CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX/2+1) = %p errno %d", p, errno);
  errno = 0;
  p = malloc(opaque_size((size_t)1 << 47)); /* 128 TiB: beyond the address space */
  CHECK(p == NULL && errno == ENOMEM, "malloc(128 TiB) = %p errno %d", p, errno);
  errno = 0;
  p = calloc(opaque_size(SIZE_MAX / 2), 4);
  CHECK(p == NULL && errno == ENOMEM, "calloc(SIZE_MAX/2, 4) = %p errno %d", p, errno);
  errno = 0;
  p = calloc(opaque_size((size_t)1 << 32), (size_t)1 << 32);
  CHECK(p == NULL && errno == ENOMEM, "calloc(2^32, 2^32) = %p errno %d", p, errno);
  /* 64 TiB fits the address space: the kernel may grant it (under
   * overcommit mode 1; sec_overcommit judges mode 0); then it must be
   * usable (zero) at both ends */
  errno = 0;
  p = calloc(opaque_size((size_t)1 << 46), 1);
  if (p != NULL) {
    volatile char *c = p;
    CHECK(c[0] == 0 && c[((size_t)1 << 46) - 1] == 0, "calloc(64 TiB) not zero");
    c[((size_t)1 << 46) - 1] = 1;
    free(p);
    printf("absurd: calloc(64 TiB) succeeded (address space only)\n");
  } else {
    CHECK(errno == ENOMEM, "calloc(64 TiB) = NULL errno %d", errno);
  }
  p = (void *)1;
  int e = posix_memalign(&p, 64, opaque_size(SIZE_MAX - 100));
  CHECK(e == ENOMEM, "posix_memalign(64, SIZE_MAX-100) = %d", e);
  e = posix_memalign(&p, (size_t)1 << 20, opaque_size(SIZE_MAX / 2));
  CHECK(e == ENOMEM, "posix_memalign(1 MiB, SIZE_MAX/2) = %d", e);
  e = posix_memalign(&p, 16, opaque_size(SIZE_MAX - 8));
  CHECK(e == ENOMEM, "posix_memalign(16, SIZE_MAX-8) = %d", e);
  errno = 0;
  p = aligned_alloc(4096, opaque_size(SIZE_MAX - 4095));
  CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(4096, SIZE_MAX-4095) = %p errno %d", p, errno);
  errno = 0;
  p = memalign(opaque_size((size_t)1 << 40), 64); /* 1 TiB alignment */
  CHECK(p == NULL || ((uintptr_t)p & (((size_t)1 << 40) - 1)) == 0, "memalign(1 TiB) misaligned %p", p);
  free(p);
  errno = 0;
  p = valloc(opaque_size(SIZE_MAX - 100));
  CHECK(p == NULL && errno == ENOMEM, "valloc(SIZE_MAX-100) = %p errno %d", p, errno);
  errno = 0;
  p = pvalloc(opaque_size(SIZE_MAX - 100));
  CHECK(p == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX-100) = %p errno %d", p, errno);
  /* realloc to an absurd size: NULL, ENOMEM, the old block untouched */
  char *q = malloc(100);
  CHECK(q != NULL, "malloc");
  pat_fill(q, 100, 5);
  errno = 0;
  p = realloc(q, opaque_size(SIZE_MAX - 8));
  CHECK(p == NULL && errno == ENOMEM, "realloc(q, SIZE_MAX-8) = %p errno %d", p, errno);
  CHECK(pat_check(q, 100, 5) == (size_t)-1, "block changed by a failed realloc");
  errno = 0;
  p = reallocarray(q, opaque_size(SIZE_MAX / 2), 3);
  CHECK(p == NULL && errno == ENOMEM, "reallocarray overflow = %p errno %d", p, errno);
  CHECK(pat_check(q, 100, 5) == (size_t)-1, "block changed by a failed reallocarray");
  free(q);
  printf("absurd: every absurd request failed with ENOMEM\n");
}

enum { MAXB = 1 << 21 };
static void *blk[MAXB]; /* in .bss: mapped before the limit is set */

/* Allocate blocks of the given size (or sizes from gen) until NULL. Each
 * block's first and last 8 bytes carry its index. Returns the count. */
static size_t fill(size_t (*gen)(size_t i), const char *what)
{
  size_t n = 0;
  for (;;) {
    CHECK(n < MAXB, "%s: %zu blocks and no failure: the address-space limit has no effect", what, n);
    size_t sz = gen(n);
    errno = 0;
    void *p = malloc(sz);
    if (p == NULL) {
      CHECK(errno == ENOMEM, "%s: malloc(%zu) returned NULL with errno %d (%s), want ENOMEM", what, sz, errno,
            strerror(errno));
      break;
    }
    memcpy(p, &n, 8);
    memcpy((char *)p + sz - 8, &n, 8);
    blk[n++] = p;
  }
  return n;
}

static void verify_free(size_t n, size_t (*gen)(size_t i), const char *what)
{
  for (size_t i = 0; i < n; i++) {
    size_t sz = gen(i), a, b;
    memcpy(&a, blk[i], 8);
    memcpy(&b, (char *)blk[i] + sz - 8, 8);
    CHECK(a == i && b == i, "%s: block %zu (%zu B) damaged", what, i, sz);
    free(blk[i]);
  }
}

static size_t gen_large(size_t i) { (void)i; return 8 * MiB; }
static size_t gen_huge(size_t i) { (void)i; return 40 * MiB; }
static size_t gen_small(size_t i) { (void)i; return 200; }
static size_t gen_mixed(size_t i)
{
  static const size_t s[] = {16, 100, 1000, 5000, 30000, 200000, 900000, 3 * MiB};
  return s[i % 8];
}

static void oom_round(size_t (*gen)(size_t), const char *what, size_t headroom)
{
  size_t lim = limit_as(headroom);
  size_t n1 = fill(gen, what);
  CHECK(n1 > 0, "%s: nothing could be allocated under a limit of %zu MiB", what, lim / MiB);
  verify_free(n1, gen, what);
  /* memory is available again: the same amount fits again (most of it) */
  hak_collect(1);
  size_t n2 = fill(gen, what);
  CHECK(n2 * 10 >= n1 * 9, "%s: after freeing everything only %zu of %zu blocks fit again", what, n2, n1);
  verify_free(n2, gen, what);
  printf("%s: limit %zu MiB: %zu blocks until ENOMEM, %zu again after freeing\n", what, lim / MiB, n1, n2);
}

static void sec_large(void) { oom_round(gen_large, "large (8 MiB)", 512 * MiB); }
static void sec_huge(void) { oom_round(gen_huge, "huge (40 MiB)", 512 * MiB); }
static void sec_small(void) { oom_round(gen_small, "small (200 B)", 192 * MiB); }
static void sec_mixed(void) { oom_round(gen_mixed, "mixed (16 B..3 MiB)", 384 * MiB); }

/* Under the limit every entry point fails cleanly. */
static void sec_entry(void)
{
  limit_as(256 * MiB);
  size_t n = fill(gen_large, "entry");
  /* now nearly nothing is left: the other entry points must fail cleanly too */
  for (int k = 0; k < 4; k++) {
    void *p;
    errno = 0;
    p = calloc(1, 64 * MiB);
    CHECK(p == NULL && errno == ENOMEM, "calloc under OOM = %p errno %d", p, errno);
    p = (void *)1;
    int e = posix_memalign(&p, 4096, 64 * MiB);
    CHECK(e == ENOMEM, "posix_memalign under OOM = %d", e);
    errno = 0;
    p = aligned_alloc(1 << 20, 64 * MiB);
    CHECK(p == NULL && errno == ENOMEM, "aligned_alloc under OOM = %p errno %d", p, errno);
    char *q = blk[0];
    errno = 0;
    p = realloc(q, 128 * MiB);
    CHECK(p == NULL && errno == ENOMEM, "realloc growth under OOM = %p errno %d", p, errno);
  }
  verify_free(n, gen_large, "entry");
  void *p = calloc(1, 64 * MiB);
  CHECK(p != NULL, "calloc(64 MiB) after freeing: errno %d", errno);
  CHECK(first_nonzero(p, 64 * MiB) == (size_t)-1, "calloc memory not zero");
  free(p);
  printf("entry: calloc/posix_memalign/aligned_alloc/realloc fail with ENOMEM under the limit, work after\n");
}

/* Threads hitting the limit at once. */
static void *oom_thread(void *arg)
{
  size_t id = (size_t)arg, n = 0;
  void **mine = blk + id * (MAXB / 8);
  for (;;) {
    void *p = malloc(id & 1 ? 64 * 1024 : 1000);
    if (p == NULL) {
      CHECK(errno == ENOMEM, "thread %zu: errno %d", id, errno);
      break;
    }
    memset(p, (int)id, 64);
    CHECK(n < MAXB / 8, "thread %zu: no failure", id);
    mine[n++] = p;
  }
  for (size_t i = 0; i < n; i++) {
    CHECK(((unsigned char *)mine[i])[63] == (unsigned char)id, "thread %zu block %zu damaged", id, i);
    free(mine[i]);
  }
  return (void *)n;
}

static void sec_threads(void)
{
  pthread_t th[4];
  /* thread stacks are mapped before the limit */
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 256 * 1024);
  limit_as(256 * MiB);
  size_t total = 0;
  for (size_t i = 0; i < 4; i++) CHECK(pthread_create(&th[i], &at, oom_thread, (void *)i) == 0, "pthread_create");
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(th[i], &r);
    total += (size_t)r;
  }
  void *p = malloc(32 * MiB);
  CHECK(p != NULL, "malloc(32 MiB) after the threads freed everything");
  free(p);
  printf("threads: 4 threads allocated %zu blocks until ENOMEM and freed them\n", total);
}

/* /proc/sys/vm/overcommit_memory (0 heuristic, 1 always, 2 strict), -1 if
 * unreadable. */
static int overcommit_mode(void)
{
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  int m = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &m) != 1) m = -1;
    fclose(f);
  }
  return m;
}

/* MemTotal + SwapTotal from /proc/meminfo, in bytes (0 if unreadable). */
static size_t ram_and_swap(void)
{
  FILE *f = fopen("/proc/meminfo", "r");
  CHECK(f != NULL, "open meminfo");
  char line[256];
  size_t total = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long kb;
    if (sscanf(line, "MemTotal: %lu kB", &kb) == 1 || sscanf(line, "SwapTotal: %lu kB", &kb) == 1)
      total += (size_t)kb << 10;
  }
  fclose(f);
  return total;
}

/* A block twice RAM and swap: the default heuristic refuses such a
 * mapping, so malloc, calloc, posix_memalign, realloc and a huge
 * alignment fail with ENOMEM (as under glibc) and old blocks stay intact;
 * afterwards a big block still works. Under another mode the kernel may
 * grant it: then only its use is checked. */
static void sec_overcommit(void)
{
  int mode = overcommit_mode();
  size_t big = ram_and_swap() * 2;
  CHECK(big > 0, "no MemTotal in /proc/meminfo");
  if (big > ((size_t)1 << 45)) big = (size_t)1 << 45;
  void *p;
  char *keep = malloc(40 * MiB); /* a dedicated mapping (above the arenas' 32 MiB) */
  CHECK(keep != NULL, "malloc(40 MiB)");
  memset(keep, 0x5a, 40 * MiB);
  if (mode != 0) {
    p = malloc(opaque_size(big));
    if (p != NULL) {
      ((volatile char *)p)[0] = 1;
      free(p);
    }
    printf("overcommit: mode %d, not the heuristic: malloc(%zu GiB) %s, not judged\n", mode, big >> 30,
           p != NULL ? "granted" : "refused");
  } else {
    errno = 0;
    p = malloc(opaque_size(big));
    CHECK(p == NULL && errno == ENOMEM, "malloc(%zu GiB, twice RAM and swap) = %p errno %d", big >> 30, p, errno);
    errno = 0;
    p = calloc(opaque_size(big / 4096), 4096);
    CHECK(p == NULL && errno == ENOMEM, "calloc(%zu GiB) = %p errno %d", big >> 30, p, errno);
    p = (void *)1;
    int e = posix_memalign(&p, (size_t)4 << 20, opaque_size(big));
    CHECK(e == ENOMEM && p == (void *)1, "posix_memalign(4 MiB, %zu GiB) = %d", big >> 30, e);
    size_t al = 1;
    while (al < big) al <<= 1;
    e = posix_memalign(&p, opaque_size(al), 64);
    CHECK(e == ENOMEM && p == (void *)1, "posix_memalign(%zu GiB alignment, 64) = %d", al >> 30, e);
    char *small = malloc(100);
    CHECK(small != NULL, "malloc(100)");
    memset(small, 0x33, 100);
    errno = 0;
    p = realloc(small, opaque_size(big));
    CHECK(p == NULL && errno == ENOMEM, "realloc(100 B -> %zu GiB) = %p errno %d", big >> 30, p, errno);
    for (int i = 0; i < 100; i++) CHECK(small[i] == 0x33, "realloc's failure changed the old block");
    free(small);
    errno = 0;
    p = realloc(keep, opaque_size(big));
    CHECK(p == NULL && errno == ENOMEM, "realloc(40 MiB -> %zu GiB) = %p errno %d", big >> 30, p, errno);
    printf("overcommit: heuristic mode: %zu GiB (twice RAM and swap) refused by malloc, calloc, posix_memalign, "
           "realloc\n", big >> 30);
  }
  for (size_t i = 0; i < 40 * MiB; i += 4096) CHECK(keep[i] == 0x5a, "the 40 MiB block changed at %zu", i);
  free(keep);
  p = malloc(256 * MiB);
  CHECK(p != NULL, "malloc(256 MiB) after the refusals");
  memset(p, 1, 256 * MiB);
  free(p);
}

static const struct { const char *name; void (*fn)(void); } secs[] = {
    {"absurd", sec_absurd}, {"large", sec_large}, {"huge", sec_huge}, {"small", sec_small},
    {"mixed", sec_mixed},   {"entry", sec_entry}, {"threads", sec_threads}, {"overcommit", sec_overcommit},
};

int main(int argc, char **argv)
{
  int fails = 0;
  for (size_t k = 0; k < sizeof secs / sizeof secs[0]; k++) {
    if (argc > 1 && strcmp(argv[1], secs[k].name) != 0) continue;
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
      secs[k].fn();
      fflush(stdout);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "FAIL: section %s: status 0x%x%s%s\n", secs[k].name, st, WIFSIGNALED(st) ? ", signal " : "",
              WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
      fails++;
    }
  }
  printf("test_oom: %d section(s) failed\n", fails);
  return fails != 0;
}
