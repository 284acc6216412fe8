/*
 * heap_prof.c — the profiling batches of a heap (HAKMEM_PROF with the fast
 * paths open; heap.h tells the design).
 *
 * Owns: filling a class's batch descriptor (h->batch[cls]) from its
 * current slab as far as the sampler allows (heap_batch_refill, the
 * common case, first in line when a batch runs dry; heap_batch_take, the
 * general one), carving ahead so that a batch serves many allocations,
 * and the batches' return to their slabs at thread exit
 * (heap_batch_return).
 * Promises: every block a batch hands out was counted to the sampler
 * (prof_batch) before the batch was filled; a batch never holds a block of
 * another slab; the blocks of a batch count as in use by their slab until
 * popped or returned. Owner thread only.
 * May call: prof (prof_batch), superslab (carving), sizeclass; nothing of
 * heap.c: the sampled allocation itself (heap_prof_sample, the shared
 * profiling heap) and the slabs' refill are heap.c's, which registers
 * them (heap_batch_register).
 */
#include "heap_impl.h"
#include "heap.h"
#include "internal.h"
#include "prof.h"
#include "sizeclass.h"
#include "superslab.h"

/* Take k of s's n free blocks (1 <= k < n) off its list, as a list of
 * their own; returns its head. Which k does not matter to the sampler
 * (they are alike: it counts bytes, and the batch hands out exactly k
 * blocks before the sample), so the walk goes over the shorter part: the
 * first k blocks go, or the first n - k stay and the last k go. A link
 * that leaves the block area (overwritten) ends the walk: the blocks
 * before it go (fewer than k; *k says how many) and the bad link stays at
 * the head of s's list, for the next refill to report. */
static block_t *heap_batch_cut(slab_t *s, unsigned *k, unsigned n) {
  block_t *first = s->free, *last = first, *nx;
  unsigned walk = *k <= n - *k ? *k : n - *k, i = 1;
  for (;; i++, last = nx) {
    nx = blk_next(last);
    if (i == walk || !slab_holds(s, nx)) break;
  }
  blk_set_next(last, NULL);
  if (i == *k || !slab_holds(s, nx)) { /* the first i go */
    *k = i;
    s->free = nx;
    return first;
  }
  return nx; /* the first n - k stay */
}

/* Hand the class's batch descriptor sh the k blocks of list b and pop
 * one (slab_pop but for the descriptor's use count, which means nothing).
 * The blocks count as in use in s, their slab, until popped and freed,
 * or returned at thread exit. */
HAK_INLINE void *heap_batch_hand(slab_t *sh, slab_t *s, block_t *b, unsigned k) {
  s->used = (uint16_t)(s->used + k);
  sh->free = blk_next(b);
  blk_unmark(b);
  return b;
}

/* Pages' worth of spare blocks a batch refill carves ahead to: two. Eight
 * saved 0.4 % of random mixed's instructions while profiling but touched
 * pages no allocation needed yet in every class (peak RSS 2.7 MB against
 * 2.3, 1.9 without the profiler). */
#define HEAP_BATCH_PAGES 2u
slab_t *heap_batch_geometry(slab_t *sh, const slab_t *s) {
  sh->area = s->area;
  sh->span = s->span;
  sh->bsize = s->bsize;
  sh->cls = s->cls;
  /* HEAP_BATCH_PAGES pages' worth (heap_batch_widen tells why). */
  sh->capacity = (uint16_t)(HEAP_BATCH_PAGES * sc_batch[s->cls]);
  return sh;
}

/* Profiling: a batch is every free block of s, and what is freed while
 * the batch is served goes to s's own list, so a batch holds about the
 * slab's spare blocks and one refill served only a page's worth of the
 * large classes (about one refill per 21 mallocs in random mixed). Carve
 * ahead until s has HEAP_BATCH_PAGES pages' worth spare (the batch descriptor's
 * capacity: heap_batch_geometry). Profiling only: the pages
 * carved are the ones the batch hands out next. One list is appended to
 * the other: the shorter is walked. Returns s's free blocks. */
static unsigned heap_batch_widen(slab_t *s, unsigned have) {
  block_t *old = s->free;
  unsigned fresh = (unsigned)(s->capacity - s->carved);
  if (fresh > sc_batch[s->cls]) fresh = sc_batch[s->cls];
  s->free = NULL;
  ss_slab_carve(s, false); /* two pages ahead, no more (HEAP_BATCH_PAGES) */
  if (old != NULL) {
    block_t *head = have <= fresh ? old : s->free, *tail = head;
    for (block_t *nx; (nx = blk_next(tail)) != NULL && slab_holds(s, nx);) tail = nx;
    blk_set_next(tail, head == old ? s->free : old);
    s->free = head;
  }
  return (unsigned)(s->carved - s->used);
}

/* Does s, with n free blocks, need no carving ahead (sh: its class's
 * batch descriptor)? */
HAK_INLINE bool heap_batch_carved(const slab_t *sh, const slab_t *s, unsigned n) {
  return n >= sh->capacity || s->carved >= s->capacity;
}

/* Every profiling thread registers the same two functions: relaxed
 * atomics, so that those stores and the reads race harmlessly. */
static heap_refill_fn *heap_batch_refill_cb;
static heap_sample_fn *heap_batch_sample_cb;

void heap_batch_register(heap_refill_fn *refill, heap_sample_fn *sample) {
  __atomic_store_n(&heap_batch_refill_cb, refill, __ATOMIC_RELAXED);
  __atomic_store_n(&heap_batch_sample_cb, sample, __ATOMIC_RELAXED);
}

void *heap_batch_take(heap_t *h, unsigned cls, slab_t *s) {
  slab_t *sh = &h->batch[cls];
  unsigned n = (unsigned)(s->carved - s->used);
  if (!heap_batch_carved(sh, s, n)) n = heap_batch_widen(s, n);
  /* The sampler is told the bytes the batch would serve; if its sample
   * falls inside, the batch stops just before it, and the next refill of
   * any class (the sampler's countdown is spent: prof_batch answers 0
   * there) takes the sample. */
  uint64_t at = prof_batch((size_t)n * s->bsize);
  unsigned k = n;
  block_t *b = s->free;
  if (at != UINT64_MAX) {
    k = (unsigned)(at / s->bsize);
    if (k == 0) { /* this allocation is the sampled one */
      void *p = __atomic_load_n(&heap_batch_sample_cb, __ATOMIC_RELAXED)(cls);
      if (p != NULL) return p;
      k = n; /* it could not be had: the batch goes unsampled */
    }
    if (k < n) b = heap_batch_cut(s, &k, n);
  }
  if (k == n) s->free = NULL;
  return heap_batch_hand(sh, s, b, k);
}

void *heap_batch_refill(heap_t *h, unsigned cls, heap_oom_fn oom) {
  slab_t *s = h->cur[cls], *sh = &h->batch[cls];
  block_t *b = s->free;
  /* The batch's pop found it empty (the checked builds also refuse a head
   * outside its block area: heap.c's refill reports that) and s has free
   * blocks: a class with neither goes the slabs' way. */
  if (HAK_UNLIKELY((HAK_CHECKED && sh->free != NULL) || !slab_holds(s, b)))
    return __atomic_load_n(&heap_batch_refill_cb, __ATOMIC_RELAXED)(h, cls, oom);
  unsigned n = (unsigned)(s->carved - s->used);
  /* The common case, without a call (so without a frame): s has its spare
   * blocks carved, and the sampler's countdown outlasts them all. */
  if (HAK_LIKELY(heap_batch_carved(sh, s, n) && prof_batch_fits((size_t)n * s->bsize))) {
    s->free = NULL;
    return heap_batch_hand(sh, s, b, n);
  }
  return heap_batch_take(h, cls, s);
}

/* Profiling, thread exit: the unpopped rest of each batch goes back to its
 * slab's list. */
void heap_batch_return(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    slab_t *sh = &h->batch[c], *s = h->cur[c];
    block_t *b = sh->free;
    sh->free = NULL;
    /* A class with no current slab has heap_empty_slab there, whose empty
     * block area holds no block: slab_holds says no. */
    if (b == NULL || !slab_holds(s, b)) continue;
    unsigned n = 1;
    block_t *last = b;
    for (block_t *nx; (nx = blk_next(last)) != NULL && slab_holds(s, nx) && n < s->capacity; last = nx) n++;
    blk_set_next(last, s->free);
    s->free = b;
    s->used = (uint16_t)(s->used - n);
  }
}

