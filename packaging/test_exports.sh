#!/usr/bin/env bash
# The shared library may export only the public hak_ API, the C library's
# allocation names and the C++ operators; its SONAME carries the version.
set -euo pipefail
lib=$1
allowed='^(hak_[a-z_0-9]+|malloc|free|calloc|realloc|reallocarray|cfree|free_sized|free_aligned_sized|aligned_alloc|memalign|posix_memalign|valloc|pvalloc|malloc_usable_size|malloc_stats|mallinfo|mallinfo2|malloc_trim|malloc_info|_Znwm|_Znam|_Znwm.*|_Znam.*|_ZdlPv.*|_ZdaPv.*)$'
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBVRi]$/ {print $3}' | sed 's/@.*//' | grep -Ev "$allowed" || true)
if [ -n "$bad" ]; then
  echo "FAIL: unexpected exported symbols:"; echo "$bad"; exit 1
fi
n=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBVRi]$/' | wc -l)
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
echo "exports: $n symbols, all allowed; SONAME $soname"
case "$soname" in libhakmem.so.[0-9]*) ;; *) echo "FAIL: SONAME '$soname' has no version"; exit 1 ;; esac
