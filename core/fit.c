/*
 * Fitting the throughput model to measured step times with NLopt's bounded
 * L-BFGS and the exact gradient of Pollux's objective.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nlopt.h>

#include <copus/model.h>

#include "internal.h"

enum { P_AC, P_BC, P_AN, P_BN, P_AR, P_BR, P_GAMMA, P_COUNT };

struct fit_ctx {
	const copus_observation *obs;
	size_t n;
	double *log_step;    /* log of each observed step time */
	double *log_compute; /* log of each observed compute time */
	double full[P_COUNT];  /* every parameter, fixed ones included */
	int free_idx[P_COUNT]; /* which full[] entry each free variable is */
	int nfree;
	int evaluations;
	bool have_best;
	double best_f;
	double best[P_COUNT];
};

static void params_to_array(const copus_perf_params *p, double *a)
{
	a[P_AC] = p->alpha_c;
	a[P_BC] = p->beta_c;
	a[P_AN] = p->alpha_n;
	a[P_BN] = p->beta_n;
	a[P_AR] = p->alpha_r;
	a[P_BR] = p->beta_r;
	a[P_GAMMA] = p->gamma;
}

static void array_to_params(const double *a, copus_perf_params *p)
{
	p->alpha_c = a[P_AC];
	p->beta_c = a[P_BC];
	p->alpha_n = a[P_AN];
	p->beta_n = a[P_BN];
	p->alpha_r = a[P_AR];
	p->beta_r = a[P_BR];
	p->gamma = a[P_GAMMA];
}

/*
 * Pollux's objective over the full parameter vector x; fills grad (length
 * P_COUNT) when it is not NULL.
 */
static double objective(const struct fit_ctx *c, const double *x,
			double *grad, double *rmsle_step)
{
	double g = x[P_GAMMA];
	double sum1 = 0.0, sum2 = 0.0;
	double d1[P_COUNT] = { 0 }, d2[P_COUNT] = { 0 };

	for (size_t i = 0; i < c->n; i++) {
		const copus_observation *o = &c->obs[i];
		double tc = x[P_AC] + x[P_BC] * o->local;
		double extra = o->replicas > 2 ? o->replicas - 2.0 : 0.0;
		int a_idx = -1, b_idx = -1;
		double tn = 0.0;
		if (o->replicas > 1) {
			a_idx = o->nodes > 1 ? P_AN : P_AR;
			b_idx = o->nodes > 1 ? P_BN : P_BR;
			tn = x[a_idx] + x[b_idx] * extra;
		}
		/*
		 * T_opt = hi * (a + b)^(1/g) with a = (tc/hi)^g, b = (tn/hi)^g;
		 * a / (a + b) and b / (a + b) are (tc/T_opt)^g and (tn/T_opt)^g,
		 * which give every partial derivative without more powers.
		 */
		double topt = tc, cg = 1.0, ng = 0.0;
		if (tn > 0.0) {
			double hi = tc > tn ? tc : tn;
			double a = pow(tc / hi, g), b = pow(tn / hi, g);
			topt = hi * pow(a + b, 1.0 / g);
			cg = a / (a + b);
			ng = b / (a + b);
		}
		double titer = o->accum_steps * tc + topt;
		double ltc = log(tc);
		double r1 = log(titer) - c->log_step[i];
		double r2 = ltc - c->log_compute[i];
		sum1 += r1 * r1;
		sum2 += r2 * r2;
		if (grad == NULL)
			continue;

		/* Partial derivatives of T_iter through T_grad, T_sync, gamma. */
		double dt_dc = o->accum_steps + cg * topt / tc;
		double dt_dn = tn > 0.0 ? ng * topt / tn : 0.0;
		double dt_dg = 0.0;
		if (tn > 0.0)
			dt_dg = topt / g * (cg * ltc + ng * log(tn) - log(topt));
		double w1 = r1 / titer;
		d1[P_AC] += w1 * dt_dc;
		d1[P_BC] += w1 * dt_dc * o->local;
		if (a_idx >= 0) {
			d1[a_idx] += w1 * dt_dn;
			d1[b_idx] += w1 * dt_dn * extra;
		}
		d1[P_GAMMA] += w1 * dt_dg;
		double w2 = r2 / tc;
		d2[P_AC] += w2;
		d2[P_BC] += w2 * o->local;
	}

	double n = (double)c->n;
	double err1 = sqrt(sum1 / n), err2 = sqrt(sum2 / n);
	double rn = x[P_BN] / x[P_AN], rr = x[P_BR] / x[P_AR];
	double f = err1 + err2 + 1e-3 * (g - 1.0) * (g - 1.0) +
		   1e-2 * (rn * rn + rr * rr);

	if (rmsle_step != NULL)
		*rmsle_step = err1;
	if (grad != NULL) {
		for (int k = 0; k < P_COUNT; k++) {
			grad[k] = (err1 > 0.0 ? d1[k] / (n * err1) : 0.0) +
				  (err2 > 0.0 ? d2[k] / (n * err2) : 0.0);
		}
		grad[P_GAMMA] += 2e-3 * (g - 1.0);
		grad[P_BN] += 2e-2 * rn / x[P_AN];
		grad[P_AN] -= 2e-2 * rn * rn / x[P_AN];
		grad[P_BR] += 2e-2 * rr / x[P_AR];
		grad[P_AR] -= 2e-2 * rr * rr / x[P_AR];
	}
	return f;
}

/*
 * NLopt works on the free parameters only. The six time parameters are
 * optimised as their logarithms, which puts values that differ by orders of
 * magnitude (a few microseconds per sample next to a tenth of a second) on
 * one scale; gamma is optimised as it is. The lowest point seen is kept, so
 * that a line search that gives up near the minimum still returns it.
 */
static double nlopt_objective(unsigned nfree, const double *xf, double *gf,
			      void *data)
{
	struct fit_ctx *c = data;
	double x[P_COUNT], gfull[P_COUNT];

	memcpy(x, c->full, sizeof(x));
	for (unsigned k = 0; k < nfree; k++) {
		int i = c->free_idx[k];
		x[i] = i == P_GAMMA ? xf[k] : exp(xf[k]);
	}
	c->evaluations++;
	double f = objective(c, x, gf != NULL ? gfull : NULL, NULL);
	if (gf != NULL) {
		for (unsigned k = 0; k < nfree; k++) {
			int i = c->free_idx[k];
			gf[k] = i == P_GAMMA ? gfull[i] : gfull[i] * x[i];
		}
	}
	if (isfinite(f) && (!c->have_best || f < c->best_f)) {
		c->have_best = true;
		c->best_f = f;
		memcpy(c->best, x, sizeof(x));
	}
	return f;
}

/* The logarithms of the measured times, computed once per fit. */
static int ctx_logs(struct fit_ctx *c)
{
	c->log_step = malloc(2 * c->n * sizeof(double));
	if (c->log_step == NULL)
		return COPUS_ENOMEM;
	c->log_compute = c->log_step + c->n;
	for (size_t i = 0; i < c->n; i++) {
		c->log_step[i] = log(c->obs[i].step_time);
		c->log_compute[i] = log(c->obs[i].compute_time);
	}
	return COPUS_OK;
}

static int observation_check(const copus_observation *o)
{
	if (copus__shape_check(o->nodes, o->replicas) != COPUS_OK ||
	    o->local < 1 || o->accum_steps < 0 ||
	    !isfinite(o->compute_time) || !isfinite(o->step_time) ||
	    o->compute_time <= 0.0 || o->step_time <= 0.0)
		return COPUS_EINVAL;
	return COPUS_OK;
}

int copus_fit(const copus_observation *obs, size_t n,
	      copus_perf_params *out, copus_fit_report *report)
{
	return copus_fit_with(obs, n, COPUS_FIT_PRIOR_POLLUX, out, report);
}

int copus_fit_with(const copus_observation *obs, size_t n,
		   copus_fit_prior prior, copus_perf_params *out,
		   copus_fit_report *report)
{
	struct fit_ctx c = { .obs = obs, .n = n };
	double lower[P_COUNT], upper[P_COUNT];
	bool fixed[P_COUNT] = { false };
	bool many_local = false, multi_node = false, single_node_multi = false;
	bool over_two = false;
	int most_in_node = 1; /* the most GPUs of a one-node step */
	double mean_compute = 0.0, mean_local = 0.0, mean_sync = 0.0;
	int sync_count = 0;

	if (obs == NULL || out == NULL ||
	    (prior != COPUS_FIT_PRIOR_POLLUX && prior != COPUS_FIT_PRIOR_RING))
		return COPUS_EINVAL;
	if (n == 0)
		return COPUS_ENODATA;
	for (size_t i = 0; i < n; i++) {
		if (observation_check(&obs[i]) != COPUS_OK)
			return COPUS_EINVAL;
		if (obs[i].local != obs[0].local)
			many_local = true;
		if (obs[i].nodes > 1)
			multi_node = true;
		if (obs[i].nodes == 1 && obs[i].replicas > 1)
			single_node_multi = true;
		if (obs[i].nodes == 1 && obs[i].replicas > most_in_node)
			most_in_node = obs[i].replicas;
		if (obs[i].replicas > 2)
			over_two = true;
		mean_compute += obs[i].compute_time;
		mean_local += obs[i].local;
		if (obs[i].replicas > 1) {
			double s = obs[i].step_time -
				   (obs[i].accum_steps + 1) * obs[i].compute_time;
			mean_sync += s > 0.0 ? s : 0.0;
			sync_count++;
		}
	}
	mean_compute /= (double)n;
	mean_local /= (double)n;

	int rc = COPUS_OK;
	if (ctx_logs(&c) != COPUS_OK)
		return COPUS_ENOMEM;

	/*
	 * Start from the scale of the data: half the compute time is constant,
	 * half grows with the micro-batch; the sync terms start at the mean
	 * time the multi-GPU steps spent beyond their compute.
	 */
	double sync0 = sync_count > 0 ? mean_sync / sync_count : 0.0;
	if (sync0 < mean_compute * 1e-3)
		sync0 = mean_compute * 1e-3;
	c.full[P_AC] = mean_compute / 2.0;
	c.full[P_BC] = mean_compute / 2.0 / mean_local;
	c.full[P_AN] = c.full[P_AR] = sync0;
	c.full[P_BN] = c.full[P_BR] = sync0 / 10.0;
	for (int k = 0; k < P_GAMMA; k++) {
		lower[k] = COPUS_PARAM_MIN;
		upper[k] = HUGE_VAL;
	}
	c.full[P_GAMMA] = 1.0 + 1e-3;
	lower[P_GAMMA] = COPUS_GAMMA_MIN;
	upper[P_GAMMA] = COPUS_GAMMA_MAX;

	/* Priors for what has not been observed yet. */
	if (!many_local) {
		c.full[P_AC] = mean_compute / 2.0;
		fixed[P_AC] = true;
	}
	if (!multi_node)
		fixed[P_AN] = fixed[P_BN] = true;
	if (!single_node_multi)
		fixed[P_AR] = fixed[P_BR] = true;
	if (!over_two)
		fixed[P_BN] = fixed[P_BR] = true;
	for (int k = 0; k < P_COUNT; k++) {
		if (fixed[k] && k != P_AC)
			c.full[k] = lower[k];
	}

	double xf[P_COUNT], lf[P_COUNT], uf[P_COUNT];
	unsigned fixed_mask = 0;
	for (int k = 0; k < P_COUNT; k++) {
		if (fixed[k]) {
			fixed_mask |= 1u << k;
			continue;
		}
		bool lg = k != P_GAMMA;
		c.free_idx[c.nfree] = k;
		xf[c.nfree] = lg ? log(c.full[k]) : c.full[k];
		lf[c.nfree] = lg ? log(lower[k]) : lower[k];
		uf[c.nfree] = lg ? HUGE_VAL : upper[k];
		c.nfree++;
	}

	int status = NLOPT_SUCCESS;
	if (c.nfree > 0) {
		nlopt_opt opt = nlopt_create(NLOPT_LD_LBFGS, (unsigned)c.nfree);
		if (opt == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		double fmin;
		nlopt_set_lower_bounds(opt, lf);
		nlopt_set_upper_bounds(opt, uf);
		nlopt_set_min_objective(opt, nlopt_objective, &c);
		nlopt_set_ftol_rel(opt, 1e-10);
		nlopt_set_xtol_rel(opt, 1e-8);
		nlopt_set_maxeval(opt, 2000);
		status = nlopt_optimize(opt, xf, &fmin);
		nlopt_destroy(opt);
		if (status == NLOPT_INVALID_ARGS || status == NLOPT_OUT_OF_MEMORY ||
		    !c.have_best) {
			rc = status == NLOPT_OUT_OF_MEMORY ? COPUS_ENOMEM
							   : COPUS_EFIT;
			goto out;
		}
		memcpy(c.full, c.best, sizeof(c.full));
	}

	double rmsle;
	double f = objective(&c, c.full, NULL, &rmsle);
	if (!isfinite(f)) {
		rc = COPUS_EFIT;
		goto out;
	}

	/* With no multi-node data, crossing nodes is assumed a bit slower
	 * (copus_fit_prior). */
	if (!multi_node && prior == COPUS_FIT_PRIOR_RING) {
		double most = c.full[P_AR] +
			      c.full[P_BR] * fmax(most_in_node - 2, 0);
		c.full[P_AN] = fmax(1.1 * most, COPUS_PARAM_MIN);
		c.full[P_BN] = COPUS_PARAM_MIN;
	} else if (!multi_node) {
		if (c.full[P_AN] < 1.1 * c.full[P_AR])
			c.full[P_AN] = 1.1 * c.full[P_AR];
		if (c.full[P_BN] < 1.1 * c.full[P_BR])
			c.full[P_BN] = 1.1 * c.full[P_BR];
	}

	array_to_params(c.full, out);
	if (report != NULL) {
		report->objective = f;
		report->rmsle_step = rmsle;
		report->evaluations = c.evaluations;
		report->optimizer_status = status;
		report->fixed = fixed_mask;
	}
out:
	free(c.log_step);
	return rc;
}

/* Exposed for the gradient test: the objective and its exact gradient. */
double copus__fit_objective(const copus_observation *obs, size_t n,
			    const copus_perf_params *p, double *grad)
{
	struct fit_ctx c = { .obs = obs, .n = n };
	double x[P_COUNT];

	if (ctx_logs(&c) != COPUS_OK)
		return NAN;
	params_to_array(p, x);
	double f = objective(&c, x, grad, NULL);
	free(c.log_step);
	return f;
}
