# bench/real/gen_git.awk — writes the git fast-import stream of the real_git
# row's repository.
# Usage: awk -v n=COMMITS -f gen_git.awk | git fast-import --quiet
# Deterministic (fixed dates and contents). 48 text files of 4..190 KiB
# (lines of words, as source code is); each commit rewrites a few lines of
# three files and appends to them, so the pack holds chains of deltas and
# `git log -p` inflates blobs of every size from a few KiB to a few hundred:
# buffers the size of each object, each live for a moment.
function rnd(m) { seed = (seed * 16807) % 2147483647; return int(seed / 64) % m }
function word(  w, k) {
  w = ""
  for (k = 0; k < 2 + rnd(7); k++) w = w sprintf("%c", 97 + rnd(26))
  return w
}
function line(  s, k) {
  s = ""
  for (k = 0; k < 3 + rnd(9); k++) s = s (k ? " " : "") word()
  return s
}
function set(f, i, s) {
  bytes[f] += length(s) - ((f, i) in text ? length(text[f, i]) + 1 : 0) + 1
  text[f, i] = s
}
function emit(f,  i) {
  printf "M 644 inline src/f%02d.txt\ndata %d\n", f, bytes[f]
  for (i = 1; i <= len[f]; i++) print text[f, i]
  print ""
}
BEGIN {
  seed = 12345
  nf = 48
  for (f = 0; f < nf; f++) {
    len[f] = 100 + (f % 12) * 400
    for (i = 1; i <= len[f]; i++) set(f, i, line())
  }
  for (c = 1; c <= n; c++) {
    printf "commit refs/heads/main\nmark :%d\n", c
    printf "author Bench <bench@example.org> %d +0000\n", 1700000000 + c * 60
    printf "committer Bench <bench@example.org> %d +0000\n", 1700000000 + c * 60
    msg = "change " c ": " line()
    printf "data %d\n%s\n", length(msg), msg
    if (c > 1) printf "from :%d\n", c - 1
    for (k = 0; k < (c == 1 ? nf : 3); k++) {
      f = c == 1 ? k : rnd(nf)
      if (c > 1) {
        for (j = 0; j < 6; j++) set(f, 1 + rnd(len[f]), line())
        for (j = 0; j < 8; j++) set(f, ++len[f], line())
      }
      emit(f)
    }
    print ""
  }
}
