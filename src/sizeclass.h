/*
 * sizeclass.h — request size -> size class, and each class's geometry.
 *
 * Owns: the 64 classes: 16..128 B in 16 B steps, then four classes per
 * power of two up to 1 MiB (worst internal waste 20 %, 24 % at 129 B),
 * but eight between 4 and 8 KiB (12 %): a page plus a header (a
 * database's 4 KiB page and its descriptor, sqlite's page cache) would
 * waste 15 % of a 5 KiB block, and is as common as any size above 1 KiB.
 * Promises: sc_of() uses no loops and no searches — a 16 B-bucket table
 * up to 1 KiB, a 256 B-bucket table up to 64 KiB, leading-zero arithmetic
 * above; block sizes are multiples of 16, so every block is 16-byte
 * aligned. May call: nothing.
 */
#ifndef HAK_SIZECLASS_H
#define HAK_SIZECLASS_H

#include "internal.h"

extern uint8_t sc_bucket_class[HAK_DIRECT_N]; /* bucket (size+15)/16 -> class */
extern uint32_t sc_size[HAK_NCLASS];          /* block size of each class */
extern uint16_t sc_batch[HAK_NCLASS];         /* blocks carved per refill */
extern uint8_t sc_bucket_lo[HAK_NCLASS], sc_bucket_hi[HAK_NCLASS]; /* direct buckets, lo>hi: none */
/* Above 1 KiB every class boundary is a multiple of 256 B: up to
 * SC_MID_MAX a 256 B-bucket table replaces the leading-zero arithmetic
 * (5 instructions instead of 10 on every allocation of 1..64 KiB). */
#define SC_MID_MAX ((size_t)65536)
extern uint8_t sc_mid_class[SC_MID_MAX >> 8]; /* bucket (size-1)/256 -> class */

#define HAK_CLASS_MEDIUM_FIRST 24 /* classes >= this (2.5 KiB..) live in 512 KiB slabs */
#define HAK_CLASS_BIG_FIRST 48    /* classes >= this (80 KiB..) in 4 MiB slabs */
/* The classes between 4 and 8 KiB that the four-per-power rule leaves
 * out (4.5, 5.5, 6.5 and 7.5 KiB): every class above 8 KiB is that many
 * places further on than the rule says. */
#define SC_FINE_EXTRA 4

/* refill_bytes: HAKMEM_REFILL_BYTES, the bytes one carve batch covers. */
void sc_init(size_t refill_bytes);

/* Class of the sizes 8 KiB+1 B..1 MiB by arithmetic: s = size-1 lies in
 * [2^b, 2^(b+1)); the two bits below the top pick one of four classes,
 * after the eight of 4..8 KiB. (sc_init builds the tables below 64 KiB
 * from sc_size itself.) */
HAK_INLINE unsigned sc_of_arith(size_t size) {
  size_t s = size - 1;
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)s);
  return SC_FINE_EXTRA + 8u + (b - 7u) * 4u + (unsigned)((s >> (b - 2u)) & 3u);
}

/* size <= HAK_SMALL_MAX */
HAK_INLINE unsigned sc_of(size_t size) {
  if (size <= HAK_FAST_MAX) return sc_bucket_class[(size + 15) >> 4];
  if (size <= SC_MID_MAX) return sc_mid_class[(size - 1) >> 8];
  return sc_of_arith(size);
}

/* Superslab kind serving a class: small, medium or big slabs (the values
 * of superslab.h's SS_KIND_SMALL, _MEDIUM and _BIG, which this layer below
 * it cannot name). */
enum { SC_KIND_SMALL = 0, SC_KIND_MEDIUM = 1, SC_KIND_BIG = 2 };
HAK_INLINE unsigned sc_kind(unsigned cls) {
  return cls >= HAK_CLASS_BIG_FIRST ? SC_KIND_BIG : cls >= HAK_CLASS_MEDIUM_FIRST ? SC_KIND_MEDIUM : SC_KIND_SMALL;
}

#endif
