/*
 * heap_impl.h — what the heap's files share (heap.c, the heap and its
 * refill; heap_purge.c, idle memory and the walks over every heap;
 * heap_prof.c, the profiling batches; heap_check.c, the invariant
 * checkers; heap_xc.c, the blocks a thread keeps). Not for the rest of the
 * library: its interface is heap.h.
 *
 * The list helpers and the idle-memory bookkeeping are inline here because
 * heap.c's refill moves slabs between lists on its path, where they were
 * inlined when everything was one file.
 */
#ifndef HAK_HEAP_IMPL_H
#define HAK_HEAP_IMPL_H

#include "internal.h"
#include "heap.h"
#include "superslab.h"

/* Every heap ever made, newest first, linked through all_next (heap structs
 * are pooled, never unmapped): pushed by heap.c's heap_new under its pool
 * lock, read without a lock by the walks of heap_purge.c. */
extern heap_t *heap_all;

/* A heap's slab lists (slab_t.on_list = list + 1). FIFO: a slab that
 * stopped being full a moment ago has one free block; by the time it
 * reaches the head, frees have refilled it, so a refill does not switch
 * slabs after every other allocation. */
HAK_INLINE void heap_list_push(heap_t *h, unsigned l, slab_t *s) {
  unsigned c = s->cls;
  s->on_list = (uint8_t)(l + 1);
  s->cool_mark = 0; /* idle on the list from now (heap_cool) */
  s->cool_used = UINT16_MAX;
  h->cool_pushed++;
  slab_dlist_push_back(&h->list_head[l][c], s);
  if (l == HEAP_WAITING) {
    h->waiting_n[c]++;
    s->wait_tick = h->tick;
  }
}

HAK_INLINE void heap_list_remove(heap_t *h, slab_t *s) {
  unsigned l = s->on_list - 1u, c = s->cls;
  slab_dlist_remove(&h->list_head[l][c], s);
  s->on_list = 0;
  if (l == HEAP_WAITING) h->waiting_n[c]--;
}

HAK_INLINE slab_t *heap_list_pop(heap_t *h, unsigned l, unsigned cls) {
  slab_t *s = h->list_head[l][cls];
  if (s) heap_list_remove(h, s);
  return s;
}

/* The owner's sections (heap.h, owner_busy): every slow path of the
 * owner that touches its slab lists, or slabs on them, runs inside one;
 * the fast paths touch only the current slabs, and a fast free only a
 * slab holding the block it frees (the collector takes none that holds a
 * live block). Sections nest. Entering costs a count and a load, no
 * fence: the collector's process-wide barrier orders them against its
 * claim (the asymmetric form of Dekker's hand-shake that membarrier(2)
 * was made for). An owner that finds the lists claimed waits for the
 * collector, which holds h->lock while it works (heap_owner_wait, which
 * also tells a nested section, which need not wait, from the outermost).
 * On x86 (HAK_TSO, internal.h) the count is one add or
 * subtract in memory, not locked: only the owner writes it, the
 * collector only reads it, and every store is a release there. The
 * portable form (a load and a store) cost medium-class refills, which
 * carve one block each, about six instructions, one more per operation
 * on mid_large_1t (39.3 -> 40.3). */
void heap_owner_wait(heap_t *h) HAK_COLD;
HAK_INLINE void heap_owner_enter(heap_t *h) {
#if HAK_TSO
  __asm__ volatile("addl $1, %0" : "+m"(*(uint32_t *)&h->owner_busy) : : "memory");
#else
  uint32_t d = atomic_load_explicit(&h->owner_busy, memory_order_relaxed);
  atomic_store_explicit(&h->owner_busy, d + 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
#endif
  if (HAK_UNLIKELY(atomic_load_explicit(&h->claimed, memory_order_acquire) != 0)) heap_owner_wait(h);
}
HAK_INLINE void heap_owner_exit(heap_t *h) {
#if HAK_TSO
  __asm__ volatile("subl $1, %0" : "+m"(*(uint32_t *)&h->owner_busy) : : "memory");
#else
  uint32_t d = atomic_load_explicit(&h->owner_busy, memory_order_relaxed);
  atomic_store_explicit(&h->owner_busy, d - 1, memory_order_release);
#endif
}

/* A heap's owned superslabs of one kind, those with a free slab first
 * (superslab_t.listed while on it). Under h->lock. */
HAK_INLINE void heap_owned_remove(heap_t *h, superslab_t *ss) {
  ss_dlist_remove(&h->owned_head[ss->kind], &h->owned_tail[ss->kind], ss);
  ss->listed = 0;
}

HAK_INLINE void heap_owned_push_front(heap_t *h, superslab_t *ss) {
  ss_dlist_push_front(&h->owned_head[ss->kind], &h->owned_tail[ss->kind], ss);
  ss->listed = 1;
}

HAK_INLINE void heap_owned_push_back(heap_t *h, superslab_t *ss) {
  ss_dlist_push_back(&h->owned_head[ss->kind], &h->owned_tail[ss->kind], ss);
  ss->listed = 1;
}

/* Idle memory of h becomes due at `due`: the next purge must not wait
 * longer. */
HAK_INLINE void heap_due(heap_t *h, uint64_t due) {
  if (due < atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed))
    atomic_store_explicit(&h->next_purge_ms, due, memory_order_relaxed);
}

HAK_INLINE void heap_dirty_add(heap_t *h, size_t bytes, long sign) {
  size_t d = atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed);
  d = sign > 0 ? d + bytes : d > bytes ? d - bytes : 0;
  atomic_store_explicit(&h->dirty_bytes, d, memory_order_relaxed);
}

/* A delayed list holds runs of blocks of one slab (a remote publish links
 * a batch of one slab): the length of the run of s's blocks starting at b,
 * at most max, and its last block. The one walk of the owner's drain
 * (heap.c) and of the idle heap's collector (heap_purge.c). */
HAK_INLINE unsigned heap_run_len(const slab_t *s, block_t *b, unsigned max, block_t **last) {
  unsigned n = 1;
  block_t *next;
  while ((next = blk_next(b)) != NULL && slab_holds(s, next) && n < max) {
    b = next;
    n++;
  }
  *last = b;
  return n;
}

/* Parked slabs (heap.h, parked[]; parked_n counts them). Under h->lock,
 * or where nothing else can reach h (reset, a fork's child). The store is
 * atomic because heap_next_slab peeks at the slot without the lock. */
HAK_INLINE slab_t *heap_parked_take(heap_t *h, unsigned c) {
  slab_t *s = h->parked[c];
  if (s != NULL) {
    __atomic_store_n(&h->parked[c], NULL, __ATOMIC_RELAXED);
    h->parked_n--;
  }
  return s;
}

/* Forget every parked slab (their superslabs went elsewhere, or were
 * reset with the heap). */
HAK_INLINE void heap_parked_forget(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) h->parked[c] = NULL;
  h->parked_n = 0;
}

/* ---- heap_purge.c -------------------------------------------------------- */

/* s, a slab of h nobody uses, goes back to its superslab, resident; the
 * purge decommits it once idle for the purge delay. Under h->lock (the
 * _locked form takes it). */
void heap_release_slab(heap_t *h, slab_t *s);
void heap_release_slab_locked(heap_t *h, slab_t *s);
/* The same for a slab idle since due less the purge delay (a parked one). */
void heap_release_slab_due(heap_t *h, slab_t *s, uint64_t due);
/* Decommit h's free slabs idle for the purge delay, release its wholly
 * free superslabs idle that long (everything idle if force). Under
 * h->lock. Returns the bytes decommitted. */
size_t heap_purge(heap_t *h, uint64_t now, bool force);
/* The purge delay of a heap that takes back what its purges give back.
 * A purge by time that decommitted memory, followed within
 * HEAP_DECAY_WINDOW delays by the heap taking fresh or decommitted slabs
 * (a program that frees a structure and builds it again over longer than
 * the delay; with 16 threads on 2 cores, a thread that runs an eighth of
 * the time), faulted those pages in again and saved nothing. Once the
 * heap took back half of HEAP_DECAY_REGRET_MIN_KIB or more that such
 * purges gave back (heap_decay_back), its delay becomes the idle time that
 * memory had when the purge took it plus the time since, rounded up to a
 * power of two times the plain delay (HEAP_DECAY_SHIFT_MAX doublings at
 * most); once it took back less than a quarter of HEAP_DECAY_QUIET_KIB
 * or more given back, the delay halves. The longer delay holds only while
 * the heap's thread allocates: a pass that finds no refill since the pass
 * before purges with the plain delay (a thread that runs without an
 * allocator call counts as quiet: test_decay_fork's idle process polls its
 * RSS), and while the delay is longer a pass comes at least once a plain
 * delay, so a thread that stops allocating gives its memory back within
 * two plain delays.
 * heap_purge_grow and heap_cool keep the plain delay (peaks are theirs).
 * Under h->lock. */
#define HEAP_DECAY_SHIFT_MAX 4u
#define HEAP_DECAY_REGRET_MIN_KIB 1024u
#define HEAP_DECAY_QUIET_KIB 8192u
#define HEAP_DECAY_WINDOW 4u
void heap_decay_adapt(heap_t *h, size_t purged, uint64_t now, bool force);
/* h takes a slab whose pages are not resident (fresh or decommitted), of
 * bytes: counted as taken back if a purge by time gave memory back within
 * HEAP_DECAY_WINDOW of the heap's current delays before. Under h->lock. */
void heap_decay_back(heap_t *h, size_t bytes);
/* self (locked by the caller) is about to map a new superslab: every
 * other heap's free slabs (only if its lock is free; never skip's; those
 * idle for spare_ms or more only, in a heap that kept taking back what
 * such purges cost it; what its own thread's frees emptied only at the
 * plain delay, unless it is own, the growing thread's heap) and self's
 * idle for a quarter of the purge delay are decommitted now. self NULL:
 * the arenas grow (every heap is another). idle_only (self takes a cold
 * slab of a superslab it has): only the heaps the idle collector lends,
 * not self's. The schedule is left alone. Returns the bytes
 * decommitted. */
size_t heap_purge_grow(heap_t *self, const heap_t *own, const heap_t *skip, uint64_t now, uint64_t spare_ms,
                       bool idle_only);
/* Free blocks of h's slabs of classes of SLAB_COOL_MIN or more that were
 * free a purge delay ago too (a pass looks at them at most once a delay),
 * or all of them if force, give their pages past the first
 * back and move to their slab's cold list. So do the runs of free blocks
 * of smaller classes that cover whole pages, in slabs nothing was
 * allocated from for a purge delay (on one of h's lists, or current with
 * the same free list and counts, since a pass that long ago), or in every
 * such slab if force.
 * Returns the bytes decommitted. Owner thread only (free lists are its). */
size_t heap_cool(heap_t *h, bool force);
/* h is about to take fresh pages (a new superslab): the runs of free
 * blocks of small classes in slabs on its lists, with blocks freed since
 * they were last cooled, give their pages back now, except the head of
 * the partial list (HEAP_COOL_GROW_KEEP free bytes) of a class allocated
 * from since the last pass: it takes those next. Owner thread only. */
size_t heap_cool_grow(heap_t *h);
/* Slabs pushed onto a heap's lists since its last heap_cool_grow past
 * which the next growth runs it at once, not a quarter delay after the
 * last: a program that just freed most of a phase's blocks has free pages
 * to give back before its next phase maps fresh ones. */
#define HEAP_COOL_GROW_PUSHES 32u
/* heap_cool runs this many times per purge delay (heap.c schedules it). */
#define HEAP_COOL_STEPS 4u
/* heap_purge_grow takes another heap's free slabs at any age, unless
 * that heap took back at least half of the last slabs such purges cost it
 * (HEAP_GROW_REGRET_MIN of them or more; the counts halve past
 * HEAP_GROW_REGRET_SPAN): then only those idle for 1/HEAP_GROW_SPARE_STEPS
 * of the purge delay (another heap's growth) or the whole delay (the
 * arenas' growth, heap_answer_grow: a program that alternates phases of
 * small and big blocks faulted each phase in again, 0.60x the speed), until
 * fewer than a quarter come back. */
#define HEAP_GROW_SPARE_STEPS 16u
#define HEAP_GROW_REGRET_MIN 8u
#define HEAP_GROW_REGRET_SPAN 256u
/* Waiting slabs of h whose blocks all came back go to their superslab.
 * Returns whether any block came back. Owner thread. */
bool heap_sweep_waiting(heap_t *h);
/* heap_purge_all's walk over every heap but skip (heap.c empties the exit
 * heap itself when it can: see heap_purge_all). */
size_t heap_purge_heaps(uint64_t now, bool force, bool blocking, uint64_t *next_due, const heap_t *skip);

/* ---- heap_prof.c (profiling: h->batch != NULL) ---------------------------- */

/* The batch descriptor sh of a class whose current slab becomes s takes
 * s's geometry (the checked builds' pop tests that a block lies in the
 * area); its capacity, which no pop reads, holds how many spare blocks a
 * refill carves s ahead to. Returns sh. */
slab_t *heap_batch_geometry(slab_t *sh, const slab_t *s);
/* heap.c's parts the batches call back, which heap_prof.c does not name
 * (it calls nothing of heap.c): the refill through the slabs, and the
 * sampled allocation, from the shared profiling heap (NULL: none to be
 * had). Registered by each profiling thread's heap_thread_init. */
typedef void *heap_refill_fn(heap_t *h, unsigned cls, heap_oom_fn oom);
typedef void *heap_sample_fn(unsigned cls);
void heap_batch_register(heap_refill_fn *refill, heap_sample_fn *sample);
/* A profiling thread's refill of class cls, first in line (heap.c's
 * heap_alloc_refill, once its pending remote frees are published): if the
 * class's current slab has free blocks, the batch takes them as
 * heap_batch_take does; otherwise the refill through the slabs, which
 * ends in heap_batch_take. */
void *heap_batch_refill(heap_t *h, unsigned cls, heap_oom_fn oom);
/* The class's batch ran dry and s, its current slab, has free blocks:
 * carve ahead until s has HEAP_BATCH_PAGES (two) pages' worth, tell the sampler the bytes
 * of all of them (prof_batch), move those before the sampled allocation
 * into the batch and pop one. When this very allocation is the sampled
 * one, it comes from the shared profiling heap — or, if none can be had,
 * the batch takes every free block of s, unsampled. */
void *heap_batch_take(heap_t *h, unsigned cls, slab_t *s);
/* Thread exit: the unpopped rest of each batch goes back to its slab. */
void heap_batch_return(heap_t *h);

#endif
