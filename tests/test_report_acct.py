#!/usr/bin/env python3
"""test_report_acct.py — which statistics report bench/report.py takes as the peak's split.

Owns: synthetic statistics files (the report lines `report.py acct` reads), fed to
`report.py acct PERIODIC EXIT`. Promises: exit status 0 when
  * of a report at the process's peak (most live bytes) and a later one after the
    program's frees, with the same process RSS and more of hakmem's own resident
    bytes (freed slabs still in the decay window: real_sqlite after its VACUUM),
    the peak's report is picked;
  * a report whose process RSS is more than 3 % below the largest is not picked,
    however many live bytes it holds;
  * the exit report is used only when the periodic file holds no report.
May call: the Python standard library and bench/report.py (as a program).
"""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "bench", "report.py")


def report(resident, process, requested, free_slabs):
    other = process - resident
    return (f"resident: {resident} KiB of 200000 KiB mapped (walked 200000 KiB); "
            f"process {process} KiB, other {other} KiB\n"
            f"resident split: requested {requested}, rounding 0 (est.), free blocks 0, "
            f"uncarved 0, free slabs {free_slabs}, large free 0, cached 0, thread caches 0, "
            f"metadata 100 KiB\n"
            "thread caches: pending 0, current slabs 0, other slabs 0, abandoned 0, delayed 0 KiB\n")


def pick(tmp, periodic, exit_reports):
    paths = []
    for name, reps in (("periodic.txt", periodic), ("exit.txt", exit_reports)):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write("".join(report(*r) for r in reps))
        paths.append(path)
    out = subprocess.run([sys.executable, REPORT, "acct"] + paths, check=True,
                         capture_output=True, text=True).stdout.split()
    return dict(kv.split("=", 1) for kv in out)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # the peak (47 MiB live) and the report after the frees (15 MiB live, 31 MiB
        # of free slabs, 3.5 MiB (7 %) more resident, the same process RSS)
        got = pick(tmp, [(20000, 24000, 18000, 0), (50000, 57868, 47225, 0),
                         (53632, 57868, 15541, 31744)], [])
        if got.get("requested") != "47225":
            failures.append(f"peak vs after the frees: picked requested={got.get('requested')}, want 47225")
        # more live bytes but a process RSS 10 % below the largest: not the peak
        got = pick(tmp, [(40000, 45000, 39000, 0), (50000, 50000, 30000, 10000)], [])
        if got.get("requested") != "30000":
            failures.append(f"outside 3 %: picked requested={got.get('requested')}, want 30000")
        # the exit report only as the fallback
        got = pick(tmp, [(30000, 32000, 25000, 0)], [(40000, 42000, 1000, 30000)])
        if got.get("requested") != "25000":
            failures.append(f"exit report taken over a periodic one: requested={got.get('requested')}")
        got = pick(tmp, [], [(40000, 42000, 1000, 30000)])
        if got.get("requested") != "1000":
            failures.append(f"no periodic report: requested={got.get('requested')}, want the exit report's 1000")
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
