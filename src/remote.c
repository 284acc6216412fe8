/*
 * remote.c — cross-thread frees (see remote.h).
 *
 * The full hand-shake, after mimalloc's "delayed free": the owner marks a
 * slab full by CAS-ing thread_free from empty to TF_DELAYED, so the mark and
 * a remote push can never both succeed unseen. A remote freer that finds the
 * mark pushes the block to the owner heap's delayed list instead (the owner
 * drains it in its slow path); if that heap is gone (list closed) or the
 * slab abandoned, the block goes on thread_free with the mark kept, and the
 * adopter collects it.
 */
#include "remote.h"

void remote_free(slab_t *s, block_t *b) {
  uintptr_t tf = atomic_load_explicit(&s->thread_free, memory_order_relaxed);
  for (;;) {
    if (tf & TF_DELAYED) {
      uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
      heap_t *h = ss_heap(ss_of(s));
      if ((owner & ~(OWNER_FULL | OWNER_ABANDONED | OWNER_UNUSED)) && h != NULL) {
        uintptr_t d = atomic_load_explicit(&h->delayed, memory_order_relaxed);
        while (d != HEAP_DELAYED_CLOSED) {
          blk_set_next(b, (block_t *)d);
          if (atomic_compare_exchange_weak_explicit(&h->delayed, &d, (uintptr_t)b,
                                                    memory_order_release, memory_order_relaxed))
            return;
        }
      }
    }
    blk_set_next(b, (block_t *)(tf & ~TF_DELAYED));
    if (atomic_compare_exchange_weak_explicit(&s->thread_free, &tf,
                                              (uintptr_t)b | (tf & TF_DELAYED),
                                              memory_order_release, memory_order_relaxed))
      break;
  }
  /* A slab whose thread exited has no owner to collect this: the
   * abandoned list reclaims it (superslab.c). */
  if (atomic_load_explicit(&s->owner, memory_order_relaxed) == OWNER_ABANDONED) ss_abandon_note_free();
}

unsigned remote_collect(slab_t *s) {
  if (atomic_load_explicit(&s->thread_free, memory_order_relaxed) <= TF_DELAYED) return 0;
  uintptr_t tf = atomic_exchange_explicit(&s->thread_free, 0, memory_order_acquire);
  block_t *head = (block_t *)(tf & ~TF_DELAYED);
  if (head == NULL) return 0;
  unsigned n = 1;
  block_t *last = head;
  for (block_t *nx; (nx = blk_next(last)) != NULL; last = nx) n++;
  blk_set_next(last, s->free);
  s->free = head;
  HAK_ASSERT(s->used >= n);
  s->used = (uint16_t)(s->used - n);
  return n;
}

bool remote_mark_full(slab_t *s, heap_t *h) {
  uintptr_t expect = 0;
  if (!atomic_compare_exchange_strong_explicit(&s->thread_free, &expect, TF_DELAYED,
                                               memory_order_acq_rel, memory_order_relaxed))
    return false;
  atomic_store_explicit(&s->owner, h->tid | OWNER_FULL, memory_order_release);
  return true;
}

void remote_clear_mark(slab_t *s) {
  /* A CAS loop, not exchange-then-store: a push may land in between. */
  uintptr_t tf = atomic_load_explicit(&s->thread_free, memory_order_relaxed);
  while ((tf & TF_DELAYED) &&
         !atomic_compare_exchange_weak_explicit(&s->thread_free, &tf, tf & ~TF_DELAYED,
                                                memory_order_acq_rel, memory_order_relaxed)) {
  }
}

void remote_unmark_full(slab_t *s, heap_t *h) {
  atomic_store_explicit(&s->owner, h->tid, memory_order_release);
  remote_clear_mark(s);
}

block_t *remote_delayed_take(heap_t *h, bool close) {
  uintptr_t d;
  if (close) {
    d = atomic_exchange_explicit(&h->delayed, HEAP_DELAYED_CLOSED, memory_order_acquire);
  } else {
    if (atomic_load_explicit(&h->delayed, memory_order_relaxed) == 0) return NULL;
    d = atomic_exchange_explicit(&h->delayed, 0, memory_order_acquire);
  }
  return d == HEAP_DELAYED_CLOSED ? NULL : (block_t *)d;
}
