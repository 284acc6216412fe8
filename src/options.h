/*
 * options.h — the configuration snapshot.
 *
 * Owns: the list of every HAKMEM_* option (OPTIONS_LIST below, the one
 * place an option is declared) and the snapshot opt, read once at process
 * start-up. Promises: opt is filled before any allocation is served;
 * HAKMEM_PRESET sets a documented group of values first and explicit
 * variables override it; an invalid or out-of-range value is reported once
 * on stderr and the default kept. Nothing on a hot path reads options.
 * Afterwards opt changes only through hak_ctl (ctl.c), for the few options
 * documented as writable, which cold paths re-read. docs/options.md is
 * generated from the list (options_doc) and a test checks it is current.
 * May call: os (stderr only). Never allocates (environ is scanned directly).
 */
#ifndef HAK_OPTIONS_H
#define HAK_OPTIONS_H

#include "internal.h"

/* Choice options store the index of the word in their choices string, so
 * these enums follow the order of those strings in OPTIONS_LIST. */
enum { HAK_ON_ERROR_ABORT = 0, HAK_ON_ERROR_WARN = 1, HAK_ON_ERROR_IGNORE = 2 };
enum { HAK_THP_DEFAULT = 0, HAK_THP_ALWAYS = 1, HAK_THP_NEVER = 2 };
enum { HAK_PRESET_BALANCED = 0, HAK_PRESET_FAST = 1, HAK_PRESET_LOWMEM = 2 };
enum { HAK_SIG_OFF = 0, HAK_SIG_USR1 = 1, HAK_SIG_HUP = 2, HAK_SIG_WINCH = 3 };

/*
 * X(NAME, field, KIND, C type, default, choices, min, max, unset, help)
 *   NAME   the variable without its HAKMEM_ prefix
 *   KIND   BOOL, UINT (uint64_t), SIZE (size_t, K/M/G suffixes), CHOICE
 *          (int index into choices, '|'-separated) or STR (const char *)
 *   choices  CHOICE only, "" for the others
 *   min..max  the accepted range of UINT and SIZE
 *   unset  STR only: what a NULL default means, for the documentation
 *          ("" for the others)
 * The documented default is formatted from the C default, so the page and
 * the code cannot disagree. Row order is the order of docs/options.md and
 * of the HAKMEM_VERBOSE listing.
 */
#define OPTIONS_LIST(X)                                                                                     \
  X(FORCE_LIBC_ALLOC, force_libc, BOOL, bool, false, "", 0, 0, "",                                          \
    "Forward every allocation call to the C library's allocator (same-binary A/B comparison). "             \
    "Checked before hakmem touches any of its own state.")                                                  \
  X(PRESET, preset, CHOICE, int, HAK_PRESET_BALANCED, "balanced|fast|lowmem", 0, 0, "",                     \
    "Preset of the options below, applied first; variables set explicitly override it. "                    \
    "`fast`: PURGE_DELAY_MS=1000, LARGE_CACHE=1G, REFILL_BYTES=16K, SS_CACHE=32, BORROW_CLASSES=0. "        \
    "`lowmem`: PURGE_DELAY_MS=1, LARGE_CACHE=4M, REFILL_BYTES=4K, SS_CACHE=0, THP=never, "                  \
    "BORROW_CLASSES=4. "                                                                                    \
    "`HAKMEM_PROFILE`, its former name, is still accepted (with a notice on stderr).")                      \
  X(PURGE_DELAY_MS, purge_delay_ms, UINT, uint64_t, 100, "", 0, 3600000, "",                                \
    "The decay window: milliseconds a free slab, superslab, arena span or cached mapping stays "            \
    "committed (reused warm, with no page fault) before it is returned to the OS "                          \
    "(madvise/munmap); so do the whole free pages of a slab in use that nothing was allocated from "      \
    "(a class gone quiet; the owner thread gives them back at its next allocator call after that); "      \
    "free blocks of 16 KiB and more in a slab in use give back their pages past the first after a "      \
    "quarter to a half of it. "                                                                             \
    "When a thread is about to map a new superslab, free slabs and such pages idle for a quarter of the "  \
    "window go back first. The slabs and the arenas answer each other's growth: before the arenas "        \
    "fault fresh pages in, every heap's free slabs go back (at most once a quarter of the window), and "   \
    "before a heap takes a slab with no resident pages, free arena spans do (at most once a millisecond), "  \
    "so a program that changes from small blocks to big ones or back does not hold both; a pool that "    \
    "takes back what these cost it (phases that alternate) keeps the whole window. Free slabs of exited threads (and those given away by idle ones) that new "    \
    "threads passed over wait a quarter of it while more than 2 MiB of them waits. "                        \
    "Memory goes back only once idle, never because of how much was freed; "                                \
    "`hak_collect(1)` and `malloc_trim(0)` return everything idle at once. "                                \
    "Changeable at run time: `hak_ctl(\"opt.purge_delay_ms\", ...)`.")                                      \
  X(BACKGROUND_THREAD, background_thread, BOOL, bool, true, "", 0, 0, "",                                   \
    "A background thread that purges idle memory once PURGE_DELAY_MS has passed, so a program "             \
    "that frees a lot and then makes no allocator call still gives it back. Started only the "              \
    "first time 4 MiB or more is idle in one place (small programs never get one); it sleeps "              \
    "without waking while nothing is idle, and stops at exit. 0: idle memory is purged only "               \
    "by allocator calls (refills, frees) and by `hak_collect`/`malloc_trim`.")                              \
  X(ON_ERROR, on_error, CHOICE, int, HAK_ON_ERROR_ABORT, "abort|warn|ignore", 0, 0, "",                     \
    "After an invalid or double free is reported: abort, warn (report and go on, the call does "            \
    "nothing) or ignore (no report).")                                                                      \
  X(LARGE_CACHE, large_cache_bytes, SIZE, size_t, (size_t)64 << 20, "", 0, (uint64_t)1 << 40, "",           \
    "Bytes of freed dedicated large mappings (blocks above 32 MiB) kept for reuse, each for at "            \
    "most PURGE_DELAY_MS: a program cycling big buffers reuses their pages instead of faulting "            \
    "fresh ones in. A freed mapping bigger than this goes back at once, as glibc's do.")                    \
  X(ARENA_MIN, arena_min, SIZE, size_t, (size_t)128 << 10, "", 8192, (uint64_t)1 << 20, "",                \
    "malloc and calloc of more than this many bytes are served from the coalescing arenas (a pool "      \
    "per CPU the process may run on, up to eight; a thread keeps the one it first took), where a "          \
    "freed block of one size serves any other; below it, from the size classes' per-thread slabs, where a freed block serves "      \
    "its own class. Blocks above 1 MiB always come from the arenas (or a mapping of their own). "           \
    "128K by default: the classes (four per power of two, no header) round 64..128 KiB closer than the "  \
    "arenas' 64 KiB granules, where a 65 KiB block takes 128 KiB (git's inflate buffers of every size: "  \
    "10 % lower peak). 65536: the arenas from 64 KiB up (16 threads cycling filled blocks of "             \
    "64 KiB..1 MiB peak 5 % lower). "                                                                       \
    "1048576: the size classes serve everything up to 1 MiB (hakmem before this option).")               \
  X(REFILL_BYTES, refill_bytes, SIZE, size_t, 4096, "", 256, (uint64_t)1 << 20, "",                         \
    "Bytes of fresh blocks a thread carves into its cache (the current slab's free list) per "              \
    "refill: larger means fewer slow-path calls, more memory touched ahead of use.")                        \
  X(SS_CACHE, ss_cache, UINT, uint64_t, 8, "", 0, 1024, "",                                                 \
    "Empty 4 MiB superslabs kept (decommitted) for reuse instead of unmapped.")                             \
  X(BORROW_CLASSES, borrow_classes, UINT, uint64_t, 2, "", 0, 8, "",                                       \
    "A medium or big size class (blocks above 2176 B) with no free block left, about to touch "           \
    "fresh or given-back pages, takes a free block of one of the next this many larger classes "          \
    "(from that class's current slab) instead: freed blocks of one size then serve the sizes just "      \
    "below it, so a program whose sizes shift holds less. 0: every class uses only its own.")             \
  X(YOUNG_REFILLS, young_refills, UINT, uint64_t, 64, "", 0, 1000000, "",                                   \
    "For a thread's first this many refills, a size class up to 512 B that has no slab of its "            \
    "own is served from the current slab of the power of two at or above it (16, 32, 64, 128, "            \
    "256 or 512 B): each class a thread touches costs it a page, so a thread holding a few blocks "        \
    "of many sizes touches 6 pages instead of 20 (64 threads of 50 blocks of 16..512 B: peak RSS "       \
    "8.7 -> 5.2 MiB, medians). The blocks are larger than asked for, at most twice. 0: every class "     \
    "uses its own slabs from the first block.")                                                            \
  X(REALLOC_ARENA, realloc_arena, SIZE, size_t, (size_t)16 << 10, "", 0, (uint64_t)1 << 20, "",              \
    "A block that realloc grows to at least this many bytes moves to the coalescing arenas of the "        \
    "large blocks (with room to grow), where later growth extends it in place into the free span "        \
    "after it and a freed one serves any size: a growing buffer no longer leaves a freed block in "       \
    "every size class it passed through. 0: only blocks above 1 MiB live there.")                         \
  X(THP, thp, CHOICE, int, HAK_THP_NEVER, "default|always|never", 0, 0, "",                                 \
    "Transparent huge pages for superslabs, arenas and big blocks' mappings: no advice (the kernel's "     \
    "setting decides), madvise MADV_HUGEPAGE, or MADV_NOHUGEPAGE. `never` by default: where the "          \
    "kernel's setting is `always`, a huge page is faulted in whole under a slab that needs a few of its " \
    "pages: a program of 2 threads that peaks at 6.7 MiB without them peaked at 43.6 MiB "                \
    "(docs/performance.md).")                                                                              \
  X(STATS, stats, BOOL, bool, false, "", 0, 0, "",                                                          \
    "Print the statistics report (docs/stats.md) on stderr at exit.")                                       \
  X(STATS_FILE, stats_file, STR, const char *, NULL, "", 0, 0, "stderr",                                    \
    "Where the reports of STATS_SIGNAL and STATS_INTERVAL_MS go (appended, one report after "               \
    "another, each opening with its `hakmem ... statistics` line).")                                        \
  X(STATS_INTERVAL_MS, stats_interval_ms, UINT, uint64_t, 0, "", 0, 86400000, "",                           \
    "Write the statistics report to STATS_FILE every this many milliseconds, from a small "                 \
    "thread started only when this or another periodic option is set. 0: never.")                          \
  X(STATS_SIGNAL, stats_signal, CHOICE, int, HAK_SIG_OFF, "off|usr1|hup|winch", 0, 0, "",                   \
    "Write the statistics report to STATS_FILE when the process receives this signal (SIGUSR1, "            \
    "SIGHUP or SIGWINCH); the handler only sets a flag, the report thread writes it within "                \
    "about 50 ms.")                                                                                         \
  X(VERBOSE, verbose, BOOL, bool, false, "", 0, 0, "",                                                      \
    "Print the build configuration and every option in force at start-up.")                                \
  X(PROF, prof, BOOL, bool, false, "", 0, 0, "",                                                            \
    "Sampled heap profiling: record the call stack of about one allocation per PROF_SAMPLE "                \
    "bytes; dump live samples by stack at exit, on SIGUSR2, or with hak_prof_dump() "                       \
    "(docs/profiling.md).")                                                                                 \
  X(PROF_SAMPLE, prof_sample, SIZE, size_t, (size_t)512 << 10, "", 1, (uint64_t)1 << 40, "",                \
    "Mean bytes allocated between two samples (randomised, exponential gaps). "                             \
    "Changeable at run time: `hak_ctl(\"prof.sample\", ...)`.")                                             \
  X(PROF_LEAKS, prof_leaks, BOOL, bool, false, "", 0, 0, "",                                                \
    "At exit, report the sampled allocations still live, by stack (implies PROF).")                         \
  X(PROF_FILE, prof_file, STR, const char *, NULL, "", 0, 0, "hakmem-prof.PID",                             \
    "Path prefix of the profile: PATH.heap (pprof's heap format), PATH.folded (flame-graph "                \
    "input) and PATH.txt; periodic dumps go to PATH.NNNN.heap.")                                            \
  X(PROF_INTERVAL_BYTES, prof_interval_bytes, SIZE, size_t, 0, "", 0, (uint64_t)1 << 50, "",                \
    "With PROF: dump the heap profile to PATH.NNNN.heap (NNNN counting from 0000) each time "               \
    "about this many more bytes have been allocated. 0: never.")                                            \
  X(PROF_INTERVAL_MS, prof_interval_ms, UINT, uint64_t, 0, "", 0, 86400000, "",                             \
    "With PROF: dump the heap profile to PATH.NNNN.heap every this many milliseconds, from the "            \
    "report thread. 0: never.")

#define OPT_FIELD_(NAME, field, KIND, type, ...) type field;
typedef struct options {
  OPTIONS_LIST(OPT_FIELD_)
} options_t;
#undef OPT_FIELD_

extern options_t opt;

/* The decay's unit of patience: an eighth of the purge delay, at least
 * 1 ms. A heap must stay this long without refilling to count as idle
 * (heap_purge.c), and the purge thread's passes come at least this far
 * apart (decay.c); both read it here so the two cannot drift apart. With a
 * delay of 0 the floor keeps a pass from bringing itself straight back. */
HAK_INLINE uint64_t opt_idle_gap_ms(void) {
  uint64_t g = opt.purge_delay_ms >> 3;
  return g ? g : 1;
}

void options_init(void);
/* Markdown of the option list (docs/options.md); returns bytes written. */
size_t options_doc(char *buf, size_t cap);
/* hak_ctl "opt.<field>": copy the option's value (bool, uint64_t, size_t,
 * int choice index or const char *) to oldp; 0, ENOENT or EINVAL. */
int options_get(const char *field, void *oldp, size_t *oldlenp);

#endif
