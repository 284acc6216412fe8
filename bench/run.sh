#!/usr/bin/env bash
# bench/run.sh — run the hakmem benchmark suite against glibc, mimalloc,
# jemalloc and tcmalloc and write bench/results/latest.md (+ chart).
# See bench/README.md. Usage:
#   bash bench/run.sh [--quick] [--instr] [--repeat N] [--only NAME[,NAME...]]
#                     [--allocators LIST] [--no-install] [--list] [--secure-report]
#   --secure-report    libhakmem_secure.so against libhakmem.so, interleaved, on every
#                      row: writes bench/results/secure.md (make bench-secure)
# Environment:
#   HAKMEM_BUILD_DIR   build directory with libhakmem.so and bench/ (default: $BUILD
#                      as given to make, else build/)
#   HAKMEM_LIB         path of libhakmem.so (default: $HAKMEM_BUILD_DIR/libhakmem.so)
#   HAKMEM_BASE_LIB    an older libhakmem.so to compare with in the same run: adds
#                      the allocator hakmem-base (and a hakmem vs hakmem-base table)
#   HAKMEM_SECURE_LIB  the allocator hakmem-secure (default: libhakmem_secure.so
#                      beside HAKMEM_LIB); not in the default set: --allocators
#   BENCH_RESULTS_DIR  where results go (default: bench/results)
#   BENCH_TIMEOUT      seconds before one run is killed (default 120)
#   BENCH_WAIT_IDLE    wait up to this many seconds for the machine to be idle first
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# `make BUILD=dir bench` exports BUILD to this script
BUILD_DIR=${HAKMEM_BUILD_DIR:-${BUILD:-build}}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
RESULTS=${BENCH_RESULTS_DIR:-$ROOT/bench/results}
TIMEOUT=${BENCH_TIMEOUT:-120}
PY=/usr/bin/python3
[ -x $PY ] || PY=$(command -v python3)

QUICK=0 INSTR=0 REPEAT="" ONLY="" INSTALL=1 LIST=0 SECURE_REPORT=0 ALLOC_GIVEN=0
ALLOCATORS="hakmem,hakmem-libc,glibc,mimalloc,jemalloc,tcmalloc"
# an older build to compare with: its column comes right after hakmem's
[ -n "${HAKMEM_BASE_LIB:-}" ] && ALLOCATORS="hakmem,hakmem-base,${ALLOCATORS#hakmem,}"
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --instr) INSTR=1 ;;
    --repeat) REPEAT=${2:?--repeat needs N}; shift ;;
    --repeat=*) REPEAT=${1#*=} ;;
    --only) ONLY=${2:?--only needs a name}; shift ;;
    --only=*) ONLY=${1#*=} ;;
    --allocators) ALLOCATORS=${2:?}; ALLOC_GIVEN=1; shift ;;
    --allocators=*) ALLOCATORS=${1#*=}; ALLOC_GIVEN=1 ;;
    --secure-report) SECURE_REPORT=1 ;;
    --no-install) INSTALL=0 ;;
    --list) LIST=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
# the secure report compares two hakmem libraries: no peer to install
[ $SECURE_REPORT = 1 ] && { [ $ALLOC_GIVEN = 1 ] || ALLOCATORS="hakmem,hakmem-secure"; INSTALL=0; }
if [ -z "$REPEAT" ]; then
  if [ $QUICK = 1 ]; then REPEAT=1; else REPEAT=3; fi
fi
case $REPEAT in ''|*[!0-9]*|0) echo "run.sh: --repeat needs a positive integer" >&2; exit 2 ;; esac

say() { printf '%s\n' "$*" >&2; }

# ---------------------------------------------------------------- the suite
# name | extra environment | program and arguments  (full, then quick)
SUITE_FULL=(
  "random_mixed||bench_random_mixed 40000000 400 42"
  "random_mixed_257_768|HAKMEM_BENCH_MIN_SIZE=257 HAKMEM_BENCH_MAX_SIZE=768|bench_random_mixed 30000000 400 42"
  "mid_large_mt||bench_mid_large_mt 2 5000000 400 8192 32768"
  "mid_mt_257_768||bench_mid_large_mt 2 15000000 400 257 768"
  "mid_mt_64k_1m||bench_mid_large_mt 2 2000000 64 65536 1048576"
  "larson||larson 1 8 128 5000 20 12345 2"
  "random_mixed_prof|HAKMEM_PROF=1 HAKMEM_PROF_FILE=/tmp/hakmem-bench-prof|bench_random_mixed 40000000 400 42"
  "larson_prof|HAKMEM_PROF=1 HAKMEM_PROF_FILE=/tmp/hakmem-bench-prof|larson 1 8 128 5000 20 12345 2"
  "prodcons||bench_prodcons 2 4000000 16 512"
  "alltoall||bench_alltoall 2 10000 256 16 1024"
  "thread_churn||bench_thread_churn 1000 2 500 16 4096"
  "realloc||bench_realloc 4000000 256 7"
  "aligned||bench_aligned 1000000 200 3"
  "large_churn||bench_large_churn 10000 8 5"
  "false_sharing||bench_false_sharing 2 4000 20000 8 0"
  "false_sharing_passive||bench_false_sharing 2 3000 20000 8 1"
  "calloc||bench_calloc 3000000 400 11"
  "peak_mem||bench_peak_mem 400000 9"
  "big_buffers||bench_big_buffers 180 20 5 25 13"
  "thread_pass||bench_thread_pass 1500 2 1000 16 4096"
  "size_mix||bench_size_mix 12000000 2000 17"
  "size_runs||bench_size_runs 2 800 2500 1000"
  "xmalloc_8_64||bench_xmalloc 1 1 800 8 64 32"
  "xmalloc_64_4k||bench_xmalloc 1 1 800 64 4096 32"
  "xmalloc_1p2c||bench_xmalloc 1 2 800 8 4096 32"
  "xmalloc_2p1c||bench_xmalloc 2 1 800 8 4096 32"
  "remote_0||bench_remote_mix 2 800 16 256 256 0"
  "remote_50_b1||bench_remote_mix 2 800 16 256 1 50"
  "remote_50_b256||bench_remote_mix 2 800 16 256 256 50"
  "remote_100_b1||bench_remote_mix 2 800 16 256 1 100"
  "remote_100_b256||bench_remote_mix 2 800 16 256 256 100"
  "larson_1k|BENCH_LARSON_MS=800|larson 1 8 1000 1000 100 12345 2"
  "larson_10k|BENCH_LARSON_MS=800|larson 1 8 1000 10000 100 12345 2"
  "larson_sized|BENCH_LARSON_MS=800|larson_sized 1 8 1000 5000 100 12345 2"
  "rounds||bench_rounds 2 150 100000 16 1024 1000"
  "rounds_fresh||bench_rounds 2 150 100000 16 1024 1000 1"
  "larson_16t|BENCH_LARSON_MS=800|larson 1 8 128 1000 20 12345 16"
  "larson_16t_5k|BENCH_LARSON_MS=800|larson 1 8 1000 5000 100 4141 16"
  "larson_64t|BENCH_LARSON_MS=800|larson 1 8 128 1000 20 12345 64"
  "larson_256t|BENCH_LARSON_MS=800|larson 1 8 128 1000 20 12345 256"
  "prodcons_16t||bench_prodcons 16 300000 16 512"
  "prodcons_64t||bench_prodcons 64 100000 16 512"
  "xmalloc_16t||bench_xmalloc 8 8 800 8 512 32"
  "thread_churn_16t||bench_thread_churn 300 16 500 16 4096"
  "thread_churn_64t||bench_thread_churn 80 64 500 16 4096"
  "rounds_16t||bench_rounds 16 50 20000 16 1024 1000"
  "mid_mt_16t||bench_mid_large_mt 16 3000000 400 16 1024"
  "size_runs_16t||bench_size_runs 16 100 2500 1000"
  "size_runs_ring||bench_size_runs 2 800 2500 1000 1"
  "size_runs_ring_16t||bench_size_runs 16 100 2500 1000 1"
  "batch_mix||bench_batch_mix 2 10000 4000 1000"
  "batch_mix_1t||bench_batch_mix 1 10000 4000 1000"
  "batch_mix_16t||bench_batch_mix 16 1500 4000 1000"
  "phases||bench_phases 20 32"
  "phases_wide||bench_phases 20 32 16 65536 64 100000 1024 49152"
  "phases_to_big||bench_phases 1 96 16 200000"
  "phases_to_small||bench_phases 1 96 300000 1024"
  "small_ws_64t||bench_mid_large_mt 64 1000000 50 16 512"
  "written_mixed||bench_written 2 4000000 2000 8 32768"
  "written_mixed_16t||bench_written 16 400000 2000 8 32768"
  "written_big||bench_written 2 60000 64 65536 1048576"
  "written_big_16t||bench_written 16 8000 64 65536 1048576"
  "idle_16t||bench_idle 16 256 10 1000"
  "stress||bench_stress 2 20 1000000"
  "stress_16t||bench_stress 16 20 200000"
  "handoff||bench_handoff 200000 2 40 100 0"
  "real_sqlite||real/run_real.sh sqlite 120000"
  "real_python||real/run_real.sh python 80"
  "real_gcc||real/run_real.sh gcc 2 60"
  "real_redis||real/run_real.sh redis 200000"
  "real_ruby||real/run_real.sh ruby 1"
  "real_sort||real/run_real.sh sort 1500000 16 100M"
  "real_jq||real/run_real.sh jq 200000"
  "real_git||real/run_real.sh git 400"
  "real_python_16t||real/run_real.sh python_mt 6"
  "real_node_16t||real/run_real.sh node 8"
  "real_cppcheck||real/run_real.sh cppcheck 240"
  "real_perl||real/run_real.sh perl 1 6 60000"
  "real_perl_16t||real/run_real.sh perl 16 4 10000"
)
SUITE_QUICK=(
  "random_mixed||bench_random_mixed 10000000 400 42"
  "random_mixed_257_768|HAKMEM_BENCH_MIN_SIZE=257 HAKMEM_BENCH_MAX_SIZE=768|bench_random_mixed 8000000 400 42"
  "mid_large_mt||bench_mid_large_mt 2 1250000 400 8192 32768"
  "mid_mt_257_768||bench_mid_large_mt 2 4000000 400 257 768"
  "mid_mt_64k_1m||bench_mid_large_mt 2 100000 64 65536 1048576"
  "larson|BENCH_LARSON_MS=300|larson 1 8 128 5000 20 12345 2"
  "random_mixed_prof|HAKMEM_PROF=1 HAKMEM_PROF_FILE=/tmp/hakmem-bench-prof|bench_random_mixed 10000000 400 42"
  "larson_prof|BENCH_LARSON_MS=300 HAKMEM_PROF=1 HAKMEM_PROF_FILE=/tmp/hakmem-bench-prof|larson 1 8 128 5000 20 12345 2"
  "prodcons||bench_prodcons 2 1000000 16 512"
  "alltoall||bench_alltoall 2 2500 256 16 1024"
  "thread_churn||bench_thread_churn 300 2 500 16 4096"
  "realloc||bench_realloc 1000000 256 7"
  "aligned||bench_aligned 300000 200 3"
  "large_churn||bench_large_churn 3000 8 5"
  "false_sharing||bench_false_sharing 2 1000 20000 8 0"
  "false_sharing_passive||bench_false_sharing 2 750 20000 8 1"
  "calloc||bench_calloc 750000 400 11"
  "peak_mem||bench_peak_mem 200000 9"
  "big_buffers||bench_big_buffers 45 20 5 25 13"
  "thread_pass||bench_thread_pass 400 2 1000 16 4096"
  "size_mix||bench_size_mix 3000000 2000 17"
  "size_runs||bench_size_runs 2 200 2500 1000"
  "xmalloc_8_64||bench_xmalloc 1 1 300 8 64 32"
  "xmalloc_64_4k||bench_xmalloc 1 1 300 64 4096 32"
  "xmalloc_1p2c||bench_xmalloc 1 2 300 8 4096 32"
  "xmalloc_2p1c||bench_xmalloc 2 1 300 8 4096 32"
  "remote_0||bench_remote_mix 2 300 16 256 256 0"
  "remote_50_b1||bench_remote_mix 2 300 16 256 1 50"
  "remote_50_b256||bench_remote_mix 2 300 16 256 256 50"
  "remote_100_b1||bench_remote_mix 2 300 16 256 1 100"
  "remote_100_b256||bench_remote_mix 2 300 16 256 256 100"
  "larson_1k|BENCH_LARSON_MS=300|larson 1 8 1000 1000 100 12345 2"
  "larson_10k|BENCH_LARSON_MS=300|larson 1 8 1000 10000 100 12345 2"
  "larson_sized|BENCH_LARSON_MS=300|larson_sized 1 8 1000 5000 100 12345 2"
  "rounds||bench_rounds 2 50 100000 16 1024 1000"
  "rounds_fresh||bench_rounds 2 50 100000 16 1024 1000 1"
  "larson_16t|BENCH_LARSON_MS=300|larson 1 8 128 1000 20 12345 16"
  "larson_16t_5k|BENCH_LARSON_MS=300|larson 1 8 1000 5000 100 4141 16"
  "larson_64t|BENCH_LARSON_MS=300|larson 1 8 128 1000 20 12345 64"
  "larson_256t|BENCH_LARSON_MS=300|larson 1 8 128 1000 20 12345 256"
  "prodcons_16t||bench_prodcons 16 100000 16 512"
  "prodcons_64t||bench_prodcons 64 40000 16 512"
  "xmalloc_16t||bench_xmalloc 8 8 300 8 512 32"
  "thread_churn_16t||bench_thread_churn 100 16 500 16 4096"
  "thread_churn_64t||bench_thread_churn 25 64 500 16 4096"
  "rounds_16t||bench_rounds 16 20 20000 16 1024 1000"
  "mid_mt_16t||bench_mid_large_mt 16 750000 400 16 1024"
  "size_runs_16t||bench_size_runs 16 25 2500 1000"
  "size_runs_ring||bench_size_runs 2 200 2500 1000 1"
  "size_runs_ring_16t||bench_size_runs 16 25 2500 1000 1"
  "batch_mix||bench_batch_mix 2 2500 4000 1000"
  "batch_mix_1t||bench_batch_mix 1 2500 4000 1000"
  "batch_mix_16t||bench_batch_mix 16 400 4000 1000"
  "phases||bench_phases 6 32"
  "phases_wide||bench_phases 6 32 16 65536 64 100000 1024 49152"
  "phases_to_big||bench_phases 1 96 16 200000"
  "phases_to_small||bench_phases 1 96 300000 1024"
  "small_ws_64t||bench_mid_large_mt 64 300000 50 16 512"
  "written_mixed||bench_written 2 1000000 2000 8 32768"
  "written_mixed_16t||bench_written 16 100000 2000 8 32768"
  "written_big||bench_written 2 15000 64 65536 1048576"
  "written_big_16t||bench_written 16 2000 64 65536 1048576"
  "idle_16t||bench_idle 16 64 10 500"
  "stress||bench_stress 2 10 250000"
  "stress_16t||bench_stress 16 10 50000"
  "handoff||bench_handoff 100000 2 20 100 0"
  "real_sqlite||real/run_real.sh sqlite 40000"
  "real_python||real/run_real.sh python 25"
  "real_gcc||real/run_real.sh gcc 2 20"
  "real_redis||real/run_real.sh redis 60000"
  "real_ruby||real/run_real.sh ruby 1"
  "real_sort||real/run_real.sh sort 1500000 16 100M"
  "real_jq||real/run_real.sh jq 200000"
  "real_git||real/run_real.sh git 400"
  "real_python_16t||real/run_real.sh python_mt 2"
  "real_node_16t||real/run_real.sh node 3"
  "real_cppcheck||real/run_real.sh cppcheck 80"
  "real_perl||real/run_real.sh perl 1 3 30000"
  "real_perl_16t||real/run_real.sh perl 16 3 4000"
)
# single-threaded configurations measured by --instr: name | env | program args
INSTR_SUITE=(
  "random_mixed|HAKMEM_BENCH_MIN_SIZE=16 HAKMEM_BENCH_MAX_SIZE=1024|bench_random_mixed 2000000 400 42"
  "random_mixed_257_768|HAKMEM_BENCH_MIN_SIZE=257 HAKMEM_BENCH_MAX_SIZE=768|bench_random_mixed 2000000 400 42"
  "mid_large_1t||bench_mid_large_mt 1 1000000 400 8192 32768"
)
if [ $QUICK = 1 ]; then
  SUITE=("${SUITE_QUICK[@]}")
  INSTR_SUITE=("${INSTR_SUITE[@]/ 2000000 / 500000 }")
  INSTR_SUITE=("${INSTR_SUITE[@]/ 1000000 / 250000 }")
else
  SUITE=("${SUITE_FULL[@]}")
fi
if [ $LIST = 1 ]; then
  for e in "${SUITE[@]}"; do IFS='|' read -r n v c <<<"$e"; printf '%-22s %s %s\n' "$n" "$v" "$c"; done
  exit 0
fi
if [ -n "$ONLY" ]; then
  sel=() isel=()
  IFS=',' read -r -a want <<<"$ONLY"
  for e in "${SUITE[@]}"; do for w in "${want[@]}"; do [ "${e%%|*}" = "$w" ] && sel+=("$e"); done; done
  for e in "${INSTR_SUITE[@]}"; do for w in "${want[@]}"; do [ "${e%%|*}" = "$w" ] && isel+=("$e"); done; done
  if [ ${#sel[@]} -eq 0 ] && [ ${#isel[@]} -eq 0 ]; then
    say "run.sh: --only '$ONLY' matches no benchmark; names:"; for e in "${SUITE[@]}" "${INSTR_SUITE[@]}"; do say "  ${e%%|*}"; done
    exit 2
  fi
  SUITE=("${sel[@]+"${sel[@]}"}"); INSTR_SUITE=("${isel[@]+"${isel[@]}"}")
fi

# ------------------------------------------------------- install the peers
find_lib() { # find_lib PACKAGE REGEX : path of the shared object, or nothing
  local f
  f=$(dpkg -L "$1" 2>/dev/null | grep -E "/$2\$" | head -n1)
  if [ -z "$f" ]; then
    for f in /usr/lib/*/$2 /usr/lib/$2 /usr/lib64/$2 /usr/local/lib/$2; do [ -e "$f" ] && break; f=""; done
  fi
  [ -n "$f" ] && [ -e "$f" ] && printf '%s\n' "$f"
}
# shellcheck disable=SC2317
mimalloc_lib() { find_lib libmimalloc2.0 'libmimalloc.so.2' || find_lib libmimalloc2.0 'libmimalloc.so*'; }
jemalloc_lib() { find_lib libjemalloc2 'libjemalloc.so.2'; }
tcmalloc_lib() { find_lib libtcmalloc-minimal4 'libtcmalloc_minimal.so.4'; }

if [ $INSTALL = 1 ]; then
  pkgs=()
  [ -z "$(mimalloc_lib)" ] && pkgs+=(libmimalloc2.0)
  [ -z "$(jemalloc_lib)" ] && pkgs+=(libjemalloc2)
  [ -z "$(tcmalloc_lib)" ] && pkgs+=(libtcmalloc-minimal4)
  command -v gnuplot >/dev/null 2>&1 || pkgs+=(gnuplot-nox)
  [ -x /usr/bin/time ] || pkgs+=(time)
  [ $INSTR = 1 ] && ! command -v valgrind >/dev/null 2>&1 && pkgs+=(valgrind)
  # the real-program rows (bench/real/suite.sh) that are selected
  [[ " ${SUITE[*]} " == *"real/run_real.sh"* ]] && . "$ROOT/bench/real/suite.sh" && real_packages
  if [ ${#pkgs[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"
    if [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; then
      say "== installing: ${pkgs[*]}"
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || say "   apt-get update failed"
      if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null 2>&1; then
        for p in "${pkgs[@]}"; do # one by one, to say which failed
          $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null 2>&1 ||
            say "   could not install $p: comparing without it"
        done
      fi
    else
      say "== not root and no sudo: cannot install ${pkgs[*]}; comparing with what is there"
    fi
  fi
fi

# --------------------------------------------------- the programs, hakmem
BENCH_BIN=$BUILD_DIR/bench
if [ ! -x "$BENCH_BIN/bench_random_mixed" ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  say "== building the benchmark programs in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --target bench_programs -j "$(nproc)" >/dev/null 2>&1 || true
fi
if [ ! -x "$BENCH_BIN/bench_random_mixed" ]; then
  # the top-level build failed or has no benchmarks: build them on their own
  BENCH_BIN=$BUILD_DIR/bench-standalone
  say "== $BUILD_DIR/bench has no benchmark programs; building them alone in $BENCH_BIN"
  if ! { cmake -S "$ROOT/bench" -B "$BENCH_BIN" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
         cmake --build "$BENCH_BIN" -j "$(nproc)" >/dev/null; }; then
    say "run.sh: cannot build the benchmark programs"; exit 1
  fi
fi
HAKMEM_LIB=${HAKMEM_LIB:-$BUILD_DIR/libhakmem.so}
HAKMEM_BASE_LIB=${HAKMEM_BASE_LIB:-}
HAKMEM_SECURE_LIB=${HAKMEM_SECURE_LIB:-$(dirname "$HAKMEM_LIB")/libhakmem_secure.so}

# The file a library really is, as the programs print it in malloc_path=
# (realpath, spaces and '=' as '_'): hakmem and hakmem-base may both be called
# libhakmem.so, so they are told apart by path, not by name.
canon_path() { readlink -f -- "$1" | tr ' =\t' '___'; }
# check_from RESULT_LINE EXPECT: does the run's malloc come from where it should?
# EXPECT is "path=/real/path" (malloc_path must be that file) or a string that
# malloc_from (the basename) must contain. Sets FROM to what the run printed.
check_from() {
  local want=${2#path=} p
  FROM=$(printf '%s\n' "$1" | sed -n 's/.*malloc_from=\([^ ]*\).*/\1/p')
  if [ "$want" = "$2" ]; then [[ $FROM == *"$want"* ]]; return; fi
  p=$(printf '%s\n' "$1" | sed -n 's/.*malloc_path=\([^ ]*\).*/\1/p')
  if [ -z "$p" ]; then # programs older than malloc_path: compare names only
    [[ -n $FROM && ${want##*/} == "${FROM%%.so*}"* ]]; return
  fi
  FROM=$p
  [ "$p" = "$want" ]
}

# allocator table: name | LD_PRELOAD | extra env | what malloc must come from (see check_from)
declare -a ALLOC_ROWS=()
add_alloc() { ALLOC_ROWS+=("$1|$2|$3|$4"); }
IFS=',' read -r -a want_alloc <<<"$ALLOCATORS"
MISSING_NOTES=()
for a in "${want_alloc[@]}"; do
  case $a in
    hakmem|hakmem-libc)
      if [ -e "$HAKMEM_LIB" ]; then
        if [ $a = hakmem ]; then add_alloc hakmem "$HAKMEM_LIB" "" "path=$(canon_path "$HAKMEM_LIB")"
        else add_alloc hakmem-libc "$HAKMEM_LIB" "HAKMEM_FORCE_LIBC_ALLOC=1" "path=$(canon_path "$HAKMEM_LIB")"; fi
      elif [ $a = hakmem ]; then
        MISSING_NOTES+=("hakmem: $HAKMEM_LIB does not exist (build it with 'make', or set HAKMEM_BUILD_DIR / HAKMEM_LIB); hakmem rows skipped")
      fi ;;
    hakmem-base)
      if [ -z "$HAKMEM_BASE_LIB" ]; then
        MISSING_NOTES+=("hakmem-base: HAKMEM_BASE_LIB is not set (it names the older libhakmem.so to compare with); row skipped")
      elif [ ! -e "$HAKMEM_BASE_LIB" ]; then
        MISSING_NOTES+=("hakmem-base: HAKMEM_BASE_LIB=$HAKMEM_BASE_LIB does not exist; row skipped")
      else
        [ -e "$HAKMEM_LIB" ] && [ "$(canon_path "$HAKMEM_BASE_LIB")" = "$(canon_path "$HAKMEM_LIB")" ] &&
          MISSING_NOTES+=("hakmem-base: HAKMEM_BASE_LIB is the same file as HAKMEM_LIB ($(canon_path "$HAKMEM_LIB")): both columns measure one library")
        add_alloc hakmem-base "$HAKMEM_BASE_LIB" "" "path=$(canon_path "$HAKMEM_BASE_LIB")"
      fi ;;
    hakmem-secure)
      if [ -e "$HAKMEM_SECURE_LIB" ]; then add_alloc hakmem-secure "$HAKMEM_SECURE_LIB" "" "path=$(canon_path "$HAKMEM_SECURE_LIB")"
      else MISSING_NOTES+=("hakmem-secure: $HAKMEM_SECURE_LIB does not exist (built by 'make'; or set HAKMEM_SECURE_LIB); row skipped"); fi ;;
    glibc) add_alloc glibc "" "" "libc.so" ;;
    mimalloc|jemalloc|tcmalloc)
      lib=$(${a}_lib)
      if [ -n "$lib" ]; then add_alloc "$a" "$lib" "" "lib$a"
      else MISSING_NOTES+=("$a: not installed (Debian package missing); row skipped"); fi ;;
    *) say "run.sh: unknown allocator '$a'"; exit 2 ;;
  esac
done

# check once per allocator that the preload works and really supplies malloc
declare -a OK_ROWS=()
declare -A LIB_VERSION=()
for row in "${ALLOC_ROWS[@]}"; do
  IFS='|' read -r name pre envs expect <<<"$row"
  # shellcheck disable=SC2086
  out=$(timeout -k 5 60 env -u LD_PRELOAD $envs ${pre:+LD_PRELOAD=$pre} "$BENCH_BIN/bench_random_mixed" 20000 64 1 2>&1)
  rc=$?
  if check_from "$out" "$expect"; then ok=1; else ok=0; fi
  from=$FROM
  if [ -z "$from" ]; then
    why="exit $rc"
    [ $rc -gt 128 ] && why="$why = SIG$(kill -l $((rc - 128)) 2>/dev/null)"
    last=$(printf '%s' "$out" | tail -n1 | cut -c1-160)
    MISSING_NOTES+=("$name: the check run (bench_random_mixed 20000 64 1 under ${pre:-no preload}) failed: $why${last:+: $last}; row skipped")
  elif [ $ok = 0 ]; then
    MISSING_NOTES+=("$name: malloc came from $from, not ${expect#path=}: LD_PRELOAD did not take; row skipped")
  elif [ "$name" = hakmem-secure ] && [[ $out != *hakmem_version=*_secure* ]]; then
    MISSING_NOTES+=("hakmem-secure: $pre is not a secure build (hak_version: $(printf '%s\n' "$out" | sed -n 's/.*hakmem_version=\([^ ]*\).*/\1/p')); row skipped")
  else
    OK_ROWS+=("$row")
    ver=$(printf '%s\n' "$out" | sed -n 's/.*hakmem_version=\([^ ]*\).*/\1/p')
    [ -n "$ver" ] && LIB_VERSION[$name]=$ver
  fi
done
# real-program rows whose program is not installed: a note, not a failure
[[ " ${SUITE[*]} " == *"real/run_real.sh"* ]] && . "$ROOT/bench/real/suite.sh" && real_drop_missing
for n in "${MISSING_NOTES[@]+"${MISSING_NOTES[@]}"}"; do say "!! $n"; done
if [ ${#OK_ROWS[@]} -eq 0 ]; then say "run.sh: no allocator can be measured"; exit 1; fi

mkdir -p "$RESULTS"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-bench.XXXXXX")
[ -n "${BENCH_KEEP_TMP:-}" ] || trap 'rm -rf "$TMP"' EXIT
NOTES_FILE=$TMP/notes.txt
: >"$NOTES_FILE"
for n in "${MISSING_NOTES[@]+"${MISSING_NOTES[@]}"}"; do printf '%s\n' "$n" >>"$NOTES_FILE"; done
for row in "${OK_ROWS[@]}"; do
  IFS='|' read -r name pre envs expect <<<"$row"
  v=""
  [ -n "${LIB_VERSION[$name]:-}" ] && v="hak_version: ${LIB_VERSION[$name]}"
  [ "$name" = hakmem-base ] && v="${v:+$v; }built $(date -u -r "$(readlink -f "$pre")" '+%Y-%m-%d %H:%M UTC')"
  v=${v:+ ($v)}
  printf 'LIB\t%s\t%s\t%s\n' "$name" "${pre:-(none: the C library)}$v" "$envs" >>"$NOTES_FILE"
done

machine_info() {
  printf 'machine\t%s\n' "$(hostname 2>/dev/null || echo '?')"
  printf 'nproc\t%s\n' "$(nproc)"
  printf 'cpu\t%s\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
  printf 'kernel\t%s\n' "$(uname -srm)"
  printf 'glibc\t%s\n' "$(ldd --version 2>/dev/null | head -n1 | sed 's/.* //')"
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  c=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'none')
  if [ "$c" != none ] && ! git -C "$ROOT" diff --quiet HEAD -- src include 2>/dev/null; then
    c="$c + uncommitted changes in src/ or include/"
  fi
  printf 'commit\t%s\n' "$c"
  printf 'mode\t%s\n' "$([ $QUICK = 1 ] && echo quick || echo full), $REPEAT repeat(s)"
  printf 'build\t%s\n' "$BUILD_DIR"
  [ -e "$HAKMEM_LIB" ] && printf 'hakmem_lib_built\t%s\n' "$(date -u -r "$(readlink -f "$HAKMEM_LIB")" '+%Y-%m-%d %H:%M UTC')"
  if [[ " ${OK_ROWS[*]%%|*} " == *" hakmem-base "* ]]; then
    printf 'hakmem_base\t%s\n' "$(readlink -f "$HAKMEM_BASE_LIB")"
    printf 'hakmem_base_built\t%s\n' "$(date -u -r "$(readlink -f "$HAKMEM_BASE_LIB")" '+%Y-%m-%d %H:%M UTC')"
  fi
  printf 'load_start\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  for p in libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4; do
    v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) && printf 'pkg\t%s %s\n' "$p" "$v"
  done
}

now() { date +%s.%N; }
# programs are in $BENCH_BIN; real/... are the wrappers of bench/real/
bench_prog() { case $1 in real/*) printf '%s\n' "$ROOT/bench/$1" ;; *) printf '%s\n' "$BENCH_BIN/$1" ;; esac; }
fmt_rate() { awk -v x="$1" 'BEGIN{ if (x>=1e9) printf "%.2f G", x/1e9; else if (x>=1e6) printf "%.2f M", x/1e6; else if (x>=1e3) printf "%.1f k", x/1e3; else printf "%.0f ", x }'; }

# ------------------------------------------------------------ --instr mode
if [ $INSTR = 1 ]; then
  command -v valgrind >/dev/null 2>&1 || { say "run.sh: valgrind is not installed"; exit 1; }
  isfx=""; [ $SECURE_REPORT = 1 ] && isfx=-secure # --secure-report --instr: instr-secure.md
  RAW=$RESULTS/instr-raw$isfx.tsv
  { machine_info; cat "$NOTES_FILE"; } >"$TMP/meta.tsv"
  : >"$RAW"
  total=$(( ${#INSTR_SUITE[@]} * ${#OK_ROWS[@]} ))
  i=0; t_start=$(now)
  for e in "${INSTR_SUITE[@]}"; do
    IFS='|' read -r bname benv bcmd <<<"$e"
    read -r prog args <<<"$bcmd"
    for row in "${OK_ROWS[@]}"; do
      IFS='|' read -r name pre envs expect <<<"$row"
      i=$((i + 1))
      printf '[%2d/%d] %-22s %-12s cachegrind: baseline, allocator; callgrind ...' "$i" "$total" "$bname" "$name" >&2
      line="$bname	$name"
      for mode in baseline alloc; do
        bl=0; [ $mode = baseline ] && bl=1
        # shellcheck disable=SC2086
        env -u LD_PRELOAD $benv $envs BENCH_BASELINE=$bl ${pre:+LD_PRELOAD=$pre} timeout -k 5 900 \
          valgrind --tool=cachegrind --cache-sim=no --branch-sim=yes \
          --cachegrind-out-file="$TMP/cg.out" "$BENCH_BIN/$prog" $args >"$TMP/out" 2>"$TMP/err"
        rc=$?
        res=$(grep '^RESULT ' "$TMP/out" | head -n1)
        ir=$(sed -n 's/.*I[[:space:]]*refs:[[:space:]]*\([0-9,]*\).*/\1/p' "$TMP/err" | tr -d , | head -n1)
        br=$(sed -n 's/.*Branches:[[:space:]]*\([0-9,]*\).*/\1/p' "$TMP/err" | tr -d , | head -n1)
        bc=$(sed -n 's/.*Branches:.*(\s*\([0-9,]*\) cond.*/\1/p' "$TMP/err" | tr -d ' ,' | head -n1)
        line="$line	$mode rc=$rc ir=${ir:-0} br=${br:-0} bc=${bc:-0} $res"
      done
      # cross-check: callgrind, only inside the loop; allocator = inclusive - self of the loop
      # shellcheck disable=SC2086
      env -u LD_PRELOAD $benv $envs BENCH_BASELINE=0 ${pre:+LD_PRELOAD=$pre} timeout -k 5 900 \
        valgrind --tool=callgrind --branch-sim=yes --toggle-collect='mixed_loop_malloc*' \
        --callgrind-out-file="$TMP/cl.out" "$BENCH_BIN/$prog" $args >/dev/null 2>&1
      cl=$($PY "$ROOT/bench/report.py" callgrind "$TMP/cl.out" mixed_loop_malloc 2>/dev/null)
      # the baseline loop's own cost, to show the call-site overhead of the real loop
      # shellcheck disable=SC2086
      env -u LD_PRELOAD $benv $envs BENCH_BASELINE=1 ${pre:+LD_PRELOAD=$pre} timeout -k 5 900 \
        valgrind --tool=callgrind --branch-sim=yes --toggle-collect='mixed_loop_baseline*' \
        --callgrind-out-file="$TMP/clb.out" "$BENCH_BIN/$prog" $args >/dev/null 2>&1
      clb=$($PY "$ROOT/bench/report.py" callgrind "$TMP/clb.out" mixed_loop_baseline 2>/dev/null |
            tr ' ' '\n' | sed -n 's/^self_/base_self_/p' | tr '\n' ' ')
      line="$line	callgrind $cl $clb"
      if [ "$name" = hakmem ] && command -v callgrind_annotate >/dev/null 2>&1; then
        { printf '### %s\n' "$bname"
          callgrind_annotate --auto=no --inclusive=no "$TMP/cl.out" 2>/dev/null |
            sed -n '/file:function/,$p' | sed '/^-*$/d' | head -n 12
        } >>"$TMP/hot.txt"
      fi
      printf '%s\n' "$line" >>"$RAW"
      printf ' done (%.0f s so far)\n' "$(awk -v a="$(now)" -v b="$t_start" 'BEGIN{print a-b}')" >&2
    done
  done
  $PY "$ROOT/bench/report.py" instr "$RAW" "$TMP/meta.tsv" "$RESULTS/instr$isfx.md" "$TMP/hot.txt" || exit 1
  say "== wrote $RESULTS/instr$isfx.md (raw: $RAW)"
  cat "$RESULTS/instr$isfx.md"
  exit 0
fi

# ------------------------------------------------------------- suite mode
busy_pct() { # CPU busy share of the whole machine over 2 seconds
  local a b
  a=$(head -n1 /proc/stat); sleep 2; b=$(head -n1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN{ split(a,x," "); split(b,y," ");
    bu=(y[2]+y[3]+y[4]+y[7]+y[8]+y[9])-(x[2]+x[3]+x[4]+x[7]+x[8]+x[9]);
    t=0; for(i=2;i<=9;i++) t+=y[i]-x[i]; printf "%.0f", (t > 0 ? 100 * bu / t : 0) }'
}
if [ "${BENCH_WAIT_IDLE:-0}" -gt 0 ] 2>/dev/null; then
  waited=0
  while :; do
    b=$(busy_pct)
    [ "$b" -le 15 ] && { say "== machine idle enough ($b% busy)"; break; }
    if [ $waited -ge "$BENCH_WAIT_IDLE" ]; then say "!! still $b% busy after ${waited}s: running anyway"; break; fi
    say "== machine $b% busy: waiting for it to be idle (BENCH_WAIT_IDLE=$BENCH_WAIT_IDLE, ${waited}s so far)"
    sleep 8; waited=$((waited + 10))
  done
fi
RAW=$RESULTS/raw-latest.tsv
[ $SECURE_REPORT = 1 ] && RAW=$RESULTS/raw-secure.tsv
: >"$RAW"
ACCT=$RESULTS/acct-latest.tsv # hakmem's resident split at peak, one line per benchmark (report.py)
# Only the suite's report reads it: the secure report leaves the suite's table as it is (it
# used to rewrite the file, so latest.md and acct-latest.tsv described different runs).
[ $SECURE_REPORT = 1 ] || : >"$ACCT"
# One more hakmem run per benchmark, untimed, with periodic statistics reports: the one
# at the process's largest RSS is where hakmem's memory goes at peak.
acct_run() { # bname benv prog args
  local row name pre envs expect m=""
  for row in "${OK_ROWS[@]}"; do [ "${row%%|*}" = hakmem ] && IFS='|' read -r name pre envs expect <<<"$row"; done
  [ -n "${pre:-}" ] || return 0
  rm -f "$TMP/acct.txt"; : >"$TMP/time.txt"
  [ -x /usr/bin/time ] && m="/usr/bin/time -f MAXRSS_KB=%M -o $TMP/time.txt"
  # shellcheck disable=SC2086
  timeout -k 5 "$TIMEOUT" $m env -u LD_PRELOAD $2 $envs HAKMEM_STATS=1 HAKMEM_STATS_INTERVAL_MS=10 \
    HAKMEM_STATS_FILE="$TMP/acct.txt" LD_PRELOAD="$pre" "$(bench_prog "$3")" $4 >"$TMP/acct.out" 2>"$TMP/acct.err"
  # A real program's RESULT line gives the largest process's peak (time(1) would
  # measure the wrapper script); its processes append their reports to one file,
  # and report.py keeps the largest, so the split describes that same process.
  local rss=""
  case $3 in real/*) rss=$(sed -n 's/.*peak_rss_kb=\([0-9]*\).*/\1/p' "$TMP/acct.out" | head -n1) ;; esac
  [ -n "$rss" ] || rss=$(sed -n 's/.*MAXRSS_KB=\([0-9]*\).*/\1/p' "$TMP/time.txt" | head -n1)
  [ -n "$rss" ] || rss=$(sed -n 's/.*peak_rss_kb=\([0-9]*\).*/\1/p' "$TMP/acct.out" | head -n1)
  printf '%s\t%s\t%s\n' "$1" "${rss:-}" "$($PY "$ROOT/bench/report.py" acct "$TMP/acct.txt" "$TMP/acct.err")" >>"$ACCT"
}
{ machine_info; cat "$NOTES_FILE"; } >"$TMP/meta.tsv"
load1=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load1" 'BEGIN{exit !(l > 0.5)}' &&
  say "!! load average is $load1: other work on the machine will disturb the figures"
total=$(( ${#SUITE[@]} * ${#OK_ROWS[@]} * REPEAT ))
say "== $(( ${#SUITE[@]} )) benchmark(s) x ${#OK_ROWS[@]} allocator(s) x $REPEAT repeat(s) = $total runs; programs: $BENCH_BIN"
i=0; t_start=$(now)
printf 'cpu_start\t%s\n' "$(head -n1 /proc/stat)" >>"$TMP/meta.tsv"
for e in "${SUITE[@]}"; do
  IFS='|' read -r bname benv bcmd <<<"$e"
  read -r prog args <<<"$bcmd"
  for rep in $(seq 1 "$REPEAT"); do
    for row in "${OK_ROWS[@]}"; do
      IFS='|' read -r name pre envs expect <<<"$row"
      i=$((i + 1))
      printf '[%3d/%d] %-22s %-12s rep %d/%d ' "$i" "$total" "$bname" "$name" "$rep" "$REPEAT" >&2
      tw=""
      # Beside the peak: the page faults (minor + major) and the CPU time the run took in
      # the kernel and in user space, as the kernel accounts them to the process and the
      # children it waited for (report.py's faults table). One word: $tw is split on blanks.
      [ -x /usr/bin/time ] && tw="/usr/bin/time -f MAXRSS_KB=%M,MINFLT=%R,MAJFLT=%F,SYS_S=%S,USER_S=%U -o $TMP/time.txt"
      : >"$TMP/time.txt"
      t0=$(now)
      # shellcheck disable=SC2086
      timeout -k 5 "$TIMEOUT" $tw env -u LD_PRELOAD $benv $envs ${pre:+LD_PRELOAD=$pre} \
        "$(bench_prog "$prog")" $args >"$TMP/out" 2>"$TMP/err"
      rc=$?
      wall=$(awk -v a="$(now)" -v b="$t0" 'BEGIN{printf "%.3f", a-b}')
      res=$(grep '^RESULT ' "$TMP/out" | head -n1)
      maxrss=$(sed -n 's/.*MAXRSS_KB=\([0-9]*\).*/\1/p' "$TMP/time.txt" | head -n1)
      kern=$(grep -o 'MINFLT=[0-9]*,MAJFLT=[0-9]*,SYS_S=[0-9.]*,USER_S=[0-9.]*' "$TMP/time.txt" | head -n1 | tr ',' ' ')
      status=ok
      if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="timeout after ${TIMEOUT}s"
      elif [ -z "$res" ] || [ $rc -ne 0 ]; then
        msg=$(grep -v '^Command ' "$TMP/err" | grep -v MAXRSS | tail -n1 | tr '\t' ' ' | cut -c1-120)
        sig=""
        [ $rc -gt 128 ] && sig=" = SIG$(kill -l $((rc - 128)) 2>/dev/null)"
        status="failed (exit $rc$sig${msg:+: $msg})"
      elif ! check_from "$res" "$expect"; then
        status="wrong allocator: malloc from $FROM"
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$bname" "$name" "$rep" "$status" "$wall" "${maxrss:-}" "$res" "${kern:-}" >>"$RAW"
      if [ "$status" = ok ]; then
        ops=$(printf '%s' "$res" | sed -n 's/.*ops_per_sec=\([0-9.]*\).*/\1/p')
        rss=$(printf '%s' "$res" | sed -n 's/.*peak_rss_kb=\([0-9]*\).*/\1/p')
        printf '%sops/s  peak %s MiB  (%ss)\n' "$(fmt_rate "$ops")" "$(awk -v k="$rss" 'BEGIN{printf "%.1f", k/1024}')" "$wall" >&2
      else
        printf '%s\n' "$status" >&2
      fi
    done
  done
  [ $SECURE_REPORT = 1 ] || acct_run "$bname" "$benv" "$prog" "$args"
done
elapsed=$(awk -v a="$(now)" -v b="$t_start" 'BEGIN{printf "%.0f", a-b}')
printf 'elapsed\t%s s\n' "$elapsed" >>"$TMP/meta.tsv"
printf 'cpu_end\t%s\n' "$(head -n1 /proc/stat)" >>"$TMP/meta.tsv"
printf 'elapsed_secs\t%s\n' "$(awk -v a="$(now)" -v b="$t_start" 'BEGIN{printf "%.3f", a-b}')" >>"$TMP/meta.tsv"
times >"$TMP/times.txt" # not in $(...): a subshell does not see this shell's children
printf 'children_cpu\t%s\n' "$(tail -n1 "$TMP/times.txt")" >>"$TMP/meta.tsv"
say "== $total runs in ${elapsed}s"

if [ $SECURE_REPORT = 1 ]; then
  $PY "$ROOT/bench/secure_report.py" "$RAW" "$TMP/meta.tsv" "$RESULTS/secure.md" || exit 1
  say "== wrote $RESULTS/secure.md (raw: $RAW)"
  cat "$RESULTS/secure.md"
  exit 0
fi
OUT_MD=$RESULTS/latest.md
README_ARG=""
[ -z "$ONLY" ] && README_ARG="$ROOT/bench/README.md"
$PY "$ROOT/bench/report.py" suite "$RAW" "$TMP/meta.tsv" "$OUT_MD" "$RESULTS/latest" $README_ARG || exit 1
say "== wrote $OUT_MD (raw: $RAW)"
cat "$OUT_MD"
