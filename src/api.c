/*
 * api.c — the public hak_ functions (include/hakmem.h).
 *
 * Owns: the exported hak_ names. Each is the fast path from front.h inlined,
 * or a call into alloc.c. override.c compiles this same file with
 * HAK_WITH_OVERRIDE and adds the C library's names as aliases of these
 * functions, so malloc and hak_malloc are one body. Built with
 * HAKMEM_MEMCHECK or HAKMEM_ASAN_POISON, every block handed out or taken
 * back is annotated here (annotate.h); under the tool, calloc and realloc
 * take a simple annotated form (allocate, annotate, then zero or copy).
 * May call: front, alloc, init, ownmap, stats (stats_get, stats_print:
 * the exported hak_stats_get / hak_stats_print start up here first), ctl
 * (ctl_register, from the constructor below); superslab and large (a
 * block's size, for annotation only).
 */
#include "hakmem.h"

#include "alloc.h"
#include "annotate.h"
#include "ctl.h"
#include "front.h"
#include "init.h"
#include "ownmap.h"
#include "stats.h"

#include <errno.h>
#include <string.h>

#if HAK_ANNOTATE
#include "large.h"

/* The usable size of p if it can be a hakmem block (a block start in a slab
 * in use, or a valid large block), else 0: foreign and invalid pointers are
 * left to hakmem's own handling, unannotated. */
static size_t api_ann_size(const void *p) {
  if (p == NULL) return 0;
  unsigned v = ownmap_get(p);
  if (v >= HAK_SMALL_SLAB_SHIFT) {
    const slab_t *s = ss_slab_of(p, v);
    const uint8_t *u = p;
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) == OWNER_UNUSED || s->bsize == 0 ||
        u < s->area || u >= s->area + (size_t)s->capacity * s->bsize || (size_t)(u - s->area) % s->bsize)
      return 0;
    return s->bsize;
  }
  return v != OWN_NONE ? large_usable_size(p, v) : 0;
}
static void *api_ann_out(void *p) {
  size_t n = api_ann_size(p);
  if (n) ann_alloc(p, n);
  return p;
}
/* Before hakmem sees the block again (another thread may reuse it at once). */
static void api_ann_in(void *p) {
  size_t n = api_ann_size(p);
  if (n) ann_free(p, n);
}
static void *api_ann_calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = api_ann_out(front_malloc(total));
  if (p != NULL) memset(p, 0, total);
  return p;
}
/* Always moves (as valgrind's own realloc does): the copy runs on the
 * program's side of the annotations, so memcheck carries the definedness
 * of every byte over. */
static void *api_ann_realloc(void *p, size_t size) {
  if (p == NULL) return api_ann_out(front_malloc(size));
  size_t old = api_ann_size(p);
  if (old == 0) return alloc_realloc(p, size); /* foreign or invalid */
  if (size == 0) {
    ann_free(p, old);
    return alloc_realloc(p, 0);
  }
  void *q = api_ann_out(front_malloc(size));
  if (q == NULL) return NULL;
  memcpy(q, p, old < size ? old : size);
  ann_free(p, old);
  front_free(p);
  return q;
}
#define API_OUT(p) (ann_active() ? api_ann_out(p) : (p))
#define API_IN(p) (ann_active() ? api_ann_in(p) : (void)0)
#define API_CALLOC(n, size) (ann_active() ? api_ann_calloc(n, size) : alloc_calloc(n, size))
#define API_REALLOC(p, size) (ann_active() ? api_ann_realloc(p, size) : alloc_realloc(p, size))
#else
#define API_OUT(p) (p)
#define API_IN(p) ((void)0)
#define API_CALLOC(n, size) alloc_calloc(n, size)
#define API_REALLOC(p, size) alloc_realloc(p, size)
#endif

/* The hit paths start on a cache line: where the linker happened to put
 * them moved random_mixed by 3 % between builds of the same instructions
 * (cachegrind: 111.73 M either way; malloc at 0xf380 against 0xf570). */
#define API_HOT __attribute__((aligned(64)))
HAK_EXPORT API_HOT void *hak_malloc(size_t size) { return API_OUT(front_malloc(size)); }
HAK_EXPORT API_HOT void hak_free(void *p) {
  API_IN(p);
  front_free(p);
}
HAK_EXPORT void *hak_calloc(size_t n, size_t size) { return API_CALLOC(n, size); }
HAK_EXPORT void *hak_realloc(void *p, size_t size) { return API_REALLOC(p, size); }
HAK_EXPORT void *hak_reallocarray(void *p, size_t n, size_t size) {
#if HAK_ANNOTATE
  size_t total;
  if (ann_active() && !__builtin_mul_overflow(n, size, &total)) return api_ann_realloc(p, total);
#endif
  return alloc_reallocarray(p, n, size);
}
HAK_EXPORT API_HOT void hak_free_sized(void *p, size_t size) {
  API_IN(p);
  alloc_free_sized(p, size);
}
HAK_EXPORT void hak_free_aligned_sized(void *p, size_t align, size_t size) {
  (void)align;
  API_IN(p);
  alloc_free_sized(p, size);
}
HAK_EXPORT void *hak_aligned_alloc(size_t align, size_t size) {
  return API_OUT(alloc_aligned_alloc(align, size));
}
HAK_EXPORT void *hak_memalign(size_t align, size_t size) { return API_OUT(alloc_memalign(align, size)); }
HAK_EXPORT int hak_posix_memalign(void **out, size_t align, size_t size) {
  int r = alloc_posix_memalign(out, align, size);
#if HAK_ANNOTATE
  if (r == 0 && ann_active()) api_ann_out(*out);
#endif
  return r;
}
HAK_EXPORT void *hak_valloc(size_t size) { return API_OUT(alloc_valloc(size)); }
HAK_EXPORT void *hak_pvalloc(size_t size) { return API_OUT(alloc_pvalloc(size)); }
HAK_EXPORT size_t hak_usable_size(const void *p) { return front_usable_size(p); }
HAK_EXPORT int hak_owns(const void *p) { return p != NULL && ownmap_get(p) != OWN_NONE; }
HAK_EXPORT void hak_collect(int force) { alloc_collect(force != 0); }

/* A named object, not a literal: src/layout.ld puts this file's literals
 * with the cold data, and tools and benchmarks ask the version at start-up. */
static const char api_version[] = HAK_VERSION_STRING;
HAK_EXPORT const char *hak_version(void) { return api_version; }
HAK_EXPORT HAK_TEXT_COLD int hak_stats_get(struct hak_stats *out) {
  if (out == NULL || out->size < offsetof(struct hak_stats, classes)) return -1;
  init_ensure(); /* the class table is filled at start-up */
  return stats_get(out);
}
HAK_EXPORT HAK_TEXT_COLD void hak_stats_print(FILE *out) {
  init_ensure();
  stats_print(out);
}

/* The report thread's hooks reach init through a registration, not a call
 * from init up to ctl. This file is in every link of the library (it holds
 * malloc), so the constructor always runs; init starts the thread when
 * both this and start-up are done, in whichever order they come. */
__attribute__((constructor)) static void api_register_upper(void) { ctl_register(); }

/* Hidden entry points for the C++ operators (no PLT hop inside the .so). */
/* GCC wants the alias to repeat the target's attributes (copy); clang has
 * no copy attribute and does not ask for it. */
#if defined(__clang__)
#define HAK_COPY_ATTRS(target)
#else
#define HAK_COPY_ATTRS(target) copy(target),
#endif
extern __typeof__(hak_malloc) api_malloc __attribute__((alias("hak_malloc"), HAK_COPY_ATTRS(hak_malloc) used));
extern __typeof__(hak_free) api_free __attribute__((alias("hak_free")));
void *api_aligned(size_t align, size_t size);
void *api_aligned(size_t align, size_t size) { return API_OUT(alloc_aligned(align, size)); }

#ifdef HAK_WITH_OVERRIDE
/* The C library's names, as aliases of the functions above. */
#define HAK_ALIAS(name, target) \
  extern __typeof__(target) name __attribute__((alias(#target), HAK_COPY_ATTRS(target) visibility("default")))
HAK_ALIAS(malloc, hak_malloc);
HAK_ALIAS(free, hak_free);
HAK_ALIAS(calloc, hak_calloc);
HAK_ALIAS(realloc, hak_realloc);
HAK_ALIAS(reallocarray, hak_reallocarray);
HAK_ALIAS(free_sized, hak_free_sized);
HAK_ALIAS(free_aligned_sized, hak_free_aligned_sized);
HAK_ALIAS(aligned_alloc, hak_aligned_alloc);
HAK_ALIAS(memalign, hak_memalign);
HAK_ALIAS(posix_memalign, hak_posix_memalign);
HAK_ALIAS(valloc, hak_valloc);
HAK_ALIAS(pvalloc, hak_pvalloc);
HAK_ALIAS(cfree, hak_free);
/* glibc's internal names, which it exports and some programs and wrapper
 * libraries call directly (their own malloc forwarding to "the real one"):
 * left to glibc, a block from one allocator would be freed into the other. */
HAK_ALIAS(__libc_malloc, hak_malloc);
HAK_ALIAS(__libc_free, hak_free);
HAK_ALIAS(__libc_calloc, hak_calloc);
HAK_ALIAS(__libc_realloc, hak_realloc);
HAK_ALIAS(__libc_reallocarray, hak_reallocarray);
HAK_ALIAS(__libc_memalign, hak_memalign);
HAK_ALIAS(__libc_valloc, hak_valloc);
HAK_ALIAS(__libc_pvalloc, hak_pvalloc);

/* glibc's introspection calls, answered from hakmem's figures. */
#include <malloc.h>
/* A function, not an alias: glibc declares it without const. */
HAK_EXPORT size_t malloc_usable_size(void *p) { return front_usable_size(p); }
HAK_EXPORT HAK_TEXT_COLD void malloc_stats(void) { hak_stats_print(stderr); }

HAK_EXPORT HAK_TEXT_COLD struct mallinfo2 mallinfo2(void) {
  struct hak_stats st;
  st.size = sizeof st;
  hak_stats_get(&st);
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = st.small_bytes_reserved + st.large_arenas * ((size_t)128 << 20);
  mi.ordblks = st.superslabs;
  mi.hblks = st.large_mappings;
  mi.hblkhd = st.large_mapping_bytes;
  mi.uordblks = st.small_bytes_in_use + st.large_arena_bytes_in_use;
  mi.fordblks = mi.arena > mi.uordblks ? mi.arena - mi.uordblks : 0;
  return mi;
}

HAK_EXPORT HAK_TEXT_COLD struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = (int)m2.arena;
  mi.ordblks = (int)m2.ordblks;
  mi.hblks = (int)m2.hblks;
  mi.hblkhd = (int)m2.hblkhd;
  mi.uordblks = (int)m2.uordblks;
  mi.fordblks = (int)m2.fordblks;
  return mi;
}

HAK_EXPORT HAK_TEXT_COLD int malloc_trim(size_t pad) {
  (void)pad;
  struct hak_stats before, after;
  before.size = after.size = sizeof before;
  hak_stats_get(&before);
  alloc_collect(true);
  hak_stats_get(&after);
  return after.purged_bytes > before.purged_bytes || after.mapped_bytes < before.mapped_bytes;
}

HAK_EXPORT HAK_TEXT_COLD int malloc_info(int options, FILE *fp) {
  if (options != 0 || fp == NULL) {
    errno = EINVAL;
    return -1;
  }
  struct hak_stats st;
  st.size = sizeof st;
  hak_stats_get(&st);
  fprintf(fp, "<malloc version=\"hakmem-%s\">\n", hak_version());
  for (unsigned c = 0; c < st.nclasses; c++)
    if (st.classes[c].slabs)
      fprintf(fp, "<size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n",
              st.classes[c].block_size, st.classes[c].block_size,
              st.classes[c].blocks_capacity - st.classes[c].blocks_in_use, st.classes[c].blocks_in_use);
  fprintf(fp, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", st.large_mappings, st.large_mapping_bytes);
  fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n", st.mapped_bytes);
  fprintf(fp, "<system type=\"max\" size=\"%zu\"/>\n", st.mapped_peak_bytes);
  fprintf(fp, "</malloc>\n");
  return 0;
}
#endif
