/*
 * prof.c — sampled heap profiling (see prof.h).
 *
 * Estimator: the gaps between samples, in bytes allocated, are drawn from
 * an exponential distribution of mean m (opt.prof_sample), so the samples
 * form a Poisson process over the allocated bytes: a block of size s is
 * sampled with probability 1 - exp(-s/m), independently of every other
 * block and of any periodic pattern in the program. A sample therefore
 * stands for s / (1 - exp(-s/m)) bytes (about m for small blocks, s for
 * large ones); summed by stack that is an unbiased estimate of the live
 * bytes allocated there. This is the model gperftools calls heap_v2, which
 * is why PATH.heap carries raw sample counts and sizes and pprof does the
 * scaling itself. Records live in a table mapped from the OS, with a bit
 * filter so that a free of an unsampled block costs one load.
 */
#include "prof.h"
#include "hakmem.h"
#include "options.h"
#include "os.h"
#include "stats.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unwind.h>

#define PROF_FRAMES 24
#define PROF_CAP ((size_t)1 << 16)  /* live samples tracked */
#define PROF_FILTER_BITS ((size_t)1 << 20)
#define PROF_TOMB ((uintptr_t)1)

typedef struct prof_rec {
  uintptr_t ptr; /* 0 empty, PROF_TOMB deleted */
  size_t size, weight;
  uint32_t nframes;
  void *frames[PROF_FRAMES];
} prof_rec_t;

/* Lock order: prof_dump_lock, then prof_lock, then the allocator's own
 * locks. Dumps may start on several threads at once (signal, interval,
 * API); prof_dump_lock keeps their files whole, and a dump holding it may
 * allocate (the allocator's locks nest inside). prof_lock guards the live
 * table; nothing under it allocates or takes another hakmem lock (dladdr
 * takes the loader's), and no allocator lock is held when it is taken. */
static pthread_mutex_t prof_dump_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_rec_t *prof_tab;
static _Atomic uint64_t *prof_filter;
static size_t prof_live, prof_dropped;
static volatile sig_atomic_t prof_dump_requested;
static _Atomic bool prof_on = true;           /* hak_ctl "prof.active" */
static _Atomic uint64_t prof_bytes_total;     /* flushed from prof_acc at samples */
static _Atomic uint64_t prof_next_dump_bytes; /* HAKMEM_PROF_INTERVAL_BYTES */
static _Atomic uint64_t prof_seq;             /* NNNN of the next numbered dump */
static uint64_t prof_next_dump_ms;            /* the report thread's only */
/* Per thread, so that sampling needs no shared state: bytes left before
 * the next sample (signed: an allocation may overshoot it), bytes
 * allocated since the last flush to prof_bytes_total, the generator, and a
 * re-entrancy guard (the unwinder and the dumps may allocate). */
static HAK_TLS int64_t prof_left;
static HAK_TLS uint64_t prof_acc;
static HAK_TLS uint64_t prof_rng;
static HAK_TLS int prof_busy;

/* Blocks are 16-byte aligned, so the low 4 bits carry nothing; the
 * multiply spreads the rest and the high bits are kept. The same hash
 * picks the table slot and the filter bit: a set bit means "maybe
 * sampled" (another block may share it), a clear one "certainly not". */
static size_t prof_hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 20); }

/* ---- arithmetic without libm ------------------------------------------------
 * The library links only libc and pthreads, so the two transcendental
 * functions the sampler needs are computed here; a few digits suffice. */

#define PROF_LN2 0.69314718055994530942

/* ln(x) for x > 0: x = 2^e * m with m in [1, 2), ln m = 2 atanh((m-1)/(m+1)),
 * whose series converges fast since (m-1)/(m+1) <= 1/3. */
static double prof_ln(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  b = (b & ~((uint64_t)0x7ff << 52)) | ((uint64_t)1023 << 52);
  double m;
  memcpy(&m, &b, sizeof m);
  double t = (m - 1) / (m + 1), t2 = t * t, term = t, sum = 0;
  for (int k = 1; k < 30; k += 2) {
    sum += term / k;
    term *= t2;
  }
  return e * PROF_LN2 + 2 * sum;
}

/* exp(-r) for r >= 0: r = k ln2 + f with f in [0, ln2), Taylor for the rest. */
static double prof_exp_neg(double r) {
  if (r > 60) return 0; /* below 1e-26: 1 - exp(-r) is 1 in a double */
  int k = (int)(r / PROF_LN2);
  double f = r - k * PROF_LN2, term = 1, sum = 1;
  for (int i = 1; i < 20; i++) {
    term *= -f / i;
    sum += term;
  }
  while (k-- > 0) sum *= 0.5;
  return sum;
}

/* Bytes one sample of a size-byte block stands for (see the top comment). */
static size_t prof_weight(size_t size, size_t mean) {
  if (mean <= 1) return size;
  double r = (double)size / (double)mean;
  double p = r < 1e-9 ? r : 1 - prof_exp_neg(r); /* avoid cancellation for tiny r */
  return (size_t)((double)size / p + 0.5);
}

static void prof_on_signal(int sig) {
  (void)sig;
  prof_dump_requested = 1;
}

static void prof_exit_dump(void);

void prof_init(void) {
  if (!opt.prof) return;
  prof_tab = os_map(PROF_CAP * sizeof(prof_rec_t));
  prof_filter = os_map(PROF_FILTER_BITS / 8);
  if (prof_tab == NULL || prof_filter == NULL) {
    os_write_err("hakmem: HAKMEM_PROF: cannot map the sample table; profiling off\n");
    opt.prof = false;
    return;
  }
  prof_next_dump_bytes = opt.prof_interval_bytes;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = prof_on_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, NULL);
}

/* The next gap: -m ln(u) with u uniform in (0, 1], from a per-thread
 * xorshift generator (seeded from the thread's address and the clock, so
 * threads and runs differ). */
static uint64_t prof_next_gap(void) {
  if (prof_rng == 0) prof_rng = (uint64_t)(uintptr_t)&prof_rng ^ (os_now_ms() * 0x9E3779B97F4A7C15ull) ^ 1;
  prof_rng ^= prof_rng << 13, prof_rng ^= prof_rng >> 7, prof_rng ^= prof_rng << 17;
  uint64_t mean = opt.prof_sample;
  if (mean <= 1) return 1;
  double u = (double)((prof_rng >> 11) + 1) * (1.0 / 9007199254740992.0);
  double g = -prof_ln(u) * (double)mean;
  return g < 1 ? 1 : (uint64_t)g;
}

/* ---- stack capture ----------------------------------------------------------
 * libgcc's DWARF unwinder costs about 1 900 instructions a frame (it finds
 * and interprets each function's CFA program every time): some 17 000 a
 * sample, most of the profiler's cost on random mixed. A program samples
 * the same few stacks over and over, so on x86-64 the result of each step
 * is remembered per return address: the frame of the function that
 * contains return address ip spans `delta` bytes from its stack pointer to
 * its CFA, and its own return address sits at CFA - 8 (the ABI). Once a
 * return address has shown the same delta in PROF_UC_TRUST DWARF walks
 * (and never another), the fast walk steps over its frame with one load
 * (the idea of frame-size caching in fast unwinders; no code is shared).
 * The first return address without a trusted entry sends the whole sample
 * back to libgcc, which teaches the cache. A function whose frame size
 * varies at one return address (alloca, a VLA, a realigned stack) shows
 * two deltas and is poisoned for good; one that showed the same size every
 * time so far and then changes sends the walk to a slot of its own frame,
 * whose content is almost never a trusted return address: the walk then
 * falls back to libgcc. Every load is at CFA - 8 of a frame that a trusted
 * delta derived from a live stack pointer, so it stays within the stack.
 *
 * An entry is one word, so threads share the table with plain atomics:
 * bits 16..63 the return address, 3..15 delta / 8, 0..2 the state. */
#define PROF_UC_SLOTS 4096u
#define PROF_UC_TRUST 3u    /* states 1..3: seen that many times with one delta */
#define PROF_UC_TERMINAL 4u /* libgcc stops at this return address */
#define PROF_UC_POISON 7u   /* two deltas seen: always libgcc */
#define PROF_UC_DELTA_MAX ((uint64_t)0x1fff << 3)
static _Atomic uint64_t prof_uc[PROF_UC_SLOTS];

static _Atomic uint64_t *prof_uc_find(uintptr_t ip, bool insert) {
  size_t h = (size_t)(ip * 0x9E3779B97F4A7C15ull >> 52) & (PROF_UC_SLOTS - 1);
  for (unsigned k = 0; k < 8; k++) {
    _Atomic uint64_t *e = &prof_uc[(h + k) & (PROF_UC_SLOTS - 1)];
    uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
    if (v == 0 && insert) /* state 0: claimed, nothing learnt yet */
      if (atomic_compare_exchange_strong_explicit(e, &v, (uint64_t)ip << 16, memory_order_relaxed,
                                                  memory_order_relaxed))
        return e;
    if (v >> 16 == ip) return e;
    if (v == 0) return NULL;
  }
  return NULL; /* that neighbourhood is full: this address stays with libgcc */
}

/* A DWARF walk saw return address ip with the given delta (or, terminal,
 * as the last frame libgcc could name). A compare-and-swap, so that a
 * poisoning is never lost to a concurrent "seen again". */
static void prof_uc_learn(uintptr_t ip, uint64_t delta, bool terminal) {
  if (ip == 0 || ip >> 47 != 0) return;
  _Atomic uint64_t *e = prof_uc_find(ip, true);
  if (e == NULL) return;
  uint64_t v = atomic_load_explicit(e, memory_order_relaxed), nv;
  do {
    uint64_t st = v & 7, d = v >> 3 & 0x1fff;
    if (v >> 16 != ip || st == PROF_UC_POISON) return;
    if (terminal)
      nv = st == 0 || st == PROF_UC_TERMINAL ? PROF_UC_TERMINAL : PROF_UC_POISON;
    else if (delta == 0 || delta > PROF_UC_DELTA_MAX || (delta & 7) != 0 || st == PROF_UC_TERMINAL ||
             (st != 0 && d != delta >> 3))
      nv = PROF_UC_POISON;
    else
      nv = delta | (st < PROF_UC_TRUST ? st + 1 : st);
    nv |= (uint64_t)ip << 16;
  } while (nv != v &&
           !atomic_compare_exchange_weak_explicit(e, &v, nv, memory_order_relaxed, memory_order_relaxed));
}

struct prof_unwind {
  void **frames;
  uint32_t n;
  bool first; /* frame 0 is prof_capture itself: not recorded */
  bool full;
  uintptr_t last_ip, last_sp;
};

/* In libgcc's callback for a frame, _Unwind_GetCFA is that frame's stack
 * pointer (its callee's CFA): a frame's delta is known at the next one. */
static _Unwind_Reason_Code prof_unwind_cb(struct _Unwind_Context *ctx, void *arg) {
  struct prof_unwind *u = arg;
  uintptr_t ip = _Unwind_GetIP(ctx), sp = _Unwind_GetCFA(ctx);
  /* Past the outermost frame libgcc calls once more with ip 0: the frame
   * before is terminal, not one with a delta. */
  if (ip == 0) return _URC_END_OF_STACK;
  if (u->last_ip != 0) prof_uc_learn(u->last_ip, sp - u->last_sp, false);
  if (u->first) {
    u->first = false;
    return _URC_NO_REASON;
  }
  if (u->n >= PROF_FRAMES) {
    u->full = true;
    return _URC_END_OF_STACK;
  }
  u->frames[u->n++] = (void *)ip;
  u->last_ip = ip;
  u->last_sp = sp;
  return _URC_NO_REASON;
}

/* The stack above the caller of prof_capture, into frames; returns the
 * number of frames. Not inlined: its own CFA and return address start the
 * fast walk. */
static HAK_NOINLINE uint32_t prof_capture(void **frames) {
#if defined(__x86_64__)
  uintptr_t ip = (uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0));
  uintptr_t sp = (uintptr_t)__builtin_dwarf_cfa();
  uint32_t n = 0;
  while (n < PROF_FRAMES) {
    _Atomic uint64_t *e = ip != 0 && ip >> 47 == 0 ? prof_uc_find(ip, false) : NULL;
    uint64_t v = e != NULL ? atomic_load_explicit(e, memory_order_relaxed) : 0;
    if (v >> 16 != ip) break; /* not cached (or replaced meanwhile) */
    uint64_t st = v & 7;
    if (st == PROF_UC_TERMINAL) {
      frames[n++] = (void *)ip;
      return n;
    }
    if (st != PROF_UC_TRUST) break;
    frames[n++] = (void *)ip;
    sp += (v >> 3 & 0x1fff) << 3; /* now this frame's CFA: the caller's stack pointer */
    ip = *(const uintptr_t *)(sp - 8);
  }
  if (n == PROF_FRAMES) return n;
#endif
  struct prof_unwind u = {frames, 0, true, false, 0, 0};
  _Unwind_Backtrace(prof_unwind_cb, &u);
  /* libgcc went no further than the last frame: remember where it stops. */
  if (!u.full && u.last_ip != 0) prof_uc_learn(u.last_ip, 0, true);
  return u.n;
}

static void prof_dump_if_requested(void);
static void prof_dump_numbered(void);

void prof_alloc(void *p, size_t size) {
  if (p == NULL || prof_busy) return;
  /* SIGUSR2's dump is written here, by the next allocating thread: the
   * handler itself may not touch locks or files. */
  if (prof_dump_requested) prof_dump_if_requested();
  if (!atomic_load_explicit(&prof_on, memory_order_relaxed)) return;
  prof_acc += size;
  prof_left -= (int64_t)size;
  if (prof_left > 0) return;
  prof_left = (int64_t)prof_next_gap();
  prof_busy = 1; /* the unwinder may allocate: those calls are not sampled */
  prof_rec_t rec;
  rec.nframes = prof_capture(rec.frames);
  rec.ptr = (uintptr_t)p;
  rec.size = size;
  /* The mean in force now: a later hak_ctl("prof.sample") does not change
   * what this sample stands for. */
  rec.weight = prof_weight(size, opt.prof_sample);
  size_t h = prof_hash(rec.ptr);
  pthread_mutex_lock(&prof_lock);
  if (prof_live * 4 >= PROF_CAP * 3) {
    prof_dropped++; /* keep probe chains short rather than track everything */
  } else {
    size_t i = h & (PROF_CAP - 1);
    while (prof_tab[i].ptr > PROF_TOMB) i = (i + 1) & (PROF_CAP - 1);
    prof_tab[i] = rec;
    prof_live++;
    atomic_fetch_or_explicit(&prof_filter[(h % PROF_FILTER_BITS) / 64], (uint64_t)1 << (h % 64),
                             memory_order_relaxed);
  }
  pthread_mutex_unlock(&prof_lock);
  /* Byte-interval dumps. Bytes reach the global total only here, at a
   * sample, so the count is behind by at most one gap per thread: "about"
   * every N bytes, at no cost to the unsampled calls. The CAS lets exactly
   * one thread write each numbered dump. */
  uint64_t iv = opt.prof_interval_bytes;
  if (iv != 0) {
    uint64_t tot = atomic_fetch_add_explicit(&prof_bytes_total, prof_acc, memory_order_relaxed) + prof_acc;
    uint64_t due = atomic_load_explicit(&prof_next_dump_bytes, memory_order_relaxed);
    if (tot >= due) {
      uint64_t next = due + iv * ((tot - due) / iv + 1); /* skip intervals already passed */
      if (atomic_compare_exchange_strong(&prof_next_dump_bytes, &due, next)) prof_dump_numbered();
    }
  }
  prof_acc = 0;
  prof_busy = 0;
}

uint64_t prof_batch(size_t bytes) {
  if (prof_busy || !atomic_load_explicit(&prof_on, memory_order_relaxed)) return UINT64_MAX;
  /* A thread's first batch: its countdown starts at a random gap, not at
   * zero (short-lived threads would each sample their first allocation). */
  if (prof_rng == 0) prof_left = (int64_t)prof_next_gap();
  if ((int64_t)bytes < prof_left) {
    prof_left -= (int64_t)bytes;
    prof_acc += bytes;
    return UINT64_MAX;
  }
  /* The sample falls in this batch: prof_left bytes are served before it,
   * and the sampled allocation's prof_alloc finds prof_left spent. */
  uint64_t at = prof_left > 0 ? (uint64_t)prof_left : 0;
  prof_acc += at;
  prof_left = 0;
  return at;
}

void prof_free(void *p) {
  if (p == NULL || prof_tab == NULL) return;
  size_t h = prof_hash((uintptr_t)p);
  uint64_t bit = (uint64_t)1 << (h % 64);
  if (!(atomic_load_explicit(&prof_filter[(h % PROF_FILTER_BITS) / 64], memory_order_relaxed) & bit)) return;
  pthread_mutex_lock(&prof_lock);
  for (size_t i = h & (PROF_CAP - 1); prof_tab[i].ptr != 0; i = (i + 1) & (PROF_CAP - 1)) {
    if (prof_tab[i].ptr == (uintptr_t)p) {
      /* A tombstone, not an empty slot: later records of the same probe
       * chain must stay reachable. */
      prof_tab[i].ptr = PROF_TOMB;
      prof_live--;
      break;
    }
  }
  pthread_mutex_unlock(&prof_lock);
}

int prof_set_active(bool on) {
  if (!opt.prof || prof_tab == NULL) return EPERM;
  atomic_store_explicit(&prof_on, on, memory_order_relaxed);
  return 0;
}

bool prof_is_active(void) { return opt.prof && prof_tab != NULL && atomic_load_explicit(&prof_on, memory_order_relaxed); }

int prof_set_sample(size_t mean) {
  if (mean == 0 || mean > ((size_t)1 << 40)) return EINVAL;
  /* A plain store read by prof_next_gap on other threads: a torn read is
   * impossible for an aligned word, and a stale one only delays the change
   * by one gap. */
  __atomic_store_n(&opt.prof_sample, mean, __ATOMIC_RELAXED);
  return 0;
}

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

static void prof_elf_close(void) {
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
static bool prof_frame_is_ours(void *ip) {
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

static void prof_frame_name(void *ip, char *out, size_t cap) {
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

/* ---- dumps ----------------------------------------------------------------- */

typedef struct prof_agg {
  uint64_t key;
  size_t bytes, count, size;
  uint32_t nframes;
  void *frames[PROF_FRAMES];
} prof_agg_t;

static void prof_write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

/* Aggregate live samples by stack (and, with by_size, by block size too:
 * pprof scales each line by its mean block size, which is exact only when
 * the line holds one size). Returns the number of entries in *out (mapped
 * from the OS; the caller unmaps *out_bytes). */
static size_t prof_aggregate(prof_agg_t **out, size_t *out_bytes, bool by_size) {
  size_t cap = PROF_CAP * 2, nagg = 0;
  *out_bytes = cap * sizeof(prof_agg_t);
  prof_agg_t *agg = os_map(*out_bytes);
  *out = agg;
  if (agg == NULL) return 0;
  pthread_mutex_lock(&prof_lock);
  for (size_t i = 0; i < PROF_CAP; i++) {
    prof_rec_t *r = &prof_tab[i];
    if (r->ptr <= PROF_TOMB) continue;
    uint32_t skip = 0;
    while (skip < r->nframes && prof_frame_is_ours(r->frames[skip])) skip++;
    /* FNV-1a over the frames; |1 so that 0 can mean an empty slot. */
    uint64_t key = 1469598103934665603ull;
    for (uint32_t f = skip; f < r->nframes; f++) key = (key ^ (uintptr_t)r->frames[f]) * 1099511628211ull;
    if (by_size) key = (key ^ r->size) * 1099511628211ull;
    key |= 1;
    size_t j = (size_t)(key >> 7) & (cap - 1);
    while (agg[j].key != 0 && agg[j].key != key) j = (j + 1) & (cap - 1);
    if (agg[j].key == 0) {
      agg[j].key = key;
      agg[j].size = r->size;
      agg[j].nframes = r->nframes - skip;
      memcpy(agg[j].frames, r->frames + skip, agg[j].nframes * sizeof(void *));
      nagg++;
    }
    agg[j].bytes += by_size ? r->size : r->weight; /* .heap: raw sizes, pprof scales */
    agg[j].count++;
  }
  pthread_mutex_unlock(&prof_lock);
  /* Compact to the front; the order is the hash's, i.e. arbitrary: the
   * formats do not depend on it, pprof and flame graphs sort themselves. */
  size_t k = 0;
  for (size_t j = 0; j < cap; j++)
    if (agg[j].key != 0) agg[k++] = agg[j];
  return nagg;
}

/* path: gperftools' heap-profile text (the heap_v2 flavour, which pprof
 * unsamples with the Poisson model above), then /proc/self/maps so pprof
 * can map addresses to files. The [alloc] pair repeats the in-use pair:
 * only live samples are kept, so there is no total-allocated figure. */
static bool prof_write_heap(const char *path) {
  prof_agg_t *agg;
  size_t agg_bytes, n = prof_aggregate(&agg, &agg_bytes, true);
  if (agg == NULL) return false;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    os_unmap(agg, agg_bytes);
    return false;
  }
  size_t tn = 0, tb = 0;
  for (size_t i = 0; i < n; i++) tn += agg[i].count, tb += agg[i].bytes;
  char line[PROF_FRAMES * 24 + 128];
  size_t len = (size_t)snprintf(line, sizeof line, "heap profile: %6zu: %8zu [%6zu: %8zu] @ heap_v2/%zu\n", tn, tb, tn,
                                tb, opt.prof_sample);
  prof_write_all(fd, line, len);
  for (size_t i = 0; i < n; i++) {
    len = (size_t)snprintf(line, sizeof line, "%6zu: %8zu [%6zu: %8zu] @", agg[i].count, agg[i].bytes,
                           agg[i].count, agg[i].bytes);
    for (uint32_t f = 0; f < agg[i].nframes; f++)
      len += (size_t)snprintf(line + len, sizeof line - len, " %#lx", (unsigned long)(uintptr_t)agg[i].frames[f]);
    line[len++] = '\n';
    prof_write_all(fd, line, len);
  }
  prof_write_all(fd, "\nMAPPED_LIBRARIES:\n", 19);
  int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (mfd >= 0) {
    char buf[4096];
    ssize_t r;
    while ((r = read(mfd, buf, sizeof buf)) > 0) prof_write_all(fd, buf, (size_t)r);
    close(mfd);
  }
  close(fd);
  os_unmap(agg, agg_bytes);
  return true;
}

/* false if PATH.heap could not be written (the other files follow it). */
static bool prof_write_reports(const char *prefix, int leaks_fd) {
  char path[4096], line[8192], name[512];
  bool ok = true;
  if (prefix != NULL) {
    snprintf(path, sizeof path, "%s.heap", prefix);
    ok = prof_write_heap(path);
  }
  prof_agg_t *agg;
  size_t agg_bytes, n = prof_aggregate(&agg, &agg_bytes, false);
  if (agg == NULL) return false;
  int ffd = -1, tfd = -1;
  if (prefix != NULL) {
    snprintf(path, sizeof path, "%s.folded", prefix);
    ffd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    snprintf(path, sizeof path, "%s.txt", prefix);
    tfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    total += agg[i].bytes;
    if (ffd < 0) continue;
    size_t len = 0;
    for (uint32_t f = agg[i].nframes; f-- > 0;) { /* outermost first */
      prof_frame_name(agg[i].frames[f], name, sizeof name);
      len += (size_t)snprintf(line + len, sizeof line - len, "%s%s", name, f ? ";" : "");
      if (len >= sizeof line - 64) break;
    }
    len += (size_t)snprintf(line + len, sizeof line - len, " %zu\n", agg[i].bytes);
    prof_write_all(ffd, line, len);
  }
  /* Top list: the 20 stacks holding the most estimated bytes. */
  int fds[2] = {tfd, leaks_fd};
  for (int o = 0; o < 2; o++) {
    int fd = fds[o];
    if (fd < 0) continue;
    size_t len = (size_t)snprintf(line, sizeof line,
                                  "hakmem heap profile: %zu live sampled blocks, ~%zu bytes estimated live, "
                                  "%zu stacks, 1 sample per %zu bytes%s\n",
                                  prof_live, total, n, opt.prof_sample,
                                  prof_dropped ? " (table full: samples dropped)" : "");
    prof_write_all(fd, line, len);
    /* Selection by repeated maximum with the key as the "taken" mark:
     * 20 passes over n, no sort buffer to allocate. */
    for (int t = 0; t < 20; t++) {
      size_t best = n, bb = 0;
      for (size_t i = 0; i < n; i++)
        if (agg[i].count != 0 && agg[i].bytes > bb && agg[i].key != 0) best = i, bb = agg[i].bytes;
      if (best == n) break;
      len = (size_t)snprintf(line, sizeof line, "%2d. %12zu bytes %5.1f%% %6zu samples\n", t + 1, bb,
                             total ? 100.0 * (double)bb / (double)total : 0.0, agg[best].count);
      prof_write_all(fd, line, len);
      for (uint32_t f = 0; f < agg[best].nframes && f < 8; f++) {
        prof_frame_name(agg[best].frames[f], name, sizeof name);
        len = (size_t)snprintf(line, sizeof line, "      %s\n", name);
        prof_write_all(fd, line, len);
      }
      agg[best].key = 0; /* taken */
    }
    /* restore keys for the next output */
    for (size_t i = 0; i < n; i++) agg[i].key = 1;
  }
  if (ffd >= 0) close(ffd);
  if (tfd >= 0) close(tfd);
  os_unmap(agg, agg_bytes);
  prof_elf_close();
  return ok;
}

static void prof_default_prefix(char *buf, size_t cap) {
  if (opt.prof_file != NULL)
    snprintf(buf, cap, "%s", opt.prof_file);
  else
    snprintf(buf, cap, "hakmem-prof.%d", (int)getpid());
}

static void prof_dump_if_requested(void) {
  prof_dump_requested = 0;
  char prefix[1024];
  prof_default_prefix(prefix, sizeof prefix);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  prof_write_reports(prefix, -1);
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
}

/* PATH.NNNN.heap, NNNN from 0000 on (wider past 9999). */
static void prof_dump_numbered(void) {
  char prefix[1024], path[1100];
  prof_default_prefix(prefix, sizeof prefix);
  uint64_t seq = atomic_fetch_add_explicit(&prof_seq, 1, memory_order_relaxed);
  snprintf(path, sizeof path, "%s.%04llu.heap", prefix, (unsigned long long)seq);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  prof_write_heap(path);
  prof_elf_close();
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
}

uint64_t prof_dumps_numbered(void) { return atomic_load_explicit(&prof_seq, memory_order_relaxed); }

void prof_tick(uint64_t now_ms) {
  if (!opt.prof || prof_tab == NULL) return;
  if (prof_dump_requested) prof_dump_if_requested(); /* SIGUSR2 in a program that stopped allocating */
  uint64_t iv = opt.prof_interval_ms;
  if (iv == 0) return;
  if (prof_next_dump_ms == 0) prof_next_dump_ms = now_ms + iv;
  if (now_ms < prof_next_dump_ms) return;
  prof_next_dump_ms = now_ms + iv;
  prof_dump_numbered();
}

HAK_EXPORT int hak_prof_dump(const char *path) {
  if (!opt.prof || prof_tab == NULL) return -1;
  char prefix[1024];
  if (path == NULL)
    prof_default_prefix(prefix, sizeof prefix);
  else
    snprintf(prefix, sizeof prefix, "%s", path);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  bool ok = prof_write_reports(prefix, -1);
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
  return ok ? 0 : -1;
}

__attribute__((destructor)) static void prof_exit_dump(void) {
  if (!opt.prof || prof_tab == NULL) return;
  char prefix[1024];
  prof_default_prefix(prefix, sizeof prefix);
  prof_busy++;
  pthread_mutex_lock(&prof_dump_lock);
  prof_write_reports(prefix, opt.prof_leaks ? stats_report_fd() : -1);
  pthread_mutex_unlock(&prof_dump_lock);
  prof_busy--;
}

/* fork (init.c's handlers): both locks are held across it, in the order
 * above and before the allocator's, so the child's table and dump state
 * are whole. The child has only the forking thread, which owns them: it
 * unlocks them (re-initialising a locked mutex is undefined). */
void prof_fork_prepare(void) {
  pthread_mutex_lock(&prof_dump_lock);
  pthread_mutex_lock(&prof_lock);
}
void prof_fork_parent(void) {
  pthread_mutex_unlock(&prof_lock);
  pthread_mutex_unlock(&prof_dump_lock);
}
void prof_fork_child(void) {
  /* The report thread is the parent's: the child's time-based dumps start
   * over if it gets one. Its generator is the parent's too: mix in the
   * pid, or parent and child would sample the same allocations. */
  prof_next_dump_ms = 0;
  if (prof_rng != 0) prof_rng ^= (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;
  pthread_mutex_unlock(&prof_lock);
  pthread_mutex_unlock(&prof_dump_lock);
}
