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

/* "MAJOR.MINOR.PATCH" plus build flavour, e.g. "0.1.0 release". */
HAK_API const char *hak_version(void);

#ifdef __cplusplus
}
#endif

#endif /* HAKMEM_H */
