/*
 * prof_impl.h — what the profiler's three files share (prof.c, the sampler
 * and its table; prof_symbol.c, naming frames; prof_dump.c, the dumps and
 * their triggers). Not for the rest of the library: its interface is prof.h.
 */
#ifndef HAK_PROF_IMPL_H
#define HAK_PROF_IMPL_H

#include "internal.h"

#include <signal.h>

#define PROF_FRAMES 24
#define PROF_CAP ((size_t)1 << 16) /* the most records the table grows to */

typedef struct prof_rec {
  uintptr_t ptr; /* 0 empty, PROF_TOMB deleted */
  size_t size, weight;
  uint32_t nframes;
  void *frames[PROF_FRAMES];
} prof_rec_t;

/* ---- prof.c ---- */
/* prof_busy (prof.h): set while this thread is inside the profiler (the
 * unwinder and the dumps may allocate: those calls are not sampled). */
/* Set by the SIGUSR2 handler (prof_dump.c); the next allocating thread
 * (or the report thread) writes the dump. */
extern volatile sig_atomic_t prof_dump_requested;
/* What the sampler asks of the dumps: the SIGUSR2 dump (numbered false) or
 * the next byte-interval dump (true). Registered by prof_table_init. */
typedef void prof_due_fn(bool numbered);
/* Maps the table; false (profiling off) if it cannot. */
bool prof_table_init(prof_due_fn *due);
bool prof_table_ready(void);
/* Calls fn on every live record under the table lock (fn must neither
 * allocate nor take another hakmem lock); returns the live count and the
 * samples dropped because the table was full. */
size_t prof_table_visit(void (*fn)(const prof_rec_t *r, void *arg), void *arg, size_t *dropped);
/* The live count now (the dumps size their aggregation by it). */
size_t prof_table_live(void);
void prof_table_fork_prepare(void);
void prof_table_fork_parent(void);
void prof_table_fork_child(void);

/* ---- prof_symbol.c ---- */
/* A frame of the allocator itself (dropped from the top of each stack). */
bool prof_frame_is_ours(void *ip);
/* ip's function name (or file+offset, or the address) into out. */
void prof_frame_name(void *ip, char *out, size_t cap);
/* Unmaps the ELF files kept between lookups (at the end of each dump). */
void prof_elf_close(void);

#endif
