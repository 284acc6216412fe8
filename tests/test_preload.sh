#!/usr/bin/env bash
# test_preload.sh — run real programs with libhakmem.so LD_PRELOADed and
# compare their output byte for byte with the same run under glibc malloc.
#
#   test_preload.sh /path/to/libhakmem.so [maps|python|sort|gcc|perl|git|all]
#
# A program that is not installed is skipped with a message (exit 77 when the
# only requested part is skipped; CTest maps 77 to "skipped").
set -u
LIB=${1:?usage: test_preload.sh /path/to/libhakmem.so [part]}
PART=${2:-all}
[ -f "$LIB" ] || { echo "FAIL: $LIB does not exist"; exit 1; }
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")

TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-preload.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
ran=0
skipped=0

fail() { echo "FAIL [$1]: $2"; failures=$((failures + 1)); }
skip() { echo "SKIP [$1]: $2"; skipped=$((skipped + 1)); }

# run_both NAME DIR CMD...: runs CMD in DIR/ref (glibc) and DIR/hak (hakmem)
# with identical environments; stdout/stderr/exit status land in DIR/{ref,hak}.*
run_both() {
  local name=$1 dir=$2; shift 2
  mkdir -p "$dir/ref" "$dir/hak"
  (cd "$dir/ref" && env -u LD_PRELOAD timeout 240 "$@" >"$dir/ref.out" 2>"$dir/ref.err"; echo $? >"$dir/ref.rc")
  (cd "$dir/hak" && env LD_PRELOAD="$LIB" HAKMEM_FORCE_LIBC_ALLOC=0 timeout 240 "$@" >"$dir/hak.out" 2>"$dir/hak.err"; echo $? >"$dir/hak.rc")
  local rr hr
  rr=$(cat "$dir/ref.rc"); hr=$(cat "$dir/hak.rc")
  if [ "$rr" != 0 ]; then
    fail "$name" "reference run (no hakmem) exited $rr; stderr:"; head -20 "$dir/ref.err"; return 1
  fi
  if [ "$hr" != 0 ]; then
    fail "$name" "run under hakmem exited $hr (reference 0); stderr:"; head -20 "$dir/hak.err"; return 1
  fi
  if ! cmp -s "$dir/ref.out" "$dir/hak.out"; then
    fail "$name" "stdout differs from the reference run:"; diff "$dir/ref.out" "$dir/hak.out" | head -20; return 1
  fi
  if ! cmp -s "$dir/ref.err" "$dir/hak.err"; then
    fail "$name" "stderr differs from the reference run:"; diff "$dir/ref.err" "$dir/hak.err" | head -20; return 1
  fi
  return 0
}

part_maps() {
  ran=$((ran + 1))
  local m
  m=$(env LD_PRELOAD="$LIB" HAKMEM_FORCE_LIBC_ALLOC=0 cat /proc/self/maps) || { fail maps "cat under LD_PRELOAD failed"; return; }
  if ! grep -q "$(basename "$LIB" | sed 's/\..*//')" <<<"$m"; then
    fail maps "libhakmem is not mapped into a preloaded process"
    return
  fi
  if grep -q libhakmem < <(env -u LD_PRELOAD cat /proc/self/maps); then
    fail maps "libhakmem mapped without LD_PRELOAD?"
    return
  fi
  echo "ok [maps]: libhakmem mapped into preloaded processes"
}

PY=/usr/bin/python3
part_python() {
  [ -x "$PY" ] || { skip python "$PY not installed"; return; }
  ran=$((ran + 1))
  local d=$TMP/python
  mkdir -p "$d"
  cat >"$d/alloc.py" <<'PYEOF'
import hashlib, json, random, sys
rnd = random.Random(12345)
h = hashlib.sha256()
d = {}
for i in range(200000):
    k = "k%d-%s" % (i, "x" * (i % 37))
    d[k] = [i, str(i * 7), {"v": i % 13, "s": "y" * (i % 200)}]
for i in range(0, 200000, 3):
    del d["k%d-%s" % (i, "x" * (i % 37))]
lst = [rnd.random() for _ in range(300000)]
lst.sort()
h.update(repr(lst[:1000]).encode()); h.update(repr(lst[-1000:]).encode())
words = ["".join(chr(97 + rnd.randrange(26)) for _ in range(rnd.randrange(1, 30))) for _ in range(100000)]
words.sort(key=lambda w: (len(w), w))
h.update("\n".join(words).encode())
blob = json.dumps(d, sort_keys=True)
back = json.loads(blob)
assert back == d
h.update(blob.encode())
ba = bytearray()
for i in range(200000):
    ba += bytes([i & 255]) * (i % 17)
h.update(ba)
big = [bytes(rnd.randrange(256) for _ in range(1000)) * (1 + i % 300) for i in range(400)]
for b in big:
    h.update(hashlib.md5(b).digest())
s = set(range(0, 500000, 3)) ^ set(range(0, 500000, 5))
h.update(str(len(s)).encode())
t = {i: (i, i * 2, str(i)) for i in range(100000)}
print(len(d), len(back), len(words), len(ba), len(s), len(t))
print(h.hexdigest())
PYEOF
  # PYTHONMALLOC=malloc sends every object allocation to malloc (no pymalloc arenas)
  run_both python "$d" env PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$PY" -S "$d/alloc.py" || return
  # and it really ran on hakmem
  local owns
  owns=$(env LD_PRELOAD="$LIB" HAKMEM_FORCE_LIBC_ALLOC=0 PYTHONMALLOC=malloc "$PY" -S -c '
import ctypes
c = ctypes.CDLL(None)
c.malloc.restype = ctypes.c_void_p
c.hak_owns.argtypes = [ctypes.c_void_p]
p = c.malloc(100)
print("owned" if c.hak_owns(p) else "not-owned")
' 2>&1)
  [ "$owns" = owned ] || { fail python "malloc() inside preloaded python is not hakmem's: $owns"; return; }
  echo "ok [python]: $(tail -1 "$d/hak.out")"
}

part_sort() {
  local SORT
  SORT=$(command -v sort) || { skip sort "sort not installed"; return; }
  ran=$((ran + 1))
  local d=$TMP/sort
  mkdir -p "$d"
  awk 'BEGIN { srand(42); for (i = 0; i < 200000; i++) { n = int(rand() * 1000000);
         s = ""; l = int(rand() * 60); for (j = 0; j < l; j++) s = s sprintf("%c", 97 + int(rand() * 26));
         printf "%s %d %s\n", s, n, i } }' >"$d/input.txt"
  run_both sort "$d" env LC_ALL=C "$SORT" "$d/input.txt" || return
  run_both sort-numeric "$d/n" env LC_ALL=C "$SORT" -k2,2n -k1,1r "$d/input.txt" || return
  # small buffer + 2 threads: temp files, merge passes, multi-threaded sort
  run_both sort-parallel "$d/p" env LC_ALL=C TMPDIR="$d" "$SORT" --parallel=2 -S 2M -k3,3n -u "$d/input.txt" || return
  echo "ok [sort]: $(wc -l <"$d/hak.out") lines sorted identically"
}

part_gcc() {
  local CC
  CC=$(command -v gcc) || { skip gcc "gcc not installed"; return; }
  ran=$((ran + 1))
  local d=$TMP/gcc
  mkdir -p "$d"
  {
    echo '#include <stdio.h>'
    echo '#include <string.h>'
    echo 'struct node { int key; const char *name; struct node *next; };'
    for i in $(seq 0 399); do
      echo "static unsigned f$i(unsigned x) { unsigned r = x * $((i * 2 + 1))u; switch (x % 7) {"
      for c in 0 1 2 3 4 5; do echo "  case $c: r ^= (r >> $((c + 1))) + $((i * 31 + c))u; break;"; done
      echo "  default: r += $i; } const char *s = \"str$i-$((i * i))\"; return r + (unsigned)strlen(s); }"
    done
    echo 'int main(void) { unsigned acc = 0;'
    for i in $(seq 0 399); do echo "  acc = f$i(acc + $i);"; done
    echo '  printf("%u\n", acc); return 0; }'
  } >"$d/gen.c"
  run_both gcc "$d" "$CC" -O2 -g -fdebug-prefix-map="$d/ref"=/build -fdebug-prefix-map="$d/hak"=/build -c "$d/gen.c" -o gen.o || return
  if ! cmp -s "$d/ref/gen.o" "$d/hak/gen.o"; then fail gcc "object file differs from the reference compile"; return; fi
  run_both gcc-link "$d/l" "$CC" -O2 "$d/gen.c" -o gen || return
  local a b
  a=$("$d/l/ref/gen") || { fail gcc "reference program failed"; return; }
  b=$("$d/l/hak/gen") || { fail gcc "program built under hakmem failed"; return; }
  [ "$a" = "$b" ] || { fail gcc "programs print different results: $a vs $b"; return; }
  echo "ok [gcc]: identical object files, program prints $b"
}

part_perl() {
  local PERL
  PERL=$(command -v perl) || { skip perl "perl not installed"; return; }
  ran=$((ran + 1))
  local d=$TMP/perl
  mkdir -p "$d"
  cat >"$d/t.pl" <<'PLEOF'
use strict; use warnings; use Digest::MD5 qw(md5_hex);
my %h; my $seed = 7;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed; }
for my $i (0 .. 199999) { my $k = "key" . rnd() . "-" . ("z" x ($i % 41)); $h{$k} = [$i, "v" x ($i % 97)]; }
my @keys = sort keys %h;
delete $h{$keys[$_]} for grep { $_ % 3 == 0 } 0 .. $#keys;
my $text = join("\n", map { "$_ => $h{$_}[0]" } sort keys %h);
(my $t2 = $text) =~ s/(\d+)/<$1>/g;
my @m = ($t2 =~ /key(\d{3})\d*-z{5,}/g);
my %cnt; $cnt{length $_}++ for split /\n/, $t2;
my $big = ""; $big .= chr(65 + $_ % 26) x ($_ % 300) for 0 .. 20000;
print scalar(keys %h), " ", scalar(@m), " ", length($big), "\n";
print md5_hex($t2), " ", md5_hex($big), " ", md5_hex(join ",", map { "$_:$cnt{$_}" } sort { $a <=> $b } keys %cnt), "\n";
PLEOF
  run_both perl "$d" "$PERL" "$d/t.pl" || return
  echo "ok [perl]: $(tail -1 "$d/hak.out")"
}

part_git() {
  local GIT
  GIT=$(command -v git) || { skip git "git not installed"; return; }
  ran=$((ran + 1))
  local d=$TMP/git
  mkdir -p "$d"
  cat >"$d/script.sh" <<'GITEOF'
set -e
export HOME=$PWD GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com
export GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com TZ=UTC LC_ALL=C
git init -q repo && git -C repo symbolic-ref HEAD refs/heads/main
cd repo
for c in 1 2 3 4 5; do
  export GIT_AUTHOR_DATE="2024-01-0$c 12:00:00 +0000" GIT_COMMITTER_DATE="2024-01-0$c 12:00:00 +0000"
  mkdir -p dir1 dir2 dir3 dir4 dir5
  for i in $(seq 1 60); do seq 1 $((i * c * 3)) | sed "s/^/line $c $i /" >"dir$((i % 5 + 1))/file$i.txt"; done
  git add -A
  git commit -q -m "commit $c"
done
git log --stat --format='%H %s %ad'
git gc -q --aggressive
git fsck --strict 2>&1
git count-objects -v | grep -v -e size -e prune
git rev-parse HEAD HEAD~4
git diff --stat HEAD~4 HEAD | tail -1
GITEOF
  run_both git "$d" bash "$d/script.sh" || return
  echo "ok [git]: $(tail -1 "$d/hak.out")"
}

case "$PART" in
  maps) part_maps ;;
  python) part_python ;;
  sort) part_sort ;;
  gcc) part_gcc ;;
  perl) part_perl ;;
  git) part_git ;;
  all) part_maps; part_python; part_sort; part_gcc; part_perl; part_git ;;
  *) echo "unknown part $PART"; exit 2 ;;
esac

if [ "$failures" -gt 0 ]; then
  echo "test_preload ($PART): $failures failure(s)"
  exit 1
fi
if [ "$ran" -eq 0 ]; then
  echo "test_preload ($PART): skipped"
  exit 77
fi
echo "test_preload ($PART): passed"
exit 0
