/*
 * foreign.c — the next allocator (see foreign.h).
 *
 * glibc exports its allocator under __libc_malloc & co., which lets us reach
 * it without dlsym (dlsym may itself allocate). Weak references keep the
 * library loadable on a C library without them; then RTLD_NEXT is used.
 */
#include "foreign.h"
#include "options.h"
#include "os.h"

#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <malloc.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t) __attribute__((weak));
extern void *__libc_calloc(size_t, size_t) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_memalign(size_t, size_t) __attribute__((weak));
extern void __libc_free(void *) __attribute__((weak));

static void *foreign_sym(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    os_write_err("hakmem: no next allocator for ");
    os_write_err(name);
    os_write_err("\n");
    abort();
  }
  return f;
}

/* glibc's own definition of name. RTLD_NEXT finds the next object that
 * defines it, which is not glibc when the program links another allocator
 * (Debian's redis-server links jemalloc): jemalloc's malloc_usable_size
 * handed a glibc block crashes. glibc's handle is opened without loading
 * anything (RTLD_NOLOAD); RTLD_NEXT stays the fallback on other C
 * libraries. */
static void *foreign_libc_sym(const char *name) {
  static void *libc;
  if (libc == NULL) libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
  void *f = libc != NULL ? dlsym(libc, name) : NULL;
  return f != NULL ? f : dlsym(RTLD_NEXT, name);
}

/* Set once glibc's allocator is known to hold blocks (sticky). */
static _Atomic bool foreign_in_use;

static void foreign_note_use(void) {
  if (!atomic_load_explicit(&foreign_in_use, memory_order_relaxed))
    atomic_store_explicit(&foreign_in_use, true, memory_order_relaxed);
}

static bool foreign_has_blocks(void) {
  if (atomic_load_explicit(&foreign_in_use, memory_order_relaxed)) return true;
  /* glibc's own accounting (libhakmem.so defines mallinfo2 too: the
   * lookup asks glibc's object itself). Blocks from before hakmem was loaded, or
   * from direct __libc_malloc calls, show up here. */
  struct mallinfo2 (*mi)(void) = (struct mallinfo2(*)(void))foreign_libc_sym("mallinfo2");
  if (mi == NULL) return true; /* cannot tell: trust the caller */
  struct mallinfo2 m = mi();
  if (m.uordblks == 0 && m.hblkhd == 0) return false;
  foreign_note_use();
  return true;
}

bool foreign_owns(const void *p) {
  if (opt.force_libc) return true;
  uintptr_t a = (uintptr_t)p;
  if (a & 15 || a < 4096) return false; /* glibc chunks are 16-byte aligned */
  if (!foreign_has_blocks()) return false;
  if (!os_is_readable((const void *)(a - 8))) return false;
  size_t word = ((const size_t *)p)[-1];
  size_t csize = word & ~(size_t)7;
  return csize >= 32 && (csize & 15) == 0 && csize < ((size_t)1 << 47);
}

void *foreign_malloc(size_t size) {
  foreign_note_use();
  if (__libc_malloc) return __libc_malloc(size);
  return ((void *(*)(size_t))foreign_sym("malloc"))(size);
}
void *foreign_calloc(size_t n, size_t size) {
  foreign_note_use();
  if (__libc_calloc) return __libc_calloc(n, size);
  return ((void *(*)(size_t, size_t))foreign_sym("calloc"))(n, size);
}
void *foreign_realloc(void *p, size_t size) {
  foreign_note_use();
  if (__libc_realloc) return __libc_realloc(p, size);
  return ((void *(*)(void *, size_t))foreign_sym("realloc"))(p, size);
}
void *foreign_memalign(size_t align, size_t size) {
  foreign_note_use();
  if (__libc_memalign) return __libc_memalign(align, size);
  return ((void *(*)(size_t, size_t))foreign_sym("memalign"))(align, size);
}
void foreign_free(void *p) {
  if (p == NULL) return;
  if (__libc_free) {
    __libc_free(p);
    return;
  }
  ((void (*)(void *))foreign_sym("free"))(p);
}

size_t foreign_usable_size(void *p) {
  static size_t (*next)(void *);
  if (p == NULL) return 0;
  if (next == NULL) next = (size_t(*)(void *))foreign_libc_sym("malloc_usable_size");
  if (next == NULL) next = (size_t(*)(void *))foreign_sym("malloc_usable_size");
  return next(p);
}
