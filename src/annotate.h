/*
 * annotate.h — tells valgrind's memcheck and AddressSanitizer which hakmem
 * memory the program may touch (build options HAKMEM_MEMCHECK and
 * HAKMEM_ASAN_POISON; see docs/debugging.md).
 *
 * Owns: the annotation calls and the rules for placing them:
 *   ann_alloc(p, n)     a block of n usable bytes goes to the program
 *                       (memcheck: MALLOCLIKE, contents undefined;
 *                       ASan: unpoisoned);
 *   ann_free(p, n)      the program gives it back, BEFORE hakmem touches it
 *                       (memcheck: FREELIKE, no access; ASan: poisoned);
 *   ANN_FREE_READ(lv) / ANN_FREE_WRITE(lv, v)
 *                       hakmem's own access to a word inside a free block
 *                       (list links, double-free marker): not reported;
 *   ann_meta(p, n)      hakmem puts its own metadata where a freed block
 *                       may have been (large-block headers): accessible;
 *   ann_no_roots(p, n)  hakmem metadata that points into live blocks: not
 *                       roots for memcheck's leak check;
 *   ann_unmap(p, n)     a range goes back to the kernel: forget its poison.
 * Promises: with neither option every macro is the plain access or nothing,
 * so the release build is unchanged. With an option, the calls are no-ops
 * unless the tool is there (RUNNING_ON_VALGRIND; the ASan runtime's
 * functions, referenced weakly, are linked into the program).
 * Under memcheck hakmem's accesses to free blocks run with error reporting
 * disabled for the thread, so free blocks stay "no access" throughout (no
 * window in which another thread's use-after-free goes unseen, and no
 * shadow state to race on). Under ASan they are bracketed by unpoison /
 * poison of the accessed word (needed only if hakmem itself is compiled
 * with -fsanitize=address; uninstrumented loads are never checked).
 * May call: valgrind's client requests (header-only), the ASan runtime's
 * __asan_(un)poison_memory_region.
 */
#ifndef HAK_ANNOTATE_H
#define HAK_ANNOTATE_H

#include <stdbool.h>
#include <stddef.h>

#if defined(HAKMEM_MEMCHECK) && HAKMEM_MEMCHECK
#define HAK_ANN_VALGRIND 1
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#else
#define HAK_ANN_VALGRIND 0
#endif

#if defined(HAKMEM_ASAN_POISON) && HAKMEM_ASAN_POISON
#define HAK_ANN_ASAN 1
/* The ASan runtime's interface (as in <sanitizer/asan_interface.h>), weak:
 * NULL in a program without ASan, and hakmem then does nothing. */
extern void __asan_poison_memory_region(void const volatile *addr, size_t size) __attribute__((weak));
extern void __asan_unpoison_memory_region(void const volatile *addr, size_t size) __attribute__((weak));
#else
#define HAK_ANN_ASAN 0
#endif

#define HAK_ANNOTATE (HAK_ANN_VALGRIND || HAK_ANN_ASAN)

#if HAK_ANNOTATE

/* A tool is watching: the entry points then take their annotated forms. */
static inline __attribute__((always_inline)) bool ann_active(void) {
#if HAK_ANN_VALGRIND
  if (RUNNING_ON_VALGRIND) return true;
#endif
#if HAK_ANN_ASAN
  if (__asan_poison_memory_region != NULL) return true;
#endif
  return false;
}

static inline __attribute__((always_inline)) void ann_alloc(void *p, size_t n) {
#if HAK_ANN_VALGRIND
  VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 0);
#endif
#if HAK_ANN_ASAN
  if (__asan_unpoison_memory_region != NULL) __asan_unpoison_memory_region(p, n);
#endif
  (void)p, (void)n;
}

/* calloc: the block is all zero bytes (memcheck: defined). */
static inline __attribute__((always_inline)) void ann_alloc_zeroed(void *p, size_t n) {
#if HAK_ANN_VALGRIND
  VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 1);
#endif
#if HAK_ANN_ASAN
  if (__asan_unpoison_memory_region != NULL) __asan_unpoison_memory_region(p, n);
#endif
  (void)p, (void)n;
}

static inline __attribute__((always_inline)) void ann_free(void *p, size_t n) {
#if HAK_ANN_VALGRIND
  VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
#if HAK_ANN_ASAN
  if (__asan_poison_memory_region != NULL) __asan_poison_memory_region(p, n);
#endif
  (void)p, (void)n;
}

static inline __attribute__((always_inline)) void ann_internal_begin(const volatile void *p, size_t n) {
#if HAK_ANN_VALGRIND
  VALGRIND_DISABLE_ERROR_REPORTING;
#endif
#if HAK_ANN_ASAN
  if (__asan_unpoison_memory_region != NULL) __asan_unpoison_memory_region(p, n);
#endif
  (void)p, (void)n;
}

static inline __attribute__((always_inline)) void ann_internal_end(const volatile void *p, size_t n) {
#if HAK_ANN_ASAN
  if (__asan_poison_memory_region != NULL) __asan_poison_memory_region(p, n);
#endif
#if HAK_ANN_VALGRIND
  VALGRIND_ENABLE_ERROR_REPORTING;
#endif
  (void)p, (void)n;
}

static inline __attribute__((always_inline)) void ann_meta(void *p, size_t n) {
#if HAK_ANN_VALGRIND
  VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#endif
#if HAK_ANN_ASAN
  if (__asan_unpoison_memory_region != NULL) __asan_unpoison_memory_region(p, n);
#endif
  (void)p, (void)n;
}

/* hakmem metadata holding pointers to blocks handed out (slab_t.area points
 * at block 0): memcheck's leak check must not take them for the program's
 * pointers, or a lost first block of a slab would count as reachable. (It
 * ignores words in ranges exempt from address errors; nothing in there is
 * a block, so no report is lost.) */
static inline __attribute__((always_inline)) void ann_no_roots(void *p, size_t n) {
#if HAK_ANN_VALGRIND
  VALGRIND_DISABLE_ADDR_ERROR_REPORTING_IN_RANGE(p, n);
#endif
  (void)p, (void)n;
}

static inline __attribute__((always_inline)) void ann_unmap(void *p, size_t n) {
#if HAK_ANN_ASAN
  if (__asan_unpoison_memory_region != NULL) __asan_unpoison_memory_region(p, n);
#endif
  (void)p, (void)n; /* memcheck forgets an unmapped range by itself */
}

/* The value of lvalue lv, a word inside a free block. */
#define ANN_FREE_READ(lv)                                   \
  __extension__({                                           \
    ann_internal_begin(&(lv), sizeof(lv));                  \
    __typeof__(lv) ann_v_ = (lv);                           \
    ann_internal_end(&(lv), sizeof(lv));                    \
    ann_v_;                                                 \
  })
/* Store v into lvalue lv, a word inside a free block. */
#define ANN_FREE_WRITE(lv, v)                               \
  do {                                                      \
    ann_internal_begin(&(lv), sizeof(lv));                  \
    (lv) = (v);                                             \
    ann_internal_end(&(lv), sizeof(lv));                    \
  } while (0)

#else /* no annotations: plain accesses, nothing else */

#define ann_active() false
#define ann_alloc(p, n) ((void)0)
#define ann_alloc_zeroed(p, n) ((void)0)
#define ann_free(p, n) ((void)0)
#define ann_meta(p, n) ((void)0)
#define ann_no_roots(p, n) ((void)0)
#define ann_unmap(p, n) ((void)0)
#define ANN_FREE_READ(lv) (lv)
#define ANN_FREE_WRITE(lv, v) ((lv) = (v))

#endif

#endif
