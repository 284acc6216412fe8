/*
 * ownmap.h — "is this pointer hakmem's, and which slab is it in?" in one load.
 *
 * Owns: an 8-byte entry per 4 MiB of the 47-bit user address space (256 MiB
 * of zero-fill BSS, touched only where hakmem maps: a 4 KiB page of entries
 * per 2 GiB). Promises: an entry is nonzero only while hakmem owns the
 * region. Its low six bits are the region's code: the slab shift (16, 19 or
 * 22) for a superslab, OWN_LARGE for a region of a large arena,
 * OWN_LARGE_MAP / OWN_LARGE_FAR for a dedicated large mapping whose user
 * pointer lies in that region. A superslab's entry also carries, in the
 * bits above the seventh, where its slab descriptors are as seen from a
 * pointer shifted by the slab shift (ownmap_slab_at): free's hit path gets
 * p's descriptor from the entry, p, a shift, a shift and an add, without
 * first splitting p into the superslab's base and the offset in it (two
 * instructions fewer on x86-64). Entries are written only by superslab.c
 * and large.c.
 * May call: nothing.
 */
#ifndef HAK_OWNMAP_H
#define HAK_OWNMAP_H

#include "internal.h"

#define HAK_OWNMAP_BITS 25 /* 47-bit user addresses / 4 MiB regions */
#define OWN_NONE 0
#define OWN_LARGE 1     /* arena region: mapped whole while the arena lives */
#define OWN_LARGE_FAR 2 /* dedicated mapping, pointer aligned to >= 4 MiB */
#define OWN_LARGE_MAP 3 /* dedicated mapping starting at the region's base */
#define OWN_CODE_MASK 63
/* Where a superslab's slab descriptors start and how far apart they are
 * (superslab.h asserts both against its layout). */
#define OWN_DESC_OFFSET (128 + 32 * 64) /* past the header and its tfree[] */
#define OWN_DESC_SHIFT 7

extern uint64_t ownmap_table[(size_t)1 << HAK_OWNMAP_BITS];

HAK_INLINE size_t ownmap_index(uintptr_t a) {
  return (a >> HAK_SS_SHIFT) & (((size_t)1 << HAK_OWNMAP_BITS) - 1);
}
/* The raw entry (relaxed atomic: the same single load, but well-defined
 * while another thread maps or unmaps an unrelated block in the region). */
HAK_INLINE uint64_t ownmap_entry(uintptr_t a) {
  return __atomic_load_n(&ownmap_table[ownmap_index(a)], __ATOMIC_RELAXED);
}
HAK_INLINE unsigned ownmap_code(uint64_t e) { return (unsigned)(e & OWN_CODE_MASK); }
/* A superslab's entry: its low byte is its shift (bit 7 may be set), at
 * least 16; every other entry's low byte is a code below 16. */
HAK_INLINE bool ownmap_is_slab(uint64_t e) { return (uint8_t)e >= HAK_SMALL_SLAB_SHIFT; }
/* The descriptor of the slab holding a, a superslab's entry e: with base
 * the superslab's address and k its shift, e = base + OWN_DESC_OFFSET -
 * ((base >> k) << 7) + k, so e - k + ((a >> k) << 7) = base +
 * OWN_DESC_OFFSET + (((a - base) >> k) << 7) (base is 4 MiB-aligned and
 * k <= 22, so a >> k splits exactly). x86 shifts use the count's low six
 * bits, which are k. */
HAK_INLINE uintptr_t ownmap_slab_at(uint64_t e, uintptr_t a) {
  return (uintptr_t)(e & ~(uint64_t)((1u << OWN_DESC_SHIFT) - 1)) +
         ((a >> (e & OWN_CODE_MASK)) << OWN_DESC_SHIFT);
}
HAK_INLINE unsigned ownmap_load(uintptr_t a) { return ownmap_code(ownmap_entry(a)); }
HAK_INLINE unsigned ownmap_get(const void *p) {
  uintptr_t a = (uintptr_t)p;
  /* Addresses above 47 bits are never hakmem's (mappings come from the
   * kernel's default range), but must not alias a low entry. */
  if (HAK_UNLIKELY(a >> (HAK_SS_SHIFT + HAK_OWNMAP_BITS))) return OWN_NONE;
  return ownmap_load(a);
}
/* v: a code, or a superslab's slab shift with p its base. */
HAK_INLINE void ownmap_set(const void *p, unsigned v) {
  uint64_t e = v;
  if (v >= HAK_SMALL_SLAB_SHIFT) {
    uintptr_t base = (uintptr_t)p & ~(uintptr_t)HAK_SS_MASK;
    e = (uint64_t)base + OWN_DESC_OFFSET - ((uint64_t)(base >> v) << OWN_DESC_SHIFT) + v;
  }
  __atomic_store_n(&ownmap_table[ownmap_index((uintptr_t)p)], e, __ATOMIC_RELEASE);
}

#endif
