/*
 * bench_size_mix ITERS [WS SEED]
 *
 * One thread, a realistic mix of sizes with random lifetimes. WS slots
 * (default 2000) are filled first (untimed); each of ITERS steps picks a
 * random slot and either (5% of steps) grows its block with realloc to
 * 1.25..2x its size (at most 512 KiB) or frees it and mallocs a new block.
 * New sizes come from four bands, log-uniform within each:
 *   70%  16 B .. 256 B      20%  257 B .. 4 KiB
 *    9%  4 KiB+1 .. 32 KiB   1%  32 KiB+1 .. 128 KiB
 * Each new block gets its first 8 and last bytes written; a grown block keeps
 * its first byte (checked: a lost byte fails the run) and gets its new last
 * byte written. ops = malloc + free + realloc calls in the timed steps.
 */
#include "bench_common.h"

#define GROW_LIMIT ((size_t)512 << 10)

static bench_logu band[4];

static size_t pick_size(uint64_t band_r, uint64_t r)
{
    unsigned pct = (unsigned)((band_r & 0xffff) * 100 >> 16); /* 0..99 */
    int b = pct < 70 ? 0 : pct < 90 ? 1 : pct < 99 ? 2 : 3;
    return bench_logu_draw(&band[b], r);
}

int main(int argc, char **argv)
{
    bench_iws args = bench_iws_args(argc, argv, 12000000, 2000, 17, NULL);
    uint64_t iters = args.iters, ws = args.ws, seed = args.seed;
    bench_logu_init(&band[0], 16, 256);
    bench_logu_init(&band[1], 257, 4096);
    bench_logu_init(&band[2], 4097, 32768);
    bench_logu_init(&band[3], 32769, 131072);
    unsigned char **slots = calloc(ws, sizeof *slots);
    size_t *sizes = calloc(ws, sizeof *sizes);
    if (!slots || !sizes)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), check = 0, mallocs = 0, frees = 0, reallocs = 0;

    for (uint64_t k = 0; k < ws; k++) {
        uint64_t r = bench_rand(&s);
        size_t sz = pick_size(r, bench_rand(&s));
        unsigned char *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        bench_touch(p, sz, r | 1);
        p[sz - 1] = (unsigned char)r;
        slots[k] = p;
        sizes[k] = sz;
    }

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t idx = bench_below(r, (uint32_t)ws);
        unsigned char *p = slots[idx];
        size_t old = sizes[idx];
        if (((r >> 16) & 0xffff) * 100 >> 16 < 5 && old < GROW_LIMIT) {
            /* grow by 1.25..2x */
            size_t sz = old + old / 4 + (size_t)(((r & 0xffff) * (old - old / 4)) >> 16);
            if (sz > GROW_LIMIT)
                sz = GROW_LIMIT;
            unsigned char first = p[0];
            unsigned char *q = realloc(p, sz);
            if (!q)
                bench_die("realloc(%zu) failed", sz);
            if (BENCH_UNLIKELY(q[0] != first))
                bench_die("realloc(%zu -> %zu) lost the block's contents", old, sz);
            q[sz - 1] = (unsigned char)r;
            slots[idx] = q;
            sizes[idx] = sz;
            reallocs++;
            continue;
        }
        check += p[0] + p[old - 1];
        free(p);
        size_t sz = pick_size(r, bench_rand(&s));
        p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        bench_touch(p, sz, r | 1);
        p[sz - 1] = (unsigned char)r;
        slots[idx] = p;
        sizes[idx] = sz;
        frees++;
        mallocs++;
    }
    double secs = bench_now() - t0;
    uint64_t live = 0;
    for (uint64_t k = 0; k < ws; k++) {
        live += sizes[k];
        free(slots[k]);
    }
    free(slots);
    free(sizes);
    bench_result("size_mix", (double)(mallocs + frees + reallocs), secs,
                 "ws=%llu mallocs=%llu reallocs=%llu live_kib=%llu check=%llu",
                 (unsigned long long)ws, (unsigned long long)mallocs, (unsigned long long)reallocs,
                 (unsigned long long)(live >> 10), (unsigned long long)check);
    return 0;
}
