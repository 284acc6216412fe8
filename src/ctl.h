/*
 * ctl.h — control by name (hak_ctl) and the periodic outputs.
 *
 * Owns: the name space of hak_ctl (docs/ctl.md), and the report thread
 * that writes statistics on a signal or a timer and time-based heap
 * profile dumps. Promises: everything here is a cold path; the report
 * thread exists only when one of HAKMEM_STATS_SIGNAL,
 * HAKMEM_STATS_INTERVAL_MS or HAKMEM_PROF_INTERVAL_MS is set; signal
 * handlers only set a flag. May call: options, stats (stats_get, the
 * report), prof and prof_dump (hak_prof_dump), alloc (alloc_collect), os,
 * init (init_ensure, and the hook registration); never api: the version
 * string is internal.h's HAK_VERSION_STRING.
 */
#ifndef HAK_CTL_H
#define HAK_CTL_H

#include "internal.h"

/* Register ctl's hooks with init (api.c's constructor calls it, so every
 * link of the library has it): once start-up is done and malloc works
 * (pthread_create allocates), install the HAKMEM_STATS_SIGNAL handler and
 * start the report thread if any periodic option is set; at fork, hold
 * the statistics snapshot lock across it, outermost. */
void ctl_register(void);

#endif
