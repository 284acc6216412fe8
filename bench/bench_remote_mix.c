/*
 * bench_remote_mix THREADS MS MIN MAX BATCH REMOTE_PCT
 *
 * A chosen fraction of the frees is remote. THREADS threads (default 2) run
 * the same loop for MS milliseconds: allocate a block of MIN..MAX bytes
 * (uniform) and tag it (bench_xfer.h); with probability REMOTE_PCT % send it
 * to the next thread (thread t sends to t+1 mod THREADS), otherwise put it in
 * a random slot of the thread's own window of 1024 blocks, freeing the block
 * that was there (a local free). Sent blocks travel in batches of BATCH
 * pointers through a ring (at most ~4096 blocks in flight); every 32
 * iterations, and whenever its outgoing ring is full, a thread checks and
 * frees the batches it has received (remote frees). So REMOTE_PCT % of all
 * frees are remote and BATCH sets how many blocks one hand-over carries.
 * ops = mallocs + frees; secs = from the start to the last thread's exit.
 * Defaults: bench_remote_mix 2 1000 16 256 256 50
 */
#include "bench_threads.h"
#include "bench_xfer.h"

#define WINDOW 1024u
#define INFLIGHT 4096u

typedef struct {
    _Alignas(64) uint64_t id, mallocs, frees, remote_frees, check;
    pthread_t t;
} worker;

static uint64_t n_threads, batch, pct;
static size_t min_sz, max_sz;
static xfer_ring *rings; /* rings[t]: from thread t to thread t+1 */
static atomic_int stop_flag, threads_done;
static pthread_barrier_t start_barrier;

typedef struct {
    xfer_ring *in;
    uint64_t head, frees, check;
} inbox;

static uint64_t drain(inbox *ib)
{
    uint32_t n;
    void **b;
    uint64_t got = 0;
    while ((b = xfer_ring_peek(ib->in, ib->head, &n))) {
        for (uint32_t i = 0; i < n; i++) {
            ib->check += xfer_check(b[i], 0);
            free(b[i]);
        }
        got += n;
        xfer_ring_release(ib->in, ib->head++);
    }
    ib->frees += got;
    return got;
}

static void *run(void *arg)
{
    worker *w = arg;
    uint64_t s = bench_seed(500 + w->id), mallocs = 0, frees = 0, check = 0;
    xfer_ring *out = &rings[w->id];
    inbox ib = {.in = &rings[(w->id + n_threads - 1) % n_threads]};
    void *window[WINDOW];
    size_t wsize[WINDOW];
    for (unsigned i = 0; i < WINDOW; i++) {
        size_t sz = xfer_size(bench_rand(&s), min_sz, max_sz);
        window[i] = malloc(sz);
        if (!window[i])
            bench_die("malloc failed");
        xfer_tag(window[i], sz);
        wsize[i] = sz;
    }
    uint64_t tail = 0;
    void **slot = NULL;
    uint32_t filled = 0;
    pthread_barrier_wait(&start_barrier);
    for (uint64_t it = 0;; it++) {
        if ((it & 31) == 0) {
            if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
                break;
            drain(&ib);
        }
        uint64_t r = bench_rand(&s);
        size_t sz = xfer_size(r, min_sz, max_sz);
        void *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        xfer_tag(p, sz);
        mallocs++;
        if (bench_below(r ^ (r << 21), 100) < pct) {
            unsigned spins = 0;
            while (!slot && !(slot = xfer_ring_slot(out, tail))) {
                if (!drain(&ib)) /* the receiver is behind: let it run */
                    xfer_pause(&spins);
            }
            slot[filled++] = p;
            if (filled == batch) {
                xfer_ring_publish(out, tail++, filled);
                slot = NULL;
                filled = 0;
            }
        } else {
            unsigned i = (unsigned)(r & (WINDOW - 1));
            check += xfer_check(window[i], wsize[i]);
            free(window[i]);
            frees++;
            window[i] = p;
            wsize[i] = sz;
        }
    }
    if (filled) /* the last, partial batch */
        xfer_ring_publish(out, tail++, filled);
    atomic_fetch_add(&threads_done, 1);
    for (;;) {
        int done = atomic_load_explicit(&threads_done, memory_order_acquire) == (int)n_threads;
        unsigned spins = 63;
        if (!drain(&ib)) {
            if (done)
                break;
            xfer_pause(&spins);
        }
    }
    for (unsigned i = 0; i < WINDOW; i++) { /* not counted: outside the loop */
        check += xfer_check(window[i], wsize[i]);
        free(window[i]);
    }
    w->mallocs = mallocs;
    w->frees = frees + ib.frees;
    w->remote_frees = ib.frees;
    w->check = check + ib.check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [MS=1000] [MIN=16] [MAX=256] [BATCH=256] [REMOTE_PCT=50]\n");
    n_threads = (uint64_t)bench_arg(argc, argv, 1, 2);
    uint64_t ms = (uint64_t)bench_arg(argc, argv, 2, 1000);
    min_sz = (size_t)bench_arg(argc, argv, 3, 16);
    max_sz = (size_t)bench_arg(argc, argv, 4, 256);
    batch = (uint64_t)bench_arg(argc, argv, 5, 256);
    pct = (uint64_t)bench_arg(argc, argv, 6, 50);
    if (n_threads < 2 || n_threads > 256 || min_sz < 8 || max_sz < min_sz || batch == 0 ||
        batch > INFLIGHT || pct > 100)
        bench_die("need 2..256 threads, 8 <= MIN <= MAX, 1 <= BATCH <= %u, REMOTE_PCT <= 100",
                  INFLIGHT);
    rings = aligned_alloc(64, n_threads * sizeof *rings);
    worker *w = aligned_alloc(64, n_threads * sizeof *w);
    if (!rings || !w)
        bench_die("out of memory");
    for (uint64_t i = 0; i < n_threads; i++)
        xfer_ring_init(&rings[i], (uint32_t)batch, INFLIGHT);
    pthread_barrier_init(&start_barrier, NULL, (unsigned)(n_threads + 1));
    for (uint64_t i = 0; i < n_threads; i++)
        w[i] = (worker){.id = i};
    BENCH_START_THREADS(w, n_threads, t, run);
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    bench_sleep_ms(ms);
    atomic_store(&stop_flag, 1);
    uint64_t mallocs = 0, frees = 0, remote = 0, check = 0;
    for (uint64_t i = 0; i < n_threads; i++) {
        pthread_join(w[i].t, NULL);
        mallocs += w[i].mallocs;
        frees += w[i].frees;
        remote += w[i].remote_frees;
        check += w[i].check;
    }
    double secs = bench_now() - t0;
    xfer_check_balance(mallocs, frees);
    for (uint64_t i = 0; i < n_threads; i++)
        xfer_ring_destroy(&rings[i]);
    free(rings);
    free(w);
    bench_result("remote_mix", (double)(mallocs + frees), secs,
                 "threads=%llu min=%zu max=%zu batch=%llu remote_pct=%llu remote_frees=%llu "
                 "remote_share=%.3f check=%llu",
                 (unsigned long long)n_threads, min_sz, max_sz, (unsigned long long)batch,
                 (unsigned long long)pct, (unsigned long long)remote,
                 frees ? (double)remote / (double)frees : 0.0, (unsigned long long)check);
    return 0;
}
