/*
 * decay.h — returning idle memory to the OS by time, and the background
 * purge thread.
 *
 * Owns: the purge schedule shared by every component that holds idle
 * memory (heaps' free slabs, abandoned superslabs, large arenas and the
 * mapping cache), the optional background thread (HAKMEM_BACKGROUND_THREAD)
 * and the decay statistics.
 * Promises: memory is decommitted only once it has been idle for
 * HAKMEM_PURGE_DELAY_MS, never because of how much was freed, so a steady
 * state makes no purge at all (a heap about to map a new superslab first
 * gives back every heap's free slabs, and its own whole free pages of
 * classes it stopped allocating, idle for a quarter of the delay:
 * heap_purge_grow, heap_cool_grow; that is growth, not a steady state;
 * and the heaps and the arenas answer each other's growth the same way:
 * decay_note_grow).
 * With the background thread, an idle program's memory goes back without
 * any allocator call: the thread starts once DECAY_BG_MAPPED_BYTES are
 * mapped or a component holds DECAY_BG_START_BYTES idle (small programs
 * never get one), sleeps until the earliest idle memory is due (passes at
 * least an eighth of the delay apart, so memory goes back at most that
 * late), and with nothing idle sleeps until something is; it ends when it
 * is the process's last thread (so it never keeps a process alive whose
 * other threads ended with pthread_exit) or when too little is mapped. It
 * stops at exit, and a fork child gets its own on demand.
 * The thread is created only at a safe point of an allocation (decay_poll:
 * no allocator lock held, no structure mid-update), because pthread_create
 * allocates; never in a free, because glibc frees a dead thread's TLS
 * while it holds the lock of its stack cache, which pthread_create takes
 * (a Python test_threading run hung there). It is asked for when enough
 * memory is first mapped (decay_register), so it runs before the frees
 * come, and it stays while the program runs.
 * A leaf below the page owners: it calls none of them by name. Each owner
 * registers its purge entry point in its own slot (decay_register: heap.c
 * at process start, superslab.c and large.c when they first map memory,
 * since before that they hold nothing to purge), and every pass and
 * collection runs the slots in their fixed order.
 * May call: os, options (and the registered callbacks).
 */
#ifndef HAK_DECAY_H
#define HAK_DECAY_H

#include "internal.h"

/* Idle memory in one place past which the background thread is started. */
#define DECAY_BG_START_BYTES ((size_t)4 << 20)
/* Address space mapped past which it is started at once (decay_register). */
#define DECAY_BG_MAPPED_BYTES ((size_t)16 << 20)

extern _Atomic int decay_want_start;

/* A component now holds idle_bytes of resident idle memory: asks for the
 * thread (started by the next decay_poll) or wakes a sleeping one. Cold;
 * may be called with allocator locks held. */
void decay_note_idle(size_t idle_bytes);
/* The same, for idle memory published under a lock that every pass takes
 * and waits for (large.c's group locks and cache lock): that lock orders
 * the thread's announcement of its wait against the caller, so the
 * sequentially consistent fence decay_note_idle needs is left out. It was
 * an mfence on every free of a big block: 5 % of mid_mt_64k_1m's samples. */
void decay_note_idle_locked(size_t idle_bytes);
/* A thread with a heap is exiting (its heap's teardown): the thread looks
 * whether it is the last one left. */
void decay_note_thread_exit(void);
/* Bytes a purge decommitted (counted as collected while decay_collect_all
 * runs, as decayed otherwise). */
void decay_count(size_t bytes);
/* Bytes a thread about to map new memory gave back before their purge
 * delay: counted in decayed (even during an explicit collection) and,
 * apart, as grow bytes. */
void decay_count_grow(size_t bytes);
/* A purge found a heap busy (its owner held the lock). */
void decay_note_contended(void);

void decay_start(void) HAK_NOINLINE;
/* At a safe point of an allocation or a thread's exit, never in a free:
 * start the thread if it was asked for. */
HAK_INLINE void decay_poll(void) {
  if (HAK_UNLIKELY(atomic_load_explicit(&decay_want_start, memory_order_relaxed) == 1)) decay_start();
}

/* A page owner's purge: decommit what has been idle for the purge delay
 * (everything if force; blocking: wait for a busy lock rather than skip),
 * lower *next_due (if not NULL) to when its next idle memory is due, and
 * return the bytes to count as purged here (0 if it counts them itself). */
typedef size_t (*decay_purge_fn)(uint64_t now_ms, bool force, bool blocking, uint64_t *next_due);
/* The slots, in the order every pass and collection runs them. */
enum decay_slot {
  DECAY_HEAPS,     /* heap.c: every heap's idle slabs */
  DECAY_ABANDONED, /* superslab.c: the abandoned superslabs */
  DECAY_LARGE,     /* large.c: arenas and the mapping cache */
  DECAY_SS_CACHE,  /* superslab.c: the empty-superslab cache (force only) */
  DECAY_SLOTS
};
/* Set slot's purge (idempotent; cold, any thread). */
void decay_register(enum decay_slot slot, decay_purge_fn fn);
/* A page owner's answer to another owner's growth: decommit its free
 * memory that the growing owner's fresh pages would duplicate (its own
 * rules say which and how old), returning the bytes to count as grow
 * bytes (0 if it counts them itself). The heaps and the arenas are two
 * pools: a program that frees one phase's small blocks and then takes big
 * ones (or the reverse) held both phases at once, since neither pool's
 * growth looked at the other (16-byte blocks then 200 000-byte ones: 252
 * MiB for 100 MiB live; tcmalloc 160). */
typedef size_t (*decay_grow_fn)(uint64_t now_ms);
/* Set slot's answer to growth (idempotent; cold, any thread). */
void decay_register_grow(enum decay_slot slot, decay_grow_fn fn);
/* An owner besides the heaps has registered an answer: until then the
 * heaps' growth has nobody to tell, and a process that never maps an arena
 * never runs decay_note_grow (its code lies with the cold text, which such
 * a process must not touch: test_footprint). */
extern _Atomic bool decay_grow_armed;
/* The owner in slot self is about to fault fresh pages in: every other
 * registered owner's answer runs. Cold. A caller may hold its own owner's
 * locks (heap_take_cold holds its heap's): every answer only tries the
 * locks it needs and passes over what is busy. */
void decay_note_grow(enum decay_slot self, uint64_t now_ms);
/* The regret both answers keep (heap_purge_grow's per heap, the arenas'
 * for their spans): lost, what another owner's growth decommitted; back,
 * how much of it the owner faulted in again since. Past min lost, the
 * owner spares its young memory once half came back and stops sparing it
 * once less than a quarter did; in between, spare stays as it was. */
HAK_INLINE bool decay_regret_spare(uint32_t lost, uint32_t back, uint32_t min, bool spare) {
  if (lost < min) return spare;
  if (back * 2 >= lost) return true;
  return back * 4 < lost ? false : spare;
}
/* A regret's lost count grows by add; past span both counts halve, so the
 * regret follows what the owner did lately, not over its whole life. */
HAK_INLINE void decay_regret_lose(uint32_t *lost, uint32_t *back, uint32_t add, uint32_t span) {
  *lost += add;
  if (*lost > span) {
    *lost /= 2;
    *back /= 2;
  }
}
/* The idle-bytes report for decay_stats (heap.c). */
void decay_register_idle(size_t (*idle_bytes)(size_t *max_one, size_t *count));

/* Purge everything idle in every component now (hak_collect, malloc_trim,
 * and alloc.c's one retry when out of memory). */
size_t decay_collect_all(bool force);

typedef struct decay_stats {
  size_t running, passes, decayed_bytes, forced_bytes, contended, grow_bytes;
  size_t heap_idle_bytes, heap_idle_max, heap_idle_heaps;
} decay_stats_t;
void decay_stats(decay_stats_t *out);

void decay_fork_prepare(void);      /* first of the fork handlers */
void decay_fork_prepare_last(void); /* last */
void decay_fork_parent(void);
void decay_fork_child(void);

#endif
