/* Memoised speedup of a job over its allocation shapes. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include <copus/model.h>

#include "internal.h"

struct copus_speedup {
	copus_model model;
	int max_nodes;
	int max_replicas;
	int base_nodes;
	int base_replicas;
	double base_goodput;
	/*
	 * NAN = unknown. (max_nodes + 1) x (max_replicas + 1); or, packed
	 * (node_gpus > 0), max_replicas + 1: replicas on the fewest nodes of
	 * node_gpus GPUs, the only shapes a policy that packs asks for (the
	 * others are computed each time).
	 */
	double *memo;
	int node_gpus;
};

/*
 * Pollux's gain, as core/model.c computes it (gain()), operation for
 * operation: copus__speedup_goodput's values must be its bit for bit.
 */
static inline double gain_of(const copus_grad_stats *g, double scale)
{
	double denom = g->var / scale + g->sqr;

	if (denom <= 0.0)
		return 1.0;
	return (g->var + g->sqr) / denom;
}

/* ceil(x), without a call for the values the candidates take. */
static inline double ceil_of(double x)
{
	if (!(fabs(x) < 4503599627370496.0)) /* 2^52: integral already */
		return ceil(x);
	double t = (double)(long long)x;
	return t < x ? t + 1.0 : t;
}

/*
 * The goodput of copus__best_batch(m, nodes, replicas) (that of its best
 * candidate, bit for bit) in *out, with fewer candidates computed: the
 * same candidates, found in the same way. Without a sync term (one
 * replica) a candidate's goodput is computed here as goodput() computes
 * it (its overlap is its gradient time). Otherwise a candidate is priced
 * (copus__goodput, whose overlap costs two pow()) only when a bound on
 * its goodput exceeds the best priced so far: its step takes a T_grad +
 * overlap(T_grad, T_sync) >= a T_grad + max(T_grad, T_sync) (in floating
 * point too: overlap is max x pow(1 + r^gamma, 1 / gamma), a power >= 1),
 * so its throughput is at most the batch over that, and its efficiency is
 * exact; the candidate of the largest bound is priced first. Either way
 * the candidates stop where no later one can beat the best (tp_max
 * below). Returns as copus__best_batch (COPUS_ERANGE: no candidate).
 */
int copus__speedup_goodput(const copus_model *m, int nodes, int replicas,
			   double *out)
{
	const copus_batch_limits *l = &m->limits;
	const copus_perf_params *p = &m->perf;
	const double eps = 1e-8;
	double lo = l->init_batch, hi = l->max_batch;
	int micro_of[COPUS_BATCH_CANDIDATES], accum_of[COPUS_BATCH_CANDIDATES];
	double v[COPUS_BATCH_CANDIDATES]; /* goodput, or a bound on it */
	int nc = 0, first = -1;

	if ((double)replicas * l->min_local > lo)
		lo = (double)replicas * l->min_local;
	if (lo > hi * (1.0 + eps))
		return COPUS_ERANGE;
	if (lo > hi)
		lo = hi;
	double sync = copus__sync_time(p, nodes, replicas);
	bool exact = sync <= 0.0;
	/* Outside the bound's premises, every candidate priced. */
	bool bounded = !exact && isfinite(sync) && p->gamma >= 1.0 &&
		       isfinite(p->gamma);
	int n = COPUS_BATCH_CANDIDATES, last_micro = -1, last_accum = -1;
	double ratio = n > 1 ? pow(hi / lo, 1.0 / (n - 1)) : 1.0;
	double batch = lo;
	/*
	 * Without a sync term a candidate's throughput is replicas x micro /
	 * T_grad(micro), at most tp_max (at the largest micro-batch), and
	 * its efficiency falls as its batch grows (at least its target,
	 * which grows from one candidate to the next): once tp_max times
	 * the efficiency at a target cannot exceed the best goodput, no
	 * later candidate can, and the search stops.
	 */
	double tp_max = (double)replicas * l->max_local /
			(p->alpha_c + p->beta_c * l->max_local);
	double best_so_far = 0.0;
	bool falling = false;
	/* With a sync term the same holds (the step is at least (a + 1)
	 * T_grad), against the goodput of a candidate priced on the way:
	 * that of the largest bound so far, once the bounds fall. */
	double gp_of[COPUS_BATCH_CANDIDATES];
	int priced = -1;
	for (int i = 0; i < n; i++, batch *= ratio) {
		if (i == n - 1)
			batch = hi; /* land exactly on the limit */
		if (bounded && falling && priced != first) {
			gp_of[first] = copus__goodput(m, nodes, replicas,
						      micro_of[first],
						      accum_of[first], NULL,
						      NULL);
			priced = first;
			if (isnan(gp_of[first]))
				bounded = false; /* as copus__best_batch */
			else
				best_so_far = fmax(best_so_far, gp_of[first]);
		}
		if ((exact || bounded) && falling) {
			double lo_scale = (batch * (1.0 - 1e-6) - 1.0) /
					  l->init_batch;
			if (lo_scale > 0.0 &&
			    tp_max * (gain_of(&m->grad, lo_scale) / lo_scale) *
					    (1.0 + 1e-8) <=
				    best_so_far)
				break;
		}
		double local = batch / replicas;
		int accum = 0;
		if (l->accumulation) {
			accum = (int)ceil_of(local / l->max_local - eps) - 1;
			if (replicas == 1 && local > l->init_batch + eps &&
			    accum < 1)
				accum = 1;
			if (accum < 0)
				accum = 0;
		}
		int micro = (int)ceil_of(local / (accum + 1) - eps);
		if (micro < l->min_local || micro > l->max_local)
			continue;
		if (micro == last_micro && accum == last_accum)
			continue;
		last_micro = micro;
		last_accum = accum;
		micro_of[nc] = micro;
		accum_of[nc] = accum;
		if (exact || bounded) {
			/* As goodput() computes them. */
			double grad = p->alpha_c + p->beta_c * micro;
			double iter = exact ? accum * grad + grad
					    : accum * grad + fmax(grad, sync);
			double b = (double)replicas * micro * (accum + 1);
			double tput = b / iter;
			double scale = b / l->init_batch;
			double eff = gain_of(&m->grad, scale) / scale;
			v[nc] = tput * eff;
			if (bounded && (!(grad > 0.0) || !isfinite(v[nc]) ||
					!(v[nc] >= 0.0)))
				bounded = false;
			else if (first < 0 || v[nc] > v[first])
				first = nc;
			if (exact) {
				falling = nc > 0 && v[nc] < best_so_far;
				if (nc == 0 || v[nc] > best_so_far)
					best_so_far = v[nc];
			} else if (bounded) {
				falling = v[nc] < v[first];
			}
		}
		nc++;
		if (lo == hi)
			break;
	}
	if (nc == 0)
		return COPUS_ERANGE;
	double best = 0.0;
	if (exact || !bounded) {
		/* As copus__best_batch keeps its best: the first, then any
		 * larger. */
		for (int i = 0; i < nc; i++) {
			double gp = exact ? v[i]
					  : copus__goodput(m, nodes, replicas,
							   micro_of[i],
							   accum_of[i], NULL,
							   NULL);
			if (i == 0 || gp > best)
				best = gp;
		}
		*out = best;
		return COPUS_OK;
	}
	best = priced == first ? gp_of[first]
			       : copus__goodput(m, nodes, replicas,
						micro_of[first],
						accum_of[first], NULL, NULL);
	if (isnan(best)) {
		copus_batch_plan plan;
		int rc = copus__best_batch(m, nodes, replicas, &plan);
		*out = plan.goodput;
		return rc;
	}
	for (int i = 0; i < nc; i++) {
		if (i == first || !(v[i] > best))
			continue;
		double gp = i == priced ? gp_of[i]
					: copus__goodput(m, nodes, replicas,
							 micro_of[i],
							 accum_of[i], NULL,
							 NULL);
		if (gp > best)
			best = gp;
	}
	*out = best;
	return COPUS_OK;
}

static size_t memo_size(const copus_speedup *s)
{
	if (s->node_gpus > 0)
		return (size_t)(s->max_replicas + 1);
	return (size_t)(s->max_nodes + 1) * (size_t)(s->max_replicas + 1);
}

/* The memo's slot of a shape (checked by the caller), or NULL. */
static double *memo_slot(const copus_speedup *s, int nodes, int replicas)
{
	if (s->node_gpus <= 0)
		return &s->memo[(size_t)nodes * (s->max_replicas + 1) +
				replicas];
	if (nodes != (replicas + s->node_gpus - 1) / s->node_gpus)
		return NULL;
	return &s->memo[replicas];
}

int copus_speedup_reset(copus_speedup *s, const copus_model *m)
{
	double gp;
	int rc;

	if (s == NULL)
		return COPUS_EINVAL;
	if ((rc = copus_model_check(m)) != COPUS_OK)
		return rc;
	rc = copus__speedup_goodput(m, s->base_nodes, s->base_replicas, &gp);
	if (rc != COPUS_OK)
		return rc;
	if (!(gp > 0.0) || !isfinite(gp))
		return COPUS_ERANGE;
	s->model = *m;
	s->base_goodput = gp;
	for (size_t i = 0; i < memo_size(s); i++)
		s->memo[i] = NAN;
	s->memo[0] = 0.0;
	/* The base shape's speedup is its goodput over itself. */
	double *base = memo_slot(s, s->base_nodes, s->base_replicas);
	if (base != NULL)
		*base = gp / s->base_goodput;
	return COPUS_OK;
}

/* copus_speedup_create, packed when node_gpus > 0 (see struct
 * copus_speedup). */
static int create(const copus_model *m, int max_nodes, int max_replicas,
		  int base_nodes, int base_replicas, int node_gpus,
		  copus_speedup **out)
{
	copus_speedup *s;
	int rc;

	if (out == NULL || max_nodes < 1 || max_replicas < max_nodes ||
	    base_nodes > max_nodes || base_replicas > max_replicas)
		return COPUS_EINVAL;
	/* A table of more than 2^28 entries is a caller's mistake. */
	if ((double)(max_nodes + 1) * (max_replicas + 1) > (double)(1 << 28))
		return COPUS_ERANGE;
	if ((rc = copus__shape_check(base_nodes, base_replicas)) != COPUS_OK)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return COPUS_ENOMEM;
	s->max_nodes = max_nodes;
	s->max_replicas = max_replicas;
	s->base_nodes = base_nodes;
	s->base_replicas = base_replicas;
	s->node_gpus = node_gpus;
	s->memo = malloc(memo_size(s) * sizeof(double));
	if (s->memo == NULL) {
		free(s);
		return COPUS_ENOMEM;
	}
	rc = copus_speedup_reset(s, m);
	if (rc != COPUS_OK) {
		copus_speedup_destroy(s);
		return rc;
	}
	*out = s;
	return COPUS_OK;
}

int copus_speedup_create(const copus_model *m, int max_nodes, int max_replicas,
			 int base_nodes, int base_replicas,
			 copus_speedup **out)
{
	return create(m, max_nodes, max_replicas, base_nodes, base_replicas, 0,
		      out);
}

int copus__speedup_create_packed(const copus_model *m, int node_gpus,
				 int max_replicas, copus_speedup **out)
{
	if (node_gpus < 1 || max_replicas < 1)
		return COPUS_EINVAL;
	return create(m, (max_replicas + node_gpus - 1) / node_gpus,
		      max_replicas, 1, 1, node_gpus, out);
}

double copus__speedup_base(const copus_speedup *s)
{
	return s->base_goodput;
}

/* The efficiency of a scale of at least scale (it falls as it grows). */
static double eff_at_least(const copus_grad_stats *g, double scale)
{
	return g->var + g->sqr > 0.0 ? (g->var + g->sqr) /
					       (g->var + g->sqr * scale)
				     : 1.0 / scale;
}

/*
 * Every candidate of best_batch on (nodes, replicas) has a micro-batch m
 * <= max_local and a total batch of at least lo; with a >= 1 accumulation
 * steps, its local batch exceeds a max_local (or, on one GPU, M0). Its step
 * takes at least a T_grad + max(T_grad, T_sync) (the overlap is at least
 * the larger term), so its throughput is at most r m (a + 1) / (a T_grad(m)
 * + max(T_grad(m), T_sync)), which grows with m; its efficiency (var + sqr)
 * / (var + sqr scale) falls with the scale. The bound is the largest, over
 * the steps a it may take, of both at their extremes.
 */
double copus__speedup_bound(const copus_speedup *s, int nodes, int replicas,
			    bool *known)
{
	const copus_model *m = &s->model;
	const copus_batch_limits *l = &m->limits;

	*known = true;
	if (nodes <= 0 || replicas < nodes || nodes > s->max_nodes ||
	    replicas > s->max_replicas)
		return 0.0; /* copus_speedup_get refuses it: 0 */
	const double *slot = memo_slot(s, nodes, replicas);
	if (slot != NULL && !isnan(*slot))
		return *slot;
	*known = false;
	double r = replicas, M = l->max_local;
	double lo = fmin(fmax(l->init_batch, r * l->min_local), l->max_batch);
	int A = l->accumulation ?
		(int)ceil(l->max_batch / (r * M)) + 1 : 0;
	double grad = m->perf.alpha_c + m->perf.beta_c * M;
	double sync = copus__sync_time(&m->perf, nodes, replicas);
	double best = 0.0;
	for (int a = 0; a <= A; a++) {
		double tput = r * M * (a + 1.0) /
			      (a * grad + fmax(grad, sync));
		double least = a >= 2 ? fmax(lo, r * a * M) : lo;
		double eff = eff_at_least(&m->grad, least / l->init_batch *
							    (1.0 - 1e-6));
		best = fmax(best, tput * eff);
	}
	return best / s->base_goodput * (1.0 + 1e-6);
}

void copus_speedup_destroy(copus_speedup *s)
{
	if (s == NULL)
		return;
	free(s->memo);
	free(s);
}

int copus_speedup_get(copus_speedup *s, int nodes, int replicas, double *out)
{
	if (s == NULL || out == NULL || nodes < 0 || replicas < nodes ||
	    nodes > s->max_nodes || replicas > s->max_replicas ||
	    (nodes == 0 && replicas != 0))
		return COPUS_EINVAL;
	double *slot = memo_slot(s, nodes, replicas), v;
	if (slot != NULL && !isnan(*slot)) {
		*out = *slot;
		return COPUS_OK;
	}
	double gp;
	if (copus__speedup_goodput(&s->model, nodes, replicas, &gp) ==
	    COPUS_OK)
		v = gp / s->base_goodput;
	else
		v = 0.0;
	if (slot != NULL)
		*slot = v;
	*out = v;
	return COPUS_OK;
}
