/*
 * sizeclass.c — fills the class tables once at start-up (init.c calls
 * sc_init before the first allocation is served).
 * May call: nothing.
 */
#include "sizeclass.h"

uint8_t sc_bucket_class[HAK_DIRECT_N];
uint32_t sc_size[HAK_NCLASS];
uint16_t sc_batch[HAK_NCLASS];
uint16_t sc_bucket_lo[HAK_NCLASS], sc_bucket_hi[HAK_NCLASS];
uint8_t sc_mid_class[SC_MID_MAX >> SC_MID_SHIFT];
uint8_t sc_pow2_class[SC_POW2_LG_MAX + 1];

static void sc_put(unsigned *n, uint32_t size) {
  if (*n < HAK_NCLASS) sc_size[*n] = size;
  (*n)++;
}

/* Fills sc_size in increasing order; returns how many classes it made. */
static unsigned sc_fill_sizes(void) {
  unsigned n = 0;
  for (uint32_t sz = 16; sz <= 128; sz += 16) sc_put(&n, sz);
  for (uint32_t p = 128; p < HAK_SMALL_MAX; p *= 2) {
    /* a power of two and a header; 4 KiB's header room is 320 B, not 256:
     * sqlite's page cache entry (a 4 KiB page and its 272 B of headers) */
    if (p >= 512 && p <= 4096) sc_put(&n, p + p / 16 + (p == 4096 ? 64 : 0));
    for (uint32_t k = 1, steps = p == 256 ? 8 : p == 4096 ? 8 : 4; k <= steps; k++) sc_put(&n, p + p / steps * k);
  }
  return n;
}

/* The smallest class holding size (tables are built once; a search). */
static unsigned sc_search(size_t size) {
  unsigned c = 0;
  while (sc_size[c] < size) c++;
  return c;
}

void sc_init(size_t refill_bytes) {
  unsigned made = sc_fill_sizes();
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    /* A refill carves about one page (at least one block, at most 256):
     * linking the blocks touches their memory, so a bigger batch would
     * fault in pages the program may never use. */
    uint32_t n = (uint32_t)(refill_bytes / sc_size[c]);
    sc_batch[c] = (uint16_t)(n < 1 ? 1 : n > 256 ? 256 : n);
    sc_bucket_lo[c] = 1;
    sc_bucket_hi[c] = 0;
  }
  for (unsigned i = 0; i < HAK_DIRECT_N - 1; i++) {
    size_t size = (size_t)i * 16; /* largest size falling in bucket i */
    unsigned c = i == 0 ? 0 : sc_search(size);
    sc_bucket_class[i] = (uint8_t)c;
    if (sc_bucket_lo[c] > sc_bucket_hi[c]) sc_bucket_lo[c] = (uint16_t)i;
    sc_bucket_hi[c] = (uint16_t)i;
  }
  sc_bucket_class[HAK_DIRECT_N - 1] = 0; /* never used: the "not here" bucket */
  /* Bucket i holds sizes 64*i+1 .. 64*(i+1); those up to HAK_FAST_MAX
   * (the 16 B table's sizes) are never used. */
  for (unsigned i = HAK_FAST_MAX >> SC_MID_SHIFT; i < (SC_MID_MAX >> SC_MID_SHIFT); i++)
    sc_mid_class[i] = (uint8_t)sc_search(((size_t)i << SC_MID_SHIFT) + 1);
  for (unsigned lg = 4; lg <= SC_POW2_LG_MAX; lg++) sc_pow2_class[lg] = (uint8_t)sc_search((size_t)1 << lg);
  /* The constants of sizeclass.h describe this table: a mismatch is a
   * build that would hand out blocks of the wrong size. */
  if (made != HAK_NCLASS || sc_size[HAK_CLASS_MEDIUM_FIRST] != 2560 || sc_size[HAK_CLASS_WIDE_FIRST] != 8192 || sc_size[HAK_CLASS_BIG_FIRST] != 81920 ||
      sc_size[SC_OCTAVE_13] != 10240 || sc_size[HAK_NCLASS - 1] != HAK_SMALL_MAX ||
      ((size_t)1 << SC_POW2_LG_MAX) != HAK_SLAB_ALIGN_MAX || sc_size[sc_pow2_class[SC_POW2_LG_MAX]] != HAK_SLAB_ALIGN_MAX)
    __builtin_trap();
}
