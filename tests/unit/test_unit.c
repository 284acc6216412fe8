/*
 * test_unit.c — the unit tier: hakmem's internal pieces tested through
 * their own interfaces, linked against the hak_ API core (libhakmem_api.a,
 * which leaves the process's malloc to glibc) and compiled with src/ on the
 * include path, beside the black-box tests that only see the public API.
 *
 *   test_unit [PART]   parts: sizeclass blockstart remote rflush rshrink decay
 *                      clock adopt batch populate popcount arena forklock
 *                      (default: all)
 *
 * sizeclass   every request size 1 B..1 MiB maps to the smallest class that
 *             holds it (sc_of's three tables and its arithmetic agree with a
 *             linear search of sc_size), block sizes are multiples of 16 and
 *             increasing, the waste stays within sizeclass.h's promise (24 %
 *             at 129 B, 12 % between 4 and 8 KiB, 20 % elsewhere above
 *             128 B), a power of two plus 8 B from 512 B to 4 KiB gets the
 *             17/16 class, and sc_kind follows
 *             HAK_CLASS_MEDIUM_FIRST / HAK_CLASS_BIG_FIRST; an aligned
 *             request (sc_of_aligned) gets the smallest class that holds it
 *             whose block size is a multiple of the alignment.
 * blockstart  on a real slab of every class up to 64 KiB (one live block
 *             of it, from hak_malloc), slab_is_block_start is true exactly
 *             at area + k * bsize for every 16-byte-aligned address of the
 *             slab's block area (Lemire et al.'s divisibility test against
 *             a remainder), and slab_holds exactly inside the area.
 * remote      the remote hand-shake: blocks of one slab freed by another
 *             thread reach the slab's thread_free stack (counted), and the
 *             owner's next allocations of the class take them back — after
 *             a collection, the slab's used count is what the owner holds.
 * rflush      the freeing thread's cache of remote frees (remote.h): 1023
 *             remote frees spread over 17 of another thread's slabs, none
 *             filling its batch, all wait in the cache (17 ways busy, their
 *             bytes pending: the batches' lengths, which the ways keep as
 *             the room they lost); the 1024th publishes every way
 *             (REMOTE_FLUSH_EVERY), and nothing is pending after it.
 * rshrink     the same cache with many more threads than CPUs: 8 x CPUs + 1
 *             threads holding heaps set the batch shift to REMOTE_SHIFT_MAX,
 *             and another thread's remote frees into one slab are
 *             published at the shrunk batch's last block (pending bytes
 *             grow block by block, then drop to 0); the shift is 0 again
 *             after those threads exit, and the slab's thread_free counts
 *             the published blocks.
 * decay       the purge schedule's slots (decay_register): a forced
 *             collection reaches the page owners' purges — it purges bytes
 *             (decay_stats' forced_bytes grows) and leaves the heaps with
 *             less than 1 MiB idle.
 * clock       os_clock reaches the vDSO's clock and agrees with libc's;
 *             os_idle_for, the purges' idle test: a stamp later than the
 *             pass's clock is not idle, the delay's boundary is exact.
 * batch       os_batch_add / os_batch_flush: 150 ranges of 2 pages a page
 *             apart and a run of adjacent ones (merged), more than one
 *             batch holds: after the flush every page of a range reads
 *             zero, every page between them keeps its bytes, the batch is
 *             empty, the purged bytes grew by exactly the ranges' and the
 *             madvise calls by at least 1 and at most one per range (one
 *             per batch where the kernel takes process_madvise on itself).
 * populate    the carve's populate-ahead (ss_slab_carve), in a new thread's
 *             heap: a class's first slab is not marked hot, makes no
 *             populate call, and (when clean) has no page resident past
 *             the page after its carve; a class that keeps live blocks
 *             through HEAP_WAITING_MAX slabs or more gets a hot slab,
 *             whose carve made populate calls, whose populated pages are
 *             resident (where the kernel has MADV_POPULATE_WRITE) and never
 *             reach past its last block; every block keeps its pattern.
 * popcount    hak_popcount64 (internal.h; bit slices where the target has
 *             no popcnt instruction) counts the set bits of 0, all ones,
 *             every single bit, every run of low or high ones and 100 000
 *             pseudo-random words as a bit-by-bit count does.
 * arena       the arenas' free spans (large.c), through the statistics'
 *             walk of every arena region: 4000 random steps of malloc,
 *             calloc, free and realloc (grow, shrink) of blocks of 129 KiB
 *             .. 3 MiB, 40 live at most. After every step each arena's
 *             regions tile it in address order from its descriptor, no
 *             two free regions touch (every freed span coalesced with its
 *             free neighbours), every live block lies in a block region,
 *             and each block keeps its pattern (calloc's reads zero). With
 *             every block freed each arena is its descriptor and one free
 *             span.
 * forklock    fork while another thread holds the forking thread's own
 *             heap lock (as another heap's growth purge does,
 *             heap_purge_grow's lock_try): the fork handlers wait for it,
 *             so the child finds its heap's lock free and allocates. A
 *             library whose handlers leave that lock alone (before 9b0dd43)
 *             hands the child a lock no thread there will release; the
 *             child gives up after 3 s and the part fails.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "decay.h"
#include "large.h"
#include "remote.h"
#include "heap.h"
#include "os.h"
#include "ownmap.h"
#include "sizeclass.h"
#include "superslab.h"

#include "check.h"
#include "hakmem.h"

static unsigned linear_class(size_t n)
{
  for (unsigned c = 0; c < HAK_NCLASS; c++)
    if (sc_size[c] >= n) return c;
  return HAK_NCLASS;
}

static void part_sizeclass(void)
{
  for (unsigned c = 0; c < HAK_NCLASS; c++) {
    CHECK(sc_size[c] % 16 == 0, "class %u: size %u not a multiple of 16", c, sc_size[c]);
    CHECK(c == 0 || sc_size[c] > sc_size[c - 1], "class %u: sizes not increasing", c);
    unsigned want = c >= HAK_CLASS_BIG_FIRST    ? SC_KIND_BIG
                    : c >= HAK_CLASS_WIDE_FIRST ? SC_KIND_WIDE
                    : c >= HAK_CLASS_MEDIUM_FIRST ? SC_KIND_MEDIUM
                                                  : SC_KIND_SMALL;
    CHECK(sc_kind(c) == want, "class %u: kind %u, want %u", c, sc_kind(c), want);
  }
  CHECK(sc_size[HAK_NCLASS - 1] == HAK_SMALL_MAX, "largest class %u, want %zu", sc_size[HAK_NCLASS - 1], HAK_SMALL_MAX);
  /* A power of two plus a small header (sqlite's 1032 and 4104 B page
   * buffers) gets the class at 17/16 of the power, 512 B to 2 KiB; at 4 KiB
   * the class holds a header of up to 320 B (sqlite's page cache entry,
   * 4368 B), so a block holds it with at most 48 B to spare. */
  for (size_t p2 = 512; p2 <= 4096; p2 *= 2) {
    unsigned c = sc_of(p2 + 8);
    size_t want = p2 + p2 / 16 + (p2 == 4096 ? 64 : 0);
    CHECK(sc_size[c] == want, "sc_of(%zu) gives %u B, want %zu", p2 + 8, sc_size[c], want);
  }
  CHECK(sc_size[sc_of(4368)] - 4368 <= 48, "sc_of(4368) gives %u B", sc_size[sc_of(4368)]);
  double worst = 0;
  size_t worst_n = 0;
  for (size_t n = 1; n <= HAK_SMALL_MAX; n++) {
    unsigned c = sc_of(n), l = linear_class(n);
    CHECK(c == l, "sc_of(%zu) = %u, the smallest class that holds it is %u", n, c, l);
    if (n > 8192) CHECK(sc_of_arith(n) == c, "sc_of_arith(%zu) = %u, tables say %u", n, sc_of_arith(n), c);
    if (n > 128) {
      double w = (double)(sc_size[c] - n) / sc_size[c];
      if (w > worst) worst = w, worst_n = n;
      double limit = n == 129 ? 0.25 : (n > 4096 && n <= 8192) || (n > 256 && n <= 512) ? 0.12 : 0.2;
      CHECK(w <= limit, "waste of %zu B in class %u (%u B): %.1f %%", n, c, sc_size[c], 100 * w);
    }
  }
  /* Aligned requests: the smallest class that holds the size and whose
   * block size is a multiple of the alignment (alloc_aligned's blocks are
   * then aligned), for every alignment 32 B..1 MiB and sizes around every
   * class boundary and alignment. */
  unsigned aligned_checked = 0;
  for (size_t align = 32; align <= HAK_SLAB_ALIGN_MAX; align *= 2)
    for (unsigned k = 0; k < HAK_NCLASS; k++)
      for (int d = -1; d <= 1; d++) {
        size_t sizes[2] = {(size_t)sc_size[k] + (size_t)d, align + (size_t)d};
        for (unsigned j = 0; j < 2; j++) {
          size_t n = sizes[j];
          if (n == 0 || n > HAK_SMALL_MAX) continue;
          unsigned want = linear_class(n);
          while (sc_size[want] % align != 0) want++;
          unsigned c = sc_of_aligned(n, align);
          CHECK(c == want, "sc_of_aligned(%zu, %zu) = %u (%u B), want %u (%u B)", n, align, c, sc_size[c], want, sc_size[want]);
          aligned_checked++;
        }
      }
  printf("sizeclass: %u classes, sc_of = linear search for 1..%zu B, worst waste above 128 B %.1f %% at %zu B; "
         "sc_of_aligned = linear search on %u (size, alignment) pairs\n",
         HAK_NCLASS, HAK_SMALL_MAX, 100 * worst, worst_n, aligned_checked);
}

static void part_blockstart(void)
{
  unsigned slabs = 0, foreign = 0;
  size_t probes = 0;
  /* A young heap serves the small classes from the powers of two above
   * them (heap.c, HAKMEM_YOUNG_REFILLS): 200 refills (one 4 KiB block
   * each) first, so that every class below gets a slab of its own. */
  static void *grown[200];
  for (unsigned i = 0; i < 200; i++) CHECK((grown[i] = hak_malloc(4096)) != NULL, "hak_malloc(4096)");
  for (unsigned i = 0; i < 200; i++) hak_free(grown[i]);
  for (unsigned c = 0; c < HAK_NCLASS && sc_size[c] <= 65536; c++) {
    void *p = hak_malloc(sc_size[c]);
    CHECK(p != NULL, "hak_malloc(%u)", sc_size[c]);
    unsigned shift = ownmap_get(p);
    CHECK(shift >= HAK_SMALL_SLAB_SHIFT, "block of class %u not in a slab (map %u)", c, shift);
    const slab_t *s = ss_slab_of(p, shift);
    CHECK(s->bsize == sc_size[c], "class %u: slab bsize %u", c, s->bsize);
    unsigned k = sc_kind(c);
    unsigned want = k == SC_KIND_SMALL ? HAK_SMALL_SLAB_SHIFT : k == SC_KIND_MEDIUM ? HAK_MEDIUM_SLAB_SHIFT : HAK_WIDE_SLAB_SHIFT;
    /* A class may take a warm free slab of another kind (heap.c,
     * heap_foreign_warm; the 4 KiB blocks above leave some): then the
     * slab's geometry is its superslab's, with at least two blocks. */
    CHECK(shift == ss_of(p)->slab_shift, "class %u: ownership map shift %u, superslab's %u", c, shift,
          ss_of(p)->slab_shift);
    CHECK(shift == want || (s->capacity >= 2 && (size_t)s->capacity * s->bsize <= ((size_t)1 << shift)),
          "class %u (%u B, kind %u): slab shift %u, want %u, or a slab of another kind with room (%u blocks)", c,
          sc_size[c], k, shift, want, s->capacity);
    foreign += shift != want;
    CHECK(slab_holds(s, p), "class %u: the slab does not hold its own block", c);
    const uint8_t *area = s->area;
    CHECK(!slab_holds(s, area - 16) && !slab_holds(s, area + s->span), "class %u: slab_holds past the area", c);
    for (size_t off = 0; off < s->span; off += 16, probes++) {
      int start = off % s->bsize == 0;
      CHECK(slab_is_block_start(s, area + off) == start, "class %u (bsize %u): offset %zu: block start %d, want %d", c,
            s->bsize, off, !start, start);
    }
    hak_free(p);
    slabs++;
  }
  printf("blockstart: %u slabs (%u of another kind's size), %zu addresses, slab_is_block_start = (offset %% bsize == "
         "0) on every one\n",
         slabs, foreign, probes);
}

#define RN 64
static void *r_blocks[RN];
static void *remote_free_all(void *arg)
{
  (void)arg;
  for (int i = 0; i < RN; i++) hak_free(r_blocks[i]);
  hak_collect(0); /* the freeing thread's pending batches are published */
  return NULL;
}

static void part_remote(void)
{
  const size_t sz = 48;
  for (int i = 0; i < RN; i++) {
    r_blocks[i] = hak_malloc(sz);
    CHECK(r_blocks[i] != NULL, "hak_malloc");
    memset(r_blocks[i], 0xab, sz);
  }
  const slab_t *s = ss_slab_of(r_blocks[0], ownmap_get(r_blocks[0]));
  unsigned used_before = s->used;
  CHECK(used_before >= RN / 2, "the slab holds %u used blocks", used_before);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, remote_free_all, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  /* The other thread's frees stay counted in used until the owner collects
   * them: its free path never writes the owner's fields. */
  unsigned mine = 0;
  for (int i = 0; i < RN; i++) mine += ss_slab_of(r_blocks[i], ownmap_get(r_blocks[i])) == s;
  CHECK(s->used == used_before, "used %u changed before the owner collected (was %u)", s->used, used_before);
  uint64_t tf = atomic_load_explicit(slab_tf(s), memory_order_acquire);
  printf("remote: %u of %d blocks in the first block's slab, thread_free word %#llx after the remote frees\n", mine, RN,
         (unsigned long long)tf);
  /* The owner allocates the class again: its slow path collects, and every
   * block freed remotely comes back before the slab grows. */
  void *again[RN];
  unsigned back = 0;
  for (int i = 0; i < RN; i++) {
    again[i] = hak_malloc(sz);
    CHECK(again[i] != NULL, "hak_malloc");
    for (int j = 0; j < RN; j++) back += again[i] == r_blocks[j];
  }
  CHECK(back >= mine / 2, "only %u of the %u remotely freed blocks of the slab came back to the owner", back, mine);
  for (int i = 0; i < RN; i++)
    for (int j = i + 1; j < RN; j++) CHECK(again[i] != again[j], "block %p handed out twice", again[i]);
  for (int i = 0; i < RN; i++) hak_free(again[i]);
  printf("remote: %u of them came back to the owner's next %d allocations, none twice\n", back, RN);
}

/* rflush: the owner (this thread) fills slabs of one class; the freer
 * takes RF_PER blocks of each of RF_SLABS of them, on distinct ways of its
 * cache, so that no batch reaches its room (REMOTE_BATCH blocks or
 * REMOTE_BATCH_BYTES) and no way is evicted: only the periodic flush
 * publishes them. */
#define RF_SLABS 17
#define RF_MAX 20000
static void *rf_blocks[RF_MAX];
static void *rf_pick[RF_SLABS * REMOTE_BATCH];
static unsigned rf_n;
static size_t rf_bsize;
static void *rflush_thread(void *arg)
{
  (void)arg;
  unsigned last = rf_n - 1;
  for (unsigned i = 0; i < last; i++) hak_free(rf_pick[i]);
  heap_t *h = heap_front.self;
  CHECK(h != NULL, "the freeing thread has no heap");
  size_t pending = heap_remote_pending_bytes();
  unsigned busy = (unsigned)__builtin_popcount(h->rcache.busy);
  printf("rflush: after %u remote frees, %u ways busy, %zu bytes pending\n", last, busy, pending);
  CHECK(busy == RF_SLABS, "%u ways busy after %u frees into %d slabs", busy, last, RF_SLABS);
  CHECK(pending == (size_t)last * rf_bsize, "%zu bytes pending, not %u blocks of %zu", pending, last, rf_bsize);
  hak_free(rf_pick[last]);
  pending = heap_remote_pending_bytes();
  printf("rflush: after free %u, %u ways busy, %zu bytes pending\n", rf_n, (unsigned)__builtin_popcount(h->rcache.busy),
         pending);
  CHECK(h->rcache.busy == 0 && pending == 0, "free %u (REMOTE_FLUSH_EVERY) left %zu bytes pending", rf_n, pending);
  return NULL;
}

static void part_rflush(void)
{
  const size_t sz = 256;
  CHECK(REMOTE_FLUSH_EVERY % RF_SLABS != 0, "the split below assumes a remainder");
  rf_bsize = sc_size[sc_of(sz)];
  unsigned per = REMOTE_FLUSH_EVERY / RF_SLABS + 1; /* 61: the first slabs take one more */
  CHECK((size_t)per * rf_bsize < (size_t)remote_room0((uint32_t)rf_bsize) && per < REMOTE_BATCH,
        "%u blocks of %zu B would fill a batch", per, rf_bsize);
  /* Slabs of the class until RF_SLABS with distinct ways and room for
   * per blocks each. */
  const slab_t *slab[RF_SLABS];
  unsigned ways = 0, got = 0, n = 0;
  for (; n < RF_MAX && got < RF_SLABS; n++) {
    rf_blocks[n] = hak_malloc(sz);
    CHECK(rf_blocks[n] != NULL, "hak_malloc");
    const slab_t *s = ss_slab_of(rf_blocks[n], ownmap_get(rf_blocks[n]));
    unsigned w = remote_way_of(s);
    if (s->bsize != rf_bsize || s->capacity < 2 * per || (ways >> w) & 1) continue;
    unsigned k = 0;
    for (; k < got && slab[k] != s; k++)
      ;
    if (k == got && s->carved == s->capacity && s->used == s->capacity) {
      /* a slab the owner filled: take per of its blocks */
      slab[got++] = s;
      ways |= 1u << w;
    }
  }
  CHECK(got == RF_SLABS, "only %u full slabs of %zu B on distinct ways in %u blocks", got, rf_bsize, n);
  rf_n = 0;
  unsigned take[RF_SLABS];
  for (unsigned k = 0; k < RF_SLABS; k++) take[k] = REMOTE_FLUSH_EVERY / RF_SLABS + (k < REMOTE_FLUSH_EVERY % RF_SLABS);
  for (unsigned i = 0; i < n; i++) {
    const slab_t *s = ss_slab_of(rf_blocks[i], ownmap_get(rf_blocks[i]));
    for (unsigned k = 0; k < RF_SLABS; k++)
      if (slab[k] == s && take[k] > 0) {
        take[k]--;
        rf_pick[rf_n++] = rf_blocks[i];
        rf_blocks[i] = NULL;
      }
  }
  CHECK(rf_n == REMOTE_FLUSH_EVERY, "picked %u blocks, not %d", rf_n, REMOTE_FLUSH_EVERY);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, rflush_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  for (unsigned i = 0; i < n; i++) hak_free(rf_blocks[i]);
  printf("rflush: %d blocks of %zu B from %d slabs, published at the %dth free\n", REMOTE_FLUSH_EVERY, rf_bsize,
         RF_SLABS, REMOTE_FLUSH_EVERY);
}

/* rshrink: with many more threads than CPUs the freeing thread's batches
 * shrink (remote_threads_set): 8 x CPUs + 1 threads that each took a heap
 * and wait make the shift REMOTE_SHIFT_MAX, and a batch of 256-byte blocks
 * is published at its 16th block (REMOTE_BATCH >> 2), no longer at its
 * 64th; once those threads are gone the shift is 0 again. */
#define RS_SZ 256
static pthread_barrier_t rs_bar;
static void *rs_blocks[REMOTE_BATCH + 1]; /* a shrunk batch and one more */
static unsigned rs_pending[REMOTE_BATCH];
static void *rshrink_idle(void *arg)
{
  (void)arg;
  hak_free(hak_malloc(16)); /* takes a heap */
  pthread_barrier_wait(&rs_bar); /* all heaps taken */
  pthread_barrier_wait(&rs_bar); /* the freer is done */
  return NULL;
}
static void *rshrink_free(void *arg)
{
  unsigned n = *(unsigned *)arg;
  hak_free(hak_malloc(16));
  for (unsigned i = 0; i < n; i++) {
    hak_free(rs_blocks[i]);
    rs_pending[i] = (unsigned)heap_remote_pending_bytes();
  }
  return NULL;
}
static void part_rshrink(void)
{
  unsigned cpus = os_cpu_count(), idle = 8 * cpus + 1;
  size_t bsize = sc_size[sc_of(RS_SZ)];
  unsigned batch = (unsigned)(remote_room0((uint32_t)bsize) >> REMOTE_SHIFT_MAX) / (unsigned)bsize;
  CHECK(batch >= 2 && batch < REMOTE_BATCH, "a shrunk batch of %zu B blocks holds %u", bsize, batch);
  CHECK(__atomic_load_n(&remote_batch_shift, __ATOMIC_RELAXED) == 0, "shift %u with one thread",
        remote_batch_shift);
  /* batch + 1 blocks of one slab of the main thread's */
  unsigned got = 0;
  const slab_t *s0 = NULL;
  void *spare[4 * REMOTE_BATCH];
  unsigned nspare = 0;
  while (got < batch + 1 && nspare < 4 * REMOTE_BATCH) {
    void *p = hak_malloc(RS_SZ);
    CHECK(p != NULL, "hak_malloc");
    const slab_t *s = ss_slab_of(p, ownmap_get(p));
    if (s0 == NULL) s0 = s;
    if (s == s0) rs_blocks[got++] = p;
    else spare[nspare++] = p;
  }
  CHECK(got == batch + 1, "only %u blocks of one slab", got);
  pthread_t *t = malloc((idle + 1) * sizeof *t);
  CHECK(t != NULL, "malloc");
  CHECK(pthread_barrier_init(&rs_bar, NULL, idle + 1) == 0, "barrier");
  for (unsigned i = 0; i < idle; i++) CHECK(pthread_create(&t[i], NULL, rshrink_idle, NULL) == 0, "pthread_create");
  pthread_barrier_wait(&rs_bar);
  unsigned shift = __atomic_load_n(&remote_batch_shift, __ATOMIC_RELAXED);
  CHECK(shift == REMOTE_SHIFT_MAX, "shift %u with %u threads on %u CPUs, not %u", shift, idle + 1, cpus,
        REMOTE_SHIFT_MAX);
  unsigned n = batch + 1;
  CHECK(pthread_create(&t[idle], NULL, rshrink_free, &n) == 0, "pthread_create");
  pthread_join(t[idle], NULL);
  for (unsigned i = 0; i + 1 < batch; i++)
    CHECK(rs_pending[i] == (i + 1) * bsize, "after %u remote frees %u bytes pending, not %zu", i + 1, rs_pending[i],
          (i + 1) * bsize);
  CHECK(rs_pending[batch - 1] == 0, "the batch was not published at its %uth block (%u bytes pending)", batch,
        rs_pending[batch - 1]);
  CHECK(rs_pending[batch] == bsize, "a new batch after the publish: %u bytes pending", rs_pending[batch]);
  pthread_barrier_wait(&rs_bar);
  for (unsigned i = 0; i < idle; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&rs_bar);
  free(t);
  shift = __atomic_load_n(&remote_batch_shift, __ATOMIC_RELAXED);
  CHECK(shift == 0, "shift %u after the threads exited", shift);
  uint64_t tf = atomic_load_explicit(slab_tf(s0), memory_order_acquire);
  CHECK((tf >> TF_COUNT_SHIFT) >= batch, "the slab's thread_free counts %llu blocks, not %u or more",
        (unsigned long long)(tf >> TF_COUNT_SHIFT), batch);
  for (unsigned i = 0; i < nspare; i++) hak_free(spare[i]);
  printf("rshrink: %u threads on %u CPUs: shift %u, a batch of %zu B blocks published at its %uth block; shift 0 after\n",
         idle + 1, cpus, REMOTE_SHIFT_MAX, bsize, batch);
}

/* A thread that frees blocks of a thread that exited takes their
 * superslab over (heap_adopt_on_free) while it has no free slab of that
 * kind of its own, and its next allocations reuse that memory; one that
 * has a free slab of its own leaves the superslab on the abandoned list. */
#define AN 2000
#define ASZ 64
static void *a_blocks[AN];
static void *adopt_alloc(void *arg)
{
  (void)arg;
  for (int i = 0; i < AN; i++) {
    a_blocks[i] = hak_malloc(ASZ);
    CHECK(a_blocks[i] != NULL, "hak_malloc");
    memset(a_blocks[i], i & 0xff, ASZ);
  }
  return NULL; /* the thread exits: its superslabs are abandoned */
}
typedef struct adopt_result {
  int own_first, adopted;
  unsigned reused;
  sem_t own_done, blocks_ready;
} adopt_result_t;
static void *adopt_free(void *arg)
{
  adopt_result_t *r = arg;
  /* With own_first, a slab of its own before the other thread allocates,
   * so that it comes from another superslab. */
  void *own = r->own_first ? hak_malloc(ASZ) : NULL;
  sem_post(&r->own_done);
  sem_wait(&r->blocks_ready);
  superslab_t *ss = ss_of(a_blocks[0]);
  CHECK(own == NULL || ss_of(own) != ss, "the exited thread's blocks share the freeing thread's superslab");
  for (int i = 0; i < AN; i++) {
    const unsigned char *b = a_blocks[i];
    for (int j = 0; j < ASZ; j++) CHECK(b[j] == (i & 0xff), "block %d changed before its free", i);
    hak_free(a_blocks[i]);
  }
  r->adopted = ss_heap(ss) == heap_front.self && heap_front.self != NULL;
  void *again[AN];
  r->reused = 0;
  for (int i = 0; i < AN; i++) {
    again[i] = hak_malloc(ASZ);
    CHECK(again[i] != NULL, "hak_malloc");
    memset(again[i], 0x5a, ASZ);
    r->reused += ss_of(again[i]) == ss;
  }
  for (int i = 0; i < AN; i++) hak_free(again[i]);
  hak_free(own);
  return NULL;
}

static void part_adopt(void)
{
  for (int own_first = 0; own_first < 2; own_first++) {
    pthread_t t, f;
    adopt_result_t r = {.own_first = own_first};
    sem_init(&r.own_done, 0, 0);
    sem_init(&r.blocks_ready, 0, 0);
    CHECK(pthread_create(&f, NULL, adopt_free, &r) == 0, "pthread_create");
    sem_wait(&r.own_done);
    CHECK(pthread_create(&t, NULL, adopt_alloc, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    sem_post(&r.blocks_ready);
    pthread_join(f, NULL);
    printf("adopt: a thread %s frees %d blocks of an exited thread: superslab %s, %u of its next %d blocks "
           "from it\n",
           own_first ? "with a free slab of its own" : "with no slab yet", AN,
           r.adopted ? "adopted" : "left abandoned", r.reused, AN);
    if (!own_first) {
      CHECK(r.adopted, "the freeing thread did not take the exited thread's superslab");
      CHECK(r.reused >= AN / 2, "only %u of %d blocks reused the adopted superslab", r.reused, AN);
    } else {
      CHECK(!r.adopted, "a thread with a free slab of its own took the superslab too");
    }
  }
}

static void part_decay(void)
{
  /* Idle memory: slabs of many classes emptied by their owner, then a
   * forced collection through the registered purge slots. */
  void *v[256];
  for (int i = 0; i < 256; i++) v[i] = hak_malloc((size_t)(i + 1) * 256);
  for (int i = 0; i < 256; i++) hak_free(v[i]);
  decay_stats_t before, after;
  decay_stats(&before);
  hak_collect(1);
  decay_stats(&after);
  printf("decay: heaps' idle bytes %zu before a forced collection, %zu after; %zu B purged by force\n",
         before.heap_idle_bytes, after.heap_idle_bytes, after.forced_bytes - before.forced_bytes);
  CHECK(after.forced_bytes > before.forced_bytes, "a forced collection purged nothing");
  CHECK(after.heap_idle_bytes < ((size_t)1 << 20), "%zu B idle in the heaps after a forced collection",
        after.heap_idle_bytes);
}

/* os_clock calls the vDSO's clock_gettime directly (os.c: libc's wrapper
 * costs a small process 64 KiB of resident text): it must have found it
 * wherever the kernel maps one, and agree with libc's clock. */
static void part_clock(void)
{
  if (getauxval(AT_SYSINFO_EHDR) != 0) CHECK(os_clock_direct(), "the vDSO is mapped but os_clock did not find its clock_gettime");
  struct timespec a, b, c;
  CHECK(clock_gettime(CLOCK_MONOTONIC, &a) == 0, "clock_gettime");
  CHECK(os_clock(CLOCK_MONOTONIC, &b) == 0, "os_clock(CLOCK_MONOTONIC) failed");
  CHECK(clock_gettime(CLOCK_MONOTONIC, &c) == 0, "clock_gettime");
  int64_t na = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec, nb = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec,
          nc = (int64_t)c.tv_sec * 1000000000 + c.tv_nsec;
  CHECK(na <= nb && nb <= nc, "os_clock %lld ns outside libc's %lld..%lld", (long long)nb, (long long)na, (long long)nc);
  CHECK(os_clock(CLOCK_REALTIME, &b) == 0 && b.tv_sec > 1700000000, "os_clock(CLOCK_REALTIME): %lld s", (long long)b.tv_sec);
  CHECK(os_clock((clockid_t)-1000, &b) != 0, "os_clock accepted an invalid clock");
  uint64_t ms = os_now_ms();
  CHECK(ms >= (uint64_t)na / 1000000 / 2, "os_now_ms %llu", (unsigned long long)ms);
  /* A purge pass reads its clock once; a slab freed after that carries a
   * later stamp and has not been idle at all (as a difference it wrapped
   * to centuries, and was decommitted at once). */
  CHECK(!os_idle_for(1000, 1001, 100), "a stamp after the pass's clock counted as idle");
  CHECK(!os_idle_for(1000, 1000, 1), "a stamp of now counted as idle");
  CHECK(!os_idle_for(1000, 901, 100) && os_idle_for(1000, 900, 100), "idle for the delay: the boundary");
  CHECK(os_idle_for(1000, 1000, 0), "a zero delay is met at once");
}

static unsigned slow_popcount(uint64_t x)
{
  unsigned c = 0;
  for (; x != 0; x >>= 1) c += (unsigned)(x & 1);
  return c;
}

static void part_popcount(void)
{
  CHECK(hak_popcount64(0) == 0 && hak_popcount64(~(uint64_t)0) == 64, "popcount of 0 / all ones: %u / %u",
        hak_popcount64(0), hak_popcount64(~(uint64_t)0));
  for (unsigned i = 0; i < 64; i++) {
    uint64_t bit = (uint64_t)1 << i, low = bit | (bit - 1), high = ~(bit - 1);
    CHECK(hak_popcount64(bit) == 1, "popcount of bit %u: %u", i, hak_popcount64(bit));
    CHECK(hak_popcount64(low) == i + 1 && hak_popcount64(high) == 64 - i, "popcount of runs at bit %u: %u / %u", i,
          hak_popcount64(low), hak_popcount64(high));
  }
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (unsigned i = 0; i < 100000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
    uint64_t x = i & 1 ? s : s & (s >> 3); /* dense and sparse words */
    CHECK(hak_popcount64(x) == slow_popcount(x), "popcount of %#llx: %u, bit by bit %u", (unsigned long long)x,
          hak_popcount64(x), slow_popcount(x));
  }
}

static void part_batch(void)
{
  size_t pg = os_page_size, npages = 3 * 150 + 8;
  uint8_t *m = os_map(npages * pg);
  CHECK(m != NULL, "os_map");
  memset(m, 0xAB, npages * pg);
  uint8_t want[3 * 150 + 8];
  memset(want, 0xAB, sizeof want);
  os_batch_t b;
  os_batch_init(&b);
  size_t calls0 = atomic_load(&os_stats.madvise_calls), purged0 = atomic_load(&os_stats.purged), bytes = 0;
  unsigned ranges = 0;
  for (size_t i = 0; i < 150; i++) { /* pages 3i, 3i+1 */
    os_batch_add(&b, m + 3 * i * pg, 2 * pg);
    want[3 * i] = want[3 * i + 1] = 0;
    bytes += 2 * pg;
    ranges++;
  }
  for (size_t i = 0; i < 8; i++) { /* 8 adjacent pages: one range */
    os_batch_add(&b, m + (450 + i) * pg, pg);
    want[450 + i] = 0;
    bytes += pg;
  }
  ranges++;
  os_batch_add(&b, m, 0); /* nothing */
  os_batch_flush(&b);
  CHECK(b.n == 0, "the batch is not empty after its flush (%u ranges)", b.n);
  for (size_t p = 0; p < npages; p++)
    for (size_t o = 0; o < pg; o += pg / 4)
      CHECK(m[p * pg + o] == want[p], "page %zu offset %zu reads %#x, want %#x", p, o, m[p * pg + o], want[p]);
  size_t calls = atomic_load(&os_stats.madvise_calls) - calls0, purged = atomic_load(&os_stats.purged) - purged0;
  CHECK(purged == bytes, "purged grew by %zu, the ranges hold %zu", purged, bytes);
  CHECK(calls >= 1 && calls <= ranges, "%zu madvise calls for %u ranges", calls, ranges);
  printf("batch: %u ranges (%zu KiB) given back in %zu calls\n", ranges, bytes >> 10, calls);
  os_unmap(m, npages * pg);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PN 65536
static void *p_blocks[PN];
static void *populate_thread(void *arg)
{
  (void)arg;
  size_t pg = os_page_size;
  unsigned char vec[1024];
  /* A cold class: a handful of blocks in the thread's first slab of it. */
  size_t calls0 = atomic_load(&os_stats.populate_calls);
  void *c[8];
  for (int i = 0; i < 8; i++) CHECK((c[i] = hak_malloc(96)) != NULL, "hak_malloc(96)");
  const slab_t *cs = ss_slab_of(c[0], ownmap_get(c[0]));
  CHECK(!(cs->pop_pages & SS_POP_HOT), "a class's first slab is hot (pop_pages %#x)", cs->pop_pages);
  CHECK(atomic_load(&os_stats.populate_calls) == calls0, "a cold class's carve made %zu populate calls",
        atomic_load(&os_stats.populate_calls) - calls0);
  unsigned cold_checked = 0;
  if (cs->clean) {
    uintptr_t from = (((uintptr_t)cs->area + (size_t)cs->carved * cs->bsize) & ~(pg - 1)) + 2 * pg;
    uintptr_t to = ((uintptr_t)cs->area + cs->span) & ~(pg - 1);
    if (to > from && (to - from) / pg <= sizeof vec) {
      CHECK(os_residency((void *)from, to - from, vec), "mincore");
      for (size_t i = 0; i < (to - from) / pg; i++)
        CHECK(!(vec[i] & 1), "a cold slab's page %zu past its carve is resident", i);
      cold_checked = (unsigned)((to - from) / pg);
    }
  }
  /* A hot class: live blocks through slab after slab. */
  const size_t sz = 64;
  const slab_t *hot = NULL;
  size_t n = 0;
  while (n < PN && hot == NULL) {
    p_blocks[n] = hak_malloc(sz);
    CHECK(p_blocks[n] != NULL, "hak_malloc(%zu)", sz);
    memset(p_blocks[n], (int)(n & 0xff), sz);
    const slab_t *s = ss_slab_of(p_blocks[n], ownmap_get(p_blocks[n]));
    if (s->pop_pages & SS_POP_HOT) hot = s;
    n++;
  }
  CHECK(hot != NULL, "no hot slab after %zu live blocks of %zu B", n, sz);
  size_t slabs = n * sz / ((size_t)1 << HAK_SMALL_SLAB_SHIFT);
  CHECK(slabs >= HEAP_WAITING_MAX, "a slab went hot after %zu blocks (%zu slabs)", n, slabs);
  /* Finish the carve batch the hot slab's first block came from, and more. */
  for (size_t k = 0; k < 256 && n < PN; k++, n++) {
    CHECK((p_blocks[n] = hak_malloc(sz)) != NULL, "hak_malloc");
    memset(p_blocks[n], (int)(n & 0xff), sz);
  }
  size_t calls = atomic_load(&os_stats.populate_calls) - calls0;
  CHECK(calls >= 1, "a hot slab's carve made no populate call");
  uintptr_t base = (uintptr_t)hot->area & ~(pg - 1);
  size_t pages = hot->pop_pages & ~SS_POP_HOT;
  uintptr_t last = (((uintptr_t)hot->area + (size_t)(hot->capacity - 1) * hot->bsize) & ~(pg - 1)) + pg;
  CHECK(pages >= 1 && base + pages * pg <= last, "hot slab: %zu pages populated, the area has %zu", pages,
        (size_t)(last - base) / pg);
  int pm = madvise((void *)base, pg, MADV_POPULATE_WRITE); /* the first page is the slab's: carved, no change */
  unsigned resident = 0;
  if (pm == 0) {
    CHECK(pages <= sizeof vec && os_residency((void *)base, pages * pg, vec), "mincore");
    for (size_t i = 0; i < pages; i++) resident += vec[i] & 1;
    CHECK(resident == pages, "hot slab: %u of %zu populated pages resident", resident, pages);
  }
  for (size_t i = 0; i < n; i++) {
    const unsigned char *b = p_blocks[i];
    for (size_t j = 0; j < sz; j++) CHECK(b[j] == (unsigned char)(i & 0xff), "block %zu byte %zu changed", i, j);
    hak_free(p_blocks[i]);
  }
  for (int i = 0; i < 8; i++) hak_free(c[i]);
  printf("populate: cold class no call (%u pages past its carve checked not resident); hot slab after %zu blocks "
         "(%zu slabs), %zu populate calls, %zu pages ahead%s\n",
         cold_checked, n, slabs, calls, pages, pm == 0 ? ", all resident" : " (kernel without MADV_POPULATE_WRITE: residency not checked)");
  return NULL;
}

static void part_populate(void)
{
  pthread_t t;
  CHECK(pthread_create(&t, NULL, populate_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
}

/* ---- arena ------------------------------------------------------------- */

#define AR_LIVE 40u
typedef struct {
  uint8_t *base;    /* the arena being walked (its descriptor's region) */
  uintptr_t at;     /* where its next region must start */
  int last_free;    /* the previous region was free */
  unsigned arenas, free_spans;
  void **live;
  size_t *live_in;  /* per live block: 1 once a block region held it */
} ar_walk_t;

static void ar_region(const void *p, size_t len, int kind, void *arg)
{
  ar_walk_t *w = arg;
  uintptr_t a = (uintptr_t)p;
  if (kind == LARGE_REGION_CACHED) return;
  if (kind == LARGE_REGION_META) {
    CHECK(w->base == NULL || w->at == (uintptr_t)w->base + large_arena_bytes(),
          "arena %p: regions end at +%zu, not at its end", (void *)w->base, (size_t)(w->at - (uintptr_t)w->base));
    w->base = (uint8_t *)p;
    w->at = a + len;
    w->last_free = 0;
    w->arenas++;
    return;
  }
  CHECK(w->base != NULL && a == w->at, "arena %p: a region at %p, expected %p", (void *)w->base, p, (void *)w->at);
  CHECK(len > 0 && a + len <= (uintptr_t)w->base + large_arena_bytes(), "arena %p: region %p+%zu outside it",
        (void *)w->base, p, len);
  if (kind == LARGE_REGION_FREE) {
    CHECK(!w->last_free, "arena %p: free regions touch at %p (not coalesced)", (void *)w->base, p);
    w->free_spans++;
  }
  w->last_free = kind == LARGE_REGION_FREE;
  for (unsigned i = 0; i < AR_LIVE; i++) {
    uintptr_t b = (uintptr_t)w->live[i];
    if (b == 0 || b < a || b >= a + len) continue;
    CHECK(kind != LARGE_REGION_FREE, "live block %p inside a free region %p+%zu", w->live[i], p, len);
    w->live_in[i] = 1;
  }
  w->at = a + len;
}

static void ar_check(void **live, unsigned *nfree_out)
{
  size_t in[AR_LIVE] = {0};
  ar_walk_t w = {.live = live, .live_in = in};
  large_for_each_region(ar_region, &w);
  CHECK(w.base == NULL || w.at == (uintptr_t)w.base + large_arena_bytes(), "last arena's regions end early");
  for (unsigned i = 0; i < AR_LIVE; i++)
    CHECK(live[i] == NULL || in[i], "live block %p in no block region of any arena", live[i]);
  if (nfree_out) *nfree_out = w.free_spans, nfree_out[1] = w.arenas;
}

static void ar_fill(uint8_t *p, size_t n, unsigned tag)
{
  p[0] = (uint8_t)tag;
  p[n / 2] = (uint8_t)(tag + 1);
  p[n - 1] = (uint8_t)(tag + 2);
}

static void ar_expect(const uint8_t *p, size_t n, unsigned tag, const char *what)
{
  CHECK(p[0] == (uint8_t)tag && p[n - 1] == (uint8_t)(tag + 2), "%s: block %p (%zu B) lost its pattern", what,
        (const void *)p, n);
}

static void part_arena(void)
{
  void *live[AR_LIVE] = {0};
  size_t size[AR_LIVE] = {0};
  unsigned tag[AR_LIVE] = {0};
  uint64_t r = 0x9E3779B97F4A7C15ull;
  unsigned grows_in_place = 0, steps = 20000;
  for (unsigned step = 0; step < steps; step++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    unsigned i = (unsigned)(r >> 40) % AR_LIVE, op = (unsigned)(r >> 20) % 8;
    size_t n = ((size_t)129 << 10) + (size_t)((r >> 8) % ((size_t)3 << 20));
    if (live[i] == NULL) {
      uint8_t *p = op == 0 ? hak_calloc(1, n) : hak_malloc(n);
      CHECK(p != NULL, "step %u: allocation of %zu B failed", step, n);
      if (op == 0)
        CHECK(p[0] == 0 && p[n / 2] == 0 && p[n - 1] == 0, "step %u: calloc(%zu) not zero", step, n);
      live[i] = p, size[i] = n, tag[i] = step;
      ar_fill(p, n, step);
    } else if (op < 5) {
      ar_expect(live[i], size[i], tag[i], "free");
      hak_free(live[i]);
      live[i] = NULL;
    } else {
      ar_expect(live[i], size[i], tag[i], "realloc");
      uint8_t *old = live[i];
      size_t keep = n < size[i] ? n : size[i];
      uint8_t last = old[keep - 1];
      uint8_t *p = hak_realloc(old, n);
      CHECK(p != NULL, "step %u: realloc to %zu B failed", step, n);
      CHECK(p[0] == (uint8_t)tag[i] && p[keep - 1] == last, "step %u: realloc lost the block's bytes", step);
      grows_in_place += p == old && n > size[i];
      live[i] = p, size[i] = n;
      ar_fill(p, n, tag[i]);
    }
    ar_check(live, NULL);
  }
  for (unsigned i = 0; i < AR_LIVE; i++)
    if (live[i] != NULL) {
      ar_expect(live[i], size[i], tag[i], "final free");
      hak_free(live[i]);
      live[i] = NULL;
    }
  unsigned counts[2];
  ar_check(live, counts);
  CHECK(counts[1] >= 1 && counts[0] == counts[1], "all freed: %u free spans in %u arenas, want one each", counts[0],
        counts[1]);
  CHECK(grows_in_place > 0, "no realloc grew a block in place in %u steps", steps);
  printf("arena: %u steps, %u arenas, %u grown in place, every walk tiled and coalesced\n", steps, counts[1],
         grows_in_place);
}

typedef struct {
  heap_t *h;
  sem_t held;
} forklock_arg_t;

static void *forklock_holder(void *arg) {
  forklock_arg_t *a = arg;
  lock_acquire(&a->h->lock);
  sem_post(&a->held);
  struct timespec hold = {0, 300 * 1000000L};
  nanosleep(&hold, NULL);
  lock_release(&a->h->lock);
  return NULL;
}

static void part_forklock(void) {
  void *p = hak_malloc(64);
  CHECK(p != NULL && heap_front.self != NULL, "no heap for the main thread");
  forklock_arg_t a = {.h = heap_front.self};
  CHECK(sem_init(&a.held, 0, 0) == 0, "sem_init");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, forklock_holder, &a) == 0, "pthread_create");
  while (sem_wait(&a.held) != 0) {
  }
  uint64_t t0 = os_now_ms();
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    /* Only this thread exists here: nobody else can release the lock. */
    for (int i = 0; i < 3000; i++) {
      if (lock_try(&heap_front.self->lock)) {
        lock_release(&heap_front.self->lock);
        /* A slow path that takes the lock: a block of another kind. */
        void *q = hak_malloc(100000);
        if (q == NULL) _exit(2);
        hak_free(q);
        _exit(0);
      }
      struct timespec ms = {0, 1000000L};
      nanosleep(&ms, NULL);
    }
    _exit(1);
  }
  uint64_t forked_ms = os_now_ms() - t0;
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 1,
        "the fork child found its own heap's lock held for 3 s (held by a thread the child does not have)");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fork child failed (status %d)", st);
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  sem_destroy(&a.held);
  hak_free(p);
  printf("forklock: fork returned after %llu ms (the other thread held the heap's lock 300 ms); the child allocated\n",
         (unsigned long long)forked_ms);
}

int main(int argc, char **argv)
{
  const char *part = argc > 1 ? argv[1] : "all";
  hak_free(hak_malloc(1)); /* start-up: the class tables are filled then */
  int all = strcmp(part, "all") == 0, ran = 0;
  if (all || !strcmp(part, "sizeclass")) part_sizeclass(), ran++;
  if (all || !strcmp(part, "blockstart")) part_blockstart(), ran++;
  if (all || !strcmp(part, "remote")) part_remote(), ran++;
  if (all || !strcmp(part, "rflush")) part_rflush(), ran++;
  if (all || !strcmp(part, "rshrink")) part_rshrink(), ran++;
  if (all || !strcmp(part, "decay")) part_decay(), ran++;
  if (all || !strcmp(part, "clock")) part_clock(), ran++;
  if (all || !strcmp(part, "adopt")) part_adopt(), ran++;
  if (all || !strcmp(part, "batch")) part_batch(), ran++;
  if (all || !strcmp(part, "populate")) part_populate(), ran++;
  if (all || !strcmp(part, "popcount")) part_popcount(), ran++;
  if (all || !strcmp(part, "arena")) part_arena(), ran++;
  if (all || !strcmp(part, "forklock")) part_forklock(), ran++;
  CHECK(ran > 0, "unknown part %s", part);
  printf("test_unit %s: passed\n", part);
  return 0;
}
