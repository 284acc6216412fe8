/*
 * fuzz_ops.c — libFuzzer harness: the input is a program of allocator
 * operations on the hak_ API (hakmem beside the system allocator, so the
 * sanitizer runtime is undisturbed). Built with clang
 * -fsanitize=fuzzer,address against a copy of the core built the same way.
 *
 * Input: a sequence of operations, each one opcode byte followed by
 * operand bytes (missing bytes read as 0). 64 slots hold live blocks with
 * their size, alignment and content key. Checked on every step:
 *   - results are 16-byte aligned, and aligned as requested;
 *   - hak_usable_size(p) >= requested size, and hak_owns(p);
 *   - a new block does not overlap any live block;
 *   - contents (a pattern derived from a key) are intact before every
 *     free/realloc/check, and realloc keeps the old prefix;
 *   - calloc memory is zero; realloc growth keeps the prefix;
 *   - impossible requests (absurd sizes, overflowing products, bad
 *     alignments) fail with ENOMEM / EINVAL and leave blocks untouched.
 * Any violation calls abort() (a crash for libFuzzer, with the input saved).
 *
 * Bad calls (issue 10), when HAKMEM_ON_ERROR is warn or ignore (the harness
 * sets warn when the variable is unset): free/free_sized/realloc of an
 * interior pointer of a live block, double frees (free/free_sized/realloc of
 * a recently freed pointer that is not inside any live block), and writes of
 * the first word of a recently freed small block (a garbage value or a
 * pointer into a live block), while its memory is still a slab's. The allocator must report them and carry on:
 * the live blocks stay intact, realloc of a bad pointer returns NULL, and
 * nothing is handed out twice (the non-overlap check of every new block).
 * Against the default build (hak_version() names the build) only the bad
 * calls it claims (README.md, "What each build catches") are made: a double
 * free of the block freed last, with no allocator call since (it heads its
 * list, or its slab or mapping is gone); an interior pointer through
 * realloc, or of a block served by large.c (above 1 MiB, or aligned above
 * 1 MiB) through any call; no use-after-free writes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"
#include "os.h" /* os_is_readable: the harness is built with the core's sources */
#include "ownmap.h"     /* uaf_write: is a freed block's memory still a slab's? */
#include "superslab.h"

#define NSLOT 64
#define FULL_CHECK ((size_t)8192) /* larger blocks: 1 KiB windows at head, middle, tail */
#define WIN ((size_t)1024)
#define LIVE_MAX ((size_t)512 << 20)

typedef struct {
  unsigned char *p;
  size_t n, align;
  uint64_t key;
  int zero; /* calloc'ed, not yet filled */
} slot_t;

static slot_t slots[NSLOT];
static size_t live_bytes;

/* recently freed blocks, for double frees and use-after-free writes */
#define NFREED 64
typedef struct { unsigned char *p; size_t n; uint64_t at; } freed_t;
static freed_t freed[NFREED];
static unsigned freed_pos;
static int bad_ops; /* HAKMEM_ON_ERROR is warn or ignore */
static int all_checks; /* the secure or debug build: every kind is caught */
static uint64_t events; /* allocations, frees and collections so far */

static void note_freed(void *p, size_t n)
{
  freed[freed_pos % NFREED].p = p;
  freed[freed_pos % NFREED].n = n;
  freed[freed_pos % NFREED].at = ++events;
  freed_pos++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  setenv("HAKMEM_ON_ERROR", "warn", 0); /* read at the first allocation */
  const char *m = getenv("HAKMEM_ON_ERROR");
  bad_ops = strcmp(m, "warn") == 0 || strcmp(m, "ignore") == 0;
  const char *v = hak_version();
  all_checks = strstr(v, " secure") != NULL || strstr(v, " debug") != NULL;
  return 0;
}

#define FAIL(...)                                        \
  do {                                                   \
    fprintf(stderr, "fuzz_ops: " __VA_ARGS__);           \
    fputc('\n', stderr);                                 \
    abort();                                             \
  } while (0)

typedef struct { const uint8_t *d; size_t n, i; } in_t;
static unsigned rd8(in_t *in) { return in->i < in->n ? in->d[in->i++] : 0; }
static unsigned rd16(in_t *in) { unsigned a = rd8(in); return a | rd8(in) << 8; }
static uint32_t rd32(in_t *in) { uint32_t a = rd16(in); return a | (uint32_t)rd16(in) << 16; }

#if defined(__clang__)
#define NOCOV __attribute__((no_sanitize("coverage")))
#else
#define NOCOV
#endif

NOCOV static uint8_t pat(uint64_t key, size_t i)
{
  uint64_t x = key ^ ((i >> 3) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (uint8_t)(x >> ((i & 7) * 8));
}

/* ranges of a block that carry the pattern */
NOCOV static void ranges(size_t n, size_t r[3][2])
{
  if (n <= FULL_CHECK) {
    r[0][0] = 0; r[0][1] = n;
    r[1][0] = r[1][1] = r[2][0] = r[2][1] = 0;
    return;
  }
  r[0][0] = 0; r[0][1] = WIN;
  r[1][0] = (n / 2) & ~(WIN - 1); r[1][1] = r[1][0] + WIN;
  r[2][0] = n - WIN; r[2][1] = n;
}

NOCOV static void fill(unsigned char *p, size_t n, uint64_t key)
{
  size_t r[3][2];
  ranges(n, r);
  for (int k = 0; k < 3; k++)
    for (size_t i = r[k][0]; i < r[k][1]; i++) p[i] = pat(key, i);
}

/* check the first `lim` bytes of a block of size n filled with key */
NOCOV static void check(const unsigned char *p, size_t n, size_t lim, uint64_t key, const char *what)
{
  size_t r[3][2];
  ranges(n, r);
  for (int k = 0; k < 3; k++)
    for (size_t i = r[k][0]; i < r[k][1] && i < lim; i++)
      if (p[i] != pat(key, i)) FAIL("%s: block %p (%zu B) byte %zu is 0x%02x, want 0x%02x", what, (void *)p, n, i, p[i], pat(key, i));
}

NOCOV static void check_zero(const unsigned char *p, size_t n, const char *what)
{
  size_t lim = n <= FULL_CHECK ? n : FULL_CHECK;
  for (size_t i = 0; i < lim; i++)
    if (p[i]) FAIL("%s: calloc block %p (%zu B) byte %zu nonzero", what, (void *)p, n, i);
  for (size_t i = n - (n < WIN ? n : WIN); i < n; i++)
    if (p[i]) FAIL("%s: calloc block %p (%zu B) byte %zu nonzero", what, (void *)p, n, i);
}

static void verify(slot_t *s, const char *what)
{
  if (!s->p) return;
  if (!hak_owns(s->p)) FAIL("%s: live block %p not owned", what, (void *)s->p);
  size_t u = hak_usable_size(s->p);
  if (u < s->n) FAIL("%s: usable size %zu < %zu", what, u, s->n);
  if (s->zero) check_zero(s->p, s->n, what);
  else check(s->p, s->n, s->n, s->key, what);
}

/* a new block: alignment, ownership, usable size, no overlap */
static void accept(slot_t *s, void *p, size_t n, size_t align, uint64_t key, int zero, const char *what)
{
  uintptr_t a = (uintptr_t)p;
  events++;
  if (a & 15) FAIL("%s: %p not 16-byte aligned", what, p);
  if (align > 16 && (a & (align - 1))) FAIL("%s: %p not %zu-aligned", what, p, align);
  if (!hak_owns(p)) FAIL("%s: %p not owned by hakmem", what, p);
  size_t u = hak_usable_size(p);
  if (u < n) FAIL("%s: usable size %zu < %zu", what, u, n);
  size_t len = n ? n : 1;
  for (int i = 0; i < NSLOT; i++) {
    slot_t *o = &slots[i];
    if (!o->p || o == s) continue;
    size_t ol = o->n ? o->n : 1;
    if ((uintptr_t)o->p < a + len && a < (uintptr_t)o->p + ol)
      FAIL("%s: new block %p+%zu overlaps live block %p+%zu", what, p, n, (void *)o->p, o->n);
  }
  if (zero) check_zero(p, n, what);
  s->p = p;
  s->n = n;
  s->align = align;
  s->key = key;
  s->zero = zero;
  if (!zero) fill(p, n, key);
  live_bytes += n;
}

static void release(slot_t *s, int how)
{
  verify(s, "free");
  live_bytes -= s->n;
  switch (how % 3) {
  case 0: hak_free(s->p); break;
  case 1: hak_free_sized(s->p, s->n); break;
  default:
    if (s->align) hak_free_aligned_sized(s->p, s->align, s->n);
    else hak_free_sized(s->p, s->n);
  }
  note_freed(s->p, s->n);
  s->p = NULL;
}

/* size from 3 operand bytes: a range selector and a value */
static size_t pick_size(in_t *in)
{
  unsigned sel = rd8(in);
  uint32_t v = rd16(in);
  static const size_t edge[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 48, 64, 100, 128, 255, 256, 257, 511, 512, 1000,
                                1023, 1024, 1025, 2048, 4095, 4096, 4097, 8192, 16383, 16384, 16385, 32768, 65535,
                                65536, 65537, 131072, 262144, 524288, 1048575, 1048576, 1048577, 2097152, 4194304,
                                (16u << 20) - 1, 16u << 20, (16u << 20) + 1, 33554432};
  switch (sel % 8) {
  case 0: case 1: case 2: return v % 257;                    /* tiny */
  case 3: return v % 4097;                                   /* small */
  case 4: return v;                                          /* up to 64 KiB */
  case 5: return (size_t)v * 16 + (sel >> 3);                /* up to 1 MiB */
  case 6: return edge[v % (sizeof edge / sizeof edge[0])];
  default: return (sel & 0x80) ? (size_t)v * 512 : (size_t)(v % 64) << 20; /* large (up to 63 MiB) */
  }
}

static uint64_t key_ctr;

/* is [a, a+len) inside (or overlapping) a live block? */
static int in_live(uintptr_t a, size_t len)
{
  for (int i = 0; i < NSLOT; i++) {
    slot_t *o = &slots[i];
    if (!o->p) continue;
    size_t ol = o->n ? o->n : 1;
    if ((uintptr_t)o->p < a + len && a < (uintptr_t)o->p + ol) return 1;
  }
  return 0;
}

/* free / free_sized / realloc of a bad pointer: nothing may change */
static void bad_call(void *q, size_t n, unsigned how)
{
  switch (how % 3) {
  case 0: hak_free(q); break;
  case 1: hak_free_sized(q, n); break;
  default: {
    void *r = hak_realloc(q, n + 1);
    if (r) FAIL("realloc of the bad pointer %p returned %p", q, r);
  }
  }
}

static void bad_free(in_t *in, unsigned opc, slot_t *s)
{
  unsigned how = rd8(in);
  if (opc & 0x10) { /* interior pointer of a live block */
    if (!s->p) return;
    size_t u = hak_usable_size(s->p);
    if (u < 2) return;
    size_t lim = u < 65536 ? u : 65536;
    size_t off = 1 + rd16(in) % (lim - 1);
    if (how & 0x80) off = (off + 15) & ~(size_t)15; /* aligned interior pointers too */
    if (off >= u) return;
    /* the default build: realloc tests for a block start, large.c always */
    if (!all_checks && how % 3 != 2 && s->n <= ((size_t)1 << 20) && s->align <= ((size_t)1 << 20)) return;
    bad_call(s->p + off, s->n, how);
    verify(s, "after an interior free");
    for (int i = 0; i < NSLOT; i++) verify(&slots[i], "after an interior free (all)");
  } else { /* double free of a recently freed block that is not live again */
    freed_t *f = &freed[rd8(in) % NFREED];
    if (!f->p || in_live((uintptr_t)f->p, f->n ? f->n : 1)) return;
    if (!all_checks && f->at != events) return; /* the default build: only the block freed last */
    bad_call(f->p, f->n, how);
    for (int i = 0; i < NSLOT; i++) verify(&slots[i], "after a double free");
  }
}

static void uaf_write(in_t *in, unsigned opc)
{
  freed_t *f = &freed[rd8(in) % NFREED];
  unsigned sel = rd8(in);
  uint64_t v = rd32(in) | (uint64_t)rd32(in) << 32;
  if (!f->p || f->n < 8 || f->n > 65536) return;
  if (in_live((uintptr_t)f->p, f->n) || !hak_owns(f->p)) return; /* reused, or given back to the OS */
  /* hak_owns answers per 4 MiB region: a cached mapping that a later block
   * reuses held to its size may no longer cover the freed block's page. */
  if (!os_is_readable(f->p)) return;
  /* Only where small blocks still live: a slab's block area. A 4 MiB region
   * can change hands (a superslab or a dedicated mapping unmapped, an arena
   * mapped there later), and a large block keeps a 64-byte header just
   * below its start (an aligned mapping, a copy at its region's base),
   * which in_live does not cover: a freed aligned_alloc(4 MiB, 16) block's
   * address can become an arena block's header. A write there is one into
   * a live block's metadata, not into a freed block's link (README, "What
   * each build catches"), and it made a live arena block read as invalid
   * in one CI run. The same holds for a superslab's header pages. */
  unsigned own = ownmap_get(f->p);
  if (own < HAK_SMALL_SLAB_SHIFT || !slab_holds(ss_slab_of(f->p, own), f->p)) return;
  uintptr_t val;
  slot_t *o = &slots[sel % NSLOT];
  switch ((opc >> 4) % 3) {
  case 0: val = (uintptr_t)0x4141414141414141ull; break;
  case 1: val = (uintptr_t)(v | 0x8000000000000000ull); break; /* non-canonical garbage */
  default: /* a pointer to (or into) a live block */
    if (!o->p) return;
    val = (uintptr_t)o->p + (o->n > 16 ? (sel >> 6) * 8 % 32 : 0);
  }
  memcpy(f->p, &val, sizeof val);
  f->p = NULL; /* not freed again: the allocator may have dropped it */
}

static void op(in_t *in)
{
  unsigned opc = rd8(in);
  slot_t *s = &slots[rd8(in) % NSLOT];
  uint64_t key = ++key_ctr * 0x2545F4914F6CDD1Dull;
  switch (opc % 14) {
  case 0: case 1: { /* malloc */
    if (s->p) release(s, opc >> 4);
    size_t n = pick_size(in);
    if (live_bytes + n > LIVE_MAX) return;
    void *p = hak_malloc(n);
    if (!p) FAIL("malloc(%zu) failed", n);
    accept(s, p, n, 0, key, 0, "malloc");
    break;
  }
  case 2: { /* calloc */
    if (s->p) release(s, opc >> 4);
    size_t a = pick_size(in) % 4097, b = rd8(in) + 1;
    if (live_bytes + a * b > LIVE_MAX) return;
    void *p = hak_calloc(a, b);
    if (!p) FAIL("calloc(%zu, %zu) failed", a, b);
    accept(s, p, a * b, 0, key, 1, "calloc");
    break;
  }
  case 3: { /* aligned forms */
    if (s->p) release(s, opc >> 4);
    unsigned sh = rd8(in) % 25; /* 1 B .. 16 MiB */
    size_t al = (size_t)1 << sh, n = pick_size(in);
    if (live_bytes + n + al > LIVE_MAX) return;
    void *p = NULL;
    unsigned form = (opc >> 4) % 3;
    if (form == 0) p = hak_aligned_alloc(al, n);
    else if (form == 1) p = hak_memalign(al, n);
    else {
      int e = hak_posix_memalign(&p, al, n);
      if (al < sizeof(void *)) {
        if (e != EINVAL) FAIL("posix_memalign(%zu) = %d, want EINVAL", al, e);
        return;
      }
      if (e) FAIL("posix_memalign(%zu, %zu) = %d", al, n, e);
    }
    if (!p) FAIL("aligned allocation (%zu, %zu) failed", al, n);
    accept(s, p, n, al, key, 0, "aligned");
    break;
  }
  case 4: case 5: { /* realloc */
    size_t n = pick_size(in);
    if (live_bytes + n > LIVE_MAX) return;
    if (!s->p) {
      void *p = hak_realloc(NULL, n);
      if (!p) FAIL("realloc(NULL, %zu) failed", n);
      accept(s, p, n, 0, key, 0, "realloc(NULL)");
      return;
    }
    verify(s, "realloc (before)");
    if (n == 0) { /* frees */
      live_bytes -= s->n;
      void *p = hak_realloc(s->p, 0);
      if (p) FAIL("realloc(p, 0) returned %p", p);
      note_freed(s->p, s->n);
      s->p = NULL;
      return;
    }
    slot_t old = *s;
    unsigned char *p = hak_realloc(s->p, n);
    if (!p) FAIL("realloc(%zu -> %zu) failed", old.n, n);
    if (p != old.p) note_freed(old.p, old.n);
    size_t keep = old.n < n ? old.n : n;
    if (old.zero) check_zero(p, keep, "realloc (zero prefix)");
    else check(p, old.n, keep, old.key, "realloc (prefix)");
    live_bytes -= old.n;
    s->p = NULL;
    accept(s, p, n, 0, key, 0, "realloc");
    break;
  }
  case 6: case 7: /* free (three forms) */
    if (s->p) release(s, opc >> 4);
    break;
  case 8: /* check one slot, or all */
    if (opc & 0x80) {
      for (int i = 0; i < NSLOT; i++) verify(&slots[i], "check all");
    } else {
      verify(s, "check");
    }
    break;
  case 9: { /* impossible requests fail cleanly and touch nothing */
    events++;
    size_t big = SIZE_MAX - (rd8(in) & 0x3f);
    errno = 0;
    void *p = hak_malloc(big);
    if (p || errno != ENOMEM) FAIL("malloc(%zu) = %p errno %d", big, p, errno);
    errno = 0;
    p = hak_calloc(big / 2 + 1, 2 + (opc >> 4));
    if (p || errno != ENOMEM) FAIL("calloc overflow = %p errno %d", p, errno);
    p = (void *)1;
    if (hak_posix_memalign(&p, 48, 64) != EINVAL) FAIL("posix_memalign(48) accepted");
    if (hak_posix_memalign(&p, 64, big) != ENOMEM) FAIL("posix_memalign(64, huge) != ENOMEM");
    if (s->p) {
      errno = 0;
      p = hak_realloc(s->p, big);
      if (p || errno != ENOMEM) FAIL("realloc(p, huge) = %p errno %d", p, errno);
      p = hak_reallocarray(s->p, big, 16);
      if (p) FAIL("reallocarray overflow = %p", p);
      verify(s, "after failed realloc");
    }
    break;
  }
  case 10: { /* reallocarray / valloc / pvalloc */
    if ((opc >> 4) & 1) {
      size_t a = rd8(in), b = pick_size(in) % 4097;
      if (!s->p || live_bytes + a * b > LIVE_MAX) return;
      verify(s, "reallocarray (before)");
      slot_t old = *s;
      unsigned char *p = hak_reallocarray(s->p, a, b);
      if (a * b == 0) {
        /* like realloc(p, 0): freed, NULL */
        if (p) FAIL("reallocarray(p, 0) returned %p", (void *)p);
        note_freed(old.p, old.n);
        live_bytes -= old.n;
        s->p = NULL;
        return;
      }
      if (!p) FAIL("reallocarray(%zu, %zu) failed", a, b);
      if (p != old.p) note_freed(old.p, old.n);
      size_t keep = old.n < a * b ? old.n : a * b;
      if (old.zero) check_zero(p, keep, "reallocarray (zero prefix)");
      else check(p, old.n, keep, old.key, "reallocarray (prefix)");
      live_bytes -= old.n;
      s->p = NULL;
      accept(s, p, a * b, 0, key, 0, "reallocarray");
    } else {
      if (s->p) release(s, opc >> 4);
      size_t n = pick_size(in);
      if (live_bytes + n + 8192 > LIVE_MAX) return;
      int pv = (opc >> 5) & 1;
      void *p = pv ? hak_pvalloc(n) : hak_valloc(n);
      if (!p) FAIL("%s(%zu) failed", pv ? "pvalloc" : "valloc", n);
      if (pv && hak_usable_size(p) < ((n + 4095) & ~(size_t)4095)) FAIL("pvalloc usable size");
      accept(s, p, n, 4096, key, 0, pv ? "pvalloc" : "valloc");
      s->align = 0; /* free_aligned_sized is for aligned_alloc blocks */
    }
    break;
  }
  case 12: /* a bad free: interior pointer of a live block, or a double free */
    if (bad_ops) bad_free(in, opc, s);
    break;
  case 13: /* use after free: overwrite the first word of a freed small block */
    if (bad_ops && all_checks) uaf_write(in, opc);
    break;
  default: /* 11: move a block to another slot (cross-slot frees), or collect */
    if ((opc >> 4) == 0xf) {
      hak_collect(opc & 1);
      events++;
      for (int i = 0; i < NSLOT; i++) verify(&slots[i], "after hak_collect");
    } else {
      slot_t *d = &slots[rd8(in) % NSLOT];
      if (d == s) return;
      if (d->p) release(d, opc >> 4);
      *d = *s;
      s->p = NULL;
    }
    break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  in_t in = {data, size, 0};
  unsigned steps = 0;
  while (in.i < in.n && steps++ < 4096) op(&in);
  for (int i = 0; i < NSLOT; i++)
    if (slots[i].p) release(&slots[i], i);
  memset(freed, 0, sizeof freed); /* a later input starts from scratch */
  if (live_bytes != 0) FAIL("live byte count %zu after freeing everything", live_bytes);
  return 0;
}
