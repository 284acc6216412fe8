/*
 * bench_peak_mem N SEED
 *
 * Peak memory and reuse: (1) allocate N blocks of 16..1024 B and write them
 * (a large structure); (2) free 90% of them in random order; (3) allocate
 * N/2 new blocks of 32..2048 B. Prints the RSS after each phase
 * (built_rss_kb, after_free_rss_kb, final_rss_kb = with the phase-3
 * structure alive), the peak (VmHWM) and the bytes requested that are live
 * at the end (live_kb), so the overhead is final_rss_kb - live_kb.
 * ops = mallocs + frees of the three phases.
 */
#include "bench_common.h"

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [N=1000000] [SEED=9]\n", argv[0]);
        return 0;
    }
    uint64_t n = (uint64_t)bench_arg(argc, argv, 1, 1000000);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 2, 9);
    if (n < 10 || n > 0xffffffffu)
        bench_die("bad N");
    unsigned char **blk = malloc(n * sizeof *blk);
    size_t *sz = malloc(n * sizeof *sz);
    uint32_t *order = malloc(n * sizeof *order);
    unsigned char **blk2 = malloc((n / 2) * sizeof *blk2);
    if (!blk || !sz || !order || !blk2)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), check = 0, live = 0;
    long base_rss = bench_rss_now();

    double t0 = bench_now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = bench_rand(&s);
        sz[i] = 16 + (size_t)(((r & 0xffffffffu) * 1009) >> 32);
        blk[i] = malloc(sz[i]);
        if (!blk[i])
            bench_die("malloc failed");
        memset(blk[i], (int)(r & 0xff), sz[i]);
    }
    long built = bench_rss_now();
    for (uint64_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint32_t j = bench_below(bench_rand(&s), (uint32_t)(i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    uint64_t nfree = n - n / 10;
    for (uint64_t i = 0; i < nfree; i++) {
        unsigned char *p = blk[order[i]];
        check += p[0];
        free(p);
        blk[order[i]] = NULL;
    }
    long after_free = bench_rss_now();
    for (uint64_t i = nfree; i < n; i++)
        live += sz[order[i]];
    for (uint64_t i = 0; i < n / 2; i++) {
        uint64_t r = bench_rand(&s);
        size_t z = 32 + (size_t)(((r & 0xffffffffu) * 2017) >> 32);
        blk2[i] = malloc(z);
        if (!blk2[i])
            bench_die("malloc failed");
        memset(blk2[i], (int)(r & 0xff), z);
        live += z;
    }
    double secs = bench_now() - t0;
    /* the structure stays alive: final_rss_kb is measured with it */
    bench_result("peak_mem", (double)(n + nfree + n / 2), secs,
                 "n=%llu base_rss_kb=%ld built_rss_kb=%ld after_free_rss_kb=%ld live_kb=%llu check=%llu",
                 (unsigned long long)n, base_rss, built, after_free,
                 (unsigned long long)(live / 1024), (unsigned long long)check);
    return 0;
}
