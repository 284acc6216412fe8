/*
 * bench_calloc ITERS WS SEED
 *
 * calloc-heavy: the random mixed pattern over WS slots (default 400) where
 * every allocation is calloc(1, size), size log-uniform in 16 B .. 64 KiB.
 * The first, middle and last bytes of each block are checked to be zero (a
 * non-zero byte aborts the run), then the block is dirtied (first 8 and last
 * bytes) so that reused memory is not zero by accident. ops = callocs + frees.
 */
#include "bench_common.h"

int main(int argc, char **argv)
{
    bench_iws args = bench_iws_args(argc, argv, 2000000, 400, 11, NULL);
    uint64_t iters = args.iters, ws = args.ws, seed = args.seed;
    void **slots = calloc(ws, sizeof *slots);
    if (!slots)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), check = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t idx = bench_below(r, (uint32_t)ws);
        unsigned char *p = slots[idx];
        if (p) {
            check += p[0];
            free(p);
            slots[idx] = NULL;
        } else {
            size_t lo = (size_t)16 << ((r >> 8) % 12); /* 16 B .. 32 KiB octaves */
            size_t sz = lo + (size_t)(((r & 0xffffffffu) * lo) >> 32);
            p = calloc(1, sz);
            if (!p)
                bench_die("calloc(%zu) failed", sz);
            if (p[0] | p[sz / 2] | p[sz - 1])
                bench_die("calloc(%zu) returned non-zero memory", sz);
            bench_touch(p, sz, r | 1);
            p[sz - 1] = 0xff;
            slots[idx] = p;
        }
    }
    double secs = bench_now() - t0;
    for (uint64_t k = 0; k < ws; k++)
        free(slots[k]);
    free(slots);
    bench_result("calloc", (double)iters, secs, "ws=%llu check=%llu", (unsigned long long)ws,
                 (unsigned long long)check);
    return 0;
}
