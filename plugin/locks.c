/* slurmctld's locks, timed (locks.h). */
#include <unistd.h>

#include "locks.h"

static double _us(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1e6 + (b->tv_nsec - a->tv_nsec) / 1e3;
}

void copus__lock(struct copus__lock_clock *c, slurmctld_lock_t locks)
{
	c->locks = locks;
	clock_gettime(CLOCK_MONOTONIC, &c->asked);
	lock_slurmctld(locks);
	clock_gettime(CLOCK_MONOTONIC, &c->got);
}

void copus__unlock(struct copus__lock_clock *c, struct copus__lock_stats *l)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	unlock_slurmctld(c->locks);
	copus__lock_count(l, _us(&c->asked, &c->got), _us(&c->got, &now));
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
