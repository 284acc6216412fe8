/*
 * alloc.h — the generic (non-inlined) side of every entry point.
 *
 * Owns: the one slow path each way (alloc_slow, free_slow: front.h; and
 * free_other, the remote free with the slab already known), the
 * semantics of calloc, realloc, aligned allocation, usable size and sized
 * free on top of the fast paths, the foreign/large/small dispatch by the
 * ownership map, the checks of a freed pointer the fast path did not take
 * (interior, double, freed), and the HAKMEM_FORCE_LIBC_ALLOC bypass.
 * Promises: standard errno behaviour (ENOMEM, EINVAL); a bad pointer is
 * reported with the call's name and never reaches a free list; the bypass
 * is checked before any hakmem state is touched.
 * May call: front, heap, remote, large, foreign, init, sizeclass, ownmap,
 * superslab, decay, prof, report, options, os.
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
void *alloc_memalign(size_t align, size_t size);
void *alloc_aligned_alloc(size_t align, size_t size);
void *alloc_valloc(size_t size);
void *alloc_pvalloc(size_t size);
size_t alloc_usable_size(const void *p);
void alloc_free_sized(void *p, size_t size);
void alloc_collect(bool force);
/* hak_ctl's thread.purge_delay_ms (heap_self_purge_delay_ms). */
uint64_t alloc_thread_purge_delay_ms(void);

#endif
