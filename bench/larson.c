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
 * (bench_xfer.h) checked before it is freed.
 * bench/larson_sized.cpp is the same workload freeing with the size.
 * Defaults: larson 1 8 128 5000 20 12345 2
 */
#include "bench_xfer.h"
#include <pthread.h>

typedef struct {
    void **blocks; /* this slice of the shared array */
    uint32_t n;
    size_t min, max;
    uint64_t steps; /* replacements per thread generation */
    uint64_t state;
    uint64_t ops, generations, check;
} slice;

static atomic_int stop_flag;
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int slices_done;
static pthread_attr_t detached;

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
        size_t sz = sl->min + (size_t)(((r & 0xffffffffu) * span) >> 32);
        void *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        xfer_tag(p, sz);
        sl->blocks[v] = p;
        ops += 2;
        if ((i & 63) == 0 && atomic_load_explicit(&stop_flag, memory_order_relaxed))
            break;
    }
    sl->state = s;
    sl->ops += ops;
    sl->check += check;
    sl->generations++;
    if (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        pthread_t t;
        /* hand the slice to a new thread; this one exits */
        if (pthread_create(&t, &detached, worker, sl) == 0)
            return NULL;
        bench_die("pthread_create failed");
    }
    pthread_mutex_lock(&done_mu);
    slices_done++;
    pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&done_mu);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [SECS=1] [MIN=8] [MAX=128] [CHUNKS=5000] [ROUNDS=20] [SEED=12345] "
               "[THREADS=2]\n  SECS may be a decimal fraction given in ms with BENCH_LARSON_MS\n",
               argv[0]);
        return 0;
    }
    double secs_arg = (double)bench_arg(argc, argv, 1, 1);
    long long ms = bench_env("BENCH_LARSON_MS", 0);
    if (ms > 0)
        secs_arg = (double)ms / 1000.0;
    size_t min = (size_t)bench_arg(argc, argv, 2, 8);
    size_t max = (size_t)bench_arg(argc, argv, 3, 128);
    uint64_t chunks = (uint64_t)bench_arg(argc, argv, 4, 5000);
    uint64_t rounds = (uint64_t)bench_arg(argc, argv, 5, 20);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 6, 12345);
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 7, 2);
    if (min < 8 || max < min || chunks == 0 || chunks > 0xffffffffu || rounds == 0 ||
        threads == 0 || threads > 1024)
        bench_die("bad parameters (MIN must be at least 8)");

    void **all = calloc(threads * chunks, sizeof *all);
    slice *sl = calloc(threads, sizeof *sl);
    if (!all || !sl)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed), span = (uint64_t)(max - min) + 1;
    for (uint64_t i = 0; i < threads * chunks; i++) { /* warm-up: main allocates */
        uint64_t r = bench_rand(&s);
        size_t sz = min + (size_t)(((r & 0xffffffffu) * span) >> 32);
        all[i] = malloc(sz);
        if (!all[i])
            bench_die("malloc failed");
        xfer_tag(all[i], sz);
    }
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);

    double t0 = bench_now();
    for (uint64_t i = 0; i < threads; i++) {
        sl[i] = (slice){.blocks = all + i * chunks, .n = (uint32_t)chunks, .min = min, .max = max,
                        .steps = rounds * chunks, .state = bench_seed(seed + 1 + i)};
        pthread_t t;
        if (pthread_create(&t, &detached, worker, &sl[i]))
            bench_die("pthread_create failed");
    }
    struct timespec ts = {(time_t)secs_arg, (long)((secs_arg - (double)(time_t)secs_arg) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop_flag, 1);
    pthread_mutex_lock(&done_mu);
    while (slices_done < (int)threads)
        pthread_cond_wait(&done_cv, &done_mu);
    pthread_mutex_unlock(&done_mu);
    double secs = bench_now() - t0;

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
    bench_result("larson", (double)ops, secs,
                 "threads=%llu min=%zu max=%zu chunks=%llu rounds=%llu thread_generations=%llu "
                 "live_rss_kb=%ld check=%llu",
                 (unsigned long long)threads, min, max, (unsigned long long)chunks,
                 (unsigned long long)rounds, (unsigned long long)gens, rss_before_free,
                 (unsigned long long)check);
    return 0;
}
