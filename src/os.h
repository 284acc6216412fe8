/*
 * os.h — the only door to the kernel's memory calls.
 *
 * Owns: every mmap, munmap, mremap and madvise hakmem makes, the page size,
 * the monotonic clock and raw writes to stderr (never stdio, which may
 * allocate). Promises: functions return NULL / false on failure and never
 * allocate; counters of calls and bytes are kept here (cold path only).
 * May call: libc system-call wrappers.
 */
#ifndef HAK_OS_H
#define HAK_OS_H

#include "internal.h"

#include <sys/uio.h>
#include <time.h>

typedef struct os_stats {
  _Atomic size_t mapped;        /* bytes currently mapped */
  _Atomic size_t mapped_peak;
  _Atomic size_t mmap_calls;
  _Atomic size_t munmap_calls;
  _Atomic size_t madvise_calls;
  _Atomic size_t mremap_calls;
  _Atomic size_t purged;        /* bytes handed back with madvise */
  _Atomic size_t populate_calls; /* os_populate's madvise calls (not in madvise_calls) */
} os_stats_t;

extern os_stats_t os_stats;
extern size_t os_page_size;

void os_init(void);
/* The CPUs this process may run on (its affinity at the first call), >= 1. */
unsigned os_cpu_count(void);
/* RAM and swap: the most the kernel could ever back (SIZE_MAX if it
 * cannot say). One system call; for failure paths. */
size_t os_backable_bytes(void);
/* Transparent huge pages for aligned regions (values as HAKMEM_THP's). */
enum { OS_THP_DEFAULT = 0, OS_THP_ALWAYS = 1, OS_THP_NEVER = 2 };
void os_set_thp(int mode);
/* MADV_NOHUGEPAGE on hakmem's own sparse tables (the ownership map), and
 * on os_map's mappings of 2 MiB or more, whatever HAKMEM_THP says: a
 * table touched a word here and there must not fault 2 MiB in per touch
 * where the kernel's setting is `always`. p page-aligned. */
void os_no_huge(void *p, size_t size);
/* Anonymous read-write mapping of size bytes (page multiple). */
void *os_map(size_t size);
/* Mapping of size bytes whose base is a multiple of align (power of two,
 * >= page size). */
void *os_map_aligned(size_t size, size_t align);
/* The same for one block of the program (a dedicated mapping), without
 * the MAP_NORESERVE that os_map and os_map_aligned pass: the kernel's
 * overcommit policy judges it as it judges glibc's mmap of a big block.
 * Reserved, malloc(30 GiB) on a 24 GiB machine without swap succeeded and
 * the program met the OOM killer at its first touch, where glibc and
 * tcmalloc return NULL with ENOMEM (the default heuristic refuses a
 * mapping larger than RAM and swap; mode 1 never refuses; mode 2 counts
 * every mapping either way). */
void *os_map_block(size_t size, size_t align);
void os_unmap(void *p, size_t size);
/* Make pages inaccessible (guard pages of the secure build). */
void os_protect_none(void *p, size_t size);
/* Give the pages back; they read as zero when touched again. */
void os_decommit(void *p, size_t size);
/* Make pages resident and writable ahead of their first write (one call
 * instead of a fault per page; Linux 5.14, MADV_POPULATE_WRITE). A hint:
 * where the kernel refuses, the pages fault in as before. */
void os_populate(void *p, size_t size);
/* Ranges to give back together (a pass that decommits many small runs):
 * os_batch_add collects them, merging neighbours, and os_batch_flush gives
 * them all back with one process_madvise(2) on the process itself
 * (PIDFD_SELF_THREAD, Linux 6.15: no descriptor, so nothing a fork or a
 * program closing its descriptors could redirect), else with one madvise
 * each (older kernels, seccomp filters: the first refusal switches the
 * process to madvise for good). A range may be written again only after
 * the flush: the caller flushes before anything can allocate from it.
 * gc_phases.rb (real_ruby) gave back 408 MB in 26 000 runs of 2..4 pages,
 * one madvise each; 20 000 ranges of two pages took 80 ms one call each
 * and 18..37 ms in calls of 512 (2.2 to 4.5 times less per range). */
#define OS_BATCH_MAX 64
typedef struct os_batch {
  unsigned n;
  struct iovec v[OS_BATCH_MAX];
} os_batch_t;
HAK_INLINE void os_batch_init(os_batch_t *b) { b->n = 0; }
void os_batch_add(os_batch_t *b, void *p, size_t size);
void os_batch_flush(os_batch_t *b);
/* Resize a mapping without moving it. */
bool os_remap_inplace(void *p, size_t old_size, size_t new_size);
/* Move a mapping onto target (a mapping of new_size obtained from
 * os_map_aligned, which it replaces). */
bool os_remap_to(void *p, size_t old_size, size_t new_size, void *target);
uint64_t os_now_ms(void);
/* Whether what was stamped at since (os_now_ms) has been idle for delay
 * ms at now. A pass reads now once, before it looks; a thread may stamp a
 * slab or span after that, so since can be later than now: not idle. (As
 * now - since, that wrapped to an idle time of centuries, and a pass
 * decommitted memory freed a moment before, to be faulted in again.) */
static inline bool os_idle_for(uint64_t now, uint64_t since, uint64_t delay) {
  return since <= now && now - since >= delay;
}
/* clock_gettime (the vDSO's, called directly; the system call before
 * os_init or without one): 0, or -1 on failure (errno not set). */
int os_clock(clockid_t id, struct timespec *ts);
/* Does os_clock call the vDSO (tests)? */
bool os_clock_direct(void);
/* The calling thread's kernel id (gettid). */
uint32_t os_thread_kid(void);
/* CPU time thread kid of this process has run, in ns; false if there is no
 * such thread in this process (it exited). */
bool os_thread_cpu_ns(uint32_t kid, uint64_t *ns);
/* Is thread kid of this process blocked in the kernel (state S in
 * /proc/self/task/kid/stat: a system call's interruptible sleep, where no
 * instruction of its own runs)? False when it runs, waits for a CPU, or
 * /proc cannot say. No allocation. */
bool os_thread_blocked(uint32_t kid);
/* A full memory barrier on every running thread of the process
 * (membarrier(2), private expedited; registered on first use). False where
 * the kernel lacks it or refuses it (seccomp): then nothing was done. */
bool os_membarrier(void);
/* True if the byte at p can be read (a mapped PROT_NONE page cannot); for
 * vetting pointers that are not ours before reading around them. */
bool os_is_readable(const void *p);
/* Which pages of [p, p + len) are resident (mincore): vec gets one byte
 * per page, bit 0 set for a resident one. p page-aligned. False (vec
 * untouched) if part of the range is not mapped. Statistics only (cold). */
bool os_residency(const void *p, size_t len, unsigned char *vec);
/* The same, counting only pages written by this process: present and
 * mapped by it alone (/proc/self/pagemap), so a page that was only read,
 * mapped to the kernel's shared zero page, which mincore calls resident,
 * is not. For tables that are read far more than written (the ownership
 * map, the profiler's). Falls back to mincore without /proc. */
bool os_residency_written(const void *p, size_t len, unsigned char *vec);
void os_write_err(const char *s);
/* "hakmem: WHAT: cannot open PATH (errno N)" on stderr, the first time
 * only for each *said (a periodic output retries every period). errno is
 * read, so call it right after the failed open. */
void os_warn_open_once(_Atomic bool *said, const char *what, const char *path);
void os_write_fd(int fd, const char *s);
/* Appends "0x..." hex of v to buf (at least 19 bytes free); returns end. */
char *os_fmt_hex(char *buf, uintptr_t v);
char *os_fmt_dec(char *buf, uint64_t v);
/* Live threads of the calling process (/proc/self/stat: a main thread
 * that ended with pthread_exit stays counted, as a zombie, until the
 * process ends; it is not counted here); 0 if it cannot be read. Cold:
 * the purge thread asks it when it has nothing to do. */
unsigned os_thread_count(void);
/* Nonzero bytes from the kernel (for keys); false if unavailable. */
bool os_random(void *buf, size_t n);

#endif
