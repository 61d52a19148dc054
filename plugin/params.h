/*
 * sched/copus's own SchedulerParameters keys (copus_*). Plain C, no Slurm:
 * included by sched_copus.h and by tests/test-plugin-sched.c, which calls
 * the parser without a slurmctld.
 */
#ifndef COPUS_PLUGIN_PARAMS_H
#define COPUS_PLUGIN_PARAMS_H

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

#endif /* COPUS_PLUGIN_PARAMS_H */
