/*
 * bench_phases ROUNDS MIB [SIZE...]
 *
 * A program that works in phases, each with blocks of its own size: a
 * phase allocates MIB MiB (default 32) of blocks of one size, writes every
 * block whole, then reads a byte of each and frees them all; the next
 * phase does the same with the next size. The sizes (default 4096 64 8192
 * 1024 32768 3072 96 16384: page buffers, small nodes, bigger buffers) go
 * round ROUNDS times (default 8). A parser's buffers, then the tree it
 * builds, then the output's strings: an allocator that keeps what one
 * size freed for that size alone holds several phases' memory at its peak
 * instead of one.
 * ops = mallocs + frees.
 */
#include "bench_common.h"

#define MAX_SIZES 32

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: %s [ROUNDS=8] [MIB=32] [SIZE...]\n", argv[0]);
        return 0;
    }
    uint64_t rounds = (uint64_t)bench_arg(argc, argv, 1, 8);
    uint64_t mib = (uint64_t)bench_arg(argc, argv, 2, 32);
    static const size_t dflt[] = {4096, 64, 8192, 1024, 32768, 3072, 96, 16384};
    size_t sizes[MAX_SIZES];
    unsigned nsizes = 0;
    for (int a = 3; a < argc && nsizes < MAX_SIZES; a++)
        sizes[nsizes++] = (size_t)bench_arg(argc, argv, a, 0);
    if (nsizes == 0)
        for (; nsizes < sizeof dflt / sizeof dflt[0]; nsizes++)
            sizes[nsizes] = dflt[nsizes];
    size_t maxn = 0;
    for (unsigned k = 0; k < nsizes; k++) {
        if (sizes[k] == 0)
            bench_die("bad SIZE");
        size_t n = (size_t)(mib << 20) / sizes[k];
        if (n > maxn)
            maxn = n;
    }
    if (mib == 0 || maxn == 0)
        bench_die("bad MIB");
    unsigned char **blk = malloc(maxn * sizeof *blk);
    if (!blk)
        bench_die("out of memory");
    memset(blk, 0, maxn * sizeof *blk); /* resident before the phases */
    uint64_t ops = 0, check = 0;

    double t0 = bench_now();
    for (uint64_t r = 0; r < rounds; r++)
        for (unsigned k = 0; k < nsizes; k++) {
            size_t sz = sizes[k], n = (size_t)(mib << 20) / sz;
            for (size_t i = 0; i < n; i++) {
                blk[i] = malloc(sz);
                if (!blk[i])
                    bench_die("malloc(%zu) failed", sz);
                memset(blk[i], (int)((i + k) & 0xff), sz);
            }
            for (size_t i = 0; i < n; i++) {
                check += blk[i][sz / 2];
                free(blk[i]);
            }
            ops += 2 * n;
        }
    double secs = bench_now() - t0;
    bench_result("phases", (double)ops, secs, "rounds=%llu mib=%llu sizes=%u check=%llu",
                 (unsigned long long)rounds, (unsigned long long)mib, nsizes, (unsigned long long)check);
    return 0;
}
