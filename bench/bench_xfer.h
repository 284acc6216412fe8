/*
 * bench_xfer.h — helpers of the cross-thread benchmarks: blocks that check
 * themselves and a single-producer single-consumer ring of batches.
 *
 * Tagged blocks: xfer_tag() writes into a fresh block of SIZE >= 8 bytes the
 * block's own address mixed with a key (first word) and the low byte of that
 * value into the last byte; xfer_check() verifies both before the block is
 * freed (the last byte only when the size is known). An allocator that hands
 * one block out twice, or returns memory that another thread still writes,
 * trips the check: the program then exits with status 3 and no RESULT line,
 * so bench/run.sh records the run as failed.
 *
 * Batch ring: one producer thread publishes batches of up to BATCH pointers,
 * one consumer thread takes them. Batch storage is allocated once up front,
 * outside the measured part, so the ring itself does not call the allocator.
 */
#ifndef HAKMEM_BENCH_XFER_H
#define HAKMEM_BENCH_XFER_H

#include "bench_common.h"
#include <sched.h>
#include <stdatomic.h>

#define XFER_KEY 0x9d3c5a17e4b2f681ULL

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

static BENCH_NOINLINE void xfer_corrupt(const void *p, size_t size)
{
    fprintf(stderr, "bench: block %p (size %zu) corrupted: its tag was overwritten\n", p, size);
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

static inline void xfer_pause(unsigned *spins)
{
    if (++*spins < 64)
        __asm__ volatile("" ::: "memory");
    else {
        *spins = 0;
        sched_yield();
    }
}

typedef struct xfer_ring {
    /* consumer's line: batches taken, and its copy of tail */
    _Alignas(64) atomic_uint_fast64_t head;
    uint64_t tail_cache;
    /* producer's line: batches published, and its copy of head */
    _Alignas(64) atomic_uint_fast64_t tail;
    uint64_t head_cache;
    _Alignas(64) uint32_t cap, batch; /* ring slots (power of 2), pointers per slot */
    uint32_t *count;                  /* pointers in each slot */
    void **ptr;                       /* cap * batch pointers */
} xfer_ring;

static BENCH_UNUSED void xfer_ring_init(xfer_ring *r, uint32_t batch, uint32_t max_blocks)
{
    uint32_t cap = 4;
    while ((uint64_t)cap * batch < max_blocks)
        cap *= 2;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    r->cap = cap;
    r->batch = batch;
    r->count = calloc(cap, sizeof *r->count);
    r->ptr = calloc((size_t)cap * batch, sizeof *r->ptr);
    r->head_cache = r->tail_cache = 0;
    if (!r->count || !r->ptr)
        bench_die("out of memory");
}

static BENCH_UNUSED void xfer_ring_destroy(xfer_ring *r)
{
    free(r->count);
    free(r->ptr);
}

/* Producer: the slot to fill next, or NULL when the ring is full. */
static inline void **xfer_ring_slot(xfer_ring *r, uint64_t tail)
{
    if (tail - r->head_cache >= r->cap) {
        r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
        if (tail - r->head_cache >= r->cap)
            return NULL;
    }
    return r->ptr + (size_t)(tail & (r->cap - 1)) * r->batch;
}

/* Producer: publish the slot returned for TAIL holding N pointers. */
static inline void xfer_ring_publish(xfer_ring *r, uint64_t tail, uint32_t n)
{
    r->count[tail & (r->cap - 1)] = n;
    atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
}

/* Consumer: the next batch (its size in *n) or NULL when the ring is empty. */
static inline void **xfer_ring_peek(xfer_ring *r, uint64_t head, uint32_t *n)
{
    if (head == r->tail_cache) {
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head == r->tail_cache)
            return NULL;
    }
    *n = r->count[head & (r->cap - 1)];
    return r->ptr + (size_t)(head & (r->cap - 1)) * r->batch;
}

static inline void xfer_ring_release(xfer_ring *r, uint64_t head)
{
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

/* A size in [min, max], uniform. */
static inline size_t xfer_size(uint64_t r, size_t min, size_t max)
{
    return min + (size_t)(((r & 0xffffffffu) * ((uint64_t)(max - min) + 1)) >> 32);
}

#endif /* HAKMEM_BENCH_XFER_H */
