/*
 * front.h — the hot paths of malloc and free, inlined into each entry point.
 *
 * Owns: nothing; reads the thread's front (heap.h), the ownership map and
 * slab descriptors. Promises: malloc of 0..4352 bytes on a cache hit is one
 * load of the direct table, one test of the list head and a pop; free of a
 * block whose slab belongs to the calling thread is one map load (whose
 * entry locates the slab's descriptor: ownmap.h), the owner test, a
 * double-free test and a push onto the list malloc pops (LIFO: the block
 * freed last is reused first, while it is in this core's cache). The tests
 * are superslab.h's helpers: in the default build the head test is a NULL
 * test, the double-free test one compare with the list head (the block
 * freed last), and there is no block-start test — malloc 15 (with the
 * pop's prefetch of the next block) and free 23 instructions on x86-64;
 * in the checked builds (secure, debug;
 * HAK_CHECKED) the head must lie in its slab (which also rejects a
 * corrupted link), the pop clears the block's free mark, and free tests
 * that p starts a block (a multiply, no division) and is not marked free
 * (a double free in any order). malloc_usable_size of such a block takes
 * free's tests and reads the block size. No locks, no atomic read-modify-writes, no
 * option reads, no counters. Everything else is one call: alloc_slow, or
 * free_slow (free_other when the slab is known: a remote free need not
 * look it up again).
 * May call: alloc.c's slow paths.
 */
#ifndef HAK_FRONT_H
#define HAK_FRONT_H

#include "heap.h"
#include "ownmap.h"
#include "stats.h"
#include "superslab.h"

_Static_assert(SS_SLABS_OFFSET == OWN_DESC_OFFSET && sizeof(slab_t) == (1u << OWN_DESC_SHIFT),
               "ownmap_slab_at computes descriptors from the superslab layout");

void *alloc_slow(size_t size) HAK_SLOW;
void free_slow(void *p) HAK_SLOW;
void alloc_slab_emptied(slab_t *s) HAK_COLD;
void free_other(void *p, slab_t *s, uintptr_t owner, void (*slow)(void *)) HAK_SLOW;
size_t alloc_usable_size(const void *p);

HAK_INLINE void *front_malloc(size_t size) {
  /* Sizes above fast_max (1 KiB until the thread's first slow call fills
   * the rest of the table, then HAK_FAST_MAX) select the last bucket,
   * which always holds the empty sentinel (free list NULL, span 0): the
   * size test costs no branch of its own. */
  size_t bucket = (size + 15) >> 4;
#if defined(__x86_64__)
  /* A conditional move: with the bound in memory gcc 12 would branch. */
  __asm__("cmpq %[max], %[size]\n\tcmova %[last], %[bucket]"
          : [bucket] "+r"(bucket)
          : [size] "r"(size), [max] "m"(heap_front.fast_max), [last] "r"((size_t)(HAK_DIRECT_N - 1))
          : "cc");
#else
  if (size > heap_front.fast_max) bucket = HAK_DIRECT_N - 1;
#endif
  slab_t *s = heap_front.direct[bucket];
  block_t *b = s->free;
#if defined(__x86_64__)
  /* The block is what malloc returns: load it into the return register.
   * Left alone, gcc 12 puts the slab there (it reuses the table index's
   * register) and pays a move before the ret: one instruction more. An
   * empty asm; it only names the register. */
  __asm__("" : "+a"(b));
#endif
  if (HAK_LIKELY(slab_can_pop(s, b))) {
    HAK_STAT(ST_ALLOC);
    HAK_STAT_CLS(cls_alloc, s->cls);
    return slab_pop(s, b);
  }
  return alloc_slow(size);
}

/* slow: where what the fast path does not take goes (free_slow, or the
 * sized variant, so a report names the call the program made). */
HAK_INLINE void front_free_to(void *p, void (*slow)(void *)) {
  uintptr_t a = (uintptr_t)p;
  uint64_t e = ownmap_entry(a);
  if (HAK_LIKELY(ownmap_is_slab(e))) {
    slab_t *s = (slab_t *)ownmap_slab_at(e, a);
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (HAK_LIKELY(owner == HAK_THREAD_ID() && slab_hit_is_block_start(s, p))) {
      block_t *b = p;
      /* Free already (marked, or the list's head in the default build): a
       * double free (or, with a chance of 2^-64, data that happens to
       * equal the mark): the slow path decides and reports. */
      if (HAK_LIKELY(!slab_block_is_free(s, b, true, true))) {
        HAK_STAT(ST_FREE);
        HAK_STAT_CLS(cls_free, s->cls);
        blk_free(b, s->free);
        s->free = b;
        if (HAK_UNLIKELY(slab_used_dec_release(s) == 0)) alloc_slab_emptied(s);
        return;
      }
    }
#if !HAK_DEBUG
    /* Another thread's slab (or anything odd about this one): the remote
     * free starts from what was just read instead of looking it all up
     * again. The debug build keeps the one full slow path (it checks the
     * heap's invariants there). */
    free_other(p, s, owner, slow);
    return;
#endif
  }
  slow(p);
}

HAK_INLINE void front_free(void *p) { front_free_to(p, free_slow); }

/* malloc_usable_size of a block of one of the calling thread's slabs: the
 * free hit path's tests, then the block size. Programs that account their
 * memory call it about twice per allocation (redis does); everything else,
 * with its checks and reports, is alloc_usable_size. */
HAK_INLINE size_t front_usable_size(const void *p) {
  uint64_t e = ownmap_entry((uintptr_t)p);
  if (HAK_LIKELY(ownmap_is_slab(e))) {
    const slab_t *s = (const slab_t *)ownmap_slab_at(e, (uintptr_t)p);
    if (HAK_LIKELY(atomic_load_explicit(&s->owner, memory_order_relaxed) == HAK_THREAD_ID() &&
                   slab_hit_is_block_start(s, p) && !slab_block_is_free(s, p, true, false)))
      return s->bsize;
  }
  return alloc_usable_size(p);
}

#endif
