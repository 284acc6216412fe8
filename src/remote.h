/*
 * remote.h — frees that cross threads.
 *
 * Owns: the lock-free per-slab thread_free stacks and the per-heap delayed
 * list, and the full/not-full hand-shake between a slab's owner and remote
 * freers (see superslab.h for the owner field).
 * Promises: a block freed by a thread that does not own its slab is never
 * lost: it lands on the slab's thread_free (collected by the owner's slow
 * path, or by whoever adopts the slab) or, when the slab was full, on the
 * owner heap's delayed list so that the owner notices it. Pushes are one CAS.
 * May call: atomics; superslab (a free into an abandoned slab is noted).
 */
#ifndef HAK_REMOTE_H
#define HAK_REMOTE_H

#include "heap.h"

/* Any thread that does not own s. */
void remote_free(slab_t *s, block_t *b);
/* Owner: move s's thread_free blocks onto s->free; returns how many. */
unsigned remote_collect(slab_t *s);
/* Owner, s exhausted: mark it full. False if remote frees arrived first
 * (collect them instead). */
bool remote_mark_full(slab_t *s, heap_t *h);
/* Owner or adopter: drop the full mark, keeping any pushed blocks. */
void remote_clear_mark(slab_t *s);
/* Owner: s (full) got a block back. */
void remote_unmark_full(slab_t *s, heap_t *h);
/* Owner: take the delayed list; close it for good when the thread exits. */
block_t *remote_delayed_take(heap_t *h, bool close);

#endif
