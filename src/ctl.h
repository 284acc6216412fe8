/*
 * ctl.h — control by name (hak_ctl) and the periodic outputs.
 *
 * Owns: the name space of hak_ctl (docs/ctl.md), and the report thread
 * that writes statistics on a signal or a timer and time-based heap
 * profile dumps. Promises: everything here is a cold path; the report
 * thread exists only when one of HAKMEM_STATS_SIGNAL,
 * HAKMEM_STATS_INTERVAL_MS or HAKMEM_PROF_INTERVAL_MS is set; signal
 * handlers only set a flag. May call: options, stats, prof, api
 * (hak_collect, hak_stats_get, hak_prof_dump, hak_version), os, init.
 */
#ifndef HAK_CTL_H
#define HAK_CTL_H

#include "internal.h"

/* From init, once malloc works (pthread_create allocates): install the
 * HAKMEM_STATS_SIGNAL handler and start the report thread if any periodic
 * option is set; otherwise nothing. */
void ctl_start(void);
/* fork (init.c): hold the statistics snapshot lock across it. */
void ctl_fork_prepare(void);
void ctl_fork_parent(void);
void ctl_fork_child(void);

#endif
