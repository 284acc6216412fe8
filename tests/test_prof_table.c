/*
 * test_prof_table.c — the profiler's live-sample table holds memory for
 * the samples live now, not for every sample the run ever took
 * (HAKMEM_PROF=1, started by CTest with HAKMEM_PROF_SAMPLE=32768).
 *
 * churn: a working set of 4 096 blocks replaced at random, 100 000 times
 * in each of 32 rounds; round r draws sizes from its own 256-byte band
 * (16 B..8 KiB over the run), so the samples (about 400 000) land at
 * tens of thousands of addresses while under a thousand are live at a
 * time. The metadata the statistics report (rss_metadata_bytes, which
 * holds the table and its filter) may grow by at most 2 MiB over the loop:
 * a table of 64 K records touched page by page is 14 MiB (13 MiB of growth
 * before the table followed the live samples).
 * spike: at prof.sample=1 every allocation is sampled: 30 000 held blocks
 * must all be in a dump (the table grows without losing one); once they
 * are freed a dump counts only the working set's samples and the metadata
 * is back under the same bound (the table shrank).
 * mt: see mt_thread. No timing.
 *
 *   test_prof_table DIR   (dumps go to DIR/t0 .. DIR/t3)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define BOUND (2 * MiB)
#define W 4096
#define ROUNDS 32
#define SPIKE 30000

static size_t meta(void) {
  struct hak_stats st;
  tu_stats(&st);
  return st.rss_metadata_bytes;
}

/* The sample count of DIR/name.heap's header line. */
static long dump_samples(const char *dir, const char *name) {
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
  CHECK(hak_prof_dump(prefix) == 0, "hak_prof_dump(%s)", prefix);
  long n = tu_heap_samples(prefix);
  CHECK(n >= 0, "%s.heap: no header", prefix);
  return n;
}

static void *set[W];
static void *spike[SPIKE];

/* mt: two threads, each in 24 rounds, hold 2 000 blocks of a size it has
 * not used before (fresh blocks come in refills, where the sampler looks:
 * at prof.sample=1 each is sampled) and free them, half of them the other
 * thread's: the table grows and shrinks, its filter is rewritten, while
 * the other thread's frees read the filter without the lock. Not one free
 * may be missed: afterwards a dump counts no more samples than before. */
#define MT_SET 2000
#define MT_ROUNDS 24
static void *mt_set[2][MT_SET];
static pthread_barrier_t mt_bar;
static void *mt_thread(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  void **mine = mt_set[t], **theirs = mt_set[t ^ 1];
  for (unsigned r = 0; r < MT_ROUNDS; r++) {
    size_t n = 80 + (size_t)(2 * r + t) * 48;
    for (unsigned i = 0; i < MT_SET; i++) {
      mine[i] = malloc(n);
      CHECK(mine[i] != NULL, "malloc");
    }
    pthread_barrier_wait(&mt_bar);
    for (unsigned i = 0; i < MT_SET; i++) free(i & 1 ? theirs[i] : mine[i]);
    pthread_barrier_wait(&mt_bar);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  bool on = false;
  size_t l = sizeof on;
  CHECK(hak_ctl("opt.prof", &on, &l, NULL, 0) == 0, "opt.prof");
  if (!on) {
    printf("test_prof_table: HAKMEM_PROF is not set, nothing to check\n");
    return 0;
  }
  uint64_t seed = 42;
  for (unsigned i = 0; i < W; i++) {
    size_t n = 16 + (size_t)(splitmix64(&seed) % 256);
    set[i] = malloc(n);
    memset(set[i], 1, n < 64 ? n : 64);
  }
  size_t m0 = meta();
  /* Round r draws sizes from its own 256-byte band: each round's blocks
   * come from other size classes, so the samples land at new addresses. */
  for (unsigned r = 0; r < ROUNDS; r++) {
    for (unsigned it = 0; it < 100000; it++) {
      unsigned k = (unsigned)(splitmix64(&seed) % W);
      free(set[k]);
      size_t n = 16 + (size_t)r * 256 + (size_t)(splitmix64(&seed) % 256);
      set[k] = malloc(n);
      CHECK(set[k] != NULL, "malloc");
      *(char *)set[k] = 1;
    }
  }
  size_t m1 = meta();
  printf("churn: metadata %.1f KiB before, %.1f KiB after %u rounds of 100 000 replacements\n", m0 / 1024.0, m1 / 1024.0,
         (unsigned)ROUNDS);
  CHECK(m1 <= m0 + BOUND, "churn: metadata grew by %zu bytes (bound %zu): the sample table keeps the run's history",
        m1 - m0, BOUND);

  long base = dump_samples(dir, "t0");
  size_t one = 1, back = 0, bl = sizeof back;
  CHECK(hak_ctl("prof.sample", &back, &bl, NULL, 0) == 0, "prof.sample");
  CHECK(hak_ctl("prof.sample", NULL, NULL, &one, sizeof one) == 0, "prof.sample 1");
  /* The gap drawn at the old mean runs out first: 4 MiB allocated and
   * freed at once outrun it (it exceeds that with probability e^-128). */
  for (unsigned i = 0; i < 65536; i++) free(malloc(64));
  for (unsigned i = 0; i < SPIKE; i++) {
    spike[i] = malloc(64);
    CHECK(spike[i] != NULL, "malloc");
  }
  CHECK(hak_ctl("prof.sample", NULL, NULL, &back, sizeof back) == 0, "prof.sample back");
  long held = dump_samples(dir, "t1");
  printf("spike: %ld samples before, %ld with %d more blocks held at prof.sample=1\n", base, held, SPIKE);
  CHECK(held >= base + SPIKE, "spike: %ld samples, want at least %ld", held, base + SPIKE);
  for (unsigned i = 0; i < SPIKE; i++) free(spike[i]);
  long after = dump_samples(dir, "t2");
  size_t m2 = meta();
  printf("spike freed: %ld samples, metadata %.1f KiB\n", after, m2 / 1024.0);
  CHECK(after < held - SPIKE + 64, "spike freed: %ld samples left of %ld", after, held);
  CHECK(m2 <= m0 + BOUND, "spike freed: metadata grew by %zu bytes (bound %zu): the sample table did not shrink",
        m2 - m0, BOUND);

  CHECK(hak_ctl("prof.sample", NULL, NULL, &one, sizeof one) == 0, "prof.sample 1");
  for (unsigned i = 0; i < 65536; i++) free(malloc(64));
  CHECK(pthread_barrier_init(&mt_bar, NULL, 2) == 0, "barrier");
  size_t mm0 = 0, mm1 = 0, ml = sizeof mm0;
  CHECK(hak_ctl("stats.mmap_calls", &mm0, &ml, NULL, 0) == 0, "stats.mmap_calls");
  pthread_t th[2];
  for (unsigned t = 0; t < 2; t++) CHECK(pthread_create(&th[t], NULL, mt_thread, (void *)(uintptr_t)t) == 0, "create");
  for (unsigned t = 0; t < 2; t++) pthread_join(th[t], NULL);
  CHECK(hak_ctl("prof.sample", NULL, NULL, &back, sizeof back) == 0, "prof.sample back");
  CHECK(hak_ctl("stats.mmap_calls", &mm1, &ml, NULL, 0) == 0, "stats.mmap_calls");
  long mt = dump_samples(dir, "t3");
  printf("mt: %ld samples after two threads churned and freed everything (%zu mmap calls meanwhile)\n", mt,
         mm1 - mm0);
  CHECK(mt <= after + 16, "mt: %ld samples, %ld before: a free was missed", mt, after);
  for (unsigned i = 0; i < W; i++) free(set[i]);
  printf("test_prof_table: ok\n");
  return 0;
}
