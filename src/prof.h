/*
 * prof.h — sampled heap profiling (HAKMEM_PROF=1).
 *
 * Owns: the sampling decision (a per-thread byte countdown with
 * exponentially distributed gaps of mean HAKMEM_PROF_SAMPLE), the table of
 * live sampled blocks with their call stacks, and the dumps: PATH.heap
 * (gperftools' heap-profile text, read by pprof), PATH.folded (flame-graph
 * input) and PATH.txt (top list), at exit, on SIGUSR2, through
 * hak_prof_dump()/hak_ctl, and periodically (PATH.NNNN.heap, by bytes
 * allocated or by time). Promises: costs nothing unless enabled; while
 * profiling, the fast paths stay open: every block they hand out comes in
 * a batch a refill announced with prof_batch, sampled blocks come from a
 * profiling heap whose frees reach prof_free; nothing here
 * allocates from hakmem; fork leaves every profiler lock free in the
 * child (prof_fork_*). Three files: prof.c (sampler, stack capture,
 * table), prof_symbol.c (frame names), prof_dump.c (start-up, dumps and
 * their triggers, fork hooks). May call: os, options, stats (report fd),
 * libgcc's unwinder (linked statically), dladdr, the ELF files of the
 * process (read-only, to name static functions).
 */
#ifndef HAK_PROF_H
#define HAK_PROF_H

#include "internal.h"

/* prof_dump.c: maps the table, installs SIGUSR2 (HAKMEM_PROF only). */
void prof_init(void);
/* A block of size bytes was allocated at p (p may be NULL). */
void prof_alloc(void *p, size_t size);
/* p is being freed. */
void prof_free(void *p);
/* A refill hands the fast path a batch that serves `bytes`: they count as
 * allocated. Returns how many of them come before the allocation the
 * sampler picked (the caller stops the batch there and sends that
 * allocation to prof_alloc), or UINT64_MAX if no sample falls inside. */
uint64_t prof_batch(size_t bytes);

/* The sampler's state that prof_batch_fits reads (prof.c's, written only
 * there): the calling thread's countdown, in bytes, to its next sample
 * (0 before its first batch, so that one reaches prof_batch, which starts
 * it); set while the thread is inside the profiler (its own allocations
 * are not counted); hak_ctl "prof.active". */
extern HAK_TLS int64_t prof_left;
extern HAK_TLS int prof_busy;
extern _Atomic bool prof_active_flag;
/* prof_batch's common answer inline, for the batches' refill: if no
 * sample falls inside `bytes`, count them and say so; otherwise count
 * nothing and return false (prof_batch then decides). */
HAK_INLINE bool prof_batch_fits(size_t bytes) {
  if (HAK_LIKELY((int64_t)bytes < prof_left && !prof_busy &&
                 atomic_load_explicit(&prof_active_flag, memory_order_relaxed))) {
    prof_left -= (int64_t)bytes;
    return true;
  }
  return false;
}

/* hak_ctl "prof.active": while off, no new sample is taken (frees still
 * retire old ones). EPERM unless HAKMEM_PROF was set at start-up: the
 * thread fronts were opened without the profiler and stay so. */
int prof_set_active(bool on);
bool prof_is_active(void);
/* hak_ctl "prof.sample": the mean gap from the next sample on. */
int prof_set_sample(size_t mean);
/* The report thread (ctl.c), about every 50 ms: time-based dumps. */
void prof_tick(uint64_t now_ms);
/* Dumps written to PATH.NNNN.heap so far (the next NNNN). */
uint64_t prof_dumps_numbered(void);
/* Statistics' residency walk (stats.c): the profiler's own mappings. */
void prof_for_each_meta(void (*fn)(const void *p, size_t len, void *arg), void *arg);
/* fork (init.c): prepare takes the profiler's locks (before the
 * allocator's: a dump allocates while holding its lock), parent and child
 * release them. */
void prof_fork_prepare(void);
void prof_fork_parent(void);
void prof_fork_child(void);

#endif
