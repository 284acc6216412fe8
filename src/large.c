/*
 * large.c — blocks above 1 MiB (see large.h).
 *
 * Both the arenas and the mapping cache exist for allocate/free cycles of
 * big buffers, where a syscall and a page fault per page on every cycle
 * would lose to glibc (whose mmap threshold adapts upwards): freed memory
 * stays committed for the purge delay and serves the next request. The
 * cache of dedicated mappings is bounded in entries and bytes; its best
 * entry is resized with mremap to fit, or split with the rest cached, and
 * it serves an arena-sized block before the arenas fault fresh pages in.
 */
#include "large.h"
#include "annotate.h"
#include "decay.h"
#include "lock.h"
#include "report.h"
#include "options.h"
#include "os.h"
#include "ownmap.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#define LARGE_MAGIC 0x4c41524745484b4dull /* "MKHEGRAL" */
#define LARGE_HDR 64
#define LARGE_CACHE_SLOTS 16

struct large_arena;

typedef struct large_hdr {
  uint64_t magic;
  uint8_t *base;    /* start of the mapping (or arena span) */
  size_t map_size;  /* bytes mapped (or span bytes) */
  size_t off;       /* user pointer - base */
  uint64_t live;
  struct large_arena *arena; /* NULL: a dedicated mapping */
  uint64_t pad[2];
} large_hdr_t;

/* ---- arenas: blocks of 1..32 MiB carved from 128 MiB reservations -------
 * (and from HAKMEM_ARENA_MIN, 128 KiB by default, up: alloc.c.) Freed spans
 * coalesce and stay committed for the purge delay, so a program cycling
 * big buffers of varying sizes reuses faulted-in pages instead of mapping
 * (and faulting) fresh ones each time, and a freed block of one size
 * serves any other. All of an arena's 4 MiB regions are marked OWN_LARGE
 * for its lifetime; each block still has its header just below the user
 * pointer. Each arena belongs to one group (large_group_t) and is guarded
 * by its group's lock. */
#define ARENA_SIZE ((size_t)128 << 20)
#define ARENA_GRAN_SHIFT 16
#define ARENA_GRAN ((size_t)1 << ARENA_GRAN_SHIFT)
#define ARENA_GRANS ((uint32_t)(ARENA_SIZE >> ARENA_GRAN_SHIFT))
#define ARENA_BLOCK_MAX ((size_t)32 << 20)
/* Granules of one 4 MiB region (a superslab's size: large_lend_region). */
#define ARENA_REGION_GRANS ((uint32_t)(HAK_SS_SIZE >> ARENA_GRAN_SHIFT))
_Static_assert(ARENA_SIZE / HAK_SS_SIZE <= 32, "an arena's regions fit its lent mask");
/* The heaps' growth decommits every free span (large_answer_grow), or
 * only those idle for the whole purge delay once the arenas took back half
 * of what that cost them (LARGE_GROW_REGRET_MIN_KIB or more; the counts
 * halve past LARGE_GROW_REGRET_SPAN_KIB). */
#define LARGE_GROW_REGRET_MIN_KIB 4096u
#define LARGE_GROW_REGRET_SPAN_KIB (256u << 10)
/* KiB large_answer_grow decommitted and KiB of cold granules the arenas
 * took since (at most as many); racy counts, as the heaps' are. */
static _Atomic uint32_t large_grow_lost, large_grow_back;
static _Atomic bool large_grow_spare;

/* Free spans by length, for the fit: one bin per length up to
 * ARENA_EXACT_BINS granules (2 MiB: every block up to HAK_SMALL_MAX and
 * its header fits an exact bin), then one per power of two up to
 * ARENA_GRANS. */
#define ARENA_EXACT_BINS 32u
#define ARENA_BINS (ARENA_EXACT_BINS + 6u)
_Static_assert(ARENA_GRANS == 2048u, "the power-of-two bins above 32 granules end at 2047");

/* warm[]: one bit per granule that may hold resident pages: set when the
 * granule goes into a block (the program may touch all of it), cleared
 * when it is decommitted. A span is not wholly warm or cold: a freed block
 * coalesces with the never-touched rest of the arena, and a flag per span
 * made the whole merged span look dirty (calloc zeroed pages the kernel
 * had never handed out, faulting them in) or the freed block look cold.
 * The bits let placement prefer a fit that faults nothing in, calloc zero
 * only what may be dirty, and the purge decommit only what was touched. */
/* recent[]: one bit per granule freed since epoch_ms. A freed block
 * coalesces with its free neighbours, and the merged span's span_ms is
 * the newest free: in a program that keeps freeing next to the same free
 * span, that time never grew old and the span's warm granules never went
 * back (bench_large_churn held 12-21 MiB of them even with a purge delay
 * of 1 ms). So a span's warm granules also go back one by one, by a clock
 * per arena: at a pass at least the purge delay after epoch_ms, a warm
 * free granule without its recent bit has been free since before
 * epoch_ms, so for at least the delay; then the epoch starts again. A
 * granule goes back between one and two purge delays after its last
 * free, whatever its neighbours do. */
struct large_group;
typedef struct large_arena {
  uint8_t *base;
  struct large_arena *next;
  struct large_group *group; /* whose lock guards this arena */
  uint32_t used;         /* granules in blocks */
  uint64_t epoch_ms;     /* when recent[] was last cleared */
  uint64_t warm[ARENA_GRANS / 64];
  uint64_t recent[ARENA_GRANS / 64];
  /* The free spans, each known by its first granule g: starts[] has bit
   * g set, span_len[g] is its length and span_ms[g] when it was last
   * freed into; span_first[] holds g at the span's last granule, so a
   * freed block finds the free span that ends just before it. There was
   * a table sorted by start: every allocation and free binary-searched
   * it and shifted its tail (mid_mt_64k_1m: arena_put 16 % of the
   * samples, arena_find 10 %, memmove 6 %). By granule, a neighbour is
   * one load and a walk in address order a scan of starts[]: that row
   * 41.8 -> 51.1 M operations a second (7 interleaved runs), 518 -> 442
   * instructions per operation of its 1-thread form under cachegrind.
   * span_len and span_first keep stale values where no span starts or
   * ends: starts[] decides, and a span ending at g-1 is the one whose
   * start span_first[g-1] names only if that start is set and its length
   * reaches g (arena_span_before).
   * The fit index (arena_fit): bin_bits[b] has bit g set when a free span
   * of bin b (arena_bin) starts at granule g; bin_words[b] says which of
   * its words are not 0, bin_mask which bins are not empty. */
  uint64_t starts[ARENA_GRANS / 64];
  uint64_t bin_mask;
  uint32_t bin_words[ARENA_BINS];
  uint64_t bin_bits[ARENA_BINS][ARENA_GRANS / 64];
  uint16_t span_len[ARENA_GRANS];
  uint16_t span_first[ARENA_GRANS];
  uint64_t span_ms[ARENA_GRANS];
  /* req_end[g]: for a live block whose span starts at granule g, the
   * bytes from g's start to the end of what the program asked for (the
   * header or alignment gap, then the size): the statistics split the
   * block's resident pages there into requested bytes and rounding (the
   * last granule's tail, realloc's room). 0 where no block starts: the
   * walk finds the blocks by it. Set and cleared under the group's lock
   * (large_alloc, large_free); realloc in place, which may run without
   * it, stores only to a start that stays nonzero. Relaxed atomics: the
   * walk reads while a block's holder resizes it. */
  uint32_t req_end[ARENA_GRANS];
  /* Bit r: the arena's 4 MiB region r is lent to the heaps as a superslab
   * (large_lend_region): its granules count as used, and the walks skip it
   * (the superslab registry tells it). */
  uint32_t lent;
} large_arena_t; /* lives in the arena's first granule */
_Static_assert(sizeof(large_hdr_t) == LARGE_HDR, "large header size");
_Static_assert(sizeof(large_arena_t) <= ((size_t)1 << 16), "arena descriptor fits its granule");
_Static_assert(ARENA_GRANS <= 65536u, "granule numbers fit span_len and span_first");

typedef struct large_slot {
  uint8_t *base;
  size_t size;
  uint64_t freed_ms;
} large_slot_t;

static hak_lock_t large_lock = LOCK_INIT;
static _Atomic size_t large_live_maps, large_live_map_bytes; /* dedicated, in use */
static large_slot_t large_cache[LARGE_CACHE_SLOTS];
static unsigned large_cache_n;
static size_t large_cache_bytes;

/* Written under large_lock, peeked without it (atomic, so the peek is
 * well-defined; a stale value only costs a lock round-trip or a miss). */
static void large_cache_set_n(unsigned n) { __atomic_store_n(&large_cache_n, n, __ATOMIC_RELAXED); }

/* Under large_lock: take entry i out of the cache (the last one fills the
 * gap; the order means nothing). */
static large_slot_t large_cache_remove(unsigned i) {
  large_slot_t e = large_cache[i];
  large_cache_bytes -= e.size;
  large_cache[i] = large_cache[large_cache_n - 1];
  large_cache_set_n(large_cache_n - 1);
  return e;
}

/* Arena groups. With one lock for every thread's big blocks, two threads
 * on two cores waited for each other on every call (bench_mid_large_mt
 * with 64 KiB..1 MiB blocks: 5.4 M operations a second at 2 threads, 9.3 M
 * at 1); with a group each, 18..24 M. There are as many groups as CPUs the
 * process may run on (up to LARGE_GROUPS); a thread takes the next group
 * in turn at its first arena block and keeps it, and a free goes to the
 * group of its block's arena, whoever frees it. Few groups keep the pools
 * few: 16 threads cycling 64 KiB..1 MiB blocks on 2 cores peaked at 280
 * MiB with four groups, 255..257 with two, 257 with one (tcmalloc 266).
 * (A group by the CPU a thread runs on at each call shared the locks
 * better, 147..155 k operations a second there against 106..128 k, but a
 * thread's first call on a CPU could then map that group's first arena in
 * a steady state: test_decay steady.) */
#define LARGE_GROUPS 8
typedef struct large_group {
  hak_lock_t lock;
  large_arena_t *arenas;
  uint64_t next_purge_ms;
  /* Bytes of free arena spans that may be resident: they go back by time
   * only (decay.h), so big buffers cycled faster than the purge delay
   * never fault their pages in again. */
  size_t dirty_bytes;
  /* Each group on lines of its own (two: the adjacent-line prefetcher
   * fetches pairs). Unpadded, where the array landed decided whether one
   * group's counters shared a line with the next group's lock: in the
   * secure library they did, and two threads on two groups ran
   * bench_mid_large_mt (64 KiB..1 MiB) at 10-13 M operations a second
   * against 25-27 M padded; the default library happened to be clear. */
} __attribute__((aligned(128))) large_group_t;
static large_group_t large_groups[LARGE_GROUPS];
static _Atomic unsigned large_group_turn;
static HAK_TLS large_group_t *large_my_group;

static large_group_t *large_group_mine(void) {
  if (HAK_LIKELY(large_my_group != NULL)) return large_my_group;
  unsigned n = os_cpu_count();
  if (n > LARGE_GROUPS) n = LARGE_GROUPS;
  large_my_group = &large_groups[atomic_fetch_add_explicit(&large_group_turn, 1, memory_order_relaxed) % n];
  return large_my_group;
}

/* decay's slot (decay.h), registered when large.c first maps memory:
 * before that it holds nothing to purge. large_purge counts its bytes. */
static size_t large_decay_purge(uint64_t now, bool force, bool blocking, uint64_t *next_due) {
  (void)blocking;
  uint64_t due = large_purge(now, force);
  if (next_due != NULL && due < *next_due) *next_due = due;
  return 0;
}

static size_t large_answer_grow(uint64_t now);
static void large_decay_register(void) {
  decay_register(DECAY_LARGE, large_decay_purge);
  decay_register_grow(DECAY_LARGE, large_answer_grow);
}

/* The warm bits of granules [start, start+n), n >= 1, a word at a time:
 * WARM_ALL tells whether all are set and WARM_ANY whether any is (1 or 0;
 * both stop at the first word that decides, no count: the searches ask
 * this of whole spans, an arena's untouched tail among them), WARM_COUNT
 * counts the set ones, WARM_SET and WARM_CLEAR change them. */
enum { WARM_ALL, WARM_ANY, WARM_COUNT, WARM_SET, WARM_CLEAR };
static inline uint32_t arena_bits(uint64_t *bits, uint32_t start, uint32_t n, int op) {
  uint32_t w0 = start >> 6, w1 = (start + n - 1) >> 6, c = 0;
  if (HAK_LIKELY(w0 == w1)) {
    /* Granules within one word of bits (most blocks of up to 16 granules,
     * 1 MiB): one mask, no loop. bench_mid_large_mt's 1-thread form with
     * 64 KiB..1 MiB blocks, under cachegrind: 405 -> 391 instructions an
     * operation. */
    uint64_t m = (~(uint64_t)0 >> (64 - n)) << (start & 63), *x = &bits[w0];
    switch (op) {
    case WARM_ALL: return (*x & m) == m;
    case WARM_ANY: return (*x & m) != 0;
    case WARM_COUNT: return (uint32_t)hak_popcount64(*x & m);
    case WARM_SET: *x |= m; return 0;
    default: *x &= ~m; return 0;
    }
  }
  uint64_t first = ~(uint64_t)0 << (start & 63), last = ~(uint64_t)0 >> (63 - ((start + n - 1) & 63));
  for (uint32_t w = w0; w <= w1; w++) {
    uint64_t m = (w == w0 ? first : ~(uint64_t)0) & (w == w1 ? last : ~(uint64_t)0);
    uint64_t *x = &bits[w];
    switch (op) {
    case WARM_ALL:
      if ((*x & m) != m) return 0;
      break;
    case WARM_ANY:
      if ((*x & m) != 0) return 1;
      break;
    case WARM_COUNT: c += hak_popcount64(*x & m); break;
    case WARM_SET: *x |= m; break;
    default: *x &= ~m; break;
    }
  }
  return op == WARM_ALL ? 1 : c; /* WARM_ANY: none set, c is 0 */
}
static inline uint32_t arena_warm(large_arena_t *a, uint32_t start, uint32_t n, int op) {
  return arena_bits(a->warm, start, n, op);
}

static bool arena_all_warm(large_arena_t *a, uint32_t start, uint32_t n) {
  return arena_warm(a, start, n, WARM_ALL) != 0;
}

static bool arena_granule_warm(const large_arena_t *a, uint32_t g) {
  return hak_bit_test(a->warm, g);
}

static unsigned arena_bin(uint32_t count) {
  if (count <= ARENA_EXACT_BINS) return count - 1;
  return ARENA_EXACT_BINS + (unsigned)(31 - __builtin_clz(count)) - 5u; /* 33..63 -> 32, ... */
}

static void arena_index_add(large_arena_t *a, uint32_t start, uint32_t count) {
  unsigned b = arena_bin(count), w = start >> 6;
  a->bin_bits[b][w] |= (uint64_t)1 << (start & 63);
  a->bin_words[b] |= (uint32_t)1 << w;
  a->bin_mask |= (uint64_t)1 << b;
  a->span_len[start] = (uint16_t)count;
}

static void arena_index_del(large_arena_t *a, uint32_t start, uint32_t count) {
  unsigned b = arena_bin(count), w = start >> 6;
  a->bin_bits[b][w] &= ~((uint64_t)1 << (start & 63));
  if (a->bin_bits[b][w] == 0) {
    a->bin_words[b] &= ~((uint32_t)1 << w);
    if (a->bin_words[b] == 0) a->bin_mask &= ~((uint64_t)1 << b);
  }
}

/* The start of a free span of a that fits grans granules, UINT32_MAX if
 * none: the tightest, as far as the bins tell (in an exact bin any span
 * is; in a power-of-two bin, the tightest of its spans that fit). Bits and
 * counting zeros, where a scan of every free span cost a few hundred
 * instructions once blocks of 64 KiB..1 MiB lived here. */
static uint32_t arena_fit(const large_arena_t *a, uint32_t grans) {
  unsigned b0 = arena_bin(grans);
  for (uint64_t m = a->bin_mask & (~(uint64_t)0 << b0); m != 0; m &= m - 1) {
    unsigned b = (unsigned)__builtin_ctzll(m);
    if (b < ARENA_EXACT_BINS || b > b0) {
      unsigned w = (unsigned)__builtin_ctz(a->bin_words[b]);
      return (w << 6) + (uint32_t)__builtin_ctzll(a->bin_bits[b][w]);
    }
    uint32_t best = UINT32_MAX, bc = UINT32_MAX;
    for (uint32_t ws = a->bin_words[b]; ws != 0; ws &= ws - 1) {
      unsigned w = (unsigned)__builtin_ctz(ws);
      for (uint64_t x = a->bin_bits[b][w]; x != 0; x &= x - 1) {
        uint32_t st = (w << 6) + (uint32_t)__builtin_ctzll(x), c = a->span_len[st];
        if (c >= grans && c < bc) best = st, bc = c;
      }
    }
    if (best != UINT32_MAX) return best;
  }
  return UINT32_MAX;
}

static bool arena_is_start(const large_arena_t *a, uint32_t g) { return hak_bit_test(a->starts, g); }

/* [start, start+count), count > 0, becomes a free span freed at ms. */
static void arena_span_add(large_arena_t *a, uint32_t start, uint32_t count, uint64_t ms) {
  a->starts[start >> 6] |= (uint64_t)1 << (start & 63);
  a->span_first[start + count - 1] = (uint16_t)start;
  a->span_ms[start] = ms;
  arena_index_add(a, start, count);
}

/* The free span starting at start goes (its granules are about to join a
 * block or a bigger span). */
static void arena_span_del(large_arena_t *a, uint32_t start) {
  a->starts[start >> 6] &= ~((uint64_t)1 << (start & 63));
  arena_index_del(a, start, a->span_len[start]);
}

/* The start of the free span that ends just before granule g, or 0 (the
 * descriptor's granule, never free) if none does. */
static uint32_t arena_span_before(const large_arena_t *a, uint32_t g) {
  uint32_t f = a->span_first[g - 1];
  return f < g && arena_is_start(a, f) && f + a->span_len[f] == g ? f : 0;
}

/* The first free span starting at or after granule g: its start, or
 * ARENA_GRANS if none does (address order, for the walks). */
static uint32_t arena_next_span(const large_arena_t *a, uint32_t g) {
  if (g >= ARENA_GRANS) return ARENA_GRANS;
  uint32_t w = g >> 6;
  uint64_t x = a->starts[w] & (~(uint64_t)0 << (g & 63));
  while (x == 0) {
    if (++w == ARENA_GRANS / 64) return ARENA_GRANS;
    x = a->starts[w];
  }
  return (w << 6) + (uint32_t)__builtin_ctzll(x);
}

static large_arena_t *arena_new(large_group_t *g) {
  uint8_t *base = os_map_aligned(ARENA_SIZE, HAK_SS_SIZE);
  if (base == NULL) return NULL;
  large_decay_register();
  large_arena_t *a = (large_arena_t *)base;
  a->base = base;
  a->used = 1; /* granule 0 holds this descriptor */
  arena_span_add(a, 1, ARENA_GRANS - 1, 0);
  for (size_t r = 0; r < ARENA_SIZE; r += HAK_SS_SIZE) ownmap_set(base + r, OWN_LARGE);
  a->group = g;
  a->next = g->arenas;
  g->arenas = a;
  return a;
}

/* warm granules' bytes left the group's free spans (taken or decommitted). */
static void group_dirty_sub(large_group_t *g, uint32_t warm) {
  size_t b = (size_t)warm << ARENA_GRAN_SHIFT;
  g->dirty_bytes = g->dirty_bytes > b ? g->dirty_bytes - b : 0;
}

/* Granules [g0, g0+n), warm of them warm, inside the free span starting
 * at st, go into a block: from the span's front, its end or its middle
 * (the span splits in two); what is left keeps the span's age.
 * arena_take_pick and realloc's growth in place both claim this way. Under the
 * arena's group lock. */
static void arena_claim(large_arena_t *a, uint32_t st, uint32_t g0, uint32_t n, uint32_t warm) {
  group_dirty_sub(a->group, warm);
  arena_warm(a, g0, n, WARM_SET);
  uint32_t end = st + a->span_len[st];
  uint64_t ms = a->span_ms[st];
  arena_span_del(a, st);
  if (g0 > st) arena_span_add(a, st, g0 - st, ms);
  if (g0 + n < end) arena_span_add(a, g0 + n, end - g0 - n, ms);
  a->used += n;
}

/* The window of grans granules inside the free span [st, st+c) that covers
 * the most warm granules: its start in *at, the count returned. The span's
 * ends win ties over its middle, which would split it: a freed block merges
 * with cold neighbours on either side, and a purge takes a span's oldest
 * granules first, so its warm part may lie anywhere. */
static uint32_t arena_window(large_arena_t *a, uint32_t st, uint32_t c, uint32_t grans, uint32_t *at) {
  uint32_t w = arena_warm(a, st, grans, WARM_COUNT), best = w, bx = st, last = st + c - grans;
  for (uint32_t x = st + 1; x <= last && best < grans; x++) {
    w += (uint32_t)arena_granule_warm(a, x + grans - 1) - (uint32_t)arena_granule_warm(a, x - 1);
    if (w > best) best = w, bx = x;
  }
  if (bx != st && bx != last && arena_warm(a, last, grans, WARM_COUNT) == best) bx = last;
  *at = bx;
  return best;
}

/* Best fit over every arena of g among the spans whose first grans granules are
 * all warm, else the fit that covers the most warm granules (a new arena if
 * none fits). A block
 * placed on warm granules faults nothing in and adds nothing to the
 * resident set; one placed on cold granules grows it by its size, while
 * the warm spans it passed over stay resident too. Over random big buffers
 * (bench_big_buffers' pattern, 13 seeds, a model of the arenas) preferring
 * a warm fit lowered the peak of resident arena granules against the peak
 * of live ones from 1.30x to 1.22x (geometric mean; worst 1.46x to 1.29x)
 * and the bytes faulted in by 9 %. arena_find chooses, arena_take_pick
 * claims: between the two the caller may look for resident memory
 * elsewhere (large_alloc) without searching twice. */
typedef struct arena_pick {
  large_arena_t *a; /* NULL: no fit, a new arena's first span */
  uint32_t st;      /* the free span's first granule */
  uint32_t g0;      /* the block's first granule */
  uint32_t warm_n;  /* how many of its granules are warm (0 unscanned) */
  bool warm;        /* every granule of it warm */
} arena_pick_t;

/* Where a block of grans granules goes in g's arenas (pk). scan: when the
 * best fit is not all warm, look for the window that covers the most warm
 * granules; without it the best fit only. Under g->lock; pk stays valid
 * while it is held. */
static void arena_find(large_group_t *g, uint32_t grans, bool scan, arena_pick_t *pk) {
  large_arena_t *best = NULL;
  uint32_t bi = 0;
  uint32_t bc = UINT32_MAX;
  for (large_arena_t *a = g->arenas; a != NULL && bc != grans; a = a->next) {
    uint32_t st = arena_fit(a, grans);
    if (st != UINT32_MAX && a->span_len[st] < bc) best = a, bi = st, bc = a->span_len[st];
  }
  /* The best fit is warm in a steady state: one test. Only when it would
   * fault pages in are the other spans looked at, and then the faults cost
   * more than the search: the block goes where it covers the most warm
   * granules (arena_window), the smaller span on a tie. */
  uint32_t g0 = bi;
  bool bwarm = best != NULL && arena_all_warm(best, g0, grans);
  uint32_t bw = bwarm ? grans : 0;
  if (best != NULL && !bwarm && scan) {
    bc = UINT32_MAX;
    for (large_arena_t *a = g->arenas; a != NULL && !(bw == grans && bc == grans); a = a->next)
      for (uint32_t st = arena_next_span(a, 1); st < ARENA_GRANS; st = arena_next_span(a, st + 1)) {
        uint32_t c = a->span_len[st], at = st;
        if (c < grans) continue;
        /* A span with no warm granule (an arena's untouched tail, hundreds
         * of granules) scores 0 wherever the block goes: no window slid
         * over it. */
        uint32_t w = arena_warm(a, at, c, WARM_ANY) ? arena_window(a, at, c, grans, &at) : 0;
        if (w > bw || (w == bw && c < bc)) {
          best = a, bi = st, bc = c, bw = w, g0 = at;
          if (bw == grans && bc == grans) break;
        }
      }
    bwarm = bw == grans;
  }
  *pk = (arena_pick_t){best, bi, g0, bw, bwarm};
}

/* Claims the block arena_find placed (a new arena when it found no fit).
 * Sets *zero when no granule of the block is warm (all fresh zero pages);
 * warm_out (if not NULL) gets the block's warm bits, bit j for its granule
 * j. Under g->lock. */
static uint8_t *arena_take_pick(large_group_t *g, uint32_t grans, arena_pick_t pk, large_arena_t **out, bool *zero,
                                uint64_t *warm_out) {
  if (pk.a == NULL) {
    pk.a = arena_new(g);
    if (pk.a == NULL) return NULL;
    pk.st = pk.g0 = 1; /* a new arena: one span after the descriptor */
  }
  uint8_t *p = pk.a->base + ((size_t)pk.g0 << ARENA_GRAN_SHIFT);
  uint32_t warm = pk.warm ? grans : arena_warm(pk.a, pk.g0, grans, WARM_COUNT);
  *zero = warm == 0;
  if (warm != grans && HAK_UNLIKELY(atomic_load_explicit(&large_grow_lost, memory_order_relaxed) != 0)) {
    uint32_t lost = atomic_load_explicit(&large_grow_lost, memory_order_relaxed);
    uint32_t back = atomic_load_explicit(&large_grow_back, memory_order_relaxed) +
                    ((grans - warm) << (ARENA_GRAN_SHIFT - 10));
    atomic_store_explicit(&large_grow_back, back < lost ? back : lost, memory_order_relaxed);
  }
  if (warm_out != NULL && warm != 0)
    for (uint32_t j = 0; j < grans; j++)
      if (pk.warm || arena_granule_warm(pk.a, pk.g0 + j)) warm_out[j >> 6] |= (uint64_t)1 << (j & 63);
  arena_claim(pk.a, pk.st, pk.g0, grans, warm);
  *out = pk.a;
  return p;
}

/* The block whose span starts at span now ends what was asked for at end
 * bytes past span (req_end). */
static void arena_note_end(large_arena_t *a, const uint8_t *span, size_t end) {
  __atomic_store_n(&a->req_end[(size_t)(span - a->base) >> ARENA_GRAN_SHIFT], (uint32_t)end, __ATOMIC_RELAXED);
}

/* Give granules [start, start+count) back (all warm: they were a block's),
 * merging with free neighbours; the merged span was freed now. Under its
 * group's lock. */
static void arena_put(large_arena_t *a, uint32_t start, uint32_t count, uint64_t now) {
  a->used -= count;
  arena_bits(a->recent, start, count, WARM_SET);
  a->group->dirty_bytes += (size_t)count << ARENA_GRAN_SHIFT;
  uint32_t end = start + count, prev = arena_span_before(a, start);
  if (prev != 0) {
    arena_span_del(a, prev);
    start = prev;
  }
  if (end < ARENA_GRANS && arena_is_start(a, end)) {
    uint32_t n = a->span_len[end];
    arena_span_del(a, end);
    end += n;
  }
  arena_span_add(a, start, end - start, now);
}

/* Decommit the warm granules of [lo, lo+n), all free, in one madvise from
 * the first warm granule to the last: the cold ones between cost the
 * kernel a page-table walk, not a syscall. Under its group's lock. */
static void arena_decommit(large_arena_t *a, uint32_t lo, uint32_t n) {
  uint32_t warm = arena_warm(a, lo, n, WARM_COUNT), hi = lo + n;
  if (warm == 0) return;
  while (!arena_granule_warm(a, lo)) lo++;
  while (!arena_granule_warm(a, hi - 1)) hi--;
  os_decommit(a->base + ((size_t)lo << ARENA_GRAN_SHIFT), (size_t)(hi - lo) << ARENA_GRAN_SHIFT);
  arena_warm(a, lo, hi - lo, WARM_CLEAR);
  group_dirty_sub(a->group, warm);
  decay_count((size_t)warm << ARENA_GRAN_SHIFT);
}

static bool arena_granule_recent(const large_arena_t *a, uint32_t g) {
  return hak_bit_test(a->recent, g);
}

/* Decommit free spans idle for delay, and at the end of an arena's epoch
 * (not in a pass for growth: grow) the granules of the others free since
 * before it (see recent[]); unmap arenas that are wholly free and clean,
 * keeping one. Under g->lock. Lowers *next to when the next warm granule
 * becomes due. */
static void arena_purge_locked(large_group_t *g, uint64_t now, uint64_t delay, bool force, bool grow,
                               uint64_t *next) {
  large_arena_t **link = &g->arenas;
  while (*link != NULL) {
    large_arena_t *a = *link;
    bool clean = true;
    bool tick = !grow && (force || os_idle_for(now, a->epoch_ms, delay));
    for (uint32_t st = arena_next_span(a, 1); st < ARENA_GRANS; st = arena_next_span(a, st + 1)) {
      uint32_t count = a->span_len[st];
      uint64_t freed_ms = a->span_ms[st];
      if (!arena_warm(a, st, count, WARM_ANY)) continue;
      if (force || os_idle_for(now, freed_ms, delay)) {
        arena_decommit(a, st, count);
        continue;
      }
      if (tick) {
        uint32_t end = st + count;
        for (uint32_t g = st; g < end;) {
          if (arena_granule_recent(a, g)) {
            g++;
            continue;
          }
          uint32_t k = g;
          while (k < end && !arena_granule_recent(a, k)) k++;
          arena_decommit(a, g, k - g);
          g = k;
        }
        if (!arena_warm(a, st, count, WARM_ANY)) continue;
      }
      clean = false;
      uint64_t due = (tick || grow ? now : a->epoch_ms) + delay;
      if (freed_ms + delay < due) due = freed_ms + delay;
      if (due < *next) *next = due;
    }
    if (tick) {
      memset(a->recent, 0, sizeof a->recent);
      a->epoch_ms = now;
    }
    if (a->used == 1 && clean && (force || a != g->arenas || a->next != NULL)) {
      *link = a->next;
      uint8_t *base = a->base;
      for (size_t r = 0; r < ARENA_SIZE; r += HAK_SS_SIZE) ownmap_set(base + r, OWN_NONE);
      os_unmap(base, ARENA_SIZE);
      continue;
    }
    link = &a->next;
  }
}

static large_hdr_t *large_hdr_of(const void *p) {
  return (large_hdr_t *)((uintptr_t)p - LARGE_HDR);
}

/* Does h, a readable header, describe a live block whose user pointer is p? */
static bool large_hdr_valid(const large_hdr_t *h, const void *p) {
  return h->magic == LARGE_MAGIC && h->live && h->base + h->off == (const uint8_t *)p;
}

/* Is p a live large block's user pointer? An arena's regions are mapped
 * whole, so the header below any pointer in them can be read. A dedicated
 * mapping may end anywhere in its region (the fuzzer found free(p) of an
 * address past it reading unmapped memory): only its first bytes, at the
 * region's base, are sure to be mapped, and they hold the header or a copy
 * of its magic and offset (large_register), which name the one valid
 * pointer. A FAR block's only valid pointer is its region's base. */
HAK_INLINE bool large_valid(const void *p, unsigned v) {
  uintptr_t a = (uintptr_t)p;
  uintptr_t in = a & HAK_SS_MASK;
  /* An arena block aligned to 64 KiB may start on a 4 MiB boundary, its
   * header at the end of the region below: readable if that region is an
   * arena's too (granule 0 of an arena holds its descriptor, never a block). */
  if (v == OWN_LARGE && in < LARGE_HDR && ownmap_get((const uint8_t *)p - LARGE_HDR) != OWN_LARGE) return false;
  if (v == OWN_LARGE_FAR && in != 0) return false;
  if (v == OWN_LARGE_MAP) {
    const large_hdr_t *lead = (const large_hdr_t *)(a - in);
    if (in < LARGE_HDR || lead->magic != LARGE_MAGIC || lead->off != in) return false;
  }
  return large_hdr_valid(large_hdr_of(p), p);
}

/* A dedicated mapping's user pointer: base + off, the base 4 MiB-aligned. */
static void large_register(void *user) {
  uintptr_t u = (uintptr_t)user;
  if ((u & HAK_SS_MASK) == 0) {
    ownmap_set(user, OWN_LARGE_FAR);
    return;
  }
  large_hdr_t *lead = (large_hdr_t *)(u & ~(uintptr_t)HAK_SS_MASK);
  if (lead != large_hdr_of(user)) { /* aligned: the gap below the header is free */
    ann_meta(lead, sizeof *lead);
    lead->magic = LARGE_MAGIC;
    lead->off = u & HAK_SS_MASK;
  }
  ownmap_set(user, OWN_LARGE_MAP);
}

/* Move cached mappings idle for the purge delay (all if force) into drop[]
 * for unmapping outside the lock; returns how many. Under large_lock.
 * Lowers *next (if not NULL) to when the next one becomes due. */
static unsigned large_cache_expire_locked(uint64_t now, bool force, large_slot_t *drop, uint64_t *next) {
  unsigned nd = 0;
  uint64_t delay = opt.purge_delay_ms;
  for (unsigned i = 0; i < large_cache_n;) {
    if (force || os_idle_for(now, large_cache[i].freed_ms, delay)) {
      drop[nd++] = large_cache_remove(i);
    } else {
      if (next != NULL && large_cache[i].freed_ms + delay < *next) *next = large_cache[i].freed_ms + delay;
      i++;
    }
  }
  return nd;
}

/* Under large_lock: the cached mapping that best serves need, -1 if none:
 * the smallest one at least that big, else (unless at_least) the biggest
 * smaller one, which the caller grows. Its pages are already faulted in,
 * which for big blocks costs more than the syscalls. */
static int large_cache_best_locked(size_t need, bool at_least) {
  int best = -1;
  for (unsigned i = 0; i < large_cache_n; i++) {
    size_t s = large_cache[i].size, b = best < 0 ? 0 : large_cache[best].size;
    bool better = best < 0 || (s >= need ? (b < need || s < b) : (b < need && s > b));
    if (better) best = (int)i;
  }
  if (best >= 0 && at_least && large_cache[best].size < need) return -1;
  return best;
}

/* Under large_lock: e joins the cache, after the entries idle for the purge
 * delay and then the oldest ones, until it fits in the slots and the byte
 * budget; those go to drop[*nd...] for unmapping outside the lock. A
 * cached neighbour (the two parts of a split mapping, large_fit_cached)
 * joins it, so a program alternating a big and a small buffer finds the
 * whole mapping again; the joined entry counts as freed at the newer time. */
static void large_cache_put_locked(large_slot_t e, uint64_t now, large_slot_t *drop, unsigned *nd) {
  *nd += large_cache_expire_locked(now, false, drop + *nd, NULL);
  for (unsigned i = 0; i < large_cache_n;) {
    large_slot_t c = large_cache[i];
    if (c.base != e.base + e.size && c.base + c.size != e.base) {
      i++;
      continue;
    }
    large_cache_remove(i);
    if (c.base < e.base) e.base = c.base;
    e.size += c.size;
    if (c.freed_ms > e.freed_ms) e.freed_ms = c.freed_ms;
    i = 0;
  }
  if (e.size > opt.large_cache_bytes) {
    drop[(*nd)++] = e;
    return;
  }
  while (large_cache_n > 0 && (large_cache_n == LARGE_CACHE_SLOTS || large_cache_bytes + e.size > opt.large_cache_bytes)) {
    unsigned oldest = 0;
    for (unsigned i = 1; i < large_cache_n; i++)
      if (large_cache[i].freed_ms < large_cache[oldest].freed_ms) oldest = i;
    drop[(*nd)++] = large_cache_remove(oldest);
  }
  large_cache[large_cache_n] = e;
  large_cache_set_n(large_cache_n + 1);
  large_cache_bytes += e.size;
}

static bool large_cache_take(size_t need, large_slot_t *out) {
  if (__atomic_load_n(&large_cache_n, __ATOMIC_RELAXED) == 0) return false;
  lock_acquire(&large_lock);
  int best = large_cache_best_locked(need, false);
  if (best >= 0) *out = large_cache_remove((unsigned)best);
  lock_release(&large_lock);
  return best >= 0;
}

/* Fit cached mapping e to need (a 4 MiB-aligned mapping either way).
 * With 4 MiB or more to spare past the first 4 MiB boundary after need, it
 * is split there, and the rest goes back to the cache as a mapping of its own,
 * resident and idle since e was freed, so it serves the next request
 * instead of fresh pages (sort frees its 100 MiB buffer and then takes
 * three of 33 MiB: those came from new mappings while the freed buffer's
 * pages stayed resident, peak RSS 146 MB against glibc's 84). When the
 * block is freed, the two parts join again in the cache, so a program
 * alternating between two sizes still reuses one mapping without
 * faulting; a smaller spare stays with the block. exact (a block that
 * would have come from an arena, which holds it to the granule): the rest
 * is cached only if another block of the size fits in it (sort with 50 MiB
 * frees it and takes three of 17: a spare of 10 MiB kept idle raised the
 * peak from 51 to 60 MB), and whatever still lies past need goes back to
 * the kernel. Then a smaller mapping grows in
 * place, or by moving its pages to a fresh aligned range. NULL (mapping
 * released) if that fails. */
static uint8_t *large_fit_cached(large_slot_t e, size_t need, bool exact, size_t *size) {
  uint8_t *base = e.base;
  *size = e.size;
  size_t cut = align_up(need, HAK_SS_SIZE);
  if (*size >= cut + (exact ? need : HAK_SS_SIZE)) {
    large_slot_t drop[LARGE_CACHE_SLOTS + 1];
    unsigned nd = 0;
    lock_acquire(&large_lock);
    large_cache_put_locked((large_slot_t){base + cut, *size - cut, e.freed_ms}, os_now_ms(), drop, &nd);
    size_t idle = large_cache_bytes;
    lock_release(&large_lock);
    for (unsigned i = 0; i < nd; i++) os_unmap(drop[i].base, drop[i].size);
    decay_note_idle_locked(idle);
    *size = cut;
  }
  if (*size > need) {
    if (exact && os_remap_inplace(base, *size, need)) *size = need;
    return base;
  }
  if (*size == need || os_remap_inplace(base, *size, need)) {
    *size = need;
    return base;
  }
  uint8_t *target = os_map_block(need, HAK_SS_SIZE);
  if (target != NULL && os_remap_to(base, *size, need, target)) {
    *size = need;
    return target;
  }
  if (target != NULL) os_unmap(target, need);
  os_unmap(base, *size);
  return NULL;
}

/* A block that no warm span of its own group fits takes one of another
 * group's before its own group faults fresh granules in: threads that come
 * and go take the groups in turn (large_group_mine), so each group keeps
 * the spans its threads freed warm for the purge delay, and a thread of
 * the other group mapped fresh pages beside them (bench_stress: 2.6-3.8
 * MiB of free spans resident against a live set of 0.4). Only a fit that
 * is warm whole, and only from a group whose lock is free: a wait here
 * would cost more than the faults it saves. malloc only: calloc would
 * have to clear what a cold fit gives as zero pages. Under g->lock; the
 * block frees into the lender's group (its header names the arena). */
static uint8_t *large_borrow_warm(large_group_t *g, uint32_t grans, size_t end, large_arena_t **out) {
  unsigned n = os_cpu_count();
  if (n > LARGE_GROUPS) n = LARGE_GROUPS;
  for (unsigned k = 0; k < n; k++) {
    large_group_t *o = &large_groups[k];
    if (o == g || !lock_try(&o->lock)) continue;
    arena_pick_t pk;
    uint8_t *span = NULL;
    bool zero;
    arena_find(o, grans, false, &pk);
    if (pk.warm) span = arena_take_pick(o, grans, pk, out, &zero, NULL);
    if (span != NULL) arena_note_end(*out, span, end);
    lock_release(&o->lock);
    if (span != NULL) return span;
  }
  return NULL;
}

void *large_alloc(size_t size, size_t align, bool *zeroed) {
  size_t off = align <= LARGE_HDR ? LARGE_HDR : align;
  size_t page = os_page_size;
  if (size > (size_t)PTRDIFF_MAX - off - page) {
    errno = ENOMEM;
    return NULL;
  }
  /* At least one usable byte, so that usable size 0 always means "not a
   * valid large block" (realloc relies on it). */
  size_t end = off + (size ? size : 1), need = align_up(end, page);
  large_slot_t cached = {NULL, 0, 0};
  bool exact = false;
  if (off <= ARENA_GRAN && need <= ARENA_BLOCK_MAX) {
    uint32_t grans = (uint32_t)((need + ARENA_GRAN - 1) >> ARENA_GRAN_SHIFT);
    large_arena_t *arena = NULL;
    bool zero = false;
    uint64_t warm[ARENA_BLOCK_MAX / ARENA_GRAN / 64] = {0};
    large_group_t *g = large_group_mine();
    lock_acquire(&g->lock);
    /* Resident pages first: a freed mapping in the cache serves the block
     * before the arenas fault fresh pages in for it. Not for calloc: a
     * cold fit needs no clearing and costs only the pages the program
     * touches, the mapping would be written whole. The cache's lock
     * nests inside the group's, taken only when the cache holds
     * something (the count is read without it: a stale value costs a
     * look at an empty cache or a missed entry). */
    bool look = zeroed == NULL && __atomic_load_n(&large_cache_n, __ATOMIC_RELAXED) > 0;
    if (look) lock_acquire(&large_lock);
    int ci = look && large_cache_n > 0 ? large_cache_best_locked(need, true) : -1;
    /* A fit that is not all warm would fault pages in: a cached mapping
     * (resident) serves instead, else for malloc another group's warm
     * span when most of this one is cold (large_borrow_warm). */
    arena_pick_t pk;
    arena_find(g, grans, true, &pk);
    uint8_t *span = NULL;
    bool grew = false;
    if (pk.warm_n * 2 < grans && ci < 0 && zeroed == NULL) span = large_borrow_warm(g, grans, end, &arena);
    if (span == NULL && (pk.warm || ci < 0)) {
      span = arena_take_pick(g, grans, pk, &arena, &zero, zeroed != NULL ? warm : NULL);
      if (span != NULL) arena_note_end(arena, span, end);
      grew = span != NULL && !pk.warm;
    }
    if (span == NULL && ci >= 0) {
      cached = large_cache_remove((unsigned)ci);
      exact = true; /* held to the page, as the arena would have held it */
    }
    if (look) lock_release(&large_lock);
    lock_release(&g->lock);
    if (grew) decay_note_grow(DECAY_LARGE, os_now_ms());
    if (span != NULL) {
      uint8_t *user = span + off;
      if (zeroed != NULL && !zero) {
        /* calloc: zero the granules that may be dirty, one run at a time;
         * the cold ones read as zero pages the first time they are touched,
         * and a memset would only fault them in. */
        uint8_t *end = user + (size ? size : 1);
        for (uint32_t j = 0; j < grans;) {
          if (!hak_bit_test(warm, j)) {
            j++;
            continue;
          }
          uint32_t k = j;
          while (k < grans && hak_bit_test(warm, k)) k++;
          uint8_t *lo = span + ((size_t)j << ARENA_GRAN_SHIFT), *hi = span + ((size_t)k << ARENA_GRAN_SHIFT);
          if (lo < user) lo = user;
          if (hi > end) hi = end;
          if (lo < hi) memset(lo, 0, (size_t)(hi - lo));
          j = k;
        }
        zero = true;
      }
      large_hdr_t *h = large_hdr_of(user);
      ann_meta(h, sizeof *h); /* may lie where a freed block was */
      h->magic = LARGE_MAGIC;
      h->base = span;
      h->map_size = (size_t)grans << ARENA_GRAN_SHIFT;
      h->off = off;
      h->live = 1;
      h->arena = arena;
      if (zeroed) *zeroed = zero;
      return user;
    }
  }
  size_t map_size = 0;
  uint8_t *base = NULL;
  bool fresh = false;
  if (cached.base != NULL || (align <= HAK_SS_SIZE / 2 && large_cache_take(need, &cached)))
    base = large_fit_cached(cached, need, exact, &map_size);
  if (base == NULL) {
    base = os_map_block(need, align > HAK_SS_SIZE ? align : HAK_SS_SIZE);
    if (base == NULL) {
      /* alloc.c gives back what sits idle in every heap, list and cache,
       * and asks once more. */
      errno = ENOMEM;
      return NULL;
    }
    large_decay_register();
    map_size = need;
    fresh = true;
    decay_note_grow(DECAY_LARGE, os_now_ms());
  }
  uint8_t *user = base + off;
  large_hdr_t *h = large_hdr_of(user);
  ann_meta(h, sizeof *h); /* may lie where a freed block was (cached mapping) */
  h->magic = LARGE_MAGIC;
  h->base = base;
  h->map_size = map_size;
  h->off = off;
  h->live = 1;
  h->arena = NULL;
  atomic_fetch_add_explicit(&large_live_maps, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&large_live_map_bytes, map_size, memory_order_relaxed);
  large_register(user);
  if (zeroed) *zeroed = fresh;
  return user;
}

uint64_t large_purge(uint64_t now_ms, bool force) {
  large_slot_t drop[LARGE_CACHE_SLOTS];
  unsigned nd = 0;
  uint64_t next = UINT64_MAX;
  for (unsigned k = 0; k < LARGE_GROUPS; k++) {
    large_group_t *g = &large_groups[k];
    lock_acquire(&g->lock);
    g->next_purge_ms = now_ms + opt.purge_delay_ms;
    arena_purge_locked(g, now_ms, opt.purge_delay_ms, force, false, &next);
    lock_release(&g->lock);
  }
  lock_acquire(&large_lock);
  nd = large_cache_expire_locked(now_ms, force, drop, &next);
  lock_release(&large_lock);
  for (unsigned i = 0; i < nd; i++) {
    decay_count(drop[i].size);
    os_unmap(drop[i].base, drop[i].size);
  }
  return next;
}

/* decay's answer to the heaps' growth (decay_note_grow): a heap about to
 * take a slab whose pages are not resident has the arenas' free spans
 * decommitted, as it has other heaps' free slabs: the pages it faults in
 * would otherwise sit beside them (200 000-byte blocks freed, then as many
 * bytes of 16-byte ones: 252 MiB for 100 MiB live). Spans of any age go: a first form spared those
 * freed in the last sixteenth of the delay (6 ms), and a program that
 * freed 96 MiB of 300 000-byte blocks and went on with 1 KiB ones peaked
 * at 113-122 MiB against 99.1 now (glibc 99.4), the small blocks' first
 * milliseconds beside the big ones' pages. A buffer freed and taken again
 * while small blocks grow pays for it until the regret below spares the
 * young spans. It runs at most once a millisecond and once a span is due
 * (large_grow_due_ms), so a heap's growth looks at the arenas as often as
 * it likes at the cost of a load. A busy group is passed over (and looked
 * at again next time). */
static _Atomic uint64_t large_grow_due_ms;

static HAK_TEXT_COLD size_t large_answer_grow(uint64_t now) {
  if (now < atomic_load_explicit(&large_grow_due_ms, memory_order_relaxed)) return 0;
  /* Regret, as the heaps have it for their own growth purges: once the
   * arenas faulted in again at least half of what these passes cost them
   * (a program alternating phases of small and big blocks), only spans
   * idle for the whole delay go, until less than a quarter comes back. */
  uint32_t lost = atomic_load_explicit(&large_grow_lost, memory_order_relaxed);
  uint32_t back = atomic_load_explicit(&large_grow_back, memory_order_relaxed);
  bool spare = decay_regret_spare(lost, back, LARGE_GROW_REGRET_MIN_KIB,
                                  atomic_load_explicit(&large_grow_spare, memory_order_relaxed));
  atomic_store_explicit(&large_grow_spare, spare, memory_order_relaxed);
  uint64_t next = UINT64_MAX, delay = spare ? opt.purge_delay_ms : 0;
  bool busy = false;
  size_t purged = 0;
  for (unsigned k = 0; k < LARGE_GROUPS; k++) {
    large_group_t *g = &large_groups[k];
    if (!lock_try(&g->lock)) {
      busy = true;
      continue;
    }
    size_t before = g->dirty_bytes;
    arena_purge_locked(g, now, delay, false, true, &next);
    purged += before - g->dirty_bytes;
    lock_release(&g->lock);
  }
  if (purged != 0) {
    uint32_t halved = back;
    decay_regret_lose(&lost, &halved, (uint32_t)(purged >> 10), LARGE_GROW_REGRET_SPAN_KIB);
    if (halved != back) atomic_store_explicit(&large_grow_back, halved, memory_order_relaxed);
    atomic_store_explicit(&large_grow_lost, lost, memory_order_relaxed);
  }
  /* A span freed later is due a delay after its free, no sooner than
   * now + delay (+ 1: a pass a millisecond at most, each walking every
   * free span); a span freed since is covered by that too. */
  if (busy || next > now + delay + 1) next = now + (busy ? 0 : delay + 1);
  atomic_store_explicit(&large_grow_due_ms, next, memory_order_relaxed);
  return 0; /* arena_decommit counted them */
}

/* ---- regions lent to the heaps as superslabs ----------------------------
 * A program that frees its big buffers and goes on with small blocks (a
 * phase change) had the heaps map fresh superslabs and fault every page
 * in, while the arenas' freed spans, resident, waited for the heaps'
 * growth to decommit them (large_answer_grow): twice the faults of
 * mimalloc and tcmalloc, whose small and big blocks share one page pool
 * (bench_phases 1 96 300000 1024: 49.9 k faults against 27.1 k). So a
 * heap about to fault in a slab of its own superslab first asks for a
 * 4 MiB region of the arenas' free spans that is at least half warm
 * (heap.c's heap_take_borrowed, which says why not before it maps a new
 * superslab): its granules leave the spans as a block
 * would, and come back, decommitted, when the superslab goes. Cold, and
 * it never waits: a busy group is passed over. */
_Static_assert(ARENA_REGION_GRANS == 64, "a region's warm bits are one word");

#if !HAK_SECURE
/* Decommit the warm granules of free span [st, st+count) but for the
 * regions large_lend_region may lend (wholly free, at least half warm).
 * Under its group's lock. */
static void arena_decommit_unlendable(large_arena_t *a, uint32_t st, uint32_t count) {
  uint32_t end = st + count, at = st;
  for (uint32_t r = (uint32_t)align_up(st, ARENA_REGION_GRANS); r + ARENA_REGION_GRANS <= end;
       r += ARENA_REGION_GRANS)
    if (hak_popcount64(a->warm[r / 64]) >= ARENA_REGION_GRANS / 2) {
      if (r > at) arena_decommit(a, at, r - at);
      at = r + ARENA_REGION_GRANS;
    }
  if (end > at) arena_decommit(a, at, end - at);
}
#endif
HAK_TEXT_COLD void *large_lend_region(large_arena_t **from) {
#if HAK_SECURE
  (void)from;
  return NULL; /* a superslab's mapping has a guard page past its 4 MiB */
#else
  unsigned n = os_cpu_count();
  if (n > LARGE_GROUPS) n = LARGE_GROUPS;
  for (unsigned k = 0; k < n; k++) {
    large_group_t *g = &large_groups[k];
    if (!lock_try(&g->lock)) continue;
    if (g->dirty_bytes < HAK_SS_SIZE / 2) {
      lock_release(&g->lock);
      continue;
    }
    large_arena_t *ba = NULL;
    uint32_t bst = 0, br = 0, bw = ARENA_REGION_GRANS / 2 - 1;
    for (large_arena_t *a = g->arenas; a != NULL; a = a->next)
      for (uint32_t st = arena_next_span(a, 1); st < ARENA_GRANS; st = arena_next_span(a, st + 1)) {
        uint32_t end = st + a->span_len[st];
        for (uint32_t r = (uint32_t)align_up(st, ARENA_REGION_GRANS); r + ARENA_REGION_GRANS <= end; r += ARENA_REGION_GRANS) {
          uint32_t w = hak_popcount64(a->warm[r / 64]);
          if (w > bw) ba = a, bst = st, br = r, bw = w;
        }
      }
    uint8_t *p = NULL;
    if (ba != NULL) {
      arena_claim(ba, bst, br, ARENA_REGION_GRANS, bw);
      ba->lent |= (uint32_t)1 << (br / ARENA_REGION_GRANS);
      p = ba->base + ((size_t)br << ARENA_GRAN_SHIFT);
      *from = ba;
      /* The heaps grow here, so what the group holds free and cannot lend
       * goes now, as the heaps' growth had it go (large_answer_grow);
       * what it can lend stays for the next borrow. Only after a lend: a
       * span left partly warm makes every cold fit slide a window over
       * it (arena_find), and a growth pass that spared regions so put
       * bench_mid_large_mt (64 KiB..1 MiB) at 35-41 M operations a
       * second against 55 M. */
      for (large_arena_t *a = g->arenas; a != NULL; a = a->next)
        for (uint32_t st = arena_next_span(a, 1); st < ARENA_GRANS; st = arena_next_span(a, st + 1))
          if (arena_warm(a, st, a->span_len[st], WARM_ANY)) arena_decommit_unlendable(a, st, a->span_len[st]);
    }
    lock_release(&g->lock);
    if (p != NULL) return p;
  }
  return NULL;
#endif
}

/* p, a region large_lend_region lent from a, decommitted whole by the
 * caller, goes back into a's free spans, cold. An arena with a region out
 * on loan has granules in use, so it is still mapped and in its group. */
HAK_TEXT_COLD void large_unlend_region(void *p, large_arena_t *a) {
  large_group_t *g = a->group;
  HAK_ASSERT((uint8_t *)p >= a->base && (uint8_t *)p < a->base + ARENA_SIZE);
  uint32_t g0 = (uint32_t)((size_t)((uint8_t *)p - a->base) >> ARENA_GRAN_SHIFT);
  uint64_t now = os_now_ms();
  lock_acquire(&g->lock);
  HAK_ASSERT(g0 % ARENA_REGION_GRANS == 0 && (a->lent >> (g0 / ARENA_REGION_GRANS) & 1));
  ownmap_set(p, OWN_LARGE);
  a->lent &= ~((uint32_t)1 << (g0 / ARENA_REGION_GRANS));
  arena_put(a, g0, ARENA_REGION_GRANS, now);
  arena_warm(a, g0, ARENA_REGION_GRANS, WARM_CLEAR);
  group_dirty_sub(g, ARENA_REGION_GRANS);
  lock_release(&g->lock);
}

void large_free(void *p, unsigned v, const char *call) {
  if (!large_valid(p, v)) {
    report_invalid(call, p);
    return;
  }
  large_hdr_t *h = large_hdr_of(p);
  uint8_t *base = h->base;
  size_t size = h->map_size;
  h->live = 0;
  h->magic = 0;
  uint64_t now = os_now_ms();
  if (h->arena != NULL) {
    large_arena_t *a = h->arena;
    large_group_t *g = a->group;
    lock_acquire(&g->lock);
    arena_note_end(a, base, 0);
    arena_put(a, (uint32_t)((size_t)(base - a->base) >> ARENA_GRAN_SHIFT),
              (uint32_t)(size >> ARENA_GRAN_SHIFT), now);
    bool due = now >= g->next_purge_ms;
    size_t idle = g->dirty_bytes;
    lock_release(&g->lock);
    if (due) large_purge(now, false);
    decay_note_idle_locked(idle);
    return;
  }
  atomic_fetch_sub_explicit(&large_live_maps, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&large_live_map_bytes, size, memory_order_relaxed);
  ownmap_set(p, OWN_NONE);
  large_slot_t drop[LARGE_CACHE_SLOTS + 1];
  unsigned nd = 0;
  if (size <= opt.large_cache_bytes) {
    lock_acquire(&large_lock);
    large_cache_put_locked((large_slot_t){base, size, now}, now, drop, &nd);
    size_t idle = large_cache_bytes;
    lock_release(&large_lock);
    decay_note_idle_locked(idle);
  } else {
    drop[nd++] = (large_slot_t){base, size, now};
  }
  for (unsigned i = 0; i < nd; i++) os_unmap(drop[i].base, drop[i].size);
}

/* Does arena block h still hold size bytes in its granules, filling at
 * least half of them? No lock: only the block's holder writes its header.
 * The size test first, so that the sum cannot wrap. */
static bool arena_realloc_fits(const large_hdr_t *h, size_t size) {
  size_t end = h->off + size, have = h->map_size >> ARENA_GRAN_SHIFT;
  return size < h->map_size && end <= h->map_size && ((end + ARENA_GRAN - 1) >> ARENA_GRAN_SHIFT) >= have / 2;
}

/* Below the realloc threshold a size class serves an arena block better. */
static bool arena_realloc_to_class(size_t size) {
  return size <= HAK_SMALL_MAX && (opt.realloc_arena == 0 || size < opt.realloc_arena);
}

/* large_realloc's every other case: out of line, so that the common one
 * saves no registers. */
static __attribute__((noinline)) void *large_realloc_rest(void *p, unsigned v, size_t size);

void *large_realloc(void *p, unsigned v, size_t size) {
  large_hdr_t *h = large_hdr_of(p);
  /* A string grown by a few bytes per call mostly stays inside its span
   * (bench_realloc: two reallocs in three), so that case comes first and
   * reads only the header: an arena's regions are mapped whole (and hold
   * only arena blocks), and large_valid's test of an OWN_LARGE pointer
   * past its region's first bytes is the header's own. 92 instructions
   * a call before, 41 (bench_realloc under callgrind). */
  if (HAK_LIKELY(v == OWN_LARGE && ((uintptr_t)p & HAK_SS_MASK) >= LARGE_HDR) && large_hdr_valid(h, p) &&
      arena_realloc_fits(h, size) && !arena_realloc_to_class(size)) {
    arena_note_end(h->arena, h->base, h->off + size);
    return p;
  }
  return large_realloc_rest(p, v, size);
}

static void *large_realloc_rest(void *p, unsigned v, size_t size) {
  large_hdr_t *h = large_hdr_of(p);
  if (!large_valid(p, v)) {
    report_invalid("realloc", p);
    return NULL;
  }
  size_t off = h->off;
  if (size > (size_t)PTRDIFF_MAX - off - os_page_size) return NULL;
  size_t need = align_up(off + size, os_page_size);
  if (h->arena != NULL) {
    if (arena_realloc_to_class(size)) return NULL;
    large_arena_t *a = h->arena;
    uint32_t have = (uint32_t)(h->map_size >> ARENA_GRAN_SHIFT);
    uint32_t want = (uint32_t)((need + ARENA_GRAN - 1) >> ARENA_GRAN_SHIFT);
    if (need > ARENA_BLOCK_MAX) return NULL;
    if (arena_realloc_fits(h, size)) {
      arena_note_end(a, h->base, off + size);
      return p;
    }
    uint32_t start = (uint32_t)((size_t)(h->base - a->base) >> ARENA_GRAN_SHIFT);
    bool ok = false;
    large_group_t *g = a->group;
    lock_acquire(&g->lock);
    if (want <= have) {
      /* Shrunk below half its granules (arena_realloc_fits said no): the
       * tail goes back. */
      arena_put(a, start + want, have - want, os_now_ms());
      ok = true;
    } else {
      /* Grow into the free span right after the block, if there is one. */
      uint32_t st = start + have;
      if (st < ARENA_GRANS && arena_is_start(a, st) && a->span_len[st] >= want - have) {
        arena_claim(a, st, st, want - have, arena_warm(a, st, want - have, WARM_COUNT));
        ok = true;
      }
    }
    if (ok) arena_note_end(a, h->base, off + size);
    lock_release(&g->lock);
    if (!ok) return NULL;
    h->map_size = (size_t)want << ARENA_GRAN_SHIFT;
    return p;
  }
  if (need <= h->map_size) {
    if (need >= h->map_size / 2) return p;
    if (size <= HAK_SMALL_MAX) return NULL; /* a size class serves it better */
    if (os_remap_inplace(h->base, h->map_size, need)) {
      atomic_fetch_sub_explicit(&large_live_map_bytes, h->map_size - need, memory_order_relaxed);
      h->map_size = need;
    }
    return p;
  }
  if (size <= HAK_SMALL_MAX) return NULL;
  if (os_remap_inplace(h->base, h->map_size, need)) {
    atomic_fetch_add_explicit(&large_live_map_bytes, need - h->map_size, memory_order_relaxed);
    h->map_size = need;
    return p;
  }
  /* Move the pages to a fresh aligned range: no copy, alignment kept. */
  uint8_t *target = os_map_block(need, HAK_SS_SIZE);
  if (target == NULL) return NULL;
  size_t old_size = h->map_size;
  if (!os_remap_to(h->base, old_size, need, target)) {
    os_unmap(target, need);
    return NULL;
  }
  ownmap_set(p, OWN_NONE);
  uint8_t *user = target + off;
  large_hdr_t *nh = large_hdr_of(user);
  nh->base = target;
  nh->map_size = need;
  atomic_fetch_add_explicit(&large_live_map_bytes, need - old_size, memory_order_relaxed);
  large_register(user);
  return user;
}

void large_note_asked(void *p, size_t size) {
  const large_hdr_t *h = large_hdr_of(p);
  if (h->arena != NULL) arena_note_end(h->arena, h->base, h->off + size);
}

size_t large_usable_size(const void *p, unsigned v) {
  if (!large_valid(p, v)) return 0;
  const large_hdr_t *h = large_hdr_of(p);
  return h->map_size - h->off;
}

void large_stats(large_stats_t *out) {
  memset(out, 0, sizeof *out);
  for (unsigned k = 0; k < LARGE_GROUPS; k++) {
    large_group_t *g = &large_groups[k];
    lock_acquire(&g->lock);
    for (large_arena_t *a = g->arenas; a != NULL; a = a->next) {
      out->arenas++;
      out->arena_bytes_used +=
          (size_t)(a->used - 1 - (uint32_t)hak_popcount64(a->lent) * ARENA_REGION_GRANS) << ARENA_GRAN_SHIFT;
    }
    lock_release(&g->lock);
  }
  lock_acquire(&large_lock);
  out->cached = large_cache_n;
  out->cached_bytes = large_cache_bytes;
  lock_release(&large_lock);
  out->mappings = atomic_load_explicit(&large_live_maps, memory_order_relaxed);
  out->mapping_bytes = atomic_load_explicit(&large_live_map_bytes, memory_order_relaxed);
}

/* The groups' locks before the cache's, as large_alloc nests them. */
void large_lock_all(void) {
  for (unsigned k = 0; k < LARGE_GROUPS; k++) lock_acquire(&large_groups[k].lock);
  lock_acquire(&large_lock);
}
void large_unlock_all(void) {
  lock_release(&large_lock);
  for (unsigned k = LARGE_GROUPS; k-- > 0;) lock_release(&large_groups[k].lock);
}

/* ---- read-only accessor for the statistics' residency walk (stats.c) ----
 * Kept at the end of the file: it reads, never changes, what is above.
 * Under each group's lock in turn and then large_lock, so no arena or
 * cached mapping goes away while it is told.
 * An arena is told as its descriptor granule (META), then upwards its
 * blocks (LIVE: the header or alignment gap and the bytes asked for, to
 * the page; ROUND: the rest of the block's granules) and its free spans
 * (FREE); the mapping cache as CACHED. Dedicated mappings in use are not
 * listed anywhere (only counted): the caller takes large_stats' figure. */

/* Granules [lo, hi), all in blocks: each block (from its req_end to the
 * next block's start) as its asked-for bytes to the page (LIVE) and the
 * rest (ROUND). */
static void arena_live_regions(large_arena_t *a, uint32_t lo, uint32_t hi,
                               void (*fn)(const void *p, size_t len, int kind, void *arg), void *arg) {
  size_t pg = os_page_size;
  while (lo < hi) {
    uint32_t end = __atomic_load_n(&a->req_end[lo], __ATOMIC_RELAXED), nx = lo + 1;
    while (nx < hi && __atomic_load_n(&a->req_end[nx], __ATOMIC_RELAXED) == 0) nx++;
    uint8_t *b = a->base + ((size_t)lo << ARENA_GRAN_SHIFT), *e = a->base + ((size_t)nx << ARENA_GRAN_SHIFT);
    /* No start recorded (never expected): all of it as asked for. */
    uint8_t *cut = end == 0 ? e : b + align_up(end, pg);
    if (cut > e) cut = e;
    fn(b, (size_t)(cut - b), LARGE_REGION_LIVE, arg);
    if (cut < e) fn(cut, (size_t)(e - cut), LARGE_REGION_ROUND, arg);
    lo = nx;
  }
}

/* Granules [lo, hi), all used: the blocks, less the regions lent as
 * superslabs (whole regions: a block never shares one with them). */
static void arena_used_regions(large_arena_t *a, uint32_t lo, uint32_t hi,
                               void (*fn)(const void *p, size_t len, int kind, void *arg), void *arg) {
  while (lo < hi) {
    uint32_t r = lo / ARENA_REGION_GRANS;
    if (a->lent >> r & 1) {
      lo = (r + 1) * ARENA_REGION_GRANS;
      continue;
    }
    uint32_t e = lo;
    while (e < hi && !(a->lent >> (e / ARENA_REGION_GRANS) & 1)) e = (e / ARENA_REGION_GRANS + 1) * ARENA_REGION_GRANS;
    if (e > hi) e = hi;
    arena_live_regions(a, lo, e, fn, arg);
    lo = e;
  }
}

static void large_group_regions(const large_group_t *g, void (*fn)(const void *p, size_t len, int kind, void *arg),
                                void *arg) {
  for (large_arena_t *a = g->arenas; a != NULL; a = a->next) {
    fn(a->base, ARENA_GRAN, LARGE_REGION_META, arg);
    uint32_t at = 1;
    for (uint32_t st = arena_next_span(a, 1); st < ARENA_GRANS; st = arena_next_span(a, st + 1)) {
      uint32_t count = a->span_len[st];
      if (st > at) arena_used_regions(a, at, st, fn, arg);
      fn(a->base + ((size_t)st << ARENA_GRAN_SHIFT), (size_t)count << ARENA_GRAN_SHIFT, LARGE_REGION_FREE, arg);
      at = st + count;
    }
    if (at < ARENA_GRANS) arena_used_regions(a, at, ARENA_GRANS, fn, arg);
  }
}

void large_for_each_region(void (*fn)(const void *p, size_t len, int kind, void *arg), void *arg) {
  for (unsigned k = 0; k < LARGE_GROUPS; k++) {
    large_group_t *g = &large_groups[k];
    lock_acquire(&g->lock);
    large_group_regions(g, fn, arg);
    lock_release(&g->lock);
  }
  lock_acquire(&large_lock);
  for (unsigned i = 0; i < large_cache_n; i++)
    fn(large_cache[i].base, large_cache[i].size, LARGE_REGION_CACHED, arg);
  lock_release(&large_lock);
}

size_t large_arena_bytes(void) { return ARENA_SIZE; }
