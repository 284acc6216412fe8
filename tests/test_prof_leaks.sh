#!/usr/bin/env bash
# HAKMEM_PROF_LEAKS=1 on its own (it implies HAKMEM_PROF): at exit, the
# report on stderr gives what the program never freed, by stack. leak_site
# keeps 16 MiB in 1 KiB blocks and frees another 16 MiB (churn_site): the
# estimate must be within 25 % of 16 MiB (~256 samples at 1 per 64 KiB; the
# count is Poisson, a standard deviation of ~6 %), the stack must name
# leak_site and not churn_site. Without the option, no report.
# Usage: test_prof_leaks.sh LEAK_SITE_BINARY
set -euo pipefail
bin=$1
fail() { echo "FAIL: $*"; exit 1; }
# the exit dump's files go to a directory of our own, removed at the end
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
err=$(env -u HAKMEM_PROF -u HAKMEM_STATS HAKMEM_PROF_LEAKS=1 HAKMEM_PROF_SAMPLE=64K HAKMEM_PROF_FILE="$tmp/p" "$bin" 2>&1 >/dev/null)
printf '%s\n' "$err" | head -n 12
line=$(printf '%s\n' "$err" | grep -m1 '^hakmem heap profile:') || fail "no leak report on stderr"
est=$(sed -n 's/.*~\([0-9]*\) bytes estimated live.*/\1/p' <<<"$line")
[ -n "$est" ] || fail "no estimate in: $line"
want=$((16 << 20)); lo=$((want * 3 / 4)); hi=$((want * 5 / 4))
[ "$est" -ge "$lo" ] && [ "$est" -le "$hi" ] || fail "estimated $est bytes never freed, outside [$lo, $hi]"
printf '%s\n' "$err" | grep -q 'leak_site' || fail "the report does not name leak_site"
if printf '%s\n' "$err" | grep -q 'churn_site'; then fail "freed blocks (churn_site) reported as leaks"; fi
quiet=$(env -u HAKMEM_PROF -u HAKMEM_STATS -u HAKMEM_PROF_LEAKS "$bin" 2>&1 >/dev/null)
[ -z "$quiet" ] || fail "output on stderr without HAKMEM_PROF_LEAKS: $quiet"
echo "leak report ok: $est bytes estimated (16 MiB never freed)"
