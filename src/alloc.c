/*
 * alloc.c — slow paths and the less frequent entry points (see alloc.h).
 */
#include "alloc.h"
#include "decay.h"
#include "foreign.h"
#include "report.h"
#include "front.h"
#include "heap.h"
#include "init.h"
#include "large.h"
#include "options.h"
#include "os.h"
#include "ownmap.h"
#include "prof.h"
#include "remote.h"
#include "sizeclass.h"

#include <errno.h>
#include <string.h>

static void *alloc_any(size_t size);

static void *prof_noted(void *p, size_t size) {
  prof_alloc(p, size);
  return p;
}

static void *alloc_cold(size_t size) HAK_NOINLINE;

/* Sizes above 1 KiB, or an empty current slab. heap_front.heap is set only
 * on an initialised thread with neither the libc bypass nor the profiler
 * on, so the mid-size path below needs no other check; everything else
 * (first call, bypass, profiling, large) goes to alloc_cold, whose first
 * statements are initialisation and the bypass. */
void *alloc_slow(size_t size) {
  heap_t *h = heap_front.heap;
  if (HAK_LIKELY(h != NULL && size <= HAK_SMALL_MAX)) {
    HAK_STAT(ST_SLOW);
    HAK_STAT(ST_ALLOC);
    unsigned cls = sc_of(size);
    slab_t *s = h->cur[cls];
    block_t *b = s->free;
    if (HAK_LIKELY(b != NULL)) return slab_pop(s, b);
    return heap_alloc_refill(h, cls);
  }
  return alloc_cold(size);
}

static void *alloc_cold(size_t size) {
  init_ensure();
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_malloc(size);
  HAK_STAT(ST_SLOW);
  HAK_STAT(ST_ALLOC);
  if (HAK_UNLIKELY(opt.prof)) return prof_noted(alloc_any(size), size);
  return alloc_any(size);
}

/* A block of class cls from the calling thread's heap (created on the
 * thread's first call). */
static void *alloc_class(unsigned cls) {
  heap_t *h = heap_front.self;
  if (HAK_UNLIKELY(h == NULL)) {
    if (heap_front.exited) return heap_exit_alloc(cls);
    h = heap_thread_init();
    if (h == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  slab_t *s = h->cur[cls];
  block_t *b = s->free;
  if (HAK_LIKELY(b != NULL)) return slab_pop(s, b);
  return heap_alloc_refill(h, cls);
}

/* The slow path proper (the profiler wraps it). */
static void *alloc_any(size_t size) {
  if (HAK_LIKELY(size <= HAK_SMALL_MAX)) return alloc_class(sc_of(size));
  return large_alloc(size, HAK_MIN_ALIGN, NULL);
}

#if HAK_DEBUG || HAK_SECURE
bool alloc_check_free(slab_t *s, void *p, bool local) {
  uint8_t *u = p;
  if (u < s->area || u >= s->area + (size_t)s->capacity * s->bsize ||
      (size_t)(u - s->area) % s->bsize != 0) {
    report_error("free", p, "invalid pointer");
    return false;
  }
#if HAK_SECURE
  (void)local; /* the bitmap is exact for everyone */
  if (!ss_secure_mark_free(s, p)) {
    report_error("free", p, "double free of");
    return false;
  }
#else
  unsigned n = 0;
  for (block_t *b = local ? s->free : NULL; b != NULL && n < 4096; b = blk_next(b), n++)
    if (b == p) {
      report_error("free", p, "double free of");
      return false;
    }
#endif
  return true;
}
#endif

void alloc_slab_emptied(slab_t *s) {
  heap_slab_emptied(heap_front.self, s);
  decay_poll();
}

/* A slab block is valid if it lies in the block area of a slab in use.
 * Only fields fixed while the slab is in use are read (carved changes under
 * the owner); block-boundary checks need a division: the debug build does
 * them. */
static bool slab_block_plausible(const slab_t *s, uintptr_t owner, const void *p) {
  const uint8_t *u = p;
  if (owner == OWNER_UNUSED) return false;
  return u >= s->area && u < s->area + (size_t)s->capacity * s->bsize;
}

static void free_small_slow(void *p, unsigned shift, const char *call) {
  slab_t *s = ss_slab_of(p, shift);
  uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  if (HAK_UNLIKELY(!slab_block_plausible(s, owner, p))) {
    report_error(call, p, owner == OWNER_UNUSED ? "double free or invalid pointer" : "invalid pointer");
    return;
  }
  heap_t *h = heap_front.self;
  HAK_STAT(ST_FREE);
  HAK_STAT_CLS(cls_free, s->cls);
#if HAK_DEBUG || HAK_SECURE
  if (!alloc_check_free(s, p, h != NULL && (owner & ~OWNER_FULL) == h->tid)) return;
#endif
  if (h != NULL && (owner & ~OWNER_FULL) == h->tid) {
    heap_free_local(h, s, p, owner);
    decay_poll();
  } else {
    HAK_STAT(ST_REMOTE);
    remote_free(s, p);
    decay_poll();
  }
}

static void free_any(void *p, const char *call) {
  if (p == NULL) return;
  if (HAK_UNLIKELY(opt.prof)) prof_free(p);
  unsigned v = ownmap_get(p);
  if (v >= HAK_SMALL_SLAB_SHIFT)
    free_small_slow(p, v, call);
  else if (v != OWN_NONE) {
    large_free(p, v, call);
    decay_poll();
  } else if (foreign_owns(p))
    foreign_free(p); /* glibc's block (or the bypass): hand it back */
  else
    report_invalid(call, p);
}

void alloc_free_slow(void *p) { free_any(p, "free"); }

void alloc_free_sized(void *p, size_t size) {
  if (!HAK_DEBUG) {
    (void)size;
    front_free(p);
    return;
  }
  if (p != NULL && ownmap_get(p) != OWN_NONE) {
    size_t usable = alloc_usable_size(p);
    if (HAK_UNLIKELY(size > usable)) {
      report_invalid("free_sized (size larger than the block)", p);
      return;
    }
  }
  free_any(p, "free_sized");
}

void *alloc_calloc(size_t n, size_t size) {
  size_t total;
  if (HAK_UNLIKELY(__builtin_mul_overflow(n, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  if (total <= HAK_SMALL_MAX) {
    void *p = front_malloc(total);
    if (p != NULL) memset(p, 0, total);
    return p;
  }
  init_ensure();
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_calloc(n, size);
  bool zeroed = false;
  void *p = large_alloc(total, HAK_MIN_ALIGN, &zeroed);
  if (p != NULL && !zeroed) memset(p, 0, total);
  if (HAK_UNLIKELY(opt.prof)) prof_alloc(p, total);
  return p;
}

size_t alloc_usable_size(const void *p) {
  if (p == NULL) return 0;
  unsigned v = ownmap_get(p);
  if (v >= HAK_SMALL_SLAB_SHIFT) return ss_slab_of(p, v)->bsize;
  if (v != OWN_NONE) return large_usable_size(p, v);
  if (foreign_owns(p)) return foreign_usable_size((void *)p);
  report_invalid("malloc_usable_size", p);
  return 0;
}

void *alloc_realloc(void *p, size_t size) {
  if (p == NULL) return front_malloc(size);
  if (size == 0) {
    /* glibc's choice: free and return NULL. */
    free_any(p, "realloc");
    return NULL;
  }
  unsigned v = ownmap_get(p);
  if (v == OWN_NONE) {
    if (foreign_owns(p)) return foreign_realloc(p, size); /* glibc's block stays glibc's */
    report_invalid("realloc", p);
    return NULL;
  }
  size_t old;
  if (v >= HAK_SMALL_SLAB_SHIFT) {
    slab_t *s = ss_slab_of(p, v);
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (!slab_block_plausible(s, owner, p)) {
      report_invalid("realloc", p);
      return NULL;
    }
    old = s->bsize;
    /* In place while the block is big enough and not more than twice the
     * request (shrinking further moves to a smaller class). */
    if (size <= old && (size > old / 2 || old <= 16)) return p;
  } else {
    void *q = large_realloc(p, v, size);
    if (q != NULL) return q;
    old = large_usable_size(p, v);
    if (old == 0) return NULL; /* invalid, already reported */
  }
  /* Growing a slab block: at least a quarter more than it had, so a
   * buffer grown by small steps moves (and is copied) a bounded number of
   * times per doubling even where classes are 16 bytes apart (the
   * hysteresis tcmalloc's realloc uses too). */
  size_t want = size;
  if (v >= HAK_SMALL_SLAB_SHIFT && size > old && size < old + old / 4 && old + old / 4 <= HAK_SMALL_MAX)
    want = old + old / 4;
  void *n = front_malloc(want);
  if (n == NULL && want != size) n = front_malloc(size);
  if (n == NULL) return NULL;
  memcpy(n, p, old < size ? old : size);
  free_any(p, "realloc");
  return n;
}

void *alloc_reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_realloc(p, total);
}

void *alloc_aligned(size_t align, size_t size) {
  if (align <= HAK_MIN_ALIGN) return front_malloc(size);
  init_ensure();
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_memalign(align, size);
  if (size <= HAK_SMALL_MAX && align <= HAK_SLAB_ALIGN_MAX) {
    /* Slab areas are aligned to 64 KiB (1 MiB for the classes above
     * 64 KiB), so a class whose block size is a multiple of align has every
     * block aligned; the power-of-two class at max(size, align) always
     * qualifies, so waste stays below the alignment or the size, whichever
     * is larger. */
    unsigned cls = sc_of(size > align ? size : align);
    while (sc_size[cls] & (align - 1)) cls++;
    void *p = alloc_class(cls);
    if (HAK_UNLIKELY(opt.prof)) prof_alloc(p, sc_size[cls]);
    return p;
  }
  void *p = large_alloc(size, align, NULL);
  if (HAK_UNLIKELY(opt.prof)) prof_alloc(p, size);
  return p;
}

int alloc_posix_memalign(void **out, size_t align, size_t size) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
  int saved = errno;
  void *p = alloc_aligned(align, size);
  errno = saved;
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

void *alloc_aligned_alloc(size_t align, size_t size) {
  if (align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return alloc_aligned(align, size);
}

void *alloc_valloc(size_t size) {
  init_ensure();
  return alloc_aligned(os_page_size, size);
}

void *alloc_pvalloc(size_t size) {
  init_ensure();
  size_t page = os_page_size;
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return NULL;
  }
  return alloc_aligned(page, size == 0 ? page : align_up(size, page));
}

void alloc_collect(bool force) {
  init_ensure();
  if (opt.force_libc) return;
  heap_drain_self(); /* blocks other threads freed into ours can go too */
  decay_collect_all(force);
}
