/*
 * slurmctld's locks as sched/copus takes them: lock_slurmctld() and
 * unlock_slurmctld(), timed, so that stats.h counts how long each phase of
 * a round waited for them and held them.
 */
#ifndef COPUS_PLUGIN_LOCKS_H
#define COPUS_PLUGIN_LOCKS_H

#include <stdbool.h>
#include <time.h>

#include "slurm-compat.h"
#include "stats.h"

/*
 * One taking of the locks: when they were asked for and when they came, and
 * the thread's use of the CPU when they came.
 */
struct copus__lock_clock {
	slurmctld_lock_t locks;
	struct timespec asked, got;
	struct copus__lock_cpu cpu_got;
};

/* Takes locks for the phase, noting the times in c. */
void copus__lock(struct copus__lock_clock *c, slurmctld_lock_t locks);

/* Releases c's locks and counts the wait and the hold into l. */
void copus__unlock(struct copus__lock_clock *c, struct copus__lock_stats *l);

/*
 * Once c's locks have been held yield_us or more (0: never), releases them,
 * leaves them free sleep_us, and takes them again, counting the hold, the
 * new wait and a yield into l. Returns whether it did: the caller then
 * finds again, by id, every record it had read. Between two calls, the
 * caller must hold no pointer into Slurm's records.
 */
bool copus__lock_yield(struct copus__lock_clock *c, struct copus__lock_stats *l,
		       long yield_us, long sleep_us);

#endif /* COPUS_PLUGIN_LOCKS_H */
