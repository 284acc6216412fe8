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
 * RING=1 (the cross-thread form, after sh8bench, which frees another
 * thread's blocks): the threads form a ring, and each up-run, once
 * allocated and written, goes to the next thread, which checks and frees
 * it in the same order; a thread frees the runs it receives whenever it
 * waits, and has at most two of its own out (one being freed, one in the
 * box); the down-runs stay local. A run whose receiver has finished is
 * freed by its sender, and what is left in a box at the end by the main
 * thread.
 * ops = mallocs + frees; secs = wall time from a common start to the last
 * thread's end.
 */
#include "bench_threads.h"

#include <sched.h>
#include <stdatomic.h>

typedef struct run_buf {
    unsigned char **p;
    uint32_t n;
    size_t sz;
    _Atomic int freed; /* set by whoever freed its blocks */
} run_buf;

typedef struct {
    pthread_t tid;
    uint64_t passes, ops, check;
    uint32_t blocks;
    size_t max;
    run_buf buf[2];               /* RING: this thread's runs out */
    _Atomic(run_buf *) box;       /* RING: a run from the previous thread */
    _Atomic int done;
} worker;

static pthread_barrier_t start_barrier;
static worker *ring;
static uint64_t n_ring;

static uint64_t free_run(run_buf *r, uint64_t *ops)
{
    uint64_t check = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        check += r->p[i][0] + r->p[i][r->sz - 1];
        free(r->p[i]);
    }
    *ops += r->n;
    atomic_store_explicit(&r->freed, 1, memory_order_release);
    return check;
}

/* Free the run in w's box, if any. */
static void drain(worker *w)
{
    run_buf *r = atomic_exchange_explicit(&w->box, NULL, memory_order_acquire);
    if (r)
        w->check += free_run(r, &w->ops);
}

/* Hand r to the next thread: wait (freeing what comes in) until its box is
 * empty; if it has finished, free r here. */
static void hand_on(worker *w, worker *next, run_buf *r)
{
    for (;;) {
        run_buf *none = NULL;
        if (atomic_load_explicit(&next->done, memory_order_acquire)) {
            w->check += free_run(r, &w->ops);
            return;
        }
        if (atomic_compare_exchange_strong_explicit(&next->box, &none, r, memory_order_release,
                                                    memory_order_relaxed)) {
            /* It may have finished just before: take r back if still there. */
            if (atomic_load_explicit(&next->done, memory_order_acquire)) {
                run_buf *mine = r;
                if (atomic_compare_exchange_strong_explicit(&next->box, &mine, NULL, memory_order_acquire,
                                                            memory_order_relaxed))
                    w->check += free_run(r, &w->ops);
            }
            return;
        }
        drain(w);
        sched_yield();
    }
}

static void ring_run(worker *w, worker *next, unsigned k, size_t sz)
{
    run_buf *r = &w->buf[k & 1];
    while (!atomic_load_explicit(&r->freed, memory_order_acquire)) {
        drain(w);
        if (atomic_load_explicit(&next->done, memory_order_acquire)) {
            /* Its receiver is gone: whoever holds r now is its box. */
            run_buf *mine = r;
            if (atomic_compare_exchange_strong_explicit(&next->box, &mine, NULL, memory_order_acquire,
                                                        memory_order_relaxed))
                w->check += free_run(r, &w->ops);
        }
        sched_yield();
    }
    r->n = w->blocks;
    r->sz = sz;
    for (uint32_t i = 0; i < r->n; i++) {
        r->p[i] = malloc(sz);
        if (!r->p[i])
            bench_die("malloc(%zu) failed", sz);
        r->p[i][0] = (unsigned char)i;
        r->p[i][sz - 1] = (unsigned char)(i >> 3);
    }
    w->ops += r->n;
    atomic_store_explicit(&r->freed, 0, memory_order_relaxed);
    hand_on(w, next, r);
    drain(w);
}

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
    worker *next = ring ? &ring[(uint64_t)(w - ring + 1) % n_ring] : NULL;
    unsigned turn = 0;
    pthread_barrier_wait(&start_barrier);
    for (uint64_t k = 0; k < w->passes; k++) {
        for (size_t sz = 1; sz <= w->max; sz = sz * 3 / 2 + 1) {
            if (next) {
                ring_run(w, next, turn++, sz);
                continue;
            }
            w->check += run_size(p, w->blocks, sz, 0);
            w->ops += 2 * (uint64_t)w->blocks;
        }
        for (size_t sz = w->max; sz >= 1; sz = sz * 2 / 3) {
            w->check += run_size(p, down_n, sz, 1);
            w->ops += 2 * (uint64_t)down_n;
        }
    }
    if (next) {
        /* Free what comes in until both own runs are freed or their
         * receiver is gone; then stop taking (a late run stays in the
         * box, for the main thread). */
        for (unsigned k = 0; k < 2; k++)
            while (!atomic_load_explicit(&w->buf[k].freed, memory_order_acquire) &&
                   !atomic_load_explicit(&next->done, memory_order_acquire)) {
                drain(w);
                sched_yield();
            }
        drain(w);
        atomic_store_explicit(&w->done, 1, memory_order_release);
    }
    free(p);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [PASSES=100] [BLOCKS=2500] [MAX=1000] [RING=0]\n");
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 1, 2), passes = (uint64_t)bench_arg(argc, argv, 2, 100);
    uint64_t blocks = (uint64_t)bench_arg(argc, argv, 3, 2500);
    size_t max = (size_t)bench_arg(argc, argv, 4, 1000);
    int ring_mode = (int)bench_arg(argc, argv, 5, 0);
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
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (worker){.passes = passes, .blocks = (uint32_t)blocks, .max = max};
        for (unsigned k = 0; ring_mode && k < 2; k++) {
            w[i].buf[k].p = malloc(sizeof(unsigned char *) * blocks);
            if (!w[i].buf[k].p)
                bench_die("out of memory");
            atomic_store(&w[i].buf[k].freed, 1);
        }
    }
    if (ring_mode) {
        ring = w;
        n_ring = threads;
    }
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
    for (uint64_t i = 0; ring_mode && i < threads; i++) {
        run_buf *r = atomic_exchange(&w[i].box, NULL);
        if (r)
            check += free_run(r, &ops);
    }
    for (uint64_t i = 0; ring_mode && i < threads; i++)
        for (unsigned k = 0; k < 2; k++)
            free(w[i].buf[k].p);
    free(w);
    bench_result("size_runs", (double)ops, secs, "threads=%llu passes=%llu blocks=%llu max=%zu ring=%d check=%llu",
                 (unsigned long long)threads, (unsigned long long)passes, (unsigned long long)blocks, max,
                 ring_mode, (unsigned long long)check);
    return 0;
}
