/*
 * superslab.c — acquiring, carving, purging and recycling superslabs.
 *
 * Owns: the empty-superslab cache and the abandoned lists (each behind its
 * own mutex: these are cold paths, taken once per 4 MiB). Promises: see
 * superslab.h. May call: lock, os, ownmap, sizeclass, options, decay, report,
 * large (a region of the arenas' free spans to borrow, and to give back).
 */
#include "superslab.h"
#include "decay.h"
#include "large.h"
#include "lock.h"
#include "options.h"
#include "remote.h"
#include "os.h"
#include "ownmap.h"
#include "sizeclass.h"
#include "report.h"
#include "stats.h"

#include <string.h>

#define SS_CACHE_MAX ((unsigned)opt.ss_cache)

uintptr_t ss_secret = 0x9E3779B97F4A7C15ull; /* replaced by a random value at start-up */

#if HAK_SECURE
/* Secure layout inside the header slab: the header (its tfree[] and
 * descriptors, 10.1 KiB), then a guard page. A superslab's mapping also has one more page, past its 4 MiB,
 * kept inaccessible: an overflow off the last block faults there, and no
 * slab gives up room for it (the 1 MiB class keeps three blocks of a big
 * slab, aligned to 1 MiB). It costs address space only: the next superslab
 * starts at the following 4 MiB boundary. */
#define SS_GUARD_OFFSET ((size_t)12288)
_Static_assert(sizeof(superslab_t) <= SS_GUARD_OFFSET, "the header ends before the guard page");
#define SS_MAP_SIZE (HAK_SS_SIZE + os_page_size)
#else
#define SS_MAP_SIZE HAK_SS_SIZE
#endif

static hak_lock_t ss_cache_lock = LOCK_INIT;
/* Registry of live superslabs, for statistics only: touched once per 4 MiB
 * acquired or released. */
static hak_lock_t ss_registry_lock = LOCK_INIT;
static superslab_t *ss_registry, *ss_registry_tail; /* live superslabs, newest first */
static size_t ss_live, ss_abandoned_n;
static superslab_t *ss_cache;      /* decommitted empty superslabs */
static unsigned ss_cache_count;
static hak_lock_t ss_abandon_lock = LOCK_INIT;
static superslab_t *ss_abandoned[SS_KINDS];
static uint32_t ss_abandon_adopted[SS_KINDS]; /* adoptions from each list */
/* Set by a remote free into an abandoned slab, cleared by the pass that
 * reclaims it: the purge thread keeps visiting the list while frees come
 * back to it, and sleeps once they stop. */
static _Atomic int ss_abandon_pending;
/* Free slabs on the abandoned list beyond which those passed over wait a
 * quarter of the purge delay (ss_abandon_purge_locked): about what two
 * exited threads of a small program leave. */
#define SS_ABANDON_FAST_BYTES ((size_t)2 << 20)

/* The slab geometry of a kind: its slab size and which slabs hold blocks. */
static void ss_set_geometry(superslab_t *ss, unsigned kind) {
  ss->kind = (uint8_t)kind;
  ss->slab_shift = kind == SS_KIND_SMALL    ? HAK_SMALL_SLAB_SHIFT
                   : kind == SS_KIND_MEDIUM ? HAK_MEDIUM_SLAB_SHIFT
                   : kind == SS_KIND_WIDE   ? HAK_WIDE_SLAB_SHIFT
                                            : HAK_BIG_SLAB_SHIFT;
  ss->nslabs = (uint8_t)(HAK_SS_SIZE >> ss->slab_shift);
  ss->first_slab = kind == SS_KIND_BIG ? 0 : 1;
}

/* Slab i's descriptor as a free slab's that never held a block (what
 * ss_slab_init does not set). */
static void ss_slab_clear(slab_t *s, unsigned i) {
  atomic_store_explicit(&s->owner, OWNER_UNUSED, memory_order_relaxed);
  atomic_store_explicit(slab_tf(s), 0, memory_order_relaxed);
  s->index = i;
  s->free = NULL;
  s->cold = NULL;
  s->used = 0;
  s->span = 0;
}

/* fresh: ss comes straight from mmap, so every descriptor is already zero,
 * which reads as a free slab (OWNER_UNUSED is 0; ss_slab_init sets the
 * rest). Writing them anyway dirtied the header's three pages in every
 * small superslab, two of them for slabs 31..63 that a thread using a few
 * classes never takes: 8 KiB per thread of a many-thread program. A cached
 * superslab's header was decommitted too, but an madvise that failed would
 * leave stale owners behind, so those are written. */
static void ss_header_init(superslab_t *ss, unsigned kind, bool fresh) {
  ss_set_geometry(ss, kind);
#if HAK_SECURE
  os_protect_none((uint8_t *)ss + SS_GUARD_OFFSET, os_page_size);
#endif
  ss->listed = 0;
  ss_set_heap(ss, NULL);
  ss->next = ss->prev = NULL;
  ss->free_mask = ss_all_mask(ss);
  ss->dirty_mask = 0;
  ss->last_free_ms = 0;
  for (unsigned i = 0; !fresh && i < ss->nslabs; i++) ss_slab_clear(&ss->slabs[i], i);
}

static void ss_decay_register(void);

static void ss_register(superslab_t *ss) {
  lock_acquire(&ss_registry_lock);
  ss_registry_dlist_push_front(&ss_registry, &ss_registry_tail, ss);
  ss_live++;
  lock_release(&ss_registry_lock);
  ownmap_set(ss, ss->slab_shift);
}

/* A region the arenas lent: it holds what their blocks left, so its header
 * is cleared to read as a fresh one's, and every slab is dirty (resident,
 * not zero: calloc clears what it hands out) and free since now, so that
 * the purge gives back what the heaps do not take a delay from here. */
static HAK_TEXT_COLD superslab_t *ss_acquire_lent(superslab_t *ss, unsigned kind, struct large_arena *lender) {
  ss_decay_register();
  ann_meta(ss, HAK_SS_SIZE); /* memcheck, ASan: the arenas' freed blocks lay here */
  memset(ss, 0, sizeof *ss);
  ann_no_roots(ss, sizeof *ss);
  ss_header_init(ss, kind, true);
  uint64_t now = os_now_ms();
  ss->lender = lender;
  ss->dirty_mask = ss->free_mask;
  ss->last_free_ms = now;
  for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
    ss->slabs[i].index = i;
    ss->slabs[i].freed_ms = now;
  }
  /* Between the header and the first block area no block lies (the rest
   * of slab 0, 512 KiB of a medium superslab; a big one's first MiB): its
   * pages go, as a fresh superslab never touches them. */
  size_t hdr = align_up(sizeof *ss, os_page_size),
         area = ((size_t)ss->first_slab << ss->slab_shift) + ss_area_offset(ss->first_slab);
  if (area > hdr) os_decommit((uint8_t *)ss + hdr, area - hdr);
  ss_register(ss);
  return ss;
}

HAK_TEXT_COLD superslab_t *ss_borrow(unsigned kind) {
  struct large_arena *lender;
  superslab_t *ss = large_lend_region(&lender);
  return ss != NULL ? ss_acquire_lent(ss, kind, lender) : NULL;
}

superslab_t *ss_acquire(unsigned kind) {
  superslab_t *ss = NULL;
  lock_acquire(&ss_cache_lock);
  if (ss_cache != NULL) {
    ss = ss_cache;
    ss_cache = ss->next;
    __atomic_store_n(&ss_cache_count, ss_cache_count - 1, __ATOMIC_RELAXED);
  }
  lock_release(&ss_cache_lock);
  bool fresh = ss == NULL;
  if (fresh) {
    ss = os_map_aligned(SS_MAP_SIZE, HAK_SS_SIZE);
    if (ss == NULL) return NULL;
    ss_decay_register(); /* from now on there may be something to purge */
#if HAK_SECURE
    os_protect_none((uint8_t *)ss + HAK_SS_SIZE, os_page_size); /* the end guard */
#endif
    ann_no_roots(ss, sizeof *ss); /* memcheck: descriptors point into blocks */
  }
  ss_header_init(ss, kind, fresh);
  ss->lender = NULL;
  ss_register(ss);
  return ss;
}

/* What ss would keep warm as a superslab of kind: each new slab is warm
 * where a warm old slab's blocks lay in it, and free since the newest of
 * those became free (the purge judges it by that). Old slabs under the
 * new first slab's blocks (the header's slab, or a big superslab's first
 * MiB) hold nothing the new geometry uses: from lo to hi. Slab sizes are
 * powers of two and the first area starts at a multiple of both, so an
 * old slab's area lies wholly below it or wholly past it. */
typedef struct ss_rekind_plan {
  uint64_t dirty;
  size_t kept, lost, lo, hi;
} ss_rekind_plan_t;
static HAK_TEXT_COLD void ss_rekind_plan(const superslab_t *ss, unsigned kind, ss_rekind_plan_t *p, uint64_t *freed) {
  superslab_t g;
  ss_set_geometry(&g, kind);
  size_t start = ((size_t)g.first_slab << g.slab_shift) + ss_area_offset(g.first_slab);
  *p = (ss_rekind_plan_t){.lo = SIZE_MAX};
  for (uint64_t m = ss->dirty_mask & ss->free_mask; m != 0; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    size_t a0 = ((size_t)i << ss->slab_shift) + ss_area_offset(i), a1 = (size_t)(i + 1) << ss->slab_shift;
    if (a1 <= start) {
      p->lost += a1 - a0;
      if (a0 < p->lo) p->lo = a0;
      p->hi = a1;
      continue;
    }
    p->kept += a1 - a0;
    for (size_t j = a0 >> g.slab_shift; j <= (a1 - 1) >> g.slab_shift; j++) {
      p->dirty |= (uint64_t)1 << j;
      if (freed != NULL && ss->slabs[i].freed_ms > freed[j]) freed[j] = ss->slabs[i].freed_ms;
    }
  }
}

HAK_TEXT_COLD size_t ss_rekind_gain(const superslab_t *ss, unsigned kind) {
  if (ss->free_mask != ss_all_mask(ss) || kind == ss->kind) return 0;
  ss_rekind_plan_t p;
  ss_rekind_plan(ss, kind, &p, NULL);
  /* Worth it while most of what is warm stays warm. */
  return p.kept >= p.lost ? p.kept : 0;
}

HAK_TEXT_COLD void ss_rekind(superslab_t *ss, unsigned kind) {
  HAK_ASSERT(ss->free_mask == ss_all_mask(ss) && kind != ss->kind);
  uint64_t freed[HAK_MAX_SLABS] = {0};
  ss_rekind_plan_t p;
  ss_rekind_plan(ss, kind, &p, freed);
  /* One call over the run; the free slabs between are decommitted or
   * untouched already. */
  if (p.lost != 0) os_decommit((uint8_t *)ss + p.lo, p.hi - p.lo);
  /* Under the registry lock: the statistics walk reads the geometry. */
  lock_acquire(&ss_registry_lock);
  ss_set_geometry(ss, kind);
  ss->free_mask = ss_all_mask(ss);
  ss->dirty_mask = p.dirty;
  ss->grow_mask = 0;
  for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
    slab_t *s = &ss->slabs[i];
    ss_slab_clear(s, i);
    __atomic_store_n(&s->gaps, 0, __ATOMIC_RELAXED);
    s->next = NULL;
    s->warm_kid = 0;
    s->warm_pages = 0;
    s->freed_ms = freed[i];
  }
  lock_release(&ss_registry_lock);
  ownmap_set(ss, ss->slab_shift);
}

void ss_release(superslab_t *ss) {
  HAK_ASSERT(ss->free_mask == ss_all_mask(ss));
  ownmap_set(ss, OWN_NONE);
  lock_acquire(&ss_registry_lock);
  ss_registry_dlist_remove(&ss_registry, &ss_registry_tail, ss);
  ss_live--;
  lock_release(&ss_registry_lock);
  if (ss->lender != NULL) {
    /* Back to the arena, cold: a cached superslab is decommitted whole too.
     * The lender is read first: the decommit zeroes the header. */
    struct large_arena *lender = ss->lender;
    os_decommit(ss, HAK_SS_SIZE);
    large_unlend_region(ss, lender);
    return;
  }
  bool keep = __atomic_load_n(&ss_cache_count, __ATOMIC_RELAXED) < SS_CACHE_MAX;
  if (keep) {
    /* Decommit before publishing: once in the cache another thread may take
     * it and hand out blocks, which a late madvise would wipe. Slab pages
     * already purged need only the header page to go. */
    if (ss->dirty_mask)
      os_decommit(ss, HAK_SS_SIZE);
    else
      os_decommit(ss, os_page_size * 2);
    lock_acquire(&ss_cache_lock);
    if (ss_cache_count < SS_CACHE_MAX) {
      ss->next = ss_cache;
      ss_cache = ss;
      __atomic_store_n(&ss_cache_count, ss_cache_count + 1, __ATOMIC_RELAXED);
      lock_release(&ss_cache_lock);
      return;
    }
    lock_release(&ss_cache_lock);
  }
  os_unmap(ss, SS_MAP_SIZE);
}

/* Cached superslabs are already decommitted; this gives their address
 * space back too (hak_collect(1), out of memory). */
void ss_cache_unmap_all(void) {
  lock_acquire(&ss_cache_lock);
  superslab_t *list = ss_cache;
  ss_cache = NULL;
  __atomic_store_n(&ss_cache_count, 0, __ATOMIC_RELAXED);
  lock_release(&ss_cache_lock);
  while (list) {
    superslab_t *n = list->next;
    os_unmap(list, SS_MAP_SIZE);
    list = n;
  }
}

/* Under ss_abandon_lock (which keeps adopters away, so this is the slabs'
 * owner for now): collect what other threads freed into an abandoned
 * superslab; slabs left with no block in use become free (dirty). */
static void ss_abandon_reclaim_locked(superslab_t *ss, uint64_t now) {
  slab_t *s;
  SS_FOR_EACH_USED(ss, s) {
    if (!remote_has_frees(s)) continue;
    ss_slab_clear_mark(s);
    ss_slab_collect(s);
    if (s->used != 0) continue;
    ss_slab_free(ss, s, now);
  }
}

/* Under ss_abandon_lock: take *link (an abandoned superslab) off its list.
 * Its next link is left for the caller (a walk may still need it). */
static superslab_t *ss_abandon_unlink_locked(superslab_t **link) {
  superslab_t *ss = *link;
  __atomic_store_n(link, ss->next, __ATOMIC_RELAXED);
  ss_abandoned_n--;
  ss->abandoned = 0;
  return ss;
}

/* Under ss_abandon_lock: a thread adopts *link. The count of adoptions of
 * its kind moves on, so the superslabs left on the list were passed over
 * (ss_abandon_purge_locked). */
static superslab_t *ss_abandon_adopt_locked(superslab_t **link) {
  superslab_t *ss = ss_abandon_unlink_locked(link);
  ss_abandon_adopted[ss->kind]++;
  return ss;
}

/* Under ss_abandon_lock: reclaim remote frees, decommit free slabs of
 * abandoned superslabs idle for the purge delay and release the wholly free
 * ones idle that long (everything idle if force). By time only: threads
 * come and go in bursts, and the next one adopts this memory warm. But a
 * superslab that adopters passed over (one of its kind was adopted since it
 * was abandoned) waits a quarter, once more than SS_ABANDON_FAST_BYTES
 * waits in all: it is more than the threads that come take (larson_16t: 15
 * of 19 superslabs abandoned at a time, 3-6 MiB of free slabs in them
 * against 1.2 MiB live). A program that starts a thread now and then, with
 * none adopting in between, finds its predecessor's pages still warm (a
 * quarter for all of it faulted 19x the pages in and took 1.8x the time
 * there: a thread every 40 ms allocating 4 MiB). */
static uint64_t ss_abandon_purge_locked(uint64_t now, bool force) {
  superslab_t *release = NULL;
  uint64_t delay = opt.purge_delay_ms, next = UINT64_MAX;
  /* Frees are still coming back: look again soon to reclaim them. */
  if (atomic_exchange_explicit(&ss_abandon_pending, 0, memory_order_relaxed)) next = now + delay / 4 + 1;
  size_t dirty = 0;
  for (unsigned k = 0; k < SS_KINDS; k++) {
    for (superslab_t *ss = ss_abandoned[k]; ss != NULL; ss = ss->next) {
      ss_abandon_reclaim_locked(ss, now);
      dirty += ss_dirty_bytes(ss);
    }
  }
  bool fast = dirty > SS_ABANDON_FAST_BYTES;
  for (unsigned k = 0; k < SS_KINDS; k++) {
    superslab_t **link = &ss_abandoned[k];
    while (*link != NULL) {
      superslab_t *ss = *link;
      size_t purged;
      bool passed = ss->abandon_seq != ss_abandon_adopted[k];
      ss_purge_rule_t r = {.now_ms = now, .delay_ms = fast && passed ? delay / 4 : delay, .force = force};
      if (ss_purge_step(ss, &r, &next, &purged)) {
        ss_abandon_unlink_locked(link);
        ss->next = release;
        release = ss;
        continue;
      }
      decay_count(purged);
      link = &ss->next;
    }
  }
  while (release != NULL) {
    superslab_t *n = release->next;
    decay_count(ss_dirty_bytes(release));
    ss_release(release); /* takes the registry and cache locks, never nested */
    release = n;
  }
  return next;
}

/* Under ss_abandon_lock: ss (no heap any more) joins its kind's list. */
static void ss_abandon_link_locked(superslab_t *ss) {
  ss_set_heap(ss, NULL);
  ss->listed = 0;
  ss->abandoned = 1;
  ss->abandon_seq = ss_abandon_adopted[ss->kind];
  ss->prev = NULL;
  ss->next = ss_abandoned[ss->kind];
  __atomic_store_n(&ss_abandoned[ss->kind], ss, __ATOMIC_RELAXED);
  ss_abandoned_n++;
}

void ss_abandon_push(superslab_t *ss) {
  uint64_t now = os_now_ms();
  lock_acquire(&ss_abandon_lock);
  ss_abandon_link_locked(ss);
  uint64_t next = ss_abandon_purge_locked(now, false);
  lock_release(&ss_abandon_lock);
  if (next != UINT64_MAX) decay_note_idle(DECAY_BG_START_BYTES); /* threads exist: a thread to purge costs little */
}

uint64_t ss_abandon_collect(bool force) {
  lock_acquire(&ss_abandon_lock);
  uint64_t next = ss_abandon_purge_locked(os_now_ms(), force);
  lock_release(&ss_abandon_lock);
  return next;
}

/* decay's slots (decay.h): the abandoned lists, and on a forced collection
 * the cache's address space. Each counts its own bytes. */
static size_t ss_decay_abandoned(uint64_t now, bool force, bool blocking, uint64_t *next_due) {
  (void)now, (void)blocking;
  uint64_t due = ss_abandon_collect(force);
  if (next_due != NULL && due < *next_due) *next_due = due;
  return 0;
}

static size_t ss_decay_cache(uint64_t now, bool force, bool blocking, uint64_t *next_due) {
  (void)now, (void)blocking, (void)next_due;
  if (force) ss_cache_unmap_all();
  return 0;
}

static void ss_decay_register(void) {
  decay_register(DECAY_ABANDONED, ss_decay_abandoned);
  decay_register(DECAY_SS_CACHE, ss_decay_cache);
}

void ss_abandon_note_free(void) {
  if (!atomic_load_explicit(&ss_abandon_pending, memory_order_relaxed)) {
    atomic_store_explicit(&ss_abandon_pending, 1, memory_order_relaxed);
    decay_note_idle(DECAY_BG_START_BYTES);
  }
  /* Without the thread (or while it sleeps), every 256th such free
   * reclaims what came back. */
  static HAK_TLS unsigned abandoned_frees;
  if ((++abandoned_frees & 255) != 0) return;
  if (!lock_try(&ss_abandon_lock)) return; /* someone is at it */
  uint64_t next = ss_abandon_purge_locked(os_now_ms(), false);
  lock_release(&ss_abandon_lock);
  if (next != UINT64_MAX) decay_note_idle(DECAY_BG_START_BYTES);
}

superslab_t *ss_abandon_pop(unsigned kind) {
  if (__atomic_load_n(&ss_abandoned[kind], __ATOMIC_RELAXED) == NULL) return NULL;
  lock_acquire(&ss_abandon_lock);
  superslab_t *ss = ss_abandoned[kind] != NULL ? ss_abandon_adopt_locked(&ss_abandoned[kind]) : NULL;
  lock_release(&ss_abandon_lock);
  if (ss) ss->next = ss->prev = NULL;
  return ss;
}

bool ss_abandon_waiting(unsigned kind) { return __atomic_load_n(&ss_abandoned[kind], __ATOMIC_RELAXED) != NULL; }

bool ss_abandon_take(superslab_t *ss) {
  bool taken = false;
  lock_acquire(&ss_abandon_lock);
  if (ss->abandoned) {
    /* The lists are short (a few superslabs per exited thread, until
     * adopted or released): a walk, not a second link. */
    for (superslab_t **link = &ss_abandoned[ss->kind]; *link != NULL; link = &(*link)->next) {
      if (*link != ss) continue;
      ss_abandon_adopt_locked(link);
      taken = true;
      break;
    }
  }
  lock_release(&ss_abandon_lock);
  if (taken) ss->next = ss->prev = NULL;
  return taken;
}

slab_t *ss_slab_init(superslab_t *ss, unsigned idx, unsigned cls, uintptr_t owner) {
  slab_t *s = &ss->slabs[idx];
  uint64_t bit = (uint64_t)1 << idx;
  HAK_ASSERT(ss->free_mask & bit);
  /* A free slab outside dirty_mask is fresh from the kernel or was
   * decommitted (MADV_DONTNEED: zero-fill on the next touch). */
  s->clean = (ss->dirty_mask & bit) == 0;
  if (s->clean) s->warm_pages = 0;
  __atomic_store_n(&s->gaps, 0, __ATOMIC_RELAXED);
  s->pop_pages = 0;
  ss->free_mask &= ~bit;
  ss->dirty_mask &= ~bit;
  s->free = NULL;
  s->cold = NULL;
  s->cool_mark = s->cool_sig = 0; /* heap_cool: not seen idle */
  s->cool_used = UINT16_MAX;
  s->park_tick = 0; /* heap_park: never taken back (a heap's tick is 1 from its first refill) */
  s->used = 0;
  s->bsize = sc_size[cls];
  size_t off = ss_area_offset(idx);
  size_t room = ss_slab_room(ss, idx);
  s->capacity = (uint16_t)(room / s->bsize);
  s->carved = 0;
  s->cls = (uint8_t)cls;
  s->on_list = 0;
  s->index = idx;
  s->next = s->prev = NULL;
  s->area = (uint8_t *)ss + ((size_t)idx << ss->slab_shift) + off;
  s->span = (uint64_t)s->capacity * s->bsize;
  /* ceil(2^64 / bsize); exactly 2^64 / bsize for a power of two. */
  s->div_mul = UINT64_MAX / s->bsize + 1;
  s->div_base = (uint64_t)(uintptr_t)s->area * s->div_mul;
  atomic_store_explicit(slab_tf(s), 0, memory_order_relaxed);
  atomic_store_explicit(&s->owner, owner, memory_order_release);
  return s;
}

/* A carved block goes onto the free list: in the checked builds marked
 * free like every block on a list, so that a double free of it before its
 * first allocation is caught (its memory may be zero: a slab decommitted
 * and taken again); elsewhere only linked. */
static inline void ss_link(uint8_t *b, uint8_t *next) {
#if HAK_CHECKED
  blk_free((block_t *)b, (block_t *)next);
#else
  blk_set_next((block_t *)b, (block_t *)next);
#endif
}

/* n consecutive blocks of size bs from first, linked in address order;
 * the last links to NULL. */
static block_t *ss_link_run(uint8_t *first, unsigned n, size_t bs) {
  uint8_t *p = first;
  for (unsigned i = 1; i < n; i++, p += bs) ss_link(p, p + bs);
  ss_link(p, NULL);
  return (block_t *)first;
}

void ss_slab_uncool(slab_t *s) {
  block_t *b = s->cold;
  HAK_ASSERT(b != NULL && s->free == NULL);
  if (!slab_holds(s, b)) {
    /* A link a use after free overwrote: as a list head, the refill's
     * caller reports it (heap_list_corrupt). */
    s->free = b;
    s->cold = NULL;
    return;
  }
  block_t *next = blk_next(b);
  /* Runs of more than one block exist in the default build only; the
   * checked builds do not trust a count a use after free could change. */
  uint32_t n = HAK_CHECKED ? 1u : slab_cold_len(b);
  if (n - 1u >= (uint32_t)((s->area + s->span - (uint8_t *)b) / s->bsize)) n = 1; /* never past the area */
  unsigned k = sc_batch[s->cls];
  if (k > n) k = n;
  s->cold = next;
  if (n > k) slab_cold_push(s, (block_t *)((uint8_t *)b + (size_t)k * s->bsize), n - k);
  s->free = ss_link_run((uint8_t *)b, k, s->bsize);
}

/* The page holding s's first block: pop_pages and warm_pages count pages
 * from it. */
static uintptr_t ss_area_page(const slab_t *s) { return (uintptr_t)s->area & ~(uintptr_t)(os_page_size - 1); }

/* Carving a clean slab writes a link into every block of the batch, and
 * each new page costs a fault (ruby's gc_phases: 63 % of its 283 000
 * faults were in the carve). One MADV_POPULATE_WRITE over the pages ahead
 * costs less per page than their faults (here: 1.4-1.5 against 2.0 us).
 * Only in a slab its heap marked hot (SS_POP_HOT: its class took it while
 * HEAP_WAITING_MAX of its exhausted slabs waited, heap_take_slab), so what
 * is made resident early is at most SS_POP_AHEAD of one slab of a class
 * that carves slab after slab; and only for blocks of a page or less,
 * whose next carves touch every page of the area in turn. */
#define SS_POP_AHEAD ((uintptr_t)16 << 10)
static void ss_carve_populate(slab_t *s, const uint8_t *first, unsigned n, size_t bs) {
  uintptr_t pg = os_page_size;
  uintptr_t base = ss_area_page(s);
  uintptr_t need = (((uintptr_t)first + (size_t)(n - 1) * bs) & ~(pg - 1)) + pg;
  uintptr_t done = base + (uintptr_t)(s->pop_pages & ~SS_POP_HOT) * pg;
  if (need <= done) return;
  uintptr_t last = (((uintptr_t)s->area + (size_t)(s->capacity - 1) * bs) & ~(pg - 1)) + pg;
  uintptr_t end = done + SS_POP_AHEAD;
  if (end < need) end = need;
  if (end > last) end = last;
  uintptr_t from = (uintptr_t)first & ~(pg - 1);
  if (from < done) from = done;
  os_populate((void *)from, end - from);
  s->pop_pages = (uint16_t)(SS_POP_HOT | (end - base) / pg);
}

#if HAK_SECURE
/* The secure carve links a batch so that the next allocation's address
 * cannot be told from the last one's, yet the batch is still handed out
 * from its low end to its high end at the grain of a few blocks: the order
 * is shuffled inside each window of SS_CARVE_WINDOW blocks and the windows
 * follow each other. A shuffle of the whole batch made programs that walk
 * their objects in allocation order miss the cache on every object, which
 * no prefetcher follows: cppcheck took 1.8x the default carve's user
 * time (medians of 7 interleaved runs), and the shuffle was a third of
 * jq's gap. With windows of 8 it took 1.36x in those runs, and ran at the
 * default's speed in make bench-secure; 2 slices walked in turn (mimalloc's
 * secure mode cuts the batch into slices) took as long but let a block's
 * memory neighbour follow it one time in two, 4 and 8 slices were little
 * better than the full shuffle. With windows of 8 the neighbour follows
 * it about one time in eight. The order's draws are cheap (below): drawn
 * with a remainder, each block's draw was a 64-bit division, and
 * bench_size_runs, which carves nearly every block it gets, ran the
 * secure library at 0.52-0.62 of the default's speed (2 and 16 threads;
 * 0.78 and 0.90 since, 3 interleaved runs by hand). The ring form of it
 * (size_runs_ring), whose blocks another thread reads and frees in
 * allocation order, loses a third to the shuffle itself: 47-48 M
 * operations a second, 70-74 M with the blocks linked in address order. */
#define SS_CARVE_WINDOW 8u
static block_t *ss_link_shuffled(uint8_t *first, unsigned n, size_t bs) {
  static HAK_TLS uint64_t rng;
  if (rng == 0) rng = (ss_secret ^ (uintptr_t)&rng) | 1; /* per thread: the TLS address */
  block_t *head = NULL, *tail = NULL;
  for (unsigned w = 0; w < n; w += SS_CARVE_WINDOW) {
    unsigned m = n - w < SS_CARVE_WINDOW ? n - w : SS_CARVE_WINDOW;
    /* Fisher-Yates, inside out (each position placed as it is drawn: no
     * pass to fill the array first). A draw is a 16-bit slice of an
     * xorshift word, four to the word, scaled to 0..i by a multiply and a
     * shift (Lemire's bounded draw; the bias is below 8/65536). */
    uint8_t order[SS_CARVE_WINDOW] = {0}; /* order[i] is read before it is set when j == i */
    uint64_t r = hak_xorshift64(&rng);
    for (unsigned i = 1, left = 4; i < m; i++, left--, r >>= 16) {
      if (left == 0) r = hak_xorshift64(&rng), left = 4;
      unsigned j = (unsigned)(((r & 0xffffu) * (i + 1)) >> 16);
      order[i] = order[j];
      order[j] = (uint8_t)i;
    }
    for (unsigned i = 0; i < m; i++) {
      block_t *b = (block_t *)(first + (size_t)(w + order[i]) * bs);
      if (tail != NULL) ss_link((uint8_t *)tail, (uint8_t *)b);
      else head = b;
      tail = b;
    }
  }
  ss_link((uint8_t *)tail, NULL);
  return head;
}
#endif

void ss_slab_carve(slab_t *s, bool warm) {
  unsigned n = sc_batch[s->cls];
  unsigned left = (unsigned)s->capacity - s->carved;
  size_t bs = s->bsize;
  uint8_t *first = s->area + (size_t)s->carved * bs;
  if (warm && s->warm_pages != 0) {
    /* The batch is a page so that linking it faults in no page the
     * program may never use; pages resident already cost nothing to
     * link, and a batch each would cost a refill per page. A program
     * that allocates a few hundred blocks of a class, frees them all and
     * starts again (sh6bench's pattern) emptied the class's extra slabs,
     * which went back to their superslab and came back to be carved a
     * page at a time, round after round: a refill per ten allocations,
     * 0.68x tcmalloc's speed. */
    uintptr_t pg = os_page_size;
    uintptr_t warm_end = ss_area_page(s) + (uintptr_t)s->warm_pages * pg;
    if (warm_end > (uintptr_t)first + bs) {
      size_t w = (warm_end - (uintptr_t)first) / bs;
      if (w > n) n = w > left ? left : (unsigned)w;
    }
  }
  if (n > left) n = left;
  HAK_ASSERT(n > 0 && s->free == NULL);
  if (s->pop_pages & SS_POP_HOT) ss_carve_populate(s, first, n, bs);
#if HAK_SECURE
  s->free = ss_link_shuffled(first, n, bs);
#else
  s->free = ss_link_run(first, n, bs);
#endif
  s->carved = (uint16_t)(s->carved + n);
}

void ss_slab_free(superslab_t *ss, slab_t *s, uint64_t now_ms) {
  uint64_t bit = (uint64_t)1 << s->index;
  s->warm_kid = 0; /* heap_slab_emptied names the thread, after this */
  /* What the next class to take it may carve at once (warm_pages): the
   * pages its blocks were linked over, each holding a block's start while
   * blocks are a page or less, and what it held when taken. Nothing if
   * one of those pages may not be resident (gaps). A free slab that stays
   * dirty loses pages only to the purge, which clears its bit. */
  if (__atomic_load_n(&s->gaps, __ATOMIC_RELAXED)) {
    s->warm_pages = 0;
  } else if (s->bsize <= os_page_size && s->carved != 0) {
    uintptr_t end = (uintptr_t)s->area + (size_t)s->carved * s->bsize;
    size_t pages = (end - ss_area_page(s)) / os_page_size; /* whole pages: the last may be partly linked */
    if (pages > s->warm_pages) s->warm_pages = (uint16_t)pages;
  }
  atomic_store_explicit(&s->owner, OWNER_UNUSED, memory_order_release);
  /* Every carved block on the free list, none cold and no page gone: the
   * list stays while the slab is free and dirty, for the class to take
   * back without a new carve (heap_take_slab). Nothing writes a free slab's blocks,
   * and the purge, the only thing that takes its pages, clears its dirty
   * bit. The checked builds carve afresh (their lists are checked and
   * shuffled at the carve). */
  if (HAK_CHECKED || s->gaps || s->cold != NULL || s->used != 0) s->free = NULL;
  s->cold = NULL;
  s->next = NULL;
  s->freed_ms = now_ms;
  ss->free_mask |= bit;
  ss->dirty_mask |= bit;
  ss->last_free_ms = now_ms;
}

size_t ss_dirty_bytes(const superslab_t *ss) {
  uint64_t m = ss->dirty_mask & ss->free_mask;
  size_t b = (size_t)hak_popcount64(m) << ss->slab_shift;
  if (m & 1) b -= ss_area_offset(0); /* slab 0's dirty part starts after the header */
  return b;
}

/* Decommit the free slabs r takes; returns the bytes. */
static size_t ss_purge_slabs(superslab_t *ss, const ss_purge_rule_t *r, uint64_t *next_due) {
  uint64_t m = ss->dirty_mask & ss->free_mask;
  if (m == 0) return 0;
  /* The slabs due: each is judged by its own idle time, so memory that
   * was freed a moment ago stays warm beside memory idle for long. */
  uint64_t due = 0;
  for (uint64_t t = m; t; t &= t - 1) {
    unsigned i = (unsigned)__builtin_ctzll(t);
    uint64_t freed = ss->slabs[i].freed_ms;
    uint64_t d = r->spare_kid != 0 && ss->slabs[i].warm_kid == r->spare_kid ? r->spare_ms : r->delay_ms;
    if (r->force || os_idle_for(r->now_ms, freed, d))
      due |= (uint64_t)1 << i;
    else if (freed + d < *next_due)
      *next_due = freed + d;
  }
  size_t slab = (size_t)1 << ss->slab_shift, total = 0;
  ss->dirty_mask &= ~due;
  while (due) {
    unsigned i = (unsigned)__builtin_ctzll(due);
    unsigned j = i;
    while (j + 1 < 64 && (due >> (j + 1) & 1)) j++; /* coalesce a run */
    size_t off = ss_area_offset(i); /* never the header */
    size_t len = (size_t)(j - i + 1) * slab - off;
    os_decommit((uint8_t *)ss + (size_t)i * slab + off, len);
    total += len;
    due &= ~((((uint64_t)2 << j) - 1) & ~(((uint64_t)1 << i) - 1));
  }
  return total;
}

bool ss_purge_step(superslab_t *ss, const ss_purge_rule_t *r, uint64_t *next_due, size_t *purged) {
  bool whole = ss->free_mask == ss_all_mask(ss);
  *purged = 0;
  if (whole && (r->force || os_idle_for(r->now_ms, ss->last_free_ms, r->delay_ms))) return true;
  *purged = ss_purge_slabs(ss, r, next_due);
  if (whole && ss->last_free_ms + r->delay_ms < *next_due) *next_due = ss->last_free_ms + r->delay_ms;
  return false;
}

void ss_for_each(void (*fn)(const superslab_t *ss, void *arg), void *arg) {
  lock_acquire(&ss_registry_lock);
  for (superslab_t *ss = ss_registry; ss != NULL; ss = ss->all_next) fn(ss, arg);
  lock_release(&ss_registry_lock);
}

ss_counts_t ss_counts(void) {
  ss_counts_t c;
  lock_acquire(&ss_registry_lock);
  c.live = ss_live;
  lock_release(&ss_registry_lock);
  lock_acquire(&ss_abandon_lock);
  c.abandoned = ss_abandoned_n;
  lock_release(&ss_abandon_lock);
  lock_acquire(&ss_cache_lock);
  c.cached = ss_cache_count;
  lock_release(&ss_cache_lock);
  return c;
}

void ss_fork_child_abandon(const struct heap *keep, const struct heap *keep2) {
  for (superslab_t *ss = ss_registry; ss != NULL; ss = ss->all_next) {
    const struct heap *owner = ss_heap(ss);
    if (ss->abandoned || owner == NULL || owner == keep || owner == keep2) continue;
    slab_t *s;
    SS_FOR_EACH_USED(ss, s) atomic_store_explicit(&s->owner, OWNER_ABANDONED, memory_order_relaxed);
    ss_abandon_link_locked(ss);
  }
}

/* Lock order: abandon before cache (the abandoned-list purge releases
 * superslabs into the cache while holding the abandon lock). */
void ss_lock_all(void) {
  lock_acquire(&ss_abandon_lock);
  lock_acquire(&ss_cache_lock);
  lock_acquire(&ss_registry_lock);
}
void ss_unlock_all(void) {
  lock_release(&ss_registry_lock);
  lock_release(&ss_cache_lock);
  lock_release(&ss_abandon_lock);
}

/* ---- read-only accessors for the statistics' residency walk (stats.c) ----
 * Kept at the end of the file: they read, never change, what is above. */

/* Bytes one superslab maps (the secure build's end guard page included). */
size_t ss_map_bytes(void) { return SS_MAP_SIZE; }

/* Visit every cached (empty, decommitted) superslab, cache lock held: none
 * can be taken or unmapped meanwhile. */
void ss_cache_for_each(void (*fn)(const superslab_t *ss, void *arg), void *arg) {
  lock_acquire(&ss_cache_lock);
  for (superslab_t *ss = ss_cache; ss != NULL; ss = ss->next) fn(ss, arg);
  lock_release(&ss_cache_lock);
}

/* ---- the owner's side of the thread_free hand-shake (remote.c publishes) */

unsigned ss_slab_collect(slab_t *s) {
  if (!remote_has_frees(s)) return 0;
  uintptr_t tf = atomic_exchange_explicit(slab_tf(s), 0, memory_order_acquire);
  block_t *head = (block_t *)(tf & TF_PTR_MASK);
  if (head == NULL) return 0;
  unsigned n = (unsigned)(tf >> TF_COUNT_SHIFT);
  HAK_STAT(ST_COLLECT);
  HAK_STATN(ST_COLLECT_BLOCKS, n);
  if (s->free != NULL) {
    /* Rare (adoption, thread exit, a refill's leftovers): splice in front
     * of the owner's list. The count bounds the walk, and every link is
     * checked: a corrupted one is reported and the list cut there. */
    block_t *last = head;
    for (unsigned i = 1; i < n; i++) {
      block_t *nx = blk_next(last);
      if (!slab_holds(s, nx)) {
        report_error("free", last, "heap corruption detected at");
        n = i; /* the rest is dropped: it stays counted in use */
        break;
      }
      last = nx;
    }
    blk_set_next(last, s->free);
  }
  s->free = head;
  HAK_ASSERT(s->used >= n);
  s->used = (uint16_t)(s->used - n);
  return n;
}

void ss_slab_clear_mark(slab_t *s) {
  /* A CAS loop, not exchange-then-store: a publish may land in between. */
  uintptr_t tf = atomic_load_explicit(slab_tf(s), memory_order_relaxed);
  while ((tf & TF_DELAYED) &&
         !atomic_compare_exchange_weak_explicit(slab_tf(s), &tf, tf & ~TF_DELAYED,
                                                memory_order_acq_rel, memory_order_relaxed)) {
  }
}
