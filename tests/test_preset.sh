#!/usr/bin/env bash
# HAKMEM_PRESET applies its group of values before explicit variables;
# HAKMEM_PROFILE, its former name, still works and says so once; the
# launcher's --preset and --profile both set HAKMEM_PRESET.
# Usage: test_preset.sh PROGRAM_LINKED_WITH_HAKMEM LAUNCHER
set -euo pipefail
bin=$1 launcher=$2
fail() { echo "FAIL: $*"; exit 1; }
opts() { env HAKMEM_VERBOSE=1 "$@" "$bin" sleep 0 2>&1 >/dev/null; }

out=$(opts HAKMEM_PRESET=lowmem)
grep -qx '  HAKMEM_PURGE_DELAY_MS=1' <<<"$out" || fail "lowmem preset not applied"
grep -q 'deprecated' <<<"$out" && fail "notice without HAKMEM_PROFILE"
out=$(opts HAKMEM_PURGE_DELAY_MS=50 HAKMEM_PRESET=lowmem)
grep -qx '  HAKMEM_PURGE_DELAY_MS=50' <<<"$out" || fail "an explicit variable must override the preset"
grep -qx '  HAKMEM_SS_CACHE=0' <<<"$out" || fail "the rest of the preset must stay"
out=$(opts HAKMEM_PROFILE=fast)
grep -qx '  HAKMEM_PRESET=fast' <<<"$out" || fail "HAKMEM_PROFILE not honoured"
[ "$(grep -c 'HAKMEM_PROFILE is deprecated' <<<"$out")" = 1 ] || fail "expected exactly one deprecation notice"
out=$(opts HAKMEM_PROFILE=fast HAKMEM_PRESET=lowmem)
grep -qx '  HAKMEM_PRESET=lowmem' <<<"$out" || fail "HAKMEM_PRESET must win over HAKMEM_PROFILE"
out=$(opts HAKMEM_PRESET=quick)
grep -q 'HAKMEM_PRESET=quick: expected balanced|fast|lowmem; using default balanced' <<<"$out" || fail "bad value not reported"
for flag in --preset --profile; do
  out=$(HAKMEM_VERBOSE=1 "$launcher" "$flag" lowmem -- "$bin" sleep 0 2>&1 >/dev/null)
  grep -qx '  HAKMEM_PRESET=lowmem' <<<"$out" || fail "launcher $flag does not set HAKMEM_PRESET"
  grep -q deprecated <<<"$out" && fail "launcher $flag sets the deprecated name"
done
echo "presets ok"
