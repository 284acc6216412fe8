/*
 * bench_rounds THREADS ROUNDS STEPS MIN MAX PAUSE_US [FRESH]
 *
 * Threads pass blocks to each other in rounds with pauses between them (in the
 * spirit of mimalloc's stress test and rpmalloc's rptest, written anew).
 * Each of THREADS threads (default 2) keeps 512 slots of live blocks; all
 * share an exchange array of 1024 slots. A round is STEPS steps per thread;
 * a step picks a random own slot: an empty slot gets a new block of MIN..MAX
 * bytes (uniform); a full one is freed (40 %), replaced by a new block
 * (30 %), or swapped with a random slot of the exchange array (30 %, an
 * atomic exchange), so blocks wander between threads and are freed by
 * whichever thread holds them. After a round every thread sleeps PAUSE_US
 * microseconds, then all meet at a barrier. Every block carries its address
 * (tagged), its size and a tagged last byte, checked before each free.
 * ops = mallocs + frees during the rounds; secs = wall time minus the time
 * spent in the pauses (thread 0's measured sleep), so the figure is the
 * speed while working; pause_secs is printed beside it.
 * FRESH=1 (as in mimalloc's stress test): every round runs on new threads,
 * started and joined by the main thread, which then sleeps PAUSE_US; a
 * thread's slots pass to its successor, so blocks are freed by threads that
 * did not allocate them, most of them exited; thread start and join are in
 * the measured time.
 * Defaults: bench_rounds 2 100 20000 16 1024 1000 0
 */
#include "bench_threads.h"
#include "bench_xfer.h"

#define LOCAL 512u
#define SHARED 1024u

typedef struct {
    _Alignas(64) uint64_t id, state, mallocs, frees, check;
    double pause_secs;
    void *local[LOCAL]; /* kept across rounds (and across threads with FRESH=1) */
    pthread_t t;
} worker;

static uint64_t n_threads, rounds, steps, pause_us;
static size_t min_sz, max_sz;
static _Atomic(void *) shared[SHARED];
static pthread_barrier_t round_barrier;

static inline void *new_block(uint64_t r)
{
    size_t sz = xfer_size(r, min_sz, max_sz);
    void *p = malloc(sz);
    if (!p)
        bench_die("malloc(%zu) failed", sz);
    xfer_tag(p, sz);
    uint32_t z = (uint32_t)sz; /* bytes 8..11: clear of the last byte even at 16 B */
    memcpy((char *)p + 8, &z, 4);
    return p;
}

static inline unsigned drop_block(void *p)
{
    uint32_t sz;
    memcpy(&sz, (char *)p + 8, 4);
    if (sz < min_sz || sz > max_sz)
        xfer_corrupt(p, (size_t)sz);
    unsigned c = xfer_check(p, (size_t)sz);
    free(p);
    return c;
}

static void do_round(worker *w)
{
    uint64_t s = w->state, mallocs = 0, frees = 0, check = 0;
    void **local = w->local;
    for (uint64_t k = 0; k < steps; k++) {
        uint64_t r = bench_rand(&s);
        unsigned i = (unsigned)(r & (LOCAL - 1));
        if (!local[i]) {
            local[i] = new_block(r);
            mallocs++;
            continue;
        }
        uint32_t a = bench_below(r, 100);
        if (a < 40) {
            check += drop_block(local[i]);
            local[i] = NULL;
            frees++;
        } else if (a < 70) {
            check += drop_block(local[i]);
            local[i] = new_block(r >> 7);
            frees++;
            mallocs++;
        } else {
            unsigned j = (unsigned)((r >> 9) & (SHARED - 1));
            local[i] = atomic_exchange_explicit(&shared[j], local[i], memory_order_acq_rel);
        }
    }
    w->state = s;
    w->mallocs += mallocs;
    w->frees += frees;
    w->check += check;
}

static double pause_now(void)
{
    double t = bench_now();
    struct timespec ts = {(time_t)(pause_us / 1000000), (long)(pause_us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
    return bench_now() - t;
}

/* FRESH=0: one thread for all rounds */
static void *run(void *arg)
{
    worker *w = arg;
    for (uint64_t round = 0; round < rounds; round++) {
        pthread_barrier_wait(&round_barrier);
        do_round(w);
        if (pause_us)
            w->pause_secs += pause_now();
    }
    pthread_barrier_wait(&round_barrier); /* every round done: the clock stops */
    return NULL;
}

/* FRESH=1: a new thread for every round */
static void *run_once(void *arg)
{
    do_round(arg);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv,
                "usage: %s [THREADS=2] [ROUNDS=100] [STEPS=20000] [MIN=16] [MAX=1024] "
                "[PAUSE_US=1000] [FRESH=0]\n");
    n_threads = (uint64_t)bench_arg(argc, argv, 1, 2);
    rounds = (uint64_t)bench_arg(argc, argv, 2, 100);
    steps = (uint64_t)bench_arg(argc, argv, 3, 20000);
    min_sz = (size_t)bench_arg(argc, argv, 4, 16);
    max_sz = (size_t)bench_arg(argc, argv, 5, 1024);
    pause_us = (uint64_t)bench_arg(argc, argv, 6, 1000);
    uint64_t fresh = (uint64_t)bench_arg(argc, argv, 7, 0);
    if (n_threads == 0 || n_threads > 256 || rounds == 0 || min_sz < 16 || max_sz < min_sz || max_sz > 0xffffffffu ||
        pause_us > 1000000 || fresh > 1)
        bench_die("need 1..256 threads, ROUNDS >= 1, 16 <= MIN <= MAX, PAUSE_US <= 1000000, "
                  "FRESH 0 or 1");
    worker *w = aligned_alloc(64, n_threads * sizeof *w);
    if (!w)
        bench_die("out of memory");
    memset(w, 0, n_threads * sizeof *w);
    for (uint64_t i = 0; i < n_threads; i++) {
        w[i].id = i;
        w[i].state = bench_seed(900 + i);
    }
    double t0, wall, paused = 0;
    if (!fresh) {
        pthread_barrier_init(&round_barrier, NULL, (unsigned)n_threads + 1);
        BENCH_START_THREADS(w, n_threads, t, run);
        /* the main thread joins each round's barrier to start the clock with round 0 */
        pthread_barrier_wait(&round_barrier);
        t0 = bench_now();
        for (uint64_t round = 1; round <= rounds; round++)
            pthread_barrier_wait(&round_barrier);
        wall = bench_now() - t0;
        BENCH_JOIN_THREADS(w, n_threads, t);
        paused = w[0].pause_secs;
    } else {
        t0 = bench_now();
        for (uint64_t round = 0; round < rounds; round++) {
            BENCH_START_THREADS(w, n_threads, t, run_once);
            BENCH_JOIN_THREADS(w, n_threads, t);
            if (pause_us)
                paused += pause_now();
        }
        wall = bench_now() - t0;
    }
    uint64_t mallocs = 0, frees = 0, check = 0;
    for (uint64_t i = 0; i < n_threads; i++) {
        for (unsigned k = 0; k < LOCAL; k++)
            if (w[i].local[k])
                check += drop_block(w[i].local[k]);
        mallocs += w[i].mallocs;
        frees += w[i].frees;
        check += w[i].check;
    }
    for (unsigned j = 0; j < SHARED; j++) {
        void *p = atomic_load(&shared[j]);
        if (p)
            check += drop_block(p);
    }
    double secs = wall - paused;
    if (secs <= 0)
        bench_die("no working time measured");
    free(w);
    bench_result("rounds", (double)(mallocs + frees), secs,
                 "threads=%llu rounds=%llu steps=%llu min=%zu max=%zu pause_us=%llu fresh=%llu "
                 "wall_secs=%.6f pause_secs=%.6f mallocs=%llu check=%llu",
                 (unsigned long long)n_threads, (unsigned long long)rounds,
                 (unsigned long long)steps, min_sz, max_sz, (unsigned long long)pause_us,
                 (unsigned long long)fresh, wall, paused, (unsigned long long)mallocs, (unsigned long long)check);
    return 0;
}
