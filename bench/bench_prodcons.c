/*
 * bench_prodcons THREADS ITEMS [MIN MAX]
 *
 * Cross-thread producer/consumer: THREADS/2 pairs (THREADS even, default 2).
 * In each pair the producer allocates ITEMS blocks of MIN..MAX bytes (default
 * 16..512), writes them and passes them through a single-producer
 * single-consumer ring of 1024 pointers; the consumer reads and frees them.
 * Every free is of a block allocated by another thread.
 * ops = mallocs + frees = 2 * ITEMS * pairs.
 */
#include "bench_xfer.h" /* xfer_pause; this program's ring is its own */
#include <pthread.h>

#define RING 1024u

typedef struct {
    _Alignas(64) atomic_uint_fast64_t head; /* written by the consumer */
    _Alignas(64) atomic_uint_fast64_t tail; /* written by the producer */
    _Alignas(64) void *slot[RING];
    uint64_t items, seed, check;
    size_t min, max;
    pthread_t prod, cons;
} pair;

static pthread_barrier_t start_barrier;

static void *producer(void *arg)
{
    pair *q = arg;
    uint64_t s = bench_seed(q->seed), span = (uint64_t)(q->max - q->min) + 1;
    uint64_t tail = 0, head_cache = 0;
    pthread_barrier_wait(&start_barrier);
    for (uint64_t i = 0; i < q->items; i++) {
        uint64_t r = bench_rand(&s);
        size_t sz = q->min + (size_t)(((r & 0xffffffffu) * span) >> 32);
        void *p = malloc(sz);
        if (!p)
            bench_die("malloc(%zu) failed", sz);
        bench_touch(p, sz, r);
        unsigned spins = 0;
        while (tail - head_cache >= RING) {
            head_cache = atomic_load_explicit(&q->head, memory_order_acquire);
            if (tail - head_cache >= RING)
                xfer_pause(&spins);
        }
        q->slot[tail % RING] = p;
        tail++;
        atomic_store_explicit(&q->tail, tail, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pair *q = arg;
    uint64_t head = 0, tail_cache = 0, check = 0;
    pthread_barrier_wait(&start_barrier);
    for (uint64_t i = 0; i < q->items; i++) {
        unsigned spins = 0;
        while (head == tail_cache) {
            tail_cache = atomic_load_explicit(&q->tail, memory_order_acquire);
            if (head == tail_cache)
                xfer_pause(&spins);
        }
        void *p = q->slot[head % RING];
        check += *(unsigned char *)p;
        free(p);
        head++;
        atomic_store_explicit(&q->head, head, memory_order_release);
    }
    q->check = check;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, "usage: %s [THREADS=2] [ITEMS=3000000] [MIN=16] [MAX=512]\n");
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 1, 2);
    uint64_t items = (uint64_t)bench_arg(argc, argv, 2, 3000000);
    size_t min = (size_t)bench_arg(argc, argv, 3, 16);
    size_t max = (size_t)bench_arg(argc, argv, 4, 512);
    if (threads < 2 || threads % 2 || threads > 1024 || min == 0 || max < min)
        bench_die("THREADS must be even and >= 2; need 0 < MIN <= MAX");
    uint64_t pairs = threads / 2;
    pair *q = aligned_alloc(64, pairs * sizeof *q);
    if (!q)
        bench_die("out of memory");
    memset(q, 0, pairs * sizeof *q);
    pthread_barrier_init(&start_barrier, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < pairs; i++) {
        q[i].items = items;
        q[i].seed = 77 + i;
        q[i].min = min;
        q[i].max = max;
        if (pthread_create(&q[i].prod, NULL, producer, &q[i]) ||
            pthread_create(&q[i].cons, NULL, consumer, &q[i]))
            bench_die("pthread_create failed");
    }
    pthread_barrier_wait(&start_barrier);
    double t0 = bench_now();
    uint64_t check = 0;
    for (uint64_t i = 0; i < pairs; i++) {
        pthread_join(q[i].prod, NULL);
        pthread_join(q[i].cons, NULL);
        check += q[i].check;
    }
    double secs = bench_now() - t0;
    free(q);
    bench_result("prodcons", (double)(2 * items * pairs), secs,
                 "threads=%llu items=%llu min=%zu max=%zu check=%llu",
                 (unsigned long long)threads, (unsigned long long)items, min, max,
                 (unsigned long long)check);
    return 0;
}
