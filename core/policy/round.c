/*
 * The dense round of the baseline policies: rows of GPUs per node for the
 * decision and for the current allocations, the free GPUs, and the steps
 * the baselines share (take, give, keep).
 */
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "ops.h"
#include "round.h"

static void round_destroy(struct copus__round *r)
{
	if (r == NULL)
		return;
	copus__placer_release(&r->pl);
	free(r->types);
	free(r->free);
	free(r->rows);
	free(r->cur);
	free(r);
}

int copus__round_create(const copus_cluster *c, const copus_job *jobs,
			size_t n, struct copus__round **out)
{
	struct copus__round *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (r == NULL)
		return COPUS_ENOMEM;
	r->c = c;
	r->jobs = jobs;
	r->n = n;
	r->N = c->num_nodes;
	r->types = malloc((n + 1) * sizeof(int));
	r->free = calloc((size_t)r->N, sizeof(int));
	r->rows = calloc(n * (size_t)r->N + 1, sizeof(int));
	r->cur = calloc(n * (size_t)r->N + 1, sizeof(int));
	if (!r->types || !r->free || !r->rows || !r->cur ||
	    copus__placer_init(&r->pl, r->N) != COPUS_OK) {
		round_destroy(r);
		return COPUS_ENOMEM;
	}
	for (size_t j = 0; j < n; j++)
		r->types[j] = -1;
	for (int k = 0; k < r->N; k++) {
		r->free[k] = c->nodes[k].usable ? c->nodes[k].gpus : 0;
		r->total_gpus += r->free[k];
		if (r->free[k] > r->max_node_gpus)
			r->max_node_gpus = r->free[k];
	}
	for (size_t j = 0; j < n; j++)
		for (int i = 0; i < jobs[j].alloc_slots; i++)
			r->cur[j * (size_t)r->N + jobs[j].alloc[i].node] +=
				jobs[j].alloc[i].gpus;
	*out = r;
	return COPUS_OK;
}

/* The rows, in node order, as res's slots, and the rows' types. */
static int round_result(const struct copus__round *r,
			struct copus__result *res)
{
	res->used = 0;
	for (size_t j = 0; j < r->n; j++) {
		const int *rw = r->rows + j * (size_t)r->N;

		res->types[j] = r->types[j];
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

int copus__round_finish(struct copus__round *r, int rc,
			struct copus__result *res)
{
	if (rc == COPUS_OK)
		rc = round_result(r, res);
	round_destroy(r);
	return rc;
}

int copus__row_sum(const int *r, int N, int *nodes)
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

int copus__take(struct copus__round *r, size_t j, int k)
{
	int rc, t;

	copus__placer_prep(&r->pl, r->c, r->free, NULL, r->jobs[j].type_mask);
	rc = copus__placer_get(&r->pl, k, row(r, j), &t);
	if (rc != COPUS_OK)
		return rc;
	r->types[j] = t;
	for (int n = 0; n < r->N; n++)
		r->free[n] -= row(r, j)[n];
	return COPUS_OK;
}

void copus__give(struct copus__round *r, size_t j)
{
	for (int n = 0; n < r->N; n++) {
		r->free[n] += row(r, j)[n];
		row(r, j)[n] = 0;
	}
	r->types[j] = -1;
}

bool copus__alloc_valid(const struct copus__round *r, size_t j)
{
	const copus_job *jb = &r->jobs[j];
	const int *a = cur_row(r, j);
	int s = 0;

	if (!copus__type_allowed(jb, jb->alloc_type))
		return false;
	for (int n = 0; n < r->N; n++) {
		if (a[n] > 0 && !r->c->nodes[n].usable)
			return false;
		s += a[n];
	}
	return s > 0;
}

void copus__keep(struct copus__round *r, size_t j)
{
	const int *a = cur_row(r, j);

	for (int n = 0; n < r->N; n++) {
		row(r, j)[n] = a[n];
		r->free[n] -= a[n];
	}
	r->types[j] = r->jobs[j].alloc_type;
}

int copus__order_cmp(const void *a, const void *b)
{
	const struct copus__order_key *x = a, *y = b;

	if (x->k1 != y->k1)
		return x->k1 < y->k1 ? -1 : 1;
	if (x->k2 != y->k2)
		return x->k2 < y->k2 ? -1 : 1;
	if (x->k3 != y->k3)
		return x->k3 < y->k3 ? -1 : 1;
	return x->j < y->j ? -1 : x->j > y->j;
}
