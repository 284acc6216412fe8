/*
 * foreign.c — the next allocator (see foreign.h).
 *
 * glibc's entry points are found in its own symbol table (foreign_glibc_sym):
 * hakmem exports both malloc and glibc's __libc_malloc names, so nothing
 * that looks a name up in the global scope reaches glibc any more. On
 * another C library, RTLD_NEXT.
 */
#include "foreign.h"
#include "options.h"
#include "os.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <gnu/lib-names.h>
#include <malloc.h>
#include <stdlib.h>

/* glibc's own definition of name, read from its dynamic symbol table in
 * memory (the GNU hash table that ld.so itself uses), without dlsym, which
 * may allocate, and without symbol interposition: libhakmem.so exports
 * malloc and __libc_malloc itself, so any lookup by name through the
 * global scope would find hakmem again. NULL if glibc is not loaded. */
typedef struct {
  const char *name;
  void *found;
} foreign_lookup_t;

static uint32_t foreign_gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

static int foreign_lookup_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  foreign_lookup_t *q = data;
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  if (strcmp(slash ? slash + 1 : (info->dlpi_name ? info->dlpi_name : ""), LIBC_SO) != 0) return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (dyn == NULL) return 1;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnu_hash = NULL;
  const ElfW(Half) *versym = NULL;
  /* ld.so relocates these entries in place where .dynamic is writable
   * (x86-64); an address below the load base is still unrelocated. */
#define FOREIGN_PTR(type, v) ((type)((v) < info->dlpi_addr ? (v) + info->dlpi_addr : (v)))
  for (; dyn->d_tag != DT_NULL; dyn++) {
    if (dyn->d_tag == DT_SYMTAB) symtab = FOREIGN_PTR(const ElfW(Sym) *, dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_STRTAB) strtab = FOREIGN_PTR(const char *, dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_GNU_HASH) gnu_hash = FOREIGN_PTR(const uint32_t *, dyn->d_un.d_ptr);
    if (dyn->d_tag == DT_VERSYM) versym = FOREIGN_PTR(const ElfW(Half) *, dyn->d_un.d_ptr);
  }
#undef FOREIGN_PTR
  if (symtab == NULL || strtab == NULL || gnu_hash == NULL) return 1;
  uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_size = gnu_hash[2];
  const uint32_t *buckets = gnu_hash + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t h = foreign_gnu_hash(q->name);
  if (nbuckets == 0) return 1;
  for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; i++) {
    uint32_t ch = chain[i - symoffset];
    const ElfW(Sym) *sym = &symtab[i];
    /* versym bit 15: a hidden (non-default) version, not what a plain
     * reference to the name binds to. */
    if ((ch | 1) == (h | 1) && strcmp(strtab + sym->st_name, q->name) == 0 && sym->st_shndx != SHN_UNDEF &&
        ELF64_ST_TYPE(sym->st_info) == STT_FUNC && (versym == NULL || (versym[i] & 0x8000) == 0)) {
      q->found = (void *)(info->dlpi_addr + sym->st_value);
      return 1;
    }
    if (ch & 1) break;
  }
  return 1;
}

static void *foreign_glibc_sym(const char *name) {
  foreign_lookup_t q = {name, NULL};
  dl_iterate_phdr(foreign_lookup_cb, &q);
  return q.found;
}

static void *foreign_sym(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    os_write_err("hakmem: no next allocator for ");
    os_write_err(name);
    os_write_err("\n");
    abort();
  }
  return f;
}

/* glibc's own definition of name, else the next object's (other C
 * libraries). Not RTLD_NEXT first: it finds the next object that defines
 * the name, which is not glibc when the program links another allocator
 * (Debian's redis-server links jemalloc), and jemalloc's
 * malloc_usable_size handed a glibc block crashes. Resolved once per entry
 * point; a race resolves twice to the same address. */
static void *foreign_libc_sym(const char *name) {
  void *f = foreign_glibc_sym(name);
  return f != NULL ? f : foreign_sym(name);
}

#define FOREIGN_FN(var, name, type)                                      \
  static __typeof__(type) var##_cached;                                  \
  __typeof__(type) var = __atomic_load_n(&var##_cached, __ATOMIC_RELAXED); \
  if (__builtin_expect(var == NULL, 0)) {                                \
    var = (type)foreign_libc_sym(name);                                  \
    __atomic_store_n(&var##_cached, var, __ATOMIC_RELAXED);              \
  }

/* Set once glibc's allocator is known to hold blocks (sticky). */
static _Atomic bool foreign_in_use;

static void foreign_note_use(void) {
  if (!atomic_load_explicit(&foreign_in_use, memory_order_relaxed))
    atomic_store_explicit(&foreign_in_use, true, memory_order_relaxed);
}

static bool foreign_has_blocks(void) {
  if (atomic_load_explicit(&foreign_in_use, memory_order_relaxed)) return true;
  /* glibc's own accounting (libhakmem.so defines mallinfo2 too: the
   * lookup asks glibc's object itself). Blocks from before hakmem was loaded, or
   * from direct __libc_malloc calls, show up here. Looked up once (a
   * symbol-table walk per call made every bad free pay it): 1 stands for
   * "not there". */
  static void *mi_cached;
  void *f = __atomic_load_n(&mi_cached, __ATOMIC_RELAXED);
  if (f == NULL) {
    f = foreign_glibc_sym("mallinfo2");
    if (f == NULL) f = (void *)1;
    __atomic_store_n(&mi_cached, f, __ATOMIC_RELAXED);
  }
  if (f == (void *)1) return true; /* cannot tell: trust the caller */
  struct mallinfo2 (*mi)(void) = (struct mallinfo2(*)(void))f;
  struct mallinfo2 m = mi();
  if (m.uordblks == 0 && m.hblkhd == 0) return false;
  foreign_note_use();
  return true;
}

bool foreign_owns(const void *p) {
  if (opt.force_libc) return true;
  uintptr_t a = (uintptr_t)p;
  if (a & 15 || a < 4096) return false; /* glibc chunks are 16-byte aligned */
  if (!foreign_has_blocks()) return false;
  if (!os_is_readable((const void *)(a - 8))) return false;
  size_t word = ((const size_t *)p)[-1];
  size_t csize = word & ~(size_t)7;
  return csize >= 32 && (csize & 15) == 0 && csize < ((size_t)1 << 47);
}

void *foreign_malloc(size_t size) {
  foreign_note_use();
  FOREIGN_FN(next, "malloc", void *(*)(size_t));
  return next(size);
}
void *foreign_calloc(size_t n, size_t size) {
  foreign_note_use();
  FOREIGN_FN(next, "calloc", void *(*)(size_t, size_t));
  return next(n, size);
}
void *foreign_realloc(void *p, size_t size) {
  foreign_note_use();
  FOREIGN_FN(next, "realloc", void *(*)(void *, size_t));
  return next(p, size);
}
void *foreign_memalign(size_t align, size_t size) {
  foreign_note_use();
  FOREIGN_FN(next, "memalign", void *(*)(size_t, size_t));
  return next(align, size);
}
void foreign_free(void *p) {
  if (p == NULL) return;
  FOREIGN_FN(next, "free", void (*)(void *));
  next(p);
}

size_t foreign_usable_size(void *p) {
  if (p == NULL) return 0;
  FOREIGN_FN(next, "malloc_usable_size", size_t (*)(void *));
  return next(p);
}
