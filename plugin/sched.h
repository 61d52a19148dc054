/*
 * sched/copus internals that do not depend on Slurm: the plugin's
 * SchedulerParameters and the placement of pending jobs on a snapshot of
 * the cluster. Kept apart from sched_copus.c so that tests can call them
 * without a slurmctld.
 */
#ifndef COPUS_PLUGIN_SCHED_H
#define COPUS_PLUGIN_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* The plugin's own SchedulerParameters keys (all start with copus_). */
struct copus__params {
	int interval;		/* copus_interval: seconds between rounds */
	int restart_delay;	/* copus_restart_delay: seconds between two
				 * rescales of one job */
	int ckpt_deadline;	/* copus_checkpoint_deadline: seconds a job has
				 * to checkpoint when asked */
	double fairness;	/* copus_fairness: Pollux's p, in [-10, 1] */
	int max_jobs;		/* copus_max_jobs: pending jobs per round */
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

/* One node as the scheduler sees it in a round. */
struct copus__node {
	char type[16];		/* GPU type ("" when untyped or no GPUs) */
	int gpus;		/* GPUs configured */
	int gpus_free;		/* GPUs not allocated */
	int usable;		/* up, not drained, not failing */
};

/* One pending job. */
struct copus__job {
	uint32_t id;
	uint32_t priority;
	int64_t submit;
	int part;		/* partition index (jobs of one partition
				 * start in priority order) */
	int nodes;		/* nodes requested */
	int gpus_per_node;	/* GPUs per node requested (0: none) */
	char type[16];		/* GPU type requested ("" = any) */
	char types[8][16];	/* accepted types of an elastic job */
	int ntypes;
	int elastic_min, elastic_max;	/* 0 when rigid */
	const uint8_t *eligible;	/* node_count flags: partition, not
					 * excluded, required if any */
};

enum copus__verdict {
	COPUS__START = 1,	/* start on the chosen nodes */
	COPUS__WAIT_RESOURCES,	/* no room now */
	COPUS__WAIT_PRIORITY,	/* a job of higher priority waits first */
	COPUS__NEVER,		/* can never fit this cluster as configured */
};

struct copus__decision {
	uint32_t id;
	enum copus__verdict verdict;
	int *nodes;		/* node indexes for COPUS__START (job.nodes) */
};

/*
 * The interim policy until the core policy interface exists: strict
 * priority order per partition (priority, then submission, then id), each
 * job placed best-fit on the usable eligible nodes with enough free GPUs of
 * an accepted type. A job that does not fit blocks the lower-priority jobs
 * of its partition (they wait with COPUS__WAIT_PRIORITY), so rigid jobs
 * start in priority order. nodes[] is updated (free GPUs). jobs[] is
 * sorted in place into priority order and dec[i] is the decision for
 * jobs[i];
 * dec[i].nodes points into node_buf, which must hold the sum of the jobs'
 * node counts. Returns the number of decisions, or a negative copus status.
 */
int copus__place_priority(struct copus__node *nodes, int nnodes,
			  struct copus__job *jobs, int njobs,
			  struct copus__decision *dec, int *node_buf,
			  size_t node_buf_len);


/* A running elastic job as the interim rescale rule sees it. */
struct copus__running {
	uint32_t id;
	int node;		/* node index (single-node jobs only) */
	int nodes;		/* nodes allocated */
	int gpus_per_node;	/* GPUs per node now */
	int elastic_min, elastic_max;	/* GPUs in total; 0 when rigid */
	int64_t since;		/* start, or last size change */
};

/*
 * The interim rescale rule until the core policy interface exists, for
 * single-node elastic jobs: when a job waits for resources (blocked, with
 * nodes[] after placement), shrink one elastic job on a node of a type the
 * blocked job accepts just enough for it to fit, never below its minimum;
 * when nothing waits, grow elastic jobs into the free GPUs of their own node,
 * up to their maximum. Jobs changed less than restart_delay seconds ago are
 * left alone. target[i] gets the new GPUs per node of run[i], or 0 for no
 * change. Returns the number of jobs to rescale, or a negative status.
 */
int copus__rescale_interim(const struct copus__node *nodes, int nnodes,
			   const struct copus__running *run, int nrun,
			   const struct copus__job *blocked, int64_t now,
			   int restart_delay, int *target);

#endif /* COPUS_PLUGIN_SCHED_H */
