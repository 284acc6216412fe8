/*
 * heap_xc.c — the blocks of other threads' slabs a thread keeps for its own
 * allocations (heap.h, heap_xcache_t; compiled in with -DHEAP_XC_ENABLE=1,
 * off by default: this file is then empty).
 *
 * Owns: the per-class lists of kept blocks, their stand-in descriptors and
 * the direct-table entries that point at them (heap_free_foreign,
 * heap_xc_use, heap_xc_alloc, heap_xc_flush).
 * Promises: a class keeps at most HEAP_XC_CLASS_BLOCKS blocks or
 * HEAP_XC_CLASS_BYTES; a kept block stays counted in use by its slab until
 * it travels home; an overwritten link is reported and the list cut there.
 * Owner thread only.
 * May call: heap (heap_alloc_class when the kept blocks run out, the
 * direct table), remote (blocks home), superslab, ownmap, sizeclass,
 * report. heap.c calls heap_xc_flush back: in this build the two call each
 * other (the default build, which the call check reads, has no such call).
 */
#include "heap.h"
#include "internal.h"
#include "ownmap.h"
#include "remote.h"
#include "report.h"
#include "sizeclass.h"
#include "superslab.h"

#if HEAP_XC_ENABLE

/* Is n (a link read from a kept block) a marked block of a superslab? A
 * link overwritten by a use after free is caught here before it is read
 * through or handed out. */
static bool heap_xc_marked(const block_t *n) {
  /* Only the checked builds mark free blocks; the default build does not
   * claim to catch an overwritten link. */
#if HAK_CHECKED
  return slab_block_is_free(NULL, n, false, true);
#else
  (void)n;
  return true;
#endif
}
static bool heap_xc_link_ok(const block_t *n) {
  return ownmap_get(n) >= HAK_SMALL_SLAB_SHIFT && heap_xc_marked(n);
}

/* run[c] takes the geometry of s, the slab of the list's head: the pop's
 * area test then accepts exactly the blocks of s. Only fields fixed while
 * s is in use are read (its kept blocks keep it in use). */
static void heap_xc_target(heap_t *h, unsigned c, const slab_t *s) {
  slab_t *r = &h->xc.run[c];
  r->area = s->area;
  r->span = s->span;
  r->div_mul = s->div_mul;
  r->div_base = s->div_base;
  r->bsize = s->bsize;
  r->capacity = s->capacity;
  r->cls = s->cls;
}

/* The direct table serves class c from run[c] (or again from the current slab). */
static void heap_xc_open(heap_t *h, unsigned c) {
  h->xc.live |= (uint64_t)1 << c;
  if (h != heap_front.heap) return;
  for (unsigned b = sc_bucket_lo[c]; b <= sc_bucket_hi[c]; b++) heap_front.direct[b] = &h->xc.run[c];
}
static void heap_xc_close(heap_t *h, unsigned c) {
  heap_xcache_t *xc = &h->xc;
  xc->live &= ~((uint64_t)1 << c);
  xc->n[c] = 0;
  xc->run[c].used = 0;
  if (h != heap_front.heap) return;
  for (unsigned b = sc_bucket_lo[c]; b <= sc_bucket_hi[c]; b++)
    if (heap_front.direct[b] == &xc->run[c]) heap_front.direct[b] = h->front[c];
}

/* How many blocks class c's list holds (walked; a bad link is reported and
 * the list cut there: the rest stays counted in use by its slabs, leaked,
 * never handed out twice). */
static unsigned heap_xc_len(heap_t *h, unsigned c) {
  block_t *b = h->xc.run[c].free;
  unsigned n = 0;
  while (b != NULL) {
    n++;
    block_t *nx = blk_next(b);
    if (nx != NULL && HAK_UNLIKELY(!heap_xc_link_ok(nx))) {
      report_error("free", b, "heap corruption detected at");
      blk_set_next(b, NULL);
      break;
    }
    b = nx;
  }
  return n;
}

/* Send every block of class c home through the remote cache (batched per
 * slab, one CAS per batch); links already checked by heap_xc_len. */
static void heap_xc_spill(heap_t *h, unsigned c) {
  block_t *b = h->xc.run[c].free;
  h->xc.run[c].free = NULL;
  int r = REMOTE_OK;
  while (b != NULL) {
    block_t *next = blk_next(b);
    r |= remote_free(&h->rcache, ss_slab_of(b, ownmap_get(b)), b);
    b = next;
  }
  if (r == REMOTE_ABANDONED) ss_abandon_note_free();
  heap_xc_close(h, c);
}

void heap_free_foreign(heap_t *h, slab_t *s, block_t *b) {
  if (h != NULL) {
    heap_xcache_t *xc = &h->xc;
    unsigned c = s->cls;
    slab_t *r = &xc->run[c];
    /* Blocks held: pushes less pops (the pop counts in run[c].used). A
     * full class sends the block home at once: the kept ones wait for the
     * thread's allocations, and nothing is walked. */
    uint32_t held = (uint16_t)(xc->n[c] - r->used);
    if (c < HEAP_XC_MASK_CLASSES && ((xc->want >> c) & 1) && held < HEAP_XC_CLASS_BLOCKS && (held + 1) * s->bsize <= HEAP_XC_CLASS_BYTES) {
      blk_free(b, r->free);
      r->free = b;
      if (HAK_UNLIKELY(!slab_holds(r, b))) heap_xc_target(h, c, s);
      xc->n[c]++;
      return;
    }
  }
  if (HAK_UNLIKELY(remote_free(h != NULL ? &h->rcache : NULL, s, b) == REMOTE_ABANDONED))
    ss_abandon_note_free();
}

void *heap_xc_alloc(heap_t *h, unsigned cls) {
  slab_t *r = &h->xc.run[cls];
  block_t *b = r->free;
  if (b != NULL && !slab_holds(r, b)) {
    /* The list crossed into another slab (or, above 1 KiB, the first pop
     * of a run): check the block as free_small checks a freed pointer,
     * then follow it. */
    unsigned v = ownmap_get(b);
    slab_t *s = v >= HAK_SMALL_SLAB_SHIFT ? ss_slab_of(b, v) : NULL;
    if (HAK_LIKELY(s != NULL && s->cls == cls && slab_holds(s, b) && slab_is_block_start(s, b) &&
                   heap_xc_marked(b))) {
      heap_xc_target(h, cls, s);
    } else {
      report_error("malloc", b, "heap corruption detected at");
      r->free = b = NULL; /* the rest stays counted in use: leaked, never handed out twice */
    }
  }
  if (b != NULL) return slab_pop(r, b);
  /* The list ran out: back to the current slab. */
  heap_xc_close(h, cls);
  return heap_alloc_class(h, cls);
}

void *heap_xc_use(heap_t *h, unsigned cls) {
  slab_t *f = h->front[cls];
  if (slab_holds(f, f->free)) return heap_alloc_class(h, cls);
  heap_xc_open(h, cls);
  return heap_xc_alloc(h, cls);
}

void heap_xc_flush(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    if (h->xc.run[c].free != NULL) {
      heap_xc_len(h, c);
      heap_xc_spill(h, c);
    } else if (c < HEAP_XC_MASK_CLASSES && ((h->xc.live >> c) & 1)) {
      heap_xc_close(h, c);
    }
  }
  h->xc.want = 0;
}

#endif /* HEAP_XC_ENABLE */

