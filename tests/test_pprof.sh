#!/usr/bin/env bash
# PATH.heap is read by the real pprof (gperftools' google-pprof): the text
# report attributes the known sites of prof_site with pprof doing the
# unsampling (heap_v2), and --base shows only what grew between two dumps
# (big_site, 48 MiB; small_site, allocated before the first dump, cancels).
# Exit 77 (skip) where google-pprof or binutils are not installed.
# Usage: test_pprof.sh PROF_SITE_BINARY
set -euo pipefail
bin=$1
for t in google-pprof nm objdump addr2line; do
  command -v "$t" >/dev/null || { echo "SKIP: $t not installed (Debian: google-perftools, binutils)"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HAKMEM_PROF=1 HAKMEM_PROF_SAMPLE=128K HAKMEM_PROF_FILE="$tmp/exit" "$bin" "$tmp/p" "$tmp/base" >/dev/null
head -c 200 "$tmp/p.heap" | head -n 1 | grep -Eq '^heap profile: +[0-9]+: +[0-9]+ \[ *[0-9]+: +[0-9]+\] @ heap_v2/131072$' ||
  { echo "FAIL: bad header: $(head -n 1 "$tmp/p.heap")"; exit 1; }
grep -q '^MAPPED_LIBRARIES:$' "$tmp/p.heap" || { echo "FAIL: no MAPPED_LIBRARIES section"; exit 1; }
google-pprof --text "$bin" "$tmp/p.heap" >"$tmp/full.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; echo "FAIL: pprof"; exit 1; }
google-pprof --text --base="$tmp/base.heap" "$bin" "$tmp/p.heap" >"$tmp/diff.txt" 2>>"$tmp/err.txt" ||
  { cat "$tmp/err.txt"; echo "FAIL: pprof --base"; exit 1; }
echo "--- pprof --text:"; head -n 6 "$tmp/full.txt"
echo "--- pprof --text --base:"; head -n 6 "$tmp/diff.txt"
# flat MB of a function in a pprof --text report (0 when absent)
mb() { awk -v f="$2" '$6 == f { print $1; found = 1 } END { if (!found) print 0 }' "$1"; }
in_range() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
# 48 MiB within 25% (see test_prof.sh for why 25% is ~5 standard deviations)
in_range "$(mb "$tmp/full.txt" big_site)" 36 60 || { echo "FAIL: big_site not ~48 MB in pprof"; exit 1; }
in_range "$(mb "$tmp/full.txt" small_site)" 0.1 16 || { echo "FAIL: small_site not attributed in pprof"; exit 1; }
in_range "$(mb "$tmp/diff.txt" big_site)" 36 60 || { echo "FAIL: --base does not show big_site's growth"; exit 1; }
in_range "$(mb "$tmp/diff.txt" small_site)" 0 0 || { echo "FAIL: --base shows small_site, which did not grow"; exit 1; }
echo "pprof reads the heap profile"
