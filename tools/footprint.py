#!/usr/bin/env python3
"""footprint.py — what hakmem costs a small process, by mapping.

Runs a few small programs with and without libhakmem.so preloaded and splits
their resident memory by mapping (from /proc/<pid>/smaps at exit):

  hak_file   libhakmem's file-backed resident pages (text, rodata, headers)
  hak_anon   libhakmem's own anonymous pages: its written data/relro pages
             and its BSS (the ownership map and the globals)
             (both from /proc/self/pagemap over libhakmem's PT_LOAD segments;
             the last column splits them by segment, in load order)
  libc_file  libc.so's file-backed resident pages
  anon       every other anonymous mapping ([heap], superslabs, heap chunks,
             thread stacks and TLS)
  VmHWM      peak RSS (/proc/self/status at exit; the dump library
             tools/footprint_dump.c, preloaded into every case, adds ~20 kB)

Cases: tiny (tools/footprint_tiny.c: 100 mallocs, a printf), /bin/true,
python3 -c pass, bench_random_mixed 2000000 400 42 and
bench_xmalloc 1 1 300 8 64 32 (their own peak_rss_kb too). Each under glibc
(no preload), hakmem, and hakmem with HAKMEM_FORCE_LIBC_ALLOC=1.

  python3 tools/footprint.py [--build build] [--runs 3] [--lib path] [--cases tiny,true]
"""
import argparse, os, re, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_smaps(text):
    maps, cur = [], None
    for line in text.splitlines():
        m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s*(.*)$', line)
        if m:
            cur = dict(start=int(m.group(1), 16), end=int(m.group(2), 16), perms=m.group(3),
                       off=int(m.group(4), 16), path=m.group(5).strip(), rss=0, anon=0)
            maps.append(cur)
            continue
        if cur is not None:
            if line.startswith('Rss:'):
                cur['rss'] = int(line.split()[1])
            elif line.startswith('Anonymous:'):
                cur['anon'] = int(line.split()[1])
    status = {}
    for line in text.splitlines():
        m = re.match(r'^(Vm\w+):\s+(\d+) kB', line)
        if m:
            status[m.group(1)] = int(m.group(2))
    return maps, status


def split(text, maps):
    """The columns of one run, from the dump: libhakmem by segment (pagemap),
    the rest by mapping (smaps)."""
    r = dict(hak_file=0, hak_anon=0, libc_file=0, anon=0, rss=0)
    segs = []
    for line in text.splitlines():
        if line.startswith('FOOTPRINT_SEG '):
            flags, vaddr, memsz, fkb, akb = line.split()[1:]
            segs.append((int(flags), int(fkb), int(akb)))
            r['hak_file'] += int(fkb)
            r['hak_anon'] += int(akb)
    # text+rodata+headers file pages, in load order: R, R X, R, RW
    r['hak_segs'] = '+'.join('%d' % (f + a) for _, f, a in segs)
    hak_named_anon = 0
    for mp in maps:
        r['rss'] += mp['rss']
        p = mp['path']
        if 'libhakmem' in p:
            hak_named_anon += mp['anon']
        elif re.search(r'/libc\.so', p):
            r['libc_file'] += mp['rss'] - mp['anon']
        elif p in ('', '[heap]'):
            r['anon'] += mp['rss']
    # the BSS pages counted by the dump lie in an unnamed mapping: not "anon"
    r['anon'] -= r['hak_anon'] - hak_named_anon
    return r


def run(cmd, env):
    """Runs cmd; returns its stdout."""
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if p.returncode != 0:
        sys.exit('footprint: %s failed (%d)' % (' '.join(cmd), p.returncode))
    return p.stdout.decode(errors='replace')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default=os.path.join(HERE, '..', 'build'))
    ap.add_argument('--lib', default=None, help='default: BUILD/libhakmem.so')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--cases', default='tiny,true,python,random_mixed,xmalloc')
    ap.add_argument('--modes', default='glibc,hakmem,force_libc')
    ap.add_argument('--maps', action='store_true', help='print every resident mapping of the last run')
    a = ap.parse_args()
    lib = os.path.abspath(a.lib or os.path.join(a.build, 'libhakmem.so'))
    tmp = tempfile.mkdtemp(prefix='footprint.')
    tiny, dump = os.path.join(tmp, 'tiny'), os.path.join(tmp, 'dump.so')
    subprocess.check_call(['cc', '-O2', '-o', tiny, os.path.join(HERE, 'footprint_tiny.c')])
    subprocess.check_call(['cc', '-O2', '-shared', '-fPIC', '-o', dump, os.path.join(HERE, 'footprint_dump.c')])
    bench = os.path.join(a.build, 'bench')
    cases = {
        'tiny': [tiny],
        'true': ['/bin/true'],
        'python': ['python3', '-c', 'pass'],
        'random_mixed': [os.path.join(bench, 'bench_random_mixed'), '2000000', '400', '42'],
        'xmalloc': [os.path.join(bench, 'bench_xmalloc'), '1', '1', '300', '8', '64', '32'],
    }
    cols = ['VmHWM', 'peak_rss_kb', 'hak_file', 'hak_anon', 'libc_file', 'anon', 'rss']
    print('| case | mode | ' + ' | '.join(cols) + ' | hak by segment (last run) |')
    print('|---|---|' + '---:|' * len(cols) + '---|')
    for case in a.cases.split(','):
        cmd = cases[case]
        for mode in a.modes.split(','):
            rows = []
            for _ in range(a.runs):
                env = dict(os.environ)
                env.pop('LD_PRELOAD', None)
                for k in list(env):
                    if k.startswith('HAKMEM_'):
                        del env[k]
                if mode != 'glibc':
                    env['LD_PRELOAD'] = lib
                if mode == 'force_libc':
                    env['HAKMEM_FORCE_LIBC_ALLOC'] = '1'
                outf = os.path.join(tmp, 'smaps')
                env['FOOTPRINT_OUT'] = outf
                env['LD_PRELOAD'] = (env.get('LD_PRELOAD', '') + ' ' + dump).strip()
                out = run(cmd, env)
                m = re.search(r'peak_rss_kb[=: ]+(\d+)', out)
                text = open(outf).read()
                maps, status = parse_smaps(text)
                row = dict(peak_rss_kb=int(m.group(1)) if m else 0, VmHWM=status.get('VmHWM', 0))
                row.update(split(text, maps))
                rows.append(row)
            med = {c: int(statistics.median(r[c] for r in rows)) for c in cols}
            segs = rows[-1]['hak_segs'] or '-'
            print('| %s | %s | ' % (case, mode) + ' | '.join(str(med[c]) for c in cols) + ' | %s |' % segs)
            if a.maps:
                for mp in maps:
                    if mp['rss']:
                        print('    %6d kB (anon %5d) %x-%x %s %06x %s' % (mp['rss'], mp['anon'], mp['start'],
                              mp['end'], mp['perms'], mp['off'], mp['path']))
    sys.stdout.flush()


if __name__ == '__main__':
    main()
