/*
 * tests/test-runtime: planned degrees. A job that describes its model gets
 * the core planner's degrees on every rank, its hint carries the model,
 * and its checkpoint records the stages of its cell.
 */
#include <copus_config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/copus.h>
#include <copus/plan.h>
#include <copus/planner.h>

#include "harness.h"
#include "test-runtime.h"

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
void test_planned_degrees_are_the_planners_on_every_rank(void)
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
void test_planned_degrees_follow_the_world(void)
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
void test_planned_config_errors(void)
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
void test_hint_carries_the_model(void)
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
void test_planned_with_calibrated_constants(void)
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
void test_ranks_that_plan_differently_stop(void)
{
	copus_config c = planned_config(&small_model, 4, 0);

	clear_env();
	c.agree = agree_other_plan;
	expect_init_error(&c, COPUS_ESTATE, "planned the model differently");
	clear_env();
}

/* A program built before the model was appended to copus_config runs
 * as it did. */
void test_config_of_the_older_layout(void)
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


/*
 * A planned job's stages depend on its cell: its checkpoint records them,
 * and a run with the same degrees but other stages reshards it (the
 * callback told the old stages' layers) or refuses it, never loads a stage
 * into another's layers; a run with the same stages loads it as it is.
 */
void test_planned_stages_travel_with_the_checkpoint(void)
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
	crc0 = put_tmp_file("ckpt-3.r0", "stage 0\n");
	crc1 = put_tmp_file("ckpt-3.r1", "stage 1\n");
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

