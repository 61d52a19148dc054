/*
 * sched/copus internals that do not depend on Slurm: the plugin's
 * SchedulerParameters and what the plugin derives from a job's hint for
 * the core policy. Kept apart from sched_copus.c so that tests can call them
 * without a slurmctld.
 */
#ifndef COPUS_PLUGIN_SCHED_H
#define COPUS_PLUGIN_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "copus/hint.h"
#include "copus/model.h"
#include "copus/policy.h"

/* The plugin's own SchedulerParameters keys (all start with copus_). */
struct copus__params {
	int interval;		/* copus_interval: seconds between rounds */
	int restart_delay;	/* copus_restart_delay: seconds between two
				 * rescales of one job */
	int restart_cost;	/* copus_restart_cost: seconds of progress a
				 * rescale costs a job, as the policy counts */
	int ckpt_deadline;	/* copus_checkpoint_deadline: seconds a job has
				 * to checkpoint when asked */
	double fairness;	/* copus_fairness: Pollux's p, in [-10, 1] */
	int max_jobs;		/* copus_max_jobs: pending jobs per round */
	char policy[32];	/* copus_policy: the core policy's name */
};

/* Sets the defaults. */
void copus__params_default(struct copus__params *p);

/*
 * Parses SchedulerParameters (comma separated, may be NULL). Keys that do
 * not start with "copus_" belong to Slurm and are skipped. Every bad copus_
 * key or value is reported through report(msg, arg) with a message naming
 * the key and the value, and leaves that setting at its default. Returns
 * the number of errors.
 */
int copus__params_parse(const char *sched_params, struct copus__params *p,
			void (*report)(const char *msg, void *arg), void *arg);

/*
 * The per-type goodput models of a job from its last good hint: models[t]
 * (t < ntypes) gets the hint's throughput parameters for type_names[t], or
 * those published as "default" when the job has none for that type, with
 * the hint's gradient statistics and batch limits; ptrs[t] points to it, or
 * is NULL when the hint says nothing about type t or the model does not
 * pass copus_model_check(). Returns the number of types with a model.
 */
int copus__hint_models(const copus_hint *h, const char *const *type_names,
		       int ntypes, copus_model *models,
		       const copus_model **ptrs);

/*
 * Seconds the job still needs, from its hint's progress and target and the
 * progress rate observed since its current run's first hint (rate, in
 * progress units per second): -1 when the target is unknown or the rate is
 * not positive.
 */
double copus__remaining(const copus_hint *h, double rate);

/*
 * How a decision is asked of Slurm 22.05, which gives every node of a job
 * the same GPU count (tres_per_node): the GPUs per node are the fewest the
 * decision puts on any of its nodes. Returns that count (0 when there is no
 * slot); a decision with unequal counts is thus applied a little smaller
 * than decided, never larger.
 */
int copus__slots_per_node(const copus_slot *slots, int n);

/*
 * Goodput speedup of the model on nodes x per_node GPUs over one GPU, each
 * with its best batch; 0 when it cannot be computed.
 */
double copus__model_speedup(const copus_model *m, int nodes, int per_node);

#endif /* COPUS_PLUGIN_SCHED_H */
