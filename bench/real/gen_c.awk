# bench/real/gen_c.awk — writes one C file of the real_gcc row.
# Usage: awk -v n=FUNCS -v unit=K -f gen_c.awk > unitK.c
# Deterministic. n functions mixing what makes a compiler allocate: structs,
# local arrays and loops, switch statements, string tables, calls between the
# functions (inlining candidates at -O2), and a driver that calls them all.
function rnd(m) { seed = (seed * 16807) % 2147483647; return int(seed / 64) % m }
BEGIN {
  seed = 7 + unit * 101
  print "#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>"
  printf "struct rec%d { int a, b; double d; char name[24]; struct rec%d *next; };\n", unit, unit
  printf "static const char *names%d[] = {", unit
  for (i = 0; i < 64; i++) printf "\"name_%d_%d_%d\",", unit, i, rnd(100000)
  print "};"
  for (f = 0; f < n; f++) {
    printf "static int u%d_f%d(struct rec%d *r, int x) {\n  int acc = x, t[%d];\n", unit, f, unit, 8 + rnd(24)
    printf "  for (int i = 0; i < (int)(sizeof t / sizeof t[0]); i++) t[i] = (x * %d + i) ^ %d;\n", 3 + rnd(50), rnd(1000)
    printf "  switch ((x + %d) & 7) {\n", rnd(9)
    for (c = 0; c < 8; c++)
      printf "  case %d: acc += t[%d] * %d + (int)strlen(names%d[%d]); break;\n", c, c, rnd(17) + 1, unit, rnd(64)
    print "  }"
    printf "  for (struct rec%d *p = r; p; p = p->next) { acc ^= p->a * %d + p->b; p->d += acc * 0.%d; }\n", unit, rnd(99) + 1, rnd(999)
    if (f > 0) printf "  if (x > %d) acc += u%d_f%d(r, x - %d);\n", rnd(50) + 10, unit, rnd(f), rnd(9) + 1
    print "  return acc;\n}"
  }
  printf "int unit%d_main(int argc) {\n  struct rec%d r = { argc, 2, 0.5, \"x\", NULL };\n  long s = 0;\n", unit, unit
  for (f = 0; f < n; f++) printf "  s += u%d_f%d(&r, argc + %d);\n", unit, f, f
  print "  printf(\"%ld %f\\n\", s, r.d);\n  return (int)s;\n}"
}
