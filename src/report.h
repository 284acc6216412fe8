/*
 * report.h — telling the user about a bad call.
 *
 * Owns: the one error report of the allocator ("hakmem: free(): double free
 * of 0x..."), and what follows it (HAKMEM_ON_ERROR). Promises: never
 * allocates and never uses stdio (reports are written with write(2)), so it
 * is safe on any path, with any allocator lock held.
 * May call: os (stderr), options (the on_error mode).
 */
#ifndef HAK_REPORT_H
#define HAK_REPORT_H

#include "internal.h"

/* "hakmem: <call>(): <what> 0x..." on stderr, then what HAKMEM_ON_ERROR
 * says: abort (default), warn (go on; the call does nothing) or ignore (not
 * even the message). */
void report_error(const char *call, const void *p, const char *what) HAK_COLD;
HAK_INLINE void report_invalid(const char *call, const void *p) { report_error(call, p, "invalid pointer"); }

#endif
