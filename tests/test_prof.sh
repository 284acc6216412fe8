#!/usr/bin/env bash
# The heap profiler attributes live memory to the right call sites, within
# a stated tolerance: big_site holds 48 MiB (expected within 25%: ~384
# samples at 1 per 128 KiB; the sample count is Poisson, so its standard
# deviation is ~5% and 25% is ~5 of them), small_site 4 MiB (the estimate is
# only checked to be present and below 16 MiB: ~32 samples), and the freed
# churn must not show up as live. The sites' names must appear, whether the
# binary has dynamic symbols (-rdynamic) or only a .symtab.
# Usage: test_prof.sh PROF_SITE_BINARY
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HAKMEM_PROF=1 HAKMEM_PROF_SAMPLE=128K HAKMEM_PROF_FILE="$tmp/exit" "$bin" "$tmp/p" >/dev/null
test -s "$tmp/p.folded" || { echo "FAIL: no folded profile written"; exit 1; }
test -s "$tmp/p.heap" || { echo "FAIL: no pprof heap profile written"; exit 1; }
test -s "$tmp/p.txt" || { echo "FAIL: no text profile written"; exit 1; }
sum_for() { awk -v site="$1" '{ if (index($1, site)) s += $NF } END { print s + 0 }' "$tmp/p.folded"; }
big=$(sum_for big_site)
small=$(sum_for small_site)
churn=$(sum_for churn_site)
want=$((48 << 20))
echo "big_site: $big bytes estimated (held $want); small_site: $small (held $((4 << 20))); churn_site: $churn"
head -n 8 "$tmp/p.txt"
lo=$((want * 3 / 4)); hi=$((want * 5 / 4))
[ "$big" -ge "$lo" ] && [ "$big" -le "$hi" ] || { echo "FAIL: big_site estimate $big outside [$lo, $hi]"; exit 1; }
[ "$small" -gt 0 ] && [ "$small" -le $((16 << 20)) ] || { echo "FAIL: small_site estimate $small"; exit 1; }
[ "$churn" -le $((2 << 20)) ] || { echo "FAIL: freed churn reported live ($churn bytes)"; exit 1; }
grep -q 'big_site' "$tmp/p.txt" || { echo "FAIL: top list does not name big_site"; exit 1; }
echo "profile attribution ok"
