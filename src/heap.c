/*
 * heap.c — per-thread heaps: refill, slab lists, purge, thread start/exit,
 * abandonment and adoption. Everything here is the cold side of malloc and
 * free (see heap.h for the contract).
 */
#include "heap.h"
#include "decay.h"
#include "report.h"
#include "options.h"
#include "os.h"
#include "ownmap.h"
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

HAK_TLS heap_front_t heap_front = {.direct = {[0 ... HAK_DIRECT_N - 1] = &heap_empty_slab},
                                 .heap = NULL,
                                 .self = NULL};

static pthread_mutex_t heap_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *heap_pool;     /* heaps of exited threads */
static heap_t *heap_all;      /* every heap made; read without the lock */
static pthread_mutex_t heap_prof_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *heap_prof;     /* the shared profiling heap (heap_prof_sample) */
static uint8_t *heap_chunk;       /* carving area for new heap structs */
static size_t heap_chunk_left;
static pthread_key_t heap_key;

static void heap_thread_exit(void *arg);
static heap_t *heap_exit_heap; /* the shared exit heap (heap_exit_alloc) */
static bool heap_exit_giveback(bool blocking);

void heap_process_init(void) {
  pthread_key_create(&heap_key, heap_thread_exit);
  decay_register(DECAY_HEAPS, heap_purge_all); /* decay calls no page owner by name */
  decay_register_idle(heap_idle_bytes);
}

#define HEAP_SWEEP_GAP_MIN 16u
#define HEAP_SWEEP_GAP_MAX 1024u

static void heap_reset(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    h->cur[c] = h->front[c] = &heap_empty_slab;
    if (h->shadow_mem != NULL) h->shadow_mem[c].free = NULL;
    for (unsigned l = 0; l < 2; l++) h->slabs[l][c].head = h->slabs[l][c].tail = NULL;
    h->waiting_n[c] = 0;
  }
  for (unsigned k = 0; k < SS_KINDS; k++) h->owned[k].head = h->owned[k].tail = NULL;
  atomic_store_explicit(&h->next_purge_ms, UINT64_MAX, memory_order_relaxed);
  h->tick = 0;
  h->sweep_tick = h->sweep_gap = HEAP_SWEEP_GAP_MIN;
  atomic_store_explicit(&h->dirty_bytes, 0, memory_order_relaxed);
  memset(&h->rcache, 0, sizeof h->rcache);
#if HEAP_XC_ENABLE
  memset(&h->xc, 0, sizeof h->xc);
#endif
  h->shadow = NULL; /* only a profiling thread's own heap batches */
  h->prof_due = 0;
  h->pool_next = NULL;
}

static heap_t *heap_new(void) {
  heap_t *h = NULL;
  pthread_mutex_lock(&heap_pool_lock);
  if (heap_pool != NULL) {
    h = heap_pool;
    heap_pool = h->pool_next;
  } else {
    size_t sz = align_up(sizeof(heap_t), 64);
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
      pthread_mutex_init(&h->lock, NULL);
      h->all_next = heap_all;
      __atomic_store_n(&heap_all, h, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&heap_pool_lock);
  if (h == NULL) return NULL;
  pthread_mutex_lock(&h->lock);
  heap_reset(h);
  pthread_mutex_unlock(&h->lock);
  atomic_store_explicit(&h->delayed, 0, memory_order_release);
  return h;
}

heap_t *heap_thread_init(void) {
  heap_t *h = heap_new();
  if (h == NULL) return NULL;
  bool closed = false;
  if (opt.prof) {
    if (h->shadow_mem == NULL) h->shadow_mem = os_map(align_up(HAK_NCLASS * sizeof(slab_t), os_page_size));
    h->shadow = h->shadow_mem;
    /* Without batch descriptors, profiling closes the fast paths instead:
     * every call then reaches a slow path, which samples. */
    closed = h->shadow == NULL;
  }
  h->tid = HAK_THREAD_ID() | (closed ? HAK_TID_PROF_BIT : 0);
  heap_front.self = h;
  heap_front.heap = closed ? NULL : h;
  /* The key's destructor runs heap_thread_exit when the thread ends; the
   * first 32 keys live inside the thread descriptor, so this never calls
   * malloc. */
  pthread_setspecific(heap_key, h);
  return h;
}

/* ---- slab lists ---------------------------------------------------------- */

static void heap_set_current(heap_t *h, unsigned cls, slab_t *s) {
  h->cur[cls] = s;
  if (h->shadow != NULL && s != &heap_empty_slab) s = &h->shadow[cls];
  h->front[cls] = s;
  /* The direct table belongs to the thread's own heap; the profiler (heap
   * NULL) and the exit heap must keep the fast path closed. */
  if (h != heap_front.heap) return;
  for (unsigned b = sc_bucket_lo[cls]; b <= sc_bucket_hi[cls]; b++) heap_front.direct[b] = s;
}

/* A heap's slab lists (slab_t.on_list = list + 1). FIFO: a slab that
 * stopped being full a moment ago has one free block; by the time it
 * reaches the head, frees have refilled it, so a refill does not switch
 * slabs after every other allocation. */
static void heap_list_push(heap_t *h, unsigned l, slab_t *s) {
  unsigned c = s->cls;
  s->on_list = (uint8_t)(l + 1);
  slab_dlist_push_back(&h->slabs[l][c], s);
  if (l == HEAP_WAITING) h->waiting_n[c]++;
}

static void heap_list_remove(heap_t *h, slab_t *s) {
  unsigned l = s->on_list - 1u, c = s->cls;
  slab_dlist_remove(&h->slabs[l][c], s);
  s->on_list = 0;
  if (l == HEAP_WAITING) h->waiting_n[c]--;
}

static slab_t *heap_list_pop(heap_t *h, unsigned l, unsigned cls) {
  slab_t *s = h->slabs[l][cls].head;
  if (s) heap_list_remove(h, s);
  return s;
}

/* ---- owned superslabs (those with a free slab first) --------------------- */

static void heap_owned_remove(heap_t *h, superslab_t *ss) {
  ss_dlist_remove(&h->owned[ss->kind], ss);
  ss->listed = 0;
}

static void heap_owned_push_front(heap_t *h, superslab_t *ss) {
  ss_dlist_push_front(&h->owned[ss->kind], ss);
  ss->listed = 1;
}

static void heap_owned_push_back(heap_t *h, superslab_t *ss) {
  ss_dlist_push_back(&h->owned[ss->kind], ss);
  ss->listed = 1;
}

/* Idle memory of h becomes due at `due`: the next purge must not wait
 * longer. */
static void heap_due(heap_t *h, uint64_t due) {
  if (due < atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed))
    atomic_store_explicit(&h->next_purge_ms, due, memory_order_relaxed);
}

static void heap_dirty_add(heap_t *h, size_t bytes, long sign) {
  size_t d = atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed);
  d = sign > 0 ? d + bytes : d > bytes ? d - bytes : 0;
  atomic_store_explicit(&h->dirty_bytes, d, memory_order_relaxed);
}

/* A slab of h becomes free again inside its superslab, its pages still
 * resident: the next slab h needs of that kind reuses it warm, and the
 * purge decommits it only once it has been idle for the purge delay —
 * never because of how much was freed (that would fault the same pages
 * back in on the next allocation). Under h->lock. */
static void heap_release_slab(heap_t *h, slab_t *s) {
  superslab_t *ss = ss_of(s);
  uint64_t now = os_now_ms();
  if (ss->free_mask == 0 && ss->listed) {
    /* It had no free slab, so it sat behind the ones that do. */
    heap_owned_remove(h, ss);
    heap_owned_push_front(h, ss);
  }
  heap_dirty_add(h, ss_slab_room(ss, s->index), 1);
  ss_slab_free(ss, s, now);
  heap_due(h, now + opt.purge_delay_ms);
  decay_note_idle(atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed));
}

static void heap_release_slab_locked(heap_t *h, slab_t *s) {
  pthread_mutex_lock(&h->lock);
  heap_release_slab(h, s);
  pthread_mutex_unlock(&h->lock);
}

static slab_t *heap_take_slab(heap_t *h, superslab_t *ss, unsigned cls) {
  /* A warm (dirty) slab first: its pages are resident. */
  uint64_t warm = ss->free_mask & ss->dirty_mask;
  unsigned idx = (unsigned)__builtin_ctzll(warm ? warm : ss->free_mask);
  if (warm) heap_dirty_add(h, ss_slab_room(ss, idx), -1);
  slab_t *s = ss_slab_init(ss, idx, cls, h->tid);
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
    atomic_store_explicit(&s->owner, h->tid, memory_order_release);
    ss_slab_collect(s);
    if (s->used == 0) {
      heap_release_slab(h, s);
    } else if (s->free != NULL || s->carved < s->capacity) {
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

static size_t heap_purge(heap_t *h, uint64_t now, bool force);

/* Under h->lock. */
static slab_t *heap_new_slab_locked(heap_t *h, unsigned cls) {
  unsigned kind = sc_kind(cls);
  for (int adopted = 0;; adopted++) {
    superslab_t *ss = h->owned[kind].head;
    if (ss != NULL && ss->free_mask != 0) return heap_take_slab(h, ss, cls);
    if (adopted < 4 && (ss = ss_abandon_pop(kind)) != NULL) {
      heap_adopt(h, ss);
      slab_t *p = heap_list_pop(h, HEAP_PARTIAL, cls);
      if (p != NULL) return p;
      continue;
    }
    ss = ss_acquire(kind);
    if (ss == NULL) {
      /* No new superslab (out of memory or address space): a free slab of
       * another kind serves too if it holds a few blocks — the class only
       * picks the preferred slab size, the descriptor has its own. */
      for (unsigned k = 0; k < SS_KINDS; k++) {
        ss = h->owned[k].head;
        if (k != kind && ss != NULL && ss->free_mask != 0 &&
            ss_slab_room(ss, (unsigned)__builtin_ctzll(ss->free_mask)) >= (size_t)4 * sc_size[cls])
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
  pthread_mutex_lock(&h->lock);
  slab_t *s = heap_new_slab_locked(h, cls);
  pthread_mutex_unlock(&h->lock);
  return s;
}

/* ---- freeing on the owner's slow side ------------------------------------ */

void heap_slab_emptied(heap_t *h, slab_t *s) {
  if (s == h->cur[s->cls]) return; /* keep the current slab: it is reused next */
  if (s->on_list) heap_list_remove(h, s);
  heap_release_slab_locked(h, s);
}

/* Blocks came back to s (owner: its owner word as read): a full slab goes
 * back on the partial list, or is released when nothing in it is used; an
 * emptied slab goes as heap_slab_emptied decides. */
static void heap_slab_regained(heap_t *h, slab_t *s, uintptr_t owner) {
  if (owner & OWNER_FULL) {
    remote_unmark_full(s, h);
    if (s->used == 0)
      heap_release_slab_locked(h, s);
    else
      heap_list_push(h, HEAP_PARTIAL, s);
  } else if (s->used == 0) {
    heap_slab_emptied(h, s);
  }
}

void heap_free_local(heap_t *h, slab_t *s, block_t *b, uintptr_t owner) {
  blk_free(b, s->free);
  s->free = b;
  s->used--;
  heap_slab_regained(h, s, owner);
}

/* Blocks other threads freed into our full slabs (linked, and in the
 * checked builds marked free, already). Each published chain is one slab's
 * blocks: a run of blocks of the same slab is spliced onto its list whole,
 * not freed one by one. */
static void heap_drain_delayed(heap_t *h, bool close) {
  block_t *b = remote_delayed_take(h, close);
  while (b != NULL) {
    slab_t *s = ss_slab_of(b, ss_of(b)->slab_shift);
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    block_t *next;
    if ((owner & ~OWNER_FULL) != h->tid) {
      next = blk_next(b);
      if (remote_free(NULL, s, b) == REMOTE_ABANDONED) /* the slab changed hands meanwhile */
        ss_abandon_note_free();
      b = next;
      continue;
    }
    block_t *last = b;
    unsigned n = 1;
    while ((next = blk_next(last)) != NULL && slab_holds(s, next) && n < s->used) {
      last = next;
      n++;
    }
    HAK_ASSERT(s->used >= n);
    blk_set_next(last, s->free);
    s->free = b;
    s->used = (uint16_t)(s->used - n);
    heap_slab_regained(h, s, owner);
    b = next;
  }
}

void heap_flush_remote(heap_t *h) {
  if (remote_flush(&h->rcache) == REMOTE_ABANDONED) ss_abandon_note_free();
}

#if HEAP_XC_ENABLE
/* ---- blocks kept by the thread that freed them ---------------------------- */

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
    if (((xc->want >> c) & 1) && held < HEAP_XC_CLASS_BLOCKS && (held + 1) * s->bsize <= HEAP_XC_CLASS_BYTES) {
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
    } else if ((h->xc.live >> c) & 1) {
      heap_xc_close(h, c);
    }
  }
  h->xc.want = 0;
}

#endif /* HEAP_XC_ENABLE */

/* ---- purge --------------------------------------------------------------- */

/* Decommit h's free slabs idle for the purge delay and release its wholly
 * free superslabs idle that long (everything idle if force). Under h->lock.
 * Returns the bytes decommitted. */
static size_t heap_purge(heap_t *h, uint64_t now, bool force) {
  uint64_t delay = opt.purge_delay_ms, next = UINT64_MAX;
  size_t purged = 0;
  for (unsigned k = 0; k < SS_KINDS; k++) {
    superslab_t *ss = h->owned[k].head;
    while (ss != NULL && ss->free_mask != 0) { /* full ones are at the back */
      superslab_t *next_ss = ss->next;
      bool idle = force || now - ss->last_free_ms >= delay;
      if (ss->free_mask == ss_all_mask(ss) && idle) {
        size_t d = ss_dirty_bytes(ss);
        heap_owned_remove(h, ss);
        ss_set_heap(ss, NULL);
        ss_release(ss);
        heap_dirty_add(h, d, -1);
        purged += d;
      } else {
        size_t d = ss_purge_slabs(ss, now, delay, force, &next);
        heap_dirty_add(h, d, -1);
        purged += d;
        if (ss->free_mask == ss_all_mask(ss) && ss->last_free_ms + delay < next)
          next = ss->last_free_ms + delay;
      }
      ss = next_ss;
    }
  }
  atomic_store_explicit(&h->next_purge_ms, next, memory_order_relaxed);
  return purged;
}

/* Waiting slabs whose blocks all came back (freed by other threads) go to
 * their superslab, so their memory is reused by any class and decays.
 * Returns whether any block came back. */
static bool heap_sweep_waiting(heap_t *h) {
  bool got = false;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    slab_t *s = h->slabs[HEAP_WAITING][c].head;
    while (s != NULL) {
      slab_t *next = s->next;
      if (ss_slab_collect(s) != 0) {
        got = true;
        if (s->used == 0) {
          heap_list_remove(h, s);
          heap_release_slab_locked(h, s);
        }
      }
      s = next;
    }
  }
  return got;
}

/* Cheap housekeeping on every refill: drain the delayed list and publish
 * our pending remote frees; every 16th call sweep the waiting slabs, look
 * at the clock and purge what has been idle long enough. */
static void heap_maintain(heap_t *h) {
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != 0) heap_drain_delayed(h, false);
  if (h->rcache.frees != 0) heap_flush_remote(h);
  if ((++h->tick & 15) != 0) return;
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
  if (atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed) != UINT64_MAX) {
    uint64_t now = os_now_ms();
    if (now >= atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed)) {
      pthread_mutex_lock(&h->lock);
      decay_count(heap_purge(h, now, false));
      pthread_mutex_unlock(&h->lock);
    }
  }
}

void heap_drain_self(void) {
  heap_t *self = heap_front.self;
  if (self == NULL) return;
  heap_xc_flush(self);
  heap_flush_remote(self);
  heap_drain_delayed(self, false);
  heap_sweep_waiting(self);
}

size_t heap_purge_all(uint64_t now, bool force, bool blocking, uint64_t *next_due) {
  size_t purged = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    uint64_t due = atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed);
    /* The exit heap is not purged but emptied: its superslabs go back to
     * the abandoned list (heap_exit_giveback). Only tried, never waited
     * for: its lock is taken before the pass lock elsewhere. (In a fork
     * child it is marked dead but still serves exiting threads.) */
    if ((force || due <= now) && h == __atomic_load_n(&heap_exit_heap, __ATOMIC_ACQUIRE) &&
        heap_exit_giveback(false))
      continue;
    if (h->dead || (!force && due > now)) {
      if (!h->dead && next_due != NULL && due < *next_due) *next_due = due;
      continue;
    }
    if (blocking)
      pthread_mutex_lock(&h->lock);
    else if (pthread_mutex_trylock(&h->lock) != 0) {
      decay_note_contended();
      if (next_due != NULL && now + 1 < *next_due) *next_due = now + 1;
      continue;
    }
    purged += heap_purge(h, now, force);
    due = atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed);
    pthread_mutex_unlock(&h->lock);
    if (next_due != NULL && due < *next_due) *next_due = due;
  }
  return purged;
}

size_t heap_idle_bytes(size_t *max_one, size_t *heaps) {
  size_t b = 0, m = 0, n = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    size_t d = atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed);
    b += d;
    m = d > m ? d : m;
    n += d != 0;
  }
  *max_one = m;
  *heaps = n;
  return b;
}

void heap_fork_child(heap_t *keep, const heap_t *keep2) {
  /* The shared profiling heap is not kept (its superslabs were abandoned
   * like a thread's, so sampled blocks freed here are reclaimed): a new one
   * is made on demand. */
  heap_prof = NULL;
  for (heap_t *h = heap_all; h != NULL; h = h->all_next) {
    if (h == keep || h == keep2) continue;
    /* Its superslabs are on the abandoned list now; its lock may have been
     * held by a thread that does not exist here. */
    pthread_mutex_init(&h->lock, NULL);
    bool pooled = false;
    for (heap_t *p = heap_pool; p != NULL; p = p->pool_next) pooled |= p == h;
    if (!pooled) h->dead = true;
    for (unsigned k = 0; k < SS_KINDS; k++) h->owned[k].head = h->owned[k].tail = NULL;
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

/* Give s a free list: what other threads freed first (reuse before
 * touching new memory), then fresh blocks. False if s has none left. */
static bool heap_slab_refill(slab_t *s) {
  if (ss_slab_collect(s) != 0) return true;
  if (s->carved < s->capacity) {
    ss_slab_carve(s);
    return true;
  }
  return false;
}

/* Does a waiting slab have blocks again (freed by us or by others)? */
static bool heap_slab_ready(slab_t *s) { return s->free != NULL || remote_has_frees(s); }

/* The next slab for class cls once the current one is exhausted: a waiting
 * slab that got blocks back (oldest first), a partial one; else the waiting
 * slabs past the limit are marked full (unless blocks arrived meanwhile)
 * and a slab is taken from a superslab. NULL when out of memory. */
static slab_t *heap_next_slab(heap_t *h, unsigned cls) {
  for (slab_t *w = h->slabs[HEAP_WAITING][cls].head; w != NULL; w = w->next)
    if (heap_slab_ready(w)) {
      heap_list_remove(h, w);
      return w;
    }
  slab_t *s = heap_list_pop(h, HEAP_PARTIAL, cls);
  if (s != NULL) return s;
  /* Fewer big slabs wait: each holds megabytes. */
  unsigned max = sc_kind(cls) == SC_KIND_SMALL ? HEAP_WAITING_MAX : 1;
  while (h->waiting_n[cls] > max) {
    slab_t *w = heap_list_pop(h, HEAP_WAITING, cls);
    /* It waited long enough: from now on blocks freed into it reach us
     * through a local free or the delayed list (remote.c). */
    if (!remote_mark_full(w, h)) return w; /* frees arrived first */
  }
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
  pthread_mutex_lock(&heap_prof_lock);
  if (heap_prof == NULL) {
    heap_prof = heap_new();
    if (heap_prof != NULL) heap_prof->tid = (uintptr_t)heap_prof | HAK_TID_PROF_BIT;
  }
  void *p = NULL;
  if (heap_prof != NULL) {
    heap_t *self = heap_front.self;
    heap_front.self = heap_prof; /* for the refill path's "is it mine" checks */
    p = heap_alloc_class(heap_prof, cls);
    heap_front.self = self;
  }
  pthread_mutex_unlock(&heap_prof_lock);
  prof_alloc(p, sc_size[cls]);
  return p;
}

/* Profiling: move s's free list (its carved blocks not in use) into the
 * class's batch descriptor and pop from it. The sampler is told the bytes
 * the batch serves; if its sample falls inside, the batch stops just
 * before it and the class's next refill takes the sample. */
static void *heap_shadow_fill(heap_t *h, unsigned cls, slab_t *s) {
  slab_t *sh = &h->shadow[cls];
  unsigned n = (unsigned)(s->carved - s->used);
  uint64_t at = prof_batch((size_t)n * s->bsize);
  unsigned k = at == UINT64_MAX ? n : (unsigned)(at / s->bsize);
  if (k == 0) {
    void *p = heap_prof_sample(cls);
    if (p != NULL) return p;
    k = n; /* no profiling heap to be had: this one goes unsampled */
  }
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
static void heap_shadow_widen(slab_t *s) {
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
static void heap_shadow_return(heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    slab_t *sh = &h->shadow[c], *s = h->cur[c];
    block_t *b = sh->free;
    sh->free = NULL;
    if (b == NULL || s == &heap_empty_slab || !slab_holds(s, b)) continue;
    unsigned n = 1;
    block_t *last = b;
    for (block_t *nx; (nx = blk_next(last)) != NULL && slab_holds(s, nx) && n < s->capacity; last = nx) n++;
    blk_set_next(last, s->free);
    s->free = b;
    s->used = (uint16_t)(s->used - n);
  }
}

void *heap_alloc_refill(heap_t *h, unsigned cls) {
  HAK_STAT(ST_REFILL);
  heap_maintain(h);
  if (h->shadow != NULL) {
    slab_t *sh = &h->shadow[cls];
    /* The pop failed: the batch is empty, or its head was overwritten. */
    if (HAK_UNLIKELY(sh->free != NULL)) {
      report_error("malloc", sh->free, "heap corruption detected at");
      sh->free = NULL; /* its blocks stay counted in use: never handed out twice */
    }
    if (h->prof_due & ((uint64_t)1 << cls)) {
      h->prof_due &= ~((uint64_t)1 << cls);
      void *p = heap_prof_sample(cls);
      if (p != NULL) return p;
    }
  }
  slab_t *s = h->cur[cls];
  for (;;) {
    if (s != &heap_empty_slab) {
      if (HAK_UNLIKELY(s->free != NULL && !slab_holds(s, s->free))) heap_list_corrupt(s);
      if (s->free != NULL || heap_slab_refill(s)) {
        if (HAK_LIKELY(slab_holds(s, s->free))) break;
        heap_list_corrupt(s);
        continue;
      }
      /* Exhausted: it waits (unmarked) for blocks to come back, and the
       * class moves on. */
      HAK_STAT(ST_WAITING);
      heap_list_push(h, HEAP_WAITING, s);
    }
    s = heap_next_slab(h, cls);
    if (s == NULL) {
      heap_set_current(h, cls, &heap_empty_slab);
      errno = ENOMEM;
      return NULL;
    }
    heap_set_current(h, cls, s);
  }
  if (h->cur[cls] != s) heap_set_current(h, cls, s);
  if (h->shadow != NULL) {
    heap_shadow_widen(s);
    return heap_shadow_fill(h, cls, s);
  }
  block_t *b = slab_pop(s, s->free);
  /* The heap is consistent again: a safe point — except for the shared
   * exit and profiling heaps, whose locks are held here (pthread_create
   * allocates). */
  if (!(h->tid & (HAK_TID_EXIT_BIT | HAK_TID_PROF_BIT))) decay_poll();
  return b;
}

/* ---- thread exit --------------------------------------------------------- */

static void heap_abandon_all(heap_t *h) {
  for (unsigned k = 0; k < SS_KINDS; k++) {
    superslab_t *ss = h->owned[k].head;
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
  pthread_mutex_lock(&h->lock);
  heap_abandon_all(h);
  heap_reset(h);
  pthread_mutex_unlock(&h->lock);
  pthread_mutex_lock(&heap_pool_lock);
  h->pool_next = heap_pool;
  heap_pool = h;
  pthread_mutex_unlock(&heap_pool_lock);
}

static void heap_thread_exit(void *arg) {
  heap_t *h = arg;
  if (h == NULL || heap_front.self != h) return;
  if (h->shadow != NULL) heap_shadow_return(h);
  heap_xc_flush(h);
  heap_flush_remote(h);
  heap_drain_delayed(h, true);
  stats_thread_merge();
  for (unsigned b = 0; b < HAK_DIRECT_N; b++) heap_front.direct[b] = &heap_empty_slab;
  heap_front.heap = NULL;
  heap_front.self = NULL;
  heap_front.exited = true;
  heap_retire(h);
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
static pthread_mutex_t heap_exit_lock = PTHREAD_MUTEX_INITIALIZER;

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
  pthread_mutex_lock(&h->lock);
  heap_abandon_all(h);
  heap_reset(h);
  pthread_mutex_unlock(&h->lock);
}

/* Give the exit heap's superslabs back; false if its lock was busy (not
 * blocking) and nothing was done. */
static bool heap_exit_giveback(bool blocking) {
  if (blocking)
    pthread_mutex_lock(&heap_exit_lock);
  else if (pthread_mutex_trylock(&heap_exit_lock) != 0)
    return false;
  heap_t *h = heap_exit_heap;
  if (h != NULL) heap_exit_giveback_locked(h);
  pthread_mutex_unlock(&heap_exit_lock);
  return true;
}

void heap_exit_release(void) {
  if (__atomic_load_n(&heap_exit_heap, __ATOMIC_ACQUIRE) != NULL) heap_exit_giveback(true);
}

void *heap_exit_alloc(unsigned cls) {
  pthread_mutex_lock(&heap_exit_lock);
  if (heap_exit_heap == NULL) {
    heap_t *n = heap_new();
    if (n != NULL) {
      n->tid = (uintptr_t)n | HAK_TID_EXIT_BIT;
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
      for (unsigned k = 0; k < SS_KINDS; k++) owns |= h->owned[k].head != NULL;
      if (owns) {
        heap_due(h, os_now_ms() + opt.purge_delay_ms);
        decay_note_idle(DECAY_BG_START_BYTES);
      }
    }
  }
  pthread_mutex_unlock(&heap_exit_lock);
  if (p == NULL) errno = ENOMEM;
  return p;
}

void heap_lock_all(void) {
  pthread_mutex_lock(&heap_exit_lock);
  pthread_mutex_lock(&heap_prof_lock);
  pthread_mutex_lock(&heap_pool_lock);
}
void heap_unlock_all(void) {
  pthread_mutex_unlock(&heap_pool_lock);
  pthread_mutex_unlock(&heap_prof_lock);
  pthread_mutex_unlock(&heap_exit_lock);
}

/* ---- invariants (the debug build runs these at every slow path) ---------- */

#define HEAP_CHECK(e) ((e) ? (void)0 : os_assert_fail(#e, __FILE__, __LINE__))

void slab_check(const heap_t *h, const slab_t *s) {
  if (s == &heap_empty_slab) return;
  uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
  HEAP_CHECK((owner & ~OWNER_FULL) == h->tid);
  HEAP_CHECK(s->carved <= s->capacity && s->used <= s->carved);
  HEAP_CHECK(s->span == (uint64_t)s->capacity * s->bsize && s->bsize == sc_size[s->cls]);
  HEAP_CHECK(ss_of(s->area) == ss_of(s) && s->capacity > 0);
  /* Every block on the free list lies in the area and starts a block; the
   * list holds exactly the carved blocks not in use. */
  unsigned n = 0;
  for (const block_t *b = s->free; b != NULL; b = blk_next(b)) {
    /* A link outside the area was overwritten by the program (a use after
     * free), not broken by hakmem: the pop reports it as such. */
    if (!slab_holds(s, b)) return;
    HEAP_CHECK(n < s->carved);
    HEAP_CHECK(slab_is_block_start(s, b));
    n++;
  }
  HEAP_CHECK(n == (unsigned)(s->carved - s->used));
  if (owner & OWNER_FULL) HEAP_CHECK(s->free == NULL && s->carved == s->capacity);
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
      for (const slab_t *s = h->slabs[l][c].head; s != NULL; prev = s, s = s->next) {
        HEAP_CHECK(s->on_list == l + 1 && s->cls == c && s->prev == prev && s != cur);
        uintptr_t o = atomic_load_explicit(&s->owner, memory_order_relaxed);
        HEAP_CHECK((o & ~OWNER_FULL) == h->tid && !(l == HEAP_WAITING && (o & OWNER_FULL)));
        HEAP_CHECK(++n <= 1u << 20);
      }
      HEAP_CHECK(h->slabs[l][c].tail == prev);
      if (l == HEAP_WAITING) HEAP_CHECK(n == h->waiting_n[c]);
    }
  }
  pthread_mutex_lock((pthread_mutex_t *)&h->lock);
  for (unsigned k = 0; k < SS_KINDS; k++) {
    const superslab_t *prev = NULL;
    for (const superslab_t *ss = h->owned[k].head; ss != NULL; prev = ss, ss = ss->next) {
      HEAP_CHECK(ss_heap(ss) == h && ss->listed && ss->kind == k && ss->prev == prev);
      /* A slab is free in the mask exactly when nobody owns it. */
      for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
        uintptr_t o = atomic_load_explicit(&ss->slabs[i].owner, memory_order_relaxed);
        HEAP_CHECK(((ss->free_mask >> i) & 1) == (o == OWNER_UNUSED));
        if (o != OWNER_UNUSED) HEAP_CHECK((o & ~OWNER_FULL) == h->tid);
      }
    }
    HEAP_CHECK(h->owned[k].tail == prev);
  }
  pthread_mutex_unlock((pthread_mutex_t *)&h->lock);
}

/* ---- read-only accessors for the statistics' residency walk (stats.c) ----
 * Kept at the end of the file: they read, never change, what is above.
 * Racy reads of other threads' heaps, as heap_idle_bytes makes: heap
 * structs are pooled, never unmapped, so the memory stays valid. */

/* Visit the memory of every heap struct (carved from 64 KiB chunks) and of
 * every profiling batch table; returns the bytes those chunks and tables
 * map. Chunks are not listed: they are counted from the heaps carved out
 * of them (each chunk holds the same number; only the newest is partly
 * used). */
size_t heap_for_each_meta(void (*fn)(const void *p, size_t len, void *arg), void *arg) {
  size_t sz = align_up(sizeof(heap_t), 64), per = (64 * 1024) / sz, n = 0, mapped = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    n++;
    fn(h, sizeof *h, arg);
    slab_t *sh = __atomic_load_n(&h->shadow_mem, __ATOMIC_RELAXED);
    if (sh != NULL) {
      size_t len = align_up(HAK_NCLASS * sizeof(slab_t), os_page_size);
      fn(sh, len, arg);
      mapped += len;
    }
  }
  return mapped + (per ? (n + per - 1) / per : 0) * (64 * 1024);
}

/* Bytes of blocks waiting in the threads' caches of pending remote frees
 * (remote.h): freed by the program, still counted in their slabs' used. */
size_t heap_remote_pending_bytes(void) {
  size_t total = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    uint32_t busy = __atomic_load_n(&h->rcache.busy, __ATOMIC_RELAXED);
    for (; busy != 0; busy &= busy - 1) {
      const remote_pending_t *w = &h->rcache.way[__builtin_ctz(busy)];
      const slab_t *s = __atomic_load_n(&w->slab, __ATOMIC_RELAXED);
      if (s != NULL) total += (size_t)__atomic_load_n(&w->n, __ATOMIC_RELAXED) * s->bsize;
    }
  }
  return total;
}
