/*
 * bench_stress THREADS ROUNDS STEPS [SEED]
 *
 * Threads that keep a working set, swap blocks through a shared array and
 * come and go: the pattern of mimalloc's test-stress ("mstress" in
 * mimalloc-bench), written anew here. ROUNDS times, the main thread starts
 * THREADS threads and joins them. Each thread makes STEPS steps: it
 * allocates a block of 8..128 B (one in a hundred 16 times that, one in a
 * thousand 256 times: up to 32 KiB; one in a hundred thousand 8192 times:
 * up to 1 MiB), writes every word of it, and then either swaps it into a
 * random slot of the shared array of 1000 blocks (one step in four: the
 * block that was there, allocated by any thread of any round, is checked
 * and freed) or puts it in a random slot of its own 2000, freeing the
 * block that was there. At its end a thread frees its own slots; the
 * shared array lives on into the next round and is freed, timed, after the
 * last. So blocks are freed by threads that did not allocate them, many
 * by a thread of a later round than their allocator's, and the live set
 * is bounded: THREADS * 2000 + 1000 blocks.
 * A freed block's first and last words are checked against what its
 * allocation wrote (its size and address): a block handed out twice or
 * overwritten stops the run.
 * ops = mallocs + frees; secs = wall time of the rounds and the last frees.
 */
#include "bench_threads.h"

#include <stdatomic.h>

#define SHARED 1000u
#define OWN 2000u

typedef struct {
    pthread_t tid;
    uint64_t seed, steps, mallocs, frees, check;
} worker;

static uint64_t steps;
static _Atomic(uintptr_t *) shared[SHARED];

static const uintptr_t KEY = (uintptr_t)0x9e3779b97f4a7c15ull;

/* A block of n words: word 0 holds n, the last its address, every other a
 * pattern of both. */
static uintptr_t *make(size_t n)
{
    uintptr_t *p = malloc(n * sizeof *p);
    if (!p)
        bench_die("malloc(%zu) failed", n * sizeof *p);
    p[0] = n ^ KEY;
    for (size_t i = 1; i + 1 < n; i++)
        p[i] = (uintptr_t)p + i;
    if (n > 1)
        p[n - 1] = (uintptr_t)p ^ KEY;
    return p;
}

/* Checks and frees p (NULL: nothing); returns its word count. */
static size_t drop(uintptr_t *p)
{
    if (!p)
        return 0;
    size_t n = p[0] ^ KEY;
    if (n == 0 || n > ((size_t)1 << 17) || (n > 1 && p[n - 1] != ((uintptr_t)p ^ KEY)))
        bench_die("block %p was overwritten or handed out twice", (void *)p);
    free(p);
    return n;
}

static size_t words(uint64_t r)
{
    size_t n = 1 + (size_t)(r & 15); /* 8..128 B */
    uint32_t k = (uint32_t)(r >> 32) % 100000u;
    if (k == 0)
        n *= 8192;
    else if (k % 1000 == 1)
        n *= 256;
    else if (k % 100 == 2)
        n *= 16;
    return n;
}

static void *run(void *arg)
{
    worker *w = arg;
    uintptr_t *own[OWN] = {0};
    uint64_t s = bench_seed(w->seed), check = 0, frees = 0;
    for (uint64_t i = 0; i < steps; i++) {
        uint64_t r = bench_rand(&s);
        uintptr_t *p = make(words(r));
        uint32_t slot = (uint32_t)(r >> 8);
        uintptr_t *old;
        if ((r & 0x30) == 0) {
            old = atomic_exchange_explicit(&shared[slot % SHARED], p, memory_order_acq_rel);
        } else {
            old = own[slot % OWN];
            own[slot % OWN] = p;
        }
        if (old) {
            check += drop(old);
            frees++;
        }
    }
    for (uint32_t i = 0; i < OWN; i++)
        if (own[i]) {
            check += drop(own[i]);
            frees++;
        }
    w->mallocs += steps;
    w->frees += frees;
    w->check += check;
    w->seed = s;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s THREADS ROUNDS STEPS [SEED]  (defaults: 2 10 200000 7)\n");
    uint32_t threads = (uint32_t)bench_arg(argc, argv, 1, 2);
    uint64_t rounds = (uint64_t)bench_arg(argc, argv, 2, 10);
    steps = (uint64_t)bench_arg(argc, argv, 3, 200000);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 4, 7);
    if (threads == 0 || threads > 1024 || rounds == 0 || steps == 0)
        bench_die("bad parameters");
    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    for (uint32_t i = 0; i < threads; i++)
        w[i].seed = seed * 1000 + i;
    double t0 = bench_now();
    for (uint64_t g = 0; g < rounds; g++) {
        BENCH_START_THREADS(w, threads, tid, run);
        BENCH_JOIN_THREADS(w, threads, tid);
    }
    uint64_t ops = 0, check = 0;
    for (uint32_t i = 0; i < SHARED; i++) {
        uintptr_t *p = atomic_exchange_explicit(&shared[i], NULL, memory_order_relaxed);
        if (p) {
            check += drop(p);
            ops++;
        }
    }
    double secs = bench_now() - t0;
    for (uint32_t i = 0; i < threads; i++) {
        ops += w[i].mallocs + w[i].frees;
        check += w[i].check;
    }
    free(w);
    bench_result("stress", (double)ops, secs, "threads=%u rounds=%llu steps=%llu check=%llu", threads,
                 (unsigned long long)rounds, (unsigned long long)steps, (unsigned long long)check);
    return 0;
}
