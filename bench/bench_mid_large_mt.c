/*
 * bench_mid_large_mt THREADS ITERS WS [MIN MAX] [SEED]
 *
 * The random mixed pattern of bench_random_mixed, run by THREADS threads at
 * once, each with its own working set of WS slots and ITERS steps; sizes
 * uniform in [MIN, MAX] (default 8192..32768). Each thread frees only its own
 * blocks. ops = THREADS * ITERS; secs = wall time from a common start to the
 * last thread's end. BENCH_BASELINE=1 as in bench_random_mixed.
 */
#include "bench_mixed_loop.h"
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    uint64_t iters, seed;
    uint32_t ws;
    size_t min, max;
    int baseline;
    mixed_stats st;
} worker;

static pthread_barrier_t start_barrier;

static void *run(void *arg)
{
    worker *w = arg;
    void **slots = calloc(w->ws, sizeof *slots);
    if (!slots)
        bench_die("out of memory");
    uint64_t state = bench_seed(w->seed);
    pthread_barrier_wait(&start_barrier);
    w->st = w->baseline ? mixed_loop_baseline(slots, w->ws, w->iters, w->min, w->max, &state)
                        : mixed_loop_malloc(slots, w->ws, w->iters, w->min, w->max, &state);
    free(slots);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_twmm args = bench_twmm_args(argc, argv, 1000000, 400, 8192, 32768);
    uint64_t threads = args.threads, iters = args.iters, ws = args.ws, seed = args.seed;
    size_t min = args.min, max = args.max;
    int baseline = bench_baseline_mode();

    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    pthread_barrier_init(&start_barrier, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++)
        w[i] = (worker){.iters = iters, .seed = seed * 1000003u + i, .ws = (uint32_t)ws,
                        .min = min, .max = max, .baseline = baseline};
    BENCH_START_THREADS(w, threads, tid, run);
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    uint64_t calls = 0, check = 0;
    for (uint64_t i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        calls += w[i].st.calls;
        check += w[i].st.check;
    }
    double secs = bench_now() - t0;
    pthread_barrier_destroy(&start_barrier);
    free(w);
    bench_result("mid_large_mt", (double)(threads * iters), secs,
                 "threads=%llu calls=%llu ws=%llu min=%zu max=%zu baseline=%d check=%llu",
                 (unsigned long long)threads, (unsigned long long)calls, (unsigned long long)ws,
                 min, max, baseline, (unsigned long long)check);
    return 0;
}
