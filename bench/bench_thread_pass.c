/*
 * bench_thread_pass GENERATIONS [THREADS BLOCKS MIN MAX SEED]
 *
 * Worker threads that come and go while passing objects to each other, as a
 * server's thread pool that grows and shrinks. GENERATIONS times, the main
 * thread starts THREADS threads (default 2) and joins them. Each thread
 * allocates BLOCKS blocks (default 1000) of MIN..MAX bytes (default
 * 16..4096, log-uniform), writes them, pushes half of them to a shared
 * mailbox (a mutex-protected FIFO ring), frees the half it kept, then pops the
 * oldest blocks from the mailbox and frees them — blocks other threads
 * allocated, most of them threads that have exited — and exits. A thread pops
 * only down to THREADS*BLOCKS/2 blocks, so the mailbox always holds the last
 * generation's blocks (never the popping thread's own) and at most
 * THREADS*BLOCKS: the blocks in flight are bounded. Pushes and pops take the
 * mutex once per batch. What is left at the end is freed untimed.
 * ops = mallocs + frees inside the threads.
 */
#include "bench_threads.h"

typedef struct {
    pthread_t tid;
    void **mine;   /* BLOCKS pointers */
    uint64_t seed, mallocs, frees, check;
} worker;

static uint32_t blocks;
static size_t min_sz, max_sz;

/* the mailbox: a FIFO ring of cap pointers, head = oldest */
static pthread_mutex_t mbox_lock = PTHREAD_MUTEX_INITIALIZER;
static void **mbox;
static size_t mbox_cap, mbox_head, mbox_len, mbox_keep;

static bench_logu sizes; /* log-uniform MIN..MAX */

static void *run(void *arg)
{
    worker *w = arg;
    uint64_t s = bench_seed(w->seed), check = 0, frees = 0;
    uint32_t half = blocks / 2;
    for (uint32_t i = 0; i < blocks; i++) {
        uint64_t r = bench_rand(&s);
        size_t sz = bench_logu_draw(&sizes, r);
        unsigned char *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        bench_touch(p, sz, r | 1);
        p[sz - 1] = (unsigned char)r;
        w->mine[i] = p;
    }
    /* pass the first half on */
    uint32_t pushed = 0;
    pthread_mutex_lock(&mbox_lock);
    while (pushed < half && mbox_len < mbox_cap) {
        mbox[(mbox_head + mbox_len) % mbox_cap] = w->mine[pushed++];
        mbox_len++;
    }
    pthread_mutex_unlock(&mbox_lock);
    /* free what was kept (and whatever did not fit, which the sizing avoids) */
    for (uint32_t i = pushed; i < blocks; i++) {
        check += *(unsigned char *)w->mine[i];
        free(w->mine[i]);
    }
    frees += blocks - pushed;
    /* take the oldest blocks, allocated by other (mostly exited) threads */
    uint32_t got = 0;
    pthread_mutex_lock(&mbox_lock);
    while (got < half && mbox_len > mbox_keep) {
        w->mine[got++] = mbox[mbox_head];
        mbox_head = (mbox_head + 1) % mbox_cap;
        mbox_len--;
    }
    pthread_mutex_unlock(&mbox_lock);
    for (uint32_t i = 0; i < got; i++) {
        check += *(unsigned char *)w->mine[i];
        free(w->mine[i]);
    }
    frees += got;
    w->mallocs += blocks;
    w->frees += frees;
    w->seed = s;
    w->check += check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_gens a = bench_gens_args(argc, argv, 1500, 1000, 21, 2, (size_t)1 << 40);
    uint64_t gens = a.gens, seed = a.seed;
    uint32_t threads = a.threads;
    blocks = a.blocks;
    min_sz = a.min;
    max_sz = a.max;
    bench_logu_init(&sizes, min_sz, max_sz);
    mbox_keep = (size_t)threads * (blocks / 2);
    mbox_cap = mbox_keep + (size_t)threads * (blocks / 2);
    mbox = calloc(mbox_cap, sizeof *mbox);
    worker *w = calloc(threads, sizeof *w);
    if (!mbox || !w)
        bench_die("out of memory");
    for (uint32_t i = 0; i < threads; i++) {
        w[i].mine = calloc(blocks, sizeof(void *));
        w[i].seed = seed * 1000 + i;
        if (!w[i].mine)
            bench_die("out of memory");
    }
    double t0 = bench_now();
    for (uint64_t g = 0; g < gens; g++) {
        BENCH_START_THREADS(w, threads, tid, run);
        BENCH_JOIN_THREADS(w, threads, tid);
    }
    double secs = bench_now() - t0;
    uint64_t ops = 0, check = 0;
    size_t left = mbox_len;
    for (; mbox_len > 0; mbox_len--, mbox_head = (mbox_head + 1) % mbox_cap)
        free(mbox[mbox_head]);
    for (uint32_t i = 0; i < threads; i++) {
        ops += w[i].mallocs + w[i].frees;
        check += w[i].check;
        free(w[i].mine);
    }
    free(w);
    free(mbox);
    bench_result("thread_pass", (double)ops, secs,
                 "generations=%llu threads=%u blocks=%u min=%zu max=%zu in_mailbox=%zu "
                 "threads_per_sec=%.0f check=%llu",
                 (unsigned long long)gens, threads, blocks, min_sz, max_sz, left,
                 secs > 0 ? (double)gens * threads / secs : 0.0, (unsigned long long)check);
    return 0;
}
