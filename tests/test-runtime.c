/*
 * libcopus: the API's argument checks, the allocation from the environment,
 * gradient statistics and the plan; the helpers every test of the program
 * uses (test-runtime.h) and its registry. The other files of the program:
 * test-runtime-planned.c (planned degrees), test-runtime-hints.c,
 * test-runtime-ranks.c with test-runtime-rescale.c (the rescale state
 * machine with real processes: a request during a step is honoured at its
 * end, the checkpoint is complete or absent, and a restart resumes) and
 * test-runtime-manifest.c.
 */
#include <copus_config.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <copus/copus.h>
#include <copus/plan.h>

#include "harness.h"
#include "test-runtime.h"

static const char *const slurm_vars[] = {
	"SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_JOB_NUM_NODES",
	"SLURM_NNODES", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID",
	"SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE",
	"LOCAL_RANK", "COPUS_CKPT_DIR", "COPUS_SIGNAL", "COPUS_REQUEUE_EXIT",
	"COPUS_GPU_TYPE", "COPUS_SCONTROL", "PMIX_NAMESPACE", "COPUS_HINTS",
	"COPUS_CKPT_INTERVAL", "COPUS_DEBUG", "COPUS_NO_PMIX", "COPUS_JOB_ID",
	"COPUS_PLANNER_GPUS",
};

void clear_env(void)
{
	for (size_t i = 0; i < sizeof(slurm_vars) / sizeof(*slurm_vars); i++)
		unsetenv(slurm_vars[i]);
}

copus_config base_config(void)
{
	copus_config c = COPUS_CONFIG_INITIALIZER;

	c.limits = (copus_batch_limits){ 64, 2048, 4, 128, true };
	c.no_signal_handler = 1;
	return c;
}

char tmpdir[256];

void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/copus-test-runtime-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
}

unsigned long put_tmp_file(const char *name, const char *text)
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

int load_ok(void *arg, const char *path, int64_t step)
{
	(void)arg, (void)path, (void)step;
	return 0;
}

void remove_tmpdir(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}


/* Busy work standing in for a step's computation (a CPU test model). */
void spin(double seconds);

void spin(double seconds)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((double)(b.tv_sec - a.tv_sec) +
	       1e-9 * (double)(b.tv_nsec - a.tv_nsec) < seconds);
}

void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_PTR_NOT_NULL(fgets(buf, (int)len, f));
	fclose(f);
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

void expect_init_error(copus_config *c, int want, const char *needle)
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

int agree_noop(void *arg, int64_t *v, int n)
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
		TEST(test_hints_first_model_comes_early),
		TEST(test_hints_model_of_new_placement_comes_early),
		TEST(test_failed_rescale_checkpoint_tells_the_scheduler),
		TEST(test_hints_scontrol),
		TEST(test_hint_model_leaves_out_a_lone_step),
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
		TEST(test_version_2_manifest_loads),
		TEST(test_edited_manifest_is_refused),
		TEST(test_fingerprint_of_another_model_is_refused),
		TEST(test_config_without_fingerprint),
		TEST(test_hint_carries_the_models_of_earlier_types),
		TEST(test_unwritable_checkpoint_dir_fails_init),
		TEST(test_all_ranks_restore_by_coordinates_from_data_inner),
		TEST(test_all_ranks_restore_by_coordinates_into_data_inner),
		TEST(test_all_ranks_of_another_layout_name_both_layouts),
		TEST(test_resume_is_logged_by_rank_0),
		TEST(test_manifest_records_when_and_how_it_was_written),
	};

	return RUN_TESTS("runtime", tests);
}
