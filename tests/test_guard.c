/*
 * test_guard.c — the secure build's guard pages fault, and cost no room;
 * its fresh blocks come in a shuffled order that keeps to their region.
 *
 * Linked with the secure core (hak_ API). Each probe touches a guard page in
 * a forked child, which must die of SIGSEGV:
 *   end     the byte just past the last 1 MiB block of a big superslab
 *           (the page after the superslab's 4 MiB);
 *   header  the guard page after a superslab's slab descriptors.
 * Before probing, the parent checks that a big superslab still holds three
 * 1 MiB blocks (at 1, 2 and 3 MiB: aligned to 1 MiB, the last one ending at
 * the superslab's end) and that every byte of the last one can be written.
 * Carve order: 512 fresh 48-byte blocks, taken one after the other, must be
 * distinct, must not follow each other in address order (the default
 * build's carve would make every successor the next block: in the secure
 * one about one in eight is), and each must lie within a few windows of
 * its predecessor, so that a walk in allocation order keeps to its pages
 * (superslab.c, ss_link_shuffled).
 */
#include "hakmem.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SS_SIZE ((uintptr_t)4 << 20)
#define MIB ((size_t)1 << 20)
#define HEADER_GUARD 12288 /* superslab.c: SS_GUARD_OFFSET */

static int failures;

/* Runs touch(addr) in a child; the child must be killed by SIGSEGV. */
static void expect_fault(const char *what, volatile char *addr)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        *addr = 1;
        _exit(0); /* reached only if the page is writable */
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) {
        perror("waitpid");
        exit(2);
    }
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) {
        printf("ok: %s guard at %p faults\n", what, (void *)addr);
    } else {
        printf("FAIL: %s guard at %p: child %s %d\n", what, (void *)addr,
               WIFSIGNALED(st) ? "killed by signal" : "exited with", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        failures++;
    }
}

static void check_carve_order(void)
{
    enum { K = 512, BS = 48, NEAR = 4 * 8 };
    static char *b[K];
    for (int i = 0; i < K; i++) {
        b[i] = hak_malloc(BS);
        if (b[i] == NULL) {
            printf("FAIL: hak_malloc(%d) returned NULL\n", BS);
            exit(1);
        }
    }
    size_t bs = hak_usable_size(b[0]);
    int next = 0, near = 0, same = 0;
    for (int i = 1; i < K; i++) {
        ptrdiff_t d = b[i] - b[i - 1];
        next += d == (ptrdiff_t)bs;
        near += d > -(ptrdiff_t)(NEAR * bs) && d < (ptrdiff_t)(NEAR * bs);
        for (int j = 0; j < i; j++)
            same += b[j] == b[i];
    }
    printf("carve order: %d of %d successors are the next block, %d within %d blocks\n", next, K - 1, near, NEAR);
    if (same != 0) {
        printf("FAIL: %d blocks handed out twice\n", same);
        failures++;
    }
    /* A uniform order of a window of 8 makes one successor in eight the
     * next block; a quarter leaves room for the batches' short last
     * windows and catches a draw that favours the identity. */
    if (next > (K - 1) / 4) {
        printf("FAIL: fresh blocks come in address order too often\n");
        failures++;
    }
    if (near < (K - 1) * 9 / 10) {
        printf("FAIL: fresh blocks are scattered beyond the carve window\n");
        failures++;
    }
    for (int i = 0; i < K; i++)
        hak_free(b[i]);
}

int main(void)
{
    check_carve_order();

    /* Enough 1 MiB blocks to fill a few big superslabs; keep them all live so
     * each one's three places are taken. */
    enum { N = 12 };
    char *blk[N];
    char *last = NULL;
    unsigned at[4] = {0};
    for (int i = 0; i < N; i++) {
        blk[i] = hak_malloc(MIB);
        if (blk[i] == NULL) {
            printf("FAIL: hak_malloc(1 MiB) returned NULL\n");
            return 1;
        }
        uintptr_t off = (uintptr_t)blk[i] & (SS_SIZE - 1);
        if (off % MIB != 0 || off == 0) {
            printf("FAIL: 1 MiB block %p at offset %#lx in its superslab (want 1, 2 or 3 MiB)\n",
                   (void *)blk[i], (unsigned long)off);
            return 1;
        }
        at[off / MIB]++;
        if (off == 3 * MIB && last == NULL)
            last = blk[i];
    }
    printf("1 MiB blocks at 1/2/3 MiB into their superslab: %u/%u/%u\n", at[1], at[2], at[3]);
    if (last == NULL) {
        printf("FAIL: no 1 MiB block at 3 MiB: a big superslab holds fewer than three\n");
        return 1;
    }
    memset(last, 0xa5, MIB); /* the whole block is usable, up to the superslab's end */

    expect_fault("end", last + MIB);
    char *small = hak_malloc(64);
    expect_fault("header", (char *)((uintptr_t)small & ~(SS_SIZE - 1)) + HEADER_GUARD);
    expect_fault("header (big)", (char *)((uintptr_t)last & ~(SS_SIZE - 1)) + HEADER_GUARD);

    hak_free(small);
    for (int i = 0; i < N; i++)
        hak_free(blk[i]);
    if (failures)
        printf("%d guard probe(s) failed\n", failures);
    return failures != 0;
}
