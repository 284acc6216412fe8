/*
 * bench_alltoall THREADS ROUNDS BATCH [MIN MAX]
 *
 * All-to-all frees: in each round every thread allocates BATCH blocks of
 * MIN..MAX bytes (default 16..1024) for every thread (itself included) and
 * writes them; after a barrier every thread frees the blocks addressed to it,
 * so (THREADS-1)/THREADS of the frees are of blocks from other threads.
 * ops = mallocs + frees = 2 * THREADS * THREADS * BATCH * ROUNDS.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    uint32_t id;
    uint64_t check;
} worker;

static uint32_t nthreads, batch;
static uint64_t rounds;
static size_t min_sz, max_sz;
static void **mail; /* [from][to][batch] */
static pthread_barrier_t start_bar, bar; /* start: workers + main; bar: workers */

static void *run(void *arg)
{
    worker *w = arg;
    uint64_t s = bench_seed(1000 + w->id), span = (uint64_t)(max_sz - min_sz) + 1, check = 0;
    pthread_barrier_wait(&start_bar);
    for (uint64_t r = 0; r < rounds; r++) {
        void **out = mail + (size_t)w->id * nthreads * batch;
        for (uint32_t i = 0; i < nthreads * batch; i++) {
            uint64_t x = bench_rand(&s);
            size_t sz = min_sz + (size_t)(((x & 0xffffffffu) * span) >> 32);
            void *p = malloc(sz);
            if (!p)
                bench_die("malloc(%zu) failed", sz);
            bench_touch(p, sz, x);
            out[i] = p;
        }
        pthread_barrier_wait(&bar);
        for (uint32_t from = 0; from < nthreads; from++) {
            void **in = mail + ((size_t)from * nthreads + w->id) * batch;
            for (uint32_t i = 0; i < batch; i++) {
                check += *(unsigned char *)in[i];
                free(in[i]);
            }
        }
        pthread_barrier_wait(&bar);
    }
    w->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [ROUNDS=2000] [BATCH=256] [MIN=16] [MAX=1024]\n");
    nthreads = (uint32_t)bench_arg(argc, argv, 1, 2);
    rounds = (uint64_t)bench_arg(argc, argv, 2, 2000);
    batch = (uint32_t)bench_arg(argc, argv, 3, 256);
    min_sz = (size_t)bench_arg(argc, argv, 4, 16);
    max_sz = (size_t)bench_arg(argc, argv, 5, 1024);
    if (nthreads == 0 || nthreads > 256 || batch == 0 || batch > 1000000 || min_sz == 0 ||
        max_sz < min_sz)
        bench_die("bad parameters");
    mail = calloc((size_t)nthreads * nthreads * batch, sizeof *mail);
    worker *w = calloc(nthreads, sizeof *w);
    if (!mail || !w)
        bench_die("out of memory");
    pthread_barrier_init(&start_bar, NULL, nthreads + 1);
    pthread_barrier_init(&bar, NULL, nthreads);
    for (uint32_t i = 0; i < nthreads; i++)
        w[i].id = i;
    BENCH_START_THREADS(w, nthreads, tid, run);
    pthread_barrier_wait(&start_bar);
    double t0 = bench_now();
    uint64_t check = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
        pthread_join(w[i].tid, NULL);
        check += w[i].check;
    }
    double secs = bench_now() - t0;
    free(mail);
    free(w);
    double ops = 2.0 * nthreads * (double)nthreads * batch * (double)rounds;
    bench_result("alltoall", ops, secs, "threads=%u rounds=%llu batch=%u min=%zu max=%zu check=%llu",
                 nthreads, (unsigned long long)rounds, batch, min_sz, max_sz,
                 (unsigned long long)check);
    return 0;
}
