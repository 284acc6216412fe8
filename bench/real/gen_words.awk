# bench/real/gen_words.awk — the input of the real_sort row: n lines of a
# random lowercase word (3 to 20 letters), a space and a random number below
# 10^9, from a fixed seed. Usage: awk -v n=LINES -f gen_words.awk
BEGIN {
  srand(7)
  for (i = 0; i < n; i++) {
    len = 3 + int(rand() * 18)
    w = ""
    for (j = 0; j < len; j++) w = w substr("abcdefghijklmnopqrstuvwxyz", 1 + int(rand() * 26), 1)
    printf "%s %d\n", w, int(rand() * 1000000000)
  }
}
