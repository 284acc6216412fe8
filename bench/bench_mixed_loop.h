/*
 * bench_mixed_loop.h — the random mixed loop shared by bench_random_mixed and
 * bench_mid_large_mt.
 *
 * Each step draws one random number r; slot = r mod WS (multiply-shift, no
 * division). An occupied slot is freed (after reading its first byte); an
 * empty slot gets a block of a size uniform in [min, max] whose first 8 bytes
 * are written. At the end every remaining block is freed.
 *
 * mixed_loop_malloc() calls malloc/free; mixed_loop_baseline() runs the very
 * same loop with a trivial stand-in (a pointer into a static array, free does
 * nothing), so that (Ir(malloc) - Ir(baseline)) / calls is the allocator's
 * own cost per call (bench/run.sh --instr). Both are noinline so that
 * callgrind's --toggle-collect can name them.
 */
#ifndef HAKMEM_BENCH_MIXED_LOOP_H
#define HAKMEM_BENCH_MIXED_LOOP_H

#include "bench_common.h"

typedef struct {
    uint64_t calls; /* malloc + free calls (loop and final cleanup) */
    uint64_t mallocs;
    uint64_t check;
} mixed_stats;

#define BENCH_BASELINE_SLOTS 16384u
static unsigned char bench_baseline_arena[BENCH_BASELINE_SLOTS * 64] __attribute__((aligned(64)));

#define BASELINE_ALLOC(sz, idx) ((void)(sz), (void *)(bench_baseline_arena + ((size_t)((idx) & (BENCH_BASELINE_SLOTS - 1)) << 6)))
#define BASELINE_FREE(p) BENCH_ESCAPE(p)
#define REAL_ALLOC(sz, idx) malloc(sz)
#define REAL_FREE(p) free(p)

#define MIXED_LOOP_BODY(ALLOC, FREE)                                         \
    uint64_t s = *state, calls = 0, mallocs = 0, check = 0;                  \
    uint64_t span = (uint64_t)(max - min) + 1;                               \
    for (uint64_t i = 0; i < iters; i++) {                                   \
        uint64_t r = bench_rand(&s);                                         \
        uint32_t idx = bench_below(r, ws);                                   \
        void *p = slots[idx];                                                \
        if (p) {                                                             \
            check += *(unsigned char *)p;                                    \
            FREE(p);                                                         \
            slots[idx] = NULL;                                               \
        } else {                                                             \
            size_t sz = min + (size_t)((((r & 0xffffffffu) * span)) >> 32);  \
            p = ALLOC(sz, idx);                                              \
            if (BENCH_UNLIKELY(!p))                                          \
                bench_die("malloc(%zu) failed", sz);                         \
            bench_touch(p, sz, r);                                           \
            slots[idx] = p;                                                  \
            mallocs++;                                                       \
        }                                                                    \
    }                                                                        \
    calls = iters;                                                           \
    for (uint32_t k = 0; k < ws; k++) {                                      \
        void *p = slots[k];                                                  \
        if (p) {                                                             \
            check += *(unsigned char *)p;                                    \
            FREE(p);                                                         \
            slots[k] = NULL;                                                 \
            calls++;                                                         \
        }                                                                    \
    }                                                                        \
    *state = s;                                                              \
    mixed_stats st = {calls, mallocs, check};                                \
    return st;

static BENCH_NOINLINE BENCH_UNUSED mixed_stats mixed_loop_malloc(void **slots, uint32_t ws, uint64_t iters,
                                                    size_t min, size_t max, uint64_t *state)
{
    MIXED_LOOP_BODY(REAL_ALLOC, REAL_FREE)
}

static BENCH_NOINLINE BENCH_UNUSED mixed_stats mixed_loop_baseline(void **slots, uint32_t ws, uint64_t iters,
                                                      size_t min, size_t max, uint64_t *state)
{
    MIXED_LOOP_BODY(BASELINE_ALLOC, BASELINE_FREE)
}

static BENCH_UNUSED int bench_baseline_mode(void)
{
    const char *b = getenv("BENCH_BASELINE");
    return b && *b && strcmp(b, "0") != 0;
}

#endif /* HAKMEM_BENCH_MIXED_LOOP_H */
