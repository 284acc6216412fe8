/*
 * bench_batch_mix THREADS ROUNDS BLOCKS MAX
 *
 * Batches of mixed sizes, allocated together and freed together: each of
 * THREADS threads makes ROUNDS rounds; a round allocates BLOCKS blocks
 * whose sizes step through 1..MAX (size i is 1 + (37 i + round + thread)
 * mod MAX: every size class in the range, interleaved, each a little
 * differently from one round to the next), writes the first 16 bytes of
 * each, then frees the second half from the end and the first half in
 * order. Every free is the thread's own. This is the loop of benchmarks
 * that allocate a working set of mixed objects and drop it whole (a
 * request's or a document's objects, sh6bench's batches, a compiler's
 * per-function data); the random rows never empty a size class at once,
 * and size_runs uses one size at a time. A class's BLOCKS * (its share of
 * the sizes) blocks fill several slabs or spans of it, all emptied at the
 * end of each round and filled again at the start of the next.
 * ops = mallocs + frees; secs = wall time from a common start to the last
 * thread's end.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    uint32_t index;
    uint64_t ops, check;
} worker;

static uint64_t rounds;
static uint32_t blocks;
static size_t max_sz;
static pthread_barrier_t start_barrier;

static void *run(void *arg)
{
    worker *w = arg;
    unsigned char **p = malloc((size_t)blocks * sizeof *p);
    if (!p)
        bench_die("out of memory");
    pthread_barrier_wait(&start_barrier);
    uint64_t check = 0;
    for (uint64_t r = 0; r < rounds; r++) {
        for (uint32_t i = 0; i < blocks; i++) {
            size_t sz = 1 + (size_t)(((uint64_t)i * 37u + r + w->index) % max_sz);
            unsigned char *b = malloc(sz);
            if (!b)
                bench_die("malloc(%zu) failed", sz);
            memset(b, (int)(i & 0xff), sz < 16 ? sz : 16);
            p[i] = b;
        }
        for (uint32_t i = blocks; i-- > blocks / 2;) {
            check += p[i][0];
            free(p[i]);
        }
        for (uint32_t i = 0; i < blocks / 2; i++) {
            check += p[i][0];
            free(p[i]);
        }
    }
    free(p);
    w->ops = 2 * rounds * blocks;
    w->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [ROUNDS=4000] [BLOCKS=4000] [MAX=1000]\n");
    uint32_t threads = (uint32_t)bench_arg(argc, argv, 1, 2);
    rounds = (uint64_t)bench_arg(argc, argv, 2, 4000);
    blocks = (uint32_t)bench_arg(argc, argv, 3, 4000);
    max_sz = (size_t)bench_arg(argc, argv, 4, 1000);
    if (threads < 1 || threads > 1024 || blocks < 2 || blocks > 10000000 || max_sz < 1)
        bench_die("THREADS in 1..1024, BLOCKS in 2..10000000, MAX at least 1");
    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    for (uint32_t i = 0; i < threads; i++)
        w[i].index = i;
    if (pthread_barrier_init(&start_barrier, NULL, threads + 1))
        bench_die("pthread_barrier_init failed");
    BENCH_START_THREADS(w, threads, tid, run);
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    BENCH_JOIN_THREADS(w, threads, tid);
    double secs = bench_now() - t0;
    uint64_t ops = 0, check = 0;
    for (uint32_t i = 0; i < threads; i++) {
        ops += w[i].ops;
        check += w[i].check;
    }
    free(w);
    bench_result("batch_mix", (double)ops, secs, "threads=%u rounds=%llu blocks=%u max=%zu check=%llu", threads,
                 (unsigned long long)rounds, blocks, max_sz, (unsigned long long)check);
    return 0;
}
