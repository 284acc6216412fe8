#!/usr/bin/env bash
# bench/real/run_real.sh — times a real program from a Debian package under the
# allocator the harness preloaded, and prints the harness's RESULT line.
#   run_real.sh sqlite N    sqlite3 :memory: < SQL script of N rows (gen_sql.awk)
#   run_real.sh python N    PYTHONMALLOC=malloc python3 -s -S alloc_heavy.py N (rounds)
#   run_real.sh python_mt N PYTHONMALLOC=malloc python3 -s -S threads_pool.py N: 16
#                           threads (N rounds each), then a fork()ed pool of 8
#   run_real.sh node N      node workers.js N: 16 worker threads, N rounds each
#   run_real.sh gcc U F     gcc -O2 -c on U generated C files of F functions each
#   run_real.sh redis N     redis-server on 127.0.0.1:random port, redis-benchmark
#                           N requests per test (7 tests, 8 clients, pipeline 16)
#   run_real.sh ruby N      ruby --disable-gems gc_phases.rb N (rounds of phases)
#   run_real.sh sort N T M  LC_ALL=C sort --parallel=T -S M on N lines (gen_words.awk)
#   run_real.sh jq N        jq building an array of N objects from a JSON array of N
#                           (gen_json.awk)
#   run_real.sh git N       git log -p --stat over a generated history of N commits
#                           (gen_git.awk through git fast-import, then repacked)
#   run_real.sh cppcheck N  cppcheck --enable=all on one generated C file of N
#                           functions (gen_c.awk); a C++ program: operator new/delete
#   run_real.sh perl T R N  perl hash_rounds.pl T R N: R rounds of a hash of N keys
#                           built, sorted and thinned, in T ithreads (1: none)
# bench/run.sh runs this script as it runs a benchmark program: with LD_PRELOAD
# set to the allocator (empty for glibc). The script takes LD_PRELOAD out of its
# own environment and gives it only to the measured program, with probe.so after
# it: the probe writes, from inside every process of the program, the file that
# defines the malloc it calls (see probe.c). RESULT's malloc_from/malloc_path are
# that file — a preload that did not take shows the real provider, and the
# harness marks the run as failed. Every process must agree, else "mixed".
# Inputs are generated (untimed, deterministic) and cached with the probe in
# $HAKMEM_REAL_DIR (default ${TMPDIR:-/tmp}/hakmem-real-UID).
# peak_rss_kb: the largest VmHWM of any one process of the program (the probe's
# record at exit; redis: the server's VmHWM read from /proc before it is stopped).
# Exit status: 0 with a RESULT line; 3 when the program is not installed (the
# harness then skips the row with a note); anything else is a failure.
# It may call: the program itself, redis-cli/redis-benchmark (not preloaded),
# cc (to build the probe), git (to build real_git's repository, not preloaded),
# awk, coreutils.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ALLOC=${LD_PRELOAD:-}
unset LD_PRELOAD
ROW=${1:?usage: run_real.sh sqlite|python|python_mt|gcc|redis|ruby|sort|jq|git|node|cppcheck|perl ARGS}
shift

die() { printf 'run_real.sh: %s\n' "$*" >&2; exit 1; }
missing() { printf 'run_real.sh: %s is not installed: row skipped\n' "$1" >&2; exit 3; }
now() { date +%s.%N; }

CACHE=${HAKMEM_REAL_DIR:-${TMPDIR:-/tmp}/hakmem-real-$(id -u)}
mkdir -p "$CACHE" || die "cannot create $CACHE"

# the probe, rebuilt when its source changes (written under a temporary name and
# renamed: concurrent runs never see half a file)
PROBE=$CACHE/probe-$(cksum <"$HERE/probe.c" | cut -d' ' -f1).so
if [ ! -e "$PROBE" ]; then
  cc -O2 -shared -fPIC -o "$PROBE.$$" "$HERE/probe.c" -ldl 2>"$CACHE/probe-build.log" &&
    mv -f "$PROBE.$$" "$PROBE" || die "cannot build the probe: $(tail -n1 "$CACHE/probe-build.log")"
fi
# cached_gen FILE CMD...: FILE holds CMD's output, made once
cached_gen() {
  local f=$1; shift
  [ -s "$f" ] && return 0
  "$@" >"$f.$$" && mv -f "$f.$$" "$f" || die "cannot generate $f"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-real-run.XXXXXX") || die "mktemp failed"
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
export HAKMEM_REAL_PROBE=$WORK/probe.log
: >"$HAKMEM_REAL_PROBE"
PRE="${ALLOC:+$ALLOC }$PROBE"

# warm CMD...: the first run of a row on this machine (no marker in $CACHE) runs
# the program once untimed, without the preload, so the first allocator of the
# suite does not pay for reading the binaries into the page cache alone
warm() {
  [ -e "$CACHE/warm-$ROW" ] && return 0
  (cd "$WORK" && "$@") </dev/null >/dev/null 2>&1
  : >"$CACHE/warm-$ROW"
}
# run_measured CMD...: runs CMD under the allocator and the probe, output to
# $WORK/out; sets SECS and RC
run_measured() {
  local t0
  t0=$(now)
  env LD_PRELOAD="$PRE" "$@" >"$WORK/out" 2>"$WORK/err"
  RC=$?
  SECS=$(awk -v a="$(now)" -v b="$t0" 'BEGIN{printf "%.6f", a-b}')
}
fail_if_rc() {
  [ "$RC" = 0 ] && return
  cat "$WORK/err" >&2
  die "$ROW exited with status $RC"
}

case $ROW in
  sqlite)
    N=${1:-50000}
    command -v sqlite3 >/dev/null 2>&1 || missing sqlite3
    SQL=$CACHE/sqlite-$N-$(cksum <"$HERE/gen_sql.awk" | cut -d' ' -f1).sql
    cached_gen "$SQL" awk -v n="$N" -f "$HERE/gen_sql.awk"
    OPS=$(grep -c ';$' "$SQL"); UNIT=statements
    warm sqlite3 :memory: "SELECT 1;"
    run_measured sqlite3 :memory: <"$SQL"
    fail_if_rc ;;
  python)
    N=${1:-30}
    PYBIN=/usr/bin/python3 # Debian's, not a pyenv or venv one
    [ -x $PYBIN ] || missing python3
    # not -I/-E: they make python ignore PYTHONMALLOC (pymalloc would serve
    # every small object and the allocator would hardly be called)
    pyenv=(env -u PYTHONPATH -u PYTHONHOME -u PYTHONSTARTUP -u PYTHONDEVMODE PYTHONMALLOC=malloc)
    warm "${pyenv[@]}" $PYBIN -s -S "$HERE/alloc_heavy.py" 1
    run_measured "${pyenv[@]}" $PYBIN -s -S "$HERE/alloc_heavy.py" "$N"
    fail_if_rc
    OPS=$(sed -n 's/^records=\([0-9]*\).*/\1/p' "$WORK/out"); UNIT=records
    [ -n "$OPS" ] || die "python printed no record count" ;;
  python_mt)
    N=${1:-6}
    PYBIN=/usr/bin/python3
    [ -x $PYBIN ] || missing python3
    pyenv=(env -u PYTHONPATH -u PYTHONHOME -u PYTHONSTARTUP -u PYTHONDEVMODE PYTHONMALLOC=malloc)
    warm "${pyenv[@]}" $PYBIN -s -S "$HERE/threads_pool.py" 1
    run_measured "${pyenv[@]}" $PYBIN -s -S "$HERE/threads_pool.py" "$N"
    fail_if_rc
    OPS=$(sed -n 's/^records=\([0-9]*\).*/\1/p' "$WORK/out"); UNIT=records
    [ -n "$OPS" ] || die "python printed no record count" ;;
  node)
    N=${1:-8}
    command -v node >/dev/null 2>&1 || missing node
    nodeenv=(env -u NODE_OPTIONS -u NODE_PATH)
    warm "${nodeenv[@]}" node "$HERE/workers.js" 1
    run_measured "${nodeenv[@]}" node "$HERE/workers.js" "$N"
    fail_if_rc
    OPS=$(sed -n 's/^objects=\([0-9]*\).*/\1/p' "$WORK/out"); UNIT=objects
    [ -n "$OPS" ] || die "node printed no object count" ;;
  gcc)
    U=${1:-2} F=${2:-60}
    command -v gcc >/dev/null 2>&1 || missing gcc
    files=()
    for u in $(seq 1 "$U"); do
      f=$CACHE/gcc-u$u-f$F-$(cksum <"$HERE/gen_c.awk" | cut -d' ' -f1).c
      cached_gen "$f" awk -v n="$F" -v unit="$u" -f "$HERE/gen_c.awk"
      files+=("$f")
    done
    OPS=$((U * F)); UNIT=functions
    warm gcc -O2 -c "${files[0]}"
    rm -f "$WORK"/*.o
    # gcc writes the objects into the current directory
    run_measured sh -c 'cd "$1" && shift && exec gcc -O2 -c "$@"' sh "$WORK" "${files[@]}"
    fail_if_rc
    for u in $(seq 1 "$U"); do [ -s "$WORK/$(basename "${files[$((u - 1))]}" .c).o" ] || die "gcc wrote no object for unit $u"; done
    cksum "$WORK"/*.o | awk '{print $1}' >"$WORK/out" ;;
  ruby)
    N=${1:-1}
    command -v ruby >/dev/null 2>&1 || missing ruby
    rbenv=(env -u RUBYOPT -u RUBYLIB -u GEM_HOME -u GEM_PATH)
    warm "${rbenv[@]}" ruby -e 1
    run_measured "${rbenv[@]}" ruby --disable-gems "$HERE/gc_phases.rb" "$N"
    fail_if_rc
    OPS=$(sed -n 's/^strings=\([0-9]*\).*/\1/p' "$WORK/out"); UNIT=strings
    [ -n "$OPS" ] || die "ruby printed no string count" ;;
  redis)
    N=${1:-20000}
    command -v redis-server >/dev/null 2>&1 || missing redis-server
    command -v redis-benchmark >/dev/null 2>&1 || missing redis-benchmark
    command -v redis-cli >/dev/null 2>&1 || missing redis-cli
    # Debian's redis-server links libjemalloc, whose malloc comes before libc's:
    # without a preload it runs jemalloc. The glibc row preloads libc itself.
    if [ -z "$ALLOC" ]; then
      libc=$(awk '$6 ~ /\/libc\.so\.6$/ {print $6; exit}' /proc/$$/maps)
      [ -n "$libc" ] || die "cannot find libc.so.6 in /proc/$$/maps"
      PRE="$libc $PROBE"
    fi
    TESTS=set,get,incr,lpush,rpop,sadd,hset
    OPS=$((N * 7)); UNIT=requests
    up=0
    for _ in 1 2 3 4 5; do
      PORT=$((20000 + RANDOM % 40000))
      env LD_PRELOAD="$PRE" redis-server --port "$PORT" --bind 127.0.0.1 --protected-mode yes \
        --save '' --appendonly no --daemonize no --dir "$WORK" --logfile "$WORK/redis.log" \
        --databases 1 >/dev/null 2>&1 &
      SERVER_PID=$!
      for _ in $(seq 1 100); do
        if redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null | grep -q PONG; then up=1; break; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
      done
      [ $up = 1 ] && break
      kill -KILL "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; st=$?; SERVER_PID=""
      # a crash is not a busy port: say which signal, do not try again
      [ $st -gt 128 ] && [ $st -ne 137 ] && die "redis-server crashed at start-up (SIG$(kill -l $((st - 128)) 2>/dev/null))"
    done
    [ $up = 1 ] || { tail -n3 "$WORK/redis.log" >&2; die "redis-server did not start (5 ports tried)"; }
    t0=$(now)
    redis-benchmark -h 127.0.0.1 -p "$PORT" -n "$N" -c 8 -P 16 -r 100000 -d 200 -t "$TESTS" -q \
      >"$WORK/bench.out" 2>"$WORK/err"
    RC=$?
    SECS=$(awk -v a="$(now)" -v b="$t0" 'BEGIN{printf "%.6f", a-b}')
    fail_if_rc
    [ "$(grep -c 'requests per second' "$WORK/bench.out")" = 7 ] ||
      { cat "$WORK/bench.out" >&2; die "redis-benchmark did not finish its 7 tests"; }
    : >"$WORK/out" # the keys are random (redis-benchmark seeds by time): no checksum
    SERVER_HWM=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null)
    redis-cli -h 127.0.0.1 -p "$PORT" shutdown nosave >/dev/null 2>&1
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID="" ;;
  sort)
    # sort takes one buffer of -S bytes, frees it, then takes the buffers of
    # its merge: big blocks freed and taken again in other sizes
    N=${1:-1500000} T=${2:-16} M=${3:-100M}
    command -v sort >/dev/null 2>&1 || missing sort
    IN=$CACHE/sort-$N-$(cksum <"$HERE/gen_words.awk" | cut -d' ' -f1).txt
    cached_gen "$IN" awk -v n="$N" -f "$HERE/gen_words.awk"
    OPS=$N; UNIT=lines
    warm env LC_ALL=C sort --parallel="$T" -S "$M" "$IN"
    run_measured env LC_ALL=C sort --parallel="$T" -S "$M" "$IN"
    fail_if_rc ;;
  jq)
    # jq holds the parsed document and the new array at once: hundreds of
    # thousands of objects of one size (392 B) and arrays of another (272 B),
    # so a size class's rounding shows directly in the peak
    N=${1:-200000}
    command -v jq >/dev/null 2>&1 || missing jq
    IN=$CACHE/jq-$N-$(cksum <"$HERE/gen_json.awk" | cut -d' ' -f1).json
    cached_gen "$IN" awk -v n="$N" -f "$HERE/gen_json.awk"
    OPS=$N; UNIT=objects
    warm jq -c 'length' "$IN"
    run_measured jq -c '[.[] | {a: ., n: (.s | length)}] | length' "$IN"
    fail_if_rc
    [ "$(cat "$WORK/out")" = "$N" ] || die "jq printed $(head -c 80 "$WORK/out"), want $N" ;;
  git)
    # git inflates every blob of the history into a buffer of its size (4 to
    # 300 KiB here, in every size between) and keeps a cache of delta bases:
    # blocks of continuously varying sizes, each filled, most short-lived
    N=${1:-400}
    command -v git >/dev/null 2>&1 || missing git
    genv=(env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null)
    REPO=$CACHE/git-$N-$(cksum <"$HERE/gen_git.awk" | cut -d' ' -f1)
    if [ ! -d "$REPO" ]; then
      rm -rf "$REPO.$$"
      { "${genv[@]}" git init -q "$REPO.$$" &&
        awk -v n="$N" -f "$HERE/gen_git.awk" | "${genv[@]}" git -C "$REPO.$$" fast-import --quiet &&
        "${genv[@]}" git -C "$REPO.$$" repack -a -d -f -q --depth=50 --window=10 &&
        mv "$REPO.$$" "$REPO"; } || { rm -rf "$REPO.$$"; die "cannot generate $REPO"; }
    fi
    OPS=$N; UNIT=commits
    warm "${genv[@]}" git -C "$REPO" log --oneline refs/heads/main
    run_measured "${genv[@]}" git -C "$REPO" log -p --stat refs/heads/main
    fail_if_rc
    [ "$(grep -c '^commit ' "$WORK/out")" = "$N" ] || die "git log showed $(grep -c '^commit ' "$WORK/out") commits, want $N" ;;
  cppcheck)
    # C++ from end to end: cppcheck's token lists, symbol database and value
    # flow are std::string, std::list and std::vector nodes, so every
    # allocation goes through operator new and delete (glibc's malloc runs it
    # at about half the speed of the size-class allocators)
    N=${1:-240}
    command -v cppcheck >/dev/null 2>&1 || missing cppcheck
    SRC=$CACHE/cppcheck-f$N-$(cksum <"$HERE/gen_c.awk" | cut -d' ' -f1).c
    cached_gen "$SRC" awk -v n="$N" -v unit=1 -f "$HERE/gen_c.awk"
    OPS=$(wc -l <"$SRC"); UNIT=lines # finer than functions: RESULT rounds ops/s to a unit
    ccopt=(-q --enable=all --suppress=missingIncludeSystem --template='{line}:{severity}:{id}')
    warm cppcheck "${ccopt[@]}" "$SRC"
    run_measured cppcheck "${ccopt[@]}" --output-file="$WORK/findings" "$SRC"
    fail_if_rc
    [ -s "$WORK/findings" ] || die "cppcheck reported no finding (the generated file always has some)"
    mv -f "$WORK/findings" "$WORK/out" ;;
  perl)
    # Debian's perl is built with usemymalloc=n: every string body, array and
    # hash comes from malloc. PERL5LIB and PERL5OPT could load other code.
    T=${1:-1} R=${2:-4} N=${3:-20000}
    command -v perl >/dev/null 2>&1 || missing perl
    if [ "$T" -gt 1 ]; then perl -Mthreads -e 1 2>/dev/null || missing "perl threads"; fi
    plenv=(env -u PERL5LIB -u PERL5OPT -u PERLLIB)
    warm "${plenv[@]}" perl "$HERE/hash_rounds.pl" 1 1 100
    run_measured "${plenv[@]}" perl "$HERE/hash_rounds.pl" "$T" "$R" "$N"
    fail_if_rc
    OPS=$(sed -n 's/^entries=\([0-9]*\).*/\1/p' "$WORK/out"); UNIT=entries
    [ -n "$OPS" ] || die "perl printed no entry count" ;;
  *) die "unknown row '$ROW' (sqlite, python, python_mt, node, gcc, redis, ruby, sort, jq, git, cppcheck, perl)" ;;
esac

# what the processes said about their malloc
paths=$(sed -n 's/^start .* malloc_path=\([^ ]*\)$/\1/p' "$HAKMEM_REAL_PROBE" | sort -u)
nproc_seen=$(grep -c '^start ' "$HAKMEM_REAL_PROBE")
case $(printf '%s\n' "$paths" | grep -c .) in
  0) MPATH=unknown MFROM=unknown ;; # the probe never loaded: nothing is proved
  1) MPATH=$paths MFROM=${paths##*/} ;;
  *) MPATH=mixed:$(printf '%s' "$paths" | tr '\n' ',') MFROM=$MPATH
     sed -n 's/^start pid=[0-9]* comm=\([^ ]*\) malloc_path=\(.*\)$/  \1: \2/p' "$HAKMEM_REAL_PROBE" | sort -u >&2 ;;
esac
PEAK=${SERVER_HWM:-$(sed -n 's/^end .* hwm_kb=\([0-9]*\)$/\1/p' "$HAKMEM_REAL_PROBE" | sort -n | tail -n1)}
CHECK=$(cksum <"$WORK/out" | cut -d' ' -f1)
awk -v row="real_$ROW" -v ops="$OPS" -v secs="$SECS" -v unit="$UNIT" -v procs="$nproc_seen" \
    -v check="$CHECK" -v peak="${PEAK:-0}" -v from="$MFROM" -v path="$MPATH" 'BEGIN {
  printf "RESULT bench=%s ops=%d secs=%.6f ops_per_sec=%.0f unit=%s processes=%d check=%s peak_rss_kb=%d malloc_from=%s malloc_path=%s\n",
         row, ops, secs, (secs > 0 ? ops / secs : 0), unit, procs, check, peak, from, path }'
