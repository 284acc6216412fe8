/*
 * options.h — the configuration snapshot.
 *
 * Owns: reading HAKMEM_* environment variables, once, at process start-up,
 * into hak_opt. Promises: hak_opt is filled before any allocation is served
 * and never changes afterwards; an invalid value is reported once on stderr
 * and the default kept. Nothing on a hot path reads options.
 * May call: os (stderr only). Never allocates (environ is scanned directly).
 */
#ifndef HAK_OPTIONS_H
#define HAK_OPTIONS_H

#include "internal.h"

typedef struct hak_options {
  bool force_libc;          /* HAKMEM_FORCE_LIBC_ALLOC: forward everything to glibc */
  uint64_t purge_delay_ms;  /* HAKMEM_PURGE_DELAY_MS: idle time before decommit */
  bool verbose;             /* HAKMEM_VERBOSE */
  int on_error;             /* HAKMEM_ON_ERROR: 0 abort, 1 warn, 2 ignore */
  size_t large_cache_bytes; /* HAKMEM_LARGE_CACHE: bytes of freed large mappings kept */
  bool stats;               /* HAKMEM_STATS: print the statistics report at exit */
} hak_options_t;

enum { HAK_ON_ERROR_ABORT = 0, HAK_ON_ERROR_WARN = 1, HAK_ON_ERROR_IGNORE = 2 };

extern hak_options_t hak_opt;

void options_init(void);

#endif
