/*
 * prof_symbol.c — naming the frames of the profiler's dumps (see
 * prof_impl.h): dladdr, and for functions without a dynamic symbol the
 * static symbol table (.symtab) of the ELF file, mapped read-only; which
 * frames are the allocator's own. Promises: allocates nothing (it runs
 * under prof_lock and the dump lock). May call: prof (the address of
 * prof_alloc, to find its own file), dladdr, the process's ELF files.
 */
#include "prof.h"
#include "prof_impl.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- naming frames ---------------------------------------------------------- */

/* A program not linked with -rdynamic has no dynamic symbols for its own
 * functions, so dladdr can name only the file. The static symbol table
 * (.symtab, present unless the binary was stripped) still has them: the
 * dump maps the file read-only and searches it. One file is kept mapped
 * between lookups (frames of one dump come mostly from the same file) and
 * unmapped at the end of the dump. */
typedef struct prof_elf {
  const void *fbase; /* dladdr's load address of the file mapped, or NULL */
  void *map;
  size_t len;
  const ElfW(Sym) *syms;
  size_t nsyms;
  const char *strs;
  size_t strs_len;
  uintptr_t bias; /* run-time address minus symbol value */
} prof_elf_t;

/* A stack alternates between files (program, libc, program again), so a
 * few are kept, replaced round-robin; all are unmapped after each dump. */
#define PROF_ELF_CACHE 4
static prof_elf_t prof_elfs[PROF_ELF_CACHE];
static unsigned prof_elf_next;

void prof_elf_close(void) {
  for (unsigned i = 0; i < PROF_ELF_CACHE; i++) {
    if (prof_elfs[i].map != NULL) munmap(prof_elfs[i].map, prof_elfs[i].len);
    memset(&prof_elfs[i], 0, sizeof prof_elfs[i]);
  }
}

/* dl_iterate_phdr reports the main program first: keep its load address
 * as dladdr would give it (the start of its lowest PT_LOAD segment). */
static int prof_main_base_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  uintptr_t lowest = UINTPTR_MAX;
  for (unsigned i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lowest)
      lowest = info->dlpi_phdr[i].p_vaddr & ~(uintptr_t)4095;
  *(uintptr_t *)arg = lowest == UINTPTR_MAX ? 0 : info->dlpi_addr + lowest;
  return 1; /* stop after the first */
}

/* The file dladdr named, or /proc/self/exe for the main program, whose
 * name from dladdr is argv[0] (maybe relative, maybe not a path at all).
 * Nothing here may allocate: callers hold prof_lock, which a free in
 * this thread would want again. */
static int prof_elf_open_for(const Dl_info *fi) {
  uintptr_t main_base = 0;
  dl_iterate_phdr(prof_main_base_cb, &main_base);
  int fd = -1;
  bool is_main = (uintptr_t)fi->dli_fbase == main_base || fi->dli_fname == NULL || fi->dli_fname[0] != '/';
  if (!is_main) fd = open(fi->dli_fname, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  return fd;
}

/* The cache entry for fi's file, loaded if need be; NULL if that file has
 * no usable .symtab (remembered too, so it is not opened again). */
static const prof_elf_t *prof_elf_load(const Dl_info *fi) {
  for (unsigned i = 0; i < PROF_ELF_CACHE; i++)
    if (prof_elfs[i].fbase == fi->dli_fbase && fi->dli_fbase != NULL)
      return prof_elfs[i].syms != NULL ? &prof_elfs[i] : NULL;
  prof_elf_t *e = &prof_elfs[prof_elf_next++ % PROF_ELF_CACHE];
  if (e->map != NULL) munmap(e->map, e->len);
  memset(e, 0, sizeof *e);
  e->fbase = fi->dli_fbase;
  int fd = prof_elf_open_for(fi);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
    close(fd);
    return NULL;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return NULL;
  e->map = m;
  e->len = (size_t)st.st_size;
  const ElfW(Ehdr) *eh = m;
  /* Every offset read from the file is bounds-checked: the file may be
   * anything (replaced on disk since the program started, truncated). */
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff == 0 || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > e->len ||
      eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) > e->len)
    return NULL;
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)((const char *)m + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const ElfW(Shdr) *str = &sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > e->len || str->sh_offset + str->sh_size > e->len) return NULL;
    e->syms = (const ElfW(Sym) *)((const char *)m + sh[i].sh_offset);
    e->nsyms = sh[i].sh_size / sizeof(ElfW(Sym));
    e->strs = (const char *)m + str->sh_offset;
    e->strs_len = str->sh_size;
    break;
  }
  /* dladdr's base is where the lowest PT_LOAD segment begins; for a
   * position-independent file symbol values are relative to the file's
   * own lowest vaddr, for a fixed-address one they are absolute. */
  uintptr_t lowest = UINTPTR_MAX;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)m + eh->e_phoff);
  for (unsigned i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lowest) lowest = ph[i].p_vaddr & ~(uintptr_t)4095;
  e->bias = eh->e_type == ET_DYN && lowest != UINTPTR_MAX ? (uintptr_t)fi->dli_fbase - lowest : 0;
  return e->syms != NULL ? e : NULL;
}

/* The function of the .symtab containing ip, or NULL. */
static const char *prof_elf_name(void *ip, const Dl_info *fi) {
  const prof_elf_t *e = prof_elf_load(fi);
  if (e == NULL) return NULL;
  uintptr_t a = (uintptr_t)ip - e->bias;
  const ElfW(Sym) *best = NULL;
  for (size_t i = 0; i < e->nsyms; i++) {
    const ElfW(Sym) *y = &e->syms[i];
    if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || y->st_value == 0 || y->st_name >= e->strs_len) continue;
    /* Inside [value, value+size), or the nearest below for size-less ones. */
    if (a >= y->st_value && (a < y->st_value + y->st_size ||
                             (y->st_size == 0 && (best == NULL || y->st_value > best->st_value))))
      best = y;
    if (best == y && y->st_size != 0) break;
  }
  return best ? e->strs + best->st_name : NULL;
}

/* Frames inside the allocator (its own functions or library) say nothing
 * about the program: drop them from the top of each stack. */
bool prof_frame_is_ours(void *ip) {
  Dl_info me, fi;
  if (dladdr((void *)prof_alloc, &me) && dladdr(ip, &fi)) {
    if (fi.dli_fbase == me.dli_fbase && strstr(me.dli_fname, "hakmem") != NULL) return true;
    const char *s = fi.dli_sname;
    /* Linked statically into a program: our functions are in its file and
     * may have only static symbols; their component prefixes tell them. */
    if (s == NULL && fi.dli_fbase == me.dli_fbase) s = prof_elf_name(ip, &fi);
    if (s && (!strncmp(s, "hak_", 4) || !strncmp(s, "heap_", 5) || !strncmp(s, "prof_", 5) ||
              !strncmp(s, "alloc_", 6) || !strncmp(s, "large_", 6) || !strcmp(s, "malloc") ||
              !strcmp(s, "calloc") || !strcmp(s, "realloc") || !strcmp(s, "aligned_alloc") ||
              !strcmp(s, "posix_memalign") || !strcmp(s, "memalign") || !strncmp(s, "_Zn", 3)))
      return true;
  }
  return false;
}

void prof_frame_name(void *ip, char *out, size_t cap) {
  Dl_info fi;
  const char *sym = NULL;
  if (dladdr(ip, &fi)) {
    sym = fi.dli_sname;
    if (sym == NULL && fi.dli_fname != NULL) sym = prof_elf_name(ip, &fi);
  }
  if (sym != NULL) {
    snprintf(out, cap, "%s", sym);
  } else if (dladdr(ip, &fi) && fi.dli_fname != NULL) {
    const char *base = strrchr(fi.dli_fname, '/');
    snprintf(out, cap, "%s+0x%lx", base ? base + 1 : fi.dli_fname,
             (unsigned long)((uintptr_t)ip - (uintptr_t)fi.dli_fbase));
  } else {
    snprintf(out, cap, "0x%lx", (unsigned long)(uintptr_t)ip);
  }
  for (char *c = out; *c; c++)
    if (*c == ';' || *c == ' ') *c = '_'; /* folded-stack separators */
}
