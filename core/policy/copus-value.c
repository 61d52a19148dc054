/*
 * The copus policy (core/policy/copus.c): what a cell is worth to each job,
 * from its goodput model or its table of cells, its remaining work and its
 * waiting; the speedup tables kept between rounds.
 */
#define _GNU_SOURCE /* qsort_r */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "../heap.h"
#include "../internal.h"
#include "copus-work.h"
#include "copus.h"
#include "ops.h"
#include "place.h"

/*
 * How strongly remaining work orders the jobs up to their requests (see
 * core/policy/copus.c). With 1 the weights follow the completion rate 1 / R and the
 * shortest job takes everything it can use; with 0 there is no SRPT. The
 * value 0.5 and the choice of leaving growth beyond the request unweighted
 * come from runs of copus-sim on Pollux's workloads; the issue notes give
 * the sweep.
 */
#define SRPT_EXPONENT 0.5

/* A reallocation must pay for itself within this many rounds. */
#define HORIZON_ROUNDS 10.0
/* Estimated finish-time fairness, over the other jobs' mean, beyond which
 * a job's weight grows. */
#define FTF_GUARD 2.0
/*
 * Speedups count as S^g under contention (copus.c, "Scarcity"), g =
 * SPREAD_FROM x GPUs / GPUs requested within [SPREAD_FLOOR, 1]: from twice
 * as many GPUs requested as there are, down to the square root (Sia's
 * p = -0.5 applied to speedups) at four times.
 */
#define SPREAD_FROM 2.0
#define SPREAD_FLOOR 0.5

/* The first slot of (id, type) in the index; nslots is a power of two. */
static size_t sp_home(const struct copus_state *s, uint64_t id, int type)
{
	uint64_t h = (id * COPUS_MAX_GPU_TYPES + (uint64_t)type) *
		     0x9e3779b97f4a7c15ull;

	return (size_t)(h ^ (h >> 32)) & (s->nslots - 1);
}

/* Enters entry i in the index, which has room for it. */
static void sp_slot_add(struct copus_state *s, size_t i)
{
	size_t k = sp_home(s, s->e[i].id, s->e[i].type);

	while (s->slot[k] != 0)
		k = (k + 1) & (s->nslots - 1);
	s->slot[k] = i + 1;
}

/* Builds the index anew with at least want slots; COPUS_ENOMEM. */
static int sp_reindex(struct copus_state *s, size_t want)
{
	size_t nslots = 64, *slot;

	while (nslots < want)
		nslots *= 2;
	if (nslots != s->nslots) {
		slot = calloc(nslots, sizeof(*slot));
		if (slot == NULL)
			return COPUS_ENOMEM;
		free(s->slot);
		s->slot = slot;
		s->nslots = nslots;
	} else {
		memset(s->slot, 0, nslots * sizeof(*s->slot));
	}
	for (size_t i = 0; i < s->n; i++)
		sp_slot_add(s, i);
	return COPUS_OK;
}

/* The entry of (id, type), or NULL. */
static struct sp_entry *sp_find(const struct copus_state *s, uint64_t id,
				int type)
{
	if (s->nslots == 0)
		return NULL;
	for (size_t k = sp_home(s, id, type); s->slot[k] != 0;
	     k = (k + 1) & (s->nslots - 1)) {
		struct sp_entry *e = &s->e[s->slot[k] - 1];
		if (e->id == id && e->type == type)
			return e;
	}
	return NULL;
}

/*
 * The speedup table of (id, type), created or refreshed for the model, on
 * nodes of node_gpus GPUs. Its base is one GPU, so its base goodput is the
 * model's goodput on one GPU (g1).
 */
static struct sp_entry *sp_get(struct copus_state *s, uint64_t id, int type,
			       const copus_model *m, int node_gpus,
			       int max_gpus)
{
	struct sp_entry *e = sp_find(s, id, type);

	if (e == NULL) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			struct sp_entry *g = realloc(s->e, cap * sizeof(*g));
			if (g == NULL)
				return NULL;
			s->e = g;
			s->cap = cap;
		}
		if (2 * (s->n + 1) > s->nslots &&
		    sp_reindex(s, 4 * (s->n + 1)) != COPUS_OK)
			return NULL;
		e = &s->e[s->n++];
		memset(e, 0, sizeof(*e));
		e->id = id;
		e->type = type;
		sp_slot_add(s, s->n - 1);
	}
	e->used = true;
	if (e->sp != NULL &&
	    (e->node_gpus != node_gpus || e->max_gpus < max_gpus)) {
		copus_speedup_destroy(e->sp);
		e->sp = NULL;
	}
	if (e->sp == NULL) {
		if (copus__speedup_create_packed(m, node_gpus, max_gpus,
						 &e->sp) != COPUS_OK) {
			e->sp = NULL;
			return NULL;
		}
		e->model = *m;
		e->node_gpus = node_gpus;
		e->max_gpus = max_gpus;
		e->g1 = copus__speedup_base(e->sp);
	} else if (!copus__model_same(&e->model, m)) {
		if (copus_speedup_reset(e->sp, m) != COPUS_OK)
			return NULL;
		e->model = *m;
		e->g1 = copus__speedup_base(e->sp);
	}
	return e;
}

/* Drop the tables of jobs that were not seen this round. */
void copus__cp_sp_sweep(struct copus_state *s)
{
	size_t w = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (!s->e[i].used) {
			copus_speedup_destroy(s->e[i].sp);
			continue;
		}
		s->e[i].used = false;
		s->e[w++] = s->e[i];
	}
	s->n = w;
	/* The entries moved: the index is built again, in place. */
	if (s->nslots > 0)
		sp_reindex(s, s->nslots);
}

static const copus_model *model_for(const copus_job *j, int t, int ntypes)
{
	if (j->models == NULL)
		return NULL;
	if (j->models[t] != NULL)
		return j->models[t];
	/* Nothing learned on this type yet: another type's model is the
	 * best guess of how the job scales. */
	for (int u = 0; u < ntypes; u++)
		if (j->models[u] != NULL)
			return j->models[u];
	return NULL;
}

/*
 * Gives each of the n jobs w its arrays by GPU type, T entries each, in sp
 * and rel (n x T entries; sp zeroed).
 */
void copus__cp_bind_types(struct jw *w, size_t n, int T, copus_speedup **sp,
			  double *rel)
{
	for (size_t j = 0; j < n; j++) {
		w[j].sp = sp + j * (size_t)T;
		w[j].rel = rel + j * (size_t)T;
	}
}

/* Does the policy know how job w scales on type t (a model or cells)? */
bool copus__cp_known(const struct jw *w, int t)
{
	return w->cs != NULL ? (w->has_cells >> t & 1u) != 0 : w->sp[t] != NULL;
}

/* Speedup of k GPUs of type t (packed on the fewest nodes). */
double copus__cp_speedup(const struct jw *w, int t, int k, const int *node_gpus)
{
	double v = 0.0;

	if (k <= 0)
		return 0.0;
	/* Only whole replicas of a model split over several GPUs. */
	if (w->job->granularity > 1 && k % w->job->granularity != 0)
		return 0.0;
	if (w->cs != NULL)
		return k <= w->cs_kmax ? w->cs[t * (w->cs_kmax + 1) + k] : 0.0;
	if (w->sp[t] == NULL)
		return k * w->rel[t]; /* no model: linear up to the request */
	int nodes = (k + node_gpus[t] - 1) / node_gpus[t];
	if (copus_speedup_get(w->sp[t], nodes, k, &v) != COPUS_OK)
		return 0.0;
	return v * w->rel[t];
}

/*
 * At least copus__cp_speedup(w, t, k), without filling its table; *known
 * when that is the speedup itself (as cheap as the bound).
 */
static double speedup_bound(const struct jw *w, int t, int k,
			    const int *node_gpus, bool *known)
{
	*known = true;
	if (k <= 0 || w->cs != NULL || w->sp[t] == NULL ||
	    (w->job->granularity > 1 && k % w->job->granularity != 0))
		return copus__cp_speedup(w, t, k, node_gpus);
	int nodes = (k + node_gpus[t] - 1) / node_gpus[t];
	double v = copus__speedup_bound(w->sp[t], nodes, k, known);
	return *known ? v * w->rel[t] : v * w->rel[t] * (1.0 + 1e-9);
}

/*
 * At least copus__cp_value(w, t, k, ...), without filling the job's
 * speedup table; INFINITY when the table knows what the value needs, as
 * the value then costs no more than this. With S <= B, S_q <= B_q and a
 * weight w: w S_q^g + S^g - S_q^g <= max(w - 1, 0) B_q^g + B^g, and a
 * restart keeps at most all of it.
 */
double copus__cp_value_bound(const struct jw *w, int t, int k,
			     const int *node_gpus,
			     const copus_policy_params *prm)
{
	bool known, known_q = true;
	double s = speedup_bound(w, t, k, node_gpus, &known), sq = 0.0;

	if (k > w->q)
		sq = speedup_bound(w, t, w->q, node_gpus, &known_q);
	if ((known && known_q) || prm->restart_delay < 0.0)
		return INFINITY;
	if (k <= 0 || !(s > 0.0))
		return 0.0;
	double g = w->spread > 0.0 ? w->spread : 1.0;
	double v = k > w->q
			   ? fmax(w->weight - 1.0, 0.0) * pow(sq, g) + pow(s, g)
			   : pow(s, g) * w->weight;
	return v * w->boost * (1.0 + 1e-9);
}

/*
 * What is left of a job's value on an allocation of speedup s after the
 * restart a move costs: 1 - delay / H, H the time it would run there before
 * it ends or before the planning horizon; and at most Pollux's restart
 * factor, the share of the job's life so far that was not spent restarting
 * had it restarted once more, so that a job moved often is moved less.
 */
double copus__cp_restart_factor(const struct jw *w, double s,
				const copus_policy_params *prm,
				const struct copus__copus_opts *o)
{
	if (o->no_restart_cost)
		return 1.0;
	double H = w->R / s;
	double cap = HORIZON_ROUNDS * prm->interval;
	if (H > cap)
		H = cap;
	double rho = H > 0.0 ? 1.0 - prm->restart_delay / H : 0.0;
	if (w->life < rho)
		rho = w->life;
	return rho > 0.0 ? rho : 0.0;
}

/* The value of job j on (t, k) (see copus.c), discounted for a move. */
double copus__cp_value(const struct jw *w, int t, int k, const int *node_gpus,
		       const copus_policy_params *prm,
		       const struct copus__copus_opts *o)
{
	double s = copus__cp_speedup(w, t, k, node_gpus);

	if (k <= 0 || s <= 0.0)
		return 0.0;
	double g = w->spread > 0.0 ? w->spread : 1.0;
	double sg = pow(s, g), v = sg * w->weight;
	if (k > w->q) {
		double sq = pow(copus__cp_speedup(w, t, w->q, node_gpus), g);
		v = sq * w->weight + (sg - sq);
	}
	if (w->cur_k > 0 && (t != w->cur_t || k != w->cur_k))
		v *= copus__cp_restart_factor(w, s, prm, o);
	return v * w->boost;
}

/* The most GPUs the job may get this round. */
int copus__cp_growth_cap(const copus_job *j)
{
	if (!j->elastic)
		return j->req_gpus;
	if (j->num_cells > 0)
		return j->max_gpus; /* its scaling is known: nothing to explore */
	int cap = 2 * j->max_gpus_had;
	if (cap < j->req_gpus)
		cap = j->req_gpus;
	if (cap < j->min_gpus)
		cap = j->min_gpus;
	return cap < j->max_gpus ? cap : j->max_gpus;
}

/*
 * The job's request within its elastic bounds. An elastic job with cells
 * is known at every size it fits, so its request says nothing its table
 * does not: its weight covers its whole speedup.
 */
int copus__cp_request(const copus_job *j)
{
	int q = j->num_cells > 0 && j->elastic ? j->max_gpus : j->req_gpus;

	if (j->elastic && q < j->min_gpus)
		q = j->min_gpus;
	if (j->elastic && q > j->max_gpus)
		q = j->max_gpus;
	return q;
}

/*
 * The size of an elastic job whose scaling is not known yet (no model on
 * any type): as with Pollux's exploration, its minimum at first, then at
 * most twice the most GPUs it has run on, never beyond its request nor
 * below what it holds. With a model, or rigid, its request.
 */
static int unknown_size(const struct jw *x, int T)
{
	const copus_job *j = x->job;
	int q = x->q;

	for (int t = 0; t < T; t++)
		if (copus__cp_known(x, t))
			return q;
	if (!j->elastic)
		return q;
	int k = j->max_gpus_had > 0 ? 2 * j->max_gpus_had : j->min_gpus;
	if (j->granularity > 1)
		k -= k % j->granularity;
	if (k < j->min_gpus)
		k = j->min_gpus;
	if (k > q)
		k = q;
	return x->cur_k > k ? x->cur_k : k;
}

/* The smallest size a job runs at: its fixed size without a model
 * (copus__cp_base_need, once its request is final). */
static int base_need(const struct jw *x, int T)
{
	const copus_job *j = x->job;

	for (int t = 0; j->elastic && t < T; t++)
		if (copus__cp_known(x, t))
			return j->min_gpus;
	return x->q;
}

/* The one GPU type job x can use, or -1 when it has a choice (or none). */
int copus__cp_only_type(const struct jw *x, int T, const int *node_gpus)
{
	int only = -1;

	for (int t = 0; t < T; t++) {
		if (!copus__type_allowed(x->job, t) || node_gpus[t] <= 0)
			continue;
		if (only >= 0)
			return -1;
		only = t;
	}
	return only;
}

/* Usable GPUs per type and the largest node of each type. */
void copus__cp_cluster_caps(const copus_cluster *c, int *node_gpus, int *cap)
{
	for (int k = 0; k < c->num_nodes; k++) {
		const copus_node *nd = &c->nodes[k];
		if (!nd->usable)
			continue;
		cap[nd->gpu_type] += nd->gpus;
		if (nd->gpus > node_gpus[nd->gpu_type])
			node_gpus[nd->gpu_type] = nd->gpus;
	}
}

/*
 * The speedup table of a job with cells. Its unit is one GPU at the job's
 * best GPU-seconds per iteration over all its cells (its most efficient
 * cell), so that S(t, k) = that / seconds(t, k) <= k counts, across types
 * and sizes, what a cell gives the job in the same currency as the models'
 * tables. The policy packs k GPUs on the fewest nodes, so the cell of
 * that many nodes is the one that counts: a size that fits the job only
 * spread wider is not offered. Returns the unit (GPU-seconds per iteration),
 * 0 when no cell of the job fits the cluster, or -1 without memory.
 */
static double cells_prepare(struct jw *x, const copus_job *jb, int T,
			    const int *node_gpus)
{
	double base = INFINITY;
	int K = 0;

	for (int i = 0; i < jb->num_cells; i++) {
		const copus_cell_time *ct = &jb->cells[i];
		int t = ct->gpu_type;
		if (!copus__type_allowed(jb, t) || node_gpus[t] <= 0 ||
		    ct->gpus / ct->nodes > node_gpus[t])
			continue;
		if (ct->gpus > K)
			K = ct->gpus;
		base = fmin(base, ct->seconds * ct->gpus);
	}
	x->cs_kmax = K;
	x->cs = calloc((size_t)T * (size_t)(K + 1), sizeof(double));
	if (x->cs == NULL)
		return -1.0;
	if (K == 0)
		return 0.0;
	for (int i = 0; i < jb->num_cells; i++) {
		const copus_cell_time *ct = &jb->cells[i];
		int t = ct->gpu_type, g = ct->gpus;
		if (!copus__type_allowed(jb, t) || node_gpus[t] <= 0 ||
		    g / ct->nodes > node_gpus[t] ||
		    ct->nodes != (g + node_gpus[t] - 1) / node_gpus[t])
			continue;
		size_t at = (size_t)t * (size_t)(K + 1) + (size_t)g;
		x->cs[at] = fmax(x->cs[at], base / ct->seconds);
	}
	for (int t = 0; t < T; t++)
		for (int k = 1; k <= K; k++)
			if (x->cs[t * (K + 1) + k] > 0.0)
				x->has_cells |= 1u << t;
	return base;
}

/* The best speedup of a job with cells, on any of its cells. */
static double cells_best(const struct jw *x, int T)
{
	double best = 0.0;

	for (int i = 0; i < T * (x->cs_kmax + 1); i++)
		best = fmax(best, x->cs[i]);
	return best;
}

/*
 * The type a job with cells counts its request on: where its request goes
 * fastest, else where it goes fastest at all; -1 when no cell fits. Not
 * where it runs now: a move must not change what its work is worth, or the
 * next round moves it back.
 */
static int cells_ref_type(const struct jw *x, const copus_job *jb, int T,
			  const int *node_gpus)
{
	int best_t = -1;
	double best = 0.0;

	for (int t = 0; t < T; t++) {
		double v = copus__cp_speedup(x, t, jb->req_gpus, node_gpus);
		if (v > best) {
			best = v;
			best_t = t;
		}
	}
	for (int t = 0; best_t < 0 && t < T; t++)
		if (x->has_cells >> t & 1u)
			for (int k = 1; k <= x->cs_kmax; k++)
				if (x->cs[t * (x->cs_kmax + 1) + k] > best) {
					best = x->cs[t * (x->cs_kmax + 1) + k];
					best_t = t;
				}
	return best_t;
}

/*
 * The fairness guard: a job whose estimated finish-time fairness is beyond
 * FTF_GUARD times the mean of the other jobs' (at least 1) has its weight
 * raised by the square of the excess. Under contention every job is slowed,
 * and raising them all would only reorder them by how long they have
 * waited; the guard is for the jobs treated worse than the rest. A job
 * that starves still gets there: its own fairness grows without bound
 * while the others' finish.
 */
static void fairness_guard(struct jw *w, size_t n)
{
	double sum = 0.0;

	for (size_t j = 0; j < n; j++)
		sum += w[j].ftf;
	for (size_t j = 0; j < n; j++) {
		double ref = n > 1 ? (sum - w[j].ftf) / (double)(n - 1) : 1.0;
		double g = FTF_GUARD * fmax(ref, 1.0);
		if (w[j].ftf > g)
			w[j].boost *= (w[j].ftf / g) * (w[j].ftf / g);
	}
}

/*
 * A job with no model on any type: its speed on each type is the type's
 * speed from its GPU's constants (c->type_speeds), over the fastest type
 * it may use, so that it starts on the faster GPUs when both are free and
 * counts its work on them. Types of unknown speed count as the fastest.
 * Returns the type its work counts on: the fastest, or ref_t without
 * speeds.
 */
static int prior_speeds(struct jw *x, const copus_cluster *c,
			const int *node_gpus, int ref_t)
{
	double smax = 0.0;
	int best = -1;

	for (int t = 0; c->type_speeds != NULL && t < c->num_types; t++)
		if (copus__type_allowed(x->job, t) && node_gpus[t] > 0 &&
		    c->type_speeds[t] > smax) {
			smax = c->type_speeds[t];
			best = t;
		}
	if (best < 0)
		return ref_t;
	for (int t = 0; t < c->num_types; t++)
		x->rel[t] = c->type_speeds[t] > 0.0
				    ? fmin(c->type_speeds[t] / smax, 1.0)
				    : 1.0;
	return best;
}

/* Remaining work, fairness weight and speedup tables of each job. */
int copus__cp_prepare_jobs(struct copus_state *s,
			   const copus_policy_params *prm,
			   const copus_cluster *c, const copus_job *jobs,
			   size_t n, double now, const int *node_gpus,
			   const int *cap, struct jw *w)
{
	const int T = c->num_types;
	double R_max = 0.0;

	for (size_t j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];
		struct jw *x = &w[j];
		x->job = jb;
		x->t = x->cur_t = -1;
		for (int i = 0; i < jb->alloc_slots; i++)
			x->cur_k += jb->alloc[i].gpus;
		if (x->cur_k > 0)
			x->cur_t = jb->alloc_type;
		int ref_t = x->cur_t;
		double g1[COPUS_MAX_GPU_TYPES] = { 0 };
		double unit = 0.0; /* with cells: GPU-seconds per iteration */
		if (jb->num_cells > 0) {
			unit = cells_prepare(x, jb, T, node_gpus);
			if (unit < 0.0)
				return COPUS_ENOMEM;
			ref_t = cells_ref_type(x, jb, T, node_gpus);
		}
		for (int t = 0; jb->num_cells == 0 && t < T; t++) {
			const copus_model *m = model_for(jb, t, T);
			if (!copus__type_allowed(jb, t) || node_gpus[t] <= 0 ||
			    m == NULL)
				continue;
			/* NaN or out-of-range parameters: as if unknown. */
			if (copus_model_check(m) != COPUS_OK) {
				x->bad_model = true;
				continue;
			}
			int kmax = copus__cp_growth_cap(jb);
			if (kmax < x->cur_k)
				kmax = x->cur_k;
			/* Table entries may move; the tables themselves do not. */
			struct sp_entry *e =
				sp_get(s, jb->id, t, m, node_gpus[t], kmax);
			x->sp[t] = e != NULL ? e->sp : NULL;
			g1[t] = e != NULL ? e->g1 : 0.0;
			if (ref_t < 0 && x->sp[t] != NULL)
				ref_t = t;
		}
		/*
		 * The speedup tables count GPUs of their own type; across
		 * types, one GPU of the job's fastest type is the unit, so
		 * that a slower GPU is worth less to it.
		 */
		double gmax = 0.0;
		for (int t = 0; t < T; t++)
			gmax = fmax(gmax, x->sp[t] != NULL ? g1[t] : 0.0);
		for (int t = 0; t < T; t++)
			x->rel[t] = x->sp[t] != NULL && g1[t] > 0.0
					    ? g1[t] / gmax
					    : 1.0;
		if (gmax == 0.0 && jb->num_cells == 0)
			ref_t = prior_speeds(x, c, node_gpus, ref_t);
		/*
		 * Its work counts in the same unit wherever it runs now (on
		 * its fastest type), so that a move does not change what the
		 * job is worth and the next round does not move it back.
		 */
		for (int t = 0; gmax > 0.0 && t < T; t++)
			if (x->sp[t] != NULL && g1[t] == gmax)
				ref_t = t;
		double req_time =
			jb->req_gpus > 0 ? jb->attained / jb->req_gpus : 0.0;
		x->remain = jb->remaining >= 0.0
				    ? jb->remaining
				    : fmax(req_time, prm->interval);
		if (x->remain < 1.0)
			x->remain = 1.0;
		double s_req =
			ref_t >= 0 ? copus__cp_speedup(x, ref_t, jb->req_gpus,
						       node_gpus)
				   : jb->req_gpus;
		if (!(s_req > 0.0) && x->cs != NULL)
			s_req = cells_best(x, T);
		if (!(s_req > 0.0))
			s_req = 1.0;
		x->R = x->remain * s_req;
		/* Iterations left, with cells: the work itself. */
		if (x->cs != NULL && unit > 0.0 && jb->remaining_iters >= 0.0) {
			x->R = fmax(jb->remaining_iters * unit, 1.0);
			x->remain = fmax(x->R / s_req, 1.0);
		}
		double waited = now - jb->submit_time;
		double ftf = (fmax(waited, 0.0) + x->remain) /
			     (req_time + x->remain);
		x->ftf = ftf;
		x->boost = 1.0;
		if (jb->fairshare > 0.0)
			x->boost *= exp2(s->opt.fairshare *
					 (2.0 * jb->fairshare - 1.0));
		x->q = copus__cp_request(jb);
		double age = fmax(now - jb->submit_time, 0.0);
		x->life = fmax(age - jb->restarts * prm->restart_delay, 0.0) /
			  (age + prm->restart_delay);
		R_max = fmax(R_max, x->R);
	}
	/*
	 * While every job's request fits the cluster, requests are met as
	 * asked; beyond, a job of unknown scaling starts small.
	 */
	long demand = 0, total = 0;
	for (int t = 0; t < T; t++)
		total += cap[t];
	for (size_t j = 0; j < n; j++)
		demand += w[j].q;
	for (size_t j = 0; demand > total && j < n; j++)
		w[j].q = unknown_size(&w[j], T);
	double spread = total > 0 && !s->opt.no_spread
				? fmin(1.0, fmax(SPREAD_FLOOR,
						 SPREAD_FROM * (double)total /
							 (double)demand))
				: 1.0;
	/* A job with a table of cells runs at a fixed batch on the sizes
	 * its memory allows: no size of it is more efficient to spread to. */
	for (size_t j = 0; j < n; j++) {
		w[j].spread = w[j].cs == NULL ? spread : 1.0;
		w[j].base = base_need(&w[j], T);
	}
	if (!s->opt.no_fairness)
		fairness_guard(w, n);
	for (size_t j = 0; j < n; j++)
		w[j].weight = s->opt.no_srpt
				      ? 1.0
				      : pow(w[j].R / R_max, -SRPT_EXPONENT);
	return COPUS_OK;
}

/* Frees what prepare_jobs allocated. */
void copus__cp_release_jobs(struct jw *w, size_t n)
{
	for (size_t j = 0; w != NULL && j < n; j++)
		free(w[j].cs);
}

/*
 * Is k GPUs of type t a size job x may take within one node? An elastic
 * job runs there on a power of two GPUs (in replicas of its granularity),
 * or on its minimum, its request, its maximum or the size it has now. Such
 * sizes tile a node, so the GPUs one job gives back make a whole size for
 * the next (a buddy allocator's argument), and a job resized with what
 * happens to be free this round does not step through every size between
 * (3, then 5, then 6...), each step a restart. Sia's configurations are
 * limited the same way. Sizes of several nodes and the cells of a job with
 * a table of them are not limited here.
 */
bool copus__cp_size_tiles(const struct jw *x, int t, int k,
			  const int *node_gpus)
{
	const copus_job *j = x->job;
	int r = j->granularity > 1 ? j->granularity : 1;

	if (x->cs != NULL || k > node_gpus[t] || k % r != 0 ||
	    ((k / r) & (k / r - 1)) == 0)
		return true;
	return k == j->min_gpus || k == x->q || k == j->max_gpus ||
	       (t == x->cur_t && k == x->cur_k);
}

/* May job x have k GPUs of type t at all (bounds, rigid size, type)? */
bool copus__cp_cell_allowed(const struct jw *x, int t, int k,
			    const int *node_gpus,
			    const struct copus__copus_opts *o)
{
	const copus_job *j = x->job;

	if (k <= 0 || !copus__type_allowed(j, t) || node_gpus[t] <= 0)
		return false;
	/* With cells, only the sizes of a cell that fits; with a
	 * granularity, only its multiples. */
	if ((x->cs != NULL || j->granularity > 1) &&
	    !(copus__cp_speedup(x, t, k, node_gpus) > 0.0))
		return false;
	if (!j->elastic || !copus__cp_known(x, t)) {
		int want = x->q;
		return k == want ||
		       (j->elastic && k == x->cur_k && t == x->cur_t);
	}
	int kmax = copus__cp_growth_cap(j);
	bool cur = k == x->cur_k && t == x->cur_t;
	if (kmax < x->cur_k && t == x->cur_t)
		kmax = x->cur_k;
	if (k < j->min_gpus || k > kmax ||
	    (!o->no_placement && !copus__cp_size_tiles(x, t, k, node_gpus)))
		return false;
	/* Beyond one node, whole nodes (as best_step). */
	return k <= node_gpus[t] || k % node_gpus[t] == 0 || k == x->q ||
	       k == j->max_gpus || cur || o->no_placement;
}

int copus__copus_values(struct copus_state *s, const copus_policy_params *prm,
			const copus_cluster *c, const copus_job *jobs, size_t n,
			double now, int kmax, double *v)
{
	const int T = c->num_types;
	int node_gpus[COPUS_MAX_GPU_TYPES] = { 0 },
	    cap[COPUS_MAX_GPU_TYPES] = { 0 };
	const struct copus__copus_opts *o = &s->opt;
	size_t nt = (n + 1) * (size_t)(T > 0 ? T : 1);
	struct jw *w = calloc(n + 1, sizeof(*w));
	copus_speedup **sp = calloc(nt, sizeof(*sp));
	double *rel = calloc(nt, sizeof(*rel));

	if (w == NULL || sp == NULL || rel == NULL) {
		free(w);
		free(sp);
		free(rel);
		return COPUS_ENOMEM;
	}
	copus__cp_bind_types(w, n + 1, T, sp, rel);
	copus__cp_cluster_caps(c, node_gpus, cap);
	int rc = copus__cp_prepare_jobs(s, prm, c, jobs, n, now, node_gpus, cap,
					w);
	for (size_t j = 0; rc == COPUS_OK && j < n; j++)
		for (int t = 0; t < T; t++)
			for (int k = 0; k <= kmax; k++)
				v[(j * (size_t)T + (size_t)t) *
					  (size_t)(kmax + 1) +
				  (size_t)k] =
					copus__cp_cell_allowed(&w[j], t, k,
							       node_gpus, o)
						? copus__cp_value(&w[j], t, k,
								  node_gpus,
								  prm, o)
						: 0.0;
	copus__cp_release_jobs(w, n);
	free(w);
	free(sp);
	free(rel);
	return rc;
}
