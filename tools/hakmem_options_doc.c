/*
 * hakmem_options_doc — prints docs/options.md from the option table in
 * src/options.c, so the page cannot drift from the code. With a file
 * argument it instead checks that file and exits 1 if it differs.
 */
#include <stdio.h>
#include <string.h>

size_t options_doc(char *buf, size_t cap);

int main(int argc, char **argv) {
  static char doc[65536], cur[65536];
  size_t n = options_doc(doc, sizeof doc);
  if (argc < 2) {
    fwrite(doc, 1, n, stdout);
    return 0;
  }
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) {
    perror(argv[1]);
    return 1;
  }
  size_t m = fread(cur, 1, sizeof cur, f);
  fclose(f);
  if (m != n || memcmp(doc, cur, n) != 0) {
    fprintf(stderr, "%s is stale: regenerate it with %s > %s\n", argv[1], argv[0], argv[1]);
    return 1;
  }
  printf("%s matches the option table (%zu bytes)\n", argv[1], n);
  return 0;
}
