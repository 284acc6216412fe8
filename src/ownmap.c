/*
 * ownmap.c — storage of the ownership map (see ownmap.h). Zero-initialised
 * BSS: the kernel maps its pages lazily, so only regions hakmem has used
 * cost memory (one 4 KiB page per 2 GiB of address space).
 */
#include "ownmap.h"

/* Page-aligned, after the small globals (HAK_BSS_BIG): its pages are its
 * own, and the statistics count them alone. */
__attribute__((aligned(4096))) HAK_BSS_BIG uint64_t ownmap_table[(size_t)1 << HAK_OWNMAP_BITS];
