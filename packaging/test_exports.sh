#!/usr/bin/env bash
# The shared library may export only the public hak_ API, the C library's
# allocation names and the C++ operators; its SONAME carries the version.
# Usage: test_exports.sh LIB [REFERENCE_LIB]
# With REFERENCE_LIB (libhakmem.so, when LIB is libhakmem_secure.so), LIB
# must export exactly the same names: the two libraries are drop-in
# replacements for each other.
set -euo pipefail
lib=$1
ref=${2:-}
allowed='^(hak_[a-z_0-9]+|malloc|free|calloc|realloc|reallocarray|cfree|free_sized|free_aligned_sized|aligned_alloc|memalign|posix_memalign|valloc|pvalloc|malloc_usable_size|malloc_stats|mallinfo|mallinfo2|malloc_trim|malloc_info|__libc_(malloc|free|calloc|realloc|reallocarray|memalign|valloc|pvalloc)|_Znwm|_Znam|_Znwm.*|_Znam.*|_ZdlPv.*|_ZdaPv.*)$'
exports() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWDBVRi]$/ {print $3}' | sed 's/@.*//' | sort -u; }
bad=$(exports "$lib" | grep -Ev "$allowed" || true)
if [ -n "$bad" ]; then
  echo "FAIL: unexpected exported symbols:"; echo "$bad"; exit 1
fi
n=$(exports "$lib" | wc -l)
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
echo "exports: $n symbols, all allowed; SONAME $soname"
# libhakmem.so.0, libhakmem_secure.so.0: the file's own name and a version
stem=$(basename "$lib"); stem=${stem%%.so*}
case "$soname" in "$stem".so.[0-9]*) ;; *) echo "FAIL: SONAME '$soname' is not $stem.so.<version>"; exit 1 ;; esac
if [ -n "$ref" ]; then
  if ! d=$(diff <(exports "$ref") <(exports "$lib")); then
    echo "FAIL: $lib and $ref export different names (< only in the reference, > only in $lib):"
    echo "$d"; exit 1
  fi
  echo "the same $n names as $(basename "$ref")"
fi
