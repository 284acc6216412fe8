#!/usr/bin/env bash
# The project built the other common way: CMake's Ninja generator, with clang
# where it is installed (make test builds with Makefiles and the system's cc).
#  1. Configured under Ninja, `ninja -n` accepts the whole build file and plans
#     the libraries, the tests and the benchmarks. Ninja refuses two rules for
#     one output, which Makefiles allow: custom targets named like the files
#     their commands wrote (tests/fuzz_ops once) broke every Ninja build.
#  2. With clang: libhakmem.so and libhakmem_secure.so built by it pass
#     test_footprint (its binary is the second argument): clang unrolls loops
#     where gcc does not, and its hot code outgrew the 64 KiB fault-around
#     window until the library was built with -fno-unroll-loops under clang.
# Usage: test_build_other.sh SOURCE_DIR [TEST_FOOTPRINT]. Skipped (77) without
# ninja.
set -euo pipefail
src=$1
footprint=${2:-}
command -v ninja >/dev/null 2>&1 || { echo "ninja is not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cc_args=()
if command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1; then
  cc_args=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
cmake -S "$src" -B "$tmp/b" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cc_args[@]}" >"$tmp/configure.log" 2>&1 ||
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

if [ ${#cc_args[@]} -eq 0 ] || [ -z "$footprint" ]; then
  echo "clang or test_footprint not given: the clang-built libraries are not checked"
  exit 0
fi
ninja -C "$tmp/b" hakmem hakmem_secure >"$tmp/build.log" 2>&1 || { tail -n 20 "$tmp/build.log"; fail "clang did not build the libraries"; }
for lib in libhakmem.so libhakmem_secure.so; do
  echo "== test_footprint with $lib built by clang"
  # 77 (no layout, a debug build) is a failure here: this build has both
  LD_PRELOAD="$tmp/b/$lib" "$footprint" || fail "test_footprint fails with $lib built by clang"
done
echo "clang-built libraries: footprint ok"
