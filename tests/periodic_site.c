/*
 * periodic_site — drives the periodic outputs for test_periodic.sh.
 *   periodic_site threads         print the number of threads after a malloc
 *   periodic_site sleep MS        allocate, then sleep MS milliseconds
 *   periodic_site signal N        raise SIGUSR1 N times, 200 ms apart
 *   periodic_site churn MIB       allocate and free MIB MiB in 4 KiB blocks
 *   periodic_site title MS        overwrite every environment string with
 *                                 'x' (what setproctitle does in redis, nginx,
 *                                 postgres), then sleep MS milliseconds
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern char **environ;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  volatile char *keep = malloc(1000);
  keep[0] = 1;
  long arg = argc > 2 ? atol(argv[2]) : 0;
  if (strcmp(argv[1], "threads") == 0) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    if (d) closedir(d);
    printf("%d\n", n);
  } else if (strcmp(argv[1], "sleep") == 0) {
    sleep_ms(arg);
  } else if (strcmp(argv[1], "title") == 0) {
    for (char **e = environ; *e != NULL; e++) memset(*e, 'x', strlen(*e));
    sleep_ms(arg);
  } else if (strcmp(argv[1], "signal") == 0) {
    for (long i = 0; i < arg; i++) {
      raise(SIGUSR1);
      sleep_ms(200);
    }
  } else if (strcmp(argv[1], "churn") == 0) {
    for (long i = 0; i < arg * 256; i++) {
      volatile char *p = malloc(4096);
      p[0] = 1;
      free((void *)p);
    }
  } else {
    return 2;
  }
  free((void *)keep);
  return 0;
}
