#!/usr/bin/env python3
"""check_calls.py — the allowed-calls table of src/README.md, enforced.

Owns: the file-level call graph of libhakmem, read from its object files
with `nm` (a file "calls" another when it uses a global symbol, function or
data, that the other defines), and its comparison with the table between
the "calls:begin" and "calls:end" markers of src/README.md. Inline
functions of a header (front.h) count as calls of the file they were
inlined into. Promises: exit status 0 when every call is allowed and the
table lists exactly the compiled files of src/; otherwise one line per
problem on stderr (file, callee file, the symbols, what the table allows)
and exit status 1. It also fails when the "may call" columns alone do not
form a layering (a cycle among allowed calls). May call: the Python
standard library and binutils' nm (CTest runs it as the arch_calls tests,
label docs; the self-test also uses the C compiler and ld -r).

Usage:
  tools/check_calls.py [--build DIR] [--src DIR] [--table FILE]
      check the objects of the build tree DIR (default: build/ next to
      src/; every CMakeFiles/*.dir/src/*.o directly under it) against
      FILE (default: SRC/README.md)
  tools/check_calls.py --graph [...]
      print the call graph (each file and the files it calls, upward calls
      marked) and its cycles; exit status 0 when src/ is acyclic, 1 if not
  tools/check_calls.py --self-test [...]
      check the real objects, then a synthetic object with a deliberate
      upward call and copies of the table with deliberate mistakes, each of
      which must fail with the expected message

Table rows: | `file.c` | `a.c` `b.c` | `c.c` (why) | — the third column
lists calls that the intended layering forbids but today's code still
makes ("tolerated, to be removed"). A tolerated call the file no longer
makes is an error too, so the column only shrinks.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_includes  # noqa: E402  (the table reader, report and self-test helpers both checks share)

BEGIN = "<!-- calls:begin -->"
END = "<!-- calls:end -->"
NAME_RE = re.compile(r"`([A-Za-z0-9_./+-]+\.(?:c|cpp))`")
OBJ_RE = re.compile(r"^(.*\.(?:c|cpp))\.o$")
DEFINED = set("TDBRVWGSiu")  # nm's global definitions (upper case + indirect/unique)


def object_files(build):
    """{source file name: [object path]} of the libraries' objects: of the
    objects built from one source (the variants' object libraries), the
    newest, so that a target left behind in a reused build tree by an older
    layout is not read."""
    objs = {}
    for path in sorted(glob.glob(os.path.join(build, "CMakeFiles", "*.dir", "src", "*.o"))):
        m = OBJ_RE.match(os.path.basename(path))
        if m and (m.group(1) not in objs or os.path.getmtime(path) > os.path.getmtime(objs[m.group(1)][0])):
            objs[m.group(1)] = [path]
    return objs


def nm_symbols(paths):
    """{path: (defined globals, undefined)} of the objects, one nm run."""
    r = subprocess.run(["nm", "-P", "-A"] + list(paths), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        raise OSError("nm: %s" % r.stderr.strip())
    out = {p: (set(), set()) for p in paths}
    for line in r.stdout.splitlines():
        # "path: name kind [value size]"
        head, sep, rest = line.rpartition(": ")
        parts = rest.split()
        if not sep or head not in out or len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            out[head][1].add(name)
        elif kind in DEFINED:
            out[head][0].add(name)
    return out


def call_graph(build):
    """{file: {callee file: set of symbols}}, and the file list.

    override.c is api.c compiled again with the libc aliases: a symbol both
    define belongs to api.c, so override_new.cpp's api_malloc is a call of
    api.c."""
    objs = object_files(build)
    if not objs:
        raise OSError("%s: no objects under CMakeFiles/*.dir/src/ (build the library first)" % build)
    syms = nm_symbols([p for paths in objs.values() for p in paths])
    defs, uses = {}, {}
    for f, paths in objs.items():
        d, u = set(), set()
        for p in paths:
            d |= syms[p][0]
            u |= syms[p][1]
        defs[f], uses[f] = d, u
    owner = {}
    for f in sorted(defs, key=lambda f: (f == "override.c", f)):  # api.c before override.c
        for s in defs[f]:
            owner.setdefault(s, f)
    graph = {}
    for f in sorted(objs):
        edges = {}
        for s in uses[f] - defs[f]:
            g = owner.get(s)
            if g is not None and g != f:
                edges.setdefault(g, set()).add(s)
        graph[f] = edges
    return graph


def parse_table(readme):
    """{file: (allowed set, tolerated set, line number)} of the calls table;
    raises ValueError."""
    return check_includes.parse_table(readme, BEGIN, END, NAME_RE, "may call")


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan), each
    sorted, plus one concrete cycle through each."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    result = []
    for comp in sorted(out):
        members = set(comp)
        # the shortest way from the first member back to itself (BFS)
        start = comp[0]
        prev, frontier, found = {start: None}, [start], None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph.get(v, ())):
                    if w not in members:
                        continue
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        path, v = [start], found
        while v is not None and v != start:
            path.append(v)
            v = prev[v]
        path = [start] + list(reversed(path[1:])) + [start]
        result.append((comp, path))
    return result


def check(build, src, readme):
    try:
        table = parse_table(readme)
        graph = call_graph(build)
    except (OSError, ValueError) as e:
        return [str(e)], None
    rel = os.path.relpath(readme, os.path.dirname(src.rstrip(os.sep)) or ".")
    problems = []
    sources = set(f for f in os.listdir(src) if f.endswith((".c", ".cpp")))
    for f in sorted(graph):
        if f not in table:
            problems.append("src/%s: not in the allowed-calls table of %s: add a row saying "
                            "which files it may call" % (f, rel))
            continue
        allowed, tolerated, row = table[f]
        for g in sorted(graph[f]):
            if g in allowed or g in tolerated:
                continue
            may = check_includes.row_allows(allowed, tolerated, " ", "no other file")
            problems.append("src/%s calls %s (%s), which %s:%d does not allow (%s may call: %s)"
                            % (f, g, " ".join(sorted(graph[f][g])), rel, row, f, may))
        for g in sorted(tolerated - set(graph[f])):
            problems.append("src/%s no longer calls %s: delete it from the \"tolerated, to be "
                            "removed\" column (%s:%d)" % (f, g, rel, row))
        problems += check_includes.listed_twice(rel, row, f, allowed, tolerated)
    for f in sorted(set(table) - set(graph)):
        if f in sources:
            problems.append("%s:%d: src/%s has a row but no object in %s (not built?)"
                            % (rel, table[f][2], f, build))
        else:
            problems.append("%s:%d: row for src/%s, which does not exist: delete the row or "
                            "fix its name" % (rel, table[f][2], f))
    intended = {f: set(a) for f, (a, _, _) in table.items()}
    for comp, path in cycles(intended):
        problems.append("%s: the \"may call\" columns are not a layering: %s (move the upward "
                        "call to the tolerated column)" % (rel, " -> ".join(path)))
    return problems, graph


def run(build, src, readme):
    problems, _ = check(build, src, readme)
    return check_includes.report("check_calls", problems, "every call between the objects in %s "
                                 "is allowed by %s" % (build, readme))


def graph_report(build, src, readme):
    try:
        graph = call_graph(build)
    except OSError as e:
        print("check_calls: %s" % e, file=sys.stderr)
        return 2
    try:
        table = parse_table(readme)
    except (OSError, ValueError):
        table = {}
    print("src/ call graph (from nm on %s); * = tolerated upward call, ! = not in the table" % build)
    for f in sorted(graph):
        allowed, tolerated, _ = table.get(f, (set(), set(), 0))
        marks = []
        for g in sorted(graph[f]):
            m = "" if g in allowed else "*" if g in tolerated else "!"
            marks.append(g + m)
        print("  %-18s -> %s" % (f, " ".join(marks) if marks else "(nothing)"))
    cyc = cycles(graph)
    if not cyc:
        print("acyclic: no file of src/ reaches itself through calls")
        return 0
    print("%d cycle(s) (strongly connected sets of files):" % len(cyc))
    for comp, path in cyc:
        print("  {%s}" % ", ".join(comp))
        print("      e.g. %s" % " -> ".join(path))
        for a, b in zip(path, path[1:]):
            print("           %s -> %s: %s" % (a, b, " ".join(sorted(graph[a][b])[:4])
                                              + (" ..." if len(graph[a][b]) > 4 else "")))
    # Each upward call with the shortest way back down to its caller: the
    # loops the tolerated column stands for.
    loops = []
    for a in sorted(graph):
        tolerated = table.get(a, (set(), set(), 0))[1]
        allowed = table.get(a, (set(), set(), 0))[0]
        for b in sorted(graph[a]):
            if b in allowed and b not in tolerated:
                continue
            back = shortest_path(graph, b, a)
            if back:
                loops.append("%s -> %s" % (a, " -> ".join(back)))
    if loops:
        print("upward calls and the way back (each closes a loop):")
        for l in loops:
            print("  " + l)
    return 1


def shortest_path(graph, a, b):
    """[a, ..., b] along calls, or None."""
    prev, frontier = {a: None}, [a]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w in prev:
                    continue
                prev[w] = v
                if w == b:
                    path = [w]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path))
                nxt.append(w)
        frontier = nxt
    return None


def self_test(build, src, readme):
    if run(build, src, readme) != 0:
        print("self-test: the real tree does not pass; fix that first", file=sys.stderr)
        return 1
    objs = object_files(build)

    def case(name, mutate_objs, mutate_table, expect):
        tmp = tempfile.mkdtemp(prefix="hakmem-calls-")
        try:
            odir = os.path.join(tmp, "CMakeFiles", "hakmem.dir", "src")
            os.makedirs(odir)
            for f, paths in objs.items():
                for k, p in enumerate(paths):
                    d = odir if k == 0 else os.path.join(tmp, "CMakeFiles", "t%d.dir" % k, "src")
                    os.makedirs(d, exist_ok=True)
                    shutil.copy(p, os.path.join(d, f + ".o"))
            with open(readme, encoding="utf-8") as fh:
                text = fh.read()
            tpath = os.path.join(tmp, "README.md")
            with open(tpath, "w", encoding="utf-8") as fh:
                fh.write(mutate_table(text))
            note = mutate_objs(tmp, odir)
            if note:
                print("self-test %s: skipped (%s)" % (name, note))
                return True
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--build", tmp,
                                "--src", src, "--table", tpath],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            return check_includes.case_verdict(name, r, expect)
        finally:
            shutil.rmtree(tmp)

    def upward_object(tmp, odir):
        """os.c.o plus a function calling heap_alloc_refill: an upward call."""
        cc = os.environ.get("CC", "cc")
        up_c = os.path.join(tmp, "up.c")
        with open(up_c, "w") as fh:
            fh.write("void *heap_alloc_refill(void *h, unsigned cls);\n"
                     "void *os_upward(void) { return heap_alloc_refill(0, 0); }\n")
        up_o = os.path.join(tmp, "up.o")
        target = os.path.join(odir, "os.c.o")
        try:
            subprocess.run([cc, "-c", "-O1", up_c, "-o", up_o], check=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            subprocess.run(["ld", "-r", target, up_o, "-o", target + ".new"], check=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except (OSError, subprocess.CalledProcessError) as e:
            return "no C compiler or ld -r: %s" % e
        os.replace(target + ".new", target)
        return None

    def in_table(pattern, repl):
        """Edit the calls table only (the includes table has rows of the same names)."""
        def f(text):
            a = text.index(BEGIN)
            b = text.index(END, a)
            return text[:a] + re.sub(pattern, repl, text[a:b], count=1) + text[b:]
        return f

    keep = lambda t: t
    none = lambda tmp, odir: None
    rows = parse_table(readme)
    # a file with an allowed call it makes, and one with a tolerated call
    tol = [(f, sorted(t)[0]) for f, (_, t, _) in sorted(rows.items()) if t]
    results = [
        case("a deliberate upward call (os.c -> heap.c, synthetic object)", upward_object, keep,
             ["src/os.c calls heap.c (heap_alloc_refill)", "os.c may call:"]),
        case("a file missing from the table", none,
             in_table(r"(?m)^\| `ownmap\.c` \|.*\n", ""),
             ["src/ownmap.c: not in the allowed-calls table"]),
        case("a row for a file that does not exist", none,
             lambda t: t.replace(END, "| `nosuch.c` | | |\n" + END, 1),
             ["row for src/nosuch.c, which does not exist"]),
        case("an upward call allowed (a cycle in the layering)", none,
             in_table(r"(?m)^(\| `os\.c` \| )", r"\1`alloc.c` "),
             ["the \"may call\" columns are not a layering"]),
    ]
    if tol:
        f, g = tol[0]
        results.append(case("a tolerated call no longer made (%s -> %s)" % (f, g),
                            lambda tmp, odir: _drop_calls(odir, f, g, objs), keep,
                            ["src/%s no longer calls %s" % (f, g)]))
    return check_includes.self_test_status(results)


def _drop_calls(odir, f, g, objs):
    """Replace f's object by an empty one: it calls nothing, g included."""
    cc = os.environ.get("CC", "cc")
    empty = os.path.join(os.path.dirname(odir), "empty.c")
    with open(empty, "w") as fh:
        fh.write("int check_calls_empty;\n")
    try:
        subprocess.run([cc, "-c", empty, "-o", os.path.join(odir, f + ".o")], check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        return "no C compiler: %s" % e
    for k in range(1, len(objs.get(f, []))):
        os.remove(os.path.join(os.path.dirname(os.path.dirname(odir)), "t%d.dir" % k, "src", f + ".o"))
    return None


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    parsed = check_includes.parse_args(argv, ("--build", "--src", "--table"), ("--graph", "--self-test"))
    if parsed is None:
        print(__doc__, file=sys.stderr)
        return 2
    values, mode = parsed
    src = values.get("--src", os.path.join(root, "src"))
    build = values.get("--build", os.path.join(root, "build"))
    readme = values.get("--table", os.path.join(src, "README.md"))
    if mode == "--graph":
        return graph_report(build, src, readme)
    if mode == "--self-test":
        return self_test(build, src, readme)
    return run(build, src, readme)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
