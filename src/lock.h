/*
 * lock.h — the allocator's mutex for short critical sections that are
 * seldom contended: a heap's lock, the superslab lists' and the shared
 * heaps' locks, the large arenas' group locks and the mapping cache's.
 *
 * Owns: nothing at run time. Promises: lock_acquire/lock_release order
 * memory like a mutex (acquire on taking, release on giving back, so
 * ThreadSanitizer sees the happens-before through the atomics); a waiter
 * sleeps in the kernel (futex), never spins; an uncontended pair is one
 * compare-exchange and one exchange. LOCK_INIT is all zero, so a lock in
 * zeroed memory is a free lock. May call: lock.c (the waits and wakes).
 *
 * Why not pthread_mutex_t: glibc's lock and unlock cost 31 and 26
 * instructions uncontended (type dispatch, owner and count bookkeeping),
 * and an arena block's malloc and free take a group lock each. Under
 * cachegrind, bench_mid_large_mt's 1-thread form with 64 KiB..1 MiB
 * blocks went from 450 to 405 instructions an operation with this lock,
 * thread_churn 1.5 % and batch_mix 1 % fewer (their refills and emptied
 * slabs take the heap's lock); random mixed's hit paths take none.
 * The waiting protocol is the three-state one of Drepper's "Futexes Are
 * Tricky" (0 free, 1 held, 2 held with possible waiters): unlock enters
 * the kernel only when someone may sleep. A spinning mutex was measured
 * for the arenas before and lost (docs/performance.md), so a waiter does
 * not spin. No recursion, no owner check: no caller takes a lock it holds.
 */
#ifndef HAK_LOCK_H
#define HAK_LOCK_H

#include "internal.h"

typedef struct hak_lock {
  _Atomic uint32_t state; /* 0 free, 1 held, 2 held and a thread may wait */
} hak_lock_t;
#define LOCK_INIT {0}

/* A new lock, or one a thread that no longer exists held (fork's child). */
static inline void lock_init(hak_lock_t *l) { atomic_store_explicit(&l->state, 0, memory_order_relaxed); }

void lock_wait(hak_lock_t *l); /* contended acquire: returns holding l */
void lock_wake(hak_lock_t *l); /* wakes one waiter */

/* true: taken. Never waits. */
static inline bool lock_try(hak_lock_t *l) {
  uint32_t free_ = 0;
  return atomic_compare_exchange_strong_explicit(&l->state, &free_, 1, memory_order_acquire, memory_order_relaxed);
}

static inline void lock_acquire(hak_lock_t *l) {
  if (HAK_LIKELY(lock_try(l))) return;
  lock_wait(l);
}

static inline void lock_release(hak_lock_t *l) {
  if (HAK_UNLIKELY(atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2)) lock_wake(l);
}

#endif
