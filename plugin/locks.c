/* slurmctld's locks, timed (locks.h). */
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
