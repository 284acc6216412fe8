#!/usr/bin/env python3
"""sizes_at_peak.py — what each allocator's rounding costs a program at its peak.

Runs a command twice with tools/sizes_at_peak.c preloaded over glibc: the
first run finds the peak of the bytes the program holds (the sizes it asked
for, live), the second writes the histogram of its live blocks' requested
sizes when it first reaches that peak (a program that does not, its threads
interleaving otherwise, is run again to 99.9 % of it, then 99 %). Then asks each
allocator, through its own malloc_usable_size, how many bytes it gives for
each of those sizes, and reports the rounding (usable − requested bytes,
summed over the live blocks) and the sizes that cost hakmem the most.

Headers and free memory are not in the figure: it is what the size classes
(or the 64 KiB granules of hakmem's arenas, or glibc's 16-byte chunks) add to
what the program holds. glibc's chunks also carry 8 bytes of header each,
which its malloc_usable_size does not count.

  python3 tools/sizes_at_peak.py [--lib build/libhakmem.so] [--peer NAME=LIB ...]
                                 [--top 8] [--keep DIR] -- COMMAND ARGS...
  python3 tools/sizes_at_peak.py --self-test [--lib build/libhakmem.so]

The command may start other processes: the one whose live bytes peak highest
is measured. bench/real/run_real.sh passes LD_PRELOAD on to the program it
measures, so `-- bench/real/run_real.sh git 400` measures git itself.
"""
import argparse, glob, os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The block each allocator gives for a size, as its malloc_usable_size says,
# in a thread past its start: first it holds 64 blocks of every size from
# 16 B to 1 KiB (hakmem serves a thread's first refills of the small classes
# from the power of two above them, HAKMEM_YOUNG_REFILLS); then, per size,
# the smallest of 64 blocks held at once (an allocator may hand out a larger
# class's free block while the size's own class has none: hakmem's
# borrowing).
USABLE_C = r'''
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  static void *warm[127 * 64];
  for (int i = 0; i < 127 * 64; i++) warm[i] = malloc(16 + (size_t)(i / 64) * 8);
  unsigned long long s;
  void *b[64];
  while (scanf("%llu", &s) == 1) {
    size_t least = (size_t)-1;
    for (int i = 0; i < 64; i++) {
      b[i] = malloc(s);
      if (b[i] == NULL) return 1;
      size_t u = malloc_usable_size(b[i]);
      if (u < least) least = u;
    }
    for (int i = 0; i < 64; i++) free(b[i]);
    printf("%zu\n", least);
  }
  for (int i = 0; i < 127 * 64; i++) free(warm[i]);
  return 0;
}
'''


SELFTEST_C = r'''
#include <stdlib.h>
int main(void) {
  void *keep[2000], *gone[500];
  for (int i = 0; i < 1000; i++) keep[i] = malloc(100);
  for (int i = 0; i < 500; i++) gone[i] = malloc(3000);
  for (int i = 0; i < 500; i++) free(gone[i]);        /* 1.6 MB passed */
  for (int i = 0; i < 10; i++) free(malloc(200000));   /* 0.3 MB at most */
  for (int i = 1000; i < 2000; i++) keep[i] = malloc(1700); /* the peak: 1.8 MB */
  for (int i = 0; i < 2000; i++) free(keep[i]);
  return 0;
}
'''


def cc(src, out, shared=False):
    cmd = [os.environ.get('CC', 'cc'), '-O2', '-o', out, src]
    if shared:
        cmd[1:1] = ['-shared', '-fPIC']
        cmd.append('-ldl')
    subprocess.run(cmd, check=True)


def measure(cmd, work):
    """(peak bytes, {size: count}) of the process whose live bytes peaked highest."""
    shim = os.path.join(work, 'sizes_at_peak.so')
    prefix = os.path.join(work, 'run')

    def run(extra):
        env = dict(os.environ, SIZES_OUT=prefix, LD_PRELOAD=shim, **extra)
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    run({})
    peaks = [int(open(f).read()) for f in glob.glob(prefix + '.*.peak')]
    if not peaks:
        sys.exit('sizes_at_peak: no process of the command wrote its peak')
    peak = max(peaks)
    for f in glob.glob(prefix + '.*'):
        os.unlink(f)
    # A deterministic program reaches the same peak again; one whose threads
    # interleave differently may stop short of it: then a little lower.
    for target in (peak, peak * 999 // 1000, peak * 99 // 100):
        run({'SIZES_AT': str(target)})
        best = None
        for f in glob.glob(prefix + '.*.hist'):
            hist = {}
            for line in open(f):
                s, n = line.split()
                hist[int(s)] = int(n)
            live = sum(s * n for s, n in hist.items())
            if best is None or live > best[0]:
                best = (live, hist)
        for f in glob.glob(prefix + '.*'):
            os.unlink(f)
        if best is not None:
            return peak, best[1]
    sys.exit('sizes_at_peak: the later runs did not reach 99 %% of the first run\'s peak (%d bytes)' % peak)


def usable(sizes, lib, helper):
    env = dict(os.environ)
    env.pop('LD_PRELOAD', None)
    if lib:
        env['LD_PRELOAD'] = lib
    r = subprocess.run([helper], input=''.join('%d\n' % s for s in sizes), env=env, capture_output=True, text=True)
    got = [int(x) for x in r.stdout.split()]
    if r.returncode != 0 or len(got) != len(sizes):
        sys.exit('sizes_at_peak: malloc_usable_size under %s failed' % (lib or 'glibc'))
    return dict(zip(sizes, got))


def report(hist, allocs, helper, top):
    sizes = sorted(hist)
    live = sum(s * n for s, n in hist.items())
    blocks = sum(hist.values())
    print('live at the peak: %.1f MiB in %d blocks, %d distinct sizes' % (live / 2**20, blocks, len(sizes)))
    print()
    print('| allocator | rounding (MiB) | of the live bytes |')
    print('|---|---:|---:|')
    rounded = {}
    for name, lib in allocs:
        u = usable(sizes, lib, helper)
        rounded[name] = u
        w = sum((u[s] - s) * n for s, n in hist.items())
        print('| %s | %.2f | %.1f %% |' % (name, w / 2**20, 100.0 * w / live if live else 0.0))
    print()
    print("glibc's chunk headers, 8 bytes a block and not in its row: %.2f MiB" % (blocks * 8 / 2**20))
    name = allocs[0][0]
    u = rounded[name]
    rows = sorted(hist.items(), key=lambda x: -(u[x[0]] - x[0]) * x[1])[:top]
    print()
    print('Sizes that cost %s the most:' % name)
    print()
    print('| size | live blocks | %s gives | rounding (MiB) |' % name)
    print('|---:|---:|---:|---:|')
    for s, n in rows:
        print('| %d | %d | %d | %.2f |' % (s, n, u[s], (u[s] - s) * n / 2**20))
    return rounded


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--lib', default=os.path.join(ROOT, 'build', 'libhakmem.so'), help='libhakmem.so to ask')
    ap.add_argument('--peer', action='append', default=[], metavar='NAME=LIB',
                    help='another allocator to ask (glibc is always asked)')
    ap.add_argument('--top', type=int, default=8)
    ap.add_argument('--keep', help='write the histogram (size count) to this file')
    ap.add_argument('--self-test', action='store_true')
    ap.add_argument('cmd', nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ['--'] else a.cmd
    if not a.self_test and not cmd:
        ap.error('a command to measure, after --')
    work = tempfile.mkdtemp(prefix='sizes_at_peak.')
    try:
        cc(os.path.join(HERE, 'sizes_at_peak.c'), os.path.join(work, 'sizes_at_peak.so'), shared=True)
        helper_c = os.path.join(work, 'usable.c')
        open(helper_c, 'w').write(USABLE_C)
        helper = os.path.join(work, 'usable')
        cc(helper_c, helper)
        allocs = [('hakmem', os.path.abspath(a.lib)), ('glibc', '')]
        for p in a.peer:
            n, _, lib = p.partition('=')
            allocs.append((n, lib))
        if a.self_test:
            src = os.path.join(work, 'selftest.c')
            open(src, 'w').write(SELFTEST_C)
            prog = os.path.join(work, 'selftest')
            cc(src, prog)
            cmd = [prog]
        peak, hist = measure(cmd, work)
        if a.keep:
            with open(a.keep, 'w') as f:
                for s in sorted(hist):
                    f.write('%d %d\n' % (s, hist[s]))
        rounded = report(hist, allocs, helper, a.top)
        if a.self_test:
            want = {100: 1000, 1700: 1000}
            ok = hist == want and peak == 100 * 1000 + 1700 * 1000
            ok = ok and all(rounded[n][s] >= s for n, _ in allocs for s in want)
            print('\nself-test: peak %d, histogram %s: %s' % (peak, hist, 'ok' if ok else 'FAILED'))
            return 0 if ok else 1
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
