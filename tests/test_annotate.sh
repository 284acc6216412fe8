#!/usr/bin/env bash
# test_annotate.sh — runs tests/test_annotate.c under a tool and checks the
# tool's verdict (see docs/debugging.md).
#
#   test_annotate.sh memcheck VALGRIND PROG MODE   (VALGRIND empty: skip)
#   test_annotate.sh asan PROG MODE                (PROG missing: skip)
#
# MODE clean must finish without any report; uaf-* must be reported as an
# access to a freed block (memcheck: "Invalid read/write ... free'd"; ASan:
# heap-use-after-free or use-after-poison); double-free must be reported by
# memcheck as an invalid free; leak must be reported by memcheck's leak
# check as definitely lost. Exit 77 when the tool is absent.
set -u
tool=$1; shift
out=$(mktemp); trap 'rm -f "$out"' EXIT
case $tool in
memcheck)
  vg=$1 prog=$2 mode=$3
  # nouserintercepts: valgrind replaces only libc's malloc, not the one
  # libhakmem.a put into the program (else hakmem is bypassed)
  vgopt=--soname-synonyms=somalloc=nouserintercepts
  [ -n "$vg" ] && [ -x "$vg" ] || { echo "valgrind not installed: skipped"; exit 77; }
  "$vg" --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
        --errors-for-leak-kinds=definite,indirect --num-callers=12 $vgopt \
        "$prog" "$mode" >"$out" 2>&1
  rc=$?
  case $mode in
    clean) want=0 ;;
    leak) want=99 pat='bytes in 1 blocks are definitely lost' ;;
    uaf-read|uaf-remote|uaf-large|uaf-realloc) want=99 pat="Invalid read of size" ;;
    uaf-write) want=99 pat="Invalid write of size" ;;
    double-free) want=nonzero pat='Invalid free\(\)' ;; # then hakmem aborts
  esac
  ;;
asan)
  prog=$1 mode=$2
  [ -x "$prog" ] || { echo "no ASan build of the test program: skipped"; exit 77; }
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1} "$prog" "$mode" >"$out" 2>&1
  rc=$?
  case $mode in
    clean) want=0 ;;
    *) want=nonzero pat='ERROR: AddressSanitizer: (heap-use-after-free|use-after-poison)' ;;
  esac
  ;;
*) echo "unknown tool $tool"; exit 2 ;;
esac

fail() { cat "$out"; echo "FAIL ($tool $mode): $*"; exit 1; }
if [ "$want" = 0 ]; then
  [ $rc -eq 0 ] || fail "exit status $rc, expected a clean run"
  grep -Eq 'Invalid|uninitialised|Mismatched|AddressSanitizer|are definitely lost' "$out" && fail "the tool reported something"
  grep -q 'done' "$out" || fail "the program did not finish"
  echo "$tool $mode: no report, as expected"
  exit 0
fi
if [ "$want" = nonzero ]; then [ $rc -ne 0 ] || fail "exit status 0, expected a report"
else [ $rc -eq "$want" ] || fail "exit status $rc, expected $want"; fi
grep -Eq "$pat" "$out" || fail "no line matching '$pat'"
if [ "$tool" = memcheck ] && [ "$mode" != leak ] && [ "$mode" != double-free ]; then
  grep -Eq "inside a block of size [0-9,]+ free'd" "$out" || fail "the address is not described as a freed block"
fi
echo "$tool $mode: caught, as expected:"
grep -E "$pat|free'd|freed by thread|inside a block|are definitely lost|SUMMARY" "$out" | head -8
exit 0
