/*
 * fifo: first come first served on the requested GPUs with EASY backfill
 * over the jobs' remaining times; rigid, never preempts, keeps nothing
 * between rounds.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <copus/policy.h>

#include "ops.h"
#include "round.h"

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
static int fifo_decide(void *state, const copus_policy_params *prm,
		       const copus_cluster *c, const copus_job *jobs,
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


const struct copus__policy_ops copus__fifo_ops = {
	.name = "fifo",
	.traits = { .remaining = COPUS_REMAINING_ORACLE },
	.decide = fifo_decide,
};
