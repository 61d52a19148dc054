/*
 * tiresias: two-queue least attained service on the requested GPUs
 * (Tiresias, NSDI'19, in its discretised form); rigid, preempts.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <copus/policy.h>

#include "ops.h"
#include "round.h"

/* Tiresias' memory of a job: its queue and its place in that queue. */
struct tstate {
	uint64_t id;
	int queue;
	uint64_t seq;
};

/* What the policy keeps between rounds: every job's queue, by id. */
struct tiresias {
	struct tstate *ts;
	size_t nts;
	uint64_t seq; /* the last place handed out in a queue */
};

static int tiresias_create(const char *opts, void **state)
{
	if (opts != NULL)
		return COPUS_EINVAL;
	*state = calloc(1, sizeof(struct tiresias));
	return *state == NULL ? COPUS_ENOMEM : COPUS_OK;
}

static void tiresias_destroy(void *state)
{
	struct tiresias *ts = state;

	if (ts == NULL)
		return;
	free(ts->ts);
	free(ts);
}

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
static int tiresias_decide(void *state, const copus_policy_params *prm,
			   const copus_cluster *c, const copus_job *jobs,
			   size_t njobs, double now, struct copus__result *res)
{
	struct tiresias *ts = state;
	struct copus__round *r = NULL;
	struct tstate *nts = NULL;
	struct copus__order_key *ord = NULL;
	bool *run = NULL;
	int left[COPUS_MAX_GPU_TYPES] = { 0 };
	int rc = copus__round_create(c, jobs, njobs, &r);

	if (rc != COPUS_OK)
		return rc;
	nts = calloc(r->n + 1, sizeof(*nts));
	ord = calloc(r->n + 1, sizeof(*ord));
	run = calloc(r->n + 1, sizeof(*run));
	if (nts == NULL || ord == NULL || run == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < r->n; j++) {
		const copus_job *jb = &r->jobs[j];
		struct tstate *old = ts_find(ts->ts, ts->nts, jb->id);
		int q = jb->attained >= prm->tiresias_threshold;

		nts[j].id = jb->id;
		if (old == NULL) {
			nts[j].queue = q;
			nts[j].seq = ++ts->seq;
		} else if (old->queue != q) {
			/* Demoted (or promoted) jobs join the queue's tail. */
			nts[j].queue = q;
			nts[j].seq = ++ts->seq;
		} else {
			nts[j].queue = old->queue;
			nts[j].seq = old->seq;
		}
		ord[j].j = j;
		ord[j].k1 = nts[j].queue;
		ord[j].k2 = (double)nts[j].seq;
	}
	qsort(ord, r->n, sizeof(*ord), copus__order_cmp);
	for (int n = 0; n < r->N; n++)
		if (r->c->nodes[n].usable)
			left[r->c->nodes[n].gpu_type] += r->c->nodes[n].gpus;
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		int t = -1;

		if (copus__alloc_valid(r, j)) {
			t = jb->alloc_type;
		} else {
			for (int u = 0; u < r->c->num_types; u++)
				if (copus__type_allowed(jb, u) &&
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
		if (run[j] && copus__alloc_valid(r, j))
			copus__keep(r, j);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;

		if (!run[j] || r->types[j] >= 0)
			continue;
		if (copus__take(r, j, r->jobs[j].req_gpus) != COPUS_OK)
			run[j] = false;
	}
	for (size_t j = 0; j < r->n; j++)
		snprintf(res->reasons[j], sizeof(res->reasons[j]),
			 "tiresias: queue %d, %s", nts[j].queue,
			 run[j] ? "running" : "waiting");
	qsort(nts, r->n, sizeof(*nts), ts_cmp);
	free(ts->ts);
	ts->ts = nts;
	ts->nts = r->n;
	nts = NULL;
out:
	rc = copus__round_finish(r, rc, res);
	free(nts);
	free(ord);
	free(run);
	return rc;
}


const struct copus__policy_ops copus__tiresias_ops = {
	.name = "tiresias",
	.create = tiresias_create,
	.destroy = tiresias_destroy,
	.decide = tiresias_decide,
};
