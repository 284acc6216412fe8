/*
 * bench_thread_churn GENERATIONS THREADS BLOCKS [MIN MAX]
 *
 * Short-lived threads: GENERATIONS times, the main thread starts THREADS
 * threads and joins them. Each thread frees the blocks its predecessor in the
 * same position left behind (allocated by a thread that has exited), then
 * allocates BLOCKS blocks of MIN..MAX bytes (default 16..4096), writes them,
 * frees three quarters and leaves the last quarter for its successor.
 * ops = mallocs + frees; threads_per_sec is also printed.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    void **left;   /* BLOCKS/4 blocks left by the previous generation */
    void **mine;   /* scratch, BLOCKS pointers */
    uint32_t nleft;
    uint64_t seed, mallocs, frees, check;
} slot;

static uint32_t blocks;
static size_t min_sz, max_sz;

static void *run(void *arg)
{
    slot *w = arg;
    uint64_t s = bench_seed(w->seed), span = (uint64_t)(max_sz - min_sz) + 1, check = 0;
    for (uint32_t i = 0; i < w->nleft; i++) {
        check += *(unsigned char *)w->left[i];
        free(w->left[i]);
    }
    w->frees += w->nleft;
    for (uint32_t i = 0; i < blocks; i++) {
        uint64_t r = bench_rand(&s);
        size_t sz = min_sz + (size_t)(((r & 0xffffffffu) * span) >> 32);
        void *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        bench_touch(p, sz, r);
        w->mine[i] = p;
    }
    w->mallocs += blocks;
    uint32_t keep = blocks / 4;
    for (uint32_t i = keep; i < blocks; i++) {
        check += *(unsigned char *)w->mine[i];
        free(w->mine[i]);
    }
    w->frees += blocks - keep;
    memcpy(w->left, w->mine, keep * sizeof(void *));
    w->nleft = keep;
    w->seed = s;
    w->check += check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_gens a = bench_gens_args(argc, argv, 2000, 500, -1, 1, SIZE_MAX);
    uint64_t gens = a.gens;
    uint32_t threads = a.threads;
    blocks = a.blocks;
    min_sz = a.min;
    max_sz = a.max;
    slot *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    for (uint32_t i = 0; i < threads; i++) {
        w[i].left = calloc(blocks, sizeof(void *));
        w[i].mine = calloc(blocks, sizeof(void *));
        w[i].seed = 99 + i;
        if (!w[i].left || !w[i].mine)
            bench_die("out of memory");
    }
    double t0 = bench_now();
    for (uint64_t g = 0; g < gens; g++) {
        BENCH_START_THREADS(w, threads, tid, run);
        BENCH_JOIN_THREADS(w, threads, tid);
    }
    double secs = bench_now() - t0;
    uint64_t ops = 0, check = 0;
    for (uint32_t i = 0; i < threads; i++) {
        for (uint32_t k = 0; k < w[i].nleft; k++)
            free(w[i].left[k]);
        ops += w[i].mallocs + w[i].frees;
        check += w[i].check;
        free(w[i].left);
        free(w[i].mine);
    }
    free(w);
    bench_result("thread_churn", (double)ops, secs,
                 "generations=%llu threads=%u blocks=%u min=%zu max=%zu threads_per_sec=%.0f check=%llu",
                 (unsigned long long)gens, threads, blocks, min_sz, max_sz,
                 secs > 0 ? (double)gens * threads / secs : 0.0, (unsigned long long)check);
    return 0;
}
