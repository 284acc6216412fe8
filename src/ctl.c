/*
 * ctl.c — hak_ctl and the report thread (see ctl.h).
 *
 * hak_ctl follows mallctl's conventions (old value out through
 * oldp/oldlenp, new value in through newp/newlen, an error number as the
 * result) so that code and habits carry over; the names are hakmem's own.
 */
#include "ctl.h"
#include "alloc.h"
#include "hakmem.h"
#include "init.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Copy a value out for a read; the size must be the type's exactly, as in
 * mallctl, so a caller with the wrong type learns it instead of getting
 * half a value. oldp NULL with oldlenp set asks for the size only. */
static int ctl_out(void *oldp, size_t *oldlenp, const void *v, size_t len) {
  if (oldp == NULL) {
    if (oldlenp != NULL) *oldlenp = len;
    return 0;
  }
  if (oldlenp == NULL || *oldlenp != len) return EINVAL;
  memcpy(oldp, v, len);
  return 0;
}

static int ctl_in(const void *newp, size_t newlen, void *v, size_t len) {
  if (newlen != len) return EINVAL;
  memcpy(v, newp, len);
  return 0;
}

#define CTL_READ_ONLY()               \
  do {                                \
    if (newp != NULL) return EPERM;   \
  } while (0)

static const size_t ctl_stats_off[] = {
#define CTL_OFF_(name, text) offsetof(struct hak_stats, name),
    HAK_STATS_FIELDS_V1(CTL_OFF_) HAK_STATS_FIELDS_V2(CTL_OFF_) HAK_STATS_FIELDS_V3(CTL_OFF_)
        HAK_STATS_FIELDS_V5(CTL_OFF_)
        HAK_STATS_FIELDS_V6(CTL_OFF_) HAK_STATS_FIELDS_V7(CTL_OFF_) HAK_STATS_FIELDS_V8(CTL_OFF_) HAK_STATS_FIELDS_V9(CTL_OFF_)
#undef CTL_OFF_
};
/* The names, one after the other, each ended by its NUL: no pointer, so
 * nothing here for the loader to relocate (and no written page). */
#define CTL_NAME_(name, text) #name "\0"
static const char ctl_stats_names[] =
    HAK_STATS_FIELDS_V1(CTL_NAME_) HAK_STATS_FIELDS_V2(CTL_NAME_) HAK_STATS_FIELDS_V3(CTL_NAME_)
        HAK_STATS_FIELDS_V5(CTL_NAME_) HAK_STATS_FIELDS_V6(CTL_NAME_)
            HAK_STATS_FIELDS_V7(CTL_NAME_) HAK_STATS_FIELDS_V8(CTL_NAME_) HAK_STATS_FIELDS_V9(CTL_NAME_);
static const char ctl_class_names[] = HAK_CLASS_STATS_FIELDS(CTL_NAME_);
#undef CTL_NAME_
static const size_t ctl_class_off[] = {
#define CTL_OFF_(name, text) offsetof(struct hak_class_stats, name),
    HAK_CLASS_STATS_FIELDS(CTL_OFF_)
#undef CTL_OFF_
};
#define CTL_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* The index of name among the n names of list, n if it is not there. */
static size_t ctl_find(const char *list, size_t n, const char *name) {
  size_t f = 0;
  for (const char *p = list; f < n && strcmp(p, name) != 0; p += strlen(p) + 1) f++;
  return f;
}

/* "stats.*": one snapshot per call. The struct is 3 KiB, too much for the
 * stack of a small thread on every read, and reads are rare: a static
 * buffer under a lock. */
static pthread_mutex_t ctl_stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int ctl_stats(const char *name, void *oldp, size_t *oldlenp) {
  static struct hak_stats st HAK_BSS_BIG;
  const void *src = NULL;
  size_t len = sizeof(size_t), off = 0;
  unsigned u;
  if (strcmp(name, "version") == 0 || strcmp(name, "nclasses") == 0) {
    len = sizeof(unsigned);
  } else if (strncmp(name, "classes.", 8) == 0) {
    char *end;
    unsigned long i = strtoul(name + 8, &end, 10);
    if (end == name + 8 || *end != '.' || i >= HAK_NCLASS) return ENOENT;
    size_t f = ctl_find(ctl_class_names, CTL_NELEM(ctl_class_off), end + 1);
    if (f == CTL_NELEM(ctl_class_off)) return ENOENT;
    off = offsetof(struct hak_stats, classes) + i * sizeof(struct hak_class_stats) + ctl_class_off[f];
  } else {
    size_t f = ctl_find(ctl_stats_names, CTL_NELEM(ctl_stats_off), name);
    if (f == CTL_NELEM(ctl_stats_off)) return ENOENT;
    off = ctl_stats_off[f];
  }
  if (oldp == NULL) return ctl_out(NULL, oldlenp, NULL, len);
  pthread_mutex_lock(&ctl_stats_lock);
  st.size = sizeof st;
  stats_get(&st); /* started up: hak_ctl did */
  if (len == sizeof(unsigned)) {
    u = name[0] == 'v' ? st.version : st.nclasses;
    src = &u;
  } else {
    src = (const char *)&st + off;
  }
  int r = ctl_out(oldp, oldlenp, src, len);
  pthread_mutex_unlock(&ctl_stats_lock);
  return r;
}

HAK_EXPORT int hak_ctl(const char *name, void *oldp, size_t *oldlenp, const void *newp, size_t newlen) {
  if (name == NULL) return ENOENT;
  init_ensure(); /* options must be in force before anything is read */
  if (strcmp(name, "version") == 0) {
    CTL_READ_ONLY();
    const char *v = HAK_VERSION_STRING;
    return ctl_out(oldp, oldlenp, &v, sizeof v);
  }
  if (strncmp(name, "stats.", 6) == 0) {
    CTL_READ_ONLY();
    return ctl_stats(name + 6, oldp, oldlenp);
  }
  if (strcmp(name, "purge") == 0 || strcmp(name, "thread.flush") == 0) {
    if (oldp != NULL || newp != NULL) return EPERM; /* an action carries no value */
    /* thread.flush: alloc_collect(false) gives back what is idle without forcing
     * the other threads' caches; a per-thread flush can replace it here. */
    alloc_collect(name[0] == 'p');
    return 0;
  }
  if (strcmp(name, "opt.purge_delay_ms") == 0) {
    uint64_t cur = opt.purge_delay_ms, v;
    int r = oldp != NULL || oldlenp != NULL ? ctl_out(oldp, oldlenp, &cur, sizeof cur) : 0;
    if (r != 0 || newp == NULL) return r;
    if ((r = ctl_in(newp, newlen, &v, sizeof v)) != 0) return r;
    if (v > 3600000) return EINVAL; /* the range HAKMEM_PURGE_DELAY_MS accepts */
    /* Readers (purge passes, the background thread) are cold paths that
     * load it afresh each time; the next pass uses the new window. */
    __atomic_store_n(&opt.purge_delay_ms, v, __ATOMIC_RELAXED);
    return 0;
  }
  if (strcmp(name, "thread.purge_delay_ms") == 0) {
    CTL_READ_ONLY();
    uint64_t v = alloc_thread_purge_delay_ms();
    return ctl_out(oldp, oldlenp, &v, sizeof v);
  }
  if (strncmp(name, "opt.", 4) == 0) {
    CTL_READ_ONLY();
    return options_get(name + 4, oldp, oldlenp);
  }
  if (strcmp(name, "prof.active") == 0) {
    bool cur = prof_is_active(), v;
    int r = oldp != NULL || oldlenp != NULL ? ctl_out(oldp, oldlenp, &cur, sizeof cur) : 0;
    if (r != 0 || newp == NULL) return r;
    if ((r = ctl_in(newp, newlen, &v, sizeof v)) != 0) return r;
    return prof_set_active(v);
  }
  if (strcmp(name, "prof.sample") == 0) {
    size_t cur = opt.prof_sample, v;
    int r = oldp != NULL || oldlenp != NULL ? ctl_out(oldp, oldlenp, &cur, sizeof cur) : 0;
    if (r != 0 || newp == NULL) return r;
    if ((r = ctl_in(newp, newlen, &v, sizeof v)) != 0) return r;
    return prof_set_sample(v);
  }
  if (strcmp(name, "prof.dump") == 0) {
    if (oldp != NULL) return EPERM; /* write-only */
    const char *path = NULL;
    if (newp != NULL && ctl_in(newp, newlen, &path, sizeof path) != 0) return EINVAL;
    if (!opt.prof) return EPERM;
    return hak_prof_dump(path) == 0 ? 0 : EFAULT; /* mallctl's answer to a dump that failed */
  }
  if (strcmp(name, "prof.dumps") == 0) {
    CTL_READ_ONLY();
    uint64_t n = prof_dumps_numbered();
    return ctl_out(oldp, oldlenp, &n, sizeof n);
  }
  return ENOENT;
}

/* ---- the report thread ------------------------------------------------------ */

#define CTL_TICK_MS 50

static volatile sig_atomic_t ctl_report_requested;

/* Async-signal context: nothing but a flag; the thread does the work. */
static void ctl_on_signal(int sig) {
  (void)sig;
  ctl_report_requested = 1;
}

/* One report, appended. The file is opened per report, so a log rotated
 * underneath (moved away) is recreated instead of written into the old
 * inode; without STATS_FILE the report goes where the exit report does. */
static void ctl_write_report(void) {
  static char buf[32768] HAK_BSS_BIG;
  stats_format_ex(buf, sizeof buf, true);
  if (opt.stats_file != NULL) {
    static _Atomic bool said;
    int fd = open(opt.stats_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      os_warn_open_once(&said, "HAKMEM_STATS_FILE", opt.stats_file);
      return;
    }
    os_write_fd(fd, buf);
    close(fd);
  } else {
    os_write_fd(stats_report_fd(), buf);
  }
}

static void *ctl_thread(void *arg) {
  (void)arg;
  uint64_t next_report = 0;
  /* A report interval shorter than the tick is honoured: sampling a short
   * program's statistics near its peak (bench/run.sh) needs it. */
  long tick_ms = opt.stats_interval_ms != 0 && opt.stats_interval_ms < CTL_TICK_MS ? (long)opt.stats_interval_ms
                                                                                  : CTL_TICK_MS;
  for (;;) {
    struct timespec ts = {0, tick_ms * 1000000L};
    nanosleep(&ts, NULL);
    uint64_t now = os_now_ms();
    if (ctl_report_requested) {
      ctl_report_requested = 0;
      ctl_write_report();
    }
    if (opt.stats_interval_ms != 0) {
      if (next_report == 0) next_report = now + opt.stats_interval_ms;
      if (now >= next_report) {
        ctl_write_report();
        /* From now, not from the missed deadline: a stalled process
         * writes one report, not a burst of them. */
        next_report = now + opt.stats_interval_ms;
      }
    }
    prof_tick(now);
  }
  return NULL;
}

static HAK_TEXT_HOT void ctl_start(void) {
  if (opt.force_libc) return;
  static const int sigs[] = {0, SIGUSR1, SIGHUP, SIGWINCH}; /* HAK_SIG_* order */
  bool want = opt.stats_interval_ms != 0 || opt.stats_signal != HAK_SIG_OFF ||
              (opt.prof && opt.prof_interval_ms != 0);
  if (!want) return;
  if (opt.stats_signal != HAK_SIG_OFF) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ctl_on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(sigs[opt.stats_signal], &sa, NULL);
  }
  /* Created with every signal blocked (the mask is inherited): signals
   * aimed at the process are then delivered to the program's own threads,
   * as they were before hakmem added one. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&at, 256 * 1024); /* a dump uses ~20 KiB of stack */
  pthread_t t;
  if (pthread_create(&t, &at, ctl_thread, NULL) != 0)
    os_write_err("hakmem: cannot start the report thread; periodic reports are off\n");
  pthread_attr_destroy(&at);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* fork (init.c's handlers, through the hooks): the snapshot lock is held
 * across it, before the profiler's and the allocator's (stats_get takes
 * those under it). The child has no report thread: periodic reports and
 * time-based dumps stop there. */
static HAK_TEXT_HOT void ctl_fork_prepare(void) { pthread_mutex_lock(&ctl_stats_lock); }
static HAK_TEXT_HOT void ctl_fork_parent(void) { pthread_mutex_unlock(&ctl_stats_lock); }
static HAK_TEXT_HOT void ctl_fork_child(void) { pthread_mutex_unlock(&ctl_stats_lock); }

static const init_upper_t ctl_upper = {ctl_start, ctl_fork_prepare, ctl_fork_parent, ctl_fork_child};
HAK_TEXT_HOT void ctl_register(void) { init_register_upper(&ctl_upper); }
