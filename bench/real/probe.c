/*
 * bench/real/probe.c — the in-process witness of bench/real/run_real.sh.
 *
 * Preloaded after the allocator under test (LD_PRELOAD="ALLOC probe.so") into
 * every process of a real program (sqlite3, python3, gcc and its cc1/as/ld,
 * redis-server). It defines no allocation function, so it changes nothing the
 * program calls. At load it appends to $HAKMEM_REAL_PROBE one line
 *   start pid=P comm=C malloc_path=PATH
 * where PATH (realpath'd) is the object that defines the malloc this process
 * calls (see probe_object: bench_common.h's dlsym(RTLD_DEFAULT) test, made
 * right for non-PIE executables). At normal exit it appends
 *   end pid=P hwm_kb=K
 * with the process's VmHWM. A preload that did not take (a missing file, a
 * static binary) shows as another PATH or as no line at all, and the wrapper
 * reports it so the harness marks the run as failed.
 * It calls only libc and libdl; it writes with one write(2) per line so lines
 * of concurrent processes do not interleave.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void probe_append(const char *line, size_t len)
{
    const char *file = getenv("HAKMEM_REAL_PROBE");
    if (!file || !*file)
        return;
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, len);
    (void)w;
    close(fd);
}

static void probe_comm(char *out, size_t cap)
{
    snprintf(out, cap, "?");
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0)
        return;
    out[n] = 0;
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == ' ' || *c == '=' || *c == '\t')
            *c = *c == '\n' ? 0 : '_';
}

/*
 * The object ld.so binds "malloc" to: the first object after the main program,
 * in link-map order (preloads, then dependencies breadth-first — the order of the
 * global lookup scope), that defines malloc itself. dlsym(RTLD_DEFAULT) alone is
 * not enough: a non-PIE executable such as Debian's python3.11 takes malloc's
 * address, so its PLT stub is the canonical "malloc" and dlsym names the
 * executable. A program that really defines malloc itself is not seen.
 */
struct probe_walk {
    int index;
    char path[PATH_MAX];
};

static int probe_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct probe_walk *w = arg;
    (void)size;
    if (w->index++ == 0 || !info->dlpi_name || !*info->dlpi_name)
        return 0; /* the main program, the vdso */
    void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return 0;
    void *sym = dlsym(h, "malloc"); /* this object first, then its dependencies */
    Dl_info di;
    char mine[PATH_MAX], def[PATH_MAX];
    int found = sym && dladdr(sym, &di) && di.dli_fname && realpath(di.dli_fname, def) &&
                realpath(info->dlpi_name, mine) && strcmp(def, mine) == 0;
    dlclose(h);
    if (!found)
        return 0;
    memcpy(w->path, def, sizeof def);
    return 1;
}

__attribute__((constructor)) static void probe_start(void)
{
    char comm[64], line[PATH_MAX + 128];
    struct probe_walk w = { 0, "unknown" };
    dl_iterate_phdr(probe_object, &w);
    for (char *c = w.path; *c; c++)
        if (*c == ' ' || *c == '=' || *c == '\t')
            *c = '_';
    probe_comm(comm, sizeof comm);
    int n = snprintf(line, sizeof line, "start pid=%ld comm=%s malloc_path=%s\n",
                     (long)getpid(), comm, w.path);
    if (n > 0)
        probe_append(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

__attribute__((destructor)) static void probe_end(void)
{
    char buf[4096], line[128];
    long hwm = -1;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            const char *h = strstr(buf, "VmHWM:");
            if (h)
                hwm = strtol(h + 6, NULL, 10);
        }
    }
    int n = snprintf(line, sizeof line, "end pid=%ld hwm_kb=%ld\n", (long)getpid(), hwm);
    if (n > 0)
        probe_append(line, (size_t)n);
}
