/*
 * bench_tag.h — blocks that check themselves, for the benchmarks whose blocks
 * are freed by another thread than the one that wrote them (bench_xfer.h's
 * users, larson.c and larson_sized.cpp). C and C++: larson_sized includes it
 * without bench_xfer.h, whose ring needs C11 atomics.
 *
 * xfer_tag() writes into a fresh block of SIZE >= 8 bytes the block's own
 * address mixed with a key (first word) and the low byte of that value into
 * the last byte; xfer_check() verifies both before the block is freed (the
 * last byte only when the size is known). An allocator that hands one block
 * out twice, or returns memory that another thread still writes, trips the
 * check: the program then exits with status 3 and no RESULT line, so
 * bench/run.sh records the run as failed. Every function but the report of a
 * corrupted block is static inline: they run inside the measured loops.
 */
#ifndef HAKMEM_BENCH_TAG_H
#define HAKMEM_BENCH_TAG_H

#include "bench_common.h"

#define XFER_KEY 0x9d3c5a17e4b2f681ULL
/* also larson_sized.cpp's, whose check is its own */
#define XFER_CORRUPT_MSG "bench: block %p (size %zu) corrupted: its tag was overwritten\n"

static inline uint64_t xfer_tag_value(const void *p)
{
    return (uint64_t)(uintptr_t)p ^ XFER_KEY;
}

static inline void xfer_tag(void *p, size_t size)
{
    uint64_t v = xfer_tag_value(p);
    memcpy(p, &v, 8);
    ((unsigned char *)p)[size - 1] = (unsigned char)(v >> 56);
}

static BENCH_UNUSED BENCH_NOINLINE void xfer_corrupt(const void *p, size_t size)
{
    fprintf(stderr, XFER_CORRUPT_MSG, p, size);
    exit(3);
}

/* size 0 = unknown: check the first word only. Returns a byte for a checksum. */
static inline unsigned xfer_check(const void *p, size_t size)
{
    uint64_t v;
    memcpy(&v, p, 8);
    if (BENCH_UNLIKELY(v != xfer_tag_value(p)))
        xfer_corrupt(p, size);
    if (size && BENCH_UNLIKELY(((const unsigned char *)p)[size - 1] != (unsigned char)(v >> 56)))
        xfer_corrupt(p, size);
    return (unsigned)(v >> 56);
}

/* A size in [min, max], uniform. */
static inline size_t xfer_size(uint64_t r, size_t min, size_t max)
{
    return BENCH_UNIFORM(r, min, (uint64_t)(max - min) + 1);
}

#endif /* HAKMEM_BENCH_TAG_H */
