/*
 * large.h — blocks above the largest size class (1 MiB).
 *
 * Owns: blocks up to 32 MiB carved from 128 MiB arenas (best fit at 64 KiB
 * granules, a fit on resident granules first, coalescing, freed spans
 * decommitted after the purge delay);
 * bigger or more-than-64-KiB-aligned blocks in dedicated 4 MiB-aligned
 * mappings with a small bounded cache; a 64-byte header just below each
 * user pointer. Promises: the user pointer lies in a region the ownership map
 * marks OWN_LARGE (arenas), OWN_LARGE_MAP or OWN_LARGE_FAR (dedicated
 * mappings; FAR for alignments >= 4 MiB); a pointer that is not a live
 * block's is told apart without reading outside mapped memory; dedicated
 * mappings go back with munmap and are resized with mremap (pages move, no
 * copy); arena blocks resize in place when their neighbour span is free.
 * Lends wholly free, mostly resident 4 MiB regions of the arenas to the
 * superslabs (large_lend_region), which give them back decommitted.
 * May call: lock, os, ownmap, options, decay, report (error reports); registers its purge with decay.
 */
#ifndef HAK_LARGE_H
#define HAK_LARGE_H

#include "internal.h"

/* align: power of two >= 16. zeroed non-NULL (calloc): *zeroed tells
 * whether the first size bytes are known to be zero (fresh from the OS, or
 * an arena block whose possibly dirty granules large_alloc zeroed itself,
 * sparing the cold ones). NULL + ENOMEM on failure (out of memory: alloc.c
 * collects and asks once more). */
void *large_alloc(size_t size, size_t align, bool *zeroed);
/* v: the ownership-map value of p. Reports and returns on an invalid p. */
void large_free(void *p, unsigned v, const char *call);
/* Resize in place or by moving pages; NULL if the caller should move the
 * block itself (new size better served by a size class, or mremap failed). */
void *large_realloc(void *p, unsigned v, size_t size);
size_t large_usable_size(const void *p, unsigned v);
/* p (a live large block) was asked for size bytes, fewer than it was
 * allocated with (realloc's room): for the statistics' split. */
void large_note_asked(void *p, size_t size);
/* Decommit arena spans and unmap cached mappings idle for the purge delay
 * (all if force). Returns when the next idle memory becomes due
 * (UINT64_MAX: none). */
uint64_t large_purge(uint64_t now_ms, bool force);

struct large_arena; /* large.c's; the superslab a region became keeps it */

/* A 4 MiB-aligned region of the arenas' free spans, at least half of it
 * possibly resident, for a superslab (ss_borrow); NULL if none (or a
 * group was busy; never in the secure build). Its ownership-map entry is
 * still OWN_LARGE: the caller sets its own. *from is the arena it lent
 * from, which the caller keeps for its return. */
void *large_lend_region(struct large_arena **from);
/* Region p, which large_lend_region lent from arena a, decommitted whole by
 * the caller, back to a (its ownership-map entry OWN_LARGE again). */
void large_unlend_region(void *p, struct large_arena *a);

typedef struct large_stats {
  size_t arenas, arena_bytes_used;     /* 128 MiB arenas, bytes in live blocks */
  size_t mappings, mapping_bytes;      /* dedicated mappings in use */
  size_t cached, cached_bytes;         /* freed mappings kept for reuse */
} large_stats_t;
void large_stats(large_stats_t *out);
/* Statistics' residency walk (stats.c): every region the arenas and the
 * mapping cache hold, by kind, under the large lock (see large.c). */
enum { LARGE_REGION_META, LARGE_REGION_LIVE, LARGE_REGION_ROUND, LARGE_REGION_FREE, LARGE_REGION_CACHED };
void large_for_each_region(void (*fn)(const void *p, size_t len, int kind, void *arg), void *arg);
size_t large_arena_bytes(void); /* bytes one arena maps */

void large_lock_all(void);
void large_unlock_all(void);

#endif
