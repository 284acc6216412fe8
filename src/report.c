/*
 * report.c — the error report (see report.h). Kept apart from foreign.c
 * (the glibc forwarder) so that every component can report without
 * depending on the next allocator.
 */
#include "report.h"
#include "options.h"
#include "os.h"

#include <stdlib.h>

void report_error(const char *call, const void *p, const char *what) {
  if (opt.on_error == HAK_ON_ERROR_IGNORE) return;
  char buf[32];
  os_fmt_hex(buf, (uintptr_t)p);
  os_write_err("hakmem: ");
  os_write_err(call);
  os_write_err("(): ");
  os_write_err(what);
  os_write_err(" ");
  os_write_err(buf);
  os_write_err("\n");
  if (opt.on_error == HAK_ON_ERROR_ABORT) abort();
}
