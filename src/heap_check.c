/*
 * heap_check.c — the invariant checkers of a heap (heap.h): heap_check
 * (a heap's slab lists, its superslabs' free masks and owners, its current
 * and parked slabs) and slab_check (one slab's free list against its counts).
 *
 * Owns: nothing but the checks. Promises: reads only (it takes h->lock to
 * read the page level); a failed condition stops the process through
 * os_assert_fail with the condition's text. The debug build runs them at
 * every slow path (alloc.c); the release build never calls them.
 * May call: heap (heap_empty_slab), superslab, lock, sizeclass, os (the report).
 */
#include "heap.h"
#include "internal.h"
#include "sizeclass.h"
#include "superslab.h"


#define HEAP_CHECK(e) ((e) ? (void)0 : os_assert_fail(#e, __FILE__, __LINE__))

void slab_check(const heap_t *h, const slab_t *s) {
  if (s == &heap_empty_slab) return;
  uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
  HEAP_CHECK((owner & ~OWNER_FULL) == h->tid);
  HEAP_CHECK(s->carved <= s->capacity && s->used <= s->carved);
  HEAP_CHECK(s->span == (uint64_t)s->capacity * s->bsize && s->bsize == sc_size[s->cls]);
  HEAP_CHECK(ss_of(s->area) == ss_of(s) && s->capacity > 0);
  /* Every block on the free list lies in the area and starts a block; the
   * and cold lists hold exactly the carved blocks not in use. */
  unsigned n = 0;
  for (const block_t *b = s->free; b != NULL; b = blk_next(b)) {
    /* A link outside the area was overwritten by the program (a use after
     * free), not broken by hakmem: the pop reports it as such. */
    if (!slab_holds(s, b)) return;
    HEAP_CHECK(n < s->carved);
    HEAP_CHECK(slab_is_block_start(s, b));
    n++;
  }
  /* And the cold list (runs of blocks whose pages went back). */
  for (const block_t *b = s->cold; b != NULL; b = blk_next(b)) {
    if (!slab_holds(s, b)) return;
    uint32_t len = slab_cold_len(b);
    HEAP_CHECK(len >= 1 && n + len <= s->carved && s->bsize >= SLAB_RUN_COOL_MIN);
    HEAP_CHECK(len == 1 || s->bsize < SLAB_COOL_MIN);
    HEAP_CHECK(slab_is_block_start(s, b));
    n += len;
  }
  HEAP_CHECK(n == (unsigned)(s->carved - s->used));
  if (owner & OWNER_FULL) HEAP_CHECK(s->free == NULL && s->cold == NULL && s->carved == s->capacity);
}

void heap_check(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    const slab_t *cur = h->cur[c];
    if (cur != &heap_empty_slab) {
      HEAP_CHECK(cur->cls == c && !cur->on_list);
      slab_check(h, cur);
    }
    for (unsigned l = 0; l < 2; l++) {
      const slab_t *prev = NULL;
      unsigned n = 0;
      const slab_t *head = h->list_head[l][c];
      for (const slab_t *s = head; s != NULL; prev = s, s = s->next) {
        HEAP_CHECK(s->on_list == l + 1 && s->cls == c && s != cur);
        HEAP_CHECK(s == head || s->prev == prev);
        uintptr_t o = atomic_load_explicit(&s->owner, memory_order_relaxed);
        HEAP_CHECK((o & ~OWNER_FULL) == h->tid && !(l == HEAP_WAITING && (o & OWNER_FULL)));
        HEAP_CHECK(++n <= 1u << 20);
      }
      HEAP_CHECK(slab_dlist_tail((slab_t *)head) == prev); /* the head's prev is the tail */
      if (l == HEAP_WAITING) HEAP_CHECK(n == h->waiting_n[c]);
    }
  }
  lock_acquire(&h->lock);
  unsigned parked = 0;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    const slab_t *p = h->parked[c];
    if (p == NULL) continue;
    parked++;
    HEAP_CHECK(p->cls == c && p->used == 0 && !p->on_list && p != h->cur[c]);
    slab_check(h, p);
  }
  HEAP_CHECK(parked == h->parked_n);
  for (unsigned k = 0; k < SS_KINDS; k++) {
    const superslab_t *prev = NULL;
    for (const superslab_t *ss = h->owned_head[k]; ss != NULL; prev = ss, ss = ss->next) {
      HEAP_CHECK(ss_heap(ss) == h && ss->listed && ss->kind == k && ss->prev == prev);
      /* A slab is free in the mask exactly when nobody owns it. */
      for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
        uintptr_t o = atomic_load_explicit(&ss->slabs[i].owner, memory_order_relaxed);
        HEAP_CHECK(((ss->free_mask >> i) & 1) == (o == OWNER_UNUSED));
        if (o != OWNER_UNUSED) HEAP_CHECK((o & ~OWNER_FULL) == h->tid);
      }
    }
    HEAP_CHECK(h->owned_tail[k] == prev);
  }
  lock_release(&h->lock);
}

