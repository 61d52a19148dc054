/*
 * A job's model on a GPU type it has not run on, from what a cluster has:
 * its models on the types it has run on, the jobs of its application that
 * have run on both types, the types' constants, then the jobs of any
 * application (copus/model.h copus_models_estimate). The plugin and copus-sim call it
 * the same way every round. Pure: no I/O.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <copus/model.h>
#include <copus/planner.h>

#include "internal.h"

/* ------------------------------------------------------------ contents */
struct ratios;
static double compute_time(const copus_model *m);
static int cmp_double(const void *a, const void *b);
static void learn(const double *lc, const size_t *which, size_t n, int T,
		  double *buf, struct ratios *r);
static int cmp_app(const void *a, const void *b);
static void estimate_job(const copus_model *const *known, const double *lc,
			 size_t i, int T, const struct ratios *app,
			 const struct ratios *all,
			 const struct copus_type_ratios *mem,
			 const double *speeds, copus_model *est,
			 bool *estimated);

/*
 * Per pair of types (t, u): the median of log(compute time on t / on u)
 * over some jobs that have measured both, and how many did.
 */
struct ratios {
	double log_ratio[COPUS_ESTIMATE_MAX_TYPES][COPUS_ESTIMATE_MAX_TYPES];
	int count[COPUS_ESTIMATE_MAX_TYPES][COPUS_ESTIMATE_MAX_TYPES];
};

/* A job's index with its application, to sort the jobs by it. */
struct by_app {
	const char *app;
	size_t i;
};

double copus_gpu_type_speed(const char *type)
{
	copus_planner_gpu g;

	if (type == NULL || copus_planner_gpu_default(type, &g) != COPUS_OK)
		return 0.0;
	return copus_planner_gpu_speed(&g);
}

double copus_planner_gpus_speed(const copus_planner_gpu_type *gpus, int n,
				const char *type)
{
	const copus_planner_gpu_type *f = copus_planner_gpus_find(gpus, n, type);

	return f ? copus_planner_gpu_speed(&f->gpu) : copus_gpu_type_speed(type);
}

double copus_planner_gpu_speed(const copus_planner_gpu *g)
{
	if (g == NULL || !(g->peak_flops > 0.0) ||
	    !(g->memory_bandwidth > 0.0) || !isfinite(g->peak_flops) ||
	    !isfinite(g->memory_bandwidth))
		return 0.0;
	return sqrt(g->peak_flops * g->memory_bandwidth);
}

/*
 * The compute time of one micro-batch of the job's first size on one GPU
 * (its initial batch, within its micro-batch limits): the same size on
 * each type, so that the ratio between two of a job's models compares the
 * GPUs and not the batches.
 */
static double compute_time(const copus_model *m)
{
	double local = m->limits.init_batch;

	if (local > m->limits.max_local)
		local = m->limits.max_local;
	if (local < m->limits.min_local)
		local = m->limits.min_local;
	return m->perf.alpha_c + m->perf.beta_c * local;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The ratios of the jobs which[0..n) into r; buf holds n doubles. */
static void learn(const double *lc, const size_t *which, size_t n, int T,
		  double *buf, struct ratios *r)
{
	for (int t = 0; t < T; t++) {
		for (int u = 0; u < T; u++) {
			size_t k = 0;

			r->count[t][u] = 0;
			r->log_ratio[t][u] = 0.0;
			if (t == u)
				continue;
			for (size_t x = 0; x < n; x++) {
				const double *l = &lc[which[x] * (size_t)T];

				if (isfinite(l[t]) && isfinite(l[u]))
					buf[k++] = l[t] - l[u];
			}
			if (k == 0)
				continue;
			qsort(buf, k, sizeof(*buf), cmp_double);
			r->log_ratio[t][u] = k % 2 ? buf[k / 2] :
					     0.5 * (buf[k / 2 - 1] + buf[k / 2]);
			r->count[t][u] = (int)k;
		}
	}
}

static int cmp_app(const void *a, const void *b)
{
	const struct by_app *x = a, *y = b;
	int c = strcmp(x->app, y->app);

	if (c != 0)
		return c;
	return (x->i > y->i) - (x->i < y->i);
}

/* Job i's estimates on the types it lacks. */
static void estimate_job(const copus_model *const *known, const double *lc,
			 size_t i, int T, const struct ratios *app,
			 const struct ratios *all,
			 const struct copus_type_ratios *mem,
			 const double *speeds, copus_model *est,
			 bool *estimated)
{
	const copus_model *const *k = &known[i * (size_t)T];
	const double *l = &lc[i * (size_t)T];

	for (int t = 0; t < T; t++) {
		int best = -1, level = 0, count = 0;
		double log_ratio = 0.0;

		if (k[t] != NULL)
			continue;
		for (int u = 0; u < T; u++) {
			int lv = 0, n = 0;
			double lr = 0.0;

			if (k[u] == NULL || !isfinite(l[u]))
				continue;
			if (app != NULL && app->count[t][u] > 0) {
				lv = 4;
				n = app->count[t][u];
				lr = app->log_ratio[t][u];
			} else if (speeds != NULL && speeds[t] > 0.0 &&
				   speeds[u] > 0.0 && isfinite(speeds[t]) &&
				   isfinite(speeds[u])) {
				lv = 3;
				lr = log(speeds[u] / speeds[t]);
			} else if (all->count[t][u] > 0) {
				lv = 2;
				n = all->count[t][u];
				lr = all->log_ratio[t][u];
			} else if (mem != NULL && mem->count[t][u] > 0 &&
				   isfinite(mem->log_ratio[t][u])) {
				lv = 1;
				n = mem->count[t][u];
				lr = mem->log_ratio[t][u];
			}
			if (lv > level || (lv == level && lv > 0 && n > count)) {
				best = u;
				level = lv;
				count = n;
				log_ratio = lr;
			}
		}
		if (best < 0 ||
		    copus_model_bootstrap(k[best], 1.0, exp(log_ratio),
					  &est[i * (size_t)T + t]) != COPUS_OK)
			continue;
		estimated[i * (size_t)T + t] = true;
	}
}

int copus_models_estimate(const copus_model *const *known, size_t njobs,
			  int ntypes, const char *const *apps,
			  const double *speeds, copus_model *est,
			  bool *estimated)
{
	return copus_models_estimate_mem(known, njobs, ntypes, apps, speeds,
					 NULL, est, estimated);
}

int copus_models_estimate_mem(const copus_model *const *known, size_t njobs,
			      int ntypes, const char *const *apps,
			      const double *speeds,
			      struct copus_type_ratios *mem,
			      copus_model *est, bool *estimated)
{
	size_t N, *which = NULL;
	double *lc = NULL, *buf = NULL;
	struct ratios *all = NULL, *app = NULL;
	struct by_app *order = NULL;
	int T = ntypes, rc = COPUS_ENOMEM;

	if ((known == NULL || est == NULL || estimated == NULL) && njobs > 0)
		return COPUS_EINVAL;
	if (T < 1 || T > COPUS_ESTIMATE_MAX_TYPES)
		return COPUS_EINVAL;
	N = njobs * (size_t)T;
	if (njobs == 0)
		return COPUS_OK;
	memset(estimated, 0, N * sizeof(*estimated));
	if (T == 1)
		return COPUS_OK;
	lc = malloc(N * sizeof(*lc));
	buf = malloc(njobs * sizeof(*buf));
	which = malloc(njobs * sizeof(*which));
	order = malloc(njobs * sizeof(*order));
	all = malloc(sizeof(*all));
	app = malloc(sizeof(*app));
	if (!lc || !buf || !which || !order || !all || !app)
		goto out;
	for (size_t x = 0; x < N; x++) {
		double c = known[x] != NULL &&
			   copus_model_check(known[x]) == COPUS_OK ?
			   compute_time(known[x]) : 0.0;

		lc[x] = c > 0.0 && isfinite(c) ? log(c) : NAN;
	}
	for (size_t i = 0; i < njobs; i++) {
		which[i] = i;
		order[i].app = apps != NULL && apps[i] != NULL ? apps[i] : "";
		order[i].i = i;
	}
	learn(lc, which, njobs, T, buf, all);
	/* What this round's jobs show replaces what was remembered. */
	for (int t = 0; mem != NULL && t < T; t++)
		for (int u = 0; u < T; u++)
			if (all->count[t][u] > 0) {
				mem->log_ratio[t][u] = all->log_ratio[t][u];
				mem->count[t][u] = all->count[t][u];
			}
	qsort(order, njobs, sizeof(*order), cmp_app);
	for (size_t a = 0, b; a < njobs; a = b) {
		size_t n = 0;

		for (b = a; b < njobs && !strcmp(order[b].app, order[a].app);
		     b++)
			which[n++] = order[b].i;
		if (order[a].app[0] != '\0')
			learn(lc, which, n, T, buf, app);
		for (size_t x = 0; x < n; x++)
			estimate_job(known, lc, which[x], T,
				     order[a].app[0] != '\0' ? app : NULL, all,
				     mem, speeds, est, estimated);
	}
	rc = COPUS_OK;
out:
	free(app);
	free(all);
	free(order);
	free(which);
	free(buf);
	free(lc);
	return rc;
}
