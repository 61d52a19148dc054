/*
 * The job's plan from the core planner (see "Planned degrees" in
 * copus/copus.h): the model's check, the GPU constants of the job's type
 * (COPUS_PLANNER_GPUS or the built-in defaults), the plan of the job's
 * batch on its cell, and its degrees and stages. The scheduler runs the
 * same planner on the same inputs, so the two agree by construction.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "internal.h"

/* The model as the plan's messages name it. */
static void _describe(const copus_planner_desc *d, char *buf, size_t len)
{
	switch (d->arch) {
	case COPUS_ARCH_TRANSFORMER:
		snprintf(buf, len,
			 "transformer (%d layers, hidden %d, %d heads, sequence %d, vocabulary %d, %d-byte)",
			 d->layers, d->hidden, d->heads, d->seq_len, d->vocab,
			 d->dtype_bytes);
		break;
	case COPUS_ARCH_MOE:
		snprintf(buf, len,
			 "moe (%d layers, hidden %d, %d heads, sequence %d, vocabulary %d, %d experts, group %d, %d-byte)",
			 d->layers, d->hidden, d->heads, d->seq_len, d->vocab,
			 d->experts, d->expert_group, d->dtype_bytes);
		break;
	case COPUS_ARCH_WIDE_RESNET:
		snprintf(buf, len,
			 "wide-resnet (depth %d, width %d, %d channels, %d classes, image %d, %d-byte)",
			 d->depth, d->width_factor, d->channels, d->classes,
			 d->image_size, d->dtype_bytes);
		break;
	default: snprintf(buf, len, "architecture %d", (int)d->arch);
	}
}

int copus__model_check(copus_ctx *ctx, const copus_planner_desc *d)
{
	/*
	 * The model must be one the hint carries, so that the scheduler sees
	 * what the job plans with: the hint's encoder checks every field and
	 * names the one out of range.
	 */
	copus_hint h = {
		.version = COPUS_HINT_VERSION,
		.job_id = 1,
		.limits = { 1, 1, 1, 1, false },
		.has_model = 1,
		.model = *d,
	};
	char buf[COPUS_HINT_MAX_LEN + 1], why[256] = "";

	if (copus_hint_encode(&h, buf, sizeof(buf), NULL, why, sizeof(why)) !=
	    COPUS_OK)
		return copus__fail(ctx, COPUS_EINVAL, "config: model: %s", why);
	return COPUS_OK;
}

/*
 * The constants of the job's GPU type: the file's entry for it when
 * COPUS_PLANNER_GPUS names a file that lists it, else the built-in
 * default (the generic one for a type the table lacks). *source names
 * where they came from, for the log.
 */
static int _gpu_constants(copus_ctx *ctx, copus_planner_gpu *g,
			  const char **source)
{
	const char *path = copus__env_text(COPUS__ENV_PLANNER_GPUS);
	copus_planner_gpu_type *types = NULL;
	const copus_planner_gpu_type *e;
	char *text = NULL, why[256] = "";
	int n = 0, rc;

	if (path != NULL && *path != '\0') {
		rc = copus__file_read(path, &text, NULL, why, sizeof(why));
		if (rc != COPUS_OK)
			return copus__fail(ctx, rc, "COPUS_PLANNER_GPUS=%.300s",
					   why);
		types = calloc(COPUS_PLANNER_MAX_GPUS, sizeof(*types));
		if (types == NULL) {
			free(text);
			return COPUS_ENOMEM;
		}
		rc = copus_planner_gpus_parse(text, types,
					      COPUS_PLANNER_MAX_GPUS, &n, why,
					      sizeof(why));
		free(text);
		if (rc != COPUS_OK) {
			free(types);
			return copus__fail(ctx, rc,
					   "COPUS_PLANNER_GPUS=%.200s: %s",
					   path, why);
		}
		e = copus_planner_gpus_find(types, n, ctx->gpu_type);
		if (e != NULL) {
			*g = e->gpu;
			*source = copus__env_name(COPUS__ENV_PLANNER_GPUS);
			free(types);
			return COPUS_OK;
		}
		free(types);
		copus__log(ctx, 1,
			   "COPUS_PLANNER_GPUS=%s lists no GPU type %s: its defaults plan the model",
			   path, ctx->gpu_type);
	}
	rc = copus_planner_gpu_default(ctx->gpu_type, g);
	*source = rc == COPUS_OK ? "defaults" : "generic defaults";
	return COPUS_OK;
}

int copus__plan_model(copus_ctx *ctx)
{
	copus_planner_layer *layers;
	copus_planner_model m;
	copus_planner_cell cell;
	copus_planner_gpu g;
	const copus_batch_limits *l = &ctx->cfg.limits;
	const char *source = "";
	char what[256];
	int n = 0, rc, world = ctx->info.world, nodes = ctx->info.nodes;

	_describe(&ctx->model, what, sizeof(what));
	if (l->init_batch != floor(l->init_batch) || l->init_batch > INT_MAX)
		return copus__fail(ctx, COPUS_EINVAL,
				   "the planner needs a whole batch; limits.init_batch is %g",
				   l->init_batch);
	if (nodes < 1 || world % nodes != 0)
		return copus__fail(ctx, COPUS_EINVAL,
				   "the planner needs as many ranks on every node: %d ranks on %d nodes",
				   world, nodes);
	cell = (copus_planner_cell){ nodes, world / nodes };
	rc = _gpu_constants(ctx, &g, &source);
	if (rc != COPUS_OK)
		return rc;
	layers = calloc(COPUS_PLANNER_MAX_LAYERS, sizeof(*layers));
	if (layers == NULL)
		return COPUS_ENOMEM;
	rc = copus_planner_layers(&ctx->model, layers, COPUS_PLANNER_MAX_LAYERS,
				  &n);
	if (rc != COPUS_OK) {
		free(layers);
		return copus__fail(ctx, rc,
				   "the planner builds no layers of %s", what);
	}
	m = (copus_planner_model){ layers, n, ctx->model.dtype_bytes,
				   (int)ctx->model.arch - 1 };
	rc = copus_planner_best(&m, (int)l->init_batch, &g, &cell, NULL,
				&ctx->plan);
	if (rc == COPUS_ERANGE) {
		free(layers);
		return copus__fail(ctx, COPUS_ERANGE,
				   "no parallel plan of %s fits batch %d on a cell of %d nodes x %d %s GPUs (%s)",
				   what, (int)l->init_batch, cell.nodes,
				   cell.gpus_per_node, ctx->gpu_type, source);
	}
	if (rc != COPUS_OK) {
		free(layers);
		return copus__fail(ctx, rc,
				   "the planner failed on %s, batch %d, %d nodes x %d %s GPUs: %s",
				   what, (int)l->init_batch, cell.nodes,
				   cell.gpus_per_node, ctx->gpu_type,
				   copus_strerror(rc));
	}
	/*
	 * The stages are the planner's; the layers' FLOPs stand for their
	 * costs where the runtime splits them itself (an older layout of a
	 * checkpoint to reshard).
	 */
	free(ctx->layer_costs);
	ctx->layer_costs = malloc(sizeof(double) * (size_t)n);
	if (ctx->layer_costs == NULL) {
		free(layers);
		return COPUS_ENOMEM;
	}
	for (int i = 0; i < n; i++)
		ctx->layer_costs[i] = layers[i].flops;
	free(layers);
	ctx->cfg.layer_costs = ctx->layer_costs;
	ctx->cfg.n_layers = n;
	ctx->degrees = ctx->plan.degrees;
	ctx->planned = true;
	copus__log(ctx, 2,
		   "planned %s at batch %d on %d x %d %s GPUs (%s): %.4g s per iteration",
		   what, (int)l->init_batch, cell.nodes, cell.gpus_per_node,
		   ctx->gpu_type, source, ctx->plan.seconds);
	return COPUS_OK;
}

void copus__plan_log(const copus_ctx *ctx)
{
	const copus_planner_plan *p = &ctx->plan;

	if (!ctx->planned || ctx->info.rank != 0)
		return;
	/*
	 * Always shown, as errors are: the job's log then says what it runs
	 * with, for its user and for a test that compares it with the
	 * scheduler's plan of the same cell.
	 */
	copus__log(ctx, 0,
		   "plan type=%s gpus=%d nodes=%d dp=%d tp=%d pp=%d mb=%d",
		   ctx->gpu_type, ctx->info.world, ctx->info.nodes,
		   p->degrees.data, p->degrees.tensor, p->degrees.pipeline,
		   p->micro_batches);
}

int copus_planned(const copus_ctx *ctx, copus_planner_plan *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	if (!ctx->planned)
		return COPUS_ENODATA;
	*out = ctx->plan;
	return COPUS_OK;
}
