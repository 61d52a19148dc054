/*
 * What every file of the runtime uses: the context's error message, the
 * runtime's one logger, the monotonic clock, the agreement among ranks, and
 * the layers of a pipeline stage.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

double copus__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Why this thread's last copus_init failed; the context is gone by then. */
static __thread char init_error[COPUS_ERRMSG_LEN];

void copus__init_failed(const copus_ctx *ctx)
{
	snprintf(init_error, sizeof(init_error), "%s",
		 ctx != NULL && ctx->err[0] != '\0' ? ctx->err
						   : "copus_init failed");
}

int copus__fail(copus_ctx *ctx, int status, const char *fmt, ...)
{
	va_list ap;

	if (ctx == NULL)
		return status;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	copus__log(ctx, 2, "%s", ctx->err);
	return status;
}

void copus__log(const copus_ctx *ctx, int level, const char *fmt, ...)
{
	va_list ap;
	char line[COPUS_ERRMSG_LEN + 64];
	int n;

	/* Level 0: errors; 1: what a user wants to see; 2: debugging. */
	if (ctx != NULL && level > ctx->verbose)
		return;
	n = snprintf(line, sizeof(line), "copus[%d]: ",
		     ctx != NULL ? ctx->info.rank : -1);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}

const char *copus_errmsg(const copus_ctx *ctx)
{
	if (ctx == NULL)
		return init_error[0] != '\0' ? init_error : "no copus context";
	return ctx->err[0] != '\0' ? ctx->err : "no error";
}

int copus__agree(copus_ctx *ctx, int64_t *values, int n)
{
	int rc;

	if (ctx->info.world == 1)
		return COPUS_OK;
	rc = ctx->cfg.agree(ctx->cfg.comm_arg, values, n);
	if (rc != 0)
		return copus__fail(ctx, COPUS_EIO,
				   "the agree callback failed (%d)", rc);
	return COPUS_OK;
}

int copus__data_inner(const copus_ctx *ctx)
{
	return ctx->planned && ctx->plan.data_inner ? 1 : 0;
}

int copus__coords(const copus_ctx *ctx, int rank, copus_plan_coords *out)
{
	const copus_plan_degrees *d = &ctx->degrees;

	/*
	 * The planner's layout with the data ranks inside the pipeline ranks,
	 * rank = (pipeline_rank x data + data_rank) x tensor + tensor_rank:
	 * the coordinates (and group colours) of the rank of copus/plan.h's
	 * layout that has the same ones.
	 */
	if (ctx->planned && ctx->plan.data_inner && rank >= 0 &&
	    d->data > 0 && d->tensor > 0) {
		int t = rank % d->tensor;
		int dr = (rank / d->tensor) % d->data;
		int p = rank / d->tensor / d->data;

		rank = (dr * d->pipeline + p) * d->tensor + t;
	}
	return copus_plan_coords_of_rank(d, rank, out);
}

void copus__stage_layers(const copus_ctx *ctx, int stages, int stage,
			 int *first, int *count)
{
	int n = ctx->cfg.n_layers;
	int *bounds;

	*first = 0;
	*count = 0;
	if (n == 0)
		return;
	/* The planner's stages, when it chose this many. */
	if (ctx->planned && stages == ctx->plan.degrees.pipeline) {
		*first = ctx->plan.first_layer[stage];
		*count = ctx->plan.first_layer[stage + 1] - *first;
		return;
	}
	bounds = malloc(sizeof(int) * ((size_t)stages + 1));
	if (bounds != NULL &&
	    copus_plan_stages(ctx->layer_costs, n, stages, bounds) == COPUS_OK) {
		*first = bounds[stage];
		*count = bounds[stage + 1] - bounds[stage];
	} else {
		copus_plan_stage_even(n, stages, stage, first, count);
	}
	free(bounds);
}
