/*
 * os.c — the kernel interface: mappings, decommit, clock, stderr.
 *
 * Owns: all mmap/munmap/mremap/madvise calls of the allocator (nothing else
 * in hakmem calls them) and the OS-level counters. Promises: failures return
 * NULL/false with no side effect; aligned mappings are trimmed so that only
 * [base, base+size) stays mapped. May call: libc syscall wrappers, annotate.
 */
#include "os.h"
#include "annotate.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

os_stats_t os_stats;
size_t os_page_size = 4096;

/* Where the next aligned mapping is attempted first: Linux hands out
 * addresses top-down, so asking just below the previous aligned mapping
 * usually yields an aligned range at the cost of one mmap. */
static _Atomic uintptr_t os_hint;
/* HAKMEM_THP, handed over by init.c once the options are read (the bottom
 * layer reads no option itself). */
static int os_thp = OS_THP_NEVER;

void os_set_thp(int mode) { os_thp = mode; }

/* The kernel's clock_gettime in the vDSO, called directly: libc's wrapper
 * calls the same function, but running the wrapper faults in the 64 KiB of
 * libc's text around it (fault-around), which a small program does not
 * otherwise touch: 64 KiB more resident in every process that allocates
 * (docs/footprint.md). NULL before os_init, or where there is no vDSO (or
 * no such symbol in it): the system call. */
typedef int (*os_gettime_fn)(clockid_t, struct timespec *);
static os_gettime_fn os_vdso_gettime;

/* The number of symbols of the vDSO's dynamic symbol table: from DT_HASH's
 * chain count, else from DT_GNU_HASH (the highest symbol a bucket or chain
 * reaches). 0 if neither is there. */
static size_t os_vdso_nsyms(const uint32_t *hash, const uint32_t *gnu) {
  if (hash != NULL) return hash[1];
  if (gnu == NULL) return 0;
  uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2];
  const uint32_t *buckets = gnu + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < nbuckets; i++)
    if (buckets[i] > last) last = buckets[i];
  if (last < symoffset) return symoffset;
  while ((chain[last - symoffset] & 1) == 0) last++;
  return (size_t)last + 1;
}

/* x86-64's name, and arm64's / riscv's. Writable data on purpose: as
 * literals they would join the hot read-only data, and RELRO would pass
 * one page (docs/footprint.md, "Keeping it so"); .data's page is written
 * at start-up anyway. */
static char os_vdso_names[2][24] = {"__vdso_clock_gettime", "__kernel_clock_gettime"};

/* Find clock_gettime in the ELF image the kernel maps (AT_SYSINFO_EHDR):
 * its program headers give the load bias and the dynamic section, that
 * gives the symbol and string tables. The kernel's own selftest
 * (parse_vdso.c) and Go's runtime read it the same way. */
static os_gettime_fn os_vdso_lookup(void) {
  uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return NULL;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return NULL;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
  uintptr_t bias = 0;
  bool loaded = false;
  const ElfW(Dyn) *dyn = NULL;
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type == PT_LOAD && !loaded) {
      bias = base + ph[i].p_offset - ph[i].p_vaddr;
      loaded = true;
    } else if (ph[i].p_type == PT_DYNAMIC) {
      dyn = (const ElfW(Dyn) *)(base + ph[i].p_offset);
    }
  }
  if (!loaded || dyn == NULL) return NULL;
  const ElfW(Sym) *sym = NULL;
  const char *str = NULL;
  const uint32_t *hash = NULL, *gnu = NULL;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    uintptr_t a = bias + dyn->d_un.d_ptr;
    switch (dyn->d_tag) {
    case DT_SYMTAB: sym = (const ElfW(Sym) *)a; break;
    case DT_STRTAB: str = (const char *)a; break;
    case DT_HASH: hash = (const uint32_t *)a; break;
    case DT_GNU_HASH: gnu = (const uint32_t *)a; break;
    default: break;
    }
  }
  if (sym == NULL || str == NULL) return NULL;
  size_t n = os_vdso_nsyms(hash, gnu);
  for (size_t i = 0; i < n; i++) {
    if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF) continue;
    const char *name = str + sym[i].st_name;
    if (strcmp(name, os_vdso_names[0]) == 0 || strcmp(name, os_vdso_names[1]) == 0)
      return (os_gettime_fn)(bias + sym[i].st_value);
  }
  return NULL;
}

void os_init(void) {
  /* getauxval, not sysconf: sysconf reads a jump table in libc's read-only
   * data, 24 KiB more resident in a program that never calls it. */
  unsigned long ps = getauxval(AT_PAGESZ);
  if (ps > 0 && ps <= HAK_PAGE_MAX) os_page_size = (size_t)ps;
  os_vdso_gettime = os_vdso_lookup();
}

size_t os_backable_bytes(void) {
  struct sysinfo si;
  if (syscall(SYS_sysinfo, &si) != 0) return SIZE_MAX;
  return ((size_t)si.totalram + (size_t)si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
}

unsigned os_cpu_count(void) {
  static unsigned cpus; /* 0 until first asked */
  unsigned n = __atomic_load_n(&cpus, __ATOMIC_RELAXED);
  if (n == 0) {
    /* The raw call and our own count: libc's sched_getaffinity and
     * CPU_COUNT (__sched_cpucount) sit on text pages a program rarely
     * touches, and the first call faults in up to 64 KiB of each
     * (fault-around), resident in every process that starts a heap. */
    uint64_t mask[16] = {0};
    long got = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    unsigned c = 0;
    for (long i = 0; got > 0 && i < got / 8 && i < 16; i++) c += hak_popcount64(mask[i]);
    n = c > 0 ? c : 1;
    __atomic_store_n(&cpus, n, __ATOMIC_RELAXED);
  }
  return n;
}

bool os_clock_direct(void) { return os_vdso_gettime != NULL; }

int os_clock(clockid_t id, struct timespec *ts) {
  os_gettime_fn f = os_vdso_gettime;
  if (HAK_LIKELY(f != NULL)) return f(id, ts);
  return syscall(SYS_clock_gettime, id, ts) == 0 ? 0 : -1;
}

static void os_account_bytes(size_t size) {
  size_t now = atomic_fetch_add_explicit(&os_stats.mapped, size, memory_order_relaxed) + size;
  size_t peak = atomic_load_explicit(&os_stats.mapped_peak, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&os_stats.mapped_peak, &peak, now,
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* reserve: MAP_NORESERVE, for address space the program may never touch
 * whole (superslabs, arenas, metadata). Without it the kernel's overcommit
 * policy judges the request as it judges glibc's mmap of a big block. */
static void *os_mmap_raw(void *hint, size_t size, bool reserve) {
  void *p = mmap(hint, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (reserve ? MAP_NORESERVE : 0), -1, 0);
  atomic_fetch_add_explicit(&os_stats.mmap_calls, 1, memory_order_relaxed);
  if (p == MAP_FAILED) return NULL;
  os_account_bytes(size);
  return p;
}

static void os_munmap_raw(void *p, size_t size) {
  if (size == 0) return;
  int saved = errno;
  ann_unmap(p, size); /* ASan: the range may be mapped again by anyone */
  munmap(p, size);
  errno = saved;
  atomic_fetch_add_explicit(&os_stats.munmap_calls, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&os_stats.mapped, size, memory_order_relaxed);
}

void os_no_huge(void *p, size_t size) {
#ifdef MADV_NOHUGEPAGE
  int saved = errno;
  madvise(p, size, MADV_NOHUGEPAGE);
  errno = saved;
#else
  (void)p, (void)size;
#endif
}

void *os_map(size_t size) {
  int saved = errno;
  void *p = os_mmap_raw(NULL, size, true);
  if (p != NULL && size >= ((size_t)2 << 20)) os_no_huge(p, size);
  errno = saved;
  return p;
}

/* HAKMEM_THP: the advice for every region hakmem maps for blocks
 * (superslabs, arenas, big blocks' mappings). MADV_NOHUGEPAGE unless the
 * option says otherwise: where the kernel's setting is `always`, the
 * first touch of a 2 MiB range faults in a huge page whole, so a slab that
 * needs a few pages, or a superslab's first slabs, hold 2 MiB each, and a
 * decommit inside one splits it; under the `madvise` setting the advice
 * changes nothing. One call per region mapped. */
static void os_advise_thp(void *p, size_t size) {
  if (os_thp == OS_THP_NEVER) {
    os_no_huge(p, size);
    return;
  }
#ifdef MADV_HUGEPAGE
  if (os_thp == OS_THP_ALWAYS) madvise(p, size, MADV_HUGEPAGE);
#else
  (void)p, (void)size;
#endif
}

static void *os_map_aligned_as(size_t size, size_t align, bool reserve) {
  int saved = errno;
  if (size + align < size) return NULL;
  uintptr_t hint = atomic_load_explicit(&os_hint, memory_order_relaxed);
  if (hint > size + align) {
    uintptr_t want = (hint - size) & ~(uintptr_t)(align - 1);
    void *p = os_mmap_raw((void *)want, size, reserve);
    if (p != NULL) {
      if (((uintptr_t)p & (align - 1)) == 0) {
        atomic_store_explicit(&os_hint, (uintptr_t)p, memory_order_relaxed);
        os_advise_thp(p, size);
        errno = saved;
        return p;
      }
      os_munmap_raw(p, size);
    }
  }
  /* Over-map by the alignment and trim both ends. */
  char *raw = os_mmap_raw(NULL, size + align, reserve);
  if (raw == NULL) {
    errno = saved;
    return NULL;
  }
  uintptr_t base = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = base - (uintptr_t)raw;
  size_t tail = align - head;
  if (head) os_munmap_raw(raw, head);
  if (tail) os_munmap_raw((char *)base + size, tail);
  atomic_store_explicit(&os_hint, base, memory_order_relaxed);
  os_advise_thp((void *)base, size);
  errno = saved;
  return (void *)base;
}

void *os_map_aligned(size_t size, size_t align) { return os_map_aligned_as(size, align, true); }

void *os_map_block(size_t size, size_t align) { return os_map_aligned_as(size, align, false); }

void os_unmap(void *p, size_t size) { os_munmap_raw(p, size); }

void os_protect_none(void *p, size_t size) {
  int saved = errno;
  mprotect(p, size, PROT_NONE);
  errno = saved;
}

void os_decommit(void *p, size_t size) {
  if (size == 0) return;
  int saved = errno;
  madvise(p, size, MADV_DONTNEED);
  errno = saved;
  atomic_fetch_add_explicit(&os_stats.madvise_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_stats.purged, size, memory_order_relaxed);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* linux/mman.h, Linux 5.14 */
#endif
static int os_populate_ok = 1; /* cleared at the kernel's first refusal */

void os_populate(void *p, size_t size) {
  if (size == 0 || !__atomic_load_n(&os_populate_ok, __ATOMIC_RELAXED)) return;
  int saved = errno;
  /* EINVAL: a kernel without the advice; EPERM: a seccomp filter. ENOMEM
   * and EFAULT are passing (memory is short): the pages fault in later. */
  if (madvise(p, size, MADV_POPULATE_WRITE) != 0 && (errno == EINVAL || errno == EPERM || errno == ENOSYS))
    __atomic_store_n(&os_populate_ok, 0, __ATOMIC_RELAXED);
  errno = saved;
  atomic_fetch_add_explicit(&os_stats.populate_calls, 1, memory_order_relaxed);
}

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define OS_PIDFD_SELF_THREAD (-10000) /* linux/pidfd.h, Linux 6.15 */
static int os_batch_syscall = 1; /* cleared at the kernel's first refusal */

void os_batch_add(os_batch_t *b, void *p, size_t size) {
  if (size == 0) return;
  struct iovec *last = b->n ? &b->v[b->n - 1] : NULL;
  if (last != NULL && (uint8_t *)last->iov_base + last->iov_len == (uint8_t *)p) {
    last->iov_len += size;
  } else {
    if (b->n == OS_BATCH_MAX) os_batch_flush(b);
    b->v[b->n].iov_base = p;
    b->v[b->n].iov_len = size;
    b->n++;
  }
}

void os_batch_flush(os_batch_t *b) {
  unsigned n = b->n, done = 0;
  if (n > 1 && __atomic_load_n(&os_batch_syscall, __ATOMIC_RELAXED)) {
    int saved = errno;
    long r = syscall(SYS_process_madvise, OS_PIDFD_SELF_THREAD, b->v, (size_t)n, MADV_DONTNEED, 0u);
    if (r < 0 && (errno == EBADF || errno == EINVAL || errno == EPERM || errno == ENOSYS || errno == ESRCH))
      __atomic_store_n(&os_batch_syscall, 0, __ATOMIC_RELAXED);
    errno = saved;
    /* Bytes advised, in order: a range it stopped inside goes again whole
     * below (harmless: nothing writes to it meanwhile). */
    size_t left = r > 0 ? (size_t)r : 0, advised = 0;
    for (; done < n && left >= b->v[done].iov_len; done++) {
      left -= b->v[done].iov_len;
      advised += b->v[done].iov_len;
    }
    atomic_fetch_add_explicit(&os_stats.madvise_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&os_stats.purged, advised, memory_order_relaxed);
  }
  for (; done < n; done++) os_decommit(b->v[done].iov_base, b->v[done].iov_len);
  os_batch_init(b);
}

bool os_remap_inplace(void *p, size_t old_size, size_t new_size) {
  int saved = errno;
  void *r = mremap(p, old_size, new_size, 0);
  errno = saved;
  atomic_fetch_add_explicit(&os_stats.mremap_calls, 1, memory_order_relaxed);
  if (r == MAP_FAILED) return false;
  if (new_size > old_size)
    os_account_bytes(new_size - old_size);
  else
    atomic_fetch_sub_explicit(&os_stats.mapped, old_size - new_size, memory_order_relaxed);
  return true;
}

bool os_remap_to(void *p, size_t old_size, size_t new_size, void *target) {
  int saved = errno;
  void *r = mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  errno = saved;
  atomic_fetch_add_explicit(&os_stats.mremap_calls, 1, memory_order_relaxed);
  if (r == MAP_FAILED) return false;
  /* target's own mapping (new_size) was replaced; the old range is gone. */
  atomic_fetch_sub_explicit(&os_stats.mapped, old_size, memory_order_relaxed);
  return true;
}

uint32_t os_thread_kid(void) { return (uint32_t)syscall(SYS_gettid); }

bool os_thread_cpu_ns(uint32_t kid, uint64_t *ns) {
  /* Linux's per-thread CPU clock of a thread id (the clock ids
   * pthread_getcpuclockid makes: ~tid << 3 | per-thread | sched), built from
   * the kernel id, not a pthread_t a thread's exit may free: the kernel
   * answers only for a thread of the caller's own process. */
  clockid_t id = (clockid_t)((~kid << 3) | 4u | 2u); /* unsigned: no shift of a negative value */
  struct timespec ts;
  int saved = errno;
  bool ok = os_clock(id, &ts) == 0;
  errno = saved;
  if (ok) *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  return ok;
}

/* Hot code, not cold: the purge thread asks it of every heap idle for the
 * purge delay with big free blocks (heap_idle_cool), in most programs with
 * a thread that sleeps; as HAK_TEXT_COLD it mapped the 56 KiB of cold code
 * around it there (footprint.py's xmalloc case, test_footprint). */
bool os_thread_blocked(uint32_t kid) {
  /* Not snprintf: it may allocate in other libcs. */
  char path[48] = "/proc/self/task/", buf[512];
  memcpy(os_fmt_dec(path + 16, kid), "/stat", 6);
  int saved = errno;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0) close(fd);
  errno = saved;
  if (len <= 0) return false;
  buf[len] = '\0';
  /* "tid (comm) S ...": the name may hold spaces and parentheses, so the
   * state follows the last ')'. */
  const char *p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && p[2] == 'S';
}

bool os_membarrier(void) {
  /* 0: not tried yet, 1: registered, -1: unavailable. */
  static _Atomic int state;
  int st = atomic_load_explicit(&state, memory_order_acquire);
  int saved = errno;
  if (st == 0) {
    st = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
    atomic_store_explicit(&state, st, memory_order_release);
  }
  bool ok = st == 1 && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
  errno = saved;
  return ok;
}

uint64_t os_now_ms(void) {
  struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
  os_clock(CLOCK_MONOTONIC_COARSE, &ts);
#else
  os_clock(CLOCK_MONOTONIC, &ts);
#endif
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool os_is_readable(const void *p) {
  unsigned char byte, vec;
  int saved = errno;
  /* mincore answers "mapped", and a PROT_NONE reservation (glibc's thread
   * arenas, stack guards) is mapped: reading it faults. A one-byte read of
   * our own memory through process_vm_readv fails with EFAULT instead;
   * where a sandbox refuses that call, a write from p into a pipe fails the
   * same way; mincore is the last resort (no descriptors left). */
  struct iovec local = {&byte, 1}, remote = {(void *)p, 1};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  bool ok = n == 1;
  if (n < 0 && errno != EFAULT) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) == 0) {
      ok = write(fd[1], p, 1) == 1;
      close(fd[0]);
      close(fd[1]);
    } else {
      uintptr_t page = (uintptr_t)p & ~(uintptr_t)(os_page_size - 1);
      ok = mincore((void *)page, os_page_size, &vec) == 0;
    }
  }
  errno = saved;
  return ok;
}

bool os_residency(const void *p, size_t len, unsigned char *vec) {
  int saved = errno;
  bool ok = mincore((void *)p, len, vec) == 0;
  errno = saved;
  return ok;
}

bool os_residency_written(const void *p, size_t len, unsigned char *vec) {
  int saved = errno;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved;
    return os_residency(p, len, vec);
  }
  size_t pages = (len + os_page_size - 1) / os_page_size, first = (uintptr_t)p / os_page_size;
  bool ok = true;
  for (size_t i = 0; i < pages && ok;) {
    uint64_t e[256]; /* the statistics ask 256 pages at a time: one read */
    size_t n = pages - i < 256 ? pages - i : 256;
    ssize_t r = pread(fd, e, n * sizeof e[0], (off_t)((first + i) * sizeof e[0]));
    if (r != (ssize_t)(n * sizeof e[0])) {
      ok = false;
      break;
    }
    /* bit 63: present; bit 56: mapped exclusively (the zero page never is) */
    for (size_t k = 0; k < n; k++) vec[i + k] = (unsigned char)((e[k] >> 63) & (e[k] >> 56) & 1);
    i += n;
  }
  close(fd);
  errno = saved;
  return ok;
}

unsigned os_thread_count(void) {
  int saved = errno;
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved;
    return 0;
  }
  char buf[1024];
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  errno = saved;
  if (r <= 0) return 0;
  buf[r] = 0;
  /* The command name (field 2) may hold spaces: count fields from the last
   * ')'. Field 3 is the main thread's state, field 20 num_threads. */
  const char *q = strrchr(buf, ')');
  if (q == NULL || q[1] != ' ') return 0;
  bool leader_gone = q[2] == 'Z'; /* it ended with pthread_exit: a zombie, still counted */
  for (unsigned f = 2; f < 20 && *q; f++) {
    q = strchr(q + 1, ' ');
    if (q == NULL) return 0;
  }
  unsigned n = 0;
  for (q++; *q >= '0' && *q <= '9'; q++) n = n * 10 + (unsigned)(*q - '0');
  return n > 0 && leader_gone ? n - 1 : n;
}

void os_write_err(const char *s) { os_write_fd(2, s); }

HAK_TEXT_COLD void os_warn_open_once(_Atomic bool *said, const char *what, const char *path) {
  int err = errno;
  if (atomic_exchange_explicit(said, true, memory_order_relaxed)) return;
  char num[24];
  snprintf(num, sizeof num, " (errno %d)\n", err);
  os_write_err("hakmem: ");
  os_write_err(what);
  os_write_err(": cannot open ");
  os_write_err(path);
  os_write_err(num);
}

void os_write_fd(int fd, const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    s += w;
    n -= (size_t)w;
  }
}

char *os_fmt_hex(char *buf, uintptr_t v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[2 * sizeof(uintptr_t)];
  int n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v != 0);
  *buf++ = '0';
  *buf++ = 'x';
  while (n > 0) *buf++ = tmp[--n];
  *buf = 0;
  return buf;
}

char *os_fmt_dec(char *buf, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *buf++ = tmp[--n];
  *buf = 0;
  return buf;
}

bool os_random(void *buf, size_t n) {
  return getrandom(buf, n, GRND_NONBLOCK) == (ssize_t)n;
}

void os_assert_fail(const char *expr, const char *file, int line) {
  char num[24];
  os_fmt_dec(num, (uint64_t)line);
  os_write_err("hakmem: internal check failed: ");
  os_write_err(expr);
  os_write_err(" at ");
  os_write_err(file);
  os_write_err(":");
  os_write_err(num);
  os_write_err("\n");
  __builtin_trap();
}
