/*
 * test_static.c — linked against libhakmem.a: the static library replaces
 * malloc & co. for the whole program, including calls made inside glibc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int main(void)
{
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  CHECK(libc != NULL, "dlopen(libc.so.6): %s", dlerror());
  void *libc_malloc = dlsym(libc, "malloc");
  CHECK(libc_malloc != NULL, "dlsym(malloc)");
  CHECK((uintptr_t)libc_malloc != (uintptr_t)&malloc, "malloc resolves to glibc's malloc, not libhakmem.a's");
  /* the name every DSO sees must be hakmem's too */
  void *global_malloc = dlsym(RTLD_DEFAULT, "malloc");
  CHECK(global_malloc != libc_malloc, "dlsym(RTLD_DEFAULT, \"malloc\") is glibc's: shared libraries would bypass hakmem");
  dlclose(libc);

  void *blk[1000];
  for (int i = 0; i < 1000; i++) {
    size_t n = (size_t)(i * 37 % 5000) + (i % 100 == 0 ? 1u << 20 : 0);
    blk[i] = (i & 1) ? malloc(n) : calloc(1, n);
    CHECK(blk[i] != NULL && OWNS(blk[i]), "allocation %d (%zu bytes) = %p not owned by hakmem", i, n, blk[i]);
    CHECK(((uintptr_t)blk[i] & 15) == 0 && malloc_usable_size(blk[i]) >= n, "allocation %d", i);
    pat_fill(blk[i], n, (uint64_t)i);
  }
  for (int i = 0; i < 1000; i++) {
    size_t n = (size_t)(i * 37 % 5000) + (i % 100 == 0 ? 1u << 20 : 0);
    size_t bad = pat_check(blk[i], n, (uint64_t)i);
    CHECK(bad == (size_t)-1, "block %d corrupted at %zu", i, bad);
    free(blk[i]);
  }
  /* glibc-internal allocations go to hakmem as well */
  char *s = strdup("static hakmem");
  CHECK(s && OWNS(s), "strdup() result %p not owned: glibc's internal malloc calls bypass libhakmem.a", (void *)s);
  free(s);
  char *line = NULL;
  size_t cap = 0;
  FILE *f = fmemopen((void *)"one line\n", 9, "r");
  CHECK(f != NULL, "fmemopen");
  CHECK(getline(&line, &cap, f) == 9 && OWNS(line), "getline buffer %p not owned by hakmem", (void *)line);
  free(line);
  fclose(f);
  void *a = aligned_alloc(4096, 100);
  CHECK(a && OWNS(a) && ((uintptr_t)a & 4095) == 0, "aligned_alloc(4096) = %p", a);
  free(a);
  printf("test_static: passed (%s)\n", hak_version());
  return 0;
}
