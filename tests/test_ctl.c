/*
 * test_ctl — hak_ctl by name: every statistic of the public lists reads
 * the same as hak_stats_get, options read back and purge_delay_ms writes
 * take effect, actions run and refuse values, errors are mallctl's, and
 * (with HAKMEM_PROF=1, argv[1] = "prof") prof.active / prof.sample /
 * prof.dump work. Without HAKMEM_PROF the prof.* writes must be EPERM.
 * Usage: test_ctl [prof TMPDIR]
 */
#include <hakmem.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "testutil.h"

static size_t rd(const char *name) {
  size_t v = 0, len = sizeof v;
  int r = hak_ctl(name, &v, &len, NULL, 0);
  CHECK(r == 0, "%s: %d", name, r);
  return v;
}


static __attribute__((noinline)) void **hold(size_t n, size_t size) {
  void **v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = malloc(size), memset(v[i], 1, size);
  return v;
}

/* prof.active set to on, 8 MiB more held (in *keep), then a dump to path:
 * the live samples it has. */
static long samples_after_hold(bool on, const char *path, void ***keep) {
  CHECK(hak_ctl("prof.active", NULL, NULL, &on, sizeof on) == 0, "prof.active %s", on ? "on" : "off");
  *keep = hold(8192, 1024);
  CHECK(hak_ctl("prof.dump", NULL, NULL, &path, sizeof path) == 0, "prof.dump to %s", path);
  return tu_heap_samples(path);
}

static void drop(void **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

int main(int argc, char **argv) {
  bool prof = argc > 2 && strcmp(argv[1], "prof") == 0;
  size_t len;

  /* version */
  const char *ver = NULL;
  len = sizeof ver;
  CHECK(hak_ctl("version", &ver, &len, NULL, 0) == 0 && ver && strcmp(ver, hak_version()) == 0, "version");
  CHECK(hak_ctl("version", NULL, NULL, &ver, sizeof ver) == EPERM, "version is read-only");

  /* errors */
  size_t v = 0;
  len = sizeof v;
  CHECK(hak_ctl("no.such.name", &v, &len, NULL, 0) == ENOENT, "unknown name");
  CHECK(hak_ctl("stats.no_such_field", &v, &len, NULL, 0) == ENOENT, "unknown stat");
  len = 4;
  CHECK(hak_ctl("stats.mapped_bytes", &v, &len, NULL, 0) == EINVAL, "wrong size");
  len = 0;
  CHECK(hak_ctl("stats.mapped_bytes", NULL, &len, NULL, 0) == 0 && len == sizeof(size_t), "size query");
  CHECK(hak_ctl("stats.mapped_bytes", NULL, NULL, &v, sizeof v) == EPERM, "stats are read-only");
  CHECK(hak_ctl("stats.classes.1.nope", &v, &(size_t){sizeof v}, NULL, 0) == ENOENT, "class field");

  /* Every field of both lists reads as in a snapshot taken right after
   * (single thread, no allocation in between; the fields that the purge
   * thread may move are the decay ones, allowed to differ). */
  void **keep = hold(4096, 1000);
  struct hak_stats st;
  st.size = sizeof st;
#define FIELD_(name, text)                                                           \
  {                                                                                  \
    size_t a = rd("stats." #name);                                                   \
    CHECK(hak_stats_get(&st) == 0, "stats_get");                                    \
    bool moving = strstr(#name, "idle") || strstr(#name, "decayed") || strstr(#name, "bg_") || \
                  strstr(#name, "purge");                                            \
    CHECK(moving || a == st.name, "stats.%s: ctl %zu, hak_stats_get %zu", #name, a, st.name); \
  }
  HAK_STATS_FIELDS_V1(FIELD_)
  HAK_STATS_FIELDS_V2(FIELD_)
#undef FIELD_
  CHECK(rd("stats.small_bytes_in_use") >= 4096 * 1000, "held blocks not counted");
  unsigned u = 0;
  len = sizeof u;
  CHECK(hak_ctl("stats.nclasses", &u, &len, NULL, 0) == 0 && u == st.nclasses && u > 0, "nclasses");
  CHECK(hak_ctl("stats.version", &u, &len, NULL, 0) == 0 && u == HAK_STATS_VERSION, "stats version");
  for (unsigned c = 0; c < st.nclasses; c += 7) {
    char name[64];
    snprintf(name, sizeof name, "stats.classes.%u.block_size", c);
    CHECK(rd(name) == st.classes[c].block_size && rd(name) > 0, "%s", name);
  }
  /* The class after the last one filled is out of range, whatever
   * HAK_STATS_CLASSES leaves room for. */
  char past[64];
  snprintf(past, sizeof past, "stats.classes.%u.slabs", st.nclasses);
  CHECK(hak_ctl(past, &v, &(size_t){sizeof v}, NULL, 0) == ENOENT, "class out of range (%s)", past);
  snprintf(past, sizeof past, "stats.classes.%u.block_size", st.nclasses - 1);
  CHECK(rd(past) == st.classes[st.nclasses - 1].block_size && rd(past) == 1048576, "the last class (%s)", past);

  /* options */
  uint64_t d = 0, nd = 2500;
  len = sizeof d;
  CHECK(hak_ctl("opt.purge_delay_ms", &d, &len, NULL, 0) == 0 && d == 100, "default purge delay %llu",
        (unsigned long long)d);
  CHECK(hak_ctl("opt.purge_delay_ms", NULL, NULL, &nd, sizeof nd) == 0, "write purge delay");
  CHECK(hak_ctl("opt.purge_delay_ms", &d, &len, NULL, 0) == 0 && d == 2500, "purge delay read back");
  nd = 3600001;
  CHECK(hak_ctl("opt.purge_delay_ms", NULL, NULL, &nd, sizeof nd) == EINVAL, "purge delay range");
  CHECK(hak_ctl("opt.purge_delay_ms", NULL, NULL, &nd, 4) == EINVAL, "purge delay size");
  CHECK(rd("opt.refill_bytes") == 4096, "opt.refill_bytes");
  CHECK(hak_ctl("opt.refill_bytes", NULL, NULL, &v, sizeof v) == EPERM, "other options read-only");
  CHECK(hak_ctl("opt.no_such", &v, &(size_t){sizeof v}, NULL, 0) == ENOENT, "unknown option");
  bool b = !prof;
  len = sizeof b;
  CHECK(hak_ctl("opt.prof", &b, &len, NULL, 0) == 0 && b == prof, "opt.prof");

  /* purge: the freed blocks' slabs are idle (the decay window is now
   * 2.5 s, so they stay resident) and "purge" must give them back. */
  drop(keep, 4096);
  size_t purged = rd("stats.purged_bytes"), collected = rd("stats.collected_bytes");
  CHECK(hak_ctl("purge", &v, &(size_t){sizeof v}, NULL, 0) == EPERM, "an action takes no value");
  CHECK(hak_ctl("purge", NULL, NULL, NULL, 0) == 0, "purge");
  CHECK(rd("stats.purged_bytes") > purged && rd("stats.collected_bytes") > collected,
        "purge returned nothing (purged %zu -> %zu)", purged, rd("stats.purged_bytes"));
  CHECK(hak_ctl("thread.flush", NULL, NULL, NULL, 0) == 0, "thread.flush");

  /* profiling */
  bool on = true;
  const char *none = NULL;
  if (!prof) {
    CHECK(hak_ctl("prof.active", NULL, NULL, &on, sizeof on) == EPERM, "prof.active without PROF");
    CHECK(hak_ctl("prof.dump", NULL, NULL, &none, sizeof none) == EPERM, "prof.dump without PROF");
    puts("hak_ctl ok (profiling off)");
    return 0;
  }
  char base[400], p0[450], p1[450], p2[450];
  snprintf(base, sizeof base, "%s/ctl", argv[2]);
  snprintf(p0, sizeof p0, "%s0", base);
  snprintf(p1, sizeof p1, "%s1", base);
  snprintf(p2, sizeof p2, "%s2", base);
  len = sizeof b;
  CHECK(hak_ctl("prof.active", &b, &len, NULL, 0) == 0 && b, "prof.active starts on");
  size_t smp = 4096;
  CHECK(hak_ctl("prof.sample", NULL, NULL, &smp, sizeof smp) == 0 && rd("prof.sample") == 4096, "prof.sample");
  smp = 0;
  CHECK(hak_ctl("prof.sample", NULL, NULL, &smp, sizeof smp) == EINVAL, "prof.sample 0");
  const char *path = p0;
  CHECK(hak_ctl("prof.dump", NULL, NULL, &path, sizeof path) == 0, "prof.dump");
  CHECK(hak_ctl("prof.dump", &path, &(size_t){sizeof path}, NULL, 0) == EPERM, "prof.dump is write-only");
  const char *bad = "/nonexistent-dir/x";
  CHECK(hak_ctl("prof.dump", NULL, NULL, &bad, sizeof bad) == EFAULT, "prof.dump to a missing directory");
  long n0 = tu_heap_samples(p0);
  /* Off: 8 MiB held at 1 sample per 4 KiB would give ~2000 samples. */
  void **k1, **k2;
  long n1 = samples_after_hold(false, p1, &k1);
  long n2 = samples_after_hold(true, p2, &k2);
  printf("live samples: %ld at start, %ld after 8 MiB with prof.active off, %ld after 8 MiB on\n", n0, n1, n2);
  CHECK(n1 <= n0 + 2, "samples taken while prof.active was off");
  CHECK(n2 >= n1 + 1000, "too few samples at prof.sample=4096");
  drop(k1, 8192);
  drop(k2, 8192);
  puts("hak_ctl ok (profiling on)");
  return 0;
}
