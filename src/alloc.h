/*
 * alloc.h — the generic (non-inlined) side of every entry point.
 *
 * Owns: the semantics of calloc, realloc, aligned allocation, usable size
 * and sized free on top of the fast paths, the foreign/large/small dispatch
 * by the ownership map, and the HAKMEM_FORCE_LIBC_ALLOC bypass. Promises:
 * standard errno behaviour (ENOMEM, EINVAL); each function here checks the
 * bypass before touching any hakmem state.
 * May call: front, heap, remote, large, foreign, init, sizeclass, ownmap,
 * superslab, decay, prof.
 */
#ifndef HAK_ALLOC_H
#define HAK_ALLOC_H

#include "internal.h"

void *alloc_calloc(size_t n, size_t size);
void *alloc_realloc(void *p, size_t size);
void *alloc_reallocarray(void *p, size_t n, size_t size);
/* align must be a power of two (callers validate). */
void *alloc_aligned(size_t align, size_t size);
int alloc_posix_memalign(void **out, size_t align, size_t size);
void *alloc_aligned_alloc(size_t align, size_t size);
void *alloc_valloc(size_t size);
void *alloc_pvalloc(size_t size);
size_t alloc_usable_size(const void *p);
void alloc_free_sized(void *p, size_t size);
void alloc_collect(bool force);

#endif
