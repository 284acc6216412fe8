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

/* alignment: a power of two. hak_aligned_alloc accepts any size (C17 rule). */
HAK_API HAK_MALLOC_ATTR void *hak_aligned_alloc(size_t alignment, size_t size);
HAK_API HAK_MALLOC_ATTR void *hak_memalign(size_t alignment, size_t size);
/* Returns 0, EINVAL (alignment not a power of two multiple of sizeof(void*))
 * or ENOMEM; errno is not changed. */
HAK_API int hak_posix_memalign(void **out, size_t alignment, size_t size);
HAK_API HAK_MALLOC_ATTR void *hak_valloc(size_t size);
HAK_API HAK_MALLOC_ATTR void *hak_pvalloc(size_t size);

/* Bytes usable at ptr (>= the size requested); 0 for NULL. */
HAK_API size_t hak_usable_size(const void *ptr);

/* Nonzero if ptr lies in memory hakmem manages (one table load). */
HAK_API int hak_owns(const void *ptr);

/* Release memory held in caches and free slabs back to the OS now. */
HAK_API void hak_collect(int force);

/* Statistics (docs/stats.md explains every field). Always available at no
 * hot-path cost: OS-level figures and per-class figures computed on demand
 * from slab metadata (a snapshot: other threads keep running). The event
 * counters (allocs .. slow_allocs) are nonzero only in a statistics build
 * (-DHAKMEM_STATS=ON). Versioned: set size = sizeof(struct hak_stats)
 * before calling; fields beyond the caller's size are not written. */
#define HAK_STATS_VERSION 2
#define HAK_STATS_CLASSES 64

struct hak_class_stats {
  size_t block_size;      /* bytes per block */
  size_t slabs;           /* slabs serving the class */
  size_t blocks_in_use;   /* handed out (or freed remotely, not yet collected) */
  size_t blocks_capacity; /* blocks those slabs hold */
  size_t allocs, frees;   /* statistics build only */
};

struct hak_stats {
  size_t size;            /* in: sizeof(struct hak_stats) */
  unsigned version;       /* out: HAK_STATS_VERSION */
  unsigned nclasses;      /* out: classes filled in */
  /* OS level */
  size_t mapped_bytes, mapped_peak_bytes, purged_bytes;
  size_t mmap_calls, munmap_calls, madvise_calls, mremap_calls;
  size_t superslabs, superslabs_abandoned, superslabs_cached;
  /* small blocks (size classes) */
  size_t small_bytes_in_use, small_bytes_reserved;
  /* large blocks */
  size_t large_arenas, large_arena_bytes_in_use;
  size_t large_mappings, large_mapping_bytes, large_cached, large_cached_bytes;
  /* statistics build (zero otherwise) */
  size_t allocs, frees, slow_allocs, refills, remote_frees, threads_exited;
  struct hak_class_stats classes[HAK_STATS_CLASSES];
  /* version 2: memory return (docs/stats.md) */
  size_t heap_idle_bytes;      /* free slabs of thread heaps still resident (reused warm) */
  size_t decayed_bytes;        /* decommitted after idling for the purge delay */
  size_t collected_bytes;      /* decommitted on request: hak_collect, malloc_trim, out-of-memory retry */
  size_t bg_thread_running;    /* 1 while the background purge thread runs */
  size_t bg_passes;            /* purge passes the background thread made */
  size_t purge_lock_busy;      /* times a purge found a heap's lock taken and skipped it */
  size_t heap_idle_max_bytes;  /* the most idle resident bytes one thread heap holds */
  size_t heap_idle_heaps;      /* thread heaps holding any */
};

HAK_API int hak_stats_get(struct hak_stats *out); /* 0, or -1 if out->size is too small */
HAK_API void hak_stats_print(FILE *out);

/* Sampled heap profile (needs HAKMEM_PROF=1): writes PATH.folded (one line
 * per stack, "outer;...;inner bytes", for flame-graph tools) and PATH.txt
 * (top stacks by estimated live bytes). path NULL: HAKMEM_PROF_FILE or
 * hakmem-prof.PID. Returns 0, or -1 if profiling is off. */
HAK_API int hak_prof_dump(const char *path);

/* "MAJOR.MINOR.PATCH" plus build flavour, e.g. "0.1.0 release". */
HAK_API const char *hak_version(void);

#ifdef __cplusplus
}
#endif

#endif /* HAKMEM_H */
