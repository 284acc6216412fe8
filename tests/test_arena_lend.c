/*
 * test_arena_lend.c — small blocks that follow freed big ones take the
 * arenas' resident pages instead of faulting fresh ones in (issue 18; a
 * superslab on a region the arenas lend: large.c's large_lend_region,
 * superslab.c's ss_borrow).
 *
 * Run with HAKMEM_PURGE_DELAY_MS=1000 and HAKMEM_BACKGROUND_THREAD=0:
 * nothing goes back by time while the test looks.
 * 0. One 1 KiB block, kept: the thread's heap holds a superslab of that
 *    size's kind whose other slabs were never touched. A heap borrows
 *    when it is about to fault in such a slab, not when it maps a new
 *    superslab (heap.c's heap_take_borrowed says why); and a new
 *    superslab of any kind still has the arenas' free spans decommitted
 *    (large_answer_grow), so stdout's buffer is taken here too, before
 *    the arenas hold anything.
 * 1. 40 MiB of 300 000-byte blocks (arena blocks), written whole, then
 *    freed: the arenas hold about 40 MiB of free spans, resident.
 * 2. 16 MiB of 1 KiB blocks, written whole. Before the change the heaps
 *    mapped fresh superslabs (and the arenas' spans were decommitted):
 *    one minor fault a page, 4 096 or more. Now the superslabs lie on the
 *    arenas' resident pages: fewer than a quarter of that. The statistics
 *    walk must tell every mapped byte once (mapped_walked_bytes equals
 *    mapped_bytes: a lent region is a superslab's, not the arena's too).
 * 3. The small blocks are checked and freed, hak_collect(1) gives every
 *    superslab back (the lent ones to their arena, decommitted), and 40
 *    MiB of big blocks are allocated and checked again: the arena serves
 *    them (no new arena: mapped stays within 8 MiB of what it was).
 * Every figure is printed, on success too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define BIG 300000u
#define NBIG ((unsigned)((40 * MiB) / BIG))
#define SMALL 1024u
#define NSMALL ((unsigned)((16 * MiB) / SMALL))

static void *big[NBIG];
static void *small[NSMALL];

static long minflt(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

int main(void)
{
  int bad = 0;
  printf("test_arena_lend: %u blocks of %u bytes, then %u of %u\n", NBIG, BIG, NSMALL, SMALL);
  void *keep = malloc(SMALL);
  CHECK(keep != NULL, "malloc(%u) returned NULL", SMALL);
  memset(keep, 0x5a, SMALL);
  tu_alloc_filled(big, NBIG, BIG, 1);
  for (unsigned i = 0; i < NBIG; i++) bad += pat_check(big[i], BIG, 1 + i) != (size_t)-1;
  for (unsigned i = 0; i < NBIG; i++) free(big[i]);
  struct hak_stats st;
  tu_stats(&st);
  size_t mapped0 = st.mapped_bytes;
  printf("after the big blocks: mapped %.1f MiB, large free resident %.1f MiB\n", mapped0 / 1048576.0,
         st.rss_large_free_bytes / 1048576.0);
  CHECK(st.rss_large_free_bytes >= 32 * MiB, "large free spans %zu after 40 MiB freed", st.rss_large_free_bytes);

  long f0 = minflt();
  tu_alloc_filled(small, NSMALL, SMALL, 1u << 20);
  long faults = minflt() - f0;
  tu_stats(&st);
  printf("16 MiB of 1 KiB blocks: %ld minor faults (4096 pages), mapped %.1f MiB, walked %.1f MiB, "
         "large free resident %.1f MiB\n",
         faults, st.mapped_bytes / 1048576.0, st.mapped_walked_bytes / 1048576.0,
         st.rss_large_free_bytes / 1048576.0);
  CHECK(faults < 1024, "%ld minor faults for 16 MiB of small blocks after 40 MiB of big ones freed", faults);
  CHECK(st.mapped_walked_bytes == st.mapped_bytes, "walked %zu of %zu mapped bytes", st.mapped_walked_bytes,
        st.mapped_bytes);

  for (unsigned i = 0; i < NSMALL; i++) bad += pat_check(small[i], SMALL, (1u << 20) + i) != (size_t)-1;
  for (unsigned i = 0; i < NSMALL; i++) free(small[i]);
  hak_collect(1);
  tu_alloc_filled(big, NBIG, BIG, 7);
  for (unsigned i = 0; i < NBIG; i++) bad += pat_check(big[i], BIG, 7 + i) != (size_t)-1;
  tu_stats(&st);
  printf("big blocks again: mapped %.1f MiB (walked %.1f)\n", st.mapped_bytes / 1048576.0,
         st.mapped_walked_bytes / 1048576.0);
  CHECK(st.mapped_bytes <= mapped0 + 8 * MiB, "mapped %zu after the arena got its regions back, %zu before",
        st.mapped_bytes, mapped0);
  CHECK(st.mapped_walked_bytes == st.mapped_bytes, "walked %zu of %zu mapped bytes", st.mapped_walked_bytes,
        st.mapped_bytes);
  for (unsigned i = 0; i < NBIG; i++) free(big[i]);
  free(keep);
  CHECK(bad == 0, "%d blocks lost their pattern", bad);
  printf("PASS\n");
  return 0;
}
