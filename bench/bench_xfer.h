/*
 * bench_xfer.h — helpers of the cross-thread benchmarks: blocks that check
 * themselves (bench_tag.h) and a single-producer single-consumer ring of
 * batches.
 *
 * Batch ring: one producer thread publishes batches of up to BATCH pointers,
 * one consumer thread takes them. Batch storage is allocated once up front,
 * outside the measured part, so the ring itself does not call the allocator.
 * xfer_check_balance() is the programs' last check that no block was lost.
 */
#ifndef HAKMEM_BENCH_XFER_H
#define HAKMEM_BENCH_XFER_H

#include "bench_tag.h"
#include <sched.h>
#include <stdatomic.h>

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

/* Every block the threads allocated was freed: the rings lost none. */
static BENCH_UNUSED void xfer_check_balance(uint64_t mallocs, uint64_t frees)
{
    if (mallocs != frees)
        bench_die("%llu blocks allocated but %llu freed", (unsigned long long)mallocs,
                  (unsigned long long)frees);
}

#endif /* HAKMEM_BENCH_XFER_H */
