/*
 * heap_prof.c — the profiling batches of a heap (HAKMEM_PROF with the fast
 * paths open; heap.h tells the design).
 *
 * Owns: filling a class's batch descriptor (h->batch[cls]) from its
 * current slab as far as the sampler allows (heap_batch_size,
 * heap_batch_fill), carving ahead so that a batch serves many allocations
 * (heap_batch_widen), and the batches' return to their slabs at thread
 * exit (heap_batch_return).
 * Promises: every block a batch hands out was counted to the sampler
 * (prof_batch) before the batch was filled; a batch never holds a block of
 * another slab; the blocks of a batch count as in use by their slab until
 * popped or returned. Owner thread only.
 * May call: prof (prof_batch), superslab (carving), sizeclass; nothing of
 * heap.c: the sampled allocation itself (heap_prof_sample, the shared
 * profiling heap) is heap.c's, which calls this file around it.
 */
#include "heap_impl.h"
#include "heap.h"
#include "internal.h"
#include "prof.h"
#include "sizeclass.h"
#include "superslab.h"

/* Profiling: how much of s's free list (its carved blocks not in use) the
 * class's batch takes. The sampler is told the bytes the batch would
 * serve; if its sample falls inside, the batch stops just before it and
 * the class's next refill takes the sample (0: this allocation is it). */
unsigned heap_batch_size(const slab_t *s) {
  unsigned n = (unsigned)(s->carved - s->used);
  uint64_t at = prof_batch((size_t)n * s->bsize);
  return at == UINT64_MAX ? n : (unsigned)(at / s->bsize);
}

/* Profiling: move the first k blocks of s's free list into the class's
 * batch descriptor and pop from it. k is heap_batch_size's answer; 0
 * means the sampled allocation could not be had (no profiling heap), and
 * this batch goes unsampled: all of s's free blocks. */
void *heap_batch_fill(heap_t *h, unsigned cls, slab_t *s, unsigned k) {
  slab_t *sh = &h->batch[cls];
  unsigned n = (unsigned)(s->carved - s->used);
  if (k == 0) k = n;
  block_t *first = s->free;
  if (k < n) {
    block_t *last = first;
    for (unsigned i = 1; i < k; i++) {
      block_t *nx = blk_next(last);
      if (!slab_holds(s, nx)) { /* overwritten: the next refill reports it */
        k = i;
        break;
      }
      last = nx;
    }
    s->free = blk_next(last);
    blk_set_next(last, NULL);
    h->prof_due |= (uint64_t)1 << cls;
  } else {
    s->free = NULL;
  }
  s->used = (uint16_t)(s->used + k); /* in the batch: in use, as far as s knows */
  sh->area = s->area;
  sh->span = s->span;
  sh->bsize = s->bsize;
  sh->cls = (uint8_t)cls;
  sh->free = first;
  return slab_pop(sh, first);
}

/* Profiling: a batch is every free block of s, and what is freed while
 * the batch is served goes to s's own list, so a batch holds about the
 * slab's spare blocks and one refill served only a page's worth of the
 * large classes (about one refill per 21 mallocs in random mixed). Carve
 * ahead until s has eight pages' worth spare. Profiling only: the pages
 * carved are the ones the batch hands out next. */
void heap_batch_widen(slab_t *s) {
  unsigned have = (unsigned)(s->carved - s->used);
  if (have >= 8u * sc_batch[s->cls] || s->carved >= s->capacity) return;
  block_t *old = s->free, *tail = old;
  s->free = NULL;
  ss_slab_carve(s);
  if (old == NULL) return;
  for (block_t *nx; (nx = blk_next(tail)) != NULL && slab_holds(s, nx);) tail = nx;
  blk_set_next(tail, s->free);
  s->free = old;
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

