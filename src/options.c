/*
 * options.c — the HAKMEM_* option table and its one-time parse.
 *
 * Owns: the table of every option (name, kind, default, description) and the
 * snapshot hak_opt. Promises: parse once (options_init, called by init before
 * the first allocation); booleans accept 1/0/true/false/on/off/yes/no, sizes
 * accept K/M/G suffixes; a bad value is reported once and ignored.
 * May call: os (stderr). Must not allocate: runs inside the first malloc.
 */
#include "options.h"
#include "os.h"

#include <string.h>

extern char **environ;

hak_options_t hak_opt = {
    .force_libc = false,
    .purge_delay_ms = 20,
    .verbose = false,
    .on_error = HAK_ON_ERROR_ABORT,
    .large_cache_bytes = (size_t)64 << 20,
};

typedef enum { OPT_BOOL, OPT_UINT, OPT_SIZE, OPT_CHOICE } opt_kind_t;

typedef struct opt_desc {
  const char *name;    /* without the HAKMEM_ prefix */
  opt_kind_t kind;
  void *target;
  const char *choices; /* OPT_CHOICE: '|'-separated words, index stored */
  const char *help;
} opt_desc_t;

static const opt_desc_t opt_table[] = {
    {"FORCE_LIBC_ALLOC", OPT_BOOL, &hak_opt.force_libc, NULL,
     "forward every allocation call to the C library (same-binary A/B)"},
    {"PURGE_DELAY_MS", OPT_UINT, &hak_opt.purge_delay_ms, NULL,
     "milliseconds a wholly free slab or cached mapping waits before it is returned to the OS"},
    {"VERBOSE", OPT_BOOL, &hak_opt.verbose, NULL, "print the options in force at start-up"},
    {"ON_ERROR", OPT_CHOICE, &hak_opt.on_error, "abort|warn|ignore",
     "what an invalid free/realloc does after it is reported"},
    {"LARGE_CACHE", OPT_SIZE, &hak_opt.large_cache_bytes, NULL,
     "bytes of freed large mappings kept for reuse (K/M/G suffixes)"},
    {"STATS", OPT_BOOL, &hak_opt.stats, NULL, "print the statistics report (docs/stats.md) at exit"},
};

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
  const char *c = choices;
  while (*c) {
    const char *end = strchr(c, '|');
    size_t len = end ? (size_t)(end - c) : strlen(c);
    if (word_eq(v, c, len)) return *out = idx, true;
    idx++;
    c += len + (end ? 1 : 0);
    if (!end) break;
  }
  return false;
}

static const char *opt_expect(const opt_desc_t *d) {
  switch (d->kind) {
    case OPT_BOOL: return "a boolean (1/0/true/false/on/off/yes/no)";
    case OPT_UINT: return "a non-negative integer";
    case OPT_SIZE: return "a size (bytes, K/M/G suffixes)";
    case OPT_CHOICE: return d->choices;
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
    case OPT_CHOICE: {
      int idx = *(int *)d->target;
      const char *c = d->choices;
      for (int i = 0; i < idx && c; i++) {
        c = strchr(c, '|');
        if (c) c++;
      }
      if (c) {
        const char *end = strchr(c, '|');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        char w[32];
        if (len >= sizeof w) len = sizeof w - 1;
        memcpy(w, c, len);
        w[len] = 0;
        os_write_err(w);
      }
      break;
    }
  }
}

void options_init(void) {
  for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++) {
    const opt_desc_t *d = &opt_table[i];
    const char *v = opt_lookup(d->name);
    if (v == NULL) continue;
    bool ok = false;
    switch (d->kind) {
      case OPT_BOOL: ok = parse_bool(v, (bool *)d->target); break;
      case OPT_UINT: {
        uint64_t x;
        ok = parse_uint(v, false, &x);
        if (ok) *(uint64_t *)d->target = x;
        break;
      }
      case OPT_SIZE: {
        uint64_t x;
        ok = parse_uint(v, true, &x) && x <= SIZE_MAX;
        if (ok) *(size_t *)d->target = (size_t)x;
        break;
      }
      case OPT_CHOICE: ok = parse_choice(v, d->choices, (int *)d->target); break;
    }
    if (!ok) {
      os_write_err("hakmem: HAKMEM_");
      os_write_err(d->name);
      os_write_err("=");
      os_write_err(v);
      os_write_err(": expected ");
      os_write_err(opt_expect(d));
      os_write_err("; using default ");
      opt_print_value(d);
      os_write_err("\n");
    }
  }
  if (hak_opt.verbose) {
    os_write_err("hakmem: options in force:\n");
    for (size_t i = 0; i < sizeof opt_table / sizeof opt_table[0]; i++) {
      os_write_err("  HAKMEM_");
      os_write_err(opt_table[i].name);
      os_write_err("=");
      opt_print_value(&opt_table[i]);
      os_write_err("    # ");
      os_write_err(opt_table[i].help);
      os_write_err("\n");
    }
  }
}
