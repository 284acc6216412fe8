/*
 * bench_larson.h — what larson.c and larson_sized.cpp share: their arguments,
 * the hand-over of a slice from a thread to its successor until the time is
 * up, and the RESULT line. The two programs differ only in how a block is
 * allocated and freed, which stays in their own worker loops.
 *
 * Included from C and from C++ (C11 <stdatomic.h> is not C++17: the stop flag
 * is each language's atomic int). The one thing here that runs inside a
 * worker's replacement loop is larson_stopped(), a relaxed load as before.
 */
#ifndef HAKMEM_BENCH_LARSON_H
#define HAKMEM_BENCH_LARSON_H

#include "bench_tag.h"
#include <pthread.h>

typedef struct larson_args {
    double secs;
    size_t min, max;
    uint64_t chunks, rounds, seed, threads;
} larson_args;

/* SECS MIN MAX CHUNKS ROUNDS SEED THREADS; MAX and ROUNDS default to the
 * caller's values, and MAX may not pass MAX_LIMIT. SECS_NOTE is the help's
 * line about BENCH_LARSON_MS. */
static BENCH_UNUSED larson_args larson_parse(int argc, char **argv, long long max, long long rounds,
                                            size_t max_limit, const char *secs_note)
{
    if (bench_wants_help(argc, argv)) {
        printf("usage: %s [SECS=1] [MIN=8] [MAX=%lld] [CHUNKS=5000] [ROUNDS=%lld] [SEED=12345] "
               "[THREADS=2]\n  %s\n",
               argv[0], max, rounds, secs_note);
        exit(0);
    }
    larson_args a;
    a.secs = (double)bench_arg(argc, argv, 1, 1);
    long long ms = bench_env("BENCH_LARSON_MS", 0);
    if (ms > 0)
        a.secs = (double)ms / 1000.0;
    a.min = (size_t)bench_arg(argc, argv, 2, 8);
    a.max = (size_t)bench_arg(argc, argv, 3, max);
    a.chunks = (uint64_t)bench_arg(argc, argv, 4, 5000);
    a.rounds = (uint64_t)bench_arg(argc, argv, 5, rounds);
    a.seed = (uint64_t)bench_arg(argc, argv, 6, 12345);
    a.threads = (uint64_t)bench_arg(argc, argv, 7, 2);
    if (a.min < 8 || a.max < a.min || a.max > max_limit || a.chunks == 0 ||
        a.chunks > 0xffffffffu || a.rounds == 0 || a.threads == 0 || a.threads > 1024)
        bench_die("bad parameters (MIN must be at least 8)");
    return a;
}

/* The stop flag is each language's atomic int, and larson_stopped() (read in
 * the workers' loops) a macro: with the GCC builtins on a plain int, or with
 * an inline function, GCC scheduled larson_sized's loop differently from the
 * one its figures were measured with. */
#ifdef __cplusplus
#include <atomic>
static std::atomic<int> larson_stop_flag{0};
#define larson_stopped() larson_stop_flag.load(std::memory_order_relaxed)
#define larson_stop() larson_stop_flag.store(1)
#else
#include <stdatomic.h>
static atomic_int larson_stop_flag;
#define larson_stopped() atomic_load_explicit(&larson_stop_flag, memory_order_relaxed)
#define larson_stop() atomic_store(&larson_stop_flag, 1)
#endif
static pthread_mutex_t larson_done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t larson_done_cv = PTHREAD_COND_INITIALIZER;
static int larson_slices_done;
static pthread_attr_t larson_detached;

/* The end of a worker: until the time is up, SLICE passes to a new thread
 * running WORKER (the caller then exits); after, the slice is counted done. */
static BENCH_UNUSED void larson_next(void *(*worker)(void *), void *slice)
{
    if (!larson_stopped()) {
        pthread_t t;
        if (pthread_create(&t, &larson_detached, worker, slice) == 0)
            return;
        bench_die("pthread_create failed");
    }
    pthread_mutex_lock(&larson_done_mu);
    larson_slices_done++;
    pthread_cond_signal(&larson_done_cv);
    pthread_mutex_unlock(&larson_done_mu);
}

/* Starts a detached WORKER on each of the THREADS slices (SIZE bytes apart
 * from SLICES), lets them run SECS seconds, stops them and waits until every
 * slice is done. Returns the wall time from the first start. */
static BENCH_UNUSED double larson_run(void *(*worker)(void *), void *slices, size_t size,
                                      uint64_t threads, double secs)
{
    pthread_attr_init(&larson_detached);
    pthread_attr_setdetachstate(&larson_detached, PTHREAD_CREATE_DETACHED);

    double t0 = bench_now();
    for (uint64_t i = 0; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, &larson_detached, worker, (char *)slices + i * size))
            bench_die("pthread_create failed");
    }
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    larson_stop();
    pthread_mutex_lock(&larson_done_mu);
    while (larson_slices_done < (int)threads)
        pthread_cond_wait(&larson_done_cv, &larson_done_mu);
    pthread_mutex_unlock(&larson_done_mu);
    return bench_now() - t0;
}

static BENCH_UNUSED void larson_result(const char *bench, const larson_args *a, uint64_t ops,
                                       double secs, uint64_t generations, long live_rss_kb,
                                       uint64_t check)
{
    bench_result(bench, (double)ops, secs,
                 "threads=%llu min=%zu max=%zu chunks=%llu rounds=%llu thread_generations=%llu "
                 "live_rss_kb=%ld check=%llu",
                 (unsigned long long)a->threads, a->min, a->max, (unsigned long long)a->chunks,
                 (unsigned long long)a->rounds, (unsigned long long)generations, live_rss_kb,
                 (unsigned long long)check);
}

#endif /* HAKMEM_BENCH_LARSON_H */
