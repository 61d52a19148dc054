/*
 * Measurement: the gradient statistics of each step, the step times observed
 * per configuration, the throughput parameters fitted to them, and the hint
 * that carries them to the scheduler.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

int copus_grad_local(copus_ctx *ctx, double sqnorm)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	if (!isfinite(sqnorm) || sqnorm < 0)
		return copus__fail(ctx, COPUS_EINVAL,
				   "grad_local: squared norm %g is not finite and >= 0",
				   sqnorm);
	if (!ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "grad_local outside a step");
	ctx->local_sum += sqnorm;
	ctx->local_count++;
	return COPUS_OK;
}

int copus_grad_total(copus_ctx *ctx, double sqnorm)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	if (!isfinite(sqnorm) || sqnorm < 0)
		return copus__fail(ctx, COPUS_EINVAL,
				   "grad_total: squared norm %g is not finite and >= 0",
				   sqnorm);
	if (!ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "grad_total outside a step");
	ctx->total_sqr = sqnorm;
	ctx->have_total = true;
	return COPUS_OK;
}

int copus_grad_dot(copus_ctx *ctx, double dot)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	if (!isfinite(dot))
		return copus__fail(ctx, COPUS_EINVAL,
				   "grad_dot: dot product %g is not finite",
				   dot);
	if (!ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "grad_dot outside a step");
	ctx->dot = dot;
	ctx->have_dot = true;
	return COPUS_OK;
}

/* The gradient statistics, or zeros (no information) before any. */
copus_grad_stats copus__grad(const copus_ctx *ctx)
{
	copus_grad_stats g = { 0, 0 };

	if (copus_noise_get(&ctx->noise, &g) != COPUS_OK)
		g = (copus_grad_stats){ 0, 0 };
	return g;
}

int copus_grad_stats_get(const copus_ctx *ctx, copus_grad_stats *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	return copus_noise_get(&ctx->noise, out);
}

/* The nodes an observation names: those of the data-parallel replicas. */
static int _obs_nodes(const copus_ctx *ctx)
{
	return ctx->info.nodes < ctx->degrees.data ? ctx->info.nodes
						   : ctx->degrees.data;
}

/* Add a step's times to the observation of its configuration. */
static void _record_obs(copus_ctx *ctx, int local, int accum, double step,
			double compute)
{
	struct copus__obs *o = NULL;
	int nodes = _obs_nodes(ctx);

	for (int i = 0; i < ctx->n_obs && o == NULL; i++) {
		struct copus__obs *c = &ctx->obs[i];
		if (c->nodes == nodes && c->replicas == ctx->degrees.data &&
		    c->local == local && c->accum_steps == accum &&
		    strcmp(c->type, ctx->gpu_type) == 0)
			o = c;
	}
	if (o == NULL) {
		int slot = ctx->n_obs;
		/* Full: replace the configuration measured least often. */
		if (slot == COPUS_MAX_OBS) {
			slot = 0;
			for (int i = 1; i < ctx->n_obs; i++)
				if (ctx->obs[i].n < ctx->obs[slot].n)
					slot = i;
		} else {
			ctx->n_obs++;
		}
		o = &ctx->obs[slot];
		memset(o, 0, sizeof(*o));
		snprintf(o->type, sizeof(o->type), "%s", ctx->gpu_type);
		o->nodes = nodes;
		o->replicas = ctx->degrees.data;
		o->local = local;
		o->accum_steps = accum;
	}
	o->sum_step += step;
	o->sum_compute += compute / (accum + 1);
	o->n++;
	ctx->obs_dirty = true;
}

void copus__measure_step(copus_ctx *ctx, int local, int accum_steps,
			 double step, double compute)
{
	double batch, gain;
	copus_grad_stats g;

	/*
	 * One gradient per step on one replica: with the dot product of
	 * consecutive gradients, the two steps are two estimates of one
	 * gradient, |mean|^2 = (|a|^2 + |b|^2 + 2 a.b) / 4.
	 */
	if (ctx->degrees.data == 1 && ctx->local_count == 1 && ctx->have_dot &&
	    ctx->prev_sqr >= 0 && ctx->prev_local == local &&
	    accum_steps == 0) {
		double cur = ctx->local_sum;

		ctx->local_sum = ctx->prev_sqr + cur;
		ctx->local_count = 2;
		ctx->total_sqr = (ctx->prev_sqr + cur + 2 * ctx->dot) / 4;
		ctx->have_total = true;
		ctx->prev_sqr = cur;
	} else if (ctx->degrees.data == 1 && ctx->local_count == 1 &&
		   accum_steps == 0) {
		ctx->prev_sqr = ctx->local_sum;
	} else {
		ctx->prev_sqr = -1;
	}
	ctx->prev_local = local;
	/* Gradient statistics: every data-parallel replica saw as many. */
	if (ctx->local_count > 0 && ctx->have_total) {
		int count = ctx->degrees.data * ctx->local_count;
		if (count >= 2 &&
		    copus_noise_estimate(ctx->local_sum / ctx->local_count,
					 ctx->total_sqr, count, local,
					 ctx->cfg.limits.init_batch,
					 &ctx->last_raw) == COPUS_OK)
			copus_noise_update(&ctx->noise, &ctx->last_raw);
	}

	batch = (double)ctx->degrees.data * local * (accum_steps + 1);
	g = copus__grad(ctx);
	ctx->info.step++;
	ctx->info.samples += (int64_t)batch;
	/* Scale-invariant progress: the step counts as gain steps at M0. */
	if (copus_gain(&g, ctx->cfg.limits.init_batch, batch, &gain) !=
	    COPUS_OK)
		gain = 1.0;
	ctx->info.progress += gain;

	if (ctx->skip_obs > 0)
		ctx->skip_obs--;
	else
		_record_obs(ctx, local, accum_steps, step, compute);
}

const copus_perf_params *copus__perf_of_type(const copus_ctx *ctx)
{
	for (int i = 0; i < ctx->n_perf; i++)
		if (strcmp(ctx->perf[i].type, ctx->gpu_type) == 0)
			return &ctx->perf[i].perf;
	return NULL;
}

/*
 * Steps a configuration needs before its mean step time is fitted, once
 * another configuration of the same type has that many. One step is not a
 * measurement: the first step of a new micro-batch pays for allocations and
 * kernel tuning on a GPU, or comes out near zero where the time went to the
 * step before, and the fit weighs each configuration's mean alike, so a lone
 * step at an outlying batch bends the model's slope for every batch size
 * (a step of 1 us among steps of 5 ms made a job look sixteen times faster
 * at four times its batch).
 */
#define FIT_MIN_STEPS 3

/* Whether a type has a configuration measured on FIT_MIN_STEPS steps. */
static bool _has_steady(const copus_ctx *ctx, const char *type)
{
	for (int i = 0; i < ctx->n_obs; i++)
		if (ctx->obs[i].n >= FIT_MIN_STEPS &&
		    strcmp(ctx->obs[i].type, type) == 0)
			return true;
	return false;
}

bool copus__placement_measured(const copus_ctx *ctx)
{
	int nodes = _obs_nodes(ctx);

	for (int i = 0; i < ctx->n_obs; i++) {
		const struct copus__obs *o = &ctx->obs[i];
		if (o->n >= FIT_MIN_STEPS && o->nodes == nodes &&
		    o->replicas == ctx->degrees.data &&
		    strcmp(o->type, ctx->gpu_type) == 0)
			return true;
	}
	return false;
}

/*
 * Fits the observations of one GPU type (those of FIT_MIN_STEPS steps or
 * more, when it has any), with libcopus's prior for the sync across nodes
 * (COPUS_FIT_PRIOR_RING); COPUS_ENODATA when it has none.
 */
static int _fit_type(const copus_ctx *ctx, const char *type,
		     copus_perf_params *p, size_t *nobs)
{
	copus_observation obs[COPUS_MAX_OBS];
	size_t n = 0;
	int64_t least = _has_steady(ctx, type) ? FIT_MIN_STEPS : 1;

	for (int i = 0; i < ctx->n_obs; i++) {
		const struct copus__obs *o = &ctx->obs[i];
		if (strcmp(o->type, type) != 0 || o->n < least)
			continue;
		obs[n++] = (copus_observation){
			.nodes = o->nodes,
			.replicas = o->replicas,
			.local = o->local,
			.accum_steps = o->accum_steps,
			.compute_time = fmax(o->sum_compute / o->n, 1e-9),
			.step_time = fmax(o->sum_step / o->n, 1e-9),
		};
	}
	*nobs = n;
	if (n == 0)
		return COPUS_ENODATA;
	return copus_fit_with(obs, n, COPUS_FIT_PRIOR_RING, p, NULL);
}

/* Whether perf[0 .. n) already holds a model of this type. */
static bool _has_type(const copus_hint_perf *perf, int n, const char *type)
{
	for (int i = 0; i < n; i++)
		if (strcmp(perf[i].type, type) == 0)
			return true;
	return false;
}

/*
 * Fits a model for every GPU type the job has observations of: the current
 * run's type first, then the types of earlier runs (restored from the
 * checkpoint), in the order of their observations, at most
 * COPUS_HINT_MAX_TYPES in all. Each model is fitted from its own type's
 * observations only. The scheduler so keeps what the job measured on a type
 * after it moves to another, also before the current type is measured: a
 * run restored on a new type then still publishes the models of the others
 * (and COPUS_ENODATA is returned, for the current type), where a hint
 * without them would leave the scheduler nothing on this job but its
 * estimates until the new type's first fit. A type of an earlier run whose
 * observations do not fit is left out; a failed fit of the current type
 * fails, as its hint cannot say how the job runs now.
 */
int copus__fit(copus_ctx *ctx)
{
	copus_hint_perf perf[COPUS_HINT_MAX_TYPES];
	size_t n;
	int rc, nperf = 0;

	if (!ctx->obs_dirty)
		return copus__perf_of_type(ctx) != NULL ? COPUS_OK
							: COPUS_ENODATA;
	memset(perf, 0, sizeof(perf));
	rc = _fit_type(ctx, ctx->gpu_type, &perf[0].perf, &n);
	if (rc != COPUS_OK && rc != COPUS_ENODATA)
		return copus__fail(ctx, rc,
				   "fit of %zu observations failed: %s", n,
				   copus_strerror(rc));
	if (rc == COPUS_OK) {
		snprintf(perf[0].type, sizeof(perf[0].type), "%s",
			 ctx->gpu_type);
		nperf = 1;
	}
	for (int i = 0; i < ctx->n_obs && nperf < COPUS_HINT_MAX_TYPES; i++) {
		const char *type = ctx->obs[i].type;

		if (_has_type(perf, nperf, type))
			continue;
		if (_fit_type(ctx, type, &perf[nperf].perf, &n) != COPUS_OK)
			continue;
		snprintf(perf[nperf].type, sizeof(perf[nperf].type), "%s",
			 type);
		nperf++;
	}
	ctx->obs_dirty = false;
	memcpy(ctx->perf, perf, sizeof(perf));
	ctx->n_perf = nperf;
	return rc;
}

int copus_perf_get(copus_ctx *ctx, copus_perf_params *out)
{
	const copus_perf_params *p;
	int rc;

	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	rc = copus__fit(ctx);
	p = copus__perf_of_type(ctx);
	if (p == NULL)
		return rc == COPUS_OK ? COPUS_ENODATA : rc;
	*out = *p;
	return COPUS_OK;
}

int copus_hint_get(const copus_ctx *ctx, copus_hint *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	memset(out, 0, sizeof(*out));
	if (ctx->info.job_id == 0)
		return COPUS_ESTATE;
	out->version = COPUS_HINT_VERSION;
	out->job_id = ctx->info.job_id;
	out->state = ctx->state;
	out->step = ctx->info.step;
	out->restart_count = ctx->info.restart_count;
	out->time = (int64_t)time(NULL);
	out->limits = ctx->cfg.limits;
	out->grad = copus__grad(ctx);
	out->progress = fmin(ctx->info.progress, COPUS_HINT_PROGRESS_MAX);
	out->target = ctx->cfg.target_progress;
	/*
	 * Its ranks come in whole replicas of the model: tensor x pipeline
	 * of them, or only tensor when a reshard callback lets its stages be
	 * split again on any count.
	 */
	out->granularity =
		ctx->cfg.tensor_degree *
		(ctx->cfg.reshard != NULL ? 1 : ctx->cfg.pipeline_degree);
	if (out->granularity <= 1)
		out->granularity = 0;
	if (out->granularity > COPUS_HINT_GRAN_MAX)
		out->granularity = COPUS_HINT_GRAN_MAX;
	/* The model lets the scheduler plan every cell; a planned job runs
	 * on any count the planner finds a plan for. */
	out->has_model = ctx->has_model;
	if (ctx->has_model)
		out->model = ctx->model;
	if (ctx->planned)
		out->granularity = 0;
	out->n_perf = ctx->n_perf;
	memcpy(out->perf, ctx->perf, sizeof(ctx->perf));
	/* Keep fitted values within what the receiver accepts unclamped. */
	for (int i = 0; i < out->n_perf; i++) {
		copus_perf_params *p = &out->perf[i].perf;
		double *v[6] = { &p->alpha_c, &p->beta_c,  &p->alpha_n,
				 &p->beta_n,  &p->alpha_r, &p->beta_r };
		for (int k = 0; k < 6; k++)
			*v[k] = fmin(fmax(*v[k], COPUS_HINT_TIME_MIN),
				     COPUS_HINT_TIME_MAX);
		p->gamma = fmin(fmax(p->gamma, COPUS_HINT_GAMMA_MIN),
				COPUS_HINT_GAMMA_MAX);
	}
	out->grad.sqr = fmin(out->grad.sqr, COPUS_HINT_GRAD_MAX);
	out->grad.var = fmin(out->grad.var, COPUS_HINT_GRAD_MAX);
	return COPUS_OK;
}
