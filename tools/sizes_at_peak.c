/*
 * sizes_at_peak.c — preloaded by tools/sizes_at_peak.py: records the sizes a
 * program asks for, so that what each allocator's rounding costs it can be
 * computed for the blocks it holds at its peak.
 *
 * Every malloc, calloc, realloc, reallocarray, posix_memalign, aligned_alloc
 * and memalign is passed on to the next allocator (RTLD_NEXT: glibc, or whatever is
 * preloaded after this library), and each live block's requested size is
 * kept in an open-addressing table beside it. Writes, per process:
 *   SIZES_OUT.PID.peak  the peak of the live requested bytes (at exit);
 *   SIZES_OUT.PID.hist  with SIZES_AT=N: when the live requested bytes first
 *                       reach N, lines "size count" of the live blocks then.
 * The driver runs the program twice: once for the peak, once with SIZES_AT
 * just under it. One lock serialises the table: a program runs slower,
 * not differently (a multi-threaded program's interleaving may differ, so
 * its second run may not reach the first run's peak, and writes no .hist).
 * No stdio and no allocation of its own after start-up: the histogram is
 * built in mmap'd memory and written with write().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *(*next_malloc)(size_t), (*next_free)(void *), *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t), *(*next_aligned)(size_t, size_t), *(*next_memalign)(size_t, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);

/* dlsym may allocate before next_calloc is known: from here, never freed. */
static char boot[1 << 16] __attribute__((aligned(16)));
static size_t boot_used;
static int resolving;

#define TABLE_SLOTS ((size_t)1 << 25) /* 32 M live blocks; untouched slots cost no memory */
#define HIST_MAX ((size_t)1 << 24)    /* sizes above are counted as this one */
typedef struct {
  uintptr_t p; /* 0: empty */
  size_t n;
} slot_t;
static slot_t *table;
static atomic_flag table_lock = ATOMIC_FLAG_INIT;
static size_t live, peak, target;
static int dumped;
static char out_prefix[240];

static void resolve(void) {
  if (next_malloc != NULL || resolving) return;
  resolving = 1;
  next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  next_aligned = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  next_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  next_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  void *t = mmap(NULL, sizeof(slot_t) * TABLE_SLOTS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  table = t == MAP_FAILED ? NULL : t;
  const char *at = getenv("SIZES_AT"), *out = getenv("SIZES_OUT");
  target = at != NULL ? strtoull(at, NULL, 10) : 0;
  snprintf(out_prefix, sizeof out_prefix, "%s.%d", out != NULL ? out : "sizes", (int)getpid());
  resolving = 0;
}

static size_t slot_of(uintptr_t p) { return (size_t)(((p >> 4) * 0x9E3779B97F4A7C15ull) >> 39) & (TABLE_SLOTS - 1); }

static void lock(void) {
  while (atomic_flag_test_and_set_explicit(&table_lock, memory_order_acquire)) {
  }
}
static void unlock(void) { atomic_flag_clear_explicit(&table_lock, memory_order_release); }

static void put_u64(int fd, char *b, size_t *k, uint64_t v, char end) {
  char d[24];
  int n = 0;
  do d[n++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (n > 0) b[(*k)++] = d[--n];
  b[(*k)++] = end;
  if (*k > 4000) {
    if (write(fd, b, *k) < 0) {
    }
    *k = 0;
  }
}

/* Under the lock. */
static void dump_histogram(void) {
  uint64_t *hist = mmap(NULL, sizeof(uint64_t) * (HIST_MAX + 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (hist == MAP_FAILED) return;
  for (size_t i = 0; i < TABLE_SLOTS; i++)
    if (table[i].p != 0) hist[table[i].n > HIST_MAX ? HIST_MAX : table[i].n]++;
  char path[260], b[4096 + 64];
  snprintf(path, sizeof path, "%s.hist", out_prefix);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    size_t k = 0;
    for (size_t s = 0; s <= HIST_MAX; s++)
      if (hist[s] != 0) {
        put_u64(fd, b, &k, s, ' ');
        put_u64(fd, b, &k, hist[s], '\n');
      }
    if (k != 0 && write(fd, b, k) < 0) {
    }
    close(fd);
  }
  munmap(hist, sizeof(uint64_t) * (HIST_MAX + 1));
}

static void note_alloc(void *p, size_t n) {
  if (p == NULL || table == NULL) return;
  lock();
  size_t i = slot_of((uintptr_t)p);
  while (table[i].p != 0) i = (i + 1) & (TABLE_SLOTS - 1);
  table[i] = (slot_t){(uintptr_t)p, n};
  live += n;
  if (live > peak) peak = live;
  if (target != 0 && !dumped && live >= target) {
    dumped = 1;
    dump_histogram();
  }
  unlock();
}

/* Returns the size p was recorded with (0 if it was not). */
static size_t note_free(void *p) {
  if (p == NULL || table == NULL) return 0;
  size_t n = 0;
  lock();
  size_t i = slot_of((uintptr_t)p);
  while (table[i].p != 0 && table[i].p != (uintptr_t)p) i = (i + 1) & (TABLE_SLOTS - 1);
  if (table[i].p != 0) {
    n = table[i].n;
    live -= n;
    table[i].p = 0;
    /* Linear probing's deletion: move back every later entry of the run
     * whose home slot does not lie cyclically in (i, j]. */
    for (size_t j = (i + 1) & (TABLE_SLOTS - 1); table[j].p != 0; j = (j + 1) & (TABLE_SLOTS - 1)) {
      size_t h = slot_of(table[j].p);
      bool stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
      if (!stays) {
        table[i] = table[j];
        table[j].p = 0;
        i = j;
      }
    }
  }
  unlock();
  return n;
}

static void *boot_alloc(size_t n) {
  size_t at = boot_used;
  boot_used += (n + 15) & ~(size_t)15;
  return boot_used <= sizeof boot ? boot + at : NULL;
}
static bool in_boot(const void *p) { return (const char *)p >= boot && (const char *)p < boot + sizeof boot; }

void *malloc(size_t n) {
  resolve();
  if (next_malloc == NULL) return boot_alloc(n);
  void *p = next_malloc(n);
  note_alloc(p, n);
  return p;
}

void *calloc(size_t a, size_t b) {
  resolve();
  if (next_calloc == NULL) return boot_alloc(a * b); /* static memory is zero */
  void *p = next_calloc(a, b);
  note_alloc(p, a * b);
  return p;
}

void free(void *p) {
  if (p == NULL || in_boot(p)) return;
  resolve();
  note_free(p);
  next_free(p);
}

void *realloc(void *p, size_t n) {
  resolve();
  if (p != NULL && in_boot(p)) {
    void *q = malloc(n);
    if (q != NULL) memcpy(q, p, n); /* a boot block is never larger than the boot area */
    return q;
  }
  size_t old = note_free(p);
  void *q = next_realloc(p, n);
  if (q != NULL) note_alloc(q, n);
  else if (p != NULL && n != 0) note_alloc(p, old); /* failed: p stays as it was */
  return q;
}

/* glibc's reallocarray calls its own realloc, past this library: here it
 * goes through ours, so that the block it returns is known. */
void *reallocarray(void *p, size_t a, size_t b) {
  size_t n;
  if (__builtin_mul_overflow(a, b, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
  resolve();
  int r = next_posix_memalign(out, align, n);
  if (r == 0) note_alloc(*out, n);
  return r;
}

void *aligned_alloc(size_t align, size_t n) {
  resolve();
  void *p = next_aligned(align, n);
  note_alloc(p, n);
  return p;
}

void *memalign(size_t align, size_t n) {
  resolve();
  void *p = next_memalign(align, n);
  note_alloc(p, n);
  return p;
}

__attribute__((destructor)) static void write_peak(void) {
  if (out_prefix[0] == 0) return;
  char path[260], b[64];
  snprintf(path, sizeof path, "%s.peak", out_prefix);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t k = 0;
  put_u64(fd, b, &k, peak, '\n');
  if (write(fd, b, k) < 0) {
  }
  close(fd);
}
