/*
 * pollux: the power mean of the jobs' goodput speedups over a fair share,
 * each job's batch re-optimised (Pollux, OSDI'21), searched from last
 * round's allocations and greedily from an empty cluster; elastic, learns
 * the jobs' models.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/model.h>
#include <copus/policy.h>

#include "ops.h"
#include "round.h"

/* A job's memoised speedup table for one GPU type. */
struct scache {
	uint64_t id;
	int type;
	copus_model model;
	copus_speedup *sp;
	bool used;
};

/* What the policy keeps between rounds: the jobs' speedup tables. */
struct pollux_state {
	struct scache **sc; /* entries stay put while the array grows */
	size_t nsc;
	int sc_nodes, sc_gpus; /* the cluster the tables were made for */
};

static int pollux_create(const char *opts, void **state)
{
	if (opts != NULL)
		return COPUS_EINVAL;
	*state = calloc(1, sizeof(struct pollux_state));
	return *state == NULL ? COPUS_ENOMEM : COPUS_OK;
}

static void sc_clear(struct pollux_state *p)
{
	for (size_t i = 0; i < p->nsc; i++) {
		copus_speedup_destroy(p->sc[i]->sp);
		free(p->sc[i]);
	}
	free(p->sc);
	p->sc = NULL;
	p->nsc = 0;
}

static void pollux_destroy(void *state)
{
	if (state == NULL)
		return;
	sc_clear(state);
	free(state);
}

/* Is rw (of GPU type t) job j's current allocation? */
static bool same_as_alloc(const struct copus__round *r, size_t j,
			  const int *rw, int t)
{
	const int *a = cur_row(r, j);
	int s = 0;

	for (int n = 0; n < r->N; n++) {
		if (a[n] != rw[n])
			return false;
		s += a[n];
	}
	return s == 0 || t == r->jobs[j].alloc_type;
}

/*
 * Job id's speedup table on GPU type t for model m, made or refreshed; the
 * tables are made for N nodes and G GPUs, and all go when those change.
 */
static struct scache *sc_get(struct pollux_state *p, uint64_t id, int t,
			     const copus_model *m, int N, int G)
{
	struct scache *s = NULL;

	if (p->sc_nodes != N || p->sc_gpus != G) {
		sc_clear(p);
		p->sc_nodes = N;
		p->sc_gpus = G;
	}
	for (size_t i = 0; i < p->nsc; i++)
		if (p->sc[i]->id == id && p->sc[i]->type == t) {
			s = p->sc[i];
			break;
		}
	if (s == NULL) {
		struct scache **ns = realloc(p->sc, (p->nsc + 1) * sizeof(*ns));

		if (ns == NULL)
			return NULL;
		p->sc = ns;
		s = calloc(1, sizeof(*s));
		if (s == NULL)
			return NULL;
		p->sc[p->nsc++] = s;
		s->id = id;
		s->type = t;
	}
	s->used = true;
	if (s->sp != NULL && copus__model_same(&s->model, m))
		return s;
	s->model = *m;
	if (s->sp == NULL) {
		if (copus_speedup_create(m, N, G, 1, 1, &s->sp) != COPUS_OK)
			s->sp = NULL;
	} else if (copus_speedup_reset(s->sp, m) != COPUS_OK) {
		copus_speedup_destroy(s->sp);
		s->sp = NULL;
	}
	return s->sp ? s : NULL;
}

/* What the Pollux objective needs to know about each job. */
struct pjob {
	struct scache *sc; /* NULL: no model, speedup = replicas / fair */
	double base;       /* goodput speedup of the fair share */
	double factor;     /* restart factor */
	int cap;           /* most GPUs it may get */
};

/* One round's search. */
struct pollux {
	struct copus__round *r;
	struct pjob *pj;
	double p;
	double scale; /* nodes / GPUs: a node's worth of GPUs is speedup 1 */
	int fair;
	int *dist;    /* per node: multi-node jobs on it */
	int *tmp;
};

/* One job's term of the power mean with exponent p (to be maximised). */
static double power_util(double v, double p)
{
	/* Pollux's p = -1 is the common case: a division, not a pow(). */
	if (p == -1.0)
		return -1.0 / (v + 1e-3);
	if (p < 0.0)
		return -pow(v + 1e-3, p);
	if (p > 0.0)
		return pow(v + 1e-3, p);
	return log(v > 1e-3 ? v : 1e-3);
}

/* The job's term in the objective if it held 'rw' (of GPU type t). */
static double pollux_term(struct pollux *px, size_t j, const int *rw, int t)
{
	struct pjob *pj = &px->pj[j];
	int nodes, k = copus__row_sum(rw, px->r->N, &nodes);
	double s = 0.0;

	if (k > 0) {
		if (pj->sc == NULL || pj->sc->type != t) {
			s = (double)k / px->fair;
		} else if (copus_speedup_get(pj->sc->sp, nodes, k, &s) !=
			   COPUS_OK) {
			s = 0.0;
		} else {
			s /= pj->base;
		}
	}
	s *= px->scale;
	if (!same_as_alloc(px->r, j, rw, t))
		s *= pj->factor;
	return power_util(s, px->p);
}

static void dist_recount(struct pollux *px, size_t skip)
{
	struct copus__round *r = px->r;

	for (int n = 0; n < r->N; n++)
		px->dist[n] = 0;
	for (size_t j = 0; j < r->n; j++) {
		int nodes;

		if (j == skip)
			continue;
		copus__row_sum(row(r, j), r->N, &nodes);
		if (nodes > 1)
			for (int n = 0; n < r->N; n++)
				px->dist[n] += row(r, j)[n] > 0;
	}
}

/*
 * The best re-placement of job j given everyone else: its current row,
 * its allocation from the last round, nothing, or a consolidated placement
 * of any size up to its cap. Sizes above twice the largest node only in
 * whole-node multiples, to bound the work. Leaves the best in row j and
 * returns whether it changed.
 */
static bool pollux_improve(struct pollux *px, size_t j, double *delta)
{
	struct copus__round *r = px->r;
	const copus_job *jb = &r->jobs[j];
	int *cur = row(r, j), cur_t = r->types[j];
	double cur_v, best_v;
	int best_t = cur_t, best_k = -1, g = r->max_node_gpus;
	bool from_alloc = false;

	cur_v = pollux_term(px, j, cur, cur_t);
	best_v = cur_v;
	for (int n = 0; n < r->N; n++)
		px->tmp[n] = cur[n];
	copus__give(r, j);
	dist_recount(px, j);
	/* Nothing. */
	{
		double v = pollux_term(px, j, cur, -1);

		if (v > best_v + 1e-12) {
			best_v = v;
			best_k = 0;
		}
	}
	/* Last round's allocation, when it still fits. */
	if (copus__alloc_valid(r, j)) {
		const int *a = cur_row(r, j);
		bool fits = true;
		int nodes;

		copus__row_sum(a, r->N, &nodes);
		for (int n = 0; n < r->N && fits; n++)
			if (a[n] > r->free[n] ||
			    (nodes > 1 && a[n] > 0 && px->dist[n]))
				fits = false;
		if (fits) {
			double v = pollux_term(px, j, a, jb->alloc_type);

			if (v > best_v + 1e-12) {
				best_v = v;
				best_k = -2;
			}
		}
	}
	copus__placer_prep(&r->pl, r->c, r->free, px->dist, jb->type_mask);
	for (int k = jb->min_gpus > 1 ? jb->min_gpus : 1; k <= px->pj[j].cap;
	     k++) {
		int t;
		double v;

		if (k > 2 * g && k % g != 0 && k != px->pj[j].cap)
			continue;
		if (copus__placer_get(&r->pl, k, cur, &t) != COPUS_OK)
			continue;
		v = pollux_term(px, j, cur, t);
		if (v > best_v + 1e-12) {
			best_v = v;
			best_k = k;
			best_t = t;
		}
	}
	if (best_k == -1) {
		for (int n = 0; n < r->N; n++)
			cur[n] = px->tmp[n];
		r->types[j] = copus__row_sum(cur, r->N, NULL) > 0 ? cur_t : -1;
	} else if (best_k == 0) {
		for (int n = 0; n < r->N; n++)
			cur[n] = 0;
		r->types[j] = -1;
	} else if (best_k == -2) {
		memcpy(cur, cur_row(r, j), (size_t)r->N * sizeof(int));
		r->types[j] = jb->alloc_type;
		from_alloc = true;
	} else {
		copus__placer_get(&r->pl, best_k, cur, &best_t);
		r->types[j] = best_t;
	}
	(void)from_alloc;
	for (int n = 0; n < r->N; n++)
		r->free[n] -= cur[n];
	if (delta)
		*delta = best_v - cur_v;
	return best_k != -1;
}

static double pollux_total(struct pollux *px)
{
	double s = 0.0;

	for (size_t j = 0; j < px->r->n; j++)
		s += pollux_term(px, j, row(px->r, j), px->r->types[j]);
	return s;
}

/* Re-place each job given the others until nothing improves. */
static void pollux_sweeps(struct pollux *px, int sweeps_max)
{
	for (int s = 0; s < sweeps_max; s++) {
		bool changed = false;

		for (size_t j = 0; j < px->r->n; j++)
			changed |= pollux_improve(px, j, NULL);
		if (!changed)
			break;
	}
}

/*
 * Greedy construction from an empty cluster: at each step the job whose
 * move to a larger allocation gains the most objective per added GPU
 * takes it. Then coordinate-descent sweeps re-place each job given the
 * others until nothing improves. The same sweeps run from last round's
 * allocations, and the better of the two states wins.
 */
static int pollux_search(struct pollux *px, int sweeps_max)
{
	struct copus__round *r = px->r;
	size_t sz = r->n * (size_t)r->N;
	int *saved = NULL, *saved_types = NULL, *saved_free = NULL;
	int *cand = NULL;
	double v1, v2;
	int rc = COPUS_OK;

	saved = malloc((sz + 1) * sizeof(int));
	saved_types = malloc((r->n + 1) * sizeof(int));
	saved_free = malloc(((size_t)r->N + 1) * sizeof(int));
	cand = malloc(((size_t)r->N + 1) * sizeof(int));
	if (!saved || !saved_types || !saved_free || !cand) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	/* Start 1: last round's allocations, then sweeps. */
	for (size_t j = 0; j < r->n; j++)
		if (copus__alloc_valid(r, j))
			copus__keep(r, j);
	/* Drop multi-node jobs that break the one-per-node rule. */
	for (size_t j = 0; j < r->n; j++) {
		int nodes;

		copus__row_sum(row(r, j), r->N, &nodes);
		if (nodes < 2)
			continue;
		dist_recount(px, j);
		for (int n = 0; n < r->N; n++)
			if (row(r, j)[n] > 0 && px->dist[n]) {
				copus__give(r, j);
				break;
			}
	}
	pollux_sweeps(px, sweeps_max);
	v1 = pollux_total(px);
	memcpy(saved, r->rows, sz * sizeof(int));
	memcpy(saved_types, r->types, r->n * sizeof(int));
	memcpy(saved_free, r->free, (size_t)r->N * sizeof(int));
	/* Start 2: greedy from empty. */
	for (size_t j = 0; j < r->n; j++)
		copus__give(r, j);
	for (;;) {
		size_t bj = r->n;
		int bk = 0, bt = -1, g = r->max_node_gpus;
		double bgain = 0.0;

		for (size_t j = 0; j < r->n; j++) {
			int cur_k = copus__row_sum(row(r, j), r->N, NULL);
			double cur_v = pollux_term(px, j, row(r, j),
						   r->types[j]);
			int *rw = row(r, j);

			if (cur_k >= px->pj[j].cap)
				continue;
			/* Re-place j from scratch at every larger size. */
			for (int n = 0; n < r->N; n++)
				r->free[n] += rw[n];
			dist_recount(px, j);
			copus__placer_prep(&r->pl, r->c, r->free, px->dist,
				    r->jobs[j].type_mask);
			for (int k = cur_k + 1; k <= px->pj[j].cap; k++) {
				int t;
				double v, gpk;

				if ((k > 2 * g && k % g != 0 &&
				     k != px->pj[j].cap) ||
				    k < r->jobs[j].min_gpus)
					continue;
				if (copus__placer_get(&r->pl, k, cand, &t) !=
				    COPUS_OK)
					continue;
				v = pollux_term(px, j, cand, t);
				gpk = (v - cur_v) / (k - cur_k);
				if (gpk > bgain + 1e-12) {
					bgain = gpk;
					bj = j;
					bk = k;
					bt = t;
				}
			}
			for (int n = 0; n < r->N; n++)
				r->free[n] -= rw[n];
		}
		if (bj == r->n)
			break;
		copus__give(r, bj);
		dist_recount(px, bj);
		copus__placer_prep(&r->pl, r->c, r->free, px->dist,
				   r->jobs[bj].type_mask);
		if (copus__placer_get(&r->pl, bk, row(r, bj), &bt) != COPUS_OK)
			break;
		r->types[bj] = bt;
		for (int n = 0; n < r->N; n++)
			r->free[n] -= row(r, bj)[n];
	}
	pollux_sweeps(px, sweeps_max);
	v2 = pollux_total(px);
	if (v1 >= v2) {
		memcpy(r->rows, saved, sz * sizeof(int));
		memcpy(r->types, saved_types, r->n * sizeof(int));
		memcpy(r->free, saved_free, (size_t)r->N * sizeof(int));
	}
out:
	free(saved);
	free(saved_types);
	free(saved_free);
	free(cand);
	return rc;
}

/*
 * Pollux's round: the jobs in its order (least attained service first),
 * the search, then the rows back in the caller's order.
 */
static int pollux_decide(void *state, const copus_policy_params *prm,
			 const copus_cluster *c, const copus_job *jobs,
			 size_t njobs, double now, struct copus__result *res)
{
	struct pollux_state *p = state;
	struct copus__round *r = NULL, sorted;
	struct pollux px = { .p = prm->fairness_p };
	struct copus__order_key *ord = NULL;
	copus_job *sjobs = NULL;
	int *scur = NULL;
	size_t nj = njobs;
	int rc = copus__round_create(c, jobs, njobs, &r);

	if (rc != COPUS_OK || nj == 0)
		goto out;
	sorted = *r;
	/* Jobs in Pollux's order: least attained service, then oldest. */
	ord = calloc(nj, sizeof(*ord));
	sjobs = calloc(nj, sizeof(*sjobs));
	scur = malloc(nj * (size_t)r->N * sizeof(int));
	px.pj = calloc(nj, sizeof(*px.pj));
	px.dist = calloc((size_t)r->N, sizeof(int));
	px.tmp = calloc((size_t)r->N, sizeof(int));
	if (!ord || !sjobs || !scur || !px.pj || !px.dist || !px.tmp) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < nj; j++) {
		ord[j].j = j;
		ord[j].k1 = r->jobs[j].attained;
		ord[j].k2 = r->jobs[j].submit_time;
		ord[j].k3 = (double)r->jobs[j].id;
	}
	qsort(ord, nj, sizeof(*ord), copus__order_cmp);
	for (size_t i = 0; i < nj; i++) {
		sjobs[i] = r->jobs[ord[i].j];
		memcpy(scur + i * (size_t)r->N, cur_row(r, ord[i].j),
		       (size_t)r->N * sizeof(int));
	}
	sorted.jobs = sjobs;
	sorted.cur = scur;
	px.r = &sorted;
	px.fair = (int)ceil((double)r->total_gpus / (double)nj);
	if (px.fair < 1)
		px.fair = 1;
	px.scale = (double)r->N / (double)(r->total_gpus > 0 ?
					   r->total_gpus : 1);
	for (size_t i = 0; i < p->nsc; i++)
		p->sc[i]->used = false;
	for (size_t i = 0; i < nj; i++) {
		const copus_job *jb = &sjobs[i];
		struct pjob *pj = &px.pj[i];
		double age = now - jb->submit_time;
		int t = copus__row_sum(cur_row(&sorted, i), r->N, NULL) > 0 ?
			jb->alloc_type : -1;
		const copus_model *m;

		if (t < 0)
			for (int u = 0; u < r->c->num_types && t < 0; u++)
				if (copus__type_allowed(jb, u) && copus__job_model(jb, u))
					t = u;
		m = copus__job_model(jb, t);
		if (age < 0)
			age = 0;
		pj->factor = fmax(age - jb->restarts * prm->restart_delay,
				  0.0) / (age + prm->restart_delay);
		if (!jb->elastic) {
			pj->cap = jb->req_gpus;
		} else {
			int grow = 2 * jb->max_gpus_had;

			pj->cap = jb->max_gpus;
			if (grow < 1)
				grow = 1;
			if (pj->cap > grow)
				pj->cap = grow;
			/* Never below its elastic minimum, explored or not. */
			if (pj->cap < jb->min_gpus)
				pj->cap = jb->min_gpus;
		}
		if (pj->cap > r->total_gpus)
			pj->cap = r->total_gpus;
		pj->sc = m ? sc_get(p, jb->id, t, m, r->N, r->total_gpus) :
			NULL;
		if (pj->sc != NULL) {
			double b = 0.0;

			copus_speedup_get(pj->sc->sp, 1,
					  px.fair <= r->total_gpus ? px.fair :
					  r->total_gpus, &b);
			if (!(b > 0.0))
				b = 1.0;
			pj->base = b;
		}
	}
	/* Forget speedup tables of jobs that are gone. */
	for (size_t i = 0; i < p->nsc;) {
		if (!p->sc[i]->used) {
			copus_speedup_destroy(p->sc[i]->sp);
			free(p->sc[i]);
			p->sc[i] = p->sc[--p->nsc];
		} else {
			i++;
		}
	}
	/* Rigid jobs take part with their fixed size (cap = req, so a
	 * placement of another size is still possible below; pin it). */
	rc = pollux_search(&px, prm->search_rounds > 0 ?
			   prm->search_rounds : 4);
	if (rc != COPUS_OK)
		goto out;
	/* Copy rows back to the caller's order. */
	{
		int *tmp_rows = malloc(nj * (size_t)r->N * sizeof(int));
		int *tmp_types = malloc(nj * sizeof(int));

		if (!tmp_rows || !tmp_types) {
			free(tmp_rows);
			free(tmp_types);
			rc = COPUS_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < nj; i++) {
			size_t j = ord[i].j;
			const copus_job *jb = &sjobs[i];
			int k = copus__row_sum(row(&sorted, i), r->N, NULL);

			memcpy(tmp_rows + j * (size_t)r->N, row(&sorted, i),
			       (size_t)r->N * sizeof(int));
			tmp_types[j] = sorted.types[i];
			/* A rigid job runs on its request or not at all, an
			 * elastic one within its bounds. */
			if (k != 0 && (jb->elastic ? k < jb->min_gpus :
						     k != jb->req_gpus)) {
				for (int n = 0; n < r->N; n++)
					r->free[n] += row(&sorted, i)[n];
				memset(tmp_rows + j * (size_t)r->N, 0,
				       (size_t)r->N * sizeof(int));
				tmp_types[j] = -1;
			}
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "pollux: %d GPUs, restart factor %.2f", k,
				 px.pj[i].factor);
		}
		memcpy(r->rows, tmp_rows, nj * (size_t)r->N * sizeof(int));
		memcpy(r->types, tmp_types, nj * sizeof(int));
		free(tmp_rows);
		free(tmp_types);
	}
out:
	rc = copus__round_finish(r, rc, res);
	free(ord);
	free(sjobs);
	free(scur);
	free(px.pj);
	free(px.dist);
	free(px.tmp);
	return rc;
}


const struct copus__policy_ops copus__pollux_ops = {
	.name = "pollux",
	.traits = { .elastic = true, .picks_batch = true,
		    .models = COPUS_MODELS_LEARNED },
	.create = pollux_create,
	.destroy = pollux_destroy,
	.decide = pollux_decide,
};
