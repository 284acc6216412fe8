/*
 * superslab.h — 4 MiB naturally aligned regions carved into slabs, and the
 * slab descriptor.
 *
 * Owns: the superslab header (slab 0 of every superslab), each slab's
 * descriptor, the process-wide cache of empty superslabs and the list of
 * abandoned ones (slabs of exited threads, adoptable by any thread).
 * Promises: for a pointer p inside a superslab, its slab descriptor is
 *   ss_of(p)->slabs[(p - ss) >> slab_shift]
 * (mask and shift, no search); a slab's blocks start slab-aligned; an empty
 * superslab is decommitted before it is cached.
 * May call: os, ownmap, sizeclass, options, decay, remote (collecting
 * abandoned slabs).
 *
 * Slab ownership protocol (the owner field):
 *   heap tid                owned by that heap's thread, not full
 *   heap tid | OWNER_FULL   owned, no free blocks (frees go the slow way)
 *   OWNER_ABANDONED         its thread exited; adoptable
 *   OWNER_UNUSED            not handed out (free slab in its superslab)
 * A heap's tid is its thread's id (HAK_THREAD_ID), or a tag no thread id
 * equals (profiling, exit heap). The owning heap itself is ss->heap.
 * thread_free is a lock-free stack of blocks freed by other threads; its low
 * bit TF_DELAYED says the slab was full when the owner last looked, so a
 * remote free should also tell the owner (see remote.c).
 */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include "annotate.h"
#include "internal.h"
#include "report.h"

struct heap;

typedef struct block {
  struct block *next;
} block_t;

#define OWNER_FULL      ((uintptr_t)1)
#define OWNER_ABANDONED ((uintptr_t)2)
#define OWNER_UNUSED    ((uintptr_t)4)
#define TF_DELAYED      ((uintptr_t)1)

typedef struct slab {
  block_t *free;          /* blocks ready for malloc (owner only) */
  _Atomic uintptr_t owner;    /* see protocol above */
  uint16_t used;              /* blocks handed out or on thread_free */
  uint16_t capacity;          /* blocks in the slab */
  uint16_t carved;            /* blocks carved from fresh memory so far */
  uint8_t cls;                /* size class */
  uint8_t in_partial;         /* on the owner heap's partial list */
  uint32_t bsize;             /* block size */
  uint32_t index;             /* slab index in its superslab */
  _Atomic uintptr_t thread_free; /* remote frees | TF_DELAYED */
  struct slab *next;      /* owner heap's partial list */
  union {
    struct slab *prev;    /* in use: partial list */
    uint64_t freed_ms;        /* free (free_mask bit set): when it became free */
  };
  uint8_t *area;              /* first block */
} slab_t;

_Static_assert(sizeof(slab_t) == 64, "slab descriptor is one cache line");

/* Free-list links. The secure build stores them XOR-ed with a per-process
 * random key and the slot's address (as glibc's safe-linking does with the
 * address), so a use-after-free write cannot forge a pointer. The link lies
 * in a free block: ANN_FREE_READ/WRITE (annotate.h) keep memcheck and ASan
 * quiet about hakmem's own access (plain accesses in the release build). */
#if HAK_SECURE
extern uintptr_t ss_link_key;
HAK_INLINE block_t *blk_next(const block_t *b) {
  return (block_t *)((uintptr_t)ANN_FREE_READ(b->next) ^ ss_link_key ^ ((uintptr_t)b >> 12));
}
HAK_INLINE void blk_set_next(block_t *b, block_t *n) {
  ANN_FREE_WRITE(b->next, (block_t *)((uintptr_t)n ^ ss_link_key ^ ((uintptr_t)b >> 12)));
}
#else
HAK_INLINE block_t *blk_next(const block_t *b) { return ANN_FREE_READ(b->next); }
HAK_INLINE void blk_set_next(block_t *b, block_t *n) { ANN_FREE_WRITE(b->next, n); }
#endif

enum { SS_KIND_SMALL = 0, SS_KIND_MEDIUM = 1, SS_KIND_BIG = 2, SS_KINDS = 3 };
#define SS_MAGIC 0x48414b53u /* "HAKS" */

typedef struct superslab {
  uint32_t magic;
  uint8_t kind;
  uint8_t slab_shift;
  uint8_t nslabs;             /* slabs first_slab..nslabs-1 hold blocks */
  uint8_t listed;             /* on its heap's list */
  struct heap *heap;      /* owner; NULL when abandoned or cached */
  struct superslab *next; /* heap list, abandoned list or cache */
  struct superslab *prev;
  uint64_t free_mask;         /* bit i: slab i not in use */
  uint64_t dirty_mask;        /* free slabs whose pages may be resident */
  uint64_t last_free_ms;      /* when the newest free slab became free */
  uint8_t first_slab;         /* 1, or 0 for a big superslab (one slab) */
  uint8_t abandoned;          /* on the abandoned list */
  uint8_t pad1[6];
  struct superslab *all_next; /* registry of live superslabs (statistics) */
  struct superslab *all_prev;
  uint8_t pad2[128 - 80];
  slab_t slabs[HAK_MAX_SLABS];
} superslab_t;

#define SS_SLABS_OFFSET 128
_Static_assert(__builtin_offsetof(superslab_t, slabs) == SS_SLABS_OFFSET, "layout");

/* The owning heap of a superslab, read by other threads (remote frees). */
HAK_INLINE struct heap *ss_heap(const struct superslab *ss) {
  return __atomic_load_n(&ss->heap, __ATOMIC_ACQUIRE);
}
HAK_INLINE void ss_set_heap(struct superslab *ss, struct heap *h) {
  __atomic_store_n(&ss->heap, h, __ATOMIC_RELEASE);
}

HAK_INLINE superslab_t *ss_of(const void *p) {
  return (superslab_t *)((uintptr_t)p & ~(uintptr_t)HAK_SS_MASK);
}
HAK_INLINE slab_t *ss_slab_of(const void *p, unsigned shift) {
  uintptr_t a = (uintptr_t)p;
  return (slab_t *)((a & ~(uintptr_t)HAK_SS_MASK) + SS_SLABS_OFFSET) +
         ((a & HAK_SS_MASK) >> shift);
}
HAK_INLINE superslab_t *ss_of_slab(const slab_t *s) { return ss_of(s); }
HAK_INLINE uint64_t ss_all_mask(const superslab_t *ss) {
  uint64_t upto = ss->nslabs >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ss->nslabs) - 1);
  return upto & ~(((uint64_t)1 << ss->first_slab) - 1);
}
/* Where slab idx's blocks start: its base, or past the header in slab 0. */
HAK_INLINE size_t ss_area_offset(unsigned idx) { return idx == 0 ? HAK_BIG_AREA_OFFSET : 0; }
/* Bytes of slab idx's block area: what a free slab keeps resident. */
HAK_INLINE size_t ss_slab_room(const superslab_t *ss, unsigned idx) {
  return ((size_t)1 << ss->slab_shift) - ss_area_offset(idx);
}

#if HAK_SECURE
/* Allocation bitmap of each slab (bit set = block handed out), kept in the
 * header slab behind a guard page. Returns false when the block is not a
 * block start or, on free, not allocated (double or invalid free). */
bool ss_secure_mark_alloc(slab_t *s, const void *p);
bool ss_secure_mark_free(slab_t *s, const void *p);
#endif

/* Take b (== s->free) off the slab's free list. */
HAK_INLINE block_t *slab_pop(slab_t *s, block_t *b) {
  s->free = blk_next(b);
  s->used++;
#if HAK_SECURE
  if (HAK_UNLIKELY((s->free != NULL && ss_of(s->free) != ss_of(b)) || !ss_secure_mark_alloc(s, b)))
    report_corruption(b);
#endif
  return b;
}

/* A fresh or cached superslab of the kind, header initialised, all slabs
 * free, registered in the ownership map. NULL when the OS refuses. */
superslab_t *ss_acquire(unsigned kind);
/* Give an empty superslab back: decommit and cache it, or unmap it. */
void ss_release(superslab_t *ss);
/* Abandoned superslabs: pushed by exiting threads, popped by adopters. */
void ss_abandon_push(superslab_t *ss);
superslab_t *ss_abandon_pop(unsigned kind);
/* Collect remote frees into abandoned superslabs, decommit / release what
 * sits idle there for the purge delay (all idle memory if force). Returns
 * when the list should be visited again (UINT64_MAX: nothing idle). */
uint64_t ss_abandon_collect(bool force);
/* A block was freed into an abandoned slab (remote.c). */
void ss_abandon_note_free(void);
void ss_cache_unmap_all(void);
/* Initialise slab idx of ss for class cls, owned by owner. */
slab_t *ss_slab_init(superslab_t *ss, unsigned idx, unsigned cls, uintptr_t owner);
/* Carve the next batch of fresh blocks onto the (empty) free list. */
void ss_slab_carve(slab_t *s);
/* Slab s of ss (in use until now) becomes free, its pages still resident. */
void ss_slab_free(superslab_t *ss, slab_t *s, uint64_t now_ms);
/* Decommit the free slabs idle for at least delay_ms (every dirty one if
 * force); returns the bytes decommitted. *next_due (if not NULL) is lowered
 * to when the next remaining dirty slab becomes due. */
size_t ss_purge_slabs(superslab_t *ss, uint64_t now_ms, uint64_t delay_ms, bool force,
                      uint64_t *next_due);
/* Bytes of free slabs whose pages may be resident. */
size_t ss_dirty_bytes(const superslab_t *ss);

/* Statistics: visit every live superslab (registry lock held; the slab
 * fields read are a racy snapshot, good enough for reporting). */
void ss_for_each(void (*fn)(const superslab_t *ss, void *arg), void *arg);
typedef struct ss_counts {
  size_t live, abandoned, cached;
} ss_counts_t;
ss_counts_t ss_counts(void);

/* fork child, all locks held: superslabs of heaps other than keep belong
 * to threads that do not exist in the child; abandon them so that the
 * child's threads adopt and reuse their memory. */
void ss_fork_child_abandon(const struct heap *keep, const struct heap *keep2);

void ss_lock_all(void);
void ss_unlock_all(void);

#endif
