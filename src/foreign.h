/*
 * foreign.h — memory that is not hakmem's.
 *
 * Owns: forwarding to the allocator that was there before hakmem (glibc's
 * own entry points, found in its symbol table, or RTLD_NEXT elsewhere), used
 * by HAKMEM_FORCE_LIBC_ALLOC and for pointers hakmem does not own.
 * Promises: never allocates from hakmem.
 * May call: os, options, the C library's allocator.
 */
#ifndef HAK_FOREIGN_H
#define HAK_FOREIGN_H

#include "internal.h"

void *foreign_malloc(size_t size);
void *foreign_calloc(size_t n, size_t size);
void *foreign_realloc(void *p, size_t size);
void *foreign_memalign(size_t align, size_t size);
void foreign_free(void *p);
size_t foreign_usable_size(void *p);
/* Could p be a live block of the C library's allocator? True under the
 * bypass; otherwise only if glibc holds blocks at all and p's chunk header
 * is readable and well-formed. */
bool foreign_owns(const void *p);

#endif
