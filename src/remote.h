/*
 * remote.h — frees that cross threads.
 *
 * Owns: the lock-free per-slab thread_free lists, the per-heap delayed
 * list, the full/not-full hand-shake between a slab's owner and remote
 * freers (see superslab.h for the owner field), and each thread's cache of
 * pending remote frees.
 * Promises: a block freed by a thread that does not own its slab is never
 * lost: it waits in the freeing thread's cache (at most REMOTE_BATCH blocks
 * or REMOTE_BATCH_BYTES per slab, REMOTE_WAYS slabs; a half or a quarter
 * of that while many more threads than CPUs live: remote_threads_set),
 * then a whole batch is published with one CAS onto the slab's
 * thread_free (the owner collects it with one exchange, already counted)
 * or, when the slab was full, onto the owner heap's delayed list so that
 * the owner notices it. The cache is
 * flushed whenever the thread reaches an allocation slow path, every
 * REMOTE_FLUSH_EVERY remote frees, on hak_collect and at thread exit.
 * Collecting a slab's thread_free and dropping its full mark belong to
 * the slab's owner (superslab.c: ss_slab_collect, ss_slab_clear_mark).
 * Where a publish found the slab abandoned it says so, and the caller
 * tells the abandoned list (remote_note, or remote_send and
 * remote_send_chain, which send and note).
 * May call: superslab (ss_slab_clear_mark, ss_abandon_note_free), decay
 * (decay_note_idle: a delayed list that grows past HEAP_DELAYED_WAKE_BYTES
 * wakes the purge thread, whose collector takes an idle heap's list);
 * reads superslab.h's and heap.h's inline accessors.
 */
#ifndef HAK_REMOTE_H
#define HAK_REMOTE_H

#include "superslab.h"

struct heap;

#define REMOTE_WAYS 32
#define REMOTE_BATCH 64
#define REMOTE_BATCH_BYTES ((uint32_t)32768)
#define REMOTE_FLUSH_EVERY 1024

typedef struct remote_pending {
  slab_t *slab;          /* NULL: way unused */
  block_t *head, *tail;  /* chain of blocks of slab, linked and marked */
  int32_t room;          /* bytes left before the batch is published: starts at
                            start and only goes down, so the batch's length
                            is what it lost (no count to keep up) */
  int32_t start;         /* room when the batch started (remote_room_start):
                            the shift may change under a batch */
} remote_pending_t;
_Static_assert(sizeof(remote_pending_t) == 32, "start fills the way's padding");

typedef struct remote_cache {
  /* First: every refill reads busy. heap_t ends with this cache, whose
   * last ways spill into the heap's second page, which a thread that never
   * frees another thread's block then never writes (heap.h). */
  uint32_t busy;         /* bit i: way i holds a batch */
  int32_t credit;        /* remote frees left before every way is flushed
                            (REMOTE_FLUSH_EVERY after a flush and in a new
                            heap: heap_reset) */
  remote_pending_t way[REMOTE_WAYS];
} remote_cache_t;
_Static_assert(REMOTE_WAYS <= 32, "busy is a 32-bit mask");

/* What a publish found. */
enum { REMOTE_OK = 0, REMOTE_ABANDONED = 1 };

/* remote_free's other cases: no cache, a way taken by another slab, a
 * batch to publish, the periodic flush. */
int remote_free_slow(remote_cache_t *rc, slab_t *s, block_t *b) HAK_SLOW;
/* The most a way's room starts with: REMOTE_BATCH blocks of bsize, at
 * most REMOTE_BATCH_BYTES. */
HAK_INLINE int32_t remote_room0(uint32_t bsize) {
  uint64_t room = (uint64_t)REMOTE_BATCH * bsize;
  return (int32_t)(room < REMOTE_BATCH_BYTES ? room : REMOTE_BATCH_BYTES);
}
/* Batches shrink by this shift (0..REMOTE_SHIFT_MAX) while the process
 * has many more threads than CPUs (remote_threads_set). */
#define REMOTE_SHIFT_MAX 2u
extern unsigned remote_batch_shift;
/* heap.c, when a thread takes or gives back a heap: live heaps now and the
 * CPUs the process may run on. Every thread's pending batches hold blocks
 * their owners may be waiting for, so what all of them hold together grows
 * with the thread count; above two threads per CPU each batch is halved
 * per doubling, down to a quarter. */
void remote_threads_set(unsigned live, unsigned cpus);
/* A way's room when its batch starts now. */
HAK_INLINE int32_t remote_room_start(uint32_t bsize) {
  return remote_room0(bsize) >> __atomic_load_n(&remote_batch_shift, __ATOMIC_RELAXED);
}
/* The bytes of a way's batch: what its room lost since the batch started
 * (start and room read by the caller: the owner's plain reads or another
 * thread's relaxed loads). */
HAK_INLINE uint32_t remote_way_bytes(int32_t start, int32_t room) { return (uint32_t)(start - room); }
/* The blocks of a way's batch (slab s). */
HAK_INLINE uint32_t remote_way_blocks(const remote_pending_t *w, const slab_t *s) {
  return remote_way_bytes(w->start, w->room) / s->bsize;
}
/* The way of rc that holds slab s's batch: descriptors are 128 bytes
 * apart, so the slabs of one superslab take different ways. */
HAK_INLINE unsigned remote_way_of(const slab_t *s) { return (unsigned)((uintptr_t)s >> 7) & (REMOTE_WAYS - 1); }
/* The common case of remote_free, inline: the way of rc already holds s's
 * batch, which stays below its limits, and the periodic flush is not due;
 * b joins it. False (nothing done) otherwise: remote_free_slow's case, or
 * b heading the batch already (freed twice in a row, which the caller's
 * slow path reports: heap.h, heap_freed_last).
 * The way keeps no count of its blocks: its room says it. */
HAK_INLINE bool remote_free_fast(remote_cache_t *rc, slab_t *s, block_t *b) {
  remote_pending_t *w = &rc->way[remote_way_of(s)];
  int32_t room = w->room - (int32_t)s->bsize;
  if (HAK_LIKELY(w->slab == s && room > 0 && rc->credit > 1 && w->head != b)) {
    blk_free(b, w->head);
    w->head = b;
    w->room = room;
    rc->credit--;
    return true;
  }
  return false;
}
/* Any thread that does not own s: hand b (not yet marked) to s's owner
 * through the cache rc (NULL: publish at once). Returns REMOTE_ABANDONED if
 * a publish reached a slab whose thread exited. */
HAK_INLINE int remote_free(remote_cache_t *rc, slab_t *s, block_t *b) {
  if (HAK_LIKELY(rc != NULL) && remote_free_fast(rc, s, b)) return REMOTE_OK;
  return remote_free_slow(rc, s, b);
}
/* Publish every pending batch of rc. */
int remote_flush(remote_cache_t *rc);
/* What every caller does with a publish's result: one that reached an
 * abandoned slab tells the abandoned list, so that a thread that frees
 * into it may adopt it (superslab.c). */
HAK_INLINE void remote_note(int r) {
  if (HAK_UNLIKELY(r == REMOTE_ABANDONED)) ss_abandon_note_free();
}
/* b goes home through rc (remote_free), its result noted. */
HAK_INLINE void remote_send(remote_cache_t *rc, slab_t *s, block_t *b) { remote_note(remote_free(rc, s, b)); }
/* The same, where remote_free_fast has been tried already. */
HAK_INLINE void remote_send_slow(remote_cache_t *rc, slab_t *s, block_t *b) {
  remote_note(remote_free_slow(rc, s, b));
}
/* The first n blocks of the chain from b (linked by blk_next) go home
 * through rc, all to slab s, or (s NULL) each to its own slab; abandoned
 * results are noted once. */
void remote_send_chain(remote_cache_t *rc, slab_t *s, block_t *b, unsigned n);
/* Owner, s exhausted: mark it full. False if remote frees arrived first
 * (collect them instead). */
bool remote_mark_full(slab_t *s, struct heap *h);
/* Owner: s (full) got a block back. */
void remote_unmark_full(slab_t *s, struct heap *h);
/* Owner: take the delayed list; close it for good when the thread exits.
 * (Also the collector of an idle heap, under its lock.) */
block_t *remote_delayed_take(struct heap *h, bool close);
/* The collector of an idle heap, under its lock (so the list is open):
 * put the chain head..tail back on h's delayed list. */
void remote_delayed_put(struct heap *h, block_t *head, block_t *tail);
/* Blocks of that many bytes left h's delayed list for good (drained into
 * their slabs, sent on, or released with their slab): its byte count. */
void remote_delayed_taken(struct heap *h, size_t bytes);
/* Does s have remote frees waiting? */
HAK_INLINE bool remote_has_frees(const slab_t *s) {
  return (atomic_load_explicit(slab_tf(s), memory_order_relaxed) & TF_PTR_MASK) != 0;
}

#endif
