/*
 * init.h — process start-up and fork.
 *
 * Owns: the one-time initialisation (options, classes, thread key), which
 * runs lazily inside the first call that reaches a slow path — from the
 * dynamic loader, a constructor or main alike — and the pthread_atfork
 * handlers. Promises: nothing before "ready" allocates or uses stdio;
 * concurrent first calls wait for the one initialiser.
 * May call: os, options, sizeclass, heap, superslab, large, decay, prof,
 * stats. The layer above (ctl.c: the report thread and its lock)
 * registers its start-up and fork hooks here (init_register_upper) rather
 * than being called by name, so no call runs from here up to ctl.
 */
#ifndef HAK_INIT_H
#define HAK_INIT_H

#include "internal.h"

extern _Atomic int init_state; /* 0 none, 1 running, 2 ready */

void init_process_slow(void);

/* The hooks of the one upper-layer client (ctl.c, registered by api.c's
 * constructor, which every link of the library contains). start runs once,
 * as soon as both the registration and start-up are done, whichever comes
 * last (so a program that allocates before constructors run loses
 * nothing). At fork, fork_prepare runs first of all, before the
 * profiler's and the allocator's locks are taken, and fork_parent /
 * fork_child last, after theirs are released: it is the outermost lock. */
typedef struct init_upper {
  void (*start)(void);
  void (*fork_prepare)(void);
  void (*fork_parent)(void);
  void (*fork_child)(void);
} init_upper_t;
void init_register_upper(const init_upper_t *u);

HAK_INLINE void init_ensure(void) {
  if (HAK_UNLIKELY(atomic_load_explicit(&init_state, memory_order_acquire) != 2))
    init_process_slow();
}

#endif
