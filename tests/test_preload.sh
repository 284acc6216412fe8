#!/usr/bin/env bash
# test_preload.sh — run real programs with libhakmem.so LD_PRELOADed and
# compare their output byte for byte with the same run under glibc malloc.
#
#   test_preload.sh /path/to/libhakmem.so [PART]
#   parts: maps python sort sortpar gcc perl git pytests pytests_long sqlite
#          redis gcclarge selfhost all
#
# A program that is not installed is skipped with a message (exit 77 when the
# only requested part is skipped; CTest maps 77 to "skipped").
set -u
LIB=${1:?usage: test_preload.sh /path/to/libhakmem.so [part]}
PART=${2:-all}
[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")

TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-preload.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
ran=0
skipped=0

fail() { echo "FAIL [$1]: $2"; failures=$((failures + 1)); }
skip() { echo "SKIP [$1]: $2"; skipped=$((skipped + 1)); }

# need PART VAR PROG [WHERE]: VAR set to PROG's path; without PROG, PART is
# skipped (WHERE, e.g. the package, follows "not installed") and need fails
need() {
  local path_
  path_=$(command -v "$3") || { skip "$1" "$3 not installed${4:+ $4}"; return 1; }
  printf -v "$2" %s "$path_"
}

# begin DIR: the part counts as run; DIR is its work directory
begin() { ran=$((ran + 1)); mkdir -p "$1"; }

# run_both NAME DIR CMD...: runs CMD in DIR/ref (glibc) and DIR/hak (hakmem)
# with identical environments; stdout/stderr/exit status land in DIR/{ref,hak}.*
# Each run is killed after RUN_LIMIT seconds (a hang exits 137).
RUN_LIMIT=240
run_both() {
  local name=$1 dir=$2; shift 2
  mkdir -p "$dir/ref" "$dir/hak"
  (cd "$dir/ref" && env -u LD_PRELOAD timeout "$RUN_LIMIT" "$@" >"$dir/ref.out" 2>"$dir/ref.err"; echo $? >"$dir/ref.rc")
  (cd "$dir/hak" && env LD_PRELOAD="$LIB" HAKMEM_FORCE_LIBC_ALLOC=0 timeout -s KILL "$RUN_LIMIT" "$@" >"$dir/hak.out" 2>"$dir/hak.err"; echo $? >"$dir/hak.rc")
  local rr hr
  rr=$(cat "$dir/ref.rc"); hr=$(cat "$dir/hak.rc")
  if [ "$rr" != 0 ]; then
    fail "$name" "reference run (no hakmem) exited $rr; stderr:"; head -20 "$dir/ref.err"; return 1
  fi
  if [ "$hr" != 0 ]; then
    fail "$name" "run under hakmem exited $hr (reference 0); stderr:"; head -20 "$dir/hak.err"; return 1
  fi
  if ! cmp -s "$dir/ref.out" "$dir/hak.out"; then
    fail "$name" "stdout differs from the reference run:"; diff "$dir/ref.out" "$dir/hak.out" | head -20; return 1
  fi
  if ! cmp -s "$dir/ref.err" "$dir/hak.err"; then
    fail "$name" "stderr differs from the reference run:"; diff "$dir/ref.err" "$dir/hak.err" | head -20; return 1
  fi
  return 0
}

part_maps() {
  ran=$((ran + 1))
  local m
  m=$(env LD_PRELOAD="$LIB" HAKMEM_FORCE_LIBC_ALLOC=0 cat /proc/self/maps) || { fail maps "cat under LD_PRELOAD failed"; return; }
  if ! grep -q "$(basename "$LIB" | sed 's/\..*//')" <<<"$m"; then
    fail maps "libhakmem is not mapped into a preloaded process"
    return
  fi
  if grep -q libhakmem < <(env -u LD_PRELOAD cat /proc/self/maps); then
    fail maps "libhakmem mapped without LD_PRELOAD?"
    return
  fi
  echo "ok [maps]: libhakmem mapped into preloaded processes"
}

PY=/usr/bin/python3
part_python() {
  [ -x "$PY" ] || { skip python "$PY not installed"; return; }
  local d=$TMP/python
  begin "$d"
  cat >"$d/alloc.py" <<'PYEOF'
import hashlib, json, random, sys
rnd = random.Random(12345)
h = hashlib.sha256()
d = {}
for i in range(200000):
    k = "k%d-%s" % (i, "x" * (i % 37))
    d[k] = [i, str(i * 7), {"v": i % 13, "s": "y" * (i % 200)}]
for i in range(0, 200000, 3):
    del d["k%d-%s" % (i, "x" * (i % 37))]
lst = [rnd.random() for _ in range(300000)]
lst.sort()
h.update(repr(lst[:1000]).encode()); h.update(repr(lst[-1000:]).encode())
words = ["".join(chr(97 + rnd.randrange(26)) for _ in range(rnd.randrange(1, 30))) for _ in range(100000)]
words.sort(key=lambda w: (len(w), w))
h.update("\n".join(words).encode())
blob = json.dumps(d, sort_keys=True)
back = json.loads(blob)
assert back == d
h.update(blob.encode())
ba = bytearray()
for i in range(200000):
    ba += bytes([i & 255]) * (i % 17)
h.update(ba)
big = [bytes(rnd.randrange(256) for _ in range(1000)) * (1 + i % 300) for i in range(400)]
for b in big:
    h.update(hashlib.md5(b).digest())
s = set(range(0, 500000, 3)) ^ set(range(0, 500000, 5))
h.update(str(len(s)).encode())
t = {i: (i, i * 2, str(i)) for i in range(100000)}
print(len(d), len(back), len(words), len(ba), len(s), len(t))
print(h.hexdigest())
PYEOF
  # PYTHONMALLOC=malloc sends every object allocation to malloc (no pymalloc arenas)
  run_both python "$d" env PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$PY" -S "$d/alloc.py" || return
  # and it really ran on hakmem
  local owns
  owns=$(env LD_PRELOAD="$LIB" HAKMEM_FORCE_LIBC_ALLOC=0 PYTHONMALLOC=malloc "$PY" -S -c '
import ctypes
c = ctypes.CDLL(None)
c.malloc.restype = ctypes.c_void_p
c.hak_owns.argtypes = [ctypes.c_void_p]
p = c.malloc(100)
print("owned" if c.hak_owns(p) else "not-owned")
' 2>&1)
  [ "$owns" = owned ] || { fail python "malloc() inside preloaded python is not hakmem's: $owns"; return; }
  echo "ok [python]: $(tail -1 "$d/hak.out")"
}

part_sort() {
  local SORT d=$TMP/sort
  need sort SORT sort || return
  begin "$d"
  awk 'BEGIN { srand(42); for (i = 0; i < 200000; i++) { n = int(rand() * 1000000);
         s = ""; l = int(rand() * 60); for (j = 0; j < l; j++) s = s sprintf("%c", 97 + int(rand() * 26));
         printf "%s %d %s\n", s, n, i } }' >"$d/input.txt"
  run_both sort "$d" env LC_ALL=C "$SORT" "$d/input.txt" || return
  run_both sort-numeric "$d/n" env LC_ALL=C "$SORT" -k2,2n -k1,1r "$d/input.txt" || return
  # small buffer + 2 threads: temp files, merge passes, multi-threaded sort
  run_both sort-parallel "$d/p" env LC_ALL=C TMPDIR="$d" "$SORT" --parallel=2 -S 2M -k3,3n -u "$d/input.txt" || return
  echo "ok [sort]: $(wc -l <"$d/hak.out") lines sorted identically"
}

# sort --parallel=16 joins 16 threads whose 8 MiB stacks overflow glibc's
# stack cache, so glibc frees a dead thread's TLS (free, from
# __nptl_free_stacks) while pthread_join holds the stack-cache lock. ed51ee3
# started its purge thread in such a free and pthread_create waited for
# that lock for ever: 6 of 10 runs of this part's command hung. hakmem
# starts the thread only at an allocation's safe point (src/decay.h). A
# race, so ten runs of real_sort's input (bench/real), 30 s each at most.
part_sortpar() {
  local SORT d=$TMP/sortpar i RUN_LIMIT=30
  need sortpar SORT sort || return
  "$SORT" --parallel=2 </dev/null >/dev/null 2>&1 || { skip sortpar "$SORT has no --parallel"; return; }
  begin "$d"
  awk -v n=1500000 -f "$(dirname "$0")/../bench/real/gen_words.awk" >"$d/input.txt" || { fail sortpar "no input"; return; }
  for i in 1 2 3 4 5 6 7 8 9 10; do
    run_both "sortpar run $i" "$d" env LC_ALL=C "$SORT" --parallel=16 -S 100M "$d/input.txt" || return
  done
  echo "ok [sortpar]: 10 runs of sort --parallel=16, $(wc -l <"$d/hak.out") lines sorted identically"
}

part_gcc() {
  local CC d=$TMP/gcc
  need gcc CC gcc || return
  begin "$d"
  {
    echo '#include <stdio.h>'
    echo '#include <string.h>'
    echo 'struct node { int key; const char *name; struct node *next; };'
    for i in $(seq 0 399); do
      echo "static unsigned f$i(unsigned x) { unsigned r = x * $((i * 2 + 1))u; switch (x % 7) {"
      for c in 0 1 2 3 4 5; do echo "  case $c: r ^= (r >> $((c + 1))) + $((i * 31 + c))u; break;"; done
      echo "  default: r += $i; } const char *s = \"str$i-$((i * i))\"; return r + (unsigned)strlen(s); }"
    done
    echo 'int main(void) { unsigned acc = 0;'
    for i in $(seq 0 399); do echo "  acc = f$i(acc + $i);"; done
    echo '  printf("%u\n", acc); return 0; }'
  } >"$d/gen.c"
  run_both gcc "$d" "$CC" -O2 -g -fdebug-prefix-map="$d/ref"=/build -fdebug-prefix-map="$d/hak"=/build -c "$d/gen.c" -o gen.o || return
  if ! cmp -s "$d/ref/gen.o" "$d/hak/gen.o"; then fail gcc "object file differs from the reference compile"; return; fi
  run_both gcc-link "$d/l" "$CC" -O2 "$d/gen.c" -o gen || return
  local a b
  a=$("$d/l/ref/gen") || { fail gcc "reference program failed"; return; }
  b=$("$d/l/hak/gen") || { fail gcc "program built under hakmem failed"; return; }
  [ "$a" = "$b" ] || { fail gcc "programs print different results: $a vs $b"; return; }
  echo "ok [gcc]: identical object files, program prints $b"
}

part_perl() {
  local PERL d=$TMP/perl
  need perl PERL perl || return
  begin "$d"
  cat >"$d/t.pl" <<'PLEOF'
use strict; use warnings; use Digest::MD5 qw(md5_hex);
my %h; my $seed = 7;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed; }
for my $i (0 .. 199999) { my $k = "key" . rnd() . "-" . ("z" x ($i % 41)); $h{$k} = [$i, "v" x ($i % 97)]; }
my @keys = sort keys %h;
delete $h{$keys[$_]} for grep { $_ % 3 == 0 } 0 .. $#keys;
my $text = join("\n", map { "$_ => $h{$_}[0]" } sort keys %h);
(my $t2 = $text) =~ s/(\d+)/<$1>/g;
my @m = ($t2 =~ /key(\d{3})\d*-z{5,}/g);
my %cnt; $cnt{length $_}++ for split /\n/, $t2;
my $big = ""; $big .= chr(65 + $_ % 26) x ($_ % 300) for 0 .. 20000;
print scalar(keys %h), " ", scalar(@m), " ", length($big), "\n";
print md5_hex($t2), " ", md5_hex($big), " ", md5_hex(join ",", map { "$_:$cnt{$_}" } sort { $a <=> $b } keys %cnt), "\n";
PLEOF
  run_both perl "$d" "$PERL" "$d/t.pl" || return
  echo "ok [perl]: $(tail -1 "$d/hak.out")"
}

part_git() {
  local GIT d=$TMP/git
  need git GIT git || return
  begin "$d"
  cat >"$d/script.sh" <<'GITEOF'
set -e
export HOME=$PWD GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com
export GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com TZ=UTC LC_ALL=C
git init -q repo && git -C repo symbolic-ref HEAD refs/heads/main
cd repo
for c in 1 2 3 4 5; do
  export GIT_AUTHOR_DATE="2024-01-0$c 12:00:00 +0000" GIT_COMMITTER_DATE="2024-01-0$c 12:00:00 +0000"
  mkdir -p dir1 dir2 dir3 dir4 dir5
  for i in $(seq 1 60); do seq 1 $((i * c * 3)) | sed "s/^/line $c $i /" >"dir$((i % 5 + 1))/file$i.txt"; done
  git add -A
  git commit -q -m "commit $c"
done
git log --stat --format='%H %s %ad'
git gc -q --aggressive
git fsck --strict 2>&1
git count-objects -v | grep -v -e size -e prune
git rev-parse HEAD HEAD~4
git diff --stat HEAD~4 HEAD | tail -1
GITEOF
  run_both git "$d" bash "$d/script.sh" || return
  echo "ok [git]: $(tail -1 "$d/hak.out")"
}

# CPython's own regression tests (Debian: libpython3.11-testsuite for
# /usr/bin/python3). Compared by result: every test passes under hakmem as it
# does without it (timings differ, so not the raw output).
PYTESTS_SHORT="test_dict test_list test_set test_unicode test_threading test_gc test_bytes"
PYTESTS_LONG="$PYTESTS_SHORT test_re test_json test_pickle test_collections test_itertools test_sort test_memoryview
  test_weakref test_deque test_heapq test_functools test_io test_array test_struct test_decimal test_zlib test_bz2
  test_lzma test_hashlib test_sqlite3 test_csv test_queue test_concurrent_futures test_asyncio test_mmap test_marshal
  test_tuple test_str test_float test_long test_math test_random test_string test_textwrap test_difflib test_ast"
part_pytests() {
  local label=$1 tests=$2
  [ -x "$PY" ] || { skip "$label" "$PY not installed"; return; }
  local ver
  ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if ! "$PY" -c 'import test.test_dict' 2>/dev/null; then
    skip "$label" "CPython's test suite is not installed for $PY (Debian package libpython$ver-testsuite)"
    return
  fi
  ran=$((ran + 1))
  local d=$TMP/$label
  mkdir -p "$d/ref" "$d/hak"
  local avail=""
  for t in $tests; do
    "$PY" -c "import test.$t" 2>/dev/null && avail="$avail $t"
  done
  # -j2: worker processes (they inherit LD_PRELOAD); --timeout: a hung test fails
  (cd "$d/ref" && env -u LD_PRELOAD timeout 1500 "$PY" -m test -j2 --timeout=600 $avail >"$d/ref.out" 2>&1; echo $? >"$d/ref.rc")
  (cd "$d/hak" && env LD_PRELOAD="$LIB" timeout 1500 "$PY" -m test -j2 --timeout=600 $avail >"$d/hak.out" 2>&1; echo $? >"$d/hak.rc")
  local rr hr
  rr=$(cat "$d/ref.rc"); hr=$(cat "$d/hak.rc")
  # the verdict per test: "test_x passed", "test_x failed", ...
  summary() { grep -oE '(test_[a-z0-9_]+) (passed|failed|skipped|crashed|timed out|resource denied)' "$1" | sort; }
  summary "$d/ref.out" >"$d/ref.sum"
  summary "$d/hak.out" >"$d/hak.sum"
  if [ "$rr" != 0 ]; then
    echo "note [$label]: the reference run (no hakmem) exits $rr; comparing per-test results"
  fi
  if [ "$hr" != "$rr" ] || ! cmp -s "$d/ref.sum" "$d/hak.sum"; then
    fail "$label" "results under hakmem (exit $hr) differ from the reference run (exit $rr):"
    diff "$d/ref.sum" "$d/hak.sum" | head -20
    grep -E 'Error|FAIL|Fatal|hakmem' "$d/hak.out" | head -30
    return
  fi
  echo "ok [$label]: $(grep -c passed "$d/hak.sum") CPython test modules passed as without hakmem ($(grep -E '^Total duration' "$d/hak.out"))"
}

# sqlite3: a generated workload (inserts, indexes, joins, aggregates,
# updates, deletes, vacuum, an in-memory database), output compared
part_sqlite() {
  local SQ d=$TMP/sqlite
  need sqlite SQ sqlite3 "(Debian package sqlite3)" || return
  begin "$d"
  cat >"$d/work.sql" <<'SQLEOF'
PRAGMA journal_mode=WAL;
PRAGMA cache_size=-20000;
CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT, city INTEGER, score REAL, blob BLOB);
CREATE TABLE cities(id INTEGER PRIMARY KEY, name TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500)
  INSERT INTO cities SELECT x, 'city' || x || substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26) FROM c;
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
  INSERT INTO people SELECT x, 'name' || (x * 7919 % 100003) || printf('%.*c', x % 50, 'z'), x * 31 % 500 + 1,
    (x * 2654435761 % 1000003) / 1000.0, zeroblob(x % 300) FROM c;
COMMIT;
CREATE INDEX people_city ON people(city, score);
CREATE INDEX people_name ON people(name);
SELECT count(*), sum(length(name)), round(avg(score), 4), sum(length(blob)) FROM people;
SELECT c.name, count(*), round(max(p.score), 3) FROM people p JOIN cities c ON c.id = p.city
  GROUP BY c.id ORDER BY count(*) DESC, c.name LIMIT 15;
SELECT name FROM people WHERE name LIKE 'name1234%' ORDER BY name LIMIT 10;
UPDATE people SET name = upper(name) || '-' || id, score = score * 1.5 WHERE id % 7 = 0;
DELETE FROM people WHERE id % 11 = 0;
SELECT count(*), round(sum(score), 2), group_concat(substr(name, 1, 3), '') FROM
  (SELECT * FROM people WHERE city < 5 ORDER BY id LIMIT 200);
WITH RECURSIVE fib(a, b, n) AS (SELECT 0, 1, 0 UNION ALL SELECT b, a + b, n + 1 FROM fib WHERE n < 80)
  SELECT max(a) FROM fib;
SELECT city, count(*) AS n, group_concat(id) FROM (SELECT * FROM people ORDER BY score DESC LIMIT 2000)
  GROUP BY city HAVING n > 6 ORDER BY n DESC, city LIMIT 5;
CREATE TEMP TABLE t AS SELECT id, name, score FROM people ORDER BY random() LIMIT 50000;
SELECT count(DISTINCT name) FROM t;
VACUUM;
PRAGMA integrity_check;
ATTACH ':memory:' AS mem;
CREATE TABLE mem.big(k TEXT PRIMARY KEY, v TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
  INSERT INTO mem.big SELECT hex(x * 48271 % 2147483647), printf('%0*d', x % 400, x) FROM c;
SELECT count(*), sum(length(v)), min(k), max(k) FROM mem.big;
SQLEOF
  # (random() in the TEMP table only feeds a count: the output is deterministic)
  run_both sqlite "$d" sh -c "'$SQ' -batch db.sqlite < '$d/work.sql'" || return
  echo "ok [sqlite]: $(wc -l <"$d/hak.out") result lines identical; $(tail -1 "$d/hak.out")"
}

# redis-server under hakmem, driven by redis-benchmark (bounded request
# count) and redis-cli on 127.0.0.1; a reference run without hakmem must give
# the same data (benchmark figures are only required to complete).
part_redis() {
  local RS RB RC d=$TMP/redis mode
  need redis RS redis-server "(Debian package redis-server)" || return
  need redis RB redis-benchmark "(Debian package redis-tools)" || return
  need redis RC redis-cli "(Debian package redis-tools)" || return
  begin "$d"
  for mode in ref hak; do
    local port=$((20000 + RANDOM % 20000)) pre=""
    [ $mode = hak ] && pre="LD_PRELOAD=$LIB"
    mkdir -p "$d/$mode"
    # started from this shell (not a subshell) so that `wait` gets its status
    env -u LD_PRELOAD $pre "$RS" --port $port --bind 127.0.0.1 --save '' --appendonly no \
       --daemonize no --dir "$d/$mode" --logfile "$d/$mode/server.log" --maxmemory 0 &
    echo $! >"$d/$mode/pid"
    local up=0
    for _ in $(seq 1 100); do
      if "$RC" -h 127.0.0.1 -p $port ping 2>/dev/null | grep -q PONG; then up=1; break; fi
      sleep 0.1
    done
    if [ $up = 0 ]; then
      fail redis "redis-server ($mode) did not start"; cat "$d/$mode/server.log" | tail -20
      kill "$(cat "$d/$mode/pid")" 2>/dev/null; return
    fi
    if [ $mode = hak ] && ! grep -q libhakmem "/proc/$(cat "$d/$mode/pid")/maps" 2>/dev/null; then
      fail redis "libhakmem is not mapped into redis-server"; kill "$(cat "$d/$mode/pid")"; return
    fi
    # a deterministic data set, then the benchmark (random keys), then checks
    {
      for i in $(seq 1 2000); do
        echo "SET key:$i $(printf 'v%.0s' $(seq 1 $((i % 50 + 1))))-$i"
        echo "RPUSH list:$((i % 20)) item$i"
        echo "HSET hash:$((i % 10)) f$i $((i * i))"
        echo "ZADD zset $((i * 7 % 1000)) m$i"
        echo "SADD set:$((i % 5)) s$((i % 700))"
      done
      echo "APPEND key:1 more"
    } | "$RC" -h 127.0.0.1 -p $port >/dev/null
    if ! timeout 240 "$RB" -h 127.0.0.1 -p $port -q -n 50000 -c 20 -P 8 -d 200 -r 10000 \
         -t set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,lrange_100,mset >"$d/$mode/bench.txt" 2>&1; then
      fail redis "redis-benchmark ($mode) failed:"; tail -5 "$d/$mode/bench.txt"
      kill "$(cat "$d/$mode/pid")" 2>/dev/null; return
    fi
    {
      for i in 1 2 17 500 1999 2000; do echo "GET key:$i"; done
      echo "LRANGE list:3 0 -1"; echo "HGETALL hash:4"; echo "ZRANGE zset 0 20 WITHSCORES"
      echo "SORT set:2 ALPHA"; echo "SCARD set:2"; echo "STRLEN key:1"; echo "LLEN list:0"
    } | "$RC" -h 127.0.0.1 -p $port >"$d/$mode.out" 2>&1
    "$RC" -h 127.0.0.1 -p $port info memory | grep -E '^(used_memory_human|mem_allocator)' >"$d/$mode/mem.txt"
    "$RC" -h 127.0.0.1 -p $port shutdown nosave >/dev/null 2>&1
    local pid
    pid=$(cat "$d/$mode/pid")
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then fail redis "redis-server ($mode) did not shut down"; kill -9 "$pid"; return; fi
    wait "$pid" 2>/dev/null
    local rc=$?
    if [ $rc != 0 ]; then fail redis "redis-server ($mode) exited $rc"; tail -20 "$d/$mode/server.log"; return; fi
    if grep -E 'hakmem|crashed|Assertion|Guru Meditation' "$d/$mode/server.log" >/dev/null; then
      fail redis "redis-server ($mode) log reports a problem:"; grep -E 'hakmem|crashed|Assertion|Guru' "$d/$mode/server.log" | head; return
    fi
  done
  if ! cmp -s "$d/ref.out" "$d/hak.out"; then
    fail redis "data read back differs from the reference run:"; diff "$d/ref.out" "$d/hak.out" | head -20; return
  fi
  echo "ok [redis]: data identical; under hakmem: $(tr '\n' ' ' <"$d/hak/mem.txt")"
  tr '\r' '\n' <"$d/hak/bench.txt" | grep -E 'requests per second' | sed 's/^/  redis-benchmark (hakmem): /' | head -20
}

# gcc on a large generated translation unit (thousands of functions, -O2)
part_gcclarge() {
  local CC d=$TMP/gcclarge n=${GCC_LARGE_FUNCS:-1000}
  need gcclarge CC gcc || return
  begin "$d"
  awk -v n="$n" 'BEGIN {
    print "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>";
    print "struct rec { int k; double v; char name[24]; struct rec *next; };";
    for (i = 0; i < n; i++) {
      printf "static double f%d(struct rec *r, int x) {\n  double acc = %d.5; int t[%d];\n", i, i, 8 + i % 24;
      printf "  for (int j = 0; j < %d; j++) t[j] = (x * %d + j) %% %d;\n", 8 + i % 24, 2 * i + 1, 97 + i;
      printf "  for (struct rec *p = r; p; p = p->next) {\n    switch ((p->k + x) %% 6) {\n";
      for (c = 0; c < 6; c++) printf "    case %d: acc += p->v * %d - t[%d]; break;\n", c, c + i % 5, c % (8 + i % 24);
      printf "    default: acc -= strlen(p->name);\n    }\n  }\n";
      printf "  if (x > 0 && acc < %d) acc += f%d(r, x - 1) / 2;\n", i * 3, (i > 0 ? i - 1 : 0);
      printf "  return acc;\n}\n";
    }
    print "int main(void) {\n  struct rec rs[64];";
    print "  for (int i = 0; i < 64; i++) { rs[i].k = i; rs[i].v = i * 0.25; snprintf(rs[i].name, sizeof rs[i].name, \"r%d\", i); rs[i].next = i < 63 ? &rs[i + 1] : NULL; }";
    print "  double s = 0;";
    for (i = 0; i < n; i += 7) printf "  s += f%d(rs, %d);\n", i, i % 3;
    print "  printf(\"%.3f\\n\", s);\n  return 0;\n}";
  }' >"$d/big.c"
  run_both gcclarge "$d" "$CC" -O2 -fno-ident -c "$d/big.c" -o big.o || return
  if ! cmp -s "$d/ref/big.o" "$d/hak/big.o"; then fail gcclarge "object file differs from the reference compile"; return; fi
  echo "ok [gcclarge]: $n functions ($(wc -c <"$d/big.c") bytes of C) compiled at -O2 to identical objects ($(wc -c <"$d/hak/big.o") bytes)"
}

# Self-hosting: configure and build hakmem itself (cmake, make, cc under
# LD_PRELOAD of the freshly built library), then run the result's API test.
part_selfhost() {
  local CM MK
  need selfhost CM cmake || return
  need selfhost MK make || return
  command -v cc >/dev/null || { skip selfhost "cc not installed"; return; }
  local SRC
  SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  [ -f "$SRC/CMakeLists.txt" ] && [ -d "$SRC/src" ] || { skip selfhost "hakmem sources not found at $SRC"; return; }
  local d=$TMP/selfhost
  begin "$d"
  if ! (cd "$d" && env LD_PRELOAD="$LIB" timeout 600 "$CM" -S "$SRC" -B build -DCMAKE_BUILD_TYPE=Release \
         -DHAKMEM_BUILD_BENCH=OFF >"$d/configure.log" 2>&1); then
    fail selfhost "cmake under hakmem failed:"; tail -20 "$d/configure.log"; return
  fi
  if ! (cd "$d" && env LD_PRELOAD="$LIB" timeout 900 "$MK" -C build -j2 hakmem hakmem_static test_api test_model \
         >"$d/build.log" 2>&1); then
    fail selfhost "make under hakmem failed:"; grep -E 'error|Error' "$d/build.log" | head -20; return
  fi
  if grep -q 'hakmem:' "$d/configure.log" "$d/build.log"; then
    fail selfhost "hakmem reported an error during the build:"; grep 'hakmem:' "$d/configure.log" "$d/build.log" | head; return
  fi
  local t
  if ! t=$(cd "$d/build" && timeout 300 ./tests/test_api 2>&1); then
    fail selfhost "the self-built test_api fails:"; echo "$t" | tail -10; return
  fi
  if ! t=$(cd "$d/build" && timeout 300 ./tests/test_model --ops=300000 2>&1); then
    fail selfhost "the self-built test_model fails:"; echo "$t" | tail -10; return
  fi
  echo "ok [selfhost]: hakmem configured and built under LD_PRELOAD=libhakmem.so ($(grep -c 'Building C' "$d/build.log") C files); its test_api and test_model pass"
}

case "$PART" in
  maps) part_maps ;;
  python) part_python ;;
  sort) part_sort ;;
  sortpar) part_sortpar ;;
  gcc) part_gcc ;;
  perl) part_perl ;;
  git) part_git ;;
  pytests) part_pytests pytests "$PYTESTS_SHORT" ;;
  pytests_long) part_pytests pytests_long "$PYTESTS_LONG" ;;
  sqlite) part_sqlite ;;
  redis) part_redis ;;
  gcclarge) part_gcclarge ;;
  selfhost) part_selfhost ;;
  all) part_maps; part_python; part_sort; part_sortpar; part_gcc; part_perl; part_git; part_pytests pytests "$PYTESTS_SHORT"
       part_sqlite; part_redis; part_gcclarge; part_selfhost ;;
  *) echo "unknown part $PART"; exit 2 ;;
esac

if [ "$failures" -gt 0 ]; then
  echo "test_preload ($PART): $failures failure(s)"
  exit 1
fi
if [ "$ran" -eq 0 ]; then
  echo "test_preload ($PART): skipped"
  exit 77
fi
echo "test_preload ($PART): passed"
exit 0
