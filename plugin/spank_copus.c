/*
 * spank_copus: the job options of copus for sbatch, salloc and srun.
 *
 *   --elastic=MIN-MAX    the job is elastic: copus may give it between MIN
 *                        and MAX GPUs in total (MIN-MAX, or N for exactly N)
 *   --gpu-types=LIST     the GPU types (GRES types) the job accepts, comma
 *                        separated, for example a100,v100
 *   --gpu-multiple=N     the job runs only on a multiple of N GPUs (its
 *                        model spans N GPUs per replica: tensor x pipeline
 *                        parallelism); copus never gives it another count
 *
 * The values are checked when the job is submitted; a bad value makes the
 * submission fail with a message that says what is wrong. --elastic is for
 * batch jobs only: sched/copus resizes a job by requeueing it, which srun
 * and salloc cannot survive, so they refuse it. Good values are
 * put in the job control environment (spank_job_control_setenv) as
 * COPUS_ELASTIC=MIN-MAX, COPUS_GPU_TYPES=LIST and COPUS_GPU_MULTIPLE=N,
 * which slurmctld keeps in
 * the job record (job_ptr->spank_job_env) where sched/copus reads them.
 *
 * The admin's arguments in plugstack.conf:
 *   checkpoint_interval=SECONDS
 *                        every task of every job gets COPUS_CKPT_INTERVAL=
 *                        SECONDS in its environment unless the job set it
 *                        itself: a libcopus job then checkpoints that often,
 *                        and a node failure loses at most that much work
 *
 * Built against the public <slurm/spank.h> only; add to plugstack.conf:
 *   optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_copus.so
 */
#define _GNU_SOURCE /* program_invocation_short_name */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "options.h"

SPANK_PLUGIN(copus, 1);

/* What the options said, kept until the job control environment is set. */
static char _elastic[64];
static char _types[COPUS__TYPES_MAX * (COPUS__TYPE_LEN + 1)];
static char _multiple[16];
/* The admin's checkpoint_interval (plugstack.conf), "" when not given. */
static char _ckpt_interval[32];
/* The task environment variable libcopus reads the interval from. */
#define COPUS__ENV_CKPT_INTERVAL "COPUS_CKPT_INTERVAL"
/* The longest interval libcopus accepts: 30 days. */
#define _CKPT_INTERVAL_MAX (30 * 86400.0)

static int _opt_elastic(int val, const char *optarg, int remote);
static int _opt_types(int val, const char *optarg, int remote);
static int _opt_multiple(int val, const char *optarg, int remote);

static struct spank_option _options[] = {
	{ "elastic", "MIN-MAX",
	  "Elastic job: copus gives it between MIN and MAX GPUs in total "
	  "(N alone means exactly N).", 1, 0, _opt_elastic },
	{ "gpu-types", "LIST",
	  "GPU types the job accepts, comma separated (e.g. a100,v100).",
	  1, 0, _opt_types },
	{ "gpu-multiple", "N",
	  "The job runs only on a multiple of N GPUs (its model spans N GPUs "
	  "per replica); copus gives it no other count.", 1, 0,
	  _opt_multiple },
	SPANK_OPTIONS_TABLE_END
};

static int _opt_elastic(int val, const char *optarg, int remote)
{
	char why[128];
	int min, max;

	if (copus__parse_elastic(optarg, &min, &max, why, sizeof(why))) {
		slurm_error("copus: --elastic=%s: %s", optarg ? optarg : "",
			    why);
		return -1;
	}
	snprintf(_elastic, sizeof(_elastic), "%d-%d", min, max);
	return 0;
}

static int _opt_types(int val, const char *optarg, int remote)
{
	char why[128];

	if (copus__parse_types(optarg, _types, sizeof(_types), why,
			       sizeof(why))) {
		slurm_error("copus: --gpu-types=%s: %s", optarg ? optarg : "",
			    why);
		return -1;
	}
	return 0;
}

static int _opt_multiple(int val, const char *optarg, int remote)
{
	char why[128];
	int n;

	if (copus__parse_multiple(optarg, &n, why, sizeof(why))) {
		slurm_error("copus: --gpu-multiple=%s: %s",
			    optarg ? optarg : "", why);
		return -1;
	}
	snprintf(_multiple, sizeof(_multiple), "%d", n);
	return 0;
}

/* The plugin's arguments in plugstack.conf; -1 names what is wrong. */
static int _args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		const char *v;
		char *end;
		double s;

		if (strncmp(av[i], "checkpoint_interval=", 20) != 0) {
			slurm_error("copus: plugstack.conf: unknown argument "
				    "'%s' (known: checkpoint_interval=SECONDS)",
				    av[i]);
			return -1;
		}
		v = av[i] + 20;
		errno = 0;
		s = strtod(v, &end);
		if (errno || end == v || *end || !(s > 0) ||
		    s > _CKPT_INTERVAL_MAX ||
		    strlen(v) >= sizeof(_ckpt_interval)) {
			slurm_error("copus: plugstack.conf: checkpoint_interval="
				    "'%s' is not a number of seconds in (0, %g]",
				    v, _CKPT_INTERVAL_MAX);
			return -1;
		}
		snprintf(_ckpt_interval, sizeof(_ckpt_interval), "%s", v);
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	struct spank_option *opt;
	spank_err_t rc;

	if (_args(ac, av))
		return -1;

	/*
	 * sbatch ignores a static spank_options table, so the options are
	 * registered here, in every context (slurmd needs to know them too).
	 */
	for (opt = _options; opt->name; opt++) {
		rc = spank_option_register(sp, opt);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("copus: cannot register --%s: %s",
				    opt->name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	spank_err_t rc;

	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
		return 0;
	/*
	 * srun inside a job starts a step of it: the job's own options reach
	 * it through the environment and concern the job, not the step.
	 */
	if (ctx == S_CTX_LOCAL && getenv("SLURM_JOB_ID"))
		return 0;
	/* sbatch and salloc share the allocator context: tell them apart. */
	if (_elastic[0] &&
	    (ctx == S_CTX_LOCAL ||
	     strcmp(program_invocation_short_name, "salloc") == 0)) {
		slurm_error("copus: --elastic works only with sbatch: an elastic "
			    "job is resized by requeueing it, and an interactive "
			    "job (%s) cannot be requeued",
			    ctx == S_CTX_LOCAL ? "srun" : "salloc");
		return -1;
	}
	if (_types[0] && !_elastic[0]) {
		/*
		 * A rigid job names its GPU type with --gres=gpu:TYPE:N;
		 * --gpu-types is for jobs whose type copus chooses.
		 */
		slurm_error("copus: --gpu-types needs --elastic (a rigid job "
			    "names its type in --gres=gpu:TYPE:N)");
		return -1;
	}
	if (_elastic[0]) {
		rc = spank_job_control_setenv(sp, COPUS__ENV_ELASTIC, _elastic,
					      1);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("copus: cannot pass --elastic to the "
				    "scheduler: %s", spank_strerror(rc));
			return -1;
		}
	}
	if (_multiple[0]) {
		rc = spank_job_control_setenv(sp, COPUS__ENV_MULTIPLE,
					      _multiple, 1);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("copus: cannot pass --gpu-multiple to the "
				    "scheduler: %s", spank_strerror(rc));
			return -1;
		}
	}
	if (_types[0]) {
		rc = spank_job_control_setenv(sp, COPUS__ENV_TYPES, _types, 1);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("copus: cannot pass --gpu-types to the "
				    "scheduler: %s", spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

/*
 * In each task (slurmstepd, the batch script included): the admin's
 * checkpoint interval, unless the job's environment already has one.
 */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	spank_err_t rc;

	if (!_ckpt_interval[0])
		return 0;
	rc = spank_setenv(sp, COPUS__ENV_CKPT_INTERVAL, _ckpt_interval, 0);
	if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS)
		slurm_error("copus: cannot set %s: %s", COPUS__ENV_CKPT_INTERVAL,
			    spank_strerror(rc));
	return 0;
}
