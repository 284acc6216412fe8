/*
 * test_api.c — conformance of every allocation entry point.
 *
 * Built twice: against libhakmem.so through the standard names (malloc, ...;
 * this exercises the override), and with -DUSE_HAK_API through the hak_ names
 * against a UBSan build of the core (test_api_hak_ubsan).
 * Every check prints file:line and exits 1 on failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static size_t page_size;


/* A block is good: non-NULL, 16-byte aligned (and `align`-aligned), usable
 * size >= n, owned by hakmem, and every usable byte writable. */
static void check_block(void *p, size_t n, size_t align, const char *what)
{
  CHECK(p != NULL, "%s(size=%zu, align=%zu) returned NULL (errno=%d)", what, n, align, errno);
  CHECK(((uintptr_t)p & 15) == 0, "%s(size=%zu) returned %p, not 16-byte aligned", what, n, p);
  if (align)
    CHECK(((uintptr_t)p & (align - 1)) == 0, "%s(size=%zu, align=%zu) returned %p, misaligned",
          what, n, align, p);
  size_t us = malloc_usable_size(p);
  CHECK(us >= n, "%s(size=%zu, align=%zu): usable size %zu < requested", what, n, align, us);
  CHECK(OWNS(p), "%s(size=%zu) returned %p which hak_owns() does not claim", what, n, p);
  memset(p, 0xA5, us);
}

static void expect_enomem_ptr(void *p, const char *what)
{
  int e = errno;
  CHECK(p == NULL, "%s: expected NULL, got %p", what, p);
  CHECK(e == ENOMEM, "%s: expected errno ENOMEM, got %d", what, e);
}

/* ------------------------------------------------------------------ */

static void test_override_active(void)
{
  void *p = malloc(opaque_size(1));
  CHECK(p != NULL, "malloc(1) == NULL");
  CHECK(OWNS(p) != 0, "hak_owns(malloc(1)) == 0: the %s path is not hakmem's", TEST_API_NAME);
  free(p);
#ifndef USE_HAK_API
  /* libc calling malloc internally must reach hakmem too */
  char *s = strdup("hakmem");
  CHECK(s && OWNS(s), "strdup() result not owned by hakmem (%p)", (void *)s);
  free(s);
#endif
  int local = 0;
  static int global_var;
  CHECK(!OWNS(NULL), "hak_owns(NULL) != 0");
  CHECK(!OWNS(&local), "hak_owns(stack address) != 0");
  CHECK(!OWNS(&global_var), "hak_owns(global address) != 0");
  const char *v = hak_version();
  CHECK(v && strncmp(v, "0.1.0", 5) == 0, "hak_version() = \"%s\"", v ? v : "(null)");
}

static void test_null_and_zero(void)
{
  free(NULL);
  free_sized(NULL, 0);
  free_sized(NULL, 100);
  free_aligned_sized(NULL, 64, 100);
  CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));

  void *a = malloc(opaque_size(0)), *b = malloc(opaque_size(0));
  CHECK(a && b, "malloc(0) returned NULL (%p, %p)", a, b);
  CHECK(a != b, "two live malloc(0) blocks share address %p", a);
  CHECK(((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0, "malloc(0) misaligned %p %p", a, b);
  CHECK(OWNS(a) && OWNS(b), "malloc(0) not owned");
  free(a);
  free(b);

  /* many live malloc(0): all distinct */
  enum { NZ = 1000 };
  static void *z[NZ];
  for (int i = 0; i < NZ; i++) {
    z[i] = malloc(opaque_size(0));
    CHECK(z[i] != NULL, "malloc(0) #%d NULL", i);
  }
  for (int i = 0; i < NZ; i++)
    for (int j = i + 1; j < NZ; j++)
      CHECK(z[i] != z[j], "malloc(0) #%d and #%d both %p", i, j, z[i]);
  for (int i = 0; i < NZ; i++) free(z[i]);

  void *c = calloc(opaque_size(0), 16), *d = calloc(16, opaque_size(0));
  CHECK(c && d && c != d, "calloc(0,16)=%p calloc(16,0)=%p", c, d);
  free(c);
  free(d);

  /* realloc(NULL, n) == malloc(n) */
  char *r = realloc(NULL, opaque_size(100));
  check_block(r, 100, 0, "realloc(NULL)");
  free(r);
  r = reallocarray(NULL, 10, opaque_size(10));
  check_block(r, 100, 0, "reallocarray(NULL, 10, 10)");

  /* realloc(p, 0): either NULL (p freed) or a valid freeable block */
  r = realloc(r, opaque_size(0));
  if (r) {
    CHECK(((uintptr_t)r & 15) == 0 && OWNS(r), "realloc(p, 0) returned bad %p", (void *)r);
    free(r);
  }
  r = malloc(opaque_size(5000));
  check_block(r, 5000, 0, "malloc");
  r = realloc(r, opaque_size(0));
  if (r) free(r);
  r = malloc(opaque_size(64));
  r = reallocarray(r, 0, opaque_size(8));
  if (r) free(r);
}

static void test_huge(void)
{
  static const struct { size_t n; const char *name; } sz[] = {
    { SIZE_MAX, "SIZE_MAX" },
    { SIZE_MAX - 8, "SIZE_MAX-8" },
    { SIZE_MAX - 4096, "SIZE_MAX-4096" },
    { (size_t)PTRDIFF_MAX + 1, "PTRDIFF_MAX+1" },
    { (size_t)PTRDIFF_MAX, "PTRDIFF_MAX" },
    { SIZE_MAX / 2 + 12345, "SIZE_MAX/2+12345" },
    { (size_t)1 << 62, "2^62" },
  };
  char what[128];
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    size_t n = opaque_size(sz[i].n);
    snprintf(what, sizeof what, "malloc(%s)", sz[i].name);
    errno = 0; expect_enomem_ptr(malloc(n), what);
    snprintf(what, sizeof what, "calloc(1, %s)", sz[i].name);
    errno = 0; expect_enomem_ptr(calloc(1, n), what);
    snprintf(what, sizeof what, "aligned_alloc(64, %s)", sz[i].name);
    errno = 0; expect_enomem_ptr(aligned_alloc(64, n), what);
    snprintf(what, sizeof what, "aligned_alloc(1 MiB, %s)", sz[i].name);
    errno = 0; expect_enomem_ptr(aligned_alloc(MiB, n), what);
    snprintf(what, sizeof what, "memalign(4096, %s)", sz[i].name);
    errno = 0; expect_enomem_ptr(memalign(4096, n), what);
    snprintf(what, sizeof what, "valloc(%s)", sz[i].name);
    errno = 0; expect_enomem_ptr(valloc(n), what);
    snprintf(what, sizeof what, "pvalloc(%s)", sz[i].name);
    errno = 0; expect_enomem_ptr(pvalloc(n), what);

    void *p = (void *)0x1;
    errno = EDOM;
    int rc = posix_memalign(&p, 64, n);
    CHECK(rc == ENOMEM, "posix_memalign(64, %s) returned %d, want ENOMEM", sz[i].name, rc);
    CHECK(errno == EDOM, "posix_memalign(64, %s) changed errno to %d", sz[i].name, errno);

    /* failed realloc leaves the block intact */
    char *q = malloc(opaque_size(300));
    check_block(q, 300, 0, "malloc");
    pat_fill(q, 300, 77 + i);
    errno = 0;
    void *r = realloc(opaque_ptr(q), n);
    snprintf(what, sizeof what, "realloc(p, %s)", sz[i].name);
    expect_enomem_ptr(r, what);
    CHECK(pat_check(q, 300, 77 + i) == (size_t)-1, "failed realloc(p, %s) damaged the block", sz[i].name);
    CHECK(malloc_usable_size(q) >= 300, "usable size after failed realloc");
    free(q);
  }

  /* calloc / reallocarray overflow */
  static const size_t ov[][2] = {
    { SIZE_MAX / 2 + 1, 2 }, { 2, SIZE_MAX / 2 + 1 }, { (size_t)1 << 32, (size_t)1 << 32 },
    { SIZE_MAX, SIZE_MAX }, { SIZE_MAX, 2 }, { 3, SIZE_MAX / 3 + 1 }, { 65537, (SIZE_MAX / 65537) + 1 },
    { (size_t)1 << 33, (size_t)1 << 31 },
  };
  for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
    size_t a = opaque_size(ov[i][0]), b = opaque_size(ov[i][1]);
    snprintf(what, sizeof what, "calloc(%zu, %zu)", a, b);
    errno = 0; expect_enomem_ptr(calloc(a, b), what);
    snprintf(what, sizeof what, "reallocarray(NULL, %zu, %zu)", a, b);
    errno = 0; expect_enomem_ptr(reallocarray(NULL, a, b), what);
    char *q = malloc(opaque_size(40));
    check_block(q, 40, 0, "malloc");
    pat_fill(q, 40, 9000 + i);
    snprintf(what, sizeof what, "reallocarray(p, %zu, %zu)", a, b);
    errno = 0; expect_enomem_ptr(reallocarray(opaque_ptr(q), a, b), what);
    CHECK(pat_check(q, 40, 9000 + i) == (size_t)-1, "failed %s damaged the block", what);
    free(q);
  }

  /* absurd alignments */
  errno = 0;
  void *p = aligned_alloc(opaque_size((size_t)1 << 63), 16);
  CHECK(p == NULL && (errno == ENOMEM || errno == EINVAL),
        "aligned_alloc(2^63, 16) = %p errno %d", p, errno);
  void *q = NULL;
  int rc = posix_memalign(&q, opaque_size((size_t)1 << 63), 16);
  CHECK(rc == ENOMEM || rc == EINVAL, "posix_memalign(2^63, 16) returned %d", rc);
}

static void test_alignment(void)
{
  static const size_t extra_sizes[] = { 0, 1, 8, 15, 16, 17, 100, 1000, 4095, 4097, 65536 + 1, 300000 };
  char what[64];
  for (size_t align = 1; align <= 64 * MiB; align <<= 1) {
    size_t sizes[32];
    int ns = 0;
    for (size_t k = 0; k < sizeof extra_sizes / sizeof extra_sizes[0]; k++)
      if (align < MiB || extra_sizes[k] <= 100) sizes[ns++] = extra_sizes[k];
    sizes[ns++] = align > 1 ? align - 1 : 1;
    sizes[ns++] = align;
    sizes[ns++] = align + 1;
    if (align <= 4 * MiB) sizes[ns++] = 3 * align;

    for (int k = 0; k < ns; k++) {
      size_t n = opaque_size(sizes[k]);
      void *p;

      /* posix_memalign: alignment must be a power-of-two multiple of sizeof(void*) */
      p = NULL;
      errno = EDOM;
      int rc = posix_memalign(&p, opaque_size(align), n);
      CHECK(errno == EDOM, "posix_memalign(align=%zu, %zu) changed errno", align, n);
      if (align < sizeof(void *)) {
        CHECK(rc == EINVAL, "posix_memalign(align=%zu) returned %d, want EINVAL", align, rc);
      } else {
        CHECK(rc == 0, "posix_memalign(align=%zu, size=%zu) returned %d", align, n, rc);
        check_block(p, n, align, "posix_memalign");
        free(p);
      }

      errno = 0;
      p = aligned_alloc(opaque_size(align), n);
      check_block(p, n, align, "aligned_alloc");
      snprintf(what, sizeof what, "aligned_alloc");
      if (k & 1) free_aligned_sized(p, align, n); else free(p);

      p = memalign(opaque_size(align), n);
      check_block(p, n, align, "memalign");
      free(p);

      /* realloc of an aligned block: contents kept, result valid */
      if (align >= 16 && (k % 3 == 0 || n == 0)) {
        p = aligned_alloc(opaque_size(align), n);
        check_block(p, n, align, "aligned_alloc");
        pat_fill(p, n, align + n);
        size_t n2 = n < 4096 ? n + 1 : n / 2;
        errno = 0;
        char *q = realloc(p, opaque_size(n2));
        CHECK(q != NULL, "realloc(aligned_alloc(%zu, %zu), %zu) returned NULL, errno %d", align, n, n2, errno);
        size_t keep = n < n2 ? n : n2;
        size_t bad = pat_check(q, keep, align + n);
        CHECK(bad == (size_t)-1, "realloc(aligned_alloc(%zu, %zu), %zu) lost contents at %zu", align, n, n2, bad);
        check_block(q, n2, 0, "realloc of aligned block");
        free(q);
      }
    }
  }

  /* several live aligned blocks at once do not overlap */
  for (size_t align = 16; align <= 4 * MiB; align <<= 2) {
    void *blk[8];
    size_t n = align / 2 + 48;
    for (int i = 0; i < 8; i++) {
      blk[i] = aligned_alloc(align, n);
      check_block(blk[i], n, align, "aligned_alloc(live set)");
      pat_fill(blk[i], n, align * 8 + (size_t)i);
    }
    for (int i = 0; i < 8; i++) {
      size_t bad = pat_check(blk[i], n, align * 8 + (size_t)i);
      CHECK(bad == (size_t)-1, "aligned_alloc(%zu, %zu) block %d overwritten at %zu", align, n, i, bad);
      free_aligned_sized(blk[i], align, n);
    }
  }

  /* beyond 64 MiB: success (properly aligned) or NULL/ENOMEM, nothing else */
  for (size_t align = 128 * MiB; align <= ((size_t)1 << 40); align <<= 2) {
    errno = 0;
    void *p = aligned_alloc(opaque_size(align), 100);
    if (p) {
      check_block(p, 100, align, "aligned_alloc(huge alignment)");
      free(p);
    } else {
      CHECK(errno == ENOMEM, "aligned_alloc(%zu, 100) = NULL with errno %d", align, errno);
    }
    p = NULL;
    int rc = posix_memalign(&p, opaque_size(align), 4096);
    CHECK(rc == 0 || rc == ENOMEM, "posix_memalign(%zu, 4096) returned %d", align, rc);
    if (rc == 0) {
      check_block(p, 4096, align, "posix_memalign(huge alignment)");
      free(p);
    }
  }

  /* invalid alignments */
  static const size_t bad_align[] = { 0, 3, 24, 48, 100, 4097, 3 * 4096, (size_t)1 << 63 | 1 };
  for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++) {
    size_t a = opaque_size(bad_align[i]);
    void *p = (void *)0x1;
    errno = EDOM;
    int rc = posix_memalign(&p, a, 64);
    CHECK(rc == EINVAL, "posix_memalign(align=%zu) returned %d, want EINVAL", a, rc);
    CHECK(errno == EDOM, "posix_memalign(align=%zu) changed errno", a);
#ifndef GLIBC_REFERENCE /* glibc 2.36 rounds bad alignments up instead */
    errno = 0;
    p = aligned_alloc(a, 64);
    CHECK(p == NULL && errno == EINVAL, "aligned_alloc(align=%zu, 64) = %p errno %d, want NULL/EINVAL", a, p, errno);
#endif
    /* memalign serves them as glibc does: rounded up to the next power of
     * two (0 as malloc), refused only beyond 2^63. */
    errno = 0;
    p = memalign(a, 100);
    if (bad_align[i] > ((size_t)1 << 63)) {
      CHECK(p == NULL && errno == EINVAL, "memalign(align=%zu, 100) = %p errno %d, want NULL/EINVAL", a, p, errno);
    } else {
      size_t want = 16;
      while (want < bad_align[i]) want <<= 1;
      CHECK(p != NULL, "memalign(align=%zu, 100) returned NULL, errno %d", a, errno);
      check_block(p, 100, want, "memalign(rounded alignment)");
      free(p);
    }
  }
  void *p = NULL;
  int rc = posix_memalign(&p, opaque_size(sizeof(void *) / 2), 64);
  CHECK(rc == EINVAL, "posix_memalign(sizeof(void*)/2) returned %d", rc);
}

static void test_page_alloc(void)
{
  static const size_t sizes[] = { 1, 16, 100, 4095, 4096, 4097, 8191, 10000, 65536, 200000, 3 * MiB + 5 };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = opaque_size(sizes[i]);
    void *p = valloc(n);
    check_block(p, n, page_size, "valloc");
    free(p);
    size_t rounded = (n + page_size - 1) & ~(page_size - 1);
    p = pvalloc(n);
    check_block(p, rounded, page_size, "pvalloc"); /* usable >= size rounded up to a page */
    free(p);
  }
  void *p = pvalloc(opaque_size(0));
  CHECK(p != NULL && ((uintptr_t)p & (page_size - 1)) == 0, "pvalloc(0) = %p", p);
  free(p);
  p = valloc(opaque_size(0));
  CHECK(p != NULL && ((uintptr_t)p & (page_size - 1)) == 0, "valloc(0) = %p", p);
  free(p);
}

/* usable size >= requested for every size 0..70000 (and some large), every
 * block 16-aligned and writable; keeps a ring of live blocks to catch overlap */
static void test_usable_sizes(void)
{
  enum { RING = 512 };
  static void *ring[RING];
  static size_t ring_n[RING];
  size_t idx = 0;
  for (size_t n = 0; n <= 70000; n += (n < 4200 ? 1 : n < 20000 ? 7 : 61)) {
    size_t slot = idx++ % RING;
    if (ring[slot]) {
      size_t bad = pat_check(ring[slot], ring_n[slot], ring_n[slot] * 31 + slot);
      CHECK(bad == (size_t)-1, "block of size %zu overwritten at offset %zu", ring_n[slot], bad);
      if (slot & 1) free_sized(ring[slot], ring_n[slot]); else free(ring[slot]);
    }
    void *p = malloc(opaque_size(n));
    check_block(p, n, 0, "malloc");
    pat_fill(p, n, n * 31 + slot);
    ring[slot] = p;
    ring_n[slot] = n;
  }
  for (size_t s = 0; s < RING; s++) {
    if (!ring[s]) continue;
    size_t bad = pat_check(ring[s], ring_n[s], ring_n[s] * 31 + s);
    CHECK(bad == (size_t)-1, "block of size %zu overwritten at offset %zu", ring_n[s], bad);
    free(ring[s]);
    ring[s] = NULL;
  }
  static const size_t large[] = { 100000, 131071, 131072, 131073, 262144, 1 * MiB - 1, 1 * MiB, 1 * MiB + 1,
                                  2 * MiB - 16, 2 * MiB, 2 * MiB + 16, 4 * MiB + 1, 8 * MiB, 33 * MiB + 7,
                                  64 * MiB, 129 * MiB + 4095 };
  for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) {
    size_t n = opaque_size(large[i]);
    void *p = malloc(n);
    check_block(p, n, 0, "malloc");
    free(p);
    p = calloc(1, n);
    CHECK(p != NULL, "calloc(1, %zu) NULL", n);
    size_t nz = first_nonzero(p, n);
    CHECK(nz == (size_t)-1, "calloc(1, %zu) byte %zu is nonzero", n, nz);
    check_block(p, n, 0, "calloc");
    free_sized(p, n);
  }
}

/* realloc keeps min(old, new) bytes across every size-class transition */
static size_t grid[512];
static int ngrid;

/* Sizes around every size-class boundary the allocator reports (through the
 * usable size), at most ~16 per power of two, from 1 byte to just over 1 MiB. */
static void build_grid(void)
{
  ngrid = 0;
  size_t n = 1;
  while (n <= 1 * MiB + 1 && ngrid < (int)(sizeof grid / sizeof grid[0]) - 3) {
    void *p = malloc(opaque_size(n));
    CHECK(p != NULL, "malloc(%zu)", n);
    size_t us = malloc_usable_size(p);
    free(p);
    CHECK(us >= n, "usable %zu < %zu", us, n);
    grid[ngrid++] = n;              /* smallest size of this class */
    if (us != n && us <= 2 * MiB) grid[ngrid++] = us; /* largest size of this class */
    size_t next = us + 1, step = n + n / 16 + 1;
    n = next > step ? next : step;
  }
  grid[ngrid++] = 1 * MiB + 1;
}

static void *realloc_checked(void *p, size_t old_n, size_t new_n, uint64_t old_key, uint64_t new_key)
{
  char *q = realloc(p, opaque_size(new_n));
  CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", old_n, new_n);
  CHECK(((uintptr_t)q & 15) == 0, "realloc(%zu -> %zu) returned misaligned %p", old_n, new_n, (void *)q);
  CHECK(malloc_usable_size(q) >= new_n, "realloc(%zu -> %zu): usable %zu", old_n, new_n, malloc_usable_size(q));
  CHECK(OWNS(q), "realloc(%zu -> %zu) result not owned", old_n, new_n);
  size_t keep = old_n < new_n ? old_n : new_n;
  size_t bad = blk_check(q, old_n, keep, old_key);
  CHECK(bad == (size_t)-1, "realloc(%zu -> %zu) lost contents at offset %zu", old_n, new_n, bad);
  blk_fill(q, new_n, new_key);
  return q;
}

static void test_realloc(void)
{
  build_grid();
  printf("  realloc: %d sizes on the size-class grid (largest %zu)\n", ngrid, grid[ngrid - 1]);
  uint64_t key = 1;
  for (int obstacle = 0; obstacle < 2; obstacle++) {
    /* walk up through every grid size, then back down */
    size_t cur = grid[0];
    char *p = malloc(cur);
    check_block(p, cur, 0, "malloc");
    blk_fill(p, cur, key);
    void *obs[2] = { NULL, NULL };
    for (int dir = 0; dir < 2; dir++) {
      for (int i = 0; i < ngrid; i++) {
        size_t n = dir == 0 ? grid[i] : grid[ngrid - 1 - i];
        if (obstacle) { /* allocate right after, to block in-place growth */
          free(obs[i & 1]);
          obs[i & 1] = malloc(opaque_size(cur < 4096 ? cur : 64));
          CHECK(obs[i & 1] != NULL, "malloc obstacle");
        }
        p = realloc_checked(p, cur, n, key, key + 1);
        key++;
        cur = n;
      }
    }
    free(p);
    free(obs[0]);
    free(obs[1]);
  }

  /* random pairs across the grid */
  rng_t r;
  rng_seed(&r, 12345);
  for (int it = 0; it < 6000; it++) {
    size_t a = grid[rng_below(&r, (uint64_t)ngrid)], b = grid[rng_below(&r, (uint64_t)ngrid)];
    void *p = malloc(opaque_size(a));
    check_block(p, a, 0, "malloc");
    blk_fill(p, a, key);
    p = realloc_checked(p, a, b, key, key + 1);
    key += 2;
    p = realloc_checked(p, b, a, key - 1, key);
    if (it & 1) free_sized(p, a); else free(p);
  }

  /* big blocks: 8-64 MiB, fully checked */
  static const size_t big[] = { 1000, 8 * MiB, 64 * MiB, 16 * MiB + 3, 100, 64 * MiB, 9 * MiB, 33 * MiB + 1, 5000 };
  size_t cur = big[0];
  char *p = malloc(cur);
  check_block(p, cur, 0, "malloc");
  pat_fill(p, cur, key);
  for (size_t i = 1; i < sizeof big / sizeof big[0]; i++) {
    size_t n = big[i];
    char *q = realloc(p, opaque_size(n));
    CHECK(q != NULL, "realloc(%zu -> %zu) NULL", cur, n);
    size_t keep = cur < n ? cur : n;
    size_t bad = pat_check(q, keep, key);
    CHECK(bad == (size_t)-1, "realloc(%zu -> %zu) lost contents at offset %zu", cur, n, bad);
    CHECK(malloc_usable_size(q) >= n, "realloc(%zu -> %zu) usable %zu", cur, n, malloc_usable_size(q));
    key++;
    pat_fill(q, n, key);
    p = q;
    cur = n;
  }
  free(p);

  /* realloc of aligned blocks keeps contents (alignment need not be kept) */
  for (size_t align = 32; align <= 2 * MiB; align <<= 3) {
    char *a = aligned_alloc(align, 3000);
    check_block(a, 3000, align, "aligned_alloc");
    pat_fill(a, 3000, align);
    a = realloc_checked(a, 3000, 100000, align, align + 1);
    a = realloc_checked(a, 100000, 10, align + 1, align + 2);
    free(a);
  }
}

/* calloc returns zeroed memory even when it recycles dirty blocks */
static void test_calloc_reuse(void)
{
  static const size_t sizes[] = { 1, 8, 16, 24, 32, 48, 64, 80, 96, 128, 160, 200, 256, 320, 384, 512, 640,
                                  768, 1024, 1500, 2048, 3000, 4096, 6000, 8192, 12000, 16384, 32768, 65536,
                                  100000, 262144, 1 * MiB, 4 * MiB + 100 };
  enum { N = 64 };
  void *blk[N];
  for (int round = 0; round < 12; round++) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      size_t n = sizes[s];
      int cnt = n >= MiB ? 4 : N;
      for (int i = 0; i < cnt; i++) {
        blk[i] = malloc(opaque_size(n));
        CHECK(blk[i] != NULL, "malloc(%zu)", n);
        memset(blk[i], 0xAB, malloc_usable_size(blk[i]));
      }
      for (int i = 0; i < cnt; i++) {
        if (i & 1) free_sized(blk[i], n); else free(blk[i]);
      }
      for (int i = 0; i < cnt; i++) {
        size_t cnt_, each;
        switch ((i + round) % 3) {
        case 0: cnt_ = n; each = 1; break;
        case 1: cnt_ = 1; each = n; break;
        default: each = (n % 8 == 0) ? 8 : 1; cnt_ = n / each; break;
        }
        blk[i] = calloc(opaque_size(cnt_), opaque_size(each));
        CHECK(blk[i] != NULL, "calloc(%zu, %zu)", cnt_, each);
        size_t nz = first_nonzero(blk[i], n);
        CHECK(nz == (size_t)-1, "calloc(%zu, %zu) after free of dirty blocks: byte %zu = 0x%02x (round %d, block %d)",
              cnt_, each, nz, ((unsigned char *)blk[i])[nz], round, i);
        CHECK(OWNS(blk[i]), "calloc result not owned");
        memset(blk[i], 0xAB, malloc_usable_size(blk[i]));
      }
      for (int i = 0; i < cnt; i++) free(blk[i]);
    }
    /* dirty blocks made by realloc shrink, then calloc */
    for (int i = 0; i < N; i++) {
      blk[i] = malloc(opaque_size(2048));
      CHECK(blk[i] != NULL, "malloc");
      memset(blk[i], 0xAB, 2048);
      blk[i] = realloc(blk[i], opaque_size(100));
      CHECK(blk[i] != NULL, "realloc");
    }
    for (int i = 0; i < N; i++) free(blk[i]);
    for (int i = 0; i < N; i++) {
      blk[i] = calloc(1, opaque_size(2048));
      size_t nz = blk[i] ? first_nonzero(blk[i], 2048) : 0;
      CHECK(blk[i] && nz == (size_t)-1, "calloc(1, 2048) after realloc-shrink: byte %zu nonzero", nz);
    }
    for (int i = 0; i < N; i++) free(blk[i]);
  }
}

static void test_sized_free(void)
{
  rng_t r;
  rng_seed(&r, 99);
  for (int i = 0; i < 20000; i++) {
    size_t n = rng_logsize(&r, 1, i % 100 == 0 ? 4 * MiB : 64 * KiB);
    int kind = (int)rng_below(&r, 3);
    void *p;
    size_t align = 0;
    if (kind == 0) p = malloc(n);
    else if (kind == 1) p = calloc(1, n);
    else { align = (size_t)16 << rng_below(&r, 9); p = aligned_alloc(align, n); }
    check_block(p, n, align, "alloc for free_sized");
    if (align) free_aligned_sized(p, align, n); else free_sized(p, n);
  }
  /* memory freed with free_sized is reused correctly */
  void *a[256];
  for (int i = 0; i < 256; i++) {
    a[i] = malloc(opaque_size(48));
    CHECK(a[i] != NULL, "malloc");
    pat_fill(a[i], 48, (uint64_t)i);
  }
  for (int i = 0; i < 256; i += 2) free_sized(a[i], 48);
  for (int i = 0; i < 256; i += 2) {
    a[i] = malloc(opaque_size(48));
    CHECK(a[i] != NULL, "malloc");
    pat_fill(a[i], 48, (uint64_t)i);
  }
  for (int i = 0; i < 256; i++) {
    size_t bad = pat_check(a[i], 48, (uint64_t)i);
    CHECK(bad == (size_t)-1, "block %d damaged at %zu after free_sized/reuse", i, bad);
    free_sized(a[i], 48);
  }
}

static void test_foreign_and_collect(void)
{
#if !defined(USE_HAK_API) && !defined(GLIBC_REFERENCE)
  /* pointers from glibc's own allocator are forwarded to glibc's free */
  void *(*glibc_malloc)(size_t) = GLIBC_FN(void *(*)(size_t), "malloc");
  void *(*glibc_calloc)(size_t, size_t) = GLIBC_FN(void *(*)(size_t, size_t), "calloc");
  void *(*glibc_memalign)(size_t, size_t) = GLIBC_FN(void *(*)(size_t, size_t), "memalign");
  void *f1 = glibc_malloc(100), *f2 = glibc_calloc(10, 10), *f3 = glibc_memalign(64, 1000);
  void *f4 = glibc_malloc(300000);
  CHECK(f1 && f2 && f3 && f4, "glibc allocation failed");
  CHECK(!OWNS(f1) && !OWNS(f2) && !OWNS(f3) && !OWNS(f4),
        "hak_owns() claims glibc's pointers %p %p %p %p", f1, f2, f3, f4);
  CHECK(malloc_usable_size(f1) >= 100 && malloc_usable_size(f4) >= 300000,
        "malloc_usable_size of glibc blocks: %zu, %zu", malloc_usable_size(f1), malloc_usable_size(f4));
  free(f1);
  free(f2);
  free(f3);
  free(f4);
  /* realloc of a glibc block keeps its contents (wherever the result lives) */
  char *g = glibc_malloc(200);
  CHECK(g != NULL, "glibc's malloc");
  pat_fill(g, 200, 31337);
  g = realloc(g, opaque_size(100000));
  CHECK(g != NULL, "realloc(glibc block, 100000) returned NULL");
  CHECK(pat_check(g, 200, 31337) == (size_t)-1, "realloc of a glibc block lost its contents");
  g = realloc(g, opaque_size(50));
  CHECK(g != NULL && pat_check(g, 50, 31337) == (size_t)-1, "realloc(glibc block) shrink");
  free(g);
#endif
  /* hak_collect keeps live blocks intact */
  enum { N = 2000 };
  static void *p[N];
  static size_t sz[N];
  rng_t r;
  rng_seed(&r, 4242);
  for (int i = 0; i < N; i++) {
    sz[i] = rng_logsize(&r, 1, i % 50 == 0 ? 2 * MiB : 16 * KiB);
    p[i] = malloc(sz[i]);
    check_block(p[i], sz[i], 0, "malloc");
    pat_fill(p[i], sz[i], (uint64_t)i);
  }
  for (int i = 0; i < N; i += 2) free(p[i]);
  hak_collect(0);
  hak_collect(1);
  for (int i = 1; i < N; i += 2) {
    size_t bad = pat_check(p[i], sz[i], (uint64_t)i);
    CHECK(bad == (size_t)-1, "hak_collect damaged live block %d (size %zu) at %zu", i, sz[i], bad);
  }
  for (int i = 0; i < N; i += 2) {
    p[i] = malloc(sz[i]);
    check_block(p[i], sz[i], 0, "malloc after hak_collect");
    pat_fill(p[i], sz[i], (uint64_t)i);
  }
  for (int i = 0; i < N; i++) {
    size_t bad = pat_check(p[i], sz[i], (uint64_t)i);
    CHECK(bad == (size_t)-1, "block %d (size %zu) damaged at %zu", i, sz[i], bad);
    free(p[i]);
  }
  hak_collect(1);
}

/* hak_stats_get / hak_stats_print: invariants that hold for any snapshot */
static void test_stats(void)
{
  static struct hak_stats st, st2;
  memset(&st, 0, sizeof st);
  st.size = 8;
  CHECK(hak_stats_get(&st) == -1, "hak_stats_get with size 8 did not return -1");
  CHECK(hak_stats_get(NULL) == -1, "hak_stats_get(NULL) did not return -1");

  st.size = sizeof st;
  CHECK(hak_stats_get(&st) == 0, "hak_stats_get failed");
  CHECK(st.version == HAK_STATS_VERSION, "version %u", st.version);
  CHECK(st.nclasses > 0 && st.nclasses <= HAK_STATS_CLASSES, "nclasses %u", st.nclasses);
  CHECK(st.mapped_peak_bytes >= st.mapped_bytes, "mapped peak %zu < mapped %zu", st.mapped_peak_bytes,
        st.mapped_bytes);
  for (unsigned c = 0; c < st.nclasses; c++) {
    const struct hak_class_stats *k = &st.classes[c];
    CHECK(k->block_size > 0 && (c == 0 || k->block_size > st.classes[c - 1].block_size),
          "class %u block size %zu not increasing", c, k->block_size);
    CHECK(k->blocks_in_use <= k->blocks_capacity, "class %u: %zu blocks in use > capacity %zu", c,
          k->blocks_in_use, k->blocks_capacity);
  }
  CHECK(st.small_bytes_in_use <= st.small_bytes_reserved, "small in use %zu > reserved %zu",
        st.small_bytes_in_use, st.small_bytes_reserved);

  /* live blocks show up */
  enum { N = 2000 };
  static void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(opaque_size(200));
    CHECK(p[i] != NULL, "malloc");
  }
  void *big = malloc(opaque_size(8 * MiB));
  CHECK(big != NULL, "malloc(8 MiB)");
  memset(big, 1, 8 * MiB);
  memset(&st2, 0, sizeof st2);
  st2.size = sizeof st2;
  CHECK(hak_stats_get(&st2) == 0, "hak_stats_get failed");
  CHECK(st2.small_bytes_in_use >= st.small_bytes_in_use + (size_t)N * 200,
        "small_bytes_in_use %zu -> %zu after allocating %d x 200 bytes", st.small_bytes_in_use,
        st2.small_bytes_in_use, N);
  CHECK(st2.mapped_bytes >= 8 * MiB + (size_t)N * 200, "mapped_bytes %zu with > 8.4 MB live", st2.mapped_bytes);
  CHECK(st2.large_mapping_bytes + st2.large_arena_bytes_in_use >= 8 * MiB,
        "large mapping bytes %zu + arena bytes in use %zu < 8 MiB with an 8 MiB block live",
        st2.large_mapping_bytes, st2.large_arena_bytes_in_use);
  size_t in_use = 0;
  for (unsigned c = 0; c < st2.nclasses; c++) in_use += st2.classes[c].blocks_in_use;
  CHECK(in_use >= N, "per-class blocks in use sum to %zu with %d blocks live", in_use, N);

  /* a caller's shorter struct: nothing beyond its size is written */
  static unsigned char raw[sizeof(struct hak_stats) + 64];
  memset(raw, 0xEE, sizeof raw);
  struct hak_stats *sp = (struct hak_stats *)(void *)raw;
  size_t short_size = offsetof(struct hak_stats, classes) + 2 * sizeof(struct hak_class_stats);
  sp->size = short_size;
  CHECK(hak_stats_get(sp) == 0, "hak_stats_get with size %zu failed", short_size);
  for (size_t i = short_size; i < sizeof raw; i++)
    CHECK(raw[i] == 0xEE, "hak_stats_get(size=%zu) wrote byte %zu beyond the caller's size", short_size, i);

  FILE *f = tmpfile();
  CHECK(f != NULL, "tmpfile");
  hak_stats_print(f);
  long len = ftell(f);
  CHECK(len > 0, "hak_stats_print wrote nothing");
  fclose(f);

  for (int i = 0; i < N; i++) free(p[i]);
  free(big);
}

/* Each section runs in a forked child so one failing section does not hide
 * the others; `test_api SECTION...` runs the named sections in-process. */
int main(int argc, char **argv)
{
  page_size = (size_t)sysconf(_SC_PAGESIZE);
  static const struct { const char *name; void (*fn)(void); } tests[] = {
    { "override_active", test_override_active },
    { "null_and_zero", test_null_and_zero },
    { "huge", test_huge },
    { "alignment", test_alignment },
    { "page_alloc", test_page_alloc },
    { "usable_sizes", test_usable_sizes },
    { "realloc", test_realloc },
    { "calloc_reuse", test_calloc_reuse },
    { "sized_free", test_sized_free },
    { "foreign_and_collect", test_foreign_and_collect },
    { "stats", test_stats },
  };
  const size_t nt = sizeof tests / sizeof tests[0];
  if (argc > 1) {
    for (int a = 1; a < argc; a++) {
      size_t i = 0;
      while (i < nt && strcmp(argv[a], tests[i].name) != 0) i++;
      CHECK(i < nt, "unknown section '%s'", argv[a]);
      printf("test_api [%s]: %s ...\n", TEST_API_NAME, tests[i].name);
      fflush(stdout);
      tests[i].fn();
    }
    printf("test_api: passed\n");
    return 0;
  }
  int failed = 0;
  for (size_t i = 0; i < nt; i++) {
    printf("test_api [%s]: %s ...\n", TEST_API_NAME, tests[i].name);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: errno %d", errno);
    if (pid == 0) {
      tests[i].fn();
      fflush(stdout);
      _exit(0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid: errno %d", errno);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      failed++;
      if (WIFEXITED(st)) printf("test_api: section %s FAILED (exit status %d)\n", tests[i].name, WEXITSTATUS(st));
      else printf("test_api: section %s FAILED (signal %d)\n", tests[i].name, WTERMSIG(st));
    }
  }
  if (failed) {
    printf("test_api: %d section(s) failed\n", failed);
    return 1;
  }
  printf("test_api: all passed\n");
  return 0;
}
