/*
 * bench_realloc ITERS BUFS SEED
 *
 * Growth by appends. BUFS buffers (default 256); each step picks one at random
 * and appends 1..64 bytes. Even-numbered buffers are strings that call
 * realloc(len + n + 1) on every append; odd ones are vectors that grow their
 * capacity by 1.5x when full. A buffer that passes its limit (random,
 * 256 B..256 KiB, log-uniform) is freed and starts again with malloc(16).
 * ops = malloc + realloc + free calls; appends_per_sec is also printed.
 */
#include "bench_common.h"

typedef struct {
    char *p;
    size_t len, cap, limit;
} buf;

static size_t pick_limit(uint64_t r)
{
    unsigned k = bench_below(r, 10); /* 256 << 0..9: 256 B .. 128 KiB octaves */
    size_t lo = (size_t)256 << k;
    return lo + (size_t)(((r & 0xffffffffu) * lo) >> 32);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [ITERS=4000000] [BUFS=256] [SEED=7]\n", argv[0]);
        return 0;
    }
    uint64_t iters = (uint64_t)bench_arg(argc, argv, 1, 4000000);
    uint64_t nbufs = (uint64_t)bench_arg(argc, argv, 2, 256);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 3, 7);
    if (nbufs == 0 || nbufs > 0xffffffffu)
        bench_die("bad BUFS");
    buf *b = calloc(nbufs, sizeof *b);
    if (!b)
        bench_die("out of memory");
    static const char src[64] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+";
    uint64_t s = bench_seed(seed), calls = 0, reallocs = 0, check = 0;

    double t0 = bench_now();
    for (uint64_t i = 0; i < iters; i++) {
        uint64_t r = bench_rand(&s);
        uint32_t k = bench_below(r, (uint32_t)nbufs);
        buf *x = &b[k];
        size_t n = 1 + (size_t)(r & 63);
        if (!x->p) {
            x->cap = 16;
            x->p = malloc(x->cap);
            if (!x->p)
                bench_die("malloc failed");
            x->len = 0;
            x->limit = pick_limit(bench_rand(&s));
            calls++;
        }
        size_t need = x->len + n + 1;
        if (k & 1) { /* vector: geometric growth */
            if (need > x->cap) {
                size_t nc = x->cap + x->cap / 2;
                if (nc < need)
                    nc = need;
                char *q = realloc(x->p, nc);
                if (!q)
                    bench_die("realloc failed");
                x->p = q;
                x->cap = nc;
                calls++;
                reallocs++;
            }
        } else { /* string: realloc on every append */
            char *q = realloc(x->p, need);
            if (!q)
                bench_die("realloc failed");
            x->p = q;
            x->cap = need;
            calls++;
            reallocs++;
        }
        memcpy(x->p + x->len, src, n);
        x->len += n;
        x->p[x->len] = '\0';
        if (x->len > x->limit) {
            check += (unsigned char)x->p[x->len / 2];
            free(x->p);
            x->p = NULL;
            calls++;
        }
    }
    double secs = bench_now() - t0;
    for (uint64_t k = 0; k < nbufs; k++)
        free(b[k].p);
    free(b);
    bench_result("realloc", (double)calls, secs,
                 "appends=%llu reallocs=%llu appends_per_sec=%.0f bufs=%llu check=%llu",
                 (unsigned long long)iters, (unsigned long long)reallocs,
                 secs > 0 ? (double)iters / secs : 0.0, (unsigned long long)nbufs,
                 (unsigned long long)check);
    return 0;
}
