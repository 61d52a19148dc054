/*
 * The planner: the layers of described models, the memory rule, the stage
 * split, the refusal of cells a model does not fit, tensor parallelism kept
 * on one node, the cache and the calibration.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <copus/planner.h>

#include "harness.h"

/* A GPU of 1 TFLOP/s at efficiency 1, memory in GiB, collectives of
 * alpha 10 us and 10 GB/s within a node, 1 GB/s across on the one
 * network link of a node. */
static copus_planner_gpu gpu_of(double mem_gib)
{
	copus_planner_gpu g;

	memset(&g, 0, sizeof(g));
	g.peak_flops = 1e12;
	g.memory_bytes = mem_gib * 1073741824.0;
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		g.efficiency[k] = 1.0;
	g.comm_scale[COPUS_LINK_INTRA] = 1.0;
	g.comm_scale[COPUS_LINK_INTER] = 1.0;
	g.inter_links = 1.0;
	for (int c = 0; c < COPUS_COLL_COUNT; c++) {
		g.alpha[COPUS_LINK_INTRA][c] = 1e-5;
		g.alpha[COPUS_LINK_INTER][c] = 1e-5;
		g.inv_beta[COPUS_LINK_INTRA][c] = 1e-10;
		g.inv_beta[COPUS_LINK_INTER][c] = 1e-9;
	}
	return g;
}

/* n equal layers of a transformer-like shape. */
static copus_planner_model uniform(copus_planner_layer *y, int n,
				   double params)
{
	for (int l = 0; l < n; l++)
		y[l] = (copus_planner_layer){
			.flops = 1e10,
			.params = params,
			.out_elems = 1e4,
			.work_elems = 1e5,
			.tensor_elems = 2e4,
		};
	return (copus_planner_model){ y, n, 2, 0 };
}

static void described_models_have_their_nominal_parameters(void)
{
	static copus_planner_layer y[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_desc bert = { .arch = COPUS_ARCH_TRANSFORMER,
				    .dtype_bytes = 2, .layers = 32,
				    .hidden = 2560, .heads = 32,
				    .seq_len = 1024, .vocab = 51200 };
	copus_planner_desc moe = { .arch = COPUS_ARCH_MOE, .dtype_bytes = 2,
				   .layers = 16, .hidden = 1536, .heads = 16,
				   .seq_len = 1024, .vocab = 32000,
				   .experts = 32, .expert_group = 2048 };
	copus_planner_desc wrn = { .arch = COPUS_ARCH_WIDE_RESNET,
				   .dtype_bytes = 4, .depth = 50,
				   .width_factor = 2, .channels = 224,
				   .classes = 1024, .image_size = 224 };
	copus_planner_model m = { y, 0, 2, 0 };
	int n;

	ASSERT_STATUS(copus_planner_layers(&bert, y, 512, &n), COPUS_OK);
	m.n_layers = n;
	CU_ASSERT_EQUAL(n, 34);
	ASSERT_CLOSE(copus_planner_params(&m) / 1e9, 2.6, 0.03);
	ASSERT_STATUS(copus_planner_layers(&moe, y, 512, &n), COPUS_OK);
	m.n_layers = n;
	ASSERT_CLOSE(copus_planner_params(&m) / 1e9, 10.0, 0.03);
	ASSERT_STATUS(copus_planner_layers(&wrn, y, 512, &n), COPUS_OK);
	m.n_layers = n;
	CU_ASSERT_EQUAL(n, 18); /* stem, 16 blocks, head */
	ASSERT_CLOSE(copus_planner_params(&m) / 1e9, 0.5, 0.02);
	ASSERT_STATUS(copus_planner_layers(&bert, y, 10, &n), COPUS_ERANGE);
	bert.hidden = 0;
	ASSERT_STATUS(copus_planner_layers(&bert, y, 512, &n), COPUS_EINVAL);
	wrn.depth = 34;
	ASSERT_STATUS(copus_planner_layers(&wrn, y, 512, &n), COPUS_EINVAL);
}

static void a_uniform_transformer_splits_into_equal_stages(void)
{
	copus_planner_layer y[8];
	copus_planner_model m = uniform(y, 8, 1e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell cell = { 1, 4 };
	copus_planner_plan p;
	const int want[5] = { 0, 2, 4, 6, 8 };

	/* Tensor and data collectives cost a second each, sends nothing:
	 * four stages are the best plan. */
	for (int l = 0; l < COPUS_LINK_COUNT; l++) {
		g.alpha[l][COPUS_COLL_ALL_REDUCE] = 10.0;
		g.alpha[l][COPUS_COLL_SEND] = 0.0;
		g.inv_beta[l][COPUS_COLL_SEND] = 0.0;
	}
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &cell, NULL, &p),
		      COPUS_OK);
	CU_ASSERT_EQUAL(p.degrees.pipeline, 4);
	CU_ASSERT_EQUAL(p.degrees.tensor, 1);
	CU_ASSERT_EQUAL(p.degrees.data, 1);
	CU_ASSERT_EQUAL(memcmp(p.first_layer, want, sizeof(want)), 0);
	if (memcmp(p.first_layer, want, sizeof(want)) != 0)
		fprintf(stderr, "stages start at %d %d %d %d %d\n",
			p.first_layer[0], p.first_layer[1], p.first_layer[2],
			p.first_layer[3], p.first_layer[4]);
	/* The bubble shrinks with micro-batches: the most are chosen, and
	 * the time is (M + stages - 1) micro-batches of one stage. */
	CU_ASSERT_EQUAL(p.micro_batches, 16);
	double stage = 2 * 4.0 * 1e10 * (64.0 / 16) / 1e12;
	ASSERT_CLOSE(p.seconds, (16 + 3) * stage, 1e-9);
	ASSERT_CLOSE(p.compute_s, p.seconds, 1e-9);
}

static void a_model_that_does_not_fit_one_gpu_is_refused_there(void)
{
	copus_planner_layer y[16];
	/* 16 layers of 62.5 M parameters: 1e9 parameters, 16 GB of state,
	 * on GPUs of 2 GiB. */
	copus_planner_model m = uniform(y, 16, 62.5e6);
	copus_planner_gpu g = gpu_of(2.0);
	copus_planner_cell one = { 1, 1 }, sixteen = { 2, 8 };
	copus_planner_plan p;

	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &one, NULL, &p),
		      COPUS_ERANGE);
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &sixteen, NULL, &p),
		      COPUS_OK);
	CU_ASSERT(p.memory_bytes <= g.memory_bytes);
	CU_ASSERT_EQUAL(p.degrees.data * p.degrees.tensor * p.degrees.pipeline,
			16);
	/* No split of 16 GPUs holds a replica per GPU. */
	CU_ASSERT(p.degrees.data < 16);
}

static void the_memory_rule(void)
{
	copus_planner_layer y[2] = {
		{ .flops = 1e9, .params = 1e6, .out_elems = 100,
		  .work_elems = 1000 },
		{ .flops = 1e9, .params = 3e6, .expert_params = 8e6,
		  .out_elems = 10, .work_elems = 500 },
	};
	copus_planner_model m = { y, 2, 2, 0 };
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell cell = { 1, 4 };
	copus_planner_plan p;
	double want;

	/* Data 2 x tensor 2, one stage, 2 micro-batches of 4 samples. */
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 2, 1, 2 };
	p.micro_batches = 2;
	p.first_layer[1] = 2;
	ASSERT_STATUS(copus_planner_price(&m, 16, &g, &cell, NULL, &p),
		      COPUS_OK);
	/* Held: 4e6 / 2 tensor ranks + 8e6 / 4 data x tensor ranks = 4e6
	 * parameters; 4 bytes of weights and gradients whole, 12 bytes of
	 * optimizer state split over 2 data ranks; one micro-batch of 4
	 * samples in flight: layer 1's input (100) and the largest work
	 * (1000) over 2 tensor ranks, in 2-byte elements. */
	want = 4.0 * 4e6 + 12.0 * 4e6 / 2 + (100.0 + 1000.0 / 2) * 4 * 2;
	ASSERT_CLOSE(p.memory_bytes, want, 1e-12);

	/* Three layers in two stages (two layers, one), tensor 2, 4
	 * micro-batches of 4: stage 0 holds min(4, 2) micro-batches in
	 * flight of its second layer's input (100) and the largest work
	 * (1000) of one; stage 1 one micro-batch of its input (50). */
	copus_planner_layer z[3] = {
		{ .flops = 1e9, .params = 1e6, .out_elems = 100,
		  .work_elems = 1000 },
		{ .flops = 1e9, .params = 1e6, .out_elems = 50,
		  .work_elems = 400 },
		{ .flops = 1e9, .params = 1e6, .out_elems = 10,
		  .work_elems = 300 },
	};
	copus_planner_model m3 = { z, 3, 2, 0 };
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 1, 2, 2 };
	p.micro_batches = 4;
	p.first_layer[1] = 2;
	p.first_layer[2] = 3;
	ASSERT_STATUS(copus_planner_price(&m3, 16, &g, &cell, NULL, &p),
		      COPUS_OK);
	double s0 = 16.0 * 2e6 / 2 + (2 * 100.0 + 1000.0 / 2) * 4 * 2;
	double s1 = 16.0 * 1e6 / 2 + (50.0 + 300.0 / 2) * 4 * 2;
	ASSERT_CLOSE(p.memory_bytes, s0 > s1 ? s0 : s1, 1e-12);

	/* Less memory than that: the plan does not fit. */
	g.memory_bytes = p.memory_bytes * 0.99;
	ASSERT_STATUS(copus_planner_price(&m3, 16, &g, &cell, NULL, &p),
		      COPUS_ERANGE);
	/* Not a plan of the cell. */
	p.degrees.data = 2;
	ASSERT_STATUS(copus_planner_price(&m3, 16, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
}

/* The activations a layer holds cost 7 passes through the GPU's memory
 * at its bandwidth, split over tensor ranks; without a bandwidth, none. */
static void activations_cost_memory_bandwidth_time(void)
{
	copus_planner_layer y[2];
	copus_planner_model m = uniform(y, 2, 1e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell cell = { 1, 2 };
	copus_planner_plan p, q;

	/* Tensor 2, one stage, 2 micro-batches of 4 samples. */
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 1, 1, 2 };
	p.micro_batches = 2;
	p.first_layer[1] = 2;
	q = p;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &p),
		      COPUS_OK);
	g.memory_bandwidth = 1e11;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &q),
		      COPUS_OK);
	/* 2 micro-batches x 2 layers x 7 passes x 1e5 elements of 2 bytes
	 * x 4 samples / 2 tensor ranks / 1e11 bytes/s. */
	ASSERT_CLOSE(q.compute_s - p.compute_s,
		     2.0 * 2.0 * 7.0 * 1e5 * 2.0 * 4.0 / 2.0 / 1e11, 1e-9);
	ASSERT_CLOSE(q.seconds - p.seconds, q.compute_s - p.compute_s, 1e-9);
	ASSERT_CLOSE(q.tensor_s, p.tensor_s, 0);
	ASSERT_CLOSE(q.memory_bytes, p.memory_bytes, 0);
}

static void the_time_per_parameter_counts_a_stage_s_weights_whole(void)
{
	copus_planner_layer y[4];
	copus_planner_model m = uniform(y, 4, 1e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell cell = { 1, 4 };
	copus_planner_plan p, q;

	/* One stage of 4 layers over 4 tensor ranks, then over 2 tensor
	 * ranks x 2 stages of 2 layers: the time per parameter adds 4e6 x
	 * 1e-9 s (the stage's weights, not a tensor rank's quarter of them)
	 * to the first and 2e6 x 1e-9 s (the weights of the slowest
	 * stage) to the second. */
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 1, 1, 4 };
	p.micro_batches = 1;
	p.first_layer[1] = 4;
	memset(&q, 0, sizeof(q));
	q.degrees = (copus_plan_degrees){ 1, 2, 2 };
	q.micro_batches = 1;
	q.first_layer[1] = 2;
	q.first_layer[2] = 4;
	copus_planner_plan p0 = p, q0 = q;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &p0),
		      COPUS_OK);
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &q0),
		      COPUS_OK);
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		g.param_s[k] = 1e-9;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &p),
		      COPUS_OK);
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &q),
		      COPUS_OK);
	ASSERT_CLOSE(p.compute_s - p0.compute_s, 4e6 * 1e-9, 1e-12);
	ASSERT_CLOSE(q.compute_s - q0.compute_s, 2e6 * 1e-9, 1e-12);
	ASSERT_CLOSE(p.seconds - p0.seconds, 4e6 * 1e-9, 1e-12);
}

static void tensor_parallelism_stays_within_a_node(void)
{
	copus_planner_layer y[4];
	copus_planner_model m = uniform(y, 4, 250e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell two_nodes = { 2, 2 };
	copus_planner_plan p, q;

	/* Heavy activations, a costly gradient all-reduce across nodes and
	 * dear pipelines: the best plan splits tensors over the two GPUs of
	 * a node and keeps data ranks across nodes, not tensor ranks. */
	for (int l = 0; l < 4; l++)
		y[l].tensor_elems = 1e7;
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		g.alpha[l][COPUS_COLL_SEND] = 10.0;
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &two_nodes, NULL, &p),
		      COPUS_OK);
	CU_ASSERT_EQUAL(p.degrees.tensor, 2);
	CU_ASSERT_EQUAL(p.degrees.data, 2);
	if (p.degrees.tensor != 2 || p.degrees.data != 2)
		fprintf(stderr, "data %d tensor %d pipeline %d\n",
			p.degrees.data, p.degrees.tensor, p.degrees.pipeline);

	/* The same plan costs more with its tensor group across nodes, and
	 * as much on two nodes as on one when the group fits a node. */
	memset(&q, 0, sizeof(q));
	q.degrees = (copus_plan_degrees){ 1, 1, 2 };
	q.micro_batches = 1;
	q.first_layer[1] = 4;
	copus_planner_cell within = { 1, 2 }, across = { 2, 1 };
	copus_planner_plan a = q, b = q;
	ASSERT_STATUS(copus_planner_price(&m, 64, &g, &within, NULL, &a),
		      COPUS_OK);
	ASSERT_STATUS(copus_planner_price(&m, 64, &g, &across, NULL, &b),
		      COPUS_OK);
	CU_ASSERT(b.tensor_s > 5.0 * a.tensor_s);
	CU_ASSERT(b.seconds > a.seconds);
	copus_planner_plan c = q, d = q;
	c.degrees.data = d.degrees.data = 2;
	copus_planner_cell four = { 1, 4 };
	ASSERT_STATUS(copus_planner_price(&m, 64, &g, &two_nodes, NULL, &c),
		      COPUS_OK);
	ASSERT_STATUS(copus_planner_price(&m, 64, &g, &four, NULL, &d),
		      COPUS_OK);
	ASSERT_CLOSE(c.tensor_s, d.tensor_s, 1e-12);
}

/*
 * Groups that span nodes and run at once share each node's link: two data
 * groups through each node's link take twice the time per byte of one,
 * and so do the two ranks of a stage that both send to the next node; two
 * links per node carry them at the rate of one, and so does a GPU whose
 * links are unknown (0).
 */
static void groups_on_one_node_share_its_link(void)
{
	copus_planner_layer y[4];
	copus_planner_model m = uniform(y, 4, 1e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell cell = { 2, 2 };
	copus_planner_plan p, q, r;

	/* Data 2 x tensor 2: data groups {0, 2} and {1, 3}, two through
	 * each node's link. Gradients: 4 layers x 1e6 / 2 parameters of
	 * 2 bytes, all-reduced over 2 ranks (factor 1) at 1e-9 s/byte. */
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 2, 1, 2 };
	p.micro_batches = 1;
	p.first_layer[1] = 4;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &p),
		      COPUS_OK);
	ASSERT_CLOSE(p.data_s, 1e-5 + 2.0 * 4.0 * 5e5 * 2.0 * 1e-9, 1e-12);
	for (int links = 0; links <= 2; links += 2) {
		copus_planner_plan o = p;
		g.inter_links = links;
		ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &o),
			      COPUS_OK);
		ASSERT_CLOSE(o.data_s, 1e-5 + 4.0 * 5e5 * 2.0 * 1e-9, 1e-12);
	}
	g.inter_links = 1.0;

	/* Data 4: one group, whose two ranks on a node take turns on its
	 * link: factor 2 x 3 / 4, no sharing. */
	q = p;
	q.degrees = (copus_plan_degrees){ 4, 1, 1 };
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &q),
		      COPUS_OK);
	ASSERT_CLOSE(q.data_s, 1e-5 + 1.5 * 4.0 * 1e6 * 2.0 * 1e-9, 1e-12);

	/* Data 2 x pipeline 2 with data ranks inside pipeline ranks: stage
	 * 0 is ranks 0 and 1, node 0, and both send to node 1 at once:
	 * activations (1e4 elements x 4 samples x 2 bytes) out and their
	 * gradients back, each at twice 1e-9 s/byte. */
	memset(&r, 0, sizeof(r));
	r.degrees = (copus_plan_degrees){ 2, 2, 1 };
	r.micro_batches = 1;
	r.data_inner = 1;
	r.first_layer[1] = 2;
	r.first_layer[2] = 4;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &r),
		      COPUS_OK);
	ASSERT_CLOSE(r.pipeline_s, 2.0 * (1e-5 + 2.0 * 1e4 * 4.0 * 2.0 * 1e-9),
		     1e-12);
}

/*
 * Tensor ranks split a layer's heads: a tensor degree that does not divide
 * them is never chosen or priced, though the same layers with no such
 * limit would take it.
 */
/* The shape exponents price a group by its ranks on a node, the groups
 * sharing the node's link, the nodes it spans and, within a node, its
 * peers. */
static void a_collective_is_priced_by_its_group_s_shape(void)
{
	copus_planner_layer y[4];
	copus_planner_model m = uniform(y, 4, 1e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell cell = { 4, 2 };
	copus_planner_plan p;
	copus_planner_group pair = { 2, 2, 1, 1 };
	copus_planner_group quad = { 4, 1, 4, 1 };
	double grads = 4.0 * 1e6 * 2.0; /* bytes of one stage's gradients */

	g.shape_exp[COPUS_SHAPE_PEERS] = -1.0;
	g.shape_exp[COPUS_SHAPE_RANKS_PER_NODE] = 1.0;
	g.shape_exp[COPUS_SHAPE_GROUPS_PER_NODE] = 0.5;
	g.shape_exp[COPUS_SHAPE_NODES] = 2.0;

	/* One rank on each of two nodes alone: the reference shape. */
	ASSERT_CLOSE(copus_planner_collective(&g, COPUS_COLL_ALL_REDUCE, &pair,
					      1e6),
		     1e-5 + 1.0 * 1e6 * 1e-9, 1e-15);
	/* Four ranks of one node: (4 - 1)^-1 of the time per byte. */
	ASSERT_CLOSE(copus_planner_collective(&g, COPUS_COLL_ALL_GATHER, &quad,
					      1e6),
		     1e-5 + 0.75 * 1e6 * 1e-10 / 3.0, 1e-15);
	/* A group of one rank costs nothing. */
	quad.ranks = quad.ranks_per_node = 1;
	ASSERT_CLOSE(copus_planner_collective(&g, COPUS_COLL_SEND, &quad, 1e6),
		     0.0, 0);

	/* Data 8 on 4 nodes of 2: one group, 2 ranks on each node, 4
	 * nodes: 2^1 x (4 / 2)^2 = 8 times the reference rate, factor
	 * 2 x 7 / 8. */
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 8, 1, 1 };
	p.micro_batches = 1;
	p.first_layer[1] = 4;
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &p),
		      COPUS_OK);
	ASSERT_CLOSE(p.data_s, 1e-5 + 1.75 * 8.0 * grads * 1e-9, 1e-12);

	/* Data 4 x tensor 2: data groups {0, 2, 4, 6} and {1, 3, 5, 7}, one
	 * rank on each of 4 nodes, two groups through each link: the share
	 * 2 to the power 1 + 0.5, and (4 / 2)^2; the gradients are split
	 * over the tensor ranks. Tensor pairs stay on a node (one peer). */
	p.degrees = (copus_plan_degrees){ 4, 1, 2 };
	ASSERT_STATUS(copus_planner_price(&m, 8, &g, &cell, NULL, &p),
		      COPUS_OK);
	ASSERT_CLOSE(p.data_s,
		     1e-5 + 1.5 * pow(2.0, 1.5) * 4.0 * grads / 2.0 * 1e-9,
		     1e-12);
}

static void a_tensor_degree_divides_the_heads(void)
{
	copus_planner_layer y[4];
	copus_planner_model m = uniform(y, 4, 250e6);
	copus_planner_gpu g = gpu_of(80.0);
	copus_planner_cell three = { 1, 3 };
	copus_planner_plan p;

	for (int l = 0; l < 4; l++)
		y[l].tensor_elems = 1e3;
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		for (int c = 0; c < COPUS_COLL_COUNT; c++)
			g.alpha[l][c] = c == COPUS_COLL_ALL_REDUCE &&
						l == COPUS_LINK_INTRA ? 1e-6 : 10.0;
	ASSERT_STATUS(copus_planner_best(&m, 60, &g, &three, NULL, &p),
		      COPUS_OK);
	CU_ASSERT_EQUAL(p.degrees.tensor, 3);
	for (int l = 0; l < 4; l++)
		y[l].tensor_divides = 4;
	ASSERT_STATUS(copus_planner_best(&m, 60, &g, &three, NULL, &p),
		      COPUS_OK);
	CU_ASSERT_NOT_EQUAL(p.degrees.tensor, 3);
	memset(&p, 0, sizeof(p));
	p.degrees = (copus_plan_degrees){ 1, 1, 3 };
	p.micro_batches = 1;
	p.first_layer[1] = 4;
	CU_ASSERT_EQUAL(copus_planner_price(&m, 60, &g, &three, NULL, &p),
			COPUS_ERANGE);

	/* A described transformer of 4 heads on 3 and 6 GPUs. */
	static copus_planner_layer z[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_desc d = { .arch = COPUS_ARCH_TRANSFORMER,
				 .dtype_bytes = 2, .layers = 4, .hidden = 256,
				 .heads = 4, .seq_len = 128, .vocab = 1000 };
	int n;
	ASSERT_STATUS(copus_planner_layers(&d, z, COPUS_PLANNER_MAX_LAYERS,
					   &n), COPUS_OK);
	copus_planner_model t = { z, n, 2, 0 };
	for (int gpus = 3; gpus <= 6; gpus += 3) {
		copus_planner_cell c = { 1, gpus };
		copus_planner_plan q;
		int rc = copus_planner_best(&t, 60, &g, &c, NULL, &q);
		CU_ASSERT(rc == COPUS_ERANGE ||
			  (rc == COPUS_OK && q.degrees.tensor % 3 != 0));
	}
}

static void the_cache_returns_the_answer_it_stored(void)
{
	copus_planner_layer y[4];
	copus_planner_model m = uniform(y, 4, 1e6), big = uniform(y, 4, 1e6);
	copus_planner_gpu g = gpu_of(16.0);
	copus_planner_cache *c;
	copus_planner_key k = { 7, 64, 0, 1, 2 };
	const copus_planner_plan *p, *q;
	copus_planner_plan direct;
	copus_planner_cell cell = { 1, 2 };

	ASSERT_STATUS(copus_planner_cache_new(4, &c), COPUS_OK);
	ASSERT_STATUS(copus_planner_cache_find(c, &k, &p), COPUS_ENODATA);
	ASSERT_STATUS(copus_planner_best_cached(c, &k, &m, &g, NULL, &p),
		      COPUS_OK);
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &cell, NULL, &direct),
		      COPUS_OK);
	ASSERT_CLOSE(p->seconds, direct.seconds, 1e-12);
	ASSERT_STATUS(copus_planner_cache_find(c, &k, &q), COPUS_OK);
	CU_ASSERT_PTR_EQUAL(p, q);
	/* A stored answer is returned without looking at the model. */
	ASSERT_STATUS(copus_planner_best_cached(c, &k, &big, &g, NULL, &q),
		      COPUS_OK);
	CU_ASSERT_PTR_EQUAL(p, q);
	/* "No plan fits" is an answer too. */
	copus_planner_gpu tiny = gpu_of(1e-3);
	copus_planner_key k2 = { 8, 64, 0, 1, 1 };
	ASSERT_STATUS(copus_planner_best_cached(c, &k2, &m, &tiny, NULL, &p),
		      COPUS_ERANGE);
	ASSERT_STATUS(copus_planner_cache_find(c, &k2, &p), COPUS_ERANGE);
	copus_planner_cache_clear(c);
	ASSERT_STATUS(copus_planner_cache_find(c, &k, &p), COPUS_ENODATA);
	copus_planner_cache_free(c);
}

/* Are a and b the same plan, field by field (doubles bit for bit)? */
static bool plans_same(const copus_planner_plan *a,
		       const copus_planner_plan *b)
{
	if (a->degrees.data != b->degrees.data ||
	    a->degrees.tensor != b->degrees.tensor ||
	    a->degrees.pipeline != b->degrees.pipeline ||
	    a->micro_batches != b->micro_batches ||
	    a->data_inner != b->data_inner)
		return false;
	for (int s = 0; s <= a->degrees.pipeline &&
			s <= COPUS_PLANNER_MAX_STAGES; s++)
		if (a->first_layer[s] != b->first_layer[s])
			return false;
	return memcmp(&a->seconds, &b->seconds, sizeof(double)) == 0 &&
	       memcmp(&a->compute_s, &b->compute_s, sizeof(double)) == 0 &&
	       memcmp(&a->tensor_s, &b->tensor_s, sizeof(double)) == 0 &&
	       memcmp(&a->pipeline_s, &b->pipeline_s, sizeof(double)) == 0 &&
	       memcmp(&a->data_s, &b->data_s, sizeof(double)) == 0 &&
	       memcmp(&a->overhead_s, &b->overhead_s, sizeof(double)) == 0 &&
	       memcmp(&a->memory_bytes, &b->memory_bytes, sizeof(double)) == 0;
}

/*
 * An answer the key does not find is found by what it is computed from:
 * under every key, the cache answers what copus_planner_best answers for
 * the model, batch, GPU, options and cell given (a model of the same
 * layers under another key shares the answers; one layer changed, another
 * GPU or other options do not), its status too.
 */
static void answers_are_shared_by_content_alone(void)
{
	static copus_planner_layer ya[COPUS_PLANNER_MAX_LAYERS],
		yb[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_desc bert = { .arch = COPUS_ARCH_TRANSFORMER,
				    .dtype_bytes = 2, .layers = 12,
				    .hidden = 768, .heads = 12,
				    .seq_len = 512, .vocab = 30522 };
	copus_planner_gpu g = gpu_of(16.0), small = gpu_of(0.5);
	copus_planner_options one = COPUS_PLANNER_OPTIONS_INITIALIZER;
	copus_planner_cache *c;
	int n = 0, asked = 0, wrong = 0, differ = 0;

	ASSERT_STATUS(copus_planner_layers(&bert, ya, COPUS_PLANNER_MAX_LAYERS,
					   &n),
		      COPUS_OK);
	memcpy(yb, ya, sizeof(ya));
	one.max_micro_batches = 1;
	ASSERT_STATUS(copus_planner_cache_new(1024, &c), COPUS_OK);
	/* Ids 1, 2: the same layers in two arrays; 3: one layer heavier;
	 * 4: the first layers on a GPU of little memory; 5: other
	 * options. */
	for (int id = 1; id <= 5; id++) {
		copus_planner_model m = { id == 1 ? ya : yb, n, 2, 0 };
		const copus_planner_gpu *gpu = id == 4 ? &small : &g;
		const copus_planner_options *opt = id == 5 ? &one : NULL;
		if (id == 3)
			yb[n / 2].flops *= 3.0;
		if (id == 4)
			memcpy(yb, ya, sizeof(ya));
		for (int nodes = 1; nodes <= 2; nodes++)
			for (int gpn = 1; gpn <= 8; gpn *= 2) {
				copus_planner_key k = { id, 32, 0, nodes, gpn };
				copus_planner_cell cell = { nodes, gpn };
				const copus_planner_plan *p = NULL, *q = NULL;
				copus_planner_plan direct;
				int rc = copus_planner_best_cached(c, &k, &m,
								   gpu, opt,
								   &p);
				int want = copus_planner_best(&m, 32, gpu,
							      &cell, opt,
							      &direct);
				asked++;
				if (rc != want ||
				    (rc == COPUS_OK && !plans_same(p, &direct)))
					wrong++;
				/* Against the first model's answer. */
				k.model = 1;
				if (id > 1 &&
				    copus_planner_cache_find(c, &k, &q) ==
					    COPUS_OK &&
				    (rc != COPUS_OK || !plans_same(p, q)))
					differ++;
			}
	}
	CU_ASSERT_EQUAL(asked, 40);
	CU_ASSERT_EQUAL(wrong, 0);
	/* Some answers of the heavier layer, the small GPU and the other
	 * options are not the first model's. */
	CU_ASSERT(differ >= 3);
	copus_planner_cache_clear(c);
	{
		copus_planner_model m = { yb, n, 2, 0 };
		copus_planner_key k = { 9, 32, 0, 1, 8 };
		copus_planner_cell cell = { 1, 8 };
		const copus_planner_plan *p;
		copus_planner_plan direct;
		ASSERT_STATUS(copus_planner_best_cached(c, &k, &m, &g, NULL,
							&p),
			      copus_planner_best(&m, 32, &g, &cell, NULL,
						 &direct));
		CU_ASSERT(plans_same(p, &direct));
	}
	copus_planner_cache_free(c);
}

static void calibration_recovers_the_constants_that_made_the_times(void)
{
	static copus_planner_layer y[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_desc d = { .arch = COPUS_ARCH_TRANSFORMER,
				 .dtype_bytes = 2, .layers = 8, .hidden = 1024,
				 .heads = 16, .seq_len = 512, .vocab = 32000 };
	copus_planner_model m = { y, 0, 2, 0 };
	copus_planner_gpu truth = gpu_of(40.0), start = gpu_of(40.0);
	copus_planner_sample s[6];
	const copus_planner_cell cells[6] = { { 1, 1 }, { 1, 2 }, { 1, 4 },
					      { 2, 2 }, { 2, 4 }, { 4, 2 } };
	copus_planner_plan p;
	int n;

	ASSERT_STATUS(copus_planner_layers(&d, y, 512, &n), COPUS_OK);
	m.n_layers = n;
	truth.efficiency[0] = 3.0;
	truth.overhead_s = 0.25;
	for (int i = 0; i < 6; i++) {
		ASSERT_STATUS(copus_planner_best(&m, 128, &truth, &cells[i],
						 NULL, &p),
			      COPUS_OK);
		s[i] = (copus_planner_sample){ &m, 128, 0, cells[i],
					       p.seconds };
	}
	ASSERT_STATUS(copus_planner_calibrate(s, 6, &start, 1, NULL),
		      COPUS_OK);
	for (int i = 0; i < 6; i++) {
		ASSERT_STATUS(copus_planner_best(&m, 128, &start, &cells[i],
						 NULL, &p),
			      COPUS_OK);
		ASSERT_CLOSE(p.seconds / s[i].seconds, 1.0, 0.03);
	}
	/* A sample of an unknown type is refused. */
	s[0].gpu_index = 1;
	ASSERT_STATUS(copus_planner_calibrate(s, 6, &start, 1, NULL),
		      COPUS_EINVAL);
}

/* Wide-ResNet runs at the same share of every type's peak: samples of one
 * type set the efficiency that a type without such samples then uses. */
static void wide_resnet_efficiency_is_shared_by_the_types(void)
{
	copus_planner_layer y[4], z[4];
	copus_planner_model w = uniform(y, 4, 1e6), t = uniform(z, 4, 1e6);
	copus_planner_gpu truth[2] = { gpu_of(40.0), gpu_of(40.0) };
	copus_planner_gpu start[2] = { gpu_of(40.0), gpu_of(40.0) };
	const copus_planner_cell cells[4] = { { 1, 1 }, { 1, 2 }, { 1, 4 },
					      { 2, 2 } };
	const int wrn = COPUS_ARCH_WIDE_RESNET - 1;
	copus_planner_sample s[8];
	copus_planner_plan p;

	w.kind = wrn;
	for (int g = 0; g < 2; g++) {
		truth[g].peak_flops = start[g].peak_flops = (g + 1) * 1e12;
		truth[g].efficiency[wrn] = 0.3;
	}
	/* Wide-ResNet measured on type 0 only, the transformer on 1. */
	for (int i = 0; i < 8; i++) {
		const copus_planner_model *m = i < 4 ? &w : &t;
		ASSERT_STATUS(copus_planner_best(m, 64, &truth[i / 4],
						 &cells[i % 4], NULL, &p),
			      COPUS_OK);
		s[i] = (copus_planner_sample){ m, 64, i / 4, cells[i % 4],
					       p.seconds };
	}
	ASSERT_STATUS(copus_planner_calibrate(s, 8, start, 2, NULL),
		      COPUS_OK);
	ASSERT_CLOSE(start[1].efficiency[wrn], start[0].efficiency[wrn],
		     1e-12);
	for (int i = 0; i < 4; i++) {
		copus_planner_plan q;
		ASSERT_STATUS(copus_planner_best(&w, 64, &truth[1], &cells[i],
						 NULL, &p),
			      COPUS_OK);
		ASSERT_STATUS(copus_planner_best(&w, 64, &start[1], &cells[i],
						 NULL, &q),
			      COPUS_OK);
		ASSERT_CLOSE(q.seconds / p.seconds, 1.0, 0.05);
	}
}

static void bad_arguments_are_refused(void)
{
	copus_planner_layer y[2];
	copus_planner_model m = uniform(y, 2, 1e6);
	copus_planner_gpu g = gpu_of(16.0);
	copus_planner_cell cell = { 1, 2 };
	copus_planner_plan p;

	ASSERT_STATUS(copus_planner_best(&m, 0, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
	cell.nodes = 0;
	ASSERT_STATUS(copus_planner_best(&m, 8, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
	cell.nodes = 1;
	g.efficiency[0] = 0.0;
	ASSERT_STATUS(copus_planner_best(&m, 8, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
	g = gpu_of(16.0);
	g.memory_bandwidth = -1.0;
	ASSERT_STATUS(copus_planner_best(&m, 8, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
	g = gpu_of(16.0);
	y[1].flops = NAN;
	ASSERT_STATUS(copus_planner_best(&m, 8, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
	y[1].flops = 1.0;
	m.kind = COPUS_PLANNER_KINDS;
	ASSERT_STATUS(copus_planner_best(&m, 8, &g, &cell, NULL, &p),
		      COPUS_EINVAL);
	/* A batch that no data degree divides into micro-batches: only
	 * the data degree 1 remains. */
	m.kind = 0;
	ASSERT_STATUS(copus_planner_best(&m, 3, &g, &cell, NULL, &p),
		      COPUS_OK);
	CU_ASSERT_EQUAL(p.degrees.data, 1);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(described_models_have_their_nominal_parameters),
		TEST(a_uniform_transformer_splits_into_equal_stages),
		TEST(a_model_that_does_not_fit_one_gpu_is_refused_there),
		TEST(the_memory_rule),
		TEST(activations_cost_memory_bandwidth_time),
		TEST(the_time_per_parameter_counts_a_stage_s_weights_whole),
		TEST(tensor_parallelism_stays_within_a_node),
		TEST(groups_on_one_node_share_its_link),
		TEST(a_collective_is_priced_by_its_group_s_shape),
		TEST(a_tensor_degree_divides_the_heads),
		TEST(the_cache_returns_the_answer_it_stored),
		TEST(answers_are_shared_by_content_alone),
		TEST(calibration_recovers_the_constants_that_made_the_times),
		TEST(wide_resnet_efficiency_is_shared_by_the_types),
		TEST(bad_arguments_are_refused),
	};
	return run_tests("planner", tests, sizeof(tests) / sizeof(*tests));
}
