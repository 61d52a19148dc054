/*
 * The scheduling policies behind include/copus/policy.h: fifo with EASY
 * backfill, tiresias, optimus and pollux. Everything here is pure: the
 * policy object only keeps what a policy remembers between rounds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "internal.h"
#include "policy-copus.h"
#include "policy-internal.h"

enum policy_kind { POL_FIFO, POL_TIRESIAS, POL_OPTIMUS, POL_POLLUX, POL_COPUS };

/* Tiresias' memory of a job: its queue and its place in that queue. */
struct tstate {
	uint64_t id;
	int queue;
	uint64_t seq;
};

/* A job's memoised speedup table for one GPU type. */
struct scache {
	uint64_t id;
	int type;
	copus_model model;
	copus_speedup *sp;
	bool used;
};

struct copus_policy {
	char name[64];
	enum policy_kind kind;
	copus_policy_params prm;
	struct tstate *ts;
	size_t nts;
	uint64_t seq;
	struct scache **sc; /* entries stay put while the array grows */
	size_t nsc;
	int sc_nodes, sc_gpus;
	copus_slot *slots;
	size_t cap_slots;
	struct copus_state *cs;
};

/* Work arrays of one round. */
struct round {
	const copus_cluster *c;
	const copus_job *jobs;
	size_t n;
	int N;
	int *rows;   /* n x N GPUs per node (the dense policies only) */
	int *cur;    /* n x N current allocations (the dense policies only) */
	int *types;  /* GPU type of each job's row, -1 when empty */
	int *free;   /* N free GPUs */
	int total_gpus;
	int max_node_gpus;
};

static int *row(struct round *r, size_t j)
{
	return r->rows + j * (size_t)r->N;
}

/* Job j's current allocation as GPUs per node. */
static const int *cur_row(const struct round *r, size_t j)
{
	return r->cur + j * (size_t)r->N;
}

int copus_policy_check_input(const copus_cluster *c, const copus_job *jobs,
			     size_t n, long *bad_job)
{
	long dummy;
	int *used = NULL;
	int rc = COPUS_OK;

	if (bad_job == NULL)
		bad_job = &dummy;
	*bad_job = -1;
	if (c == NULL || c->nodes == NULL || c->num_nodes < 1 ||
	    c->num_types < 1 || c->num_types > COPUS_MAX_GPU_TYPES ||
	    (n > 0 && jobs == NULL))
		return COPUS_EINVAL;
	for (int k = 0; k < c->num_nodes; k++)
		if (c->nodes[k].gpu_type < 0 ||
		    c->nodes[k].gpu_type >= c->num_types ||
		    c->nodes[k].gpus < 0 || c->nodes[k].gpus > 1 << 16)
			return COPUS_EINVAL;
	used = calloc((size_t)c->num_nodes, sizeof(*used));
	if (used == NULL)
		return COPUS_ENOMEM;
	for (size_t j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];

		*bad_job = (long)j;
		rc = COPUS_EINVAL;
		if (jb->min_gpus < 1 || jb->max_gpus < jb->min_gpus ||
		    jb->req_gpus < 1 || !(jb->req_batch >= 0.0) ||
		    !isfinite(jb->submit_time) || !(jb->attained >= 0.0) ||
		    jb->restarts < 0 || jb->max_gpus_had < 0 ||
		    !isfinite(jb->remaining) || !isfinite(jb->priority))
			goto out;
		if (c->num_types < 32 && (jb->type_mask >> c->num_types) != 0)
			goto out;
		if (jb->alloc_slots < 0 ||
		    (jb->alloc_slots > 0 && jb->alloc == NULL))
			goto out;
		for (int i = 0; i < jb->alloc_slots; i++) {
			int k = jb->alloc[i].node, g = jb->alloc[i].gpus;

			if (k < 0 || k >= c->num_nodes || g < 0)
				goto out;
			if (g == 0)
				continue;
			if (jb->alloc_type < 0 ||
			    jb->alloc_type >= c->num_types ||
			    c->nodes[k].gpu_type != jb->alloc_type)
				goto out;
			used[k] += g;
			if (used[k] > c->nodes[k].gpus)
				goto out;
		}
	}
	*bad_job = -1;
	rc = COPUS_OK;
out:
	free(used);
	return rc;
}

int copus_policy_create(const char *name, const copus_policy_params *params,
			copus_policy **out)
{
	static const char *const names[] = { "fifo", "tiresias", "optimus",
					     "pollux", "copus" };
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	copus_policy *p;
	int kind = -1;

	struct copus__copus_opts opts;
	const char *spec = NULL;

	if (name == NULL || out == NULL || strlen(name) >= sizeof(p->name))
		return COPUS_EINVAL;
	for (int i = 0; i < 5; i++)
		if (strcmp(name, names[i]) == 0)
			kind = i;
	/* "copus:no-srpt,..." runs the co-adaptive policy without some of
	 * its ingredients (see core/policy-copus.h). */
	if (strncmp(name, "copus:", 6) == 0) {
		kind = POL_COPUS;
		spec = name + 6;
	}
	if (kind < 0 || copus__copus_opts_parse(spec, &opts) != COPUS_OK)
		return COPUS_EINVAL;
	if (params != NULL) {
		if (params->version != COPUS_POLICY_PARAMS_VERSION ||
		    params->size != sizeof(copus_policy_params))
			return COPUS_EVERSION;
		prm = *params;
	}
	if (!(prm.interval > 0.0) || !(prm.restart_delay >= 0.0) ||
	    !isfinite(prm.fairness_p) || !(prm.tiresias_threshold >= 0.0) ||
	    prm.search_rounds < 0)
		return COPUS_EINVAL;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return COPUS_ENOMEM;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->kind = (enum policy_kind)kind;
	p->prm = prm;
	if (p->kind == POL_COPUS) {
		int rc = copus__state_create(&opts, &p->cs);

		if (rc != COPUS_OK) {
			free(p);
			return rc;
		}
	}
	*out = p;
	return COPUS_OK;
}

const char *copus_policy_name(const copus_policy *p)
{
	return p == NULL ? "" : p->name;
}

const struct copus_policy_traits *copus_policy_traits(const copus_policy *p)
{
	static const struct copus_policy_traits traits[] = {
		[POL_FIFO] = { .remaining = COPUS_REMAINING_ORACLE },
		[POL_TIRESIAS] = { 0 },
		[POL_OPTIMUS] = { .elastic = true,
				  .remaining = COPUS_REMAINING_ORACLE,
				  .models = COPUS_MODELS_ORACLE },
		[POL_POLLUX] = { .elastic = true, .picks_batch = true,
				 .models = COPUS_MODELS_LEARNED },
		[POL_COPUS] = { .elastic = true, .picks_batch = true,
				.moves_jobs = true,
				.remaining = COPUS_REMAINING_PREDICT,
				.models = COPUS_MODELS_LEARNED },
	};
	static const struct copus_policy_traits none = { 0 };

	return p == NULL ? &none : &traits[p->kind];
}

static void sc_clear(copus_policy *p)
{
	for (size_t i = 0; i < p->nsc; i++) {
		copus_speedup_destroy(p->sc[i]->sp);
		free(p->sc[i]);
	}
	free(p->sc);
	p->sc = NULL;
	p->nsc = 0;
}

void copus_policy_destroy(copus_policy *p)
{
	if (p == NULL)
		return;
	sc_clear(p);
	copus__state_destroy(p->cs);
	free(p->ts);
	free(p->slots);
	free(p);
}

static bool type_allowed(const copus_job *j, int t)
{
	return j->type_mask == 0 || (j->type_mask >> t) & 1u;
}

/*
 * Consolidated placement of k GPUs for job j given the free GPUs: on one
 * node when one node of an allowed type has room (the fullest such node,
 * to keep whole nodes free), otherwise over the fewest nodes of one type,
 * emptiest first. Nodes marked in 'dist' already hold a multi-node job and
 * are skipped for a multi-node placement (nil when the rule is off). The
 * row is scratch during the search and all zero on failure; COPUS_ERANGE
 * when k does not fit.
 */
/*
 * The usable node of type t with the most free GPUs that is not yet taken
 * (taken[n] != 0) and holds no multi-node job (dist); -1 when none is left.
 */
static int emptiest_node(const copus_cluster *c, const int *fr,
			 const int *dist, int t, const int *taken)
{
	int m = -1;

	for (int n = 0; n < c->num_nodes; n++) {
		if (taken[n] || c->nodes[n].gpu_type != t ||
		    !c->nodes[n].usable || fr[n] <= 0 || (dist && dist[n]))
			continue;
		if (m < 0 || fr[n] > fr[m])
			m = n;
	}
	return m;
}

int copus__place(const copus_cluster *c, const int *fr, const int *dist,
		 uint32_t mask, int k, int *out_row, int *out_type)
{
	int best_t = -1, best_nodes = 0, best_single = -1;

	if (k <= 0)
		return COPUS_EINVAL;
	for (int t = 0; t < c->num_types; t++) {
		int single = -1, avail = 0, nodes = 0, need;

		if (mask != 0 && !((mask >> t) & 1u))
			continue;
		for (int n = 0; n < c->num_nodes; n++) {
			if (c->nodes[n].gpu_type != t || !c->nodes[n].usable)
				continue;
			if (fr[n] >= k &&
			    (single < 0 || fr[n] < fr[single]))
				single = n;
		}
		if (single >= 0) {
			if (best_t < 0 || best_nodes > 1) {
				best_t = t;
				best_nodes = 1;
				best_single = single;
			}
			continue;
		}
		/* Count the nodes a greedy multi-node placement needs. */
		for (int n = 0; n < c->num_nodes; n++)
			if (c->nodes[n].gpu_type == t && c->nodes[n].usable &&
			    fr[n] > 0 && !(dist && dist[n]))
				avail += fr[n];
		if (avail < k)
			continue;
		{
			/* Greedy: repeatedly take the node with the most free
			 * GPUs; out_row serves as the scratch 'taken' mark. */
			for (int n = 0; n < c->num_nodes; n++)
				out_row[n] = 0;
			need = k;
			while (need > 0) {
				int m = emptiest_node(c, fr, dist, t, out_row);

				out_row[m] = 1;
				need -= fr[m];
				nodes++;
			}
		}
		if (best_t < 0 || nodes < best_nodes) {
			best_t = t;
			best_nodes = nodes;
			best_single = -1;
		}
	}
	for (int n = 0; n < c->num_nodes; n++)
		out_row[n] = 0;
	if (best_t < 0)
		return COPUS_ERANGE;
	if (best_single >= 0) {
		out_row[best_single] = k;
	} else {
		int need = k;

		while (need > 0) {
			int m = emptiest_node(c, fr, dist, best_t, out_row);

			out_row[m] = fr[m] < need ? fr[m] : need;
			need -= out_row[m];
		}
	}
	*out_type = best_t;
	return COPUS_OK;
}

/* The usable untaken node of type t with the fewest free GPUs >= p (not
 * holding a multi-node job when dist is given); -1 when none. */
static int tightest_node(const copus_cluster *c, const int *fr,
			 const int *dist, int t, int p, const int *taken)
{
	int m = -1;

	for (int n = 0; n < c->num_nodes; n++) {
		if (taken[n] || c->nodes[n].gpu_type != t ||
		    !c->nodes[n].usable || fr[n] < p || (dist && dist[n]))
			continue;
		if (m < 0 || fr[n] < fr[m])
			m = n;
	}
	return m;
}

int copus__place_equal(const copus_cluster *c, const int *fr, const int *dist,
		       uint32_t mask, int k, int *out_row, int *out_type)
{
	int best_t = -1, best_p = 0, best_m = 0;

	if (k <= 0)
		return COPUS_EINVAL;
	for (int t = 0; t < c->num_types; t++) {
		int most = 0;

		if (mask != 0 && !((mask >> t) & 1u))
			continue;
		for (int n = 0; n < c->num_nodes; n++)
			if (c->nodes[n].gpu_type == t && c->nodes[n].usable &&
			    c->nodes[n].gpus > most)
				most = c->nodes[n].gpus;
		/* The largest share per node that enough nodes have free. */
		for (int p = k < most ? k : most; p >= 1; p--) {
			int m = k / p, have = 0;

			if (k % p != 0)
				continue;
			if (best_t >= 0 && m >= best_m)
				break;
			for (int n = 0; n < c->num_nodes && have < m; n++)
				if (c->nodes[n].gpu_type == t &&
				    c->nodes[n].usable && fr[n] >= p &&
				    !(m > 1 && dist && dist[n]))
					have++;
			if (have >= m) {
				best_t = t;
				best_p = p;
				best_m = m;
				break;
			}
		}
	}
	for (int n = 0; n < c->num_nodes; n++)
		out_row[n] = 0;
	if (best_t < 0)
		return COPUS_ERANGE;
	for (int i = 0; i < best_m; i++) {
		int n = tightest_node(c, fr, best_m > 1 ? dist : NULL, best_t,
				      best_p, out_row);
		out_row[n] = best_p;
	}
	*out_type = best_t;
	return COPUS_OK;
}

/*
 * The same placement as copus__place for many sizes k over one state of
 * the free GPUs: the nodes of each type are sorted once (by free GPUs
 * ascending for the best single-node fit, descending for the greedy
 * multi-node fill), so each size costs a binary search or a short walk.
 */
struct placer {
	const copus_cluster *c;
	const int *fr;
	int *asc;     /* usable nodes grouped by type, free ascending */
	int *desc;    /* multi-node eligible nodes by type, free descending */
	int off_asc[COPUS_MAX_GPU_TYPES + 1];
	int off_desc[COPUS_MAX_GPU_TYPES + 1];
	long avail[COPUS_MAX_GPU_TYPES];
	uint32_t mask;
};

static const int *cmp_fr;

static int asc_cmp(const void *a, const void *b)
{
	int x = cmp_fr[*(const int *)a], y = cmp_fr[*(const int *)b];

	return x != y ? (x < y ? -1 : 1) :
		(*(const int *)a < *(const int *)b ? -1 : 1);
}

static int desc_cmp(const void *a, const void *b)
{
	int x = cmp_fr[*(const int *)a], y = cmp_fr[*(const int *)b];

	return x != y ? (x > y ? -1 : 1) :
		(*(const int *)a < *(const int *)b ? -1 : 1);
}

static void placer_prep(struct placer *pl, const copus_cluster *c,
			const int *fr, const int *dist, uint32_t mask)
{
	int na = 0, nd = 0;

	pl->c = c;
	pl->fr = fr;
	pl->mask = mask;
	cmp_fr = fr;
	for (int t = 0; t < c->num_types; t++) {
		pl->off_asc[t] = na;
		pl->off_desc[t] = nd;
		pl->avail[t] = 0;
		if (mask != 0 && !((mask >> t) & 1u))
			continue;
		for (int n = 0; n < c->num_nodes; n++) {
			if (c->nodes[n].gpu_type != t || !c->nodes[n].usable)
				continue;
			pl->asc[na++] = n;
			if (fr[n] > 0 && !(dist && dist[n])) {
				pl->desc[nd++] = n;
				pl->avail[t] += fr[n];
			}
		}
		qsort(pl->asc + pl->off_asc[t], (size_t)(na - pl->off_asc[t]),
		      sizeof(int), asc_cmp);
		qsort(pl->desc + pl->off_desc[t],
		      (size_t)(nd - pl->off_desc[t]), sizeof(int), desc_cmp);
	}
	pl->off_asc[c->num_types] = na;
	pl->off_desc[c->num_types] = nd;
}

static int placer_get(const struct placer *pl, int k, int *out_row,
		      int *out_type)
{
	const copus_cluster *c = pl->c;
	const int *fr = pl->fr;
	int best_t = -1, best_nodes = 0, best_single = -1;

	for (int t = 0; t < c->num_types; t++) {
		int lo = pl->off_asc[t], hi = pl->off_asc[t + 1], nodes = 0;
		long need;

		if (pl->mask != 0 && !((pl->mask >> t) & 1u))
			continue;
		/* First node with at least k free GPUs. */
		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (fr[pl->asc[mid]] >= k)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo < pl->off_asc[t + 1]) {
			if (best_t < 0 || best_nodes > 1) {
				best_t = t;
				best_nodes = 1;
				best_single = pl->asc[lo];
			}
			continue;
		}
		if (pl->avail[t] < k)
			continue;
		need = k;
		for (int i = pl->off_desc[t]; need > 0; i++) {
			need -= fr[pl->desc[i]];
			nodes++;
		}
		if (best_t < 0 || nodes < best_nodes) {
			best_t = t;
			best_nodes = nodes;
			best_single = -1;
		}
	}
	for (int n = 0; n < c->num_nodes; n++)
		out_row[n] = 0;
	if (best_t < 0)
		return COPUS_ERANGE;
	if (best_single >= 0) {
		out_row[best_single] = k;
	} else {
		int need = k;

		for (int i = pl->off_desc[best_t]; need > 0; i++) {
			int n = pl->desc[i];

			out_row[n] = fr[n] < need ? fr[n] : need;
			need -= out_row[n];
		}
	}
	*out_type = best_t;
	return COPUS_OK;
}

static int row_sum(const int *r, int N, int *nodes)
{
	int s = 0, nn = 0;

	for (int k = 0; k < N; k++) {
		s += r[k];
		nn += r[k] > 0;
	}
	if (nodes)
		*nodes = nn;
	return s;
}

/* Place job j on k GPUs in the round's free pool and take them. */
static int take(struct round *r, size_t j, int k, const int *dist)
{
	int rc, t;

	rc = copus__place(r->c, r->free, dist, r->jobs[j].type_mask, k,
			  row(r, j), &t);
	if (rc != COPUS_OK)
		return rc;
	r->types[j] = t;
	for (int n = 0; n < r->N; n++)
		r->free[n] -= row(r, j)[n];
	return COPUS_OK;
}

/* Give job j's GPUs back to the pool. */
static void give(struct round *r, size_t j)
{
	for (int n = 0; n < r->N; n++) {
		r->free[n] += row(r, j)[n];
		row(r, j)[n] = 0;
	}
	r->types[j] = -1;
}

/* Is job j's current allocation still valid on usable, allowed nodes? */
static bool alloc_valid(const struct round *r, size_t j)
{
	const copus_job *jb = &r->jobs[j];
	const int *a = cur_row(r, j);
	int s = 0;

	if (!type_allowed(jb, jb->alloc_type))
		return false;
	for (int n = 0; n < r->N; n++) {
		if (a[n] > 0 && !r->c->nodes[n].usable)
			return false;
		s += a[n];
	}
	return s > 0;
}

/* Keep job j on its current allocation (the caller checked validity). */
static void keep(struct round *r, size_t j)
{
	const int *a = cur_row(r, j);

	for (int n = 0; n < r->N; n++) {
		row(r, j)[n] = a[n];
		r->free[n] -= a[n];
	}
	r->types[j] = r->jobs[j].alloc_type;
}

static bool same_as_alloc(const struct round *r, size_t j, const int *rw,
			  int t)
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

/* ---------------------------------------------------------------- fifo */

struct order_key {
	size_t j;
	double k1, k2, k3;
};

static int order_cmp(const void *a, const void *b)
{
	const struct order_key *x = a, *y = b;

	if (x->k1 != y->k1)
		return x->k1 < y->k1 ? -1 : 1;
	if (x->k2 != y->k2)
		return x->k2 < y->k2 ? -1 : 1;
	if (x->k3 != y->k3)
		return x->k3 < y->k3 ? -1 : 1;
	return x->j < y->j ? -1 : x->j > y->j;
}

struct release {
	double when;
	int gpus;
	int type;
};

static int release_cmp(const void *a, const void *b)
{
	const struct release *x = a, *y = b;

	return x->when < y->when ? -1 : x->when > y->when;
}

/*
 * First come first served on the requested GPUs, never preempting, with
 * EASY backfill: when the head of the queue does not fit, it gets a
 * reservation at the time enough GPUs of a type it may use will have been
 * released by running jobs (counted per type, from their remaining times),
 * and a later job may start now if it fits and either ends before that
 * time or uses only GPUs the head will not need.
 */
static int decide_fifo(copus_policy *p, struct round *r, double now,
		       copus_decision *out)
{
	struct order_key *ord = NULL;
	struct release *rel = NULL;
	size_t nrel = 0;
	bool blocked = false;
	double shadow = INFINITY;
	int extra[COPUS_MAX_GPU_TYPES] = { 0 };
	int rc = COPUS_OK;

	(void)p;
	ord = calloc(r->n + 1, sizeof(*ord));
	rel = calloc(r->n + 1, sizeof(*rel));
	if (ord == NULL || rel == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < r->n; j++) {
		const copus_job *jb = &r->jobs[j];

		if (alloc_valid(r, j)) {
			keep(r, j);
			snprintf(out[j].reason, sizeof(out[j].reason),
				 "running");
			rel[nrel].when = now + (jb->remaining >= 0.0 ?
						jb->remaining : INFINITY);
			rel[nrel].gpus = row_sum(row(r, j), r->N, NULL);
			rel[nrel].type = jb->alloc_type;
			nrel++;
		}
		ord[j].j = j;
		ord[j].k1 = -jb->priority;
		ord[j].k2 = jb->submit_time;
		ord[j].k3 = (double)jb->id;
	}
	qsort(ord, r->n, sizeof(*ord), order_cmp);
	qsort(rel, nrel, sizeof(*rel), release_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		int k = jb->elastic ? jb->req_gpus : jb->req_gpus;

		if (r->types[j] >= 0)
			continue;
		if (!blocked) {
			if (take(r, j, k, NULL) == COPUS_OK) {
				snprintf(out[j].reason, sizeof(out[j].reason),
					 "fifo: started in order");
				continue;
			}
			/* The head waits: find its reservation. */
			blocked = true;
			for (int t = 0; t < r->c->num_types; t++) {
				int avail = 0;

				if (!type_allowed(jb, t))
					continue;
				for (int n = 0; n < r->N; n++)
					if (r->c->nodes[n].gpu_type == t &&
					    r->c->nodes[n].usable)
						avail += r->free[n];
				for (size_t q = 0; q <= nrel; q++) {
					double when = q == 0 ? now :
						rel[q - 1].when;

					if (q > 0 && rel[q - 1].type == t)
						avail += rel[q - 1].gpus;
					if (avail >= k && when < shadow) {
						shadow = when;
						for (int u = 0; u < COPUS_MAX_GPU_TYPES; u++)
							extra[u] = 0;
						extra[t] = avail - k;
						break;
					}
				}
			}
			snprintf(out[j].reason, sizeof(out[j].reason),
				 "fifo: head of queue, reserved");
			continue;
		}
		/* Backfill: fits now and does not delay the head. */
		{
			int t_ok = -1;

			if (jb->remaining >= 0.0 &&
			    now + jb->remaining <= shadow)
				t_ok = 1;
			if (take(r, j, k, NULL) == COPUS_OK) {
				int t = r->types[j];

				if (t_ok > 0) {
					snprintf(out[j].reason,
						 sizeof(out[j].reason),
						 "fifo: backfilled, ends early");
				} else if (extra[t] >= k) {
					extra[t] -= k;
					snprintf(out[j].reason,
						 sizeof(out[j].reason),
						 "fifo: backfilled on spare GPUs");
				} else {
					give(r, j);
					snprintf(out[j].reason,
						 sizeof(out[j].reason),
						 "fifo: queued behind reservation");
				}
			} else {
				snprintf(out[j].reason, sizeof(out[j].reason),
					 "fifo: queued, does not fit");
			}
		}
	}
out:
	free(ord);
	free(rel);
	return rc;
}

/* ------------------------------------------------------------ tiresias */

static int ts_cmp(const void *a, const void *b)
{
	const struct tstate *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static struct tstate *ts_find(struct tstate *ts, size_t n, uint64_t id)
{
	struct tstate key = { .id = id };

	if (ts == NULL || n == 0)
		return NULL;
	return bsearch(&key, ts, n, sizeof(*ts), ts_cmp);
}

/*
 * Tiresias' discretised two-queue least-attained-service: a job starts in
 * queue 0 and moves to queue 1 once its attained service reaches the
 * threshold; jobs run in queue order (queue 0 first, first arrived first
 * within a queue) on their requested GPUs as long as GPUs remain, skipping
 * a job that does not fit; a running job that is not chosen is preempted.
 * Chosen jobs keep their placement, new ones get a consolidated one.
 */
static int decide_tiresias(copus_policy *p, struct round *r,
			   copus_decision *out)
{
	struct tstate *nts = NULL;
	struct order_key *ord = NULL;
	bool *run = NULL;
	int left[COPUS_MAX_GPU_TYPES] = { 0 };
	int rc = COPUS_OK;

	nts = calloc(r->n + 1, sizeof(*nts));
	ord = calloc(r->n + 1, sizeof(*ord));
	run = calloc(r->n + 1, sizeof(*run));
	if (nts == NULL || ord == NULL || run == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < r->n; j++) {
		const copus_job *jb = &r->jobs[j];
		struct tstate *old = ts_find(p->ts, p->nts, jb->id);
		int q = jb->attained >= p->prm.tiresias_threshold;

		nts[j].id = jb->id;
		if (old == NULL) {
			nts[j].queue = q;
			nts[j].seq = ++p->seq;
		} else if (old->queue != q) {
			/* Demoted (or promoted) jobs join the queue's tail. */
			nts[j].queue = q;
			nts[j].seq = ++p->seq;
		} else {
			nts[j].queue = old->queue;
			nts[j].seq = old->seq;
		}
		ord[j].j = j;
		ord[j].k1 = nts[j].queue;
		ord[j].k2 = (double)nts[j].seq;
	}
	qsort(ord, r->n, sizeof(*ord), order_cmp);
	for (int n = 0; n < r->N; n++)
		if (r->c->nodes[n].usable)
			left[r->c->nodes[n].gpu_type] += r->c->nodes[n].gpus;
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		int t = -1;

		if (alloc_valid(r, j)) {
			t = jb->alloc_type;
		} else {
			for (int u = 0; u < r->c->num_types; u++)
				if (type_allowed(jb, u) &&
				    left[u] >= jb->req_gpus &&
				    (t < 0 || left[u] > left[t]))
					t = u;
		}
		if (t >= 0 && left[t] >= jb->req_gpus) {
			left[t] -= jb->req_gpus;
			run[j] = true;
		}
	}
	/* Chosen jobs that already run keep their GPUs, then the rest. */
	for (size_t j = 0; j < r->n; j++)
		if (run[j] && alloc_valid(r, j))
			keep(r, j);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;

		if (!run[j] || r->types[j] >= 0)
			continue;
		if (take(r, j, r->jobs[j].req_gpus, NULL) != COPUS_OK)
			run[j] = false;
	}
	for (size_t j = 0; j < r->n; j++)
		snprintf(out[j].reason, sizeof(out[j].reason),
			 "tiresias: queue %d, %s", nts[j].queue,
			 run[j] ? "running" : "waiting");
	qsort(nts, r->n, sizeof(*nts), ts_cmp);
	free(p->ts);
	p->ts = nts;
	p->nts = r->n;
	nts = NULL;
out:
	free(nts);
	free(ord);
	free(run);
	return rc;
}

/* ------------------------------------------------------------- optimus */

/*
 * Predicted seconds per iteration of the job's fixed batch on k GPUs in
 * nodes of g GPUs, from its model; the batch is split as the job would
 * split it (micro-batch capped by max_local, accumulation for the rest).
 */
static double fixed_batch_step(const copus_model *m, double batch, int k,
			       int g)
{
	copus_step_times st;
	int nodes = (k + g - 1) / g;
	double local = ceil(batch / k - 1e-8);
	int accum = (int)ceil(local / m->limits.max_local - 1e-8) - 1;
	double atomic;
	int count;

	if (accum < 0)
		accum = 0;
	if (k == 1 && batch > m->limits.init_batch && accum < 1)
		accum = 1;
	atomic = ceil(local / (accum + 1) - 1e-8);
	count = k * (accum + 1);
	if (atomic > floor(m->limits.max_batch / count))
		atomic = floor(m->limits.max_batch / count);
	if (atomic < 1)
		atomic = 1;
	if (copus_step_time(&m->perf, nodes, k, atomic, accum, &st) != COPUS_OK)
		return INFINITY;
	return st.iter;
}

static const copus_model *job_model(const copus_job *jb, int t)
{
	if (jb->models == NULL || t < 0)
		return NULL;
	return jb->models[t];
}

/*
 * Optimus with an oracle of the remaining work: every job first gets one
 * GPU (in submission order while GPUs last), then GPUs go one at a time to
 * the job whose remaining time falls the most from one more GPU, with the
 * job's requested batch. A job whose size does not change keeps its nodes;
 * the others are placed consolidated, smallest first.
 */
static int decide_optimus(copus_policy *p, struct round *r,
			  copus_decision *out)
{
	int *k = NULL, t = 0, g = 0, left = 0;
	double *gain = NULL, *iters = NULL;
	struct order_key *ord = NULL;
	int rc = COPUS_OK;

	(void)p;
	k = calloc(r->n + 1, sizeof(*k));
	gain = calloc(r->n + 1, sizeof(*gain));
	iters = calloc(r->n + 1, sizeof(*iters));
	ord = calloc(r->n + 1, sizeof(*ord));
	if (k == NULL || gain == NULL || iters == NULL || ord == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	/* Optimus is a single-type policy: it uses the first type. */
	for (int n = 0; n < r->N; n++)
		if (r->c->nodes[n].usable && r->c->nodes[n].gpu_type == t) {
			left += r->c->nodes[n].gpus;
			if (r->c->nodes[n].gpus > g)
				g = r->c->nodes[n].gpus;
		}
	for (size_t j = 0; j < r->n; j++) {
		ord[j].j = j;
		ord[j].k1 = r->jobs[j].submit_time;
		ord[j].k2 = (double)r->jobs[j].id;
	}
	qsort(ord, r->n, sizeof(*ord), order_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		const copus_model *m = job_model(jb, t);
		double treq;

		if (left < 1 || !type_allowed(jb, t))
			continue;
		k[j] = 1;
		left--;
		if (m == NULL || jb->remaining < 0.0) {
			iters[j] = 1.0;
		} else {
			treq = fixed_batch_step(m, jb->req_batch > 0 ?
						jb->req_batch :
						m->limits.init_batch,
						jb->req_gpus, g);
			iters[j] = jb->remaining / treq;
		}
	}
	for (;;) {
		size_t best = r->n;

		if (left < 1)
			break;
		for (size_t j = 0; j < r->n; j++) {
			const copus_job *jb = &r->jobs[j];
			const copus_model *m = job_model(jb, t);
			double b;

			gain[j] = 0.0;
			if (k[j] == 0 || k[j] + 1 > jb->max_gpus || m == NULL)
				continue;
			b = jb->req_batch > 0 ? jb->req_batch :
				m->limits.init_batch;
			gain[j] = (fixed_batch_step(m, b, k[j], g) -
				   fixed_batch_step(m, b, k[j] + 1, g)) *
				  iters[j];
			if (!(gain[j] > 0.0))
				gain[j] = 0.0;
			if (gain[j] > 0.0 && (best == r->n ||
					      gain[j] > gain[best]))
				best = j;
		}
		if (best == r->n)
			break;
		k[best]++;
		left--;
	}
	for (size_t j = 0; j < r->n; j++) {
		const copus_job *jb = &r->jobs[j];

		if (k[j] > 0 && alloc_valid(r, j) &&
		    jb->alloc_type == t &&
		    row_sum(cur_row(r, j), r->N, NULL) == k[j])
			keep(r, j);
	}
	for (size_t j = 0; j < r->n; j++) {
		ord[j].j = j;
		ord[j].k1 = k[j];
		ord[j].k2 = r->jobs[j].submit_time;
		ord[j].k3 = 0;
	}
	qsort(ord, r->n, sizeof(*ord), order_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;

		if (k[j] > 0 && r->types[j] < 0 &&
		    take(r, j, k[j], NULL) != COPUS_OK)
			k[j] = 0;
		snprintf(out[j].reason, sizeof(out[j].reason),
			 "optimus: %d GPUs by marginal gain", k[j]);
	}
out:
	free(k);
	free(gain);
	free(iters);
	free(ord);
	return rc;
}

/* -------------------------------------------------------------- pollux */

static struct scache *sc_get(copus_policy *p, uint64_t id, int t,
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
	if (s->sp != NULL && memcmp(&s->model, m, sizeof(*m)) == 0)
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

struct pollux {
	struct round *r;
	struct pjob *pj;
	double p;
	double scale; /* nodes / GPUs: a node's worth of GPUs is speedup 1 */
	int fair;
	int *dist;    /* per node: multi-node jobs on it */
	int *tmp;
	struct placer pl;
};

double copus__power_util(double v, double p)
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
	int nodes, k = row_sum(rw, px->r->N, &nodes);
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
	return copus__power_util(s, px->p);
}

static void dist_recount(struct pollux *px, size_t skip)
{
	struct round *r = px->r;

	for (int n = 0; n < r->N; n++)
		px->dist[n] = 0;
	for (size_t j = 0; j < r->n; j++) {
		int nodes;

		if (j == skip)
			continue;
		row_sum(row(r, j), r->N, &nodes);
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
	struct round *r = px->r;
	const copus_job *jb = &r->jobs[j];
	int *cur = row(r, j), cur_t = r->types[j];
	double cur_v, best_v;
	int best_t = cur_t, best_k = -1, g = r->max_node_gpus;
	bool from_alloc = false;

	cur_v = pollux_term(px, j, cur, cur_t);
	best_v = cur_v;
	for (int n = 0; n < r->N; n++)
		px->tmp[n] = cur[n];
	give(r, j);
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
	if (alloc_valid(r, j)) {
		const int *a = cur_row(r, j);
		bool fits = true;
		int nodes;

		row_sum(a, r->N, &nodes);
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
	placer_prep(&px->pl, r->c, r->free, px->dist, jb->type_mask);
	for (int k = 1; k <= px->pj[j].cap; k++) {
		int t;
		double v;

		if (k > 2 * g && k % g != 0 && k != px->pj[j].cap)
			continue;
		if (placer_get(&px->pl, k, cur, &t) != COPUS_OK)
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
		r->types[j] = row_sum(cur, r->N, NULL) > 0 ? cur_t : -1;
	} else if (best_k == 0) {
		for (int n = 0; n < r->N; n++)
			cur[n] = 0;
		r->types[j] = -1;
	} else if (best_k == -2) {
		memcpy(cur, cur_row(r, j), (size_t)r->N * sizeof(int));
		r->types[j] = jb->alloc_type;
		from_alloc = true;
	} else {
		placer_get(&px->pl, best_k, cur, &best_t);
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

/*
 * Greedy construction from an empty cluster: at each step the job whose
 * move to a larger allocation gains the most objective per added GPU
 * takes it. Then coordinate-descent sweeps re-place each job given the
 * others until nothing improves. The same sweeps run from last round's
 * allocations, and the better of the two states wins.
 */
static int pollux_search(struct pollux *px, int sweeps_max)
{
	struct round *r = px->r;
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
		if (alloc_valid(r, j))
			keep(r, j);
	/* Drop multi-node jobs that break the one-per-node rule. */
	for (size_t j = 0; j < r->n; j++) {
		int nodes;

		row_sum(row(r, j), r->N, &nodes);
		if (nodes < 2)
			continue;
		dist_recount(px, j);
		for (int n = 0; n < r->N; n++)
			if (row(r, j)[n] > 0 && px->dist[n]) {
				give(r, j);
				break;
			}
	}
	for (int s = 0; s < sweeps_max; s++) {
		bool changed = false;

		for (size_t j = 0; j < r->n; j++)
			changed |= pollux_improve(px, j, NULL);
		if (!changed)
			break;
	}
	v1 = pollux_total(px);
	memcpy(saved, r->rows, sz * sizeof(int));
	memcpy(saved_types, r->types, r->n * sizeof(int));
	memcpy(saved_free, r->free, (size_t)r->N * sizeof(int));
	/* Start 2: greedy from empty. */
	for (size_t j = 0; j < r->n; j++)
		give(r, j);
	for (;;) {
		size_t bj = r->n;
		int bk = 0, bt = -1, g = r->max_node_gpus;
		double bgain = 0.0;

		for (size_t j = 0; j < r->n; j++) {
			int cur_k = row_sum(row(r, j), r->N, NULL);
			double cur_v = pollux_term(px, j, row(r, j),
						   r->types[j]);
			int *rw = row(r, j);

			if (cur_k >= px->pj[j].cap)
				continue;
			/* Re-place j from scratch at every larger size. */
			for (int n = 0; n < r->N; n++)
				r->free[n] += rw[n];
			dist_recount(px, j);
			placer_prep(&px->pl, r->c, r->free, px->dist,
				    r->jobs[j].type_mask);
			for (int k = cur_k + 1; k <= px->pj[j].cap; k++) {
				int t;
				double v, gpk;

				if (k > 2 * g && k % g != 0 &&
				    k != px->pj[j].cap)
					continue;
				if (placer_get(&px->pl, k, cand, &t) !=
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
		give(r, bj);
		dist_recount(px, bj);
		if (copus__place(r->c, r->free, px->dist,
				 r->jobs[bj].type_mask, bk, row(r, bj),
				 &bt) != COPUS_OK)
			break;
		r->types[bj] = bt;
		for (int n = 0; n < r->N; n++)
			r->free[n] -= row(r, bj)[n];
	}
	for (int s = 0; s < sweeps_max; s++) {
		bool changed = false;

		for (size_t j = 0; j < r->n; j++)
			changed |= pollux_improve(px, j, NULL);
		if (!changed)
			break;
	}
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

static int decide_pollux(copus_policy *p, struct round *r, double now,
			 copus_decision *out)
{
	struct pollux px = { .r = r, .p = p->prm.fairness_p };
	struct order_key *ord = NULL;
	struct round sorted = *r;
	copus_job *sjobs = NULL;
	int *scur = NULL;
	int rc = COPUS_OK;
	size_t nj = r->n;

	if (nj == 0)
		return COPUS_OK;
	/* Jobs in Pollux's order: least attained service, then oldest. */
	ord = calloc(nj, sizeof(*ord));
	sjobs = calloc(nj, sizeof(*sjobs));
	scur = malloc(nj * (size_t)r->N * sizeof(int));
	px.pj = calloc(nj, sizeof(*px.pj));
	px.dist = calloc((size_t)r->N, sizeof(int));
	px.tmp = calloc((size_t)r->N, sizeof(int));
	px.pl.asc = calloc((size_t)r->N, sizeof(int));
	px.pl.desc = calloc((size_t)r->N, sizeof(int));
	if (!ord || !sjobs || !scur || !px.pj || !px.dist || !px.tmp ||
	    !px.pl.asc || !px.pl.desc) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < nj; j++) {
		ord[j].j = j;
		ord[j].k1 = r->jobs[j].attained;
		ord[j].k2 = r->jobs[j].submit_time;
		ord[j].k3 = (double)r->jobs[j].id;
	}
	qsort(ord, nj, sizeof(*ord), order_cmp);
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
		int t = row_sum(cur_row(&sorted, i), r->N, NULL) > 0 ?
			jb->alloc_type : -1;
		const copus_model *m;

		if (t < 0)
			for (int u = 0; u < r->c->num_types && t < 0; u++)
				if (type_allowed(jb, u) && job_model(jb, u))
					t = u;
		m = job_model(jb, t);
		if (age < 0)
			age = 0;
		pj->factor = fmax(age - jb->restarts * p->prm.restart_delay,
				  0.0) / (age + p->prm.restart_delay);
		if (!jb->elastic) {
			pj->cap = jb->req_gpus;
		} else {
			int grow = 2 * jb->max_gpus_had;

			pj->cap = jb->max_gpus;
			if (grow < 1)
				grow = 1;
			if (pj->cap > grow)
				pj->cap = grow;
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
	rc = pollux_search(&px, p->prm.search_rounds > 0 ?
			   p->prm.search_rounds : 4);
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
			int k = row_sum(row(&sorted, i), r->N, NULL);

			memcpy(tmp_rows + j * (size_t)r->N, row(&sorted, i),
			       (size_t)r->N * sizeof(int));
			tmp_types[j] = sorted.types[i];
			/* A rigid job runs on its request or not at all. */
			if (!jb->elastic && k != 0 && k != jb->req_gpus) {
				for (int n = 0; n < r->N; n++)
					r->free[n] += row(&sorted, i)[n];
				memset(tmp_rows + j * (size_t)r->N, 0,
				       (size_t)r->N * sizeof(int));
				tmp_types[j] = -1;
			}
			snprintf(out[j].reason, sizeof(out[j].reason),
				 "pollux: %d GPUs, restart factor %.2f", k,
				 px.pj[i].factor);
		}
		memcpy(r->rows, tmp_rows, nj * (size_t)r->N * sizeof(int));
		memcpy(r->types, tmp_types, nj * sizeof(int));
		free(tmp_rows);
		free(tmp_types);
	}
out:
	free(ord);
	free(sjobs);
	free(scur);
	free(px.pj);
	free(px.dist);
	free(px.tmp);
	free(px.pl.asc);
	free(px.pl.desc);
	return rc;
}

/* Batch plan of a decided job: the requested batch, or the best one. */
static void fill_batch(const struct round *r, size_t j, bool optimise,
		       copus_decision *d)
{
	const copus_job *jb = &r->jobs[j];
	const copus_model *m = job_model(jb, d->gpu_type);
	copus_batch_plan plan;
	int nodes = d->num_slots;

	if (d->gpus == 0)
		return;
	if (optimise && !jb->fixed_batch && m != NULL &&
	    copus_best_batch(m, nodes, d->gpus, &plan) == COPUS_OK) {
		d->batch = (int)plan.batch;
		d->local = plan.local;
		d->accum_steps = plan.accum_steps;
		return;
	}
	d->batch = (int)jb->req_batch;
	if (m != NULL && jb->req_batch > 0) {
		double local = ceil(jb->req_batch / d->gpus - 1e-8);
		int accum = (int)ceil(local / m->limits.max_local - 1e-8) - 1;

		if (accum < 0)
			accum = 0;
		d->accum_steps = accum;
		d->local = (int)ceil(local / (accum + 1) - 1e-8);
	}
}

/*
 * The dense policies' rows, in node order, as slots: res->off[j] and
 * res->cnt[j] index job j's slots in res->slots.
 */
static int rows_to_slots(struct round *r, struct copus__result *res)
{
	res->used = 0;
	for (size_t j = 0; j < r->n; j++) {
		const int *rw = row(r, j);

		res->off[j] = res->used;
		res->cnt[j] = 0;
		for (int k = 0; k < r->N; k++) {
			if (rw[k] == 0)
				continue;
			if (rw[k] < 0 || res->used == res->cap)
				return COPUS_ESTATE;
			res->slots[res->used].node = k;
			res->slots[res->used].gpus = rw[k];
			res->used++;
			res->cnt[j]++;
		}
	}
	return COPUS_OK;
}

/* Does job j's decided cell equal its current allocation? mark is N zeros. */
static bool same_cell(const copus_job *jb, const copus_slot *sl, int ns,
		      int type, int *mark)
{
	bool same = true;
	int have = 0, want = 0;

	for (int i = 0; i < jb->alloc_slots; i++) {
		mark[jb->alloc[i].node] += jb->alloc[i].gpus;
		have += jb->alloc[i].gpus;
	}
	for (int i = 0; i < ns; i++) {
		if (mark[sl[i].node] != sl[i].gpus)
			same = false;
		want += sl[i].gpus;
	}
	for (int i = 0; i < jb->alloc_slots; i++)
		mark[jb->alloc[i].node] = 0;
	if (have != want)
		return false;
	return want == 0 || (same && type == jb->alloc_type);
}

int copus_policy_decide(copus_policy *p, const copus_cluster *c,
			const copus_job *jobs, size_t n, double now,
			copus_decision *out)
{
	struct round r = { 0 };
	struct copus__result res = { 0 };
	size_t total = 0;
	int rc;

	if (p == NULL || (n > 0 && out == NULL) || !isfinite(now))
		return COPUS_EINVAL;
	if ((rc = copus_policy_check_input(c, jobs, n, NULL)) != COPUS_OK)
		return rc;
	r.c = c;
	r.jobs = jobs;
	r.n = n;
	r.N = c->num_nodes;
	r.types = malloc((n + 1) * sizeof(int));
	r.free = calloc((size_t)r.N, sizeof(int));
	res.off = malloc((n + 1) * sizeof(*res.off));
	res.cnt = calloc(n + 1, sizeof(*res.cnt));
	res.reasons = calloc(n + 1, sizeof(*res.reasons));
	if (!r.types || !r.free || !res.off || !res.cnt || !res.reasons) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < n; j++)
		r.types[j] = -1;
	for (int k = 0; k < r.N; k++) {
		r.free[k] = c->nodes[k].usable ? c->nodes[k].gpus : 0;
		r.total_gpus += r.free[k];
		if (r.free[k] > r.max_node_gpus)
			r.max_node_gpus = r.free[k];
		total += (size_t)c->nodes[k].gpus;
	}
	/* Every slot holds at least one GPU: total bounds them all. */
	if (p->cap_slots < total + 1) {
		copus_slot *s = realloc(p->slots, (total + 1) * sizeof(*s));

		if (s == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		p->slots = s;
		p->cap_slots = total + 1;
	}
	res.slots = p->slots;
	res.cap = p->cap_slots;
	res.types = r.types;
	for (size_t j = 0; j < n; j++) {
		memset(&out[j], 0, sizeof(out[j]));
		out[j].id = jobs[j].id;
		out[j].gpu_type = -1;
	}
	if (p->kind != POL_COPUS) {
		/* The baselines work on dense rows of GPUs per node. */
		r.rows = calloc(n * (size_t)r.N + 1, sizeof(int));
		r.cur = calloc(n * (size_t)r.N + 1, sizeof(int));
		if (!r.rows || !r.cur) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < n; j++)
			for (int i = 0; i < jobs[j].alloc_slots; i++)
				r.cur[j * (size_t)r.N + jobs[j].alloc[i].node] +=
					jobs[j].alloc[i].gpus;
	}
	switch (p->kind) {
	case POL_FIFO:
		rc = decide_fifo(p, &r, now, out);
		break;
	case POL_TIRESIAS:
		rc = decide_tiresias(p, &r, out);
		break;
	case POL_OPTIMUS:
		rc = decide_optimus(p, &r, out);
		break;
	case POL_POLLUX:
		rc = decide_pollux(p, &r, now, out);
		break;
	case POL_COPUS:
		rc = copus__decide_copus(p->cs, &p->prm, c, jobs, n, now, &res);
		for (size_t j = 0; rc == COPUS_OK && j < n; j++) {
			res.reasons[j][63] = '\0';
			snprintf(out[j].reason, sizeof(out[j].reason), "%s",
				 res.reasons[j]);
		}
		break;
	}
	if (rc == COPUS_OK && p->kind != POL_COPUS)
		rc = rows_to_slots(&r, &res);
	if (rc != COPUS_OK)
		goto out;
	/*
	 * Whatever a policy computed, the caller gets nothing that does not
	 * fit: every slot on a usable node of one allowed type, no node over
	 * its GPUs. A violation is a bug in a policy, reported as such.
	 */
	memset(r.free, 0, (size_t)r.N * sizeof(int));
	for (size_t j = 0; j < n; j++) {
		const copus_slot *sl = res.slots + res.off[j];
		int t = r.types[j];

		if (res.cnt[j] < 0 || res.off[j] + (size_t)res.cnt[j] > res.used) {
			rc = COPUS_ESTATE;
			goto out;
		}
		for (int i = 0; i < res.cnt[j]; i++) {
			int k = sl[i].node;

			if (k < 0 || k >= r.N || sl[i].gpus <= 0 ||
			    (i > 0 && k <= sl[i - 1].node) ||
			    !c->nodes[k].usable ||
			    c->nodes[k].gpu_type != t ||
			    !type_allowed(&jobs[j], t) ||
			    (r.free[k] += sl[i].gpus) > c->nodes[k].gpus) {
				rc = COPUS_ESTATE;
				goto out;
			}
		}
	}
	memset(r.free, 0, (size_t)r.N * sizeof(int));
	for (size_t j = 0; j < n; j++) {
		copus_decision *d = &out[j];

		d->slots = res.slots + res.off[j];
		d->num_slots = res.cnt[j];
		for (int i = 0; i < d->num_slots; i++)
			d->gpus += d->slots[i].gpus;
		d->gpu_type = d->gpus > 0 ? r.types[j] : -1;
		d->changed = !same_cell(&jobs[j], d->slots, d->num_slots,
					d->gpu_type, r.free);
		fill_batch(&r, j, p->kind == POL_POLLUX || p->kind == POL_COPUS,
			   d);
	}
out:
	free(r.rows);
	free(r.cur);
	free(r.types);
	free(r.free);
	free(res.off);
	free(res.cnt);
	free(res.reasons);
	return rc;
}
