#!/usr/bin/env bash
# test_sort_parallel.sh — `sort --parallel=16` under LD_PRELOAD, run after
# run: it must finish and print what sort prints under glibc.
#
# Why: sort joins 16 threads whose 8 MiB stacks overflow glibc's stack
# cache, so glibc frees a dead thread's TLS (`free`, from
# `__nptl_free_stacks`) while `pthread_join` holds the stack-cache lock.
# ed51ee3 could start its purge thread in that free, and pthread_create
# then waited for the same lock for ever: it hung in 2 of 6 runs of this
# command by hand, and in every run of real_sort in one `make bench`.
# hakmem now starts the thread only at an allocation's safe point
# (src/decay.h). The hang is a race, so one run proves little: RUNS runs,
# each killed after LIMIT seconds (about 1 s each when nothing hangs).
#
# Usage: test_sort_parallel.sh LIBHAKMEM.so [RUNS] [LIMIT]
set -u
LIB=${1:?usage: test_sort_parallel.sh libhakmem.so [runs] [limit]}
RUNS=${2:-10}
LIMIT=${3:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v sort >/dev/null 2>&1 || { echo "SKIP: no sort"; exit 77; }
command -v timeout >/dev/null 2>&1 || { echo "SKIP: no timeout"; exit 77; }
# --parallel is GNU sort's
sort --parallel=2 </dev/null >/dev/null 2>&1 || { echo "SKIP: sort has no --parallel"; exit 77; }

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# the word list bench/real's real_sort sorts (1.5 M lines, 32 MiB)
awk -v n=1500000 -f "$HERE/../bench/real/gen_words.awk" >"$W/in" || { echo "FAIL: input"; exit 1; }
want=$(LC_ALL=C sort --parallel=16 -S 100M "$W/in" | cksum)

fails=0
for i in $(seq "$RUNS"); do
  start=$(date +%s%N)
  timeout -s KILL "$LIMIT" env LD_PRELOAD="$LIB" LC_ALL=C sort --parallel=16 -S 100M "$W/in" >"$W/out" 2>"$W/err"
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  got=$(cksum <"$W/out")
  if [ "$rc" -eq 137 ]; then
    echo "FAIL: run $i hung (killed after ${LIMIT} s)"
    fails=$((fails + 1))
  elif [ "$rc" -ne 0 ]; then
    echo "FAIL: run $i exited with $rc: $(head -c 300 "$W/err")"
    fails=$((fails + 1))
  elif [ "$got" != "$want" ]; then
    echo "FAIL: run $i printed other lines than glibc's sort ($got, want $want)"
    fails=$((fails + 1))
  else
    echo "run $i: ok, $ms ms"
  fi
done
# the library really was the one sort ran on
LD_PRELOAD="$LIB" HAKMEM_STATS=1 LC_ALL=C sort --parallel=2 -S 1M </dev/null 2>&1 >/dev/null | grep -q "hakmem" ||
  { echo "FAIL: sort did not run on $LIB (no statistics report)"; exit 1; }
[ "$fails" -eq 0 ] || { echo "FAIL: $fails of $RUNS runs"; exit 1; }
echo "PASS: $RUNS runs of sort --parallel=16"
