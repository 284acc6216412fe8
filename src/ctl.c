/*
 * ctl.c — hak_ctl and the report thread (see ctl.h).
 *
 * hak_ctl follows mallctl's conventions (old value out through
 * oldp/oldlenp, new value in through newp/newlen, an error number as the
 * result) so that code and habits carry over; the names are hakmem's own.
 */
#include "ctl.h"
#include "hakmem.h"
#include "init.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
    HAK_STATS_FIELDS_V1(CTL_OFF_) HAK_STATS_FIELDS_V2(CTL_OFF_)
#undef CTL_OFF_
};
static const char *const ctl_stats_name[] = {
#define CTL_NAME_(name, text) #name,
    HAK_STATS_FIELDS_V1(CTL_NAME_) HAK_STATS_FIELDS_V2(CTL_NAME_)
#undef CTL_NAME_
};
static const size_t ctl_class_off[] = {
#define CTL_OFF_(name, text) offsetof(struct hak_class_stats, name),
    HAK_CLASS_STATS_FIELDS(CTL_OFF_)
#undef CTL_OFF_
};
static const char *const ctl_class_name[] = {
#define CTL_NAME_(name, text) #name,
    HAK_CLASS_STATS_FIELDS(CTL_NAME_)
#undef CTL_NAME_
};
#define CTL_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* "stats.*": one snapshot per call. The struct is 3 KiB, too much for the
 * stack of a small thread on every read, and reads are rare: a static
 * buffer under a lock. */
static int ctl_stats(const char *name, void *oldp, size_t *oldlenp) {
  static struct hak_stats st;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  const void *src = NULL;
  size_t len = sizeof(size_t), off = 0;
  unsigned u;
  if (strcmp(name, "version") == 0 || strcmp(name, "nclasses") == 0) {
    len = sizeof(unsigned);
  } else if (strncmp(name, "classes.", 8) == 0) {
    char *end;
    unsigned long i = strtoul(name + 8, &end, 10);
    if (end == name + 8 || *end != '.' || i >= HAK_STATS_CLASSES) return ENOENT;
    size_t f = 0;
    while (f < CTL_NELEM(ctl_class_name) && strcmp(end + 1, ctl_class_name[f]) != 0) f++;
    if (f == CTL_NELEM(ctl_class_name)) return ENOENT;
    off = offsetof(struct hak_stats, classes) + i * sizeof(struct hak_class_stats) + ctl_class_off[f];
  } else {
    size_t f = 0;
    while (f < CTL_NELEM(ctl_stats_name) && strcmp(name, ctl_stats_name[f]) != 0) f++;
    if (f == CTL_NELEM(ctl_stats_name)) return ENOENT;
    off = ctl_stats_off[f];
  }
  if (oldp == NULL) return ctl_out(NULL, oldlenp, NULL, len);
  pthread_mutex_lock(&lock);
  st.size = sizeof st;
  hak_stats_get(&st);
  if (len == sizeof(unsigned)) {
    u = name[0] == 'v' ? st.version : st.nclasses;
    src = &u;
  } else {
    src = (const char *)&st + off;
  }
  int r = ctl_out(oldp, oldlenp, src, len);
  pthread_mutex_unlock(&lock);
  return r;
}

HAK_EXPORT int hak_ctl(const char *name, void *oldp, size_t *oldlenp, const void *newp, size_t newlen) {
  if (name == NULL) return ENOENT;
  init_ensure(); /* options must be in force before anything is read */
  if (strcmp(name, "version") == 0) {
    CTL_READ_ONLY();
    const char *v = hak_version();
    return ctl_out(oldp, oldlenp, &v, sizeof v);
  }
  if (strncmp(name, "stats.", 6) == 0) {
    CTL_READ_ONLY();
    return ctl_stats(name + 6, oldp, oldlenp);
  }
  if (strcmp(name, "purge") == 0 || strcmp(name, "thread.flush") == 0) {
    if (oldp != NULL || newp != NULL) return EPERM; /* an action carries no value */
    /* thread.flush: hak_collect(0) gives back what is idle without forcing
     * the other threads' caches; a per-thread flush can replace it here. */
    hak_collect(name[0] == 'p');
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
    return hak_prof_dump(path) == 0 ? 0 : EPERM;
  }
  if (strcmp(name, "prof.dumps") == 0) {
    CTL_READ_ONLY();
    uint64_t n = prof_dumps_numbered();
    return ctl_out(oldp, oldlenp, &n, sizeof n);
  }
  return ENOENT;
}
