/*
 * Calibration of the planner's per-type constants, and of the efficiencies
 * that all types share, on measured iteration times, with NLopt.
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
	struct sample_plans **sp;
	size_t n;
	copus_planner_gpu gpu; /* the constants under trial */
	/* Which efficiencies and times per parameter are free. */
	int free_eff[COPUS_PLANNER_KINDS], free_param[COPUS_PLANNER_KINDS];
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

	for (int e = 0; e < COPUS_PLANNER_KINDS; e++) {
		if (c->free_eff[e])
			c->gpu.efficiency[e] = exp(x[k++]);
		if (c->free_param[e])
			c->gpu.param_s[e] = 1e-9 * x[k++];
	}
	c->gpu.overhead_s = x[k++];
	c->gpu.layer_s = x[k++];
	c->gpu.comm_scale[0] = exp(x[k++]);
	c->gpu.comm_scale[1] = exp(x[k]);
}

/* The loss of one sample under the constants g. */
static double loss(const struct sample_plans *sp, const copus_planner_gpu *g)
{
	const copus_planner_sample *s = sp->s;
	double best = INFINITY, r;

	for (size_t k = 0; k < sp->n; k++) {
		copus_planner_plan p = sp->plans[k];
		copus__planner_price(s->model, s->batch, g, &s->cell, INFINITY,
				     &p);
		if (p.seconds < best)
			best = p.seconds;
	}
	if (!isfinite(best))
		return 0.0;
	r = log(best / s->seconds);
	return sqrt(r * r + ROBUST_EPS * ROBUST_EPS);
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
	for (size_t i = 0; i < c->n; i++)
		f += loss(c->sp[i], &c->gpu);
	return f;
}

/*
 * Minimise fn over nx variables within [lb, ub] from x: the fastest plan
 * changes with the constants, so the objective has kinks and local
 * minima; the search starts from x and from x with the variables of
 * shift moved by a quarter and four times (log scale), restarts once from
 * where each run ends, and keeps the best. COPUS_EFIT when no run ends.
 */
static int minimise(nlopt_func fn, void *data, unsigned nx, double *x,
		    const double *lb, const double *ub, const bool *shift)
{
	double best[NPARAM], best_f = INFINITY, fbest;
	static const double starts[3] = { 0.0, -1.3862943611198906,
					  1.3862943611198906 };

	for (int st = 0; st < 3; st++) {
		double y[NPARAM];
		memcpy(y, x, sizeof(double) * nx);
		for (unsigned k = 0; k < nx; k++)
			if (shift[k])
				y[k] = fmin(fmax(y[k] + starts[st], lb[k]),
					    ub[k]);
		for (int run = 0; run < 2; run++) {
			nlopt_opt opt = nlopt_create(NLOPT_LN_SBPLX, nx);
			if (opt == NULL)
				return COPUS_ENOMEM;
			nlopt_set_lower_bounds(opt, lb);
			nlopt_set_upper_bounds(opt, ub);
			nlopt_set_min_objective(opt, fn, data);
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
	if (!isfinite(best_f))
		return COPUS_EFIT;
	memcpy(x, best, sizeof(double) * nx);
	return COPUS_OK;
}

/*
 * Classes whose efficiency is one share of the listed peak for every
 * type, fitted on the samples of all types: Wide-ResNet, of whose
 * convolutions each type has few samples, so that a type's own fit
 * swings with the samples it happens to get.
 */
static const bool shared_eff[COPUS_PLANNER_KINDS] = {
	[COPUS_ARCH_WIDE_RESNET - 1] = true,
};

/*
 * The constants of type index on its samples among sp[0 .. n - 1]: the
 * efficiency and time per parameter of each class it has samples of,
 * except the efficiencies that held marks, which stay.
 */
static int calibrate_type(struct sample_plans *sp, size_t n,
			  copus_planner_gpu *gpu, int index, const bool *held)
{
	struct fit_ctx c = { 0 };
	double x[NPARAM], lb[NPARAM], ub[NPARAM];
	bool shift[NPARAM] = { false };
	unsigned nx = 0;
	int rc = COPUS_OK;

	c.sp = calloc(n ? n : 1, sizeof(*c.sp));
	if (c.sp == NULL)
		return COPUS_ENOMEM;
	c.gpu = *gpu;
	for (size_t i = 0; i < n; i++) {
		int k = sp[i].s->model->kind;
		if (sp[i].s->gpu_index != index)
			continue;
		c.sp[c.n++] = &sp[i];
		c.free_eff[k] = !held[k];
		c.free_param[k] = 1;
	}
	if (c.n == 0)
		goto out;
	for (int e = 0; e < COPUS_PLANNER_KINDS; e++) {
		if (c.free_eff[e]) {
			lb[nx] = log(EFF_MIN);
			ub[nx] = log(EFF_MAX);
			x[nx] = log(fmin(fmax(gpu->efficiency[e], EFF_MIN),
					 EFF_MAX));
			shift[nx++] = true;
		}
		if (c.free_param[e]) {
			lb[nx] = 0.0;
			ub[nx] = PARAM_NS_MAX;
			x[nx] = fmin(1e9 * gpu->param_s[e], PARAM_NS_MAX);
			nx++;
		}
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
	rc = minimise(objective, &c, nx, x, lb, ub, shift);
	if (rc == COPUS_OK) {
		unpack(&c, x);
		*gpu = c.gpu;
	}
out:
	free(c.sp);
	return rc;
}

/* The fit of one class's efficiency shared by all types. */
struct shared_ctx {
	struct sample_plans **sp;
	size_t n;
	copus_planner_gpu *gpus; /* the constants under trial, by type */
	int n_gpus, kind;
};

static double shared_objective(unsigned nx, const double *x, double *grad,
			       void *data)
{
	struct shared_ctx *c = data;
	double f = 0.0;

	(void)nx;
	(void)grad;
	for (int g = 0; g < c->n_gpus; g++)
		c->gpus[g].efficiency[c->kind] = exp(x[0]);
	for (size_t i = 0; i < c->n; i++)
		f += loss(c->sp[i], &c->gpus[c->sp[i]->s->gpu_index]);
	return f;
}

/*
 * The efficiency of class kind on its samples of every type, the types'
 * other constants held, set on every type (with samples or not). It
 * starts from the geometric mean of the efficiencies of the types with
 * samples of the class.
 */
static int calibrate_shared(struct sample_plans *sp, size_t n,
			    copus_planner_gpu *gpus, int n_gpus, int kind)
{
	struct shared_ctx c = { 0 };
	double x, lb = log(EFF_MIN), ub = log(EFF_MAX), start = 0.0;
	const bool shift = true;
	int rc = COPUS_OK, types = 0;

	c.sp = calloc(n ? n : 1, sizeof(*c.sp));
	c.gpus = malloc((size_t)n_gpus * sizeof(*c.gpus));
	if (c.sp == NULL || c.gpus == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	c.n_gpus = n_gpus;
	c.kind = kind;
	memcpy(c.gpus, gpus, (size_t)n_gpus * sizeof(*gpus));
	for (size_t i = 0; i < n; i++)
		if (sp[i].s->model->kind == kind)
			c.sp[c.n++] = &sp[i];
	if (c.n == 0)
		goto out;
	for (int g = 0; g < n_gpus; g++) {
		bool has = false;
		for (size_t i = 0; i < c.n && !has; i++)
			has = c.sp[i]->s->gpu_index == g;
		if (has) {
			start += log(fmin(fmax(gpus[g].efficiency[kind],
					       EFF_MIN),
					  EFF_MAX));
			types++;
		}
	}
	x = start / types;
	rc = minimise(shared_objective, &c, 1, &x, &lb, &ub, &shift);
	if (rc == COPUS_OK)
		for (int g = 0; g < n_gpus; g++)
			gpus[g].efficiency[kind] = exp(x);
out:
	free(c.sp);
	free(c.gpus);
	return rc;
}

int copus_planner_calibrate(const copus_planner_sample *samples, size_t n,
			    copus_planner_gpu *gpus, int n_gpus,
			    const copus_planner_options *opt)
{
	static const copus_planner_options def =
		COPUS_PLANNER_OPTIONS_INITIALIZER;
	const copus_planner_options *o = opt ? opt : &def;
	static const bool none[COPUS_PLANNER_KINDS] = { false };
	struct sample_plans *sp;
	int rc = COPUS_OK;

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
	sp = calloc(n ? n : 1, sizeof(*sp));
	if (sp == NULL)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const copus_planner_sample *s = &samples[i];
		sp[i].s = s;
		rc = copus__planner_each(s->model, s->batch,
					 &gpus[s->gpu_index], &s->cell, o,
					 collect, &sp[i]);
		if (rc)
			goto out;
		prune(&sp[i]);
	}
	/*
	 * Each type's constants alone first; then the shared efficiencies
	 * on the samples of every type, the types' other constants held;
	 * then each type's other constants again, the shared ones held.
	 */
	for (int g = 0; g < n_gpus && rc == COPUS_OK; g++)
		rc = calibrate_type(sp, n, &gpus[g], g, none);
	for (int k = 0; k < COPUS_PLANNER_KINDS && rc == COPUS_OK; k++)
		if (shared_eff[k])
			rc = calibrate_shared(sp, n, gpus, n_gpus, k);
	for (int g = 0; g < n_gpus && rc == COPUS_OK; g++)
		rc = calibrate_type(sp, n, &gpus[g], g, shared_eff);
out:
	for (size_t i = 0; i < n; i++)
		free(sp[i].plans);
	free(sp);
	return rc;
}
