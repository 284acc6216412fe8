/*
 * heap_purge.c — the idle memory of the heaps, and the walks over every
 * heap.
 *
 * Owns: the list of every heap (heap_all: heap.c pushes each new heap);
 * a slab's return to its superslab, resident (heap_release_slab); the
 * purge of one heap (free slabs and wholly free superslabs idle for the
 * purge delay, longer for a heap that takes back what its purges gave
 * back: heap_decay_adapt; parked slabs parked that long become free
 * slabs) and of
 * every heap (heap_purge_heaps, for decay's pass
 * through heap.c's heap_purge_all); the sweep of a heap's waiting slabs;
 * the collection of an idle heap's delayed list (heap_collect_idle), of
 * its listed slabs whose blocks all came back (heap_collect_lists, with
 * the owner's side of its hand-shake, heap_owner_wait) and of the pages
 * inside its big free blocks (heap_idle_cool); the hand-over of its
 * superslabs of full slabs that other threads free into, to the abandoned
 * list (heap_handover); the
 * read-only walks for the statistics (heap_idle_bytes, heap_for_each_meta,
 * heap_remote_pending_bytes, heap_delayed_bytes).
 * Promises: memory goes back by time, never because of how much was freed;
 * the page level of a heap, and its full slabs' lists, are touched only
 * under its lock, and only full slabs change hands with a live heap's
 * superslab; the walks only read (racy sums: heap structs are never
 * unmapped).
 * May call: superslab (slab free, purge, release, the abandoned list),
 * lock, remote (the delayed list, and the frees it forwards), decay (idle
 * memory reports), os (the clock, decommit, a thread's CPU clock and
 * state, the process-wide barrier), options, sizeclass (which classes
 * cool), stats (the collector's events); nothing of heap.c.
 */
#include "heap_impl.h"
#include "decay.h"
#include "heap.h"
#include "internal.h"
#include "options.h"
#include "os.h"
#include "remote.h"
#include "sizeclass.h"
#include "stats.h"
#include "superslab.h"

#include <string.h>

heap_t *heap_all;

/* ---- idle slabs and their purge ------------------------------------------- */

/* A slab of h becomes free again inside its superslab, its pages still
 * resident: the next slab h needs of that kind reuses it warm, and the
 * purge decommits it only once it has been idle for the purge delay —
 * never because of how much was freed (that would fault the same pages
 * back in on the next allocation). Under h->lock. */
void heap_release_slab_due(heap_t *h, slab_t *s, uint64_t due) {
  superslab_t *ss = ss_of(s);
  if (ss->free_mask == 0 && ss->listed) {
    /* It had no free slab, so it sat behind the ones that do. */
    heap_owned_remove(h, ss);
    heap_owned_push_front(h, ss);
  }
  heap_dirty_add(h, ss_slab_room(ss, s->index), 1);
  ss_slab_free(ss, s, due - opt.purge_delay_ms);
  heap_due(h, due);
  decay_note_idle(atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed));
}

void heap_release_slab(heap_t *h, slab_t *s) { heap_release_slab_due(h, s, os_now_ms() + opt.purge_delay_ms); }

void heap_release_slab_locked(heap_t *h, slab_t *s) {
  lock_acquire(&h->lock);
  heap_release_slab(h, s);
  lock_release(&h->lock);
}

/* Who runs a heap's purge, which decides what it takes (heap_purge_as). */
typedef enum heap_purge_mode {
  HEAP_PURGE_TIMED,  /* h's own schedule: idle for delay; sets next_purge_ms */
  HEAP_PURGE_FORCED, /* everything idle (hak_collect, malloc_trim); sets it too */
  /* Growth, which leaves the schedule alone (what it leaves is due no
   * sooner than the schedule says): */
  HEAP_PURGE_GROW_SELF, /* h's own thread is about to grow */
  /* Another heap's growth, or the arenas' on h's own thread: the slabs it
   * decommits are marked (grow_mask) and counted (grow_lost). */
  HEAP_PURGE_GROW_OWN,
  HEAP_PURGE_GROW_OTHER /* another thread's growth: also spares h's thread's own */
} heap_purge_mode_t;

/* Decommit h's free slabs idle for delay and release its wholly free
 * superslabs idle that long (everything idle if HEAP_PURGE_FORCED). Under
 * h->lock. Returns the bytes decommitted. */
static size_t heap_purge_as(heap_t *h, uint64_t now, uint64_t delay, heap_purge_mode_t mode) {
  bool force = mode == HEAP_PURGE_FORCED, spare = mode == HEAP_PURGE_GROW_OTHER;
  uint64_t next = UINT64_MAX;
  size_t purged = 0;
  /* Another heap's growth takes what h's own frees emptied (its parked
   * slabs, its free slabs that name its thread) only at the plain delay:
   * those are the thread's working memory between two rounds, which it
   * takes back as soon as it runs again. With 16 ithreads on 2 cores
   * (real_perl_16t) each waits tens of milliseconds for a core between
   * freeing a round's hash and building the next: such purges decommitted
   * 41 MiB in a run, and 628 of the slabs came back as faults (3-6 % of
   * its time). Slabs that others' frees emptied, and wholly free
   * superslabs, go at any age, as before (larson_16t, test_purge_grow).
   * So does all of it when the growing thread is h's own (the arenas'
   * growth, heap_answer_grow): that thread has left its small blocks for
   * big ones (phases_to_big: 146 -> 151 MiB peak when spared too). */
  uint64_t pdelay = spare && delay < opt.purge_delay_ms ? opt.purge_delay_ms : delay;
  ss_purge_rule_t rule = {.now_ms = now,
                          .delay_ms = delay,
                          .spare_ms = pdelay,
                          .spare_kid = spare ? __atomic_load_n(&h->kid, __ATOMIC_RELAXED) : 0,
                          .force = force};
  /* Parked slabs idle that long become free slabs, due from when they
   * were parked: the walk below decommits them. */
  for (unsigned c = 0; h->parked_n != 0 && c < HAK_NCLASS; c++) {
    slab_t *s = h->parked[c];
    if (s == NULL) continue;
    if (force || os_idle_for(now, s->freed_ms, pdelay)) {
      heap_parked_take(h, c);
      heap_release_slab_due(h, s, s->freed_ms + opt.purge_delay_ms);
    } else if (s->freed_ms + pdelay < next) {
      next = s->freed_ms + pdelay;
    }
  }
  for (unsigned k = 0; k < SS_KINDS; k++) {
    superslab_t *ss = h->owned_head[k];
    while (ss != NULL && ss->free_mask != 0) { /* full ones are at the back */
      superslab_t *next_ss = ss->next;
      size_t d;
      uint64_t dirty = ss->dirty_mask & ss->free_mask;
      if (ss_purge_step(ss, &rule, &next, &d)) {
        d = ss_dirty_bytes(ss);
        heap_owned_remove(h, ss);
        ss_set_heap(ss, NULL);
        ss_release(ss);
      } else if (mode >= HEAP_PURGE_GROW_OWN && (dirty & ~ss->dirty_mask) != 0) {
        uint64_t lost = dirty & ~ss->dirty_mask;
        ss->grow_mask |= lost;
        decay_regret_lose(&h->grow_lost, &h->grow_back, (uint32_t)hak_popcount64(lost), HEAP_GROW_REGRET_SPAN);
      }
      heap_dirty_add(h, d, -1);
      purged += d;
      ss = next_ss;
    }
  }
  if (mode < HEAP_PURGE_GROW_SELF) atomic_store_explicit(&h->next_purge_ms, next, memory_order_relaxed);
  return purged;
}

size_t heap_purge(heap_t *h, uint64_t now, bool force) {
  uint64_t delay = opt.purge_delay_ms;
  uint32_t tick = __atomic_load_n(&h->tick, __ATOMIC_RELAXED);
  /* Busy: the thread refilled since the last pass. One that runs without
   * allocating counts as quiet, as an idle one does: a program that makes
   * no allocator call gets its memory back within the plain delays. */
  if (h->decay_shift != 0 && tick != h->decay_tick) delay <<= h->decay_shift;
  h->decay_tick = tick;
  size_t purged = heap_purge_as(h, now, delay, force ? HEAP_PURGE_FORCED : HEAP_PURGE_TIMED);
  if (purged != 0 || h->decay_shift != 0) heap_decay_adapt(h, purged, now, force);
  return purged;
}

/* Cold: only a heap that gives memory back by time, or took it back,
 * comes here (a small program never does). */
HAK_TEXT_COLD void heap_decay_adapt(heap_t *h, size_t purged, uint64_t now, bool force) {
  if (purged != 0 && !force) {
    if (h->decay_lost >= HEAP_DECAY_QUIET_KIB) {
      /* Atomic stores: hak_ctl's thread.purge_delay_ms reads it unlocked. */
      if (h->decay_back * 4 < h->decay_lost && h->decay_shift != 0)
        __atomic_store_n(&h->decay_shift, (uint8_t)(h->decay_shift - 1), __ATOMIC_RELAXED);
      h->decay_lost = h->decay_back = 0;
    }
    size_t kib = purged >> 10;
    h->decay_lost = kib > UINT32_MAX - h->decay_lost ? UINT32_MAX : h->decay_lost + (uint32_t)kib;
    h->decay_ms = now;
  }
  /* The next pass a plain delay on at the latest: it sees whether the
   * thread still refills. */
  uint64_t next = atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed);
  if (h->decay_shift != 0 && next != UINT64_MAX && next > now + opt.purge_delay_ms)
    atomic_store_explicit(&h->next_purge_ms, now + opt.purge_delay_ms, memory_order_relaxed);
}

HAK_TEXT_COLD void heap_decay_back(heap_t *h, size_t bytes) {
  uint64_t now = os_now_ms(), delay = opt.purge_delay_ms << h->decay_shift;
  if (now < h->decay_ms || now - h->decay_ms > delay * HEAP_DECAY_WINDOW) return;
  uint32_t kib = (uint32_t)(bytes >> 10);
  h->decay_back = kib >= h->decay_lost - h->decay_back ? h->decay_lost : h->decay_back + kib;
  if (h->decay_lost < HEAP_DECAY_REGRET_MIN_KIB || h->decay_back * 2 < h->decay_lost) return;
  /* Half of it came back: the delay that would have kept it, the idle time
   * it had when the purge took it plus the time since. */
  uint64_t need = delay + (now - h->decay_ms);
  unsigned s = h->decay_shift;
  while (s < HEAP_DECAY_SHIFT_MAX && (opt.purge_delay_ms << s) < need) s++;
  __atomic_store_n(&h->decay_shift, (uint8_t)s, __ATOMIC_RELAXED);
  h->decay_lost = h->decay_back = 0;
}

size_t heap_purge_grow(heap_t *self, const heap_t *own, const heap_t *skip, uint64_t now, uint64_t spare_ms,
                       bool idle_only) {
  uint64_t delay = opt.purge_delay_ms / HEAP_COOL_STEPS;
  size_t purged = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    if (h == skip || h->dead || atomic_load_explicit(&h->dirty_bytes, memory_order_relaxed) == 0) continue;
    /* Only the heaps of threads asleep (the collector lends theirs) for a
     * cold slab of self's own superslabs (heap.c, heap_grow_turn): busy
     * threads take their free slabs back within milliseconds (xmalloc_16t
     * 10 % slower when every heap's went). */
    if (idle_only && (h == own || atomic_load_explicit(&h->lend, memory_order_relaxed) == 0)) continue;
    if (h == self) {
      purged += heap_purge_as(h, now, delay, HEAP_PURGE_GROW_SELF);
    } else if (lock_try(&h->lock)) {
      /* Another heap's free slabs go whatever their age (but those its own
       * frees emptied: heap_purge_as): self is about to
       * fault in fresh pages that those would have been, had they been
       * its own (peak RSS, median of five: larson_16t 12.0 -> 10.7 MiB,
       * larson_64t 28.9 -> 27.2 at the same speed). Its own keep the
       * quarter delay: a class of self may take them back next.
       * Unless h keeps taking back what these purges took: with 16 threads
       * on 2 cores a thread that is only waiting for a core frees slabs
       * and takes them again within milliseconds, and purging them made
       * each other heap's growth cost it a fault per page, not fresh pages
       * saved (size_runs_ring_16t: 1.1 GiB decommitted in 0.7 s, 300 k
       * faults for a 64 MiB peak). Such a heap keeps slabs freed in the
       * last 1/HEAP_GROW_SPARE_STEPS of the delay. */
      if (!h->dead) {
        h->grow_spare = decay_regret_spare(h->grow_lost, h->grow_back, HEAP_GROW_REGRET_MIN, h->grow_spare);
        purged += heap_purge_as(h, now, h->grow_spare ? spare_ms : 0, h != own ? HEAP_PURGE_GROW_OTHER : HEAP_PURGE_GROW_OWN);
      }
      lock_release(&h->lock);
    }
  }
  return purged;
}

/* ---- free blocks of large classes ----------------------------------------- */

/* A slab in use keeps its free blocks resident, and for large classes
 * that is most of what a program frees: a 4 MiB slab of 896 KiB blocks
 * stays resident whole while one of them lives (ruby: 21 MiB of such free
 * blocks at its peak). So a free block of SLAB_COOL_MIN or more that
 * stays free for a step of the cooling (a quarter of the purge delay; a
 * half at most) gives back its pages past the first (which
 * keeps the link, so the free list is not touched) and waits on the
 * slab's cold list; a refill takes the cold blocks after the free list
 * and the remote frees, before carving fresh ones. Nothing in the hit
 * paths knows: "free a step ago too" is the tag a pass leaves in
 * the block's third word (unused by the free-list format), which the next
 * pass finds again only if the block was not handed out meanwhile. A tag
 * the program left in a block it got and freed again between two passes
 * (or data equal to it, a chance of 2^-64) only decommits a free block
 * early. */
static uintptr_t heap_cool_tag(const block_t *b, uint32_t epoch) {
  return ss_secret ^ (uintptr_t)b ^ ((uintptr_t)epoch * (uintptr_t)0x9E3779B97F4A7C15ull);
}

/* The whole pages of the free blocks [start, end) past the link, the
 * count and the tag its first block keeps as a cold run's head: [*lo,
 * *hi), empty if hi <= lo. */
static void heap_cold_pages(uintptr_t start, uintptr_t end, uintptr_t *lo, uintptr_t *hi) {
  size_t page = os_page_size;
  *lo = align_up(start + 3 * sizeof(uintptr_t), page);
  *hi = end & ~(uintptr_t)(page - 1);
}

static size_t heap_cool_slab(slab_t *s, uint32_t epoch, bool force, os_batch_t *ob) {
  size_t total = 0;
  block_t *prev = NULL, *b = s->free;
  while (b != NULL && slab_holds(s, b)) { /* an overwritten link: the pop reports it */
    block_t *next = blk_next(b);
    uintptr_t *tag = (uintptr_t *)b + 2;
    if (force || ANN_FREE_READ(*tag) == heap_cool_tag(b, epoch - 1)) {
      if (prev != NULL)
        blk_set_next(prev, next);
      else
        s->free = next;
      uintptr_t lo, hi;
      heap_cold_pages((uintptr_t)b, (uintptr_t)b + s->bsize, &lo, &hi);
      if (hi > lo) {
        os_batch_add(ob, (void *)lo, hi - lo);
        total += hi - lo;
      }
      slab_cold_push(s, b, 1); /* its first words: not in the range */
    } else {
      ANN_FREE_WRITE(*tag, heap_cool_tag(b, epoch));
      prev = b;
    }
    b = next;
  }
  return total;
}

/* ---- whole free pages of idle slabs --------------------------------------- */

/* A slab of a smaller class on one of its heap's lists is not allocated
 * from: its free blocks wait until the current slab runs out. When a
 * program's phase ends (a collection that frees nine blocks in ten of a
 * size it then stops asking for: ruby, compilers), every slab of that
 * class stays there with its free blocks resident, and no other class can
 * use them (glibc coalesces them into chunks of any size); so does the
 * class's current slab. A slab that nothing was allocated from for a purge
 * delay, with blocks freed since the last time, gives back the pages that
 * its runs of free blocks cover wholly: each such run leaves the free list
 * (rebuilt in address order) for the cold list, and a refill takes it back
 * a carve batch at a time, as fresh blocks are carved. */
#define HEAP_RUN_BLOCKS_MAX 2048u /* a 64 KiB slab of 32 B blocks (SLAB_RUN_COOL_MIN) */
/* A run goes back once it covers a whole page past its first block. Two
 * pages were the rule before, to spare system calls (gc_phases.rb: 33 654
 * madvise calls against 26 802); measured again, the extra calls cost no
 * time or faults beyond the spread, while the single pages they left were
 * resident memory of classes the program had stopped asking for:
 * real_ruby's peak 720 -> 690 MiB (7 interleaved runs), bench_peak_mem 319
 * -> 303 MiB. With 10 % of blocks live, a page of eight blocks is wholly
 * free 43 % of the time, two pages 19 %. */
#define HEAP_RUN_PAGES_MIN 1u

/* The free list's walk: a miss on every block (the blocks were freed long
 * ago, in any order). So the walk goes over up to HEAP_RUN_BATCH slabs'
 * lists side by side, one step of each in turn, and their misses overlap.
 * freed[j] gets the bit of every block on v[j]'s list; a list with an
 * overwritten link (the pop reports it) or a cycle is left out (v[j] =
 * NULL). */
#define HEAP_RUN_BATCH 8u
/* What a growing heap leaves warm at the head of an active class's
 * partial list (heap_cool_as): about what the class takes in one pass of
 * a busy thread. */
#define HEAP_COOL_GROW_KEEP ((size_t)256 << 10)
typedef uint64_t heap_run_map_t[HEAP_RUN_BLOCKS_MAX / 64];
static void heap_run_walk(slab_t **v, unsigned k, heap_run_map_t *freed) {
  block_t *b[HEAP_RUN_BATCH];
  unsigned n[HEAP_RUN_BATCH], live = 0;
  for (unsigned j = 0; j < k; j++) {
    memset(freed[j], 0, (v[j]->capacity + 63u) / 64u * sizeof(uint64_t));
    b[j] = v[j]->free;
    n[j] = 0;
    live += b[j] != NULL;
  }
  while (live != 0)
    for (unsigned j = 0; j < k; j++) {
      if (b[j] == NULL) continue;
      slab_t *s = v[j];
      if (!slab_holds(s, b[j]) || ++n[j] > s->capacity) {
        v[j] = NULL;
        b[j] = NULL;
        live--;
        continue;
      }
      /* n / bsize for n below 2^32: the high half of n * ceil(2^64 /
       * bsize) (Lemire, Kaser and Kurz; the block-start test uses the low
       * half). */
      size_t i = (size_t)(((unsigned __int128)((uint8_t *)b[j] - s->area) * s->div_mul) >> 64);
      freed[j][i >> 6] |= (uint64_t)1 << (i & 63);
      b[j] = blk_next(b[j]);
      live -= b[j] == NULL;
    }
}

/* The next maximal run of set bits of bm at or after *i, below cap:
 * [*i, *j). False when there is none. */
static bool heap_run_next(const uint64_t *bm, unsigned cap, unsigned *i, unsigned *j) {
  unsigned a = *i;
  while (a < cap && !hak_bit_test(bm, a)) a++;
  if (a >= cap) return false;
  unsigned e = a + 1;
  while (e < cap && hak_bit_test(bm, e)) e++;
  *i = a;
  *j = e;
  return true;
}

/* The whole pages of the run of s's blocks [i, j) (heap_cold_pages). */
static void heap_run_pages(const slab_t *s, unsigned i, unsigned j, uintptr_t *lo, uintptr_t *hi) {
  heap_cold_pages((uintptr_t)s->area + (size_t)i * s->bsize, (uintptr_t)s->area + (size_t)j * s->bsize, lo, hi);
}

/* s's free blocks are the bits of freed. Returns the bytes decommitted
 * (added to ob: the caller flushes it before the heap allocates again). */
static size_t heap_cool_runs(slab_t *s, const uint64_t *freed, os_batch_t *ob) {
  unsigned cap = s->capacity;
  size_t bs = s->bsize, words = (cap + 63u) / 64u;
  uint64_t cold[HEAP_RUN_BLOCKS_MAX / 64];
  memset(cold, 0, words * sizeof(uint64_t));
  /* The maximal runs of free blocks with enough whole pages become cold. */
  bool any = false;
  uintptr_t lo, hi;
  for (unsigned i = 0, j; heap_run_next(freed, cap, &i, &j); i = j) {
    heap_run_pages(s, i, j, &lo, &hi);
    if (hi < lo + HEAP_RUN_PAGES_MIN * os_page_size) continue;
    for (unsigned k = i; k < j; k++) cold[k >> 6] |= (uint64_t)1 << (k & 63);
    any = true;
  }
  if (!any) return 0;
  /* The free list again, without them: the blocks left, in address order
   * (one more pass over the list would miss on every block again; these
   * are few). The cold runs' links are written after, over the list's. */
  block_t *head = NULL;
  for (unsigned w = (unsigned)words; w-- > 0;)
    for (uint64_t m = freed[w] & ~cold[w]; m != 0;) {
      unsigned bit = 63u - (unsigned)__builtin_clzll(m);
      m &= ~((uint64_t)1 << bit);
      block_t *b = (block_t *)(s->area + (size_t)(w * 64u + bit) * bs);
      blk_set_next(b, head);
      head = b;
    }
  s->free = head;
  size_t total = 0;
  for (unsigned i = 0, j; heap_run_next(cold, cap, &i, &j); i = j) {
    heap_run_pages(s, i, j, &lo, &hi);
    os_batch_add(ob, (void *)lo, hi - lo);
    total += hi - lo;
    slab_cold_push(s, (block_t *)(s->area + (size_t)i * bs), j - i);
  }
  return total;
}

static size_t heap_cool_batch(slab_t **v, unsigned k, os_batch_t *ob) {
  heap_run_map_t freed[HEAP_RUN_BATCH]; /* 2 KiB */
  size_t total = 0;
  heap_run_walk(v, k, freed);
  for (unsigned j = 0; j < k; j++)
    if (v[j] != NULL) total += heap_cool_runs(v[j], freed[j], ob);
  return total;
}

/* One slab of a smaller class on heap_cool's pass: stamped when first
 * seen idle; once idle a purge delay with blocks freed since its last
 * cooling, into the batch (walked and cooled when it is full). */
static void heap_cool_visit(slab_t *s, uint32_t now32, uint32_t idle_ms, bool force, slab_t **batch, unsigned *nb,
                            size_t *total, os_batch_t *ob) {
  if (s->cool_mark == 0) {
    s->cool_mark = now32;
    if (!force) return;
  }
  if ((force || now32 - s->cool_mark >= idle_ms) && s->used != s->cool_used &&
      s->capacity <= HEAP_RUN_BLOCKS_MAX && (size_t)(s->carved - s->used) * s->bsize >= 2 * os_page_size) {
    s->cool_used = s->used;
    batch[(*nb)++] = s;
    if (*nb == HEAP_RUN_BATCH) {
      *total += heap_cool_batch(batch, *nb, ob);
      *nb = 0;
    }
  }
}

static size_t heap_cool_as(heap_t *h, bool force, bool grow) {
  if (grow && h->batch != NULL) return 0; /* profiling: whether a class is active is the batches' */
  slab_t *batch[HEAP_RUN_BATCH];
  unsigned nb = 0;
  os_batch_t ob; /* every range of the pass, given back at its end */
  os_batch_init(&ob);
  uint64_t now = os_now_ms();
  uint32_t now32 = (uint32_t)now | 1u; /* 0 is a slab's "not seen" */
  /* The pass runs every 1/HEAP_COOL_STEPS of the purge delay, and so do
   * the big blocks' tags (hak_collect may come sooner: cool_big_ms keeps
   * the step). Not whole delays: a program whose big buffers turn over
   * within one (git repack's delta windows, 16 threads) kept 80 MiB of
   * them resident at its peak; by steps the peak is 14 % lower at the same
   * time, and the suite's rows with such blocks did not move. */
  bool big = !grow && (force || now >= h->cool_big_ms);
  /* Growing, a slab an earlier pass saw idle on its list is enough: the
   * heap takes fresh pages while its free ones wait, whatever the time. */
  uint32_t idle_ms = (uint32_t)(grow ? 0 : opt.purge_delay_ms);
  uint32_t epoch = h->cool_epoch;
  if (big) {
    epoch = ++h->cool_epoch;
    h->cool_big_ms = now + opt.purge_delay_ms / HEAP_COOL_STEPS;
  }
  size_t total = 0;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    if (sc_size[c] < SLAB_RUN_COOL_MIN) continue;
    if (sc_size[c] >= SLAB_COOL_MIN) {
      if (!big) continue;
      total += heap_cool_slab(h->cur[c], epoch, force, &ob); /* the empty sentinel's list is empty */
      for (unsigned l = 0; l < 2; l++)
        for (slab_t *s = h->list_head[l][c]; s != NULL; s = s->next) total += heap_cool_slab(s, epoch, force, &ob);
      continue;
    }
    /* A slab first seen on a list a purge delay ago has been there that
     * long (at most a step more): nothing was allocated from it. The
     * current slab is, unless its class went quiet: it counts as idle
     * while its free list's head and its count of blocks in use stay
     * what a pass saw (not while profiling: the batches take its list).
     * The empty sentinel, shared and read-only, is the one slab without
     * blocks. */
    slab_t *cur = h->cur[c];
    size_t keep = 0; /* free bytes of the partial list's head left warm */
    if (cur->capacity != 0 && h->batch == NULL) {
      uint32_t sig = (uint32_t)((uintptr_t)cur->free >> 4) ^ ((uint32_t)cur->used << 16) ^ cur->carved;
      /* Growing: a class allocated from since the last pass takes its
       * listed slabs next, from the head; cooling those would only fault
       * them back in. The slabs past HEAP_COOL_GROW_KEEP free bytes are
       * another matter: a program that freed most of what it built and
       * now builds in other classes keeps taking fresh pages while they
       * stay resident (bench_peak_mem: 90 % of 400000 blocks freed, then
       * half as many of twice the size; glibc coalesces and reuses them). */
      if (grow) {
        if (sig != cur->cool_sig || cur->cool_mark == 0) keep = HEAP_COOL_GROW_KEEP;
        goto lists;
      }
      if (sig != cur->cool_sig) {
        cur->cool_sig = sig;
        cur->cool_mark = 0;
      }
      heap_cool_visit(cur, now32, idle_ms, force, batch, &nb, &total, &ob);
    }
  lists:
    for (unsigned l = 0; l < 2; l++)
      for (slab_t *s = h->list_head[l][c]; s != NULL; s = s->next) {
        if (keep != 0 && l == HEAP_PARTIAL) {
          size_t f = (size_t)(s->carved - s->used) * s->bsize;
          keep = f < keep ? keep - f : 0;
          continue;
        }
        heap_cool_visit(s, now32, idle_ms, force, batch, &nb, &total, &ob);
      }
  }
  total += heap_cool_batch(batch, nb, &ob);
  os_batch_flush(&ob);
  return total;
}

size_t heap_cool(heap_t *h, bool force) { return heap_cool_as(h, force, false); }
size_t heap_cool_grow(heap_t *h) { return heap_cool_as(h, false, true); }

/* Waiting slabs whose blocks all came back (freed by other threads) go to
 * their superslab, so their memory is reused by any class and decays;
 * those that got nothing back for HEAP_WAIT_TICKS refills (heap.h) are
 * marked full, off the lists (unless blocks arrive as it is marked: then
 * it waits again, found ready by the next refill of its class). Returns
 * whether any block came back. In one of the owner's sections. */
bool heap_sweep_waiting(heap_t *h) {
  bool got = false;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    slab_t *s = h->list_head[HEAP_WAITING][c];
    while (s != NULL) {
      slab_t *next = s->next;
      if (ss_slab_collect(s) != 0) {
        got = true;
        if (s->used == 0) {
          heap_list_remove(h, s);
          heap_release_slab_locked(h, s);
        }
      } else if (s->free == NULL && s->cold == NULL && h->tick - s->wait_tick >= HEAP_WAIT_TICKS) {
        heap_list_remove(h, s);
        if (!remote_mark_full(s, h)) heap_list_push(h, HEAP_WAITING, s);
      }
      s = next;
    }
  }
  return got;
}

/* ---- the delayed list of an idle heap --------------------------------------
 * Blocks other threads free into a heap's full slabs wait on its delayed
 * list until its thread's next refill. A thread that stopped allocating
 * (larson's main thread sleeps after filling the array every worker then
 * frees: 16 threads, 5000 blocks each, 152 MB against tcmalloc's 63) never
 * takes them: its slabs stay in use, whole, however few of their blocks
 * live. So a pass over the heaps looks at the list of a heap whose thread
 * has neither refilled nor run for a while (opt_idle_gap_ms): a full slab all
 * of whose blocks in use are on the list is released to its superslab (and
 * decays from there); the rest goes back on the list for the owner. Full slabs are off
 * the owner's hit paths (their owner word has OWNER_FULL), and the owner
 * writes their lists only under the heap's lock (heap_free_local,
 * heap_drain_delayed). A look that releases nothing doubles the wait, up
 * to 64 times. A peak comes early (larson_16t_5k reaches 127 MB in its
 * first 50 ms), and the slabs released then still wait out the purge
 * delay, counted from when the thread went idle: a thread that sleeps
 * briefly (xmalloc_16t's producers block on a full queue) finds them warm.
 * Decommitting them at once cut larson_16t_5k's peak by 13 % but made
 * xmalloc_16t 7 % slower. */
#define HEAP_IDLE_SHIFT_MAX 6

/* Whether to collect h's delayed list now; when its thread refilled since
 * the last look, only notes that. The idle_* fields are the collector's,
 * written under the decay pass lock (every pass holds it). *again: when
 * to look next (UINT64_MAX: the list is empty). */
static bool heap_has_big(const heap_t *h);
static bool heap_collect_due(heap_t *h, uint64_t now, uint64_t *again) {
  *again = UINT64_MAX;
  /* A fork child's dead heap first: nothing of it is read. */
  if (h->dead) return false;
  /* Acquire, both: a heap reopened for a new thread (heap_new), and one
   * whose thread refilled since it was (re)initialised, is seen whole. */
  uintptr_t d = atomic_load_explicit(&h->delayed, memory_order_acquire);
  if (d == HEAP_DELAYED_CLOSED) return false;
  uint32_t tick = __atomic_load_n(&h->tick, __ATOMIC_ACQUIRE);
  /* The lists are worth a look once the thread refilled since the last
   * look found nothing in them, or while slabs there wait for blocks; so is
   * the heap while its big free blocks wait to go back (heap_idle_cool). */
  bool cool = !HAK_TSAN && tick != h->idle_cool_tick && heap_has_big(h);
  if (d == 0 && !atomic_load_explicit(&h->lists_waiting, memory_order_relaxed) &&
      tick == atomic_load_explicit(&h->lists_tick, memory_order_relaxed) && !cool)
    return false;
  if (__atomic_load_n(&h->tid, __ATOMIC_RELAXED) & (HAK_TID_EXIT_BIT | HAK_TID_PROF_BIT)) return false;
  /* Idle: no refill and no CPU time since the last look. A thread that
   * waits for a core (16 threads on 2) refills nothing for a while but
   * runs between the looks. */
  uint64_t cpu = 0;
  uint32_t kid = __atomic_load_n(&h->kid, __ATOMIC_RELAXED);
  if (kid == 0 || !os_thread_cpu_ns(kid, &cpu)) return false;
  if (tick != h->idle_tick || cpu != h->idle_cpu_ns) {
    heap_lend_set(h, 0);
    h->idle_tick = tick;
    h->idle_cpu_ns = cpu;
    h->idle_ms = h->idle_since = now;
    h->idle_shift = 0;
    /* A busy heap with nothing on its delayed list asks for no pass of
     * its own: passes that run anyway notice when it goes quiet (with a
     * wake-up per gap for every busy heap, larson_10k's passes doubled
     * and it ran 9 % slower per CPU second). One whose big free blocks
     * wait to go back asks for one look a purge delay on, which finds it
     * quiet or pushes it on again (for every heap, that look raised
     * larson_10k's peak from 26 to 30-32 MiB in 4 of 8 runs against 1 of
     * 8). */
    if (d == 0) {
      if (cool) *again = now + opt.purge_delay_ms;
      return false;
    }
    /* Blocked in the kernel while the others' frees into its full slabs
     * passed the wake mark (a thread that loaded data and joins its
     * workers): its superslabs of full slabs go over now, not a gap later,
     * when the workers have taken fresh pages for every replacement
     * meanwhile. A hand-over needs only h->lock (heap_handover); lending
     * still waits for the gap (heap_purge_heaps). */
    if (atomic_load_explicit(&h->delayed_bytes, memory_order_relaxed) >= HEAP_DELAYED_WAKE_BYTES &&
        os_thread_blocked(kid)) {
      *again = now + opt_idle_gap_ms();
      return true;
    }
  }
  *again = h->idle_ms + (opt_idle_gap_ms() << h->idle_shift);
  /* The look that gives its big free blocks back comes when it has been
   * idle for the purge delay, not a gap or more later. */
  uint64_t cool_due = h->idle_since + opt.purge_delay_ms;
  if (cool && cool_due > h->idle_ms && cool_due < *again) *again = cool_due;
  return now >= *again;
}

/* The next run of b's list (one slab's blocks): its slab, last block and
 * length. */
static slab_t *heap_run(block_t *b, block_t **last, unsigned *n) {
  slab_t *s = ss_slab_of(b, ss_of(b)->slab_shift);
  *n = heap_run_len(s, b, ~0u, last);
  return s;
}

static unsigned heap_collect_lists(heap_t *h, uint64_t idle_since);

/* An idle heap's superslabs that the collector left wholly free go to
 * the abandoned list, still committed: a heap about to map a new
 * superslab adopts them warm (heap_new_slab_locked), where before they
 * waited out the purge delay in the sleeping heap that could not use
 * them while the working threads faulted fresh pages in beside them
 * (larson_16t_5k: the main thread's 20 MiB of free slabs at the peak).
 * Unadopted, the list decommits them a purge delay after their newest
 * slab went free, as it would have. Under h->lock. */
static void heap_donate_free(heap_t *h) {
  for (unsigned k = 0; k < SS_KINDS; k++) {
    superslab_t *ss = h->owned_head[k];
    while (ss != NULL && ss->free_mask != 0) { /* full ones are at the back */
      superslab_t *next = ss->next;
      uint64_t all = ss_all_mask(ss);
      if ((ss->free_mask & all) == all) {
        heap_dirty_add(h, ss_dirty_bytes(ss), -1);
        heap_owned_remove(h, ss);
        ss_abandon_push(ss);
      }
      ss = next;
    }
  }
}

static bool heap_claim(heap_t *h);
static void heap_unclaim(heap_t *h);

/* ---- an idle heap's big free blocks ------------------------------------------
 * A thread that frees most of what it allocated and then waits (a worker
 * pool after a burst) keeps the slabs those blocks lie in: each still holds
 * a live block or is a class's current slab, and only the owner cools their
 * free lists (heap_cool, at its refills), so the pages stay resident for as
 * long as it sleeps (bench_idle: 16 threads freeing 90 % of 256 MiB held
 * 118 MiB of free blocks until they woke). So the collector gives back the
 * pages inside the free blocks of HEAP_IDLE_COOL_MIN and more of a heap
 * idle for the purge delay: each block's pages past its first three words
 * (its link and mark, and heap_cool's tag), without changing any list. A
 * list stays safe to walk: the owner's fast free only pushes onto it, and
 * its pops take from the current slabs alone (its refills, which take
 * from the others, are sections the claim keeps out). A current slab's
 * blocks need more, since heap_alloc_class_at pops outside a section: the
 * collector points the class's front at a slab without blocks (a pop then
 * goes to the refill, which points it back) and goes on only if the thread
 * did not run meanwhile — blocked in the kernel, with the same CPU clock,
 * from before the first store to after the last — so no pop was under way.
 * A block the owner takes later reads as zeros past those words, as malloc
 * may. */
#define HEAP_IDLE_COOL_MIN ((size_t)8192)
/* Where the collector points a class's front: a slab without blocks (its
 * list is empty, so a pop goes to the refill). Read-only and cold: the
 * small globals' pages have no room to spare (test_footprint). */
static const slab_t heap_aside_slab HAK_RODATA_COLD;
_Static_assert(HEAP_IDLE_COOL_MIN > HAK_FAST_MAX, "the classes cooled here are not in the direct table");

/* Does h hold a slab of those classes? Most threads of a program of small
 * objects do not, and cost neither a look nor a system call. Racy reads: a
 * hint. */
static bool heap_has_big(const heap_t *h) {
  for (unsigned c = 0; c < HAK_NCLASS; c++)
    if (sc_size[c] >= HEAP_IDLE_COOL_MIN &&
        (__atomic_load_n(&h->cur[c], __ATOMIC_RELAXED)->capacity != 0 || /* not the empty sentinel */
         __atomic_load_n(&h->list_head[HEAP_PARTIAL][c], __ATOMIC_RELAXED) != NULL ||
         __atomic_load_n(&h->list_head[HEAP_WAITING][c], __ATOMIC_RELAXED) != NULL))
      return true;
  return false;
}

/* Adds the pages inside the free blocks of s's list to ob, from the
 * first block past the head if skip_head; returns the bytes. Reads the
 * list only; marks the slab's gaps (superslab.h). */
static size_t heap_idle_cool_slab(slab_t *s, bool skip_head, os_batch_t *ob) {
  size_t total = 0;
  block_t *b = __atomic_load_n(&s->free, __ATOMIC_ACQUIRE);
  if (skip_head && b != NULL && slab_holds(s, b)) b = blk_next(b);
  for (unsigned k = 0; b != NULL && k < s->capacity && slab_holds(s, b); k++) {
    uintptr_t lo, hi;
    heap_cold_pages((uintptr_t)b, (uintptr_t)b + s->bsize, &lo, &hi);
    if (hi > lo) {
      os_batch_add(ob, (void *)lo, hi - lo);
      total += hi - lo;
      __atomic_store_n(&s->gaps, 1, __ATOMIC_RELAXED); /* not warm when freed (ss_slab_free) */
    }
    b = blk_next(b);
  }
  return total;
}

/* Under h->lock and the decay pass lock, h idle for the purge delay.
 * False when it could not run (the thread was not provably asleep, or the
 * owner was in a section): a later look tries again. */
static bool heap_idle_cool(heap_t *h) {
  uint32_t kid = h->kid;
  uint64_t c0 = 0, c1 = 1;
  /* Profiling: the batches hold the lists. ThreadSanitizer: it cannot see
   * the order the kernel gives (the owner blocked across the walk), and
   * would report the reads of lists the owner last wrote outside its
   * sections; its builds do without. */
  if (h->batch != NULL || HAK_TSAN) return true;
  if (!heap_has_big(h)) return true;
  if (kid == 0 || kid == os_thread_kid() || !os_thread_cpu_ns(kid, &c0) || !os_thread_blocked(kid) || !heap_claim(h))
    return false;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    slab_t *cur = h->cur[c];
    if (sc_size[c] < HEAP_IDLE_COOL_MIN || __atomic_load_n(&cur->free, __ATOMIC_RELAXED) == NULL) continue;
    __atomic_store_n(&h->front[c], (slab_t *)&heap_aside_slab, __ATOMIC_RELAXED);
  }
  atomic_thread_fence(memory_order_seq_cst);
  bool asleep = os_thread_blocked(kid) && os_thread_cpu_ns(kid, &c1) && c1 == c0;
  os_batch_t ob;
  os_batch_init(&ob);
  size_t total = 0;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    if (sc_size[c] < HEAP_IDLE_COOL_MIN) continue;
    /* Not a current slab's head: a thread stopped inside a pop (a signal
     * handler of its own that blocks, a collector's stop-the-world) had
     * already taken its front, and takes that block when it goes on. Only
     * a class whose front is aside (set above, or by an earlier look the
     * owner has not refilled since): no pop reaches its current slab. */
    if (asleep && __atomic_load_n(&h->front[c], __ATOMIC_RELAXED) == &heap_aside_slab) total += heap_idle_cool_slab(h->cur[c], true, &ob);
    for (unsigned l = 0; l < 2; l++)
      for (slab_t *s = h->list_head[l][c]; s != NULL; s = s->next) total += heap_idle_cool_slab(s, false, &ob);
  }
  os_batch_flush(&ob);
  heap_unclaim(h);
  decay_count(total);
  return asleep;
}

/* ---- an idle heap's superslabs handed over -----------------------------------
 * Releasing a full slab once every block of it came back (above) frees
 * nothing while the idle thread still holds one block of it, and a slab
 * whose blocks other threads free at random is whole only when all of
 * them are: a thread that built a structure and then waits while workers
 * replace its elements (larson's main thread; any program that loads
 * data, then joins its workers) held all of its slabs, most of their
 * blocks free, while the workers took fresh pages for every replacement
 * (a test of that shape: 219 MiB against glibc's 136 and tcmalloc's 126
 * for 110 MiB live; mimalloc, which keeps blocks with their page's owner
 * too, 224). So a collection that finds blocks of a superslab on the
 * delayed list gives the superslab to the abandoned list, as the thread's
 * exit would, when every slab of it in use is full: the working threads
 * adopt it (on a free into it, or when they need a slab) and allocate from
 * the blocks that came back. Full slabs are safe to take under h->lock
 * alone: the owner's frees into them go the slow way and take the lock
 * (heap_free_local, which then sees the new owner and frees remotely), no
 * pop reaches them (only current slabs are popped, and a full slab is
 * never current), and free slabs change hands only under the lock. A
 * thread that wakes keeps its current and listed slabs; what it frees
 * into a superslab handed over is a remote free (or takes the superslab
 * back: heap_adopt_on_free). */
#define HEAP_HANDOVER_MAX 64u /* superslabs one collection looks at */
static _Atomic size_t heap_handed_total; /* statistics: heap_handed_over */
typedef struct heap_handover {
  superslab_t *ss[HEAP_HANDOVER_MAX];
  bool ok[HEAP_HANDOVER_MAX];
  unsigned n;
} heap_handover_t;

/* May ss, a superslab of h (a slab of it carries h's tag) that other
 * threads free into, go to the abandoned list? Every slab of it in use
 * must be full (a full slab is on no list of its heap: heap_next_slab
 * marks it as it leaves the waiting list). Under h->lock, which keeps the
 * answer true until it is released: only lock holders unmark a full slab
 * or take a free one. */
static bool heap_handover_ok(const heap_t *h, superslab_t *ss) {
  uintptr_t full = h->tid | OWNER_FULL;
  slab_t *s;
  SS_FOR_EACH_USED(ss, s) {
    if (atomic_load_explicit(&s->owner, memory_order_acquire) != full) return false;
  }
  return true;
}

/* Whether ss goes to the abandoned list (decided once per collection; past
 * HEAP_HANDOVER_MAX superslabs, no). */
static bool heap_handover_pick(const heap_t *h, heap_handover_t *ho, superslab_t *ss) {
  for (unsigned i = ho->n; i-- > 0;)
    if (ho->ss[i] == ss) return ho->ok[i];
  if (ho->n == HEAP_HANDOVER_MAX) return false;
  bool ok = heap_handover_ok(h, ss);
  ho->ss[ho->n] = ss;
  ho->ok[ho->n++] = ok;
  return ok;
}

/* ss (heap_handover_ok, and its blocks on the delayed list spliced back
 * into their slabs) goes to the abandoned list: its slabs with no block
 * in use become free slabs, the others abandoned, as heap_abandon_all
 * leaves an exited thread's. Under h->lock. */
static void heap_handover(heap_t *h, superslab_t *ss) {
  slab_t *s;
  SS_FOR_EACH_USED(ss, s) {
    ss_slab_clear_mark(s);
    ss_slab_collect(s);
    if (s->used == 0)
      heap_release_slab(h, s);
    else
      atomic_store_explicit(&s->owner, OWNER_ABANDONED, memory_order_release);
  }
  heap_dirty_add(h, ss_dirty_bytes(ss), -1);
  heap_owned_remove(h, ss);
  ss_abandon_push(ss);
}

/* Under h->lock and the decay pass lock. Returns the slabs released (of
 * the delayed list, then of the lists: heap_collect_lists) and the
 * superslabs handed over. */
static unsigned heap_collect_idle(heap_t *h, uint64_t now) {
  uint64_t idle_since = h->idle_since;
  static uint32_t stamp;
  uint32_t st = __atomic_add_fetch(&stamp, 1, __ATOMIC_RELAXED);
  block_t *list = remote_delayed_take(h, false);
  uintptr_t full = h->tid | OWNER_FULL;
  /* Profiling: the batches stand between the heap and its slabs. */
  bool hand = h->batch == NULL;
  heap_handover_t ho;
  ho.n = 0;
  /* Count each full slab's blocks on the list; pick the superslabs to
   * hand over. */
  for (block_t *b = list, *last; b != NULL; b = blk_next(last)) {
    unsigned n;
    slab_t *s = heap_run(b, &last, &n);
    if (atomic_load_explicit(&s->owner, memory_order_acquire) != full) continue;
    if (hand) heap_handover_pick(h, &ho, ss_of(s));
    if (s->collect_stamp != st) {
      s->collect_stamp = st;
      s->collect_n = 0;
      s->collect_done = 0;
    }
    s->collect_n = (uint16_t)(s->collect_n + n);
  }
  /* Blocks of a superslab handed over go back into their slabs; of the
   * others, the slabs whose every block in use is on the list are
   * released; the rest goes back. */
  block_t *keep = NULL, *keep_tail = NULL;
  unsigned released = 0;
  size_t taken = 0;
  for (block_t *b = list, *last, *next; b != NULL; b = next) {
    unsigned n;
    slab_t *s = heap_run(b, &last, &n);
    next = blk_next(last);
    if (s->collect_stamp == st && s->collect_done) { /* released whole by an earlier run of it */
      taken += (size_t)n * s->bsize;
      continue;
    }
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    if ((owner & ~OWNER_FULL) != h->tid) {
      /* Not h's any more (handed over by an earlier collection, and
       * adopted or abandoned since): a list the owner may never drain
       * again must not keep it. The run goes on to the slab's
       * thread_free, as heap_drain_delayed sends such blocks. */
      taken += (size_t)n * s->bsize;
      remote_send_chain(NULL, s, b, n);
      continue;
    }
    if (owner == full && hand && heap_handover_pick(h, &ho, ss_of(s))) {
      HAK_ASSERT(s->used >= n);
      blk_set_next(last, s->free);
      s->free = b;
      s->used = (uint16_t)(s->used - n);
      taken += (size_t)n * s->bsize;
      continue;
    }
    if (s->collect_stamp == st && owner == full && s->collect_n == s->used) {
      taken += (size_t)n * s->bsize;
      s->collect_done = 1;
      s->used = 0;
      remote_unmark_full(s, h);
      /* Due a purge delay after its thread went idle (it has not touched
       * the slab since, and what others freed into it is idle too). */
      heap_release_slab_due(h, s, idle_since + opt.purge_delay_ms);
      released++;
      continue;
    }
    blk_set_next(last, NULL);
    if (keep == NULL)
      keep = b;
    else
      blk_set_next(keep_tail, b);
    keep_tail = last;
  }
  if (keep != NULL) remote_delayed_put(h, keep, keep_tail);
  remote_delayed_taken(h, taken);
  unsigned handed = 0;
  for (unsigned i = 0; i < ho.n; i++)
    if (ho.ok[i]) {
      heap_handover(h, ho.ss[i]);
      handed++;
    }
  if (handed != 0) atomic_fetch_add_explicit(&heap_handed_total, handed, memory_order_relaxed);
  HAK_STAT_NOW(ST_IDLE_HANDED, handed);
  released += handed + heap_collect_lists(h, idle_since);
  if (released) heap_donate_free(h);
  if (h->idle_cool_tick != h->idle_tick && now >= idle_since + opt.purge_delay_ms && heap_idle_cool(h))
    h->idle_cool_tick = h->idle_tick;
  h->idle_ms = now;
  if (released)
    h->idle_shift = 0;
  else if (h->idle_shift < HEAP_IDLE_SHIFT_MAX)
    h->idle_shift++;
  /* Released slabs before the heap lends (a first look at a thread blocked
   * with its delayed list past the wake mark, which takes everything at
   * once): one more look, a gap on, lends it even when nothing is left to
   * collect, so that other threads' growth takes its free slabs
   * (heap_purge_grow's idle_only) instead of waiting out the purge delay
   * (test_purge_cold: 1 of 3 runs lent without it). */
  if (released && atomic_load_explicit(&h->lend, memory_order_relaxed) == 0)
    atomic_store_explicit(&h->lists_waiting, true, memory_order_relaxed);
  return released;
}

/* ---- the listed slabs of an idle heap ----------------------------------------
 * The slabs on a heap's partial and waiting lists get blocks back from
 * other threads through their thread_free lists, which only the owner
 * collects, when it turns to them. A thread that stopped allocating never
 * does: larson_10k's main thread, waiting in pthread_join, kept 3.3 MiB
 * of slabs whose every block the workers had freed until the end. So the
 * collector takes, from an idle heap, each listed slab all of whose
 * blocks in use are on its thread_free list: none is live, so no fast
 * free of the owner can touch it (the last one's store of the count is a
 * release: slab_used_dec_release, superslab.h), and the owner's slow
 * paths, which move slabs between the lists, are kept out by the
 * hand-shake (heap.h, owner_busy). The
 * slab goes back to its superslab, due a purge delay after the thread
 * went idle, as the delayed list's slabs do. */

void heap_owner_wait(heap_t *h) {
  /* Nested: the open section already keeps the collector out (its claim
   * fails, and is withdrawn). */
  if (atomic_load_explicit(&h->owner_busy, memory_order_relaxed) != 1) return;
  for (;;) {
    atomic_store_explicit(&h->owner_busy, 0, memory_order_release);
    /* The collector holds the lock while it has the lists. */
    lock_acquire(&h->lock);
    lock_release(&h->lock);
    atomic_store_explicit(&h->owner_busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->claimed, memory_order_acquire) == 0) return;
  }
}

/* Whether the owner is outside its sections, and stays out until
 * heap_unclaim (it waits in heap_owner_wait). Under h->lock. */
static bool heap_claim(heap_t *h) {
  atomic_store_explicit(&h->claimed, 1, memory_order_relaxed);
  if (os_membarrier() && atomic_load_explicit(&h->owner_busy, memory_order_acquire) == 0) return true;
  atomic_store_explicit(&h->claimed, 0, memory_order_release);
  return false;
}

static void heap_unclaim(heap_t *h) { atomic_store_explicit(&h->claimed, 0, memory_order_release); }

/* Under h->lock and the decay pass lock, h idle. Returns the slabs
 * released; sets h->lists_waiting when slabs there hold some, not all, of
 * their blocks in use on thread_free. */
static unsigned heap_collect_lists(heap_t *h, uint64_t idle_since) {
  if (h->batch != NULL) {
    /* Profiling: the batches stand between the heap and its slabs; not
     * again until the thread refills. */
    atomic_store_explicit(&h->lists_waiting, false, memory_order_relaxed);
    atomic_store_explicit(&h->lists_tick, h->idle_tick, memory_order_relaxed);
    return 0;
  }
  if (!heap_claim(h)) {
    HAK_STAT_NOW(ST_IDLE_BUSY, 1);
    atomic_store_explicit(&h->lists_waiting, true, memory_order_relaxed); /* look again later */
    return 0;
  }
  bool waiting = false;
  unsigned released = 0;
  for (unsigned c = 0; c < HAK_NCLASS; c++)
    for (unsigned l = 0; l < 2; l++)
      for (slab_t *s = h->list_head[l][c], *next; s != NULL; s = next) {
        next = s->next;
        uintptr_t tf = atomic_load_explicit(slab_tf(s), memory_order_acquire);
        unsigned n = (unsigned)(tf >> TF_COUNT_SHIFT);
        if (n == 0) continue;
        /* used counts the blocks freed remotely until they are collected:
         * equal, none is live. 0: the owner's emptying free is on its way
         * to heap_slab_emptied. */
        unsigned used = __atomic_load_n(&s->used, __ATOMIC_ACQUIRE);
        if (used == 0 || n != used || (tf & TF_DELAYED) ||
            !atomic_compare_exchange_strong_explicit(slab_tf(s), &tf, 0, memory_order_acquire,
                                                     memory_order_relaxed)) {
          waiting = true;
          continue;
        }
        heap_list_remove(h, s);
        s->used = 0;
        heap_release_slab_due(h, s, idle_since + opt.purge_delay_ms);
        released++;
      }
  heap_unclaim(h);
  HAK_STAT_NOW(ST_IDLE_TAKEN, released);
  atomic_store_explicit(&h->lists_waiting, waiting, memory_order_relaxed);
  atomic_store_explicit(&h->lists_tick, h->idle_tick, memory_order_relaxed);
  return released;
}

/* ---- every heap ----------------------------------------------------------- */

size_t heap_purge_heaps(uint64_t now, bool force, bool blocking, uint64_t *next_due, const heap_t *skip) {
  size_t purged = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    if (h == skip) continue;
    uint64_t due = atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed), again;
    bool collect = heap_collect_due(h, now, &again);
    if (!collect && (h->dead || (!force && due > now))) {
      if (again < due) due = again;
      if (!h->dead && next_due != NULL && due < *next_due) *next_due = due;
      continue;
    }
    if (blocking)
      lock_acquire(&h->lock);
    else if (!lock_try(&h->lock)) {
      decay_note_contended();
      if (next_due != NULL && now + 1 < *next_due) *next_due = now + 1;
      continue;
    }
    if (collect) {
      /* Idle for a gap at least: what the others free of its blocks they
       * may keep and reuse (heap_xc.c), instead of taking fresh memory
       * while it comes here. */
      if (now >= h->idle_since + opt_idle_gap_ms()) heap_lend_set(h, 1);
      heap_collect_idle(h, now);
    }
    if (!h->dead && (force || atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed) <= now))
      purged += heap_purge(h, now, force);
    due = atomic_load_explicit(&h->next_purge_ms, memory_order_relaxed);
    lock_release(&h->lock);
    /* Come back for the delayed list while it holds blocks. */
    if (heap_collect_due(h, now, &again) || again < due) due = again;
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

/* ---- read-only accessors for the statistics' residency walk (stats.c) ----
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
    slab_t *sh = __atomic_load_n(&h->batch_mem, __ATOMIC_RELAXED);
    if (sh != NULL) {
      size_t len = align_up(HAK_NCLASS * sizeof(slab_t), os_page_size);
      fn(sh, len, arg);
      mapped += len;
    }
  }
  return mapped + (per ? (n + per - 1) / per : 0) * (64 * 1024);
}

/* Bytes of blocks waiting in the threads' caches of pending remote frees
 * (remote.h) and kept by them (heap_xc.c): freed by the program, still
 * counted in their slabs' used. */
size_t heap_remote_pending_bytes(void) {
  size_t total = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next) {
    uint32_t busy = __atomic_load_n(&h->rcache.busy, __ATOMIC_RELAXED);
    for (; busy != 0; busy &= busy - 1) {
      const remote_pending_t *w = &h->rcache.way[__builtin_ctz(busy)];
      const slab_t *s = __atomic_load_n(&w->slab, __ATOMIC_RELAXED);
      int32_t room = __atomic_load_n(&w->room, __ATOMIC_RELAXED);
      int32_t start = __atomic_load_n(&w->start, __ATOMIC_RELAXED);
      if (s != NULL && start >= room) total += remote_way_bytes(start, room);
    }
#if HEAP_XC_ENABLE
    /* And the blocks it keeps (heap_xc.c): pushes less pops per class. */
    uint64_t kept = __atomic_load_n(&h->xm.live, __ATOMIC_RELAXED) | __atomic_load_n(&h->xm.has, __ATOMIC_RELAXED);
    for (; kept != 0; kept &= kept - 1) {
      unsigned c = (unsigned)__builtin_ctzll(kept);
      uint16_t n = __atomic_load_n(&h->xc.n[c], __ATOMIC_RELAXED);
      uint16_t used = (uint16_t)__atomic_load_n(&h->xc.run[c].used, __ATOMIC_RELAXED);
      total += (size_t)(uint16_t)(n - used) * sc_size[c];
    }
#endif
  }
  return total;
}

size_t heap_delayed_bytes(void) {
  size_t total = 0;
  for (heap_t *h = __atomic_load_n(&heap_all, __ATOMIC_ACQUIRE); h != NULL; h = h->all_next)
    total += atomic_load_explicit(&h->delayed_bytes, memory_order_relaxed);
  return total;
}

size_t heap_handed_over(void) { return atomic_load_explicit(&heap_handed_total, memory_order_relaxed); }
