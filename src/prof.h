/*
 * prof.h — sampled heap profiling (HAKMEM_PROF=1).
 *
 * Owns: the sampling decision (a per-thread byte countdown with randomised
 * gaps of mean HAKMEM_PROF_SAMPLE), the table of live sampled blocks with
 * their call stacks, and the dumps (folded stacks for flame-graph tools and
 * a plain-text top list) at exit, on SIGUSR2 and through hak_prof_dump().
 * Promises: costs nothing unless enabled — while profiling, the thread
 * fronts keep their fast paths closed so every call reaches the cold paths,
 * which call prof_alloc/prof_free; nothing here allocates from hakmem.
 * May call: os, options, libgcc's unwinder (linked statically), dladdr.
 */
#ifndef HAK_PROF_H
#define HAK_PROF_H

#include "internal.h"

void prof_init(void);
/* A block of size bytes was allocated at p (p may be NULL). */
void prof_alloc(void *p, size_t size);
/* p is being freed. */
void prof_free(void *p);

#endif
