/*
 * bench_large_churn ITERS WS SEED
 *
 * Large blocks: the random mixed pattern over WS slots (default 8) with sizes
 * log-uniform in 64 KiB .. 8 MiB; each new block gets one byte written per
 * 4 KiB page (as a program filling it would touch every page). An allocator
 * that returns such blocks to the OS on free and maps them again pays a
 * syscall and page faults per cycle. ops = mallocs + frees.
 */
#include "bench_common.h"

int main(int argc, char **argv)
{
    bench_iws args = bench_iws_args(argc, argv, 40000, 8, 5, NULL);
    uint64_t iters = args.iters, ws = args.ws, seed = args.seed;
    void **slots = calloc(ws, sizeof *slots);
    size_t *sizes = calloc(ws, sizeof *sizes);
    if (!slots || !sizes)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), check = 0, bytes = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t idx = bench_below(r, (uint32_t)ws);
        unsigned char *p = slots[idx];
        if (p) {
            check += p[0] + p[sizes[idx] - 1];
            free(p);
            slots[idx] = NULL;
        } else {
            size_t lo = (size_t)65536 << ((r >> 8) % 7); /* 64 KiB .. 4 MiB octaves */
            size_t sz = lo + (size_t)(((r & 0xffffffffu) * lo) >> 32);
            p = malloc(sz);
            if (!p)
                bench_die("malloc(%zu) failed", sz);
            for (size_t off = 0; off < sz; off += 4096)
                p[off] = (unsigned char)off;
            p[sz - 1] = (unsigned char)r;
            slots[idx] = p;
            sizes[idx] = sz;
            bytes += sz;
        }
    }
    double secs = bench_now() - t0;
    for (uint64_t k = 0; k < ws; k++)
        free(slots[k]);
    free(slots);
    free(sizes);
    bench_result("large_churn", (double)iters, secs, "ws=%llu mib_per_sec=%.0f check=%llu",
                 (unsigned long long)ws, secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0,
                 (unsigned long long)check);
    return 0;
}
