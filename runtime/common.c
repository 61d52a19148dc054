/*
 * What every file of the runtime uses: the context's error message, the
 * runtime's one logger, the monotonic clock, the environment variables,
 * the agreement among ranks, and the layers of a pipeline stage.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

enum env_type {
	TEXT,
	INT,
	SECONDS,
	SIGNAL
};

/* One row of COPUS__ENV_VARS (its doc is for the reader of the table). */
struct env_var {
	const char *name;
	enum env_type type;
	const char *def;
	double lo, hi;
};

static const struct env_var env_vars[COPUS__ENV_COUNT] = {
#define COPUS__ENV_ROW(n, type, def, lo, hi, doc) \
	[COPUS__ENV_##n] = { "COPUS_" #n, type, def, lo, hi },
	COPUS__ENV_VARS(COPUS__ENV_ROW)
#undef COPUS__ENV_ROW
};

const char *copus__env_name(enum copus__env_var v)
{
	return env_vars[v].name;
}

const char *copus__env_text(enum copus__env_var v)
{
	const char *s = getenv(env_vars[v].name);

	return s != NULL && *s != '\0' ? s : env_vars[v].def;
}

/* s as an integer in [lo, hi]; an error naming the variable otherwise. */
static int env_parse_int(copus_ctx *ctx, const char *name, const char *s,
			 long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return copus__fail(ctx, COPUS_EINVAL,
				   "environment variable %s=\"%.40s\" is not an integer in [%ld, %ld]",
				   name, s, lo, hi);
	*out = (int)v;
	return COPUS_OK;
}

int copus__env_foreign_int(copus_ctx *ctx, const char *name, long lo, long hi,
			   int *out, bool *found)
{
	const char *s = getenv(name);
	int rc;

	*found = false;
	if (s == NULL || *s == '\0')
		return COPUS_OK;
	rc = env_parse_int(ctx, name, s, lo, hi, out);
	*found = rc == COPUS_OK;
	return rc;
}

int copus__env_int(copus_ctx *ctx, enum copus__env_var v, int *out)
{
	static const struct {
		const char *n;
		int s;
	} signals[] = {
		{ "USR1", SIGUSR1 },
		{ "USR2", SIGUSR2 },
		{ "TERM", SIGTERM },
		{ "INT", SIGINT },
	};
	const struct env_var *e = &env_vars[v];
	const char *s = copus__env_text(v);

	if (s == NULL)
		return COPUS_OK;
	if (e->type == SIGNAL) {
		const char *n = strncmp(s, "SIG", 3) == 0 ? s + 3 : s;

		for (size_t i = 0; i < sizeof(signals) / sizeof(*signals); i++)
			if (strcmp(n, signals[i].n) == 0) {
				*out = signals[i].s;
				return COPUS_OK;
			}
	}
	return env_parse_int(ctx, e->name, s, (long)e->lo, (long)e->hi, out);
}

int copus__env_seconds(copus_ctx *ctx, enum copus__env_var v, double *out)
{
	const struct env_var *e = &env_vars[v];
	const char *s = copus__env_text(v);
	char *end;
	double x;

	if (s == NULL)
		return COPUS_OK;
	errno = 0;
	x = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(x) ||
	    x < e->lo || x > e->hi)
		return copus__fail(ctx, COPUS_EINVAL,
				   "environment variable %s=\"%.40s\" is not a number of seconds in [%g, %g]",
				   e->name, s, e->lo, e->hi);
	*out = x;
	return COPUS_OK;
}

double copus__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Why this thread's last copus_init failed; the context is gone by then. */
static __thread char init_error[COPUS_ERRMSG_LEN];

void copus__init_failed(const copus_ctx *ctx, int status)
{
	snprintf(init_error, sizeof(init_error), "%s",
		 ctx != NULL && ctx->err[0] != '\0' ? ctx->err
						    : copus_strerror(status));
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
	n = snprintf(line, sizeof(line),
		     "copus[%d]: ", ctx != NULL ? ctx->info.rank : -1);
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
	if (ctx->planned && ctx->plan.data_inner && rank >= 0 && d->data > 0 &&
	    d->tensor > 0) {
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
	if (bounds != NULL && copus_plan_stages(ctx->layer_costs, n, stages,
						bounds) == COPUS_OK) {
		*first = bounds[stage];
		*count = bounds[stage + 1] - bounds[stage];
	} else {
		copus_plan_stage_even(n, stages, stage, first, count);
	}
	free(bounds);
}
