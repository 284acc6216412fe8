/*
 * init.c — process initialisation and fork safety (see init.h).
 */
#include "init.h"
#include "decay.h"
#include "heap.h"
#include "large.h"
#include "options.h"
#include "prof.h"
#include "stats.h"
#include "os.h"
#include "ownmap.h"
#include "sizeclass.h"
#include "superslab.h"

#include <pthread.h>
#include <sched.h>

_Atomic int init_state;

/* The upper layer's hooks (init.h); NULL until registered. */
static const init_upper_t *_Atomic init_upper;
static _Atomic int init_upper_started;
/* The hooks seen by fork_prepare, so parent and child undo exactly what
 * prepare did even if a registration lands in between. */
static const init_upper_t *init_fork_upper;

/* Once both the registration and start-up are done. Both sides store
 * (seq_cst) and then load the other's flag, so at least one sees both;
 * the exchange makes it run once. */
static void init_upper_start(void) {
  const init_upper_t *u = atomic_load(&init_upper);
  if (u == NULL || atomic_load(&init_state) != 2) return;
  if (atomic_exchange(&init_upper_started, 1) == 0) u->start();
}

void init_register_upper(const init_upper_t *u) {
  atomic_store(&init_upper, u);
  init_upper_start();
}

/* fork: hold every global lock across the fork so the child inherits
 * consistent lists, then release them on both sides. In the child only the
 * forking thread exists; it holds the locks, so it may unlock them
 * (re-initialising a locked mutex would be undefined). The superslabs of
 * the other threads are abandoned in the child, as if those threads had
 * exited: blocks freed there go to the slabs' remote lists, and the
 * child's threads adopt the memory. */
static void init_fork_prepare(void) {
  /* Outermost first: the report thread's statistics lock and the
   * profiler's locks are held while the allocator's are taken (a dump
   * allocates), never the other way round. */
  init_fork_upper = atomic_load(&init_upper);
  if (init_fork_upper != NULL) init_fork_upper->fork_prepare(); /* ctl's */
  prof_fork_prepare();
  decay_fork_prepare(); /* no purge pass runs across the fork */
  heap_lock_all();
  ss_lock_all();
  large_lock_all();
  decay_fork_prepare_last();
}
static void init_fork_unlock(void) {
  large_unlock_all();
  ss_unlock_all();
  heap_unlock_all();
}
static void init_fork_parent(void) {
  init_fork_unlock();
  decay_fork_parent();
  prof_fork_parent();
  if (init_fork_upper != NULL) init_fork_upper->fork_parent();
}
static void init_fork_child(void) {
  /* Keep the forking thread's heap and the shared exit heap. */
  ss_fork_child_abandon(heap_front.self, heap_shared_exit_heap());
  heap_fork_child(heap_front.self, heap_shared_exit_heap());
  init_fork_unlock();
  decay_fork_child();
  prof_fork_child();
  if (init_fork_upper != NULL) init_fork_upper->fork_child();
}

void init_process_slow(void) {
  int expect = 0;
  if (atomic_compare_exchange_strong(&init_state, &expect, 1)) {
    os_init();
    /* Before the first block is handed out: every free-list link and free
     * mark depends on it. */
    uintptr_t secret;
    if (!os_random(&secret, sizeof secret)) secret = (uintptr_t)&secret * 0x9E3779B97F4A7C15ull ^ os_now_ms();
    if (secret != 0) ss_secret = secret;
    options_init();
    os_set_thp(opt.thp);
    /* Before the first region is mapped and its entry written. */
    os_no_huge(ownmap_table, sizeof ownmap_table);
    sc_init(opt.refill_bytes);
    prof_init();
    stats_init();
    heap_process_init();
    atomic_store(&init_state, 2); /* seq_cst: see init_upper_start */
    /* pthread_atfork may allocate: only now, when malloc works. */
    if (!opt.force_libc) pthread_atfork(init_fork_prepare, init_fork_parent, init_fork_child);
    init_upper_start(); /* the report thread, when an option asks for one (ctl.c) */
    return;
  }
  /* Another thread is initialising; it never allocates while doing so, so
   * this cannot be our own recursion. */
  while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) sched_yield();
}
