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
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

static int do_train(long steps, const char *dir, long step_ms)
{
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	copus_job_info in;
	copus_ctx *ctx;
	int rc;

	cfg.limits = (copus_batch_limits){ 32, 256, 1, 64, true };
	cfg.ckpt_dir = dir;
	cfg.save = save;
	cfg.load = load;
	cfg.agree = agree_local;
	rc = copus_init(&cfg, &ctx);
	if (rc != COPUS_OK) {
		fprintf(stderr, "copus_init: %s\n", copus_strerror(rc));
		return 1;
	}
	copus_info(ctx, &in);
	if (in.restored)
		printf("restored %lld\n", (long long)in.step);
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
	}
	printf("done %lld\n", (long long)model_step);
	copus_finalize(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	clock_gettime(CLOCK_MONOTONIC, &t_main);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "pmix") == 0)
		return do_pmix();
	if (argc == 5 && strcmp(argv[1], "train") == 0)
		return do_train(atol(argv[2]), argv[3], atol(argv[4]));
	fprintf(stderr, "usage: %s pmix | train STEPS CKPTDIR STEP_MS\n",
		argv[0]);
	return 2;
}
