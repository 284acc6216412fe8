# bench/real/gen_json.awk — the input of the real_jq row: one JSON array of n
# objects, each with an integer, a string of 5 to 40 letters and a list of
# 0 to 3 small integers, from a fixed seed. jq holds the whole document
# parsed at once, so the objects' size class decides most of its peak RSS.
# Usage: awk -v n=OBJECTS -f gen_json.awk
BEGIN {
  srand(11)
  printf "["
  for (i = 0; i < n; i++) {
    len = 5 + int(rand() * 36)
    w = ""
    for (j = 0; j < len; j++) w = w substr("abcdefghijklmnopqrstuvwxyz", 1 + int(rand() * 26), 1)
    k = int(rand() * 4)
    l = ""
    for (j = 0; j < k; j++) l = l (j ? "," : "") int(rand() * 1000)
    printf "%s{\"i\":%d,\"s\":\"%s\",\"l\":[%s]}", (i ? ",\n" : ""), i, w, l
  }
  printf "]\n"
}
