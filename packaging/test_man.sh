#!/usr/bin/env bash
# The generated man pages are clean roff: groff -ww and mandoc -T lint
# report nothing on either, and man(1) renders them by path with the
# sections the generator fills in. Skips (77) when groff, mandoc or man is
# missing. Usage: test_man.sh MAN_DIR (build/man).
set -euo pipefail
dir=$1
for tool in groff mandoc man; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
fail=0
for page in "$dir/hakmem.1" "$dir/hakmem.3"; do
  test -s "$page" || { echo "FAIL: $page missing"; exit 1; }
  # groff exits 0 on warnings, so what it prints is the verdict.
  out=$(groff -ww -man -Tutf8 -z "$page" 2>&1) || true
  if [ -n "$out" ]; then echo "FAIL: groff on $page:"; echo "$out"; fail=1; fi
  # -W style: every message down to style notes counts.
  if ! out=$(mandoc -T lint -W style "$page" 2>&1) || [ -n "$out" ]; then
    echo "FAIL: mandoc on $page:"; echo "$out"; fail=1
  fi
  # The .gz that is installed holds the same page.
  cmp -s "$page" <(gzip -dc "$page.gz") || { echo "FAIL: $page.gz differs from $page"; fail=1; }
done

# man(1) finds and renders the page by path (./ makes it a file name).
text1=$(cd "$dir" && MANWIDTH=80 man ./hakmem.1 2>&1)
text3=$(cd "$dir" && MANWIDTH=80 man ./hakmem.3 2>&1)
for want in SYNOPSIS OPTIONS ENVIRONMENT "EXIT STATUS" EXAMPLES --prof-file --libc --secure libhakmem_secure.so; do
  grep -q -- "$want" <<<"$text1" || { echo "FAIL: hakmem(1) lacks '$want'"; fail=1; }
done
for want in SYNOPSIS hak_stats_get ENVIRONMENT STATISTICS DIAGNOSTICS FILES libhakmem_secure.so.0 hakmem::hakmem_secure; do
  grep -q -- "$want" <<<"$text3" || { echo "FAIL: hakmem(3) lacks '$want'"; fail=1; }
done

# Every option of docs/options.md, and every field docs/stats.md names,
# reaches the pages: nothing is dropped on the way. (Fields are looked for
# in the roff source: the rendered text hyphenates long names.)
src=$(cd "$(dirname "$0")/.." && pwd)
opts=$(grep -o '^| `HAKMEM_[A-Z0-9_]*`' "$src/docs/options.md" | tr -d '|` ')
test -n "$opts" || { echo "FAIL: no options in docs/options.md"; exit 1; }
n=0
for o in $opts; do
  n=$((n + 1))
  grep -q -- "^       $o\$" <<<"$text3" || { echo "FAIL: hakmem(3) lacks option $o"; fail=1; }
  grep -q -- "^       $o\$" <<<"$text1" || { echo "FAIL: hakmem(1) lacks option $o"; fail=1; }
done
fields=$(grep -o '`[a-z_]*_[a-z_]*`' "$src/docs/stats.md" | tr -d '`' | sort -u)
test -n "$fields" || { echo "FAIL: no statistics fields in docs/stats.md"; exit 1; }
m=0
for field in $fields; do
  m=$((m + 1))
  grep -q "$field" "$dir/hakmem.3" || { echo "FAIL: hakmem(3) lacks statistic $field"; fail=1; }
done
[ $fail -eq 0 ] && echo "man pages clean (groff, mandoc, man); $n options in both, $m statistics in hakmem(3)"
exit $fail
