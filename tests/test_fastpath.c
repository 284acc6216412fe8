/*
 * test_fastpath.c — which sizes malloc's hit path serves (issue 18/19
 * follow-up: the direct table up to HAK_FAST_MAX, 4352 B).
 *
 * Linked against a statistics build of the core (HAKMEM_STATS=1), whose
 * slow_allocs counter counts every allocation that left the hit path. Once a
 * class has a current slab with free blocks, a malloc/free loop over sizes
 * up to 4352 B must not leave the hit path at all (before, every size above
 * 1 KiB went through alloc_slow); sizes of 4353..8192 B must all leave it
 * (the table ends there by design). The second half also shows that the
 * counter counts: in a build without statistics both deltas would read 0 and
 * the test would fail.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static uint64_t slow_allocs(void) {
  struct hak_stats st;
  tu_stats(&st);
  return st.slow_allocs;
}

/* rounds x (malloc of each size, write it, free it): the delta of
 * slow_allocs over the loop, after one warm-up round that gives every
 * class a current slab with free blocks. */
static uint64_t loop_slow(const size_t *sizes, unsigned n, unsigned rounds) {
  for (unsigned i = 0; i < n; i++) {
    void *p = hak_malloc(sizes[i]);
    CHECK(p != NULL, "hak_malloc(%zu) failed", sizes[i]);
    hak_free(p);
  }
  uint64_t before = slow_allocs();
  for (unsigned r = 0; r < rounds; r++)
    for (unsigned i = 0; i < n; i++) {
      unsigned char *p = hak_malloc(sizes[i]);
      CHECK(p != NULL, "hak_malloc(%zu) failed", sizes[i]);
      p[0] = (unsigned char)r;
      p[sizes[i] - 1] = (unsigned char)i;
      hak_free(p);
    }
  return slow_allocs() - before;
}

int main(void) {
  /* Every class boundary region of 1..4352 B (each class's first and last
   * size), and a few sizes below 1 KiB for comparison. */
  size_t in_table[] = {16,   100,  512,  1000, 1024, 1025, 1088, 1089, 1280, 1281, 1536, 1537, 1792,
                       1793, 2048, 2049, 2176, 2177, 2560, 2561, 3072, 3073, 3584, 3585, 4096, 4097, 4352};
  unsigned n_in = (unsigned)(sizeof in_table / sizeof in_table[0]);
  size_t above[] = {4353, 5000, 5120, 6144, 7000, 8192};
  unsigned n_above = (unsigned)(sizeof above / sizeof above[0]);
  const unsigned rounds = 2000;

  uint64_t slow_in = loop_slow(in_table, n_in, rounds);
  printf("sizes 16..4352 B: %u allocations, %llu left the hit path\n", rounds * n_in,
         (unsigned long long)slow_in);
  CHECK(slow_in == 0, "%llu of %u allocations of 16..4352 B left malloc's hit path (expected none)",
        (unsigned long long)slow_in, rounds * n_in);

  uint64_t slow_above = loop_slow(above, n_above, rounds);
  printf("sizes 4353..8192 B: %u allocations, %llu left the hit path\n", rounds * n_above,
         (unsigned long long)slow_above);
  CHECK(slow_above == (uint64_t)rounds * n_above,
        "%llu of %u allocations of 4353..8192 B left the hit path (expected all: slow_allocs must count them)",
        (unsigned long long)slow_above, rounds * n_above);
  printf("ok\n");
  return 0;
}
