#!/usr/bin/python3
"""bench/secure_report.py — the secure library against the default one.

Standard library only; reads what bench/run.sh --secure-report measured
(allocators hakmem = libhakmem.so and hakmem-secure = libhakmem_secure.so,
interleaved run by run) and writes bench/results/secure.md: per benchmark the
two medians, secure / default, the peak RSS of each, then the geometric mean,
the lowest row and the goals of issue 20 (geometric mean >= 0.95, every row
>= 0.90). Parsing and formatting are report.py's (imported, not copied).

  secure_report.py RAW.tsv META.tsv OUT.md
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (bench/report.py, beside this file)

DEFAULT, SECURE = "hakmem", "hakmem-secure"
GOAL_GEOMEAN = 0.95  # secure / default, geometric mean over every row
GOAL_ROW = 0.90      # secure / default, each row


def secure_report(raw, metafile, out_md):
    meta, notes, libs, pkgs = report.read_meta(metafile)
    runs, benches, allocs = report.load_suite(raw)
    for a in (DEFAULT, SECURE):
        if a not in allocs:
            print(f"secure_report.py: no runs of {a} in {raw}", file=sys.stderr)
            return 1
    S = {(b, a): report.summarize(runs, b, a) for b in benches for a in (DEFAULT, SECURE)}

    out = ["# hakmem: the secure library against the default\n",
           report.machine_block(meta, pkgs) + "\n",
           "`bash bench/run.sh --secure-report` (`make bench-secure`): every benchmark of the suite "
           "under libhakmem.so (*default*) and libhakmem_secure.so (*secure*), the two runs "
           "interleaved, repeat after repeat, so both see the same machine. Throughput is the "
           "median of the repeats (operations per second, higher is better; min–max beside it); "
           "*ratio* = secure / default (1.00 = the checks cost nothing; below = slower); "
           "*RSS ratio* = secure's peak RSS / default's.\n"]
    if notes:
        out.append("Notes:\n")
        out += [f"- {n}" for n in notes]
        out.append("")

    rows, logs = [], []
    for b in benches:
        d, s = S[(b, DEFAULT)], S[(b, SECURE)]
        dm, sm = d.get("med"), s.get("med")
        r = sm / dm if dm and sm else None
        if r is not None:
            logs.append(math.log(r))
        rows.append((b, d, s, r))
    measured = [(r, b) for b, _, _, r in rows if r is not None]
    geo = math.exp(sum(logs) / len(logs)) if logs else None
    low = min(measured) if measured else None
    failed = [b for b, _, _, r in rows if r is None]

    def mark(ok):
        return "✓" if ok else "✗"

    out.append("## Goals\n")
    out.append("| goal | measured | met |")
    out.append("|---|---:|:---:|")
    if geo is not None:
        out.append(f"| geometric mean of secure / default ≥ {GOAL_GEOMEAN:.2f} | {geo:.3f} | "
                   f"{mark(geo >= GOAL_GEOMEAN and not failed)} |")
        below = [b for r, b in measured if r < GOAL_ROW]
        out.append(f"| every row ≥ {GOAL_ROW:.2f} | lowest {low[0]:.3f} ({low[1]}); "
                   f"{len(measured) - len(below)} of {len(rows)} rows at or above | "
                   f"{mark(not below and not failed)} |")
    else:
        out.append("| geometric mean, every row | no row measured under both | ✗ |")
    if failed:
        out.append(f"\nNot measured under both (counted as missed): {', '.join(failed)}.")
    out.append("")

    out.append("## Per benchmark\n")
    out.append("| benchmark | default ops/s | min–max | secure ops/s | min–max | ratio | "
               "peak RSS default | peak RSS secure | RSS ratio |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")

    def cell(st):
        if "med" not in st:
            return ("FAIL" if st.get("fails") else "–"), ""
        return report.fmt_rate(st["med"]), f"{report.fmt_rate(st['min'])}–{report.fmt_rate(st['max'])}"

    for b, d, s, r in rows:
        dm, dr = cell(d)
        sm, sr = cell(s)
        rs = "–" if r is None else (f"**{r:.2f}**" if r < GOAL_ROW else f"{r:.2f}")
        drss, srss = d.get("rss"), s.get("rss")
        out.append(f"| {b} | {dm} | {dr} | {sm} | {sr} | {rs} | {report.fmt_mib(drss)} | "
                   f"{report.fmt_mib(srss)} | {report.fmt_ratio(srss / drss if drss and srss else None)} |")
    if geo is not None:
        out.append(f"| geometric mean | | | | | {geo:.2f} | | | |")
    out.append("\nBold: a row below the every-row goal.\n")

    out.extend(report.libs_block(libs, raw, name=lambda a: a))
    with open(out_md, "w") as f:
        f.write("\n".join(out))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(secure_report(*sys.argv[1:]))
