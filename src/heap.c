/*
 * heap.c — per-thread heaps: refill, slab lists, purge, thread start/exit,
 * abandonment and adoption. Everything here is the cold side of malloc and
 * free (see heap.h for the contract).
 */
#include "heap.h"
#include "foreign.h"
#include "large.h"
#include "options.h"
#include "os.h"
#include "remote.h"
#include "sizeclass.h"
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* The sentinel every empty table entry points at: its free list is always
 * empty, so a lookup that finds it falls into the slow path with one test. */
hak_slab_t hak_empty_slab = {.owner = OWNER_UNUSED};

#if !(defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__aarch64__)))
HAK_TLS char hak_tid_anchor; /* its address is the thread id (internal.h) */
#endif

HAK_TLS hak_front_t hak_front = {.direct = {[0 ... HAK_DIRECT_N - 1] = &hak_empty_slab},
                                 .heap = NULL,
                                 .self = NULL};

static pthread_mutex_t heap_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t *heap_pool;     /* heaps of exited threads */
static uint8_t *heap_chunk;       /* carving area for new heap structs */
static size_t heap_chunk_left;
static pthread_key_t heap_key;

static void heap_thread_exit(void *arg);

void heap_process_init(void) { pthread_key_create(&heap_key, heap_thread_exit); }

static void heap_reset(hak_heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    h->cur[c] = &hak_empty_slab;
    h->partial[c] = NULL;
  }
  for (unsigned k = 0; k < SS_KINDS; k++) h->ss_head[k] = h->ss_tail[k] = NULL;
  h->next_purge_ms = 0;
  h->tick = 0;
  h->has_dirty = false;
  h->dirty_bytes = 0;
  h->pool_next = NULL;
}

static hak_heap_t *heap_new(void) {
  hak_heap_t *h = NULL;
  pthread_mutex_lock(&heap_pool_lock);
  if (heap_pool != NULL) {
    h = heap_pool;
    heap_pool = h->pool_next;
  } else {
    size_t sz = hak_align_up(sizeof(hak_heap_t), 64);
    if (heap_chunk_left < sz) {
      size_t chunk = 64 * 1024;
      uint8_t *c = os_map(chunk);
      if (c != NULL) {
        heap_chunk = c;
        heap_chunk_left = chunk;
      }
    }
    if (heap_chunk_left >= sz) {
      h = (hak_heap_t *)heap_chunk;
      heap_chunk += sz;
      heap_chunk_left -= sz;
    }
  }
  pthread_mutex_unlock(&heap_pool_lock);
  if (h == NULL) return NULL;
  heap_reset(h);
  atomic_store_explicit(&h->delayed, 0, memory_order_release);
  return h;
}

hak_heap_t *heap_thread_init(void) {
  hak_heap_t *h = heap_new();
  if (h == NULL) return NULL;
  h->tid = HAK_THREAD_ID() | (hak_opt.prof ? HAK_TID_PROF_BIT : 0);
  hak_front.self = h;
  hak_front.heap = hak_opt.prof ? NULL : h;
  /* The key's destructor runs heap_thread_exit when the thread ends; the
   * first 32 keys live inside the thread descriptor, so this never calls
   * malloc. */
  pthread_setspecific(heap_key, h);
  return h;
}

/* ---- slab lists ---------------------------------------------------------- */

static void heap_set_current(hak_heap_t *h, unsigned cls, hak_slab_t *s) {
  h->cur[cls] = s;
  /* The direct table belongs to the thread's own heap; the profiler (heap
   * NULL) and the exit heap must keep the fast path closed. */
  if (h != hak_front.heap) return;
  for (unsigned b = sc_bucket_lo[cls]; b <= sc_bucket_hi[cls]; b++) hak_front.direct[b] = s;
}

static void partial_push(hak_heap_t *h, hak_slab_t *s) {
  hak_slab_t **head = &h->partial[s->cls];
  s->in_partial = 1;
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}

static void partial_remove(hak_heap_t *h, hak_slab_t *s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    h->partial[s->cls] = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
  s->in_partial = 0;
}

static hak_slab_t *partial_pop(hak_heap_t *h, unsigned cls) {
  hak_slab_t *s = h->partial[cls];
  if (s) partial_remove(h, s);
  return s;
}

/* ---- superslab lists ----------------------------------------------------- */

static void ss_list_remove(hak_heap_t *h, hak_superslab_t *ss) {
  unsigned k = ss->kind;
  if (ss->prev)
    ss->prev->next = ss->next;
  else
    h->ss_head[k] = ss->next;
  if (ss->next)
    ss->next->prev = ss->prev;
  else
    h->ss_tail[k] = ss->prev;
  ss->next = ss->prev = NULL;
  ss->listed = 0;
}

static void ss_list_push_front(hak_heap_t *h, hak_superslab_t *ss) {
  unsigned k = ss->kind;
  ss->prev = NULL;
  ss->next = h->ss_head[k];
  if (ss->next)
    ss->next->prev = ss;
  else
    h->ss_tail[k] = ss;
  h->ss_head[k] = ss;
  ss->listed = 1;
}

static void ss_list_push_back(hak_heap_t *h, hak_superslab_t *ss) {
  unsigned k = ss->kind;
  ss->next = NULL;
  ss->prev = h->ss_tail[k];
  if (ss->prev)
    ss->prev->next = ss;
  else
    h->ss_head[k] = ss;
  h->ss_tail[k] = ss;
  ss->listed = 1;
}

#define HEAP_DIRTY_BUDGET ((size_t)8 << 20)
static void heap_purge(hak_heap_t *h, uint64_t now, bool force);

/* A slab of h becomes free again inside its superslab. */
static void heap_release_slab(hak_heap_t *h, hak_slab_t *s) {
  hak_superslab_t *ss = ss_of_slab(s);
  uint64_t bit = (uint64_t)1 << s->index;
  atomic_store_explicit(&s->owner, OWNER_UNUSED, memory_order_release);
  s->free = NULL;
  if (ss->free_mask == 0 && ss->listed) {
    /* It had no free slab, so it sat behind the ones that do. */
    ss_list_remove(h, ss);
    ss_list_push_front(h, ss);
  }
  ss->free_mask |= bit;
  if (ss->dirty_mask == 0) ss->dirty_since_ms = os_now_ms();
  ss->dirty_mask |= bit;
  h->has_dirty = true;
  /* Dirty budget: a thread that frees a lot and then goes quiet makes no
   * slow-path call that would purge after the delay, so beyond this much
   * released memory purge now (the delay still spares small churn). */
  h->dirty_bytes += (size_t)1 << ss->slab_shift;
  /* (Not while the thread exits: heap_abandon_all is walking the lists.) */
  if (h->dirty_bytes > HEAP_DIRTY_BUDGET && hak_front.self == h) heap_purge(h, os_now_ms(), true);
}

static hak_slab_t *heap_take_slab(hak_heap_t *h, hak_superslab_t *ss, unsigned cls) {
  unsigned idx = (unsigned)__builtin_ctzll(ss->free_mask);
  hak_slab_t *s = ss_slab_init(ss, idx, cls, h->tid);
  if (ss->free_mask == 0) {
    ss_list_remove(h, ss);
    ss_list_push_back(h, ss);
  }
  return s;
}

/* Take over a superslab whose thread exited: collect what other threads
 * freed into it and sort its slabs into h's lists. */
static void heap_adopt(hak_heap_t *h, hak_superslab_t *ss) {
  ss_set_heap(ss, h);
  for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
    if (ss->free_mask & ((uint64_t)1 << i)) continue;
    hak_slab_t *s = &ss->slabs[i];
    /* Strip the full mark too: the slab starts its new life unmarked. */
    remote_clear_mark(s);
    s->in_partial = 0;
    atomic_store_explicit(&s->owner, h->tid, memory_order_release);
    remote_collect(s);
    if (s->used == 0) {
      heap_release_slab(h, s);
    } else if (s->free != NULL || s->carved < s->capacity) {
      partial_push(h, s);
    } else if (!remote_mark_full(s, h)) {
      remote_collect(s);
      partial_push(h, s);
    }
  }
  if (ss->free_mask)
    ss_list_push_front(h, ss);
  else
    ss_list_push_back(h, ss);
}

static void heap_purge(hak_heap_t *h, uint64_t now, bool force);

static hak_slab_t *heap_new_slab(hak_heap_t *h, unsigned cls) {
  unsigned kind = sc_kind(cls);
  for (int adopted = 0;; adopted++) {
    hak_superslab_t *ss = h->ss_head[kind];
    if (ss != NULL && ss->free_mask != 0) return heap_take_slab(h, ss, cls);
    if (adopted < 4 && (ss = ss_abandon_pop(kind)) != NULL) {
      heap_adopt(h, ss);
      hak_slab_t *p = partial_pop(h, cls);
      if (p != NULL) return p;
      continue;
    }
    ss = ss_acquire(kind);
    if (ss == NULL) {
      /* Out of memory (or address space, under RLIMIT_AS): give back
       * everything idle — our free superslabs, the caches, idle large
       * spans — and try once more. */
      heap_purge(h, os_now_ms(), true);
      ss_abandon_collect(true);
      ss_cache_unmap_all();
      large_purge(0, true);
      ss = ss_acquire(kind);
      if (ss == NULL) return NULL;
    }
    ss_set_heap(ss, h);
    ss_list_push_front(h, ss);
    return heap_take_slab(h, ss, cls);
  }
}

/* ---- freeing on the owner's slow side ------------------------------------ */

void heap_slab_emptied(hak_heap_t *h, hak_slab_t *s) {
  if (s == h->cur[s->cls]) return; /* keep the current slab: it is reused next */
  if (s->in_partial) partial_remove(h, s);
  heap_release_slab(h, s);
}

void heap_free_local(hak_heap_t *h, hak_slab_t *s, hak_block_t *b, uintptr_t owner) {
  if (HAK_UNLIKELY(b == s->free)) { /* the cheap double-free check */
    hak_report("free", b, "double free of");
    return;
  }
  blk_set_next(b, s->free);
  s->free = b;
  s->used--;
  if (owner & OWNER_FULL) {
    remote_unmark_full(s, h);
    if (s->used == 0)
      heap_release_slab(h, s);
    else
      partial_push(h, s);
  } else if (s->used == 0) {
    heap_slab_emptied(h, s);
  }
}

/* Blocks other threads freed into our full slabs. */
static void heap_drain_delayed(hak_heap_t *h, bool close) {
  hak_block_t *b = remote_delayed_take(h, close);
  while (b != NULL) {
    hak_block_t *next = blk_next(b);
    hak_slab_t *s = ss_slab_of(b, ss_of(b)->slab_shift);
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    if ((owner & ~OWNER_FULL) == h->tid)
      heap_free_local(h, s, b, owner);
    else
      remote_free(s, b); /* the slab changed hands meanwhile */
    b = next;
  }
}

/* ---- purge --------------------------------------------------------------- */

static void heap_purge(hak_heap_t *h, uint64_t now, bool force) {
  uint64_t delay = hak_opt.purge_delay_ms;
  bool dirty_left = false;
  for (unsigned k = 0; k < SS_KINDS; k++) {
    hak_superslab_t *ss = h->ss_head[k];
    while (ss != NULL && ss->free_mask != 0) { /* full ones are at the back */
      hak_superslab_t *next = ss->next;
      bool idle = force || now - ss->dirty_since_ms >= delay;
      if (ss->free_mask == ss_all_mask(ss) && idle) {
        ss_list_remove(h, ss);
        ss_set_heap(ss, NULL);
        ss_release(ss);
      } else if (ss->dirty_mask) {
        ss_purge_slabs(ss, now, delay, force);
        if (ss->dirty_mask) dirty_left = true;
      }
      ss = next;
    }
  }
  h->has_dirty = dirty_left;
  if (!dirty_left) h->dirty_bytes = 0;
  h->next_purge_ms = now + (delay > 1 ? delay / 2 : 1);
}

/* Cheap housekeeping on every refill: drain the delayed list; every 16th
 * call look at the clock and purge what has been idle long enough. */
static void heap_maintain(hak_heap_t *h) {
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != 0) heap_drain_delayed(h, false);
  if ((++h->tick & 15) == 0 && h->has_dirty) {
    uint64_t now = os_now_ms();
    if (now >= h->next_purge_ms) heap_purge(h, now, false);
  }
}

void heap_collect(bool force) {
  hak_heap_t *h = hak_front.self;
  if (h == NULL) return;
  heap_drain_delayed(h, false);
  heap_purge(h, os_now_ms(), force);
}

/* ---- refill -------------------------------------------------------------- */

void *heap_alloc_refill(hak_heap_t *h, unsigned cls) {
  HAK_STAT(ST_REFILL);
  heap_maintain(h);
  hak_slab_t *s = h->cur[cls];
  for (;;) {
    if (s != &hak_empty_slab) {
      if (s->free == NULL) {
        if (s->carved < s->capacity) {
          ss_slab_carve(s);
        } else if (remote_collect(s) == 0) {
          /* Exhausted: it leaves the current position marked full, and
           * comes back through a free (local, delayed or at adoption). */
          if (remote_mark_full(s, h)) s = &hak_empty_slab;
          continue;
        }
      }
      if (s->free != NULL) break;
    }
    s = partial_pop(h, cls);
    if (s != NULL) {
      remote_collect(s);
    } else {
      s = heap_new_slab(h, cls);
      if (s == NULL) {
        heap_set_current(h, cls, &hak_empty_slab);
        errno = ENOMEM;
        return NULL;
      }
      if (s->in_partial) partial_remove(h, s);
    }
    heap_set_current(h, cls, s);
  }
  if (h->cur[cls] != s) heap_set_current(h, cls, s);
  return slab_pop(s, s->free);
}

/* ---- thread exit --------------------------------------------------------- */

static void heap_abandon_all(hak_heap_t *h) {
  for (unsigned k = 0; k < SS_KINDS; k++) {
    hak_superslab_t *ss = h->ss_head[k];
    while (ss != NULL) {
      hak_superslab_t *next = ss->next;
      for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
        if (ss->free_mask & ((uint64_t)1 << i)) continue;
        hak_slab_t *s = &ss->slabs[i];
        remote_clear_mark(s);
        remote_collect(s);
        s->in_partial = 0;
        s->next = s->prev = NULL;
        if (s->used == 0) {
          heap_release_slab(h, s);
        } else {
          atomic_store_explicit(&s->owner, OWNER_ABANDONED, memory_order_release);
        }
      }
      ss_list_remove(h, ss);
      /* Even a wholly free superslab goes to the abandoned list, still
       * committed: threads come and go in bursts, and the next one adopts it
       * warm instead of faulting its pages in again. The list decommits
       * what stays unadopted past the purge delay. */
      ss_abandon_push(ss);
      ss = next;
    }
  }
}

static void heap_thread_exit(void *arg) {
  hak_heap_t *h = arg;
  if (h == NULL || hak_front.self != h) return;
  heap_drain_delayed(h, true);
  stats_thread_merge();
  for (unsigned b = 0; b < HAK_DIRECT_N; b++) hak_front.direct[b] = &hak_empty_slab;
  hak_front.heap = NULL;
  hak_front.self = NULL;
  hak_front.exited = true;
  heap_abandon_all(h);
  heap_reset(h);
  pthread_mutex_lock(&heap_pool_lock);
  h->pool_next = heap_pool;
  heap_pool = h;
  pthread_mutex_unlock(&heap_pool_lock);
}

static pthread_mutex_t heap_exit_lock = PTHREAD_MUTEX_INITIALIZER;
static hak_heap_t *heap_exit_heap;

hak_heap_t *heap_shared_exit_heap(void) { return heap_exit_heap; }

void *heap_exit_alloc(unsigned cls) {
  pthread_mutex_lock(&heap_exit_lock);
  if (heap_exit_heap == NULL) {
    heap_exit_heap = heap_new();
    if (heap_exit_heap != NULL) heap_exit_heap->tid = (uintptr_t)heap_exit_heap | HAK_TID_EXIT_BIT;
  }
  hak_heap_t *h = heap_exit_heap;
  void *p = NULL;
  if (h != NULL) {
    hak_front.self = h; /* for the refill path's "is it mine" checks */
    hak_slab_t *s = h->cur[cls];
    p = s->free != NULL ? slab_pop(s, s->free) : heap_alloc_refill(h, cls);
    hak_front.self = NULL;
  }
  pthread_mutex_unlock(&heap_exit_lock);
  if (p == NULL) errno = ENOMEM;
  return p;
}

void heap_lock_all(void) {
  pthread_mutex_lock(&heap_exit_lock);
  pthread_mutex_lock(&heap_pool_lock);
}
void heap_unlock_all(void) {
  pthread_mutex_unlock(&heap_pool_lock);
  pthread_mutex_unlock(&heap_exit_lock);
}
