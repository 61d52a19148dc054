/*
 * Benchmark of the core model: nanoseconds per memoised speedup lookup, per
 * cold speedup evaluation (a best-batch search), and per fit of the seven
 * parameters on synthetic and on real observations.
 *
 *   bench-model [DATA_DIR]    (DATA_DIR = the reference data, optional)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <copus/model.h>

#include "profiles.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const copus_model MODEL = {
	.perf = { 0.05, 0.002, 0.2, 0.01, 0.03, 0.004, 1.5 },
	.grad = { .sqr = 1.0, .var = 50.0 },
	.limits = { .init_batch = 128, .max_batch = 8192, .min_local = 8,
		    .max_local = 256, .accumulation = true },
};

static void bench_speedup(void)
{
	copus_speedup *s;
	const int max_nodes = 16, max_replicas = 64;
	double v, sink = 0.0;

	if (copus_speedup_create(&MODEL, max_nodes, max_replicas, 1, 1, &s))
		abort();
	/* Cold: every shape computed once. */
	double t0 = now();
	long cold = 0;
	for (int r = 1; r <= max_replicas; r++)
		for (int n = 1; n <= max_nodes && n <= r; n++, cold++)
			copus_speedup_get(s, n, r, &v), sink += v;
	double t1 = now();
	/* Warm: repeated lookups in a pseudo-random order. */
	long warm = 20000000;
	unsigned x = 12345;
	for (long i = 0; i < warm; i++) {
		x = x * 1103515245u + 12345u;
		int r = 1 + (x >> 8) % max_replicas;
		int n = 1 + (x >> 20) % max_nodes;
		if (n > r)
			n = r;
		copus_speedup_get(s, n, r, &v);
		sink += v;
	}
	double t2 = now();
	printf("speedup, first evaluation (best-batch search): %8.0f ns\n",
	       (t1 - t0) / cold * 1e9);
	printf("speedup, memoised lookup:                      %8.1f ns\n",
	       (t2 - t1) / warm * 1e9);
	if (sink < 0)
		printf("%g\n", sink);
	copus_speedup_destroy(s);
}

static void bench_fit(const char *label, const copus_observation *obs,
		      size_t n)
{
	copus_perf_params p;
	copus_fit_report rep;
	int reps = 0;
	double t0 = now(), t1;
	do {
		if (copus_fit(obs, n, &p, &rep) != COPUS_OK) {
			printf("%s: fit failed\n", label);
			return;
		}
		reps++;
		t1 = now();
	} while (t1 - t0 < 1.0);
	printf("fit, %-28s %4zu obs: %8.3f ms (%d evaluations)\n", label, n,
	       (t1 - t0) / reps * 1e3, rep.evaluations);
}

int main(int argc, char **argv)
{
	bench_speedup();

	copus_observation obs[64];
	size_t n = 0;
	for (int nodes = 1; nodes <= 4; nodes++)
		for (int per = 1; per <= 4; per++)
			for (int l = 16; l <= 128; l *= 2) {
				copus_step_times t;
				copus_step_time(&MODEL.perf, nodes, nodes * per,
						l, 0, &t);
				obs[n++] = (copus_observation){
					nodes, nodes * per, l, 0, t.grad, t.iter
				};
			}
	bench_fit("synthetic grid", obs, n);
	bench_fit("synthetic, 8 observations", obs, 8);

	if (argc > 1) {
		static const char *models[] = { "bert", "cifar10",
						"deepspeech2", "imagenet",
						"ncf", "yolov3" };
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/pollux/traces", argv[1]);
		for (size_t i = 0; i < 6; i++) {
			struct placement_row *rows;
			long m = read_placements(dir, models[i], &rows);
			if (m <= 0)
				continue;
			copus_observation *o = malloc(m * sizeof(*o));
			for (long j = 0; j < m; j++)
				o[j] = rows[j].obs;
			char label[64];
			snprintf(label, sizeof(label), "%s placements", models[i]);
			bench_fit(label, o, (size_t)m);
			/* What a running job has: a dozen shapes. */
			snprintf(label, sizeof(label), "%s, first 12 rows", models[i]);
			bench_fit(label, o, m < 12 ? (size_t)m : 12);
			free(o);
			free(rows);
		}
	}
	return 0;
}
