/*
 * front.h — the hot paths of malloc and free, inlined into each entry point.
 *
 * Owns: nothing; reads the thread's front (heap.h) and the ownership map.
 * Promises: malloc of 0..1024 bytes on a cache hit is one load of the direct
 * table, one test and a pop; free of a block whose slab belongs to the
 * calling thread is one map load, one owner test and a push. No locks, no
 * atomic read-modify-writes, no option reads, no counters. Everything else
 * is a call into a noinline function in alloc.c.
 * May call: alloc.c's slow paths.
 */
#ifndef HAK_FRONT_H
#define HAK_FRONT_H

#include "heap.h"
#include "ownmap.h"
#include "stats.h"
#include "superslab.h"

void *alloc_slow(size_t size) HAK_NOINLINE;
void alloc_free_slow(void *p) HAK_NOINLINE;
void alloc_slab_emptied(slab_t *s) HAK_NOINLINE;
#if HAK_DEBUG || HAK_SECURE
/* Every free in debug and secure builds: false (after reporting) if p is not
 * a live block of s. local: the caller owns s (only then may the debug
 * build walk its free list). */
bool alloc_check_free(slab_t *s, void *p, bool local) HAK_NOINLINE;
#endif

HAK_INLINE void *front_malloc(size_t size) {
  /* Sizes above 1 KiB select the last bucket, which always holds the empty
   * sentinel: the size test costs no branch of its own. */
  size_t bucket = size <= HAK_FAST_MAX ? (size + 15) >> 4 : HAK_DIRECT_N - 1;
  slab_t *s = heap_front.direct[bucket];
  block_t *b = s->free;
  if (HAK_LIKELY(b != NULL)) {
    HAK_STAT(ST_ALLOC);
    HAK_STAT_CLS(cls_alloc, s->cls);
    return slab_pop(s, b);
  }
  return alloc_slow(size);
}

HAK_INLINE void front_free(void *p) {
  uintptr_t a = (uintptr_t)p;
  unsigned shift = ownmap_load(a);
  if (HAK_LIKELY(shift >= HAK_SMALL_SLAB_SHIFT)) {
    slab_t *s = ss_slab_of(p, shift);
    if (HAK_LIKELY(atomic_load_explicit(&s->owner, memory_order_relaxed) == HAK_THREAD_ID())) {
#if HAK_DEBUG || HAK_SECURE
      if (HAK_UNLIKELY(!alloc_check_free(s, p, true))) return;
#endif
      HAK_STAT(ST_FREE);
      HAK_STAT_CLS(cls_free, s->cls);
      block_t *b = p;
      block_t *head = s->free;
      /* The cheap double-free check: freeing the block that is already at
       * the head of its free list (free(p); free(p);) would make the list
       * cyclic and hand the block out twice. One compare with a value the
       * push loads anyway. */
      if (HAK_UNLIKELY(b == head)) {
        alloc_free_slow(p);
        return;
      }
      blk_set_next(b, head);
      s->free = b;
      if (HAK_UNLIKELY(--s->used == 0)) alloc_slab_emptied(s);
      return;
    }
  }
  alloc_free_slow(p);
}

#endif
