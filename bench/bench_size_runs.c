/*
 * bench_size_runs THREADS PASSES BLOCKS MAX
 *
 * Runs of blocks of one size, one size after another (the pattern of
 * MicroQuill's sh6bench, which mimalloc-bench carries; written anew here).
 * Each thread makes PASSES passes. A pass goes up the sizes 1, 2, 4, 7, 11,
 * ... (each 1.5x the last, plus one) to MAX: for each it allocates BLOCKS
 * blocks, writes the first and last byte of each, then frees the first
 * half in order and the second half from the end. Then it goes down from
 * MAX (each size two thirds of the last) to 1 with 2*BLOCKS/5 blocks, and
 * frees every other block from the end, then the rest. Every free is the
 * thread's own. Whatever an allocator keeps for a size it has left (a
 * class's last slab, a cache) counts in its peak beside the largest run.
 * ops = mallocs + frees; secs = wall time from a common start to the last
 * thread's end.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    uint64_t passes, ops, check;
    uint32_t blocks;
    size_t max;
} worker;

static pthread_barrier_t start_barrier;

static uint64_t run_size(unsigned char **p, uint32_t n, size_t sz, int down)
{
    uint64_t check = 0;
    for (uint32_t i = 0; i < n; i++) {
        p[i] = malloc(sz);
        if (!p[i])
            bench_die("malloc(%zu) failed", sz);
        p[i][0] = (unsigned char)i;
        p[i][sz - 1] = (unsigned char)(i >> 3);
    }
    if (!down) {
        for (uint32_t i = 0; i < n / 2; i++) {
            check += p[i][0] + p[i][sz - 1];
            free(p[i]);
        }
        for (uint32_t i = n; i-- > n / 2;) {
            check += p[i][0] + p[i][sz - 1];
            free(p[i]);
        }
    } else {
        for (uint32_t i = n; i-- > 0;)
            if ((i & 1) == (n & 1)) {
                check += p[i][0];
                free(p[i]);
            }
        for (uint32_t i = n; i-- > 0;)
            if ((i & 1) != (n & 1)) {
                check += p[i][0];
                free(p[i]);
            }
    }
    return check;
}

static void *run(void *arg)
{
    worker *w = arg;
    unsigned char **p = malloc(sizeof *p * w->blocks);
    if (!p)
        bench_die("out of memory");
    uint32_t down_n = w->blocks * 2 / 5 ? w->blocks * 2 / 5 : 1;
    pthread_barrier_wait(&start_barrier);
    for (uint64_t k = 0; k < w->passes; k++) {
        for (size_t sz = 1; sz <= w->max; sz = sz * 3 / 2 + 1) {
            w->check += run_size(p, w->blocks, sz, 0);
            w->ops += 2 * (uint64_t)w->blocks;
        }
        for (size_t sz = w->max; sz >= 1; sz = sz * 2 / 3) {
            w->check += run_size(p, down_n, sz, 1);
            w->ops += 2 * (uint64_t)down_n;
        }
    }
    free(p);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [PASSES=100] [BLOCKS=2500] [MAX=1000]\n");
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 1, 2), passes = (uint64_t)bench_arg(argc, argv, 2, 100);
    uint64_t blocks = (uint64_t)bench_arg(argc, argv, 3, 2500);
    size_t max = (size_t)bench_arg(argc, argv, 4, 1000);
    if (threads == 0 || threads > 1024)
        bench_die("THREADS must be in 1..1024");
    if (blocks == 0 || blocks > 10000000)
        bench_die("BLOCKS must be in 1..10000000");
    if (max == 0 || max > ((size_t)1 << 30))
        bench_die("MAX must be in 1..2^30");

    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    pthread_barrier_init(&start_barrier, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++)
        w[i] = (worker){.passes = passes, .blocks = (uint32_t)blocks, .max = max};
    BENCH_START_THREADS(w, threads, tid, run);
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    uint64_t ops = 0, check = 0;
    for (uint64_t i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        ops += w[i].ops;
        check += w[i].check;
    }
    double secs = bench_now() - t0;
    pthread_barrier_destroy(&start_barrier);
    free(w);
    bench_result("size_runs", (double)ops, secs, "threads=%llu passes=%llu blocks=%llu max=%zu check=%llu",
                 (unsigned long long)threads, (unsigned long long)passes, (unsigned long long)blocks, max,
                 (unsigned long long)check);
    return 0;
}
