# bench/real/alloc_heavy.py — the workload of the real_python row.
# Usage: python3 alloc_heavy.py ROUNDS  (run with PYTHONMALLOC=malloc so every
# object allocation reaches the process malloc rather than pymalloc's arenas).
# Each round builds 2000 records mixing what Python programs allocate: instances
# of a small class, dicts with string keys, lists that grow, strings built by
# formatting and joining, tuples and sets; keeps a sliding window of records so
# objects of many ages are freed, and sorts/groups them. Prints a checksum and
# the number of records built (the wrapper's ops).
import os
import sys


class Rec:
    __slots__ = ("key", "tags", "attrs", "score")

    def __init__(self, key, tags, attrs, score):
        self.key = key
        self.tags = tags
        self.attrs = attrs
        self.score = score


class Node:
    def __init__(self, name, parent=None):
        self.name = name
        self.parent = parent
        self.children = []
        self.meta = {}


def round_(r, window, seed):
    built = 0
    root = Node("root%d" % r)
    for i in range(2000):
        seed = (seed * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        k = "k%d_%x" % (i, seed >> 40)
        tags = [k[j:j + 3] for j in range(0, len(k), 2)]
        attrs = {"id": i, "name": k.upper(), "len": len(k), "p": (seed >> 20) % 997}
        if seed & 1:
            attrs["extra"] = " ".join(tags) * (1 + (seed >> 33) % 8)
        rec = Rec(k, tuple(tags), attrs, (seed >> 11) % 10007 / 7.0)
        window.append(rec)
        n = Node(k, root)
        n.meta.update(attrs)
        root.children.append(n)
        built += 1
    if len(window) > 20000:
        del window[: len(window) // 3]
    groups = {}
    for rec in window[-4000:]:
        groups.setdefault(rec.attrs["p"] % 64, []).append(rec)
    best = sorted(window[-4000:], key=lambda x: (x.score, x.key))[:50]
    s = sum(len(v) for v in groups.values()) + len({t for rec in best for t in rec.tags})
    text = ",".join(rec.key for rec in best)
    return built, s + len(text), seed


def main():
    # the row measures the process allocator: refuse to run on pymalloc
    if sys.flags.ignore_environment or os.environ.get("PYTHONMALLOC") != "malloc":
        sys.exit("alloc_heavy.py: run with PYTHONMALLOC=malloc and without -E/-I")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    window, seed, total, check = [], 12345, 0, 0
    for r in range(rounds):
        b, c, seed = round_(r, window, seed)
        total += b
        check = (check * 31 + c) & 0xFFFFFFFF
    print("records=%d check=%d" % (total, check))


main()
