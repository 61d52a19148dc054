/*
 * Restoring a checkpoint written under another layout (other pipeline or
 * tensor degrees, or stages of other layers): which of the old shards
 * overlap this rank's new layers and tensor slice, handed to the
 * application's reshard callback, and the file of a rank's coordinates in
 * a checkpoint. copus__restore() in checkpoint.c calls them.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "internal.h"

int copus__ckpt_file_at(const struct copus__manifest *m, int data_rank,
			int pipeline_rank, int tensor_rank)
{
	const copus_plan_degrees *o = &m->layout;

	if (data_rank < 0 || data_rank >= o->data || pipeline_rank < 0 ||
	    pipeline_rank >= o->pipeline || tensor_rank < 0 ||
	    tensor_rank >= o->tensor)
		return -1;
	if (!m->all_ranks)
		return pipeline_rank * o->tensor + tensor_rank;
	/* copus/plan.h's two layouts of ranks (copus_plan_coords_of_layout). */
	if (m->data_inner > 0)
		return (pipeline_rank * o->data + data_rank) * o->tensor +
		       tensor_rank;
	return (data_rank * o->pipeline + pipeline_rank) * o->tensor +
	       tensor_rank;
}

/*
 * Whether the checkpoint's stages hold other layers than this run's (same
 * pipeline degree, another split: a planned job on another cell).
 */
bool copus__ckpt_stages_differ(const copus_ctx *ctx,
			       const struct copus__manifest *m)
{
	if (m->stages == NULL || m->layout.pipeline != ctx->degrees.pipeline ||
	    m->n_layers != ctx->cfg.n_layers)
		return false;
	for (int st = 0; st < m->layout.pipeline; st++) {
		int first, count;

		copus__stage_layers(ctx, m->layout.pipeline, st, &first,
				    &count);
		if (first != m->stages[st] ||
		    first + count != m->stages[st + 1])
			return true;
	}
	return false;
}

/*
 * Restore under another layout: every shard of the old layout whose layers
 * and tensor slice overlap this rank's new ones is checked and handed to
 * the reshard callback; the others are not read.
 */
int copus__ckpt_reshard(copus_ctx *ctx, const struct copus__manifest *m)
{
	const copus_plan_degrees *o = &m->layout, *d = &ctx->degrees;
	int nshards = o->pipeline * o->tensor, first, count, rc = COPUS_OK;
	copus_ckpt_layout old = { o->data, o->tensor, o->pipeline };
	copus_ckpt_layout now = { d->data, d->tensor, d->pipeline };
	copus_ckpt_shard *shards;
	char(*paths)[4096];
	copus_plan_coords at;

	if (m->n_layers != ctx->cfg.n_layers)
		return copus__fail(ctx, COPUS_ESTATE,
				   "checkpoint of step %lld in %s is of a model of %d layers; this run has %d",
				   (long long)m->step, ctx->ckpt_dir,
				   m->n_layers, ctx->cfg.n_layers);
	if (m->nfiles < nshards)
		return copus__fail(ctx, COPUS_EPARSE,
				   "checkpoint of step %lld in %s names %d files for %d shards",
				   (long long)m->step, ctx->ckpt_dir, m->nfiles,
				   nshards);
	rc = copus__coords(ctx, ctx->info.rank, &at);
	if (rc != COPUS_OK)
		return rc;
	copus__stage_layers(ctx, d->pipeline, at.pipeline_rank, &first, &count);
	shards = calloc((size_t)nshards, sizeof(*shards));
	paths = calloc((size_t)nshards, sizeof(*paths));
	if (shards == NULL || paths == NULL) {
		free(shards);
		free(paths);
		return COPUS_ENOMEM;
	}
	for (int i = 0; i < nshards && rc == COPUS_OK; i++) {
		copus_ckpt_shard *sh = &shards[i];
		bool layers, slice;
		int file;

		/*
		 * Shard i is data group i; its file, by shard or, with a
		 * file per rank, its first replica's under the old layout.
		 */
		sh->pipeline_rank = i / o->tensor;
		sh->tensor_rank = i % o->tensor;
		file = copus__ckpt_file_at(m, 0, sh->pipeline_rank,
					   sh->tensor_rank);
		if (m->stages != NULL) {
			sh->first_layer = m->stages[sh->pipeline_rank];
			sh->n_layers = m->stages[sh->pipeline_rank + 1] -
				       sh->first_layer;
		} else {
			copus__stage_layers(ctx, o->pipeline, sh->pipeline_rank,
					    &sh->first_layer, &sh->n_layers);
		}
		layers = ctx->cfg.n_layers == 0 ||
			 (sh->first_layer < first + count &&
			  first < sh->first_layer + sh->n_layers);
		/* Slices j / t_old .. (j + 1) / t_old against k / t_new ... */
		slice = (long)sh->tensor_rank * d->tensor <
				(long)(at.tensor_rank + 1) * o->tensor &&
			(long)at.tensor_rank * o->tensor <
				(long)(sh->tensor_rank + 1) * d->tensor;
		if (!layers || !slice)
			continue;
		rc = copus__ckpt_check_file(ctx, m, file, paths[i],
					    sizeof(paths[i]));
		sh->path = paths[i];
	}
	if (rc == COPUS_OK) {
		copus_ckpt_shard mine = { NULL, at.pipeline_rank,
					  at.tensor_rank, first, count };
		int cb = ctx->cfg.reshard(ctx->cfg.cb_arg, m->step, &old, &now,
					  &mine, shards, nshards);
		if (cb != 0)
			rc = copus__fail(ctx, COPUS_EIO,
					 "the reshard callback failed (%d) loading step %lld from pipeline %d x tensor %d into pipeline %d x tensor %d",
					 cb, (long long)m->step, o->pipeline,
					 o->tensor, d->pipeline, d->tensor);
	}
	if (rc == COPUS_OK)
		copus__log(ctx, 1,
			   "resharded step %lld from data %d x pipeline %d x tensor %d to data %d x pipeline %d x tensor %d",
			   (long long)m->step, o->data, o->pipeline, o->tensor,
			   d->data, d->pipeline, d->tensor);
	free(shards);
	free(paths);
	return rc;
}
