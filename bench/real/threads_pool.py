# bench/real/threads_pool.py — the workload of the real_python_16t row.
# Usage: python3 threads_pool.py ROUNDS  (run with PYTHONMALLOC=malloc, as
# alloc_heavy.py, so that every object reaches the process malloc).
# A threaded Python server's pattern, then a worker pool's: 16 threads (on a
# 2-core machine) each build dicts of lists, serialise them to JSON and parse
# them back, ROUNDS times; the parsed documents go back to the main thread
# through the executor, which frees them there, so blocks allocated by one
# thread are freed by another. Then a fork()ed pool of 8 processes, started
# while the 16 threads' caches are still held, maps a function over 64 tasks
# (fork with other threads' allocator state; each child allocates strings and
# returns a number through a pipe). Prints a checksum and the number of
# records built (the wrapper's ops).
import json
import multiprocessing as mp
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

if os.environ.get("PYTHONMALLOC") != "malloc":
    sys.exit("threads_pool.py: run with PYTHONMALLOC=malloc (the allocator under test would hardly be called)")

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
RECORDS = 4000


def work(seed):
    r = random.Random(seed)
    kept = []
    n = 0
    for _ in range(ROUNDS):
        d = {"k%d" % i: [i] * r.randint(1, 20) for i in range(RECORDS)}
        back = json.loads(json.dumps(d))
        n += len(back)
        kept.append(back)  # handed to the main thread, freed there
        if len(kept) > 2:
            kept.pop(0)
    return n, kept


def child(x):
    s = [str(i * x) for i in range(20000)]
    return sum(len(t) for t in s)


if __name__ == "__main__":
    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(work, range(16)))
    records = sum(n for n, _ in results)
    check = sum(len(k) for _, ks in results for k in ks)
    with mp.get_context("fork").Pool(8) as pool:
        check = (check * 31 + sum(pool.map(child, range(64)))) % 1_000_000_007
    del results
    print("check=%d" % check)
    print("records=%d" % records)
