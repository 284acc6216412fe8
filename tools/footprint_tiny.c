/*
 * footprint_tiny.c — the smallest realistic program for tools/footprint.py:
 * 100 mallocs of 16..1000 bytes (written), a line printed with stdio, the
 * frees. What its process holds at exit (tools/footprint_dump.c reads it) is
 * what hakmem, or glibc, costs a program that allocates little.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  void *p[100];
  unsigned x = 12345;
  size_t total = 0;
  for (int i = 0; i < 100; i++) {
    x = x * 1103515245u + 12345u;
    size_t n = 16 + (x >> 8) % 985;
    p[i] = malloc(n);
    if (p[i] == NULL) return 1;
    memset(p[i], i, n);
    total += n;
  }
  printf("footprint_tiny: %zu bytes in 100 blocks\n", total);
  for (int i = 0; i < 100; i++) free(p[i]);
  return 0;
}
