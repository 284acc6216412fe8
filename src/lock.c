/*
 * lock.c — the contended halves of lock.h's mutex: sleep on the lock word
 * until it is released, wake one sleeper. May call: the futex system call.
 */
#include "lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Mark the lock contended (2) whenever we take it after a wait: another
 * thread may still sleep on it, and its release must wake that one. A
 * spurious or interrupted wait just loops. */
void lock_wait(hak_lock_t *l) {
  int e = errno; /* a malloc that succeeds leaves errno alone */
  while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0)
    syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2u, NULL, NULL, 0);
  errno = e;
}

void lock_wake(hak_lock_t *l) {
  int e = errno;
  syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  errno = e;
}
