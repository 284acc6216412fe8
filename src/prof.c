/*
 * prof.c — sampled heap profiling (see prof.h).
 *
 * Estimator: a block of size s is sampled with probability about
 * min(1, s / mean), so each sample stands for max(s, mean) bytes; summed by
 * stack that estimates the live bytes allocated there. The gaps between
 * samples are uniform in [0, 2*mean), so periodic allocation patterns are
 * not aliased. (tcmalloc and jemalloc sample the same way, with exponential
 * gaps.) Records live in a table mapped from the OS, with a bit filter so
 * that a free of an unsampled block costs one load.
 */
#include "prof.h"
#include "hakmem.h"
#include "options.h"
#include "os.h"
#include "stats.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#define PROF_FRAMES 24
#define PROF_CAP ((size_t)1 << 16)  /* live samples tracked */
#define PROF_FILTER_BITS ((size_t)1 << 20)
#define PROF_TOMB ((uintptr_t)1)

typedef struct prof_rec {
  uintptr_t ptr; /* 0 empty, PROF_TOMB deleted */
  size_t size, weight;
  uint32_t nframes;
  void *frames[PROF_FRAMES];
} prof_rec_t;

static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_rec_t *prof_tab;
static _Atomic uint64_t *prof_filter;
static size_t prof_live, prof_dropped;
static volatile sig_atomic_t prof_dump_requested;
static HAK_TLS int64_t prof_left;
static HAK_TLS uint64_t prof_rng;
static HAK_TLS int prof_busy;

static size_t prof_hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 20); }

static void prof_on_signal(int sig) {
  (void)sig;
  prof_dump_requested = 1;
}

static void prof_exit_dump(void);

void prof_init(void) {
  if (!opt.prof) return;
  prof_tab = os_map(PROF_CAP * sizeof(prof_rec_t));
  prof_filter = os_map(PROF_FILTER_BITS / 8);
  if (prof_tab == NULL || prof_filter == NULL) {
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

static uint64_t prof_next_gap(void) {
  if (prof_rng == 0) prof_rng = (uint64_t)(uintptr_t)&prof_rng ^ (os_now_ms() * 0x9E3779B97F4A7C15ull) ^ 1;
  prof_rng ^= prof_rng << 13, prof_rng ^= prof_rng >> 7, prof_rng ^= prof_rng << 17;
  uint64_t mean = opt.prof_sample;
  return mean <= 1 ? 1 : prof_rng % (2 * mean);
}

struct prof_unwind {
  void **frames;
  uint32_t n;
};

static _Unwind_Reason_Code prof_unwind_cb(struct _Unwind_Context *ctx, void *arg) {
  struct prof_unwind *u = arg;
  if (u->n >= PROF_FRAMES) return _URC_END_OF_STACK;
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  u->frames[u->n++] = (void *)ip;
  return _URC_NO_REASON;
}

static void prof_dump_if_requested(void);

void prof_alloc(void *p, size_t size) {
  if (p == NULL || prof_busy) return;
  if (prof_dump_requested) prof_dump_if_requested();
  prof_left -= (int64_t)size;
  if (prof_left > 0) return;
  prof_left = (int64_t)prof_next_gap();
  prof_busy = 1; /* the unwinder may allocate: those calls are not sampled */
  prof_rec_t rec;
  struct prof_unwind u = {rec.frames, 0};
  _Unwind_Backtrace(prof_unwind_cb, &u);
  rec.ptr = (uintptr_t)p;
  rec.size = size;
  rec.weight = size > opt.prof_sample ? size : opt.prof_sample;
  rec.nframes = u.n;
  size_t h = prof_hash(rec.ptr);
  pthread_mutex_lock(&prof_lock);
  if (prof_live * 4 >= PROF_CAP * 3) {
    prof_dropped++;
  } else {
    size_t i = h & (PROF_CAP - 1);
    while (prof_tab[i].ptr > PROF_TOMB) i = (i + 1) & (PROF_CAP - 1);
    prof_tab[i] = rec;
    prof_live++;
    atomic_fetch_or_explicit(&prof_filter[(h % PROF_FILTER_BITS) / 64], (uint64_t)1 << (h % 64),
                             memory_order_relaxed);
  }
  pthread_mutex_unlock(&prof_lock);
  prof_busy = 0;
}

void prof_free(void *p) {
  if (p == NULL || prof_tab == NULL) return;
  size_t h = prof_hash((uintptr_t)p);
  uint64_t bit = (uint64_t)1 << (h % 64);
  if (!(atomic_load_explicit(&prof_filter[(h % PROF_FILTER_BITS) / 64], memory_order_relaxed) & bit)) return;
  pthread_mutex_lock(&prof_lock);
  for (size_t i = h & (PROF_CAP - 1); prof_tab[i].ptr != 0; i = (i + 1) & (PROF_CAP - 1)) {
    if (prof_tab[i].ptr == (uintptr_t)p) {
      prof_tab[i].ptr = PROF_TOMB;
      prof_live--;
      break;
    }
  }
  pthread_mutex_unlock(&prof_lock);
}

/* ---- dumps ----------------------------------------------------------------- */

typedef struct prof_agg {
  uint64_t key;
  size_t bytes, count;
  uint32_t nframes;
  void *frames[PROF_FRAMES];
} prof_agg_t;

/* Frames inside the allocator (its own functions or library) say nothing
 * about the program: drop them from the top of each stack. */
static bool prof_frame_is_ours(void *ip) {
  Dl_info me, fi;
  if (dladdr((void *)prof_alloc, &me) && dladdr(ip, &fi)) {
    if (fi.dli_fbase == me.dli_fbase && strstr(me.dli_fname, "hakmem") != NULL) return true;
    const char *s = fi.dli_sname;
    if (s && (!strncmp(s, "hak_", 4) || !strncmp(s, "heap_", 5) || !strncmp(s, "prof_", 5) ||
              !strncmp(s, "large_", 6) || !strcmp(s, "malloc") || !strcmp(s, "calloc") ||
              !strcmp(s, "realloc") || !strcmp(s, "aligned_alloc") || !strcmp(s, "posix_memalign") ||
              !strcmp(s, "memalign") || !strncmp(s, "_Zn", 3)))
      return true;
  }
  return false;
}

static void prof_frame_name(void *ip, char *out, size_t cap) {
  Dl_info fi;
  if (dladdr(ip, &fi) && fi.dli_sname != NULL) {
    snprintf(out, cap, "%s", fi.dli_sname);
  } else if (dladdr(ip, &fi) && fi.dli_fname != NULL) {
    const char *base = strrchr(fi.dli_fname, '/');
    snprintf(out, cap, "%s+0x%lx", base ? base + 1 : fi.dli_fname,
             (unsigned long)((uintptr_t)ip - (uintptr_t)fi.dli_fbase));
  } else {
    snprintf(out, cap, "0x%lx", (unsigned long)(uintptr_t)ip);
  }
  for (char *c = out; *c; c++)
    if (*c == ';' || *c == ' ') *c = '_'; /* folded-stack separators */
}

static void prof_write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

/* Aggregate live samples by stack. Returns the number of stacks in *out
 * (mapped from the OS; caller unmaps *out_bytes). */
static size_t prof_aggregate(prof_agg_t **out, size_t *out_bytes) {
  size_t cap = PROF_CAP * 2, nagg = 0;
  *out_bytes = cap * sizeof(prof_agg_t);
  prof_agg_t *agg = os_map(*out_bytes);
  *out = agg;
  if (agg == NULL) return 0;
  pthread_mutex_lock(&prof_lock);
  for (size_t i = 0; i < PROF_CAP; i++) {
    prof_rec_t *r = &prof_tab[i];
    if (r->ptr <= PROF_TOMB) continue;
    uint32_t skip = 0;
    while (skip < r->nframes && prof_frame_is_ours(r->frames[skip])) skip++;
    uint64_t key = 1469598103934665603ull;
    for (uint32_t f = skip; f < r->nframes; f++) key = (key ^ (uintptr_t)r->frames[f]) * 1099511628211ull;
    key |= 1;
    size_t j = (size_t)(key >> 7) & (cap - 1);
    while (agg[j].key != 0 && agg[j].key != key) j = (j + 1) & (cap - 1);
    if (agg[j].key == 0) {
      agg[j].key = key;
      agg[j].nframes = r->nframes - skip;
      memcpy(agg[j].frames, r->frames + skip, agg[j].nframes * sizeof(void *));
      nagg++;
    }
    agg[j].bytes += r->weight;
    agg[j].count++;
  }
  pthread_mutex_unlock(&prof_lock);
  /* Compact to the front. */
  size_t k = 0;
  for (size_t j = 0; j < cap; j++)
    if (agg[j].key != 0) agg[k++] = agg[j];
  return nagg;
}

static void prof_write_reports(const char *prefix, int leaks_fd) {
  prof_agg_t *agg;
  size_t agg_bytes, n = prof_aggregate(&agg, &agg_bytes);
  if (agg == NULL) return;
  char path[4096], line[8192], name[512];
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
                                  prof_live, total, n, opt.prof_sample,
                                  prof_dropped ? " (table full: samples dropped)" : "");
    prof_write_all(fd, line, len);
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
}

static void prof_default_prefix(char *buf, size_t cap) {
  if (opt.prof_file != NULL)
    snprintf(buf, cap, "%s", opt.prof_file);
  else
    snprintf(buf, cap, "hakmem-prof.%d", (int)getpid());
}

static void prof_dump_if_requested(void) {
  prof_dump_requested = 0;
  char prefix[1024];
  prof_default_prefix(prefix, sizeof prefix);
  prof_busy++;
  prof_write_reports(prefix, -1);
  prof_busy--;
}

HAK_EXPORT int hak_prof_dump(const char *path) {
  if (!opt.prof || prof_tab == NULL) return -1;
  char prefix[1024];
  if (path == NULL)
    prof_default_prefix(prefix, sizeof prefix);
  else
    snprintf(prefix, sizeof prefix, "%s", path);
  prof_busy++;
  prof_write_reports(prefix, -1);
  prof_busy--;
  return 0;
}

__attribute__((destructor)) static void prof_exit_dump(void) {
  if (!opt.prof || prof_tab == NULL) return;
  char prefix[1024];
  prof_default_prefix(prefix, sizeof prefix);
  prof_busy++;
  prof_write_reports(prefix, opt.prof_leaks ? stats_report_fd() : -1);
  prof_busy--;
}
