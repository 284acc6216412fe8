/*
 * bench_handoff BLOCKS [THREADS PASSES PERMILLE HALF MIN MAX SEED]
 *
 * A thread builds, others rewrite while it waits: the main thread
 * allocates BLOCKS blocks (default 200000) of MIN..MAX bytes (default
 * 64..1023, uniform) and writes their first 16 bytes, then starts THREADS
 * workers (default 2) and joins them. Worker t owns the t-th slice of the
 * array and makes PASSES passes over it (default 20); in each pass it
 * replaces each block with probability PERMILLE/1000 (default 100): frees
 * it (a block the main thread allocated, at first) and allocates a new one
 * of a random size, writing its first 16 bytes. With HALF 1 only the
 * blocks at even indexes are ever replaced, so half of what the main
 * thread built stays live to the end. What the main thread allocated and
 * the workers freed can serve the workers only if the allocator lets
 * memory a sleeping thread owned go to the threads that free it (a main
 * thread that loads data and joins its workers; larson's main thread).
 * bench/run.sh's row handoff.
 * ops = the workers' frees + mallocs; secs = the workers' phase.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    uint64_t id, ops, check;
} worker;

static void **blk;
static uint64_t nblocks, nthreads, passes, permille, half, seed;
static size_t min_sz, max_sz;

static void *fill_one(uint64_t r)
{
    size_t sz = BENCH_UNIFORM(r, min_sz, (uint64_t)(max_sz - min_sz) + 1);
    unsigned char *p = malloc(sz);
    if (!p)
        bench_die("malloc(%zu) failed", sz);
    memset(p, (int)(r >> 56) | 1, 16);
    return p;
}

static void *run(void *arg)
{
    worker *w = arg;
    uint64_t s = bench_seed(seed + 1 + w->id), ops = 0, check = 0;
    uint64_t lo = nblocks * w->id / nthreads, hi = nblocks * (w->id + 1) / nthreads;
    for (uint64_t pass = 0; pass < passes; pass++)
        for (uint64_t i = lo; i < hi; i++) {
            if (half && (i & 1))
                continue;
            uint64_t r = bench_rand(&s);
            if (bench_below(r, 1000) >= permille)
                continue;
            check += ((unsigned char *)blk[i])[15];
            free(blk[i]);
            blk[i] = fill_one(bench_rand(&s));
            ops += 2;
        }
    w->ops = ops;
    w->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv,
                "usage: %s [BLOCKS=200000] [THREADS=2] [PASSES=20] [PERMILLE=100] [HALF=0] [MIN=64] [MAX=1023] "
                "[SEED=7]\n");
    nblocks = (uint64_t)bench_arg(argc, argv, 1, 200000);
    nthreads = (uint64_t)bench_arg(argc, argv, 2, 2);
    passes = (uint64_t)bench_arg(argc, argv, 3, 20);
    permille = (uint64_t)bench_arg(argc, argv, 4, 100);
    half = (uint64_t)bench_arg(argc, argv, 5, 0);
    min_sz = (size_t)bench_arg(argc, argv, 6, 64);
    max_sz = (size_t)bench_arg(argc, argv, 7, 1023);
    seed = (uint64_t)bench_arg(argc, argv, 8, 7);
    if (nblocks == 0 || nthreads == 0 || nthreads > 256 || permille > 1000 || min_sz < 16 || max_sz < min_sz)
        bench_die("need BLOCKS >= 1, 1..256 threads, PERMILLE <= 1000, 16 <= MIN <= MAX");
    blk = malloc(nblocks * sizeof *blk);
    worker *w = calloc(nthreads, sizeof *w);
    if (!blk || !w)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed);
    for (uint64_t i = 0; i < nblocks; i++)
        blk[i] = fill_one(bench_rand(&s));
    for (uint64_t i = 0; i < nthreads; i++)
        w[i].id = i;
    double t0 = bench_now();
    BENCH_START_THREADS(w, nthreads, tid, run);
    BENCH_JOIN_THREADS(w, nthreads, tid);
    double secs = bench_now() - t0;
    uint64_t ops = 0, check = 0;
    for (uint64_t i = 0; i < nthreads; i++) {
        ops += w[i].ops;
        check += w[i].check;
    }
    for (uint64_t i = 0; i < nblocks; i++) /* not counted (VmHWM stays) */
        free(blk[i]);
    free(blk);
    free(w);
    bench_result("handoff", (double)ops, secs,
                 "threads=%llu blocks=%llu passes=%llu permille=%llu half=%llu min=%zu max=%zu check=%llu",
                 (unsigned long long)nthreads, (unsigned long long)nblocks, (unsigned long long)passes,
                 (unsigned long long)permille, (unsigned long long)half, min_sz, max_sz,
                 (unsigned long long)check);
    return 0;
}
