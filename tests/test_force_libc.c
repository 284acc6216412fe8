/*
 * test_force_libc.c — HAKMEM_FORCE_LIBC_ALLOC.
 *
 *   test_force_libc libc    run with HAKMEM_FORCE_LIBC_ALLOC=1: every entry
 *                           point must hand out glibc memory (hak_owns == 0),
 *                           which glibc's own free/malloc_usable_size accept
 *   test_force_libc hakmem  run without it: the same calls give hakmem memory
 *
 * Linked against libhakmem.so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* glibc's internal names, which hakmem exports too (some programs call
 * them directly): they must hand out and take back the same allocator's
 * blocks as malloc and free. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

typedef void *(*malloc_fn)(size_t);

typedef size_t (*usable_fn)(void *);
typedef void (*free_fn)(void *);

int main(int argc, char **argv)
{
  CHECK(argc == 2 && (!strcmp(argv[1], "libc") || !strcmp(argv[1], "hakmem")),
        "usage: %s libc|hakmem", argv[0]);
  int want_libc = !strcmp(argv[1], "libc");
  const char *env = getenv("HAKMEM_FORCE_LIBC_ALLOC");
  printf("test_force_libc: expecting %s, HAKMEM_FORCE_LIBC_ALLOC=%s\n", argv[1], env ? env : "(unset)");

  /* glibc's own functions, bypassing any interposition */
  usable_fn glibc_usable = GLIBC_FN(usable_fn, "malloc_usable_size");
  free_fn glibc_free = GLIBC_FN(free_fn, "free");
  malloc_fn glibc_malloc = GLIBC_FN(malloc_fn, "malloc");

  static const size_t sizes[] = { 0, 1, 16, 24, 100, 1000, 4096, 70000, 300000, 5u << 20 };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = opaque_size(sizes[i]);
    void *p[8];
    const char *what[8] = { "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc",
                            "memalign", "valloc", "strdup" };
    p[0] = malloc(n);
    p[1] = calloc(1, n);
    p[2] = realloc(NULL, n);
    p[3] = NULL;
    CHECK(posix_memalign(&p[3], 64, n) == 0, "posix_memalign(64, %zu)", n);
    p[4] = aligned_alloc(256, n);
    p[5] = memalign(4096, n);
    p[6] = valloc(n);
    char *s = malloc(n + 1);
    CHECK(s != NULL, "malloc");
    memset(s, 'x', n);
    s[n] = 0;
    p[7] = strdup(s);
    free(s);
    for (int k = 0; k < 8; k++) {
      CHECK(p[k] != NULL, "%s(%zu) returned NULL", what[k], n);
      int owned = OWNS(p[k]);
      CHECK(want_libc ? !owned : owned, "%s(%zu) = %p: hak_owns = %d, expected %s memory", what[k], n, p[k], owned,
            want_libc ? "glibc" : "hakmem");
      size_t us = malloc_usable_size(p[k]);
      CHECK(us >= n, "%s(%zu): malloc_usable_size %zu", what[k], n, us);
      if (want_libc) {
        /* glibc must recognise the block as its own */
        size_t gus = glibc_usable(p[k]);
        CHECK(gus == us, "%s(%zu): glibc's malloc_usable_size %zu != forwarded %zu", what[k], n, gus, us);
      }
      memset(p[k], 0x3c, us);
    }
    /* realloc keeps the contents and the owner */
    unsigned char *r = realloc(p[0], opaque_size(n * 3 + 10));
    CHECK(r != NULL, "realloc");
    for (size_t b = 0; b < n; b++) CHECK(r[b] == 0x3c, "realloc lost byte %zu", b);
    CHECK(want_libc ? !OWNS(r) : OWNS(r), "realloc result owner");
    p[0] = r;
    for (int k = 0; k < 8; k++) {
      if (want_libc && (k & 1)) glibc_free(p[k]); /* glibc would abort on a foreign pointer */
      else free(p[k]);
    }
  }
  /* glibc memory handed to free() is fine in both modes */
  void *g = glibc_malloc(1234);
  CHECK(g != NULL && !OWNS(g), "glibc's own malloc");
  free(g);
  /* The __libc_ names: the mode's allocator, mixed freely with the standard names. */
  for (int i = 0; i < 200; i++) {
    size_t n = opaque_size((size_t)(i * 97 % 5000) + 1);
    unsigned char *a = __libc_malloc(n), *b = malloc(n), *c = __libc_calloc(1, n), *d = __libc_memalign(256, n);
    CHECK(a && b && c && d, "__libc_ allocation of %zu", n);
    CHECK(want_libc ? !OWNS(a) && !OWNS(c) && !OWNS(d) : OWNS(a) && OWNS(c) && OWNS(d),
          "__libc_ blocks of %zu: hak_owns %d %d %d, expected %s memory", n, OWNS(a), OWNS(c), OWNS(d),
          want_libc ? "glibc" : "hakmem");
    CHECK(((uintptr_t)d & 255) == 0, "__libc_memalign(256, %zu) = %p", n, (void *)d);
    size_t nz = first_nonzero(c, n);
    CHECK(nz == (size_t)-1, "__libc_calloc(1, %zu) byte %zu nonzero", n, nz);
    memset(a, 0x5a, n);
    a = __libc_realloc(a, opaque_size(n * 2));
    CHECK(a != NULL, "__libc_realloc(%zu)", n * 2);
    for (size_t k = 0; k < n; k++) CHECK(a[k] == 0x5a, "__libc_realloc lost byte %zu of %zu", k, n);
    free(a);
    __libc_free(b);
    free(c);
    __libc_free(d);
  }
  /* calloc zeroing through glibc */
  for (int i = 0; i < 100; i++) {
    unsigned char *a = malloc(512);
    CHECK(a != NULL, "malloc");
    memset(a, 0xAB, 512);
    free(a);
    unsigned char *c = calloc(512, 1);
    size_t nz = c ? first_nonzero(c, 512) : 0;
    CHECK(c && nz == (size_t)-1, "calloc(512, 1) byte %zu nonzero", nz);
    free(c);
  }
  errno = 0;
  void *h = malloc(opaque_size(SIZE_MAX - 8));
  CHECK(h == NULL && errno == ENOMEM, "malloc(SIZE_MAX-8) = %p errno %d", h, errno);
  printf("test_force_libc (%s): passed\n", argv[1]);
  return 0;
}
