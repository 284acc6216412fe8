/*
 * heap.h — the per-thread heap and its thread-local front.
 *
 * Owns: heap_front (initial-exec TLS: the direct table malloc's fast path
 * reads; free's fast path compares a slab's owner with the thread id);
 * the heap structs (pooled, never unmapped, so a stale pointer held
 * by a remote freer stays valid); each heap's current slab per class, its
 * partial and waiting lists, its owned superslabs, its cache of pending
 * remote frees, the profiling batches, and the thread start/exit protocol
 * (abandon on exit, adopt abandoned superslabs when a slab is needed); the
 * invariant checkers heap_check/slab_check. Implemented by heap.c (the
 * heap and its refill), heap_purge.c (idle slabs, purge, the walks over
 * every heap), heap_prof.c (the profiling batches), heap_check.c (the
 * checkers) and heap_xc.c (the kept blocks); heap_impl.h is what they
 * share.
 * Promises: only the owning thread touches a heap's slab lists and the
 * free lists of its slabs not marked full (the collector of an idle heap
 * only reads them, and gives back the pages inside the big free blocks
 * on them: heap_purge.c, heap_idle_cool); the page level (superslab lists
 * and masks) and the full slabs' lists are shared with the purge thread
 * under the heap's lock (which collects the delayed list of a heap whose
 * thread stopped refilling: heap_purge.c); everything here except the
 * inline accessors is cold.
 * May call: superslab, remote, lock, decay, sizeclass, os, options, prof (batch
 * sampling), report (overwritten lists), stats.
 */
#ifndef HAK_HEAP_H
#define HAK_HEAP_H

#include "internal.h"
#include "lock.h"
#include "remote.h"
#include "superslab.h"


#define HEAP_DELAYED_CLOSED ((uintptr_t)1)
/* A heap's delayed list past this many bytes wakes the purge thread
 * (remote.c): its collector takes what came back from a heap whose thread
 * stopped allocating, which no refill of that thread would (heap_purge.c,
 * heap_collect_idle). Without the wake, a program whose only idle memory
 * is such a list let the thread sleep through it. */
#define HEAP_DELAYED_WAKE_BYTES ((size_t)1 << 20)
enum { HEAP_PARTIAL = 0, HEAP_WAITING = 1 };
/* Exhausted slabs a class keeps waiting before the oldest is marked full. */
#define HEAP_WAITING_MAX 4
/* Past this many, a refill's walk over them (heap.c, heap_next_slab)
 * marks full each oldest one it passes that got nothing back. The trim
 * to HEAP_WAITING_MAX runs only when no waiting slab was ready: a class
 * whose slabs each got a block or two back found one ready at almost
 * every refill, and its list grew with every refill testing each slab on
 * it (bench_handoff's workers: 28 on average, up to 93, 15 tested a
 * refill; ruby gc_phases.rb 8: 67, up to 255, 65 tested). Trimming to
 * HEAP_WAITING_MAX as the walk passes (e5e1e55) made larson_sized and
 * larson_16t_5k 0.80x and 0.86x as fast: larson's lists hold about 8
 * (larson_16t_5k) to 15 (larson_10k), the oldest is ready 9 times in 10,
 * and the next ones get their blocks back from other threads soon after,
 * which a full mark sends the delayed-list way. */
#define HEAP_WAIT_LONG 16u
/* A waiting slab that got nothing back over this many of its heap's
 * refills is marked full at the next sweep (heap_sweep_waiting), however
 * few of its class wait. A class a thread fills few slabs of kept its
 * first ones waiting for as long as the thread lived, one or two in
 * nearly every superslab of a thread that built a structure; the idle
 * collector hands over only superslabs whose slabs in use are all full
 * (heap_purge.c), so those few kept the rest from the threads freeing
 * into them (bench_handoff: 9 of the main thread's 29 superslabs handed
 * over, 186 MiB at the peak; with this 22, and 142 MiB against glibc's
 * 136). A slab marked full costs the frees into it the delayed list's
 * hand-shake (remote.c), and a small class's 256 refills are thousands of
 * allocations: a slab whose blocks travel to another thread and back
 * (prodcons, xmalloc, larson) gets some back long before; on those rows
 * the mark moved neither speed nor peak RSS past the host's noise. */
#define HEAP_WAIT_TICKS 256u

/* Blocks of other threads' slabs that this thread freed and keeps to
 * reuse (the freeing thread reuses what it frees: tcmalloc's thread cache
 * idea on a slab-owning design), kept only while the slab's owner heap
 * lends (heap_t.lend: the idle collector found its thread idle, and it has
 * not refilled since). Keeping every foreign block (HEAP_XC_ALWAYS, the
 * test builds) made larson 0.81x and xmalloc_16t 0.91x as fast: a busy
 * owner reuses its blocks as soon as they come home, and a block kept
 * elsewhere is one it takes fresh memory for instead. An idle owner
 * reuses nothing: a thread that built a structure and waits while others
 * rewrite it (bench_handoff) had them take fresh pages for every block
 * they freed until the collector handed its superslabs over (1.8x as
 * fast and 125 against 150-166 MiB at the peak when kept, tcmalloc 124).
 * Per class one LIFO list, linked and marked like any free block (a
 * second free of a kept block is seen as a double free), headed by a
 * stand-in descriptor (run[cls]) that carries the geometry of the head
 * block's slab: when the class's current slab runs out, the direct table
 * points at it (until the list does), so malloc's one-branch pop serves
 * them (a thread reuses foreign blocks only when it would otherwise
 * refill). The blocks stay counted in use by their slabs until they
 * travel home, so no slab empties (or changes hands empty) under the
 * cache. Owner thread only. A class holds at most HEAP_XC_CLASS_BLOCKS
 * blocks or HEAP_XC_CLASS_BYTES: past that a foreign free goes home at
 * once. The masks lie in the heap's first page, the stand-ins (9 KiB)
 * after the remote cache, on pages a thread that keeps nothing never
 * writes. */
#ifndef HEAP_XC_ENABLE
#define HEAP_XC_ENABLE 1
#endif
#ifndef HEAP_XC_ALWAYS
#define HEAP_XC_ALWAYS 0
#endif
#define HEAP_XC_CLASS_BYTES ((uint32_t)16384) /* per class */
#define HEAP_XC_CLASS_BLOCKS 128u
#define HEAP_XC_MASK_CLASSES 64u
typedef struct heap_xmask {
  /* The masks hold the first HEAP_XC_MASK_CLASSES classes (the direct
   * table's are all among them); the classes past them are never kept. */
  uint64_t want;   /* classes this thread allocates (set by its refills) */
  uint64_t live;   /* classes the direct table serves from run[] */
  uint64_t has;    /* classes whose list may hold blocks (set by a keep) */
  bool served;     /* the thread has handed out a kept block (heap_freed_last) */
} heap_xmask_t;
typedef struct heap_xcache {
  /* run[c].free heads the list; run[c].used counts the pops (slab_pop) */
  slab_t run[HAK_NCLASS];
  uint16_t n[HAK_NCLASS]; /* pushes; held = n - run.used (16-bit) */
} heap_xcache_t;

/* 3.4 KiB up to the remote cache, 13.5 KiB with the kept blocks'
 * stand-ins (heap_new gives each heap whole pages of its own). */
typedef struct heap {
  uintptr_t tid;                     /* owner tag of its slabs (see superslab.h) */
  slab_t *cur[HAK_NCLASS];           /* the class's current slab */
  /* What pops take from: cur[], or while profiling the class's batch. The
   * collector of an idle heap may point a class of 8 KiB and more at a
   * slab without blocks (heap_idle_cool), so that a pop goes to the
   * refill, which points it back at cur[]. */
  slab_t *front[HAK_NCLASS];
  /* Slabs of a class besides the current one, oldest first:
   * [HEAP_PARTIAL] have free blocks; [HEAP_WAITING] ran out and wait, not
   * yet marked full, for the blocks other threads are freeing — those reach
   * them through thread_free with no delayed-list hand-shake, and a refill
   * looks at the oldest before taking a new slab. */
  slab_t *list_head[2][HAK_NCLASS];  /* slab_dlist (superslab.h): the head's prev is the tail */
  uint8_t waiting_n[HAK_NCLASS];
  bool young;                        /* small classes share slabs (heap.c, heap_young_pick) */
  /* Below: the page level of the heap, shared with the background purge
   * thread and so guarded by lock. The owner takes it only when a slab
   * changes hands with its superslab (once per slab, not per block); the
   * purge thread only tries it. */
  hak_lock_t lock;
  /* A class's current slab that emptied with many blocks carved
   * (heap_park): off the direct table and under lock, so that a purge pass
   * may give it back once it has been idle for the purge delay, as any
   * free slab, while the thread sleeps; the owner takes it back (under
   * lock) before a new slab, after the class's partial ones; a class of
   * the same kind that needs a new slab while the heap has no warm free
   * one takes the longest-parked (heap_steal_parked), else another class's
   * current slab with no block in use (heap_steal_idle_current). parked_n
   * counts the non-NULL entries. */
  slab_t *parked[HAK_NCLASS];
  unsigned parked_n;
  /* Another class took this class's empty current slab (heap.c,
   * heap_steal_idle_current) at this refill count (low bits, | 1; 0: not
   * taken), and whether the class came back for a slab so soon after that
   * its current slab is never taken again. Owner only. */
  uint16_t cur_taken[HAK_NCLASS];
  uint64_t cur_keep[(HAK_NCLASS + 63) / 64]; /* a bit per class */
  /* heap_adopt_on_free refused a superslab of this kind at this refill
   * count (tick + 1; 0: none), because the heap had a free slab of it:
   * the refusal stands until the next refill. Owner only. */
  uint32_t adopt_no[SS_KINDS];
  /* owned superslabs by kind, those with free slabs first (ss_dlist) */
  superslab_t *owned_head[SS_KINDS];
  superslab_t *owned_tail[SS_KINDS];
  _Atomic size_t dirty_bytes;        /* free slabs whose pages are resident (statistics too) */
  _Atomic uint64_t next_purge_ms;    /* when the oldest dirty slab becomes due; UINT64_MAX: none */
  _Atomic uintptr_t delayed;         /* blocks freed remotely into full slabs */
  /* Their bytes (statistics: the blocks stay in their slabs' used counts,
   * so without it they would pass for live): a publisher adds before its
   * push, whoever takes blocks off the list subtracts them. One add per
   * published batch, on the remote path to a full slab only. */
  _Atomic size_t delayed_bytes;
  /* Other threads may keep the blocks of this heap's slabs that they free
   * (heap_xc.c): set by the idle collector when it finds the thread idle,
   * cleared by the thread's next refill (heap_maintain) or the
   * collector's next look that sees it run. Read by the freeing threads
   * once per foreign free that joins no batch; on the line the remote
   * publishers write anyway. */
  _Atomic uint32_t lend;
#if HEAP_XC_ENABLE
  heap_xmask_t xm;                   /* what the kept blocks below serve */
#endif
  /* Profiling (HAKMEM_PROF) with the fast paths open: pops take from a
   * per-class batch descriptor (batch[cls]) that a refill fills from the
   * current slab's list, so every block handed out passes through a refill
   * that knows the bytes it serves; the batch stops before the allocation
   * the sampler picked, which the next refill (of any class: the sampler's
   * countdown is spent) then takes from the shared profiling heap, whose
   * slabs' owner tag keeps the fast free path away from sampled blocks.
   * A refill that finds free blocks in the current slab goes straight to
   * heap_prof.c (heap_batch_refill), without the slabs' refill. */
  slab_t *batch;                     /* HAK_NCLASS descriptors while profiling, or NULL */
  slab_t *batch_mem;                 /* their memory, kept while the heap is pooled */
  uint32_t tick;                     /* refills (atomic stores: the collector reads it) */
  uint32_t sweep_tick, sweep_gap;    /* next sweep of the waiting slabs, and the gap */
  /* The collector of an idle heap's delayed list (heap_collect_idle),
   * under lock: the refill count it last saw, since when, and how many
   * purge delays (a power of two) it waits before it looks again. */
  uint32_t idle_tick;
  uint32_t idle_shift;
  uint64_t idle_ms;
  uint64_t idle_since;               /* the last look that saw it refill or run */
  uint64_t idle_cpu_ns;              /* its thread's CPU time at that look */
  uint32_t kid;                      /* its thread's kernel id (0: none) */
  uint32_t idle_cool_tick;           /* the refill count when its big free blocks last went back while it slept (heap_idle_cool) */
  /* The same collector takes the slabs on the lists of an idle heap once
   * every block in use in them has come back (heap_collect_lists), under
   * a hand-shake with the owner: the owner's sections (heap_owner_enter:
   * every slow path that touches its lists) count in owner_busy, written
   * by the owner only; the collector sets claimed under lock, and goes
   * ahead only if, after a process-wide barrier (os_membarrier), no
   * section is open. lists_tick: the refill count at its last look that
   * found nothing waiting in them; lists_waiting: that look found slabs
   * there with blocks come back, but not all of them. */
  _Atomic uint32_t owner_busy;
  _Atomic uint32_t claimed;
  _Atomic uint32_t lists_tick;
  _Atomic bool lists_waiting;
  /* The pass over idle free blocks (heap_cool): when it is next due
   * (UINT64_MAX: no slab it could cool yet; it runs HEAP_COOL_STEPS times
   * per purge delay); when its look at the free lists of classes of
   * SLAB_COOL_MIN and more is next due (once per delay), and that look's
   * count, which the tags of the blocks it saw free carry. */
  uint64_t cool_ms;
  uint64_t cool_big_ms;
  uint64_t cool_grow_ms;             /* the next heap_cool_grow allowed */
  uint64_t grow_cold_ms;             /* the next growth turn a cold slab may take (heap_grow_turn) */
  /* Under lock: free slabs of this heap that other heaps' growth
   * decommitted, and how many of those it took back (heap_purge_grow). */
  uint32_t grow_lost, grow_back;
  bool grow_spare;                   /* heap_purge_grow spares its young free slabs */
  bool rekind_run;                   /* under lock: heap_rekind_warm is in a phase change */
  /* Under lock: the purge delay's adaptation (heap_decay_adapt): the delay
   * is the plain one shifted by decay_shift while the thread refills; KiB
   * that purges by time gave back and that the heap took back, the time of
   * the last such purge, and the refill count the last purge saw. */
  uint8_t decay_shift;
  uint32_t decay_lost, decay_back;
  uint32_t decay_tick;
  uint64_t decay_ms;
  uint32_t cool_pushed;              /* slabs listed since (HEAP_COOL_GROW_PUSHES) */
  uint32_t cool_epoch;
  bool dead;                         /* fork child: belonged to a thread that is gone */
  struct heap *pool_next;
  struct heap *all_next;         /* every heap ever made (never freed) */
  /* This thread's pending frees into others' slabs. Last but for the
   * kept blocks: the heap is a little over a page (heap.c's heap_new
   * gives it whole pages), and only this cache's last ways lie on the
   * second, so a thread that frees no other thread's block touches one
   * page of its heap, not two (heap_reset writes the cache only when it
   * is not empty), and one that keeps none never writes the pages of xc. */
  remote_cache_t rcache;
#if HEAP_XC_ENABLE
  heap_xcache_t xc;                  /* others' blocks this thread freed, for reuse */
#endif
} heap_t;

typedef struct heap_front {
  slab_t *direct[HAK_DIRECT_N]; /* by 16 B bucket; &heap_empty_slab when none */
  size_t fast_max;              /* sizes the direct table serves: HEAP_FRONT_IMAGE_MAX,
                                   HAK_FAST_MAX once the thread has a heap */
  heap_t *heap;                 /* the heap malloc's fast paths serve (else NULL) */
  heap_t *self;                 /* the thread's heap (NULL until its first slow call) */
  bool exited;                      /* the thread's heap has been torn down */
} heap_front_t;
/* heap and self differ only while heap profiling is on: then heap stays NULL,
 * direct[] empty and the heap's owner tag unequal to the thread id, so every
 * call reaches the cold paths that sample. free's fast path compares a
 * slab's owner with HAK_THREAD_ID(). */

extern HAK_TLS heap_front_t heap_front;
/* The TLS image fills the direct table up to 1 KiB (heap.c). */
#define HEAP_FRONT_IMAGE_MAX ((size_t)1024)
#define HEAP_FRONT_IMAGE_N (HEAP_FRONT_IMAGE_MAX / 16 + 1)
extern slab_t heap_empty_slab;

void heap_process_init(void);
heap_t *heap_thread_init(void);
/* A block of class cls for a thread whose heap is already torn down
 * (allocations from other libraries' thread-exit destructors): served from
 * one shared heap under a mutex, so no per-thread heap is re-created and
 * leaked after the last destructor round. */
void *heap_exit_alloc(unsigned cls);
/* The shared exit heap (NULL until first used); not a thread's heap. */
heap_t *heap_shared_exit_heap(void);
/* The exit heap's superslabs (and what was freed into them) go back to the
 * abandoned list now (hak_collect; decay passes do it once they are idle
 * for the purge delay). Takes the exit heap's lock: not under the decay
 * pass lock. */
void heap_exit_release(void);
/* What a refill does when out of memory (no slab to be had): the caller's
 * answer (alloc.c's collects everything idle and refills once more, with
 * the same align), or NULL: the refill returns NULL with errno ENOMEM.
 * Handed down as an argument, so heap.c calls nothing above it and a
 * refill that succeeds pays nothing for it. */
typedef void *(*heap_oom_fn)(heap_t *h, unsigned cls, uintptr_t align);
/* Take a block of class cls when h->front[cls] has none. align: 1, or for
 * an aligned allocation its alignment (a power of two that divides the
 * class's block size), which a block a larger class lends must have too
 * (heap.c, heap_borrow). */
void *heap_alloc_refill(heap_t *h, unsigned cls, heap_oom_fn oom, uintptr_t align);
/* A block of class cls from h: the current slab's list, else a refill. */
HAK_INLINE void *heap_alloc_class_at(heap_t *h, unsigned cls, heap_oom_fn oom, uintptr_t align) {
  /* Relaxed atomic (a plain load): the collector of an idle heap may store
   * here (front[]). */
  slab_t *s = __atomic_load_n(&h->front[cls], __ATOMIC_RELAXED);
  block_t *b = s->free;
  if (HAK_LIKELY(slab_can_pop(s, b))) return slab_pop(s, b);
  return heap_alloc_refill(h, cls, oom, align);
}
HAK_INLINE void *heap_alloc_class_with(heap_t *h, unsigned cls, heap_oom_fn oom) {
  return heap_alloc_class_at(h, cls, oom, 1);
}
HAK_INLINE void *heap_alloc_class(heap_t *h, unsigned cls) { return heap_alloc_class_with(h, cls, NULL); }
/* A block of a slab owned by h, freed by h's thread, that the fast path did
 * not take (slab full) — owner is the value read from s->owner. The caller
 * has checked that b is a block start and not free (slab_block_is_free). */
void heap_free_local(heap_t *h, slab_t *s, block_t *b, uintptr_t owner);
/* The calling thread, whose heap is h, frees a block of s, a slab of a
 * superslab whose thread exited: h adopts that superslab (true), so this
 * free and the next ones into it are local and its free blocks and slabs
 * serve h's allocations; false (nothing done) if h may not adopt (not the
 * thread's fast-path heap) or another thread took it first. Cold. */
bool heap_adopt_on_free(heap_t *h, slab_t *s) HAK_COLD;
#if HEAP_XC_ENABLE
/* b, a live block start of s (not marked), freed by the calling thread,
 * which does not own s, and joining no batch of its remote cache (h: the
 * thread's heap, NULL: none): kept when s's owner heap lends (or in the
 * HEAP_XC_ALWAYS build) and the thread allocates the class, else (and on
 * overflow) sent home (remote_free_slow). */
void heap_free_foreign(heap_t *h, slab_t *s, block_t *b);
/* Sets h's lend flag to v (heap_t.lend). Tested first: the flag shares
 * its line with what remote publishers write, and a store that changes
 * nothing would still take the line from them. */
HAK_INLINE void heap_lend_set(heap_t *h, uint32_t v) {
  if (HAK_UNLIKELY(atomic_load_explicit(&h->lend, memory_order_relaxed) != v))
    atomic_store_explicit(&h->lend, v, memory_order_relaxed);
}

/* Is b, a block of s (a slab the calling thread does not own), the block
 * this thread freed last? Then a free (or realloc) of b now is a second one
 * in a row: the default build's one double-free check (a block freed twice
 * in a row heads the list its first free put it on), for the blocks of
 * other threads' slabs that kept blocks make a thread hand out. The first
 * free put b at the head of its way in the remote cache, or of the kept
 * list of its class, or (its batch published at once) of s's thread_free
 * list or its owner's delayed list. Slow paths only: a miss costs the
 * lines of s's thread_free and of its owner heap's delayed word. */
HAK_INLINE bool heap_freed_last(const heap_t *h, const slab_t *s, const void *b) {
  const remote_pending_t *w = &h->rcache.way[remote_way_of(s)];
  if (w->slab == s && w->head == b) return true;
  /* The rest only in a thread that handed out kept blocks: the lines it
   * reads are other threads', likely misses on every foreign free that
   * joins no batch (a consumer that only frees would pay them for nothing). */
  if (HAK_LIKELY(!h->xm.served)) return false;
  unsigned c = s->cls;
  if (c < HEAP_XC_MASK_CLASSES && ((h->xm.has >> c) & 1) && b == h->xc.run[c].free) return true;
  if ((atomic_load_explicit(slab_tf(s), memory_order_relaxed) & TF_PTR_MASK) == (uintptr_t)b) return true;
  const heap_t *o = ss_heap(ss_of(s));
  return o != NULL && atomic_load_explicit(&o->delayed, memory_order_relaxed) == (uintptr_t)b;
}
/* What heap.c calls of heap_xc.c, which lies above it: registered with the
 * first block a thread keeps, so NULL while no thread has kept one. */
typedef struct heap_xc_ops {
  /* A refill of a class in xm.live | xm.has (align 1): a kept block, or
   * (none left) the class's usual refill. */
  void *(*serve)(heap_t *h, unsigned cls, heap_oom_fn oom);
  /* Every kept block home (into h's remote cache: flush that after). */
  void (*flush)(heap_t *h);
} heap_xc_ops_t;
extern const heap_xc_ops_t *heap_xc_ops;
#endif
/* calloc's block of class cls from h, the calling thread's heap (not
 * profiling): *zeroed is set when no byte of it was written since the
 * kernel zeroed it (the next block of a slab taken clean, carved on its
 * own: heap.c). NULL when out of memory, or in the secure build (its
 * carving order is random): calloc then takes malloc's path. */
void *heap_calloc_class(heap_t *h, unsigned cls, bool *zeroed);
/* Publish the calling thread's pending remote frees. */
void heap_flush_remote(heap_t *h);
/* The fast path emptied a (non-full) slab of h. */
void heap_slab_emptied(heap_t *h, slab_t *s);
/* A current slab that empties with at least this many bytes carved is
 * parked (heap_park): a thread that frees everything after a burst and
 * then sleeps would otherwise keep those pages until it exits (16 threads,
 * each freeing 40 000 blocks of 16..516 B and a 320 KiB array, then
 * sleeping: 14 MiB kept), since nobody but the owner may touch its
 * current slabs. Small blocks allocated and freed one at a time in a loop
 * carve one batch (a page) and never get here; a big one does, once: the
 * refill that takes it back sets park_tick. */
#define HEAP_PARK_MIN_BYTES ((size_t)32768)
#define HEAP_PARK_MIN_BLOCKS 16u
/* The fast path emptied s, h's current slab of its class, with that much
 * carved: unless h refilled nothing since s was last taken back from
 * parking (a loop that empties and refills the class would park it every
 * time), s leaves the direct table for h->parked[] (cold). */
void heap_park(heap_t *h, slab_t *s);
/* Purge what has been idle for the purge delay (everything idle if
 * force) in every heap; blocking: wait for each heap's lock, else skip
 * a heap whose owner holds it. Returns the bytes decommitted; *next_due
 * (if not NULL) becomes the earliest time more memory becomes due
 * (UINT64_MAX: none). */
size_t heap_purge_all(uint64_t now, bool force, bool blocking, uint64_t *next_due);
/* Take in what other threads freed into the calling thread's full slabs,
 * and give back the pages of its free blocks of large classes idle for
 * the purge delay (all of them if force). */
void heap_drain_self(bool force);
/* The purge delay the calling thread's heap has now, the plain one
 * shifted while the heap takes back what its purges give back
 * (heap_purge.c, heap_decay_adapt); the plain one for a thread without a
 * heap. hak_ctl's thread.purge_delay_ms. */
uint64_t heap_self_purge_delay_ms(void);
/* Resident bytes of free slabs over every heap (a racy sum, statistics);
 * *max_one: the most one heap holds, *heaps: how many hold any. */
size_t heap_idle_bytes(size_t *max_one, size_t *heaps);
/* Statistics' residency walk (stats.c): visit each heap struct and
 * profiling batch table, returning the bytes their chunks map; and the
 * bytes of blocks pending in the threads' remote-free caches. Racy reads. */
size_t heap_for_each_meta(void (*fn)(const void *p, size_t len, void *arg), void *arg);
size_t heap_remote_pending_bytes(void);
/* Bytes of blocks on the heaps' delayed lists (freed by other threads
 * into full slabs, not yet taken by the owner or the idle collector):
 * still in their slabs' used counts too. Racy sum. */
size_t heap_delayed_bytes(void);
/* Superslabs the idle heaps' collector handed to the abandoned list so
 * far (heap_purge.c, heap_collect_idle). */
size_t heap_handed_over(void);
/* fork child: heaps other than keep/keep2 belonged to threads that do not
 * exist in the child; their superslabs are abandoned by superslab.c. */
void heap_fork_child(heap_t *keep, const heap_t *keep2);

/* Invariant checkers (stop the process with the failed condition): the
 * calling thread's heap h — its slab lists, its superslabs' free masks and
 * owners, its current slabs — and one slab s owned by h, whose free list
 * must hold exactly its carved blocks not in use, each a marked block
 * start in its area. The debug build runs them at every slow path. */
void heap_check(heap_t *h);
void slab_check(const heap_t *h, const slab_t *s);

/* fork: the heaps' global locks and the calling thread's own heap lock,
 * held across the fork (init.c); released by heap_unlock_all on both
 * sides. */
void heap_lock_all(void);
void heap_unlock_all(void);

#endif
