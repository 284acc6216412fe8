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
 * superslab is decommitted before it is cached. In the checked builds
 * (HAK_CHECKED: secure, debug) a free block carries the free mark and an
 * encoded link (below), and every pop checks that the list head lies in
 * the slab's block area; in the default build a free block's link is a
 * plain pointer, it has no mark, and a pop tests the head for NULL.
 * Also owns the owner's side of the thread_free hand-shake: collecting a
 * slab's remote frees (ss_slab_collect) and dropping its full mark
 * (ss_slab_clear_mark); remote.c publishes, the owner collects.
 * May call: lock, os, ownmap, sizeclass, options, decay, report (a corrupted
 * thread_free list), large (a superslab may lie on a wholly free, mostly
 * resident region of the arenas, which it gives back decommitted); annotate.h's macros and remote.h's inline
 * remote_has_frees.
 *
 * Slab ownership protocol (the owner field):
 *   heap tid                owned by that heap's thread, not full
 *   heap tid | OWNER_FULL   owned, no free blocks (frees go the slow way)
 *   OWNER_ABANDONED         its thread exited; adoptable
 *   OWNER_UNUSED            not handed out (free slab in its superslab)
 * A heap's tid is its thread's id (HAK_THREAD_ID), or a tag no thread id
 * equals (profiling, exit heap). The owning heap itself is ss->heap.
 * thread_free is a lock-free stack of blocks freed by other threads, with
 * their count in its top 16 bits; its low bit TF_DELAYED says the slab was
 * marked full, so a remote free should also tell the owner (see remote.c).
 */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include "annotate.h"
#include "internal.h"
#include "dlist.h"
#include "report.h"
#include "sizeclass.h"

struct heap;

/* A free block: the link to the next free block (encoded in the checked
 * builds), then (checked builds only) the mark that says "this block is
 * free" (blocks are at least 16 bytes). */
typedef struct block {
  uintptr_t next_enc;
  uintptr_t mark;
} block_t;

#define OWNER_FULL      ((uintptr_t)1)
#define OWNER_ABANDONED ((uintptr_t)2)
#define OWNER_UNUSED    ((uintptr_t)0) /* a fresh superslab's zero descriptors read as free */

/* thread_free: the pointer to the newest remotely freed block, TF_DELAYED
 * in bit 0, and in bits 48..63 how many blocks the list holds, so that the
 * owner collects a whole list with one exchange and never walks it (the
 * blocks were just written by another core: every step would miss). */
#define TF_DELAYED      ((uintptr_t)1)
#define TF_COUNT_SHIFT  48
#define TF_PTR_MASK     ((((uintptr_t)1 << TF_COUNT_SHIFT) - 1) & ~TF_DELAYED)

/* Two cache lines, split by who writes them: the first is the owner's
 * (the list malloc pops and free pushes, the counts, the list links); the
 * second holds what every free reads (the owner word, the geometry), which
 * changes only when the slab changes hands or is marked full, so a free
 * from another thread reads a line that stays shared between the cores.
 * What other threads write, the remote frees' list (thread_free), is on a
 * third line of its own in the superslab's header (slab_tf). */
typedef struct slab {
  /* First line: the owner's, written by every malloc and local free. */
  block_t *free;              /* malloc pops here (owner only); a free
                                 slab's, kept while it stays dirty, is
                                 read only by heap_take_slab */
  uint16_t used;              /* blocks not on `free` (handed out, or freed remotely) */
  uint16_t carved;            /* blocks carved from fresh memory so far */
  uint8_t on_list;            /* which of its heap's slab lists holds it: 0 none, else HEAP_PARTIAL/HEAP_WAITING + 1 */
  uint8_t clean;              /* its pages were zero when it was taken (fresh or
                                 decommitted): the blocks past `carved` still are */
  uint16_t pop_pages;         /* SS_POP_HOT: the carve populates ahead
                                 (ss_slab_carve), and the pages of the area
                                 (from the page holding `area`) it did */
  uint32_t wait_tick;         /* waiting (heap.h, HEAP_WAITING): its heap's refill
                                 count when it was put to wait */
  uint32_t pad0;
  struct slab *next;          /* owner heap's slab list (slab_dlist) */
  union {
    struct slab *prev;        /* in use: slab list */
    uint64_t freed_ms;        /* free (free_mask bit set): when it became free;
                                 parked (heap.h, parked[]): when it was parked */
  };
  /* Free blocks whose pages went back while the slab stays in use, as
   * runs of consecutive blocks: a run's first block holds the link (like
   * `free`) and, in its third word, how many blocks the run has; its pages
   * past the run's first word are decommitted. Blocks of SLAB_COOL_MIN or
   * more go one by one (runs of one); smaller ones as the runs of whole
   * free pages of a slab nothing was allocated from for a purge delay
   * (heap_cool). Owner only; a refill takes them once `free` and the
   * remote frees run out, before carving, a carve batch at a time
   * (ss_slab_uncool). */
  block_t *cold;
  /* The heap's pass over idle slabs (heap_cool): when (ms, low 32 bits,
   * | 1) a pass first saw this slab idle (on a list of its heap, or
   * current with the same cool_sig; 0: not since it was pushed there),
   * and its `used` when a pass last cooled it. */
  uint32_t cool_mark;
  uint16_t cool_used;
  /* Pages from the one holding `area` that are resident for sure: while
   * the slab is free and dirty, those its blocks were linked over before
   * it was freed; in use, that count as it was taken (0 if it was clean).
   * A carve takes every block up to there at once (ss_slab_carve). */
  uint16_t warm_pages;
  /* The heap's refill count when this slab was last taken back from
   * parking (heap_park): it parks again only after another refill. */
  uint32_t park_tick;
  uint32_t cool_sig;          /* the current slab's free head and counts at cool_mark */
  /* Second line: what a free from another thread reads (the owner word and
   * the geometry), written only when the slab changes hands or is marked
   * full. On the first line it shared a cache line with `free` and `used`,
   * so every remote free missed on a line the owner's mallocs had just
   * written. */
  _Atomic uintptr_t owner;    /* see protocol above */
  uint8_t *area;              /* first block */
  uint64_t div_mul;           /* ceil(2^64 / bsize): block-start check */
  uint64_t div_base;          /* area * div_mul (mod 2^64) */
  uint64_t span;              /* capacity * bsize: the block area's bytes */
  uint16_t capacity;          /* blocks in the slab */
  uint8_t cls;                /* size class */
  uint8_t gaps;               /* since it was taken, a page of its carved
                                 blocks may have left memory (a block went
                                 cold) or never been touched (calloc took
                                 blocks of a clean slab unlinked) */
  uint32_t bsize;             /* block size */
  uint32_t index;             /* slab index in its superslab */
  /* The collector of an idle heap's delayed list (heap_collect_idle),
   * under the heap's lock: which pass last counted this full slab's
   * blocks on the list, how many, and whether it released the slab. */
  uint32_t collect_stamp;
  uint16_t collect_n;
  uint8_t collect_done;
  uint8_t pad3;
  uint32_t warm_kid;          /* free: the kernel id of the thread whose own
                                 frees emptied it (0: none, or released
                                 otherwise; heap_slab_emptied, heap_take_slab) */
} slab_t;

#define SS_POP_HOT 0x8000u
_Static_assert(sizeof(slab_t) == 128, "slab descriptor is two cache lines");
_Static_assert(__builtin_offsetof(slab_t, owner) == 64, "a remote free reads the second line only");
/* A heap's list of slabs of one class (heap.h), through next/prev, kept by
 * its head alone. */
DLIST_DEFINE_HEAD(slab_dlist, slab_t, prev, next)

/* The per-process secret (set once at start-up, never 0; the secure
 * build's carving order uses it too). In the checked builds a free block's
 * mark is the secret XOR its address, and its link is the next block's
 * address XOR that mark: a live block's data matches neither except by a
 * chance of 2^-64, a use-after-free write into a free block turns its link
 * into a pointer the pop rejects (it must land in the slab's block area),
 * and a mark copied to another address is wrong there. The default build
 * stores the plain link and no mark: the XORs, the mark's store on free,
 * its test and its clearing on malloc cost about a quarter of the hit
 * paths' instructions (issue 20). Every helper below holds both builds'
 * forms, so that the paths that call them are written once. */
extern uintptr_t ss_secret __attribute__((visibility("hidden")));
#if HAK_CHECKED
HAK_INLINE uintptr_t blk_mark(const void *b) { return ss_secret ^ (uintptr_t)b; }
#define BLK_KEY(b) blk_mark(b)
#else
#define BLK_KEY(b) ((void)(b), (uintptr_t)0)
#endif
/* The words of a free block are hakmem's: ANN_FREE_READ/WRITE (annotate.h)
 * keep memcheck and ASan quiet about those accesses in the annotated
 * builds, and are plain accesses otherwise. */
HAK_INLINE block_t *blk_next(const block_t *b) { return (block_t *)(ANN_FREE_READ(b->next_enc) ^ BLK_KEY(b)); }
HAK_INLINE void blk_set_next(block_t *b, block_t *n) { ANN_FREE_WRITE(b->next_enc, (uintptr_t)n ^ BLK_KEY(b)); }
/* b goes on a free list: linked to next (and marked free). */
HAK_INLINE void blk_free(block_t *b, block_t *next) {
#if HAK_CHECKED
  uintptr_t m = blk_mark(b);
  ANN_FREE_WRITE(b->next_enc, (uintptr_t)next ^ m);
  ANN_FREE_WRITE(b->mark, m);
#else
  ANN_FREE_WRITE(b->next_enc, (uintptr_t)next);
#endif
}
/* b leaves its free list (handed out): its mark goes, so that freeing it
 * again is seen for what it is. */
HAK_INLINE void blk_unmark(block_t *b) {
#if HAK_CHECKED
  ANN_FREE_WRITE(b->mark, 0);
#else
  (void)b;
#endif
}

/* Is b, a block start of s, free already (a double free, or realloc /
 * malloc_usable_size of a freed block)? The checked builds read b's mark:
 * any free block, in any list. The default build sees only a block at the
 * head of the free list of a slab the caller owns (local: one compare with
 * the head the free path loads anyway; another thread's list is not read).
 * freeing: b is being freed, so the annotated builds' tools already see it
 * as free; otherwise the program still holds it, and under memcheck or
 * ASan the tool itself reports a use of a freed block (reading the
 * program's word would look like an uninitialised read). */
HAK_INLINE bool slab_block_is_free(const slab_t *s, const block_t *b, bool local, bool freeing) {
#if HAK_CHECKED
  (void)s;
  (void)local;
  if (freeing) return ANN_FREE_READ(b->mark) == blk_mark(b);
#if HAK_ANNOTATE
  return false;
#else
  return b->mark == blk_mark(b);
#endif
#else
  (void)freeing;
  return local && b == s->free;
#endif
}

/* Does p lie in s's block area? */
HAK_INLINE bool slab_holds(const slab_t *s, const void *p) {
  return (uintptr_t)p - (uintptr_t)s->area < s->span;
}
/* May b, s's list head, be popped (the one test of malloc's hit path)? The
 * checked builds test that it lies in the block area: both the "not empty"
 * test (NULL lies outside) and the check of the decoded link, so a link a
 * use after free overwrote is reported by the refill (heap.c) instead of
 * being followed. The default build tests for NULL: two instructions
 * fewer, and a garbage link is followed (not detected). */
HAK_INLINE bool slab_can_pop(const slab_t *s, const block_t *b) {
#if HAK_CHECKED
  return slab_holds(s, b);
#else
  (void)s;
  return b != NULL;
#endif
}
/* Is p the start of a block of s (and not below its area)? No division:
 * for n = p - area below 2^32, n * ceil(2^64/bsize) mod 2^64 is a small
 * number (below n) when bsize divides n and at least 2^44 when it does
 * not (the divisibility test of Lemire, Kaser and Kurz, "Faster remainder
 * by direct computation", 2019). */
HAK_INLINE bool slab_is_block_start(const slab_t *s, const void *p) {
  return (((uintptr_t)p * s->div_mul - s->div_base) >> 32) == 0;
}
/* Does p lie below s's carve point? A block past it was never handed out
 * in the slab's present life, and its memory (zero after a decommit, or
 * what an earlier class left there) carries no free mark: a double free of
 * a block whose slab had been emptied, decommitted and taken again passed
 * the checked builds' mark test, and the block went onto the list ahead of
 * its carve, to be handed out twice (fuzz_ops_secure, one CI run). The
 * owner's free paths and the slow paths test it; a remote free does not:
 * carved sits on the line every malloc and local free of the owner
 * writes, and reading it from the freeing thread took the secure build's
 * prodcons to 0.14 of the default's speed. Another thread reads it
 * relaxed (the block it frees was handed out, so carved covered it by
 * then). Checked builds only. */
HAK_INLINE bool slab_carved_holds(const slab_t *s, const void *p) {
  return (uintptr_t)p - (uintptr_t)s->area < (uintptr_t)__atomic_load_n(&s->carved, __ATOMIC_RELAXED) * s->bsize;
}
/* The block-start test of the free hit path: the checked builds' multiply.
 * The default build trusts a pointer into its own slab there (a pointer
 * inside a live block is not caught by free; the slow paths, realloc and
 * malloc_usable_size still test it). */
HAK_INLINE bool slab_hit_is_block_start(const slab_t *s, const void *p) {
#if HAK_CHECKED
  return slab_is_block_start(s, p) && slab_carved_holds(s, p);
#else
  (void)s;
  (void)p;
  return true;
#endif
}

/* Block size from which free blocks idle for a quarter of the purge delay
 * give their pages back while the slab stays in use (slab_t.cold): four pages and
 * more, where a block's pages past its first are worth a system call. */
#define SLAB_COOL_MIN ((uint32_t)16384)
/* Smaller blocks give back the whole free pages of slabs idle on the
 * partial list, from this size (a cold run's count needs a third word).
 * Not in the checked builds: a block whose page went back loses its free
 * mark, and with it the double-free test of the secure build. */
#define SLAB_RUN_COOL_MIN ((uint32_t)(HAK_CHECKED ? SLAB_COOL_MIN : 32))

/* A cold run: its first block b, its length in b's third word. */
HAK_INLINE uint32_t slab_cold_len(const block_t *b) { return (uint32_t)ANN_FREE_READ(((const uintptr_t *)b)[2]); }
HAK_INLINE void slab_cold_push(slab_t *s, block_t *b, uint32_t n) {
  ANN_FREE_WRITE(((uintptr_t *)b)[2], (uintptr_t)n);
  blk_set_next(b, s->cold);
  s->cold = b;
  __atomic_store_n(&s->gaps, 1, __ATOMIC_RELAXED); /* also the idle-heap collector's */
}

/* A superslab's kind: the slab size a class asks for (sc_kind). */
enum {
  SS_KIND_SMALL = SC_KIND_SMALL,
  SS_KIND_MEDIUM = SC_KIND_MEDIUM,
  SS_KIND_WIDE = SC_KIND_WIDE,
  SS_KIND_BIG = SC_KIND_BIG,
  SS_KINDS = 4
};
typedef struct superslab {
  uint32_t pad0;
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
  uint8_t pad1[2];
  uint32_t abandon_seq;       /* its kind's adoptions when it was abandoned */
  struct superslab *all_next; /* registry of live superslabs (statistics) */
  struct superslab *all_prev;
  /* Free slabs another heap's growth decommitted (heap_purge_grow), so
   * that their owner's taking one back counts as that purge's cost; under
   * the owner heap's lock, cleared when the superslab changes hands. */
  uint64_t grow_mask;
  /* The arena that lent this region (large_lend_region), NULL for a
   * superslab of its own mapping: its return goes straight to that
   * arena's group, since an arena is aligned to 4 MiB, not to its size. */
  struct large_arena *lender;
  uint8_t pad2[128 - 96];
  /* Each slab's thread_free (remote frees | TF_DELAYED | count << 48), two
   * slabs to a cache line and none beside what the owner writes on every
   * call: a publisher writes it once per batch, the owner reads it only
   * when it refills. In the slab's first line, beside the list the owner
   * pops and pushes, each publish took that line from the owner (A/B on
   * 31 rows: remote_100_b1 +22 %, xmalloc_1p2c +8 %, geomean +4 %).
   * Before the descriptors, so that a superslab of few slabs touches no
   * more header pages than before. */
  struct {
    _Alignas(32) _Atomic uintptr_t v;
  } tfree[HAK_MAX_SLABS];
  slab_t slabs[HAK_MAX_SLABS];
} superslab_t;

#define SS_SLABS_OFFSET (128 + 32 * HAK_MAX_SLABS)
_Static_assert(__builtin_offsetof(superslab_t, slabs) == SS_SLABS_OFFSET, "layout");
/* A heap's superslabs of one kind (heap.h), through next/prev; the
 * registry of live superslabs (superslab.c) links all_next/all_prev. */
DLIST_DEFINE(ss_dlist, superslab_t, prev, next)
DLIST_DEFINE(ss_registry_dlist, superslab_t, all_prev, all_next)

/* The owning heap of a superslab, read by other threads (remote frees). */
HAK_INLINE struct heap *ss_heap(const struct superslab *ss) {
  return __atomic_load_n(&ss->heap, __ATOMIC_ACQUIRE);
}
HAK_INLINE void ss_set_heap(struct superslab *ss, struct heap *h) {
  ss->grow_mask = 0;
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
/* s's remote-free list (superslab_t.tfree): s's index from its address. */
HAK_INLINE _Atomic uintptr_t *slab_tf(const slab_t *s) {
  superslab_t *ss = ss_of(s);
  return &ss->tfree[s - ss->slabs].v;
}
HAK_INLINE uint64_t ss_all_mask(const superslab_t *ss) {
  uint64_t upto = ss->nslabs >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ss->nslabs) - 1);
  return upto & ~(((uint64_t)1 << ss->first_slab) - 1);
}
/* Visit every slab of ss in use (not free): `SS_FOR_EACH_USED(ss, s) {...}`.
 * The one walk over a superslab's slabs (adoption, abandonment, reclaim,
 * fork, statistics). */
#define SS_FOR_EACH_USED(ss, s)                                                           \
  for (uint64_t ss_m_ = ss_all_mask(ss) & ~(ss)->free_mask; ss_m_ != 0; ss_m_ &= ss_m_ - 1) \
    if (((s) = &(ss)->slabs[__builtin_ctzll(ss_m_)]), 1)

/* Where slab idx's blocks start: its base, or past the header in slab 0. */
HAK_INLINE size_t ss_area_offset(unsigned idx) { return idx == 0 ? HAK_BIG_AREA_OFFSET : 0; }
/* Bytes of slab idx's block area: what a free slab keeps resident. */
HAK_INLINE size_t ss_slab_room(const superslab_t *ss, unsigned idx) {
  return ((size_t)1 << ss->slab_shift) - ss_area_offset(idx);
}

/* Take b (== s->free, inside the block area) off the slab's free list. */
/* The owner's fast free takes one from s->used after it wrote s->free,
 * and the count is then a release (the idle heaps' collector, which takes
 * a listed slab once none of its blocks is live, reads it with acquire:
 * a slab it takes has no free on its way in; heap_collect_lists). On
 * x86 every store is a release already, so a compiler barrier keeps the
 * one-instruction decrement in memory (an atomic store took random mixed
 * from 111.7 to 114.7 M instructions: load, subtract, store and test);
 * elsewhere, and under ThreadSanitizer, the atomic store (HAK_TSO,
 * internal.h). Returns the new count. */
HAK_INLINE uint16_t slab_used_dec_release(slab_t *s) {
#if HAK_TSO
  atomic_signal_fence(memory_order_release);
  return --s->used;
#else
  uint16_t used = (uint16_t)(s->used - 1);
  __atomic_store_n(&s->used, used, __ATOMIC_RELEASE);
  return used;
#endif
}

HAK_INLINE block_t *slab_pop(slab_t *s, block_t *b) {
  block_t *n = blk_next(b);
  s->free = n;
  /* The next pop reads n's first word: fetch it now, so a run of
   * allocations overlaps its cache misses instead of taking them one
   * after another. Blocks freed by another thread come back linked by that
   * thread, on lines in its core's cache: without this, the load of the
   * link was 86 % of malloc's samples in bench_remote_mix (every free
   * remote, one block per hand-over), which runs 1.7x as fast with it. It
   * costs one instruction on every malloc (the default build's 14 -> 15;
   * a prefetch of NULL at the end of a list is dropped). */
  __builtin_prefetch(n, 1);
  blk_unmark(b);
  s->used++;
  return b;
}

/* A fresh or cached superslab of the kind, header initialised, all slabs
 * free, registered in the ownership map. NULL when the OS refuses. */
superslab_t *ss_acquire(unsigned kind);
/* A superslab of the kind on a wholly free region of the arenas' spans, at
 * least half of it resident (large_lend_region), or NULL: every free slab
 * dirty (not zero) and free since now. */
superslab_t *ss_borrow(unsigned kind);
/* Give an empty superslab back: decommit and cache it, unmap it, or (a
 * borrowed one) give it back to its arena. */
void ss_release(superslab_t *ss);
/* A wholly free superslab whose pages are partly resident, given the
 * geometry of another kind, so that a class of that kind takes its
 * resident pages instead of fresh ones beside them (a program that frees
 * its small blocks and then fills blocks of 40 KiB and more, which no
 * small slab holds two of, or the other way round). ss_rekind_gain: the
 * warm bytes it would keep, 0 if it is not wholly free, is of that kind
 * already, or most of its warm bytes lie under the new first slab's blocks
 * (which ss_rekind decommits). ss_rekind: for ss's heap, under its lock,
 * with ss off its lists. */
size_t ss_rekind_gain(const superslab_t *ss, unsigned kind);
void ss_rekind(superslab_t *ss, unsigned kind);
/* Abandoned superslabs: pushed by exiting threads, popped by adopters. */
void ss_abandon_push(superslab_t *ss);
superslab_t *ss_abandon_pop(unsigned kind);
/* Whether superslabs of the kind wait to be adopted (a hint: no lock). */
bool ss_abandon_waiting(unsigned kind);
/* Take ss itself off its abandoned list, for a thread that frees into it
 * (heap_adopt_on_free); false if it is no longer there (adopted, or
 * released, meanwhile). */
bool ss_abandon_take(superslab_t *ss);
/* Collect remote frees into abandoned superslabs, decommit / release what
 * sits idle there for the purge delay (all idle memory if force). Returns
 * when the list should be visited again (UINT64_MAX: nothing idle). */
uint64_t ss_abandon_collect(bool force);
/* A block was freed into an abandoned slab (remote.c). */
void ss_abandon_note_free(void);
void ss_cache_unmap_all(void);
/* Initialise slab idx of ss for class cls, owned by owner. */
slab_t *ss_slab_init(superslab_t *ss, unsigned idx, unsigned cls, uintptr_t owner);
/* Carve the next batch of fresh blocks onto the (empty) free list: a
 * page's worth, or if warm every block up to the slab's resident pages. */
void ss_slab_carve(slab_t *s, bool warm);
/* Move up to a carve batch of the first cold run onto the (empty) free
 * list, in address order; the rest of the run stays cold (its new first
 * block's page is faulted in to hold the link, as the next batch's
 * would be). s->cold != NULL. */
void ss_slab_uncool(slab_t *s);
/* Owner: move s's thread_free blocks onto its lists; returns how many. */
unsigned ss_slab_collect(slab_t *s);
/* Owner or adopter: drop the full mark, keeping any pushed blocks. */
void ss_slab_clear_mark(slab_t *s);
/* Slab s of ss (in use until now) becomes free, its pages still resident;
 * a list holding every carved block stays for its class (heap_take_slab). */
void ss_slab_free(superslab_t *ss, slab_t *s, uint64_t now_ms);
/* What a purge pass takes: the free slabs idle for delay_ms at now_ms
 * (every dirty one if force), but those a thread's own frees emptied
 * (warm_kid == spare_kid; spare_kid 0: none is spared, as 0 is also the
 * warm_kid of slabs released otherwise) only once idle for spare_ms. */
typedef struct ss_purge_rule {
  uint64_t now_ms, delay_ms, spare_ms;
  uint32_t spare_kid;
  bool force;
} ss_purge_rule_t;
/* Bytes of free slabs whose pages may be resident. */
size_t ss_dirty_bytes(const superslab_t *ss);
/* One superslab's turn in a purge pass (a heap's, or the abandoned lists'):
 * true if it is wholly free and idle for r's delay (or force), for the
 * caller to unlink and release; else the free slabs r takes are
 * decommitted (*purged: the bytes), and *next_due is lowered to when the
 * rest becomes due. */
bool ss_purge_step(superslab_t *ss, const ss_purge_rule_t *r, uint64_t *next_due, size_t *purged);

/* Statistics: visit every live superslab (registry lock held; the slab
 * fields read are a racy snapshot, good enough for reporting). */
void ss_for_each(void (*fn)(const superslab_t *ss, void *arg), void *arg);
typedef struct ss_counts {
  size_t live, abandoned, cached;
} ss_counts_t;
ss_counts_t ss_counts(void);
/* Statistics' residency walk (stats.c): bytes one superslab maps, and a
 * visit of every cached superslab under the cache lock. */
size_t ss_map_bytes(void);
void ss_cache_for_each(void (*fn)(const superslab_t *ss, void *arg), void *arg);

/* fork child, all locks held: superslabs of heaps other than keep belong
 * to threads that do not exist in the child; abandon them so that the
 * child's threads adopt and reuse their memory. */
void ss_fork_child_abandon(const struct heap *keep, const struct heap *keep2);

void ss_lock_all(void);
void ss_unlock_all(void);

#endif
