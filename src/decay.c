/*
 * decay.c — the purge schedule and the background purge thread (see
 * decay.h). The idea of a purge delay rather than a byte budget follows
 * mimalloc's purge delay and jemalloc's decay: what is freed and reused
 * within the window never touches the kernel.
 */
#include "decay.h"
#include "options.h"
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

/* 0: not wanted yet, 1: wanted (start at the next safe point), 2: started,
 * 3: never (option off, or the thread could not be created). */
_Atomic int decay_want_start;

static pthread_mutex_t decay_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t decay_cv;
static pthread_mutex_t decay_pass_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t decay_thread;  /* valid while decay_running */
static bool decay_running, decay_stop_flag, decay_atexit_done;
static _Atomic int decay_idle_wait; /* the thread waits with nothing idle */
static _Atomic size_t decay_passes, decay_bytes, decay_forced, decay_contended, decay_grow;
static _Atomic unsigned decay_exits; /* thread exits seen (decay_note_thread_exit) */

/* False while no thread runs yet: then asks for one if idle_bytes is
 * enough, and there is nobody to wake. */
static bool decay_note_started(size_t idle_bytes) {
  int st = atomic_load_explicit(&decay_want_start, memory_order_relaxed);
  if (st == 0) {
    if (idle_bytes >= DECAY_BG_START_BYTES && opt.background_thread) {
      int expect = 0;
      atomic_compare_exchange_strong(&decay_want_start, &expect, 1);
    }
    return false;
  }
  return true;
}

/* Wakes the thread if it waits with nothing idle. */
static void decay_wake_idle(void) {
  if (atomic_load_explicit(&decay_idle_wait, memory_order_relaxed)) {
    pthread_mutex_lock(&decay_mu);
    if (atomic_exchange_explicit(&decay_idle_wait, 0, memory_order_relaxed)) pthread_cond_signal(&decay_cv);
    pthread_mutex_unlock(&decay_mu);
  }
}

void decay_note_idle(size_t idle_bytes) {
  if (!decay_note_started(idle_bytes)) return;
  /* Pairs with the thread's fence after arming decay_idle_wait: either it
   * sees the caller's new idle memory in its last pass, or we see it
   * waiting. */
  atomic_thread_fence(memory_order_seq_cst);
  decay_wake_idle();
}

/* The thread stores decay_idle_wait before the pass that takes the
 * caller's lock; if that pass held the lock before the caller, its unlock
 * makes the store visible here; if after, the pass saw the memory. Only a
 * pass that skipped the owner's slot (not yet registered) escapes this:
 * decay_register covers it. */
void decay_note_idle_locked(size_t idle_bytes) {
  if (decay_note_started(idle_bytes)) decay_wake_idle();
}

/* Set while decay_collect_all runs (under the pass lock). */
static _Atomic bool decay_collecting;

void decay_count(size_t bytes) {
  if (bytes == 0) return;
  bool forced = atomic_load_explicit(&decay_collecting, memory_order_relaxed);
  atomic_fetch_add_explicit(forced ? &decay_forced : &decay_bytes, bytes, memory_order_relaxed);
}

/* Always decayed, never collected: the growing thread gives these back on
 * its own account, even while another thread's explicit collection runs
 * (decay_collecting is process-wide), so grow bytes stay a part of
 * decay_bytes. */
void decay_count_grow(size_t bytes) {
  if (bytes == 0) return;
  atomic_fetch_add_explicit(&decay_bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&decay_grow, bytes, memory_order_relaxed);
}

void decay_note_thread_exit(void) {
  atomic_fetch_add_explicit(&decay_exits, 1, memory_order_relaxed);
  /* Pairs with the thread's fence after arming decay_idle_wait. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&decay_idle_wait, memory_order_relaxed)) {
    pthread_mutex_lock(&decay_mu);
    pthread_cond_signal(&decay_cv);
    pthread_mutex_unlock(&decay_mu);
  }
}

void decay_note_contended(void) { atomic_fetch_add_explicit(&decay_contended, 1, memory_order_relaxed); }

/* The page owners' purges, registered by the owners themselves so that
 * decay calls up no layer by name (an empty slot: nothing mapped there
 * yet). */
static _Atomic decay_purge_fn decay_slots[DECAY_SLOTS];
static size_t (*_Atomic decay_idle_fn)(size_t *, size_t *);

/* Is there enough mapped that the thread should be (or stay) running?
 * Memory can become idle only once it has been mapped; a program that
 * maps one superslab of each kind (12 MiB of address space, most of it
 * never touched) gets none. */
static bool decay_mapped_enough(void) {
  return atomic_load_explicit(&os_stats.mapped, memory_order_relaxed) >= DECAY_BG_MAPPED_BYTES;
}

void decay_register(enum decay_slot slot, decay_purge_fn fn) {
  if (atomic_load_explicit(&decay_slots[slot], memory_order_relaxed) != fn) {
    atomic_store_explicit(&decay_slots[slot], fn, memory_order_release);
    /* A thread whose last pass found this slot empty may wait with
     * nothing idle; decay_note_idle_locked's callers then rely on the
     * slot being seen: either that pass sees it (the thread's fence after
     * arming the wait pairs with this one) or we wake the thread. */
    atomic_thread_fence(memory_order_seq_cst);
    decay_wake_idle();
  }
  /* The owners register each time they map memory: the thread is wanted
   * as soon as enough is mapped (DECAY_BG_MAPPED_BYTES), and the
   * allocation that mapped it starts it, so that it already runs when the
   * frees come (a free never starts it: see decay_poll). */
  if (decay_mapped_enough() && opt.background_thread) {
    int expect = 0;
    atomic_compare_exchange_strong(&decay_want_start, &expect, 1);
  }
}

static _Atomic decay_grow_fn decay_grow_slots[DECAY_SLOTS];
_Atomic bool decay_grow_armed;

void decay_register_grow(enum decay_slot slot, decay_grow_fn fn) {
  if (atomic_load_explicit(&decay_grow_slots[slot], memory_order_relaxed) == fn) return;
  atomic_store_explicit(&decay_grow_slots[slot], fn, memory_order_release);
  if (slot != DECAY_HEAPS) atomic_store_explicit(&decay_grow_armed, true, memory_order_relaxed);
}

HAK_TEXT_COLD void decay_note_grow(enum decay_slot self, uint64_t now_ms) {
  size_t b = 0;
  for (unsigned i = 0; i < DECAY_SLOTS; i++) {
    decay_grow_fn fn = atomic_load_explicit(&decay_grow_slots[i], memory_order_acquire);
    if (i != (unsigned)self && fn != NULL) b += fn(now_ms);
  }
  decay_count_grow(b);
}

void decay_register_idle(size_t (*idle_bytes)(size_t *, size_t *)) {
  atomic_store_explicit(&decay_idle_fn, idle_bytes, memory_order_release);
}

static size_t decay_run(uint64_t now, bool force, bool blocking, uint64_t *next) {
  size_t b = 0;
  for (unsigned i = 0; i < DECAY_SLOTS; i++) {
    decay_purge_fn fn = atomic_load_explicit(&decay_slots[i], memory_order_acquire);
    if (fn != NULL) b += fn(now, force, blocking, next);
  }
  return b;
}

/* One pass over every component; returns when the next idle memory is due
 * (UINT64_MAX: nothing idle). */
static uint64_t decay_pass(void) {
  uint64_t now = os_now_ms(), next = UINT64_MAX;
  size_t b = decay_run(now, false, false, &next);
  decay_count(b);
  atomic_fetch_add_explicit(&decay_passes, 1, memory_order_relaxed);
  return next;
}

static void decay_wait_until(uint64_t due_ms) {
  struct timespec ts;
  os_clock(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  uint64_t ms = due_ms > now ? due_ms - now : 1;
  if (ms > 3600000) ms = 3600000;
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(&decay_cv, &decay_mu, &ts);
}

/* With nothing idle the thread sleeps until memory becomes idle
 * (decay_note_idle) or a thread exits (decay_note_thread_exit), and looks
 * at least every DECAY_IDLE_CHECK_MS. It must not outlive the program's
 * threads: glibc ends a process when its last thread ends, and a process
 * whose threads all end with pthread_exit would otherwise live on for this
 * one alone. So it ends when it is the process's only thread (checked
 * DECAY_EXIT_CHECK_MS after a thread exit, when the exiting thread is
 * gone), or when too little is mapped for it to be wanted; the next
 * allocation that maps enough starts a new one. It does not end merely
 * because nothing was idle for a while: it can be started only by an
 * allocation (decay_poll), so a program that frees its memory and then
 * makes no call would keep what it freed. */
#define DECAY_IDLE_CHECK_MS 10000
#define DECAY_EXIT_CHECK_MS 100
static uint64_t decay_now_ms(void) {
  struct timespec ts;
  os_clock(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *decay_main(void *arg) {
  (void)arg;
#if defined(__GLIBC__)
  pthread_setname_np(pthread_self(), "hakmem-purge");
#endif
  bool armed = false;
  /* Unequal to any count: the first quiet spell looks at the threads soon
   * (a thread's exit may have started this one: decay_poll at its end). */
  unsigned exits_seen = atomic_load_explicit(&decay_exits, memory_order_relaxed) - 1;
  pthread_mutex_lock(&decay_mu);
  decay_thread = pthread_self();
  while (!decay_stop_flag) {
    pthread_mutex_unlock(&decay_mu);
    pthread_mutex_lock(&decay_pass_lock);
    uint64_t started = decay_now_ms();
    uint64_t next = decay_pass();
    pthread_mutex_unlock(&decay_pass_lock);
    pthread_mutex_lock(&decay_mu);
    if (decay_stop_flag) break;
    if (next != UINT64_MAX) {
      /* Passes come at least the heaps' idle gap apart. Each busy heap
       * with blocks on its delayed list asks for a look a gap after its
       * own last one, so with 16 threads the asks fell 1-4 ms apart and
       * the thread woke 400-560 times in a 0.8 s run of real_perl_16t (97
       * under ed51ee3), each wake-up taking a core from a program thread
       * on a 2-core machine: 0.85-0.88 s against 0.77. Passes a gap apart
       * see every heap due within one gap, and idle memory goes back at
       * most a gap late. */
      uint64_t earliest = started + opt_idle_gap_ms();
      if (next < earliest) next = earliest;
      armed = false;
      atomic_store_explicit(&decay_idle_wait, 0, memory_order_relaxed);
      decay_wait_until(next);
      continue;
    }
    if (!armed) {
      /* Announce the wait, then look once more: memory freed meanwhile
       * is either seen by that pass or wakes us (decay_note_idle). */
      atomic_store_explicit(&decay_idle_wait, 1, memory_order_relaxed);
      atomic_thread_fence(memory_order_seq_cst);
      armed = true;
      continue;
    }
    armed = false;
    /* Threads that exited since the last look at the thread count (also
     * while a purge was due): look again once the exiting thread is gone. */
    uint64_t until = decay_now_ms() + DECAY_IDLE_CHECK_MS;
    unsigned pending = exits_seen;
    for (;;) {
      unsigned e = atomic_load_explicit(&decay_exits, memory_order_relaxed);
      if (e != pending) {
        pending = e;
        uint64_t soon = decay_now_ms() + DECAY_EXIT_CHECK_MS;
        if (soon < until) until = soon;
      }
      if (!atomic_load_explicit(&decay_idle_wait, memory_order_relaxed) || decay_stop_flag ||
          decay_now_ms() >= until)
        break;
      decay_wait_until(until);
    }
    if (atomic_load_explicit(&decay_idle_wait, memory_order_relaxed) && !decay_stop_flag) {
      /* Still nothing idle. Stay while the program runs other threads and
       * holds enough memory to want one; else end (the next allocation
       * that maps enough, or that finds memory idle, starts a new one). */
      exits_seen = pending; /* the exits up to here are looked at now */
      pthread_mutex_unlock(&decay_mu);
      bool stay = decay_mapped_enough() && os_thread_count() > 1;
      pthread_mutex_lock(&decay_mu);
      if (stay && !decay_stop_flag) continue;
      atomic_store_explicit(&decay_idle_wait, 0, memory_order_relaxed);
      atomic_store(&decay_want_start, 0);
      break;
    }
  }
  decay_running = false;
  pthread_cond_broadcast(&decay_cv); /* decay_stop may be waiting */
  pthread_mutex_unlock(&decay_mu);
  return NULL;
}

/* At exit: stop the thread between passes, so it never purges while the
 * process tears down. (On the thread itself — it was the last one, and
 * glibc calls exit as it returns — there is nothing to wait for.) */
static void decay_stop(void) {
  pthread_mutex_lock(&decay_mu);
  decay_stop_flag = true;
  atomic_store_explicit(&decay_idle_wait, 0, memory_order_relaxed);
  pthread_cond_broadcast(&decay_cv);
  while (decay_running && !pthread_equal(pthread_self(), decay_thread)) pthread_cond_wait(&decay_cv, &decay_mu);
  pthread_mutex_unlock(&decay_mu);
}

static void decay_cv_init(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&decay_cv, &ca);
  pthread_condattr_destroy(&ca);
}

void decay_start(void) {
  int expect = 1;
  if (!atomic_compare_exchange_strong(&decay_want_start, &expect, 2)) return;
  int saved = errno;
  static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
  pthread_once(&cv_once, decay_cv_init);
  if (!decay_atexit_done) {
    decay_atexit_done = true;
    atexit(decay_stop);
  }
  pthread_mutex_lock(&decay_mu);
  bool go = !decay_stop_flag && !decay_running; /* not while the process exits */
  if (go) decay_running = true;
  pthread_mutex_unlock(&decay_mu);
  if (!go) {
    atomic_store(&decay_want_start, 3);
    errno = saved;
    return;
  }
  /* Detached: it ends by itself (decay_main), and nobody joins it. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)256 << 10);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* The thread handles no signals of the program's. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int rc = pthread_create(&t, &attr, decay_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    pthread_mutex_lock(&decay_mu);
    decay_running = false;
    pthread_mutex_unlock(&decay_mu);
    atomic_store(&decay_want_start, 3);
  }
  errno = saved;
}

size_t decay_collect_all(bool force) {
  /* Under the pass lock: it waits for heap locks, and fork must not find
   * another thread's lock held by it (the fork handlers take the pass lock
   * first). */
  pthread_mutex_lock(&decay_pass_lock);
  atomic_store_explicit(&decay_collecting, true, memory_order_relaxed);
  uint64_t now = os_now_ms();
  size_t b = decay_run(now, force, true, NULL);
  decay_count(b);
  atomic_store_explicit(&decay_collecting, false, memory_order_relaxed);
  pthread_mutex_unlock(&decay_pass_lock);
  return b;
}

void decay_stats(decay_stats_t *out) {
  pthread_mutex_lock(&decay_mu);
  out->running = decay_running;
  pthread_mutex_unlock(&decay_mu);
  out->passes = atomic_load_explicit(&decay_passes, memory_order_relaxed);
  out->decayed_bytes = atomic_load_explicit(&decay_bytes, memory_order_relaxed);
  out->forced_bytes = atomic_load_explicit(&decay_forced, memory_order_relaxed);
  out->contended = atomic_load_explicit(&decay_contended, memory_order_relaxed);
  out->grow_bytes = atomic_load_explicit(&decay_grow, memory_order_relaxed);
  size_t (*idle)(size_t *, size_t *) = atomic_load_explicit(&decay_idle_fn, memory_order_acquire);
  out->heap_idle_max = out->heap_idle_heaps = 0;
  out->heap_idle_bytes = idle != NULL ? idle(&out->heap_idle_max, &out->heap_idle_heaps) : 0;
}

/* fork: no pass or collection runs across it (pass lock, taken first);
 * decay_mu is taken last, since decay_note_idle takes it under heap locks.
 * The child has no thread, and gets one again when it has idle memory. */
void decay_fork_prepare(void) { pthread_mutex_lock(&decay_pass_lock); }
void decay_fork_prepare_last(void) { pthread_mutex_lock(&decay_mu); }
void decay_fork_parent(void) {
  pthread_mutex_unlock(&decay_mu);
  pthread_mutex_unlock(&decay_pass_lock);
}
void decay_fork_child(void) {
  decay_running = false;
  atomic_store(&decay_idle_wait, 0);
  int st = atomic_load(&decay_want_start);
  if (st == 2 || st == 1) atomic_store(&decay_want_start, 0);
  /* The child maps nothing new to want one: want it now if enough is. */
  if (st != 3 && decay_mapped_enough() && opt.background_thread) atomic_store(&decay_want_start, 1);
  decay_cv_init(); /* nobody waits on it here */
  pthread_mutex_unlock(&decay_mu);
  pthread_mutex_unlock(&decay_pass_lock);
}
