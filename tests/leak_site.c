/*
 * leak_site — a program that exits holding memory it never freed, for
 * test_prof_leaks.sh: leak_site() keeps 16 MiB in 1 KiB blocks, and
 * churn_site() allocates and frees another 16 MiB, which the leak report
 * must not show. Built with exported symbols, so that the report can name
 * the sites.
 */
#include <stdlib.h>
#include <string.h>

static void *volatile leak_sink; /* keeps the compiler from dropping the calls */

__attribute__((noinline)) void *leak_site(size_t n) {
  void *p = malloc(n);
  if (p != NULL) memset(p, 1, n);
  return p;
}

__attribute__((noinline)) void churn_site(size_t n) {
  void *p = malloc(n);
  if (p != NULL) memset(p, 2, n);
  leak_sink = p;
  free(p);
}

int main(void) {
  for (int i = 0; i < 16384; i++) leak_sink = leak_site(1024);
  for (int i = 0; i < 16384; i++) churn_site(1024);
  return 0;
}
