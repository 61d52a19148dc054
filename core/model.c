/* The goodput model: throughput, statistical efficiency and batch choice. */
#include <math.h>
#include <stddef.h>

#include <copus/model.h>

#include "internal.h"

int copus_perf_params_check(const copus_perf_params *p)
{
	if (p == NULL)
		return COPUS_EINVAL;
	const double v[] = { p->alpha_c, p->beta_c, p->alpha_n, p->beta_n,
			     p->alpha_r, p->beta_r };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (!isfinite(v[i]) || v[i] < 0.0)
			return COPUS_EINVAL;
	if (!isfinite(p->gamma) || p->gamma < COPUS_GAMMA_MIN ||
	    p->gamma > COPUS_GAMMA_MAX)
		return COPUS_EINVAL;
	/* A job whose micro-batch costs nothing has no meaningful throughput. */
	if (p->alpha_c <= 0.0 && p->beta_c <= 0.0)
		return COPUS_EINVAL;
	return COPUS_OK;
}

static int grad_check(const copus_grad_stats *g)
{
	if (g == NULL || !isfinite(g->sqr) || !isfinite(g->var) ||
	    g->sqr < 0.0 || g->var < 0.0)
		return COPUS_EINVAL;
	return COPUS_OK;
}

static int limits_check(const copus_batch_limits *l)
{
	if (!isfinite(l->init_batch) || !isfinite(l->max_batch) ||
	    l->init_batch < 1.0 || l->max_batch < l->init_batch ||
	    l->min_local < 1 || l->max_local < l->min_local)
		return COPUS_EINVAL;
	return COPUS_OK;
}

int copus_model_check(const copus_model *m)
{
	int rc;

	if (m == NULL)
		return COPUS_EINVAL;
	if ((rc = copus_perf_params_check(&m->perf)) != COPUS_OK)
		return rc;
	if ((rc = grad_check(&m->grad)) != COPUS_OK)
		return rc;
	return limits_check(&m->limits);
}

int copus_model_bootstrap(const copus_model *known, double known_step,
			  double other_step, copus_model *out)
{
	double r;

	if (known == NULL || out == NULL || copus_model_check(known) != COPUS_OK ||
	    !(known_step > 0.0) || !isfinite(known_step) ||
	    !(other_step > 0.0) || !isfinite(other_step))
		return COPUS_EINVAL;
	r = other_step / known_step;
	*out = *known;
	out->perf.alpha_c *= r;
	out->perf.beta_c *= r;
	return copus_model_check(out) == COPUS_OK ? COPUS_OK : COPUS_ERANGE;
}

int copus__shape_check(int nodes, int replicas)
{
	if (nodes < 1 || replicas < nodes)
		return COPUS_EINVAL;
	return COPUS_OK;
}

/*
 * The model's terms are static here, so that best_batch's loop inlines
 * them; the copus__ functions are their names for the rest of the core.
 */
static double sync_time(const copus_perf_params *p, int nodes, int replicas)
{
	double extra = replicas > 2 ? (double)(replicas - 2) : 0.0;

	if (replicas <= 1)
		return 0.0;
	if (nodes > 1)
		return p->alpha_n + p->beta_n * extra;
	return p->alpha_r + p->beta_r * extra;
}

double copus__sync_time(const copus_perf_params *p, int nodes, int replicas)
{
	return sync_time(p, nodes, replicas);
}

static double overlap(double grad, double sync, double gamma)
{
	if (sync <= 0.0)
		return grad;
	/*
	 * Scale by the larger term so that x^gamma cannot overflow. The
	 * larger term's power is then 1 exactly (pow(1, y) is 1 for every
	 * y), unless it is infinite.
	 */
	double hi = grad > sync ? grad : sync, lo = grad > sync ? sync : grad;
	double a = isfinite(hi) ? 1.0 + pow(lo / hi, gamma)
				: pow(grad / hi, gamma) + pow(sync / hi, gamma);
	return hi * pow(a, 1.0 / gamma);
}

double copus__overlap(double grad, double sync, double gamma)
{
	return overlap(grad, sync, gamma);
}

int copus_step_time(const copus_perf_params *p, int nodes, int replicas,
		    double local, int accum_steps, copus_step_times *out)
{
	int rc;

	if (out == NULL || !isfinite(local) || local <= 0.0 || accum_steps < 0)
		return COPUS_EINVAL;
	if ((rc = copus_perf_params_check(p)) != COPUS_OK)
		return rc;
	if ((rc = copus__shape_check(nodes, replicas)) != COPUS_OK)
		return rc;
	out->grad = p->alpha_c + p->beta_c * local;
	out->sync = sync_time(p, nodes, replicas);
	out->opt = overlap(out->grad, out->sync, p->gamma);
	out->iter = accum_steps * out->grad + out->opt;
	return COPUS_OK;
}

int copus_throughput(const copus_perf_params *p, int nodes, int replicas,
		     double local, int accum_steps, double *out)
{
	copus_step_times t;
	int rc;

	if (out == NULL)
		return COPUS_EINVAL;
	rc = copus_step_time(p, nodes, replicas, local, accum_steps, &t);
	if (rc != COPUS_OK)
		return rc;
	*out = replicas * local * (accum_steps + 1.0) / t.iter;
	return COPUS_OK;
}

int copus_noise_scale(const copus_grad_stats *g, double init_batch,
		      double *out)
{
	int rc;

	if (out == NULL || !isfinite(init_batch) || init_batch <= 0.0)
		return COPUS_EINVAL;
	if ((rc = grad_check(g)) != COPUS_OK)
		return rc;
	if (g->sqr > 0.0)
		*out = init_batch * g->var / g->sqr;
	else
		*out = g->var > 0.0 ? INFINITY : 0.0;
	return COPUS_OK;
}

/* Pollux's gain with scale = M / M0, written to be exact at the extremes. */
static double gain(const copus_grad_stats *g, double scale)
{
	double denom = g->var / scale + g->sqr;

	if (denom <= 0.0)
		return 1.0;
	return (g->var + g->sqr) / denom;
}

double copus__gain(const copus_grad_stats *g, double scale)
{
	return gain(g, scale);
}

static int batch_args_check(const copus_grad_stats *g, double init_batch,
			    double batch, const double *out)
{
	if (out == NULL || !isfinite(init_batch) || !isfinite(batch) ||
	    init_batch <= 0.0 || batch <= 0.0)
		return COPUS_EINVAL;
	return grad_check(g);
}

int copus_gain(const copus_grad_stats *g, double init_batch, double batch,
	       double *out)
{
	int rc = batch_args_check(g, init_batch, batch, out);

	if (rc != COPUS_OK)
		return rc;
	*out = gain(g, batch / init_batch);
	return COPUS_OK;
}

int copus_efficiency(const copus_grad_stats *g, double init_batch,
		     double batch, double *out)
{
	int rc = batch_args_check(g, init_batch, batch, out);

	if (rc != COPUS_OK)
		return rc;
	double scale = batch / init_batch;
	*out = gain(g, scale) / scale;
	return COPUS_OK;
}

/* Goodput without argument checks, for the inner loops. */
static double goodput(const copus_model *m, int nodes, int replicas,
		      int local, int accum_steps, double *throughput,
		      double *efficiency)
{
	const copus_perf_params *p = &m->perf;
	double grad = p->alpha_c + p->beta_c * local;
	double sync = sync_time(p, nodes, replicas);
	double iter = accum_steps * grad + overlap(grad, sync, p->gamma);
	double batch = (double)replicas * local * (accum_steps + 1);
	double tput = batch / iter;
	double scale = batch / m->limits.init_batch;
	double eff = gain(&m->grad, scale) / scale;

	if (throughput != NULL)
		*throughput = tput;
	if (efficiency != NULL)
		*efficiency = eff;
	return tput * eff;
}

double copus__goodput(const copus_model *m, int nodes, int replicas,
		      int local, int accum_steps, double *throughput,
		      double *efficiency)
{
	return goodput(m, nodes, replicas, local, accum_steps, throughput,
		       efficiency);
}

int copus_goodput(const copus_model *m, int nodes, int replicas, int local,
		  int accum_steps, double *out)
{
	int rc;

	if (out == NULL || local < 1 || accum_steps < 0)
		return COPUS_EINVAL;
	if ((rc = copus_model_check(m)) != COPUS_OK)
		return rc;
	if ((rc = copus__shape_check(nodes, replicas)) != COPUS_OK)
		return rc;
	*out = goodput(m, nodes, replicas, local, accum_steps, NULL, NULL);
	return COPUS_OK;
}

int copus__best_batch(const copus_model *m, int nodes, int replicas,
		      copus_batch_plan *out)
{
	const copus_batch_limits *l = &m->limits;
	const double eps = 1e-8;
	double lo = l->init_batch;
	double hi = l->max_batch;
	bool found = false;

	if ((double)replicas * l->min_local > lo)
		lo = (double)replicas * l->min_local;
	if (lo > hi * (1.0 + eps))
		return COPUS_ERANGE;
	if (lo > hi)
		lo = hi;

	int n = COPUS_BATCH_CANDIDATES, last_micro = -1, last_accum = -1;
	double ratio = n > 1 ? pow(hi / lo, 1.0 / (n - 1)) : 1.0;
	double batch = lo;
	for (int i = 0; i < n; i++, batch *= ratio) {
		if (i == n - 1)
			batch = hi; /* land exactly on the limit */
		double local = batch / replicas;
		int accum = 0;
		if (l->accumulation) {
			accum = (int)ceil(local / l->max_local - eps) - 1;
			if (replicas == 1 && local > l->init_batch + eps &&
			    accum < 1)
				accum = 1;
			if (accum < 0)
				accum = 0;
		}
		int micro = (int)ceil(local / (accum + 1) - eps);
		if (micro < l->min_local || micro > l->max_local)
			continue;
		/*
		 * Near the smallest batches several candidates round to the
		 * same micro-batch and steps: the same goodput, which does not
		 * beat itself.
		 */
		if (micro == last_micro && accum == last_accum)
			continue;
		last_micro = micro;
		last_accum = accum;
		double tput, eff;
		double gp = goodput(m, nodes, replicas, micro, accum, &tput,
				    &eff);
		if (!found || gp > out->goodput) {
			found = true;
			out->batch = (double)replicas * micro * (accum + 1);
			out->local = micro;
			out->accum_steps = accum;
			out->throughput = tput;
			out->efficiency = eff;
			out->goodput = gp;
		}
		if (lo == hi)
			break;
	}
	return found ? COPUS_OK : COPUS_ERANGE;
}

int copus_best_batch(const copus_model *m, int nodes, int replicas,
		     copus_batch_plan *out)
{
	int rc;

	if (out == NULL)
		return COPUS_EINVAL;
	if ((rc = copus_model_check(m)) != COPUS_OK)
		return rc;
	if ((rc = copus__shape_check(nodes, replicas)) != COPUS_OK)
		return rc;
	return copus__best_batch(m, nodes, replicas, out);
}
