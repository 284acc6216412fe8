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
 * it is deleted (bench_tag.h); a mismatch ends the program with status 3 and
 * no RESULT. ops = deletes + news done by the workers in SECS seconds (or
 * BENCH_LARSON_MS). The arguments, the threads' hand-over and the RESULT line
 * are bench_larson.h's, shared with larson.c.
 * Defaults: larson_sized 1 8 1000 5000 100 12345 2
 */
#include "bench_larson.h"
#include <new>

namespace {

/* xfer_check() with the size known, written out here: with bench_tag.h's
 * inline functions GCC schedules this program's loop differently from the
 * one its published figures were measured with. */
inline unsigned untag(void *p, size_t sz)
{
    uint64_t v;
    memcpy(&v, p, 8);
    if (v != ((uint64_t)(uintptr_t)p ^ XFER_KEY) || static_cast<unsigned char *>(p)[sz - 1] != (unsigned char)(v >> 56)) {
        fprintf(stderr, XFER_CORRUPT_MSG, p, sz);
        exit(3);
    }
    return (unsigned)(v >> 56);
}

struct Slice {
    void **blocks;
    uint32_t *sizes;
    uint32_t n;
    size_t min, max;
    uint64_t steps, state;
    uint64_t ops, generations, check;
};

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
        size_t sz = xfer_size(r, sl->min, sl->max);
        void *p = ::operator new(sz);
        xfer_tag(p, sz);
        sl->blocks[v] = p;
        sl->sizes[v] = (uint32_t)sz;
        ops += 2;
        if ((i & 63) == 0 && larson_stopped())
            break;
    }
    sl->state = s;
    sl->ops += ops;
    sl->check += check;
    sl->generations++;
    larson_next(worker, sl);
    return nullptr;
}

} // namespace

int main(int argc, char **argv)
{
    larson_args a = larson_parse(argc, argv, 1000, 100, 0xffffffffu,
                                 "SECS may be given in ms with BENCH_LARSON_MS");
    size_t min = a.min, max = a.max;
    uint64_t chunks = a.chunks, threads = a.threads;

    void **all = static_cast<void **>(calloc(threads * chunks, sizeof(void *)));
    uint32_t *sizes = static_cast<uint32_t *>(calloc(threads * chunks, sizeof(uint32_t)));
    Slice *sl = static_cast<Slice *>(calloc(threads, sizeof(Slice)));
    if (!all || !sizes || !sl)
        bench_die("out of memory");
    uint64_t s = bench_seed(a.seed);
    for (uint64_t i = 0; i < threads * chunks; i++) { /* warm-up: main allocates */
        size_t sz = xfer_size(bench_rand(&s), min, max);
        all[i] = ::operator new(sz);
        xfer_tag(all[i], sz);
        sizes[i] = (uint32_t)sz;
    }
    for (uint64_t i = 0; i < threads; i++)
        sl[i] = Slice{all + i * chunks, sizes + i * chunks, (uint32_t)chunks, min, max,
                      a.rounds * chunks, bench_seed(a.seed + 1 + i), 0, 0, 0};
    double secs = larson_run(worker, sl, sizeof *sl, threads, a.secs);

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
    larson_result("larson_sized", &a, ops, secs, gens, rss_before_free, check);
    return 0;
}
