/*
 * stats.c — statistics snapshot and report (see stats.h).
 *
 * The report is formatted into a caller buffer with snprintf and written
 * with write(2) (at exit) or fputs (stats_print), never while a lock of
 * the allocator is held, since stdio may allocate.
 */
#include "stats.h"

#include "hakmem.h"
#include "decay.h"
#include "heap.h"
#include "large.h"
#include "options.h"
#include "os.h"
#include "ownmap.h"
#include "prof.h"
#include "sizeclass.h"
#include "superslab.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if HAK_STATS_BUILD
HAK_TLS stats_tls_t stats_tls;
static _Atomic uint64_t st_total[ST_N] HAK_BSS_BIG, st_cls_alloc[HAK_NCLASS] HAK_BSS_BIG,
    st_cls_free[HAK_NCLASS] HAK_BSS_BIG;
static _Atomic uint64_t st_threads_exited;

HAK_TEXT_HOT void stats_thread_merge(void) {
  for (int i = 0; i < ST_N; i++) {
    atomic_fetch_add_explicit(&st_total[i], stats_tls.ev[i], memory_order_relaxed);
    stats_tls.ev[i] = 0;
  }
  for (int c = 0; c < HAK_NCLASS; c++) {
    atomic_fetch_add_explicit(&st_cls_alloc[c], stats_tls.cls_alloc[c], memory_order_relaxed);
    atomic_fetch_add_explicit(&st_cls_free[c], stats_tls.cls_free[c], memory_order_relaxed);
    stats_tls.cls_alloc[c] = stats_tls.cls_free[c] = 0;
  }
  atomic_fetch_add_explicit(&st_threads_exited, 1, memory_order_relaxed);
}

void stats_count_now(int ev, uint64_t n) { atomic_fetch_add_explicit(&st_total[ev], n, memory_order_relaxed); }
#endif

/* ---- where the resident bytes go ------------------------------------------
 * A cold walk over every region hakmem maps, asking the kernel which pages
 * are resident (mincore, one call per 4 MiB window) and giving each byte
 * of a resident page to the item its range belongs to, so the items add
 * up to resident_bytes exactly, and the regions' sizes to
 * mapped_walked_bytes. Inside the carved part of a slab in use the walk
 * cannot tell free blocks from live ones page by page without walking the
 * owner's free list (which only the owner may read): live blocks are
 * counted resident first, free blocks get the rest (a lower bound). */

/* A cursor over one mapped region: a window of up to RWIN_PAGES pages and
 * their residency, loaded as the walk moves up through the region (small
 * enough for the caller's stack: no lock, no static buffer, so a fork
 * mid-walk leaves nothing locked behind). */
#define RWIN_PAGES 256
typedef struct rwin {
  uintptr_t base, len; /* the window: page-aligned */
  uintptr_t limit;     /* end of the region: never asked beyond */
  bool ok;
  bool written;        /* count written pages only (os_residency_written) */
  unsigned char vec[RWIN_PAGES];
} rwin_t;

static void rwin_start(rwin_t *w, const void *region, size_t len) {
  w->base = w->len = 0;
  w->limit = (uintptr_t)region + len;
  w->written = false;
}

/* Resident bytes of [a, b), inside the region, visited upwards: each
 * resident page gives its overlap with the range. */
static size_t rwin_bytes(rwin_t *w, uintptr_t a, uintptr_t b) {
  size_t pg = os_page_size, n = 0;
  while (a < b) {
    if (a < w->base || a >= w->base + w->len) {
      w->base = a & ~(uintptr_t)(pg - 1);
      uintptr_t end = align_up(w->limit, pg);
      w->len = end - w->base < RWIN_PAGES * pg ? end - w->base : RWIN_PAGES * pg;
      w->ok = w->written ? os_residency_written((void *)w->base, w->len, w->vec)
                         : os_residency((void *)w->base, w->len, w->vec);
    }
    uintptr_t e = b < w->base + w->len ? b : w->base + w->len;
    for (uintptr_t p = a & ~(uintptr_t)(pg - 1); w->ok && p < e; p += pg) {
      if (!(w->vec[(p - w->base) / pg] & 1)) continue;
      uintptr_t lo = p > a ? p : a, hi = p + pg < e ? p + pg : e;
      n += hi - lo;
    }
    a = e;
  }
  return n;
}

/* Resident bytes of a whole mapped range (written: only pages this
 * process wrote, for read-mostly tables). */
static size_t res_range_as(const void *p, size_t len, bool written) {
  rwin_t w;
  rwin_start(&w, p, len);
  w.written = written;
  return rwin_bytes(&w, (uintptr_t)p, (uintptr_t)p + len);
}
static size_t res_range(const void *p, size_t len) { return res_range_as(p, len, false); }

static void stats_visit(const superslab_t *ss, void *arg);

static void acct_sum_len(const void *p, size_t len, void *arg) {
  (void)p;
  *(size_t *)arg += len;
}

typedef struct acct {
  struct hak_stats *st;
  size_t live_res[HAK_NCLASS]; /* resident bytes of live blocks, by class */
  size_t live_large;           /* of live arena blocks, up to what was asked */
  size_t large_round;          /* of live arena blocks, past it (exact rounding) */
  size_t mapped;               /* regions walked */
  size_t ss_map;
  rwin_t w;
} acct_t;

/* One live superslab (registry lock held): the header, then each slab. */
static void acct_superslab(acct_t *ac, const superslab_t *ss) {
  struct hak_stats *st = ac->st;
  rwin_t *w = &ac->w;
  uintptr_t b = (uintptr_t)ss;
  size_t slab = (size_t)1 << ss->slab_shift;
  rwin_start(w, ss, HAK_SS_SIZE);
  ac->mapped += ac->ss_map;
  st->rss_metadata_bytes += rwin_bytes(w, b, b + (ss->first_slab ? slab : HAK_BIG_AREA_OFFSET));
  uint64_t freem = __atomic_load_n(&ss->free_mask, __ATOMIC_RELAXED);
  for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
    uintptr_t start = b + (size_t)i * slab + ss_area_offset(i), end = b + (size_t)(i + 1) * slab;
    if (freem & ((uint64_t)1 << i)) {
      st->rss_free_slab_bytes += rwin_bytes(w, start, end);
      continue;
    }
    const slab_t *s = &ss->slabs[i];
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_RELAXED);
    if (c >= HAK_NCLASS) { /* being (re)assigned: count its pages as not yet carved */
      st->rss_uncarved_bytes += rwin_bytes(w, start, end);
      continue;
    }
    /* Racy fields of a slab its owner is using: clamped into order. */
    size_t bs = sc_size[c], room = end - start;
    size_t cap = __atomic_load_n(&s->capacity, __ATOMIC_RELAXED);
    size_t carved = __atomic_load_n(&s->carved, __ATOMIC_RELAXED);
    size_t used = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
    if (cap * bs > room) cap = room / bs;
    if (carved > cap) carved = cap;
    if (used > carved) used = carved;
    uintptr_t cend = start + carved * bs;
    size_t rc = rwin_bytes(w, start, cend);
    size_t live = used * bs;
    size_t tf = (size_t)(atomic_load_explicit(slab_tf(s), memory_order_relaxed) >> TF_COUNT_SHIFT) * bs;
    size_t live_res = live < rc ? live : rc;
    st->rss_free_block_bytes += rc - live_res;
    if (tf > live_res) tf = live_res;
    st->rss_thread_cache_bytes += tf;
    if (tf != 0) {
      /* Who will collect them: the owner at its next refill of the class
       * (its current slab), when it turns to the slab again, or a thread
       * that adopts the superslab. A racy read of the owner's cur[]. */
      const heap_t *h = ss_heap(ss);
      if (h == NULL || atomic_load_explicit(&s->owner, memory_order_relaxed) == OWNER_ABANDONED)
        st->tc_abandoned_bytes += tf;
      else if (__atomic_load_n(&h->cur[c], __ATOMIC_RELAXED) == s)
        st->tc_current_bytes += tf;
      else
        st->tc_other_bytes += tf;
    }
    ac->live_res[c] += live_res - tf;
    st->rss_uncarved_bytes += rwin_bytes(w, cend, end);
  }
#if HAK_SECURE
  st->rss_metadata_bytes += res_range((const uint8_t *)ss + HAK_SS_SIZE, ac->ss_map - HAK_SS_SIZE);
#endif
}

static void acct_cached_ss(const superslab_t *ss, void *arg) {
  acct_t *ac = arg;
  ac->mapped += ac->ss_map;
  ac->st->rss_cached_bytes += res_range(ss, ac->ss_map);
}

/* An arena comes as its descriptor granule, then its blocks and free spans
 * upwards: one window moves through the arena (a mincore call per window,
 * not per block); a cached mapping is a region of its own. */
static void acct_large(const void *p, size_t len, int kind, void *arg) {
  acct_t *ac = arg;
  if (kind == LARGE_REGION_META) rwin_start(&ac->w, p, large_arena_bytes());
  size_t r = kind == LARGE_REGION_CACHED ? res_range(p, len) : rwin_bytes(&ac->w, (uintptr_t)p, (uintptr_t)p + len);
  ac->mapped += len;
  switch (kind) {
  case LARGE_REGION_META: ac->st->rss_metadata_bytes += r; break;
  case LARGE_REGION_LIVE: ac->live_large += r; break;
  case LARGE_REGION_ROUND: ac->large_round += r; break;
  case LARGE_REGION_FREE: ac->st->rss_large_free_bytes += r; break;
  default: ac->st->rss_cached_bytes += r; break;
  }
}

/* Heap structs lie side by side in their chunks: a page two of them share
 * is counted once (heap_all runs newest first, so a neighbour in the list
 * is the neighbour in memory). */
typedef struct acct_meta {
  acct_t *ac;
  uintptr_t last_lo, last_hi; /* pages of the previous range */
  bool written;               /* read-mostly tables: written pages only */
} acct_meta_t;

static void acct_meta(const void *p, size_t len, void *arg) {
  acct_meta_t *m = arg;
  size_t pg = os_page_size;
  uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1), hi = align_up((uintptr_t)p + len, pg);
  /* Count whole pages (their other bytes are heap-chunk slack or another
   * heap's), skipping those already counted. */
  if (lo < m->last_hi && hi > m->last_lo) {
    if (lo >= m->last_lo) lo = m->last_hi < hi ? m->last_hi : hi;
    else hi = m->last_lo;
  }
  if (hi > lo) m->ac->st->rss_metadata_bytes += res_range_as((void *)lo, hi - lo, m->written);
  m->last_lo = (uintptr_t)p & ~(uintptr_t)(pg - 1);
  m->last_hi = align_up((uintptr_t)p + len, pg);
}

/* The whole process's resident bytes: /proc/self/statm's second field. */
static size_t stats_process_rss(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *q = strchr(buf, ' ');
  if (q == NULL) return 0;
  size_t pages = 0;
  for (q++; *q >= '0' && *q <= '9'; q++) pages = pages * 10 + (size_t)(*q - '0');
  return pages * os_page_size;
}

static void stats_account(struct hak_stats *st, const large_stats_t *ls) {
  acct_t ac; /* about 1 KiB of stack */
  memset(&ac, 0, sizeof ac);
  ac.st = st;
  ac.ss_map = ss_map_bytes();
  ss_for_each(stats_visit, &ac);
  ss_cache_for_each(acct_cached_ss, &ac);
  large_for_each_region(acct_large, &ac);
  acct_meta_t m = {&ac, 0, 0, false};
  ac.mapped += heap_for_each_meta(acct_meta, &m);
  /* The profiler's tables and the ownership map are read far more than
   * written: a page only read maps the kernel's shared zero page, which
   * mincore calls resident and the process's RSS does not count (the
   * ownership map is looked up everywhere, and the profiler's filter is
   * read by every free while profiling). Written pages only. */
  m.last_lo = m.last_hi = 0;
  m.written = true;
  prof_for_each_meta(acct_meta, &m);
  /* The ownership map is BSS, not a mapping of hakmem's: resident only. */
  st->rss_metadata_bytes += res_range_as(ownmap_table, sizeof ownmap_table, true);
  /* Dedicated large mappings in use are listed nowhere (only counted), and
   * reading their headers would race with their munmap: counted whole, as
   * if resident. */
  ac.mapped += ls->mapping_bytes;
  /* Each prof mapping's size is its own; the walk adds them to mapped. */
  {
    size_t pm = 0;
    prof_for_each_meta(acct_sum_len, &pm);
    ac.mapped += pm;
  }
  /* Blocks waiting in the threads' remote-free caches, and on the heaps'
   * delayed lists, are in their slabs' used counts: they move from live to
   * the thread-held caches. */
  size_t live = ac.live_large + ac.large_round + ls->mapping_bytes, rounding = 0;
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    live += ac.live_res[c];
    /* Requests of class c fall in (size of c-1, size of c]: if spread
     * evenly, a block wastes half the gap on average. No counter on the
     * hot path knows the requested sizes, so this is a model. */
    size_t gap = sc_size[c] - (c ? sc_size[c - 1] : 0);
    rounding += (size_t)((double)ac.live_res[c] * (double)(gap - 1) / 2.0 / (double)sc_size[c]);
  }
  size_t pend = heap_remote_pending_bytes(), dly = heap_delayed_bytes();
  if (pend > live) pend = live;
  if (dly > live - pend) dly = live - pend;
  if (live) rounding = (size_t)((double)rounding * (double)(live - pend - dly) / (double)live);
  live -= pend + dly;
  /* The arena blocks' rounding is no model: each block's pages past what
   * it was asked for (large.c's req_end). */
  rounding += ac.large_round;
  st->rss_large_rounding_bytes = ac.large_round;
  st->rss_thread_cache_bytes += pend + dly;
  st->tc_pending_bytes = pend;
  st->tc_delayed_bytes = dly;
  if (rounding > live) rounding = live;
  st->rss_rounding_bytes = rounding;
  st->rss_requested_bytes = live - rounding;
  st->mapped_walked_bytes = ac.mapped;
  st->resident_bytes = st->rss_requested_bytes + st->rss_rounding_bytes + st->rss_free_block_bytes +
                       st->rss_uncarved_bytes + st->rss_free_slab_bytes + st->rss_large_free_bytes +
                       st->rss_cached_bytes + st->rss_thread_cache_bytes + st->rss_metadata_bytes;
  st->process_rss_bytes = stats_process_rss();
  st->rss_other_bytes = st->process_rss_bytes > st->resident_bytes ? st->process_rss_bytes - st->resident_bytes : 0;
}

/* Called for each live superslab under the registry lock, while its owner
 * threads keep allocating: slab fields are read with relaxed loads and may
 * be a moment apart from each other, which a snapshot tolerates. */
static void stats_visit(const superslab_t *ss, void *arg) {
  acct_t *ac = arg;
  struct hak_stats *st = ac->st;
  for (unsigned i = ss->first_slab; i < ss->nslabs; i++) {
    if (ss->free_mask & ((uint64_t)1 << i)) continue; /* free slab: no class, counted as idle */
    const slab_t *s = &ss->slabs[i];
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_RELAXED);
    if (c >= HAK_NCLASS) continue; /* being (re)assigned right now */
    size_t used = __atomic_load_n(&s->used, __ATOMIC_RELAXED);
    size_t cap = __atomic_load_n(&s->capacity, __ATOMIC_RELAXED);
    st->classes[c].slabs++;
    st->classes[c].blocks_in_use += used;
    st->classes[c].blocks_capacity += cap;
    st->small_bytes_in_use += used * sc_size[c];
    st->small_bytes_reserved += cap * sc_size[c];
  }
  acct_superslab(ac, ss);
}

int stats_get(struct hak_stats *out) {
  /* Callers built against an older header pass a smaller size: everything
   * up to classes[] has been there since version 1, and nothing past
   * out->size is written (the memcpy at the end). */
  if (out == NULL || out->size < offsetof(struct hak_stats, classes)) return -1;
  struct hak_stats st;
  memset(&st, 0, sizeof st);
  st.size = out->size;
  st.version = HAK_STATS_VERSION;
  st.nclasses = HAK_NCLASS;
  st.mapped_bytes = atomic_load_explicit(&os_stats.mapped, memory_order_relaxed);
  st.mapped_peak_bytes = atomic_load_explicit(&os_stats.mapped_peak, memory_order_relaxed);
  st.purged_bytes = atomic_load_explicit(&os_stats.purged, memory_order_relaxed);
  st.mmap_calls = atomic_load_explicit(&os_stats.mmap_calls, memory_order_relaxed);
  st.munmap_calls = atomic_load_explicit(&os_stats.munmap_calls, memory_order_relaxed);
  st.madvise_calls = atomic_load_explicit(&os_stats.madvise_calls, memory_order_relaxed);
  st.mremap_calls = atomic_load_explicit(&os_stats.mremap_calls, memory_order_relaxed);
  ss_counts_t sc = ss_counts();
  st.superslabs = sc.live;
  st.superslabs_abandoned = sc.abandoned;
  st.superslabs_cached = sc.cached;
  st.superslabs_handed_over = heap_handed_over();
  for (unsigned c = 0; c < HAK_NCLASS; c++) st.classes[c].block_size = sc_size[c];
  large_stats_t ls;
  large_stats(&ls);
  stats_account(&st, &ls); /* walks the superslabs (stats_visit) too */
  st.large_arenas = ls.arenas;
  st.large_arena_bytes_in_use = ls.arena_bytes_used;
  st.large_mappings = ls.mappings;
  st.large_mapping_bytes = ls.mapping_bytes;
  st.large_cached = ls.cached;
  st.large_cached_bytes = ls.cached_bytes;
  decay_stats_t ds;
  decay_stats(&ds);
  st.heap_idle_bytes = ds.heap_idle_bytes;
  st.decayed_bytes = ds.decayed_bytes;
  st.grow_purged_bytes = ds.grow_bytes;
  st.collected_bytes = ds.forced_bytes;
  st.bg_thread_running = ds.running;
  st.bg_passes = ds.passes;
  st.purge_lock_busy = ds.contended;
  st.heap_idle_max_bytes = ds.heap_idle_max;
  st.heap_idle_heaps = ds.heap_idle_heaps;
#if HAK_STATS_BUILD
  /* Totals hold the counts of exited threads; the calling thread's own
   * are added so that a single-threaded program sees its events. Other
   * live threads' counts are not visible until they exit (reading their
   * TLS would need a registry of threads and a race on every counter). */
  uint64_t ev[ST_N];
  for (int i = 0; i < ST_N; i++)
    ev[i] = atomic_load_explicit(&st_total[i], memory_order_relaxed) + stats_tls.ev[i];
  st.allocs = ev[ST_ALLOC];
  st.frees = ev[ST_FREE];
  st.slow_allocs = ev[ST_SLOW];
  st.refills = ev[ST_REFILL];
  st.remote_frees = ev[ST_REMOTE];
  st.threads_exited = atomic_load_explicit(&st_threads_exited, memory_order_relaxed);
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    st.classes[c].allocs = atomic_load_explicit(&st_cls_alloc[c], memory_order_relaxed) + stats_tls.cls_alloc[c];
    st.classes[c].frees = atomic_load_explicit(&st_cls_free[c], memory_order_relaxed) + stats_tls.cls_free[c];
  }
#endif
  memcpy(out, &st, out->size < sizeof st ? out->size : sizeof st);
  return 0;
}

#define KIB(x) ((double)(x) / 1024.0)

typedef struct sbuf {
  char *buf;
  size_t cap, n;
} sbuf_t;

/* Appends, silently truncating at the end of the buffer: the report is
 * bounded (60 class lines at most) and a cut one is still useful. */
__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf_t *b, const char *fmt, ...) {
  if (b->n + 1 >= b->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(b->buf + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  if (w > 0) b->n = b->n + (size_t)w < b->cap ? b->n + (size_t)w : b->cap - 1;
}

size_t stats_format(char *buf, size_t cap) { return stats_format_ex(buf, cap, false); }

size_t stats_format_ex(char *buf, size_t cap, bool fields) {
  struct hak_stats st;
  st.size = sizeof st;
  stats_get(&st);
  sbuf_t sb = {buf, cap, 0};
  if (cap) buf[0] = 0;
#define OUT(...) sb_printf(&sb, __VA_ARGS__)
  OUT("hakmem %s statistics (pid %d)\n", HAK_VERSION_STRING, (int)getpid());
  OUT("os: mapped %.0f KiB (peak %.0f KiB), purged %.0f KiB total\n", KIB(st.mapped_bytes),
      KIB(st.mapped_peak_bytes), KIB(st.purged_bytes));
  OUT("os calls: mmap %zu, munmap %zu, madvise %zu, mremap %zu, populate %zu\n", st.mmap_calls, st.munmap_calls,
      st.madvise_calls, st.mremap_calls, atomic_load_explicit(&os_stats.populate_calls, memory_order_relaxed));
  OUT("superslabs: %zu live (%zu abandoned), %zu cached empty, %zu handed over by idle threads\n", st.superslabs,
      st.superslabs_abandoned, st.superslabs_cached, st.superslabs_handed_over);
  OUT("small: %.0f KiB in use of %.0f KiB in slabs\n", KIB(st.small_bytes_in_use),
      KIB(st.small_bytes_reserved));
  OUT("large: %zu arenas (%.0f KiB in use), %zu mappings (%.0f KiB), %zu cached (%.0f KiB)\n",
      st.large_arenas, KIB(st.large_arena_bytes_in_use), st.large_mappings,
      KIB(st.large_mapping_bytes), st.large_cached, KIB(st.large_cached_bytes));
  OUT("idle: %.0f KiB resident in free slabs of %zu thread heaps (at most %.0f KiB in one); "
      "decayed %.0f KiB (%.0f KiB early, growing), collected %.0f KiB\n",
      KIB(st.heap_idle_bytes), st.heap_idle_heaps, KIB(st.heap_idle_max_bytes), KIB(st.decayed_bytes),
      KIB(st.grow_purged_bytes), KIB(st.collected_bytes));
  OUT("resident: %.0f KiB of %.0f KiB mapped (walked %.0f KiB); process %.0f KiB, other %.0f KiB\n",
      KIB(st.resident_bytes), KIB(st.mapped_bytes), KIB(st.mapped_walked_bytes), KIB(st.process_rss_bytes),
      KIB(st.rss_other_bytes));
  OUT("resident split: requested %.0f, rounding %.0f (est.; arena blocks %.0f), free blocks %.0f, uncarved %.0f, "
      "free slabs %.0f, large free %.0f, cached %.0f, thread caches %.0f, metadata %.0f KiB\n",
      KIB(st.rss_requested_bytes), KIB(st.rss_rounding_bytes), KIB(st.rss_large_rounding_bytes),
      KIB(st.rss_free_block_bytes),
      KIB(st.rss_uncarved_bytes), KIB(st.rss_free_slab_bytes), KIB(st.rss_large_free_bytes),
      KIB(st.rss_cached_bytes), KIB(st.rss_thread_cache_bytes), KIB(st.rss_metadata_bytes));
  OUT("thread caches: pending %.0f, current slabs %.0f, other slabs %.0f, abandoned %.0f, delayed %.0f KiB\n",
      KIB(st.tc_pending_bytes), KIB(st.tc_current_bytes), KIB(st.tc_other_bytes), KIB(st.tc_abandoned_bytes),
      KIB(st.tc_delayed_bytes));
  OUT("purge thread: %s, %zu passes, %zu busy heaps skipped (delay %llu ms)\n",
      st.bg_thread_running ? "running" : "not running", st.bg_passes, st.purge_lock_busy,
      (unsigned long long)opt.purge_delay_ms);
#if HAK_STATS_BUILD
  OUT("events: allocs %zu, frees %zu, slow allocs %zu, refills %zu, remote frees %zu, threads exited %zu\n",
      st.allocs, st.frees, st.slow_allocs, st.refills, st.remote_frees, st.threads_exited);
  {
    uint64_t e[ST_N];
    for (int i = 0; i < ST_N; i++) e[i] = atomic_load_explicit(&st_total[i], memory_order_relaxed) + stats_tls.ev[i];
    OUT("remote: %llu batches published (%llu blocks), %llu to a full slab's owner, %llu CAS retries; "
        "%llu collections (%llu blocks); %llu slabs put to wait, %llu marked full\n",
        (unsigned long long)e[ST_RPUBLISH], (unsigned long long)e[ST_RPUBLISH_BLOCKS],
        (unsigned long long)e[ST_RDELAYED], (unsigned long long)e[ST_RCAS_RETRY],
        (unsigned long long)e[ST_COLLECT], (unsigned long long)e[ST_COLLECT_BLOCKS],
        (unsigned long long)e[ST_WAITING], (unsigned long long)e[ST_MARK_FULL]);
    OUT("idle heaps: %llu listed slabs taken, %llu superslabs handed over, %llu looks found the owner busy\n",
        (unsigned long long)e[ST_IDLE_TAKEN], (unsigned long long)e[ST_IDLE_HANDED], (unsigned long long)e[ST_IDLE_BUSY]);
  }
#endif
  OUT("%-10s %8s %12s %12s %8s\n", "class", "slabs", "in use", "capacity", "use%");
  for (unsigned c = 0; c < st.nclasses; c++) {
    const struct hak_class_stats *k = &st.classes[c];
    if (k->slabs == 0 && k->allocs == 0) continue; /* unused classes would be most of the table */
    OUT("%-10zu %8zu %12zu %12zu %7.1f%%\n", k->block_size, k->slabs, k->blocks_in_use,
        k->blocks_capacity, k->blocks_capacity ? 100.0 * (double)k->blocks_in_use / (double)k->blocks_capacity : 0.0);
  }
  /* Every field under its hak_ctl name, one per line, generated from the
   * public lists: what a script watching a server greps for. */
  if (fields) {
#define FIELD_(name, text) OUT("stats.%s %zu\n", #name, st.name);
    HAK_STATS_FIELDS_V1(FIELD_)
    HAK_STATS_FIELDS_V2(FIELD_)
    HAK_STATS_FIELDS_V3(FIELD_)
    HAK_STATS_FIELDS_V5(FIELD_)
    HAK_STATS_FIELDS_V6(FIELD_)
    HAK_STATS_FIELDS_V7(FIELD_)
    HAK_STATS_FIELDS_V8(FIELD_)
    HAK_STATS_FIELDS_V9(FIELD_)
#undef FIELD_
  }
#undef OUT
  return sb.n;
}

size_t stats_doc_table(char *buf, size_t cap) {
  sbuf_t sb = {buf, cap, 0};
  if (cap) buf[0] = 0;
  /* "since" is which list a field comes from: the version of the struct
   * that introduced it, which a caller checks in st.version. */
  sb_printf(&sb, "| field (`hak_ctl` name `stats.<field>`) | since | meaning |\n|---|---|---|\n");
#define ROW_(name, text) sb_printf(&sb, "| `%s` | %u | %s |\n", #name, ver_, text);
  unsigned ver_ = 1;
  HAK_STATS_FIELDS_V1(ROW_)
  ver_ = 2;
  HAK_STATS_FIELDS_V2(ROW_)
  ver_ = 3;
  HAK_STATS_FIELDS_V3(ROW_)
  ver_ = 5;
  HAK_STATS_FIELDS_V5(ROW_)
  ver_ = 6;
  HAK_STATS_FIELDS_V6(ROW_)
  ver_ = 7;
  HAK_STATS_FIELDS_V7(ROW_)
  ver_ = 8;
  HAK_STATS_FIELDS_V8(ROW_)
  ver_ = 9;
  HAK_STATS_FIELDS_V9(ROW_)
#undef ROW_
  sb_printf(&sb, "\nEach of the `HAK_STATS_CLASSES` entries of `classes[]` (the first `nclasses` filled; "
                 "`hak_ctl` name `stats.classes.<i>.<field>`):\n\n| field | meaning |\n|---|---|\n");
#define ROW_(name, text) sb_printf(&sb, "| `%s` | %s |\n", #name, text);
  HAK_CLASS_STATS_FIELDS(ROW_)
#undef ROW_
  return sb.n;
}

void stats_print(FILE *out) {
  static char buf[16384] HAK_BSS_BIG; /* static: callers may be short of stack; report is rare */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock); /* stdio may allocate: fine, no allocator lock is held */
  stats_format(buf, sizeof buf);
  fputs(buf, out ? out : stderr);
  pthread_mutex_unlock(&lock);
}

static int stats_fd = 2;

HAK_TEXT_HOT void stats_init(void) {
  /* Periodic and on-signal reports without a file go to stderr too. */
  if (opt.stats || opt.prof_leaks || (opt.stats_file == NULL && (opt.stats_signal || opt.stats_interval_ms))) {
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0) stats_fd = fd;
  }
}

int stats_report_fd(void) { return stats_fd; }

/* HAKMEM_STATS=1: the report at exit, written with write(2). */
HAK_TEXT_HOT __attribute__((destructor)) static void stats_at_exit(void) {
  if (!opt.stats) return;
  /* static, not on the stack, which may be short in a destructor; written
   * with write(2) since the program may have closed stdio's stderr. */
  static char buf[16384] HAK_BSS_BIG;
  stats_format(buf, sizeof buf);
  os_write_fd(stats_fd, buf);
}
