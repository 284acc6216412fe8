/*
 * sizeclass.c — fills the class tables once at start-up (init.c calls
 * sc_init before the first allocation is served).
 * May call: nothing.
 */
#include "sizeclass.h"

uint8_t sc_bucket_class[HAK_DIRECT_N];
uint32_t sc_size[HAK_NCLASS];
uint16_t sc_batch[HAK_NCLASS];
uint8_t sc_bucket_lo[HAK_NCLASS], sc_bucket_hi[HAK_NCLASS];
uint8_t sc_mid_class[SC_MID_MAX >> 8];

static uint32_t sc_size_of_class(unsigned c) {
  if (c < 8) return 16u * (c + 1);
  /* Classes 28..35 are 4.5, 5, .., 8 KiB (SC_FINE_EXTRA): eight steps of
   * 512 B. */
  if (c >= 28 && c < 28 + 2 * SC_FINE_EXTRA) return 4096u + 512u * (c - 27);
  if (c >= 28 + 2 * SC_FINE_EXTRA) c -= SC_FINE_EXTRA;
  unsigned b = 7 + (c - 8) / 4, sub = (c - 8) % 4;
  return (uint32_t)((5u + sub) << (b - 2));
}

/* The smallest class holding size (tables are built once; a search). */
static unsigned sc_search(size_t size) {
  unsigned c = 0;
  while (sc_size[c] < size) c++;
  return c;
}

void sc_init(size_t refill_bytes) {
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    sc_size[c] = sc_size_of_class(c);
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
    if (sc_bucket_lo[c] > sc_bucket_hi[c]) sc_bucket_lo[c] = (uint8_t)i;
    sc_bucket_hi[c] = (uint8_t)i;
  }
  sc_bucket_class[HAK_DIRECT_N - 1] = 0; /* never used: the "not here" bucket */
  /* Bucket i holds sizes 256*i+1 .. 256*(i+1); buckets 0..3 (up to 1 KiB)
   * are never used. */
  for (unsigned i = HAK_FAST_MAX >> 8; i < (SC_MID_MAX >> 8); i++)
    sc_mid_class[i] = (uint8_t)sc_search(((size_t)i << 8) + 1);
}
