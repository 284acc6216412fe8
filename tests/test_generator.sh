#!/usr/bin/env bash
# The project configures and plans its whole build (library, tests, benchmarks)
# under CMake's Ninja generator, as it does under Makefiles (make test). Ninja
# refuses a build file where two rules make one output: a custom target named
# like the file its command writes (tests/fuzz_ops once) broke every Ninja
# build, while Makefiles accepted it. `ninja -n` reads the whole build file and
# lists the commands without running them, so the check costs one configure.
# Usage: test_generator.sh SOURCE_DIR. Skipped (77) without ninja.
set -euo pipefail
src=$1
command -v ninja >/dev/null 2>&1 || { echo "ninja is not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake -S "$src" -B "$tmp/b" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 ||
  { tail -n 20 "$tmp/configure.log"; fail "cmake -G Ninja did not configure"; }
ninja -C "$tmp/b" -n >"$tmp/plan.log" 2>&1 || { tail -n 20 "$tmp/plan.log"; fail "ninja rejects the build file"; }
grep -q 'warning: phony target' "$tmp/plan.log" && { grep 'warning: phony target' "$tmp/plan.log"; fail "a target names itself"; }
# The plan must hold the libraries and the tests: a plan of nothing also passes -n.
for what in 'shared library libhakmem\.so' 'executable tests/test_api' 'executable bench/larson'; do
  grep -Eq "Linking C(XX)? $what" "$tmp/plan.log" || fail "the Ninja plan does not build $what"
done
# With clang and libFuzzer the fuzz harnesses are custom commands: planned too.
if grep -q 'libFuzzer harness with' "$tmp/configure.log"; then
  grep -q 'Building the libFuzzer harness fuzz_ops_secure' "$tmp/plan.log" || fail "the fuzz harnesses are not planned"
fi
echo "Ninja: $(grep -c '^\[' "$tmp/plan.log") build steps planned"
