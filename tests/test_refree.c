/*
 * test_refree.c — the checked builds (secure, debug) catch a double free of
 * a block whose slab was emptied, decommitted and taken again, and hand no
 * block out twice after it.
 *
 * 64 blocks of 60 000 B (four 1 MiB slabs of the 64 KiB class) are written
 * and freed; a 20 000 B block, of the same slab size, keeps their
 * superslab mapped. hak_collect(1) decommits the free slabs, whose blocks
 * then read as zero: no free mark. One new 60 000 B block takes one of
 * those slabs again and carves it from its start. Then every old block but
 * that one is freed a second time (HAKMEM_ON_ERROR=warn: each is reported
 * and ignored), and 128 new blocks must all differ from each other and
 * from the live two, whose contents must be intact (`uncarved`). The same
 * with 256 blocks of 1 000 B, whose class carves several blocks at once
 * (`carved`); one case a process. Before the
 * carve point was checked, the secure library took 15 of the 60 000 B
 * frees (blocks past the carve point, their memory zero) and handed each
 * out twice; before the carve marked its blocks free, it took those of
 * the 1 000 B blocks carved and not yet handed out. Each case prints
 * whether the new block is one of the freed ones (the case was set up).
 * Exit 0 with "ok".
 */
#include "check.h"
#include "hakmem.h"

#include <stdio.h>
#include <string.h>

enum { N = 256, M = 2 * N };

/* n blocks of sz freed, decommitted, one taken again, the others freed
 * twice; keep_sz: a block of the same slab size that keeps the superslab. */
static void run(size_t sz, size_t keep_sz, int n)
{
  char *keep = hak_malloc(keep_sz);
  CHECK(keep != NULL, "malloc(%zu) failed", keep_sz);
  memset(keep, 3, keep_sz);
  static char *a[N], *b[M];
  for (int i = 0; i < n; i++) {
    a[i] = hak_malloc(sz);
    CHECK(a[i] != NULL, "malloc(%zu) failed", sz);
    memset(a[i], 1, sz);
  }
  for (int i = 0; i < n; i++) hak_free(a[i]);
  hak_collect(1);
  char *r = hak_malloc(sz);
  CHECK(r != NULL, "malloc(%zu) failed", sz);
  memset(r, 2, sz);
  int reused = 0;
  for (int i = 0; i < n; i++) reused += a[i] == r;
  printf("%zu B: the new block %s one of the freed ones\n", sz, reused ? "is" : "is not");
  for (int i = 0; i < n; i++)
    if (a[i] != r) hak_free(a[i]); /* double frees: reported, ignored */
  for (int i = 0; i < 2 * n; i++) {
    b[i] = hak_malloc(sz);
    CHECK(b[i] != NULL, "malloc(%zu) failed", sz);
    CHECK(b[i] != r && b[i] != keep, "%zu B: block %p handed out while live", sz, (void *)b[i]);
    for (int j = 0; j < i; j++) CHECK(b[j] != b[i], "%zu B: block %p handed out twice", sz, (void *)b[i]);
    memset(b[i], 4, sz);
  }
  for (size_t i = 0; i < sz; i++) CHECK(r[i] == 2, "%zu B: the live block's byte %zu overwritten", sz, i);
  for (size_t i = 0; i < keep_sz; i++) CHECK(keep[i] == 3, "%zu B: the kept block's byte %zu overwritten", sz, i);
  for (int i = 0; i < 2 * n; i++) hak_free(b[i]);
  hak_free(r);
  hak_free(keep);
}

int main(int argc, char **argv)
{
  /* One case a process: each needs a slab of its own left from its first
   * phase, which the other's leavings change. */
  CHECK(argc == 2 && (!strcmp(argv[1], "carved") || !strcmp(argv[1], "uncarved")),
        "usage: test_refree carved|uncarved");
  if (!strcmp(argv[1], "carved"))
    run(1000, 2000, 256); /* a carve batch of several: carved blocks not yet handed out */
  else
    run(60000, 20000, 64); /* one block per carve: the blocks past the carve point */
  printf("ok\n");
  return 0;
}
