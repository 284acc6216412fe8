/*
 * bench_false_sharing THREADS ITERS WRITES SIZE [MODE]
 *
 * Cache-line false sharing between blocks of different threads (after Hoard's
 * cache-thrash and cache-scratch).
 *  MODE 0, active (default): each thread ITERS times allocates a block of
 *   SIZE bytes (default 8), writes every byte of it WRITES times, frees it.
 *  MODE 1, passive: the main thread first allocates one block per thread
 *   (likely neighbours on one cache line) and hands them out; each thread
 *   frees the block it was given and then runs the active loop, so an
 *   allocator that recycles the main thread's neighbouring blocks into
 *   different threads makes them share a line.
 * An allocator that gives blocks of different threads one cache line makes
 * the writes bounce the line between cores. ops = total byte writes.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    void *given;
    uint64_t check;
} worker;

static uint64_t iters, writes;
static size_t size;
static pthread_barrier_t bar;

static void *run(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&bar);
    if (w->given)
        free(w->given);
    uint64_t check = 0;
    for (uint64_t i = 0; i < iters; i++) {
        volatile unsigned char *p = malloc(size);
        if (!p)
            bench_die("malloc failed");
        for (uint64_t k = 0; k < writes; k++)
            for (size_t j = 0; j < size; j++)
                p[j] = (unsigned char)(p[j] + 1);
        check += p[0];
        free((void *)p);
    }
    w->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [ITERS=1000] [WRITES=20000] [SIZE=8] [MODE=0 active|1 passive]\n");
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 1, 2);
    iters = (uint64_t)bench_arg(argc, argv, 2, 1000);
    writes = (uint64_t)bench_arg(argc, argv, 3, 20000);
    size = (size_t)bench_arg(argc, argv, 4, 8);
    int passive = (int)bench_arg(argc, argv, 5, 0);
    if (threads == 0 || threads > 1024 || size == 0)
        bench_die("bad parameters");
    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    if (passive)
        for (uint64_t i = 0; i < threads; i++) {
            w[i].given = malloc(size);
            if (!w[i].given)
                bench_die("malloc failed");
            memset(w[i].given, 0, size);
        }
    pthread_barrier_init(&bar, NULL, (unsigned)threads + 1);
    BENCH_START_THREADS(w, threads, tid, run);
    pthread_barrier_wait(&bar);
    double t0 = bench_now();
    uint64_t check = 0;
    for (uint64_t i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        check += w[i].check;
    }
    double secs = bench_now() - t0;
    free(w);
    bench_result(passive ? "false_sharing_passive" : "false_sharing",
                 (double)threads * (double)iters * (double)writes * (double)size, secs,
                 "threads=%llu iters=%llu writes=%llu size=%zu mode=%s check=%llu",
                 (unsigned long long)threads, (unsigned long long)iters,
                 (unsigned long long)writes, size, passive ? "passive" : "active",
                 (unsigned long long)check);
    return 0;
}
