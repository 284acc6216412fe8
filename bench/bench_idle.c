/*
 * bench_idle THREADS MIB KEEP_PCT IDLE_MS [SEED]
 *
 * What a process gives back while it idles after a burst, with no call
 * asking for it. THREADS threads (default 16) each allocate MIB/THREADS MiB
 * (MIB default 256) in blocks of 16 B..256 KiB (log-uniform sizes: every
 * size class and big blocks), writing every byte; each then frees all but
 * KEEP_PCT % (default 10) of its blocks, chosen at random, and waits on a
 * condition variable, idle, as a server's worker pool does after a burst.
 * The main thread then makes no allocator call for IDLE_MS ms (default
 * 1000) while it samples the process's VmRSS (read with open/read, not
 * stdio, which would allocate): at 0, 100, 200, 500 and 1000 ms after the
 * last thread's last free (rss_0_kb .. rss_1000_kb; none past IDLE_MS).
 * base_rss_kb is the RSS before the burst, live_kb the bytes the threads
 * still hold. ops = the burst's mallocs and frees, secs = its wall time
 * (the threads' start to the last free). Then the threads free what they
 * kept and exit.
 */
#include "bench_threads.h"

#include <fcntl.h>
#include <unistd.h>

#define MIN_SIZE 16
#define MAX_SIZE (256 * 1024)

typedef struct {
    pthread_t tid;
    uint64_t seed, budget, n, kept_n, kept_bytes, check;
    unsigned char **blk;
    size_t *sz;
} worker;

static unsigned keep_pct;
static bench_logu sizes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned freed_threads;
static int released;
static double t_last_free;

/* The blocks a budget of bytes takes with this seed (the burst draws the
 * same sizes again), so the arrays are sized before the burst. */
static uint64_t count_blocks(uint64_t seed, uint64_t budget)
{
    uint64_t s = bench_seed(seed), n = 0, got = 0;
    while (got < budget) {
        got += bench_logu_draw(&sizes, bench_rand(&s));
        n++;
    }
    return n;
}

static void *run(void *arg)
{
    worker *w = arg;
    uint64_t s = bench_seed(w->seed), got = 0, check = 0;
    for (uint64_t i = 0; i < w->n; i++) {
        uint64_t r = bench_rand(&s);
        size_t z = bench_logu_draw(&sizes, r);
        unsigned char *p = malloc(z);
        if (!p)
            bench_die("malloc(%zu) failed", z);
        memset(p, (int)(r >> 8) | 1, z);
        w->blk[i] = p;
        w->sz[i] = z;
        got += z;
    }
    uint64_t f = bench_seed(w->seed ^ 0x5eed), kept = 0, kept_n = 0;
    for (uint64_t i = 0; i < w->n; i++) {
        if (bench_below(bench_rand(&f), 100) < keep_pct) {
            kept += w->sz[i];
            kept_n++;
            continue;
        }
        unsigned char *p = w->blk[i];
        if (p[w->sz[i] - 1] == 0)
            bench_die("block %p lost its contents", (void *)p);
        check += p[0];
        free(p);
        w->blk[i] = NULL;
    }
    w->kept_bytes = kept;
    w->kept_n = kept_n;
    pthread_mutex_lock(&lock);
    freed_threads++;
    t_last_free = bench_now();
    pthread_cond_broadcast(&cond);
    while (!released)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    for (uint64_t i = 0; i < w->n; i++)
        if (w->blk[i]) {
            check += w->blk[i][0];
            free(w->blk[i]);
        }
    w->check = check + got;
    return NULL;
}

/* VmRSS in KiB without stdio (fopen would allocate). */
static long rss_kb_raw(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *v = strstr(buf, "VmRSS:");
    return v ? strtol(v + 6, NULL, 10) : 0;
}

int main(int argc, char **argv)
{
    if (bench_wants_help(argc, argv)) {
        printf("usage: %s [THREADS=16] [MIB=256] [KEEP_PCT=10] [IDLE_MS=1000] [SEED=7]\n", argv[0]);
        return 0;
    }
    uint64_t threads = (uint64_t)bench_arg(argc, argv, 1, 16);
    uint64_t mib = (uint64_t)bench_arg(argc, argv, 2, 256);
    keep_pct = (unsigned)bench_arg(argc, argv, 3, 10);
    uint64_t idle_ms = (uint64_t)bench_arg(argc, argv, 4, 1000);
    uint64_t seed = (uint64_t)bench_arg(argc, argv, 5, 7);
    if (threads < 1 || threads > 1024 || mib < 1 || mib > 65536 || keep_pct > 100 || idle_ms > 60000)
        bench_die("bad arguments (THREADS 1..1024, MIB 1..65536, KEEP_PCT 0..100, IDLE_MS 0..60000)");
    bench_logu_init(&sizes, MIN_SIZE, MAX_SIZE);
    worker *w = calloc(threads, sizeof *w);
    if (!w)
        bench_die("out of memory");
    uint64_t ops = 0;
    for (uint64_t t = 0; t < threads; t++) {
        w[t].seed = seed * 1000 + t;
        w[t].budget = (mib << 20) / threads;
        w[t].n = count_blocks(w[t].seed, w[t].budget);
        w[t].blk = malloc(w[t].n * sizeof *w[t].blk);
        w[t].sz = malloc(w[t].n * sizeof *w[t].sz);
        if (!w[t].blk || !w[t].sz)
            bench_die("out of memory");
        ops += w[t].n;
    }
    long base_rss = rss_kb_raw();
    double t0 = bench_now();
    BENCH_START_THREADS(w, threads, tid, run);
    pthread_mutex_lock(&lock);
    while (freed_threads < threads)
        pthread_cond_wait(&cond, &lock);
    double t_free = t_last_free;
    pthread_mutex_unlock(&lock);

    static const unsigned at_ms[] = {0, 100, 200, 500, 1000};
    long rss_at[5] = {-1, -1, -1, -1, -1};
    for (unsigned k = 0; k < 5; k++) {
        if (at_ms[k] > idle_ms)
            break;
        double due = t_free + at_ms[k] / 1000.0, now = bench_now();
        if (due > now)
            bench_sleep_ms((uint64_t)((due - now) * 1000.0 + 0.5));
        rss_at[k] = rss_kb_raw();
    }
    double rest = t_free + idle_ms / 1000.0 - bench_now();
    if (rest > 0)
        bench_sleep_ms((uint64_t)(rest * 1000.0));

    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    BENCH_JOIN_THREADS(w, threads, tid);
    /* ops: the burst's mallocs and frees (the kept blocks' frees, after
     * the idle phase, are not timed) */
    uint64_t live = 0, check = 0;
    for (uint64_t t = 0; t < threads; t++) {
        live += w[t].kept_bytes;
        check += w[t].check;
        ops += w[t].n - w[t].kept_n;
        free(w[t].blk);
        free(w[t].sz);
    }
    free(w);
    char extra[512];
    int len = snprintf(extra, sizeof extra, "threads=%llu mib=%llu keep_pct=%u idle_ms=%llu base_rss_kb=%ld live_kb=%llu",
                       (unsigned long long)threads, (unsigned long long)mib, keep_pct,
                       (unsigned long long)idle_ms, base_rss, (unsigned long long)(live / 1024));
    for (unsigned k = 0; k < 5 && len > 0 && (size_t)len < sizeof extra; k++)
        if (rss_at[k] >= 0)
            len += snprintf(extra + len, sizeof extra - (size_t)len, " rss_%u_kb=%ld", at_ms[k], rss_at[k]);
    bench_result("idle", (double)ops, t_free - t0, "%s check=%llu", extra, (unsigned long long)check);
    return 0;
}
