#!/usr/bin/env bash
# bench/real/selftest.sh LIBHAKMEM — the CTest test_bench_real: run_real.sh
# proves which malloc a real program ran on. Small inputs, a few seconds:
#  - sqlite3 and python3 (a non-PIE executable whose PLT stub is the canonical
#    "malloc") under LIBHAKMEM: malloc_path is LIBHAKMEM's real file, and the
#    output checksum equals the glibc run's;
#  - gcc under LIBHAKMEM: every process (gcc, cc1, as) agrees on LIBHAKMEM;
#  - sort under LIBHAKMEM: the same, and the same output as under glibc;
#  - python with 16 threads and then a fork pool, and node with 16 worker
#    threads (when node is installed): malloc_path and the same output;
#  - cppcheck, a C++ program (when installed): the same, its findings the
#    same as under glibc;
#  - perl, one interpreter and four ithreads: the same, the same output;
#  - a preload that does not exist: malloc_from=libc.so.6 (the harness then
#    marks the run "wrong allocator"), not the allocator it was meant to be.
# Exit 77 (skipped) when none of sqlite3, python3, gcc is installed.
set -uo pipefail
LIB=$(readlink -f "${1:?usage: selftest.sh path/to/libhakmem.so}")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v cc >/dev/null 2>&1 || { echo "SKIP: no cc to build the probe"; exit 77; }
export HAKMEM_REAL_DIR
HAKMEM_REAL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-real-selftest.XXXXXX")
trap 'rm -rf "$HAKMEM_REAL_DIR"' EXIT
fails=0 ran=0
field() { printf '%s\n' "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }
expect() { # expect WHAT GOT WANT
  if [ "$2" = "$3" ]; then echo "ok   $1: $2"; else echo "FAIL $1: got '$2', want '$3'"; fails=$((fails + 1)); fi
}
run() { env -u LD_PRELOAD ${1:+LD_PRELOAD=$1} bash "$HERE/run_real.sh" "${@:2}" 2>/dev/null | grep '^RESULT '; }
# both WHAT ROW ARGS...: ROW under LIB and under glibc (results in h and g);
# the first ran on LIB's file and both printed the same output
both() {
  local what=$1; shift
  h=$(run "$LIB" "$@"); g=$(run "" "$@")
  expect "$what under hakmem: malloc_path" "$(field "$h" malloc_path)" "$LIB"
  expect "$what: same output under both" "$(field "$h" check)" "$(field "$g" check)"
}

if command -v sqlite3 >/dev/null 2>&1; then
  ran=1
  both sqlite sqlite 2000
  expect "sqlite under glibc: malloc_from" "$(field "$g" malloc_from)" libc.so.6
  w=$(run /nonexistent/libhakmem.so sqlite 2000)
  expect "sqlite with a missing preload: malloc_from" "$(field "$w" malloc_from)" libc.so.6
fi
if command -v sort >/dev/null 2>&1; then
  ran=1
  both sort sort 20000 2 1M
fi
if [ -x /usr/bin/python3 ]; then
  ran=1
  both python python 2
  # 16 threads, then a fork()ed pool started while they hold their caches
  both "python with 16 threads and a fork pool" python_mt 1
fi
if command -v node >/dev/null 2>&1; then
  ran=1
  both "node with 16 workers" node 1
fi
if command -v cppcheck >/dev/null 2>&1; then
  ran=1
  both "cppcheck (C++: operator new and delete)" cppcheck 10
fi
if command -v perl >/dev/null 2>&1; then
  ran=1
  both perl perl 1 2 500
  perl -Mthreads -e 1 2>/dev/null && both "perl with 4 ithreads" perl 4 2 300
fi
if command -v gcc >/dev/null 2>&1; then
  ran=1
  h=$(run "$LIB" gcc 1 5)
  expect "gcc under hakmem: malloc_path (all processes agree)" "$(field "$h" malloc_path)" "$LIB"
  n=$(field "$h" processes)
  [ "${n:-0}" -ge 3 ] && echo "ok   gcc: $n processes probed" || { echo "FAIL gcc: ${n:-0} processes probed, want >= 3"; fails=$((fails + 1)); }
fi
[ $ran = 1 ] || { echo "SKIP: none of sqlite3, python3, gcc is installed"; exit 77; }
[ $fails = 0 ]
