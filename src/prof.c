/*
 * prof.c — sampled heap profiling (see prof.h): the sampler, the stack
 * capture and the live-sample table. Naming frames is prof_symbol.c's job,
 * writing dumps prof_dump.c's (which starts this file up through
 * prof_table_init); what the three share is prof_impl.h. May call: os,
 * options, libgcc's unwinder.
 *
 * Estimator: the gaps between samples, in bytes allocated, are drawn from
 * an exponential distribution of mean m (opt.prof_sample), so the samples
 * form a Poisson process over the allocated bytes: a block of size s is
 * sampled with probability 1 - exp(-s/m), independently of every other
 * block and of any periodic pattern in the program. A sample therefore
 * stands for s / (1 - exp(-s/m)) bytes (about m for small blocks, s for
 * large ones); summed by stack that is an unbiased estimate of the live
 * bytes allocated there. This is the model gperftools calls heap_v2, which
 * is why PATH.heap carries raw sample counts and sizes and pprof does the
 * scaling itself. Records live in a table mapped from the OS, with a bit
 * filter so that a free of an unsampled block costs one load.
 */
#include "prof.h"
#include "options.h"
#include "os.h"
#include "prof_impl.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#define PROF_TOMB ((uintptr_t)1)
/* The table starts at PROF_MIN records (four pages) and doubles up to
 * PROF_CAP; the filter has PROF_FBITS bits per record of the table. */
#define PROF_MIN ((size_t)64)
#define PROF_FBITS 16
#define PROF_FILTER_MAX (PROF_CAP * PROF_FBITS / 8)

/* Lock order: prof_dump.c's dump lock, then prof_lock, then the
 * allocator's own locks. prof_lock guards the live table; nothing under it
 * allocates from hakmem or takes another hakmem lock (dladdr takes the
 * loader's; a rehash maps and unmaps), and no allocator lock is held when
 * it is taken.
 *
 * The table's memory follows the live samples, not the run's history:
 * records land at hash positions, so a table sized for the most samples
 * ever live (or one whose tombstones are never swept) ends up touched on
 * every page. prof_rehash moves the live records to a fresh mapping sized
 * for them (doubling when live + tombstones pass 3/4, shrinking when live
 * falls under 1/16, the same size to sweep tombstones) and unmaps the old
 * one at once: the table is only ever read under prof_lock. */
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_rec_t *prof_tab;
static size_t prof_cap, prof_tab_bytes; /* records; bytes mapped */
static size_t prof_live, prof_used, prof_dropped; /* used: live + tombstones */
static _Atomic bool prof_ready;
/* The filter is read without the lock (prof_free), so it never moves:
 * one mapping of PROF_FILTER_MAX bytes of which only the first
 * PROF_FBITS bits per table record are used (and touched). A rehash
 * rewrites it from the live records: stale bits of swept tombstones would
 * otherwise pile up until every free takes the lock. prof_fgen tells a
 * reader whether it read during a rewrite (a sequence lock): bit 0 set
 * while one runs, bits 1..6 log2 of the bits in use, bits 7.. a count of
 * rewrites. */
static _Atomic uint64_t *prof_filter;
static _Atomic uint64_t prof_fgen;
volatile sig_atomic_t prof_dump_requested;
static prof_due_fn *prof_due;                 /* prof_dump.c's, from prof_table_init */
_Atomic bool prof_active_flag = true;         /* hak_ctl "prof.active" (prof.h) */
static _Atomic uint64_t prof_bytes_total;     /* flushed from prof_acc at samples */
static _Atomic uint64_t prof_next_dump_bytes; /* HAKMEM_PROF_INTERVAL_BYTES */
/* Per thread, so that sampling needs no shared state: bytes left before
 * the next sample (signed: an allocation may overshoot it; prof.h's
 * prof_batch_fits counts down here too), the value it started from, the
 * bytes of earlier countdowns not yet flushed to prof_bytes_total (so the
 * bytes allocated since the last flush are prof_acc + prof_gap -
 * prof_left: counting is one subtraction), the generator, and a
 * re-entrancy guard (the unwinder and the dumps may allocate). */
HAK_TLS int64_t prof_left;
static HAK_TLS int64_t prof_gap;
static HAK_TLS uint64_t prof_acc;
static HAK_TLS uint64_t prof_rng;
HAK_TLS int prof_busy;
/* The stack the last DWARF walk of this thread went over (prof_capture). */
static HAK_TLS uintptr_t prof_stack_lo, prof_stack_hi;

/* A new countdown of g bytes; what the old one counted is kept in prof_acc. */
static void prof_restart(int64_t g) {
  prof_acc += (uint64_t)(prof_gap - prof_left);
  prof_gap = prof_left = g;
}

/* Blocks are 16-byte aligned, so the low 4 bits carry nothing; the
 * multiply spreads the rest and the high bits are kept. The same hash
 * picks the table slot and the filter bit: a set bit means "maybe
 * sampled" (another block may share it), a clear one "certainly not". */
static size_t prof_hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 20); }

/* ---- arithmetic without libm ------------------------------------------------
 * The library links only libc and pthreads, so the two transcendental
 * functions the sampler needs are computed here; a few digits suffice. */

#define PROF_LN2 0.69314718055994530942

/* ln(x) for x > 0: x = 2^e * m with m in [sqrt(1/2), sqrt(2)), ln m =
 * 2 atanh(t), t = (m-1)/(m+1): since |t| < 0.172, eleven terms of the
 * series t + t^3/3 + t^5/5 + ... reach a double's precision (the next is
 * below 1e-18 of the sum), evaluated by Horner's rule. */
static double prof_ln(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  b = (b & ~((uint64_t)0x7ff << 52)) | ((uint64_t)1023 << 52);
  double m;
  memcpy(&m, &b, sizeof m);
  if (m > 1.41421356237309504880) {
    m *= 0.5;
    e++;
  }
  double t = (m - 1) / (m + 1), t2 = t * t, p = 1.0 / 21;
  for (int k = 19; k >= 1; k -= 2) p = p * t2 + 1.0 / k;
  return e * PROF_LN2 + 2 * t * p;
}

/* exp(-r) for r >= 0: r = k ln2 + f with f in [0, ln2), Taylor for the
 * rest, until a term no longer changes the sum. */
static double prof_exp_neg(double r) {
  if (r > 60) return 0; /* below 1e-26: 1 - exp(-r) is 1 in a double */
  int k = (int)(r / PROF_LN2);
  double f = r - k * PROF_LN2, term = 1, sum = 1;
  for (int i = 1; i < 20; i++) {
    term *= -f / i;
    sum += term;
    if (term * term <= 1e-34) break; /* sum >= 1/2 */
  }
  while (k-- > 0) sum *= 0.5;
  return sum;
}

/* 1 - exp(-r) for r >= 0. Below ln 2 its own series, r - r^2/2! + r^3/3!
 * - ..., which has no cancellation; below 1/64 (a block under 8 KiB at the
 * default mean gap) eight terms by Horner's rule, the ninth being below
 * 1e-20 of the sum; above, until a term no longer changes the sum. */
static double prof_one_minus_exp_neg(double r) {
  if (r < 1.0 / 64) {
    double p = 1;
    for (int i = 8; i >= 2; i--) p = 1 - p * r / i;
    return r * p;
  }
  if (r >= PROF_LN2) return 1 - prof_exp_neg(r);
  double term = r, sum = r;
  for (int i = 2; i < 20; i++) {
    term *= -r / i;
    sum += term;
    if (term * term <= sum * sum * 1e-34) break;
  }
  return sum;
}

/* Bytes one sample of a size-byte block stands for (see the top comment). */
static size_t prof_weight(size_t size, size_t mean) {
  if (mean <= 1 || size == 0) return size;
  double r = (double)size / (double)mean;
  return (size_t)((double)size / prof_one_minus_exp_neg(r) + 0.5);
}

static unsigned prof_log2(size_t n) { return (unsigned)__builtin_ctzll((unsigned long long)n); }

static size_t prof_tab_size(size_t cap) { return align_up(cap * sizeof(prof_rec_t), os_page_size); }

bool prof_table_init(prof_due_fn *due) {
  prof_tab_bytes = prof_tab_size(PROF_MIN);
  prof_tab = os_map(prof_tab_bytes);
  prof_filter = os_map(PROF_FILTER_MAX);
  if (prof_tab == NULL || prof_filter == NULL) {
    if (prof_tab != NULL) os_unmap(prof_tab, prof_tab_bytes);
    if (prof_filter != NULL) os_unmap((void *)prof_filter, PROF_FILTER_MAX);
    prof_tab = NULL;
    prof_filter = NULL;
    return false;
  }
  prof_cap = PROF_MIN;
  atomic_store_explicit(&prof_fgen, (uint64_t)prof_log2(PROF_MIN * PROF_FBITS) << 1, memory_order_release);
  prof_due = due;
  prof_next_dump_bytes = opt.prof_interval_bytes;
  atomic_store_explicit(&prof_ready, true, memory_order_release);
  return true;
}

bool prof_table_ready(void) { return atomic_load_explicit(&prof_ready, memory_order_acquire); }

/* The filter bit of hash h while gen's layout is in force. The slot is
 * h & (cap - 1) and the bit h & (cap * PROF_FBITS - 1): the same hash. */
static size_t prof_fbit(size_t h, uint64_t gen) { return h & (((size_t)1 << (gen >> 1 & 63)) - 1); }

static void prof_filter_set(size_t h, uint64_t gen) {
  size_t b = prof_fbit(h, gen);
  _Atomic uint64_t *w = &prof_filter[b / 64];
  atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) | (uint64_t)1 << (b % 64),
                        memory_order_relaxed);
}

/* The capacity for n live records: at most 3/8 full (so that 3/8 of it
 * is inserted before the next rehash), within [PROF_MIN, PROF_CAP]. */
static size_t prof_cap_for(size_t n) {
  size_t c = PROF_MIN;
  while (c < PROF_CAP && n * 8 > c * 3) c <<= 1;
  return c;
}

/* Under prof_lock: no room for one more record. Below the cap a table is
 * rehashed at 3/4 (live + tombstones); at the cap, where live records may
 * fill 3/4 on their own (past that samples are dropped, as always), at 7/8,
 * so that each sweep of tombstones frees at least 1/8 of it. */
static bool prof_full(void) {
  return prof_cap < PROF_CAP ? (prof_used + 1) * 4 > prof_cap * 3 : (prof_used + 1) * 8 > prof_cap * 7;
}

/* Under prof_lock: the live records into a fresh table of ncap records,
 * the filter rewritten for it, the old table unmapped. False (nothing
 * changed) if the mapping fails. The new table's pages are touched only
 * where a live record lands. */
static bool prof_rehash(size_t ncap) {
  size_t nbytes = prof_tab_size(ncap);
  prof_rec_t *nt = os_map(nbytes);
  if (nt == NULL) return false;
  /* The filter is rewritten under its sequence lock (the writer's half of
   * Boehm's seqlock: odd, release fence, the stores, even with release);
   * a reader meanwhile takes prof_lock and waits for the new table. Words
   * past the layout in force are zero (each shrink keeps them so): only
   * the old layout's words can hold bits. Those past the new layout's
   * last page go back whole. */
  uint64_t g = atomic_load_explicit(&prof_fgen, memory_order_relaxed);
  atomic_store_explicit(&prof_fgen, g | 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  size_t ow = prof_cap * PROF_FBITS / 64, nw = ncap * PROF_FBITS / 64;
  size_t pgw = align_up(nw * 8, os_page_size) / 8, clear = ow < pgw ? ow : pgw;
  for (size_t w = 0; w < clear; w++) atomic_store_explicit(&prof_filter[w], 0, memory_order_relaxed);
  if (ow > pgw) os_decommit((void *)(prof_filter + pgw), align_up(ow * 8, os_page_size) - pgw * 8);
  uint64_t ng = ((g >> 7) + 1) << 7 | (uint64_t)prof_log2(ncap * PROF_FBITS) << 1;
  for (size_t i = 0; i < prof_cap; i++) {
    if (prof_tab[i].ptr <= PROF_TOMB) continue;
    size_t h = prof_hash(prof_tab[i].ptr), j = h & (ncap - 1);
    while (nt[j].ptr != 0) j = (j + 1) & (ncap - 1);
    nt[j] = prof_tab[i];
    prof_filter_set(h, ng);
  }
  atomic_store_explicit(&prof_fgen, ng, memory_order_release);
  os_unmap(prof_tab, prof_tab_bytes);
  prof_tab = nt;
  prof_tab_bytes = nbytes;
  prof_cap = ncap;
  prof_used = prof_live;
  return true;
}

/* The next gap: -m ln(u) with u uniform in (0, 1], from a per-thread
 * xorshift generator (seeded from the thread's address and the clock, so
 * threads and runs differ). */
static uint64_t prof_next_gap(void) {
  if (prof_rng == 0) prof_rng = (uint64_t)(uintptr_t)&prof_rng ^ (os_now_ms() * 0x9E3779B97F4A7C15ull) ^ 1;
  hak_xorshift64(&prof_rng);
  uint64_t mean = opt.prof_sample;
  if (mean <= 1) return 1;
  double u = (double)((prof_rng >> 11) + 1) * (1.0 / 9007199254740992.0);
  double g = -prof_ln(u) * (double)mean;
  return g < 1 ? 1 : (uint64_t)g;
}

/* ---- stack capture ----------------------------------------------------------
 * libgcc's DWARF unwinder costs about 1 900 instructions a frame (it finds
 * and interprets each function's CFA program every time): some 17 000 a
 * sample, most of the profiler's cost on random mixed. A program samples
 * the same few stacks over and over, so on x86-64 the result of each step
 * is remembered per return address: the frame of the function that
 * contains return address ip spans `delta` bytes from its stack pointer to
 * its CFA, and its own return address sits at CFA - 8 (the ABI). Once a
 * return address has shown the same delta in PROF_UC_TRUST DWARF walks
 * (and never another), the fast walk steps over its frame with one load
 * (the idea of frame-size caching in fast unwinders; no code is shared).
 * The first return address without a trusted entry sends the whole sample
 * back to libgcc, which teaches the cache. A function whose frame size
 * varies at one return address (alloca, a VLA, a realigned stack) shows
 * two deltas and is poisoned for good; one that showed the same size every
 * time so far and then changes sends the walk to a slot of its own frame,
 * whose content is almost never a trusted return address: the walk then
 * falls back to libgcc. Every load is at CFA - 8 of a frame whose CFA lies
 * between this thread's stack pointer and the highest frame libgcc reached
 * on the same stack, so a wrong size reads a wrong slot, never unmapped
 * memory.
 *
 * An entry is one word, so threads share the table with plain atomics:
 * bits 16..63 the return address, 3..15 delta / 8, 0..2 the state.
 *
 * A thread samples the same few stacks over and over, so it also keeps,
 * by depth, the frames its last fast walk stepped over (prof_memo_ip,
 * prof_memo_delta): a frame whose return address is the one at that depth
 * last time is stepped over without the hash and the probe (about 18
 * instructions a frame instead of about 36). An entry changes only once
 * it is trusted or terminal: to poisoned, which bumps prof_uc_poisons,
 * and a thread's memo is only used while that count is the one it was
 * made under, so a frame stepped over by the memo is one the table would
 * trust, with the same size. */
#define PROF_UC_SLOTS 4096u
#define PROF_UC_TRUST 3u    /* states 1..3: seen that many times with one delta */
#define PROF_UC_TERMINAL 4u /* libgcc stops at this return address */
#define PROF_UC_POISON 7u   /* two deltas seen: always libgcc */
#define PROF_UC_DELTA_MAX ((uint64_t)0x1fff << 3)
static _Atomic uint64_t prof_uc[PROF_UC_SLOTS] HAK_BSS_BIG;
static _Atomic uint64_t prof_uc_poisons; /* entries poisoned so far */
/* By depth, the frames the last fast walk stepped over: return address and
 * delta (0: terminal, the walk's last). */
static HAK_TLS uintptr_t prof_memo_ip[PROF_FRAMES];
static HAK_TLS uint32_t prof_memo_delta[PROF_FRAMES];
static HAK_TLS uint32_t prof_memo_n;   /* how many */
static HAK_TLS uint64_t prof_memo_gen; /* prof_uc_poisons when they were read */

static _Atomic uint64_t *prof_uc_find(uintptr_t ip, bool insert) {
  size_t h = (size_t)(ip * 0x9E3779B97F4A7C15ull >> 52) & (PROF_UC_SLOTS - 1);
  for (unsigned k = 0; k < 8; k++) {
    _Atomic uint64_t *e = &prof_uc[(h + k) & (PROF_UC_SLOTS - 1)];
    uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
    if (v == 0 && insert) /* state 0: claimed, nothing learnt yet */
      if (atomic_compare_exchange_strong_explicit(e, &v, (uint64_t)ip << 16, memory_order_relaxed,
                                                  memory_order_relaxed))
        return e;
    if (v >> 16 == ip) return e;
    if (v == 0) return NULL;
  }
  return NULL; /* that neighbourhood is full: this address stays with libgcc */
}

/* A DWARF walk saw return address ip with the given delta (or, terminal,
 * as the last frame libgcc could name). A compare-and-swap, so that a
 * poisoning is never lost to a concurrent "seen again". */
static void prof_uc_learn(uintptr_t ip, uint64_t delta, bool terminal) {
  if (ip == 0 || ip >> 47 != 0) return;
  _Atomic uint64_t *e = prof_uc_find(ip, true);
  if (e == NULL) return;
  uint64_t v = atomic_load_explicit(e, memory_order_relaxed), nv;
  do {
    uint64_t st = v & 7, d = v >> 3 & 0x1fff;
    if (v >> 16 != ip || st == PROF_UC_POISON) return;
    if (terminal)
      nv = st == 0 || st == PROF_UC_TERMINAL ? PROF_UC_TERMINAL : PROF_UC_POISON;
    else if (delta == 0 || delta > PROF_UC_DELTA_MAX || (delta & 7) != 0 || st == PROF_UC_TERMINAL ||
             (st != 0 && d != delta >> 3))
      nv = PROF_UC_POISON;
    else
      nv = delta | (st < PROF_UC_TRUST ? st + 1 : st);
    nv |= (uint64_t)ip << 16;
  } while (nv != v &&
           !atomic_compare_exchange_weak_explicit(e, &v, nv, memory_order_relaxed, memory_order_relaxed));
  if ((nv & 7) == PROF_UC_POISON && nv != v) atomic_fetch_add_explicit(&prof_uc_poisons, 1, memory_order_relaxed);
}

struct prof_unwind {
  void **frames;
  uint32_t n;
  bool first; /* frame 0 is prof_capture itself: not recorded */
  bool full;
  uintptr_t last_ip, last_sp;
};

/* In libgcc's callback for a frame, _Unwind_GetCFA is that frame's stack
 * pointer (its callee's CFA): a frame's delta is known at the next one. */
static _Unwind_Reason_Code prof_unwind_cb(struct _Unwind_Context *ctx, void *arg) {
  struct prof_unwind *u = arg;
  uintptr_t ip = _Unwind_GetIP(ctx), sp = _Unwind_GetCFA(ctx);
  /* Past the outermost frame libgcc calls once more with ip 0: the frame
   * before is terminal, not one with a delta. */
  if (ip == 0) return _URC_END_OF_STACK;
  if (u->last_ip != 0) prof_uc_learn(u->last_ip, sp - u->last_sp, false);
  if (u->first) {
    u->first = false;
    return _URC_NO_REASON;
  }
  if (u->n >= PROF_FRAMES) {
    u->full = true;
    return _URC_END_OF_STACK;
  }
  u->frames[u->n++] = (void *)ip;
  u->last_ip = ip;
  u->last_sp = sp;
  return _URC_NO_REASON;
}

/* The stack above the caller of prof_capture, into frames; returns the
 * number of frames. Not inlined: its own CFA and return address start the
 * fast walk. */
static HAK_NOINLINE uint32_t prof_capture(void **frames) {
#if defined(__x86_64__)
  uintptr_t ip = (uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0));
  uintptr_t sp0 = (uintptr_t)__builtin_dwarf_cfa(), sp = sp0;
  uint32_t n = 0;
  /* Only on the stack libgcc last walked for this thread, and never above
   * the highest frame it reached there: a frame size trusted wrongly (see
   * above) then costs a wrong slot of this stack, never a fault. */
  if (sp0 >= prof_stack_lo && sp0 <= prof_stack_hi) {
    uint64_t gen = atomic_load_explicit(&prof_uc_poisons, memory_order_relaxed);
    uint32_t memo_n = gen == prof_memo_gen ? prof_memo_n : 0;
    uintptr_t hi = prof_stack_hi;
    /* The frames that are as last time. */
    for (; n < memo_n && prof_memo_ip[n] == ip; n++) {
      frames[n] = (void *)ip;
      uint32_t d = prof_memo_delta[n];
      if (d == 0) return n + 1; /* terminal (the memo is this walk's) */
      if (sp + d > hi) break;
      sp += d;
      ip = *(const uintptr_t *)(sp - 8);
    }
    /* The rest from the table. */
    while (n < PROF_FRAMES) {
      _Atomic uint64_t *e = ip != 0 && ip >> 47 == 0 ? prof_uc_find(ip, false) : NULL;
      uint64_t v = e != NULL ? atomic_load_explicit(e, memory_order_relaxed) : 0;
      if (v >> 16 != ip) break; /* not cached (or replaced meanwhile) */
      uint64_t st = v & 7;
      if (st == PROF_UC_TERMINAL) {
        prof_memo_ip[n] = ip;
        prof_memo_delta[n] = 0;
        frames[n++] = (void *)ip;
        prof_memo_n = n;
        prof_memo_gen = gen;
        return n;
      }
      if (st != PROF_UC_TRUST) break;
      uintptr_t cfa = sp + ((v >> 3 & 0x1fff) << 3); /* this frame's CFA: the caller's stack pointer */
      if (cfa > hi) break;
      prof_memo_ip[n] = ip;
      prof_memo_delta[n] = (uint32_t)(cfa - sp);
      frames[n++] = (void *)ip;
      sp = cfa;
      ip = *(const uintptr_t *)(sp - 8);
    }
    /* The first n entries of the memo are this walk's. */
    prof_memo_n = n;
    prof_memo_gen = gen;
    if (n == PROF_FRAMES) return n;
  }
#endif
  struct prof_unwind u = {frames, 0, true, false, 0, 0};
  _Unwind_Backtrace(prof_unwind_cb, &u);
  /* libgcc went no further than the last frame: remember where it stops. */
  if (!u.full && u.last_ip != 0) prof_uc_learn(u.last_ip, 0, true);
#if defined(__x86_64__)
  /* [sp0, last frame's stack pointer] is stack libgcc just read: if it
   * meets the known range it is the same stack, and the union is; if not
   * (a coroutine, an alternate signal stack) it replaces it. */
  if (u.last_sp > sp0) {
    if (sp0 <= prof_stack_hi && u.last_sp >= prof_stack_lo) {
      if (sp0 < prof_stack_lo) prof_stack_lo = sp0;
      if (u.last_sp > prof_stack_hi) prof_stack_hi = u.last_sp;
    } else {
      prof_stack_lo = sp0;
      prof_stack_hi = u.last_sp;
    }
  }
#endif
  return u.n;
}

void prof_alloc(void *p, size_t size) {
  if (p == NULL || prof_busy) return;
  /* SIGUSR2's dump is written here, by the next allocating thread: the
   * handler itself may not touch locks or files. */
  if (prof_dump_requested) prof_due(false);
  if (!atomic_load_explicit(&prof_active_flag, memory_order_relaxed)) return;
  prof_left -= (int64_t)size;
  if (prof_left > 0) return;
  prof_restart((int64_t)prof_next_gap());
  prof_busy = 1; /* the unwinder may allocate: those calls are not sampled */
  prof_rec_t rec;
  rec.nframes = prof_capture(rec.frames);
  rec.ptr = (uintptr_t)p;
  rec.size = size;
  /* The mean in force now: a later hak_ctl("prof.sample") does not change
   * what this sample stands for. */
  rec.weight = prof_weight(size, opt.prof_sample);
  size_t h = prof_hash(rec.ptr);
  pthread_mutex_lock(&prof_lock);
  /* Past 3/4 of the cap live, samples are dropped: probe chains stay
   * short rather than track everything. A failed mapping drops it too. */
  if (prof_live * 4 >= PROF_CAP * 3 || (prof_full() && (!prof_rehash(prof_cap_for(prof_live + 1)) || prof_full()))) {
    prof_dropped++;
  } else {
    size_t i = h & (prof_cap - 1);
    while (prof_tab[i].ptr > PROF_TOMB) i = (i + 1) & (prof_cap - 1);
    if (prof_tab[i].ptr == 0) prof_used++; /* a tombstone is reused as it is */
    prof_tab[i] = rec;
    prof_live++;
    prof_filter_set(h, atomic_load_explicit(&prof_fgen, memory_order_relaxed));
  }
  pthread_mutex_unlock(&prof_lock);
  /* Byte-interval dumps. Bytes reach the global total only here, at a
   * sample, so the count is behind by at most one gap per thread: "about"
   * every N bytes, at no cost to the unsampled calls. The CAS lets exactly
   * one thread write each numbered dump. */
  uint64_t iv = opt.prof_interval_bytes;
  if (iv != 0) {
    uint64_t tot = atomic_fetch_add_explicit(&prof_bytes_total, prof_acc, memory_order_relaxed) + prof_acc;
    uint64_t due = atomic_load_explicit(&prof_next_dump_bytes, memory_order_relaxed);
    if (tot >= due) {
      uint64_t next = due + iv * ((tot - due) / iv + 1); /* skip intervals already passed */
      if (atomic_compare_exchange_strong(&prof_next_dump_bytes, &due, next)) prof_due(true);
    }
  }
  prof_acc = 0;
  prof_busy = 0;
}

uint64_t prof_batch(size_t bytes) {
  if (prof_busy || !atomic_load_explicit(&prof_active_flag, memory_order_relaxed)) return UINT64_MAX;
  /* A thread's first batch: its countdown starts at a random gap, not at
   * zero (short-lived threads would each sample their first allocation). */
  if (prof_rng == 0) prof_restart((int64_t)prof_next_gap());
  if ((int64_t)bytes < prof_left) {
    prof_left -= (int64_t)bytes;
    return UINT64_MAX;
  }
  /* The sample falls in this batch: prof_left bytes are served before it,
   * and the sampled allocation's prof_alloc (or the next batch's
   * prof_batch) finds prof_left spent. */
  uint64_t at = prof_left > 0 ? (uint64_t)prof_left : 0;
  prof_left -= (int64_t)at;
  return at;
}

/* A free whose filter bit is set (or read during a rewrite): the table
 * decides. Out of line, so that the common miss in prof_free saves no
 * registers. */
static HAK_NOINLINE HAK_COLD void prof_free_slow(uintptr_t p, size_t h) {
  pthread_mutex_lock(&prof_lock);
  for (size_t i = h & (prof_cap - 1); prof_tab[i].ptr != 0; i = (i + 1) & (prof_cap - 1)) {
    if (prof_tab[i].ptr == p) {
      /* A tombstone, not an empty slot: later records of the same probe
       * chain must stay reachable. */
      prof_tab[i].ptr = PROF_TOMB;
      prof_live--;
      /* Most samples gone (after a spike): a smaller table. */
      if (prof_cap > PROF_MIN && prof_live * 16 < prof_cap) prof_rehash(prof_cap_for(prof_live));
      break;
    }
  }
  pthread_mutex_unlock(&prof_lock);
}

void prof_free(void *p) {
  if (p == NULL || prof_filter == NULL) return;
  size_t h = prof_hash((uintptr_t)p);
  /* The reader's half of the filter's sequence lock: a clear bit read
   * while no rewrite ran means "not sampled". A sample of p set its bit
   * before the allocation returned p, so before this free. */
  uint64_t g = atomic_load_explicit(&prof_fgen, memory_order_acquire);
  if (!(g & 1)) {
    size_t b = prof_fbit(h, g);
    uint64_t w = atomic_load_explicit(&prof_filter[b / 64], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (!(w >> (b % 64) & 1) && atomic_load_explicit(&prof_fgen, memory_order_relaxed) == g) return;
  }
  prof_free_slow((uintptr_t)p, h);
}

int prof_set_active(bool on) {
  if (!opt.prof || !prof_table_ready()) return EPERM;
  atomic_store_explicit(&prof_active_flag, on, memory_order_relaxed);
  return 0;
}

bool prof_is_active(void) { return opt.prof && prof_table_ready() && atomic_load_explicit(&prof_active_flag, memory_order_relaxed); }

int prof_set_sample(size_t mean) {
  if (mean == 0 || mean > ((size_t)1 << 40)) return EINVAL;
  /* A plain store read by prof_next_gap on other threads: a torn read is
   * impossible for an aligned word, and a stale one only delays the change
   * by one gap. */
  __atomic_store_n(&opt.prof_sample, mean, __ATOMIC_RELAXED);
  return 0;
}

/* The dumps' view of the table (prof_dump.c). */
size_t prof_table_visit(void (*fn)(const prof_rec_t *r, void *arg), void *arg, size_t *dropped) {
  pthread_mutex_lock(&prof_lock);
  for (size_t i = 0; i < prof_cap; i++)
    if (prof_tab[i].ptr > PROF_TOMB) fn(&prof_tab[i], arg);
  size_t live = prof_live;
  *dropped = prof_dropped;
  pthread_mutex_unlock(&prof_lock);
  return live;
}

/* fork (through prof_dump.c's prof_fork_*, after the dump lock): the table
 * lock is held across it. The child has only the forking thread, which
 * owns it: it unlocks it (re-initialising a locked mutex is undefined). */
HAK_TEXT_HOT void prof_table_fork_prepare(void) { pthread_mutex_lock(&prof_lock); }
HAK_TEXT_HOT void prof_table_fork_parent(void) { pthread_mutex_unlock(&prof_lock); }
HAK_TEXT_HOT void prof_table_fork_child(void) {
  /* The generator is the parent's: mix in the pid, or parent and child
   * would sample the same allocations. */
  if (prof_rng != 0) prof_rng ^= (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;
  pthread_mutex_unlock(&prof_lock);
}

size_t prof_table_live(void) {
  pthread_mutex_lock(&prof_lock);
  size_t n = prof_live;
  pthread_mutex_unlock(&prof_lock);
  return n;
}

/* ---- read-only accessor for the statistics' residency walk (stats.c) ----
 * Kept at the end of the file. The sample table as it is now and the
 * filter's mapping (a dump's temporary aggregation is not reported). Under
 * prof_lock: a rehash unmaps the table it replaces. The statistics call
 * this holding no allocator lock, and fn only reads residency. */
void prof_for_each_meta(void (*fn)(const void *p, size_t len, void *arg), void *arg) {
  if (!prof_table_ready()) return;
  pthread_mutex_lock(&prof_lock);
  fn(prof_tab, prof_tab_bytes, arg);
  fn((const void *)prof_filter, PROF_FILTER_MAX, arg);
  pthread_mutex_unlock(&prof_lock);
}
