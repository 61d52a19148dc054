/*
 * Per-step overhead of the libcopus calls on one process: step_begin and
 * step_end alone, then with sync marks and gradient norms. Usage:
 * bench-runtime [steps]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <copus/copus.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double run(copus_ctx *ctx, long steps, int mode)
{
	double t0 = now();

	for (long i = 0; i < steps; i++) {
		copus_step_begin(ctx);
		if (mode >= 1) {
			copus_sync_begin(ctx);
			copus_sync_end(ctx);
		}
		if (mode >= 2) {
			copus_grad_local(ctx, 2.0 + (double)(i & 7));
			copus_grad_local(ctx, 2.5);
			copus_grad_total(ctx, 1.5);
		}
		if (copus_step_end(ctx, 32, 1) != COPUS_OK) {
			fprintf(stderr, "step_end: %s\n", copus_errmsg(ctx));
			exit(1);
		}
	}
	return (now() - t0) / (double)steps;
}

int main(int argc, char **argv)
{
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	static const char *const names[] = {
		"step_begin + step_end",
		"  + sync_begin/sync_end",
		"  + 2 grad_local + grad_total",
	};
	long steps = argc > 1 ? atol(argv[1]) : 2000000;
	copus_ctx *ctx;

	if (steps < 1) {
		fprintf(stderr, "usage: %s [steps]\n", argv[0]);
		return 2;
	}
	/* Outside a job: no hints, no checkpoints, one process. */
	unsetenv("SLURM_JOB_ID");
	cfg.limits = (copus_batch_limits){ 64, 4096, 4, 256, true };
	cfg.no_signal_handler = 1;
	if (copus_init(&cfg, &ctx) != COPUS_OK) {
		fprintf(stderr, "copus_init failed\n");
		return 1;
	}
	run(ctx, steps / 10, 2); /* warm caches */
	printf("libcopus per-step overhead, %ld steps each, 1 process\n", steps);
	for (int mode = 0; mode < 3; mode++)
		printf("%-32s %8.1f ns/step\n", names[mode],
		       1e9 * run(ctx, steps, mode));
	copus_finalize(ctx);
	return 0;
}
