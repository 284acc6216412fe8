#!/usr/bin/python3
"""bench/report.py — turn the raw results of bench/run.sh into Markdown and a chart.

Standard library only. Called by run.sh:
  report.py suite RAW.tsv META.tsv OUT.md CHART_BASENAME [README.md]
  report.py instr RAW.tsv META.tsv OUT.md
  report.py callgrind CALLGRIND.OUT FUNCTION     (prints ir= bc= bi= of FUNCTION's callees)
  report.py acct PERIODIC_FILE [EXIT_FILE...]    (prints key=value of the statistics report at the
                                                  process's largest RSS: hakmem's split at peak;
                                                  the exit report only if no periodic one exists)
"""
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

PEERS = ["glibc", "mimalloc", "jemalloc", "tcmalloc"]
ORDER = ["hakmem", "hakmem-base", "hakmem-libc", "glibc", "mimalloc", "jemalloc", "tcmalloc"]
BASE = "hakmem-base"  # an older hakmem build (HAKMEM_BASE_LIB), never a peer
DISPLAY = {"hakmem-libc": "hakmem (libc-forced)"}

DESCRIPTIONS = {
    "random_mixed": "1 thread, random malloc/free over 400 slots, 16–1024 B",
    "random_mixed_257_768": "1 thread, random malloc/free over 400 slots, 257–768 B",
    "mid_large_mt": "2 threads, random mixed per thread, 8–32 KiB",
    "mid_mt_257_768": "2 threads, random mixed per thread, 257–768 B",
    "mid_mt_64k_1m": "2 threads, random mixed per thread, 64 KiB–1 MiB",
    "mid_mt_16t": "16 threads on 2 cores, random mixed per thread (every free local), 16–1024 B",
    "small_ws_64t": "64 threads on 2 cores, random mixed per thread over 50 slots of 16–512 B (every free local): what each thread holds beyond its few KiB",
    "written_mixed": "2 threads, random mixed per thread, 8 B–32 KiB log-uniform, every block written whole",
    "written_mixed_16t": "as written_mixed with 16 threads on 2 cores",
    "written_big": "2 threads, random mixed per thread over 64 slots, 64 KiB–1 MiB log-uniform, every block written whole",
    "written_big_16t": "as written_big with 16 threads on 2 cores",
    "idle_16t": "16 threads on 2 cores write 256 MiB of 16 B–256 KiB blocks, free nine in ten and sleep, "
                "alive, for 1 s with no allocator call; op = a malloc or free of the burst (the RSS while "
                "they sleep: *Memory given back while threads sleep*)",
    "larson": "2 threads, Larson server simulation, 8–128 B, slices handed to new threads",
    "prodcons": "1 producer + 1 consumer, blocks 16–512 B freed by the other thread",
    "alltoall": "2 threads allocate for each other, barrier, free what they received",
    "thread_churn": "short-lived threads: free predecessor's blocks, allocate, exit",
    "realloc": "strings (realloc per append) and vectors (1.5x growth) up to 256 KiB",
    "aligned": "alignments 16 B–1 MiB, sizes 16–4096 B, alignment checked",
    "large_churn": "64 KiB–8 MiB blocks, every page touched, 8 slots",
    "false_sharing": "2 threads each malloc 8 B and hammer writes (active false sharing)",
    "false_sharing_passive": "as false_sharing, after freeing blocks the main thread allocated side by side",
    "calloc": "calloc 16 B–64 KiB, zero checked, random mixed over 400 slots",
    "peak_mem": "build 400k blocks, free 90% randomly, allocate 200k more; RSS",
    "big_buffers": "20 calloc'd buffers of 5–25 MiB, a random one replaced per op, every page read (zero) and written",
    "thread_pass": "generations of 2 short-lived threads passing half their 16 B–4 KiB blocks on through a mailbox",
    "size_runs": "2 threads, runs of 2 500 blocks of one size, one size after another (1 B–1000 B up, then down; sh6bench's pattern), every free local",
    "size_runs_16t": "as size_runs with 16 threads on 2 cores",
    "size_runs_ring": "as size_runs, each up-run freed by the next thread of a ring (sh8bench's cross-thread frees)",
    "size_runs_ring_16t": "as size_runs_ring with 16 threads on 2 cores",
    "batch_mix": "2 threads, rounds of 4 000 blocks of 1 B–1000 B (sizes interleaved), all freed at the end of each round, every free local",
    "batch_mix_1t": "as batch_mix with 1 thread",
    "batch_mix_16t": "as batch_mix with 16 threads on 2 cores",
    "phases": "1 thread, phases of 32 MiB of blocks of one size, written whole and freed, sizes in turn (4 KiB, 64 B, 8 KiB, 1 KiB, 32 KiB, 3 KiB, 96 B, 16 KiB)",
    "phases_wide": "1 thread, phases as in phases, of sizes whose slabs hold too many or too few blocks of the next (16 B, 64 KiB, 64 B, 100 000 B, 1 KiB, 48 KiB)",
    "phases_to_big": "1 thread, one phase of 96 MiB of 16 B blocks, written and freed, then one of 200 000 B blocks (the slabs' pages, then the arenas')",
    "phases_to_small": "1 thread, one phase of 96 MiB of 300 000 B blocks, written and freed, then one of 1 KiB blocks (the arenas' pages, then the slabs')",
    "stress": "rounds of 2 threads keeping 2000 blocks each and swapping one in four through a shared array of 1000 (mimalloc's test-stress pattern)",
    "stress_16t": "as stress with 16 threads on 2 cores",
    "size_mix": "1 thread, 70% 16–256 B, 20% –4 KiB, 9% –32 KiB, 1% –128 KiB, random lifetimes, 5% realloc growth",
    "xmalloc_8_64": "1 producer allocates 8–64 B blocks, 1 consumer frees them (batches of 32), fixed time",
    "xmalloc_64_4k": "1 producer allocates 64 B–4 KiB blocks, 1 consumer frees them (batches of 32), fixed time",
    "xmalloc_1p2c": "1 producer allocates 8 B–4 KiB blocks, 2 consumers free them (3 threads), fixed time",
    "xmalloc_2p1c": "2 producers allocate 8 B–4 KiB blocks, 1 consumer frees them all (3 threads), fixed time",
    "remote_0": "2 threads, 16–256 B, every free local (the baseline of the remote_* rows)",
    "remote_50_b1": "2 threads, 16–256 B, half the frees remote, blocks handed over one at a time",
    "remote_50_b256": "2 threads, 16–256 B, half the frees remote, blocks handed over 256 at a time",
    "remote_100_b1": "2 threads, 16–256 B, every free remote, blocks handed over one at a time",
    "remote_100_b256": "2 threads, 16–256 B, every free remote, blocks handed over 256 at a time",
    "larson_1k": "larson, 2 threads, 8–1000 B, 1,000 blocks per thread",
    "larson_10k": "larson, 2 threads, 8–1000 B, 10,000 blocks per thread",
    "larson_sized": "larson in C++, 8–1000 B, 5,000 blocks per thread, freed with sized operator delete(p, size)",
    "rounds": "2 threads pass 16–1024 B blocks through a shared exchange array in rounds, 1 ms pause between rounds",
    "rounds_fresh": "as rounds, with 2 new threads every round that inherit their predecessors' blocks",
}

# Many more threads than cores (issue 19): speed and peak RSS against the peers.
MANY_THREAD = ["larson_16t", "larson_16t_5k", "larson_64t", "larson_256t", "prodcons_16t", "prodcons_64t", "xmalloc_16t",
               "thread_churn_16t", "thread_churn_64t", "rounds_16t", "mid_mt_16t", "small_ws_64t", "written_mixed_16t",
               "written_big_16t", "idle_16t", "size_runs_16t", "size_runs_ring_16t", "stress_16t", "batch_mix_16t"]
# Benchmarks where blocks cross threads or threads contend: the cross-thread goal covers these
# (every many-thread row among them).
CROSS_THREAD = ["larson", "larson_1k", "larson_10k", "larson_sized", "prodcons", "alltoall",
                "thread_churn", "thread_pass", "false_sharing", "false_sharing_passive",
                "mid_large_mt", "mid_mt_257_768", "mid_mt_64k_1m", "written_mixed", "written_big",
                "xmalloc_8_64", "xmalloc_64_4k", "xmalloc_1p2c", "xmalloc_2p1c",
                "remote_0", "remote_50_b1", "remote_50_b256", "remote_100_b1", "remote_100_b256",
                "rounds", "rounds_fresh", "size_runs_ring", "handoff", "stress"] + MANY_THREAD
# The row that measures what a process gives back while its threads sleep
# (bench_idle): its RSS samples after the last free, in ms.
IDLE = "idle_16t"
IDLE_AT = [0, 100, 200, 500, 1000]
# Real programs from Debian packages (bench/real/).
REAL = ["real_sqlite", "real_python", "real_gcc", "real_redis", "real_ruby", "real_sort", "real_jq", "real_git",
        "real_python_16t", "real_node_16t", "real_cppcheck", "real_perl", "real_perl_16t"]


def name_of(a):
    return DISPLAY.get(a, a)


def parse_kv(line):
    d = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            d[k] = v
    return d


def num(d, k):
    try:
        return float(d[k])
    except (KeyError, ValueError):
        return None


def read_meta(path):
    meta, notes, libs, pkgs = {}, [], [], []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if parts[0] == "LIB" and len(parts) >= 3:
                libs.append(parts[1:])
            elif parts[0] == "pkg" and len(parts) == 2:
                pkgs.append(parts[1])
            elif len(parts) == 2:
                meta[parts[0]] = parts[1]
            else:
                notes.append(line)
    return meta, notes, libs, pkgs


def fmt_rate(x):
    if x is None:
        return "–"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f}"


def fmt_mib(kb):
    return "–" if kb is None else f"{kb / 1024:.1f} MiB"


def fmt_ratio(r):
    return "–" if r is None else f"{r:.2f}×"


def machine_block(meta, pkgs):
    lines = [
        f"- date: {meta.get('date', '?')}, commit {meta.get('commit', '?')}"
        + (f" (libhakmem.so built {meta['hakmem_lib_built']})" if "hakmem_lib_built" in meta else "")
        + f", mode: {meta.get('mode', '?')}"
        + (f", elapsed {meta['elapsed']}" if "elapsed" in meta else ""),
        f"- machine: {meta.get('nproc', '?')} CPUs, {meta.get('cpu', '?')}; kernel {meta.get('kernel', '?')}; glibc {meta.get('glibc', '?')}",
    ]
    if pkgs:
        lines.append("- peers: " + ", ".join(pkgs))
    if "hakmem_base" in meta:
        built = f" (built {meta['hakmem_base_built']})" if "hakmem_base_built" in meta else ""
        lines.append(f"- hakmem-base (an older build, measured in the same run): `{meta['hakmem_base']}`{built}")
    if "load_start" in meta:
        lines.append(f"- load average (1/5/15 min) before the run: {meta['load_start']}")
    other = other_cpu_share(meta)
    if other is not None:
        warn = " — **the machine was not idle: other work disturbed these figures; run again on an idle machine**" if other > 0.10 else ""
        lines.append(f"- CPU used by other processes during the run: {other * 100:.0f}% of the machine{warn}")
    return "\n".join(lines)


def other_cpu_share(meta):
    """Share of the machine's CPU time used by processes other than the
    benchmarks during the run: /proc/stat busy time minus the harness's
    children's CPU time (bash `times`), over elapsed time x CPUs."""
    try:
        a = [int(x) for x in meta["cpu_start"].split()[1:]]
        b = [int(x) for x in meta["cpu_end"].split()[1:]]
        hz = os.sysconf("SC_CLK_TCK")
        busy = lambda v: sum(v[:3]) + sum(v[5:8])  # user nice system (idle iowait) irq softirq steal
        total_busy = (busy(b) - busy(a)) / hz
        secs = 0.0
        for t in meta["children_cpu"].split():
            m = re.match(r"(\d+)m([\d.]+)s", t)
            if m:
                secs += int(m.group(1)) * 60 + float(m.group(2))
        elapsed = float(meta["elapsed_secs"])
        n = int(meta["nproc"])
        return max(0.0, (total_busy - secs) / (elapsed * n))
    except (KeyError, ValueError, IndexError, ZeroDivisionError):
        return None


# --------------------------------------------------------------- suite
def load_suite(raw):
    runs = {}  # (bench, alloc) -> list of dicts
    benches, allocs = [], []
    with open(raw) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 7:
                continue
            bench, alloc, rep, status, wall, maxrss, res = parts[:7]
            if bench not in benches:
                benches.append(bench)
            if alloc not in allocs:
                allocs.append(alloc)
            d = parse_kv(res)
            d["_status"] = status
            d["_wall"] = wall
            if maxrss:
                d["_maxrss"] = maxrss
            if len(parts) > 7:  # run.sh's time(1) figures: MINFLT= MAJFLT= SYS_S= USER_S=
                for k, v in parse_kv(parts[7]).items():
                    d["_" + k.lower()] = v
            runs.setdefault((bench, alloc), []).append(d)
    allocs.sort(key=lambda a: ORDER.index(a) if a in ORDER else 99)
    return runs, benches, allocs


def summarize(runs, bench, alloc):
    rs = runs.get((bench, alloc), [])
    ok = [r for r in rs if r["_status"] == "ok"]
    fails = [r["_status"] for r in rs if r["_status"] != "ok"]
    s = {"n": len(rs), "ok": len(ok), "fails": fails}
    vals = [num(r, "ops_per_sec") for r in ok if num(r, "ops_per_sec") is not None]
    if vals:
        s["med"] = statistics.median(vals)
        s["min"] = min(vals)
        s["max"] = max(vals)
    rss = [num(r, "peak_rss_kb") or num(r, "_maxrss") for r in ok]
    rss = [x for x in rss if x]
    if rss:
        s["rss"] = statistics.median(rss)
    flt = [num(r, "_minflt") + (num(r, "_majflt") or 0) for r in ok if num(r, "_minflt") is not None]
    if flt:
        s["faults"] = statistics.median(flt)
    for k, key in (("_sys_s", "sys"), ("_user_s", "user")):
        v = [num(r, k) for r in ok if num(r, k) is not None]
        if v:
            s[key] = statistics.median(v)
    for k in ("after_free_rss_kb", "final_rss_kb", "live_kb", "built_rss_kb", "base_rss_kb") + \
            tuple(f"rss_{t}_kb" for t in IDLE_AT):
        v = [num(r, k) for r in ok if num(r, k) is not None]
        if v:
            s[k] = statistics.median(v)
    return s


def suite(raw, metafile, out_md, chart_base, readme=None):
    meta, notes, libs, pkgs = read_meta(metafile)
    runs, benches, allocs = load_suite(raw)
    S = {(b, a): summarize(runs, b, a) for b in benches for a in allocs}

    def best_peer(b):
        # a peer that failed every run has no median and is left out
        v = [S[(b, p)].get("med") for p in PEERS if p in allocs]
        v = [x for x in v if x]
        return max(v) if v else None

    def best_peer_name(b):
        v = [(S[(b, p)].get("med"), p) for p in PEERS if p in allocs and S[(b, p)].get("med")]
        return max(v)[1] if v else None

    def min_peer_rss(b):
        v = [S[(b, p)].get("rss") for p in PEERS if p in allocs]
        v = [x for x in v if x]
        return min(v) if v else None

    def ratio(b, a, ref=None):
        m = S[(b, a)].get("med")
        r = ref if ref is not None else best_peer(b)
        return m / r if m and r else None

    out = []
    out.append("# hakmem benchmark results\n")
    out.append(machine_block(meta, pkgs) + "\n")
    out.append(
        "Throughput is operations per second (higher is better; what an operation is "
        "depends on the benchmark, see bench/README.md): median of the repeats, min–max "
        "beside it. *vs best peer* divides by the best median among glibc, mimalloc, "
        "jemalloc and tcmalloc (1.00× = as fast as the best of them). Peak RSS is the "
        "process's VmHWM (median); *RSS vs min peer* divides by the smallest peer's.\n")
    if notes:
        out.append("Notes:\n")
        for n in notes:
            out.append(f"- {n}")
        out.append("")

    # summary
    out.append("## Summary: throughput relative to the best peer\n")
    out.append("| benchmark | " + " | ".join(name_of(a) for a in allocs) + " |")
    out.append("|---|" + "---:|" * len(allocs))
    for b in benches:
        cells = []
        for a in allocs:
            r = ratio(b, a)
            st = S[(b, a)]
            if r is None:
                cells.append("FAIL" if st["fails"] else "–")
            else:
                cells.append(("**%.2f**" % r) if r >= 0.9995 else "%.2f" % r)
        out.append(f"| {b} | " + " | ".join(cells) + " |")
    out.append("")
    svg = os.path.basename(chart_base) + ".svg"
    out.append(f"![throughput relative to the best peer]({svg})\n")
    out.extend(rss_summary(S, benches, allocs, min_peer_rss))

    # goals (only when hakmem was measured)
    if "hakmem" in allocs:
        out.extend(goals(S, benches, allocs, ratio, best_peer_name, min_peer_rss))
    if "hakmem" in allocs and BASE in allocs:
        out.extend(vs_base(S, benches, meta))

    out.extend(acct_section(raw))
    out.extend(faults_section(S, benches, allocs))
    out.extend(idle_section(S, benches, allocs))

    # per benchmark
    out.append("## Per benchmark\n")
    for b in benches:
        out.append(f"### {b}\n")
        if b in DESCRIPTIONS:
            out.append(DESCRIPTIONS[b] + ".\n")
        extra = []
        if any("after_free_rss_kb" in S[(b, a)] for a in allocs):
            extra = ["after_free_rss_kb", "final_rss_kb", "live_kb"]
        head = "| allocator | median ops/s | min–max | vs best peer | vs glibc | peak RSS | RSS vs min peer |"
        sep = "|---|---:|---:|---:|---:|---:|---:|"
        titles = {"after_free_rss_kb": "RSS after free", "final_rss_kb": "final RSS", "live_kb": "live data"}
        for k in extra:
            head += f" {titles[k]} |"
            sep += "---:|"
        out.append(head)
        out.append(sep)
        glibc_med = S[(b, "glibc")].get("med") if "glibc" in allocs else None
        mpr = min_peer_rss(b)
        for a in allocs:
            st = S[(b, a)]
            if "med" not in st:
                why = "; ".join(sorted(set(re.sub(r"0x[0-9a-f]+", "0x…", x) for x in st["fails"]))) or "no result"
                why += f" ({len(st['fails'])} of {st['n']} runs)"
                out.append(f"| {name_of(a)} | FAIL | {why} | | | | |" + " |" * len(extra))
                continue
            rr = st.get("rss")
            row = (f"| {name_of(a)} | {fmt_rate(st['med'])} | {fmt_rate(st['min'])}–{fmt_rate(st['max'])} | "
                   f"{fmt_ratio(ratio(b, a))} | {fmt_ratio(st['med'] / glibc_med if glibc_med else None)} | "
                   f"{fmt_mib(rr)} | {fmt_ratio(rr / mpr if rr and mpr else None)} |")
            for k in extra:
                row += f" {fmt_mib(st.get(k))} |"
            if st["fails"]:
                row += f" ({len(st['fails'])} of {st['n']} runs failed: {st['fails'][0]})"
            out.append(row)
        out.append("")

    out.extend(libs_block(libs, raw))
    text = "\n".join(out)
    with open(out_md, "w") as f:
        f.write(text)

    chart(S, benches, allocs, ratio, chart_base)
    if readme:
        update_readme(readme, meta, pkgs, S, benches, allocs, ratio, svg, best_peer_name, min_peer_rss)


# ---- where hakmem's resident bytes go (the accounting run of run.sh) ------------------
# The items of the report's "resident split" line (docs/stats.md), in its order, with the
# table's column titles.
ACCT_ITEMS = [("requested", "requested"), ("rounding", "rounding (est.)"),
              ("free blocks", "free blocks"), ("uncarved", "uncarved"), ("free slabs", "free slabs"),
              ("large free", "large free"), ("cached", "cached"), ("thread caches", "thread caches"),
              ("metadata", "metadata")]


# The items of the report's "thread caches" line: where rss_thread_cache_bytes waits.
TC_ITEMS = [("pending", "pending"), ("current slabs", "in current slabs"), ("other slabs", "in other slabs"),
            ("abandoned", "abandoned"), ("delayed", "on delayed lists")]


def acct_key(name):
    return name.replace(" ", "_")


def acct_items(line, items, prefix, into):
    """The KiB figure after each item's name in a report line, into into[prefix + key]."""
    for name, _ in items:
        v = re.search(re.escape(name) + r" (\d+)", line)
        into[prefix + acct_key(name)] = int(v.group(1)) if v else 0


def acct_reports(paths):
    """Every (resident line, split line) pair of hakmem statistics reports in these files
    (periodic reports and the exit report alike), as dicts of KiB."""
    reps = []
    for path in paths:
        try:
            lines = open(path, errors="replace").read().splitlines()
        except OSError:
            continue
        cur = None
        for line in lines:
            m = re.match(r"resident: (\d+) KiB of (\d+) KiB mapped \(walked (\d+) KiB\); "
                         r"process (\d+) KiB, other (\d+) KiB", line)
            if m:
                cur = {"resident": int(m.group(1)), "mapped": int(m.group(2)),
                       "process": int(m.group(4)), "other": int(m.group(5))}
                continue
            if cur is not None and line.startswith("resident split:"):
                acct_items(line, ACCT_ITEMS, "", cur)
                # the part of rounding measured on arena blocks (statistics version 8)
                acct_items(line, [("arena blocks", "")], "", cur)
                reps.append(cur)
                cur = None
                continue
            # the line after the split (stats version 5): where the thread caches wait
            if reps and line.startswith("thread caches:") and "tc_pending" not in reps[-1]:
                acct_items(line, TC_ITEMS, "tc_", reps[-1])
    return reps


def acct_pick(paths):
    # The first file holds the periodic reports, taken while the program runs; the exit
    # report (the others) comes after its last frees, which leave resident what the
    # program freed but not what it held live at its peak: only the fallback.
    reps = acct_reports(paths[:1]) or acct_reports(paths[1:])
    if not reps:
        return ""
    # The peak is the process's (its VmHWM): the candidates are the reports whose process
    # RSS is within 3 % of the largest. Memory a program frees is often kept (free
    # blocks, slabs in the decay window), so reports after its last frees can be as big
    # as the peak, or bigger in hakmem's own resident total (real_sqlite's report after
    # its VACUUM's frees: 31 MiB of free slabs, 1.5 MiB more resident than at the
    # peak, the same process RSS): among the candidates, the one with the most live
    # bytes is the peak's split.
    top = max(r["process"] for r in reps)
    peak = max((r for r in reps if r["process"] >= 0.97 * top),
               key=lambda r: (r["requested"] + r["rounding"], r["process"]))
    peak["reports"] = len(reps)
    return " ".join(f"{k}={v}" for k, v in peak.items())


def acct_section(raw):
    """The table of acct-latest.tsv (written by run.sh beside RAW): one row per benchmark."""
    path = os.path.join(os.path.dirname(os.path.abspath(raw)), "acct-latest.tsv")
    rows = []
    try:
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 3:
                rows.append((f[0], f[1], parse_kv(f[2])))
    except OSError:
        return []
    if not rows:
        return []
    mib = lambda kib: "%.1f" % (kib / 1024.0)
    out = ["## Where hakmem's resident bytes go (at peak)\n",
           "One more run of hakmem per benchmark, not timed, with `HAKMEM_STATS=1 "
           "HAKMEM_STATS_INTERVAL_MS=10`: of its statistics reports (every 10 ms; the exit report only "
           "when the run was too short for any), the one with the largest process RSS (of those within 3 % of it, the one with the most live bytes), split as docs/stats.md (*Where the resident bytes go*) "
           "explains, in MiB. *hakmem* is the sum of the items; *other* is the rest of the process "
           "at that moment (program, libraries, stacks); *peak RSS* is that run's VmHWM. *rounding* "
           "is the size classes' model (half the class gap per live block) plus the arena blocks' "
           "measured rounding (statistics version 8: their resident pages past the bytes asked for, "
           "such as the last 64 KiB granule's tail and realloc's room), which *of it arena* shows "
           "apart (not added again into *hakmem*), and *requested* is live blocks less both. "
           "*Largest besides requested* names the biggest overhead item and its share of hakmem's "
           "bytes: the first thing to cut on that row; when it is *thread caches*, where they wait "
           "(docs/stats.md: pending in the freeing threads' caches, in the owners' current slabs, in "
           "their other slabs, in abandoned ones, on the delayed lists of their full slabs), which says "
           "who would collect them. Since statistics version 6, blocks on delayed lists count as "
           "thread caches, no longer as requested. A short run may have had no report before its "
           "exit.\n",
           "| benchmark | peak RSS | hakmem | " + " | ".join(t for _, t in ACCT_ITEMS[:2]) +
           " | of it arena | " + " | ".join(t for _, t in ACCT_ITEMS[2:]) +
           " | other | largest besides requested |",
           "|---|---:|---:|" + "---:|" * (len(ACCT_ITEMS) + 1) + "---:|---|"]
    for b, rss, kv in rows:
        r = num({"r": rss}, "r")
        rss_mib = "–" if r is None else mib(r)
        if "resident" not in kv:
            out.append(f"| {b} | {rss_mib} | no report |" + " |" * (len(ACCT_ITEMS) + 3))
            continue
        items = [(t, num(kv, acct_key(n)) or 0) for n, t in ACCT_ITEMS]
        big = max(items[1:], key=lambda x: x[1])  # what the program did not ask for
        what = f"{big[0]} ({100.0 * big[1] / max(1, num(kv, 'resident') or 1):.0f} %"
        tc = [(t, num(kv, "tc_" + acct_key(n)) or 0) for n, t in TC_ITEMS]
        if big[0] == "thread caches" and big[1] > 0 and sum(v for _, v in tc) > 0:
            # who would collect them: the largest parts of the item
            what += ": " + ", ".join(f"{100.0 * v / big[1]:.0f} % {t}" for t, v in
                                     sorted(tc, key=lambda x: -x[1]) if v >= 0.1 * big[1])
        cells = [mib(v) for _, v in items]
        cells.insert(2, mib(num(kv, "arena_blocks") or 0))
        out.append(f"| {b} | {rss_mib} | {mib(num(kv, 'resident') or 0)} | " +
                   " | ".join(cells) +
                   f" | {mib(num(kv, 'other') or 0)} | {what}) |")
    out.append("")
    return out


# The goals of the allocator's current work item: (benchmark, wanted ratio to the best peer).
GOAL_ALL = 1.0          # every benchmark at least as fast as the best peer
GOAL_BENCHES = []       # named benchmarks with a goal of their own: none in the current work
GOAL_RSS = 1.1          # peak RSS at most this times the smallest peer's, on every benchmark
GOAL_RSS_GEO = 1.0      # geometric mean over the benchmarks of peak RSS / the smallest peer's
GOAL_CROSS = 1.0        # every cross-thread benchmark (CROSS_THREAD) this times the best peer


def rss_geomean(S, benches, a, min_peer_rss):
    """Geometric mean over the benchmarks of a's peak RSS / the smallest peer's, and the count."""
    xs = []
    for b in benches:
        h = S.get((b, a), {}).get("rss")
        m = min_peer_rss(b)
        if h and m:
            xs.append(h / m)
    if not xs:
        return None, 0
    return math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)


def fmt_goal(x, want):
    """x with two decimals, or three when two would round a miss up to the target."""
    s = f"{x:.2f}×"
    if x < want and round(x, 2) >= want:
        s = f"{x:.3f}×"
    return s


def goals(S, benches, allocs, ratio, best_peer_name, min_peer_rss, readme=False):
    if readme:
        out = ["Goals — the targets of the allocator's current work item (measured in this run; "
               "best peer = the fastest of glibc, mimalloc, jemalloc, tcmalloc that completed the benchmark):\n"]
    else:
        out = ["## Goals (hakmem)\n",
               "The targets of the allocator's current work item, measured in this run. *Best peer* is the "
               "fastest of glibc, mimalloc, jemalloc and tcmalloc on that benchmark; a peer that fails a "
               "benchmark (crash, wrong result) is left out of it.\n"]
    out += ["| goal | measured | met |", "|---|---:|:---:|"]

    # every benchmark >= 1.0x the best peer
    rows = []  # (ratio or None for a failed hakmem, bench)
    for b in benches:
        if not best_peer_name(b):
            continue  # no peer has a result: nothing to compare with
        rows.append((ratio(b, "hakmem"), b))
    if rows:
        key = lambda xb: -1.0 if xb[0] is None else xb[0]
        worst = min(rows, key=key)
        below = sorted([xb for xb in rows if xb[0] is None or xb[0] < GOAL_ALL], key=key)
        fx = lambda xb: "FAIL" if xb[0] is None else fmt_goal(xb[0], GOAL_ALL)
        detail = f"worst {worst[1]} {fx(worst)}"
        if below:
            detail += f"; below {GOAL_ALL:.1f}× on {len(below)} of {len(rows)}: " + \
                ", ".join(f"{b} {fx((x, b))}" for x, b in below)
        else:
            detail += f"; none of {len(rows)} below"
        out.append(f"| every benchmark ≥ {GOAL_ALL:.1f}× the best peer | {detail} | {'✗' if below else '✓'} |")

    # named benchmarks
    for b, want in GOAL_BENCHES:
        if b not in benches:
            continue
        desc = f"{b} ≥ {want:.1f}× best peer"
        peer = best_peer_name(b)
        x = ratio(b, "hakmem")
        if not peer:
            out.append(f"| {desc} | no peer result | ✗ |")
        elif x is None:
            out.append(f"| {desc} | hakmem: no result | ✗ |")
        else:
            out.append(f"| {desc} | {fmt_goal(x, want)} (best peer: {peer}) | {'✓' if x >= want else '✗'} |")

    # peak RSS
    worst, over = None, []
    for b in benches:
        h = S.get((b, "hakmem"), {}).get("rss")
        m = min_peer_rss(b)
        if h and m:
            x = h / m
            if x > GOAL_RSS:
                over.append((x, b))
            if worst is None or x > worst[0]:
                worst = (x, b)
    if worst:
        detail = f"worst {worst[0]:.2f}× ({worst[1]})"
        if len(over) > 1:
            detail += f"; over {GOAL_RSS:.1f}× on " + ", ".join(f"{b} {x:.2f}×" for x, b in sorted(over, reverse=True))
        out.append(f"| peak RSS ≤ {GOAL_RSS:.1f}× smallest peer on every benchmark | {detail} | "
                   f"{'✓' if worst[0] <= GOAL_RSS else '✗'} |")
    g, n = rss_geomean(S, benches, "hakmem", min_peer_rss)
    if g is not None:
        peers = ", ".join(f"{name_of(p)} {rss_geomean(S, benches, p, min_peer_rss)[0]:.2f}"
                          for p in PEERS if p in allocs and rss_geomean(S, benches, p, min_peer_rss)[0])
        out.append(f"| geometric mean of peak RSS / smallest peer ≤ {GOAL_RSS_GEO:.2f} | {g:.2f} over {n} "
                   f"benchmarks (peers: {peers}) | {'✓' if g <= GOAL_RSS_GEO else '✗'} |")
    # many-thread rows: speed and RSS together
    mt = [b for b in MANY_THREAD if b in benches and best_peer_name(b)]
    if mt:
        bad = []
        for b in mt:
            x = ratio(b, "hakmem")
            h, m = S.get((b, "hakmem"), {}).get("rss"), min_peer_rss(b)
            rr = h / m if h and m else None
            if x is None or x < GOAL_ALL or rr is None or rr > GOAL_RSS:
                bad.append(f"{b} {'FAIL' if x is None else f'{x:.2f}×'}"
                           f"{'' if rr is None else f' / RSS {rr:.2f}×'}")
        out.append(f"| 16-, 64- and 256-thread rows ≥ {GOAL_ALL:.1f}× best peer with peak RSS ≤ {GOAL_RSS:.1f}× smallest | "
                   + (f"short on {len(bad)} of {len(mt)}: " + ", ".join(bad) if bad else f"all {len(mt)}")
                   + f" | {'✗' if bad else '✓'} |")
    # against the older build measured in the same run
    vb = [b for b in benches if S.get((b, "hakmem"), {}).get("med") and S.get((b, BASE), {}).get("med")]
    if vb:
        below = sorted((S[(b, "hakmem")]["med"] / S[(b, BASE)]["med"], b) for b in vb
                       if S[(b, "hakmem")]["med"] < S[(b, BASE)]["med"])
        apart = [b for b in vb if base_apart(S[(b, "hakmem")], S[(b, BASE)]) == "slower"]
        detail = (f"median below on {len(below)} of {len(vb)}" +
                  (" (" + ", ".join(f"{b} {x:.2f}" for x, b in below) + ")" if below else "") +
                  f"; ranges apart (hakmem's fastest run below hakmem-base's slowest) on {len(apart)}" +
                  (" (" + ", ".join(apart) + ")" if apart else ""))
        # Met only when no median is below; medians below with every range
        # overlapping are not called met, only "within the spread".
        met = "✗" if apart else ("within the spread" if below else "✓")
        out.append(f"| no benchmark slower than hakmem-base | {detail} | {met} |")
    # real programs
    rp = [b for b in REAL if b in benches and best_peer_name(b)]
    if rp:
        cells = []
        for b in rp:
            x = ratio(b, "hakmem")
            cells.append(f"{b} {'FAIL' if x is None else f'{x:.2f}×'}")
        ok = all(ratio(b, "hakmem") is not None and ratio(b, "hakmem") >= GOAL_ALL for b in rp)
        out.append(f"| real programs ≥ {GOAL_ALL:.1f}× best peer | " + ", ".join(cells) + f" | {'✓' if ok else '✗'} |")
    out += idle_goal(S, benches, allocs)
    out += cross_thread_goal(S, benches, ratio, best_peer_name, readme)
    if readme:
        out.append("\nInstructions and branches per operation (`make bench-instr`): "
                   "[results/instr.md](results/instr.md).\n")
    else:
        out.append("\nInstruction and branch counts per operation: see `instr.md` (`make bench-instr`).\n")
    return out


def cross_thread_goal(S, benches, ratio, best_peer_name, readme=False):
    """The goal 'every cross-thread benchmark >= GOAL_CROSS x the best peer', one row per benchmark."""
    rows = [b for b in CROSS_THREAD if b in benches]
    if not rows:
        return []
    res = []
    for b in rows:
        peer = best_peer_name(b)
        x = ratio(b, "hakmem") if peer else None
        res.append((b, peer, x))
    met = [r for r in res if r[2] is not None and r[2] >= GOAL_CROSS]
    title = f"every cross-thread benchmark ≥ {GOAL_CROSS:.1f}× the best peer"
    out = ["", (f"Goal: {title}" if readme else f"### Goal: {title}") +
           f" — met on {len(met)} of {len(res)}" + (" ✓" if len(met) == len(res) else " ✗") + "\n"]
    if not readme:
        out.append("Every benchmark where blocks cross threads or threads run side by side; *ratio* = "
                   "hakmem's median throughput / the best peer's.\n")
    out += ["| benchmark | hakmem ops/s | best peer | best peer ops/s | ratio | met |",
            "|---|---:|---|---:|---:|:---:|"]
    for b, peer, x in res:
        h = S.get((b, "hakmem"), {})
        hm = fmt_rate(h["med"]) if "med" in h else ("FAIL" if h.get("fails") else "–")
        pm = fmt_rate(S[(b, peer)]["med"]) if peer else "–"
        if x is None:
            xs, ok = ("no peer result" if not peer else "–"), "✗"
        else:
            xs, ok = fmt_goal(x, GOAL_CROSS), ("✓" if x >= GOAL_CROSS else "✗")
        out.append(f"| {b} | {hm} | {peer or '–'} | {pm} | {xs} | {ok} |")
    out.append("")
    return out


def libs_block(libs, raw, name=None):
    """The closing "Libraries" section (what each row preloaded) and the raw file's name."""
    name = name or name_of
    out = []
    if libs:
        out.append("## Libraries\n")
        for l in libs:
            env = f" with {l[2]}" if len(l) > 2 and l[2] else ""
            path, _, ver = l[1].partition(" (")
            out.append(f"- {name(l[0])}: `{path}`{' (' + ver if ver else ''}{env}")
        out.append("")
    out.append(f"Raw results: `{os.path.basename(raw)}` (one line per run).\n")
    return out


def rss_summary(S, benches, allocs, min_peer_rss):
    """Peak RSS of every allocator / the smallest peer's, per benchmark, and the geometric means."""
    out = ["## Summary: peak RSS relative to the leanest peer\n",
           "Peak RSS (VmHWM, median of the repeats) / the smallest peer's on that benchmark "
           "(lower is better; 1.00 = as lean as the leanest of glibc, mimalloc, jemalloc, tcmalloc; "
           "bold = at most that).\n",
           "| benchmark | " + " | ".join(name_of(a) for a in allocs) + " |",
           "|---|" + "---:|" * len(allocs)]
    for b in benches:
        m = min_peer_rss(b)
        cells = []
        for a in allocs:
            h = S[(b, a)].get("rss")
            if not h or not m:
                cells.append("–")
            else:
                x = h / m
                cells.append(("**%.2f**" % x) if x <= 1.0005 else "%.2f" % x)
        out.append(f"| {b} | " + " | ".join(cells) + " |")
    geo = []
    for a in allocs:
        g, _ = rss_geomean(S, benches, a, min_peer_rss)
        geo.append("–" if g is None else "%.2f" % g)
    out.append("| geometric mean | " + " | ".join(geo) + " |")
    out.append("")
    return out


def fmt_count(x):
    if x is None:
        return "–"
    return f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def faults_section(S, benches, allocs):
    """Page faults and kernel time per run (run.sh's time(1) figures), hakmem against the peer
    with the fewest faults. A fault is the dearest thing an allocator causes; a lean peak bought
    by giving pages back and faulting them in again shows here, not in the RSS tables."""
    if "hakmem" not in allocs or not any("faults" in S[(b, "hakmem")] for b in benches):
        return []
    out = ["## Page faults and kernel time\n",
           "Per run (median of the repeats): page faults (minor + major) and CPU seconds in the kernel "
           "(*sys*), as time(1) reports them for the benchmark process and the children it waited "
           "for. For the `real_*` rows that includes the wrapper script and its tools, the same for "
           "every allocator. *hakmem / fewest* divides hakmem's faults by the fewest of the peers' "
           "(bold = at most that); MADV_POPULATE_WRITE's pages count as faults here.\n",
           "| benchmark | " + " | ".join(f"{name_of(a)} faults (sys s)" for a in allocs) + " | hakmem / fewest |",
           "|---|" + "---:|" * (len(allocs) + 1)]
    logs, over = [], []
    for b in benches:
        cells = []
        for a in allocs:
            st = S[(b, a)]
            f = st.get("faults")
            cells.append("–" if f is None else f"{fmt_count(f)} ({st.get('sys', 0):.2f})")
        peer = [(S[(b, p)].get("faults"), p) for p in PEERS if p in allocs and S[(b, p)].get("faults")]
        h = S[(b, "hakmem")].get("faults")
        r = "–"
        if peer and h:
            x = h / min(peer)[0]
            logs.append(math.log(x))
            r = ("**%.2f**" % x) if x <= 1.0005 else "%.2f" % x
            if x > 1.5:
                over.append(f"{b} {x:.2f} ({min(peer)[1]})")
        out.append(f"| {b} | " + " | ".join(cells) + f" | {r} |")
    if logs:
        out.append("| geometric mean | " + " | " * len(allocs) + f"{math.exp(sum(logs) / len(logs)):.2f} |")
    out.append("")
    if over:
        out.append("More than 1.5× the fewest peer's faults: " + ", ".join(over) + ".\n")
    return out


def idle_section(S, benches, allocs):
    """What each allocator gives back while the threads of idle_16t sleep (bench_idle): the RSS
    at each sample after the last free, beside the RSS before the burst and the bytes still
    held. Nobody calls the allocator meanwhile, so what goes back goes back by itself."""
    if IDLE not in benches or not any(S[(IDLE, a)].get(f"rss_{IDLE_AT[-1]}_kb") for a in allocs):
        return []
    out = ["## Memory given back while threads sleep\n",
           f"`{IDLE}` (median of the repeats): RSS before the burst, the burst's peak, the "
           "bytes the threads still hold, and RSS at each time after the last thread's last free, "
           "while all 16 threads sleep and nothing calls the allocator. hakmem's purge delay "
           "(`HAKMEM_PURGE_DELAY_MS`) is 100 ms.\n",
           "| allocator | before | peak | held | " + " | ".join(f"after {t} ms" for t in IDLE_AT) + " |",
           "|---|" + "---:|" * (3 + len(IDLE_AT))]
    for a in allocs:
        st = S[(IDLE, a)]
        if st.get(f"rss_{IDLE_AT[-1]}_kb") is None:
            continue
        cells = [fmt_mib(st.get("base_rss_kb")), fmt_mib(st.get("rss")), fmt_mib(st.get("live_kb"))]
        cells += [fmt_mib(st.get(f"rss_{t}_kb")) for t in IDLE_AT]
        out.append(f"| {name_of(a)} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def idle_goal(S, benches, allocs):
    """Issue 18: an idle process returns its memory within the decay window, with no calls.
    Measured on idle_16t: hakmem's RSS two purge delays after the last free, against the leanest
    peer's a second after it."""
    h = S.get((IDLE, "hakmem"), {})
    if IDLE not in benches or h.get("rss_200_kb") is None:
        return []
    peers = [(S[(IDLE, p)].get(f"rss_{IDLE_AT[-1]}_kb"), p) for p in PEERS if p in allocs and S[(IDLE, p)].get(f"rss_{IDLE_AT[-1]}_kb")]
    if not peers:
        return []
    least = min(peers)
    held = (h.get("base_rss_kb") or 0) + (h.get("live_kb") or 0)
    ok = h["rss_200_kb"] <= least[0]
    return [f"| an idle process gives its memory back within the decay window ({IDLE}: RSS 200 ms after "
            f"the last free ≤ every peer's at 1 s) | hakmem {fmt_mib(h['rss_200_kb'])} at 200 ms "
            f"({fmt_mib(held)} before the burst and still held); at 1 s hakmem "
            f"{fmt_mib(h.get('rss_1000_kb'))}, " + ", ".join(f"{name_of(p)} {fmt_mib(x)}" for x, p in peers) +
            f" | {'✓' if ok else '✗'} |"]


def vs_base(S, benches, meta, readme=False):
    """hakmem against an older build of itself measured in the same run."""
    what = ""
    if "hakmem_base" in meta:
        what = f" (`{meta['hakmem_base']}`" + \
            (f", built {meta['hakmem_base_built']}" if "hakmem_base_built" in meta else "") + ")"
    if readme:
        out = ["hakmem vs hakmem-base, the older build measured in the same run (throughput ratio "
               "hakmem / hakmem-base, above 1.00 = the current build is faster):\n"]
    else:
        out = ["## hakmem vs hakmem-base\n",
               f"hakmem-base is an older hakmem build{what}, run in the same interleaved "
               "sequence as the other allocators. *ratio* = hakmem's median throughput / hakmem-base's "
               "(above 1.00 = the current build is faster); *RSS ratio* = hakmem's peak RSS / "
               "hakmem-base's (below 1.00 = the current build uses less memory). *apart* says "
               "whether the two builds' min–max ranges of throughput are apart: *slower* or *faster* "
               "when they do not overlap, blank when they do (the difference is within the spread "
               "of the repeats on this machine).\n"]
    out += ["| benchmark | hakmem ops/s | hakmem-base ops/s | ratio | apart | peak RSS hakmem | peak RSS hakmem-base | RSS ratio |",
            "|---|---:|---:|---:|:---:|---:|---:|---:|"]
    logs = []
    apart = {"slower": [], "faster": []}
    for b in benches:
        h, o = S.get((b, "hakmem"), {}), S.get((b, BASE), {})
        hm, om = h.get("med"), o.get("med")
        hr, orr = h.get("rss"), o.get("rss")
        if hm and om:
            r = hm / om
            logs.append(math.log(r))
            rs = ("**%.2f**" % r) if r >= 0.9995 else "%.2f" % r
        else:
            rs = "–"
        cell = lambda st, m: fmt_rate(m) if m else ("FAIL" if st.get("fails") else "–")
        ap = base_apart(h, o)
        if ap:
            apart[ap].append(b)
        out.append(f"| {b} | {cell(h, hm)} | {cell(o, om)} | {rs} | {ap} | {fmt_mib(hr)} | {fmt_mib(orr)} | "
                   f"{fmt_ratio(hr / orr if hr and orr else None)} |")
    if logs:
        out.append(f"| geometric mean | | | {math.exp(sum(logs) / len(logs)):.2f} | | | | |")
    out.append("")
    for k in ("slower", "faster"):
        out.append(f"Ranges apart, hakmem {k}: {len(apart[k])}" +
                   (" (" + ", ".join(apart[k]) + ")" if apart[k] else "") + ".")
    out.append("")
    return out


def base_apart(h, o):
    """'slower' or 'faster' when hakmem's and hakmem-base's min–max throughput
    ranges do not overlap, else '' (within the spread of the repeats)."""
    if not (h.get("max") and o.get("min") and h.get("min") and o.get("max")):
        return ""
    if h["max"] < o["min"]:
        return "slower"
    if h["min"] > o["max"]:
        return "faster"
    return ""


def chart(S, benches, allocs, ratio, base):
    dat = base + ".dat"
    with open(dat, "w") as f:
        f.write("bench " + " ".join('"%s"' % name_of(a) for a in allocs) + "\n")
        for b in benches:
            vals = []
            for a in allocs:
                r = ratio(b, a)
                vals.append("%.4f" % r if r else "NaN")
            f.write(b + " " + " ".join(vals) + "\n")
    gp = shutil.which("gnuplot")
    if not gp:
        print("report.py: gnuplot not found: no chart (data in %s)" % dat, file=sys.stderr)
        return
    ncol = len(allocs) + 1
    rs = [ratio(b, a) for b in benches for a in allocs]
    rs = [r for r in rs if r]
    lo = min(rs + [0.5])
    hi = max(rs + [2.0])
    ymin = 2.0 ** math.floor(math.log2(lo) - 0.2)
    ymax = 2.0 ** math.ceil(math.log2(hi) + 0.2)
    tics = []
    e = int(math.log2(ymin))
    while 2.0 ** e <= ymax:
        v = 2.0 ** e
        tics.append('"%s" %g' % (("%g" % v) if e >= 0 else "1/%d" % (2 ** -e), v))
        e += 1
    common = f"""
set title "Throughput relative to the best peer (glibc/mimalloc/jemalloc/tcmalloc = best at 1.0); log scale"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 2
set yrange [{ymin}:{ymax}]
set ytics ({", ".join(tics)})
set grid ytics
set xtics rotate by -35 noenhanced
set key outside top center horizontal noenhanced
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 dt 2 lc rgb "#444444"
set datafile missing "NaN"
plot for [i=2:{ncol}] '{dat}' using i:xtic(1) title columnheader(i)
"""
    svg = base + ".svg"
    script = f'set terminal svg size 1400,640 dynamic font "sans,12" background "#ffffff"\nset output "{svg}"\n' + common
    subprocess.run([gp], input=script, text=True, check=False, stderr=subprocess.DEVNULL)
    terms = subprocess.run([gp, "-e", "set terminal"], capture_output=True, text=True).stdout + \
        subprocess.run([gp, "-e", "set terminal"], capture_output=True, text=True).stderr
    png = base + ".png"
    term = "pngcairo" if "pngcairo" in terms else ("png" if re.search(r"\bpng\b", terms) else None)
    if term:
        script = f'set terminal {term} size 1400,640 font "sans,11"\nset output "{png}"\n' + common
        subprocess.run([gp], input=script, text=True, check=False, stderr=subprocess.DEVNULL)


def update_readme(readme, meta, pkgs, S, benches, allocs, ratio, svg, best_peer_name, min_peer_rss):
    begin, end = "<!-- LATEST-RESULTS:BEGIN -->", "<!-- LATEST-RESULTS:END -->"
    try:
        text = open(readme).read()
    except OSError:
        return
    if begin not in text or end not in text:
        return
    lines = [begin, "", machine_block(meta, pkgs), "",
             "Throughput relative to the best peer (median; 1.00 = the best of glibc, mimalloc, jemalloc, "
             "tcmalloc; bold = at least as fast). Full tables: [results/latest.md](results/latest.md).", "",
             "| benchmark | " + " | ".join(name_of(a) for a in allocs) + " |",
             "|---|" + "---:|" * len(allocs)]
    for b in benches:
        cells = []
        for a in allocs:
            r = ratio(b, a)
            cells.append("FAIL" if r is None and S[(b, a)]["fails"] else
                         ("–" if r is None else (("**%.2f**" % r) if r >= 0.9995 else "%.2f" % r)))
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += ["", f"![throughput relative to the best peer](results/{svg})", ""]
    if "hakmem" in allocs:
        lines += goals(S, benches, allocs, ratio, best_peer_name, min_peer_rss, readme=True)
    if "hakmem" in allocs and BASE in allocs:
        lines += vs_base(S, benches, meta, readme=True)
    lines += [end]
    new = text[:text.index(begin)] + "\n".join(lines) + text[text.index(end) + len(end):]
    with open(readme, "w") as f:
        f.write(new)


# --------------------------------------------------------------- instr
def callgrind_cost(path, func):
    """Cost of everything FUNCTION called (inclusive) = totals - self(FUNCTION),
    for a profile collected with --toggle-collect=FUNCTION*."""
    events, totals = None, None
    names = {}
    self_cost = None
    cur = None
    after_calls = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("events:"):
                events = line.split()[1:]
                self_cost = [0] * len(events)
                continue
            if line.startswith("totals:") or line.startswith("summary:"):
                totals = [int(x) for x in line.split()[1:]]
                continue
            m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3)
                if m.group(1) == "fn":
                    cur = names.get(m.group(2), "")
                continue
            m = re.match(r"^fn=(.*)$", line)
            if m:
                cur = m.group(1)
                continue
            if line.startswith("calls="):
                after_calls = True
                continue
            if line and (line[0].isdigit() or line[0] in "+-*"):
                if after_calls:
                    after_calls = False
                    continue
                if cur and re.match(re.escape(func) + r"(\.|$)", cur):
                    vals = line.split()[1:]
                    for i, v in enumerate(vals[: len(self_cost)]):
                        self_cost[i] += int(v)
    if not events or totals is None:
        return None
    cost = {e: totals[i] - self_cost[i] for i, e in enumerate(events) if i < len(totals)}
    for i, e in enumerate(events):
        cost["self_" + e] = self_cost[i]
    return cost


def instr(raw, metafile, out_md, hotfile=None):
    meta, notes, libs, pkgs = read_meta(metafile)
    rows = []
    with open(raw) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            bench, alloc = parts[0], parts[1]
            base = parse_kv(parts[2])
            real = parse_kv(parts[3])
            cg = parse_kv(parts[4]) if len(parts) > 4 else {}
            rows.append((bench, alloc, base, real, cg))
    benches = []
    for r in rows:
        if r[0] not in benches:
            benches.append(r[0])
    out = ["# hakmem: instructions and branches per allocator operation\n", machine_block(meta, pkgs) + "\n"]
    out.append(
        "Single-threaded benchmarks under valgrind, per allocator, all under the same LD_PRELOAD; "
        "*calls* counts every malloc and free (the loop's and the final clean-up's). Two measures:\n\n"
        "- **in malloc/free** (callgrind, the headline figure): `valgrind --tool=callgrind "
        "--branch-sim=yes --toggle-collect=mixed_loop_malloc` collects only inside the benchmark "
        "loop; the inclusive cost of what the loop calls (malloc and free) / calls. Branches = "
        "conditional + indirect. callgrind counts the PLT stub (one jump, an indirect branch) to "
        "the caller (`--skip-plt=yes`), so it is not in this figure.\n"
        "- **with call overhead** (cachegrind): `valgrind --tool=cachegrind --cache-sim=no "
        "--branch-sim=yes` of the whole program, run for real and with `BENCH_BASELINE=1` (the "
        "identical loop compiled with a trivial stand-in for malloc/free); (Ir(real) − "
        "Ir(baseline)) / calls. Start-up and allocator initialisation cancel out. This also counts "
        "what calling out of the loop costs the caller: the call instructions, the PLT jump, "
        "argument moves and register spills around the calls — *loop real − loop baseline* shows that part "
        "(the loops' own self cost per call, from callgrind). It is the same for every allocator "
        "that is a function call.\n")
    for n in notes:
        out.append(f"- {n}")
    if notes:
        out.append("")
    order = lambda a: ORDER.index(a) if a in ORDER else 99
    headline = {}
    for b in benches:
        sub = sorted([r for r in rows if r[0] == b], key=lambda r: order(r[1]))
        some = sub[0][3] if sub else {}
        desc = f"{b}: " + " ".join(f"{k}={some[k]}" for k in ("ws", "min", "max", "threads") if k in some)
        out.append(f"## {desc}\n")
        out.append("| allocator | instr/op in malloc/free | branches/op in malloc/free | instr/op with call overhead "
                   "| branches/op with call overhead | loop real − loop baseline (instr/op) | calls |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for bench, alloc, base, real, cg in sub:
            ok = base.get("rc") == "0" and real.get("rc") == "0" and "calls" in real
            if not ok:
                out.append(f"| {name_of(alloc)} | FAIL (exit {real.get('rc', '?')}) | | | | | |")
                continue
            calls = float(real["calls"])
            ir = (float(real["ir"]) - float(base["ir"])) / calls
            br = (float(real["br"]) - float(base["br"])) / calls
            if cg.get("Ir"):
                cir_v = float(cg["Ir"]) / calls
                cbr_v = (float(cg.get("Bc", 0)) + float(cg.get("Bi", 0))) / calls
                cir, cbr = "%.1f" % cir_v, "%.1f" % cbr_v
                headline[(b, alloc)] = (cir_v, cbr_v, ir, br)
            else:
                cir = cbr = "–"
            if cg.get("self_Ir") and cg.get("base_self_Ir"):
                loop = "%.1f − %.1f = %.1f" % (float(cg["self_Ir"]) / calls, float(cg["base_self_Ir"]) / calls,
                                               (float(cg["self_Ir"]) - float(cg["base_self_Ir"])) / calls)
            else:
                loop = "–"
            out.append(f"| {name_of(alloc)} | {cir} | {cbr} | {ir:.1f} | {br:.1f} | {loop} | {calls:.0f} |")
        out.append("")
    h = headline.get(("random_mixed", "hakmem"))
    out.append("## Goal: a short malloc/free fast path\n")
    out.append("random_mixed (16–1024 B, WS 400): hakmem ≤ 20 instructions and ≤ 3 branches per operation "
               "inside malloc/free (mimalloc measured about 27 and 4.4 when the goal was set).\n")
    if h:
        ok_i, ok_b = h[0] <= 20, h[1] <= 3
        out.append(f"- hakmem in malloc/free: {h[0]:.1f} instructions {'✓' if ok_i else '✗'}, "
                   f"{h[1]:.1f} branches {'✓' if ok_b else '✗'}")
        out.append(f"- hakmem with call overhead: {h[2]:.1f} instructions, {h[3]:.1f} branches")
        m = headline.get(("random_mixed", "mimalloc"))
        if m:
            out.append(f"- mimalloc for comparison: {m[0]:.1f} / {m[1]:.1f} in malloc/free, "
                       f"{m[2]:.1f} / {m[3]:.1f} with call overhead")
        out.append("")
    else:
        out.append("- hakmem was not measured.\n")
    if hotfile and os.path.exists(hotfile) and os.path.getsize(hotfile) > 0:
        out.append("## hakmem's hottest functions inside the loop (callgrind self cost, Ir)\n")
        out.append("`callgrind_annotate --inclusive=no` of the profile above (the loop function itself "
                   "is the benchmark's share; `???` = the library has no debug information).\n")
        block = []
        for line in open(hotfile):
            line = line.rstrip("\n")
            if line.startswith("### "):
                if block:
                    out.append("```\n" + "\n".join(block) + "\n```\n")
                    block = []
                out.append(f"**{line[4:]}**\n")
            elif line.strip():
                block.append(line)
        if block:
            out.append("```\n" + "\n".join(block) + "\n```\n")
    out.append(f"Raw figures: `{os.path.basename(raw)}`.\n")
    with open(out_md, "w") as f:
        f.write("\n".join(out))


def main(argv):
    if len(argv) >= 6 and argv[1] == "suite":
        suite(argv[2], argv[3], argv[4], argv[5], argv[6] if len(argv) > 6 else None)
    elif len(argv) in (5, 6) and argv[1] == "instr":
        instr(argv[2], argv[3], argv[4], argv[5] if len(argv) > 5 else None)
    elif len(argv) >= 3 and argv[1] == "acct":
        print(acct_pick(argv[2:]))
    elif len(argv) == 4 and argv[1] == "callgrind":
        c = callgrind_cost(argv[2], argv[3])
        if c:
            print(" ".join(f"{k}={v}" for k, v in c.items()))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
