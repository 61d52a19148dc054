/*
 * The planner: layers of the described architectures, the cost of a plan on
 * a cell and the search for the best plan (its memoisation is in
 * planner-cache.c).
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <copus/planner.h>

#include "internal.h"

/* ------------------------------------------------------------ contents */
struct rate;
static int transformer_layers(const copus_planner_desc *d,
			      copus_planner_layer *out, int max, int *n);
static int wide_resnet_layers(const copus_planner_desc *d,
			      copus_planner_layer *out, int max, int *n);
static double collective(const struct rate *r, double bytes);
static int model_check(const copus_planner_model *m);
static int gpu_check(const copus_planner_gpu *g);
static double act_seconds(const copus_planner_model *m,
			  const copus_planner_gpu *g);

/* Forward, recomputed forward and backward (twice the forward). */
#define REMAT_FACTOR 4.0
/* Passes that move a layer's activations: forward, recomputed, backward. */
#define ACT_PASSES 3.0
/* Bytes of state per parameter held (see planner.h). */
#define STATE_BYTES 16.0
/* Passes of each activation element a layer holds through the GPU's
 * memory by its elementwise kernels: written and read in the forward
 * pass (2), again in the recomputed forward pass (2), and in the
 * backward pass the activation and the gradient arriving read and the
 * gradient leaving written (3). */
#define ACT_MEMORY_PASSES 7.0

/* ---------------------------------------------------------------- layers */

static int transformer_layers(const copus_planner_desc *d,
			      copus_planner_layer *out, int max, int *n)
{
	double h = d->hidden, s = d->seq_len, v = d->vocab, a = d->heads;
	bool moe = d->arch == COPUS_ARCH_MOE;
	int k = 0;

	if (d->layers < 1 || d->hidden < 1 || d->heads < 1 ||
	    d->seq_len < 1 || d->vocab < 1 ||
	    (moe && (d->experts < 1 || d->expert_group < 1)))
		return COPUS_EINVAL;
	if (d->layers + 2 > max)
		return COPUS_ERANGE;
	/* Token and position embeddings; the vocabulary is split over
	 * tensor ranks, whose partial embeddings are summed. */
	out[k++] = (copus_planner_layer){
		.flops = 2.0 * s * h,
		.params = v * h + s * h,
		.out_elems = s * h,
		.work_elems = 2.0 * s * h,
		.tensor_elems = s * h,
	};
	for (int l = 0; l < d->layers; l++) {
		copus_planner_layer y = {
			/* QKV and output projections, scores and the
			 * weighted sum: 8 s h^2 + 4 s^2 h. */
			.flops = 8.0 * s * h * h + 4.0 * s * s * h,
			.params = 4.0 * h * h + 9.0 * h,
			.out_elems = s * h,
			/* Megatron's count of the activations a layer keeps
			 * for its backward pass, in elements. */
			.work_elems = 17.0 * s * h + 2.5 * a * s * s,
			/* One all-reduce after attention and one after the
			 * MLP. */
			.tensor_elems = 2.0 * s * h,
			/* Tensor ranks split the heads. */
			.tensor_divides = d->heads,
		};
		if (moe) {
			/* Each token runs through its top two experts of
			 * 8 h^2 parameters each; the dispatch and combine
			 * einsums over a group of G tokens and experts x
			 * capacity (2 G) slots cost 2 x 2 G h per token
			 * each; tokens go to their experts and come back
			 * (two all-to-alls of 2 s h). */
			double group = d->expert_group;
			y.flops += 2.0 * 16.0 * s * h * h +
				   2.0 * s * h * d->experts +
				   8.0 * group * h * s;
			y.params += h * d->experts;
			y.expert_params = d->experts * (8.0 * h * h + 5.0 * h);
			y.a2a_elems = 4.0 * s * h;
			y.work_elems += 2.0 * 6.0 * s * h;
		} else {
			y.flops += 16.0 * s * h * h;
			y.params += 8.0 * h * h + 5.0 * h;
		}
		out[k++] = y;
	}
	/* The output layer, its weights tied to the embedding's. */
	out[k++] = (copus_planner_layer){
		.flops = 2.0 * s * h * v,
		.out_elems = 1.0,
		.work_elems = s * v,
	};
	*n = k;
	return COPUS_OK;
}

static int wide_resnet_layers(const copus_planner_desc *d,
			      copus_planner_layer *out, int max, int *n)
{
	static const int blocks50[4] = { 3, 4, 6, 3 };
	static const int blocks101[4] = { 3, 4, 23, 3 };
	const int *blocks;
	double c0 = d->channels, wf = d->width_factor, side, cin;
	int k = 0, total;

	if (d->depth == 50)
		blocks = blocks50;
	else if (d->depth == 101)
		blocks = blocks101;
	else
		return COPUS_EINVAL;
	if (d->width_factor < 1 || d->channels < 1 || d->classes < 1 ||
	    d->image_size < 32)
		return COPUS_EINVAL;
	total = 2;
	for (int i = 0; i < 4; i++)
		total += blocks[i];
	if (total > max)
		return COPUS_ERANGE;
	/* A 7x7 stride-2 convolution from 3 channels, then a stride-2 max
	 * pool. */
	side = d->image_size / 2.0;
	out[k++] = (copus_planner_layer){
		.flops = 2.0 * side * side * 49.0 * 3.0 * c0,
		.params = 49.0 * 3.0 * c0 + 2.0 * c0,
		.out_elems = side * side * c0 / 4.0,
		.work_elems = 3.0 * side * side * c0,
		.tensor_elems = side * side * c0 / 4.0,
		.tensor_divides = d->channels,
	};
	side /= 2.0;
	cin = c0;
	for (int i = 0; i < 4; i++) {
		double f = c0 * (double)(1 << i), w = f * wf, o = 4.0 * f;

		for (int j = 0; j < blocks[i]; j++) {
			double in_side = side;
			double out_side = (i > 0 && j == 0) ? side / 2.0 : side;
			double hw = out_side * out_side;
			/* 1x1 to f channels, 3x3 (with the block's stride)
			 * to f x width channels, 1x1 to 4 f, and a 1x1
			 * projection of the input when its shape changes. */
			double p = cin * f + 9.0 * f * w + w * o;
			double fl = 2.0 * in_side * in_side * cin * f +
				    2.0 * hw * (9.0 * f * w + w * o);
			if (cin != o) {
				p += cin * o;
				fl += 2.0 * hw * cin * o;
			}
			out[k++] = (copus_planner_layer){
				.flops = fl,
				.params = p + 2.0 * (f + w + o),
				.out_elems = hw * o,
				/* Each convolution's output, its
				 * normalisation and activation. */
				.work_elems = 2.0 * (in_side * in_side * f +
						     hw * (w + 2.0 * o)),
				.tensor_elems = hw * o,
				/* Tensor ranks split the block's
				 * channels. */
				.tensor_divides = d->channels <= INT_MAX >> 3 ?
							  d->channels << i : 0,
			};
			cin = o;
			side = out_side;
		}
	}
	out[k++] = (copus_planner_layer){
		.flops = 2.0 * cin * d->classes + side * side * cin,
		.params = cin * d->classes + d->classes,
		.out_elems = d->classes,
		.work_elems = cin + d->classes,
	};
	*n = k;
	return COPUS_OK;
}

int copus_planner_layers(const copus_planner_desc *d,
			 copus_planner_layer *out, int max, int *n)
{
	if (d == NULL || out == NULL || n == NULL || max < 1 ||
	    (d->dtype_bytes != 2 && d->dtype_bytes != 4))
		return COPUS_EINVAL;
	switch (d->arch) {
	case COPUS_ARCH_TRANSFORMER:
	case COPUS_ARCH_MOE:
		return transformer_layers(d, out, max, n);
	case COPUS_ARCH_WIDE_RESNET:
		return wide_resnet_layers(d, out, max, n);
	}
	return COPUS_EINVAL;
}

double copus_planner_params(const copus_planner_model *m)
{
	double p = 0.0;

	if (m == NULL || m->layers == NULL)
		return 0.0;
	for (int l = 0; l < m->n_layers; l++)
		p += m->layers[l].params + m->layers[l].expert_params;
	return p;
}

/* ----------------------------------------------------------- cost model */

/* f(n): the bytes each rank moves over the message's size. */
static double coll_factor(copus_collective c, int n)
{
	switch (c) {
	case COPUS_COLL_ALL_REDUCE:
		return 2.0 * (n - 1) / n;
	case COPUS_COLL_SEND:
		return 1.0;
	default:
		return (double)(n - 1) / n;
	}
}

/* The shape factor h of a group (see planner.h). */
static double shape_factor(const copus_planner_gpu *g,
			   const copus_planner_group *grp)
{
	const double *e = g->shape_exp;
	double h, share;

	if (grp->nodes <= 1)
		return e[COPUS_SHAPE_PEERS] != 0.0 && grp->ranks > 2
			       ? pow(grp->ranks - 1.0, e[COPUS_SHAPE_PEERS])
			       : 1.0;
	share = g->inter_links > 0.0
			? fmax(1.0, grp->groups_per_node / g->inter_links)
			: 1.0;
	h = share;
	if (e[COPUS_SHAPE_GROUPS_PER_NODE] != 0.0 && share > 1.0)
		h *= pow(share, e[COPUS_SHAPE_GROUPS_PER_NODE]);
	if (e[COPUS_SHAPE_RANKS_PER_NODE] != 0.0 && grp->ranks_per_node > 1)
		h *= pow(grp->ranks_per_node, e[COPUS_SHAPE_RANKS_PER_NODE]);
	if (e[COPUS_SHAPE_NODES] != 0.0 && grp->nodes != 2)
		h *= pow(grp->nodes / 2.0, e[COPUS_SHAPE_NODES]);
	return h;
}

/* The latency of collective c over group grp and its seconds per byte. */
static void coll_rate(const copus_planner_gpu *g, copus_collective c,
		      const copus_planner_group *grp, double *alpha,
		      double *per_byte)
{
	int link = grp->nodes > 1 ? COPUS_LINK_INTER : COPUS_LINK_INTRA;

	*alpha = g->alpha[link][c];
	*per_byte = g->comm_scale[link] * coll_factor(c, grp->ranks) *
		    shape_factor(g, grp) * g->inv_beta[link][c];
}

double copus_planner_collective(const copus_planner_gpu *g,
				copus_collective c,
				const copus_planner_group *grp, double bytes)
{
	double alpha, per_byte;

	if (grp->ranks <= 1 || bytes <= 0.0)
		return 0.0;
	coll_rate(g, c, grp, &alpha, &per_byte);
	return alpha + per_byte * bytes;
}

/* One of a plan's collectives, priced once per plan (see layout_of). */
struct rate {
	double alpha, per_byte;
	bool any; /* a group of more than one rank */
};

static double collective(const struct rate *r, double bytes)
{
	if (!r->any || bytes <= 0.0)
		return 0.0;
	return r->alpha + r->per_byte * bytes;
}

static int model_check(const copus_planner_model *m)
{
	if (m == NULL || m->layers == NULL || m->n_layers < 1 ||
	    m->n_layers > COPUS_PLANNER_MAX_LAYERS ||
	    (m->dtype_bytes != 2 && m->dtype_bytes != 4) || m->kind < 0 ||
	    m->kind >= COPUS_PLANNER_KINDS)
		return COPUS_EINVAL;
	for (int l = 0; l < m->n_layers; l++) {
		const copus_planner_layer *y = &m->layers[l];
		double v[7] = { y->flops, y->params, y->expert_params,
				y->out_elems, y->work_elems, y->tensor_elems,
				y->a2a_elems };
		for (int i = 0; i < 7; i++)
			if (!isfinite(v[i]) || v[i] < 0.0)
				return COPUS_EINVAL;
	}
	return COPUS_OK;
}

static int gpu_check(const copus_planner_gpu *g)
{
	if (g == NULL || !(g->peak_flops > 0.0) || !(g->memory_bytes > 0.0) ||
	    !(g->comm_scale[0] > 0.0) || !isfinite(g->comm_scale[0]) ||
	    !(g->comm_scale[1] > 0.0) || !isfinite(g->comm_scale[1]) ||
	    !(g->overhead_s >= 0.0) || !isfinite(g->overhead_s) ||
	    !(g->layer_s >= 0.0) || !isfinite(g->layer_s) ||
	    !(g->memory_bandwidth >= 0.0) || !isfinite(g->memory_bandwidth) ||
	    !(g->inter_links >= 0.0) || !isfinite(g->inter_links))
		return COPUS_EINVAL;
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		if (!(g->efficiency[k] > 0.0) || !isfinite(g->efficiency[k]) ||
		    !(g->param_s[k] >= 0.0) || !isfinite(g->param_s[k]))
			return COPUS_EINVAL;
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		for (int c = 0; c < COPUS_COLL_COUNT; c++)
			if (!(g->alpha[l][c] >= 0.0) ||
			    !(g->inv_beta[l][c] >= 0.0) ||
			    !isfinite(g->alpha[l][c]) ||
			    !isfinite(g->inv_beta[l][c]))
				return COPUS_EINVAL;
	return COPUS_OK;
}

/* Seconds per activation element a layer holds, per sample, for the
 * memory-bound kernels that read and write it; 0 when the device's
 * bandwidth is unknown. */
static double act_seconds(const copus_planner_model *m,
			  const copus_planner_gpu *g)
{
	if (!(g->memory_bandwidth > 0.0))
		return 0.0;
	return ACT_MEMORY_PASSES * m->dtype_bytes / g->memory_bandwidth;
}

/* Whether a group of n ranks at stride apart spans nodes (ranks placed in
 * blocks of gpus_per_node). */
static bool spans(int n, int stride, int gpn)
{
	return (n - 1) * stride >= gpn;
}

/* Whether every layer can be split over tp tensor ranks. */
static bool tensor_splits(const copus_planner_model *m, int tp)
{
	for (int l = 0; tp > 1 && l < m->n_layers; l++)
		if (m->layers[l].tensor_divides > 0 &&
		    m->layers[l].tensor_divides % tp)
			return false;
	return true;
}

/* The rates of a plan's collectives on the cell's nodes (see layout_of). */
struct layout {
	struct rate tensor, expert, data, send;
};

/*
 * The ranks on one node of the group {d x stride + t : d < n, t < inner}
 * (rank 0's group, on node 0; its translates partition the ranks). Groups
 * that span nodes run their collectives at the same time and so share
 * each node's network link: the gpn / members groups on a node each get
 * that share of its bandwidth, as comm.csv measures (an all-reduce over
 * pairs of nodes runs at about half the bus bandwidth when two pairs
 * share each node, a quarter when four do). Likewise the members of one
 * pipeline stage on a node send their activations across at once.
 */
static int members_on_node(int n, int stride, int inner, int gpn)
{
	int members = 0;

	for (int d = 0; d < n && (long)d * stride < gpn; d++)
		for (int t = 0; t < inner && (long)d * stride + t < gpn; t++)
			members++;
	return members > 0 ? members : 1;
}

/* A group of ranks ranks, members of them on one node of gpn GPUs when
 * it spans nodes. */
static copus_planner_group group_of(int ranks, int members, bool across,
				    int gpn)
{
	copus_planner_group grp = { ranks, 1, ranks, 1 };

	if (across) {
		if (members > ranks)
			members = ranks;
		grp.ranks_per_node = members;
		grp.nodes = (ranks + members - 1) / members;
		grp.groups_per_node = gpn / members > 1 ? gpn / members : 1;
	}
	return grp;
}

static void rate_of(const copus_planner_gpu *g, copus_collective c,
		    const copus_planner_group *grp, struct rate *r)
{
	r->any = grp->ranks > 1;
	r->alpha = r->per_byte = 0.0;
	if (r->any)
		coll_rate(g, c, grp, &r->alpha, &r->per_byte);
}

static void layout_of(const copus_planner_gpu *g, const copus_plan_degrees *d,
		      int data_inner, int gpn, struct layout *y)
{
	int tp = d->tensor, pp = d->pipeline, dp = d->data;
	int data_stride = data_inner ? tp : tp * pp;
	int pipe_stride = data_inner ? tp * dp : tp;
	/* A stage's ranks are also its expert group. */
	int stage = members_on_node(dp, data_stride, tp, gpn);
	bool expert_across = (tp - 1) + (dp - 1) * data_stride >= gpn;
	copus_planner_group grp;

	grp = group_of(tp, gpn, spans(tp, 1, gpn), gpn);
	rate_of(g, COPUS_COLL_ALL_REDUCE, &grp, &y->tensor);
	grp = group_of(dp * tp, stage, expert_across, gpn);
	rate_of(g, COPUS_COLL_ALL_TO_ALL, &grp, &y->expert);
	grp = group_of(dp, members_on_node(dp, data_stride, 1, gpn),
		       spans(dp, data_stride, gpn), gpn);
	rate_of(g, COPUS_COLL_ALL_REDUCE, &grp, &y->data);
	/* A rank of one stage and its peer in the next, on two nodes when
	 * the pipeline spans nodes; a stage's ranks on a node send at once. */
	grp = (copus_planner_group){ 2, 1, 2, 1 };
	if (spans(pp, pipe_stride, gpn))
		grp = (copus_planner_group){ 2, 2, 1, stage };
	rate_of(g, COPUS_COLL_SEND, &grp, &y->send);
}

int copus__planner_price(const copus_planner_model *m, int batch,
			 const copus_planner_gpu *g,
			 const copus_planner_cell *cell, double memory_limit,
			 copus_planner_plan *p)
{
	const copus_plan_degrees *d = &p->degrees;
	int tp = d->tensor, pp = d->pipeline, dp = d->data;
	int M = p->micro_batches, bneck = 0;
	double mb = (double)batch / ((double)dp * M);
	double bytes = m->dtype_bytes;
	double speed = g->peak_flops * g->efficiency[m->kind];
	double act_s = act_seconds(m, g);
	double t[COPUS_PLANNER_MAX_STAGES] = { 0 };
	double comp[COPUS_PLANNER_MAX_STAGES] = { 0 };
	double tens[COPUS_PLANNER_MAX_STAGES] = { 0 };
	double send[COPUS_PLANNER_MAX_STAGES] = { 0 };
	double data_s = 0.0, mem_max = 0.0, weights_max = 0.0;
	struct layout y;

	layout_of(g, d, p->data_inner, cell->gpus_per_node, &y);

	for (int s = 0; s < pp; s++) {
		double state = 0.0, inputs = 0.0, work = 0.0, grads = 0.0;
		double weights = 0.0;
		int in_flight = M < pp - s ? M : pp - s;

		comp[s] = tens[s] = send[s] = 0.0;
		for (int l = p->first_layer[s]; l < p->first_layer[s + 1];
		     l++) {
			const copus_planner_layer *x = &m->layers[l];

			comp[s] += (REMAT_FACTOR * x->flops / speed +
				    x->work_elems * act_s) *
					   mb / tp +
				   g->layer_s;
			tens[s] += ACT_PASSES *
				   collective(&y.tensor,
					      x->tensor_elems * mb * bytes);
			tens[s] += ACT_PASSES *
				   collective(&y.expert,
					      x->a2a_elems * mb * bytes / tp);
			state += x->params / tp +
				 x->expert_params / ((double)dp * tp);
			grads += x->params / tp;
			weights += x->params + x->expert_params / dp;
			if (l > 0)
				inputs += m->layers[l - 1].out_elems;
			if (x->work_elems > work)
				work = x->work_elems;
		}
		if (s + 1 < pp) {
			double out = m->layers[p->first_layer[s + 1] - 1]
					     .out_elems;
			/* Forward activations out, their gradients back. */
			send[s] = 2.0 * collective(&y.send, out * mb * bytes);
		}
		t[s] = comp[s] + tens[s] + send[s];
		if (t[s] > t[bneck])
			bneck = s;
		/* Weights and gradients are whole on every data rank; the
		 * optimizer's state is split over the data ranks. */
		double mem = 2.0 * bytes * state +
			     (STATE_BYTES - 2.0 * bytes) * state / dp +
			     (in_flight * inputs + work / tp) * mb * bytes;
		if (mem > mem_max)
			mem_max = mem;
		if (weights > weights_max)
			weights_max = weights;
		double ds = collective(&y.data, grads * bytes);
		if (ds > data_s)
			data_s = ds;
	}
	p->memory_bytes = mem_max;
	/* Every stage runs each micro-batch once; the bottleneck stage
	 * paces the M - 1 micro-batches after the first. */
	p->compute_s = (M - 1) * comp[bneck];
	p->tensor_s = (M - 1) * tens[bneck];
	p->pipeline_s = (M - 1) * send[bneck];
	for (int s = 0; s < pp; s++) {
		p->compute_s += comp[s];
		p->tensor_s += tens[s];
		p->pipeline_s += send[s];
	}
	/* The work per parameter is counted on the stage's weights whole,
	 * not split over its tensor ranks (see planner.h). */
	p->compute_s += weights_max * g->param_s[m->kind];
	p->data_s = data_s;
	p->overhead_s = g->overhead_s;
	p->seconds = p->compute_s + p->tensor_s + p->pipeline_s + p->data_s +
		     p->overhead_s;
	return mem_max <= memory_limit ? COPUS_OK : COPUS_ERANGE;
}

static int options_of(const copus_planner_options *opt,
		      copus_planner_options *o)
{
	static const copus_planner_options def =
		COPUS_PLANNER_OPTIONS_INITIALIZER;

	*o = opt ? *opt : def;
	if (o->max_micro_batches < 1 || !(o->memory_fraction > 0.0) ||
	    o->memory_fraction > 1.0)
		return COPUS_EINVAL;
	return COPUS_OK;
}

static int cell_check(const copus_planner_cell *c)
{
	if (c == NULL || c->nodes < 1 || c->gpus_per_node < 1 ||
	    c->nodes > 4096 || c->gpus_per_node > 4096 ||
	    c->nodes * c->gpus_per_node > 65536)
		return COPUS_EINVAL;
	return COPUS_OK;
}

int copus_planner_price(const copus_planner_model *m, int batch,
			const copus_planner_gpu *gpu,
			const copus_planner_cell *cell,
			const copus_planner_options *opt,
			copus_planner_plan *plan)
{
	copus_planner_options o;
	const copus_plan_degrees *d;
	int rc;

	if ((rc = model_check(m)) || (rc = gpu_check(gpu)) ||
	    (rc = cell_check(cell)) || (rc = options_of(opt, &o)))
		return rc;
	if (plan == NULL || batch < 1)
		return COPUS_EINVAL;
	d = &plan->degrees;
	if (d->data < 1 || d->tensor < 1 || d->pipeline < 1 ||
	    d->pipeline > COPUS_PLANNER_MAX_STAGES ||
	    d->pipeline > m->n_layers ||
	    (long)d->data * d->tensor * d->pipeline !=
		    (long)cell->nodes * cell->gpus_per_node ||
	    plan->micro_batches < 1 ||
	    batch % (d->data * plan->micro_batches) != 0 ||
	    plan->first_layer[0] != 0 ||
	    plan->first_layer[d->pipeline] != m->n_layers)
		return COPUS_EINVAL;
	for (int s = 0; s < d->pipeline; s++)
		if (plan->first_layer[s + 1] <= plan->first_layer[s])
			return COPUS_EINVAL;
	if (!tensor_splits(m, d->tensor))
		return COPUS_ERANGE;
	return copus__planner_price(m, batch, gpu, cell,
				    o.memory_fraction * gpu->memory_bytes,
				    plan);
}

/* ---------------------------------------------------------------- search */

/*
 * The two stage splits tried for tensor x pipeline: by time per sample
 * (compute and tensor traffic, without latencies) and by memory per
 * sample-free state, so that a stage too full under the first may fit
 * under the second.
 */
static int stage_splits(const copus_planner_model *m,
			const copus_planner_gpu *g, int tp, int pp,
			int split[2][COPUS_PLANNER_MAX_STAGES + 1])
{
	double w[COPUS_PLANNER_MAX_LAYERS];
	double speed = g->peak_flops * g->efficiency[m->kind];
	double act_s = act_seconds(m, g);
	int rc;

	for (int l = 0; l < m->n_layers; l++) {
		const copus_planner_layer *x = &m->layers[l];
		w[l] = (REMAT_FACTOR * x->flops / speed +
			x->work_elems * act_s) /
			       tp +
		       g->layer_s;
		if (tp > 1)
			w[l] += ACT_PASSES * 2.0 * x->tensor_elems *
				m->dtype_bytes * g->comm_scale[COPUS_LINK_INTRA] *
				g->inv_beta[COPUS_LINK_INTRA]
					   [COPUS_COLL_ALL_REDUCE];
	}
	rc = copus_plan_stages(w, m->n_layers, pp, split[0]);
	if (rc)
		return rc;
	for (int l = 0; l < m->n_layers; l++) {
		const copus_planner_layer *x = &m->layers[l];
		w[l] = STATE_BYTES * (x->params + x->expert_params) +
		       x->out_elems * m->dtype_bytes;
	}
	return copus_plan_stages(w, m->n_layers, pp, split[1]);
}

int copus__planner_each(const copus_planner_model *m, int batch,
			const copus_planner_gpu *g,
			const copus_planner_cell *cell,
			const copus_planner_options *o,
			int (*fn)(const copus_planner_plan *p, void *arg),
			void *arg)
{
	int world = cell->nodes * cell->gpus_per_node;
	double limit = o->memory_fraction * g->memory_bytes;
	int split[2][COPUS_PLANNER_MAX_STAGES + 1];
	copus_planner_plan p;
	int rc;

	for (int tp = 1; tp <= world; tp++) {
		if (world % tp || !tensor_splits(m, tp))
			continue;
		for (int pp = 1; pp <= world / tp; pp++) {
			int dp;

			if ((world / tp) % pp || pp > m->n_layers ||
			    pp > COPUS_PLANNER_MAX_STAGES)
				continue;
			dp = world / tp / pp;
			if (batch % dp)
				continue;
			rc = stage_splits(m, g, tp, pp, split);
			if (rc)
				return rc;
			for (int M = 1; M <= o->max_micro_batches &&
					(batch / dp) % M == 0;
			     M *= 2) {
				for (int inner = 0;
				     inner <= (dp > 1 && pp > 1); inner++) {
					memset(&p, 0, sizeof(p));
					p.degrees = (copus_plan_degrees){
						dp, pp, tp
					};
					p.micro_batches = M;
					p.data_inner = inner;
					for (int k = 0; k < 2; k++) {
						memcpy(p.first_layer, split[k],
						       sizeof(int) * (pp + 1));
						rc = copus__planner_price(
							m, batch, g, cell,
							limit, &p);
						if (rc == COPUS_OK)
							break;
						if (pp == 1)
							break;
					}
					if (rc != COPUS_OK)
						continue;
					rc = fn(&p, arg);
					if (rc)
						return rc;
				}
			}
		}
	}
	return COPUS_OK;
}

struct best_ctx {
	copus_planner_plan *best;
	bool found;
};

static int keep_best(const copus_planner_plan *p, void *arg)
{
	struct best_ctx *c = arg;

	/* Strictly faster only, so that among equals the plan with the
	 * least tensor parallelism, then the fewest stages and
	 * micro-batches, stays. */
	if (!c->found || p->seconds < c->best->seconds) {
		*c->best = *p;
		c->found = true;
	}
	return COPUS_OK;
}

int copus_planner_best(const copus_planner_model *m, int batch,
		       const copus_planner_gpu *gpu,
		       const copus_planner_cell *cell,
		       const copus_planner_options *opt,
		       copus_planner_plan *out)
{
	copus_planner_options o;
	copus_planner_plan best;
	struct best_ctx c = { &best, false };
	int rc;

	if ((rc = model_check(m)) || (rc = gpu_check(gpu)) ||
	    (rc = cell_check(cell)) || (rc = options_of(opt, &o)))
		return rc;
	if (out == NULL || batch < 1)
		return COPUS_EINVAL;
	rc = copus__planner_each(m, batch, gpu, cell, &o, keep_best, &c);
	if (rc)
		return rc;
	if (!c.found)
		return COPUS_ERANGE;
	*out = best;
	return COPUS_OK;
}
