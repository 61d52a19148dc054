/*
 * libcopus: the API's argument checks, the allocation from the environment,
 * gradient statistics, the plan, hints, and the rescale state machine with
 * real processes (fork): a request during a step is honoured at its end,
 * the checkpoint is complete or absent, and a restart resumes.
 */
#include <copus_config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <copus/copus.h>
#include <copus/plan.h>

#include "harness.h"

static const char *const slurm_vars[] = {
	"SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_JOB_NUM_NODES",
	"SLURM_NNODES", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID",
	"SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE",
	"LOCAL_RANK", "COPUS_CKPT_DIR", "COPUS_SIGNAL", "COPUS_REQUEUE_EXIT",
	"COPUS_GPU_TYPE", "COPUS_SCONTROL", "PMIX_NAMESPACE", "COPUS_HINTS",
	"COPUS_CKPT_INTERVAL", "COPUS_DEBUG", "COPUS_NO_PMIX", "COPUS_JOB_ID",
	"COPUS_PLANNER_GPUS",
};

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(slurm_vars) / sizeof(*slurm_vars); i++)
		unsetenv(slurm_vars[i]);
}

static copus_config base_config(void)
{
	copus_config c = COPUS_CONFIG_INITIALIZER;

	c.limits = (copus_batch_limits){ 64, 2048, 4, 128, true };
	c.no_signal_handler = 1;
	return c;
}

static char tmpdir[256];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/copus-test-runtime-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}

/* ------------------------------------------------------------------------ */

static void test_bad_arguments(void)
{
	copus_config c = base_config();
	copus_ctx *ctx = NULL;
	copus_job_info info;
	copus_grad_stats g;
	copus_plan plan;
	copus_perf_params p;
	copus_hint h;
	copus_job_state st;
	copus_comms comms;
	int code;
	char blob[8];

	clear_env();
	ASSERT_STATUS(copus_init(NULL, &ctx), COPUS_EINVAL);
	ASSERT_STATUS(copus_init(&c, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_config_init(NULL, sizeof(c)), COPUS_EINVAL);
	ASSERT_STATUS(copus_config_init(&c, sizeof(c) - 1), COPUS_EINVAL);

	/* Every call with no context. */
	ASSERT_STATUS(copus_finalize(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_info(NULL, &info), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_begin(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_sync_begin(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_sync_end(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_local(NULL, 1), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_total(NULL, 1), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_dot(NULL, 1), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_end(NULL, 1, 0), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_stats_get(NULL, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_get(NULL, &plan), COPUS_EINVAL);
	ASSERT_STATUS(copus_perf_get(NULL, &p), COPUS_EINVAL);
	ASSERT_STATUS(copus_hint_get(NULL, &h), COPUS_EINVAL);
	ASSERT_STATUS(copus_publish(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_request_rescale(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_checkpoint(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_state(NULL, &st), COPUS_EINVAL);
	ASSERT_STATUS(copus_exit_code(NULL, &code), COPUS_EINVAL);
	ASSERT_STATUS(copus_bootstrap(NULL, blob, sizeof(blob)), COPUS_EINVAL);
	ASSERT_STATUS(copus_comms_create(NULL, &comms), COPUS_EINVAL);
	ASSERT_STATUS(copus_comms_destroy(NULL, &comms), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(copus_errmsg(NULL));

	/* A context, then NULL outputs and out-of-order calls. */
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	ASSERT_STATUS(copus_info(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_stats_get(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_get(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_perf_get(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_hint_get(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_state(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_exit_code(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_bootstrap(ctx, NULL, 8), COPUS_EINVAL);
	ASSERT_STATUS(copus_bootstrap(ctx, blob, 0), COPUS_EINVAL);
	ASSERT_STATUS(copus_bootstrap(ctx, blob, sizeof(blob)), COPUS_OK);
	ASSERT_STATUS(copus_comms_create(ctx, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_end(ctx, 8, 0), COPUS_ESTATE);
	ASSERT_STATUS(copus_sync_end(ctx), COPUS_ESTATE);
	ASSERT_STATUS(copus_sync_begin(ctx), COPUS_ESTATE);
	ASSERT_STATUS(copus_grad_local(ctx, 1), COPUS_ESTATE);
	ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
	ASSERT_STATUS(copus_grad_local(ctx, -1), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_local(ctx, NAN), COPUS_EINVAL);
	ASSERT_STATUS(copus_grad_total(ctx, INFINITY), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_end(ctx, 0, 0), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_end(ctx, 8, -1), COPUS_EINVAL);
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_ESTATE); /* no directory */
	ASSERT_STATUS(copus_step_end(ctx, 8, 0), COPUS_OK);
	ASSERT_STATUS(copus_grad_stats_get(ctx, &g), COPUS_ENODATA);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_ESTATE); /* no job */
	ASSERT_STATUS(copus_publish(ctx), COPUS_ESTATE);
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_ESTATE);
	CU_ASSERT(strstr(copus_errmsg(ctx), "checkpoint directory") != NULL);
	ASSERT_STATUS(copus_finalize(ctx), COPUS_OK);
}

static void expect_init_error(copus_config *c, int want, const char *needle)
{
	copus_ctx *ctx = (copus_ctx *)&ctx;
	int rc = copus_init(c, &ctx);

	if (rc != want)
		fprintf(stderr, "copus_init: %d, expected %d (%s)\n", rc, want,
			needle);
	CU_ASSERT_EQUAL(rc, want);
	CU_ASSERT_PTR_NULL(ctx);
	/* The context is gone; the reason is not. */
	if (strstr(copus_errmsg(NULL), needle) == NULL)
		fprintf(stderr, "copus_errmsg(NULL) = \"%s\" does not name %s\n",
			copus_errmsg(NULL), needle);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), needle));
}

static void test_bad_config(void)
{
	copus_config c;

	clear_env();
	c = base_config();
	c.size = 8;
	expect_init_error(&c, COPUS_EVERSION, "size");
	c = base_config();
	c.magic = 0;
	expect_init_error(&c, COPUS_EVERSION, "magic");
	c = base_config();
	c.version = 99;
	expect_init_error(&c, COPUS_EVERSION, "version");
	c = base_config();
	c.limits.init_batch = 0;
	expect_init_error(&c, COPUS_EINVAL, "init_batch");
	c = base_config();
	c.limits.max_batch = 10;
	expect_init_error(&c, COPUS_EINVAL, "max_batch");
	c = base_config();
	c.limits.min_local = 0;
	expect_init_error(&c, COPUS_EINVAL, "min_local");
	c = base_config();
	c.optimizer = (copus_optimizer)5;
	expect_init_error(&c, COPUS_EINVAL, "optimizer");
	c = base_config();
	c.pipeline_degree = 0;
	expect_init_error(&c, COPUS_EINVAL, "pipeline");
	c = base_config();
	c.n_layers = 3;
	expect_init_error(&c, COPUS_EINVAL, "layers");
	c = base_config();
	c.agree_interval = 0;
	expect_init_error(&c, COPUS_EINVAL, "agree_interval");
	c = base_config();
	c.noise_decay = 1.5;
	expect_init_error(&c, COPUS_EINVAL, "decay");
	c = base_config();
	c.exit_code = 300;
	expect_init_error(&c, COPUS_EINVAL, "exit");
	c = base_config();
	c.gpu_type = "a-very-long-gpu-type-name";
	expect_init_error(&c, COPUS_EINVAL, "gpu_type");
	/* Several ranks need a way to agree. */
	c = base_config();
	c.world = 2;
	c.rank = 0;
	expect_init_error(&c, COPUS_EINVAL, "agree");
	/* World not divisible by the model-parallel degrees. */
	c = base_config();
	c.world = 1;
	c.tensor_degree = 2;
	expect_init_error(&c, COPUS_EINVAL, "multiple");
}

static void test_bad_environment(void)
{
	copus_config c = base_config();

	clear_env();
	setenv("SLURM_PROCID", "zero", 1);
	expect_init_error(&c, COPUS_EINVAL, "SLURM_PROCID");
	clear_env();
	setenv("SLURM_JOB_ID", "12x", 1);
	expect_init_error(&c, COPUS_EINVAL, "SLURM_JOB_ID");
	clear_env();
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_PROCID", "2", 1);
	expect_init_error(&c, COPUS_EINVAL, "rank");
	clear_env();
	setenv("SLURM_RESTART_COUNT", "-1", 1);
	expect_init_error(&c, COPUS_EINVAL, "SLURM_RESTART_COUNT");
	clear_env();
	setenv("COPUS_SIGNAL", "HUP-ish", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_SIGNAL");
	clear_env();
	setenv("COPUS_CKPT_INTERVAL", "10min", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_CKPT_INTERVAL");
	clear_env();
	setenv("COPUS_CKPT_INTERVAL", "-5", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_CKPT_INTERVAL");
	clear_env();
	c.ckpt_interval = NAN;
	expect_init_error(&c, COPUS_EINVAL, "ckpt_interval");
	c.ckpt_interval = 0;
	clear_env();
	setenv("COPUS_DEBUG", "yes", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_DEBUG");
	clear_env();
	setenv("COPUS_HINTS", "maybe", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_HINTS");
	clear_env();
	setenv("COPUS_NO_PMIX", "x", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_NO_PMIX");
	/* A GPU type the hints could not carry as it is. */
	clear_env();
	setenv("COPUS_GPU_TYPE", "a100 sxm", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_GPU_TYPE");
	clear_env();
	c.gpu_type = "h100/80g";
	expect_init_error(&c, COPUS_EINVAL, "gpu_type");
	c.gpu_type = NULL;
	clear_env();
}

static int agree_noop(void *arg, int64_t *v, int n)
{
	(void)arg;
	(void)v;
	(void)n;
	return 0;
}

static void test_environment(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_job_info in;

	clear_env();
	setenv("SLURM_JOB_ID", "4242", 1);
	setenv("SLURM_RESTART_COUNT", "3", 1);
	setenv("SLURM_JOB_NUM_NODES", "2", 1);
	setenv("SLURM_NTASKS", "8", 1);
	setenv("SLURM_PROCID", "5", 1);
	setenv("SLURM_LOCALID", "1", 1);
	setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7", 1);
	setenv("COPUS_HINTS", "0", 1);
	c.agree = agree_noop;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	ASSERT_STATUS(copus_info(ctx, &in), COPUS_OK);
	CU_ASSERT_EQUAL(in.job_id, 4242);
	CU_ASSERT_EQUAL(in.restart_count, 3);
	CU_ASSERT_EQUAL(in.nodes, 2);
	CU_ASSERT_EQUAL(in.world, 8);
	CU_ASSERT_EQUAL(in.rank, 5);
	CU_ASSERT_EQUAL(in.local_rank, 1);
	CU_ASSERT_EQUAL(in.gpus_per_node, 4);
	CU_ASSERT_EQUAL(in.restored, 0);
	copus_finalize(ctx);

	/* torchrun's variables take precedence; the config over both. */
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "4", 1);
	setenv("SLURM_GPUS_ON_NODE", "2", 1);
	c.local_rank = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_info(ctx, &in), COPUS_OK);
	CU_ASSERT_EQUAL(in.rank, 2);
	CU_ASSERT_EQUAL(in.world, 4);
	CU_ASSERT_EQUAL(in.local_rank, 0);
	CU_ASSERT_EQUAL(in.gpus_per_node, 2);
	copus_finalize(ctx);
	clear_env();
}

static int reshard_noop(void *arg, int64_t step, const copus_ckpt_layout *old,
			const copus_ckpt_layout *now,
			const copus_ckpt_shard *mine,
			const copus_ckpt_shard *shards, int n_shards)
{
	(void)arg, (void)step, (void)old, (void)now, (void)mine;
	(void)shards, (void)n_shards;
	return 0;
}

/*
 * The hint says how many ranks make one replica of the model, so that the
 * scheduler never gives the job a count it cannot run on: tensor x
 * pipeline, or only tensor when a reshard callback splits the stages again
 * on any count; nothing for a model on one rank.
 */
static void test_hint_carries_the_granularity(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_hint h;

	clear_env();
	setenv("SLURM_JOB_ID", "4243", 1);
	setenv("SLURM_NTASKS", "4", 1);
	setenv("SLURM_PROCID", "0", 1);
	setenv("COPUS_HINTS", "0", 1);
	c.agree = agree_noop;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL(h.granularity, 0);
	copus_finalize(ctx);
	c.pipeline_degree = 2;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL(h.granularity, 2);
	copus_finalize(ctx);
	c.reshard = reshard_noop;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL(h.granularity, 0);
	copus_finalize(ctx);
	clear_env();
}

/* Feed exact expectations: the estimates come out exact. */
static void test_grad_stats_and_progress(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_grad_stats g;
	copus_job_info in;
	const double sqr = 2.0, tr = 512.0; /* |G|^2 and tr(Sigma_1) */
	const int local = 16, accum = 3;    /* 4 micro-batches of 16 */

	clear_env();
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	for (int s = 0; s < 50; s++) {
		ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
		for (int m = 0; m <= accum; m++)
			ASSERT_STATUS(copus_grad_local(ctx, sqr + tr / local),
				      COPUS_OK);
		ASSERT_STATUS(copus_sync_begin(ctx), COPUS_OK);
		ASSERT_STATUS(copus_sync_end(ctx), COPUS_OK);
		ASSERT_STATUS(copus_grad_total(ctx,
					       sqr + tr / (local * (accum + 1))),
			      COPUS_OK);
		ASSERT_STATUS(copus_step_end(ctx, local, accum), COPUS_OK);
	}
	ASSERT_STATUS(copus_grad_stats_get(ctx, &g), COPUS_OK);
	ASSERT_CLOSE(g.sqr, sqr, 1e-9);
	ASSERT_CLOSE(g.var, tr / 64.0, 1e-9);
	ASSERT_STATUS(copus_info(ctx, &in), COPUS_OK);
	CU_ASSERT_EQUAL(in.step, 50);
	CU_ASSERT_EQUAL(in.samples, 50 * 64);
	/* The batch is M0 = 64: every step counts one iteration. */
	ASSERT_CLOSE(in.progress, 50, 1e-9);
	copus_finalize(ctx);
}

/*
 * One process, one micro-batch a step: consecutive steps are the two
 * estimates. Without the dot product there is nothing to measure; with it
 * the estimates come out exact.
 */
static void test_grad_stats_of_consecutive_steps(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_grad_stats g;
	const double sqr = 2.0, tr = 512.0; /* |G|^2 and tr(Sigma_1) */
	const int local = 16;

	clear_env();
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	for (int s = 0; s < 5; s++) {
		ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
		ASSERT_STATUS(copus_grad_local(ctx, sqr + tr / local), COPUS_OK);
		ASSERT_STATUS(copus_grad_total(ctx, sqr + tr / local), COPUS_OK);
		ASSERT_STATUS(copus_step_end(ctx, local, 0), COPUS_OK);
	}
	ASSERT_STATUS(copus_grad_stats_get(ctx, &g), COPUS_ENODATA);
	ASSERT_STATUS(copus_grad_dot(ctx, 1.0), COPUS_ESTATE);
	for (int s = 0; s < 50; s++) {
		ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
		ASSERT_STATUS(copus_grad_local(ctx, sqr + tr / local), COPUS_OK);
		/* Independent noise: E[a.b] = |G|^2. */
		ASSERT_STATUS(copus_grad_dot(ctx, sqr), COPUS_OK);
		ASSERT_STATUS(copus_step_end(ctx, local, 0), COPUS_OK);
	}
	ASSERT_STATUS(copus_grad_stats_get(ctx, &g), COPUS_OK);
	ASSERT_CLOSE(g.sqr, sqr, 1e-9);
	ASSERT_CLOSE(g.var, tr / 64.0, 1e-9);
	ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
	ASSERT_STATUS(copus_grad_dot(ctx, NAN), COPUS_EINVAL);
	copus_finalize(ctx);
}

/*
 * copus_comms_shrink() decides from the plan alone before NCCL is called:
 * leaving ranks that cut a replica are refused, and a leaving rank gets
 * empty communicators, so both run on a machine without a GPU (the
 * communicator below is never used). The GPU path is test-runtime-nccl's.
 */
static void test_comms_shrink_without_nccl_calls(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_comms comms, out;
	static const int cut[] = { 3 }, replica[] = { 3, 2 }, outside[] = { 4 };
	static const int every[] = { 0, 1, 2, 3 };
	int dummy = 0;

	clear_env();
	/* 4 ranks, tensor 2: replicas {0, 1} and {2, 3}. */
	c.world = 4;
	c.tensor_degree = 2;
	c.agree = agree_noop;
	comms = (copus_comms){ &dummy, &dummy, &dummy, &dummy };
	for (int rank = 0; rank < 4; rank++) {
		int want_cut, want_replica;

		c.rank = rank;
		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
#ifdef HAVE_NCCL
		want_cut = COPUS_ERANGE;
		/* Only the leaving ranks return before NCCL is called. */
		want_replica = rank >= 2 ? COPUS_OK : -100;
#else
		want_cut = want_replica = COPUS_ESTATE;
#endif
		memset(&out, 0xff, sizeof(out));
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, cut, 1, &out),
			      want_cut);
		CU_ASSERT(out.world == NULL && out.data == NULL &&
			  out.pipeline == NULL && out.tensor == NULL);
		if (want_cut == COPUS_ERANGE) {
			const char *m = copus_errmsg(ctx);
			bool says = strstr(m, "whole data-parallel replicas");

			if (!says)
				fprintf(stderr, "rank %d: \"%s\"\n", rank, m);
			CU_ASSERT(says);
		}
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, every, 4, &out),
			      want_cut);
		if (want_replica != -100) {
			memset(&out, 0xff, sizeof(out));
			ASSERT_STATUS(copus_comms_shrink(ctx, &comms, replica, 2,
							 &out),
				      want_replica);
			CU_ASSERT(out.world == NULL && out.data == NULL &&
				  out.pipeline == NULL && out.tensor == NULL);
		}
#ifdef HAVE_NCCL
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, outside, 1, &out),
			      COPUS_EINVAL);
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, cut, 0, &out),
			      COPUS_EINVAL);
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, NULL, 1, &out),
			      COPUS_EINVAL);
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, cut, 1, &comms),
			      COPUS_EINVAL);
#else
		(void)outside;
#endif
		ASSERT_STATUS(copus_comms_shrink(ctx, NULL, cut, 1, &out),
			      COPUS_EINVAL);
		ASSERT_STATUS(copus_comms_shrink(ctx, &comms, cut, 1, NULL),
			      COPUS_EINVAL);
		ASSERT_STATUS(copus_comms_shrink(NULL, &comms, cut, 1, &out),
			      COPUS_EINVAL);
		copus_finalize(ctx);
	}
	clear_env();
}

static void test_plan(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_plan plan;
	copus_model m;
	copus_batch_plan bp;
	double gain;

	clear_env();
	/* No model: the tuned batch, split over the replicas. */
	c.world = 4;
	c.rank = 1;
	c.agree = agree_noop;
	c.limits.max_local = 8;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	ASSERT_STATUS(copus_plan_get(ctx, &plan), COPUS_OK);
	CU_ASSERT_EQUAL(plan.data_degree, 4);
	CU_ASSERT_EQUAL(plan.data_rank, 1);
	CU_ASSERT_EQUAL(plan.local, 8);
	CU_ASSERT_EQUAL(plan.accum_steps, 1);
	ASSERT_CLOSE(plan.batch, 64, 0);
	ASSERT_CLOSE(plan.lr_gain, 1, 1e-12);
	copus_finalize(ctx);

	/* With a prior model: copus_best_batch's answer, Adam's gain. */
	c = base_config();
	c.prior = (copus_perf_params){ 0.02, 0.001, 0.1, 0.01, 0.05, 0.005, 1.5 };
	c.optimizer = COPUS_OPT_ADAM;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	/*
	 * Give it gradient statistics (noise scale 64 * 10 / 1 = 640) in the
	 * warm-up steps, whose timings do not count: the prior stays.
	 */
	for (int s = 0; s < 2; s++) {
		ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
		for (int k = 0; k < 2; k++)
			copus_grad_local(ctx, 1.0 + 640.0 / 32);
		copus_grad_total(ctx, 1.0 + 640.0 / 64);
		ASSERT_STATUS(copus_step_end(ctx, 32, 1), COPUS_OK);
	}
	ASSERT_STATUS(copus_plan_get(ctx, &plan), COPUS_OK);
	m.perf = c.prior;
	m.limits = c.limits;
	ASSERT_STATUS(copus_grad_stats_get(ctx, &m.grad), COPUS_OK);
	ASSERT_CLOSE(m.grad.var, 10.0, 1e-9);
	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &bp), COPUS_OK);
	ASSERT_CLOSE(plan.batch, bp.batch, 1e-12);
	CU_ASSERT_EQUAL(plan.local, bp.local);
	CU_ASSERT_EQUAL(plan.accum_steps, bp.accum_steps);
	ASSERT_STATUS(copus_gain(&m.grad, 64, bp.batch, &gain), COPUS_OK);
	ASSERT_CLOSE(plan.lr_gain, sqrt(gain), 1e-12);
	copus_finalize(ctx);
}

static void test_pipeline_layers(void)
{
	static const double costs[] = { 1, 2, 3, 4, 5, 6 };
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_plan plan;
	int first[3] = { 0, 3, 5 }, count[3] = { 3, 2, 1 };

	clear_env();
	c.world = 6;
	c.pipeline_degree = 3;
	c.tensor_degree = 2;
	c.layer_costs = costs;
	c.n_layers = 6;
	c.agree = agree_noop;
	for (int r = 0; r < 6; r++) {
		c.rank = r;
		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
		ASSERT_STATUS(copus_plan_get(ctx, &plan), COPUS_OK);
		CU_ASSERT_EQUAL(plan.data_degree, 1);
		CU_ASSERT_EQUAL(plan.tensor_rank, r % 2);
		CU_ASSERT_EQUAL(plan.pipeline_rank, r / 2);
		/* The best split's largest stage is 4 + 5 = 9. */
		CU_ASSERT_EQUAL(plan.first_layer, first[r / 2]);
		CU_ASSERT_EQUAL(plan.n_layers, count[r / 2]);
		copus_finalize(ctx);
	}
}

/* ------------------------------------------------------------------------
 * Planned degrees
 * ------------------------------------------------------------------------ */

/* A transformer that one A100 holds. */
static const copus_planner_desc small_model = {
	.arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2, .layers = 4,
	.hidden = 256, .heads = 4, .seq_len = 128, .vocab = 1000,
};

/* One that needs at least four A100s (about 6.5 billion parameters). */
static const copus_planner_desc large_model = {
	.arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2, .layers = 24,
	.hidden = 4096, .heads = 32, .seq_len = 1024, .vocab = 32000,
};

/* The core planner's answer for a model, batch, cell and GPU. */
static int core_plan(const copus_planner_desc *d, int batch,
		     const copus_planner_gpu *g, int nodes, int gpn,
		     copus_planner_plan *out)
{
	static copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_cell cell = { nodes, gpn };
	copus_planner_model m;
	int n = 0;

	ASSERT_STATUS(copus_planner_layers(d, layers, COPUS_PLANNER_MAX_LAYERS,
					   &n), COPUS_OK);
	m = (copus_planner_model){ layers, n, d->dtype_bytes,
				   (int)d->arch - 1 };
	return copus_planner_best(&m, batch, g, &cell, NULL, out);
}

static copus_config planned_config(const copus_planner_desc *d, int world,
				   int rank)
{
	copus_config c = base_config();

	c.model = d;
	c.pipeline_degree = 0;
	c.tensor_degree = 0;
	c.world = world;
	c.rank = rank;
	c.agree = agree_noop;
	return c;
}

/*
 * Every rank computes the core planner's plan of the job's model, batch
 * and cell, and takes its degrees and its stages from it.
 */
static void test_planned_degrees_are_the_planners_on_every_rank(void)
{
	copus_planner_plan want, got, first;
	copus_planner_gpu g;
	copus_ctx *ctx;
	copus_plan plan;

	clear_env();
	setenv("COPUS_GPU_TYPE", "a100", 1);
	setenv("SLURM_JOB_NUM_NODES", "2", 1);
	copus_planner_gpu_default("a100", &g);
	ASSERT_STATUS(core_plan(&small_model, 64, &g, 2, 4, &want), COPUS_OK);
	/* Several stages on this cell, with the data ranks inside the
	 * pipeline ranks: the stages and that layout are tested too. */
	CU_ASSERT(want.degrees.pipeline > 1);
	CU_ASSERT_EQUAL(want.data_inner, 1);
	for (int r = 0; r < 8; r++) {
		copus_config c = planned_config(&small_model, 8, r);
		copus_plan_coords at;
		copus_plan_degrees d;

		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
		ASSERT_STATUS(copus_planned(ctx, &got), COPUS_OK);
		if (r == 0)
			first = got;
		CU_ASSERT(memcmp(&got, &first, sizeof(got)) == 0);
		CU_ASSERT(memcmp(&got.degrees, &want.degrees,
				 sizeof(want.degrees)) == 0);
		CU_ASSERT_EQUAL(got.micro_batches, want.micro_batches);
		CU_ASSERT(memcmp(got.first_layer, want.first_layer,
				 sizeof(want.first_layer)) == 0);
		ASSERT_CLOSE(got.seconds, want.seconds, 0);
		ASSERT_STATUS(copus_plan_get(ctx, &plan), COPUS_OK);
		CU_ASSERT_EQUAL(plan.data_degree, want.degrees.data);
		CU_ASSERT_EQUAL(plan.tensor_degree, want.degrees.tensor);
		CU_ASSERT_EQUAL(plan.pipeline_degree, want.degrees.pipeline);
		/* The plan's layout: data ranks inside pipeline ranks. */
		d = want.degrees;
		at.tensor_rank = r % d.tensor;
		at.data_rank = (r / d.tensor) % d.data;
		at.pipeline_rank = r / d.tensor / d.data;
		CU_ASSERT_EQUAL(plan.pipeline_rank, at.pipeline_rank);
		CU_ASSERT_EQUAL(plan.data_rank, at.data_rank);
		CU_ASSERT_EQUAL(plan.tensor_rank, at.tensor_rank);
		CU_ASSERT_EQUAL(plan.first_layer,
				want.first_layer[at.pipeline_rank]);
		CU_ASSERT_EQUAL(plan.n_layers,
				want.first_layer[at.pipeline_rank + 1] -
					want.first_layer[at.pipeline_rank]);
		copus_finalize(ctx);
	}
	clear_env();
}

/* The same model plans otherwise on other allocations: none on two GPUs,
 * the core planner's on four and on two nodes of four. */
static void test_planned_degrees_follow_the_world(void)
{
	static const struct {
		int nodes, world;
	} cells[] = { { 1, 4 }, { 2, 8 }, { 1, 8 } };
	copus_planner_plan want, got, seen[3];
	copus_planner_gpu g;
	copus_config c;
	copus_ctx *ctx;
	char nodes[8];
	bool differ = false;

	clear_env();
	copus_planner_gpu_default("a100", &g);
	setenv("COPUS_GPU_TYPE", "a100", 1);
	for (int i = 0; i < 3; i++) {
		snprintf(nodes, sizeof(nodes), "%d", cells[i].nodes);
		setenv("SLURM_JOB_NUM_NODES", nodes, 1);
		ASSERT_STATUS(core_plan(&large_model, 64, &g, cells[i].nodes,
					cells[i].world / cells[i].nodes,
					&want), COPUS_OK);
		c = planned_config(&large_model, cells[i].world, 0);
		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
		ASSERT_STATUS(copus_planned(ctx, &got), COPUS_OK);
		CU_ASSERT(memcmp(&got.degrees, &want.degrees,
				 sizeof(want.degrees)) == 0);
		CU_ASSERT_EQUAL(got.micro_batches, want.micro_batches);
		CU_ASSERT_EQUAL(got.degrees.data * got.degrees.tensor *
					got.degrees.pipeline,
				cells[i].world);
		seen[i] = got;
		copus_finalize(ctx);
	}
	/* Not one split for every cell: the planner decides per cell. */
	for (int i = 1; i < 3; i++)
		differ = differ || seen[i].degrees.tensor != seen[0].degrees.tensor ||
			 seen[i].degrees.pipeline != seen[0].degrees.pipeline;
	CU_ASSERT(differ);
	/* Two GPUs cannot hold it: the error names model, batch and cell. */
	setenv("SLURM_JOB_NUM_NODES", "1", 1);
	c = planned_config(&large_model, 2, 0);
	expect_init_error(&c, COPUS_ERANGE, "no parallel plan of transformer (24 layers, hidden 4096");
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "batch 64"));
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL),
				      "1 nodes x 2 a100 GPUs"));
	/* Ranks that do not fill their nodes evenly have no cell. */
	setenv("SLURM_JOB_NUM_NODES", "2", 1);
	c = planned_config(&small_model, 3, 0);
	expect_init_error(&c, COPUS_EINVAL, "3 ranks on 2 nodes");
	clear_env();
}

/* Bad combinations of a model and degrees are refused, naming them. */
static void test_planned_config_errors(void)
{
	copus_planner_desc bad = small_model;
	copus_config c;
	static const double costs[] = { 1, 2 };

	clear_env();
	c = base_config();
	c.pipeline_degree = 0;
	c.tensor_degree = 0;
	expect_init_error(&c, COPUS_EINVAL, "pipeline_degree 0");
	c = planned_config(&small_model, 1, 0);
	c.tensor_degree = 1;
	expect_init_error(&c, COPUS_EINVAL, "pipeline_degree 0");
	c = planned_config(&small_model, 1, 0);
	c.layer_costs = costs;
	c.n_layers = 2;
	expect_init_error(&c, COPUS_EINVAL, "n_layers 2");
	bad.heads = 0;
	c = planned_config(&bad, 1, 0);
	expect_init_error(&c, COPUS_EINVAL, "\"mdl.n\": 0");
	/* Even with fixed degrees the model must be one hints carry. */
	c = base_config();
	c.model = &bad;
	expect_init_error(&c, COPUS_EINVAL, "\"mdl.n\"");
	c = planned_config(&small_model, 1, 0);
	c.limits.init_batch = 64.5;
	c.limits.max_batch = 128;
	expect_init_error(&c, COPUS_EINVAL, "whole batch");
	clear_env();
}

/*
 * The job tells the scheduler its model; with planned degrees it names no
 * granularity (the scheduler plans each cell), with its own degrees it
 * does.
 */
static void test_hint_carries_the_model(void)
{
	copus_config c = planned_config(&small_model, 4, 0);
	copus_planner_desc copy = small_model;
	copus_ctx *ctx;
	copus_hint h;

	clear_env();
	setenv("SLURM_JOB_ID", "4244", 1);
	setenv("COPUS_HINTS", "0", 1);
	/* The caller's descriptor may go away after init. */
	c.model = &copy;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	copy.layers = 99;
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL(h.has_model, 1);
	CU_ASSERT(memcmp(&h.model, &small_model, sizeof(h.model)) == 0);
	CU_ASSERT_EQUAL(h.granularity, 0);
	copus_finalize(ctx);
	c = base_config();
	c.model = &small_model;
	c.world = 4;
	c.rank = 0;
	c.agree = agree_noop;
	c.pipeline_degree = 2;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL(h.has_model, 1);
	CU_ASSERT_EQUAL(h.granularity, 2);
	/* Its own degrees: no plan of the planner's. */
	copus_planner_plan p;
	ASSERT_STATUS(copus_planned(ctx, &p), COPUS_ENODATA);
	copus_finalize(ctx);
	/* Without a model, none in the hint. */
	c = base_config();
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL(h.has_model, 0);
	copus_finalize(ctx);
	clear_env();
}

/*
 * Calibrated constants in COPUS_PLANNER_GPUS plan the model in place of the
 * defaults; a type the file lacks takes its defaults; a bad file stops
 * copus_init, naming the file and the member.
 */
static void test_planned_with_calibrated_constants(void)
{
	copus_planner_gpu_type t;
	copus_planner_plan want, dflt, got;
	copus_config c = planned_config(&large_model, 8, 0);
	copus_ctx *ctx;
	char path[300], text[8192];
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/gpus.json", tmpdir);
	snprintf(t.name, sizeof(t.name), "a100");
	copus_planner_gpu_default("a100", &t.gpu);
	ASSERT_STATUS(core_plan(&large_model, 64, &t.gpu, 1, 8, &dflt),
		      COPUS_OK);
	/* Slow links and more memory: another plan. */
	t.gpu.memory_bytes *= 2;
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		for (int k = 0; k < COPUS_COLL_COUNT; k++)
			t.gpu.inv_beta[l][k] *= 50;
	ASSERT_STATUS(core_plan(&large_model, 64, &t.gpu, 1, 8, &want),
		      COPUS_OK);
	CU_ASSERT(memcmp(&want.degrees, &dflt.degrees, sizeof(want.degrees)) !=
			  0 ||
		  want.micro_batches != dflt.micro_batches);
	ASSERT_STATUS(copus_planner_gpus_format(&t, 1, text, sizeof(text), NULL,
						NULL, 0), COPUS_OK);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	setenv("COPUS_PLANNER_GPUS", path, 1);
	setenv("COPUS_GPU_TYPE", "a100", 1);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	ASSERT_STATUS(copus_planned(ctx, &got), COPUS_OK);
	CU_ASSERT(memcmp(&got.degrees, &want.degrees, sizeof(want.degrees)) == 0);
	CU_ASSERT_EQUAL(got.micro_batches, want.micro_batches);
	ASSERT_CLOSE(got.seconds, want.seconds, 0);
	copus_finalize(ctx);
	/* The file does not list the type: its defaults. */
	setenv("COPUS_GPU_TYPE", "A100", 1);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_planned(ctx, &got), COPUS_OK);
	CU_ASSERT(memcmp(&got.degrees, &dflt.degrees, sizeof(dflt.degrees)) == 0);
	ASSERT_CLOSE(got.seconds, dflt.seconds, 0);
	copus_finalize(ctx);
	/* A bad file. */
	f = fopen(path, "w");
	fputs("{\"version\": 1, \"gpus\": {\"a100\": {\"peak\": 1}}}", f);
	fclose(f);
	expect_init_error(&c, COPUS_EPARSE, "COPUS_PLANNER_GPUS");
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "\"peak\" is unknown"));
	setenv("COPUS_PLANNER_GPUS", "/nonexistent/gpus.json", 1);
	expect_init_error(&c, COPUS_EIO, "/nonexistent/gpus.json");
	remove_tmpdir();
	clear_env();
}

/* The agree callback of a rank whose neighbour planned more replicas. */
static int agree_other_plan(void *arg, int64_t *v, int n)
{
	(void)arg;
	if (n == 9)
		v[1] += 1;
	return 0;
}

/* Ranks that computed different plans (different constants on their
 * nodes) do not train. */
static void test_ranks_that_plan_differently_stop(void)
{
	copus_config c = planned_config(&small_model, 4, 0);

	clear_env();
	c.agree = agree_other_plan;
	expect_init_error(&c, COPUS_ESTATE, "planned the model differently");
	clear_env();
}

/* A program built before the model was appended to copus_config runs
 * as it did. */
static void test_config_of_the_older_layout(void)
{
	unsigned char raw[sizeof(copus_config) + 16];
	copus_config *c = (copus_config *)raw;
	size_t old = offsetof(copus_config, model);
	copus_ctx *ctx;
	copus_plan plan;

	clear_env();
	/* Bytes past the older layout are not the caller's: poison them. */
	memset(raw, 0xab, sizeof(raw));
	ASSERT_STATUS(copus_config_init(c, old), COPUS_OK);
	CU_ASSERT_EQUAL(c->size, old);
	CU_ASSERT_EQUAL(raw[old], 0xab);
	c->limits = (copus_batch_limits){ 64, 2048, 4, 128, true };
	c->no_signal_handler = 1;
	ASSERT_STATUS(copus_init(c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	ASSERT_STATUS(copus_plan_get(ctx, &plan), COPUS_OK);
	CU_ASSERT_EQUAL(plan.data_degree, 1);
	copus_finalize(ctx);
	ASSERT_STATUS(copus_config_init(c, old + 1), COPUS_EINVAL);
}

/* ------------------------------------------------------------------------
 * Hints
 * ------------------------------------------------------------------------ */

/* Busy work standing in for a step's computation (a CPU test model). */
static void spin(double seconds);

static void spin(double seconds)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((double)(b.tv_sec - a.tv_sec) +
	       1e-9 * (double)(b.tv_nsec - a.tv_nsec) < seconds);
}

static char last_hint[COPUS_HINT_MAX_LEN + 1];
static int hints_seen;

static int record_hint(void *arg, const char *hint)
{
	(void)arg;
	snprintf(last_hint, sizeof(last_hint), "%s", hint);
	hints_seen++;
	return 0;
}

static void test_hints_callback(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_hint h;

	clear_env();
	setenv("SLURM_JOB_ID", "77", 1);
	setenv("SLURM_RESTART_COUNT", "2", 1);
	c.publish = record_hint;
	c.hint_interval = 3600; /* only the first step's hint is due */
	c.target_progress = 1000;
	hints_seen = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	for (int s = 0; s < 10; s++) {
		copus_step_begin(ctx);
		spin(2e-4);
		ASSERT_STATUS(copus_step_end(ctx, 16, 3), COPUS_OK);
	}
	CU_ASSERT_EQUAL(hints_seen, 1);
	ASSERT_STATUS(copus_publish(ctx), COPUS_OK);
	CU_ASSERT_EQUAL(hints_seen, 2);
	ASSERT_STATUS(copus_hint_parse(last_hint, &h, NULL, 0), COPUS_OK);
	CU_ASSERT_EQUAL(h.job_id, 77);
	CU_ASSERT_EQUAL(h.restart_count, 2);
	CU_ASSERT_EQUAL(h.step, 10);
	CU_ASSERT_EQUAL(h.state, COPUS_STATE_RUNNING);
	ASSERT_CLOSE(h.target, 1000, 0);
	ASSERT_CLOSE(h.limits.init_batch, 64, 0);
	/* Eight timed steps after the warm-up: one GPU type fitted. */
	CU_ASSERT_EQUAL(h.n_perf, 1);
	CU_ASSERT_STRING_EQUAL(h.perf[0].type, "default");
	CU_ASSERT_EQUAL(h.clamped, 0);
	copus_finalize(ctx);
	clear_env();
}

/*
 * Outside Slurm the callback is the channel: it gets the hints of the job
 * COPUS_JOB_ID names; without any job id copus_init says what is missing
 * instead of never calling it.
 */
static void test_hints_callback_outside_slurm(void)
{
	copus_config c = base_config();
	copus_ctx *ctx;
	copus_hint h;

	clear_env();
	c.publish = record_hint;
	expect_init_error(&c, COPUS_EINVAL, "COPUS_JOB_ID");
	setenv("COPUS_JOB_ID", "12345", 1);
	hints_seen = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	copus_step_begin(ctx);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	CU_ASSERT_EQUAL(hints_seen, 1);
	ASSERT_STATUS(copus_hint_parse(last_hint, &h, NULL, 0), COPUS_OK);
	CU_ASSERT_EQUAL(h.job_id, 12345);
	copus_finalize(ctx);
	clear_env();
	setenv("COPUS_JOB_ID", "0", 1);
	expect_init_error(&c, COPUS_EINVAL, "COPUS_JOB_ID");
	clear_env();
}

/* The Slurm channel, with a stand-in for scontrol that records its argv. */
static copus_job_state hint_states[8];

static int record_state(void *arg, const char *hint)
{
	copus_hint h;

	(void)arg;
	if (copus_hint_parse(hint, &h, NULL, 0) == COPUS_OK && hints_seen < 8)
		hint_states[hints_seen] = h.state;
	hints_seen++;
	return 0;
}

/*
 * A rescale checkpoint that cannot be written (the directory became a
 * regular file): the step succeeds, the job keeps running, and the
 * scheduler hears "checkpointing" and then "running" again.
 */
static void test_failed_rescale_checkpoint_tells_the_scheduler(void)
{
	copus_config c = base_config();
	copus_job_state st;
	copus_ctx *ctx;
	char dir[512];
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(dir, sizeof(dir), "%s/ckpt", tmpdir);
	setenv("COPUS_JOB_ID", "321", 1);
	c.publish = record_state;
	c.hint_interval = 3600;
	c.ckpt_dir = dir;
	hints_seen = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	f = fopen(dir, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("not a directory\n", f);
	fclose(f);
	copus_step_begin(ctx);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK); /* a hint */
	copus_request_rescale(ctx);
	copus_step_begin(ctx);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	ASSERT_STATUS(copus_state(ctx, &st), COPUS_OK);
	CU_ASSERT_EQUAL(st, COPUS_STATE_RUNNING);
	CU_ASSERT_EQUAL(hints_seen, 3);
	CU_ASSERT_EQUAL(hint_states[1], COPUS_STATE_CHECKPOINTING);
	CU_ASSERT_EQUAL(hint_states[2], COPUS_STATE_RUNNING);
	/* It trains on. */
	copus_step_begin(ctx);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	copus_finalize(ctx);
	clear_env();
	remove_tmpdir();
}

static void test_hints_scontrol(void)
{
	copus_config c = base_config();
	char script[512], out[512], cmd[1024], line[2048];
	copus_ctx *ctx;
	copus_hint h;
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(script, sizeof(script), "%s/scontrol", tmpdir);
	snprintf(out, sizeof(out), "%s/args", tmpdir);
	f = fopen(script, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$@\" > '%s'\n", out);
	fclose(f);
	chmod(script, 0755);
	setenv("COPUS_SCONTROL", script, 1);
	setenv("SLURM_JOB_ID", "91", 1);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	copus_step_begin(ctx);
	copus_step_end(ctx, 64, 0);
	/* copus_publish waits for the delivery. */
	ASSERT_STATUS(copus_publish(ctx), COPUS_OK);
	copus_finalize(ctx);
	f = fopen(out, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof(line), f));
	CU_ASSERT_STRING_EQUAL(line, "update\n");
	CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof(line), f));
	CU_ASSERT_STRING_EQUAL(line, "JobId=91\n");
	CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof(line), f));
	fclose(f);
	CU_ASSERT(strncmp(line, "Comment=", 8) == 0);
	line[strcspn(line, "\n")] = '\0';
	ASSERT_STATUS(copus_hint_parse(line + 8, &h, NULL, 0), COPUS_OK);
	CU_ASSERT_EQUAL(h.job_id, 91);
	CU_ASSERT_EQUAL(h.step, 1);

	/* A failing scontrol is reported, not fatal. */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\nexit 3\n");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_publish(ctx), COPUS_EIO);
	copus_step_begin(ctx);
	ASSERT_STATUS(copus_step_end(ctx, 64, 0), COPUS_OK);
	copus_finalize(ctx);
	snprintf(cmd, sizeof(cmd), "true");
	clear_env();
	remove_tmpdir();
}

/* ------------------------------------------------------------------------
 * The rescale state machine, with real processes
 * ------------------------------------------------------------------------ */

/* The "model": a value that depends on every step in order. */
struct app {
	double w;
	int64_t step;
	int crash_on_save;   /* write half a file, then die */
	int fail_on_save;    /* return an error */
	int saves;
	int loads;
};

static void app_step(struct app *a)
{
	a->w = a->w * 0.5 + (double)(a->step + 1);
	a->step++;
}

static int app_save(void *arg, const char *path, int64_t step)
{
	struct app *a = arg;
	FILE *f;

	a->saves++;
	if (a->fail_on_save)
		return -1;
	f = fopen(path, "w");
	if (f == NULL)
		return -1;
	if (a->crash_on_save) {
		fprintf(f, "%lld ", (long long)step);
		fflush(f);
		_exit(9);
	}
	fprintf(f, "%lld %.17g\n", (long long)step, a->w);
	return fclose(f) == 0 ? 0 : -1;
}

static int app_load(void *arg, const char *path, int64_t step)
{
	struct app *a = arg;
	long long s;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return -1;
	if (fscanf(f, "%lld %lg", &s, &a->w) != 2 || s != step) {
		fclose(f);
		return -2;
	}
	fclose(f);
	a->step = s;
	a->loads++;
	return 0;
}

static double expected_w_from(double w0, int64_t steps)
{
	struct app a = { .w = w0 };

	while (a.step < steps)
		app_step(&a);
	return a.w;
}

static double expected_w(int64_t steps)
{
	struct app a = { 0 };

	while (a.step < steps)
		app_step(&a);
	return a.w;
}

/*
 * A star of pipes for the max all-reduce of several forked ranks: rank 0
 * reads every other rank's values, takes the maximum, writes it back.
 */
#define MAX_RANKS 4
struct star {
	int world;
	int up[MAX_RANKS][2];   /* rank r -> rank 0 */
	int down[MAX_RANKS][2]; /* rank 0 -> rank r */
	int rank;
	int agree_calls;        /* this rank's calls of star_agree */
};

/* The sum of n doubles over the ranks (the application's all-reduce). */
static int star_sum(struct star *s, double *v, int n)
{
	double buf[COPUS_AGREE_LEN];
	size_t len = sizeof(double) * (size_t)n;

	if (n > COPUS_AGREE_LEN)
		return -1;
	if (s->rank == 0) {
		for (int r = 1; r < s->world; r++) {
			if (read(s->up[r][0], buf, len) != (ssize_t)len)
				return -1;
			for (int i = 0; i < n; i++)
				v[i] += buf[i];
		}
		for (int r = 1; r < s->world; r++)
			if (write(s->down[r][1], v, len) != (ssize_t)len)
				return -1;
		return 0;
	}
	if (write(s->up[s->rank][1], v, len) != (ssize_t)len ||
	    read(s->down[s->rank][0], v, len) != (ssize_t)len)
		return -1;
	return 0;
}

static int star_agree(void *arg, int64_t *v, int n)
{
	struct star *s = arg;
	int64_t buf[16];
	size_t len = sizeof(int64_t) * (size_t)n;

	s->agree_calls++;
	if (n > 16)
		return -1;
	if (s->rank == 0) {
		for (int r = 1; r < s->world; r++) {
			if (read(s->up[r][0], buf, len) != (ssize_t)len)
				return -1;
			for (int i = 0; i < n; i++)
				v[i] = buf[i] > v[i] ? buf[i] : v[i];
		}
		for (int r = 1; r < s->world; r++)
			if (write(s->down[r][1], v, len) != (ssize_t)len)
				return -1;
		return 0;
	}
	if (write(s->up[s->rank][1], v, len) != (ssize_t)len ||
	    read(s->down[s->rank][0], v, len) != (ssize_t)len)
		return -1;
	return 0;
}

struct run {
	int world;
	int64_t steps;           /* train until this step */
	int64_t signal_at;       /* raise the signal inside this step (-1: no) */
	int signal_rank;         /* only this rank gets the signal */
	int crash_on_save;       /* rank 0 crashes while saving */
	int fail_on_save;
	int64_t checkpoint_at;   /* an extra plain checkpoint after this step */
	int restart;
	double ckpt_interval;    /* periodic checkpoints (config.ckpt_interval) */
	int step_us;             /* each step sleeps this long */
	int64_t die_at;          /* every rank dies after this step (0: no) */
	int save_all;            /* config.save_all_ranks */
	int distinct;            /* ranks measure different noise and times */
	int pipeline;            /* config.pipeline_degree (0: 1) */
	int rank_state;          /* rank r's model starts at 1000 r */
	int fold;                /* the agreement rides on a sum of the ranks */
	int leftovers_after_init; /* leftovers appear after copus_init */
	int layered;             /* a model of LAYERS layers, split in stages */
	int reshard;             /* with a reshard callback */
	int tensor;              /* config.tensor_degree (0: 1) */
	const char *plans;       /* each rank writes its final plan here.<rank> */
};

/*
 * A model of layers, each a value that depends on every step in order;
 * a rank holds its pipeline stage's layers only and saves them with their
 * numbers, so that a run of another pipeline degree can pick its own.
 */
#define LAYERS 6
struct lapp {
	int first, n;         /* this rank's layers */
	double w[LAYERS];     /* valid for first .. first + n - 1 */
	int64_t step;
	int read_files;       /* files the restore read */
};

static double layer_value(int layer, int64_t steps)
{
	double w = 10.0 * layer;

	for (int64_t t = 0; t < steps; t++)
		w = w * 0.5 + (double)(t + 1) + layer;
	return w;
}

static int lapp_save(void *arg, const char *path, int64_t step)
{
	struct lapp *a = arg;
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fprintf(f, "%lld %d %d", (long long)step, a->first, a->n);
	for (int l = a->first; l < a->first + a->n; l++)
		fprintf(f, " %.17g", a->w[l]);
	fprintf(f, "\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* Read the layers of one file that fall in [lo, hi) into a->w. */
static int lapp_read(struct lapp *a, const char *path, int64_t step, int lo,
		     int hi, bool *have)
{
	long long s;
	int first, n;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return -1;
	a->read_files++;
	if (fscanf(f, "%lld %d %d", &s, &first, &n) != 3 || s != step ||
	    first < 0 || n < 0 || first + n > LAYERS) {
		fclose(f);
		return -2;
	}
	for (int l = first; l < first + n; l++) {
		double v;

		if (fscanf(f, "%lg", &v) != 1) {
			fclose(f);
			return -3;
		}
		if (l >= lo && l < hi) {
			a->w[l] = v;
			have[l] = true;
		}
	}
	fclose(f);
	a->step = step;
	return 0;
}

static int lapp_load(void *arg, const char *path, int64_t step)
{
	struct lapp *a = arg;
	bool have[LAYERS] = { false };

	if (lapp_read(a, path, step, a->first, a->first + a->n, have) != 0)
		return -1;
	for (int l = a->first; l < a->first + a->n; l++)
		if (!have[l])
			return -4;
	return 0;
}

static int lapp_reshard(void *arg, int64_t step, const copus_ckpt_layout *old,
			const copus_ckpt_layout *now,
			const copus_ckpt_shard *mine,
			const copus_ckpt_shard *shards, int n_shards)
{
	struct lapp *a = arg;
	bool have[LAYERS] = { false };

	if (n_shards != old->pipeline * old->tensor || now->pipeline < 1 ||
	    mine->first_layer != a->first || mine->n_layers != a->n)
		return -5;
	for (int i = 0; i < n_shards; i++)
		if (shards[i].path != NULL &&
		    lapp_read(a, shards[i].path, step, a->first,
			      a->first + a->n, have) != 0)
			return -1;
	for (int l = a->first; l < a->first + a->n; l++)
		if (!have[l])
			return -4;
	return 0;
}

static int star_agree(void *arg, int64_t *v, int n);

static void layered_main(const struct run *run, struct star *s, int rank,
			 const char *report)
{
	static const double costs[LAYERS] = { 1, 1, 1, 1, 1, 1 };
	copus_config c = base_config();
	struct lapp a = { 0 };
	copus_ctx *ctx;
	copus_job_info in;
	copus_plan p;
	char env[32];

	snprintf(env, sizeof(env), "%d", run->restart);
	setenv("SLURM_RESTART_COUNT", env, 1);
	setenv("COPUS_HINTS", "0", 1);
	c.world = run->world;
	c.rank = rank;
	c.ckpt_dir = tmpdir;
	c.pipeline_degree = run->pipeline > 0 ? run->pipeline : 1;
	c.tensor_degree = run->tensor > 0 ? run->tensor : 1;
	c.layer_costs = costs;
	c.n_layers = LAYERS;
	c.save = lapp_save;
	c.load = lapp_load;
	c.reshard = run->reshard ? lapp_reshard : NULL;
	c.cb_arg = &a;
	c.agree = star_agree;
	c.comm_arg = s;
	c.no_signal_handler = 0;
	/* The callbacks need this rank's layers before init restores. */
	{
		copus_plan_degrees d;
		copus_plan_coords at;
		int b[LAYERS + 1];

		if (copus_plan_degrees_of_world(c.world, c.pipeline_degree,
						c.tensor_degree, &d) != COPUS_OK ||
		    copus_plan_coords_of_rank(&d, rank, &at) != COPUS_OK ||
		    copus_plan_stages(costs, LAYERS, c.pipeline_degree, b) !=
			    COPUS_OK)
			_exit(29);
		a.first = b[at.pipeline_rank];
		a.n = b[at.pipeline_rank + 1] - b[at.pipeline_rank];
	}
	for (int l = 0; l < LAYERS; l++)
		a.w[l] = 10.0 * l;
	if (copus_init(&c, &ctx) != COPUS_OK)
		_exit(20);
	copus_info(ctx, &in);
	if (copus_plan_get(ctx, &p) != COPUS_OK || p.first_layer != a.first ||
	    p.n_layers != a.n)
		_exit(29);
	if (in.restored && in.step != a.step)
		_exit(21);
	if (report != NULL) {
		char path[600];
		FILE *f;

		snprintf(path, sizeof(path), "%s.%d", report, rank);
		f = fopen(path, "w");
		if (f != NULL) {
			fprintf(f, "%d\n", a.read_files);
			fclose(f);
		}
	}
	while (a.step < run->steps) {
		copus_step_begin(ctx);
		if (a.step == run->signal_at && rank == run->signal_rank)
			raise(SIGUSR1);
		for (int l = a.first; l < a.first + a.n; l++)
			a.w[l] = a.w[l] * 0.5 + (double)(a.step + 1) + l;
		a.step++;
		if (copus_step_end(ctx, 16, 0) != COPUS_OK)
			_exit(22);
	}
	for (int l = a.first; l < a.first + a.n; l++)
		if (a.w[l] != layer_value(l, a.step))
			_exit(25);
	copus_finalize(ctx);
	_exit(0);
}

/* One rank's training loop; the exit status tells the parent what happened. */
static void rank_main(const struct run *run, struct star *s, int rank,
		      const char *report)
{
	copus_config c = base_config();
	struct app a = { 0 };
	copus_ctx *ctx;
	copus_job_info in;
	char env[32];
	FILE *f;
	int rc;

	s->rank = rank;
	/* Keep only this rank's ends of the pipes. */
	for (int r = 1; r < s->world; r++) {
		if (rank == 0) {
			close(s->up[r][1]);
			close(s->down[r][0]);
		} else {
			if (r != rank) {
				close(s->up[r][1]);
				close(s->down[r][0]);
			}
			close(s->up[r][0]);
			close(s->down[r][1]);
		}
	}
	if (run->layered)
		layered_main(run, s, rank, report);
	snprintf(env, sizeof(env), "%d", run->restart);
	setenv("SLURM_RESTART_COUNT", env, 1);
	setenv("COPUS_HINTS", "0", 1);
	c.world = run->world;
	c.rank = rank;
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	c.cb_arg = &a;
	c.agree = star_agree;
	c.comm_arg = s;
	c.no_signal_handler = 0;
	c.ckpt_interval = run->ckpt_interval;
	c.save_all_ranks = run->save_all;
	if (run->distinct)
		c.prior = (copus_perf_params){ 0.02, 0.001, 0.1, 0.01, 0.05,
					       0.005, 1.5 };
	if (run->pipeline > 0)
		c.pipeline_degree = run->pipeline;
	if (run->rank_state)
		a.w = 1000.0 * rank;
	a.crash_on_save = rank == 0 && run->crash_on_save;
	a.fail_on_save = rank == 0 && run->fail_on_save;
	if (copus_init(&c, &ctx) != COPUS_OK)
		_exit(20);
	copus_info(ctx, &in);
	if (in.restored && in.step != a.step)
		_exit(21);
	if (run->leftovers_after_init) {
		/* A crash of an earlier attempt, as seen by this run. */
		char path[512];

		snprintf(path, sizeof(path), "%s/ckpt-6.r%d", tmpdir, rank);
		if ((f = fopen(path, "w")) == NULL || fclose(f) != 0)
			_exit(28);
		snprintf(path, sizeof(path), "%s/ckpt-7.r%d.tmp", tmpdir, rank);
		if ((f = fopen(path, "w")) == NULL || fclose(f) != 0)
			_exit(28);
	}
	while (a.step < run->steps) {
		copus_step_begin(ctx);
		if (a.step == run->signal_at && rank == run->signal_rank)
			raise(SIGUSR1);
		app_step(&a);
		if (run->distinct) {
			/* Each rank sees its own noise and its own speed. */
			spin(0.001 * (rank + 1));
			/* |G|^2 = 1, tr(Sigma) = 200 or 400, batches 16, 32. */
			copus_grad_local(ctx, 1.0 + 200.0 * (rank + 1) / 16);
			copus_grad_total(ctx, 1.0 + 200.0 * (rank + 1) / 32);
		}
		if (run->fold) {
			double v[COPUS_AGREE_LEN];

			if (copus_agree_pack(ctx, v, COPUS_AGREE_LEN) != COPUS_OK ||
			    star_sum(s, v, COPUS_AGREE_LEN) != 0 ||
			    copus_agree_unpack(ctx, v, COPUS_AGREE_LEN) !=
				    COPUS_OK)
				_exit(26);
		}
		/* A failed rescale checkpoint is logged; the step succeeds. */
		rc = copus_step_end(ctx, 16, 0);
		if (rc != COPUS_OK)
			_exit(22);
		if (a.step == run->checkpoint_at &&
		    copus_checkpoint(ctx) != COPUS_OK)
			_exit(23);
		if (run->step_us > 0)
			usleep((useconds_t)run->step_us);
		/* A node failure: no checkpoint, no goodbye. */
		if (run->die_at > 0 && a.step == run->die_at)
			_exit(31);
	}
	copus_info(ctx, &in);
	/* Folded: one agreement of the runtime's own, at init. */
	if (run->fold && s->agree_calls != 1)
		_exit(27);
	/* Each rank's own state went through the checkpoints intact. */
	if (run->rank_state && a.w != expected_w_from(1000.0 * rank, a.step))
		_exit(25);
	if (run->plans != NULL) {
		copus_plan p;
		char path[512];

		snprintf(path, sizeof(path), "%s.%d", run->plans, rank);
		f = fopen(path, "w");
		if (f == NULL || copus_plan_get(ctx, &p) != COPUS_OK)
			_exit(24);
		fprintf(f, "%.17g %d %d %.17g %.17g\n", p.batch, p.local,
			p.accum_steps, p.lr_gain, p.efficiency);
		fclose(f);
	}
	if (report != NULL && rank == 0) {
		f = fopen(report, "w");
		if (f != NULL) {
			fprintf(f, "%lld %.17g %d %d\n", (long long)in.step, a.w,
				a.loads, in.restored);
			fclose(f);
		}
	}
	copus_finalize(ctx);
	_exit(0);
}

/* Fork the ranks of a run; their exit statuses in status[]. */
static void launch(const struct run *run, int *status, const char *report)
{
	struct star s = { .world = run->world };
	pid_t pids[MAX_RANKS];

	for (int r = 1; r < run->world; r++) {
		CU_ASSERT_EQUAL_FATAL(pipe(s.up[r]), 0);
		CU_ASSERT_EQUAL_FATAL(pipe(s.down[r]), 0);
	}
	fflush(NULL);
	for (int r = 0; r < run->world; r++) {
		pids[r] = fork();
		CU_ASSERT_FATAL(pids[r] >= 0);
		if (pids[r] == 0)
			rank_main(run, &s, r, report);
	}
	for (int r = 1; r < run->world; r++) {
		close(s.up[r][0]);
		close(s.up[r][1]);
		close(s.down[r][0]);
		close(s.down[r][1]);
	}
	for (int r = 0; r < run->world; r++) {
		int st = 0;
		waitpid(pids[r], &st, 0);
		status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

static int64_t manifest_step(void)
{
	char path[512], buf[8192];
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strstr(buf, "\"step\":");
	return p != NULL ? atoll(p + 7) : -2;
}

static void read_report(const char *report, int64_t *step, double *w,
			int *loads, int *restored)
{
	long long s = -1;
	FILE *f = fopen(report, "r");

	*w = NAN;
	*loads = *restored = -1;
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fscanf(f, "%lld %lg %d %d", &s, w, loads, restored), 4);
	fclose(f);
	*step = s;
}

static void test_rescale_one_process(void)
{
	struct run run = { .world = 1, .steps = 40, .signal_at = 12,
			   .signal_rank = 0, .checkpoint_at = -1 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* The signal arrives inside step 13: it ends, then the exit. */
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 13);
	CU_ASSERT(access(report, F_OK) != 0);
	/* The restart loads step 13 and finishes with the same result. */
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 40);
	CU_ASSERT_EQUAL(loads, 1);
	CU_ASSERT_EQUAL(restored, 1);
	ASSERT_CLOSE(w, expected_w(40), 1e-12);
	remove_tmpdir();
}

static void test_rescale_three_ranks_to_two(void)
{
	struct run run = { .world = 3, .steps = 30, .signal_at = 7,
			   .signal_rank = 2, .checkpoint_at = -1 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* Only rank 2 is signalled; all three agree and stop after step 8. */
	launch(&run, st, report);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 8);
	/* Restart on two ranks: both resume from step 8. */
	run.world = 2;
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 30);
	CU_ASSERT_EQUAL(loads, 1);
	ASSERT_CLOSE(w, expected_w(30), 1e-12);
	remove_tmpdir();
}

static void test_crash_while_writing_keeps_old_checkpoint(void)
{
	struct run run = { .world = 1, .steps = 20, .signal_at = -1,
			   .checkpoint_at = 5 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* A plain checkpoint after step 5, a rescale that crashes in save. */
	run.steps = 5;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	run.steps = 20;
	run.checkpoint_at = -1;
	run.restart = 1;
	run.signal_at = 11;
	run.crash_on_save = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 9);
	/* The crash left the checkpoint of step 5, complete. */
	CU_ASSERT_EQUAL(manifest_step(), 5);
	run.signal_at = -1;
	run.crash_on_save = 0;
	run.restart = 2;
	unlink(report);
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 20);
	CU_ASSERT_EQUAL(loads, 1);
	ASSERT_CLOSE(w, expected_w(20), 1e-12);
	remove_tmpdir();
}

static void test_failed_save_keeps_running(void)
{
	struct run run = { .world = 2, .steps = 15, .signal_at = 4,
			   .signal_rank = 1, .fail_on_save = 1,
			   .checkpoint_at = -1 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	launch(&run, st, report);
	/* No checkpoint, no exit: both ranks trained to the end. */
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), -1);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 15);
	ASSERT_CLOSE(w, expected_w(15), 1e-12);
	remove_tmpdir();
}

/*
 * With a checkpoint interval, a run that dies without warning (its node
 * failed) restarts from its latest periodic checkpoint, not from step 0,
 * and ends with the same result as an uninterrupted run.
 */
static void test_periodic_checkpoints_survive_a_node_failure(void)
{
	struct run run = { .world = 2, .steps = 40, .signal_at = -1,
			   .checkpoint_at = -1, .ckpt_interval = 0.05,
			   .step_us = 10000, .die_at = 30 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step, at;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* 30 steps of 10 ms: several intervals of 50 ms have passed. */
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 31);
	CU_ASSERT_EQUAL(st[1], 31);
	at = manifest_step();
	if (!(at >= 1 && at <= 30))
		fprintf(stderr, "periodic checkpoint at step %lld\n",
			(long long)at);
	CU_ASSERT(at >= 1 && at <= 30);
	run.die_at = 0;
	run.restart = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 40);
	CU_ASSERT_EQUAL(loads, 1);
	CU_ASSERT_EQUAL(restored, 1);
	ASSERT_CLOSE(w, expected_w(40), 1e-12);
	remove_tmpdir();
}

/* A periodic checkpoint that fails is logged; training goes on. */
static void test_failed_periodic_checkpoint_keeps_training(void)
{
	struct run run = { .world = 2, .steps = 20, .signal_at = -1,
			   .checkpoint_at = -1, .fail_on_save = 1,
			   .ckpt_interval = 0.02, .step_us = 10000 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), -1);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 20);
	ASSERT_CLOSE(w, expected_w(20), 1e-12);
	remove_tmpdir();
}

/* Files of the checkpoint directory whose name starts with prefix. */
static int count_files(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void touch(const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("left over\n", f);
	fclose(f);
}

static bool exists(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return access(path, F_OK) == 0;
}

/* One byte of a checkpoint file flipped: the size is right, the CRC not. */
static void test_corrupt_checkpoint_is_refused(void)
{
	struct run run = { .world = 1, .steps = 5, .signal_at = -1,
			   .checkpoint_at = 5 };
	char path[512];
	int st[MAX_RANKS], c;
	FILE *f;

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	snprintf(path, sizeof(path), "%s/ckpt-5.r0", tmpdir);
	f = fopen(path, "r+");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	c = fgetc(f);
	fseek(f, 0, SEEK_SET);
	fputc(c ^ 0x01, f);
	fclose(f);
	run.restart = 1;
	run.checkpoint_at = -1;
	run.steps = 8;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 20); /* copus_init refused it */
	/* The same file with the byte back loads. */
	f = fopen(path, "r+");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputc(c, f);
	fclose(f);
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	remove_tmpdir();
}

/* A new run removes what crashes and failed checkpoints left behind. */
static void test_leftovers_are_removed_at_start(void)
{
	struct run run = { .world = 1, .steps = 5, .signal_at = -1,
			   .checkpoint_at = 5 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	touch("ckpt-9.r0.tmp");
	touch("ckpt-7.r0");
	touch("ckpt-7.r3"); /* of a rank this job no longer has */
	touch("copus.manifest.tmp");
	touch("notes.txt"); /* not copus's */
	run.restart = 1;
	run.checkpoint_at = -1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT(!exists("ckpt-9.r0.tmp"));
	CU_ASSERT(!exists("ckpt-7.r0"));
	CU_ASSERT(!exists("ckpt-7.r3"));
	CU_ASSERT(!exists("copus.manifest.tmp"));
	CU_ASSERT(exists("notes.txt"));
	CU_ASSERT(exists("ckpt-5.r0"));
	CU_ASSERT_EQUAL(manifest_step(), 5);
	remove_tmpdir();
}

/*
 * Leftovers that appear while a run trains (as an earlier attempt's would
 * if it crashed mid-write) go at its next checkpoint, not only at the next
 * start.
 */
static void test_leftovers_are_removed_after_a_commit(void)
{
	struct run run = { .world = 2, .steps = 8, .signal_at = -1,
			   .checkpoint_at = 3, .save_all = 1,
			   .leftovers_after_init = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), 3);
	for (int r = 0; r < 2; r++) {
		char name[64];

		snprintf(name, sizeof(name), "ckpt-6.r%d", r);
		CU_ASSERT(!exists(name));
		snprintf(name, sizeof(name), "ckpt-7.r%d.tmp", r);
		CU_ASSERT(!exists(name));
		snprintf(name, sizeof(name), "ckpt-3.r%d", r);
		CU_ASSERT(exists(name));
	}
	remove_tmpdir();
}

/*
 * Every rank saves; rank 0's save fails while rank 1's file is complete:
 * nothing commits, and rank 1's file does not stay behind.
 */
static void test_failed_checkpoint_leaves_no_files(void)
{
	struct run run = { .world = 2, .steps = 10, .signal_at = 4,
			   .signal_rank = 1, .fail_on_save = 1,
			   .checkpoint_at = -1, .save_all = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), -1);
	CU_ASSERT_EQUAL(count_files("ckpt-"), 0);
	remove_tmpdir();
}

/*
 * A checkpoint with one file per rank of 2 ranks cannot be loaded by 3:
 * every rank of the new run refuses it alike, none starts training.
 */
static void test_all_ranks_refuse_a_layout_they_cannot_load(void)
{
	struct run run = { .world = 2, .steps = 20, .signal_at = 3,
			   .signal_rank = 0, .checkpoint_at = -1,
			   .save_all = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	run.world = 3;
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], 20);
	/* The same two ranks resume. */
	run.world = 2;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	remove_tmpdir();
}

/*
 * An old run of the job still alive (its node was given up on, the job
 * restarted elsewhere) never overwrites the current run's checkpoint.
 */
static void test_old_run_does_not_overwrite_the_current_checkpoint(void)
{
	struct run run = { .world = 1, .steps = 5, .signal_at = -1,
			   .checkpoint_at = 5, .restart = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	/* Restart 0 reaches step 8 and tries to checkpoint: refused. */
	run.restart = 0;
	run.steps = 8;
	run.checkpoint_at = 8;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 23);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	CU_ASSERT(exists("ckpt-5.r0"));
	CU_ASSERT_EQUAL(count_files("ckpt-8"), 0);
	/* The current run (and any later one) checkpoints as before. */
	run.restart = 2;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 8);
	remove_tmpdir();
}

static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_PTR_NOT_NULL(fgets(buf, (int)len, f));
	fclose(f);
}

/*
 * Two ranks that measure different gradient noise and step times get the
 * same plan: batch, micro-batch, accumulation and learning-rate gain.
 */
static void test_ranks_get_the_same_plan(void)
{
	char plans[512], path[600], p0[256], p1[256];
	struct run run = { .world = 2, .steps = 12, .signal_at = -1,
			   .checkpoint_at = -1, .distinct = 1,
			   .plans = plans };
	int st[MAX_RANKS];
	double batch, gain;

	clear_env();
	make_tmpdir();
	snprintf(plans, sizeof(plans), "%s/plan", tmpdir);
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	snprintf(path, sizeof(path), "%s.0", plans);
	read_line(path, p0, sizeof(p0));
	snprintf(path, sizeof(path), "%s.1", plans);
	read_line(path, p1, sizeof(p1));
	if (strcmp(p0, p1) != 0)
		fprintf(stderr, "rank 0's plan %s differs from rank 1's %s",
			p0, p1);
	CU_ASSERT_STRING_EQUAL(p0, p1);
	/* The plan uses the measured noise: the gain is not the default. */
	CU_ASSERT_EQUAL(sscanf(p0, "%lg %*d %*d %lg", &batch, &gain), 2);
	CU_ASSERT(gain > 1.0);
	remove_tmpdir();
}

/*
 * Two pipeline stages hold different state: each stage's is saved (by the
 * first replica of the stage), and after the restart each stage loads its
 * own, whatever the default saving mode.
 */
static void test_pipeline_stages_each_save_their_state(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = 3,
			   .signal_rank = 1, .checkpoint_at = -1,
			   .pipeline = 2, .rank_state = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	CU_ASSERT(exists("ckpt-4.r0"));
	CU_ASSERT(exists("ckpt-4.r1"));
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0); /* 25: stage 1 got stage 0's state */
	remove_tmpdir();
}

/*
 * A checkpoint of two pipeline stages restarted without a pipeline: the
 * files cannot serve the new layout, and every rank refuses it alike.
 */
static void test_another_pipeline_layout_is_refused_by_every_rank(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = 3,
			   .signal_rank = 0, .checkpoint_at = -1,
			   .pipeline = 2, .rank_state = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	run.signal_at = -1;
	run.restart = 1;
	run.pipeline = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 20);
	CU_ASSERT_EQUAL(st[1], 20);
	remove_tmpdir();
}

/*
 * One rank cannot restore (its file is corrupt): no rank starts training,
 * every rank's copus_init fails.
 */
static void test_one_rank_failing_to_restore_stops_every_rank(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = -1,
			   .checkpoint_at = 4, .save_all = 1 };
	char path[512];
	int st[MAX_RANKS];
	FILE *f;

	clear_env();
	make_tmpdir();
	run.steps = 4;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	snprintf(path, sizeof(path), "%s/ckpt-4.r1", tmpdir);
	f = fopen(path, "r+");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputc('9', f);
	fclose(f);
	run.steps = 12;
	run.checkpoint_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 20); /* 22 when rank 0 trained alone */
	CU_ASSERT_EQUAL(st[1], 20);
	remove_tmpdir();
}

/*
 * The agreement carried by the application's sum (its gradient
 * all-reduce): a request on one rank stops both after the step, and
 * without one the runtime calls no collective of its own after init.
 */
static void test_folded_agreement(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = 4,
			   .signal_rank = 1, .checkpoint_at = -1, .fold = 1 };
	copus_config c = base_config();
	copus_ctx *ctx;
	double v[COPUS_AGREE_LEN];
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0); /* 27: an agree call per step */
	CU_ASSERT_EQUAL(st[1], 0);
	remove_tmpdir();

	/* Sums that are not of the job's ranks, or rounded, are refused. */
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_agree_pack(ctx, v, COPUS_AGREE_LEN), COPUS_ESTATE);
	ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
	ASSERT_STATUS(copus_agree_pack(ctx, v, 3), COPUS_EINVAL);
	ASSERT_STATUS(copus_agree_pack(ctx, v, COPUS_AGREE_LEN), COPUS_OK);
	v[COPUS_AGREE_LEN - 2] = 2;
	ASSERT_STATUS(copus_agree_unpack(ctx, v, COPUS_AGREE_LEN), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(ctx), "ranks"));
	v[COPUS_AGREE_LEN - 2] = 1;
	v[5] += 0.5;
	ASSERT_STATUS(copus_agree_unpack(ctx, v, COPUS_AGREE_LEN), COPUS_EINVAL);
	v[5] -= 0.5;
	ASSERT_STATUS(copus_agree_unpack(ctx, v, COPUS_AGREE_LEN), COPUS_OK);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	copus_finalize(ctx);
}

static int read_count(const char *report, int rank)
{
	char path[600];
	int n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", report, rank);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

/*
 * Four ranks (data 2 x pipeline 2) of a six-layer model checkpoint; the
 * job resumes on three ranks in three stages and on two ranks in one
 * stage, each rank reading only the old stages that hold its layers, and
 * every layer ends as in an uninterrupted run.
 */
static void test_checkpoints_reshard_between_layouts(void)
{
	struct run run = { .world = 4, .steps = 5, .signal_at = 2,
			   .signal_rank = 3, .checkpoint_at = -1,
			   .pipeline = 2, .layered = 1, .reshard = 1 };
	char report[512];
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/read", tmpdir);
	launch(&run, st, report);
	for (int r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(st[r], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 3);
	/* Three stages of two layers from two of three: 1, 2 and 1 files. */
	run.world = 3;
	run.pipeline = 3;
	run.signal_at = 6;
	run.signal_rank = 0;
	run.steps = 12;
	run.restart = 1;
	launch(&run, st, report);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(read_count(report, 0), 1);
	CU_ASSERT_EQUAL(read_count(report, 1), 2);
	CU_ASSERT_EQUAL(read_count(report, 2), 1);
	CU_ASSERT_EQUAL(manifest_step(), 7);
	/* One stage on two replicas: each reads all three files. */
	run.world = 2;
	run.pipeline = 1;
	run.signal_at = -1;
	run.restart = 2;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0); /* 25: a layer lost or mixed up */
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(read_count(report, 0), 3);
	/* Without the callback the same checkpoint is refused by all. */
	run.world = 4;
	run.pipeline = 2;
	run.reshard = 0;
	run.restart = 3;
	unlink(report);
	launch(&run, st, report);
	for (int r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(st[r], 20);
	remove_tmpdir();
}

/*
 * Tensor slices: two slices restored as three, each new slice reading the
 * old slices it overlaps (1/3 of the first, both, 1/3 of the second).
 */
static void test_checkpoints_reshard_tensor_slices(void)
{
	struct run run = { .world = 2, .steps = 5, .signal_at = 2,
			   .signal_rank = 1, .checkpoint_at = -1,
			   .tensor = 2, .layered = 1, .reshard = 1 };
	char report[512];
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/read", tmpdir);
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 3);
	run.world = 3;
	run.tensor = 3;
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, report);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], 0);
	CU_ASSERT_EQUAL(read_count(report, 0), 1);
	CU_ASSERT_EQUAL(read_count(report, 1), 2);
	CU_ASSERT_EQUAL(read_count(report, 2), 1);
	remove_tmpdir();
}

static void test_bad_manifest(void)
{
	copus_config c = base_config();
	char path[512];
	copus_ctx *ctx;
	FILE *f;

	clear_env();
	make_tmpdir();
	c.ckpt_dir = tmpdir;
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":\"x\"}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":1,\"files\":[[\"../etc/passwd\",10]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	/* A manifest naming a file that is not there. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":1,\"files\":[[\"ckpt-3.r0\",10]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	c.load = app_load;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EIO);
	/* One file for five ranks that all saved; two files from rank 0. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":5,\"save_all_ranks\":1,"
		   "\"files\":[[\"ckpt-3.r0\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":2,\"save_all_ranks\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,7],[\"ckpt-3.r1\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	/* A version 1 manifest (world 5, one file) had no saving mode. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":5,\"files\":[[\"ckpt-3.r0\",10],[\"ckpt-3.r1\",10]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	/* A layout that is not the world, or one file for two stages. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":4,\"save_all_ranks\":0,\"layout\":[1,1,2],\"layers\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,7],[\"ckpt-3.r2\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "layout"));
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":4,\"save_all_ranks\":0,\"layout\":[2,1,2],\"layers\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "files"));
	/* A CRC-32 out of range. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":1,\"save_all_ranks\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,4294967296]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	remove_tmpdir();
}

/* A checkpoint written before manifests had checksums still loads. */
static void test_version_1_manifest_loads(void)
{
	copus_config c = base_config();
	struct app a = { 0 };
	copus_job_info in;
	char path[512];
	copus_ctx *ctx = NULL;
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/ckpt-3.r0", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "3 1.5\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":96,\"progress\":3,"
		   "\"world\":1,\"files\":[[\"ckpt-3.r0\",6]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	c.ckpt_dir = tmpdir;
	c.load = app_load;
	c.cb_arg = &a;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	copus_info(ctx, &in);
	CU_ASSERT_EQUAL(in.step, 3);
	CU_ASSERT_EQUAL(in.restored, 1);
	CU_ASSERT_EQUAL(a.loads, 1);
	ASSERT_CLOSE(a.w, 1.5, 1e-12);
	copus_finalize(ctx);
	remove_tmpdir();
}

/* The shards a reshard callback was handed. */
static copus_ckpt_shard seen_shards[8];
static int seen_n_shards;

static int reshard_record(void *arg, int64_t step, const copus_ckpt_layout *old,
			  const copus_ckpt_layout *now,
			  const copus_ckpt_shard *mine,
			  const copus_ckpt_shard *shards, int n_shards)
{
	(void)arg, (void)step, (void)old, (void)now, (void)mine;
	seen_n_shards = n_shards;
	for (int i = 0; i < n_shards && i < 8; i++)
		seen_shards[i] = shards[i];
	return 0;
}

static int load_ok(void *arg, const char *path, int64_t step)
{
	(void)arg, (void)path, (void)step;
	return 0;
}

/* A file of the checkpoint directory with its CRC-32. */
static unsigned long put_file(const char *name, const char *text)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	return crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text,
		     (uInt)strlen(text));
}

/*
 * A planned job's stages depend on its cell: its checkpoint records them,
 * and a run with the same degrees but other stages reshards it (the
 * callback told the old stages' layers) or refuses it, never loads a stage
 * into another's layers; a run with the same stages loads it as it is.
 */
static void test_planned_stages_travel_with_the_checkpoint(void)
{
	copus_config c = planned_config(&small_model, 8, 0);
	copus_planner_plan want;
	copus_planner_gpu g;
	copus_ctx *ctx;
	char path[600], text[1024];
	unsigned long crc0, crc1;
	int k, other;
	FILE *f;

	clear_env();
	make_tmpdir();
	setenv("COPUS_GPU_TYPE", "a100", 1);
	setenv("SLURM_JOB_NUM_NODES", "2", 1);
	copus_planner_gpu_default("a100", &g);
	ASSERT_STATUS(core_plan(&small_model, 64, &g, 2, 4, &want), COPUS_OK);
	CU_ASSERT_EQUAL_FATAL(want.degrees.pipeline, 2);
	k = want.first_layer[1];
	other = k == 1 ? 2 : 1;
	crc0 = put_file("ckpt-3.r0", "stage 0\n");
	crc1 = put_file("ckpt-3.r1", "stage 1\n");
	c.ckpt_dir = tmpdir;
	c.load = load_ok;
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	/* Same degrees, another split. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":8,\"save_all_ranks\":0,\"layout\":[4,1,2],"
		   "\"layers\":6,\"stages\":[0,%d,6],"
		   "\"files\":[[\"ckpt-3.r0\",8,%lu],[\"ckpt-3.r1\",8,%lu]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}", other, crc0, crc1);
	fclose(f);
	expect_init_error(&c, COPUS_ESTATE, "stages of other layers");
	c.reshard = reshard_record;
	seen_n_shards = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	CU_ASSERT_EQUAL(seen_n_shards, 2);
	CU_ASSERT_EQUAL(seen_shards[0].first_layer, 0);
	CU_ASSERT_EQUAL(seen_shards[0].n_layers, other);
	CU_ASSERT_EQUAL(seen_shards[1].first_layer, other);
	CU_ASSERT_EQUAL(seen_shards[1].n_layers, 6 - other);
	copus_finalize(ctx);
	/* The same stages: loaded as they are, no reshard. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":8,\"save_all_ranks\":0,\"layout\":[4,1,2],"
		   "\"layers\":6,\"stages\":[0,%d,6],"
		   "\"files\":[[\"ckpt-3.r0\",8,%lu],[\"ckpt-3.r1\",8,%lu]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}", k, crc0, crc1);
	fclose(f);
	seen_n_shards = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_EQUAL(seen_n_shards, 0);
	copus_finalize(ctx);
	/* Stages that are not a split of the model's layers. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":8,\"save_all_ranks\":0,\"layout\":[4,1,2],"
		   "\"layers\":6,\"stages\":[0,7,6],"
		   "\"files\":[[\"ckpt-3.r0\",8,%lu],[\"ckpt-3.r1\",8,%lu]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}", crc0, crc1);
	fclose(f);
	expect_init_error(&c, COPUS_EPARSE, "stages");
	remove_tmpdir();

	/* The manifest a planned job writes names its stages. */
	make_tmpdir();
	c = planned_config(&small_model, 1, 0);
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	struct app a = { 0 };
	c.cb_arg = &a;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
	ASSERT_STATUS(copus_step_end(ctx, 64, 0), COPUS_OK);
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_OK);
	copus_finalize(ctx);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	read_line(path, text, sizeof(text));
	if (strstr(text, "\"stages\":[0,6]") == NULL &&
	    strstr(text, "\"stages\":[ 0, 6 ]") == NULL)
		fprintf(stderr, "manifest without its stages: %s\n", text);
	CU_ASSERT(strstr(text, "\"stages\":[0,6]") != NULL ||
		  strstr(text, "\"stages\":[ 0, 6 ]") != NULL);
	remove_tmpdir();
	clear_env();
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(test_bad_arguments),
		TEST(test_bad_config),
		TEST(test_bad_environment),
		TEST(test_environment),
		TEST(test_hint_carries_the_granularity),
		TEST(test_grad_stats_and_progress),
		TEST(test_grad_stats_of_consecutive_steps),
		TEST(test_plan),
		TEST(test_comms_shrink_without_nccl_calls),
		TEST(test_pipeline_layers),
		TEST(test_planned_degrees_are_the_planners_on_every_rank),
		TEST(test_planned_degrees_follow_the_world),
		TEST(test_planned_config_errors),
		TEST(test_hint_carries_the_model),
		TEST(test_planned_with_calibrated_constants),
		TEST(test_ranks_that_plan_differently_stop),
		TEST(test_config_of_the_older_layout),
		TEST(test_planned_stages_travel_with_the_checkpoint),
		TEST(test_hints_callback),
		TEST(test_hints_callback_outside_slurm),
		TEST(test_failed_rescale_checkpoint_tells_the_scheduler),
		TEST(test_hints_scontrol),
		TEST(test_rescale_one_process),
		TEST(test_rescale_three_ranks_to_two),
		TEST(test_crash_while_writing_keeps_old_checkpoint),
		TEST(test_failed_save_keeps_running),
		TEST(test_periodic_checkpoints_survive_a_node_failure),
		TEST(test_failed_periodic_checkpoint_keeps_training),
		TEST(test_corrupt_checkpoint_is_refused),
		TEST(test_leftovers_are_removed_at_start),
		TEST(test_failed_checkpoint_leaves_no_files),
		TEST(test_leftovers_are_removed_after_a_commit),
		TEST(test_all_ranks_refuse_a_layout_they_cannot_load),
		TEST(test_old_run_does_not_overwrite_the_current_checkpoint),
		TEST(test_ranks_get_the_same_plan),
		TEST(test_pipeline_stages_each_save_their_state),
		TEST(test_another_pipeline_layout_is_refused_by_every_rank),
		TEST(test_one_rank_failing_to_restore_stops_every_rank),
		TEST(test_folded_agreement),
		TEST(test_checkpoints_reshard_between_layouts),
		TEST(test_checkpoints_reshard_tensor_slices),
		TEST(test_bad_manifest),
		TEST(test_version_1_manifest_loads),
	};

	return RUN_TESTS("runtime", tests);
}
