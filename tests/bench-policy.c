/*
 * Benchmark of the co-adaptive policy's decision time on synthetic clusters
 * (three GPU types, 8 GPUs a node) and jobs with fitted-model-like speedup
 * curves: the median time of a round after the first (speedup tables warm),
 * for a growing number of jobs and nodes.
 *
 *   bench-policy [JOBS NODES]...   default: 100 128, 1000 1024, 2000 2048
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/policy.h>


static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned rng = 1;

static double uni(double lo, double hi)
{
	rng = rng * 1664525u + 1013904223u;
	return lo + (hi - lo) * ((rng >> 8) / 16777216.0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void bench(int njobs, int nnodes)
{
	copus_node *nodes = calloc(nnodes, sizeof(*nodes));
	copus_job *jobs = calloc(njobs, sizeof(*jobs));
	copus_model *models = calloc(njobs, sizeof(*models));
	const copus_model **mp = calloc((size_t)njobs * 3, sizeof(*mp));
	copus_decision *dec = calloc(njobs, sizeof(*dec));
	copus_policy *pol;
	double times[7];

	for (int k = 0; k < nnodes; k++)
		nodes[k] = (copus_node){ k % 3, 8, true };
	copus_cluster c = { nnodes, nodes, 3, NULL };
	for (int j = 0; j < njobs; j++) {
		/* Parameter ranges of the fits of Pollux's six models. */
		double ac = uni(0.005, 0.2), bc = uni(1e-5, 5e-3);
		double ar = uni(1e-3, 0.1), an = ar * uni(1.1, 5.0);
		models[j] = (copus_model){
			.perf = { ac, bc, an, an * uni(0.001, 0.1), ar,
				  ar * uni(0.001, 0.1), uni(1.0, 3.0) },
			.grad = { 1.0, uni(1.0, 1000.0) },
			.limits = { 64, 64 * 64, 4, 256, true },
		};
		for (int t = 0; t < 3; t++)
			mp[j * 3 + t] = &models[j];
		int req = 1 << (int)uni(0, 5);
		jobs[j] = (copus_job){
			.id = (uint64_t)j + 1, .elastic = uni(0, 1) < 0.8,
			.min_gpus = 1, .max_gpus = 64, .req_gpus = req,
			.req_batch = 64, .remaining = uni(60, 36000),
			.models = &mp[j * 3], .max_gpus_had = req,
			.submit_time = -uni(0, 3600),
		};
		if (!jobs[j].elastic)
			jobs[j].min_gpus = jobs[j].max_gpus = req;
	}
	copus_policy_create("copus", NULL, &pol);
	for (int r = 0; r < 8; r++) {
		double t0 = now_s();
		int rc = copus_policy_decide(pol, &c, jobs, njobs, 0.0, dec);
		double t1 = now_s();
		if (rc != COPUS_OK) {
			printf("decide failed: %s\n", copus_strerror(rc));
			break;
		}
		if (r > 0)
			times[r - 1] = t1 - t0;
	}
	qsort(times, 7, sizeof(double), cmp);
	int placed = 0, gpus = 0;
	for (int j = 0; j < njobs; j++) {
		placed += dec[j].gpu_type >= 0;
		gpus += dec[j].gpus;
	}
	printf("%6d jobs %6d nodes (%6d GPUs): median round %8.2f ms, "
	       "%d jobs placed on %d GPUs\n", njobs, nnodes, nnodes * 8,
	       times[3] * 1e3, placed, gpus);
	copus_policy_destroy(pol);
	free(nodes);
	free(jobs);
	free(models);
	free(mp);
	free(dec);
}

int main(int argc, char **argv)
{
	if (argc > 2) {
		for (int i = 1; i + 1 < argc; i += 2)
			bench(atoi(argv[i]), atoi(argv[i + 1]));
		return 0;
	}
	bench(100, 128);
	bench(1000, 1024);
	bench(2000, 2048);
	return 0;
}
