/*
 * bench_random_mixed ITERS WS SEED
 *
 * Single thread. ITERS steps over a working set of WS slots: a random slot is
 * freed if occupied, else filled with a block of a random size in
 * [HAKMEM_BENCH_MIN_SIZE, HAKMEM_BENCH_MAX_SIZE] (default 16..1024) whose
 * first bytes are written. ops = ITERS (one malloc or one free per step).
 * BENCH_BASELINE=1 runs the identical loop without an allocator (see
 * bench_mixed_loop.h), for instruction-count subtraction.
 */
#include "bench_mixed_loop.h"

int main(int argc, char **argv)
{
    bench_iws args = bench_iws_args(argc, argv, 10000000, 400, 42, "env: HAKMEM_BENCH_MIN_SIZE (16) HAKMEM_BENCH_MAX_SIZE (1024) BENCH_BASELINE=1\n");
    uint64_t iters = args.iters, ws = args.ws, seed = args.seed;
    size_t min = (size_t)bench_env("HAKMEM_BENCH_MIN_SIZE", 16);
    size_t max = (size_t)bench_env("HAKMEM_BENCH_MAX_SIZE", 1024);
    if (min == 0 || max < min)
        bench_die("need 0 < MIN_SIZE <= MAX_SIZE");
    int baseline = bench_baseline_mode();

    void **slots = calloc(ws, sizeof *slots);
    if (!slots)
        bench_die("out of memory");
    uint64_t state = bench_seed(seed);

    double t0 = bench_now();
    mixed_stats st = baseline ? mixed_loop_baseline(slots, (uint32_t)ws, iters, min, max, &state)
                              : mixed_loop_malloc(slots, (uint32_t)ws, iters, min, max, &state);
    double secs = bench_now() - t0;
    free(slots);

    bench_result("random_mixed", (double)iters, secs,
                 "calls=%llu mallocs=%llu ws=%llu min=%zu max=%zu seed=%llu baseline=%d check=%llu",
                 (unsigned long long)st.calls, (unsigned long long)st.mallocs,
                 (unsigned long long)ws, min, max, (unsigned long long)seed, baseline,
                 (unsigned long long)st.check);
    return 0;
}
