/*
 * bench_big_buffers ITERS [NBUF MIN_MIB MAX_MIB SEED]
 *
 * Big zeroed buffers, as an image or matrix program keeps them: NBUF buffers
 * (default 20) of MIN_MIB..MAX_MIB MiB (default 5..25, sizes uniform in
 * bytes) are allocated with calloc; each of ITERS steps frees a random one
 * and callocs a new one of a new random size. Every 4 KiB page of the new
 * buffer is read (it must be zero: a non-zero byte fails the run) and then
 * written, as a program filling it would touch every page. An allocator that
 * unmaps freed big blocks and maps them again pays a page fault per page;
 * one that keeps them must zero them for calloc. The initial NBUF callocs
 * are not timed. ops = replacements (one free + one calloc each).
 */
#include "bench_common.h"

/* Reads one byte per page (must be zero), then writes it; returns a checksum. */
static uint64_t touch_pages(unsigned char *p, size_t sz, uint64_t v)
{
    if (p[sz - 1] != 0)
        bench_die("calloc(1, %zu) returned non-zero memory at its last byte", sz);
    for (size_t off = 0; off < sz; off += 4096) {
        if (BENCH_UNLIKELY(p[off] != 0))
            bench_die("calloc(1, %zu) returned non-zero memory at offset %zu", sz, off);
        p[off] = (unsigned char)(v + off / 4096) | 1;
    }
    p[sz - 1] = (unsigned char)v | 1;
    return p[0];
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [ITERS=180] [NBUF=20] [MIN_MIB=5] [MAX_MIB=25] [SEED=13]\n");
    uint64_t iters = (uint64_t)bench_arg(argc, argv, 1, 180);
    uint64_t nbuf = (uint64_t)bench_arg(argc, argv, 2, 20);
    uint64_t min_mib = (uint64_t)bench_arg(argc, argv, 3, 5);
    uint64_t max_mib = (uint64_t)bench_arg(argc, argv, 4, 25);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 5, 13);
    if (nbuf == 0 || nbuf > 100000 || min_mib == 0 || max_mib < min_mib || max_mib > 4096)
        bench_die("bad parameters (NBUF 1..100000, 1 <= MIN_MIB <= MAX_MIB <= 4096)");
    size_t lo = (size_t)min_mib << 20, span = ((size_t)(max_mib - min_mib) << 20) + 1;
    unsigned char **bufs = calloc(nbuf, sizeof *bufs);
    size_t *sizes = calloc(nbuf, sizeof *sizes);
    if (!bufs || !sizes)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), check = 0, bytes = 0;

    for (uint64_t k = 0; k < nbuf; k++) {
        uint64_t r = bench_rand(&s);
        size_t sz = lo + (size_t)(bench_rand(&s) % span);
        bufs[k] = calloc(1, sz);
        if (!bufs[k])
            bench_die("calloc(1, %zu) failed", sz);
        sizes[k] = sz;
        check += touch_pages(bufs[k], sz, r);
    }

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t idx = bench_below(r, (uint32_t)nbuf);
        unsigned char *p = bufs[idx];
        check += p[0] + p[sizes[idx] - 1];
        free(p);
        size_t sz = lo + (size_t)(bench_rand(&s) % span);
        p = calloc(1, sz);
        if (!p)
            bench_die("calloc(1, %zu) failed", sz);
        check += touch_pages(p, sz, r);
        bufs[idx] = p;
        sizes[idx] = sz;
        bytes += sz;
    }
    double secs = bench_now() - t0;
    for (uint64_t k = 0; k < nbuf; k++)
        free(bufs[k]);
    free(bufs);
    free(sizes);
    bench_result("big_buffers", (double)iters, secs,
                 "nbuf=%llu min_mib=%llu max_mib=%llu mib_per_sec=%.0f check=%llu",
                 (unsigned long long)nbuf, (unsigned long long)min_mib, (unsigned long long)max_mib,
                 secs > 0 ? (double)bytes / 1048576.0 / secs : 0.0, (unsigned long long)check);
    return 0;
}
