/*
 * optimus: GPUs by the marginal gain in remaining time (Optimus,
 * EuroSys'18), with an oracle of each job's remaining work and its
 * requested batch; elastic, keeps nothing between rounds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <copus/model.h>
#include <copus/policy.h>

#include "ops.h"
#include "round.h"

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

/*
 * Optimus with an oracle of the remaining work: every job first gets one
 * GPU (in submission order while GPUs last), then GPUs go one at a time to
 * the job whose remaining time falls the most from one more GPU, with the
 * job's requested batch. A job whose size does not change keeps its nodes;
 * the others are placed consolidated, smallest first.
 */
static int optimus_decide(void *state, const copus_policy_params *prm,
			  const copus_cluster *c, const copus_job *jobs,
			  size_t njobs, double now, struct copus__result *res)
{
	struct copus__round *r = NULL;
	int *k = NULL, t = 0, g = 0, left = 0;
	double *gain = NULL, *iters = NULL;
	struct copus__order_key *ord = NULL;
	int rc = copus__round_create(c, jobs, njobs, &r);

	if (rc != COPUS_OK)
		return rc;
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
	qsort(ord, r->n, sizeof(*ord), copus__order_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		const copus_model *m = copus__job_model(jb, t);
		int kmin = jb->min_gpus > 1 ? jb->min_gpus : 1;
		double treq;

		/* A job runs on at least its minimum, or waits. */
		if (left < kmin || !copus__type_allowed(jb, t))
			continue;
		k[j] = kmin;
		left -= kmin;
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
			const copus_model *m = copus__job_model(jb, t);
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

		if (k[j] > 0 && copus__alloc_valid(r, j) &&
		    jb->alloc_type == t &&
		    copus__row_sum(cur_row(r, j), r->N, NULL) == k[j])
			copus__keep(r, j);
	}
	for (size_t j = 0; j < r->n; j++) {
		ord[j].j = j;
		ord[j].k1 = k[j];
		ord[j].k2 = r->jobs[j].submit_time;
		ord[j].k3 = 0;
	}
	qsort(ord, r->n, sizeof(*ord), copus__order_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;

		if (k[j] > 0 && r->types[j] < 0 &&
		    copus__take(r, j, k[j]) != COPUS_OK)
			k[j] = 0;
		snprintf(res->reasons[j], sizeof(res->reasons[j]),
			 "optimus: %d GPUs by marginal gain", k[j]);
	}
out:
	rc = copus__round_finish(r, rc, res);
	free(k);
	free(gain);
	free(iters);
	free(ord);
	return rc;
}

const struct copus__policy_ops copus__optimus_ops = {
	.name = "optimus",
	.traits = { .elastic = true, .remaining = COPUS_REMAINING_ORACLE,
		    .models = COPUS_MODELS_ORACLE },
	.decide = optimus_decide,
};
