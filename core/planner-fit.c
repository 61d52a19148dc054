/*
 * Calibration of the planner's per-type constants on measured iteration
 * times, with NLopt.
 *
 * Which plans fit a cell depends on memory alone, not on the constants, so
 * each sample's feasible plans (with their stage splits) are listed once
 * under the starting constants; each evaluation of the objective then
 * re-prices those plans and takes the fastest, which is what the search
 * would predict up to the choice of stage split.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nlopt.h>

#include <copus/planner.h>

#include "internal.h"

/* Efficiencies are searched between these (a fraction of the listed peak
 * FLOP/s; tensor cores run far above the listed single-precision peak). */
#define EFF_MIN 1e-3
#define EFF_MAX 100.0
#define OVERHEAD_MAX 60.0
#define LAYER_MAX 0.5
/* The bandwidth scales stay within a factor of 16 of the measured rates,
 * and a weak penalty on their logarithms keeps them at the measured rates
 * unless the iteration times say otherwise. */
#define COMM_SCALE_LOG_MAX 2.772588722239781
#define COMM_SCALE_PENALTY 0.05
/* Nanoseconds per parameter held, at most. */
#define PARAM_NS_MAX 100.0
#define NPARAM (2 * COPUS_PLANNER_KINDS + 4)
/* The loss of a log ratio r is sqrt(r^2 + eps^2): quadratic near 0,
 * linear beyond eps, so that a few plans far off their prediction do not
 * pull the constants of all the others. */
#define ROBUST_EPS 0.02

struct sample_plans {
	const copus_planner_sample *s;
	copus_planner_plan *plans;
	size_t n, cap;
};

struct fit_ctx {
	struct sample_plans *sp;
	size_t n;
	copus_planner_gpu gpu; /* the constants under trial */
	int free_eff[COPUS_PLANNER_KINDS]; /* which efficiencies are free */
};

static int collect(const copus_planner_plan *p, void *arg)
{
	struct sample_plans *sp = arg;

	if (sp->n == sp->cap) {
		size_t cap = sp->cap ? 2 * sp->cap : 32;
		copus_planner_plan *q = realloc(sp->plans, cap * sizeof(*q));
		if (q == NULL)
			return COPUS_ENOMEM;
		sp->plans = q;
		sp->cap = cap;
	}
	sp->plans[sp->n++] = *p;
	return COPUS_OK;
}

/*
 * Plans more than PRUNE_FACTOR times slower than a sample's fastest under
 * the starting constants are dropped: no change of constants that the
 * calibration makes in practice brings them back, and the objective runs
 * much faster without them.
 */
#define PRUNE_FACTOR 4.0

static void prune(struct sample_plans *sp)
{
	double best = INFINITY;
	size_t k = 0;

	for (size_t i = 0; i < sp->n; i++)
		if (sp->plans[i].seconds < best)
			best = sp->plans[i].seconds;
	for (size_t i = 0; i < sp->n; i++)
		if (sp->plans[i].seconds <= PRUNE_FACTOR * best)
			sp->plans[k++] = sp->plans[i];
	sp->n = k;
}

static void unpack(struct fit_ctx *c, const double *x)
{
	int k = 0;

	for (int e = 0; e < COPUS_PLANNER_KINDS; e++)
		if (c->free_eff[e]) {
			c->gpu.efficiency[e] = exp(x[k++]);
			c->gpu.param_s[e] = 1e-9 * x[k++];
		}
	c->gpu.overhead_s = x[k++];
	c->gpu.layer_s = x[k++];
	c->gpu.comm_scale[0] = exp(x[k++]);
	c->gpu.comm_scale[1] = exp(x[k]);
}

static double objective(unsigned nx, const double *x, double *grad,
			void *data)
{
	struct fit_ctx *c = data;
	double f;

	(void)grad;
	unpack(c, x);
	f = COMM_SCALE_PENALTY *
	    (x[nx - 1] * x[nx - 1] + x[nx - 2] * x[nx - 2]);
	for (size_t i = 0; i < c->n; i++) {
		struct sample_plans *sp = &c->sp[i];
		const copus_planner_sample *s = sp->s;
		double best = INFINITY;

		for (size_t k = 0; k < sp->n; k++) {
			copus_planner_plan p = sp->plans[k];
			copus__planner_price(s->model, s->batch, &c->gpu,
					     &s->cell, INFINITY, &p);
			if (p.seconds < best)
				best = p.seconds;
		}
		if (isfinite(best)) {
			double r = log(best / s->seconds);
			f += sqrt(r * r + ROBUST_EPS * ROBUST_EPS);
		}
	}
	return f;
}

static int calibrate_type(const copus_planner_sample *samples, size_t n,
			  copus_planner_gpu *gpu, int index,
			  const copus_planner_options *o)
{
	struct fit_ctx c = { 0 };
	double x[NPARAM], lb[NPARAM], ub[NPARAM], fbest;
	unsigned nx = 0;
	int rc = COPUS_OK;

	c.sp = calloc(n, sizeof(*c.sp));
	if (c.sp == NULL)
		return COPUS_ENOMEM;
	c.gpu = *gpu;
	for (size_t i = 0; i < n; i++) {
		const copus_planner_sample *s = &samples[i];
		if (s->gpu_index != index)
			continue;
		struct sample_plans *sp = &c.sp[c.n++];
		sp->s = s;
		rc = copus__planner_each(s->model, s->batch, gpu, &s->cell, o,
					 collect, sp);
		if (rc)
			goto out;
		prune(sp);
		c.free_eff[s->model->kind] = 1;
	}
	if (c.n == 0)
		goto out;
	for (int e = 0; e < COPUS_PLANNER_KINDS; e++) {
		if (!c.free_eff[e])
			continue;
		lb[nx] = log(EFF_MIN);
		ub[nx] = log(EFF_MAX);
		x[nx] = log(fmin(fmax(gpu->efficiency[e], EFF_MIN), EFF_MAX));
		nx++;
		lb[nx] = 0.0;
		ub[nx] = PARAM_NS_MAX;
		x[nx] = fmin(1e9 * gpu->param_s[e], PARAM_NS_MAX);
		nx++;
	}
	lb[nx] = 0.0;
	ub[nx] = OVERHEAD_MAX;
	x[nx] = fmin(gpu->overhead_s, OVERHEAD_MAX);
	nx++;
	lb[nx] = 0.0;
	ub[nx] = LAYER_MAX;
	x[nx] = fmin(gpu->layer_s, LAYER_MAX);
	nx++;
	for (int l = 0; l < COPUS_LINK_COUNT; l++) {
		lb[nx] = -COMM_SCALE_LOG_MAX;
		ub[nx] = COMM_SCALE_LOG_MAX;
		x[nx] = fmax(fmin(log(gpu->comm_scale[l]), COMM_SCALE_LOG_MAX),
			     -COMM_SCALE_LOG_MAX);
		nx++;
	}

	/*
	 * The fastest plan changes with the constants, so the objective has
	 * kinks and local minima: the search starts from the given
	 * efficiencies and from a quarter and four times them, restarts
	 * once from where each run ends, and keeps the best.
	 */
	double best[NPARAM], best_f = INFINITY;
	static const double starts[3] = { 0.0, -1.3862943611198906,
					  1.3862943611198906 };
	for (int st = 0; st < 3; st++) {
		double y[NPARAM];
		memcpy(y, x, sizeof(double) * nx);
		for (unsigned k = 0, e = 0; e < COPUS_PLANNER_KINDS; e++) {
			if (!c.free_eff[e])
				continue;
			y[k] = fmin(fmax(y[k] + starts[st], lb[k]), ub[k]);
			k += 2;
		}
		for (int run = 0; run < 2; run++) {
			nlopt_opt opt = nlopt_create(NLOPT_LN_SBPLX, nx);
			if (opt == NULL) {
				rc = COPUS_ENOMEM;
				goto out;
			}
			nlopt_set_lower_bounds(opt, lb);
			nlopt_set_upper_bounds(opt, ub);
			nlopt_set_min_objective(opt, objective, &c);
			nlopt_set_xtol_abs1(opt, 1e-5);
			nlopt_set_ftol_rel(opt, 1e-7);
			nlopt_set_maxeval(opt, 1500);
			nlopt_result r = nlopt_optimize(opt, y, &fbest);
			nlopt_destroy(opt);
			if (r < 0 && r != NLOPT_ROUNDOFF_LIMITED)
				break;
			if (fbest < best_f) {
				best_f = fbest;
				memcpy(best, y, sizeof(double) * nx);
			}
		}
	}
	if (!isfinite(best_f)) {
		rc = COPUS_EFIT;
		goto out;
	}
	memcpy(x, best, sizeof(double) * nx);
	unpack(&c, x);
	*gpu = c.gpu;
out:
	for (size_t i = 0; i < c.n; i++)
		free(c.sp[i].plans);
	free(c.sp);
	return rc;
}

int copus_planner_calibrate(const copus_planner_sample *samples, size_t n,
			    copus_planner_gpu *gpus, int n_gpus,
			    const copus_planner_options *opt)
{
	static const copus_planner_options def =
		COPUS_PLANNER_OPTIONS_INITIALIZER;
	const copus_planner_options *o = opt ? opt : &def;
	int rc;

	if ((samples == NULL && n > 0) || gpus == NULL || n_gpus < 1)
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++) {
		const copus_planner_sample *s = &samples[i];
		copus_planner_plan p;
		if (s->gpu_index < 0 || s->gpu_index >= n_gpus ||
		    !(s->seconds > 0.0) || !isfinite(s->seconds))
			return COPUS_EINVAL;
		/* Arguments are checked once here, through the search. */
		rc = copus_planner_best(s->model, s->batch,
					&gpus[s->gpu_index], &s->cell, o, &p);
		if (rc != COPUS_OK && rc != COPUS_ERANGE)
			return rc;
	}
	for (int g = 0; g < n_gpus; g++) {
		rc = calibrate_type(samples, n, &gpus[g], g, o);
		if (rc)
			return rc;
	}
	return COPUS_OK;
}
