/*
 * bench_common.h — shared helpers of the hakmem benchmark programs.
 *
 * The programs use the process allocator (malloc, free, ...) and never link
 * hakmem: bench/run.sh selects the allocator with LD_PRELOAD. Each program
 * prints exactly one line starting with "RESULT " made of key=value fields
 * (bench/report.py parses it). Common fields:
 *   bench=NAME         which benchmark
 *   ops=N              operations counted by the throughput figure
 *   secs=S             wall time of the measured part
 *   ops_per_sec=X      ops / secs (the main figure, higher is better)
 *   peak_rss_kb=K      VmHWM of the process at the end
 *   final_rss_kb=K     VmRSS of the process at the end
 *   malloc_from=LIB    the object that defines the malloc this process calls
 *                      (dladdr of dlsym(RTLD_DEFAULT, "malloc")), so the
 *                      harness can verify that LD_PRELOAD took effect
 *   malloc_path=PATH   the same object's full path, symbolic links resolved
 *                      (realpath), spaces and '=' as '_': tells apart two
 *                      libraries of the same name (hakmem and hakmem-base)
 *   check=X            a checksum of the data, so nothing is optimised away
 */
#ifndef HAKMEM_BENCH_COMMON_H
#define HAKMEM_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__)
#define BENCH_UNUSED __attribute__((unused))
#if defined(__clang__)
#define BENCH_NOINLINE __attribute__((noinline))
#else
#define BENCH_NOINLINE __attribute__((noinline, noclone))
#endif
#define BENCH_LIKELY(x) __builtin_expect(!!(x), 1)
#define BENCH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define BENCH_UNUSED
#define BENCH_NOINLINE
#define BENCH_LIKELY(x) (x)
#define BENCH_UNLIKELY(x) (x)
#endif

/* Keeps the compiler from deleting stores or loads whose results are unused. */
#define BENCH_ESCAPE(p) __asm__ volatile("" : : "g"(p) : "memory")

static BENCH_UNUSED double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: a few instructions per number, good enough for workloads. */
static inline uint64_t bench_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t bench_seed(uint64_t seed)
{
    /* splitmix64 step so that small seeds give well mixed states, never 0 */
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z ? z : 0x1234567ULL;
}

/* Uniform in [0, n) without a division: (r32 * n) >> 32. */
static inline uint32_t bench_below(uint64_t r, uint32_t n)
{
    return (uint32_t)(((r >> 32) * (uint64_t)n) >> 32);
}

/* A size uniform in [min, min + span - 1] from the low 32 bits of r. SPAN is
 * max - min + 1, passed in so that a loop computes it once, not per draw. A
 * macro, not an inline function: GCC schedules the inlined function's loads
 * differently, and the measured loops that use it must compile to the
 * instructions they had when their figures were published. */
#define BENCH_UNIFORM(r, min, span) ((min) + (size_t)((((r) & 0xffffffffu) * (span)) >> 32))

static BENCH_UNUSED void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* --help or -h as the first argument. bench_iws_args and bench_twmm_args
 * test it written out: inlined into a program's main through them it moved
 * registers in the timed loops. */
static BENCH_UNUSED int bench_wants_help(int argc, char **argv)
{
    return argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
}

/* --help or -h as the first argument: prints USAGE (a printf format whose one
 * conversion, %s, takes the program's name) and exits with status 0. */
static BENCH_UNUSED void bench_usage(int argc, char **argv, const char *usage)
{
    if (bench_wants_help(argc, argv)) {
        printf(usage, argv[0]);
        exit(0);
    }
}

static BENCH_UNUSED long long bench_arg(int argc, char **argv, int i, long long def)
{
    if (i >= argc)
        return def;
    char *end;
    errno = 0;
    long long v = strtoll(argv[i], &end, 0);
    if (errno || *end != '\0' || v < 0)
        bench_die("bad argument %d: '%s' (a non-negative integer)", i, argv[i]);
    return v;
}

/* THREADS ITERS WS MIN MAX SEED, the arguments of the multi-threaded random
 * mixed benchmarks (bench_mid_large_mt, bench_written): --help prints their
 * usage with the defaults given and exits; THREADS must be in 1..1024, WS in
 * 1..2^32-1, and 0 < MIN <= MAX. THREADS defaults to 2, SEED to 1. */
typedef struct bench_twmm {
    uint64_t threads, iters, ws, seed;
    size_t min, max;
} bench_twmm;

static BENCH_UNUSED bench_twmm bench_twmm_args(int argc, char **argv, long long iters, long long ws,
                                               long long min, long long max)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [THREADS=2] [ITERS=%lld] [WS=%lld] [MIN=%lld MAX=%lld] [SEED=1]\n", argv[0],
               iters, ws, min, max);
        exit(0);
    }
    bench_twmm a = {(uint64_t)bench_arg(argc, argv, 1, 2), (uint64_t)bench_arg(argc, argv, 2, iters),
                    (uint64_t)bench_arg(argc, argv, 3, ws), (uint64_t)bench_arg(argc, argv, 6, 1),
                    (size_t)bench_arg(argc, argv, 4, min), (size_t)bench_arg(argc, argv, 5, max)};
    if (a.threads == 0 || a.threads > 1024)
        bench_die("THREADS must be in 1..1024");
    if (a.ws == 0 || a.ws > 0xffffffffu)
        bench_die("WS must be in 1..2^32-1");
    if (a.min == 0 || a.max < a.min)
        bench_die("need 0 < MIN <= MAX");
    return a;
}

/* The ITERS WS SEED arguments shared by the random-mixed-style benchmarks:
 * --help prints their usage (and extra lines, if any) and exits; WS must be
 * in 1..2^32-1. */
typedef struct bench_iws {
    uint64_t iters, ws, seed;
} bench_iws;

static BENCH_UNUSED bench_iws bench_iws_args(int argc, char **argv, long long iters, long long ws,
                                             long long seed, const char *extra)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [ITERS=%lld] [WS=%lld] [SEED=%lld]\n%s", argv[0], iters, ws, seed,
               extra ? extra : "");
        exit(0);
    }
    bench_iws a = {(uint64_t)bench_arg(argc, argv, 1, iters), (uint64_t)bench_arg(argc, argv, 2, ws),
                   (uint64_t)bench_arg(argc, argv, 3, seed)};
    if (a.ws == 0 || a.ws > 0xffffffffu)
        bench_die("WS must be in 1..2^32-1");
    return a;
}

static BENCH_UNUSED void bench_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static BENCH_UNUSED long long bench_env(const char *name, long long def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || *end != '\0' || v < 0)
        bench_die("bad %s='%s' (a non-negative integer)", name, s);
    return v;
}

/* VmHWM / VmRSS in KiB from /proc/self/status (0 when unreadable). */
static BENCH_UNUSED void bench_rss(long *hwm_kb, long *rss_kb)
{
    *hwm_kb = 0;
    *rss_kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0)
            *hwm_kb = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmRSS:", 6) == 0)
            *rss_kb = strtol(line + 6, NULL, 10);
    }
    fclose(f);
}

static BENCH_UNUSED long bench_rss_now(void)
{
    long hwm, rss;
    bench_rss(&hwm, &rss);
    return rss;
}

/* File name of the object that defines the malloc this process calls, or
 * NULL when the dynamic linker cannot tell. */
static BENCH_UNUSED const char *bench_malloc_file(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    if (!sym || !dladdr(sym, &info) || !info.dli_fname || !*info.dli_fname)
        return NULL;
    return info.dli_fname;
}

/* Basename of the object that defines the malloc this process uses. */
static BENCH_UNUSED const char *bench_malloc_from(void)
{
    static char name[256];
    const char *file = bench_malloc_file();
    if (!file)
        return "unknown";
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    snprintf(name, sizeof name, "%s", base);
    /* keep the RESULT line one token per field */
    for (char *c = name; *c; c++)
        if (*c == ' ' || *c == '=')
            *c = '_';
    return name;
}

/* Full path (symbolic links resolved) of the object that defines malloc. */
static BENCH_UNUSED const char *bench_malloc_path(void)
{
    static char path[4096];
    const char *file = bench_malloc_file();
    if (!file)
        return "unknown";
    char *real = realpath(file, NULL);
    snprintf(path, sizeof path, "%s", real ? real : file);
    free(real);
    for (char *c = path; *c; c++)
        if (*c == ' ' || *c == '=' || *c == '\t')
            *c = '_';
    return path;
}

/*
 * Prints the RESULT line: bench, ops, secs, ops_per_sec, then the caller's
 * extra "key=value" fields (printf format), then RSS, malloc_from and
 * malloc_path.
 */
static BENCH_UNUSED void bench_result(const char *bench, double ops, double secs,
                                      const char *extra_fmt, ...)
{
    long hwm, rss;
    bench_rss(&hwm, &rss);
    char extra[1024] = "";
    if (extra_fmt && *extra_fmt) {
        va_list ap;
        va_start(ap, extra_fmt);
        vsnprintf(extra, sizeof extra, extra_fmt, ap);
        va_end(ap);
    }
    /* hakmem's version when libhakmem is loaded (looked up, never linked) */
    char ver[96] = "";
    const char *(*hv)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "hak_version");
    if (hv) {
        const char *v = hv();
        snprintf(ver, sizeof ver, " hakmem_version=%s", v ? v : "?");
        for (char *c = ver + 16; *c; c++)
            if (*c == ' ' || *c == '=')
                *c = '_';
    }
    printf("RESULT bench=%s ops=%.0f secs=%.6f ops_per_sec=%.0f%s%s "
           "peak_rss_kb=%ld final_rss_kb=%ld malloc_from=%s malloc_path=%s%s\n",
           bench, ops, secs, secs > 0 ? ops / secs : 0.0, *extra ? " " : "", extra,
           hwm, rss, bench_malloc_from(), bench_malloc_path(), ver);
    fflush(stdout);
}

/*
 * Log-uniform sizes in [min, max] for a few instructions per draw: 256
 * geometric buckets (boundaries computed once with libm; link with -lm) and a
 * uniform point inside the bucket. bench_logu_init(&t, 16, 4096);
 * size = bench_logu_draw(&t, bench_rand(&s)) uses all 64 bits of r.
 */
typedef struct bench_logu {
    size_t b[257]; /* b[i] = min * (max/min)^(i/256), b[256] = max + 1 */
} bench_logu;

static BENCH_UNUSED void bench_logu_init(bench_logu *t, size_t min, size_t max)
{
    if (min == 0 || max < min)
        bench_die("bench_logu_init: bad range %zu..%zu", min, max);
    double l = log((double)max / (double)min);
    for (int i = 0; i < 256; i++) {
        size_t v = (size_t)llround((double)min * exp(l * i / 256.0));
        if (v < min)
            v = min;
        if (i > 0 && v < t->b[i - 1])
            v = t->b[i - 1];
        t->b[i] = v > max ? max : v;
    }
    t->b[256] = max + 1;
}

static inline size_t bench_logu_draw(const bench_logu *t, uint64_t r)
{
    unsigned i = (unsigned)(r >> 56);
    size_t lo = t->b[i], w = t->b[i + 1] - lo;
    return lo + (size_t)(((r & 0xffffffffu) * (uint64_t)w) >> 32);
}

/* Touch the first bytes of a fresh block, as a program initialising it would. */
static inline void bench_touch(void *p, size_t size, uint64_t v)
{
    unsigned char *c = (unsigned char *)p;
    if (size >= 8)
        memcpy(c, &v, 8);
    else
        c[0] = (unsigned char)v;
}

#endif /* HAKMEM_BENCH_COMMON_H */
