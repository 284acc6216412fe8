/*
 * hakmem.h — the public interface of the hakmem allocator.
 *
 * Owns: the hak_-prefixed API. Every function here has the semantics of its
 * standard counterpart (malloc, free, ...), so code can use hakmem explicitly,
 * e.g. under a sanitizer, without replacing the process allocator.
 * Promises: pointers are 16-byte aligned; failures return NULL with
 * errno = ENOMEM (hak_posix_memalign returns the error code instead and leaves
 * errno alone); hak_free(NULL) does nothing.
 * Linking libhakmem.so / libhakmem.a additionally replaces malloc, free, ...
 * and C++ operator new/delete for the whole process.
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 1
#define HAKMEM_VERSION_PATCH 0

#if defined(__GNUC__)
#define HAK_API __attribute__((visibility("default")))
#define HAK_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define HAK_API
#define HAK_MALLOC_ATTR
#endif

HAK_API HAK_MALLOC_ATTR void *hak_malloc(size_t size);
HAK_API HAK_MALLOC_ATTR void *hak_calloc(size_t count, size_t size);
HAK_API void *hak_realloc(void *ptr, size_t size);
HAK_API void *hak_reallocarray(void *ptr, size_t count, size_t size);
HAK_API void hak_free(void *ptr);
/* C23 free_sized / free_aligned_sized: size (and alignment) must be what the
 * block was allocated with; a mismatch is an error in the caller. */
HAK_API void hak_free_sized(void *ptr, size_t size);
HAK_API void hak_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* alignment: a power of two (otherwise NULL, errno = EINVAL).
 * hak_aligned_alloc accepts any size (C17 rule). */
HAK_API HAK_MALLOC_ATTR void *hak_aligned_alloc(size_t alignment, size_t size);
/* Any alignment, as glibc's memalign: one that is not a power of two is
 * rounded up to the next (0 and 1 give malloc's alignment); EINVAL only
 * when that would exceed 2^63. */
HAK_API HAK_MALLOC_ATTR void *hak_memalign(size_t alignment, size_t size);
/* Returns 0, EINVAL (alignment not a power of two multiple of sizeof(void*))
 * or ENOMEM; errno is not changed. */
HAK_API int hak_posix_memalign(void **out, size_t alignment, size_t size);
HAK_API HAK_MALLOC_ATTR void *hak_valloc(size_t size);
HAK_API HAK_MALLOC_ATTR void *hak_pvalloc(size_t size);

/* Bytes usable at ptr (>= the size requested); 0 for NULL. */
HAK_API size_t hak_usable_size(const void *ptr);

/* Nonzero if ptr lies in memory hakmem manages (one table load). It is kept
 * per 4 MiB region: nonzero for every pointer hakmem returned and every byte
 * of a block up to 1 MiB; for a large block's region it is nonzero past the
 * block's end as well, where no page may be mapped, and zero in the regions
 * of a block bigger than 4 MiB after its first. */
HAK_API int hak_owns(const void *ptr);

/* Release memory held in caches and free slabs back to the OS now. */
HAK_API void hak_collect(int force);

/* Statistics (docs/stats.md explains every field). Always available at no
 * hot-path cost: OS-level figures and per-class figures computed on demand
 * from slab metadata (a snapshot: other threads keep running). The event
 * counters (allocs .. slow_allocs) are nonzero only in a statistics build
 * (-DHAKMEM_STATS=ON). Versioned: set size = sizeof(struct hak_stats)
 * before calling; fields beyond the caller's size are not written.
 * Version 4 grew classes[] from 64 to 80 entries (68 classes are filled),
 * which moved every field after it: a caller built against an older
 * hakmem.h must check version before it reads past its classes[].
 * Version 5 added the tc_ fields at the end: where rss_thread_cache_bytes
 * waits. Version 6 added tc_delayed_bytes after them: blocks on the owners'
 * delayed lists, which earlier versions counted as requested bytes.
 * Version 7 added grow_purged_bytes: the part of decayed_bytes given back
 * before its purge delay, by a thread about to map new memory.
 * Version 8 added rss_large_rounding_bytes: the part of rss_rounding_bytes
 * that is the arena blocks' pages past what was asked for, which earlier
 * versions counted as requested bytes.
 * Version 9 added superslabs_handed_over: superslabs a thread that stopped
 * allocating gave to the abandoned list while other threads freed into
 * them. */
#define HAK_STATS_VERSION 9
#define HAK_STATS_CLASSES 80

/* The fields are declared once, in the lists below (X(name, text)), in
 * struct order; hak_ctl's "stats.<name>" names, the report and the field
 * table of docs/stats.md come from the same lists. Every field is a
 * size_t. New fields go at the end of the last list (with a new
 * HAK_STATS_VERSION), never in between: the layout is the ABI. */
#define HAK_CLASS_STATS_FIELDS(X)                                                  \
  X(block_size, "bytes per block")                                                 \
  X(slabs, "slabs serving the class")                                              \
  X(blocks_in_use, "handed out (or freed remotely, not yet collected)")            \
  X(blocks_capacity, "blocks those slabs hold")                                    \
  X(allocs, "allocations of the class (statistics build only)")                    \
  X(frees, "frees of the class (statistics build only)")

/* Version 1, before the classes array. */
#define HAK_STATS_FIELDS_V1(X)                                                                   \
  X(mapped_bytes, "address space held from the kernel now (an upper bound of resident memory)") \
  X(mapped_peak_bytes, "the most mapped_bytes has been")                                        \
  X(purged_bytes, "bytes given back to the kernel so far (madvise or munmap)")                  \
  X(mmap_calls, "mmap system calls made")                                                       \
  X(munmap_calls, "munmap system calls made")                                                   \
  X(madvise_calls, "madvise and process_madvise calls made")                                    \
  X(mremap_calls, "mremap system calls made")                                                   \
  X(superslabs, "4 MiB superslabs live")                                                        \
  X(superslabs_abandoned, "live superslabs of exited threads, not yet adopted")                 \
  X(superslabs_cached, "empty superslabs kept (decommitted) for reuse")                         \
  X(small_bytes_in_use, "bytes of small blocks handed out")                                     \
  X(small_bytes_reserved, "bytes of small blocks the slabs in use can hold")                    \
  X(large_arenas, "arenas serving blocks of 1 to 32 MiB")                                       \
  X(large_arena_bytes_in_use, "bytes handed out from the arenas")                               \
  X(large_mappings, "blocks above 32 MiB, one mapping each")                                    \
  X(large_mapping_bytes, "bytes of those mappings")                                             \
  X(large_cached, "freed large mappings kept for reuse")                                        \
  X(large_cached_bytes, "bytes of those")                                                       \
  X(allocs, "allocations (statistics build only)")                                              \
  X(frees, "frees (statistics build only)")                                                     \
  X(slow_allocs, "allocations that left the fast path (statistics build only)")                 \
  X(refills, "thread-cache refills (statistics build only)")                                    \
  X(remote_frees, "frees of blocks owned by another thread (statistics build only)")            \
  X(threads_exited, "threads whose counters were merged at exit (statistics build only)")

/* Version 2: memory return, after the classes array. */
#define HAK_STATS_FIELDS_V2(X)                                                                              \
  X(heap_idle_bytes, "free slabs of thread heaps still resident (reused warm)")                            \
  X(decayed_bytes, "decommitted by the purge: idle for the purge delay, or early (grow_purged_bytes)")     \
  X(collected_bytes, "decommitted on request: hak_collect, malloc_trim, purge, out-of-memory retry")       \
  X(bg_thread_running, "1 while the background purge thread runs")                                         \
  X(bg_passes, "purge passes the background thread made")                                                  \
  X(purge_lock_busy, "times a purge found a heap's lock taken and skipped it")                             \
  X(heap_idle_max_bytes, "the most idle resident bytes one thread heap holds")                             \
  X(heap_idle_heaps, "thread heaps holding any")

/* Version 3: where the resident bytes go (docs/stats.md, "Where the
 * resident bytes go"). The rss_ fields split resident_bytes: they add up
 * to it exactly. Computed with mincore over hakmem's own regions, so a
 * snapshot costs a system call per 4 MiB (never on a hot path). */
#define HAK_STATS_FIELDS_V3(X)                                                                                  \
  X(resident_bytes, "hakmem's resident bytes: its mappings' resident pages (mincore) and the ownership map's") \
  X(mapped_walked_bytes, "mapped bytes the walk found region by region (equals mapped_bytes when quiet)")      \
  X(rss_requested_bytes, "resident bytes of live blocks less rss_rounding_bytes: what the program asked for")  \
  X(rss_rounding_bytes, "rounding of live blocks: size classes' modelled (half the class gap), arena blocks' measured")   \
  X(rss_free_block_bytes, "free blocks carved in slabs in use (at least: live blocks count first)")             \
  X(rss_uncarved_bytes, "pages of slabs in use not yet carved into blocks, and slab tails no block fits")      \
  X(rss_free_slab_bytes, "free slabs of live superslabs (thread heaps' and abandoned) awaiting the decay")      \
  X(rss_large_free_bytes, "free spans of the large arenas awaiting the decay")                                 \
  X(rss_cached_bytes, "cached empty superslabs and cached large mappings")                                     \
  X(rss_thread_cache_bytes, "blocks freed by other threads not yet collected: pending, thread_free, delayed lists") \
  X(rss_metadata_bytes, "superslab headers, arena descriptors, heap structs, profiler tables, ownership map")   \
  X(process_rss_bytes, "the whole process's resident bytes (/proc/self/statm)")                                \
  X(rss_other_bytes, "process_rss_bytes - resident_bytes: program, libraries, stacks, TLS (0 if below)")

/* Version 5: where rss_thread_cache_bytes waits, which says who collects
 * it. The tc_ fields add up to rss_thread_cache_bytes exactly. */
#define HAK_STATS_FIELDS_V5(X)                                                                           \
  X(tc_pending_bytes, "of rss_thread_cache_bytes: batches waiting in the freeing threads' caches")      \
  X(tc_current_bytes, "of rss_thread_cache_bytes: published to slabs their owner allocates from now")   \
  X(tc_other_bytes, "of rss_thread_cache_bytes: published to other slabs of live thread heaps")        \
  X(tc_abandoned_bytes, "of rss_thread_cache_bytes: published to slabs of superslabs no thread owns")

/* Version 6: the thread-held blocks that versions 3 to 5 counted as
 * requested (freed by other threads into full slabs, on the owner heap's
 * delayed list); rss_thread_cache_bytes includes them. */
#define HAK_STATS_FIELDS_V6(X) \
  X(tc_delayed_bytes, "of rss_thread_cache_bytes: freed into full slabs, on their owner heap's delayed list")

/* Version 7: how much of decayed_bytes did not wait out the purge delay. */
#define HAK_STATS_FIELDS_V7(X) \
  X(grow_purged_bytes, "of decayed_bytes: given back before the delay by threads about to map new memory")

/* Version 8: the large blocks' rounding, measured rather than modelled. */
#define HAK_STATS_FIELDS_V8(X) \
  X(rss_large_rounding_bytes, "of rss_rounding_bytes: resident pages of live arena blocks past the bytes asked for")

/* Version 9: what idle threads' heaps handed to the working threads. */
#define HAK_STATS_FIELDS_V9(X) \
  X(superslabs_handed_over, "superslabs idle threads gave to the abandoned list while others freed into them (so far)")

#define HAK_STATS_FIELD_(name, text) size_t name;
struct hak_class_stats {
  HAK_CLASS_STATS_FIELDS(HAK_STATS_FIELD_)
};

struct hak_stats {
  size_t size;      /* in: sizeof(struct hak_stats) */
  unsigned version; /* out: HAK_STATS_VERSION */
  unsigned nclasses; /* out: classes filled in */
  HAK_STATS_FIELDS_V1(HAK_STATS_FIELD_)
  struct hak_class_stats classes[HAK_STATS_CLASSES];
  HAK_STATS_FIELDS_V2(HAK_STATS_FIELD_)
  HAK_STATS_FIELDS_V3(HAK_STATS_FIELD_)
  HAK_STATS_FIELDS_V5(HAK_STATS_FIELD_)
  HAK_STATS_FIELDS_V6(HAK_STATS_FIELD_)
  HAK_STATS_FIELDS_V7(HAK_STATS_FIELD_)
  HAK_STATS_FIELDS_V8(HAK_STATS_FIELD_)
  HAK_STATS_FIELDS_V9(HAK_STATS_FIELD_)
};
#undef HAK_STATS_FIELD_

HAK_API int hak_stats_get(struct hak_stats *out); /* 0, or -1 if out->size is too small */
HAK_API void hak_stats_print(FILE *out);

/* Sampled heap profile (needs HAKMEM_PROF=1; docs/profiling.md): writes
 * PATH.heap (gperftools' heap-profile format: `pprof --text PROGRAM
 * PATH.heap`), PATH.folded (one line per stack, "outer;...;inner bytes",
 * for flame-graph tools) and PATH.txt (top stacks by estimated live
 * bytes). path NULL: HAKMEM_PROF_FILE or hakmem-prof.PID. Returns 0, or -1
 * if profiling is off or PATH.heap cannot be written (errno ENAMETOOLONG if
 * path is PATH_MAX bytes or longer). */
HAK_API int hak_prof_dump(const char *path);

/* Control and introspection by name, in the manner of jemalloc's mallctl
 * (docs/ctl.md lists every name). Reading: oldp points to a variable of
 * the name's type and *oldlenp holds its size; with oldp NULL and oldlenp
 * set, only the size is returned. Writing: newp points to the new value,
 * newlen is its size. Returns 0 or an error number (errno is not set):
 *   ENOENT  no such name;
 *   EINVAL  a size that is not the type's, or a value out of range;
 *   EPERM   reading a write-only name, writing a read-only one, or
 *           passing a value to an action; prof.* without HAKMEM_PROF=1;
 *   EFAULT  prof.dump could not write its files.
 * Names:
 *   "version"              const char *, read
 *   "stats.<field>"        size_t, read: any field of struct hak_stats,
 *                          fresh at each call ("stats.mapped_bytes", ...)
 *   "stats.version", "stats.nclasses"              unsigned, read
 *   "stats.classes.<i>.<field>"  size_t, read (i < stats.nclasses)
 *   "opt.<field>"          read: any option (docs/options.md), its type
 *   "opt.purge_delay_ms"   uint64_t, read/write: the decay window
 *   "purge"                action: return everything idle now (hak_collect(1))
 *   "thread.flush"         action: give back what the calling thread holds
 *   "prof.active"          bool, read/write: sampling on or off
 *   "prof.sample"          size_t, read/write: mean bytes between samples
 *   "prof.dump"            const char *, write: dump to this path prefix
 *                          (NULL: the default prefix)
 *   "prof.dumps"           uint64_t, read: numbered dumps written so far */
HAK_API int hak_ctl(const char *name, void *oldp, size_t *oldlenp, const void *newp, size_t newlen);

/* "MAJOR.MINOR.PATCH" plus build flavour, e.g. "0.1.0 release". */
HAK_API const char *hak_version(void);

#ifdef __cplusplus
}
#endif

#endif /* HAKMEM_H */
