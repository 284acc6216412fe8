#!/usr/bin/env python3
"""check_includes.py — the allowed-includes table of src/README.md, enforced.

Owns: the comparison of every src/ file's project includes (#include "x")
with the table between the "includes:begin" and "includes:end" markers of
src/README.md. Promises: exit status 0 when every include is allowed and the
table lists exactly the files of src/; otherwise one line per problem on
stderr (file:line, header, what the table allows) and exit status 1. System
headers (#include <x>) are not checked. May call: the Python standard
library only (CTest runs it as the arch_includes tests, label docs).

Usage:
  tools/check_includes.py [--src DIR] [--table FILE]
      check DIR (default: src/ next to this script's directory) against
      FILE (default: DIR/README.md)
  tools/check_includes.py --self-test
      check the real tree, then copies of it with a deliberately wrong
      include, an unlisted file and a row for a missing file, each of which
      must fail with the expected message

Table rows: | `file` | `a.h` `b.h` | `c.h` | — the third column lists
includes that the intended architecture forbids but today's code still has
("tolerated, to be removed"). A tolerated include the file no longer has is
an error too, so the list shrinks as the code is fixed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE_EXT = (".c", ".h", ".cpp")
BEGIN = "<!-- includes:begin -->"
END = "<!-- includes:end -->"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
NAME_RE = re.compile(r"`([A-Za-z0-9_./+-]+\.(?:h|c|cpp|hpp|inc))`")


def strip_comments(text):
    """Blank out /* */ and // comments, keeping line breaks (line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c == '"':
            # a string literal: copy it whole (may contain "/*")
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def project_includes(path):
    """[(line number, header)] of the #include "..." lines of one file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_comments(f.read())
    found = []
    for no, line in enumerate(text.split("\n"), 1):
        m = INCLUDE_RE.match(line)
        if m:
            found.append((no, m.group(1)))
    return found


def parse_table(readme, begin=BEGIN, end=END, name_re=NAME_RE, column="may include"):
    """{file: (allowed set, tolerated set, line number)} of the table between
    begin and end (check_calls.py reads its calls table with it too);
    raises ValueError."""
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == begin)
        stop = next(i for i, l in enumerate(lines) if l.strip() == end and i > start)
    except StopIteration:
        raise ValueError("%s: no table between %s and %s" % (readme, begin, end))
    table = {}
    for i in range(start + 1, stop):
        line = lines[i].strip()
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        names = name_re.findall(cells[0])
        if len(names) != 1:
            continue  # the header row
        if len(cells) < 2:
            raise ValueError("%s:%d: row for %s has no '%s' column"
                             % (readme, i + 1, names[0], column))
        allowed = set(name_re.findall(cells[1]))
        tolerated = set(name_re.findall(cells[2])) if len(cells) > 2 else set()
        if names[0] in table:
            raise ValueError("%s:%d: %s has two rows" % (readme, i + 1, names[0]))
        table[names[0]] = (allowed, tolerated, i + 1)
    return table


def row_allows(allowed, tolerated, sep, nothing):
    """A row's names for a message: the allowed ones (or nothing), then the
    tolerated ones (check_calls.py words its messages with it too)."""
    may = sep.join(sorted(allowed)) or nothing
    if tolerated:
        may += "; tolerated for now: " + sep.join(sorted(tolerated))
    return may


def listed_twice(rel, row, f, allowed, tolerated):
    """The problems of a row naming a file both as allowed and as tolerated."""
    return ["%s:%d: %s lists %s both as allowed and as tolerated" % (rel, row, f, x)
            for x in sorted(allowed & tolerated)]


def check(src, readme):
    """Problems found, one message each (empty list: all good)."""
    try:
        table = parse_table(readme)
    except (OSError, ValueError) as e:
        return [str(e)]
    rel = os.path.relpath(readme, os.path.dirname(src.rstrip(os.sep)) or ".")
    files = sorted(f for f in os.listdir(src)
                   if f.endswith(SOURCE_EXT) and os.path.isfile(os.path.join(src, f)))
    problems = []
    for f in files:
        if f not in table:
            problems.append("src/%s: not in the allowed-includes table of %s: "
                            "add a row saying which headers it may include" % (f, rel))
            continue
        allowed, tolerated, row = table[f]
        seen = set()
        for no, hdr in project_includes(os.path.join(src, f)):
            seen.add(hdr)
            if hdr in allowed or hdr in tolerated:
                continue
            problems.append('src/%s:%d: #include "%s" is not allowed by %s:%d (%s may include: %s)'
                            % (f, no, hdr, rel, row, f, row_allows(allowed, tolerated, ", ",
                                                                  "no project header")))
        for hdr in sorted(tolerated - seen):
            problems.append('src/%s: no longer includes "%s": delete it from the '
                            '"tolerated, to be removed" column (%s:%d)' % (f, hdr, rel, row))
        problems += listed_twice(rel, row, f, allowed, tolerated)
    for f in sorted(set(table) - set(files)):
        problems.append("%s:%d: row for src/%s, which does not exist: delete the row "
                        "or fix its name" % (rel, table[f][2], f))
    return problems


def report(tool, problems, ok):
    """Exit status 1 with each problem on stderr, or 0 with ok on stdout,
    every line led by the tool's name (check_calls.py reports through it
    too, as it shares the self-test helpers and parse_args below)."""
    for p in problems:
        print("%s: %s" % (tool, p), file=sys.stderr)
    if problems:
        print("%s: %d problem(s); the layers and the table are in "
              "src/README.md" % (tool, len(problems)), file=sys.stderr)
        return 1
    print("%s: %s" % (tool, ok))
    return 0


def run(src, readme):
    return report("check_includes", check(src, readme),
                  "every project include in %s is allowed by %s" % (src, readme))


def case_verdict(name, r, expect, fails=True):
    """Whether the checker's run r (a subprocess result) on a self-test
    case ended as it must: exit 1 with every string of expect on stderr
    (fails), else exit 0. Said on stdout with the run's stderr indented."""
    if fails:
        ok = r.returncode == 1 and all(e in r.stderr for e in expect)
        verdict = "ok (the checker failed as it must)"
    else:
        ok = r.returncode == 0
        verdict = "ok (the checker passed as it must)"
    print("self-test %s: %s" % (name, verdict if ok else "FAILED"))
    for line in r.stderr.splitlines():
        print("    " + line)
    if not ok:
        print("self-test %s: expected exit %d and %s, got exit %d"
              % (name, 1 if fails else 0, expect, r.returncode), file=sys.stderr)
    return ok


def self_test_status(results):
    """The self-test's exit status from its cases' verdicts."""
    if not all(results):
        return 1
    print("self-test: all %d cases behaved as they must" % len(results))
    return 0


def self_test(src, readme):
    """The real tree passes; each deliberate mistake fails with its message."""
    if run(src, readme) != 0:
        print("self-test: the real tree does not pass; fix that first", file=sys.stderr)
        return 1

    def case(name, mutate, expect, fails=True):
        tmp = tempfile.mkdtemp(prefix="hakmem-includes-")
        try:
            copy = os.path.join(tmp, "src")
            shutil.copytree(src, copy)
            table = os.path.join(copy, "README.md")
            if os.path.abspath(readme) != os.path.abspath(os.path.join(src, "README.md")):
                shutil.copy(readme, table)
            mutate(copy)
            r = subprocess.run([sys.executable, os.path.abspath(__file__),
                                "--src", copy, "--table", table],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            return case_verdict(name, r, expect, fails)
        finally:
            shutil.rmtree(tmp)

    def append(path, text):
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)

    results = [
        case("system header and commented-out include (not checked)",
             lambda d: append(os.path.join(d, "os.c"),
                              '#include <heap.h>\n/* #include "heap.h" */\n// #include "heap.h"\n'),
             [], fails=False),
        case("wrong include",
             lambda d: append(os.path.join(d, "os.c"), '#include "heap.h"\n'),
             ['src/os.c:', '#include "heap.h" is not allowed', "os.c may include:"]),
        case("file missing from the table",
             lambda d: append(os.path.join(d, "extra.c"), '#include "os.h"\n'),
             ["src/extra.c: not in the allowed-includes table"]),
        case("row for a file that does not exist",
             lambda d: os.remove(os.path.join(d, "ownmap.c")),
             ["row for src/ownmap.c, which does not exist"]),
    ]
    tolerated = [(f, sorted(tol)[0]) for f, (_, tol, _) in sorted(parse_table(readme).items()) if tol]
    if tolerated:
        f, hdr = tolerated[0]

        def drop(d):
            path = os.path.join(d, f)
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("\n".join(l for l in lines if INCLUDE_RE.match(l) is None
                                    or INCLUDE_RE.match(l).group(1) != hdr))
        results.append(case("tolerated include no longer there", drop,
                            ['src/%s: no longer includes "%s"' % (f, hdr)]))
    return self_test_status(results)


def parse_args(argv, options, modes):
    """({option: value}, mode) of a command line made of the options
    ("--name VALUE", the last one given counts) and modes ("--name", the
    last one given is the mode; None without one); None for anything else,
    a missing value included."""
    values, mode = {}, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in options and args:
            values[a] = args.pop(0)
        elif a in modes:
            mode = a
        else:
            return None
    return values, mode


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parsed = parse_args(argv, ("--src", "--table"), ("--self-test",))
    if parsed is None:
        print(__doc__, file=sys.stderr)
        return 2
    values, mode = parsed
    src = values.get("--src", os.path.join(os.path.dirname(here), "src"))
    readme = values.get("--table", os.path.join(src, "README.md"))
    return self_test(src, readme) if mode else run(src, readme)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
