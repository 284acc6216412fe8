/*
 * large.c — large and huge blocks as their own mappings (see large.h).
 *
 * The cache exists for allocate/free cycles of big buffers, where a
 * syscall per call would lose to glibc (whose mmap threshold adapts
 * upwards): a freed mapping is kept for the purge delay and handed to the
 * next request it fits within 1.5x. Entries are bounded in number and bytes.
 */
#include "large.h"
#include "foreign.h"
#include "options.h"
#include "os.h"
#include "ownmap.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define LARGE_MAGIC 0x4c41524745484b4dull /* "MKHEGRAL" */
#define LARGE_HDR 64
#define LARGE_CACHE_SLOTS 16

typedef struct large_hdr {
  uint64_t magic;
  uint8_t *base;    /* start of the mapping */
  size_t map_size;  /* bytes mapped */
  size_t off;       /* user pointer - base */
  uint64_t live;
  uint64_t pad[3];
} large_hdr_t;
_Static_assert(sizeof(large_hdr_t) == LARGE_HDR, "large header size");

typedef struct large_slot {
  uint8_t *base;
  size_t size;
  uint64_t freed_ms;
} large_slot_t;

static pthread_mutex_t large_lock = PTHREAD_MUTEX_INITIALIZER;
static large_slot_t large_cache[LARGE_CACHE_SLOTS];
static unsigned large_cache_n;
static size_t large_cache_bytes;

/* Written under large_lock, peeked without it (atomic, so the peek is
 * well-defined; a stale value only costs a lock round-trip or a miss). */
static void large_cache_set_n(unsigned n) { __atomic_store_n(&large_cache_n, n, __ATOMIC_RELAXED); }

static large_hdr_t *large_hdr_of(const void *p) {
  return (large_hdr_t *)((uintptr_t)p - LARGE_HDR);
}

static bool large_valid(const void *p, unsigned v) {
  uintptr_t a = (uintptr_t)p;
  if (v == OWN_LARGE && (a & HAK_SS_MASK) < LARGE_HDR) return false;
  if (v == OWN_LARGE_FAR && (a & HAK_SS_MASK) != 0) return false;
  const large_hdr_t *h = large_hdr_of(p);
  return h->magic == LARGE_MAGIC && h->live && h->base + h->off == (const uint8_t *)p;
}

static void large_register(void *user) {
  ownmap_set(user, ((uintptr_t)user & HAK_SS_MASK) == 0 ? OWN_LARGE_FAR : OWN_LARGE);
}

/* The cached mapping that best serves need: the smallest one at least that
 * big, else the biggest smaller one (the caller grows it). Its pages are
 * already faulted in, which for big blocks costs more than the syscalls. */
static uint8_t *large_cache_take(size_t need, size_t *size_out) {
  if (__atomic_load_n(&large_cache_n, __ATOMIC_RELAXED) == 0) return NULL;
  pthread_mutex_lock(&large_lock);
  int best = -1;
  for (unsigned i = 0; i < large_cache_n; i++) {
    size_t s = large_cache[i].size, b = best < 0 ? 0 : large_cache[best].size;
    bool better = best < 0 || (s >= need ? (b < need || s < b) : (b < need && s > b));
    if (better) best = (int)i;
  }
  uint8_t *base = NULL;
  if (best >= 0) {
    base = large_cache[best].base;
    *size_out = large_cache[best].size;
    large_cache_bytes -= large_cache[best].size;
    large_cache[best] = large_cache[large_cache_n - 1];
    large_cache_set_n(large_cache_n - 1);
  }
  pthread_mutex_unlock(&large_lock);
  return base;
}

/* Fit a cached mapping to need: shrink it when it is more than twice too
 * big (the tail's pages go back), grow it in place or by moving its pages
 * to a fresh aligned range. NULL (mapping released) if that fails. */
static uint8_t *large_resize_cached(uint8_t *base, size_t *size, size_t need) {
  if (*size > need) {
    /* Far too big: the tail's pages go back. */
    if (*size / 4 > need && os_remap_inplace(base, *size, need)) *size = need;
    return base;
  }
  if (os_remap_inplace(base, *size, need)) {
    *size = need;
    return base;
  }
  uint8_t *target = os_map_aligned(need, HAK_SS_SIZE);
  if (target != NULL && os_remap_to(base, *size, need, target)) {
    *size = need;
    return target;
  }
  if (target != NULL) os_unmap(target, need);
  os_unmap(base, *size);
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
  size_t need = hak_align_up(off + (size ? size : 1), page);
  size_t map_size = 0;
  uint8_t *base = NULL;
  bool fresh = false;
  if (align <= HAK_SS_SIZE / 2) base = large_cache_take(need, &map_size);
  if (base != NULL && map_size != need) base = large_resize_cached(base, &map_size, need);
  if (base == NULL) {
    base = os_map_aligned(need, align > HAK_SS_SIZE ? align : HAK_SS_SIZE);
    if (base == NULL) {
      /* Memory may be sitting in our own caches: give it back and retry. */
      large_purge(0, true);
      base = os_map_aligned(need, align > HAK_SS_SIZE ? align : HAK_SS_SIZE);
      if (base == NULL) {
        errno = ENOMEM;
        return NULL;
      }
    }
    map_size = need;
    fresh = true;
  }
  uint8_t *user = base + off;
  large_hdr_t *h = large_hdr_of(user);
  h->magic = LARGE_MAGIC;
  h->base = base;
  h->map_size = map_size;
  h->off = off;
  h->live = 1;
  large_register(user);
  if (zeroed) *zeroed = fresh;
  return user;
}

void large_purge(uint64_t now_ms, bool force) {
  large_slot_t drop[LARGE_CACHE_SLOTS];
  unsigned nd = 0;
  if (__atomic_load_n(&large_cache_n, __ATOMIC_RELAXED) == 0) return;
  pthread_mutex_lock(&large_lock);
  for (unsigned i = 0; i < large_cache_n;) {
    if (force || now_ms - large_cache[i].freed_ms >= hak_opt.purge_delay_ms) {
      drop[nd++] = large_cache[i];
      large_cache_bytes -= large_cache[i].size;
      large_cache[i] = large_cache[large_cache_n - 1];
      large_cache_set_n(large_cache_n - 1);
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&large_lock);
  for (unsigned i = 0; i < nd; i++) os_unmap(drop[i].base, drop[i].size);
}

void large_free(void *p, unsigned v, const char *call) {
  if (!large_valid(p, v)) {
    hak_report_invalid(call, p);
    return;
  }
  large_hdr_t *h = large_hdr_of(p);
  uint8_t *base = h->base;
  size_t size = h->map_size;
  h->live = 0;
  h->magic = 0;
  ownmap_set(p, OWN_NONE);
  uint64_t now = os_now_ms();
  large_slot_t drop[LARGE_CACHE_SLOTS + 1];
  unsigned nd = 0;
  size_t budget = hak_opt.large_cache_bytes;
  if (size <= budget / 4) {
    pthread_mutex_lock(&large_lock);
    /* Expire idle entries, then evict the oldest until the new one fits. */
    for (unsigned i = 0; i < large_cache_n;) {
      bool old = now - large_cache[i].freed_ms >= hak_opt.purge_delay_ms;
      if (old) {
        drop[nd++] = large_cache[i];
        large_cache_bytes -= large_cache[i].size;
        large_cache[i] = large_cache[large_cache_n - 1];
      large_cache_set_n(large_cache_n - 1);
      } else {
        i++;
      }
    }
    while (large_cache_n > 0 && (large_cache_n == LARGE_CACHE_SLOTS || large_cache_bytes + size > budget)) {
      unsigned oldest = 0;
      for (unsigned i = 1; i < large_cache_n; i++)
        if (large_cache[i].freed_ms < large_cache[oldest].freed_ms) oldest = i;
      drop[nd++] = large_cache[oldest];
      large_cache_bytes -= large_cache[oldest].size;
      large_cache[oldest] = large_cache[large_cache_n - 1];
      large_cache_set_n(large_cache_n - 1);
    }
    large_cache[large_cache_n] = (large_slot_t){base, size, now};
    large_cache_set_n(large_cache_n + 1);
    large_cache_bytes += size;
    pthread_mutex_unlock(&large_lock);
  } else {
    drop[nd++] = (large_slot_t){base, size, now};
  }
  for (unsigned i = 0; i < nd; i++) os_unmap(drop[i].base, drop[i].size);
}

void *large_realloc(void *p, unsigned v, size_t size) {
  if (!large_valid(p, v)) {
    hak_report_invalid("realloc", p);
    return NULL;
  }
  large_hdr_t *h = large_hdr_of(p);
  size_t off = h->off;
  if (size > (size_t)PTRDIFF_MAX - off - os_page_size) return NULL;
  size_t need = hak_align_up(off + size, os_page_size);
  if (need <= h->map_size) {
    if (need >= h->map_size / 2) return p;
    if (size <= HAK_SMALL_MAX) return NULL; /* a size class serves it better */
    if (os_remap_inplace(h->base, h->map_size, need)) h->map_size = need;
    return p;
  }
  if (size <= HAK_SMALL_MAX) return NULL;
  if (os_remap_inplace(h->base, h->map_size, need)) {
    h->map_size = need;
    return p;
  }
  /* Move the pages to a fresh aligned range: no copy, alignment kept. */
  uint8_t *target = os_map_aligned(need, HAK_SS_SIZE);
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
  large_register(user);
  return user;
}

size_t large_usable_size(const void *p, unsigned v) {
  if (!large_valid(p, v)) return 0;
  const large_hdr_t *h = large_hdr_of(p);
  return h->map_size - h->off;
}

void large_lock_all(void) { pthread_mutex_lock(&large_lock); }
void large_unlock_all(void) { pthread_mutex_unlock(&large_lock); }
void large_reset_locks(void) { pthread_mutex_init(&large_lock, NULL); }
