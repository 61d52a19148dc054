/* slurmctld's locks, timed (locks.h). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "locks.h"

static double _us(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1e6 + (b->tv_nsec - a->tv_nsec) / 1e3;
}

/* The calling thread's CPU time and context switches so far (zeros where
 * the system cannot tell). */
static void _cpu(struct copus__lock_cpu *cpu)
{
	struct rusage ru = { 0 };

#ifdef RUSAGE_THREAD
	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		memset(&ru, 0, sizeof(ru));
#endif
	cpu->cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
		      ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
	cpu->preempted = ru.ru_nivcsw;
	cpu->blocked = ru.ru_nvcsw;
}

void copus__lock(struct copus__lock_clock *c, slurmctld_lock_t locks)
{
	c->locks = locks;
	clock_gettime(CLOCK_MONOTONIC, &c->asked);
	lock_slurmctld(locks);
	clock_gettime(CLOCK_MONOTONIC, &c->got);
	_cpu(&c->cpu_got);
}

void copus__unlock(struct copus__lock_clock *c, struct copus__lock_stats *l)
{
	struct copus__lock_cpu held;
	struct timespec now;

	_cpu(&held);
	clock_gettime(CLOCK_MONOTONIC, &now);
	unlock_slurmctld(c->locks);
	held.cpu_us -= c->cpu_got.cpu_us;
	held.preempted -= c->cpu_got.preempted;
	held.blocked -= c->cpu_got.blocked;
	copus__lock_count(l, _us(&c->asked, &c->got), _us(&c->got, &now),
			  &held);
}

bool copus__lock_yield(struct copus__lock_clock *c, struct copus__lock_stats *l,
		       long yield_us, long sleep_us)
{
	struct timespec now;

	if (yield_us <= 0)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (_us(&c->got, &now) < yield_us)
		return false;
	copus__unlock(c, l);
	l->yields++;
	if (sleep_us > 0)
		usleep(sleep_us);
	copus__lock(c, c->locks);
	return true;
}
