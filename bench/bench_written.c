/*
 * bench_written THREADS ITERS WS MIN MAX [SEED]
 *
 * The random mixed pattern with blocks a program fills: each of THREADS
 * threads has WS slots of its own; each step picks a random slot, frees its
 * block (after checking its first and last byte) or mallocs a new one of a
 * size log-uniform in [MIN, MAX] and writes every byte of it. Every free is
 * local. In the spirit of glibc's bench-malloc-thread (per-thread random
 * frees and mallocs up to 32 KiB, small sizes likelier) and of a server's
 * request buffers; written anew.
 *
 * Why a row of its own: the other random mixed rows write the first 8 bytes
 * of a block, so above a page their peak RSS counts the pages an allocator
 * touches itself, not how it packs what the program writes. Here every page
 * of every live block is resident, and an allocator's peak is the program's
 * live bytes plus the free memory it keeps resident: the free blocks of each
 * size class, or the free chunks of a heap that splits and coalesces them.
 * ops = mallocs + frees; secs = wall time from a common start to the last
 * thread's end; bytes_written is what the threads wrote.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    uint64_t iters, seed, ops, written, check;
    uint32_t ws;
} worker;

static bench_logu sizes;
static pthread_barrier_t start_barrier;

static void *run(void *arg)
{
    worker *w = arg;
    unsigned char **slots = calloc(w->ws, sizeof *slots);
    size_t *len = calloc(w->ws, sizeof *len);
    if (!slots || !len)
        bench_die("out of memory");
    uint64_t s = bench_seed(w->seed), ops = 0, written = 0, check = 0;
    pthread_barrier_wait(&start_barrier);
    for (uint64_t i = 0; i < w->iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t k = bench_below(r, w->ws);
        unsigned char *p = slots[k];
        if (p) {
            /* The fill byte is the slot's: a block handed out twice, or
             * written by someone else, shows here. */
            if (p[0] != (unsigned char)k || p[len[k] - 1] != (unsigned char)k)
                bench_die("slot %u: block %p of %zu bytes lost its contents", k, (void *)p, len[k]);
            check += p[len[k] / 2];
            free(p);
            slots[k] = NULL;
        } else {
            size_t n = bench_logu_draw(&sizes, bench_rand(&s));
            p = malloc(n);
            if (!p)
                bench_die("malloc(%zu) failed", n);
            memset(p, (int)(unsigned char)k, n);
            slots[k] = p;
            len[k] = n;
            written += n;
        }
        ops++;
    }
    for (uint32_t k = 0; k < w->ws; k++)
        free(slots[k]);
    free(slots);
    free(len);
    w->ops = ops;
    w->written = written;
    w->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_twmm args = bench_twmm_args(argc, argv, 1000000, 2000, 8, 32768);
    uint64_t threads = args.threads, iters = args.iters, ws = args.ws, seed = args.seed;
    size_t min = args.min, max = args.max;
    bench_logu_init(&sizes, min, max);

    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    pthread_barrier_init(&start_barrier, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++)
        w[i] = (worker){.iters = iters, .seed = seed * 1000003u + i, .ws = (uint32_t)ws};
    BENCH_START_THREADS(w, threads, tid, run);
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    uint64_t ops = 0, written = 0, check = 0;
    for (uint64_t i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        ops += w[i].ops;
        written += w[i].written;
        check += w[i].check;
    }
    double secs = bench_now() - t0;
    pthread_barrier_destroy(&start_barrier);
    free(w);
    bench_result("written", (double)ops, secs,
                 "threads=%llu ws=%llu min=%zu max=%zu bytes_written=%llu check=%llu",
                 (unsigned long long)threads, (unsigned long long)ws, min, max,
                 (unsigned long long)written, (unsigned long long)check);
    return 0;
}
