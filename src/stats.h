/*
 * stats.h — statistics: the on-demand snapshot, the report, and the
 * counters of the statistics build.
 *
 * Owns: struct hak_stats filling (its fields are declared once, as lists in
 * include/hakmem.h; the report's field lines and docs/stats.md's table
 * are generated from them) (walking the superslab registry, reading
 * os and large counters), the text report (stats.md documents each line),
 * the exit-time report of HAKMEM_STATS=1, and — only when built with
 * -DHAKMEM_STATS=ON — per-thread event counters merged at thread exit.
 * Promises: in the default build HAK_STAT() compiles to nothing, so no hot
 * path carries a counter. May call: superslab, large, decay, heap, prof,
 * ownmap, sizeclass, os, options. The exported hak_stats_get and
 * hak_stats_print are api.c's: they start the process up (init), then
 * call stats_get / stats_print here, so this file never calls up into
 * init or api.
 */
#ifndef HAK_STATS_H
#define HAK_STATS_H

#include "internal.h"

#if defined(HAKMEM_STATS) && HAKMEM_STATS
#define HAK_STATS_BUILD 1
/* Events of the statistics build. The remote-free ones show where
 * cross-thread time goes: batches published (and their blocks), batches
 * that went to a full slab's owner through the delayed list, CAS retries,
 * collections by the owner (and their blocks), exhausted slabs put to wait
 * and slabs marked full; and the idle heaps' collector's listed slabs
 * taken, superslabs handed over to the abandoned list, and its claims
 * that found the owner in a section (counted
 * process-wide at once: HAK_STAT_NOW, the purge thread never merges). */
enum {
  ST_ALLOC, ST_FREE, ST_SLOW, ST_REFILL, ST_REMOTE,
  ST_RPUBLISH, ST_RPUBLISH_BLOCKS, ST_RDELAYED, ST_RCAS_RETRY, ST_COLLECT, ST_COLLECT_BLOCKS,
  ST_WAITING, ST_MARK_FULL, ST_IDLE_TAKEN, ST_IDLE_HANDED, ST_IDLE_BUSY, ST_N
};
typedef struct stats_tls {
  uint64_t ev[ST_N];
  uint64_t cls_alloc[HAK_NCLASS], cls_free[HAK_NCLASS];
} stats_tls_t;
extern HAK_TLS stats_tls_t stats_tls;
#define HAK_STAT(ev_) (stats_tls.ev[ev_]++)
#define HAK_STATN(ev_, n_) (stats_tls.ev[ev_] += (n_))
#define HAK_STAT_CLS(arr_, cls_) (stats_tls.arr_[cls_]++)
void stats_count_now(int ev, uint64_t n);
#define HAK_STAT_NOW(ev_, n_) stats_count_now(ev_, n_)
/* Thread exit: add this thread's counters to the process totals. */
void stats_thread_merge(void);
#else
#define HAK_STATS_BUILD 0
#define HAK_STAT(ev_) ((void)0)
#define HAK_STATN(ev_, n_) ((void)0)
#define HAK_STAT_CLS(arr_, cls_) ((void)0)
#define HAK_STAT_NOW(ev_, n_) ((void)0)
HAK_INLINE void stats_thread_merge(void) {}
#endif

/* Start-up (init.c): with HAKMEM_STATS, keep a duplicate of stderr for the
 * exit report — programs often close stderr in their own exit handlers
 * (coreutils do), which run before library destructors. */
void stats_init(void);
/* The descriptor exit-time reports go to. */
int stats_report_fd(void);

/* hak_stats_get's body (api.c starts up first): fills *out up to
 * out->size; -1 if out is NULL or too small for the version-1 fields.
 * Only after start-up (the class table is filled there). */
int stats_get(struct hak_stats *out);
/* hak_stats_print's body: the report to out (stderr if NULL). */
void stats_print(FILE *out);

/* Format the report into buf (NUL-terminated, truncated to cap). */
size_t stats_format(char *buf, size_t cap);
/* The same, followed with fields by one "stats.<name> <value>" line per
 * field of struct hak_stats (the periodic and on-signal reports). */
size_t stats_format_ex(char *buf, size_t cap, bool fields);
/* The field table of docs/stats.md, generated from the public lists. */
size_t stats_doc_table(char *buf, size_t cap);

#endif
