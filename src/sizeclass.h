/*
 * sizeclass.h — request size -> size class, and each class's geometry.
 *
 * Owns: the 72 classes: 16..128 B in 16 B steps, then four classes per
 * power of two up to 1 MiB (worst internal waste 20 %, 24 % at 129 B),
 * but eight between 256 and 512 B and between 4 and 8 KiB (11-12 %),
 * and one more just above 512 B,
 * 1, 2 and 4 KiB: at 17/16 of the power (544, 1088, 2176 B), and at
 * 4 KiB + 320 B (4416 B: sqlite's page cache entry, a 4 KiB page and 272 B
 * of headers, 92 % of its live blocks at its peak, took 4608 B blocks at
 * 4352 B + 1; real_sqlite's peak 59.1 -> 57.7 MiB, glibc 53.6).
 * Both extras serve a power of two plus a header, the commonest size a
 * program asks for that is not a power of two: a buffer and its
 * descriptor (sqlite's 1032 B and 4104 B page buffers took 1280 B and
 * 4608 B blocks, 4.5 % of its peak RSS; Ruby asks for 513..544 B with
 * 4.6 % of its bytes); a 4 KiB page and a header of a few hundred bytes
 * (a database's page cache) would waste 15 % of a 5 KiB block. The 17/16
 * classes stop at 4 KiB: above, each was a slab of its own per thread and
 * class for sizes programs rarely ask for (8.5..544 KiB cost
 * bench_mid_large_mt 2.5 % of its speed and 5 % of its peak RSS), and
 * none sits at 272 B: the measured programs put 0.03..0.19 % of their
 * bytes in 257..272 B, and every class is one more slab per thread.
 * 256..512 B has eight because one object size can be most of a program's
 * heap: jq's 392 B objects took 448 B blocks (peak 305 MiB against glibc's
 * 277), 416 B now (289). Eight per power from 256 B to 2 KiB were measured
 * too: larson_sized (8..1000 B, 2 threads) peaked at 21.8 MiB against 15.0;
 * 256..512 alone left every bench row within noise.
 * Promises: sc_of() uses no loops and no searches — a 16 B-bucket table
 * up to 4352 B, a 64 B-bucket table up to 64 KiB, leading-zero arithmetic
 * above; block sizes are multiples of 16, so every block is 16-byte
 * aligned. May call: nothing.
 */
#ifndef HAK_SIZECLASS_H
#define HAK_SIZECLASS_H

#include "internal.h"

extern uint8_t sc_bucket_class[HAK_DIRECT_N]; /* bucket (size+15)/16 -> class */
extern uint32_t sc_size[HAK_NCLASS];          /* block size of each class */
extern uint16_t sc_batch[HAK_NCLASS];         /* blocks carved per refill */
extern uint16_t sc_bucket_lo[HAK_NCLASS], sc_bucket_hi[HAK_NCLASS]; /* direct buckets, lo>hi: none */
/* Above 1 KiB every class boundary is a multiple of 64 B (so the 16 B
 * table's buckets up to HAK_FAST_MAX never straddle two classes): up to
 * SC_MID_MAX a 64 B-bucket table replaces the leading-zero arithmetic
 * (5 instructions instead of 10 on every slow allocation of 4..64 KiB). */
#define SC_MID_SHIFT 6
#define SC_MID_MAX ((size_t)65536)
extern uint8_t sc_mid_class[SC_MID_MAX >> SC_MID_SHIFT]; /* bucket (size-1)/64 -> class */
#define SC_POW2_LG_MAX 20 /* log2 of HAK_SLAB_ALIGN_MAX and of the largest class */
extern uint8_t sc_pow2_class[SC_POW2_LG_MAX + 1]; /* log2 of a power of two >= 16 -> its class */

#define HAK_CLASS_MEDIUM_FIRST 31 /* classes >= this (2.5 KiB..) live in 512 KiB slabs */
#define HAK_CLASS_WIDE_FIRST 43   /* classes >= this (8 KiB..) in 1 MiB slabs */
#define HAK_CLASS_BIG_FIRST 56    /* classes >= this (80 KiB..) in 4 MiB slabs */
/* Above 8 KiB every power of two has four classes, 5/4, 3/2, 7/4 and 2
 * times the power below; SC_OCTAVE_13 is the first of 8..16 KiB's (10 KiB).
 * sc_init checks these constants against the table it builds. */
#define SC_OCTAVE_13 44

/* refill_bytes: HAKMEM_REFILL_BYTES, the bytes one carve batch covers. */
void sc_init(size_t refill_bytes);

/* Class of the sizes 8 KiB+1 B..1 MiB by arithmetic: s = size-1 lies in
 * [2^b, 2^(b+1)); the two bits below the top pick one of four classes.
 * (sc_init builds the tables below 64 KiB from sc_size itself.) */
HAK_INLINE unsigned sc_of_arith(size_t size) {
  size_t s = size - 1;
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)s);
  return SC_OCTAVE_13 + (b - 13u) * 4u + (unsigned)((s >> (b - 2u)) & 3u);
}

/* size <= HAK_SMALL_MAX */
HAK_INLINE unsigned sc_of(size_t size) {
  if (size <= HAK_FAST_MAX) return sc_bucket_class[(size + 15) >> 4];
  if (size <= SC_MID_MAX) return sc_mid_class[(size - 1) >> SC_MID_SHIFT];
  return sc_of_arith(size);
}

/* The class for size bytes aligned to align (a power of two from 32 B
 * up to HAK_SLAB_ALIGN_MAX; size <= HAK_SMALL_MAX): the first class at
 * least max(size, align) whose block size is a multiple of align. Slab
 * areas are aligned to 64 KiB (1 MiB for the classes above 64 KiB), so
 * every block of such a class is aligned; every power of two is a class
 * (sc_pow2_class), so waste stays below the size or the alignment,
 * whichever is larger. Not sc_of(max(size, align)) and a walk up from
 * there: with random alignments, which of sc_of's tables the maximum
 * fell in and how far the walk went both mispredicted (bench_aligned:
 * 295 k mispredicted branches per 200 k iterations, 223 k this way). A
 * block no larger than its alignment takes the power-of-two class; a
 * larger one starts from its own class, whose octave's classes are
 * multiples of a quarter of it, so the walk rarely runs. */
HAK_INLINE unsigned sc_of_aligned(size_t size, size_t align) {
  unsigned cls = sc_of(size), p2 = sc_pow2_class[__builtin_ctzll((unsigned long long)align)];
  cls = size <= align ? p2 : cls;
  while (HAK_UNLIKELY(sc_size[cls] & (align - 1))) cls++;
  return cls;
}

/* Superslab kind serving a class: small, medium, wide or big slabs (the
 * values of superslab.h's SS_KIND_SMALL, _MEDIUM, _WIDE and _BIG, which
 * this layer below it cannot name; internal.h gives their slab sizes). */
enum { SC_KIND_SMALL = 0, SC_KIND_MEDIUM = 1, SC_KIND_WIDE = 2, SC_KIND_BIG = 3 };
HAK_INLINE unsigned sc_kind(unsigned cls) {
  return cls >= HAK_CLASS_BIG_FIRST    ? SC_KIND_BIG
         : cls >= HAK_CLASS_WIDE_FIRST ? SC_KIND_WIDE
         : cls >= HAK_CLASS_MEDIUM_FIRST ? SC_KIND_MEDIUM
                                         : SC_KIND_SMALL;
}

#endif
