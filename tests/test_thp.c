/*
 * test_thp.c — HAKMEM_THP reaches the kernel (docs/options.md): the
 * regions hakmem maps for blocks carry the advice the option asks for.
 *
 * Usage: test_thp hg|nh|none. Allocates and writes a 64 B block (a
 * superslab), a 256 KiB and a 6 MiB block (the coalescing arenas) and an
 * 80 MiB block (a mapping of its own, above 64 MiB), then finds each
 * block's mapping in /proc/self/smaps and checks its VmFlags:
 * "hg" (MADV_HUGEPAGE) is what `always` asks for, "nh" (MADV_NOHUGEPAGE)
 * what `never` (also with no value, or a bad one) and the lowmem preset
 * ask for, neither what `default` does.
 * The ownership map's table is advised MADV_NOHUGEPAGE in every mode.
 * Whether the kernel then backs them with huge pages is its choice (the
 * option is a hint; ruby, for one, turns them off for its process), so
 * that is printed, not asserted: the AnonHugePages of 32 MiB of 1 KiB
 * blocks.
 *
 * Exit 77 (skipped) where the kernel has no transparent huge pages.
 */
#define _GNU_SOURCE
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The VmFlags, as bits (VMA_HG for "hg", MADV_HUGEPAGE; VMA_NH for "nh",
 * MADV_NOHUGEPAGE), of the first mapping in /proc/self/smaps that holds
 * address a (a != 0) or is exactly size bytes long; -1 if none. */
enum { VMA_HG = 1, VMA_NH = 2 };
static int smaps_thp_flags(uintptr_t a, unsigned long size) {
  FILE *f = fopen("/proc/self/smaps", "r");
  CHECK(f != NULL, "cannot open /proc/self/smaps");
  char line[512];
  int in = 0, found = -1;
  while (found < 0 && fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
      in = a != 0 ? a >= lo && a < hi : hi - lo == size;
      continue;
    }
    if (in && strncmp(line, "VmFlags:", 8) == 0) {
      found = 0;
      for (char *t = strtok(line + 8, " \n"); t != NULL; t = strtok(NULL, " \n"))
        found |= !strcmp(t, "hg") ? VMA_HG : !strcmp(t, "nh") ? VMA_NH : 0;
    }
  }
  fclose(f);
  return found;
}

/* The mapping holding p: fails the test when there is none. */
static int vma_thp_flags(const void *p) {
  int found = smaps_thp_flags((uintptr_t)p, 0);
  CHECK(found >= 0, "no mapping with VmFlags holds %p", p);
  return found;
}

/* The ownership map's table: the one mapping of exactly its 256 MiB (2^25
 * entries of 8 bytes; init.c advises that range alone, which splits it
 * from the rest of the library's BSS). -1 if none. */
static int table_thp_flags(void) { return smaps_thp_flags(0, 1ul << 28); }

static long anon_huge_kib(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

int main(int argc, char **argv) {
  CHECK(argc == 2 && (!strcmp(argv[1], "hg") || !strcmp(argv[1], "nh") || !strcmp(argv[1], "none")),
        "usage: test_thp hg|nh|none");
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
    printf("no transparent huge pages in this kernel: skipped\n");
    return 77;
  }
  free(malloc(1)); /* hakmem starts up */
  /* The ownership map, sparse, never asks for huge pages, whatever the
   * option: where the kernel's setting is `always`, each entry touched
   * would fault 2 MiB in. */
  int tf = table_thp_flags();
  printf("ownership map's table: %s\n", tf < 0 ? "not found" : tf == VMA_NH ? "nh" : tf == VMA_HG ? "hg" : "no advice");
  CHECK(tf == VMA_NH, "the ownership map's 256 MiB table lacks MADV_NOHUGEPAGE (flags %d)", tf);
  const size_t sizes[] = {64, 256 << 10, 6 << 20, 80 << 20};
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *p = malloc(sizes[i]);
    CHECK(p != NULL, "malloc(%zu) failed", sizes[i]);
    memset(p, 0x5a, sizes[i]);
    int fl = vma_thp_flags(p), hg = (fl & VMA_HG) != 0, nh = (fl & VMA_NH) != 0;
    printf("%zu B at %p: hg %d, nh %d\n", sizes[i], (void *)p, hg, nh);
    if (!strcmp(argv[1], "hg"))
      CHECK(hg && !nh, "the %zu B block's mapping lacks MADV_HUGEPAGE", sizes[i]);
    else if (!strcmp(argv[1], "nh"))
      CHECK(nh && !hg, "the %zu B block's mapping lacks MADV_NOHUGEPAGE", sizes[i]);
    else
      CHECK(!hg && !nh, "the %zu B block's mapping was advised (hg %d, nh %d) under THP=default", sizes[i], hg, nh);
    free(p);
  }
  if (!strcmp(argv[1], "hg")) {
    enum { N = 32768 };
    static char *v[N];
    for (unsigned i = 0; i < N; i++) {
      v[i] = malloc(1024);
      CHECK(v[i] != NULL, "malloc(1024) failed");
      memset(v[i], 1, 1024);
    }
    printf("AnonHugePages with 32 MiB of 1 KiB blocks: %ld KiB (the kernel's choice)\n", anon_huge_kib());
    for (unsigned i = 0; i < N; i++) free(v[i]);
  }
  printf("ok\n");
  return 0;
}
