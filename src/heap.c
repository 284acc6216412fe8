/*
 * heap.c — per-thread heaps: their lifecycle and their refill (heap.h is
 * the contract; heap_impl.h what the heap's files share).
 *
 * Owns: the thread-local front and the empty-slab sentinel; making,
 * pooling and retiring heap structs (thread start, exit, fork); the
 * refill (the current slab, the waiting and partial slabs, a block
 * borrowed from a larger class's current slab, another class's parked
 * slab, a new slab from an owned, adopted or new superslab) and its housekeeping
 * (heap_maintain); the owner's slow side of free (a full or emptied slab,
 * a current slab emptied after a burst parked, the delayed list); the two shared heaps under a mutex, the exit heap
 * (heap_exit_alloc) and the profiling heap (heap_prof_sample, which the
 * refill calls around heap_prof.c's batches).
 * Promises: everything here is the cold side of malloc and free; a
 * refill returns NULL (errno ENOMEM) when out of memory, and alloc.c
 * collects and retries.
 * May call: heap_purge.c, heap_prof.c, heap_xc.c (only through heap_xc_ops),
 * superslab, remote, lock, decay (idle reports and safe points), prof
 * (prof_alloc), sizeclass, report, options, os, stats.
 */
#include "heap.h"
#include "heap_impl.h"
#include "internal.h"
#include "decay.h"
#include "report.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "remote.h"
#include "sizeclass.h"
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* The sentinel every empty table entry points at: its free list is always
 * empty, so a lookup that finds it falls into the slow path with one test. */
slab_t heap_empty_slab = {.owner = OWNER_UNUSED};

#if !(defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__aarch64__)))
HAK_TLS char tls_tid_anchor; /* its address is the thread id (internal.h) */
#endif

/* Only the buckets up to 1 KiB and the "not here" one hold the sentinel
 * in the TLS image (fast_max 1024 keeps malloc away from the others): each
 * entry is a relocation the loader applies at start-up, and the 208 more
 * made .rela.dyn a page longer and the image a page of RELRO more. A
 * thread's first slow call fills the rest and raises fast_max
 * (heap_front_open). */
HAK_TLS heap_front_t heap_front = {.direct = {[0 ... HEAP_FRONT_IMAGE_N - 1] = &heap_empty_slab,
                                              [HAK_DIRECT_N - 1] = &heap_empty_slab},
                                   .fast_max = HEAP_FRONT_IMAGE_MAX,
                                   .heap = NULL,
                                   .self = NULL};

static void heap_front_open(void) {
  if (heap_front.fast_max == HAK_FAST_MAX) return;
  for (unsigned b = HEAP_FRONT_IMAGE_N; b < HAK_DIRECT_N - 1; b++) heap_front.direct[b] = &heap_empty_slab;
  heap_front.fast_max = HAK_FAST_MAX;
}

static hak_lock_t heap_pool_lock = LOCK_INIT;
static heap_t *heap_pool;     /* heaps of exited threads */
static unsigned heap_live_n;  /* heaps out of the pool (remote_threads_set) */
static hak_lock_t heap_prof_lock = LOCK_INIT;
static heap_t *heap_prof;     /* the shared profiling heap (heap_prof_sample) */
static uint8_t *heap_chunk;       /* carving area for new heap structs */
static size_t heap_chunk_left;
static pthread_key_t heap_key;

static void heap_thread_exit(void *arg);
static heap_t *heap_exit_heap; /* the shared exit heap (heap_exit_alloc) */
static bool heap_exit_giveback(bool blocking);
static size_t heap_answer_grow(uint64_t now);

void heap_process_init(void) {
  pthread_key_create(&heap_key, heap_thread_exit);
  decay_register(DECAY_HEAPS, heap_purge_all); /* decay calls no page owner by name */
  decay_register_grow(DECAY_HEAPS, heap_answer_grow);
  decay_register_idle(heap_idle_bytes);
}

#define HEAP_SWEEP_GAP_MIN 16u
#define HEAP_SWEEP_GAP_MAX 1024u

static void heap_reset(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    h->cur[c] = h->front[c] = &heap_empty_slab;
    if (h->batch_mem != NULL) h->batch_mem[c].free = NULL;
    for (unsigned l = 0; l < 2; l++) h->list_head[l][c] = NULL;
    h->waiting_n[c] = 0;
    h->cur_taken[c] = 0;
  }
  memset(h->cur_keep, 0, sizeof h->cur_keep);
  heap_parked_forget(h);
  for (unsigned k = 0; k < SS_KINDS; k++) h->owned_head[k] = h->owned_tail[k] = NULL;
  atomic_store_explicit(&h->next_purge_ms, UINT64_MAX, memory_order_relaxed);
  __atomic_store_n(&h->tick, 0, __ATOMIC_RELAXED); /* the collector reads it */
  memset(h->adopt_no, 0, sizeof h->adopt_no);
  h->sweep_tick = h->sweep_gap = HEAP_SWEEP_GAP_MIN;
  h->young = opt.young_refills != 0;
  h->cool_ms = UINT64_MAX;
  h->cool_big_ms = 0;
  h->cool_grow_ms = h->grow_cold_ms = 0;
  h->grow_lost = h->grow_back = 0;
  h->grow_spare = false;
  __atomic_store_n(&h->decay_shift, 0, __ATOMIC_RELAXED);
  h->decay_lost = h->decay_back = h->decay_tick = 0;
  h->decay_ms = 0;
  atomic_store_explicit(&h->dirty_bytes, 0, memory_order_relaxed);
  /* A way holds a batch only with its bit in busy set (remote.c), so an
   * empty cache (a fresh heap's zero pages, or one flushed) is left
   * unwritten: its last ways are the heap's second page (heap.h). A full
   * credit, not a flush at the first remote free: that flush published
   * each thread's first block alone, and bench_prodcons 16 then held
   * 1 MiB more at its peak (7.2 against 6.3 MiB, medians of 4 and 5). */
  if (h->rcache.busy != 0) memset(&h->rcache, 0, sizeof h->rcache);
  h->rcache.credit = REMOTE_FLUSH_EVERY;
  atomic_store_explicit(&h->lend, 0, memory_order_relaxed);
#if HEAP_XC_ENABLE
  /* Written only if the last thread kept blocks (a fork child's heap of a
   * thread that is gone): a flushed cache is clear already. */
  if ((h->xm.live | h->xm.has) != 0) memset(&h->xc, 0, sizeof h->xc);
  memset(&h->xm, 0, sizeof h->xm);
#endif
  h->batch = NULL; /* only a profiling thread's own heap batches */
  h->pool_next = NULL;
  atomic_store_explicit(&h->lists_tick, 0, memory_order_relaxed);
  atomic_store_explicit(&h->lists_waiting, false, memory_order_relaxed);
}

static heap_t *heap_new(void) {
  heap_t *h = NULL;
  lock_acquire(&heap_pool_lock);
  if (heap_pool != NULL) {
    h = heap_pool;
    heap_pool = h->pool_next;
  } else {
    /* Whole pages each: a heap sharing a page with another's would make
     * each thread write two. heap_t is a little over a page; what lies on
     * its second page is written only by remote frees (heap.h, rcache). */
    size_t sz = align_up(sizeof(heap_t), os_page_size);
    if (heap_chunk_left < sz) {
      size_t chunk = 64 * 1024;
      uint8_t *c = os_map(chunk);
      if (c != NULL) {
        heap_chunk = c;
        heap_chunk_left = chunk;
      }
    }
    if (heap_chunk_left >= sz) {
      h = (heap_t *)heap_chunk;
      heap_chunk += sz;
      heap_chunk_left -= sz;
      lock_init(&h->lock);
      h->all_next = heap_all;
      __atomic_store_n(&heap_all, h, __ATOMIC_RELEASE);
    }
  }
  if (h != NULL) remote_threads_set(++heap_live_n, os_cpu_count());
  lock_release(&heap_pool_lock);
  if (h == NULL) return NULL;
  lock_acquire(&h->lock);
  heap_reset(h);
  lock_release(&h->lock);
  atomic_store_explicit(&h->delayed, 0, memory_order_release);
  return h;
}

/* Profiling: what the batches call back (heap_batch_register). */
static void *heap_refill(heap_t *h, unsigned cls, heap_oom_fn oom);
static void *heap_prof_sample(unsigned cls);

heap_t *heap_thread_init(void) {
  heap_t *h = heap_new();
  if (h == NULL) return NULL;
  bool closed = false;
  if (opt.prof) {
    if (h->batch_mem == NULL) h->batch_mem = os_map(align_up(HAK_NCLASS * sizeof(slab_t), os_page_size));
    h->batch = h->batch_mem;
    heap_batch_register(heap_refill, heap_prof_sample);
    /* Without batch descriptors, profiling closes the fast paths instead:
     * every call then reaches a slow path, which samples. */
    closed = h->batch == NULL;
  }
  /* Atomic: the collector of idle heaps reads both without the lock (a
   * pooled heap changes owner under its reads). */
  __atomic_store_n(&h->tid, HAK_THREAD_ID() | (closed ? HAK_TID_PROF_BIT : 0), __ATOMIC_RELAXED);
  __atomic_store_n(&h->kid, os_thread_kid(), __ATOMIC_RELAXED);
  heap_front_open();
  heap_front.self = h;
  heap_front.heap = closed ? NULL : h;
  /* The key's destructor runs heap_thread_exit when the thread ends; the
   * first 32 keys live inside the thread descriptor, so this never calls
   * malloc. */
  pthread_setspecific(heap_key, h);
  return h;
}

/* ---- slab lists ---------------------------------------------------------- */

#if HEAP_XC_ENABLE
const heap_xc_ops_t *heap_xc_ops;
#endif
/* The blocks of other threads' slabs h keeps (heap_xc.c) go home. */
static void heap_kept_flush(heap_t *h) {
#if HEAP_XC_ENABLE
  if ((h->xm.live | h->xm.has) != 0) __atomic_load_n(&heap_xc_ops, __ATOMIC_ACQUIRE)->flush(h);
#else
  (void)h;
#endif
}

/* The direct table's buckets of class cls pop from s. */
static void heap_direct_point(unsigned cls, slab_t *s) {
  for (unsigned b = sc_bucket_lo[cls]; b <= sc_bucket_hi[cls]; b++) heap_front.direct[b] = s;
}

/* Young heaps. Each small class a thread touches costs it at least a page
 * of its own (the first carve of the class's slab), so a thread holding a
 * few blocks of each of the 20 classes up to 512 B kept 20 pages where a
 * few would do: 64 threads of 50 blocks of 16..512 B each held 1.6x
 * glibc's peak (bench small_ws_64t), whose threads share arenas. While a
 * thread's heap is young, a class up to HEAP_YOUNG_MAX with no slab of its
 * own is served from the current slab of the power of two at or above it
 * (6 classes instead of 20): the direct table points the class's buckets
 * there, so the fast path is unchanged, and free, realloc and
 * malloc_usable_size see the larger block (at most twice the size). The
 * heap grows up at the first refill past HAKMEM_YOUNG_REFILLS (64) or with
 * more than HEAP_YOUNG_BYTES handed out from those 6 current slabs: the
 * borrowed buckets go back to the empty sentinel and each class takes
 * slabs of its own at its next refill; blocks handed out young stay valid
 * where they are. Only then do both kinds of slab hold pages, which is
 * what a busy young thread pays (thread_churn +0.1-0.2 MiB of 5.6, 5
 * interleaved runs); growing up by refills alone (64), without the byte
 * bound, cost larson_16t +1 MiB of 9, and serving from 2^k and 3*2^k/2
 * (10 classes) saved less (small_ws_64t 8.7 -> 6.0 MiB against 5.2) for
 * the same cost. Only the thread's own heap (the direct table is its), and
 * not for aligned requests, which keep to their class. */
#define HEAP_YOUNG_MAX 512u
#define HEAP_YOUNG_BYTES ((size_t)16 << 10)

/* The class serving cls while young: the power of two at or above it. */
static unsigned heap_young_target(unsigned cls) {
  uint32_t sz = sc_size[cls];
  if (sz > HEAP_YOUNG_MAX || (sz & (sz - 1)) == 0) return cls;
  return sc_bucket_class[((uint32_t)1 << (32 - __builtin_clz(sz - 1))) >> 4];
}

/* Has h no slab of class cls at all (current, listed or parked)? A class
 * with slabs of its own (an adopted superslab's, say) uses them. */
static bool heap_class_bare(const heap_t *h, unsigned cls) {
  return h->cur[cls] == &heap_empty_slab && h->list_head[HEAP_PARTIAL][cls] == NULL &&
         h->list_head[HEAP_WAITING][cls] == NULL && __atomic_load_n(&h->parked[cls], __ATOMIC_RELAXED) == NULL;
}

/* C's current slab is now s: the classes it serves follow it. */
static HAK_NOINLINE void heap_young_follow(heap_t *h, unsigned cls, slab_t *s) {
  uint32_t sz = sc_size[cls];
  if (sz > HEAP_YOUNG_MAX || (sz & (sz - 1)) != 0) return;
  /* A class with no current slab may still point at C's old one: if it
   * got slabs of its own meanwhile (adoption), it goes to the empty
   * sentinel (its next malloc refills from them), never left pointing at a
   * slab that is no longer current (which may be released and retaken by
   * another class). */
  for (unsigned c = cls; c-- > 0 && sc_size[c] > sz / 2;)
    if (h->cur[c] == &heap_empty_slab) heap_direct_point(c, heap_class_bare(h, c) ? s : &heap_empty_slab);
}

static HAK_NOINLINE void heap_young_end(heap_t *h) {
  h->young = false;
  for (unsigned c = 0; c < HAK_NCLASS && sc_size[c] <= HEAP_YOUNG_MAX; c++)
    if (heap_young_target(c) != c && h->cur[c] == &heap_empty_slab) heap_direct_point(c, &heap_empty_slab);
}

/* Bytes handed out from the current slabs of the classes that serve the
 * others while young (16, 32, .. 512 B). */
static size_t heap_young_bytes(const heap_t *h) {
  size_t n = 0;
  for (uint32_t sz = 16; sz <= HEAP_YOUNG_MAX; sz *= 2) {
    const slab_t *s = h->cur[sc_bucket_class[sz >> 4]];
    n += (size_t)s->used * s->bsize;
  }
  return n;
}

/* Which class serves a refill of cls (the heap is young). */
static HAK_NOINLINE unsigned heap_young_pick(heap_t *h, unsigned cls, uintptr_t align) {
  if (h != heap_front.heap) return cls; /* the exit heap, profiling */
  if (h->tick > opt.young_refills || heap_young_bytes(h) > HEAP_YOUNG_BYTES) {
    heap_young_end(h);
    return cls;
  }
  if (align != 1 || !heap_class_bare(h, cls)) return cls;
  return heap_young_target(cls);
}

static void heap_set_current(heap_t *h, unsigned cls, slab_t *s) {
  h->cur[cls] = s;
  if (h->batch != NULL && s != &heap_empty_slab) s = heap_batch_geometry(&h->batch[cls], s);
  __atomic_store_n(&h->front[cls], s, __ATOMIC_RELAXED); /* the idle collector stores here too */
  /* The direct table belongs to the thread's own heap; the profiler (heap
   * NULL) and the exit heap must keep the fast path closed. */
  if (h != heap_front.heap) return;
  heap_direct_point(cls, s);
  if (HAK_UNLIKELY(h->young)) heap_young_follow(h, cls, s);
}

/* h now holds a slab of class cls: if its free blocks can cool, the pass
 * over them is due HEAP_COOL_STEPS times per purge delay from now on
 * (heap_maintain). Called where slabs change hands, not where they become
 * current. */
static void heap_cool_schedule(heap_t *h, unsigned cls) {
  if (HAK_UNLIKELY(h->cool_ms == UINT64_MAX) && sc_size[cls] >= SLAB_RUN_COOL_MIN)
    h->cool_ms = os_now_ms() + opt.purge_delay_ms / HEAP_COOL_STEPS;
}

/* h takes a slab of bytes whose pages are not resident (fresh or
 * decommitted): a purge by time may have given them back too soon
 * (heap_decay_back), and the arenas' free spans may sit beside the pages
 * about to be faulted in (decay_note_grow; they keep their own pace). A
 * fault path, and only for a heap that purged or a process with arenas. */
static HAK_TEXT_COLD HAK_NOINLINE void heap_take_cold(heap_t *h, size_t bytes) {
  if (h->decay_lost != 0) heap_decay_back(h, bytes);
  if (h == heap_front.heap) decay_note_grow(DECAY_HEAPS, os_now_ms());
}

static slab_t *heap_take_slab(heap_t *h, superslab_t *ss, unsigned cls) {
  /* A warm (dirty) slab first: its pages are resident. Of those, the one
   * that last held this class: a slab keeps resident every page any class
   * ever carved in it, so one that cycled through the classes of thread
   * after thread ends up wholly resident, however little each class needs
   * of it (bench_thread_churn: peak RSS 7.5 -> 5.5 MiB). Kept to one class,
   * it holds about that class's largest working set. */
  uint64_t warm = ss->free_mask & ss->dirty_mask;
  unsigned idx = (unsigned)__builtin_ctzll(warm ? warm : ss->free_mask);
  for (uint64_t m = warm; m != 0; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    if (ss->slabs[i].cls == cls) {
      idx = i;
      break;
    }
  }
  if (warm)
    heap_dirty_add(h, ss_slab_room(ss, idx), -1);
  else if (HAK_UNLIKELY(h->decay_lost != 0 || atomic_load_explicit(&decay_grow_armed, memory_order_relaxed)))
    heap_take_cold(h, ss_slab_room(ss, idx));
  if (HAK_UNLIKELY((ss->grow_mask >> idx) & 1)) {
    /* Another heap's growth decommitted it, and h needs it after all. */
    ss->grow_mask &= ~((uint64_t)1 << idx);
    h->grow_back++;
  }
  bool same_cls = ss->slabs[idx].cls == cls;
  block_t *kept = ss->slabs[idx].free; /* ss_slab_free: kept while dirty */
  uint16_t kept_carved = ss->slabs[idx].carved;
  slab_t *s = ss_slab_init(ss, idx, cls, h->tid);
  /* Carved up to its resident pages at once (ss_slab_carve) only by the
   * thread that emptied it, and only for a class that has a current slab
   * already: a class whose extra slabs empty and come back round after
   * round (bench_batch_mix). A slab taken as a class's first is the class
   * starting over, and needs a few pages of it: bench_thread_churn's
   * threads take back the slabs they emptied freeing their predecessors'
   * blocks, and carved whole they held 11 % more (5.5 -> 6.1 MiB, 36
   * blocks carved per slab that no one used), whoever else took them. */
  if (s->warm_kid == 0 || s->warm_kid != __atomic_load_n(&h->kid, __ATOMIC_RELAXED) || !same_cls || h->cur[cls] == &heap_empty_slab) {
    s->warm_pages = 0;
  } else if (kept != NULL && !s->clean && h->batch == NULL) {
    /* Its blocks as they were freed, not linked again: that carve wrote
     * every block of a slab that comes back round after round (4 % of
     * bench_batch_mix's instructions, 17 % of its mispredicted branches). */
    s->free = kept;
    s->carved = kept_carved;
  }
  /* A class with exhausted slabs waiting takes a fresh one: it is carving
   * its way through slabs, so its carve populates ahead (ss_slab_carve). */
  if (s->clean && h->waiting_n[cls] >= HEAP_WAITING_MAX && sc_size[cls] <= os_page_size) s->pop_pages = SS_POP_HOT;
  heap_cool_schedule(h, cls);
  if (ss->free_mask == 0) {
    heap_owned_remove(h, ss);
    heap_owned_push_back(h, ss);
  }
  return s;
}

/* Take over a superslab whose thread exited: collect what other threads
 * freed into it and sort its slabs into h's lists. Under h->lock. */
static void heap_adopt(heap_t *h, superslab_t *ss) {
  size_t dirty = ss_dirty_bytes(ss);
  if (dirty) {
    heap_dirty_add(h, dirty, 1);
    heap_due(h, ss->last_free_ms + opt.purge_delay_ms);
  }
  ss_set_heap(ss, h);
  slab_t *s;
  SS_FOR_EACH_USED(ss, s) {
    /* Strip the full mark too: the slab starts its new life unmarked. */
    ss_slab_clear_mark(s);
    s->on_list = 0;
    heap_cool_schedule(h, s->cls);
    atomic_store_explicit(&s->owner, h->tid, memory_order_release);
    ss_slab_collect(s);
    if (s->used == 0) {
      heap_release_slab(h, s);
    } else if (s->free != NULL || s->cold != NULL || s->carved < s->capacity) {
      heap_list_push(h, HEAP_PARTIAL, s);
    } else if (!remote_mark_full(s, h)) {
      ss_slab_collect(s);
      heap_list_push(h, HEAP_PARTIAL, s);
    }
  }
  if (ss->free_mask)
    heap_owned_push_front(h, ss);
  else
    heap_owned_push_back(h, ss);
}

/* May a slab of ss serve class cls although ss is of another kind? The
 * class only picks the slab size it prefers; a slab's descriptor carries
 * its own geometry. It must hold at least HEAP_FOREIGN_MIN blocks (fewer
 * would refill every few blocks), and no more than its 16-bit counts
 * (used, capacity, thread_free's count) can hold: a 16-byte class in a
 * 1 MiB slab would hold 65 536. */
#define HEAP_FOREIGN_MIN 2u
static HAK_TEXT_COLD HAK_NOINLINE bool heap_foreign_fits(const superslab_t *ss, unsigned cls) {
  return ((size_t)1 << ss->slab_shift) / sc_size[cls] <= UINT16_MAX &&
         ss_slab_room(ss, ss->first_slab) / sc_size[cls] >= HEAP_FOREIGN_MIN;
}

/* Class cls of kind needs a slab and h has no warm free slab its classes
 * can take (heap_foreign_warm): a wholly free superslab of another kind,
 * given kind's geometry (ss_rekind), whose resident pages kind's classes
 * could not take as they were (heap_foreign_fits). Blocks of 40 KiB and
 * more after a phase of small ones (100 MiB of 16 B blocks, then of
 * 100 000 B: peak 215 MiB against tcmalloc's 164), or small nodes after
 * big buffers. The one that keeps the most warm bytes of the first
 * HEAP_FOREIGN_LOOK with free slabs of each kind, if HEAP_REKIND_MIN or
 * more would keep some, or the one left of a change that began so (until
 * a look finds none): one alone is a lull in a program that goes on using
 * its kind, not a phase that ended. sqlite3 emptied one superslab of
 * 64 KiB slabs once in a run and a class of 80 KiB blocks took it: its
 * small classes faulted in a new superslab, while the big slab, barely
 * used, kept the old one's 3 MiB resident (peak 56.4 -> 59.3 MiB); with
 * two needed throughout, each change of kind in test_kind_reuse's runs
 * left its last superslab behind (growth 5.7 -> 9.6 MiB). NULL if none.
 * Under h->lock. */
#define HEAP_FOREIGN_LOOK 8u
#define HEAP_REKIND_MIN 2u
static HAK_TEXT_COLD HAK_NOINLINE superslab_t *heap_rekind_warm(heap_t *h, unsigned kind) {
  superslab_t *best = NULL;
  size_t best_gain = 0;
  unsigned found = 0;
  for (unsigned k = 0; k < SS_KINDS; k++) {
    unsigned looked = 0;
    for (superslab_t *ss = h->owned_head[k]; k != kind && ss != NULL && ss->free_mask != 0 && looked < HEAP_FOREIGN_LOOK;
         ss = ss->next, looked++) {
      size_t gain = ss_rekind_gain(ss, kind);
      found += gain != 0;
      if (gain > best_gain) best = ss, best_gain = gain;
    }
  }
  h->rekind_run = found >= HEAP_REKIND_MIN || (found != 0 && h->rekind_run);
  if (!h->rekind_run) return NULL;
  heap_dirty_add(h, ss_dirty_bytes(best), -1);
  heap_owned_remove(h, best);
  ss_rekind(best, kind);
  heap_owned_push_front(h, best);
  heap_dirty_add(h, ss_dirty_bytes(best), 1);
  return best;
}

/* Class cls (of kind) needs a slab and h has no warm free one of that
 * kind (its free slabs of the kind, if any, are untouched or decommitted,
 * and the next step maps a new superslab): a warm free slab of another
 * kind instead, the nearest slab size first, smaller before larger. Its
 * pages are resident already; the others would be faulted in beside them
 * while they wait out the purge delay. A program that frees its blocks of one size and then
 * fills blocks of a size of another kind (4 KiB buffers, then 64-byte
 * nodes; 8 KiB, then 4 KiB) held both at once: 100 MiB of each peaked at
 * 193-202 MiB, against glibc's 102-139 and mimalloc's 129. Only the first
 * HEAP_FOREIGN_LOOK superslabs with free slabs of each kind are looked at
 * (the warm ones are nearer the front: heap_owned_push_front). Failing
 * that, a wholly free one given the kind's geometry (heap_rekind_warm).
 * Under h->lock. */
static HAK_TEXT_COLD HAK_NOINLINE superslab_t *heap_foreign_warm(heap_t *h, unsigned cls, unsigned kind) {
  /* Exited threads' superslabs of the kind come first (their adoption
   * follows): taken past, they stayed abandoned and resident while every
   * new thread filled its first slabs of another kind (bench_thread_churn
   * at 16 threads: peak 16.4 -> 29.3 MiB). */
  if (ss_abandon_waiting(kind)) return NULL;
  for (unsigned d = 1; d < SS_KINDS; d++)
    for (int dir = -1; dir <= 1; dir += 2) {
      int k = (int)kind + dir * (int)d;
      if (k < 0 || k >= SS_KINDS) continue;
      unsigned looked = 0;
      for (superslab_t *ss = h->owned_head[k]; ss != NULL && ss->free_mask != 0 && looked < HEAP_FOREIGN_LOOK;
           ss = ss->next, looked++) {
        if (looked == 0 && !heap_foreign_fits(ss, cls)) break; /* one slab size per kind */
        if ((ss->free_mask & ss->dirty_mask) != 0) return ss;
      }
    }
  return heap_rekind_warm(h, kind);
}

/* Class cls needs a slab and h has no warm free one of its kind: the
 * longest-parked slab of another class of that kind (heap_park), released
 * to its superslab and taken warm; NULL if none. A parked slab is wholly
 * free, yet was kept for its class alone: a program that runs through its
 * sizes one after another (sh6bench's runs of 2 500 blocks of one size,
 * then the next size) parked a slab in every class it had passed and
 * faulted fresh pages for the next, so its peak held about a slab per
 * class beyond its largest run (4.3 MiB against glibc's 2.9 on one
 * thread). Taking one back costs its class a new slab when it returns; the
 * stealer's alternative was fresh pages, which cost faults now. Under
 * h->lock. */
static slab_t *heap_steal_parked(heap_t *h, unsigned cls, unsigned kind) {
  unsigned best = HAK_NCLASS;
  uint64_t oldest = UINT64_MAX;
  for (unsigned c = 0, seen = 0; c < HAK_NCLASS && seen < h->parked_n; c++) {
    const slab_t *p = h->parked[c];
    if (p == NULL) continue;
    seen++;
    /* A parked slab may lie in a superslab of another kind
     * (heap_foreign_warm): taken for cls only where it fits. */
    if (c != cls && sc_kind(c) == kind && p->freed_ms < oldest &&
        (ss_of(p)->kind == kind || heap_foreign_fits(ss_of(p), cls))) {
      oldest = p->freed_ms;
      best = c;
    }
  }
  if (best == HAK_NCLASS) return NULL;
  slab_t *p = heap_parked_take(h, best);
  superslab_t *ss = ss_of(p);
  heap_release_slab_due(h, p, p->freed_ms + opt.purge_delay_ms);
  return heap_take_slab(h, ss, cls);
}

#define HEAP_STEAL_CUR_BACK 256u

/* Class cls refills after its empty current slab was taken: back within
 * HEAP_STEAL_CUR_BACK refills, it is one a loop uses in turn with others,
 * and keeps its current slab from now on (a loop over six sizes that
 * frees each size's blocks before the next took 11 % more instructions
 * when the classes traded slabs). */
static HAK_NOINLINE void heap_cur_back(heap_t *h, unsigned cls) {
  if ((uint16_t)(h->tick - h->cur_taken[cls]) < HEAP_STEAL_CUR_BACK) h->cur_keep[cls / 64] |= (uint64_t)1 << (cls % 64);
  h->cur_taken[cls] = 0;
}

/* Class cls needs a slab and h has no warm free or parked one of its
 * kind: the current slab of another class that has no block in use (or
 * whose blocks in use all came back from other threads, not yet
 * collected), the one with the most carved bytes (a page at least),
 * released to its superslab and taken warm; NULL if none. A class's
 * current slab that empties with fewer blocks carved than heap_park wants
 * stays current, its pages that class's alone (and one whose blocks other
 * threads free is not even parked): a program that runs through its sizes
 * kept one such slab per size it had passed (bench size_runs: 0.5 MiB of
 * free blocks beside a 1.9 MiB largest run, on each thread). Its class pays a
 * refill when it returns; the stealer's alternative was fresh pages. Only
 * the thread's own heap, not while young (other classes' buckets may
 * point at a current slab) or profiling (batches stand between the heap
 * and its slabs), and not a class whose front the idle collector moved
 * aside; nor a class that came back for a slab soon after its slab was
 * taken (heap_cur_back): two classes that each free all their blocks and
 * then allocate again in turn would trade slabs at every turn, each trade
 * a refill and a carve. Under h->lock, in the owner's section. */
static slab_t *heap_steal_idle_current(heap_t *h, unsigned cls, unsigned kind) {
  if (h != heap_front.heap || h->batch != NULL || h->young) return NULL;
  slab_t *best = NULL;
  size_t best_bytes = os_page_size - 1;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    slab_t *s = h->cur[c];
    if (c == cls || s == &heap_empty_slab || h->front[c] != s || ss_of(s)->kind != kind ||
        ((h->cur_keep[c / 64] >> (c % 64)) & 1))
      continue;
    /* Or every block in use came back from other threads, uncollected
     * while its class allocates nothing (no more can come: the count is
     * of blocks in use). */
    if (s->used != 0 && (unsigned)(atomic_load_explicit(slab_tf(s), memory_order_relaxed) >> TF_COUNT_SHIFT) != s->used)
      continue;
    size_t b = (size_t)s->carved * s->bsize;
    if (b > best_bytes) best = s, best_bytes = b;
  }
  if (best == NULL) return NULL;
  if (best->used != 0) ss_slab_collect(best);
  if (best->used != 0) return NULL; /* a corrupted list: left where it is */
  h->cur_taken[best->cls] = (uint16_t)(h->tick | 1);
  heap_set_current(h, best->cls, &heap_empty_slab);
  heap_release_slab(h, best);
  return heap_take_slab(h, ss_of(best), cls);
}

/* decay's answer to the arenas' growth (decay_note_grow): the arenas are about
 * to fault in pages for a block above HAKMEM_ARENA_MIN, so every heap's
 * free slabs go as they do for another heap's growth (heap_purge_grow
 * with no heap of its own: at any age unless a heap kept taking back what
 * such purges cost it). A program that freed its small blocks and takes
 * big ones held both phases: 16-byte blocks then 200 000-byte ones peaked
 * at 252 MiB for 100 MiB live. One pass at a time, and after a pass that
 * gave something back none for a quarter of the purge delay: the arenas'
 * steady state (warm fits) never gets here, and a cold fit now and then
 * costs the heaps no more than that. */
static _Atomic uint64_t heap_answer_due_ms;

static HAK_TEXT_COLD size_t heap_answer_grow(uint64_t now) {
  uint64_t due = atomic_load_explicit(&heap_answer_due_ms, memory_order_relaxed);
  if (now < due || !atomic_compare_exchange_strong_explicit(&heap_answer_due_ms, &due, UINT64_MAX,
                                                            memory_order_relaxed, memory_order_relaxed))
    return 0;
  size_t purged =
      heap_purge_grow(NULL, heap_front.self, __atomic_load_n(&heap_exit_heap, __ATOMIC_ACQUIRE), now, opt.purge_delay_ms,
                      false);
  /* Only a pass that gave something back waits: one that found nothing
   * (the program's first big block, before its small ones were freed)
   * must not hold off the phase change that follows it. */
  atomic_store_explicit(&heap_answer_due_ms, purged != 0 ? now + opt.purge_delay_ms / HEAP_COOL_STEPS : 0,
                        memory_order_relaxed);
  return purged;
}

/* A slab of a superslab the arenas lend (ss_borrow), NULL if they have
 * none: a heap about to fault in a slab of its own superslab takes
 * resident pages the arenas hold free instead, which its growth would
 * otherwise have had decommitted (decay_note_grow), faulting twice. Not
 * before it maps a new superslab: a heap whose superslab went back when
 * it emptied is not growing, and bench_large_churn (blocks of 64 KiB..8
 * MiB) then held regions the arenas faulted fresh granules beside (36.3
 * -> 42.4 MiB; giving back at the heap's next purge pass what it had not
 * taken, 39.1 MiB, and the heap that did grow lost the benefit). Under
 * h->lock. */
static HAK_TEXT_COLD HAK_NOINLINE slab_t *heap_take_borrowed(heap_t *h, unsigned kind, unsigned cls) {
  superslab_t *ss = ss_borrow(kind);
  if (ss == NULL) return NULL;
  /* Its free slabs are resident, as an adopted superslab's are. */
  heap_dirty_add(h, ss_dirty_bytes(ss), 1);
  heap_due(h, ss->last_free_ms + opt.purge_delay_ms);
  ss_set_heap(ss, h);
  heap_owned_push_front(h, ss);
  return heap_take_slab(h, ss, cls);
}

/* h is about to fault in fresh pages for a slab: those of a new
 * superslab (new_ss), or untouched or decommitted ones of a superslab it
 * has. Every quarter of the purge delay at most, the other heaps' free
 * slabs go as heap_purge_grow says (they would have served, had they been
 * h's). For a new superslab, every heap's, and h's big free blocks cool;
 * for a cold slab, only the free slabs of threads asleep (lent: heap_purge.c),
 * which would otherwise wait out the purge delay from when they went idle
 * while the workers faulted in slab after slab of their own superslabs
 * beside them (larson_10k's main thread: 9.6 MiB of slabs its workers'
 * frees emptied; peak 26.6 -> 24.8 MiB, median of five). Every heap's for
 * a cold slab made xmalloc_16t 10 % slower: a busy thread takes its free
 * slabs back within milliseconds. A turn for a cold slab that gave
 * nothing back holds off only the cold slabs' turns, for 1/16 of the
 * delay, not the next new superslab's (test_purge_grow: a thread start
 * took a cold slab just before the growth). Under h->lock. */
static void heap_grow_turn(heap_t *h, bool new_ss) {
  if (h != heap_front.heap) return;
  uint64_t now = os_now_ms();
  bool due = now >= h->cool_grow_ms && (new_ss || now >= h->grow_cold_ms);
  if (new_ss && (due || h->cool_pushed >= HEAP_COOL_GROW_PUSHES)) {
    h->cool_pushed = 0;
    if (h->cool_ms != UINT64_MAX) decay_count_grow(heap_cool_grow(h));
  }
  if (due) {
    size_t got = heap_purge_grow(h, h, __atomic_load_n(&heap_exit_heap, __ATOMIC_ACQUIRE), now,
                                 opt.purge_delay_ms / HEAP_GROW_SPARE_STEPS, !new_ss);
    decay_count_grow(got);
    if (got != 0 || new_ss)
      h->cool_grow_ms = now + opt.purge_delay_ms / HEAP_COOL_STEPS;
    else
      h->grow_cold_ms = now + opt.purge_delay_ms / HEAP_GROW_SPARE_STEPS;
  }
}

/* Under h->lock. */
static slab_t *heap_new_slab_locked(heap_t *h, unsigned cls) {
  unsigned kind = sc_kind(cls);
  for (int adopted = 0;; adopted++) {
    superslab_t *ss = h->owned_head[kind];
    if (ss == NULL || (ss->free_mask & ss->dirty_mask) == 0) {
      slab_t *s = h->parked_n != 0 ? heap_steal_parked(h, cls, kind) : NULL;
      if (s == NULL) s = heap_steal_idle_current(h, cls, kind);
      if (s != NULL) return s;
      /* Resident pages of another kind before untouched ones of this kind
       * (none while the heap has no warm free slab). */
      superslab_t *warm = atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed) != 0
                              ? heap_foreign_warm(h, cls, kind)
                              : NULL;
      if (warm != NULL) ss = warm;
    }
    if (ss != NULL && ss->free_mask != 0) {
      /* A slab whose pages are not resident: the arenas' free resident
       * pages first, where they hold some (heap_take_borrowed). */
      bool cold = (ss->free_mask & ss->dirty_mask) == 0;
      slab_t *b = cold && HAK_UNLIKELY(atomic_load_explicit(&decay_grow_armed, memory_order_relaxed))
                      ? heap_take_borrowed(h, kind, cls)
                      : NULL;
      if (b != NULL) return b;
      if (cold) heap_grow_turn(h, false);
      return heap_take_slab(h, ss, cls);
    }
    if (adopted < 4 && (ss = ss_abandon_pop(kind)) != NULL) {
      heap_adopt(h, ss);
      slab_t *p = heap_list_pop(h, HEAP_PARTIAL, cls);
      if (p != NULL) return p;
      continue;
    }
    heap_grow_turn(h, true);
    ss = ss_acquire(kind);
    if (ss == NULL) {
      /* No new superslab (out of memory or address space): a free slab of
       * another kind serves too if it holds a few blocks — the class only
       * picks the preferred slab size, the descriptor has its own. */
      for (unsigned k = 0; k < SS_KINDS; k++) {
        ss = h->owned_head[k];
        if (k != kind && ss != NULL && ss->free_mask != 0 && heap_foreign_fits(ss, cls))
          return heap_take_slab(h, ss, cls);
      }
      return NULL;
    }
    ss_set_heap(ss, h);
    heap_owned_push_front(h, ss);
    return heap_take_slab(h, ss, cls);
  }
}

/* NULL when out of memory: alloc.c collects and retries the refill. */
static slab_t *heap_new_slab(heap_t *h, unsigned cls) {
  lock_acquire(&h->lock);
  slab_t *s = heap_new_slab_locked(h, cls);
  lock_release(&h->lock);
  return s;
}

bool heap_adopt_on_free(heap_t *h, slab_t *s) {
  /* Only a thread's own heap with its fast paths open: not the shared exit
   * and profiling heaps, and not while profiling (whose batches stand
   * between the heap and its slabs). */
  if (h != heap_front.heap || h->batch != NULL || (h->tid & (HAK_TID_EXIT_BIT | HAK_TID_PROF_BIT))) return false;
  superslab_t *ss = ss_of(s);
  /* Only while h has no free slab of that kind of its own: a heap that
   * took every superslab it freed into would hold them all. Under h's lock:
   * a purge pass of another thread may be moving h's superslabs (and may
   * unmap one, so its free mask is not read without the lock). A refusal
   * stands until h refills, which is what takes its free slabs: workers
   * freeing the blocks of a sleeping thread's handed-over superslabs
   * (bench_handoff) took and dropped the lock on 168 000 of 800 000
   * frees, 5 % of the time, to be refused every time. */
  uint32_t memo = __atomic_load_n(&h->tick, __ATOMIC_RELAXED) + 1;
  if (h->adopt_no[ss->kind] == memo) return false;
  heap_owner_enter(h);
  lock_acquire(&h->lock);
  superslab_t *own = h->owned_head[ss->kind];
  bool take = false;
  int pub = REMOTE_OK;
  if (own == NULL || own->free_mask == 0) {
    /* This thread's pending batches first: those for ss's slabs reach
     * their thread_free now, and the adoption collects them. Left in the
     * cache, they would be published later into slabs that are then this
     * thread's own, and wait there until it next refills: an idle thread
     * would hold them (test_rss_split mtbg). */
    pub = remote_flush(&h->rcache);
    take = ss_abandon_take(ss);
    if (take) heap_adopt(h, ss);
  } else {
    h->adopt_no[ss->kind] = memo;
  }
  lock_release(&h->lock);
  heap_owner_exit(h);
  remote_note(pub);
  return take;
}

/* ---- freeing on the owner's slow side ------------------------------------ */

void heap_slab_emptied(heap_t *h, slab_t *s) {
  if (s == h->cur[s->cls]) return; /* keep the current slab: it is reused next */
  heap_owner_enter(h);
  if (s->on_list) heap_list_remove(h, s);
  lock_acquire(&h->lock);
  heap_release_slab(h, s);
  /* Its thread emptied it with its own frees: the one slab release that
   * makes it warm for the thread's next take (heap_take_slab). */
  s->warm_kid = __atomic_load_n(&h->kid, __ATOMIC_RELAXED);
  lock_release(&h->lock);
  heap_owner_exit(h);
}

void heap_park(heap_t *h, slab_t *s) {
  unsigned c = s->cls;
  /* A profiling heap's pops go through its batches, not the direct table. */
  if (h->batch != NULL || s->park_tick == h->tick) return;
  uint64_t now = os_now_ms();
  heap_set_current(h, c, &heap_empty_slab);
  lock_acquire(&h->lock);
  slab_t *old = h->parked[c];
  if (old == NULL) h->parked_n++;
  s->freed_ms = now; /* not on a list: prev is free to hold it */
  __atomic_store_n(&h->parked[c], s, __ATOMIC_RELAXED);
  /* The class emptied its current slab twice without taking the first
   * back: that one is a free slab now, due from when it was parked. */
  if (old != NULL) heap_release_slab_due(h, old, old->freed_ms + opt.purge_delay_ms);
  heap_due(h, now + opt.purge_delay_ms);
  lock_release(&h->lock);
  decay_note_idle(atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed) + (size_t)s->carved * s->bsize);
}

/* The class's parked slab, taken back (NULL if a purge pass gave it back
 * meanwhile). */
static slab_t *heap_unpark(heap_t *h, unsigned cls) {
  lock_acquire(&h->lock);
  slab_t *s = heap_parked_take(h, cls);
  if (s != NULL) s->park_tick = h->tick;
  lock_release(&h->lock);
  return s;
}

/* Blocks came back to s (owner: its owner word as read), under h->lock: a
 * full slab goes back on the partial list, or is released when nothing in
 * it is used; an emptied slab is released unless it is the current one. */
static void heap_slab_regained_locked(heap_t *h, slab_t *s, uintptr_t owner) {
  if (owner & OWNER_FULL) {
    remote_unmark_full(s, h);
    if (s->used == 0)
      heap_release_slab(h, s);
    else
      heap_list_push(h, HEAP_PARTIAL, s);
  } else if (s->used == 0 && s != h->cur[s->cls]) {
    if (s->on_list) heap_list_remove(h, s);
    heap_release_slab(h, s);
  }
}

/* A full slab's free list and count are also written by the collector of
 * an idle heap (heap_collect_idle), under h->lock: the owner takes the
 * lock for them too. Only frees into full slabs, which are off the hit
 * path already. The collector may also have handed the slab's superslab
 * over (heap_purge.c) since the caller read its owner: then, under the
 * lock, the owner word is no longer ours, and the block goes as any
 * other thread's would. */
void heap_free_local(heap_t *h, slab_t *s, block_t *b, uintptr_t owner) {
  heap_owner_enter(h);
  if (owner & OWNER_FULL) {
    lock_acquire(&h->lock);
    if (HAK_UNLIKELY(atomic_load_explicit(&s->owner, memory_order_acquire) != owner)) {
      lock_release(&h->lock);
      heap_owner_exit(h);
      remote_send(&h->rcache, s, b);
      return;
    }
    blk_free(b, s->free);
    s->free = b;
    s->used--;
    heap_slab_regained_locked(h, s, owner);
    lock_release(&h->lock);
  } else {
    blk_free(b, s->free);
    s->free = b;
    s->used--;
    if (s->used == 0) heap_slab_emptied(h, s);
  }
  heap_owner_exit(h);
}

/* Blocks other threads freed into our full slabs (linked, and in the
 * checked builds marked free, already). Each published chain is one slab's
 * blocks: a run of blocks of the same slab is spliced onto its list whole,
 * not freed one by one. Under h->lock (see heap_free_local). */
static void heap_drain_delayed(heap_t *h, bool close) {
  if (!close && atomic_load_explicit(&h->delayed, memory_order_relaxed) == 0) return;
  lock_acquire(&h->lock);
  block_t *b = remote_delayed_take(h, close);
  size_t taken = 0;
  while (b != NULL) {
    slab_t *s = ss_slab_of(b, ss_of(b)->slab_shift);
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    block_t *next;
    if ((owner & ~OWNER_FULL) != h->tid) {
      taken += s->bsize;
      next = blk_next(b);
      remote_send(NULL, s, b); /* the slab changed hands meanwhile */
      b = next;
      continue;
    }
    block_t *last;
    unsigned n = heap_run_len(s, b, s->used, &last);
    next = blk_next(last);
    HAK_ASSERT(s->used >= n);
    blk_set_next(last, s->free);
    s->free = b;
    s->used = (uint16_t)(s->used - n);
    taken += (size_t)n * s->bsize;
    heap_slab_regained_locked(h, s, owner);
    b = next;
  }
  remote_delayed_taken(h, taken);
  lock_release(&h->lock);
}

void heap_flush_remote(heap_t *h) {
  remote_note(remote_flush(&h->rcache));
}

/* ---- purge --------------------------------------------------------------- */

/* Cheap housekeeping on every refill: drain the delayed list and publish
 * our pending remote frees; every 16th call sweep the waiting slabs, look
 * at the clock and purge what has been idle long enough. */
static void heap_maintain(heap_t *h) {
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != 0) heap_drain_delayed(h, false);
  if (h->rcache.busy != 0) heap_flush_remote(h);
  /* Refilling: the thread reuses what comes home again. */
  heap_lend_set(h, 0);
  /* Atomic: the collector of idle heaps reads it to see that we refill
   * (a release: one that sees it sees the heap set up). */
  uint32_t tick = h->tick + 1;
  __atomic_store_n(&h->tick, tick, __ATOMIC_RELEASE);
  if ((tick & 15) != 0) return;
  /* A sweep reads every waiting slab's descriptor (up to four per class,
   * cold lines): a thread whose slabs get nothing back from other threads
   * backs off to a sweep every HEAP_SWEEP_GAP_MAX refills (bench_peak_mem
   * spent 8 % of its time here). */
  if ((int32_t)(h->tick - h->sweep_tick) >= 0) {
    bool got = heap_sweep_waiting(h);
    if (got)
      h->sweep_gap = HEAP_SWEEP_GAP_MIN;
    else if (h->sweep_gap < HEAP_SWEEP_GAP_MAX)
      h->sweep_gap *= 2;
    h->sweep_tick = h->tick + h->sweep_gap;
  }
  uint64_t due = atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed);
  if (due != UINT64_MAX || h->cool_ms != UINT64_MAX) {
    uint64_t now = os_now_ms();
    if (now >= due) {
      lock_acquire(&h->lock);
      decay_count(heap_purge(h, now, false));
      lock_release(&h->lock);
    }
    if (now >= h->cool_ms) {
      decay_count(heap_cool(h, false));
      h->cool_ms = now + opt.purge_delay_ms / HEAP_COOL_STEPS;
    }
  }
}

HAK_TEXT_COLD uint64_t heap_self_purge_delay_ms(void) {
  const heap_t *h = heap_front.self;
  return opt.purge_delay_ms << (h != NULL ? __atomic_load_n(&h->decay_shift, __ATOMIC_RELAXED) : 0);
}

static void heap_drain_self_in(heap_t *self, bool force);
void heap_drain_self(bool force) {
  heap_t *self = heap_front.self;
  if (self == NULL) return;
  heap_owner_enter(self);
  heap_drain_self_in(self, force);
  heap_owner_exit(self);
}

static void heap_drain_self_in(heap_t *self, bool force) {
  heap_kept_flush(self);
  heap_flush_remote(self);
  heap_drain_delayed(self, false);
  heap_sweep_waiting(self);
  /* Our free blocks of large classes (only the owner can reach them):
   * all of them, or the pass if it is due. */
  if (self->cool_ms == UINT64_MAX) return;
  uint64_t now = os_now_ms();
  if (force || now >= self->cool_ms) {
    decay_count(heap_cool(self, force));
    self->cool_ms = now + opt.purge_delay_ms / HEAP_COOL_STEPS;
  }
}

/* decay's slot for the heaps. The exit heap is not purged but emptied:
 * its superslabs go back to the abandoned list (heap_exit_giveback). Only
 * tried, never waited for: its lock is taken before the pass lock
 * elsewhere. (In a fork child it is marked dead but still serves exiting
 * threads.) If it is not due, or its lock is busy, the walk treats it as
 * any heap. */
size_t heap_purge_all(uint64_t now, bool force, bool blocking, uint64_t *next_due) {
  heap_t *x = __atomic_load_n(&heap_exit_heap, __ATOMIC_ACQUIRE);
  const heap_t *skip = NULL;
  if (x != NULL && (force || atomic_load_explicit(&x->next_purge_ms, memory_order_relaxed) <= now) &&
      heap_exit_giveback(false))
    skip = x;
  return heap_purge_heaps(now, force, blocking, next_due, skip);
}

void heap_fork_child(heap_t *keep, const heap_t *keep2) {
  /* The shared profiling heap is not kept (its superslabs were abandoned
   * like a thread's, so sampled blocks freed here are reclaimed): a new one
   * is made on demand. */
  heap_prof = NULL;
  /* The forking thread has a new kernel id here (the idle-heap collector
   * reads its CPU time by it). */
  if (keep != NULL && keep != keep2) __atomic_store_n(&keep->kid, os_thread_kid(), __ATOMIC_RELAXED);
  /* One thread here: the other heaps are dead, never pooled again. */
  heap_live_n = (keep != NULL) + (keep2 != NULL && keep2 != keep);
  remote_threads_set(heap_live_n, os_cpu_count());
  for (heap_t *h = heap_all; h != NULL; h = h->all_next) {
    if (h == keep || h == keep2) continue;
    /* Its superslabs are on the abandoned list now; its lock may have been
     * held by a thread that does not exist here. */
    lock_init(&h->lock);
    bool pooled = false;
    for (heap_t *p = heap_pool; p != NULL; p = p->pool_next) pooled |= p == h;
    if (!pooled) {
      h->dead = true;
      /* Its slabs are in those abandoned superslabs, which threads here
       * adopt, empty and unmap: nothing of the heap may point at them.
       * The idle-heap collector read a dead heap's current slab after the
       * child had unmapped it, and one child in 500..650 of test_stress
       * fork died. A pooled heap was reset when it retired. */
      heap_reset(h);
    }
    for (unsigned k = 0; k < SS_KINDS; k++) h->owned_head[k] = h->owned_tail[k] = NULL;
    /* Its parked slabs are abandoned slabs with nothing in use now. */
    heap_parked_forget(h);
    atomic_store_explicit(&h->dirty_bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&h->next_purge_ms, UINT64_MAX, memory_order_relaxed);
  }
}

/* ---- refill -------------------------------------------------------------- */

/* A list head that is not NULL and not in its slab's block area: a link
 * was overwritten after the block was freed. Report it, and drop the rest
 * of the list (its blocks count as in use from now on: leaked, never
 * handed out twice). */
static void heap_list_corrupt(slab_t *s) {
  report_error("malloc", s->free, "heap corruption detected at");
  s->free = NULL;
  s->used = s->carved;
}

enum { HEAP_SLAB_NONE, HEAP_SLAB_LIST, HEAP_SLAB_CLEAN, HEAP_SLAB_SWITCH, HEAP_SLAB_BORROW };

/* Whether s, a slab of the heap other than the current one, has at least
 * want free blocks, some of them resident: on its free list, or freed by
 * other threads (thread_free's count). Carved blocks not in use are on the
 * free list or in cold runs, so a slab with neither a free list nor remote
 * frees is skipped: switching to a slab always yields a block. */
static bool heap_slab_reusable(const slab_t *s, unsigned want) {
  uintptr_t tf = atomic_load_explicit(slab_tf(s), memory_order_relaxed);
  unsigned remote = (unsigned)(tf >> TF_COUNT_SHIFT);
  if (s->free == NULL && remote == 0) return false;
  return (unsigned)(s->carved - s->used) + remote >= want;
}

/* Another slab of cur's class worth switching to (taken off its list): a
 * waiting slab, else the partial list's head, with a carve batch of free
 * blocks and an eighth of the slab at least. Fewer are not worth it: the
 * slab would run dry within a few allocations and the refills would
 * switch back and forth (mid_large_mt, one block per carve, ran 5 %
 * slower when one block was enough). NULL if none. */
static slab_t *heap_reusable_slab(heap_t *h, const slab_t *cur) {
  unsigned cls = cur->cls, want = sc_batch[cls], eighth = cur->capacity / 8u;
  if (want < eighth) want = eighth;
  for (slab_t *w = h->list_head[HEAP_WAITING][cls]; w != NULL; w = w->next)
    if (heap_slab_reusable(w, want)) {
      heap_list_remove(h, w);
      return w;
    }
  slab_t *p = h->list_head[HEAP_PARTIAL][cls];
  if (p != NULL && heap_slab_reusable(p, want)) {
    heap_list_remove(h, p);
    return p;
  }
  return NULL;
}

/* Borrowing: class cls (medium or big) has no free block and would
 * carve, uncool or map fresh pages; a free block of the current slab of
 * one of the next HAKMEM_BORROW_CLASSES classes of its kind serves
 * instead (the slab to pop it from; NULL if none). Each class's freed
 * blocks used to serve that class only, so a program whose sizes move
 * between neighbouring classes held every class's high-water mark at
 * once (bench_calloc, bench_large_churn); a borrowed block wastes at most
 * the class gaps it crosses (a quarter to a half of the size for two
 * classes). The block stays its slab's: free, remote free and
 * malloc_usable_size see the larger class, and the requesting class stays
 * dry, so its next allocation comes back here (a refill per allocation
 * while it borrows: bench_mid_large_mt about 6 % slower, 9 % leaner).
 * Small classes never borrow: their hit path is too cheap to trade. The
 * head block must be aligned as the request needs (align: 1 for malloc;
 * alloc_aligned picks a class whose size is a multiple of its alignment,
 * which a larger class's blocks need not be, and says so through
 * heap_alloc_class_at). The shared exit and profiling heaps, whose
 * callers alloc_aligned does not reach, keep to the class's own
 * alignment. (Keeping to it everywhere cost bench_calloc 7 % of the
 * saving: a power of two's blocks rarely sit where a larger class's do.) */
static slab_t *heap_borrow(heap_t *h, unsigned cls, uintptr_t align) {
  unsigned kind = sc_kind(cls), reach = (unsigned)opt.borrow_classes;
  if (kind == SC_KIND_SMALL || h->batch != NULL) return NULL;
  if (h->tid & (HAK_TID_EXIT_BIT | HAK_TID_PROF_BIT)) align = sc_size[cls] & (0 - (uintptr_t)sc_size[cls]);
  for (unsigned c = cls + 1; c <= cls + reach && c < HAK_NCLASS && sc_kind(c) == kind; c++) {
    slab_t *t = h->cur[c];
    if (t->free != NULL && slab_holds(t, t->free) && ((uintptr_t)t->free & (align - 1)) == 0) return t;
  }
  return NULL;
}

/* Give s, the current slab, a free list: what other threads freed into it;
 * else, while it has pages not yet touched (blocks never carved, cold
 * runs), the free blocks of another slab of the class (HEAP_SLAB_SWITCH:
 * *other, off its list), or a larger class's free block (HEAP_SLAB_BORROW:
 * *lent, the slab it comes from); else a cold run, else fresh blocks.
 * HEAP_SLAB_NONE if s has none left. For calloc (zero_ok),
 * HEAP_SLAB_CLEAN instead of carving from a clean slab: the caller takes
 * the next block on its own (heap_take_clean).
 * The switch: a current slab used to be carved to its end while blocks
 * freed into the class's other slabs waited, resident, so each class of
 * each heap touched up to a slab of fresh pages beyond what it used (512
 * KiB for the medium classes). */
static int heap_slab_refill(heap_t *h, slab_t *s, bool zero_ok, uintptr_t align, slab_t **other, slab_t **lent) {
  if (ss_slab_collect(s) != 0) return HEAP_SLAB_LIST;
  if (s->carved < s->capacity || s->cold != NULL) {
    *other = heap_reusable_slab(h, s);
    if (*other != NULL) return HEAP_SLAB_SWITCH;
    if ((*lent = heap_borrow(h, s->cls, align)) != NULL) return HEAP_SLAB_BORROW;
  }
  if (zero_ok && s->clean && s->carved < s->capacity) return HEAP_SLAB_CLEAN;
  if (s->cold != NULL) { /* pages given back: reused before fresh ones */
    ss_slab_uncool(s);
    return HEAP_SLAB_LIST;
  }
  if (s->carved < s->capacity) {
    /* Up to the resident pages at once only while no other slab of the
     * class has free blocks, and not while the heap is young: carved a
     * batch at a time, each refill looks first for another slab's free
     * blocks (above), and blocks freed there meanwhile are used before
     * the rest of this slab, which a whole carve would skip. */
    ss_slab_carve(s, !h->young && h->list_head[HEAP_PARTIAL][s->cls] == NULL);
    return HEAP_SLAB_LIST;
  }
  return HEAP_SLAB_NONE;
}

/* The next block of a clean slab (s->clean, carved < capacity, no free
 * list), carved on its own and not linked: no byte of it was written since
 * the kernel zeroed it, so calloc need not write it either and its pages
 * are touched only by the program (glibc leaves fresh memory from the top
 * of its heap or from mmap unwritten the same way). */
static block_t *heap_take_clean(slab_t *s) {
  block_t *b = (block_t *)(s->area + (size_t)s->carved * s->bsize);
  __atomic_store_n(&s->gaps, 1, __ATOMIC_RELAXED); /* carved, its pages untouched: not warm when freed */
  s->carved++;
  s->used++;
  return b;
}

/* Does a waiting slab have blocks again (freed by us or by others)? */
static bool heap_slab_ready(slab_t *s) { return s->free != NULL || s->cold != NULL || remote_has_frees(s); }

/* The next slab for class cls once the current one is exhausted: a waiting
 * slab that got blocks back (oldest first), a partial one; else the waiting
 * slabs past the limit are marked full (unless blocks arrived meanwhile)
 * and, unless a larger class lends a block (*lent set, the empty sentinel
 * returned), a slab is taken from a superslab. NULL when out of memory. */
static slab_t *heap_next_slab(heap_t *h, unsigned cls, uintptr_t align, slab_t **lent) {
  if (HAK_UNLIKELY(h->cur_taken[cls] != 0)) heap_cur_back(h, cls);
  for (slab_t *w = h->list_head[HEAP_WAITING][cls], *next; w != NULL; w = next) {
    next = w->next;
    if (heap_slab_ready(w)) {
      heap_list_remove(h, w);
      return w;
    }
    if (h->waiting_n[cls] > HEAP_WAIT_LONG) { /* a long list: see HEAP_WAIT_LONG */
      heap_list_remove(h, w);
      if (!remote_mark_full(w, h)) return w; /* frees arrived first */
    }
  }
  slab_t *s = heap_list_pop(h, HEAP_PARTIAL, cls);
  if (s != NULL) return s;
  if (HAK_UNLIKELY(__atomic_load_n(&h->parked[cls], __ATOMIC_RELAXED) != NULL) && (s = heap_unpark(h, cls)) != NULL)
    return s;
  /* Fewer big slabs wait: each holds megabytes. */
  unsigned max = sc_kind(cls) == SC_KIND_SMALL ? HEAP_WAITING_MAX : 1;
  while (h->waiting_n[cls] > max) {
    slab_t *w = heap_list_pop(h, HEAP_WAITING, cls);
    /* It waited long enough: from now on blocks freed into it reach us
     * through a local free or the delayed list (remote.c). */
    if (!remote_mark_full(w, h)) return w; /* frees arrived first */
  }
  if ((*lent = heap_borrow(h, cls, align)) != NULL) return &heap_empty_slab;
  s = heap_new_slab(h, cls);
  if (s != NULL && s->on_list) heap_list_remove(h, s);
  return s;
}

/* Profiling: the sampled allocation. Sampled blocks come from one shared
 * heap under a mutex (about one allocation per 512 KiB takes it, so it is
 * never contended in practice, and short-lived threads make no heap of
 * their own); its owner tag is no thread's id, so every free of a sampled
 * block reaches free_slow and prof_free. */
static void *heap_prof_sample(unsigned cls) {
  lock_acquire(&heap_prof_lock);
  if (heap_prof == NULL) {
    heap_prof = heap_new();
    if (heap_prof != NULL) __atomic_store_n(&heap_prof->tid, (uintptr_t)heap_prof | HAK_TID_PROF_BIT, __ATOMIC_RELAXED);
  }
  void *p = NULL;
  if (heap_prof != NULL) {
    heap_t *self = heap_front.self;
    heap_front.self = heap_prof; /* for the refill path's "is it mine" checks */
    p = heap_alloc_class(heap_prof, cls);
    heap_front.self = self;
  }
  lock_release(&heap_prof_lock);
  prof_alloc(p, sc_size[cls]);
  return p;
}

/* The refill proper (heap_alloc_refill below is its entry). */
/* zeroed: NULL for malloc; for calloc, set when the block returned is
 * known to be zero (heap_take_clean). align: what a borrowed block must be
 * aligned to (heap_borrow). */
HAK_INLINE void *heap_refill_in(heap_t *h, unsigned cls, heap_oom_fn oom, bool *zeroed, uintptr_t align) {
  heap_maintain(h);
  unsigned want = cls;
  if (HAK_UNLIKELY(h->young)) cls = heap_young_pick(h, cls, align);
  if (h->batch != NULL) {
    slab_t *sh = &h->batch[cls];
    /* The pop failed: the batch is empty, or its head was overwritten. */
    if (HAK_UNLIKELY(sh->free != NULL)) {
      report_error("malloc", sh->free, "heap corruption detected at");
      sh->free = NULL; /* its blocks stay counted in use: never handed out twice */
    }
  }
  slab_t *s = h->cur[cls], *lender = NULL;
  block_t *b = NULL;
  for (;;) {
    if (s != &heap_empty_slab) {
      if (HAK_UNLIKELY(s->free != NULL && !slab_holds(s, s->free))) heap_list_corrupt(s);
      slab_t *other = NULL;
      int r = s->free != NULL ? HEAP_SLAB_LIST : heap_slab_refill(h, s, zeroed != NULL, align, &other, &lender);
      if (r == HEAP_SLAB_BORROW) break;
      if (r == HEAP_SLAB_SWITCH) {
        /* s keeps its untouched blocks for later, on the partial list
         * (or, every block free in cold runs, goes to its superslab). */
        if (s->used == 0)
          heap_release_slab_locked(h, s);
        else
          heap_list_push(h, HEAP_PARTIAL, s);
        s = other;
        heap_set_current(h, cls, s);
        continue;
      }
      if (r == HEAP_SLAB_CLEAN) {
        b = heap_take_clean(s);
        *zeroed = true;
        break;
      }
      if (r == HEAP_SLAB_LIST) {
        if (HAK_LIKELY(slab_holds(s, s->free))) break;
        heap_list_corrupt(s);
        continue;
      }
      /* Exhausted: it waits (unmarked) for blocks to come back, and the
       * class moves on. */
      HAK_STAT(ST_WAITING);
      heap_list_push(h, HEAP_WAITING, s);
    }
    s = heap_next_slab(h, cls, align, &lender);
    if (lender != NULL) break;
    if (s == NULL) {
      heap_set_current(h, cls, &heap_empty_slab);
      if (oom != NULL) return oom(h, cls, align);
      errno = ENOMEM;
      return NULL;
    }
    heap_set_current(h, cls, s);
  }
  /* front differs from cur (not profiling) where the collector of an idle
   * heap moved it aside (heap_purge.c, heap_idle_cool): back it goes. */
  if (h->cur[cls] != s || (h->batch == NULL && h->front[cls] != s)) heap_set_current(h, cls, s);
  if (want != cls) heap_direct_point(want, h->front[cls]);
  if (lender != NULL) {
    b = slab_pop(lender, lender->free);
  } else if (b == NULL) {
    if (h->batch != NULL) return heap_batch_take(h, cls, s);
    b = slab_pop(s, s->free);
  }
  /* The heap is consistent again: a safe point — except for the shared
   * exit and profiling heaps, whose locks are held here (pthread_create
   * allocates). */
  if (!(h->tid & (HAK_TID_EXIT_BIT | HAK_TID_PROF_BIT))) decay_poll();
  return b;
}

/* The refill runs in one of the owner's sections (heap_owner_enter): it
 * is here, in a function that has a frame already, so that its callers
 * on the malloc and calloc paths can jump to it. */
static HAK_NOINLINE void *heap_refill_as(heap_t *h, unsigned cls, heap_oom_fn oom, bool *zeroed, uintptr_t align) {
  heap_owner_enter(h);
  void *p = heap_refill_in(h, cls, oom, zeroed, align);
  heap_owner_exit(h);
  return p;
}

/* Profiling: our pending remote frees (those of sampled blocks among
 * them) are published, as at every allocation slow path (remote.h), then
 * the batch's refill. */
static HAK_NOINLINE void *heap_batch_settle(heap_t *h, unsigned cls, heap_oom_fn oom) {
  heap_flush_remote(h);
  return heap_batch_refill(h, cls, oom);
}

static HAK_NOINLINE void *heap_refill(heap_t *h, unsigned cls, heap_oom_fn oom) {
  return heap_refill_as(h, cls, oom, NULL, 1);
}

void *heap_calloc_class(heap_t *h, unsigned cls, bool *zeroed) {
#if HAK_SECURE
  /* Its carving order is random, and stays so. */
  (void)h, (void)cls, (void)zeroed;
  return NULL;
#else
  if (h->batch != NULL) return NULL;
  HAK_STAT(ST_ALLOC);
  HAK_STAT_CLS(cls_alloc, cls);
  /* A free block first (its pages are resident: clearing it costs no
   * memory); else the refill, which takes a clean slab's next block. */
  slab_t *s = __atomic_load_n(&h->front[cls], __ATOMIC_RELAXED);
  block_t *b = s->free;
  if (b != NULL && slab_can_pop(s, b)) return slab_pop(s, b);
  return heap_refill_as(h, cls, NULL, zeroed, 1);
#endif
}

void *heap_alloc_refill(heap_t *h, unsigned cls, heap_oom_fn oom, uintptr_t align) {
  HAK_STAT(ST_REFILL);
  /* Profiling: heap_prof.c refills the class's batch from its current
   * slab, and calls heap_refill back when it cannot. The rest of
   * heap_maintain (the delayed list, the ticked sweeps and purges) keeps
   * the pace of the slabs' refills, as without the profiler, not the
   * batches' (which never borrow, so align does not matter there). */
  if (HAK_LIKELY(h->batch == NULL)) {
#if HEAP_XC_ENABLE
    /* The classes the thread allocates are those whose foreign frees it
     * keeps; kept blocks serve before a new slab (not an aligned request:
     * they may lack its alignment). */
    if (cls < HEAP_XC_MASK_CLASSES) {
      uint64_t bit = (uint64_t)1 << cls;
      h->xm.want |= bit;
      if (HAK_UNLIKELY((h->xm.live | h->xm.has) & bit) && align == 1)
        return __atomic_load_n(&heap_xc_ops, __ATOMIC_RELAXED)->serve(h, cls, oom);
    }
#endif
    return heap_refill_as(h, cls, oom, NULL, align);
  }
  heap_owner_enter(h);
  void *p = HAK_UNLIKELY(h->rcache.busy != 0) ? heap_batch_settle(h, cls, oom) : heap_batch_refill(h, cls, oom);
  heap_owner_exit(h);
  return p;
}

/* ---- thread exit --------------------------------------------------------- */

static void heap_abandon_all(heap_t *h) {
  for (unsigned k = 0; k < SS_KINDS; k++) {
    superslab_t *ss = h->owned_head[k];
    while (ss != NULL) {
      superslab_t *next = ss->next;
      slab_t *s;
      SS_FOR_EACH_USED(ss, s) {
        ss_slab_clear_mark(s);
        ss_slab_collect(s);
        s->on_list = 0;
        s->next = s->prev = NULL;
        if (s->used == 0) {
          heap_release_slab(h, s);
        } else {
          atomic_store_explicit(&s->owner, OWNER_ABANDONED, memory_order_release);
        }
      }
      heap_owned_remove(h, ss);
      /* Even a wholly free superslab goes to the abandoned list, still
       * committed: threads come and go in bursts, and the next one adopts it
       * warm instead of faulting its pages in again. The list decommits
       * what stays unadopted past the purge delay. */
      ss_abandon_push(ss);
      ss = next;
    }
  }
}

/* A heap whose thread is gone: its superslabs to the abandoned list, the
 * struct to the pool. */
static void heap_retire(heap_t *h) {
  lock_acquire(&h->lock);
  heap_abandon_all(h);
  heap_reset(h);
  lock_release(&h->lock);
  lock_acquire(&heap_pool_lock);
  h->pool_next = heap_pool;
  heap_pool = h;
  remote_threads_set(--heap_live_n, os_cpu_count());
  lock_release(&heap_pool_lock);
}

static void heap_thread_exit(void *arg) {
  heap_t *h = arg;
  if (h == NULL || heap_front.self != h) return;
  /* Until the delayed list closes (then the collector leaves the lists
   * alone); heap_retire works under h->lock. */
  heap_owner_enter(h);
  if (h->batch != NULL) heap_batch_return(h);
  heap_kept_flush(h);
  heap_flush_remote(h);
  heap_drain_delayed(h, true);
  heap_owner_exit(h);
  stats_thread_merge();
  for (unsigned b = 0; b < HAK_DIRECT_N; b++) heap_front.direct[b] = &heap_empty_slab;
  heap_front.heap = NULL;
  heap_front.self = NULL;
  heap_front.exited = true;
  heap_retire(h);
  decay_note_thread_exit();
  decay_poll();
}

/* The shared exit heap. It runs only while an exiting thread allocates,
 * so nothing else would ever drain it: its refills adopt abandoned
 * superslabs (full of other threads' live blocks), and what the program
 * frees into them later lands on its delayed list (full slabs) and its
 * slabs' thread_free lists. So it holds its superslabs only for a while:
 * once they have been idle for the purge delay (a decay pass) or at
 * hak_collect, it gives them back to the abandoned list, which collects
 * those frees and decommits by time like any exited thread's. */
static hak_lock_t heap_exit_lock = LOCK_INIT;

heap_t *heap_shared_exit_heap(void) { return heap_exit_heap; }

/* Under heap_exit_lock (nobody allocates from h): what was freed into
 * h's full slabs, then every superslab of h to the abandoned list, as a
 * thread's at exit. The delayed list stays closed while h owns nothing: a
 * publisher that saw a slab's full mark before it was cleared goes to the
 * slab's thread_free, which the abandoned list collects. A publisher that
 * read the list before it closed and pushes after it reopens is drained
 * (and sent on to the slab's current owner) by h's next refill or
 * give-back. */
static void heap_exit_giveback_locked(heap_t *h) {
  heap_flush_remote(h);
  heap_drain_delayed(h, true);
  lock_acquire(&h->lock);
  heap_abandon_all(h);
  heap_reset(h);
  lock_release(&h->lock);
}

/* Give the exit heap's superslabs back; false if its lock was busy (not
 * blocking) and nothing was done. */
static bool heap_exit_giveback(bool blocking) {
  if (blocking)
    lock_acquire(&heap_exit_lock);
  else if (!lock_try(&heap_exit_lock))
    return false;
  heap_t *h = heap_exit_heap;
  if (h != NULL) heap_exit_giveback_locked(h);
  lock_release(&heap_exit_lock);
  return true;
}

void heap_exit_release(void) {
  if (__atomic_load_n(&heap_exit_heap, __ATOMIC_ACQUIRE) != NULL) heap_exit_giveback(true);
}

void *heap_exit_alloc(unsigned cls) {
  lock_acquire(&heap_exit_lock);
  if (heap_exit_heap == NULL) {
    heap_t *n = heap_new();
    if (n != NULL) {
      __atomic_store_n(&n->tid, (uintptr_t)n | HAK_TID_EXIT_BIT, __ATOMIC_RELAXED);
      __atomic_store_n(&heap_exit_heap, n, __ATOMIC_RELEASE);
    }
  }
  heap_t *h = heap_exit_heap;
  void *p = NULL;
  if (h != NULL) {
    /* Reopen the delayed list a give-back closed. */
    uintptr_t closed = HEAP_DELAYED_CLOSED;
    atomic_compare_exchange_strong_explicit(&h->delayed, &closed, 0, memory_order_acq_rel, memory_order_relaxed);
    heap_front.self = h; /* for the refill path's "is it mine" checks */
    p = heap_alloc_class(h, cls);
    heap_front.self = NULL;
    /* It owns superslabs now: a decay pass gives them back once idle for
     * the purge delay (heap_purge_all), whether or not a slab is free. */
    if (atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed) == UINT64_MAX) {
      bool owns = false;
      for (unsigned k = 0; k < SS_KINDS; k++) owns |= h->owned_head[k] != NULL;
      if (owns) {
        heap_due(h, os_now_ms() + opt.purge_delay_ms);
        decay_note_idle(DECAY_BG_START_BYTES);
      }
    }
  }
  lock_release(&heap_exit_lock);
  if (p == NULL) errno = ENOMEM;
  return p;
}

/* The forking thread's own heap lock too: another thread's growth
 * (heap_purge_grow) try-locks every heap and purges under the lock, and
 * the child re-initialises only the other heaps' locks. Left out, the
 * child could inherit its own heap's lock held by a thread that does not
 * exist there (test_mt_hak_tsan_fork hung about once in 40 runs with a
 * change that made such purges frequent). Taken last: whoever holds a
 * heap's lock takes superslab and arena locks under it, never these
 * three. The forking thread holds nothing of the allocator at fork, and
 * makes no allocator call between the prepare handler and the parent's or
 * the child's (the child is that thread): heap_front.self names the same
 * heap in all three. */
void heap_lock_all(void) {
  lock_acquire(&heap_exit_lock);
  lock_acquire(&heap_prof_lock);
  lock_acquire(&heap_pool_lock);
  if (heap_front.self != NULL) lock_acquire(&heap_front.self->lock);
}
void heap_unlock_all(void) {
  if (heap_front.self != NULL) lock_release(&heap_front.self->lock);
  lock_release(&heap_pool_lock);
  lock_release(&heap_prof_lock);
  lock_release(&heap_exit_lock);
}

