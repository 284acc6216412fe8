/*
 * footprint_dump.c — preloaded after the allocator by tools/footprint.py: at
 * exit, writes to the file named by FOOTPRINT_OUT
 *   - one line per PT_LOAD segment of libhakmem*.so:
 *       FOOTPRINT_SEG <p_flags> <vaddr> <memsz> <file_kb> <anon_kb> (decimal)
 *     its resident pages split, from /proc/self/pagemap, into file pages
 *     (mapped from the page cache) and private anonymous ones (written data,
 *     BSS); the zero page of a BSS page that was only read is neither. Unlike
 *     smaps, this sees the BSS alone even when the kernel has merged it with
 *     a neighbouring anonymous mapping.
 *   - then /proc/self/smaps and /proc/self/status.
 * Plain read/write through stack buffers, no stdio: no allocation, no static
 * buffer of its own and no libc code or tables the program would not touch.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int out_fd = -1;

static void copy(const char *path) {
  char buf[4096];
  int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) return;
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out_fd, buf, (size_t)n) != n) break;
  close(in);
}

/* " <v>" in decimal at line[len]: snprintf would touch libc pages (its
 * tables) that the program being measured may never touch. */
static size_t put_ulong(char *line, size_t len, unsigned long v) {
  char d[24];
  int n = 0;
  do d[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
  line[len++] = ' ';
  while (n > 0) line[len++] = d[--n];
  return len;
}

static int seg_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  int pm = *(int *)arg;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libhakmem") == NULL) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)4095;
    uintptr_t hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + 4095) & ~(uintptr_t)4095;
    unsigned long file = 0, anon = 0;
    uint64_t e[512];
    for (uintptr_t a = lo; a < hi; a += sizeof e / sizeof e[0] * 4096) {
      size_t n = (hi - a) / 4096;
      if (n > sizeof e / sizeof e[0]) n = sizeof e / sizeof e[0];
      ssize_t got = pread(pm, e, n * 8, (off_t)(a / 4096 * 8));
      if (got <= 0) break;
      for (size_t j = 0; j < (size_t)got / 8; j++) {
        if (!(e[j] >> 63 & 1)) continue;          /* not present */
        if (e[j] >> 61 & 1) file++;               /* file page */
        else if (e[j] >> 56 & 1) anon++;          /* exclusively mapped anon page */
      }
    }
    char line[160] = "FOOTPRINT_SEG";
    size_t len = strlen(line);
    unsigned long v[5] = {ph->p_flags, ph->p_vaddr, ph->p_memsz, file * 4, anon * 4};
    for (int k = 0; k < 5; k++) len = put_ulong(line, len, v[k]);
    line[len++] = '\n';
    if (write(out_fd, line, len) != (ssize_t)len) return 1;
  }
  return 0;
}

__attribute__((destructor)) static void footprint_dump(void) {
  const char *path = getenv("FOOTPRINT_OUT");
  if (path == NULL) return;
  out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) return;
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pm >= 0) {
    dl_iterate_phdr(seg_cb, &pm);
    close(pm);
  }
  copy("/proc/self/smaps");
  copy("/proc/self/status");
  close(out_fd);
}
