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

/* Out of memory (or address space, under RLIMIT_AS): memory may sit idle
 * in any heap, list or cache. Give all of it back, so that the caller can
 * try once more. The one place an allocation collects: heap.c and large.c
 * just return NULL, and every allocation that failed passes here once
 * (mimalloc's generic slow path retries once the same way). */
static void alloc_oom_collect(void) HAK_COLD;
static void alloc_oom_collect(void) { decay_collect_all(true); }

/* heap_alloc_refill's answer when out of memory: collect, refill once
 * more (with no second answer: NULL and ENOMEM then). Handed to the
 * refill, so a refill that succeeds pays nothing for the retry. */
static void *alloc_oom_refill(heap_t *h, unsigned cls, uintptr_t align) HAK_COLD;
static void *alloc_oom_refill(heap_t *h, unsigned cls, uintptr_t align) {
  alloc_oom_collect();
  return heap_alloc_refill(h, cls, NULL, align);
}

/* calloc above this size asks the heap for a block the kernel zeroed
 * (heap_calloc_class) before it would write one (alloc_calloc). */
#define ALLOC_CALLOC_CLEAN_MIN ((size_t)1024)

/* A large block, retried once after a collection (not for a size no
 * mapping can hold, nor one beyond RAM and swap, which the kernel refuses
 * whatever sits idle: a program that probes with absurd sizes would
 * otherwise give back every idle page at each probe and fault them in
 * again). */
static void *alloc_large(size_t size, size_t align, bool *zeroed) {
  void *p = large_alloc(size, align, zeroed);
  if (HAK_UNLIKELY(p == NULL) && size < (size_t)PTRDIFF_MAX / 2 && size < os_backable_bytes()) {
    alloc_oom_collect();
    p = large_alloc(size, align, zeroed);
  }
  decay_poll(); /* an allocation's safe point: the mapping may want the thread */
  return p;
}

/* A block of class cls from the calling thread's heap (created on the
 * thread's first call). align: 1, or alloc_aligned's alignment, which a
 * block a larger class lends must have too (heap_borrow). A thread without
 * a heap yet gets a new one, which has nothing to lend, and one that
 * exited the shared exit heap, which lends only blocks as aligned as the
 * class's own: neither needs align. */
static void *alloc_class(unsigned cls, uintptr_t align) {
  heap_t *h = heap_front.self;
  if (HAK_UNLIKELY(h == NULL)) {
    if (heap_front.exited) {
      void *p = heap_exit_alloc(cls);
      if (p != NULL) return p;
      alloc_oom_collect();
      return heap_exit_alloc(cls);
    }
    h = heap_thread_init();
    if (h == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  return heap_alloc_class_at(h, cls, alloc_oom_refill, align);
}

/* The rare part of alloc_slow (first call of a thread or the process, the
 * bypass, large blocks, a closed front): out of line, so that the common
 * part — sizes above the direct table's and refills — needs no registers
 * saved. */
static void *alloc_cold(size_t size) HAK_COLD;
static void *alloc_cold(size_t size) {
  init_ensure();
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_malloc(size);
  if (size <= opt.arena_min) {
    void *p = alloc_class(sc_of(size), 1);
    /* The heap's refills account for sampling; a closed-front heap (no
     * batch descriptors) samples here. */
    if (HAK_UNLIKELY(opt.prof) && heap_front.heap == NULL) prof_alloc(p, size);
    return p;
  }
  void *p = alloc_large(size, HAK_MIN_ALIGN, NULL);
  if (HAK_UNLIKELY(opt.prof)) prof_alloc(p, size);
  return p;
}

/* Everything malloc's fast path does not serve. heap_front.heap is set
 * only on an initialised thread with neither the libc bypass nor a closed
 * front, so sizes up to HAKMEM_ARENA_MIN need no other check; the rest is
 * alloc_cold, whose first statements are initialisation and the bypass.
 * Above HAKMEM_ARENA_MIN (128 KiB) a block comes from the coalescing arenas
 * (large.c), not a size class: a class's free blocks serve that class
 * only, so each class of each thread kept its own high-water mark of
 * blocks of 64 KiB..1 MiB, filled ones among them (bench_written with
 * 64 KiB..1 MiB blocks written whole: 76 MiB against glibc's 43 at 2
 * threads, 380 MiB against tcmalloc's 266 at 16, where the arenas hold
 * 47..48 and 250..257). The price is the arena call (a lock per CPU group and
 * the span bookkeeping): bench_mid_large_mt with those sizes, a word
 * written per block, 56..69 M operations a second from the slabs, about 20
 * M from the arenas, 9.6 M with mimalloc. The default starts at 128 KiB,
 * not 64: below it a class rounds closer (four per power of two, no
 * header) than a 64 KiB granule, which gives a 65 KiB block 128 KiB, and
 * a smaller block reusing a warm span keeps the rest resident (real_git,
 * blobs of every size from 4 to 300 KiB: 106 -> 96 MiB; the cost, 16
 * threads cycling filled blocks of 64 KiB..1 MiB: 255 -> 270 MiB). */
void *alloc_slow(size_t size) {
  heap_t *h = heap_front.heap;
  if (HAK_DEBUG && heap_front.self != NULL) heap_check(heap_front.self);
  HAK_STAT(ST_SLOW);
  HAK_STAT(ST_ALLOC);
  if (HAK_LIKELY(h != NULL && size <= opt.arena_min)) {
    unsigned cls = sc_of(size);
    return heap_alloc_class_with(h, cls, alloc_oom_refill);
  }
  return alloc_cold(size);
}

void alloc_slab_emptied(slab_t *s) {
  heap_t *h = heap_front.self;
  /* Most often the class's current slab, which stays (heap_slab_emptied's
   * first test): nothing changed, nothing to poll — unless it emptied
   * after a burst (heap_park). */
  if (s == h->cur[s->cls]) {
    if (HAK_UNLIKELY(s->carved >= HEAP_PARK_MIN_BLOCKS && (size_t)s->carved * s->bsize >= HEAP_PARK_MIN_BYTES))
      heap_park(h, s);
    return;
  }
  heap_slab_emptied(h, s);
}

/* Is p, a block start of s whose owner word is owner, free already? The
 * default build sees this only for the head of a list the calling thread's
 * heap owns (slab_block_is_free; while profiling, that heap's owner tag is
 * not the thread id), or holds (heap_freed_last). */
static bool alloc_block_is_free(const slab_t *s, uintptr_t owner, const void *p, bool freeing) {
  const heap_t *h = heap_front.self;
  bool own = h != NULL && (owner & ~OWNER_FULL) == h->tid;
#if HEAP_XC_ENABLE
  /* realloc and malloc_usable_size of a block of another thread's slab
   * this thread freed last (a free checks it on its way: heap_xc.c). */
  if (!freeing && !own && h != NULL && heap_freed_last(h, s, p)) return true;
#endif
  return slab_block_is_free(s, p, own, freeing);
}

/* The slab of p if p is a live block of a slab in use (as far as the build
 * can tell: slab_block_is_free); otherwise reports what is wrong (as call)
 * and returns NULL. Only fields fixed while the slab is in use are read,
 * and the free list only by its owner. */
static slab_t *slab_live_block(const void *p, unsigned shift, const char *call, const char *freed_what,
                               bool freeing) {
  slab_t *s = ss_slab_of(p, shift);
  uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  if (HAK_UNLIKELY(owner == OWNER_UNUSED)) {
    /* The whole slab is free: p was freed already, or never was a block. */
    report_error(call, p, "double free or invalid pointer");
    return NULL;
  }
  if (HAK_UNLIKELY(!slab_holds(s, p) || !slab_is_block_start(s, p) || (HAK_CHECKED && !slab_carved_holds(s, p)))) {
    report_invalid(call, p);
    return NULL;
  }
  if (HAK_UNLIKELY(alloc_block_is_free(s, owner, p, freeing))) {
    /* Only a free writes the mark (the secret mixed with the block's own
     * address), and every allocation clears it; in the default build, it
     * heads our list: the block is free. */
    report_error(call, p, freed_what);
    return NULL;
  }
  return s;
}

/* b, a live block of s, goes home to s's owner, another thread (h: the
 * calling thread's heap, NULL once it has exited). free_remote_slow: the
 * block joins no batch at once (remote.h); kept for this thread's
 * allocations if its slab's owner is idle (heap_xc.c), else sent home. Out
 * of line, so that free_other's common case calls nothing but tail calls
 * and keeps no frame. */
static HAK_SLOW void free_remote_slow(heap_t *h, slab_t *s, block_t *b) {
#if HEAP_XC_ENABLE
  heap_free_foreign(h, s, b);
#else
  remote_send_slow(h != NULL ? &h->rcache : NULL, s, b);
#endif
}

static inline void free_remote(heap_t *h, slab_t *s, block_t *b) {
  HAK_STAT(ST_REMOTE);
  if (HAK_LIKELY(h != NULL) && remote_free_fast(&h->rcache, s, b)) return;
  free_remote_slow(h, s, b);
}

static void free_small(void *p, unsigned shift, const char *call) {
  slab_t *s = ss_slab_of(p, shift);
  uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_acquire);
  /* A live block start of a slab in use (slab_live_block's checks, with
   * the owner read once); anything else is slab_live_block's to report. */
  if (HAK_UNLIKELY(owner == OWNER_UNUSED || !slab_holds(s, p) || !slab_is_block_start(s, p) ||
                   (HAK_CHECKED && !slab_carved_holds(s, p)) || alloc_block_is_free(s, owner, p, true))) {
    slab_live_block(p, shift, call, "double free of", true);
    return;
  }
  block_t *b = p;
  heap_t *h = heap_front.self;
  HAK_STAT(ST_FREE);
  HAK_STAT_CLS(cls_free, s->cls);
  if (h != NULL && (owner & ~OWNER_FULL) == h->tid) {
    if (HAK_DEBUG) slab_check(h, s);
    heap_free_local(h, s, b, owner);
    return;
  }
  /* A thread that only frees gets a heap too: its cache batches the
   * remote frees, and its exit flushes them. */
  if (HAK_UNLIKELY(h == NULL) && !heap_front.exited) h = heap_thread_init();
  free_remote(h, s, b);
}

static void free_any(void *p, const char *call) {
  if (p == NULL) return;
  if (HAK_UNLIKELY(opt.prof)) prof_free(p);
  unsigned v = ownmap_get(p);
  if (v >= HAK_SMALL_SLAB_SHIFT)
    free_small(p, v, call);
  else if (v != OWN_NONE) {
    large_free(p, v, call);
  } else if (foreign_owns(p))
    foreign_free(p); /* glibc's block (or the bypass): hand it back */
  else
    report_invalid(call, p);
}

/* free_other's block of a thread that exited: this thread may take its
 * superslab over (heap_adopt_on_free, as mimalloc reclaims an abandoned
 * segment on free), and the free becomes a local one. Otherwise each such
 * free travels to the abandoned list, whose memory waits for a thread
 * short of slabs while this one may take fresh pages (thread_churn_16t:
 * 25 -> 17 MiB peak RSS with it). */
static HAK_SLOW void free_abandoned(heap_t *h, slab_t *s, void *p, void (*slow)(void *)) {
  if (heap_adopt_on_free(h, s)) {
    slow(p);
    return;
  }
  HAK_STAT(ST_FREE);
  HAK_STAT_CLS(cls_free, s->cls);
  free_remote(h, s, p);
}

/* The free when front_free found a small slab that is not the calling
 * thread's, or a free its hit path refused: s is p's slab and owner its
 * owner word as front_free read it. A plain remote free (a slab in use by
 * another thread; the calling thread with a heap; not a block the
 * profiler may have sampled) goes home at once, without free_small's
 * second look-up (91 instructions a remote free in bench_xmalloc under
 * callgrind, most of them looking up again what front_free had read).
 * Like the local free's hit path, the default build trusts a pointer into
 * a slab in use to be a live block's start; the checked builds test it
 * here (slab_holds, the block-start multiply, the free mark). Everything
 * else takes slow, which checks it again from the start and reports. Its
 * common case makes only tail calls, so it keeps no frame: with the
 * batch's push (remote_free_fast) about 30 instructions (46 with a frame,
 * the two tests and the batch's count and flush test). */
void free_other(void *p, slab_t *s, uintptr_t owner, void (*slow)(void *)) {
  heap_t *h = heap_front.self;
  /* While profiling, a sampled block must reach prof_free: those come
   * only from slabs of the profiling heap, of closed-front heaps (their
   * owner tags carry HAK_TID_PROF_BIT) and of the exit heap
   * (HAK_TID_EXIT_BIT), whose superslabs may since have been abandoned.
   * Every other remote free stays on this path (larson_prof sent them all
   * to free_slow: 4 % of its instructions). */
  if (HAK_UNLIKELY(h == NULL || owner == OWNER_UNUSED ||
                   (opt.prof && ((owner & (HAK_TID_PROF_BIT | HAK_TID_EXIT_BIT)) || owner == OWNER_ABANDONED)) ||
                   (owner & ~OWNER_FULL) == h->tid ||
                   (HAK_CHECKED && (!slab_holds(s, p) || !slab_is_block_start(s, p))) ||
                   slab_block_is_free(s, p, false, true))) {
    slow(p);
    return;
  }
  /* front_free's load was relaxed: order it before the reads of s's
   * geometry (its size, for the batch), as free_small's acquire does. */
  atomic_thread_fence(memory_order_acquire);
  if (HAK_UNLIKELY(owner == OWNER_ABANDONED)) {
    free_abandoned(h, s, p, slow);
    return;
  }
  HAK_STAT(ST_FREE);
  HAK_STAT_CLS(cls_free, s->cls);
  free_remote(h, s, p);
}

void free_slow(void *p) {
  if (HAK_DEBUG && heap_front.self != NULL) heap_check(heap_front.self);
  free_any(p, "free");
}

static void free_sized_slow(void *p) HAK_NOINLINE;
static void free_sized_slow(void *p) { free_any(p, "free_sized"); }

void alloc_free_sized(void *p, size_t size) {
  if (!HAK_DEBUG) {
    (void)size;
    front_free_to(p, free_sized_slow);
    return;
  }
  /* The debug build also checks the size against the block (quietly: a
   * block that is not live is free_any's to report). */
  unsigned v = p != NULL ? ownmap_get(p) : OWN_NONE;
  size_t usable = 0;
  if (v >= HAK_SMALL_SLAB_SHIFT) {
    const slab_t *s = ss_slab_of(p, v);
    uintptr_t owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (owner != OWNER_UNUSED && slab_holds(s, p) && slab_is_block_start(s, p) &&
        !alloc_block_is_free(s, owner, p, false))
      usable = s->bsize;
  } else if (v != OWN_NONE) {
    usable = large_usable_size(p, v);
  }
  if (HAK_UNLIKELY(usable != 0 && size > usable)) {
    report_invalid("free_sized (size larger than the block)", p);
    return;
  }
  free_any(p, "free_sized");
}

void *alloc_calloc(size_t n, size_t size) {
  size_t total;
  if (HAK_UNLIKELY(__builtin_mul_overflow(n, size, &total))) {
    errno = ENOMEM;
    return NULL;
  }
  /* The bypass first (opt is read once at start-up; before it, it reads
   * 0 and the first calloc takes the malloc path): glibc's calloc leaves
   * fresh memory unwritten, which malloc and a memset would not. */
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_calloc(n, size);
  if (total <= opt.arena_min) {
    /* Above 1 KiB calloc asks the heap for a block the kernel zeroed and
     * nobody wrote since, which it leaves unwritten (calloc(1 MB) x 1000
     * with a byte touched in each: 983 MB and 1.6 s before, 6.8 MB now;
     * glibc 5.2 MB). */
    heap_t *h = heap_front.heap;
    if (total > ALLOC_CALLOC_CLEAN_MIN && h != NULL) {
      bool zeroed = false;
      void *p = heap_calloc_class(h, sc_of(total), &zeroed);
      if (p != NULL) {
        if (!zeroed) memset(p, 0, total);
        return p;
      }
    }
    void *p = front_malloc(total);
    if (p != NULL) memset(p, 0, total);
    return p;
  }
  init_ensure();
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_calloc(n, size);
  bool zeroed = false;
  void *p = alloc_large(total, HAK_MIN_ALIGN, &zeroed);
  if (p != NULL && !zeroed) memset(p, 0, total);
  if (HAK_UNLIKELY(opt.prof)) prof_alloc(p, total);
  return p;
}

size_t alloc_usable_size(const void *p) {
  if (p == NULL) return 0;
  unsigned v = ownmap_get(p);
  if (v >= HAK_SMALL_SLAB_SHIFT) {
    slab_t *s = slab_live_block(p, v, "malloc_usable_size", "invalid pointer", false);
    return s != NULL ? s->bsize : 0;
  }
  if (v != OWN_NONE) {
    size_t n = large_usable_size(p, v);
    if (n == 0) report_invalid("malloc_usable_size", p); /* freed, or inside a block */
    return n;
  }
  if (foreign_owns(p)) return foreign_usable_size((void *)p);
  report_invalid("malloc_usable_size", p);
  return 0;
}

/* Growth to REALLOC_ARENA .. this many bytes goes to an arena with room;
 * above, to the size asked for (large.c keeps arena blocks up to 32 MiB). */
#define ALLOC_REALLOC_ARENA_MAX ((size_t)16 << 20)
/* Slab blocks below this grow by at least a quarter (alloc_realloc). */
#define ALLOC_GROW_ROOM_MAX ((size_t)1024)

/* realloc's move of p (ownmap value v, old usable bytes) to a new block of
 * size bytes. Out of line, so that alloc_realloc's in-place returns save
 * few registers. */
static __attribute__((noinline)) void *alloc_realloc_move(void *p, unsigned v, size_t size, size_t old);

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
    slab_t *s = slab_live_block(p, v, "realloc", "double free of", false);
    if (s == NULL) return NULL;
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
  return alloc_realloc_move(p, v, size, old);
}

static void *alloc_realloc_move(void *p, unsigned v, size_t size, size_t old) {
  /* Growing a slab block of less than 1 KiB: at least a quarter more
   * than it had, so a buffer grown by small steps moves (and is copied) a
   * bounded number of times per doubling where classes are 16 bytes apart
   * (the hysteresis tcmalloc's realloc uses too). From 1 KiB the classes
   * are 1/8 to 1/4 apart, so each move already grows it that much, and the
   * quarter's overshoot was the block the buffer ended in: a 7.5 KiB block
   * plus a quarter is a 10 KiB block, where redis's list nodes (listpacks
   * grown 204 B at a time up to 8167 B) ended, 4121..4801 of them, 40..47
   * MiB of its 84 at its peak; past REALLOC_ARENA the arenas take over. */
  size_t want = size;
  void *n = NULL;
  if (size > old && opt.realloc_arena != 0 && size >= opt.realloc_arena && size <= ALLOC_REALLOC_ARENA_MAX) {
    /* A buffer growing past REALLOC_ARENA moves to the coalescing arenas
     * with a quarter of its size again as room (measured on bench_realloc:
     * more room left bigger holes when a buffer moved on, peak RSS 45 MiB
     * with room 1x, 44 with 1/2, 41 with 1/4 or 1/8), where it goes on growing in place
     * (large_realloc) instead of leaving a freed block behind in every
     * size class it passes through; the span it frees serves any size.
     * glibc's realloc extends into the next free chunk for the same
     * reason. */
    /* Room only for a buffer grown by steps smaller than the room itself
     * (appends): one that grows by a quarter or more per call (a vector
     * that multiplies its capacity) asks again past any room we left, so
     * the room would only be resident waste (bench_realloc's vectors grow
     * by half). */
    size_t room = size < old + old / 4 ? size / 4 : 0;
    n = large_alloc(size + room, HAK_MIN_ALIGN, NULL);
    if (n != NULL) large_note_asked(n, size);
    if (HAK_UNLIKELY(opt.prof) && n != NULL) prof_alloc(n, size + room);
  } else if (v >= HAK_SMALL_SLAB_SHIFT && size > old && size < old + old / 4 && old < ALLOC_GROW_ROOM_MAX) {
    want = old + old / 4;
  }
  if (n == NULL) n = front_malloc(want);
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

/* Not inlined: posix_memalign and aligned_alloc each held a copy of it,
 * about 600 bytes of hot code apiece, and the hot code had 31 bytes left
 * of its one 64 KiB fault-around window (test_footprint: 65 505 -> 64 161
 * bytes). A call is nothing beside what an aligned allocation does. */
HAK_NOINLINE void *alloc_aligned(size_t align, size_t size) {
  if (align <= HAK_MIN_ALIGN) return front_malloc(size);
  init_ensure();
  if (HAK_UNLIKELY(opt.force_libc)) return foreign_memalign(align, size);
  if (size <= HAK_SMALL_MAX && align <= HAK_SLAB_ALIGN_MAX) {
    unsigned cls = sc_of_aligned(size, align);
    void *p = alloc_class(cls, align);
    if (HAK_UNLIKELY(opt.prof) && heap_front.heap == NULL) prof_alloc(p, sc_size[cls]);
    return p;
  }
  void *p = alloc_large(size, align, NULL);
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

/* memalign predates the power-of-two rule, and glibc serves any alignment
 * by rounding it up to the next power of two (0 and 1 as malloc does); old
 * programs rely on that, so a drop-in replacement must too. aligned_alloc
 * and posix_memalign keep their standards' refusal. Cold: the legacy
 * interface (it made room in the hot code for the fork handlers' own-heap
 * lock); a program that calls it pays one fault-around window, once. */
HAK_TEXT_COLD void *alloc_memalign(size_t align, size_t size) {
  if (HAK_UNLIKELY((align & (align - 1)) != 0)) {
    if (align > (SIZE_MAX >> 1) + 1) {
      errno = EINVAL;
      return NULL;
    }
    align = (size_t)1 << (64 - __builtin_clzll((unsigned long long)align));
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

HAK_TEXT_COLD uint64_t alloc_thread_purge_delay_ms(void) {
  init_ensure();
  return heap_self_purge_delay_ms();
}

void alloc_collect(bool force) {
  init_ensure();
  if (opt.force_libc) return;
  heap_drain_self(force); /* blocks other threads freed into ours can go too */
  heap_exit_release(); /* and those freed into the shared exit heap's slabs */
  decay_collect_all(force);
}
