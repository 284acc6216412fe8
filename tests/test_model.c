/*
 * test_model.c — randomized model test.
 *
 * Millions of random operations (malloc, calloc, realloc, reallocarray,
 * aligned_alloc, posix_memalign, memalign, free, free_sized,
 * free_aligned_sized) on a table of slots. Every live block carries a pattern
 * derived from (slot, generation) that is verified before the block is freed
 * or reallocated (fully for blocks up to 256 KiB, head/tail/probes above),
 * realloc must keep the common prefix, calloc must return zeroes, alignment
 * and usable size are checked on every allocation, and periodically every
 * live block is verified (also around hak_collect).
 *
 *   test_model [--ops=N] [--seed=S] [--slots=N] [--maxsize=BYTES]
 *   env: HAKMEM_TEST_OPS, HAKMEM_TEST_SEED, HAKMEM_TEST_SLOTS
 * Failures print the seed and the operation number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

enum { K_MALLOC, K_CALLOC, K_ALIGNED_ALLOC, K_POSIX_MEMALIGN, K_MEMALIGN, K_REALLOC };
static const char *const kind_name[] = { "malloc", "calloc", "aligned_alloc", "posix_memalign",
                                         "memalign", "realloc" };

typedef struct {
  unsigned char *p;
  size_t n;       /* requested size */
  size_t filled;  /* bytes covered by the pattern (>= n for small blocks: usable size) */
  size_t align;   /* 0 unless from aligned_alloc / posix_memalign / memalign */
  uint64_t key;
  int kind;
} slot_t;

static slot_t *slots;
static size_t nslots;
static uint64_t opno;
static size_t max_size;

static size_t pick_size(rng_t *r)
{
  uint64_t x = rng_below(r, 1000);
  if (x < 12) return (size_t)rng_below(r, 17);                  /* 0..16 incl. zero */
  if (x < 700) return rng_logsize(r, 1, 1024);                   /* mostly <= 1 KiB */
  if (x < 960) return rng_logsize(r, 1025, 64 * 1024);           /* some up to 64 KiB */
  if (x < 997) return rng_logsize(r, 64 * 1024 + 1, 1024 * 1024);
  return rng_logsize(r, 1024 * 1024 + 1, max_size);              /* a few up to 4 MiB */
}

static size_t pick_align(rng_t *r)
{
  uint64_t x = rng_below(r, 100);
  if (x < 70) return (size_t)16 << rng_below(r, 5);    /* 16..256 */
  if (x < 97) return (size_t)512 << rng_below(r, 4);   /* 512..4096 */
  return (size_t)8192 << rng_below(r, 6);              /* 8 KiB..256 KiB */
}

static void fill_slot(slot_t *s, size_t id)
{
  size_t us = malloc_usable_size(s->p);
  CHECK(us >= s->n, "op %llu slot %zu: %s(%zu) usable size %zu < requested",
        (unsigned long long)opno, id, kind_name[s->kind], s->n, us);
  /* small blocks: pattern over the whole usable size (catches an overstated
   * usable size); big ones: head/tail/probes of the requested size */
  s->filled = s->n <= 4096 ? us : s->n;
  blk_fill(s->p, s->filled, s->key);
}

static void verify_slot(const slot_t *s, size_t id, const char *when)
{
  size_t bad = blk_check(s->p, s->filled, s->filled, s->key);
  CHECK(bad == (size_t)-1,
        "op %llu: %s: slot %zu block %p (%s size %zu, align %zu, filled %zu) corrupted at offset %zu: "
        "byte 0x%02x, expected 0x%02x",
        (unsigned long long)opno, when, id, (void *)s->p, kind_name[s->kind], s->n, s->align, s->filled, bad,
        s->p[bad], pat_byte(s->key, bad));
}

static void check_new(const slot_t *s, size_t id)
{
  CHECK(s->p != NULL, "op %llu slot %zu: %s(size=%zu, align=%zu) returned NULL, errno %d",
        (unsigned long long)opno, id, kind_name[s->kind], s->n, s->align, errno);
  CHECK(((uintptr_t)s->p & 15) == 0, "op %llu: %s(%zu) returned %p, not 16-byte aligned",
        (unsigned long long)opno, kind_name[s->kind], s->n, (void *)s->p);
  if (s->align)
    CHECK(((uintptr_t)s->p & (s->align - 1)) == 0, "op %llu: %s(align=%zu, size=%zu) returned %p, misaligned",
          (unsigned long long)opno, kind_name[s->kind], s->align, s->n, (void *)s->p);
  CHECK(OWNS(s->p), "op %llu: %s(%zu) returned %p which hak_owns() rejects", (unsigned long long)opno,
        kind_name[s->kind], s->n, (void *)s->p);
}

static void do_alloc(rng_t *r, slot_t *s, size_t id)
{
  s->n = pick_size(r);
  s->align = 0;
  uint64_t x = rng_below(r, 100);
  errno = 0;
  if (x < 55) {
    s->kind = K_MALLOC;
    s->p = malloc(s->n);
  } else if (x < 75) {
    s->kind = K_CALLOC;
    size_t each = 1, cnt = s->n;
    if (s->n % 16 == 0 && (x & 1)) { each = 16; cnt = s->n / 16; }
    else if (x & 2) { each = s->n; cnt = s->n ? 1 : 0; }
    s->p = calloc(cnt, each);
  } else if (x < 85) {
    s->kind = K_ALIGNED_ALLOC;
    s->align = pick_align(r);
    s->p = aligned_alloc(s->align, s->n);
  } else if (x < 93) {
    s->kind = K_POSIX_MEMALIGN;
    s->align = pick_align(r);
    void *p = NULL;
    int rc = posix_memalign(&p, s->align, s->n);
    CHECK(rc == 0, "op %llu: posix_memalign(align=%zu, %zu) returned %d", (unsigned long long)opno, s->align,
          s->n, rc);
    s->p = p;
  } else if (x < 96) {
    s->kind = K_MEMALIGN;
    s->align = pick_align(r);
    s->p = memalign(s->align, s->n);
  } else {
    s->kind = K_REALLOC;
    s->p = realloc(NULL, s->n);
  }
  check_new(s, id);
  if (s->kind == K_CALLOC) {
    size_t nz = first_nonzero(s->p, s->n);
    CHECK(nz == (size_t)-1, "op %llu slot %zu: calloc(%zu) byte %zu is 0x%02x, not zero",
          (unsigned long long)opno, id, s->n, nz, s->p[nz]);
  }
  s->key = ((uint64_t)id << 40) ^ opno ^ 0x5bd1e995;
  fill_slot(s, id);
}

static void do_free(rng_t *r, slot_t *s, size_t id)
{
  verify_slot(s, id, "before free");
  uint64_t x = rng_below(r, 100);
  if (s->kind == K_ALIGNED_ALLOC && x < 50) free_aligned_sized(s->p, s->align, s->n);
  else if ((s->kind == K_MALLOC || s->kind == K_CALLOC || s->kind == K_REALLOC) && x < 40)
    free_sized(s->p, s->n);
  else
    free(s->p);
  s->p = NULL;
}

static void do_realloc(rng_t *r, slot_t *s, size_t id)
{
  verify_slot(s, id, "before realloc");
  size_t old_n = s->n, old_filled = s->filled;
  uint64_t old_key = s->key;
  uint64_t x = rng_below(r, 100);
  size_t n;
  if (x < 35) n = pick_size(r);
  else if (x < 55) n = old_n + (size_t)rng_below(r, 64);                    /* small growth */
  else if (x < 75) n = old_n - (size_t)rng_below(r, old_n / 4 + 1);         /* modest shrink */
  else if (x < 90) { n = old_n * 2 + 1; if (n > max_size) n = max_size; }   /* doubling */
  else n = old_n / 2;
  errno = 0;
  unsigned char *q;
  size_t each = (n % 8 == 0 && n) ? 8 : 1;
  const char *how = (x & 1) ? "realloc" : "reallocarray";
  if (x & 1) q = realloc(s->p, n);
  else q = reallocarray(s->p, n / each, each);
  if (n == 0 && q == NULL) { /* realloc(p, 0) may free and return NULL */
    s->p = NULL;
    return;
  }
  CHECK(q != NULL, "op %llu slot %zu: %s(%p [%s, size %zu, align %zu], %zu%s) returned NULL, errno %d",
        (unsigned long long)opno, id, how, opaque_ptr(s->p), kind_name[s->kind], old_n, s->align,
        (x & 1) ? n : n / each, (x & 1) ? "" : (each == 8 ? " x 8" : " x 1"), errno);
  s->p = q;
  s->n = n;
  s->kind = K_REALLOC;
  s->align = 0;
  check_new(s, id);
  size_t keep = old_n < n ? old_n : n;
  if (old_filled > old_n && keep == old_n) keep = old_n; /* only the requested bytes are preserved */
  size_t bad = blk_check(q, old_filled, keep, old_key);
  CHECK(bad == (size_t)-1,
        "op %llu slot %zu: realloc(%zu -> %zu) lost contents at offset %zu: 0x%02x, expected 0x%02x",
        (unsigned long long)opno, id, old_n, n, bad, q[bad], pat_byte(old_key, bad));
  s->key = ((uint64_t)id << 40) ^ opno ^ 0x1b873593;
  fill_slot(s, id);
}

static void verify_all(const char *when)
{
  for (size_t i = 0; i < nslots; i++)
    if (slots[i].p) verify_slot(&slots[i], i, when);
}

int main(int argc, char **argv)
{
  uint64_t ops = test_param(argc, argv, "ops", "HAKMEM_TEST_OPS", 3000000);
  uint64_t seed = test_param(argc, argv, "seed", "HAKMEM_TEST_SEED", 0);
  if (seed == 0) seed = 20260521;
  nslots = (size_t)test_param(argc, argv, "slots", "HAKMEM_TEST_SLOTS", 6000);
  max_size = (size_t)test_param(argc, argv, "maxsize", NULL, 4 * 1024 * 1024);
  check_set_seed(seed);
  printf("test_model [%s]: seed=%llu ops=%llu slots=%zu maxsize=%zu\n", TEST_API_NAME,
         (unsigned long long)seed, (unsigned long long)ops, nslots, max_size);
  fflush(stdout);

  /* the slot table itself comes from the allocator under test, too */
  slots = calloc(nslots, sizeof *slots);
  CHECK(slots != NULL, "calloc(slot table)");
  rng_t r;
  rng_seed(&r, seed);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);

  uint64_t verify_every = ops / 8 + 1;
  for (opno = 0; opno < ops; opno++) {
    size_t id = (size_t)rng_below(&r, nslots);
    slot_t *s = &slots[id];
    if (!s->p) {
      do_alloc(&r, s, id);
    } else {
      uint64_t x = rng_below(&r, 100);
      if (x < 70) do_free(&r, s, id);
      else do_realloc(&r, s, id);
    }
    if (opno % verify_every == verify_every - 1) {
      verify_all("periodic verify");
      if ((opno / verify_every) % 2 == 1) {
        hak_collect((int)((opno / verify_every) % 4 == 3));
        verify_all("after hak_collect");
      }
    }
  }
  verify_all("final verify");
  size_t live = 0;
  for (size_t i = 0; i < nslots; i++) {
    if (slots[i].p) { live++; do_free(&r, &slots[i], i); }
  }
  free(slots);
  hak_collect(1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("test_model: passed (%llu ops, %zu live at end, %.2f s)\n", (unsigned long long)ops, live,
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  return 0;
}
