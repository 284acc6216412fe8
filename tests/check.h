/*
 * check.h — the one assertion macro of the hakmem test suite.
 *
 * CHECK(cond, fmt, ...) prints "file:line: CHECK(cond) failed: message" (plus
 * the test's random seed when one was registered with check_set_seed) to
 * stderr and terminates the process with exit status 1. It uses _exit so it is
 * safe in forked children and in multi-threaded tests (no atexit handlers run
 * while other threads still use the allocator).
 */
#ifndef HAKMEM_TESTS_CHECK_H
#define HAKMEM_TESTS_CHECK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static unsigned long long check_seed_value;
static int check_seed_set;

static inline void check_set_seed(unsigned long long seed)
{
  check_seed_value = seed;
  check_seed_set = 1;
}

__attribute__((noreturn, format(printf, 4, 5), cold, unused))
static void check_fail(const char *file, int line, const char *cond, const char *fmt, ...);

static void check_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "%s:%d: CHECK(%s) failed: ", file, line, cond);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (check_seed_set)
    fprintf(stderr, " [seed=%llu]", check_seed_value);
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (__builtin_expect(!(cond), 0))                                        \
      check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                    \
  } while (0)

/* Hide a value from the optimizer (no constant folding of sizes, no
 * -Walloc-size-larger-than warnings for deliberately absurd requests). */
static inline __attribute__((unused)) size_t opaque_size(size_t x)
{
  __asm__ volatile("" : "+r"(x));
  return x;
}

/* Same for pointers: stops -Wuse-after-free / -Wmaybe-uninitialized false
 * positives when a test deliberately looks at a block after a failed realloc
 * or passes fresh (unwritten) memory to hak_owns(). */
static inline __attribute__((unused)) void *opaque_ptr(const void *p)
{
  void *q = (void *)p;
  __asm__ volatile("" : "+r"(q));
  return q;
}

#endif /* HAKMEM_TESTS_CHECK_H */
