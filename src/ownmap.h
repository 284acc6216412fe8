/*
 * ownmap.h — "is this pointer hakmem's?" in one load.
 *
 * Owns: a byte per 4 MiB of the 48-bit address space (64 MiB of zero-fill
 * BSS, touched only where hakmem maps). Promises: an entry is nonzero only
 * while hakmem owns the region: the slab shift (16, 19 or 22) for a superslab,
 * OWN_LARGE for a region of a large arena, OWN_LARGE_MAP / OWN_LARGE_FAR for
 * a dedicated large mapping whose user pointer lies in that region. Entries
 * are written only by superslab.c and large.c.
 * May call: nothing.
 */
#ifndef HAK_OWNMAP_H
#define HAK_OWNMAP_H

#include "internal.h"

#define HAK_OWNMAP_BITS 26 /* 48-bit addresses / 4 MiB regions */
#define OWN_NONE 0
#define OWN_LARGE 1     /* arena region: mapped whole while the arena lives */
#define OWN_LARGE_FAR 2 /* dedicated mapping, pointer aligned to >= 4 MiB */
#define OWN_LARGE_MAP 3 /* dedicated mapping starting at the region's base */

extern uint8_t ownmap_table[(size_t)1 << HAK_OWNMAP_BITS];

HAK_INLINE size_t ownmap_index(uintptr_t a) {
  return (a >> HAK_SS_SHIFT) & (((size_t)1 << HAK_OWNMAP_BITS) - 1);
}
/* Relaxed atomic: the same single byte load, but well-defined while another
 * thread maps or unmaps an unrelated block in the same region. */
HAK_INLINE unsigned ownmap_load(uintptr_t a) {
  return __atomic_load_n(&ownmap_table[ownmap_index(a)], __ATOMIC_RELAXED);
}
HAK_INLINE unsigned ownmap_get(const void *p) {
  uintptr_t a = (uintptr_t)p;
  /* Addresses above 48 bits are never hakmem's (mappings come from the
   * kernel's default range), but must not alias a low entry. */
  if (HAK_UNLIKELY(a >> (HAK_SS_SHIFT + HAK_OWNMAP_BITS))) return OWN_NONE;
  return ownmap_load(a);
}
HAK_INLINE void ownmap_set(const void *p, unsigned v) {
  __atomic_store_n(&ownmap_table[ownmap_index((uintptr_t)p)], (uint8_t)v, __ATOMIC_RELEASE);
}

#endif
