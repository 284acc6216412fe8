/*
 * bench_aligned ITERS WS SEED
 *
 * Aligned allocation: the random mixed pattern over WS slots (default 200),
 * where each allocation asks for an alignment of 2^k, k uniform in 4..20
 * (16 B .. 1 MiB), and a size uniform in 16..4096 B. Alignments up to 64 use
 * aligned_alloc (size rounded up to a multiple), larger ones alternate
 * posix_memalign and memalign. Every pointer's alignment is checked (a wrong
 * one aborts the run). ops = allocations + frees.
 */
#include "bench_common.h"
#include <malloc.h>

int main(int argc, char **argv)
{
    bench_iws args = bench_iws_args(argc, argv, 1000000, 200, 3, NULL);
    uint64_t iters = args.iters, ws = args.ws, seed = args.seed;
    void **slots = calloc(ws, sizeof *slots);
    if (!slots)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), check = 0, calls = 0, n_pm = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t idx = bench_below(r, (uint32_t)ws);
        void *p = slots[idx];
        if (p) {
            check += *(unsigned char *)p;
            free(p);
            slots[idx] = NULL;
        } else {
            size_t al = (size_t)16 << ((r >> 8) % 17);
            size_t sz = 16 + (size_t)(r & 4095);
            if (al <= 64) {
                p = aligned_alloc(al, (sz + al - 1) & ~(al - 1));
            } else if (n_pm++ & 1) {
                p = memalign(al, sz);
            } else {
                if (posix_memalign(&p, al, sz))
                    p = NULL;
            }
            if (!p)
                bench_die("aligned allocation (%zu, %zu) failed", al, sz);
            if ((uintptr_t)p & (al - 1))
                bench_die("misaligned: %p for alignment %zu", p, al);
            bench_touch(p, sz, r);
            slots[idx] = p;
        }
        calls++;
    }
    double secs = bench_now() - t0;
    for (uint64_t k = 0; k < ws; k++)
        free(slots[k]);
    free(slots);
    bench_result("aligned", (double)calls, secs, "ws=%llu check=%llu", (unsigned long long)ws,
                 (unsigned long long)check);
    return 0;
}
