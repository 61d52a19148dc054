/*
 * sched/copus's own SchedulerParameters keys (copus_*). Plain C, no Slurm:
 * included by sched_copus.h and by tests/test-plugin-sched.c, which calls
 * the parser without a slurmctld.
 */
#ifndef COPUS_PLUGIN_PARAMS_H
#define COPUS_PLUGIN_PARAMS_H

#include <stdbool.h>

#include <copus/policy.h>

/* The plugin's own SchedulerParameters keys (all start with copus_). */
struct copus__params {
	int interval;		/* copus_interval: seconds between rounds */
	int restart_delay;	/* copus_restart_delay: seconds between two
				 * rescales of one job */
	double restart_cost;	/* copus_restart_cost: seconds of progress a
				 * rescale costs a job, as the policy counts
				 * (with restart_measured, until one of the
				 * plugin's rescales is measured) */
	bool restart_measured;	/* copus_restart_cost=measured[:S]: the
				 * policy counts the mean cost of the
				 * plugin's last rescales (rescale.h) */
	int ckpt_deadline;	/* copus_checkpoint_deadline: seconds a job has
				 * to checkpoint when asked */
	double fairness;	/* copus_fairness: Pollux's p, in [-10, 1] */
	double fairshare;	/* copus_fairshare: weight of the users'
				 * fair-share factors in the policies that
				 * weigh them (copus), in [0, 10] */
	int max_jobs;		/* copus_max_jobs: pending jobs per round */
	int hint_check;		/* copus_hint_check: seconds of a run seen
				 * before its hint's claim is judged */
	int user_cap;		/* copus_max_gpus_per_user: GPUs one user's
				 * jobs may hold together; 0: no cap */
	int yield_us;		/* copus_yield_interval: microseconds a phase
				 * holds slurmctld's locks before it lets
				 * them go for a moment; 0: never */
	int yield_sleep_us;	/* copus_yield_sleep: microseconds it leaves
				 * them free */
	char policy[128];	/* copus_policy: the core policy's name and
				 * options ("sia:p=-0.5,lambda_n=1.1") */
	/* copus_planner_gpus: the file of the planner's GPU constants
	 * (copus/planner.h's JSON format), an absolute path; "": the
	 * built-in constants of each GPU type. */
	char planner_gpus[256];
	/* SchedulerParameters holds sched_interval=-1: Slurm's own FIFO
	 * pass starts no job, so only the plugin's starts place a job. */
	bool fifo_off;
};

/* Sets the defaults. */
void copus__params_default(struct copus__params *p);

/*
 * The core policy's parameters from the plugin's: every policy gets the
 * same ones (those that do not use one ignore it), whatever its name.
 */
void copus__policy_params(const struct copus__params *p,
			  copus_policy_params *prm);

/*
 * Parses SchedulerParameters (comma separated, may be NULL) into *p, from
 * the defaults. Keys that do not start with "copus_" belong to Slurm and
 * are skipped. Every bad copus_ key or value is reported through
 * report(msg, arg) with a message naming the key, the value and the value
 * that stays in effect (the default, or the key's last good value earlier
 * in the list). Returns the number of errors.
 */
int copus__params_parse(const char *sched_params, struct copus__params *p,
			void (*report)(const char *msg, void *arg), void *arg);

/*
 * What sched/copus needs of the rest of slurm.conf, copied out of Slurm's
 * configuration so that the checks below run without a slurmctld.
 */
struct copus__slurm_view {
	const char *sched_params;	/* SchedulerParameters */
	int cr_memory;			/* SelectTypeParameters=CR_*_Memory */
	int def_mem;			/* DefMemPerCPU, DefMemPerNode or
					 * DefMemPerGPU, global or on every
					 * partition */
	const char *requeue_exit;	/* RequeueExit, NULL when unset */
	int job_requeue;		/* JobRequeue */
	const char *job_submit;		/* JobSubmitPlugins, NULL when unset */
};

/*
 * Checks the settings sched/copus relies on and reports each one missing
 * through report(msg, arg), saying what goes wrong without it. Returns the
 * number of warnings.
 */
int copus__config_check(const struct copus__slurm_view *v,
			void (*report)(const char *msg, void *arg), void *arg);

/* Whether a Slurm list of numbers and ranges ("1-10,75") holds n. */
int copus__list_has(const char *list, long n);

#endif /* COPUS_PLUGIN_PARAMS_H */
