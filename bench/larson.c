/*
 * larson SECS MIN MAX CHUNKS ROUNDS SEED THREADS
 *
 * Larson & Krishnan's server simulation (after the Hoard/mimalloc-bench
 * "larson"). A shared array holds THREADS * CHUNKS blocks of MIN..MAX bytes
 * (default 8..128), allocated first by the main thread. Each of THREADS slots
 * owns one slice of CHUNKS blocks; its current thread replaces random blocks
 * of the slice (free the old one, allocate a new size, write it) ROUNDS *
 * CHUNKS times, then starts a new thread that carries on with the same slice
 * and exits. So blocks are mostly freed by a thread that did not allocate
 * them, often one that has already exited. After SECS seconds the threads
 * stop; ops = frees + mallocs done by the workers, ops_per_sec = ops / the
 * wall time from start to the last worker's exit. Every block carries a tag
 * (bench_tag.h) checked before it is freed.
 * bench/larson_sized.cpp is the same workload freeing with the size; the
 * arguments and the threads' hand-over are bench_larson.h's, shared by both.
 * Defaults: larson 1 8 128 5000 20 12345 2
 */
#include "bench_larson.h"

typedef struct {
    void **blocks; /* this slice of the shared array */
    uint32_t n;
    size_t min, max;
    uint64_t steps; /* replacements per thread generation */
    uint64_t state;
    uint64_t ops, generations, check;
} slice;

static void *worker(void *arg)
{
    slice *sl = arg;
    uint64_t s = sl->state, span = (uint64_t)(sl->max - sl->min) + 1, ops = 0, check = 0;
    for (uint64_t i = 0; i < sl->steps; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t v = bench_below(r, sl->n);
        void *old = sl->blocks[v];
        check += xfer_check(old, 0);
        free(old);
        size_t sz = BENCH_UNIFORM(r, sl->min, span);
        void *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        xfer_tag(p, sz);
        sl->blocks[v] = p;
        ops += 2;
        if ((i & 63) == 0 && larson_stopped())
            break;
    }
    sl->state = s;
    sl->ops += ops;
    sl->check += check;
    sl->generations++;
    larson_next(worker, sl);
    return NULL;
}

int main(int argc, char **argv)
{
    larson_args a = larson_parse(argc, argv, 128, 20, SIZE_MAX,
                                 "SECS may be a decimal fraction given in ms with BENCH_LARSON_MS");
    size_t min = a.min, max = a.max;
    uint64_t chunks = a.chunks, threads = a.threads;

    void **all = calloc(threads * chunks, sizeof *all);
    slice *sl = calloc(threads, sizeof *sl);
    if (!all || !sl)
        bench_die("out of memory");
    uint64_t s = bench_seed(a.seed), span = (uint64_t)(max - min) + 1;
    for (uint64_t i = 0; i < threads * chunks; i++) { /* warm-up: main allocates */
        uint64_t r = bench_rand(&s);
        size_t sz = BENCH_UNIFORM(r, min, span);
        all[i] = malloc(sz);
        if (!all[i])
            bench_die("malloc failed");
        xfer_tag(all[i], sz);
    }
    for (uint64_t i = 0; i < threads; i++)
        sl[i] = (slice){.blocks = all + i * chunks, .n = (uint32_t)chunks, .min = min, .max = max,
                        .steps = a.rounds * chunks, .state = bench_seed(a.seed + 1 + i)};
    double secs = larson_run(worker, sl, sizeof *sl, threads, a.secs);

    uint64_t ops = 0, gens = 0, check = 0;
    for (uint64_t i = 0; i < threads; i++) {
        ops += sl[i].ops;
        gens += sl[i].generations;
        check += sl[i].check;
    }
    long hwm, rss_before_free;
    bench_rss(&hwm, &rss_before_free);
    for (uint64_t i = 0; i < threads * chunks; i++) {
        check += xfer_check(all[i], 0);
        free(all[i]);
    }
    free(all);
    free(sl);
    larson_result("larson", &a, ops, secs, gens, rss_before_free, check);
    return 0;
}
