/*
 * heap_xc.c — the blocks of other threads' slabs a thread keeps for its own
 * allocations (heap.h, heap_xcache_t; -DHEAP_XC_ENABLE=0 leaves this file
 * empty).
 *
 * Owns: the per-class lists of kept blocks, their stand-in descriptors and
 * the direct-table entries that point at them (heap_free_foreign, and the
 * serve and flush entries it registers in heap_xc_ops).
 * Promises: only blocks of a heap that lends (heap_t.lend) are kept, unless
 * built with HEAP_XC_ALWAYS; a class keeps at most HEAP_XC_CLASS_BLOCKS
 * blocks or HEAP_XC_CLASS_BYTES; a kept block stays counted in use by its
 * slab until it travels home; an overwritten link is reported and the list
 * cut there. Owner thread only.
 * May call: heap (heap_alloc_refill when the kept blocks run out, the
 * direct table, heap_xc_ops), remote (blocks home), superslab, ownmap,
 * sizeclass, report. heap.c reaches serve and flush only through
 * heap_xc_ops.
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
  h->xm.live |= (uint64_t)1 << c;
  if (h != heap_front.heap) return;
  for (unsigned b = sc_bucket_lo[c]; b <= sc_bucket_hi[c]; b++) heap_front.direct[b] = &h->xc.run[c];
}
static void heap_xc_close(heap_t *h, unsigned c) {
  heap_xcache_t *xc = &h->xc;
  h->xm.live &= ~((uint64_t)1 << c);
  h->xm.has &= ~((uint64_t)1 << c);
  xc->n[c] = 0;
  xc->run[c].used = 0;
  /* No geometry kept: the slab it described may change class or size
   * before the next keep, which targets it afresh. */
  xc->run[c].span = 0;
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
  remote_send_chain(&h->rcache, NULL, b, ~0u); /* the whole list */
  heap_xc_close(h, c);
}

static void *heap_xc_serve(heap_t *h, unsigned cls, heap_oom_fn oom);
static void heap_xc_flush(heap_t *h);
static const heap_xc_ops_t heap_xc_entries = {heap_xc_serve, heap_xc_flush};

/* May the calling thread keep a block of s? Only while s's owner heap
 * lends: its thread is idle, and reuses nothing of what comes home. */
static bool heap_xc_lent(const slab_t *s) {
  if (HEAP_XC_ALWAYS) return true;
  const heap_t *o = ss_heap(ss_of(s));
  return o != NULL && atomic_load_explicit(&o->lend, memory_order_relaxed) != 0;
}

/* b goes on h's list of its class (true), unless the list is full; the
 * caller (heap_free_foreign) has found that the thread allocates the
 * class. In the cold segment with the rest of the file: only threads that
 * free an idle owner's blocks come here. */
static HAK_COLD bool heap_xc_keep(heap_t *h, slab_t *s, block_t *b) {
  heap_xcache_t *xc = &h->xc;
  unsigned c = s->cls;
  slab_t *r = &xc->run[c];
  /* Blocks held: pushes less pops (the pop counts in run[c].used). A
   * full class sends the block home at once: the kept ones wait for the
   * thread's allocations, and nothing is walked. */
  uint32_t held = (uint16_t)(xc->n[c] - r->used);
  if (held >= HEAP_XC_CLASS_BLOCKS || (held + 1) * s->bsize > HEAP_XC_CLASS_BYTES)
    return false;
  if (HAK_UNLIKELY(__atomic_load_n(&heap_xc_ops, __ATOMIC_RELAXED) == NULL))
    __atomic_store_n(&heap_xc_ops, &heap_xc_entries, __ATOMIC_RELEASE);
  blk_free(b, r->free);
  r->free = b;
  if (HAK_UNLIKELY(!slab_holds(r, b))) heap_xc_target(h, c, s);
  xc->n[c]++;
  h->xm.has |= (uint64_t)1 << c;
  return true;
}

/* Hot (src/layout.ld), in a cold file: every remote free that joins no
 * batch comes here; the rest of the file only where owners idle. Not
 * inlined: the hot code fills one fault-around window (test_footprint). */
HAK_TEXT_HOT void heap_free_foreign(heap_t *h, slab_t *s, block_t *b) {
  /* The default build's one double-free check (README.md, "What each
   * build catches") for a block of another thread's slab, which kept
   * blocks make common (heap_freed_last). The checked builds caught it by
   * its mark before (free_other). */
  if (h != NULL && HAK_UNLIKELY(heap_freed_last(h, s, b))) {
    report_error("free", b, "double free of");
    return;
  }
  /* The owner's flag is read only for a class the thread allocates (its
   * own heap's mask first: a consumer that only frees reads no more). */
  if (h != NULL && s->cls < HEAP_XC_MASK_CLASSES && ((h->xm.want >> s->cls) & 1) && heap_xc_lent(s) &&
      heap_xc_keep(h, s, b))
    return;
  remote_send_slow(h != NULL ? &h->rcache : NULL, s, b);
}

/* Class cls is live in h's cache: a kept block, or (the list ran out)
 * the direct table goes back to the current slab and the usual refill
 * serves. */
static void *heap_xc_alloc(heap_t *h, unsigned cls, heap_oom_fn oom) {
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
  /* The list ran out: back to the current slab (the masks are clear now,
   * so this refill is the usual one). */
  heap_xc_close(h, cls);
  return heap_alloc_refill(h, cls, oom, 1);
}

/* The refill of a class whose current slab has no block left while h
 * keeps blocks of it, or serves them already. */
static void *heap_xc_serve(heap_t *h, unsigned cls, heap_oom_fn oom) {
  h->xm.served = true;
  if (!((h->xm.live >> cls) & 1)) heap_xc_open(h, cls);
  return heap_xc_alloc(h, cls, oom);
}

static void heap_xc_flush(heap_t *h) {
  for (uint64_t m = h->xm.live | h->xm.has; m != 0; m &= m - 1) {
    unsigned c = (unsigned)__builtin_ctzll(m);
    if (h->xc.run[c].free != NULL) {
      heap_xc_len(h, c);
      heap_xc_spill(h, c);
    } else {
      heap_xc_close(h, c);
    }
  }
}

#endif /* HEAP_XC_ENABLE */

