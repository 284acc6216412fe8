/*
 * larson_sized SECS MIN MAX CHUNKS ROUNDS SEED THREADS
 *
 * bench/larson.c's workload in C++, allocating with ::operator new(size) and
 * freeing with the sized ::operator delete(p, size) (C++14 sized
 * deallocation, built with -fsized-deallocation): an allocator that overrides
 * sized delete can skip looking the size up. A shared array holds THREADS *
 * CHUNKS blocks of MIN..MAX bytes and their sizes; each thread replaces random
 * blocks of its slice ROUNDS * CHUNKS times, then hands the slice to a new
 * thread and exits, so most blocks are freed by a thread that did not
 * allocate them. Each block carries a tag (its address mixed with a key) in
 * its first 8 bytes and the tag's low byte in its last byte, checked before
 * it is deleted; a mismatch ends the program with status 3 and no RESULT.
 * ops = deletes + news done by the workers in SECS seconds (or BENCH_LARSON_MS).
 * Defaults: larson_sized 1 8 1000 5000 100 12345 2
 */
#include "bench_common.h"
#include <atomic>
#include <new>
#include <pthread.h>

namespace {

const uint64_t kKey = 0x9d3c5a17e4b2f681ULL;

struct Slice {
    void **blocks;
    uint32_t *sizes;
    uint32_t n;
    size_t min, max;
    uint64_t steps, state;
    uint64_t ops, generations, check;
};

std::atomic<int> stop_flag{0};
pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
int slices_done;
pthread_attr_t detached;

inline void tag(void *p, size_t sz)
{
    uint64_t v = (uint64_t)(uintptr_t)p ^ kKey;
    memcpy(p, &v, 8);
    static_cast<unsigned char *>(p)[sz - 1] = (unsigned char)(v >> 56);
}

inline unsigned untag(void *p, size_t sz)
{
    uint64_t v;
    memcpy(&v, p, 8);
    if (v != ((uint64_t)(uintptr_t)p ^ kKey) || static_cast<unsigned char *>(p)[sz - 1] != (unsigned char)(v >> 56)) {
        fprintf(stderr, "bench: block %p (size %zu) corrupted: its tag was overwritten\n", p, sz);
        exit(3);
    }
    return (unsigned)(v >> 56);
}

inline size_t draw(uint64_t r, size_t min, size_t max)
{
    return min + (size_t)(((r & 0xffffffffu) * ((uint64_t)(max - min) + 1)) >> 32);
}

void *worker(void *arg)
{
    Slice *sl = static_cast<Slice *>(arg);
    uint64_t s = sl->state, ops = 0, check = 0;
    for (uint64_t i = 0; i < sl->steps; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t v = bench_below(r, sl->n);
        void *old = sl->blocks[v];
        size_t osz = sl->sizes[v];
        check += untag(old, osz);
        ::operator delete(old, osz);
        size_t sz = draw(r, sl->min, sl->max);
        void *p = ::operator new(sz);
        tag(p, sz);
        sl->blocks[v] = p;
        sl->sizes[v] = (uint32_t)sz;
        ops += 2;
        if ((i & 63) == 0 && stop_flag.load(std::memory_order_relaxed))
            break;
    }
    sl->state = s;
    sl->ops += ops;
    sl->check += check;
    sl->generations++;
    if (!stop_flag.load(std::memory_order_relaxed)) {
        pthread_t t;
        if (pthread_create(&t, &detached, worker, sl) == 0)
            return nullptr;
        bench_die("pthread_create failed");
    }
    pthread_mutex_lock(&done_mu);
    slices_done++;
    pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&done_mu);
    return nullptr;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [SECS=1] [MIN=8] [MAX=1000] [CHUNKS=5000] [ROUNDS=100] [SEED=12345] "
               "[THREADS=2]\n  SECS may be given in ms with BENCH_LARSON_MS\n",
               argv[0]);
        return 0;
    }
    double secs_arg = (double)bench_arg(argc, argv, 1, 1);
    long long ms = bench_env("BENCH_LARSON_MS", 0);
    if (ms > 0)
        secs_arg = (double)ms / 1000.0;
    size_t min = (size_t)bench_arg(argc, argv, 2, 8);
    size_t max = (size_t)bench_arg(argc, argv, 3, 1000);
    uint64_t chunks = (uint64_t)bench_arg(argc, argv, 4, 5000);
    uint64_t rounds = (uint64_t)bench_arg(argc, argv, 5, 100);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 6, 12345);
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 7, 2);
    if (min < 8 || max < min || max > 0xffffffffu || chunks == 0 || chunks > 0xffffffffu ||
        rounds == 0 || threads == 0 || threads > 1024)
        bench_die("bad parameters (MIN must be at least 8)");

    void **all = static_cast<void **>(calloc(threads * chunks, sizeof(void *)));
    uint32_t *sizes = static_cast<uint32_t *>(calloc(threads * chunks, sizeof(uint32_t)));
    Slice *sl = static_cast<Slice *>(calloc(threads, sizeof(Slice)));
    if (!all || !sizes || !sl)
        bench_die("out of memory");
    uint64_t s = bench_seed(seed);
    for (uint64_t i = 0; i < threads * chunks; i++) { /* warm-up: main allocates */
        size_t sz = draw(bench_rand(&s), min, max);
        all[i] = ::operator new(sz);
        tag(all[i], sz);
        sizes[i] = (uint32_t)sz;
    }
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);

    double t0 = bench_now();
    for (uint64_t i = 0; i < threads; i++) {
        sl[i] = Slice{all + i * chunks, sizes + i * chunks, (uint32_t)chunks, min, max,
                      rounds * chunks, bench_seed(seed + 1 + i), 0, 0, 0};
        pthread_t t;
        if (pthread_create(&t, &detached, worker, &sl[i]))
            bench_die("pthread_create failed");
    }
    struct timespec ts = {(time_t)secs_arg, (long)((secs_arg - (double)(time_t)secs_arg) * 1e9)};
    nanosleep(&ts, nullptr);
    stop_flag.store(1);
    pthread_mutex_lock(&done_mu);
    while (slices_done < (int)threads)
        pthread_cond_wait(&done_cv, &done_mu);
    pthread_mutex_unlock(&done_mu);
    double secs = bench_now() - t0;

    uint64_t ops = 0, gens = 0, check = 0;
    for (uint64_t i = 0; i < threads; i++) {
        ops += sl[i].ops;
        gens += sl[i].generations;
        check += sl[i].check;
    }
    long hwm, rss_before_free;
    bench_rss(&hwm, &rss_before_free);
    for (uint64_t i = 0; i < threads * chunks; i++) {
        check += untag(all[i], sizes[i]);
        ::operator delete(all[i], (size_t)sizes[i]);
    }
    free(all);
    free(sizes);
    free(sl);
    bench_result("larson_sized", (double)ops, secs,
                 "threads=%llu min=%zu max=%zu chunks=%llu rounds=%llu thread_generations=%llu "
                 "live_rss_kb=%ld check=%llu",
                 (unsigned long long)threads, min, max, (unsigned long long)chunks,
                 (unsigned long long)rounds, (unsigned long long)gens, rss_before_free,
                 (unsigned long long)check);
    return 0;
}
