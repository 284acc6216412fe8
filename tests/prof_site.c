/*
 * prof_site — a program with known allocation sites, for test_prof.sh.
 * big_site() holds 48 MiB in 1 KiB blocks, small_site() 4 MiB in 256 B
 * blocks; a churn loop allocates and frees another 64 MiB that must not
 * appear as live. The profile is dumped with hak_prof_dump(argv[1]); with
 * a second argument, a first dump goes to argv[2] after small_site and
 * before big_site, so that the difference of the two is big_site alone
 * (test_pprof.sh). Built twice: with -rdynamic (dladdr names the sites)
 * and without (the profiler must read the names from .symtab).
 */
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_BYTES ((size_t)48 << 20)
#define SMALL_BYTES ((size_t)4 << 20)

__attribute__((noinline)) void *big_site(size_t n) {
  void *p = malloc(n);
  if (p) memset(p, 0x11, n);
  return p;
}

__attribute__((noinline)) void *small_site(size_t n) {
  void *p = malloc(n);
  if (p) memset(p, 0x22, n);
  return p;
}

__attribute__((noinline)) void churn_site(void) {
  for (int i = 0; i < 65536; i++) {
    void *p = malloc(1024);
    if (p) ((volatile char *)p)[0] = 1;
    free(p);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  size_t nb = BIG_BYTES / 1024, ns = SMALL_BYTES / 256;
  void **keep = calloc(nb + ns, sizeof(void *));
  if (keep == NULL) return 1;
  for (size_t i = 0; i < ns; i++) keep[nb + i] = small_site(256);
  if (argc > 2 && hak_prof_dump(argv[2]) != 0) return 1;
  for (size_t i = 0; i < nb; i++) keep[i] = big_site(1024);
  churn_site();
  if (hak_prof_dump(argv[1]) != 0) {
    fprintf(stderr, "hak_prof_dump failed: is HAKMEM_PROF=1 set?\n");
    return 1;
  }
  printf("held %zu + %zu bytes\n", BIG_BYTES, SMALL_BYTES);
  for (size_t i = 0; i < nb + ns; i++) free(keep[i]);
  free(keep);
  return 0;
}
