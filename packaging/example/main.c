/* Built against an installed hakmem by test_install.sh (pkg-config and
 * CMake): malloc must be hakmem's once the library is linked. */
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  char *p = malloc(100);
  if (p == NULL) return 1;
  strcpy(p, "hello");
  int ours = hak_owns(p);
  printf("%s from hakmem %s: owned=%d\n", p, hak_version(), ours);
  free(p);
  return ours ? 0 : 1;
}
