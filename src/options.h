/*
 * options.h — the configuration snapshot.
 *
 * Owns: the table of every HAKMEM_* option and the snapshot opt, read
 * once at process start-up. Promises: opt is filled before any
 * allocation is served and never changes afterwards; HAKMEM_PROFILE sets a
 * documented group of values first and explicit variables override it; an
 * invalid or out-of-range value is reported once on stderr and the default
 * kept. Nothing on a hot path reads options. docs/options.md is generated
 * from the table (options_doc) and a test checks it is current.
 * May call: os (stderr only). Never allocates (environ is scanned directly).
 */
#ifndef HAK_OPTIONS_H
#define HAK_OPTIONS_H

#include "internal.h"

enum { HAK_ON_ERROR_ABORT = 0, HAK_ON_ERROR_WARN = 1, HAK_ON_ERROR_IGNORE = 2 };
enum { HAK_THP_DEFAULT = 0, HAK_THP_ALWAYS = 1, HAK_THP_NEVER = 2 };
enum { HAK_PROFILE_BALANCED = 0, HAK_PROFILE_FAST = 1, HAK_PROFILE_LOWMEM = 2 };

typedef struct options {
  bool force_libc;          /* forward everything to glibc */
  uint64_t purge_delay_ms;  /* idle time before decommit */
  bool background_thread;   /* purge thread for idle processes */
  int on_error;             /* HAK_ON_ERROR_* */
  bool verbose;
  bool stats;               /* report at exit */
  size_t large_cache_bytes; /* freed large mappings kept */
  int thp;                  /* HAK_THP_* */
  size_t refill_bytes;      /* bytes carved per slab refill */
  uint64_t ss_cache;        /* empty superslabs kept */
  int profile;              /* HAK_PROFILE_* */
  bool prof;                /* sampled heap profiling */
  size_t prof_sample;       /* mean bytes between samples */
  bool prof_leaks;          /* report live sampled blocks at exit */
  const char *prof_file;    /* where the exit-time profile goes */
} options_t;

extern options_t opt;

void options_init(void);
/* Markdown of the option table (docs/options.md); returns bytes written. */
size_t options_doc(char *buf, size_t cap);

#endif
