/*
 * prof_dump.c — the profiler's outputs and their triggers (see prof.h):
 * start-up (prof_init: the table, then SIGUSR2), the aggregation of live
 * samples by stack, PATH.heap (pprof), PATH.folded, PATH.txt and the leak
 * report, the dump lock, dumps at exit, on SIGUSR2, by byte interval (the
 * sampler calls back), by time (prof_tick) and through hak_prof_dump.
 * Promises: dumps allocate nothing from hakmem while holding the table
 * lock; every file is written whole under the dump lock. May call: prof
 * (the table), prof_symbol, os, options, stats (the report descriptor).
 */
#include "prof.h"
#include "hakmem.h"
#include "options.h"
#include "os.h"
#include "prof_impl.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Dumps may start on several threads at once (signal, interval, API);
 * this lock keeps their files whole. It is taken before the table lock
 * and before the allocator's locks (a dump allocates while holding it). */
static pthread_mutex_t prof_dump_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t prof_seq; /* NNNN of the next numbered dump */
static uint64_t prof_next_dump_ms; /* the report thread's only */

/* A file's path: the prefix (an option holds at most 4095 bytes) and the
 * longest suffix (".NNNN.heap", ".folded"), whole, so a long prefix is
 * never cut into another file's name; the kernel refuses past PATH_MAX. */
#define PROF_PATH_CAP (PATH_MAX + 32)

static _Atomic bool prof_open_said;

static void prof_on_signal(int sig) {
  (void)sig;
  prof_dump_requested = 1;
}

static void prof_due_cb(bool numbered);

HAK_TEXT_HOT void prof_init(void) {
  if (!opt.prof) return;
  if (!prof_table_init(prof_due_cb)) {
    os_write_err("hakmem: HAKMEM_PROF: cannot map the sample table; profiling off\n");
    opt.prof = false;
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = prof_on_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, NULL);
}

/* ---- dumps ----------------------------------------------------------------- */

typedef struct prof_agg {
  uint64_t key;
  size_t bytes, count, size;
  uint32_t nframes;
  void *frames[PROF_FRAMES];
} prof_agg_t;

static void prof_write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

struct prof_agg_ctx {
  prof_agg_t *agg;
  size_t cap, n;
  bool by_size;
  bool overflow; /* more stacks than 3/4 of cap: aggregate again, larger */
};

static void prof_agg_add(const prof_rec_t *r, void *arg) {
  struct prof_agg_ctx *c = arg;
  prof_agg_t *agg = c->agg;
  if (c->overflow) return;
  uint32_t skip = 0;
  while (skip < r->nframes && prof_frame_is_ours(r->frames[skip])) skip++;
  /* FNV-1a over the frames; |1 so that 0 can mean an empty slot. */
  uint64_t key = 1469598103934665603ull;
  for (uint32_t f = skip; f < r->nframes; f++) key = (key ^ (uintptr_t)r->frames[f]) * 1099511628211ull;
  if (c->by_size) key = (key ^ r->size) * 1099511628211ull;
  key |= 1;
  size_t j = (size_t)(key >> 7) & (c->cap - 1);
  while (agg[j].key != 0 && agg[j].key != key) j = (j + 1) & (c->cap - 1);
  if (agg[j].key == 0) {
    if ((c->n + 1) * 4 > c->cap * 3) {
      c->overflow = true;
      return;
    }
    agg[j].key = key;
    agg[j].size = r->size;
    agg[j].nframes = r->nframes - skip;
    memcpy(agg[j].frames, r->frames + skip, agg[j].nframes * sizeof(void *));
    c->n++;
  }
  agg[j].bytes += c->by_size ? r->size : r->weight; /* .heap: raw sizes, pprof scales */
  agg[j].count++;
}

/* The table's counts at the last aggregation (under the dump lock). */
static size_t prof_live_seen, prof_dropped_seen;

/* Compact to the front; the order is the hash's, i.e. arbitrary: the
 * formats do not depend on it, pprof and flame graphs sort themselves. */
static size_t prof_compact(prof_agg_t *agg, size_t cap, size_t n) {
  size_t k = 0;
  for (size_t j = 0; j < cap; j++)
    if (agg[j].key != 0) agg[k++] = agg[j];
  return n;
}

/* Aggregate live samples by stack (and, with by_size, by block size too:
 * pprof scales each line by its mean block size, which is exact only when
 * the line holds one size). Returns the number of entries in *out (mapped
 * from the OS; the caller unmaps *out_bytes). */
static size_t prof_aggregate(prof_agg_t **out, size_t *out_bytes, bool by_size) {
  /* Sized by the live samples (at most one stack each, at most half
   * full), not by the table's cap: only what is used is mapped and
   * touched. Samples taken between the count and the visit may overflow
   * it: then again, larger (they cannot outrun it for long). */
  size_t live = prof_table_live();
  for (;;) {
    size_t cap = 64;
    while (cap < 2 * (live + 16)) cap <<= 1;
    *out_bytes = align_up(cap * sizeof(prof_agg_t), os_page_size);
    prof_agg_t *agg = os_map(*out_bytes);
    *out = agg;
    if (agg == NULL) return 0;
    struct prof_agg_ctx c = {agg, cap, 0, by_size, false};
    prof_live_seen = prof_table_visit(prof_agg_add, &c, &prof_dropped_seen);
    if (c.overflow) {
      os_unmap(agg, *out_bytes);
      live = prof_live_seen > live ? prof_live_seen : 2 * live;
      continue;
    }
    return prof_compact(agg, cap, c.n);
  }
}

/* path: gperftools' heap-profile text (the heap_v2 flavour, which pprof
 * unsamples with the Poisson model above), then /proc/self/maps so pprof
 * can map addresses to files. The [alloc] pair repeats the in-use pair:
 * only live samples are kept, so there is no total-allocated figure. */
static bool prof_write_heap(const char *path) {
  prof_agg_t *agg;
  size_t agg_bytes, n = prof_aggregate(&agg, &agg_bytes, true);
  if (agg == NULL) return false;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    os_warn_open_once(&prof_open_said, "HAKMEM_PROF", path);
    os_unmap(agg, agg_bytes);
    return false;
  }
  size_t tn = 0, tb = 0;
  for (size_t i = 0; i < n; i++) tn += agg[i].count, tb += agg[i].bytes;
  char line[PROF_FRAMES * 24 + 128];
  size_t len = (size_t)snprintf(line, sizeof line, "heap profile: %6zu: %8zu [%6zu: %8zu] @ heap_v2/%zu\n", tn, tb, tn,
                                tb, opt.prof_sample);
  prof_write_all(fd, line, len);
  for (size_t i = 0; i < n; i++) {
    len = (size_t)snprintf(line, sizeof line, "%6zu: %8zu [%6zu: %8zu] @", agg[i].count, agg[i].bytes,
                           agg[i].count, agg[i].bytes);
    for (uint32_t f = 0; f < agg[i].nframes; f++)
      len += (size_t)snprintf(line + len, sizeof line - len, " %#lx", (unsigned long)(uintptr_t)agg[i].frames[f]);
    line[len++] = '\n';
    prof_write_all(fd, line, len);
  }
  prof_write_all(fd, "\nMAPPED_LIBRARIES:\n", 19);
  int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (mfd >= 0) {
    char buf[4096];
    ssize_t r;
    while ((r = read(mfd, buf, sizeof buf)) > 0) prof_write_all(fd, buf, (size_t)r);
    close(mfd);
  }
  close(fd);
  os_unmap(agg, agg_bytes);
  return true;
}

/* false if PATH.heap could not be written (the other files follow it). */
static bool prof_write_reports(const char *prefix, int leaks_fd) {
  char path[PROF_PATH_CAP], line[8192], name[512];
  bool ok = true;
  if (prefix != NULL) {
    snprintf(path, sizeof path, "%s.heap", prefix);
    ok = prof_write_heap(path);
  }
  prof_agg_t *agg;
  size_t agg_bytes, n = prof_aggregate(&agg, &agg_bytes, false);
  if (agg == NULL) return false;
  int ffd = -1, tfd = -1;
  if (prefix != NULL) {
    snprintf(path, sizeof path, "%s.folded", prefix);
    ffd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    snprintf(path, sizeof path, "%s.txt", prefix);
    tfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    total += agg[i].bytes;
    if (ffd < 0) continue;
    size_t len = 0;
    for (uint32_t f = agg[i].nframes; f-- > 0;) { /* outermost first */
      prof_frame_name(agg[i].frames[f], name, sizeof name);
      len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", name, f ? ";" : "");
      if (len >= sizeof line - 64) break;
    }
    len += (size_t)snprintf(line + len, sizeof line - len, " %zu\n", agg[i].bytes);
    prof_write_all(ffd, line, len);
  }
  /* Top list: the 20 stacks holding the most estimated bytes. */
  int fds[2] = {tfd, leaks_fd};
  for (int o = 0; o < 2; o++) {
    int fd = fds[o];
    if (fd < 0) continue;
    size_t len = (size_t)snprintf(line, sizeof line,
                                  "hakmem heap profile: %zu live sampled blocks, ~%zu bytes estimated live, "
                                  "%zu stacks, 1 sample per %zu bytes%s\n",
                                  prof_live_seen, total, n, opt.prof_sample,
                                  prof_dropped_seen ? " (table full: samples dropped)" : "");
    prof_write_all(fd, line, len);
    /* Selection by repeated maximum with the key as the "taken" mark:
     * 20 passes over n, no sort buffer to allocate. */
    for (int t = 0; t < 20; t++) {
      size_t best = n, bb = 0;
      for (size_t i = 0; i < n; i++)
        if (agg[i].count != 0 && agg[i].bytes > bb && agg[i].key != 0) best = i, bb = agg[i].bytes;
      if (best == n) break;
      len = (size_t)snprintf(line, sizeof line, "%2d. %12zu bytes %5.1f%% %6zu samples\n", t + 1, bb,
                             total ? 100.0 * (double)bb / (double)total : 0.0, agg[best].count);
      prof_write_all(fd, line, len);
      for (uint32_t f = 0; f < agg[best].nframes && f < 8; f++) {
        prof_frame_name(agg[best].frames[f], name, sizeof name);
        len = (size_t)snprintf(line, sizeof line, "      %s\n", name);
        prof_write_all(fd, line, len);
      }
      agg[best].key = 0; /* taken */
    }
    /* restore keys for the next output */
    for (size_t i = 0; i < n; i++) agg[i].key = 1;
  }
  if (ffd >= 0) close(ffd);
  if (tfd >= 0) close(tfd);
  os_unmap(agg, agg_bytes);
  prof_elf_close();
  return ok;
}

/* HAKMEM_PROF_FILE, or hakmem-prof.PID written into pid_buf. */
static const char *prof_default_prefix(char pid_buf[static 32]) {
  if (opt.prof_file != NULL) return opt.prof_file;
  snprintf(pid_buf, 32, "hakmem-prof.%d", (int)getpid());
  return pid_buf;
}

static void prof_dump_if_requested(void) {
  prof_dump_requested = 0;
  char pid_buf[32];
  const char *prefix = prof_default_prefix(pid_buf);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  prof_write_reports(prefix, -1);
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
}

/* PATH.NNNN.heap, NNNN from 0000 on (wider past 9999). */
static void prof_dump_numbered(void) {
  char pid_buf[32], path[PROF_PATH_CAP];
  const char *prefix = prof_default_prefix(pid_buf);
  uint64_t seq = atomic_fetch_add_explicit(&prof_seq, 1, memory_order_relaxed);
  snprintf(path, sizeof path, "%s.%04llu.heap", prefix, (unsigned long long)seq);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  prof_write_heap(path);
  prof_elf_close();
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
}

uint64_t prof_dumps_numbered(void) { return atomic_load_explicit(&prof_seq, memory_order_relaxed); }

void prof_tick(uint64_t now_ms) {
  if (!opt.prof || !prof_table_ready()) return;
  if (prof_dump_requested) prof_dump_if_requested(); /* SIGUSR2 in a program that stopped allocating */
  uint64_t iv = opt.prof_interval_ms;
  if (iv == 0) return;
  if (prof_next_dump_ms == 0) prof_next_dump_ms = now_ms + iv;
  if (now_ms < prof_next_dump_ms) return;
  prof_next_dump_ms = now_ms + iv;
  prof_dump_numbered();
}

HAK_EXPORT int hak_prof_dump(const char *path) {
  if (!opt.prof || !prof_table_ready()) return -1;
  char pid_buf[32];
  const char *prefix = path != NULL ? path : prof_default_prefix(pid_buf);
  if (strlen(prefix) >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return -1;
  }
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  bool ok = prof_write_reports(prefix, -1);
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
  return ok ? 0 : -1;
}

HAK_TEXT_HOT __attribute__((destructor)) static void prof_exit_dump(void) {
  if (!opt.prof || !prof_table_ready()) return;
  char pid_buf[32];
  const char *prefix = prof_default_prefix(pid_buf);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  prof_write_reports(prefix, opt.prof_leaks ? stats_report_fd() : -1);
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
}

/* The sampler's call: SIGUSR2's pending dump, or the next byte interval. */
static void prof_due_cb(bool numbered) {
  if (numbered)
    prof_dump_numbered();
  else
    prof_dump_if_requested();
}

/* fork (init.c's handlers): the dump lock, then the table's, are held
 * across it, before the allocator's locks, so the child's table and dump
 * state are whole; parent and child release them (in the child the
 * forking thread owns them: re-initialising a locked mutex is undefined). */
HAK_TEXT_HOT void prof_fork_prepare(void) {
  pthread_mutex_lock(&prof_dump_lock);
  prof_table_fork_prepare();
}
HAK_TEXT_HOT void prof_fork_parent(void) {
  prof_table_fork_parent();
  pthread_mutex_unlock(&prof_dump_lock);
}
HAK_TEXT_HOT void prof_fork_child(void) {
  /* The report thread is the parent's: the child's time-based dumps start
   * over if it gets one. */
  prof_next_dump_ms = 0;
  prof_table_fork_child();
  pthread_mutex_unlock(&prof_dump_lock);
}
