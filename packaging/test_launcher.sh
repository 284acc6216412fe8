#!/usr/bin/env bash
# The launcher in the build tree picks the right library: plain, it
# preloads libhakmem.so (and not the secure one); with --secure,
# libhakmem_secure.so, and the child's allocator says it is the secure
# build (HAKMEM_VERBOSE banner). --lib wins over --secure.
# Usage: test_launcher.sh LAUNCHER LIBHAKMEM_SO LIBHAKMEM_SECURE_SO [DEFAULT_IS_SECURE]
# (DEFAULT_IS_SECURE=1 for a tree configured with -DHAKMEM_SECURE=ON.)
set -euo pipefail
launcher=$1
lib=$(readlink -f "$2")
slib=$(readlink -f "$3")
default_secure=${4:-0}
fail() { echo "FAIL: $*"; exit 1; }
# run [OPTIONS]: the mapped files of a command the launcher starts (resolved
# paths, one per line) and its stderr (the banner), in $maps and $err.
run() {
  local tmp
  tmp=$(mktemp)
  maps=$("$launcher" --verbose "$@" -- sh -c 'cat /proc/$$/maps' 2>"$tmp" | awk '{print $6}' | sort -u)
  err=$(cat "$tmp"); rm -f "$tmp"
}

run
grep -qxF "$lib" <<<"$maps" || fail "plain launcher: $lib not mapped"
grep -q libhakmem_secure <<<"$maps" && fail "plain launcher: the secure library is mapped"
grep -q '^hakmem: build: ' <<<"$err" || { echo "$err"; fail "plain launcher: no verbose banner"; }
if [ "$default_secure" = 1 ]; then
  grep -q '^hakmem: build: .*, secure' <<<"$err" || fail "plain launcher (-DHAKMEM_SECURE=ON): the banner does not say secure"
else
  grep -q '^hakmem: build: .*, secure' <<<"$err" && fail "plain launcher: the banner says secure"
fi
echo "plain: $(grep -m1 '^hakmem: build:' <<<"$err")"

run --secure
grep -qxF "$slib" <<<"$maps" || fail "--secure: $slib not mapped"
grep -qxF "$lib" <<<"$maps" && fail "--secure: the default library is mapped too"
grep -q '^hakmem: build: .*, secure' <<<"$err" || { echo "$err"; fail "--secure: the banner does not say secure"; }
echo "--secure: $(grep -m1 '^hakmem: build:' <<<"$err")"

run --secure --lib "$lib"
grep -qxF "$lib" <<<"$maps" || fail "--secure --lib $lib: $lib not mapped"
grep -q libhakmem_secure <<<"$maps" && fail "--secure --lib $lib: the secure library is mapped"

"$launcher" --help | grep -q -- '--secure' || fail "--help does not list --secure"
echo "launcher test passed"
