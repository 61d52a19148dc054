/*
 * The co-adaptive policy: every round, GPUs go where they shorten the
 * average job completion time the most.
 *
 * Each job j has a remaining amount of work R_j, measured in seconds of one
 * GPU at the job's base speed: the predicted remaining time on its requested
 * GPUs times its speedup there. S_j(t, k) is its goodput speedup on k GPUs
 * of type t, with the batch size re-optimised for each k. The value of a
 * cell is
 *
 *	V_j(t, k) = w_j S_j(t, min(k, q_j)) + (S_j(t, k) - S_j(t, q_j))^+
 *
 * with q_j the job's request (clamped to its elastic bounds; when the
 * requests exceed the cluster, for an elastic job whose scaling is not
 * known yet, its minimum, then twice what it has run on, as Pollux
 * explores) and
 * w_j = (R_j / R_max)^-SRPT_EXPONENT >= 1, R_max the most work any job of
 * the round has left. Up to its request a job is worth more the less work
 * it has left (shortest remaining work first, as in A-SRPT), and always at
 * least as much as any growth; beyond its request a GPU is worth what it
 * adds to the job's goodput (as in Pollux), whoever owns it. A greedy hands
 * GPUs out by the largest gain in value per GPU, so SRPT decides who runs
 * and the jobs' speedup curves decide how wide: widening a short job past
 * its efficient size would lengthen every long job that finishes after it,
 * and on a busy cluster those long jobs carry most of the average. Three
 * corrections keep the average honest:
 *
 *  - Restart cost: moving a running job costs restart_delay seconds without
 *    progress, so the value of any allocation other than its current one is
 *    scaled by 1 - delay / H, with H the time the job would run on it before
 *    it ends or before the planning horizon (HORIZON_ROUNDS rounds), and at
 *    most by Pollux's restart factor (age - restarts x delay) / (age +
 *    delay): the more of its life a job has spent restarting, the more a
 *    move must be worth.
 *  - Fairness: a job's estimated finish-time fairness (its waiting so far
 *    plus its remaining time, over the time it would need alone on its
 *    request) beyond FTF_GUARD raises its weight quadratically, so long jobs
 *    are delayed but never starved.
 *  - Unknown work: without a prediction, a job is expected to need as much
 *    again as it has received (least attained service first for newcomers).
 *
 * On a small cluster the greedy's cells are then replaced by the exact
 * optimum of the same values under each type's capacity (exact_dp, a
 * multiple-choice knapsack over the GPUs used of each type).
 *
 * Placement follows the chosen sizes: a job that keeps its size and type
 * keeps its GPUs; the others are placed largest first on the fewest nodes
 * (core/policy/place.c), at most one multi-node job per node, never mixing
 * types; an elastic job that does not fit shrinks to what does. When that
 * still leaves a chosen cell out, running elastic jobs may move (same cell,
 * other nodes) to make room, if the room is worth more than their restarts
 * (place_all). GPUs left idle go to waiting jobs (fill_idle).
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
#include "copus.h"
#include "ops.h"
#include "place.h"

/*
 * How strongly remaining work orders the jobs up to their requests (see
 * above). With 1 the weights follow the completion rate 1 / R and the
 * shortest job takes everything it can use; with 0 there is no SRPT. The
 * value 0.5 and the choice of leaving growth beyond the request unweighted
 * come from runs of copus-sim on Pollux's workloads; the issue notes give
 * the sweep.
 */
#define SRPT_EXPONENT 0.5

/* A reallocation must pay for itself within this many rounds. */
#define HORIZON_ROUNDS 10.0
/* Estimated finish-time fairness beyond which a job's weight grows. */
#define FTF_GUARD 2.0

/*
 * Across GPU types, S_j counts in GPUs of the job's fastest type: its
 * speedup table on type t (in GPUs of t) is scaled by its goodput on one
 * GPU of t over that on one GPU of its fastest type. A slower GPU is worth
 * less to a job, and worth least to the jobs it slows down most, so the
 * greedy sends each job where its GPUs count for the most.
 */

/* A job's memoised speedup on one GPU type. */
struct sp_entry {
	uint64_t id;
	int type;
	int max_nodes, max_gpus;
	copus_model model;
	copus_speedup *sp;
	double g1; /* goodput on one GPU of this type */
	bool used;
};

struct copus_state {
	struct copus__copus_opts opt;
	struct sp_entry *e;
	size_t n, cap;
	size_t hint; /* where the last lookup ended: jobs come in order */
};

/* Per-job working data of one round. */
struct jw {
	const copus_job *job;
	copus_speedup *sp[COPUS_MAX_GPU_TYPES]; /* NULL: no model */
	/*
	 * A job with a table of cells (copus_job.cells): its speedup on k
	 * GPUs of type t is cs[t * (cs_kmax + 1) + k], 0 where no cell fits;
	 * has_cells[t] when some cell of type t does. NULL otherwise.
	 */
	double *cs;
	int cs_kmax;
	bool has_cells[COPUS_MAX_GPU_TYPES];
	/* One GPU of type t against one of the job's fastest type. */
	double rel[COPUS_MAX_GPU_TYPES];
	double R;      /* remaining work, base-GPU-seconds */
	double boost;  /* fairness weight */
	double remain; /* remaining seconds on the request (estimated) */
	double weight; /* SRPT weight up to the request */
	double life;   /* Pollux's factor: its life's share left to work */
	int q;         /* the request within the elastic bounds */
	int cur_t, cur_k;
	int t, k;      /* the greedy's choice */
	int best_t, best_k; /* the best start's choice */
	bool bad_model; /* a model was given but is not usable */
};

struct heap_item {
	double score;
	size_t j;
};

/*
 * Parse "no-srpt,no-restart-cost,..." (any subset, comma-separated; empty
 * or NULL for none); COPUS_EINVAL names nothing, so callers report spec.
 */
static int opts_parse(const char *spec, struct copus__copus_opts *o)
{
	static const char *const names[] = { "no-srpt", "no-restart-cost",
					     "no-fairness", "no-placement" };
	bool *flags[] = { &o->no_srpt, &o->no_restart_cost, &o->no_fairness,
			  &o->no_placement };

	memset(o, 0, sizeof(*o));
	while (spec != NULL && *spec != '\0') {
		size_t len = strcspn(spec, ",");
		bool known = false;
		for (int i = 0; i < 4; i++)
			if (strlen(names[i]) == len &&
			    strncmp(spec, names[i], len) == 0) {
				*flags[i] = true;
				known = true;
			}
		if (!known)
			return COPUS_EINVAL;
		spec += len;
		if (*spec == ',')
			spec++;
	}
	return COPUS_OK;
}

int copus__state_create(const struct copus__copus_opts *opt,
			struct copus_state **out)
{
	*out = calloc(1, sizeof(**out));
	if (*out == NULL)
		return COPUS_ENOMEM;
	if (opt != NULL)
		(*out)->opt = *opt;
	return COPUS_OK;
}

void copus__state_destroy(struct copus_state *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++)
		copus_speedup_destroy(s->e[i].sp);
	free(s->e);
	free(s);
}

/* A model's goodput on one GPU (0 when it has none). */
static double goodput_one(const copus_model *m)
{
	copus_batch_plan plan;

	if (copus_best_batch(m, 1, 1, &plan) != COPUS_OK ||
	    !(plan.goodput > 0.0) || !isfinite(plan.goodput))
		return 0.0;
	return plan.goodput;
}

/* The speedup table of (id, type), created or refreshed for the model. */
static struct sp_entry *sp_get(struct copus_state *s, uint64_t id, int type,
			       const copus_model *m, int max_nodes,
			       int max_gpus)
{
	struct sp_entry *e = NULL;

	for (size_t i = 0; i < s->n; i++) {
		size_t k = (s->hint + i) % s->n;
		if (s->e[k].id == id && s->e[k].type == type) {
			e = &s->e[k];
			s->hint = k + 1;
			break;
		}
	}
	if (e == NULL) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			struct sp_entry *g = realloc(s->e, cap * sizeof(*g));
			if (g == NULL)
				return NULL;
			s->e = g;
			s->cap = cap;
		}
		e = &s->e[s->n++];
		memset(e, 0, sizeof(*e));
		e->id = id;
		e->type = type;
	}
	e->used = true;
	if (e->sp != NULL &&
	    (e->max_nodes < max_nodes || e->max_gpus < max_gpus)) {
		copus_speedup_destroy(e->sp);
		e->sp = NULL;
	}
	if (e->sp == NULL) {
		if (copus_speedup_create(m, max_nodes, max_gpus, 1, 1,
					 &e->sp) != COPUS_OK) {
			e->sp = NULL;
			return NULL;
		}
		e->model = *m;
		e->max_nodes = max_nodes;
		e->max_gpus = max_gpus;
		e->g1 = goodput_one(m);
	} else if (!copus__model_same(&e->model, m)) {
		if (copus_speedup_reset(e->sp, m) != COPUS_OK)
			return NULL;
		e->model = *m;
		e->g1 = goodput_one(m);
	}
	return e;
}

/* Drop the tables of jobs that were not seen this round. */
static void sp_sweep(struct copus_state *s)
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
	s->hint = 0;
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

/* Does the policy know how job w scales on type t (a model or cells)? */
static bool known(const struct jw *w, int t)
{
	return w->cs != NULL ? w->has_cells[t] : w->sp[t] != NULL;
}

/* Speedup of k GPUs of type t (packed on the fewest nodes). */
static double speedup(const struct jw *w, int t, int k, const int *node_gpus)
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
		return k; /* no model: assume linear up to the request */
	int nodes = (k + node_gpus[t] - 1) / node_gpus[t];
	if (copus_speedup_get(w->sp[t], nodes, k, &v) != COPUS_OK)
		return 0.0;
	return v * w->rel[t];
}

/*
 * What is left of a job's value on an allocation of speedup s after the
 * restart a move costs: 1 - delay / H, H the time it would run there before
 * it ends or before the planning horizon; and at most Pollux's restart
 * factor, the share of the job's life so far that was not spent restarting
 * had it restarted once more, so that a job moved often is moved less.
 */
static double restart_factor(const struct jw *w, double s,
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

/* The value of job j on (t, k) (see the top), discounted for a move. */
static double value(const struct jw *w, int t, int k, const int *node_gpus,
		    const copus_policy_params *prm, const struct copus__copus_opts *o)
{
	double s = speedup(w, t, k, node_gpus);

	if (k <= 0 || s <= 0.0)
		return 0.0;
	double v = s * w->weight;
	if (k > w->q) {
		double sq = speedup(w, t, w->q, node_gpus);
		v = sq * w->weight + (s - sq);
	}
	if (w->cur_k > 0 && (t != w->cur_t || k != w->cur_k))
		v *= restart_factor(w, s, prm, o);
	return v * w->boost;
}

/* The most GPUs the job may get this round. */
static int growth_cap(const copus_job *j)
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
static int request(const copus_job *j)
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
		if (known(x, t))
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

/* The smallest size a job runs at: its fixed size without a model. */
static int base_need(const struct jw *x)
{
	const copus_job *j = x->job;

	for (int t = 0; j->elastic && t < COPUS_MAX_GPU_TYPES; t++)
		if (known(x, t))
			return j->min_gpus;
	return x->q;
}

/* The one GPU type job x can use, or -1 when it has a choice (or none). */
static int only_type(const struct jw *x, int T, const int *node_gpus)
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

/* The best step found so far, and how to compare a candidate with it. */
struct step {
	double score;
	int t, k;
	const int *slack; /* per type: free GPUs less what only it can serve */
};

static void consider(struct step *b, double g, int t, int k)
{
	double tol = 1e-12 * fabs(b->score);

	/* Equal gains: the type other jobs need least. */
	if (g > b->score + tol ||
	    (b->k > 0 && g >= b->score - tol && t != b->t &&
	     b->slack[t] > b->slack[b->t])) {
		b->score = g;
		b->t = t;
		b->k = k;
	}
}

/*
 * The best next step of job j: a type and a larger size, with the gain in
 * value per added GPU. Returns false when there is none.
 */
static bool best_step(const struct jw *w, const int *cap, const int *slack,
		      const int *node_gpus, int ntypes,
		      const copus_policy_params *prm,
		      const struct copus__copus_opts *o,
		      double *score, int *to_t, int *to_k)
{
	const copus_job *j = w->job;
	struct step b = { 0.0, -1, 0, slack };

	for (int t = 0; t < ntypes; t++) {
		if (w->t >= 0 && t != w->t)
			continue;
		if (!copus__type_allowed(j, t) || node_gpus[t] <= 0)
			continue;
		int g = node_gpus[t];
		int k0 = w->t == t ? w->k : 0;
		int kmax = growth_cap(j);
		if (kmax > k0 + cap[t])
			kmax = k0 + cap[t];
		double v0 = k0 > 0 ? value(w, t, k0, node_gpus, prm, o) : 0.0;
#define TRY(kk)                                                               \
	consider(&b, (value(w, t, (kk), node_gpus, prm, o) - v0) /            \
			     ((kk) - k0), t, (kk))
		if (!j->elastic || !known(w, t)) {
			/* Fixed size: the request (clamped to elastic bounds),
			 * or for a running elastic job its current size. */
			int want = w->q;
			if (want > k0 && want <= kmax)
				TRY(want);
			if (j->elastic && t == w->cur_t && w->cur_k > k0 &&
			    w->cur_k <= kmax && w->cur_k != want)
				TRY(w->cur_k);
			continue;
		}
		int lo = k0 > 0 ? k0 + 1 : j->min_gpus;
		int hi = k0 + g;
		if (hi > kmax)
			hi = kmax;
		if (lo > hi && lo <= kmax)
			TRY(lo); /* a minimum beyond one node */
		for (int k = lo; k <= hi; k++) {
			/*
			 * A multi-node job has its nodes to itself (one such
			 * job per node), so a size that ends part-way into a
			 * node strands the rest of it: whole nodes only.
			 */
			if (k > g && k % g != 0 && k != j->max_gpus &&
			    k != w->q && !(t == w->cur_t && k == w->cur_k) &&
			    !o->no_placement)
				continue;
			TRY(k);
		}
		/*
		 * Whole nodes beyond the look-ahead: across a node boundary
		 * the sync cost jumps, so a speedup curve may dip after one
		 * node and rise again over several, and the greedy would never
		 * cross the dip one node at a time.
		 */
		for (int k = (hi / g + 1) * g; k <= kmax; k += g)
			TRY(k);
		/* The request and the current size may lie beyond that. */
		if (w->q > hi && w->q <= kmax && w->q % g != 0)
			TRY(w->q);
		if (t == w->cur_t && w->cur_k > hi && w->cur_k <= kmax &&
		    w->cur_k % g != 0 && w->cur_k != w->q)
			TRY(w->cur_k);
#undef TRY
	}
	*score = b.score;
	*to_t = b.t;
	*to_k = b.k;
	return b.k > 0 && b.score > 0.0;
}

/* The heap of the greedy's steps: the largest gain per GPU on top. */
static bool heap_above(const void *a, const void *b)
{
	return ((const struct heap_item *)a)->score >
	       ((const struct heap_item *)b)->score;
}

static void heap_push(struct heap_item *h, size_t *n, struct heap_item it)
{
	copus__heap_push(h, n, sizeof(*h), &it, heap_above);
}

static struct heap_item heap_pop(struct heap_item *h, size_t *n)
{
	struct heap_item top;

	copus__heap_pop(h, n, sizeof(*h), &top, heap_above);
	return top;
}

/* Job order for placement: the larger size first, ties in job order. */
static int cmp_size(const void *a, const void *b, void *arg)
{
	const struct jw *w = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;

	if (w[i].k != w[j].k)
		return w[i].k > w[j].k ? -1 : 1;
	return (i > j) - (i < j);
}

/* Usable GPUs per type and the largest node of each type. */
static void cluster_caps(const copus_cluster *c, int *node_gpus, int *cap)
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
				x->has_cells[t] = true;
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
		double v = speedup(x, t, jb->req_gpus, node_gpus);
		if (v > best) {
			best = v;
			best_t = t;
		}
	}
	for (int t = 0; best_t < 0 && t < T; t++)
		if (x->has_cells[t])
			for (int k = 1; k <= x->cs_kmax; k++)
				if (x->cs[t * (x->cs_kmax + 1) + k] > best) {
					best = x->cs[t * (x->cs_kmax + 1) + k];
					best_t = t;
				}
	return best_t;
}

/* Remaining work, fairness weight and speedup tables of each job. */
static int prepare_jobs(struct copus_state *s, const copus_policy_params *prm,
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
			int kmax = growth_cap(jb);
			if (kmax < x->cur_k)
				kmax = x->cur_k;
			int nodes = (kmax + node_gpus[t] - 1) / node_gpus[t];
			/* Table entries may move; the tables themselves do not. */
			struct sp_entry *e = sp_get(s, jb->id, t, m, nodes, kmax);
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
			x->rel[t] = x->sp[t] != NULL && g1[t] > 0.0 ?
					    g1[t] / gmax : 1.0;
		/*
		 * Its work counts in the same unit wherever it runs now (on
		 * its fastest type), so that a move does not change what the
		 * job is worth and the next round does not move it back.
		 */
		for (int t = 0; gmax > 0.0 && t < T; t++)
			if (x->sp[t] != NULL && g1[t] == gmax)
				ref_t = t;
		double req_time = jb->req_gpus > 0 ? jb->attained / jb->req_gpus
						   : 0.0;
		x->remain = jb->remaining >= 0.0 ? jb->remaining
						 : fmax(req_time, prm->interval);
		if (x->remain < 1.0)
			x->remain = 1.0;
		double s_req = ref_t >= 0 ? speedup(x, ref_t, jb->req_gpus,
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
		double ftf = (fmax(waited, 0.0) + x->remain) / (req_time + x->remain);
		x->boost = ftf > FTF_GUARD && !s->opt.no_fairness ?
				   (ftf / FTF_GUARD) * (ftf / FTF_GUARD) : 1.0;
		x->q = request(jb);
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
	for (size_t j = 0; j < n; j++)
		w[j].weight = s->opt.no_srpt ? 1.0 :
			      pow(w[j].R / R_max, -SRPT_EXPONENT);
	return COPUS_OK;
}

/* Frees what prepare_jobs allocated. */
static void release_jobs(struct jw *w, size_t n)
{
	for (size_t j = 0; w != NULL && j < n; j++)
		free(w[j].cs);
}

/* May job x have k GPUs of type t at all (bounds, rigid size, type)? */
static bool cell_allowed(const struct jw *x, int t, int k,
			 const int *node_gpus, const struct copus__copus_opts *o)
{
	const copus_job *j = x->job;

	if (k <= 0 || !copus__type_allowed(j, t) || node_gpus[t] <= 0)
		return false;
	/* With cells, only the sizes of a cell that fits; with a
	 * granularity, only its multiples. */
	if ((x->cs != NULL || j->granularity > 1) &&
	    !(speedup(x, t, k, node_gpus) > 0.0))
		return false;
	if (!j->elastic || !known(x, t)) {
		int want = x->q;
		return k == want || (j->elastic && k == x->cur_k &&
				     t == x->cur_t);
	}
	int kmax = growth_cap(j);
	bool cur = k == x->cur_k && t == x->cur_t;
	if (kmax < x->cur_k && t == x->cur_t)
		kmax = x->cur_k;
	if (k < j->min_gpus || k > kmax)
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
	int node_gpus[COPUS_MAX_GPU_TYPES] = { 0 }, cap[COPUS_MAX_GPU_TYPES] = { 0 };
	const struct copus__copus_opts *o = &s->opt;
	struct jw *w = calloc(n + 1, sizeof(*w));

	if (w == NULL)
		return COPUS_ENOMEM;
	cluster_caps(c, node_gpus, cap);
	int rc = prepare_jobs(s, prm, c, jobs, n, now, node_gpus, cap, w);
	for (size_t j = 0; rc == COPUS_OK && j < n; j++)
		for (int t = 0; t < T; t++)
			for (int k = 0; k <= kmax; k++)
				v[(j * (size_t)T + (size_t)t) * (size_t)(kmax + 1) +
				  (size_t)k] =
					cell_allowed(&w[j], t, k, node_gpus, o) ?
					value(&w[j], t, k, node_gpus, prm, o) : 0.0;
	release_jobs(w, n);
	free(w);
	return rc;
}

/*
 * Placement without copus's rules, for the ablation "no-placement": the
 * first free GPUs of type t in node order, however many nodes that takes
 * and whatever else runs there.
 */
static int first_fit(const copus_cluster *c, const int *free_gpus, int t,
		     int k, int *row)
{
	int need = k;

	for (int i = 0; i < c->num_nodes && need > 0; i++) {
		if (c->nodes[i].gpu_type != t || !c->nodes[i].usable ||
		    free_gpus[i] <= 0)
			continue;
		row[i] = free_gpus[i] < need ? free_gpus[i] : need;
		need -= row[i];
	}
	if (need == 0)
		return COPUS_OK;
	memset(row, 0, (size_t)c->num_nodes * sizeof(int));
	return COPUS_ERANGE;
}

static int cmp_slot(const void *a, const void *b)
{
	const copus_slot *x = a, *y = b;

	return (x->node > y->node) - (x->node < y->node);
}

/*
 * Append job j's cell to the result: from row (N entries, zeroed again
 * here) or, with row NULL, from the job's current slots. Marks the nodes
 * of a multi-node job in dist and takes the GPUs from free_gpus.
 */
static int emit(struct copus__result *res, size_t j, const copus_job *jb,
		int *row, int N, int *free_gpus, int *dist)
{
	size_t o = res->used;

	res->off[j] = o;
	if (row == NULL) {
		for (int i = 0; i < jb->alloc_slots; i++) {
			if (jb->alloc[i].gpus <= 0)
				continue;
			if (res->used == res->cap)
				return COPUS_ESTATE;
			res->slots[res->used++] = jb->alloc[i];
		}
		qsort(res->slots + o, res->used - o, sizeof(copus_slot),
		      cmp_slot);
	} else {
		for (int k = 0; k < N; k++) {
			if (row[k] <= 0)
				continue;
			if (res->used == res->cap)
				return COPUS_ESTATE;
			res->slots[res->used].node = k;
			res->slots[res->used].gpus = row[k];
			res->used++;
			row[k] = 0;
		}
	}
	res->cnt[j] = (int)(res->used - o);
	for (size_t i = o; i < res->used; i++) {
		free_gpus[res->slots[i].node] -= res->slots[i].gpus;
		if (res->cnt[j] > 1)
			dist[res->slots[i].node] = 1;
	}
	return COPUS_OK;
}

struct greedy_ctx {
	struct jw *w;
	size_t n;
	struct heap_item *heap;
	const int *node_gpus;
	int T;
	const copus_policy_params *prm;
	const struct copus__copus_opts *o;
	struct copus__placer *pl; /* scratch of place_job */
};

/* Give job x the cell (t, k), taking the GPUs from cap and slack. */
static void take_cell(struct jw *x, int t, int k, int T, const int *node_gpus,
		      int *cap, int *slack)
{
	cap[t] -= k - (x->t == t ? x->k : 0);
	slack[t] -= k - (x->t == t ? x->k : 0);
	if (x->t < 0 && only_type(x, T, node_gpus) == t)
		slack[t] += base_need(x);
	x->t = t;
	x->k = k;
}

/* Job order for the second start: largest smallest-cell first. */
static int cmp_need(const void *a, const void *b, void *arg)
{
	const struct jw *w = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int x = base_need(&w[i]), y = base_need(&w[j]);

	if (x != y)
		return y - x;
	return (i > j) - (i < j);
}

/*
 * One run of the greedy from a start (0: nothing, 1: largest smallest
 * cells first, 3: the cells already in w): GPUs go by the largest gain in
 * value per GPU. Returns the total value reached; the cells are in w.
 */
static double greedy(struct greedy_ctx *g, int start, size_t *idx, int *cap,
		     int *slack)
{
	struct jw *w = g->w;
	size_t nheap = 0;
	double total = 0.0;

	for (size_t j = 0; start < 3 && j < g->n; j++) {
		w[j].t = -1;
		w[j].k = 0;
		idx[j] = j;
	}
	if (start == 1)
		qsort_r(idx, g->n, sizeof(*idx), cmp_need, w);
	for (size_t i = 0; start > 0 && start < 3 && i < g->n; i++) {
		struct jw *x = &w[idx[i]];
		int t = -1, k = base_need(x);
		double best = 0.0;
		for (int u = 0; u < g->T; u++) {
			if (!copus__type_allowed(x->job, u) || cap[u] < k ||
			    g->node_gpus[u] <= 0)
				continue;
			double v = value(x, u, k, g->node_gpus, g->prm, g->o);
			if (v > best ||
			    (v == best && t >= 0 && slack[u] > slack[t])) {
				best = v;
				t = u;
			}
		}
		if (t >= 0 && best > 0.0)
			take_cell(x, t, k, g->T, g->node_gpus, cap, slack);
	}
	for (size_t j = 0; j < g->n; j++) {
		double s;
		int t, k;
		if (best_step(&w[j], cap, slack, g->node_gpus, g->T, g->prm,
			      g->o, &s, &t, &k))
			heap_push(g->heap, &nheap, (struct heap_item){ s, j });
	}
	while (nheap > 0) {
		struct heap_item it = heap_pop(g->heap, &nheap);
		struct jw *x = &w[it.j];
		double s;
		int t, k;
		if (!best_step(x, cap, slack, g->node_gpus, g->T, g->prm, g->o,
			       &s, &t, &k))
			continue;
		if (s < it.score * (1.0 - 1e-12)) {
			/* The capacity changed since it was queued: requeue. */
			heap_push(g->heap, &nheap, (struct heap_item){ s, it.j });
			continue;
		}
		take_cell(x, t, k, g->T, g->node_gpus, cap, slack);
		if (best_step(x, cap, slack, g->node_gpus, g->T, g->prm, g->o,
			      &s, &t, &k))
			heap_push(g->heap, &nheap, (struct heap_item){ s, it.j });
	}
	for (size_t j = 0; j < g->n; j++)
		if (w[j].k > 0)
			total += value(&w[j], w[j].t, w[j].k, g->node_gpus,
				       g->prm, g->o);
	return total;
}

/* How many queued jobs the swap step tries each round (bounds its cost). */
#define SWAP_TRIES 32

struct victim {
	double ratio; /* value lost per GPU freed */
	size_t i;
	int k;        /* the size it shrinks to (0: queued) */
	int freed;
};

static int cmp_victim(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	if (x->ratio != y->ratio)
		return x->ratio < y->ratio ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/*
 * Try to admit queued job j on (t, k) by shrinking or queueing jobs of
 * type t that lose the least value per GPU freed. Applies the change and
 * returns the net gain when it is positive; otherwise changes nothing.
 */
/*
 * How swap_in chooses what to displace: each job's cheapest shrink per GPU
 * freed, whole jobs only, or the one job whose shrink alone frees enough
 * at the least loss.
 */
enum swap_mode { SWAP_RATIO, SWAP_WHOLE, SWAP_SINGLE };

static double swap_in(struct greedy_ctx *g, size_t j, int t, int k, int *cap,
		      int *slack, struct victim *vic, enum swap_mode mode)
{
	bool whole = mode == SWAP_WHOLE;
	struct jw *w = g->w, *x = &w[j];
	double gain = value(x, t, k, g->node_gpus, g->prm, g->o);
	int need = k - cap[t], nv = 0, freed = 0;

	if (!(gain > 0.0))
		return 0.0;
	for (size_t i = 0; need > 0 && i < g->n; i++) {
		struct jw *y = &w[i];
		if (i == j || y->t != t || y->k <= 0)
			continue;
		double v = value(y, t, y->k, g->node_gpus, g->prm, g->o);
		struct victim best = { v / y->k, i, 0, y->k };
		if (mode == SWAP_SINGLE)
			best.ratio = y->k >= need ? v : INFINITY;
		/* A smaller size the job may have, if it loses less. */
		for (int kk = base_need(y); !whole && kk < y->k; kk++) {
			if (!cell_allowed(y, t, kk, g->node_gpus, g->o))
				continue;
			double loss = v - value(y, t, kk, g->node_gpus, g->prm,
						g->o);
			double r = mode == SWAP_SINGLE ?
				   (y->k - kk >= need ? loss : INFINITY) :
				   loss / (y->k - kk);
			if (r < best.ratio)
				best = (struct victim){ r, i, kk, y->k - kk };
		}
		if (isfinite(best.ratio))
			vic[nv++] = best;
	}
	if (mode == SWAP_SINGLE && nv > 1) {
		/* Only the cheapest single job. */
		qsort(vic, (size_t)nv, sizeof(*vic), cmp_victim);
		nv = 1;
	}
	if (need > 0) {
		qsort(vic, (size_t)nv, sizeof(*vic), cmp_victim);
		int m = 0;
		for (; m < nv && freed < need; m++) {
			struct jw *y = &w[vic[m].i];
			gain -= value(y, t, y->k, g->node_gpus, g->prm, g->o) -
				(vic[m].k > 0 ? value(y, t, vic[m].k,
						      g->node_gpus, g->prm,
						      g->o) : 0.0);
			freed += vic[m].freed;
		}
		if (freed < need || !(gain > 1e-12))
			return 0.0;
		for (int q = 0; q < m; q++) {
			struct jw *y = &w[vic[q].i];
			cap[t] += vic[q].freed;
			slack[t] += vic[q].freed;
			y->k = vic[q].k;
			if (y->k == 0) {
				if (only_type(y, g->T, g->node_gpus) == t)
					slack[t] -= base_need(y);
				y->t = -1;
			}
		}
	}
	take_cell(x, t, k, g->T, g->node_gpus, cap, slack);
	return gain;
}

/*
 * Improve the greedy's cells: a queued job whose smallest cell is worth
 * more than what it would displace takes it (the greedy, adding one step
 * at a time by value per GPU, passes over large cells such as a big rigid
 * job's), then the greedy resumes on what is left.
 */
static double improve(struct greedy_ctx *g, size_t *idx, int *cap, int *slack,
		      struct victim *vic)
{
	struct jw *w = g->w;
	size_t tries = 0;
	bool changed = false;

	for (size_t j = 0; j < g->n && tries < SWAP_TRIES; j++) {
		struct jw *x = &w[j];
		if (x->k > 0)
			continue;
		int need = base_need(x);
		int bt = -1;
		double bv = 0.0;
		for (int t = 0; t < g->T; t++) {
			if (!cell_allowed(x, t, need, g->node_gpus, g->o))
				continue;
			double v = value(x, t, need, g->node_gpus, g->prm, g->o);
			if (v > bv) {
				bv = v;
				bt = t;
			}
		}
		if (bt < 0)
			continue;
		tries++;
		/* Shrinking others where that loses least; else queueing them. */
		if (swap_in(g, j, bt, need, cap, slack, vic, SWAP_RATIO) > 0.0 ||
		    swap_in(g, j, bt, need, cap, slack, vic, SWAP_SINGLE) > 0.0 ||
		    swap_in(g, j, bt, need, cap, slack, vic, SWAP_WHOLE) > 0.0)
			changed = true;
	}
	if (!changed)
		return -1.0;
	return greedy(g, 3, idx, cap, slack);
}

/*
 * Move jobs to another GPU type where the GPUs still free there are worth
 * more to them than the cell the greedy gave them (the greedy grows a job
 * only on the type of its first step, so a type nobody started on stays
 * idle while jobs crowd a faster one), then let the greedy hand out what
 * they leave. Every move raises the job's value and only frees GPUs, so
 * the total never falls. Returns whether a job moved.
 */
static bool migrate(struct greedy_ctx *g, size_t *idx, int *cap, int *slack)
{
	struct jw *w = g->w;
	bool moved = false;

	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &w[j];
		if (x->k <= 0)
			continue;
		double bv = value(x, x->t, x->k, g->node_gpus, g->prm, g->o);
		int bt = -1, bk = 0, kmax = growth_cap(x->job);
		if (x->cs != NULL && kmax > x->cs_kmax)
			kmax = x->cs_kmax;
		bv *= 1.0 + 1e-9;
		for (int t = 0; t < g->T; t++) {
			if (t == x->t)
				continue;
			for (int k = 1; k <= kmax && k <= cap[t]; k++) {
				if (!cell_allowed(x, t, k, g->node_gpus, g->o))
					continue;
				double v = value(x, t, k, g->node_gpus, g->prm,
						 g->o);
				if (v > bv) {
					bv = v;
					bt = t;
					bk = k;
				}
			}
		}
		if (bt < 0)
			continue;
		int t0 = x->t, k0 = x->k;
		cap[t0] += k0;
		slack[t0] += k0;
		x->t = -1;
		x->k = 0;
		if (only_type(x, g->T, g->node_gpus) == t0)
			slack[t0] -= base_need(x);
		take_cell(x, bt, bk, g->T, g->node_gpus, cap, slack);
		moved = true;
	}
	if (moved)
		greedy(g, 3, idx, cap, slack);
	return moved;
}

/* A cell of a job for exact_dp: a type and a size (0: queued), its value. */
struct cell {
	int t, k;
	double v;
};

/*
 * The exact optimum of the value table on small clusters: with each type's
 * capacity as the only constraint (placement follows, as for the greedy),
 * choosing one cell per job is a multiple-choice knapsack in as many
 * dimensions as there are GPU types, solved by dynamic programming over the
 * GPUs used of each type. DP_BUDGET bounds its work (states x cells); a
 * bigger instance keeps the greedy's cells. The cells change only when the
 * optimum is worth more than the greedy's.
 */
#define DP_BUDGET 4000000.0

static void exact_dp(struct greedy_ctx *g, const int *total)
{
	struct jw *w = g->w;
	const int T = g->T;
	size_t n = g->n, S = 1, stride[COPUS_MAX_GPU_TYPES];
	double work = 0.0;

	for (int t = 0; t < T; t++) {
		stride[t] = S;
		S *= (size_t)(total[t] > 0 ? total[t] : 0) + 1;
		if (S > 1u << 20)
			return;
	}
	size_t *first = calloc(n + 1, sizeof(*first));
	if (first == NULL)
		return;
	for (size_t j = 0; j < n; j++) {
		size_t c = 1;
		for (int t = 0; t < T; t++)
			for (int k = 1; k <= total[t]; k++)
				c += cell_allowed(&w[j], t, k, g->node_gpus,
						  g->o);
		first[j + 1] = first[j] + c;
		work += (double)c * (double)S;
		if (work > DP_BUDGET) {
			free(first);
			return;
		}
	}
	struct cell *cells = malloc(first[n] * sizeof(*cells));
	double *dp = malloc(2 * S * sizeof(*dp));
	unsigned short *pick = malloc(n * S * sizeof(*pick));
	if (cells == NULL || dp == NULL || pick == NULL)
		goto out;
	for (size_t j = 0; j < n; j++) {
		size_t m = first[j];
		cells[m++] = (struct cell){ -1, 0, 0.0 };
		for (int t = 0; t < T; t++)
			for (int k = 1; k <= total[t]; k++)
				if (cell_allowed(&w[j], t, k, g->node_gpus,
						 g->o))
					cells[m++] = (struct cell){
						t, k,
						value(&w[j], t, k, g->node_gpus,
						      g->prm, g->o)
					};
		if (first[j + 1] - first[j] > USHRT_MAX)
			goto out;
	}
	/* dp[s]: the most value of the jobs so far using s's GPUs per type. */
	double *cur = dp, *next = dp + S;
	for (size_t s = 0; s < S; s++)
		cur[s] = s == 0 ? 0.0 : -1.0;
	for (size_t j = 0; j < n; j++) {
		for (size_t s = 0; s < S; s++)
			next[s] = -1.0;
		for (size_t s = 0; s < S; s++) {
			if (cur[s] < 0.0)
				continue;
			for (size_t p = first[j]; p < first[j + 1]; p++) {
				const struct cell *u = &cells[p];
				size_t s2 = s;
				if (u->k > 0) {
					size_t used = s / stride[u->t] %
						      (size_t)(total[u->t] + 1);
					if (used + (size_t)u->k >
					    (size_t)total[u->t])
						continue;
					s2 += (size_t)u->k * stride[u->t];
				}
				double v = cur[s] + u->v;
				if (v > next[s2]) {
					next[s2] = v;
					pick[j * S + s2] =
						(unsigned short)(p - first[j]);
				}
			}
		}
		double *tmp = cur;
		cur = next;
		next = tmp;
	}
	size_t bs = 0;
	for (size_t s = 1; s < S; s++)
		if (cur[s] > cur[bs])
			bs = s;
	double have = 0.0;
	for (size_t j = 0; j < n; j++)
		if (w[j].k > 0)
			have += value(&w[j], w[j].t, w[j].k, g->node_gpus,
				      g->prm, g->o);
	if (!(cur[bs] > have + 1e-9 * (have + 1.0)))
		goto out;
	for (size_t j = n; j-- > 0;) {
		const struct cell *u = &cells[first[j] + pick[j * S + bs]];
		w[j].t = u->t;
		w[j].k = u->k;
		if (u->k > 0)
			bs -= (size_t)u->k * stride[u->t];
	}
out:
	free(cells);
	free(dp);
	free(pick);
	free(first);
}

/*
 * GPUs that placement left free (a job shrank to fit, or did not fit at
 * all) go to queued jobs, each on its most valuable cell that the free GPUs
 * hold (smaller if that does not fit on the nodes), the job of most value
 * per GPU first, until none fits: the chosen sizes count a
 * type's GPUs, not how they lie on the nodes, and idle GPUs help nobody.
 */
/* Has job jb a cell of k GPUs of type t on as many nodes as row uses? */
static bool has_cell(const copus_job *jb, int t, int k, const int *row, int N)
{
	int nodes = 0;

	for (int i = 0; i < N; i++)
		nodes += row[i] > 0;
	for (int i = 0; i < jb->num_cells; i++)
		if (jb->cells[i].gpu_type == t && jb->cells[i].gpus == k &&
		    jb->cells[i].nodes == nodes)
			return true;
	return false;
}

/*
 * Places job x on its type x->t at the largest size from x->k down that
 * fits. An elastic job shrinks to fit when its speedup is known, or when it
 * is starting (a running job without a model keeps its size; a new one
 * starts on what there is rather than leave the GPUs idle for a round).
 * With whole set it does not shrink. The GPUs go in row, x->k becomes the
 * size and *type the type; *type is -1 (row cleared) when nothing fits.
 */
static int place_job(const struct greedy_ctx *g, const copus_cluster *c,
		     const copus_job *jb, struct jw *x, const int *free_gpus,
		     const int *dist, int *row, int *type, bool whole)
{
	int lo = !whole && jb->elastic &&
			 (known(x, x->t) || x->cur_k == 0) ?
		 jb->min_gpus : x->k;

	if (!g->o->no_placement && !g->prm->equal_per_node)
		copus__placer_prep(g->pl, c, free_gpus, dist, 1u << x->t);
	for (int k = x->k; k >= lo; k--) {
		int rc, t = -1;
		if ((x->cs != NULL || jb->granularity > 1) &&
		    !(speedup(x, x->t, k, g->node_gpus) > 0.0))
			continue; /* no cell or no whole replica of that size */
		if (g->o->no_placement) {
			rc = first_fit(c, free_gpus, x->t, k, row);
			t = x->t;
		} else if (g->prm->equal_per_node) {
			rc = copus__place_equal(c, free_gpus, dist, 1u << x->t,
						k, row, &t);
		} else {
			rc = copus__placer_get(g->pl, k, row, &t);
		}
		if (rc == COPUS_ENOMEM)
			return rc;
		if (rc == COPUS_OK && x->cs != NULL &&
		    !has_cell(jb, t, k, row, c->num_nodes)) {
			/* Spread where the job has no plan: a smaller size. */
			memset(row, 0, (size_t)c->num_nodes * sizeof(int));
			continue;
		}
		if (rc == COPUS_OK) {
			x->k = k;
			*type = t;
			return COPUS_OK;
		}
	}
	memset(row, 0, (size_t)c->num_nodes * sizeof(int));
	*type = -1;
	return COPUS_OK;
}

/* How many queued jobs the fill tries each round (bounds its cost). */
#define FILL_TRIES 64

static int fill_idle(struct greedy_ctx *g, const copus_cluster *c,
		     const copus_job *jobs, struct copus__result *res,
		     int *free_gpus, int *dist, int *row)
{
	const int N = c->num_nodes;
	bool *tried = calloc(g->n + 1, sizeof(*tried));
	int rc = COPUS_OK;

	if (tried == NULL)
		return COPUS_ENOMEM;
	for (int tries = 0; tries < FILL_TRIES; tries++) {
		int fr[COPUS_MAX_GPU_TYPES] = { 0 };
		for (int k = 0; k < N; k++)
			if (c->nodes[k].usable)
				fr[c->nodes[k].gpu_type] += free_gpus[k];
		size_t bj = g->n;
		int bt = -1, bk = 0;
		double bs = 0.0;
		for (size_t j = 0; j < g->n; j++) {
			struct jw *x = &g->w[j];
			int jt = -1, jk = 0;
			double jv = 0.0;
			if (x->k != 0 || tried[j])
				continue;
			/* The job's most valuable cell that the free GPUs hold. */
			for (int t = 0; t < g->T; t++)
				for (int k = fr[t]; k >= 1; k--) {
					if (!cell_allowed(x, t, k, g->node_gpus,
							  g->o))
						continue;
					double v = value(x, t, k, g->node_gpus,
							 g->prm, g->o);
					if (v > jv) {
						jv = v;
						jt = t;
						jk = k;
					}
				}
			if (jt >= 0 && jv / jk > bs) {
				bs = jv / jk;
				bj = j;
				bt = jt;
				bk = jk;
			}
		}
		if (bj == g->n)
			break;
		struct jw *x = &g->w[bj];
		int t;
		tried[bj] = true;
		x->t = bt;
		x->k = bk;
		rc = place_job(g, c, &jobs[bj], x, free_gpus, dist, row, &t,
			       false);
		if (rc != COPUS_OK)
			goto out;
		if (t < 0) {
			x->k = 0;
			continue;
		}
		x->t = t;
		if ((rc = emit(res, bj, &jobs[bj], row, N, free_gpus, dist)) !=
		    COPUS_OK)
			goto out;
		res->types[bj] = t;
		snprintf(res->reasons[bj], 64, "starts on %d idle GPUs, %.0f s left",
			 x->k, x->remain);
	}
out:
	free(tried);
	return rc;
}

/* Are job j's current GPUs free, and its nodes free of other multi-node
 * jobs if it spans several? */
static bool fits_current(const copus_job *jb, const int *free_gpus,
			 const int *dist)
{
	int used = 0;

	for (int i = 0; i < jb->alloc_slots; i++)
		used += jb->alloc[i].gpus > 0;
	for (int i = 0; i < jb->alloc_slots; i++) {
		const copus_slot *sl = &jb->alloc[i];
		if (sl->gpus <= 0)
			continue;
		if (free_gpus[sl->node] < sl->gpus ||
		    (used > 1 && dist[sl->node]))
			return false;
	}
	return true;
}

/* Does job x keep its cell and its GPUs (all on usable nodes)? */
static bool keeps(const struct jw *x, const copus_job *jb,
		  const copus_cluster *c)
{
	if (x->k != x->cur_k || x->t != x->cur_t)
		return false;
	for (int i = 0; i < jb->alloc_slots; i++)
		if (jb->alloc[i].gpus > 0 && !c->nodes[jb->alloc[i].node].usable)
			return false;
	return true;
}

/* Take job j's slots in res out of avail (the GPUs free less those held
 * for the jobs still to place). */
static void take_avail(const struct copus__result *res, size_t j, int *avail)
{
	for (int i = 0; i < res->cnt[j]; i++)
		avail[res->slots[res->off[j] + (size_t)i].node] -=
			res->slots[res->off[j] + (size_t)i].gpus;
}

/*
 * One placement pass over the chosen cells. Without repack: jobs that keep
 * their cell keep their GPUs, the others go largest first. With repack,
 * only rigid jobs are fixed: every other job goes largest first, an
 * elastic job that keeps its cell stays where it is if it still can, and
 * a job that does not fit around the GPUs still held for the running jobs
 * to come may take them, moving those jobs (at the cost of their restart).
 * *score is the sum of the placed jobs' values, less the restarts of the
 * moved ones; avail and moved have N and n entries.
 */
static int nodes_of(const int *row, int N)
{
	int k = 0;
	for (int i = 0; i < N; i++)
		k += row[i] > 0;
	return k;
}

static int place_pass(struct greedy_ctx *g, const copus_cluster *c,
		      const copus_job *jobs, struct copus__result *res,
		      int *free_gpus, int *dist, int *row, int *row2,
		      size_t *idx, int repack, int *avail, bool *moved,
		      double *score)
{
	const int N = c->num_nodes;
	struct jw *w = g->w;
	size_t m = 0;
	int rc;

	memcpy(avail, free_gpus, (size_t)N * sizeof(int));
	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &w[j];
		moved[j] = false;
		if (x->k == 0)
			continue;
		bool keep = keeps(x, &jobs[j], c);
		if (!keep || (repack && jobs[j].elastic)) {
			idx[m++] = j;
			for (int i = 0; keep && i < jobs[j].alloc_slots; i++)
				avail[jobs[j].alloc[i].node] -=
					jobs[j].alloc[i].gpus;
			continue;
		}
		rc = emit(res, j, &jobs[j], NULL, N, free_gpus, dist);
		if (rc != COPUS_OK)
			return rc;
		take_avail(res, j, avail);
		res->types[j] = x->t;
		snprintf(res->reasons[j], 64, "keeps %d GPUs", x->k);
	}
	qsort_r(idx, m, sizeof(*idx), cmp_size, w);
	if (repack == 2) {
		/* The jobs that do not run yet first, each part largest first. */
		size_t *tmp = malloc((m + 1) * sizeof(*tmp)), a = 0;
		if (tmp == NULL)
			return COPUS_ENOMEM;
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < m; i++)
				if (keeps(&w[idx[i]], &jobs[idx[i]], c) == (pass == 1))
					tmp[a++] = idx[i];
		memcpy(idx, tmp, m * sizeof(*tmp));
		free(tmp);
	}
	for (size_t i = 0; i < m; i++) {
		size_t j = idx[i];
		struct jw *x = &w[j];
		int t = -1;
		if (keeps(x, &jobs[j], c)) {
			for (int s = 0; s < jobs[j].alloc_slots; s++)
				avail[jobs[j].alloc[s].node] +=
					jobs[j].alloc[s].gpus;
			if (fits_current(&jobs[j], free_gpus, dist)) {
				rc = emit(res, j, &jobs[j], NULL, N, free_gpus,
					  dist);
				if (rc != COPUS_OK)
					return rc;
				take_avail(res, j, avail);
				res->types[j] = x->t;
				snprintf(res->reasons[j], 64, "keeps %d GPUs",
					 x->k);
				continue;
			}
			moved[j] = true;
		}
		if (repack) {
			/* Around the GPUs held for the running jobs, unless
			 * taking some of them needs fewer nodes. */
			int t2 = -1;
			rc = place_job(g, c, &jobs[j], x, avail, dist, row, &t,
				       true);
			if (rc == COPUS_OK && t >= 0)
				rc = place_job(g, c, &jobs[j], x, free_gpus, dist,
					       row2, &t2, true);
			if (rc != COPUS_OK)
				return rc;
			if (t2 >= 0 && nodes_of(row2, N) < nodes_of(row, N)) {
				memcpy(row, row2, (size_t)N * sizeof(int));
				t = t2;
			}
			memset(row2, 0, (size_t)N * sizeof(int));
		}
		if (t < 0) {
			rc = place_job(g, c, &jobs[j], x, free_gpus, dist, row,
				       &t, false);
			if (rc != COPUS_OK)
				return rc;
		}
		if (t < 0) {
			res->off[j] = res->used;
			snprintf(res->reasons[j], 64, "queued: %d GPUs do not fit",
				 x->k);
			x->k = 0;
			moved[j] = false;
			continue;
		}
		rc = emit(res, j, &jobs[j], row, N, free_gpus, dist);
		if (rc != COPUS_OK)
			return rc;
		take_avail(res, j, avail);
		res->types[j] = t;
		x->t = t;
		if (moved[j])
			snprintf(res->reasons[j], 64, "moves its %d GPUs to make "
				 "room", x->k);
		else
			snprintf(res->reasons[j], 64, "%s %d GPUs, %.0f s left%s",
				 x->cur_k > 0 ? "moved to" : "starts on", x->k,
				 x->remain, x->bad_model ? " (bad model)" : "");
	}
	*score = 0.0;
	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &w[j];
		if (x->k <= 0 || res->types[j] < 0)
			continue;
		double v = value(x, x->t, x->k, g->node_gpus, g->prm, g->o);
		/* A move in the same cell; value() counts any other change. */
		if (moved[j] && x->k == x->cur_k && x->t == x->cur_t)
			v *= restart_factor(x, speedup(x, x->t, x->k,
						       g->node_gpus),
					    g->prm, g->o);
		*score += v;
	}
	return COPUS_OK;
}

/*
 * The repacking passes run when jobs x nodes stay under this: each is a
 * whole placement pass, and on big clusters a job left out by
 * fragmentation finds room elsewhere anyway.
 */
#define REPACK_BUDGET 4000000.0

/* A placement pass's outcome, kept while another pass runs. */
struct placed {
	size_t used;
	copus_slot *slots;
	size_t *off;
	int *cnt, *types, *k, *t, *free_gpus, *dist;
	char (*reasons)[64];
};

static void placed_free(struct placed *p)
{
	free(p->slots);
	free(p->off);
	free(p->cnt);
	free(p->types);
	free(p->k);
	free(p->t);
	free(p->free_gpus);
	free(p->dist);
	free(p->reasons);
}

static int placed_alloc(struct placed *p, size_t slots, size_t n, int N)
{
	memset(p, 0, sizeof(*p));
	p->slots = malloc((slots + 1) * sizeof(*p->slots));
	p->off = malloc((n + 1) * sizeof(*p->off));
	p->cnt = malloc((n + 1) * sizeof(int));
	p->types = malloc((n + 1) * sizeof(int));
	p->k = malloc((n + 1) * sizeof(int));
	p->t = malloc((n + 1) * sizeof(int));
	p->free_gpus = malloc(((size_t)N + 1) * sizeof(int));
	p->dist = malloc(((size_t)N + 1) * sizeof(int));
	p->reasons = malloc((n + 1) * sizeof(*p->reasons));
	if (!p->slots || !p->off || !p->cnt || !p->types || !p->k || !p->t ||
	    !p->free_gpus || !p->dist || !p->reasons) {
		placed_free(p);
		return COPUS_ENOMEM;
	}
	return COPUS_OK;
}

/* Copy the round's placement state into p (save) or back (restore). */
static void placed_copy(struct placed *p, bool save, struct copus__result *res,
			struct jw *w, size_t n, int *free_gpus, int *dist, int N)
{
#define COPY(dst, src, bytes) memcpy(save ? (void *)(dst) : (void *)(src), \
				     save ? (const void *)(src) :            \
					    (const void *)(dst), bytes)
	if (save)
		p->used = res->used;
	else
		res->used = p->used;
	COPY(p->slots, res->slots, p->used * sizeof(*p->slots));
	COPY(p->off, res->off, n * sizeof(*p->off));
	COPY(p->cnt, res->cnt, n * sizeof(int));
	COPY(p->types, res->types, n * sizeof(int));
	COPY(p->reasons, res->reasons, n * sizeof(*p->reasons));
	COPY(p->free_gpus, free_gpus, (size_t)N * sizeof(int));
	COPY(p->dist, dist, (size_t)N * sizeof(int));
#undef COPY
	for (size_t j = 0; j < n; j++) {
		if (save) {
			p->k[j] = w[j].k;
			p->t[j] = w[j].t;
		} else {
			w[j].k = p->k[j];
			w[j].t = p->t[j];
		}
	}
}

/*
 * Places the chosen cells (place_pass without repack). When that leaves a
 * chosen cell out or smaller and an elastic job could move to make room,
 * two repacking passes run too (largest first; the jobs that are not
 * running first, then the running ones), and the pass worth the most wins.
 */
static int place_all(struct greedy_ctx *g, const copus_cluster *c,
		     const copus_job *jobs, struct copus__result *res,
		     int *free_gpus, int *dist, int *row, size_t *idx)
{
	const int N = c->num_nodes;
	const size_t n = g->n;
	struct jw *w = g->w;
	struct placed chosen = { 0 }, best = { 0 };
	int *avail = calloc((size_t)N + 1, sizeof(int));
	int *row2 = calloc((size_t)N + 1, sizeof(int));
	bool *moved = calloc(n + 1, sizeof(bool));
	double score = 0.0, best_score;
	bool shortfall = false, movable = false;
	int rc = COPUS_ENOMEM;

	if (!avail || !row2 || !moved ||
	    placed_alloc(&chosen, res->cap, n, N) != COPUS_OK)
		goto out;
	placed_copy(&chosen, true, res, w, n, free_gpus, dist, N);
	for (size_t j = 0; j < n; j++)
		movable |= w[j].k > 0 && jobs[j].elastic &&
			   keeps(&w[j], &jobs[j], c);
	rc = place_pass(g, c, jobs, res, free_gpus, dist, row, row2, idx, 0,
			avail, moved, &score);
	if (rc != COPUS_OK)
		goto out;
	for (size_t j = 0; j < n; j++)
		shortfall |= chosen.k[j] > 0 &&
			     (res->types[j] < 0 || w[j].k < chosen.k[j]);
	if (!shortfall || !movable || g->o->no_placement ||
	    (double)n * (double)N > REPACK_BUDGET)
		goto out;
	if ((rc = placed_alloc(&best, res->cap, n, N)) != COPUS_OK)
		goto out;
	placed_copy(&best, true, res, w, n, free_gpus, dist, N);
	best_score = score;
	for (int mode = 1; mode <= 2; mode++) {
		placed_copy(&chosen, false, res, w, n, free_gpus, dist, N);
		rc = place_pass(g, c, jobs, res, free_gpus, dist, row, row2,
				idx, mode, avail, moved, &score);
		if (rc != COPUS_OK)
			goto out;
		if (score > best_score * (1.0 + 1e-9)) {
			best_score = score;
			placed_copy(&best, true, res, w, n, free_gpus, dist, N);
		}
	}
	placed_copy(&best, false, res, w, n, free_gpus, dist, N);
out:
	placed_free(&chosen);
	placed_free(&best);
	free(avail);
	free(row2);
	free(moved);
	return rc;
}

/*
 * Decide one round (see the top). Memory grows with jobs + nodes + GPUs in
 * use, never with jobs x nodes.
 */
static int copus_decide(void *state, const copus_policy_params *prm,
			const copus_cluster *c, const copus_job *jobs, size_t n,
			double now, struct copus__result *res)
{
	struct copus_state *s = state;
	struct copus__placer pl = { 0 };
	const int N = c->num_nodes, T = c->num_types;
	int node_gpus[COPUS_MAX_GPU_TYPES] = { 0 }, cap[COPUS_MAX_GPU_TYPES] = { 0 };
	struct jw *w = calloc(n + 1, sizeof(*w));
	struct heap_item *heap = calloc(n + 1, sizeof(*heap));
	size_t *idx = calloc(n + 1, sizeof(*idx));
	int *free_gpus = calloc((size_t)N, sizeof(int));
	int *dist = calloc((size_t)N, sizeof(int));
	int *row = calloc((size_t)N, sizeof(int));
	struct victim *vic = calloc(n + 1, sizeof(*vic));
	int total[COPUS_MAX_GPU_TYPES], slack[COPUS_MAX_GPU_TYPES];
	int rc = COPUS_OK;

	if (!w || !heap || !idx || !free_gpus || !dist || !row || !vic ||
	    copus__placer_init(&pl, N) != COPUS_OK) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	res->used = 0;
	for (int k = 0; k < N; k++)
		free_gpus[k] = c->nodes[k].usable ? c->nodes[k].gpus : 0;
	cluster_caps(c, node_gpus, cap);
	memcpy(total, cap, sizeof(total));
	rc = prepare_jobs(s, prm, c, jobs, n, now, node_gpus, cap, w);
	if (rc != COPUS_OK)
		goto out;
	/* What each type must keep for the jobs that can run nowhere else. */
	memcpy(slack, cap, sizeof(slack));
	for (size_t j = 0; j < n; j++) {
		int t = only_type(&w[j], T, node_gpus);
		if (t >= 0)
			slack[t] -= base_need(&w[j]);
	}

	/*
	 * The greedy from two starts, keeping the one of higher value: from
	 * nothing, and with the largest jobs' smallest cells placed first (a
	 * big rigid job is not crowded out of its type by small ones). Sizes
	 * and types only; placement follows. (Starting from the running jobs'
	 * current cells as well held them in place and doubled the worst
	 * finish-time fairness at 0.5x load in copus-sim.)
	 */
	struct greedy_ctx g = { w, n, heap, node_gpus, T, prm, &s->opt, &pl };
	int best_start = -1;
	double best_v = -1.0;
	for (int start = 0; start < 2; start++) {
		int cp[COPUS_MAX_GPU_TYPES], sl[COPUS_MAX_GPU_TYPES];
		memcpy(cp, cap, sizeof(cp));
		memcpy(sl, slack, sizeof(sl));
		double v = greedy(&g, start, idx, cp, sl);
		if (v > best_v * (1.0 + 1e-12)) {
			best_v = v;
			best_start = start;
			for (size_t j = 0; j < n; j++) {
				w[j].best_t = w[j].t;
				w[j].best_k = w[j].k;
			}
		}
	}
	for (size_t j = 0; best_start >= 0 && j < n; j++) {
		w[j].t = w[j].best_t;
		w[j].k = w[j].best_k;
	}
	{
		int cp[COPUS_MAX_GPU_TYPES], sl[COPUS_MAX_GPU_TYPES];
		memcpy(cp, cap, sizeof(cp));
		memcpy(sl, slack, sizeof(sl));
		for (size_t j = 0; j < n; j++)
			if (w[j].k > 0) {
				int t = w[j].t, k = w[j].k;
				w[j].t = -1;
				w[j].k = 0;
				take_cell(&w[j], t, k, T, node_gpus, cp, sl);
			}
		if (improve(&g, idx, cp, sl, vic) <= best_v) {
			for (size_t j = 0; j < n; j++) {
				w[j].t = w[j].best_t;
				w[j].k = w[j].best_k;
			}
			memcpy(cp, cap, sizeof(cp));
			memcpy(sl, slack, sizeof(sl));
			for (size_t j = 0; j < n; j++)
				if (w[j].k > 0) {
					int t = w[j].t, k = w[j].k;
					w[j].t = -1;
					w[j].k = 0;
					take_cell(&w[j], t, k, T, node_gpus, cp, sl);
				}
		}
		if (T > 1)
			migrate(&g, idx, cp, sl);
		exact_dp(&g, total);
	}

	/* Placement: unchanged jobs keep their GPUs, the rest largest first;
	 * if that leaves a chosen cell out, the repacking, when worth more. */
	rc = place_all(&g, c, jobs, res, free_gpus, dist, row, idx);
	if (rc != COPUS_OK)
		goto out;
	rc = fill_idle(&g, c, jobs, res, free_gpus, dist, row);
	if (rc != COPUS_OK)
		goto out;
	for (size_t j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];
		int need = jb->elastic ? jb->min_gpus : jb->req_gpus, most = 0;
		if (w[j].k != 0)
			continue;
		res->off[j] = res->used;
		for (int t = 0; t < T; t++)
			if (copus__type_allowed(jb, t) && total[t] > most)
				most = total[t];
		if (need > most)
			snprintf(res->reasons[j], 64,
				 "queued: needs %d GPUs, %d usable", need, most);
		else if (res->reasons[j][0] == '\0')
			snprintf(res->reasons[j], 64,
				 "queued: shorter jobs first");
	}
	sp_sweep(s);
out:
	release_jobs(w, n);
	free(w);
	free(heap);
	free(idx);
	free(free_gpus);
	free(dist);
	free(row);
	free(vic);
	copus__placer_release(&pl);
	return rc;
}

static int copus_create(const char *opts, void **state)
{
	struct copus__copus_opts o;

	struct copus_state *s;
	int rc;

	if (opts_parse(opts, &o) != COPUS_OK)
		return COPUS_EINVAL;
	rc = copus__state_create(&o, &s);
	if (rc == COPUS_OK)
		*state = s;
	return rc;
}

static void copus_destroy(void *state)
{
	copus__state_destroy(state);
}

const struct copus__policy_ops copus__copus_ops = {
	.name = "copus",
	.traits = { .elastic = true, .picks_batch = true, .moves_jobs = true,
		    .remaining = COPUS_REMAINING_PREDICT,
		    .models = COPUS_MODELS_LEARNED, .picks_cells = true },
	.granular = true,
	.create = copus_create,
	.destroy = copus_destroy,
	.decide = copus_decide,
};
