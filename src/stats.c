/*
 * stats.c — statistics snapshot and report (see stats.h).
 *
 * The report is formatted into a caller buffer with snprintf and written
 * with write(2) (at exit) or fputs (hak_stats_print), never while a lock of
 * the allocator is held, since stdio may allocate.
 */
#include "stats.h"

#include "hakmem.h"
#include "decay.h"
#include "init.h"
#include "large.h"
#include "options.h"
#include "os.h"
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
static _Atomic uint64_t st_total[ST_N], st_cls_alloc[HAK_NCLASS], st_cls_free[HAK_NCLASS];
static _Atomic uint64_t st_threads_exited;

void stats_thread_merge(void) {
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
#endif

/* Called for each live superslab under the registry lock, while its owner
 * threads keep allocating: slab fields are read with relaxed loads and may
 * be a moment apart from each other, which a snapshot tolerates. */
static void stats_visit(const superslab_t *ss, void *arg) {
  struct hak_stats *st = arg;
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
}

HAK_EXPORT int hak_stats_get(struct hak_stats *out) {
  /* Callers built against an older header pass a smaller size: everything
   * up to classes[] has been there since version 1, and nothing past
   * out->size is written (the memcpy at the end). */
  if (out == NULL || out->size < offsetof(struct hak_stats, classes)) return -1;
  init_ensure(); /* the class table is filled at start-up */
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
  for (unsigned c = 0; c < HAK_NCLASS; c++) st.classes[c].block_size = sc_size[c];
  ss_for_each(stats_visit, &st);
  large_stats_t ls;
  large_stats(&ls);
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
  hak_stats_get(&st);
  sbuf_t sb = {buf, cap, 0};
  if (cap) buf[0] = 0;
#define OUT(...) sb_printf(&sb, __VA_ARGS__)
  OUT("hakmem %s statistics (pid %d)\n", hak_version(), (int)getpid());
  OUT("os: mapped %.0f KiB (peak %.0f KiB), purged %.0f KiB total\n", KIB(st.mapped_bytes),
      KIB(st.mapped_peak_bytes), KIB(st.purged_bytes));
  OUT("os calls: mmap %zu, munmap %zu, madvise %zu, mremap %zu\n", st.mmap_calls, st.munmap_calls,
      st.madvise_calls, st.mremap_calls);
  OUT("superslabs: %zu live (%zu abandoned), %zu cached empty\n", st.superslabs,
      st.superslabs_abandoned, st.superslabs_cached);
  OUT("small: %.0f KiB in use of %.0f KiB in slabs\n", KIB(st.small_bytes_in_use),
      KIB(st.small_bytes_reserved));
  OUT("large: %zu arenas (%.0f KiB in use), %zu mappings (%.0f KiB), %zu cached (%.0f KiB)\n",
      st.large_arenas, KIB(st.large_arena_bytes_in_use), st.large_mappings,
      KIB(st.large_mapping_bytes), st.large_cached, KIB(st.large_cached_bytes));
  OUT("idle: %.0f KiB resident in free slabs of %zu thread heaps (at most %.0f KiB in one); "
      "decayed %.0f KiB, collected %.0f KiB\n",
      KIB(st.heap_idle_bytes), st.heap_idle_heaps, KIB(st.heap_idle_max_bytes), KIB(st.decayed_bytes),
      KIB(st.collected_bytes));
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
#undef ROW_
  sb_printf(&sb, "\nEach of the `HAK_STATS_CLASSES` entries of `classes[]` (the first `nclasses` filled; "
                 "`hak_ctl` name `stats.classes.<i>.<field>`):\n\n| field | meaning |\n|---|---|\n");
#define ROW_(name, text) sb_printf(&sb, "| `%s` | %s |\n", #name, text);
  HAK_CLASS_STATS_FIELDS(ROW_)
#undef ROW_
  return sb.n;
}

HAK_EXPORT void hak_stats_print(FILE *out) {
  static char buf[16384]; /* static: callers may be short of stack; report is rare */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock); /* stdio may allocate: fine, no allocator lock is held */
  stats_format(buf, sizeof buf);
  fputs(buf, out ? out : stderr);
  pthread_mutex_unlock(&lock);
}

static int stats_fd = 2;

void stats_init(void) {
  /* Periodic and on-signal reports without a file go to stderr too. */
  if (opt.stats || opt.prof_leaks || (opt.stats_file == NULL && (opt.stats_signal || opt.stats_interval_ms))) {
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0) stats_fd = fd;
  }
}

int stats_report_fd(void) { return stats_fd; }

/* HAKMEM_STATS=1: the report at exit, written with write(2). */
__attribute__((destructor)) static void stats_at_exit(void) {
  if (!opt.stats) return;
  /* static, not on the stack, which may be short in a destructor; written
   * with write(2) since the program may have closed stdio's stderr. */
  static char buf[16384];
  stats_format(buf, sizeof buf);
  os_write_fd(stats_fd, buf);
}
