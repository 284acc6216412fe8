/*
 * bench_xmalloc PRODUCERS CONSUMERS MS MIN MAX BATCH
 *
 * Blocks allocated by some threads and freed by others, for a fixed time (the
 * workload of xmalloc-test, written anew). PRODUCERS threads allocate blocks
 * of MIN..MAX bytes (uniform), tag them (bench_xfer.h) and hand them over in
 * batches of BATCH pointers, round robin, to CONSUMERS threads, which check
 * and free them: every free is remote. Each producer/consumer pair has its
 * own ring holding at most 4096 blocks in flight; a producer whose rings are
 * all full waits (spin, then sched_yield). After MS milliseconds the
 * producers stop and the consumers free what is left in the rings.
 * ops = mallocs + frees; secs = from the start to the last thread's exit.
 * 1 producer + 2 consumers is the xmalloc-test shape ("one allocates, the
 * others free"); 2 producers + 1 consumer is its reverse.
 * Defaults: bench_xmalloc 1 1 1000 8 64 32
 */
#include "bench_threads.h"
#include "bench_xfer.h"

#define INFLIGHT 4096u

typedef struct {
    _Alignas(64) uint64_t id, ops, waits, check;
    pthread_t t;
} worker;

static uint64_t n_prod, n_cons, batch;
static size_t min_sz, max_sz;
static xfer_ring *rings; /* rings[p * n_cons + c] */
static atomic_int stop_flag, producers_done;
static pthread_barrier_t start_barrier;

static void *producer(void *arg)
{
    worker *w = arg;
    uint64_t s = bench_seed(1000 + w->id), mallocs = 0, waits = 0;
    uint64_t *tail = calloc(n_cons, sizeof *tail);
    if (!tail)
        bench_die("out of memory");
    xfer_ring *mine = rings + w->id * n_cons;
    uint64_t next = w->id % n_cons;
    pthread_barrier_wait(&start_barrier);
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        void **slot = NULL;
        uint64_t c = next;
        for (uint64_t k = 0; k < n_cons && !slot; k++) {
            c = (next + k) % n_cons;
            slot = xfer_ring_slot(&mine[c], tail[c]);
        }
        if (!slot) {
            unsigned spins = 63; /* every ring full: yield at once */
            waits++;
            xfer_pause(&spins);
            continue;
        }
        next = (c + 1) % n_cons;
        for (uint64_t i = 0; i < batch; i++) {
            uint64_t r = bench_rand(&s);
            size_t sz = xfer_size(r, min_sz, max_sz);
            void *p = malloc(sz);
            if (!p)
                bench_die("malloc(%zu) failed", sz);
            xfer_tag(p, sz);
            slot[i] = p;
        }
        mallocs += batch;
        xfer_ring_publish(&mine[c], tail[c]++, (uint32_t)batch);
    }
    free(tail);
    w->ops = mallocs;
    w->waits = waits;
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

static void *consumer(void *arg)
{
    worker *w = arg;
    uint64_t frees = 0, check = 0, waits = 0;
    uint64_t *head = calloc(n_prod, sizeof *head);
    if (!head)
        bench_die("out of memory");
    pthread_barrier_wait(&start_barrier);
    unsigned spins = 0;
    for (;;) {
        /* read before looking at the rings: if every producer was already
         * done, rings found empty stay empty */
        int done = atomic_load_explicit(&producers_done, memory_order_acquire) == (int)n_prod;
        int got = 0;
        for (uint64_t p = 0; p < n_prod; p++) {
            xfer_ring *r = &rings[p * n_cons + w->id];
            uint32_t n;
            void **b;
            while ((b = xfer_ring_peek(r, head[p], &n))) {
                for (uint32_t i = 0; i < n; i++) {
                    check += xfer_check(b[i], 0);
                    free(b[i]);
                }
                frees += n;
                xfer_ring_release(r, head[p]++);
                got = 1;
            }
        }
        if (got) {
            spins = 0;
            continue;
        }
        if (done)
            break;
        waits++;
        xfer_pause(&spins);
    }
    free(head);
    w->ops = frees;
    w->waits = waits;
    w->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [PRODUCERS=1] [CONSUMERS=1] [MS=1000] [MIN=8] [MAX=64] [BATCH=32]\n");
    n_prod = (uint64_t)bench_arg(argc, argv, 1, 1);
    n_cons = (uint64_t)bench_arg(argc, argv, 2, 1);
    uint64_t ms = (uint64_t)bench_arg(argc, argv, 3, 1000);
    min_sz = (size_t)bench_arg(argc, argv, 4, 8);
    max_sz = (size_t)bench_arg(argc, argv, 5, 64);
    batch = (uint64_t)bench_arg(argc, argv, 6, 32);
    if (n_prod == 0 || n_cons == 0 || n_prod > 256 || n_cons > 256 || min_sz < 8 ||
        max_sz < min_sz || batch == 0 || batch > INFLIGHT)
        bench_die("need 1..256 producers and consumers, 8 <= MIN <= MAX, 1 <= BATCH <= %u",
                  INFLIGHT);

    rings = aligned_alloc(64, n_prod * n_cons * sizeof *rings);
    worker *pw = aligned_alloc(64, n_prod * sizeof *pw);
    worker *cw = aligned_alloc(64, n_cons * sizeof *cw);
    if (!rings || !pw || !cw)
        bench_die("out of memory");
    for (uint64_t i = 0; i < n_prod * n_cons; i++)
        xfer_ring_init(&rings[i], (uint32_t)batch, INFLIGHT);
    pthread_barrier_init(&start_barrier, NULL, (unsigned)(n_prod + n_cons + 1));
    for (uint64_t i = 0; i < n_cons; i++)
        cw[i] = (worker){.id = i};
    for (uint64_t i = 0; i < n_prod; i++)
        pw[i] = (worker){.id = i};
    BENCH_START_THREADS(cw, n_cons, t, consumer);
    BENCH_START_THREADS(pw, n_prod, t, producer);
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    bench_sleep_ms(ms);
    atomic_store(&stop_flag, 1);
    uint64_t mallocs = 0, frees = 0, pwaits = 0, cwaits = 0, check = 0;
    for (uint64_t i = 0; i < n_prod; i++) {
        pthread_join(pw[i].t, NULL);
        mallocs += pw[i].ops;
        pwaits += pw[i].waits;
    }
    for (uint64_t i = 0; i < n_cons; i++) {
        pthread_join(cw[i].t, NULL);
        frees += cw[i].ops;
        cwaits += cw[i].waits;
        check += cw[i].check;
    }
    double secs = bench_now() - t0;
    xfer_check_balance(mallocs, frees);
    for (uint64_t i = 0; i < n_prod * n_cons; i++)
        xfer_ring_destroy(&rings[i]);
    free(rings);
    free(pw);
    free(cw);
    bench_result("xmalloc", (double)(mallocs + frees), secs,
                 "producers=%llu consumers=%llu min=%zu max=%zu batch=%llu mallocs=%llu "
                 "producer_waits=%llu consumer_waits=%llu check=%llu",
                 (unsigned long long)n_prod, (unsigned long long)n_cons, min_sz, max_sz,
                 (unsigned long long)batch, (unsigned long long)mallocs,
                 (unsigned long long)pwaits, (unsigned long long)cwaits,
                 (unsigned long long)check);
    return 0;
}
