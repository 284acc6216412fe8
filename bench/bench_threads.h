/*
 * bench_threads.h — thread boilerplate of the multi-threaded benchmarks:
 * starting and joining one thread per element of a program's array of
 * per-thread structs, and the arguments of the two thread-generation
 * benchmarks (bench_thread_churn, bench_thread_pass).
 *
 * The start and join helpers are macros because every program has its own
 * struct; they expand to the loops the programs wrote out before, with a
 * counter of the count's own type, so what is timed (the generation loops
 * time thread starts and joins) compiles as it did.
 */
#ifndef HAKMEM_BENCH_THREADS_H
#define HAKMEM_BENCH_THREADS_H

#include "bench_common.h"
#include <pthread.h>

/* Runs FN(&W[i]) on a new thread for each i < N, its id in W[i].TID. */
#define BENCH_START_THREADS(w, n, tid, fn)                                    \
    do {                                                                      \
        for (__typeof__(n) bench_i_ = 0; bench_i_ < (n); bench_i_++)          \
            if (pthread_create(&(w)[bench_i_].tid, NULL, (fn), &(w)[bench_i_])) \
                bench_die("pthread_create failed");                           \
    } while (0)

/* Waits for the threads BENCH_START_THREADS started. */
#define BENCH_JOIN_THREADS(w, n, tid)                                         \
    do {                                                                      \
        for (__typeof__(n) bench_i_ = 0; bench_i_ < (n); bench_i_++)          \
            pthread_join((w)[bench_i_].tid, NULL);                            \
    } while (0)

/* GENERATIONS THREADS BLOCKS MIN MAX [SEED]: --help prints the usage with the
 * defaults given (SEED only when seed >= 0) and exits; THREADS must be in
 * 1..1024, BLOCKS in min_blocks..10000000, and 0 < MIN <= MAX <= max_limit.
 * THREADS defaults to 2, MIN to 16, MAX to 4096. */
typedef struct bench_gens {
    uint64_t gens, seed;
    uint32_t threads, blocks;
    size_t min, max;
} bench_gens;

static BENCH_UNUSED bench_gens bench_gens_args(int argc, char **argv, long long gens, long long blocks,
                                               long long seed, uint32_t min_blocks, size_t max_limit)
{
    if (bench_wants_help(argc, argv)) {
        printf("usage: %s [GENERATIONS=%lld] [THREADS=2] [BLOCKS=%lld] [MIN=16] [MAX=4096]", argv[0],
               gens, blocks);
        if (seed >= 0)
            printf(" [SEED=%lld]", seed);
        printf("\n");
        exit(0);
    }
    bench_gens a;
    a.gens = (uint64_t)bench_arg(argc, argv, 1, gens);
    a.threads = (uint32_t)bench_arg(argc, argv, 2, 2);
    a.blocks = (uint32_t)bench_arg(argc, argv, 3, blocks);
    a.min = (size_t)bench_arg(argc, argv, 4, 16);
    a.max = (size_t)bench_arg(argc, argv, 5, 4096);
    a.seed = seed >= 0 ? (uint64_t)bench_arg(argc, argv, 6, seed) : 0;
    if (a.threads == 0 || a.threads > 1024 || a.blocks < min_blocks || a.blocks > 10000000 ||
        a.min == 0 || a.max < a.min || a.max > max_limit)
        bench_die("bad parameters");
    return a;
}

#endif /* HAKMEM_BENCH_THREADS_H */
