#!/usr/bin/env python3
"""test_report_apart.py — bench/report.py's verdicts against the older build.

Owns: a synthetic raw file of three rows, each run three times by hakmem,
hakmem-base and glibc, fed to `report.py suite`. Promises: exit status 0
when the report
  * marks `apart` slower the row whose three hakmem runs are all below
    hakmem-base's slowest, faster the row whose runs are all above, and
    leaves blank the row whose ranges overlap although its median is below;
  * names both counts in the goals row "no benchmark slower than
    hakmem-base" and does not call it met;
and when, with no row apart and no median below, the same row says ✓.
May call: the Python standard library and bench/report.py (as a program).
"""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "bench", "report.py")


def raw_line(bench, alloc, rep, ops):
    res = f"RESULT bench={bench} ops={ops} secs=1.0 ops_per_sec={ops} peak_rss_kb=2000"
    return f"{bench}\t{alloc}\t{rep}\tok\t1.0\t2000\t{res}\tMINFLT=100 MAJFLT=0 SYS_S=0.00 USER_S=1.00\n"


def run_report(rows, tmp):
    raw = os.path.join(tmp, "raw.tsv")
    with open(raw, "w") as f:
        for bench, per_alloc in rows.items():
            for rep in range(3):
                for alloc, ops in per_alloc.items():
                    f.write(raw_line(bench, alloc, rep + 1, ops[rep]))
    meta = os.path.join(tmp, "meta.tsv")
    open(meta, "w").close()
    out = os.path.join(tmp, "latest.md")
    subprocess.run([sys.executable, REPORT, "suite", raw, meta, out, os.path.join(tmp, "latest")],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return f.read().split("\n")


def row(lines, prefix):
    hits = [l for l in lines if l.startswith(prefix)]
    if not hits:
        raise SystemExit(f"FAIL: no line starting {prefix!r}")
    return hits


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        lines = run_report({
            # every hakmem run below every base run: apart, slower
            "row_slow": {"hakmem": [80, 82, 84], "hakmem-base": [90, 95, 100], "glibc": [50, 50, 50]},
            # median below, ranges overlap: not apart
            "row_spread": {"hakmem": [85, 92, 99], "hakmem-base": [88, 95, 101], "glibc": [50, 50, 50]},
            # every hakmem run above every base run: apart, faster
            "row_fast": {"hakmem": [120, 125, 130], "hakmem-base": [90, 95, 100], "glibc": [50, 50, 50]},
        }, tmp)
        # the vs-base table: benchmark, hakmem, base, ratio, apart, ...
        vs = {cells(l)[0]: cells(l) for l in lines
              if l.startswith("| row_") and len(cells(l)) == 8}
        check(vs.get("row_slow", [""] * 5)[4] == "slower", f"row_slow apart: {vs.get('row_slow')}")
        check(vs.get("row_spread", ["x"] * 5)[4] == "", f"row_spread apart: {vs.get('row_spread')}")
        check(vs.get("row_fast", [""] * 5)[4] == "faster", f"row_fast apart: {vs.get('row_fast')}")
        goal = row(lines, "| no benchmark slower than hakmem-base |")[0]
        check("median below on 2 of 3" in goal, f"goal row medians: {goal}")
        check("on 1 (row_slow)" in goal, f"goal row apart: {goal}")
        check(goal.rstrip().endswith("| ✗ |"), f"goal row verdict: {goal}")
        check(any(l.startswith("Ranges apart, hakmem slower: 1 (row_slow)") for l in lines), "summary line, slower")

        lines = run_report({
            "row_a": {"hakmem": [100, 101, 102], "hakmem-base": [90, 101, 104], "glibc": [50, 50, 50]},
        }, tmp)
        goal = row(lines, "| no benchmark slower than hakmem-base |")[0]
        check("median below on 0 of 1" in goal and goal.rstrip().endswith("| ✓ |"), f"goal row, none below: {goal}")

        lines = run_report({
            "row_b": {"hakmem": [95, 99, 103], "hakmem-base": [96, 100, 104], "glibc": [50, 50, 50]},
        }, tmp)
        goal = row(lines, "| no benchmark slower than hakmem-base |")[0]
        check(goal.rstrip().endswith("| within the spread |"), f"goal row, below within the spread: {goal}")

    for f in failures:
        print("FAIL:", f)
    print("test_report_apart:", "failed" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
