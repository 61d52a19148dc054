/*
 * fifo: first come first served on the requested GPUs with EASY backfill
 * over the jobs' remaining times; rigid, never preempts, keeps nothing
 * between rounds.
 *
 * fifo:arena is the first come first served of Arena's simulator (Crius,
 * EuroSys'26), rule for rule, so that copus-sim reproduces its published
 * figures: no backfill, each job on its requested type and count at the
 * best locality (whole nodes, or one node), spread over the nodes with the
 * most free GPUs; a new job starts when it fits and no older job of its
 * type waits; the waiting jobs are tried again, in order, only in a round
 * after some job ended, and per type only up to the first that does not
 * fit; a job whose requested cell is not among its feasible cells
 * (copus_job.cells) is dropped, never started.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "ops.h"
#include "place.h"
#include "round.h"

/* A job fifo:arena has decided before. */
struct seen {
	uint64_t id;
	bool dropped; /* its requested cell does not fit it: never started */
};

/* What fifo:arena remembers between rounds (NULL state: plain fifo). */
struct fifo_arena {
	struct seen *seen;   /* sorted by id */
	size_t nseen, capseen;
	uint64_t *run;       /* the jobs running after the last round, sorted */
	size_t nrun, caprun;
};

static int fifo_create(const char *opts, void **state)
{
	*state = NULL;
	if (opts == NULL)
		return COPUS_OK;
	if (strcmp(opts, "arena") != 0)
		return COPUS_EINVAL;
	*state = calloc(1, sizeof(struct fifo_arena));
	return *state != NULL ? COPUS_OK : COPUS_ENOMEM;
}

static void fifo_destroy(void *state)
{
	struct fifo_arena *a = state;

	if (a == NULL)
		return;
	free(a->seen);
	free(a->run);
	free(a);
}

/* A running job's GPUs, free again when it is expected to end. */
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
static int plain_decide(const copus_cluster *c, const copus_job *jobs,
			size_t njobs, double now, struct copus__result *res)
{
	struct copus__round *r = NULL;
	struct copus__order_key *ord = NULL;
	struct release *rel = NULL;
	size_t nrel = 0;
	bool blocked = false;
	double shadow = INFINITY;
	int extra[COPUS_MAX_GPU_TYPES] = { 0 };
	int rc = copus__round_create(c, jobs, njobs, &r);

	if (rc != COPUS_OK)
		return rc;
	ord = calloc(r->n + 1, sizeof(*ord));
	rel = calloc(r->n + 1, sizeof(*rel));
	if (ord == NULL || rel == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < r->n; j++) {
		const copus_job *jb = &r->jobs[j];

		if (copus__alloc_valid(r, j)) {
			copus__keep(r, j);
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "running");
			rel[nrel].when = now + (jb->remaining >= 0.0 ?
						jb->remaining : INFINITY);
			rel[nrel].gpus = copus__row_sum(row(r, j), r->N, NULL);
			rel[nrel].type = jb->alloc_type;
			nrel++;
		}
		ord[j].j = j;
		ord[j].k1 = -jb->priority;
		ord[j].k2 = jb->submit_time;
		ord[j].k3 = (double)jb->id;
	}
	qsort(ord, r->n, sizeof(*ord), copus__order_cmp);
	qsort(rel, nrel, sizeof(*rel), release_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		int k = jb->elastic ? jb->req_gpus : jb->req_gpus;

		if (r->types[j] >= 0)
			continue;
		if (!blocked) {
			if (copus__take(r, j, k) == COPUS_OK) {
				snprintf(res->reasons[j], sizeof(res->reasons[j]),
					 "fifo: started in order");
				continue;
			}
			/* The head waits: find its reservation. */
			blocked = true;
			for (int t = 0; t < r->c->num_types; t++) {
				int avail = 0;

				if (!copus__type_allowed(jb, t))
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
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "fifo: head of queue, reserved");
			continue;
		}
		/* Backfill: fits now and does not delay the head. */
		{
			int t_ok = -1;

			if (jb->remaining >= 0.0 &&
			    now + jb->remaining <= shadow)
				t_ok = 1;
			if (copus__take(r, j, k) == COPUS_OK) {
				int t = r->types[j];

				if (t_ok > 0) {
					snprintf(res->reasons[j],
						 sizeof(res->reasons[j]),
						 "fifo: backfilled, ends early");
				} else if (extra[t] >= k) {
					extra[t] -= k;
					snprintf(res->reasons[j],
						 sizeof(res->reasons[j]),
						 "fifo: backfilled on spare GPUs");
				} else {
					copus__give(r, j);
					snprintf(res->reasons[j],
						 sizeof(res->reasons[j]),
						 "fifo: queued behind reservation");
				}
			} else {
				snprintf(res->reasons[j], sizeof(res->reasons[j]),
					 "fifo: queued, does not fit");
			}
		}
	}
out:
	rc = copus__round_finish(r, rc, res);
	free(ord);
	free(rel);
	return rc;
}

/* ------------------------------------------------------------ arena */

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int seen_cmp(const void *a, const void *b)
{
	return id_cmp(&((const struct seen *)a)->id,
		      &((const struct seen *)b)->id);
}

/* The entry of id among the sorted seen[n], or NULL. */
static struct seen *seen_find(struct seen *seen, size_t n, uint64_t id)
{
	struct seen key = { .id = id };

	return n == 0 ? NULL : bsearch(&key, seen, n, sizeof(*seen), seen_cmp);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	void *q;
	size_t nc = *cap ? *cap : 64;

	if (need <= *cap)
		return COPUS_OK;
	while (nc < need)
		nc *= 2;
	q = realloc(*p, nc * size);
	if (q == NULL)
		return COPUS_ENOMEM;
	*p = q;
	*cap = nc;
	return COPUS_OK;
}

/* A job's requested cell at the best locality of its type. */
struct ask {
	int type;  /* -1: no usable node of an allowed type */
	int per;   /* GPUs on each node */
	int nodes;
	bool fits; /* the cell is among the job's feasible cells */
};

static struct ask requested(const copus_cluster *c, const copus_job *jb)
{
	struct ask a = { -1, 0, 0, false };
	int cap = 0, k = jb->req_gpus;

	/* An Arena job names one GPU type: the first its mask allows. */
	for (int t = 0; t < c->num_types && a.type < 0; t++)
		if (copus__type_allowed(jb, t))
			for (int n = 0; n < c->num_nodes; n++)
				if (c->nodes[n].gpu_type == t &&
				    c->nodes[n].usable)
					a.type = t;
	if (a.type < 0)
		return a;
	for (int n = 0; n < c->num_nodes; n++)
		if (c->nodes[n].gpu_type == a.type && c->nodes[n].usable &&
		    c->nodes[n].gpus > cap)
			cap = c->nodes[n].gpus;
	if (cap == 0 || (k > cap && k % cap != 0))
		return a;
	a.per = k <= cap ? k : cap;
	a.nodes = k / a.per;
	a.fits = jb->cells == NULL;
	for (int i = 0; i < jb->num_cells && !a.fits; i++)
		a.fits = jb->cells[i].gpu_type == a.type &&
			 jb->cells[i].gpus == k &&
			 jb->cells[i].nodes == a.nodes;
	return a;
}

/* Start job j on its requested cell if the free GPUs fr allow it. */
static bool arena_start(const copus_cluster *c, const struct ask *a, size_t j,
			int *fr, int *nodes, struct copus__result *res)
{
	if (copus__place_emptiest(c, fr, a->type, a->per, a->nodes,
				  nodes) != COPUS_OK)
		return false;
	res->off[j] = res->used;
	res->cnt[j] = a->nodes;
	res->types[j] = a->type;
	for (int i = 0; i < a->nodes; i++) {
		fr[nodes[i]] -= a->per;
		res->slots[res->used].node = nodes[i];
		res->slots[res->used].gpus = a->per;
		res->used++;
	}
	return true;
}

/* Does job jb hold GPUs the cluster still lets it use? */
static bool arena_running(const copus_cluster *c, const copus_job *jb)
{
	int held = 0;

	for (int i = 0; i < jb->alloc_slots; i++) {
		const copus_slot *s = &jb->alloc[i];

		if (s->gpus == 0)
			continue;
		if (!c->nodes[s->node].usable ||
		    !copus__type_allowed(jb, jb->alloc_type))
			return false;
		held += s->gpus;
	}
	return held > 0;
}

static int arena_decide(struct fifo_arena *st, const copus_cluster *c,
			const copus_job *jobs, size_t n,
			struct copus__result *res)
{
	struct copus__order_key *ord = calloc(n + 1, sizeof(*ord));
	struct ask *ask = calloc(n + 1, sizeof(*ask));
	int *fr = calloc((size_t)c->num_nodes + 1, sizeof(int));
	int *nodes = calloc((size_t)c->num_nodes + 1, sizeof(int));
	uint64_t *now_run = calloc(n + 1, sizeof(*now_run));
	unsigned char *kind = calloc(n + 1, 1);
	bool blocked[COPUS_MAX_GPU_TYPES] = { false };
	bool waiting[COPUS_MAX_GPU_TYPES] = { false };
	size_t nq = 0, nrun = 0, nseen = st->nseen;
	bool ended = false;
	int rc = COPUS_ENOMEM;

	enum { NEW, WAITING, DROPPED };
	if (!ord || !ask || !fr || !nodes || !now_run || !kind)
		goto out;
	for (int k = 0; k < c->num_nodes; k++)
		fr[k] = c->nodes[k].usable ? c->nodes[k].gpus : 0;
	for (size_t j = 0; j < n; j++)
		res->off[j] = 0;
	/* The running jobs keep their GPUs. */
	for (size_t j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];

		if (!arena_running(c, jb))
			continue;
		res->off[j] = res->used;
		res->types[j] = jb->alloc_type;
		for (int i = 0; i < jb->alloc_slots; i++) {
			if (jb->alloc[i].gpus == 0)
				continue;
			fr[jb->alloc[i].node] -= jb->alloc[i].gpus;
			res->slots[res->used++] = jb->alloc[i];
			res->cnt[j]++;
		}
		snprintf(res->reasons[j], sizeof(res->reasons[j]),
			 "fifo:arena: running");
		now_run[nrun++] = jb->id;
	}
	/* Has a job that ran after the last round ended (or gone)? */
	qsort(now_run, nrun, sizeof(*now_run), id_cmp);
	for (size_t i = 0; i < st->nrun && !ended; i++)
		ended = bsearch(&st->run[i], now_run, nrun, sizeof(*now_run),
				id_cmp) == NULL;
	for (size_t j = 0; j < n; j++) {
		const struct seen *s;

		if (res->types[j] >= 0)
			continue;
		s = seen_find(st->seen, nseen, jobs[j].id);
		kind[j] = s == NULL ? NEW : s->dropped ? DROPPED : WAITING;
		ask[j] = requested(c, &jobs[j]);
		ord[nq].j = j;
		ord[nq].k1 = jobs[j].submit_time;
		ord[nq].k2 = (double)jobs[j].id;
		nq++;
	}
	qsort(ord, nq, sizeof(*ord), copus__order_cmp);
	/* The waiting jobs, in order, in a round after a job ended. */
	for (size_t i = 0; i < nq; i++) {
		size_t j = ord[i].j;
		const struct ask *a = &ask[j];

		if (kind[j] != WAITING)
			continue;
		if (a->type < 0) {
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "fifo:arena: no node of its type");
			continue;
		}
		if (ended && !blocked[a->type]) {
			if (arena_start(c, a, j, fr, nodes, res)) {
				snprintf(res->reasons[j],
					 sizeof(res->reasons[j]),
					 "fifo:arena: started after waiting");
				continue;
			}
			blocked[a->type] = true;
		}
		waiting[a->type] = true;
		snprintf(res->reasons[j], sizeof(res->reasons[j]),
			 ended ? "fifo:arena: waiting, does not fit" :
			 "fifo:arena: waiting for a job to end");
	}
	/* The new jobs, in order: started unless an older one waits. */
	for (size_t i = 0; i < nq; i++) {
		size_t j = ord[i].j;
		const struct ask *a = &ask[j];

		if (kind[j] == WAITING)
			continue;
		if (kind[j] == DROPPED || !a->fits) {
			kind[j] = DROPPED;
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "fifo:arena: dropped, request does not fit");
			continue;
		}
		if (!waiting[a->type] &&
		    arena_start(c, a, j, fr, nodes, res)) {
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "fifo:arena: started on arrival");
			continue;
		}
		waiting[a->type] = true;
		snprintf(res->reasons[j], sizeof(res->reasons[j]),
			 "fifo:arena: waiting behind its type");
	}
	/* Remember the new jobs (dropped or not) and who runs now. */
	for (size_t j = 0; j < n; j++) {
		if (seen_find(st->seen, nseen, jobs[j].id) != NULL)
			continue;
		if (grow((void **)&st->seen, &st->capseen, st->nseen + 1,
			 sizeof(*st->seen)) != COPUS_OK)
			goto out;
		st->seen[st->nseen].id = jobs[j].id;
		st->seen[st->nseen].dropped = res->types[j] < 0 &&
					      kind[j] == DROPPED;
		st->nseen++;
	}
	qsort(st->seen, st->nseen, sizeof(*st->seen), seen_cmp);
	nrun = 0;
	for (size_t j = 0; j < n; j++)
		if (res->types[j] >= 0)
			now_run[nrun++] = jobs[j].id;
	qsort(now_run, nrun, sizeof(*now_run), id_cmp);
	free(st->run);
	st->run = now_run;
	st->nrun = nrun;
	now_run = NULL;
	rc = COPUS_OK;
out:
	free(ord);
	free(ask);
	free(fr);
	free(nodes);
	free(now_run);
	free(kind);
	return rc;
}

static int fifo_decide(void *state, const copus_policy_params *prm,
		       const copus_cluster *c, const copus_job *jobs,
		       size_t njobs, double now, struct copus__result *res)
{
	(void)prm;
	if (state != NULL)
		return arena_decide(state, c, jobs, njobs, res);
	return plain_decide(c, jobs, njobs, now, res);
}

const struct copus__policy_ops copus__fifo_ops = {
	.name = "fifo",
	.traits = { .remaining = COPUS_REMAINING_ORACLE },
	.create = fifo_create,
	.destroy = fifo_destroy,
	.decide = fifo_decide,
};
