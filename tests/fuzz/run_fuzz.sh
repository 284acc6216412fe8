#!/bin/bash
# run_fuzz.sh BINARY CORPUS_DIR [libFuzzer options...]
# Runs the fuzzer on a scratch copy of the kept corpus (new inputs found by
# the run go to the scratch directory, not into the repository); a crash
# input is written to the current directory (crash-*) and fails the test.
# Exit 77 (skipped) when the harness was not built.
bin=$1 corpus=$2
shift 2
if [ ! -x "$bin" ]; then
  echo "SKIP: $bin not built (clang with libFuzzer not available)"
  exit 77
fi
work=$(mktemp -d /tmp/hakfuzz.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
cp "$corpus"/* "$work"/ 2>/dev/null
"$bin" -print_final_stats=1 "$@" "$work" 2>&1 | tee "$work.log" | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)'
rc=${PIPESTATUS[0]}
grep -E '^(stat::number_of_executed_units|Done )' "$work.log"
rm -f "$work.log"
exit $rc
