/*
 * A small "training job" over libcopus, run by tests/test-runtime-slurm.sh
 * inside real Slurm jobs on the loopback cluster.
 *
 *   test-runtime-job pmix
 *	every rank shares rank 0's 64-byte blob through copus_bootstrap and
 *	prints "pmix RANK/WORLD ok" or "... bad".
 *   test-runtime-job train STEPS CKPTDIR STEP_MS
 *	trains a stand-in model for STEPS steps of STEP_MS milliseconds,
 *	checkpointing in CKPTDIR on a rescale request; prints
 *	"restored STEP", "first-step SECONDS" (from main to the end of the
 *	first step) and "done STEP".
 *   test-runtime-job train-pipeline STEPS CKPTDIR STEP_MS
 *	the same with the model split into pipeline_degree 2 stages, one rank
 *	per GPU under srun --mpi=pmix, the ranks agreeing through PMIx; rank
 *	0 prints "ranks WORLD data DATA pipeline PIPELINE step STEP" once the
 *	ranks have started together and "ranks WORLD step STEP" every 20
 *	steps, every rank "restored STEP" and, when copus_init fails,
 *	"copus_init: REASON".
 *   test-runtime-job train-planned STEPS CKPTDIR STEP_MS
 *	as train-pipeline, but the job describes its model (a transformer one
 *	GPU holds) and lets the planner choose its degrees and stages; rank 0
 *	also prints the plan as the scheduler would compute it for the cell,
 *	"copus: plan type=TYPE gpus=WORLD nodes=NODES dp=D tp=T pp=P mb=M"
 *	(TYPE: $COPUS_GPU_TYPE or "default"); its hints give STEPS as its
 *	target, so that the scheduler knows the work it has left, and it
 *	restores a checkpoint of another plan.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

#include <copus/copus.h>

static struct timespec t_main;

static double since_main(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t_main.tv_sec) +
	       1e-9 * (double)(now.tv_nsec - t_main.tv_nsec);
}

/* Single-task training, or ranks that never rescale (pmix): no exchange. */
static int agree_local(void *arg, int64_t *v, int n)
{
	(void)arg;
	(void)v;
	(void)n;
	return 0;
}

static int64_t model_step;

/*
 * The agreement of the ranks of one srun step: an in-place maximum over
 * PMIx (every rank puts its values under a fresh key, a fence collects
 * them, every rank reads them all).
 */
struct pmix_comm {
	pmix_proc_t me;
	int world;
	unsigned seq;
};

static int agree_pmix(void *arg, int64_t *v, int n)
{
	struct pmix_comm *c = arg;
	char key[PMIX_MAX_KEYLEN + 1];
	pmix_byte_object_t bo = { (char *)v, sizeof(*v) * (size_t)n };
	pmix_value_t val;
	pmix_info_t info;
	pmix_status_t st;
	bool collect = true;
	int64_t *max;

	snprintf(key, sizeof(key), "job.agree.%u", c->seq++);
	PMIX_VALUE_LOAD(&val, &bo, PMIX_BYTE_OBJECT);
	st = PMIx_Put(PMIX_GLOBAL, key, &val);
	PMIX_VALUE_DESTRUCT(&val);
	if (st == PMIX_SUCCESS)
		st = PMIx_Commit();
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	if (st == PMIX_SUCCESS)
		st = PMIx_Fence(NULL, 0, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (st != PMIX_SUCCESS) {
		fprintf(stderr, "agree %s: %s\n", key, PMIx_Error_string(st));
		return 1;
	}
	max = malloc(sizeof(*max) * (size_t)n);
	if (max == NULL)
		return 1;
	memcpy(max, v, sizeof(*max) * (size_t)n);
	for (int r = 0; r < c->world; r++) {
		pmix_proc_t p;
		pmix_value_t *got = NULL;

		PMIX_PROC_LOAD(&p, c->me.nspace, (pmix_rank_t)r);
		st = PMIx_Get(&p, key, NULL, 0, &got);
		if (st != PMIX_SUCCESS || got == NULL ||
		    got->type != PMIX_BYTE_OBJECT ||
		    got->data.bo.size != sizeof(*max) * (size_t)n) {
			fprintf(stderr, "agree %s from rank %d: %s\n", key, r,
				PMIx_Error_string(st));
			if (got != NULL)
				PMIX_VALUE_RELEASE(got);
			free(max);
			return 1;
		}
		for (int i = 0; i < n; i++) {
			int64_t x;

			memcpy(&x, got->data.bo.bytes + sizeof(x) * (size_t)i,
			       sizeof(x));
			if (x > max[i])
				max[i] = x;
		}
		PMIX_VALUE_RELEASE(got);
	}
	memcpy(v, max, sizeof(*max) * (size_t)n);
	free(max);
	return 0;
}

static int save(void *arg, const char *path, int64_t step)
{
	FILE *f = fopen(path, "w");

	(void)arg;
	if (f == NULL)
		return 1;
	fprintf(f, "%lld\n", (long long)step);
	return fclose(f) == 0 ? 0 : 1;
}

static int load(void *arg, const char *path, int64_t step)
{
	long long s = -1;
	FILE *f = fopen(path, "r");

	(void)arg;
	if (f == NULL)
		return 1;
	if (fscanf(f, "%lld", &s) != 1 || s != step) {
		fclose(f);
		return 2;
	}
	fclose(f);
	model_step = s;
	return 0;
}

/*
 * A checkpoint written in another layout (a planned job whose new cell has
 * another plan): every shard holds the step, so any shard of it restores
 * the stand-in model.
 */
static int reshard(void *arg, int64_t step, const copus_ckpt_layout *old,
		   const copus_ckpt_layout *now, const copus_ckpt_shard *mine,
		   const copus_ckpt_shard *shards, int n_shards)
{
	(void)old;
	(void)now;
	(void)mine;
	for (int i = 0; i < n_shards; i++)
		if (shards[i].path != NULL)
			return load(arg, shards[i].path, step);
	model_step = step;
	return 0;
}

static int do_pmix(void)
{
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	copus_job_info in;
	copus_ctx *ctx;
	unsigned char blob[64];
	int rc, ok = 1;

	cfg.limits = (copus_batch_limits){ 32, 256, 1, 64, true };
	cfg.agree = agree_local;
	rc = copus_init(&cfg, &ctx);
	if (rc != COPUS_OK) {
		fprintf(stderr, "copus_init: %s\n", copus_strerror(rc));
		return 1;
	}
	copus_info(ctx, &in);
	for (int i = 0; i < 64; i++)
		blob[i] = in.rank == 0 ? (unsigned char)(i * 7 + 13) : 0;
	rc = copus_bootstrap(ctx, blob, sizeof(blob));
	if (rc != COPUS_OK) {
		fprintf(stderr, "copus_bootstrap: %s\n", copus_errmsg(ctx));
		ok = 0;
	}
	for (int i = 0; i < 64; i++)
		ok = ok && blob[i] == (unsigned char)(i * 7 + 13);
	printf("pmix %d/%d %s\n", in.rank, in.world, ok ? "ok" : "bad");
	copus_finalize(ctx);
	return ok ? 0 : 1;
}

/* The model of train-planned: small enough for one GPU of any type. */
static const copus_planner_desc planned_model = {
	.arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2, .layers = 4,
	.hidden = 256, .heads = 4, .seq_len = 128, .vocab = 1000,
};

enum mode { TRAIN, PIPELINE, PLANNED };

static int do_train(long steps, const char *dir, long step_ms, enum mode mode)
{
	bool pipeline = mode != TRAIN;
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	struct pmix_comm comm = { .world = 1 };
	copus_job_info in;
	copus_plan plan;
	copus_ctx *ctx;
	pmix_status_t st;
	int rc;

	cfg.limits = (copus_batch_limits){ 32, 256, 1, 64, true };
	cfg.ckpt_dir = dir;
	cfg.save = save;
	cfg.load = load;
	cfg.agree = agree_local;
	if (mode == PLANNED) {
		/* It knows its length: the scheduler counts its work. */
		cfg.target_progress = (double)steps;
		cfg.model = &planned_model;
		cfg.reshard = reshard;
		cfg.pipeline_degree = 0;
		cfg.tensor_degree = 0;
	}
	if (mode == PLANNED && getenv("SLURM_NTASKS") == NULL) {
		/* One process outside srun: nothing to agree with. */
		pipeline = false;
	}
	if (pipeline) {
		if (mode == PIPELINE)
			cfg.pipeline_degree = 2;
		if ((st = PMIx_Init(&comm.me, NULL, 0)) != PMIX_SUCCESS) {
			fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(st));
			return 1;
		}
		comm.world = atoi(getenv("SLURM_NTASKS") ? getenv("SLURM_NTASKS")
							 : "1");
		cfg.agree = agree_pmix;
		cfg.comm_arg = &comm;
	}
	rc = copus_init(&cfg, &ctx);
	if (rc != COPUS_OK) {
		fprintf(stderr, "copus_init: %s\n", copus_errmsg(NULL));
		if (pipeline)
			PMIx_Finalize(NULL, 0);
		return 1;
	}
	copus_info(ctx, &in);
	if (in.restored)
		printf("restored %lld\n", (long long)in.step);
	if (mode != TRAIN && in.rank == 0 &&
	    copus_plan_get(ctx, &plan) == COPUS_OK)
		printf("ranks %d data %d pipeline %d step %lld\n", in.world,
		       plan.data_degree, plan.pipeline_degree,
		       (long long)in.step);
	if (mode == PLANNED && in.rank == 0) {
		copus_planner_plan pl;
		const char *type = getenv("COPUS_GPU_TYPE");

		if (copus_planned(ctx, &pl) == COPUS_OK)
			printf("copus: plan type=%s gpus=%d nodes=%d dp=%d tp=%d pp=%d mb=%d\n",
			       type != NULL && *type != '\0' ? type : "default",
			       in.world, in.nodes, pl.degrees.data,
			       pl.degrees.tensor, pl.degrees.pipeline,
			       pl.micro_batches);
	}
	fflush(stdout);
	for (bool first = true; model_step < steps; first = false) {
		struct timespec d = { step_ms / 1000, (step_ms % 1000) * 1000000 };

		copus_step_begin(ctx);
		nanosleep(&d, NULL);
		model_step++;
		/* On a rescale request this call does not return (exit 75). */
		rc = copus_step_end(ctx, 32, 0);
		if (rc != COPUS_OK)
			fprintf(stderr, "step_end: %s\n", copus_errmsg(ctx));
		if (first) {
			printf("first-step %.3f\n", since_main());
			fflush(stdout);
		}
		if (pipeline && in.rank == 0 && model_step % 20 == 0)
			printf("ranks %d step %lld\n", in.world,
			       (long long)model_step);
	}
	printf("done %lld\n", (long long)model_step);
	copus_finalize(ctx);
	if (pipeline)
		PMIx_Finalize(NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	clock_gettime(CLOCK_MONOTONIC, &t_main);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "pmix") == 0)
		return do_pmix();
	if (argc == 5 && strcmp(argv[1], "train") == 0)
		return do_train(atol(argv[2]), argv[3], atol(argv[4]), TRAIN);
	if (argc == 5 && strcmp(argv[1], "train-pipeline") == 0)
		return do_train(atol(argv[2]), argv[3], atol(argv[4]),
				PIPELINE);
	if (argc == 5 && strcmp(argv[1], "train-planned") == 0)
		return do_train(atol(argv[2]), argv[3], atol(argv[4]),
				PLANNED);
	fprintf(stderr,
		"usage: %s pmix | train STEPS CKPTDIR STEP_MS | train-pipeline STEPS CKPTDIR STEP_MS | train-planned STEPS CKPTDIR STEP_MS\n",
		argv[0]);
	return 2;
}
