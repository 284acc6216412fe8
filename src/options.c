/*
 * options.c — the HAKMEM_* option table and its one-time parse (see
 * options.h). Adding an option: a field in options_t, a default in
 * opt, a row in opt_table; then regenerate docs/options.md
 * (build/tools/hakmem_options_doc > docs/options.md).
 */
#include "options.h"
#include "os.h"

#include <string.h>

extern char **environ;

options_t opt = {
    .force_libc = false,
    .purge_delay_ms = 100,
    .background_thread = true,
    .on_error = HAK_ON_ERROR_ABORT,
    .verbose = false,
    .stats = false,
    .large_cache_bytes = (size_t)256 << 20,
    .thp = HAK_THP_DEFAULT,
    .refill_bytes = 4096,
    .ss_cache = 8,
    .profile = HAK_PROFILE_BALANCED,
    .prof = false,
    .prof_sample = (size_t)512 << 10,
    .prof_leaks = false,
    .prof_file = NULL,
};

typedef enum { OPT_BOOL, OPT_UINT, OPT_SIZE, OPT_CHOICE, OPT_STR } opt_kind_t;

typedef struct opt_desc {
  const char *name;    /* without the HAKMEM_ prefix */
  opt_kind_t kind;
  void *target;
  const char *choices; /* OPT_CHOICE: '|'-separated words, the index is stored */
  uint64_t min, max;   /* OPT_UINT / OPT_SIZE range */
  const char *def;     /* default, as documented */
  const char *help;
} opt_desc_t;

static const opt_desc_t opt_table[] = {
    {"FORCE_LIBC_ALLOC", OPT_BOOL, &opt.force_libc, NULL, 0, 0, "0",
     "Forward every allocation call to the C library's allocator (same-binary A/B comparison). "
     "Checked before hakmem touches any of its own state."},
    {"PROFILE", OPT_CHOICE, &opt.profile, "balanced|fast|lowmem", 0, 0, "balanced",
     "Preset of the options below, applied first; variables set explicitly override it. "
     "`fast`: PURGE_DELAY_MS=1000, LARGE_CACHE=1G, REFILL_BYTES=16K, SS_CACHE=32. "
     "`lowmem`: PURGE_DELAY_MS=1, LARGE_CACHE=4M, REFILL_BYTES=4K, SS_CACHE=0, THP=never."},
    {"PURGE_DELAY_MS", OPT_UINT, &opt.purge_delay_ms, NULL, 0, 3600000, "100",
     "The decay window: milliseconds a free slab, superslab, arena span or cached mapping stays "
     "committed (reused warm, with no page fault) before it is returned to the OS "
     "(madvise/munmap). Memory goes back by time only, never because of how much was freed; "
     "`hak_collect(1)` and `malloc_trim(0)` return everything idle at once."},
    {"BACKGROUND_THREAD", OPT_BOOL, &opt.background_thread, NULL, 0, 0, "1",
     "A background thread that purges idle memory once PURGE_DELAY_MS has passed, so a program "
     "that frees a lot and then makes no allocator call still gives it back. Started only the "
     "first time 4 MiB or more is idle in one place (small programs never get one); it sleeps "
     "without waking while nothing is idle, and stops at exit. 0: idle memory is purged only "
     "by allocator calls (refills, frees) and by `hak_collect`/`malloc_trim`."},
    {"ON_ERROR", OPT_CHOICE, &opt.on_error, "abort|warn|ignore", 0, 0, "abort",
     "After an invalid or double free is reported: abort, warn (report and go on, the call does "
     "nothing) or ignore (no report)."},
    {"LARGE_CACHE", OPT_SIZE, &opt.large_cache_bytes, NULL, 0, (uint64_t)1 << 40, "256M",
     "Bytes of freed dedicated large mappings (blocks above 32 MiB) kept for reuse, each for at "
     "most PURGE_DELAY_MS: a program cycling big buffers reuses their pages instead of faulting "
     "fresh ones in."},
    {"REFILL_BYTES", OPT_SIZE, &opt.refill_bytes, NULL, 256, (uint64_t)1 << 20, "4K",
     "Bytes of fresh blocks a thread carves into its cache (the current slab's free list) per "
     "refill: larger means fewer slow-path calls, more memory touched ahead of use."},
    {"SS_CACHE", OPT_UINT, &opt.ss_cache, NULL, 0, 1024, "8",
     "Empty 4 MiB superslabs kept (decommitted) for reuse instead of unmapped."},
    {"THP", OPT_CHOICE, &opt.thp, "default|always|never", 0, 0, "default",
     "Transparent huge pages for superslabs and arenas: the kernel's default, madvise "
     "MADV_HUGEPAGE, or MADV_NOHUGEPAGE."},
    {"STATS", OPT_BOOL, &opt.stats, NULL, 0, 0, "0",
     "Print the statistics report (docs/stats.md) on stderr at exit."},
    {"VERBOSE", OPT_BOOL, &opt.verbose, NULL, 0, 0, "0",
     "Print the build configuration and every option in force at start-up."},
    {"PROF", OPT_BOOL, &opt.prof, NULL, 0, 0, "0",
     "Sampled heap profiling: record the call stack of about one allocation per PROF_SAMPLE "
     "bytes; dump live samples by stack at exit, on SIGUSR2, or with hak_prof_dump()."},
    {"PROF_SAMPLE", OPT_SIZE, &opt.prof_sample, NULL, 1, (uint64_t)1 << 40, "512K",
     "Mean bytes allocated between two samples (randomised, exponential gaps)."},
    {"PROF_LEAKS", OPT_BOOL, &opt.prof_leaks, NULL, 0, 0, "0",
     "At exit, report the sampled allocations still live, by stack (implies PROF)."},
    {"PROF_FILE", OPT_STR, &opt.prof_file, NULL, 0, 0, "hakmem-prof.PID",
     "Path prefix of the exit-time profile: PATH.folded (flame-graph input) and PATH.txt."},
};
#define OPT_N (sizeof opt_table / sizeof opt_table[0])

static const char *opt_lookup(const char *name) {
  if (environ == NULL) return NULL;
  size_t n = strlen(name);
  for (char **e = environ; *e != NULL; e++) {
    const char *s = *e;
    if (strncmp(s, "HAKMEM_", 7) == 0 && strncmp(s + 7, name, n) == 0 && s[7 + n] == '=')
      return s + 8 + n;
  }
  return NULL;
}

static bool word_eq(const char *a, const char *b, size_t blen) {
  for (size_t i = 0; i < blen; i++) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return a[blen] == 0;
}

static bool parse_bool(const char *v, bool *out) {
  static const char *yes[] = {"1", "true", "on", "yes"};
  static const char *no[] = {"0", "false", "off", "no"};
  for (int i = 0; i < 4; i++) {
    if (word_eq(v, yes[i], strlen(yes[i]))) return *out = true, true;
    if (word_eq(v, no[i], strlen(no[i]))) return *out = false, true;
  }
  return false;
}

static bool parse_uint(const char *v, bool suffixes, uint64_t *out) {
  uint64_t x = 0;
  const char *p = v;
  if (*p < '0' || *p > '9') return false;
  while (*p >= '0' && *p <= '9') {
    uint64_t d = (uint64_t)(*p - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
    p++;
  }
  if (suffixes && *p) {
    unsigned shift = 0;
    switch (*p | 0x20) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      default: return false;
    }
    p++;
    if ((*p | 0x20) == 'i') p++;
    if ((*p | 0x20) == 'b') p++;
    if (x > (UINT64_MAX >> shift)) return false;
    x <<= shift;
  }
  if (*p) return false;
  *out = x;
  return true;
}

static bool parse_choice(const char *v, const char *choices, int *out) {
  int idx = 0;
  for (const char *c = choices; *c;) {
    const char *end = strchr(c, '|');
    size_t len = end ? (size_t)(end - c) : strlen(c);
    if (word_eq(v, c, len)) return *out = idx, true;
    idx++;
    if (!end) break;
    c = end + 1;
  }
  return false;
}

/* Parse one option's value; false if invalid or out of range. */
static bool opt_parse(const opt_desc_t *d, const char *v) {
  uint64_t x;
  switch (d->kind) {
    case OPT_BOOL: return parse_bool(v, (bool *)d->target);
    case OPT_UINT:
      if (!parse_uint(v, false, &x) || x < d->min || x > d->max) return false;
      *(uint64_t *)d->target = x;
      return true;
    case OPT_SIZE:
      if (!parse_uint(v, true, &x) || x < d->min || x > d->max) return false;
      *(size_t *)d->target = (size_t)x;
      return true;
    case OPT_CHOICE: return parse_choice(v, d->choices, (int *)d->target);
    case OPT_STR:
      if (*v == 0) return false;
      *(const char **)d->target = v;
      return true;
  }
  return false;
}

static const char *opt_expect(const opt_desc_t *d, char *buf) {
  switch (d->kind) {
    case OPT_BOOL: return "a boolean (1/0/true/false/on/off/yes/no)";
    case OPT_CHOICE: return d->choices;
    case OPT_STR: return "a non-empty path";
    case OPT_UINT:
    case OPT_SIZE: {
      char *p = buf;
      const char *a = d->kind == OPT_SIZE ? "a size (K/M/G suffixes) in " : "an integer in ";
      memcpy(p, a, strlen(a));
      p += strlen(a);
      p = os_fmt_dec(p, d->min);
      *p++ = '.';
      *p++ = '.';
      os_fmt_dec(p, d->max);
      return buf;
    }
  }
  return "?";
}

static void opt_print_value(const opt_desc_t *d) {
  char buf[32];
  switch (d->kind) {
    case OPT_BOOL: os_write_err(*(bool *)d->target ? "1" : "0"); break;
    case OPT_UINT:
      os_fmt_dec(buf, *(uint64_t *)d->target);
      os_write_err(buf);
      break;
    case OPT_SIZE:
      os_fmt_dec(buf, *(size_t *)d->target);
      os_write_err(buf);
      break;
    case OPT_STR: os_write_err(*(const char **)d->target ? *(const char **)d->target : d->def); break;
    case OPT_CHOICE: {
      const char *c = d->choices;
      for (int i = 0; i < *(int *)d->target && c; i++) {
        c = strchr(c, '|');
        if (c) c++;
      }
      size_t len = c ? (strchr(c, '|') ? (size_t)(strchr(c, '|') - c) : strlen(c)) : 0;
      if (len >= sizeof buf) len = sizeof buf - 1;
      if (c) memcpy(buf, c, len);
      buf[len] = 0;
      os_write_err(buf);
      break;
    }
  }
}

static void opt_apply_profile(int profile) {
  if (profile == HAK_PROFILE_FAST) {
    opt.purge_delay_ms = 1000;
    opt.large_cache_bytes = (size_t)1 << 30;
    opt.refill_bytes = 16384;
    opt.ss_cache = 32;
  } else if (profile == HAK_PROFILE_LOWMEM) {
    opt.purge_delay_ms = 1;
    opt.large_cache_bytes = (size_t)4 << 20;
    opt.refill_bytes = 4096;
    opt.ss_cache = 0;
    opt.thp = HAK_THP_NEVER;
  }
}

void options_init(void) {
  /* The preset first (it is the table's second row), then every variable. */
  for (size_t i = 0; i < OPT_N; i++) {
    const opt_desc_t *d = &opt_table[i];
    const char *v = opt_lookup(d->name);
    if (v == NULL) continue;
    if (!opt_parse(d, v)) {
      char exp[96];
      os_write_err("hakmem: HAKMEM_");
      os_write_err(d->name);
      os_write_err("=");
      os_write_err(v);
      os_write_err(": expected ");
      os_write_err(opt_expect(d, exp));
      os_write_err("; using default ");
      opt_print_value(d);
      os_write_err("\n");
      continue;
    }
    if (d->target == &opt.profile) opt_apply_profile(opt.profile);
  }
  if (opt.prof_leaks) opt.prof = true;
  if (opt.verbose) {
    char buf[24];
    os_write_err("hakmem: build: version " HAK_STR_VERSION);
    os_write_err(HAK_DEBUG ? ", debug" : ", release");
    os_write_err(HAK_SECURE ? ", secure" : "");
#if defined(HAKMEM_STATS) && HAKMEM_STATS
    os_write_err(", statistics");
#endif
    os_write_err(", initial-exec TLS, 4 MiB superslabs, ");
    os_fmt_dec(buf, HAK_NCLASS);
    os_write_err(buf);
    os_write_err(" size classes up to 1 MiB\nhakmem: options in force:\n");
    for (size_t i = 0; i < OPT_N; i++) {
      os_write_err("  HAKMEM_");
      os_write_err(opt_table[i].name);
      os_write_err("=");
      opt_print_value(&opt_table[i]);
      os_write_err("\n");
    }
  }
}

size_t options_doc(char *buf, size_t cap) {
  size_t n = 0;
#define PUT(s)                                      \
  do {                                              \
    const char *s_ = (s);                           \
    size_t l_ = strlen(s_);                         \
    if (n + l_ < cap) memcpy(buf + n, s_, l_), n += l_; \
  } while (0)
  PUT("# hakmem options\n\n"
      "Generated from the option table in `src/options.c` "
      "(`build/tools/hakmem_options_doc > docs/options.md`; a test fails when this page is stale).\n\n"
      "Every option is an environment variable read once, when the process makes its first "
      "allocation; nothing reads the environment afterwards and no hot path reads options. "
      "Booleans accept 1/0, true/false, on/off, yes/no; sizes accept K, M and G suffixes. "
      "An invalid or out-of-range value is reported once on stderr "
      "(`hakmem: HAKMEM_X=...: expected ...; using default ...`) and ignored.\n\n"
      "| variable | default | values | meaning |\n|---|---|---|---|\n");
  for (size_t i = 0; i < OPT_N; i++) {
    const opt_desc_t *d = &opt_table[i];
    char range[96];
    PUT("| `HAKMEM_");
    PUT(d->name);
    PUT("` | ");
    PUT(d->def);
    PUT(" | ");
    switch (d->kind) {
      case OPT_BOOL: PUT("boolean"); break;
      case OPT_CHOICE: PUT(d->choices); break;
      case OPT_STR: PUT("path"); break;
      default: {
        opt_expect(d, range);
        PUT(range);
      }
    }
    PUT(" | ");
    PUT(d->help);
    PUT(" |\n");
  }
#undef PUT
  if (n < cap) buf[n] = 0;
  return n;
}
