/*
 * internal.h — compiler macros, layout constants and the debug-check macro
 * shared by every hakmem component.
 *
 * Owns: nothing at run time. Promises: constants that fix the memory layout
 * (superslab = 4 MiB naturally aligned region, slab sizes, class count).
 * May call: nothing.
 */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdatomic.h>

#include "hakmem.h" /* version numbers */

#define HAK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HAK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HAK_NOINLINE    __attribute__((noinline))
#define HAK_COLD        __attribute__((cold, noinline))
/* The one slow path each way: out of line and out of the hot text, but
 * compiled for speed (sizes above 4352 B run through it). */
#define HAK_SLOW        __attribute__((noinline, section(".text.unlikely.hakmem")))
#define HAK_INLINE      static inline __attribute__((always_inline))
/* Where code and data lie in libhakmem.so (src/layout.ld; the static
 * libraries ignore it). The files every process runs (the allocator) are
 * hot, the rest (statistics, hak_ctl, the profiler, the error report) cold:
 * cold code and read-only data sit in pages a normal run never maps. These
 * mark the exceptions: a function of a cold file that every process runs
 * (start-up, exit, fork hooks), code or read-only data of a hot file that
 * only a statistics call, a report or the documentation reaches, and
 * zero-filled tables of a KiB or more, kept after the small globals so
 * that those share one page. HAK_TEXT_COLD is never inlined (its code and
 * strings would land in the hot caller) and is optimised for size. */
#define HAK_TEXT_HOT    __attribute__((section(".text.hak_hot")))
#define HAK_TEXT_COLD   __attribute__((cold, noinline, section(".text.hak_cold")))
#define HAK_RODATA_COLD __attribute__((section(".rodata.hak_cold")))
#define HAK_BSS_BIG     __attribute__((section(".bss.hak_big")))

/* HAK_TSAN: 1 in a ThreadSanitizer build. */
#if defined(__SANITIZE_THREAD__)
#define HAK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAK_TSAN 1
#endif
#endif
#if !defined(HAK_TSAN)
#define HAK_TSAN 0
#endif
/* HAK_TSO: 1 where a plain store already has release and a plain load
 * acquire semantics (x86-64's total store order) and no ThreadSanitizer
 * watches (it knows no TSO): there, an owner-only counter another thread
 * reads may be updated by one instruction in memory (slab_used_dec_release
 * in superslab.h, the owner's section in heap_impl.h). 0 elsewhere: the
 * portable atomic load and store. */
#if defined(__x86_64__) && !HAK_TSAN
#define HAK_TSO 1
#else
#define HAK_TSO 0
#endif
#define HAK_EXPORT      __attribute__((visibility("default")))
#define HAK_TLS         __thread __attribute__((tls_model("initial-exec")))

/* A superslab (and every hakmem mapping) starts on a 4 MiB boundary; the
 * ownership map has one byte per 4 MiB of address space. */
#define HAK_SS_SHIFT      22
#define HAK_SS_SIZE       ((size_t)1 << HAK_SS_SHIFT)
#define HAK_SS_MASK       (HAK_SS_SIZE - 1)

/* Small superslabs hold 64 KiB slabs (classes up to 2 KiB, >= 32 blocks per
 * slab); medium superslabs hold 512 KiB slabs (2.5 KiB .. 7.5 KiB), wide ones
 * 1 MiB slabs (8 KiB .. 64 KiB: 16 to 128 blocks, where 512 KiB held 8 to
 * 64). A class whose working set spans slabs keeps switching between them
 * at its refills, and the blocks freed into a slab it left cool there
 * until it comes back (bench_mid_large_mt, 8..32 KiB: 476 k refills for 5
 * M allocations in 512 KiB slabs, 206 k in 1 MiB ones; 11 % faster, peak
 * RSS 6.5 -> 4.7 MiB; bench_written 8 B..32 KiB 18.0 -> 15.4 MiB). Below 8
 * KiB the classes stay in 512 KiB slabs: with 1 MiB there too, the threads
 * that come and go (bench_thread_pass, 16 B..4 KiB) kept 1.7x the memory,
 * a warm slab reused by another class holding twice the pages. Slab 0
 * of those holds the header, so their blocks start slab-aligned. Big
 * superslabs are one slab of 4 MiB whose blocks (80 KiB .. 1 MiB) start
 * 1 MiB in, after the header: so every slab area is aligned to at least
 * 64 KiB, and power-of-two classes are aligned to their size (up to 1 MiB);
 * the untouched rest of the first MiB costs address space, not memory. */
#define HAK_SMALL_SLAB_SHIFT  16
#define HAK_MEDIUM_SLAB_SHIFT 19
#define HAK_WIDE_SLAB_SHIFT   20
#define HAK_BIG_SLAB_SHIFT    HAK_SS_SHIFT
#define HAK_BIG_AREA_OFFSET   ((size_t)1 << 20)
#define HAK_MAX_SLABS         64

#define HAK_NCLASS        72            /* 16 B .. 1 MiB (hakmem.h's HAK_STATS_CLASSES is the limit) */
#define HAK_SMALL_MAX     ((size_t)1 << 20) /* largest size class; above: large.c */
#define HAK_SLAB_ALIGN_MAX ((size_t)1 << 20) /* alignments served by size classes */
/* Sizes served by the per-thread direct table: up to the 17/16 class above
 * 4 KiB, so a 1..4 KiB buffer (a page and its header, an obstack chunk, a
 * database page) pops in malloc's hit path instead of alloc_slow's: 33.9 ->
 * 23.3 instructions per malloc+free of 1025..4352 B (callgrind, random mixed
 * loop), for 1.7 KiB more TLS per thread. Above, the table would grow by a
 * bucket per 16 B for classes few programs use often. */
#define HAK_FAST_MAX      ((size_t)4352)
#define HAK_DIRECT_N      (4352 / 16 + 2)  /* buckets 0..272 for sizes 0..4352, the last = "not here" */
#define HAK_MIN_ALIGN     16

/* Layout constant for page-granular work; the real page size is checked at
 * start-up (os_init) and must not exceed it for the slab layout. */
#define HAK_PAGE_MAX      ((size_t)65536)

/* Secure build (-DHAKMEM_SECURE=ON): every free check (HAK_CHECKED below)
 * plus guard pages and shuffled fresh blocks. */
#if defined(HAKMEM_SECURE) && HAKMEM_SECURE
#define HAK_SECURE 1
#else
#define HAK_SECURE 0
#endif

/* Reports a failed internal check and stops (os.c; every build has it: the
 * invariant checkers use it too). */
void os_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn, cold));
#if defined(HAKMEM_DEBUG) && HAKMEM_DEBUG
#define HAK_DEBUG 1
#define HAK_ASSERT(e) ((e) ? (void)0 : os_assert_fail(#e, __FILE__, __LINE__))
#else
#define HAK_DEBUG 0
#define HAK_ASSERT(e) ((void)0)
#endif

/* The free checks that cost instructions on the hit paths: free marks,
 * encoded links and the block-start test on every free (superslab.h,
 * front.h). The secure build has them, and the debug build (it is for
 * finding bugs, speed does not matter there). The default build keeps
 * only the checks that cost nothing measurable (README.md, "What each
 * build catches"): plain links, no mark, a head-of-list double-free
 * compare. */
#if HAK_SECURE || HAK_DEBUG
#define HAK_CHECKED 1
#else
#define HAK_CHECKED 0
#endif

#define HAK_STR2_(x) #x
#define HAK_STR_(x) HAK_STR2_(x)
#define HAK_STR_VERSION HAK_STR_(HAKMEM_VERSION_MAJOR) "." HAK_STR_(HAKMEM_VERSION_MINOR) "." HAK_STR_(HAKMEM_VERSION_PATCH)
/* hak_version()'s text, defined once: api.c returns it, and the report
 * (stats.c) and hak_ctl's "version" (ctl.c) use it without calling up
 * into api.c. */
#if HAK_DEBUG
#define HAK_FLAVOUR " debug"
#elif HAK_SECURE
#define HAK_FLAVOUR " secure"
#else
#define HAK_FLAVOUR " release"
#endif
#define HAK_VERSION_STRING HAK_STR_VERSION HAK_FLAVOUR

/* The calling thread's identity for slab ownership: the thread pointer
 * (one %fs-relative compare on x86-64). Unique among live threads; a
 * reused one never matches a stale owner because exiting threads (and the
 * fork child, for the other threads) abandon every slab they own. */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__aarch64__))
#define HAK_THREAD_ID() ((uintptr_t)__builtin_thread_pointer())
#else
extern __thread char tls_tid_anchor __attribute__((tls_model("initial-exec")));
#define HAK_THREAD_ID() ((uintptr_t)&tls_tid_anchor)
#endif
/* Owner tags that no thread id can equal (user addresses stay below 2^62):
 * the profiler's heaps (the fast path must never match) and the shared
 * exit heap. */
#define HAK_TID_PROF_BIT ((uintptr_t)1 << 63)
#define HAK_TID_EXIT_BIT ((uintptr_t)1 << 62)

HAK_INLINE size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* Bit i of the bitmap bm (64 bits a word): the arenas' granule maps and
 * the cooling's free-block maps. */
HAK_INLINE bool hak_bit_test(const uint64_t *bm, uint32_t i) { return (bm[i >> 6] >> (i & 63)) & 1; }

/* Set bits of x. Baseline x86-64 has no popcnt instruction, so gcc turns
 * __builtin_popcountll into a call to libgcc's __popcountdi2 (5 % of the
 * arenas' instructions on bench_mid_large_mt 64 KiB..1 MiB); the
 * bit-slicing sum below is a dozen inline instructions. */
HAK_INLINE uint32_t hak_popcount64(uint64_t x) {
#if defined(__POPCNT__) || !defined(__x86_64__)
  return (uint32_t)__builtin_popcountll(x);
#else
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return (uint32_t)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* The next value of Marsaglia's xorshift64 (shifts 13, 7, 17) from *s,
 * which must not be 0: the cheap generator of the sampling profiler's gaps
 * and of the secure carve's order. */
HAK_INLINE uint64_t hak_xorshift64(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return *s = x;
}

#endif
