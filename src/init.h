/*
 * init.h — process start-up and fork.
 *
 * Owns: the one-time initialisation (options, classes, thread key), which
 * runs lazily inside the first call that reaches a slow path — from the
 * dynamic loader, a constructor or main alike — and the pthread_atfork
 * handlers. Promises: nothing before "ready" allocates or uses stdio;
 * concurrent first calls wait for the one initialiser.
 * May call: os, options, sizeclass, heap, superslab, large, decay, prof,
 * stats.
 */
#ifndef HAK_INIT_H
#define HAK_INIT_H

#include "internal.h"

extern _Atomic int init_state; /* 0 none, 1 running, 2 ready */

void init_process_slow(void);

HAK_INLINE void init_ensure(void) {
  if (HAK_UNLIKELY(atomic_load_explicit(&init_state, memory_order_acquire) != 2))
    init_process_slow();
}

#endif
