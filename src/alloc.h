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

void *hak_calloc_impl(size_t n, size_t size);
void *hak_realloc_impl(void *p, size_t size);
void *hak_reallocarray_impl(void *p, size_t n, size_t size);
/* align must be a power of two (callers validate). */
void *hak_aligned_impl(size_t align, size_t size);
int hak_posix_memalign_impl(void **out, size_t align, size_t size);
void *hak_aligned_alloc_impl(size_t align, size_t size);
void *hak_valloc_impl(size_t size);
void *hak_pvalloc_impl(size_t size);
size_t hak_usable_size_impl(const void *p);
void hak_free_sized_impl(void *p, size_t size);
void hak_collect_impl(bool force);

#endif
