#!/usr/bin/env bash
# The periodic and on-demand outputs (docs/stats.md, docs/profiling.md):
# the report thread exists only when asked for; HAKMEM_STATS_INTERVAL_MS
# appends a report every T ms, HAKMEM_STATS_SIGNAL=usr1 one per signal;
# HAKMEM_PROF_INTERVAL_BYTES and _MS write numbered PATH.NNNN.heap files;
# string options survive a program overwriting its environment.
# Counts are checked within ranges that allow a loaded machine's delays.
# Usage: test_periodic.sh PERIODIC_SITE_BINARY
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
reports() { if [ -e "$1" ]; then grep -c 'statistics (pid' "$1" || true; else echo 0; fi; }
between() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }

# 1. No option, no thread; an option, one more thread.
n0=$("$bin" threads)
n1=$(HAKMEM_STATS_INTERVAL_MS=1000 HAKMEM_STATS_FILE=/dev/null "$bin" threads)
echo "threads: $n0 without periodic options, $n1 with"
[ "$n0" = 1 ] || fail "a thread was started without any periodic option"
[ "$n1" = 2 ] || fail "no report thread with HAKMEM_STATS_INTERVAL_MS"

# 2. Every 100 ms for 1 s: about 10 reports, each with the field lines.
HAKMEM_STATS_INTERVAL_MS=100 HAKMEM_STATS_FILE="$tmp/int.txt" "$bin" sleep 1000
r=$(reports "$tmp/int.txt")
echo "interval: $r reports in 1 s at 100 ms"
between "$r" 3 11 || fail "expected ~10 interval reports, got $r"
f=$(grep -c '^stats\.mapped_bytes [0-9][0-9]*$' "$tmp/int.txt" || true)
[ "$f" = "$r" ] || fail "each report must end with its stats.<field> lines ($f of $r)"

# 2b. The options outlive the environment's strings: a program that writes
#     its process title over them (setproctitle) still gets its reports
#     (HAKMEM_STATS_FILE used to point into the overwritten strings).
HAKMEM_STATS_INTERVAL_MS=100 HAKMEM_STATS_FILE="$tmp/title.txt" "$bin" title 600
r=$(reports "$tmp/title.txt")
echo "after the environment was overwritten: $r reports in 0.6 s at 100 ms"
between "$r" 1 7 || fail "expected ~6 reports in $tmp/title.txt after the environment was overwritten, got $r"

# 2c. Both string options near their longest accepted length (4095 bytes) at
#     once: the pool that copies them holds all of them, so none is refused.
#     The profile's path leaves room for its ".NNNN.heap" suffix (PATH_MAX).
pad() { local p="$1/"; while [ $(( ${#p} + 2 + ${#2} )) -le $3 ]; do p="$p./"; done
        if [ $(( ${#p} + ${#2} )) -lt $3 ]; then p="$p/"; fi; printf '%s' "$p$2"; }
ls_=$(pad "$tmp" long.txt 4095); lp_=$(pad "$tmp" longprof 4085)
[ ${#ls_} = 4095 ] && [ ${#lp_} = 4085 ] || fail "test set-up: paths of ${#ls_} and ${#lp_} bytes"
HAKMEM_STATS_INTERVAL_MS=100 HAKMEM_STATS_FILE="$ls_" HAKMEM_PROF=1 HAKMEM_PROF_INTERVAL_MS=100 \
  HAKMEM_PROF_FILE="$lp_" "$bin" sleep 300 2> "$tmp/long.err"
! grep -q 'hakmem' "$tmp/long.err" || fail "a long path was refused: $(cat "$tmp/long.err")"
r=$(reports "$tmp/long.txt"); np=$(ls "$tmp" | grep -c '^longprof\.[0-9][0-9][0-9][0-9]\.heap$' || true)
echo "paths of 4095 and 4085 bytes: $r reports, $np profiles"
[ "$r" -ge 1 ] && [ "$np" -ge 1 ] || fail "with paths of 4095 and 4085 bytes: $r reports, $np profiles"

# 2d. An output that cannot be created is reported, once, with its path
#     (the interval retries; a silent failure leaves the user guessing).
HAKMEM_PROF=1 HAKMEM_PROF_INTERVAL_MS=50 HAKMEM_PROF_FILE="$tmp/no-such-dir/p" "$bin" sleep 400 2> "$tmp/nodir.err"
ne=$(grep -c "^hakmem: HAKMEM_PROF: cannot open $tmp/no-such-dir/p\.0000\.heap (errno 2)\$" "$tmp/nodir.err" || true)
echo "unwritable profile path: $ne messages"
[ "$ne" = 1 ] && [ "$(wc -l < "$tmp/nodir.err")" = 1 ] || fail "expected one message for an unwritable profile path, got: $(cat "$tmp/nodir.err")"
HAKMEM_STATS_INTERVAL_MS=50 HAKMEM_STATS_FILE="$tmp/no-such-dir/s" "$bin" sleep 400 2> "$tmp/nodir2.err"
ne=$(grep -c "^hakmem: HAKMEM_STATS_FILE: cannot open $tmp/no-such-dir/s (errno 2)\$" "$tmp/nodir2.err" || true)
echo "unwritable statistics path: $ne messages"
[ "$ne" = 1 ] && [ "$(wc -l < "$tmp/nodir2.err")" = 1 ] || fail "expected one message for an unwritable statistics path, got: $(cat "$tmp/nodir2.err")"

# 3. On a signal: exactly one report per signal, none otherwise.
HAKMEM_STATS_SIGNAL=usr1 HAKMEM_STATS_FILE="$tmp/sig.txt" "$bin" signal 3
r=$(reports "$tmp/sig.txt")
echo "signal: $r reports for 3 SIGUSR1"
[ "$r" = 3 ] || fail "expected 3 reports for 3 signals, got $r"
HAKMEM_STATS_SIGNAL=usr1 HAKMEM_STATS_FILE="$tmp/sig0.txt" "$bin" sleep 300
[ "$(reports "$tmp/sig0.txt")" = 0 ] || fail "a report without a signal"

# 4. A profile every 8 MiB allocated: 64 MiB of churn gives about 8 dumps
#    (bytes are counted at samples, 1 per 64 KiB, so the count is close).
HAKMEM_PROF=1 HAKMEM_PROF_SAMPLE=64K HAKMEM_PROF_INTERVAL_BYTES=8M HAKMEM_PROF_FILE="$tmp/pb" "$bin" churn 64
nb=$(ls "$tmp" | grep -c '^pb\.[0-9][0-9][0-9][0-9]\.heap$' || true)
echo "bytes interval: $nb dumps for 64 MiB at 8 MiB"
between "$nb" 7 8 || fail "expected ~8 numbered dumps, got $nb"
[ -s "$tmp/pb.0000.heap" ] || fail "numbering does not start at 0000"
head -n 1 "$tmp/pb.0000.heap" | grep -q '@ heap_v2/65536$' || fail "numbered dump is not a heap profile"

# 5. A profile every 200 ms for 1 s: about 5 dumps.
HAKMEM_PROF=1 HAKMEM_PROF_INTERVAL_MS=200 HAKMEM_PROF_FILE="$tmp/pt" "$bin" sleep 1000
nt=$(ls "$tmp" | grep -c '^pt\.[0-9][0-9][0-9][0-9]\.heap$' || true)
echo "time interval: $nt dumps in 1 s at 200 ms"
between "$nt" 2 5 || fail "expected ~5 timed dumps, got $nt"
echo "periodic outputs ok"
