#!/usr/bin/env bash
# Builds the Debian package the way `make deb` does (a tree configured for
# /usr), checks it lists every file it must hold, installs
# it with dpkg into a private root (its own dpkg database; the postinst's
# ldconfig is a stub that records the call, so the machine is untouched),
# then runs programs through the installed launcher, pkg-config file and
# CMake package and checks their malloc is the installed libhakmem's; the
# same for the secure library (--secure, hakmem-secure.pc,
# hakmem::hakmem_secure).
# Skips (77) without dpkg, dpkg-deb, cpack or pkg-config.
# Usage: test_deb.sh SOURCE_DIR BUILD_DIR C_COMPILER CXX_COMPILER WERROR
set -euo pipefail
src=$1
build=$2
cc=$3
cxx=$4
werror=$5
for tool in dpkg dpkg-deb cpack pkg-config; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. The package, from a tree of the test's own (BUILD_DIR/pkg-test, kept
#    across runs so only what changed is rebuilt; not `make deb`'s
#    BUILD_DIR/pkg, whose flavour flags would carry over in its cache).
pkgtree=$build/pkg-test
cmake -S "$src" -B "$pkgtree" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DHAKMEM_BUILD_TESTS=OFF -DHAKMEM_BUILD_BENCH=OFF -DHAKMEM_WERROR="$werror" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" >"$tmp/configure.log" \
  || { cat "$tmp/configure.log"; fail "configure"; }
cmake --build "$pkgtree" -j 2 >"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; fail "build"; }
(cd "$pkgtree" && cpack -G DEB -B "$tmp/out") >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; fail "cpack"; }
deb=$(ls "$tmp"/out/hakmem_*.deb)
echo "package: $(basename "$deb")"

# 2. Metadata and contents.
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$pkgtree/CMakeCache.txt")
multiarch=$("$cc" -print-multiarch 2>/dev/null || true)
if [ -n "$multiarch" ] && [ "$libdir" != "lib/$multiarch" ]; then
  fail "libdir is $libdir, not Debian's multiarch lib/$multiarch"
fi
[ "$(dpkg-deb -f "$deb" Package)" = hakmem ] || fail "package name"
[ "$(dpkg-deb -f "$deb" Depends)" = libc6 ] || fail "Depends: $(dpkg-deb -f "$deb" Depends)"
# (Output is captured before grep -q looks at it: with pipefail, grep -q
# leaving early would fail the pipe.)
grep -q 'hakmem developers' <<<"$(dpkg-deb -f "$deb" Maintainer)" || fail "Maintainer"
grep -q 'allocator' <<<"$(dpkg-deb -f "$deb" Description)" || fail "Description"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/list"
ver=$(dpkg-deb -f "$deb" Version)
required="/usr/bin/hakmem /usr/include/hakmem.h
  /usr/$libdir/libhakmem.so /usr/$libdir/libhakmem.so.0 /usr/$libdir/libhakmem.so.$ver
  /usr/$libdir/libhakmem.a /usr/$libdir/libhakmem_api.a /usr/$libdir/pkgconfig/hakmem.pc
  /usr/$libdir/libhakmem_secure.so /usr/$libdir/libhakmem_secure.so.0 /usr/$libdir/libhakmem_secure.so.$ver
  /usr/$libdir/libhakmem_secure.a /usr/$libdir/libhakmem_api_secure.a /usr/$libdir/pkgconfig/hakmem-secure.pc
  /usr/$libdir/cmake/hakmem/hakmemConfig.cmake /usr/$libdir/cmake/hakmem/hakmemConfigVersion.cmake
  /usr/$libdir/cmake/hakmem/hakmemTargets.cmake
  /usr/share/man/man1/hakmem.1.gz /usr/share/man/man3/hakmem.3.gz"
for f in $required; do
  grep -qx -- "$f" "$tmp/list" || fail "$f is not in the package"
done
if grep -v -e '^/usr/' -e '^/$' "$tmp/list"; then fail "files outside /usr"; fi
echo "contents: $(grep -c . "$tmp/list") entries, all $(wc -w <<<"$required") required files"

# 3. Install into a private root with its own dpkg database.
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$tmp/stub"
touch "$root/var/lib/dpkg/status"
printf '#!/bin/sh\necho "ldconfig $*" >>"%s"\n' "$tmp/ldconfig.calls" >"$tmp/stub/ldconfig"
chmod +x "$tmp/stub/ldconfig"
# --force-script-chrootless: the root has no shell to chroot into; the
# stub stands in for ldconfig. libc6 is not in the private database.
PATH=$tmp/stub:$PATH dpkg --root="$root" --force-depends --force-not-root --force-script-chrootless \
  -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
grep -q '^Status: install ok installed' <<<"$(dpkg --root="$root" -s hakmem)" || fail "not installed"
grep -q ldconfig "$tmp/ldconfig.calls" 2>/dev/null || fail "postinst did not run ldconfig"
lib=$root/usr/$libdir/libhakmem.so.$ver

# 4. The installed launcher finds the installed library (not the build's).
grep -qx "hakmem $ver" <<<"$("$root/usr/bin/hakmem" --version)" || fail "launcher --version"
maps=$("$root/usr/bin/hakmem" -- sh -c 'cat /proc/$$/maps')
grep -qF "$lib" <<<"$maps" || fail "the launched command does not map $lib"
stats=$("$root/usr/bin/hakmem" --stats -- sh -c 'echo b a | tr " " "\n" | sort >/dev/null' 2>&1)
grep -q "^hakmem $ver .*statistics (pid" <<<"$stats" || { echo "$stats"; fail "--stats printed no report"; }
grep -Eq '^small: [1-9][0-9]* KiB in use' <<<"$stats" || { echo "$stats"; fail "no small blocks in use: malloc did not come from hakmem"; }
echo "launcher: preloads $lib; --stats: $(grep -m1 '^small:' <<<"$stats")"
slib=$root/usr/$libdir/libhakmem_secure.so.$ver
maps=$("$root/usr/bin/hakmem" --secure -- sh -c 'cat /proc/$$/maps')
grep -qF "$slib" <<<"$maps" || fail "hakmem --secure: the launched command does not map $slib"
grep -qF "$lib" <<<"$maps" && fail "hakmem --secure: the default library is mapped too"
banner=$("$root/usr/bin/hakmem" --secure --verbose -- sh -c 'echo b a | tr " " "\n" | sort >/dev/null' 2>&1)
grep -q '^hakmem: build: .*, secure' <<<"$banner" || { echo "$banner"; fail "hakmem --secure: the banner does not say secure"; }
echo "launcher --secure: preloads $slib; $(grep -m1 '^hakmem: build:' <<<"$banner")"

# 5. A program built with the installed pkg-config file, and one with the
#    installed CMake package, both take malloc from the installed library.
export PKG_CONFIG_PATH=$root/usr/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs hakmem)
incdir=$(pkg-config --cflags-only-I hakmem | sed 's/^ *-I//; s/ *$//')
[ "$(realpath "$incdir")" = "$(realpath "$root/usr/include")" ] || fail "pkg-config --cflags: $incdir is not the root's include dir"
"$cc" -o "$tmp/ex_pc" "$src/packaging/example/main.c" $flags -Wl,-rpath,"$root/usr/$libdir"
out=$("$tmp/ex_pc")
grep -q 'owned=1' <<<"$out" || fail "pkg-config build: $out"
grep -qF "$root/usr/$libdir/libhakmem.so.0" <<<"$(ldd "$tmp/ex_pc")" \
  || fail "pkg-config build does not load the installed library"
echo "pkg-config build: $out"
"$cc" -o "$tmp/ex_pcs" "$src/packaging/example/main.c" $(pkg-config --cflags --libs hakmem-secure) -Wl,-rpath,"$root/usr/$libdir"
out=$("$tmp/ex_pcs")
grep -q ' secure: owned=1' <<<"$out" || fail "hakmem-secure.pc build: $out"
grep -qF "$root/usr/$libdir/libhakmem_secure.so.0" <<<"$(ldd "$tmp/ex_pcs")" \
  || fail "hakmem-secure.pc build does not load the installed secure library"
echo "pkg-config build (hakmem-secure): $out"
cmake -S "$src/packaging/example" -B "$tmp/exb" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_C_COMPILER="$cc" >"$tmp/excfg.log" 2>&1 || { cat "$tmp/excfg.log"; fail "find_package(hakmem)"; }
grep -qF "hakmem_DIR:PATH=$root/usr/$libdir/cmake/hakmem" "$tmp/exb/CMakeCache.txt" || fail "found another hakmem package"
cmake --build "$tmp/exb" >/dev/null
out=$("$tmp/exb/example")
grep -q 'owned=1' <<<"$out" || fail "CMake build: $out"
echo "CMake build: $out"
[ -x "$tmp/exb/example_secure" ] || fail "the CMake package has no hakmem::hakmem_secure"
out=$("$tmp/exb/example_secure")
grep -q ' secure: owned=1' <<<"$out" || fail "CMake build (hakmem::hakmem_secure): $out"
echo "CMake build (hakmem::hakmem_secure): $out"

# 6. The installed man pages are found by name.
grep -q -- '--stats' <<<"$(MANWIDTH=80 man -M "$root/usr/share/man" 1 hakmem 2>&1)" || fail "man 1 hakmem"
grep -q 'hak_stats_get' <<<"$(MANWIDTH=80 man -M "$root/usr/share/man" 3 hakmem 2>&1)" || fail "man 3 hakmem"

# 7. Removal leaves no file of the package behind.
PATH=$tmp/stub:$PATH dpkg --root="$root" --force-not-root --force-script-chrootless -r hakmem \
  >"$tmp/dpkg-r.log" 2>&1 || { cat "$tmp/dpkg-r.log"; fail "dpkg -r"; }
left=$(find "$root" -path "$root/var" -prune -o \( -type f -o -type l \) -print)
[ -z "$left" ] || { echo "$left"; fail "files left after dpkg -r"; }
echo "deb test passed"
