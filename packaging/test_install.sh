#!/usr/bin/env bash
# Installs hakmem into a temporary prefix and builds and runs a program
# against it through pkg-config and through CMake's find_package; also
# runs the installed launcher; the same for the secure library installed
# beside the default (hakmem-secure.pc, hakmem::hakmem_secure, --secure).
# Usage: test_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libhakmem.so' | head -n 1)")
test -f "$prefix/include/hakmem.h"
test -x "$prefix/bin/hakmem"
for f in libhakmem_secure.so libhakmem_secure.so.0 libhakmem_secure.a libhakmem_api_secure.a pkgconfig/hakmem-secure.pc; do
  test -e "$libdir/$f" || { echo "FAIL: $libdir/$f is not installed"; exit 1; }
done

# pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -o "$tmp/ex_pc" "$src/packaging/example/main.c" $(pkg-config --cflags --libs hakmem) -Wl,-rpath,"$libdir"
out=$("$tmp/ex_pc")
echo "pkg-config build: $out"
case "$out" in *"owned=1"*) ;; *) echo "FAIL: pkg-config build does not use hakmem"; exit 1 ;; esac
# (with -DHAKMEM_SECURE=ON the default library is secure too)
if ! grep -q '^HAKMEM_SECURE:BOOL=ON' "$build/CMakeCache.txt"; then
  case "$out" in *" secure:"*) echo "FAIL: hakmem.pc gave the secure library"; exit 1 ;; esac
fi
cc -o "$tmp/ex_pcs" "$src/packaging/example/main.c" $(pkg-config --cflags --libs hakmem-secure) -Wl,-rpath,"$libdir"
out=$("$tmp/ex_pcs")
echo "pkg-config build (hakmem-secure): $out"
case "$out" in *" secure: owned=1"*) ;; *) echo "FAIL: hakmem-secure.pc build does not use the secure hakmem"; exit 1 ;; esac

# CMake package
cmake -S "$src/packaging/example" -B "$tmp/exb" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/exb" >/dev/null
out=$("$tmp/exb/example")
echo "CMake build: $out"
case "$out" in *"owned=1"*) ;; *) echo "FAIL: CMake build does not use hakmem"; exit 1 ;; esac
test -x "$tmp/exb/example_secure" || { echo "FAIL: the CMake package has no hakmem::hakmem_secure"; exit 1; }
out=$("$tmp/exb/example_secure")
echo "CMake build (hakmem::hakmem_secure): $out"
case "$out" in *" secure: owned=1"*) ;; *) echo "FAIL: hakmem::hakmem_secure does not use the secure hakmem"; exit 1 ;; esac

# Launcher: version, and a preloaded command that sees the library mapped.
"$prefix/bin/hakmem" --version | grep -q '^hakmem [0-9]'
"$prefix/bin/hakmem" -- sh -c 'grep -q libhakmem /proc/$$/maps' || { echo "FAIL: launcher did not preload"; exit 1; }
maps=$("$prefix/bin/hakmem" --secure -- sh -c 'cat /proc/$$/maps')
grep -qF "$(readlink -f "$libdir/libhakmem_secure.so")" <<<"$maps" || { echo "FAIL: --secure did not preload the installed libhakmem_secure.so"; exit 1; }
banner=$("$prefix/bin/hakmem" --secure --verbose -- sh -c 'echo b a | tr " " "\n" | sort >/dev/null' 2>&1)
grep -q '^hakmem: build: .*, secure' <<<"$banner" || { echo "$banner"; echo "FAIL: --secure: the banner does not say secure"; exit 1; }
stats=$("$prefix/bin/hakmem" --stats -- sh -c 'echo x | sort' 2>&1 >/dev/null)
echo "$stats" | grep -q 'statistics' || { echo "FAIL: --stats printed no report"; exit 1; }
echo "install test passed (prefix $prefix)"
