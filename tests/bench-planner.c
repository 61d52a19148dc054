/*
 * Benchmark of the planner: the time of one model x cell search (every
 * split of the cell's GPUs, micro-batch counts, stage splits and memory)
 * for the largest models and cells of Arena's trace, and of a memoised
 * lookup. The GPU constants are of the size copus-plan calibrates; the
 * times do not depend on them much.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <copus/planner.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static copus_planner_gpu gpu(void)
{
	copus_planner_gpu g;

	memset(&g, 0, sizeof(g));
	g.peak_flops = 19.5e12;
	g.memory_bytes = 40e9;
	g.memory_bandwidth = 1555e9;
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++) {
		g.efficiency[k] = 4.0;
		g.param_s[k] = 1e-9;
	}
	g.overhead_s = 0.3;
	g.comm_scale[0] = g.comm_scale[1] = 1.0;
	for (int c = 0; c < COPUS_COLL_COUNT; c++) {
		g.alpha[COPUS_LINK_INTRA][c] = 2e-5;
		g.alpha[COPUS_LINK_INTER][c] = 5e-5;
		g.inv_beta[COPUS_LINK_INTRA][c] = 1.0 / 100e9;
		g.inv_beta[COPUS_LINK_INTER][c] = 1.0 / 5e9;
	}
	g.inter_links = 1.0;
	g.shape_exp[COPUS_SHAPE_PEERS] = -0.7;
	g.shape_exp[COPUS_SHAPE_RANKS_PER_NODE] = 0.3;
	g.shape_exp[COPUS_SHAPE_GROUPS_PER_NODE] = 0.4;
	g.shape_exp[COPUS_SHAPE_NODES] = 0.3;
	return g;
}

int main(void)
{
	static copus_planner_layer layers[3][COPUS_PLANNER_MAX_LAYERS];
	static const char *names[3] = { "bert 15B (50 layers)",
					"moe 70B (34 layers)",
					"wide-resnet 13B (35 layers)" };
	const copus_planner_desc desc[3] = {
		{ .arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2,
		  .layers = 48, .hidden = 5120, .heads = 40, .seq_len = 1024,
		  .vocab = 51200 },
		{ .arch = COPUS_ARCH_MOE, .dtype_bytes = 2, .layers = 32,
		  .hidden = 2048, .heads = 16, .seq_len = 1024,
		  .vocab = 32000, .experts = 64, .expert_group = 2048 },
		{ .arch = COPUS_ARCH_WIDE_RESNET, .dtype_bytes = 4,
		  .depth = 101, .width_factor = 16, .channels = 320,
		  .classes = 1024, .image_size = 224 },
	};
	const copus_planner_cell cells[3] = { { 1, 16 }, { 2, 8 }, { 8, 2 } };
	copus_planner_model m[3];
	copus_planner_gpu g = gpu();
	copus_planner_plan p;
	double worst = 0.0;

	for (int i = 0; i < 3; i++) {
		int n;
		if (copus_planner_layers(&desc[i], layers[i],
					 COPUS_PLANNER_MAX_LAYERS, &n))
			return 1;
		m[i] = (copus_planner_model){ layers[i], n, desc[i].dtype_bytes,
					      (int)desc[i].arch - 1 };
	}
	printf("one model x cell search (16 GPUs, batch 1024):\n");
	for (int i = 0; i < 3; i++) {
		for (int c = 0; c < 3; c++) {
			int reps = 200, rc = 0;
			double t0 = now();
			for (int r = 0; r < reps; r++)
				rc = copus_planner_best(&m[i], 1024, &g,
							&cells[c], NULL, &p);
			double ms = (now() - t0) / reps * 1e3;
			if (ms > worst)
				worst = ms;
			printf("  %-28s %2d x %2d: %.3f ms (%s)\n", names[i],
			       cells[c].nodes, cells[c].gpus_per_node, ms,
			       rc == COPUS_OK ? "plan" : "no plan fits");
		}
	}
	printf("slowest search: %.3f ms (target < 5 ms)\n", worst);

	/* Memoised lookups: 3 models x 5 batches x 4 types x 5 shapes. */
	copus_planner_cache *cache;
	const int shapes[5][2] = { { 1, 1 }, { 1, 2 }, { 1, 4 }, { 2, 4 },
				   { 4, 4 } };
	const copus_planner_plan *q;
	int keys = 0;
	if (copus_planner_cache_new(1024, &cache))
		return 1;
	for (int i = 0; i < 3; i++)
		for (int b = 0; b < 5; b++)
			for (int t = 0; t < 4; t++)
				for (int s = 0; s < 5; s++) {
					copus_planner_key k = {
						i, 128 << b, t, shapes[s][0],
						shapes[s][1]
					};
					copus_planner_best_cached(
						cache, &k, &m[i], &g, NULL, &q);
					keys++;
				}
	long n = 20000000, hits = 0;
	unsigned x = 1;
	double t0 = now();
	for (long r = 0; r < n; r++) {
		x = x * 1664525u + 1013904223u;
		copus_planner_key k = { (int)(x >> 8) % 3, 128 << ((x >> 12) % 5),
					(int)(x >> 16) % 4, 0, 0 };
		int s = (int)(x >> 20) % 5;
		k.nodes = shapes[s][0];
		k.gpus_per_node = shapes[s][1];
		hits += copus_planner_cache_find(cache, &k, &q) != COPUS_ENODATA;
	}
	double ns = (now() - t0) / n * 1e9;
	printf("memoised lookup: %.1f ns over %d stored answers (%ld of %ld "
	       "found; target < 100 ns)\n",
	       ns, keys, hits, n);
	copus_planner_cache_free(cache);
	return 0;
}
