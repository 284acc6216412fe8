/*
 * remote.c — cross-thread frees (see remote.h).
 *
 * Batching: a remote free links the block into a chain per destination
 * slab in the freeing thread's cache (a few ways, indexed by the slab's
 * address); a full chain, or one evicted by another slab, is published
 * with one CAS — the idea of tcmalloc's transfer batches and snmalloc's
 * message queues, applied to a slab-owning design. The count travels in
 * the thread_free word, so the owner takes a batch without walking it.
 *
 * The full hand-shake, after mimalloc's "delayed free": the owner marks a
 * slab full by CAS-ing thread_free from empty to TF_DELAYED, so the mark and
 * a publish can never both succeed unseen. A publisher that finds the mark
 * pushes the batch to the owner heap's delayed list instead (the owner
 * drains it in its slow path); if that heap is gone (list closed) or the
 * slab abandoned, the batch goes on thread_free with the mark kept, and the
 * adopter collects it.
 */
#include "remote.h"
#include "decay.h"
#include "heap.h"
#include "stats.h"

static int remote_publish(slab_t *s, block_t *head, block_t *tail, unsigned n) {
  uintptr_t tf = atomic_load_explicit(slab_tf(s), memory_order_relaxed);
  HAK_STAT(ST_RPUBLISH);
  HAK_STATN(ST_RPUBLISH_BLOCKS, n);
  for (;;) {
    if (tf & TF_DELAYED) {
      uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
      heap_t *h = ss_heap(ss_of(s));
      if ((owner & ~(OWNER_FULL | OWNER_ABANDONED | OWNER_UNUSED)) && h != NULL) {
        uintptr_t d = atomic_load_explicit(&h->delayed, memory_order_relaxed);
        /* Counted before the push, so a taker never subtracts first. */
        size_t bytes = (size_t)n * s->bsize;
        if (d != HEAP_DELAYED_CLOSED) {
          size_t had = atomic_fetch_add_explicit(&h->delayed_bytes, bytes, memory_order_relaxed);
          if (HAK_UNLIKELY(had < HEAP_DELAYED_WAKE_BYTES && had + bytes >= HEAP_DELAYED_WAKE_BYTES))
            decay_note_idle(DECAY_BG_START_BYTES);
        }
        while (d != HEAP_DELAYED_CLOSED) {
          blk_set_next(tail, (block_t *)d);
          if (atomic_compare_exchange_weak_explicit(&h->delayed, &d, (uintptr_t)head,
                                                    memory_order_release, memory_order_relaxed)) {
            HAK_STAT(ST_RDELAYED);
            return REMOTE_OK;
          }
          HAK_STAT(ST_RCAS_RETRY);
          if (d == HEAP_DELAYED_CLOSED) atomic_fetch_sub_explicit(&h->delayed_bytes, bytes, memory_order_relaxed);
        }
      }
    }
    blk_set_next(tail, (block_t *)(tf & TF_PTR_MASK));
    uintptr_t count = (tf >> TF_COUNT_SHIFT) + n;
    uintptr_t nw = (uintptr_t)head | (tf & TF_DELAYED) | (count << TF_COUNT_SHIFT);
    if (atomic_compare_exchange_weak_explicit(slab_tf(s), &tf, nw, memory_order_release,
                                              memory_order_relaxed))
      break;
    HAK_STAT(ST_RCAS_RETRY);
  }
  /* A slab whose thread exited has no owner to collect this: the caller
   * tells the abandoned list (superslab.c). */
  return atomic_load_explicit(&s->owner, memory_order_relaxed) == OWNER_ABANDONED ? REMOTE_ABANDONED
                                                                                : REMOTE_OK;
}

static int remote_flush_way(remote_cache_t *rc, remote_pending_t *w) {
  rc->busy &= ~((uint32_t)1 << (w - rc->way));
  int r = remote_publish(w->slab, w->head, w->tail, remote_way_blocks(w, w->slab));
  w->slab = NULL;
  w->head = w->tail = NULL;
  w->room = w->start = 0;
  return r;
}

int remote_free_slow(remote_cache_t *rc, slab_t *s, block_t *b) {
  if (rc == NULL) {
    blk_free(b, NULL);
    return remote_publish(s, b, b, 1);
  }
  int r = REMOTE_OK;
  unsigned i = remote_way_of(s);
  remote_pending_t *w = &rc->way[i];
  if (w->slab != s) {
    if (w->slab != NULL) r |= remote_flush_way(rc, w);
    w->slab = s;
    w->tail = b;
    w->room = w->start = remote_room_start(s->bsize);
    rc->busy |= (uint32_t)1 << i;
  }
  blk_free(b, w->head);
  w->head = b;
  w->room -= (int32_t)s->bsize;
  if (w->room <= 0) r |= remote_flush_way(rc, w);
  if (--rc->credit <= 0) r |= remote_flush(rc);
  return r;
}

unsigned remote_batch_shift;

void remote_threads_set(unsigned live, unsigned cpus) {
  /* Measured (bench_prodcons 16 and 64 threads on 2 CPUs, 7 interleaved
   * runs): batches of 16 blocks instead of 64 held 5.4 / 16.8 MiB at the
   * peak instead of 6.2 / 19.7 at the same speed, while with 2 threads
   * they cost 16 % of the speed (more publishes for the same blocks). */
  unsigned shift = 0;
  while (shift < REMOTE_SHIFT_MAX && live > (2u * cpus << shift)) shift++;
  __atomic_store_n(&remote_batch_shift, shift, __ATOMIC_RELAXED);
}

int remote_flush(remote_cache_t *rc) {
  int r = REMOTE_OK;
  while (rc->busy != 0) r |= remote_flush_way(rc, &rc->way[__builtin_ctz(rc->busy)]);
  rc->credit = REMOTE_FLUSH_EVERY;
  return r;
}

bool remote_mark_full(slab_t *s, heap_t *h) {
  uintptr_t expect = 0;
  if (!atomic_compare_exchange_strong_explicit(slab_tf(s), &expect, TF_DELAYED,
                                               memory_order_acq_rel, memory_order_relaxed))
    return false;
  atomic_store_explicit(&s->owner, h->tid | OWNER_FULL, memory_order_release);
  HAK_STAT(ST_MARK_FULL);
  return true;
}

void remote_unmark_full(slab_t *s, heap_t *h) {
  atomic_store_explicit(&s->owner, h->tid, memory_order_release);
  ss_slab_clear_mark(s);
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

void remote_delayed_put(heap_t *h, block_t *head, block_t *tail) {
  uintptr_t d = atomic_load_explicit(&h->delayed, memory_order_relaxed);
  do {
    HAK_ASSERT(d != HEAP_DELAYED_CLOSED);
    blk_set_next(tail, (block_t *)d);
  } while (!atomic_compare_exchange_weak_explicit(&h->delayed, &d, (uintptr_t)head, memory_order_release,
                                                  memory_order_relaxed));
}

void remote_delayed_taken(heap_t *h, size_t bytes) {
  if (bytes != 0) atomic_fetch_sub_explicit(&h->delayed_bytes, bytes, memory_order_relaxed);
}

/* Cold: a kept-block spill and the forwarding of a handed-over slab's run
 * are rare, and the hot code must fit one fault-around window
 * (test_footprint). */
HAK_TEXT_COLD void remote_send_chain(remote_cache_t *rc, slab_t *s, block_t *b, unsigned n) {
  int r = REMOTE_OK;
  for (; n != 0 && b != NULL; n--) {
    block_t *next = blk_next(b);
    r |= remote_free(rc, s != NULL ? s : ss_slab_of(b, ss_of(b)->slab_shift), b);
    b = next;
  }
  remote_note(r);
}
