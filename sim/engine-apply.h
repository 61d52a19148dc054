/*
 * A round's decisions applied to the jobs of copus-sim's engine
 * (engine-apply.c), private to the engine: engine.c calls it, and it calls
 * engine-job.c, nothing of engine.c.
 */
#ifndef COPUS_SIM_ENGINE_APPLY_H
#define COPUS_SIM_ENGINE_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <copus/policy.h>

#include "engine-job.h"

/* What the application of a round's decisions reads of the simulation. */
struct sim_apply {
	const copus_node *nodes; /* the N nodes, their GPUs */
	int N;
	bool equal_per_node;     /* --equal-per-node (sim_opts) */
	bool moves_jobs;         /* the policy's trait */
	double now;              /* the round's time */
	double min_run;          /* --min-run (sim_opts) */
	double restart_delay;    /* a restart's cost unless the job's own */
	/* --restart-delays: each allocation costs one of these, drawn with
	 * rng (NULL: restart_delay). */
	const struct sim_delays *delays;
	uint64_t *rng;
	int *used;               /* room for N GPU counts */
	int *part;               /* room for a count per decision */
};

/*
 * Whether a running job is held where it is at time now: moved at least
 * once, it has trained less than min_run seconds (--min-run) on its GPUs
 * since, its restart paid, as sched/copus leaves a job alone for
 * copus_restart_delay after Slurm starts a run that a rescale began (a
 * job's first run is not held). The policy is told so (copus_job.keep).
 */
bool copus__sim_held(double min_run, double now, const struct sjob *j);

/*
 * Applies the na decisions dec (dec[q] for jobs[idx[q]]): a job whose GPUs
 * changed takes its new placement and pays its restart, or stops. With
 * a->equal_per_node, each decision as sched/copus asks Slurm for it: its
 * largest part with the same GPUs on each node (copus_even_slots); a
 * running job keeps its GPUs where the plugin leaves it (that part is its
 * own shape and the policy does not move jobs, or goes nowhere or the
 * other way than the decision, or it has trained less than a->min_run
 * seconds on them); a job given GPUs that a kept job still holds goes back
 * to its own, or waits.
 */
void copus__sim_apply(const struct sim_apply *a, struct sjob *jobs,
		      const size_t *idx, const copus_decision *dec, size_t na);

#endif /* COPUS_SIM_ENGINE_APPLY_H */
