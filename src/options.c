/*
 * options.c — the HAKMEM_* option table and its one-time parse (see
 * options.h). Adding an option: one X(...) row in OPTIONS_LIST in
 * options.h; then regenerate docs/options.md
 * (build/tools/hakmem_options_doc > docs/options.md).
 */
#include "options.h"
#include "os.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

extern char **environ;

#define OPT_DEFAULT_(NAME, field, KIND, type, def, ...) .field = def,
options_t opt = {OPTIONS_LIST(OPT_DEFAULT_)};
/* A second copy of the defaults: the documentation quotes them after opt
 * has been overwritten by the environment. */
static const options_t opt_defaults HAK_RODATA_COLD = {OPTIONS_LIST(OPT_DEFAULT_)};
#undef OPT_DEFAULT_

typedef enum { OPT_BOOL, OPT_UINT, OPT_SIZE, OPT_CHOICE, OPT_STR } opt_kind_t;

/* The table holds no pointer: its strings are members of one object each,
 * found by offset, so the loader relocates nothing here and writes no page
 * for it. The names, read by every start-up, lie with the allocator's
 * read-only data; the help texts, read only by the documentation, apart
 * from them (HAK_RODATA_COLD, src/layout.ld). */
#define OPT_STR_MEMBERS_(NAME, field, KIND, type, def, choices, min, max, unset, help) \
  char name_##field[sizeof #NAME];                                                   \
  char field_##field[sizeof #field];                                                 \
  char choices_##field[sizeof choices];                                              \
  char unset_##field[sizeof unset];
#define OPT_STR_VALUES_(NAME, field, KIND, type, def, choices, min, max, unset, help) \
  #NAME, #field, choices, unset,
static const struct opt_strs {
  OPTIONS_LIST(OPT_STR_MEMBERS_)
} opt_strs = {OPTIONS_LIST(OPT_STR_VALUES_)};
#define OPT_HELP_MEMBERS_(NAME, field, KIND, type, def, choices, min, max, unset, help) \
  char help_##field[sizeof help];
#define OPT_HELP_VALUES_(NAME, field, KIND, type, def, choices, min, max, unset, help) help,
static const struct opt_helps {
  OPTIONS_LIST(OPT_HELP_MEMBERS_)
} opt_helps HAK_RODATA_COLD = {OPTIONS_LIST(OPT_HELP_VALUES_)};
#undef OPT_STR_MEMBERS_
#undef OPT_STR_VALUES_
#undef OPT_HELP_MEMBERS_
#undef OPT_HELP_VALUES_

typedef struct opt_desc {
  uint16_t name;    /* in opt_strs: the variable without the HAKMEM_ prefix */
  uint16_t field;   /* the options_t member, the hak_ctl name after "opt." */
  uint16_t choices; /* OPT_CHOICE: '|'-separated words, the index is stored */
  uint16_t unset;   /* OPT_STR: what a NULL value means */
  uint16_t help;    /* in opt_helps */
  uint16_t off;     /* offsetof(options_t, field) */
  uint8_t kind;     /* opt_kind_t */
  uint64_t min, max; /* OPT_UINT / OPT_SIZE range */
} opt_desc_t;

#define OPT_ROW_(NAME, field, KIND, type, def, choices, min, max, unset, help)                      \
  {offsetof(struct opt_strs, name_##field), offsetof(struct opt_strs, field_##field),              \
   offsetof(struct opt_strs, choices_##field), offsetof(struct opt_strs, unset_##field),           \
   offsetof(struct opt_helps, help_##field), offsetof(options_t, field), OPT_##KIND, min, max},
static const opt_desc_t opt_table[] = {OPTIONS_LIST(OPT_ROW_)};
#undef OPT_ROW_
#define OPT_N (sizeof opt_table / sizeof opt_table[0])
#define OPT_INDEX_(NAME, field, ...) OPT_INDEX_##field,
enum { OPTIONS_LIST(OPT_INDEX_) };
#undef OPT_INDEX_
_Static_assert(sizeof(struct opt_strs) <= UINT16_MAX && sizeof(struct opt_helps) <= UINT16_MAX &&
                   sizeof(options_t) <= UINT16_MAX,
               "opt_desc_t's offsets are 16-bit");

static const char *opt_name(const opt_desc_t *d) { return (const char *)&opt_strs + d->name; }
static const char *opt_field(const opt_desc_t *d) { return (const char *)&opt_strs + d->field; }
static const char *opt_choices(const opt_desc_t *d) { return (const char *)&opt_strs + d->choices; }
static const char *opt_unset(const opt_desc_t *d) { return (const char *)&opt_strs + d->unset; }
static const char *opt_help(const opt_desc_t *d) { return (const char *)&opt_helps + d->help; }

/* String options (paths): each at most OPT_STR_LEN_MAX bytes, copied into
 * one pool that holds the longest value of every one of them. The count
 * comes from the list, so a new STR row cannot outgrow the pool. */
#define OPT_STR_LEN_MAX 4095
#define OPT_COUNT_STR_(NAME, field, KIND, ...) +(OPT_##KIND == OPT_STR)
enum { OPT_N_STR = 0 OPTIONS_LIST(OPT_COUNT_STR_) };
#undef OPT_COUNT_STR_
#define OPT_STR_POOL (OPT_N_STR * (OPT_STR_LEN_MAX + 1))
#define OPT_TEXT_(x) #x
#define OPT_TEXT(x) OPT_TEXT_(x)

/* The value of d in the snapshot o (opt or opt_defaults). */
static void *opt_at(const options_t *o, const opt_desc_t *d) { return (char *)o + d->off; }

/* The few words start-up reads besides the table, as named objects: every
 * string literal of this file is an error message or documentation, which
 * src/layout.ld places with the cold data (a compiler may merge a file's
 * literals into one section, whoever reads them). */
static const char opt_prefix[] = "HAKMEM_";
static const char opt_profile_name[] = "PROFILE"; /* HAKMEM_PRESET's former name */

/* getenv would do, but this runs inside the process's first malloc, and
 * reading environ directly makes it plain that nothing is allocated or
 * locked. The '=' check keeps HAKMEM_PROF from matching HAKMEM_PROF_FILE. */
static const char *opt_lookup(const char *name) {
  if (environ == NULL) return NULL;
  size_t n = strlen(name);
  for (char **e = environ; *e != NULL; e++) {
    const char *s = *e;
    if (strncmp(s, opt_prefix, 7) == 0 && strncmp(s + 7, name, n) == 0 && s[7 + n] == '=')
      return s + 8 + n;
  }
  return NULL;
}

/* a (a whole value, any case) equals the blen bytes of the lower-case word
 * b, which need not be NUL-terminated (a word inside "x|y|z"). */
static bool word_eq(const char *a, const char *b, size_t blen) {
  for (size_t i = 0; i < blen; i++) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return a[blen] == 0;
}

static bool parse_bool(const char *v, bool *out) {
  static const char yes[][6] = {"1", "true", "on", "yes"};
  static const char no[][6] = {"0", "false", "off", "no"};
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
    if (x > (UINT64_MAX - d) / 10) return false; /* overflow: out of any range */
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
    /* 4K, 4KB and 4KiB all mean 4096: people write all three. */
    if ((*p | 0x20) == 'i') p++;
    if ((*p | 0x20) == 'b') p++;
    if (x > (UINT64_MAX >> shift)) return false;
    x <<= shift;
  }
  if (*p) return false;
  *out = x;
  return true;
}

/* The index of v among the '|'-separated words, which is what the
 * HAK_* enums in options.h number. */
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

/* Parse one option's value into opt; false if invalid or out of range
 * (opt is then left as it was). */
static bool opt_parse(const opt_desc_t *d, const char *v) {
  void *t = opt_at(&opt, d);
  uint64_t x;
  switch (d->kind) {
    case OPT_BOOL: return parse_bool(v, (bool *)t);
    case OPT_UINT:
      if (!parse_uint(v, false, &x) || x < d->min || x > d->max) return false;
      *(uint64_t *)t = x;
      return true;
    case OPT_SIZE:
      if (!parse_uint(v, true, &x) || x < d->min || x > d->max) return false;
      *(size_t *)t = (size_t)x;
      return true;
    case OPT_CHOICE: return parse_choice(v, opt_choices(d), (int *)t);
    case OPT_STR: {
      /* Copied, not pointed at: a program that sets its process title
       * (redis, nginx, postgres: setproctitle) writes the title over the
       * environment's strings, and HAKMEM_STATS_FILE then named no file
       * (redis never got a periodic report). A static pool, since this
       * runs inside the first malloc. */
      static char pool[OPT_STR_POOL] HAK_BSS_BIG;
      static size_t used;
      size_t len = strlen(v);
      if (len == 0 || len > OPT_STR_LEN_MAX || len + 1 > sizeof pool - used) return false;
      char *copy = memcpy(pool + used, v, len + 1);
      used += len + 1;
      *(const char **)t = copy;
      return true;
    }
  }
  return false;
}

/* Copy the idx-th word of a '|'-separated list into buf. */
static HAK_TEXT_COLD void opt_choice_word(const char *choices, int idx, char *buf, size_t cap) {
  const char *c = choices;
  for (int i = 0; i < idx && c; i++) {
    c = strchr(c, '|');
    if (c) c++;
  }
  size_t len = 0;
  if (c) {
    const char *e = strchr(c, '|');
    len = e ? (size_t)(e - c) : strlen(c);
  }
  if (len >= cap) len = cap - 1;
  if (c) memcpy(buf, c, len);
  buf[len] = 0;
}

/* Sizes print as 4K, 256M, 1G when they are whole multiples, the way the
 * documentation and a user would write them. */
static HAK_TEXT_COLD char *opt_fmt_size(char *p, uint64_t x) {
  static const char suffix[] = "KMGT";
  int s = -1;
  while (x != 0 && x % 1024 == 0 && s < 2) x /= 1024, s++; /* G at most: the parser takes no T */
  p = os_fmt_dec(p, x);
  if (s >= 0) *p++ = suffix[s];
  *p = 0;
  return p;
}

/* The value of d in snapshot o as text, in buf (cap >= 32). */
static HAK_TEXT_COLD const char *opt_fmt_value(const options_t *o, const opt_desc_t *d, char *buf,
                                                size_t cap) {
  const void *t = opt_at(o, d);
  switch (d->kind) {
    case OPT_BOOL: return *(const bool *)t ? "1" : "0";
    case OPT_UINT: os_fmt_dec(buf, *(const uint64_t *)t); return buf;
    case OPT_SIZE: opt_fmt_size(buf, *(const size_t *)t); return buf;
    case OPT_STR: return *(const char *const *)t ? *(const char *const *)t : opt_unset(d);
    case OPT_CHOICE: opt_choice_word(opt_choices(d), *(const int *)t, buf, cap); return buf;
  }
  return "?";
}

/* What a valid value looks like, for the error message and the
 * documentation's "values" column (buf: at least 96 bytes). */
static HAK_TEXT_COLD const char *opt_expect(const opt_desc_t *d, char *buf) {
  switch (d->kind) {
    case OPT_BOOL: return "a boolean (1/0/true/false/on/off/yes/no)";
    case OPT_CHOICE: return opt_choices(d);
    case OPT_STR: return "a non-empty path of at most " OPT_TEXT(OPT_STR_LEN_MAX) " bytes";
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

/* Presets write opt directly; they run before the explicit variables are
 * parsed, so any of these can still be overridden one by one. Keep the
 * PRESET help text in options.h in step with the values here. */
static void opt_apply_preset(int preset) {
  if (preset == HAK_PRESET_FAST) {
    opt.purge_delay_ms = 1000;
    opt.large_cache_bytes = (size_t)1 << 30;
    opt.refill_bytes = 16384;
    opt.ss_cache = 32;
    opt.borrow_classes = 0;
  } else if (preset == HAK_PRESET_LOWMEM) {
    opt.purge_delay_ms = 1;
    opt.large_cache_bytes = (size_t)4 << 20;
    opt.refill_bytes = 4096;
    opt.ss_cache = 0;
    opt.borrow_classes = 4;
    opt.thp = HAK_THP_NEVER;
  }
}

/* env_name is the name the user wrote (it differs from d's name for the
 * deprecated alias), so the message points at the variable actually set. */
static HAK_TEXT_COLD void opt_invalid(const opt_desc_t *d, const char *env_name, const char *v) {
  char exp[96], val[64];
  os_write_err("hakmem: HAKMEM_");
  os_write_err(env_name);
  os_write_err("=");
  os_write_err(v);
  os_write_err(": expected ");
  os_write_err(opt_expect(d, exp));
  os_write_err("; using default ");
  os_write_err(opt_fmt_value(&opt, d, val, sizeof val));
  os_write_err("\n");
}

static void opt_set_from(const opt_desc_t *d, const char *env_name, const char *v) {
  if (!opt_parse(d, v)) opt_invalid(d, env_name, v);
}

static HAK_TEXT_COLD const opt_desc_t *opt_by_field(const char *field) {
  for (size_t i = 0; i < OPT_N; i++)
    if (strcmp(opt_field(&opt_table[i]), field) == 0) return &opt_table[i];
  return NULL;
}

/* HAKMEM_PROFILE, HAKMEM_PRESET's former name: the notices. */
static HAK_TEXT_COLD void opt_profile_notice(bool preset_set) {
  if (preset_set)
    os_write_err("hakmem: HAKMEM_PROFILE (deprecated) ignored: HAKMEM_PRESET is set\n");
  else
    os_write_err("hakmem: HAKMEM_PROFILE is deprecated, use HAKMEM_PRESET (same values)\n");
}

/* HAKMEM_VERBOSE=1: the build and every option in force. */
static HAK_TEXT_COLD void opt_print_verbose(void) {
  char buf[64];
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
    os_write_err(opt_name(&opt_table[i]));
    os_write_err("=");
    os_write_err(opt_fmt_value(&opt, &opt_table[i], buf, sizeof buf));
    os_write_err("\n");
  }
}

void options_init(void) {
  /* The preset goes first so that explicit variables override it,
   * whatever their order in the environment. HAKMEM_PROFILE was its name
   * until it proved too easy to confuse with HAKMEM_PROF (the profiler);
   * it is honoured, with a notice, unless HAKMEM_PRESET is also set. */
  const opt_desc_t *pd = &opt_table[OPT_INDEX_preset];
  const char *v = opt_lookup(opt_name(pd));
  const char *vname = opt_name(pd);
  if (v == NULL && (v = opt_lookup(opt_profile_name)) != NULL) {
    vname = opt_profile_name;
    opt_profile_notice(false);
  } else if (v != NULL && opt_lookup(opt_profile_name) != NULL) {
    opt_profile_notice(true);
  }
  if (v != NULL) {
    opt_set_from(pd, vname, v);
    opt_apply_preset(opt.preset);
  }
  for (size_t i = 0; i < OPT_N; i++) {
    const opt_desc_t *d = &opt_table[i];
    if (d == pd || (v = opt_lookup(opt_name(d))) == NULL) continue;
    opt_set_from(d, opt_name(d), v);
  }
  if (opt.prof_leaks) opt.prof = true; /* leaks are found from the samples */
  if (opt.verbose) opt_print_verbose();
}

HAK_TEXT_COLD int options_get(const char *field, void *oldp, size_t *oldlenp) {
  const opt_desc_t *d = opt_by_field(field);
  if (d == NULL) return ENOENT;
  size_t len = 0;
  switch (d->kind) {
    case OPT_BOOL: len = sizeof(bool); break;
    case OPT_UINT: len = sizeof(uint64_t); break;
    case OPT_SIZE: len = sizeof(size_t); break;
    case OPT_CHOICE: len = sizeof(int); break;
    case OPT_STR: len = sizeof(const char *); break;
  }
  if (oldp == NULL) {
    if (oldlenp != NULL) *oldlenp = len; /* a size query, as in mallctl */
    return 0;
  }
  if (oldlenp == NULL || *oldlenp != len) return EINVAL;
  if (d->kind == OPT_STR && *(const char **)opt_at(&opt, d) == NULL) {
    *(const char **)oldp = opt_unset(d); /* never hand out NULL for a path */
    return 0;
  }
  memcpy(oldp, opt_at(&opt, d), len);
  return 0;
}

/* Defaults come from opt_defaults, never from opt: the page must not
 * depend on the environment of whoever regenerates it. */
HAK_TEXT_COLD size_t options_doc(char *buf, size_t cap) {
  size_t n = 0;
#define PUT(s)                                      \
  do {                                              \
    const char *s_ = (s);                           \
    size_t l_ = strlen(s_);                         \
    if (n + l_ < cap) memcpy(buf + n, s_, l_), n += l_; \
  } while (0)
  PUT("# hakmem options\n\n"
      "Generated from `OPTIONS_LIST` in `src/options.h` "
      "(`build/tools/hakmem_options_doc > docs/options.md`; a test fails when this page is stale).\n\n"
      "Every option is an environment variable read once, when the process makes its first "
      "allocation; nothing reads the environment afterwards and no hot path reads options. "
      "Booleans accept 1/0, true/false, on/off, yes/no; sizes accept K, M and G suffixes; "
      "paths are copied (at most " OPT_TEXT(OPT_STR_LEN_MAX) " bytes), so a program that later writes its process "
      "title over the environment (setproctitle) does not change them. "
      "An invalid or out-of-range value is reported once on stderr "
      "(`hakmem: HAKMEM_X=...: expected ...; using default ...`) and ignored. "
      "Every option can be read at run time as `opt.<field>` with `hak_ctl` (docs/ctl.md); "
      "the field is given under each name.\n\n"
      "| variable | default | values | meaning |\n|---|---|---|---|\n");
  for (size_t i = 0; i < OPT_N; i++) {
    const opt_desc_t *d = &opt_table[i];
    char range[96], def[64];
    PUT("| `HAKMEM_");
    PUT(opt_name(d));
    PUT("`<br>`opt.");
    PUT(opt_field(d));
    PUT("` | ");
    PUT(opt_fmt_value(&opt_defaults, d, def, sizeof def));
    PUT(" | ");
    switch (d->kind) {
      case OPT_BOOL: PUT("boolean"); break;
      case OPT_CHOICE: PUT(opt_choices(d)); break;
      case OPT_STR: PUT("path"); break;
      default: PUT(opt_expect(d, range));
    }
    PUT(" | ");
    PUT(opt_help(d));
    PUT(" |\n");
  }
#undef PUT
  if (n < cap) buf[n] = 0;
  return n;
}
