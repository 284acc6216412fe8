/*
 * test_annotate.c — the program that valgrind's memcheck (hakmem built with
 * HAKMEM_MEMCHECK) and AddressSanitizer (hakmem built with
 * HAKMEM_ASAN_POISON) run in tests/test_annotate.sh.
 *
 *   clean       every entry point, churn through the free lists, blocks
 *               freed by other threads, large blocks: the tool must stay
 *               silent (no false report from hakmem's own accesses)
 *   uaf-read    reads a freed small block            (tool must report)
 *   uaf-write   writes a freed small block           (tool must report)
 *   uaf-remote  reads a block another thread freed   (tool must report)
 *   uaf-large   reads a freed large (2 MiB) block    (tool must report)
 *   uaf-realloc reads the old block after realloc moved it (must report)
 *   double-free frees a block twice (memcheck must report an invalid free)
 *   leak        loses a block (memcheck's leak check must report it)
 *
 * Built with USE_HAK_API against libhakmem_api copies, or with the standard
 * names against an annotated libhakmem.a.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Hide a pointer's provenance so the compiler keeps every access. */
static void *launder(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

static void touch(unsigned char *p, size_t n, unsigned char v) {
  memset(p, v, n);
}

/* Branches on every byte: memcheck reports undefined contents here. */
static void expect(const unsigned char *p, size_t n, unsigned char v, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) {
      fprintf(stderr, "test_annotate: %s: byte %zu is %u, not %u\n", what, i, p[i], v);
      exit(2);
    }
}

#define NSLOT 512
static void churn(unsigned seed) {
  rng_t r;
  rng_seed(&r, seed);
  unsigned char *slot[NSLOT] = {0};
  size_t len[NSLOT] = {0};
  for (int i = 0; i < 20000; i++) {
    unsigned k = (unsigned)(rng_next(&r) % NSLOT);
    if (slot[k]) {
      expect(slot[k], len[k], (unsigned char)k, "churn");
      free(slot[k]);
      slot[k] = NULL;
    } else {
      uint64_t x = rng_next(&r);
      len[k] = (x % 8 == 0) ? 1 + x % 40000 : 1 + x % 600;
      slot[k] = malloc(len[k]);
      touch(slot[k], len[k], (unsigned char)k);
    }
  }
  for (unsigned k = 0; k < NSLOT; k++) free(slot[k]);
}

/* Producer/consumer: blocks allocated here are freed by the other thread. */
#define NPASS 4000
static unsigned char *passed[NPASS];
static void *consumer(void *arg) {
  (void)arg;
  for (int i = 0; i < NPASS; i++) {
    expect(passed[i], 24 + (size_t)i % 200, (unsigned char)i, "remote");
    free(passed[i]);
  }
  churn(7); /* reuses what came back from the other thread */
  return NULL;
}

static void clean(void) {
  churn(1);
  /* calloc: defined zeroes, also on recycled blocks */
  for (int i = 0; i < 100; i++) {
    unsigned char *a = malloc(100);
    touch(a, 100, 0xAB);
    free(a);
    unsigned char *c = calloc(10, 10);
    expect(c, 100, 0, "calloc");
    free(c);
  }
  unsigned char *big = calloc(1, 3u << 20);
  expect(big, 3u << 20, 0, "calloc large");
  free(big);
  /* realloc keeps the contents when it grows, shrinks and moves */
  unsigned char *p = malloc(10);
  touch(p, 10, 7);
  for (size_t n = 16; n < (4u << 20); n = n * 3 + 5) {
    p = realloc(p, n);
    expect(p, 10, 7, "realloc grow");
  }
  p = realloc(p, 10);
  expect(p, 10, 7, "realloc shrink");
  free(p);
  p = reallocarray(NULL, 4, 8);
  touch(p, 32, 1);
  free(p);
  /* aligned forms, sized frees */
  void *q = aligned_alloc(256, 1000);
  touch(q, 1000, 3);
  free_sized(q, 1000);
  q = memalign(64, 100);
  touch(q, 100, 3);
  free_aligned_sized(q, 64, 100);
  if (posix_memalign(&q, 4096, 5000) != 0) exit(2);
  touch(q, 5000, 3);
  free(q);
  q = valloc(100);
  touch(q, 100, 3);
  free(q);
  q = aligned_alloc(1u << 22, 10);
  touch(q, 10, 3);
  free(q);
  size_t u;
  q = malloc(20);
  u = malloc_usable_size(q);
  touch(q, u, 4); /* the whole usable size is the program's */
  free(q);
  /* cross-thread frees */
  for (int i = 0; i < NPASS; i++) {
    passed[i] = malloc(24 + (size_t)i % 200);
    touch(passed[i], 24 + (size_t)i % 200, (unsigned char)i);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, consumer, NULL) != 0) exit(2);
  churn(3);
  pthread_join(t, NULL);
  churn(5); /* the main thread takes its remote-freed blocks back */
  hak_collect(1);
}

static unsigned char *remote_victim;
static void *remote_free_it(void *arg) {
  (void)arg;
  free(remote_victim);
  return NULL;
}

/* The lost block: its address is left in no register or stack slot. */
static __attribute__((noinline)) void leak_one(void) {
  unsigned char *p = malloc(777);
  touch(p, 777, 9);
  launder(p);
}
static __attribute__((noinline)) void scrub_stack(void) {
  volatile unsigned char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "clean";
  volatile unsigned char sink;
  if (strcmp(mode, "clean") == 0) {
    clean();
  } else if (strcmp(mode, "uaf-read") == 0) {
    unsigned char *p = malloc(48);
    touch(p, 48, 1);
    free(p);
    sink = ((unsigned char *)launder(p))[16];
  } else if (strcmp(mode, "uaf-write") == 0) {
    unsigned char *p = malloc(48);
    free(p);
    ((unsigned char *)launder(p))[20] = 5;
  } else if (strcmp(mode, "uaf-remote") == 0) {
    remote_victim = malloc(100);
    touch(remote_victim, 100, 1);
    pthread_t t;
    if (pthread_create(&t, NULL, remote_free_it, NULL) != 0) return 2;
    pthread_join(t, NULL);
    sink = ((unsigned char *)launder(remote_victim))[40];
  } else if (strcmp(mode, "uaf-large") == 0) {
    unsigned char *p = malloc(2u << 20);
    touch(p, 2u << 20, 1);
    free(p);
    sink = ((unsigned char *)launder(p))[12345];
  } else if (strcmp(mode, "uaf-realloc") == 0) {
    unsigned char *p = malloc(32);
    touch(p, 32, 1);
    unsigned char *q = realloc(p, 5000);
    sink = ((unsigned char *)launder(p))[8];
    free(q);
  } else if (strcmp(mode, "double-free") == 0) {
    unsigned char *p = malloc(64);
    free(p);
    free(launder(p)); /* memcheck reports, then hakmem's own check aborts */
  } else if (strcmp(mode, "leak") == 0) {
    /* Not the first block of its slab: the slab descriptor points at that
     * one, and memcheck counts it reachable (docs/debugging.md). */
    void *first = malloc(777);
    leak_one();
    scrub_stack();
    clean(); /* and nothing else lost */
    free(first);
  } else {
    fprintf(stderr, "test_annotate: unknown mode %s\n", mode);
    return 2;
  }
  (void)sink;
  printf("test_annotate %s: done\n", mode);
  return 0;
}
