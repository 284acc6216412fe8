#!/bin/bash
# run_fuzz.sh BINARY CORPUS_DIR [libFuzzer options...]
# Runs the fuzzer on a scratch copy of the kept corpus (new inputs found by
# the run go to the scratch directory, not into the repository); a crash
# input is written to the current directory (crash-*) and fails the test.
# The allocator's own reports ("hakmem: free(): double free of 0x..." for the
# harness's deliberate bad calls under HAKMEM_ON_ERROR=warn) are counted,
# not shown; the last few are printed with the count.
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
echo "HAKMEM_ON_ERROR=${HAKMEM_ON_ERROR:-unset (the harness uses warn)}"
"$bin" -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 "$@" "$work" 2>&1 |
  awk '/^hakmem: /{n++; last[n % 3] = $0; next}
       /^#[0-9]*.*(NEW|REDUCE|pulse)/{next}
       {print; fflush()}
       END{printf "allocator reports (bad calls caught): %d\n", n
           for (i = n - 2; i <= n; i++) if (i > 0) print "  e.g. " last[i % 3]}'
rc=${PIPESTATUS[0]}
exit $rc
