/*
 * Phase 4 of a sched/copus round, outside every lock: the requests made
 * through slurmctld's own RPCs, as scontrol would, and the rescale
 * protocol. Included by sched_copus.c.
 */
#ifndef COPUS_PLUGIN_RESCALE_H
#define COPUS_PLUGIN_RESCALE_H

#include <stdbool.h>

struct copus__round;
struct copus__round_job;
struct copus__sched;

/*
 * Sets a pending elastic job's request to its decided cell, asks a running
 * elastic job to checkpoint, requeues a job that reported its checkpoint,
 * and keeps the table of rescales in flight: restarted, vanished, late and
 * stale entries.
 */
void copus__requests(struct copus__sched *s, struct copus__round *r);

/*
 * Whether a job with a rescale in flight changed since the last look
 * (copus__job_signature): it reported its checkpoint, its requeue
 * completed, it restarted or it ended. Looks at those jobs only, under
 * slurmctld's job read lock, so that it may look every COPUS__WATCH_MS
 * and the round that requeues or restarts the job comes as soon as it can
 * act. The first look at a rescale only notes its job.
 */
bool copus__rescales_changed(struct copus__sched *s);

/*
 * Logs the plan of a job's decided cell, when it has one, in the words of
 * the job's own log line (plans.h), as the job starts, is set to the cell
 * or is asked to go there (also used by actions.c).
 */
void copus__log_plan(const struct copus__round *r,
		     const struct copus__round_job *j);

#endif /* COPUS_PLUGIN_RESCALE_H */
