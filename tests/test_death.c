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
 * Flavours (compile-time DEATH_FLAVOUR): 0 = libhakmem.so (standard names;
 * only the slow-path checks exist), 1 = secure copy of the core (hak_ API,
 * exact allocation bitmap: every double/interior free), 2 = debug copy.
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
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#ifndef DEATH_FLAVOUR
#define DEATH_FLAVOUR 0
#endif
#define FL_DEFAULT 1
#define FL_SECURE 2
#define FL_DEBUG 4
#define FL_ALL (FL_DEFAULT | FL_SECURE | FL_DEBUG)
#define FL_SELF (DEATH_FLAVOUR == 0 ? FL_DEFAULT : DEATH_FLAVOUR == 1 ? FL_SECURE : FL_DEBUG)
static const char *const flavour_name[] = {"default (libhakmem.so)", "secure (hak_ API)", "debug (hak_ API)"};

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

static void continued(void)
{
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

/* interior of a small block (checked exactly in the secure/debug builds) */
static void case_free_interior_small(void)
{
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

/* Double free of a block in the middle of a thread's free list (debug walks
 * the owner's list; secure has the bitmap). */
static void case_double_deep(void)
{
  void *p[32];
  for (int i = 0; i < 32; i++) CHECK((p[i] = malloc(100)) != NULL, "malloc");
  for (int i = 0; i < 32; i++) free(p[i]);
  expect("free", "double free of", opaque_ptr(p[5]));
  free(opaque_ptr(p[5]));
}

/* Default build, slow path: a block of a slab that has been retired (every
 * block freed, the slab given back to its superslab) is freed again. 40
 * blocks of 20000 B span two slabs; the first 30 are freed, which empties
 * the first slab (no longer the thread's current one); the last 10 keep
 * the superslab mapped. */
static void case_double_retired(void)
{
  enum { N = 40 };
  void *p[N];
  for (int i = 0; i < N; i++) CHECK((p[i] = malloc(20000)) != NULL, "malloc");
  void *first = opaque_ptr(p[0]);
  for (int i = 0; i < 30; i++) free(p[i]);
  expect("free", "double free or invalid pointer", first);
  free(opaque_ptr(first));
  for (int i = 30; i < N; i++) free(p[i]);
}

/* Default build, slow path: a block freed twice while its slab is full. The
 * slab is filled completely (so the owner marks it full when it moves on),
 * then one block is freed twice in a row: the first free goes through the
 * slow path (full slab), the second must be recognised as a double free. */
static void case_double_full(void)
{
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
  void *keep = malloc(n); /* keeps the arena/mapping cache populated */
  void *p = malloc(n);
  CHECK(p != NULL && keep != NULL, "malloc(%zu)", n);
  memset(p, 1, 4096);
  free(p);
  expect("free", "invalid pointer", opaque_ptr(p));
  free(opaque_ptr(p));
  free(keep);
}
static void case_double_large(void) { double_large(3 << 20); }
static void case_double_huge(void) { double_large(40 << 20); }

/* Free list link overwritten after free (use after free): the secure build
 * decodes links with a key and checks them; corruption aborts always. */
static void case_corrupt_link(void)
{
  void *p[8];
  for (int i = 0; i < 8; i++) CHECK((p[i] = malloc(64)) != NULL, "malloc");
  for (int i = 0; i < 8; i++) free(p[i]);
  /* the last freed block is the head of the free list: smash its link */
  void *h = opaque_ptr(p[7]);
  memset(h, 0x41, 16);
  printf("EXPECT hakmem: malloc(): heap corruption detected at \n");
  fflush(stdout);
  for (int i = 0; i < 8; i++) p[i] = malloc(64);
  for (int i = 0; i < 8; i++) free(p[i]);
}

/* glibc's blocks are forwarded to glibc (no report, no crash) */
static void case_libc_forward(void)
{
  printf("EXPECT \n");
  fflush(stdout);
  for (int round = 0; round < 3; round++) {
    char *a = __libc_malloc(100), *b = __libc_malloc(100000), *c = __libc_malloc(5 << 20);
    CHECK(a && b && c, "__libc_malloc");
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

typedef struct {
  const char *name;
  void (*fn)(void);
  unsigned flavours; /* builds where the error is detected */
  int always_abort;  /* heap corruption aborts whatever ON_ERROR says */
  int no_error;      /* nothing must be reported at all */
  const char *env;   /* extra environment (NAME=VALUE) */
} dcase_t;

static const dcase_t cases[] = {
    {"free_stack", case_free_stack, FL_ALL, 0, 0, NULL},
    {"free_static", case_free_static, FL_ALL, 0, 0, NULL},
    {"free_interior_large", case_free_interior_large, FL_ALL, 0, 0, NULL},
    {"free_interior_huge", case_free_interior_huge, FL_ALL, 0, 0, NULL},
    {"free_interior_small", case_free_interior_small, FL_ALL, 0, 0, NULL},
    {"realloc_garbage", case_realloc_garbage, FL_ALL, 0, 0, NULL},
    {"realloc_stack", case_realloc_stack, FL_ALL, 0, 0, NULL},
    {"usable_garbage", case_usable_garbage, FL_ALL, 0, 0, NULL},
    /* free(p); free(p): p is the head of its free list (the fast path checks) */
    {"double_small", case_double_small, FL_ALL, 0, 0, NULL},
    {"double_deep", case_double_deep, FL_ALL, 0, 0, NULL},
    {"double_retired", case_double_retired, FL_ALL, 0, 0, NULL},
    /* the profiler sends every free through the slow path (head-of-list check) */
    {"double_small_prof", case_double_small, FL_ALL, 0, 0, "HAKMEM_PROF=1"},
    {"double_full", case_double_full, FL_ALL, 0, 0, NULL},
    {"free_sized_wrong", case_free_sized_wrong, FL_DEBUG, 0, 0, NULL},
    {"double_large", case_double_large, FL_ALL, 0, 0, NULL},
    {"double_huge", case_double_huge, FL_ALL, 0, 0, "HAKMEM_LARGE_CACHE=0"},
    {"corrupt_link", case_corrupt_link, FL_ALL, 0, 0, NULL},
    {"libc_forward", case_libc_forward, FL_ALL, 0, 1, NULL},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* ---- parent side --------------------------------------------------------- */

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

static int run_case(const char *self, const dcase_t *c, const char *mode)
{
  char tmpo[] = "/tmp/hakdeath.o.XXXXXX", tmpe[] = "/tmp/hakdeath.e.XXXXXX";
  int fo = mkstemp(tmpo), fe = mkstemp(tmpe);
  CHECK(fo >= 0 && fe >= 0, "mkstemp");
  unlink(tmpo);
  unlink(tmpe);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(fo, 1);
    dup2(fe, 2);
    char arg[128], envm[64];
    snprintf(arg, sizeof arg, "--case=%s", c->name);
    snprintf(envm, sizeof envm, "HAKMEM_ON_ERROR=%s", mode);
    putenv(envm);
    if (c->env) putenv((char *)c->env);
    execl(self, self, arg, (char *)NULL);
    _exit(127);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
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
  CHECK(detect || c->no_error, "case %s is not for this build", c->name);
#define DFAIL(...)                                                             \
  do {                                                                         \
    fprintf(stderr, "FAIL [%s, ON_ERROR=%s]: ", c->name, mode);                \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n  child stdout: %s\n  child stderr: %s\n", out, err);   \
    failed = 1;                                                                \
  } while (0)
  if (c->no_error || !detect) {
    /* nothing to report: must run to the end, silently */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      DFAIL("child did not exit 0 (status 0x%x%s%s)", st, WIFSIGNALED(st) ? ", signal " : "",
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "");
    else if (c->no_error && err[0] != 0)
      DFAIL("unexpected output on stderr");
  } else if (c->always_abort || strcmp(mode, "abort") == 0) {
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
      DFAIL("expected death by SIGABRT, got status 0x%x (%s)", st,
            WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited");
    else if (strstr(err, ex) == NULL)
      DFAIL("stderr lacks \"%s\"", ex);
    else if (cont)
      DFAIL("child continued past the error");
  } else if (strcmp(mode, "warn") == 0) {
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !cont)
      DFAIL("expected the child to report and continue (status 0x%x)", st);
    else if (strstr(err, ex) == NULL)
      DFAIL("stderr lacks \"%s\"", ex);
  } else {
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !cont)
      DFAIL("expected the child to continue silently (status 0x%x)", st);
    else if (err[0] != 0)
      DFAIL("ON_ERROR=ignore printed something");
  }
  if (!failed)
    printf("  ok   %-22s ON_ERROR=%-6s %s%s\n", c->name, mode,
           c->no_error ? "forwarded, nothing reported" : "",
           detect && !c->no_error ? ex : "");
  __libc_free(out);
  __libc_free(err);
  return failed;
}

int main(int argc, char **argv)
{
  const char *one = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--case=", 7) == 0) one = argv[i] + 7;
    if (strcmp(argv[i], "--list") == 0) {
      for (int k = 0; k < NCASES; k++) printf("%s\n", cases[k].name);
      return 0;
    }
  }
  if (one) {
    for (int k = 0; k < NCASES; k++)
      if (strcmp(cases[k].name, one) == 0) {
        live_make();
        cases[k].fn();
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
  printf("test_death: %s build\n", flavour_name[DEATH_FLAVOUR]);
  fflush(stdout);
  static const char *const modes[] = {"abort", "warn", "ignore"};
  int fails = 0, runs = 0;
  for (int k = 0; k < NCASES; k++) {
    if (!(cases[k].flavours & FL_SELF)) {
      /* undetected in this build: the call is undefined behaviour, not run */
      printf("  skip %-22s (not detected in this build)\n", cases[k].name);
      continue;
    }
    for (int m = 0; m < 3; m++) {
      fails += run_case(self, &cases[k], modes[m]);
      runs++;
      fflush(stdout);
    }
  }
  printf("test_death: %d of %d case runs failed\n", fails, runs);
  return fails ? 1 : 0;
}
