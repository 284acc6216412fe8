/*
 * test_footprint.c — what libhakmem.so costs a small process (src/layout.ld,
 * docs/footprint.md). Run with the library preloaded (LD_PRELOAD, set by
 * CTest); not linked to it.
 *
 * A small program's worth of allocator calls first (100 mallocs of 16 B..
 * 1000 B written, calloc, realloc, aligned_alloc, C-level frees, a thread
 * that allocates and exits, a fork, a free block of 20000 B and 400 ms of
 * sleep, long enough for the purge thread to give that block back as it
 * does in every program with a sleeping thread; then dladdr of malloc and
 * hak_version(), as the benchmarks do), then, from /proc/self/pagemap over
 * the library's PT_LOAD segments:
 *   - no page of the cold code, the warm code (large blocks, valloc, ...) or
 *     the cold read-only data is mapped (a function every process runs that
 *     lies among them maps up to 64 KiB: a cold file's start-up hook not
 *     marked HAK_TEXT_HOT, a warm function that became part of every
 *     allocation, ...);
 *   - the library's file pages in all take at most 96 KiB (48 KiB
 *     measured), its own written pages: RELRO and the globals at most
 *     12 KiB (12 measured: the RELRO page and the two pages the small
 *     globals span; RELRO outgrowing its page is the likely extra one),
 *     the ownership map at most 12 KiB (4 or 8 measured: one page per
 *     32 MiB window holding a mapping of ours, as the kernel places them).
 * Then, from the library file: the hot code segment fits in one 64 KiB
 * fault-around window, and the exported entry points lie where they should
 * (malloc, free, operator new/delete hot; hak_ctl, hak_stats_get,
 * malloc_info, hak_prof_dump cold), and every function the library imports
 * is one of allowed_imports (each libc function it runs maps 64 KiB of libc
 * text around it in every process that runs it).
 *
 * Exit 77 (skipped) when the library was linked without the layout (no
 * .text.hak_cold section) or is a debug build (its checkers run in the cold
 * heap_check.c at every slow path). Every figure is printed.
 */
#define _GNU_SOURCE
#include "check.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024ul
#define MAX_SEGS 16

typedef struct seg {
  uintptr_t lo, hi; /* page-rounded range in this process */
  unsigned flags;   /* PF_R / PF_W / PF_X */
  size_t filesz;
  unsigned long file_pages, anon_pages; /* resident, from pagemap */
} seg_t;

static seg_t segs[MAX_SEGS];
/* Addresses of the written pages counted (in load order), for telling the
 * ownership map's pages from the rest once the file's sections are read. */
#define MAX_WRITTEN 256
static uintptr_t written[MAX_WRITTEN];
static int nwritten;
static int nsegs;
static uintptr_t lib_base;
static char lib_path[4096];

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libhakmem") == NULL) return 0;
  snprintf(lib_path, sizeof lib_path, "%s", info->dlpi_name);
  lib_base = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum && nsegs < MAX_SEGS; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    seg_t *s = &segs[nsegs++];
    s->lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)4095;
    s->hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + 4095) & ~(uintptr_t)4095;
    s->flags = ph->p_flags;
    s->filesz = ph->p_filesz;
  }
  return 1;
}

/* Resident pages of each segment: file pages (bit 61) and pages written by
 * this process (present, exclusively mapped, not file: the zero page of a
 * BSS page that was only read is neither). */
static void count_resident(void) {
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  CHECK(pm >= 0, "cannot open /proc/self/pagemap");
  for (int i = 0; i < nsegs; i++) {
    seg_t *s = &segs[i];
    s->file_pages = s->anon_pages = 0;
    for (uintptr_t a = s->lo; a < s->hi; a += 4096) {
      uint64_t e;
      if (pread(pm, &e, sizeof e, (off_t)(a / 4096 * sizeof e)) != (ssize_t)sizeof e) break;
      if (!(e >> 63 & 1)) continue;
      if (e >> 61 & 1)
        s->file_pages++;
      else if (e >> 56 & 1) {
        s->anon_pages++;
        if (nwritten < MAX_WRITTEN) written[nwritten++] = a;
      }
    }
  }
  close(pm);
}

static void *thread_work(void *arg) {
  void *p[64];
  for (int i = 0; i < 64; i++) p[i] = malloc(16 + (size_t)i * 24);
  for (int i = 0; i < 64; i++) free(p[i]);
  return arg;
}

/* What a small program does with its allocator. */
static void workload(void) {
  void *p[100];
  unsigned x = 12345;
  for (int i = 0; i < 100; i++) {
    x = x * 1103515245u + 12345u;
    size_t n = 16 + (x >> 8) % 985;
    p[i] = malloc(n);
    CHECK(p[i] != NULL, "malloc(%zu)", n);
    memset(p[i], i, n);
  }
  void *c = calloc(10, 100);
  CHECK(c != NULL, "calloc");
  c = realloc(c, 3000);
  CHECK(c != NULL, "realloc");
  void *a = aligned_alloc(64, 640);
  CHECK(a != NULL, "aligned_alloc");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_work, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) _exit(0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child");
  for (int i = 0; i < 100; i++) free(p[i]);
  free(c);
  free(a);
  /* A program that sleeps holding a free block of 8 KiB or more: once it
   * has been idle for the purge delay, the purge thread gives the block's
   * pages back (heap_idle_cool), so that code runs in most programs with
   * threads and must not lie in the cold code. */
  char *big = malloc(20000);
  CHECK(big != NULL, "malloc(20000)");
  memset(big, 1, 20000);
  free(big);
  usleep(400 * 1000);
}

/* ---- the library file ----------------------------------------------------- */

static unsigned char *file;
static size_t file_len;

static void read_lib(void) {
  int fd = open(lib_path, O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0, "cannot open %s", lib_path);
  size_t cap = 1 << 20;
  file = malloc(cap);
  CHECK(file != NULL, "malloc");
  ssize_t n;
  while ((n = read(fd, file + file_len, cap - file_len)) > 0) {
    file_len += (size_t)n;
    if (file_len == cap) {
      file = realloc(file, cap *= 2);
      CHECK(file != NULL, "realloc");
    }
  }
  close(fd);
  CHECK(file_len > sizeof(Elf64_Ehdr) && memcmp(file, ELFMAG, SELFMAG) == 0 && file[EI_CLASS] == ELFCLASS64,
        "%s is not a 64-bit ELF file", lib_path);
}

static const Elf64_Shdr *section(const char *name) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
  const char *names = (const char *)file + sh[eh->e_shstrndx].sh_offset;
  for (int i = 0; i < eh->e_shnum; i++)
    if (strcmp(names + sh[i].sh_name, name) == 0) return &sh[i];
  return NULL;
}

/* The address (in the file's terms) of an exported symbol, 0 if absent. */
static uint64_t dynsym(const char *name) {
  const Elf64_Shdr *ds = section(".dynsym"), *dstr = section(".dynstr");
  CHECK(ds != NULL && dstr != NULL, "no .dynsym");
  const Elf64_Sym *sym = (const Elf64_Sym *)(file + ds->sh_offset);
  for (size_t i = 0; i < ds->sh_size / sizeof *sym; i++)
    if (sym[i].st_value != 0 && strcmp((const char *)file + dstr->sh_offset + sym[i].st_name, name) == 0)
      return sym[i].st_value;
  return 0;
}

/* What libhakmem may call outside itself. Each libc function a process
 * runs maps the 64 KiB of libc text around it (fault-around), so a call on
 * start-up or on every thread's path costs every process that window
 * (docs/footprint.md: sched_getaffinity and CPU_COUNT once cost 60-80 KiB
 * of VmHWM a process). A new import belongs on a rare path, or is the raw
 * system call (syscall() lies in mmap's window); add it here once checked
 * with perf record -e page-faults -d. Names a compiler may add are listed
 * too (the list may hold more than a build imports). */
static const char *const allowed_imports[] = {
    "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__gmon_start__", "__cxa_atexit",
    "__cxa_finalize", "__environ", "environ", "__errno_location", "__pthread_key_create", "__register_atfork",
    "_dl_find_object", "abort", "close", "dl_iterate_phdr", "dladdr", "dlsym", "fcntl", "fprintf", "fputs",
    "fstat", "fwrite", "getauxval", "getpid", "getrandom", "madvise", "memcpy", "memmove", "memset", "mincore",
    "mmap", "mprotect", "mremap", "munmap", "nanosleep", "open", "pipe2", "pread", "process_vm_readv",
    "pthread_attr_destroy", "pthread_attr_init", "pthread_attr_setdetachstate", "pthread_attr_setstacksize",
    "pthread_cond_broadcast", "pthread_cond_init", "pthread_cond_signal", "pthread_cond_timedwait",
    "pthread_cond_wait", "pthread_condattr_destroy", "pthread_condattr_init", "pthread_condattr_setclock",
    "pthread_create", "pthread_key_create", "pthread_mutex_init", "pthread_mutex_lock", "pthread_mutex_trylock",
    "pthread_mutex_unlock", "pthread_once", "pthread_self", "pthread_setname_np", "pthread_setspecific",
    "pthread_sigmask", "read", "sched_yield", "sigaction", "sigfillset", "snprintf", "stderr", "strchr", "strcmp",
    "strlen", "strncmp", "strrchr", "strstr", "strtoul", "syscall", "vsnprintf", "write"};

static void check_imports(void) {
  const Elf64_Shdr *ds = section(".dynsym"), *dstr = section(".dynstr");
  CHECK(ds != NULL && dstr != NULL, "no .dynsym");
  const Elf64_Sym *sym = (const Elf64_Sym *)(file + ds->sh_offset);
  unsigned n = 0;
  for (size_t i = 1; i < ds->sh_size / sizeof *sym; i++) {
    if (sym[i].st_shndx != SHN_UNDEF) continue;
    const char *name = (const char *)file + dstr->sh_offset + sym[i].st_name;
    bool known = false;
    for (size_t k = 0; k < sizeof allowed_imports / sizeof allowed_imports[0] && !known; k++)
      known = strcmp(name, allowed_imports[k]) == 0;
    CHECK(known,
          "libhakmem imports %s, which is not in allowed_imports: a libc function every process runs maps "
          "64 KiB of libc (docs/footprint.md); keep it off start-up and common paths, then list it",
          name);
    n++;
  }
  printf("  imports: %u, each in allowed_imports\n", n);
}

/* The index among segs of the segment holding file address v. */
static int seg_of(uint64_t v) {
  for (int i = 0; i < nsegs; i++)
    if (lib_base + v >= segs[i].lo && lib_base + v < segs[i].hi) return i;
  return -1;
}

int main(void) {
  workload();
  /* What the benchmarks ask at start-up: which file malloc comes from, and
   * hakmem's version. */
  Dl_info info;
  CHECK(dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) != 0 && info.dli_fname != NULL, "dladdr(malloc)");
  const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "hak_version");
  CHECK(version != NULL && version()[0] != 0, "no hak_version");
  dl_iterate_phdr(find_lib, NULL);
  CHECK(nsegs > 0, "libhakmem is not loaded: run with LD_PRELOAD=.../libhakmem.so");
  count_resident();

  read_lib();
  if (section(".text.hak_cold") == NULL) {
    printf("%s was linked without src/layout.ld: skipped\n", lib_path);
    return 77;
  }
  if (strstr(version(), "debug") != NULL) {
    printf("debug build (its checkers are cold code run at every slow path): skipped\n");
    return 77;
  }

  /* The segments, in load order: R (headers), R X (hot), R (cold data),
   * R X (warm), R (unwind tables), R X (cold), RW. */
  int hot = -1, cold = -1, rw = -1;
  unsigned long file_kib = 0, anon_kib = 0;
  printf("%s (%s)\n", lib_path, version());
  for (int i = 0; i < nsegs; i++) {
    seg_t *s = &segs[i];
    printf("  segment %d %c%c%c %6zu bytes in file: %3lu KiB file pages, %3lu KiB written pages resident\n", i,
           s->flags & PF_R ? 'R' : '-', s->flags & PF_W ? 'W' : '-', s->flags & PF_X ? 'X' : '-', s->filesz,
           s->file_pages * 4, s->anon_pages * 4);
    file_kib += s->file_pages * 4;
    anon_kib += s->anon_pages * 4;
    if (s->flags & PF_X) {
      if (hot < 0) hot = i;
      cold = i;
    } else if (s->flags & PF_W) {
      rw = i;
    }
  }
  printf("  in all: %lu KiB file pages, %lu KiB written pages\n", file_kib, anon_kib);
  CHECK(hot == 1 && cold > hot + 1 && rw == nsegs - 1 && rw > cold,
        "expected the segments R (headers), R X (hot), ..., R X (cold), RW");
  /* Between the hot code and the data: nothing a small program reaches. */
  for (int i = hot + 1; i < rw; i++) {
    const char *what = i == cold ? "cold code" : segs[i].flags & PF_X ? "warm code" : "cold read-only data";
    CHECK(segs[i].file_pages == 0,
          "%lu KiB of the %s (segment %d) are resident: something every process runs or reads lies there "
          "(src/layout.ld; perf record -e page-faults -d shows which)",
          segs[i].file_pages * 4, what, i);
  }
  CHECK(file_kib <= 96, "libhakmem's file pages: %lu KiB resident, more than 96 KiB", file_kib);
  /* The written pages: RELRO, the small globals (.data and .bss: 4.4 KiB,
   * so two pages), and the big tables (.bss.hak_big: the ownership map and
   * the profiler's buffers) as far as they were touched. The ownership map
   * takes one page for each 32 MiB window of address space that holds a
   * mapping of ours, so one or two here as the kernel places them. */
  const Elf64_Shdr *big = section(".bss.hak_big");
  CHECK(big != NULL, "no .bss.hak_big section");
  unsigned long big_kib = 0;
  for (int i = 0; i < nwritten; i++)
    if (written[i] >= lib_base + big->sh_addr && written[i] < lib_base + big->sh_addr + big->sh_size) big_kib += 4;
  printf("  written: %lu KiB of RELRO and globals, %lu KiB of the big tables (the ownership map)\n",
         anon_kib - big_kib, big_kib);
  CHECK(anon_kib - big_kib <= 12,
        "libhakmem's RELRO and globals: %lu KiB written, more than 12 KiB (RELRO over one page? docs/footprint.md)",
        anon_kib - big_kib);
  CHECK(big_kib <= 12, "libhakmem's big tables: %lu KiB written, more than 12 KiB (the ownership map for a "
                       "small program's few mappings is one or two pages)", big_kib);
  CHECK(segs[hot].filesz <= 64 * KIB,
        "the hot code is %zu bytes, more than one 64 KiB fault-around window: move what a normal run never "
        "reaches to the cold code (HAK_TEXT_COLD, src/layout.ld)",
        segs[hot].filesz);

  static const char *const hot_names[] = {"malloc", "free", "calloc", "realloc", "posix_memalign",
                                          "aligned_alloc", "malloc_usable_size", "hak_malloc", "hak_free",
                                          "_Znwm", "_ZdlPv", "_ZdlPvm"};
  static const char *const cold_names[] = {"hak_ctl", "hak_stats_get", "hak_stats_print", "hak_prof_dump",
                                           "malloc_info", "mallinfo2", "malloc_stats"};
  for (size_t i = 0; i < sizeof hot_names / sizeof hot_names[0]; i++) {
    uint64_t v = dynsym(hot_names[i]);
    CHECK(v != 0, "%s is not exported", hot_names[i]);
    CHECK(seg_of(v) == hot, "%s is not in the hot code (segment %d)", hot_names[i], seg_of(v));
  }
  for (size_t i = 0; i < sizeof cold_names / sizeof cold_names[0]; i++) {
    uint64_t v = dynsym(cold_names[i]);
    CHECK(v != 0, "%s is not exported", cold_names[i]);
    CHECK(seg_of(v) == cold, "%s is not in the cold code (segment %d)", cold_names[i], seg_of(v));
  }
  check_imports();
  free(file);
  printf("ok\n");
  return 0;
}
