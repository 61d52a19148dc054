/*
 * Phase 2 of a sched/copus round, its first part (round-input.h): the
 * policy's input, from the snapshot's plain copies of the jobs: each job's
 * bounds, type, cell held for a rescale, models and fair share; which rigid
 * pending jobs the policy may start; then the estimates and remaining times
 * of round-models.c and the time limits; and the helpers of round.h it
 * reads a job's hint with (its models, claims and remaining time). No Slurm
 * header, no Slurm call, no lock: tests/test-plugin-round runs it without
 * slurmctld.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/policy.h"
#include "round-input.h"
#include "round-models.h"
#include "round-plans.h"
#include "round-users.h"
#include "round.h"
#include "sched_copus.h"

static int64_t _type_mask(struct copus__round *r,
			  const struct copus__round_job *j,
			  const struct copus__memo *in);
static bool _ever_fits(struct copus__round *r, const struct copus__round_job *j,
		       int64_t mask);
static int _rj_order(const void *a, const void *b);
static bool _reserve(struct copus__round *r, const struct copus__round_job *j,
		     int64_t mask, int *avail, int *pick);
static void _input_job(struct copus__sched *s, struct copus__round *r, int i,
		       uint32_t mask);
static void _time_limits(struct copus__round *r);

/*
 * The mask of GPU types a job accepts (0: any; -1: none here). An elastic
 * job's type is the one of its request when the plugin first saw it (in):
 * the plugin sets the type of the request whenever it resizes the job.
 */
static int64_t _type_mask(struct copus__round *r,
			  const struct copus__round_job *j,
			  const struct copus__memo *in)
{
	const char *req = !j->rigid && in && in->type_known ? in->type_req :
							       j->type_req;
	uint32_t m = 0;
	int k, t;

	if (j->ntypes) {
		for (k = 0; k < j->ntypes; k++)
			if ((t = copus__type_index(r, j->types[k])) >= 0)
				m |= 1u << t;
		/* None of its types exists here: it can never run. */
		return m ? (int64_t)m : -1;
	}
	if (req[0]) {
		t = copus__type_index(r, req);
		return t >= 0 ? (int64_t)(1u << t) : -1;
	}
	return 0;
}

/* Sorts pointers to a round's jobs: partition, priority, submission, id. */
static int _rj_order(const void *a, const void *b)
{
	const struct copus__round_job *x =
		*(const struct copus__round_job *const *)a;
	const struct copus__round_job *y =
		*(const struct copus__round_job *const *)b;

	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Whether a rigid pending job could ever run on its eligible nodes. The
 * count stops at the nodes it asks for: on a large cluster those are
 * usually among the first nodes, and a round asks this of every rigid
 * pending job.
 */
static bool _ever_fits(struct copus__round *r, const struct copus__round_job *j,
		       int64_t mask)
{
	int i, n = 0;

	for (i = 0; i < r->nnodes && n < j->nodes_req; i++) {
		if (j->eligible[i] && r->cfg[i] >= j->gpn_req &&
		    (!mask || (mask & (1LL << r->nodes[i].gpu_type))))
			n++;
	}
	return n >= j->nodes_req;
}

/*
 * Compares what a running job's model claims with the progress the plugin saw
 * it make in its current run (at least `least` seconds of it); a change of
 * verdict goes to j->claim_flip for the log. The verdict stays while the job
 * waits and until its next run has been measured.
 */
static void _check_claim(struct copus__memo *in, struct copus__round_job *j,
			 const copus_model *const *models, int least)
{
	double span = (double)(in->seen_t1 - in->seen_t0), was, ratio;

	if (in->seen_rc != j->restarts || span < least ||
	    j->alloc_type < 0 || !models[j->alloc_type])
		return;
	ratio = copus__claim_ratio(models[j->alloc_type], j->nalloc,
				   j->cur_gpus,
				   (in->seen_p1 - in->seen_p0) / span);
	was = in->claim_ratio;
	in->claim_ratio = ratio;
	if ((was > COPUS__DISTRUST) != (ratio > COPUS__DISTRUST))
		j->claim_flip = ratio > COPUS__DISTRUST ? ratio : -ratio;
	j->claim_span = span;
}

/* Fills the policy's input entry of rj[i]. */
static void _input_job(struct copus__sched *s, struct copus__round *r, int i,
		       uint32_t mask)
{
	struct copus__round_job *j = &r->rj[i];
	copus_job *c = &r->jobs[r->njobs];
	struct copus__memo *in = copus__memo_find(s, j->id);
	struct copus__rescale *x;
	int t;

	memset(c, 0, sizeof(*c));
	c->id = j->id;
	c->elastic = !j->rigid;
	if (j->rigid) {
		c->req_gpus = j->running ? j->cur_gpus :
					   j->gpn_req * j->nodes_req;
		c->min_gpus = c->max_gpus = c->req_gpus;
	} else {
		c->min_gpus = j->emin;
		c->max_gpus = j->emax;
		c->req_gpus = in && in->req_gpus > 0 ? in->req_gpus :
			      j->gpn_req * j->nodes_req;
		if (c->req_gpus < 1)
			c->req_gpus = j->emin;
	}
	if (r->user_left && !j->rigid) {
		/* Not past its user's cap: a running job may grow by what
		 * the user has left, a pending one start with that much. */
		int room = r->user_left[j->user_grp] +
			   (j->running ? j->cur_gpus : 0);

		if (c->max_gpus > room)
			c->max_gpus = room > c->min_gpus ? room : c->min_gpus;
		if (c->req_gpus > c->max_gpus)
			c->req_gpus = c->max_gpus;
	}
	/*
	 * Requeued for a rescale: it restarts on the cell the round that
	 * asked it decided (its GPU count and type), as a move does, until
	 * the jobs that round moved have given up their GPUs and one round
	 * interval more (copus__rescale_pinned); after that the policy
	 * decides anew. A policy deciding afresh at once sees a pending job,
	 * with no restart to weigh against its cell, and the GPUs of its cell
	 * still held: it would start it smaller or on another type, and the
	 * next round move it again.
	 */
	j->pin_gpus = 0;
	j->pin_type = -1;
	x = j->running ? NULL : copus__rescale_find(s, j->id);
	if (x && !x->gave_up && x->to >= c->min_gpus && x->to <= c->max_gpus &&
	    (t = copus__type_index(r, x->type)) >= 0 &&
	    (!mask || (mask >> t & 1u)) &&
	    copus__rescale_pinned(s, x, j->end, r->when)) {
		c->min_gpus = c->max_gpus = c->req_gpus = x->to;
		mask = 1u << t;
		j->pin_gpus = x->to;
		j->pin_type = t;
	}
	c->type_mask = mask;
	c->submit_time = (double)j->submit;
	c->restarts = j->restarts;
	c->attained = in ? in->attained : 0.0;
	c->priority = (double)j->priority;
	c->remaining = -1.0;
	c->max_gpus_had = in ? in->max_had : 0;
	c->fairshare = j->fs_slurm > 0.0 ? j->fs_slurm :
		       copus__usage_factor(&s->usage, j->uid, r->nusers);
	/* Known from its first start on: its own hint may say more later. */
	c->granularity = j->multiple;
	if (in && in->have_hint) {
		const copus_model **ptrs = &r->model_ptrs[(size_t)r->njobs *
							  r->ntypes];

		c->req_batch = in->hint.limits.init_batch;
		c->remaining = copus__remaining(&in->hint, in->rate);
		/* A model over several GPUs per replica: whole replicas. */
		if (in->hint.granularity > 0)
			c->granularity = in->hint.granularity;
		if (copus__hint_models(&in->hint, r->type_ptrs, r->ntypes,
				       &r->models[(size_t)r->njobs * r->ntypes],
				       ptrs) > 0)
			c->models = (const copus_model *const *)ptrs;
		if (c->models && j->running)
			_check_claim(in, j, ptrs, s->params.hint_check);
		if (in->claim_ratio > COPUS__DISTRUST)
			c->models = NULL;
	}
	if (j->running) {
		c->alloc = j->alloc;
		c->alloc_slots = j->nalloc;
		c->alloc_type = j->alloc_type;
		/* Never moved within its copus_restart_delay (round.c): the
		 * policy plans the others on the GPUs it leaves. */
		c->keep = copus__round_held(s, r, j);
	} else {
		c->alloc_type = -1;
	}
	if (in && in->have_hint && in->hint.has_model && !j->rigid) {
		copus__round_input_plans(s, r, j, c, in);
		if (!j->ncells && !j->running) {
			/* Nowhere to run: not the policy's to start. */
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: no cell of its %d-%d GPUs has a plan "
				 "that fits its model", c->min_gpus,
				 c->max_gpus);
			j->reason = j->reason_buf;
			j->job = -1;
			return;
		}
	}
	j->job = r->njobs;
	r->rj_of[r->njobs++] = i;
}

/*
 * Whether a rigid job fits the free GPUs left in avail[] (usable nodes it
 * may use, of a type it accepts), best fit; if so they are taken from
 * avail[]. pick: room for the nodes picked, one per node at most.
 */
static bool _reserve(struct copus__round *r, const struct copus__round_job *j,
		     int64_t mask, int *avail, int *pick)
{
	int k, i, got = 0;

	for (k = 0; k < j->nodes_req; k++) {
		int best = -1;

		for (i = 0; i < r->nnodes; i++) {
			bool taken = false;
			int m;

			for (m = 0; m < got; m++)
				taken |= pick[m] == i;
			if (taken || !r->nodes[i].usable || !j->eligible[i] ||
			    avail[i] < j->gpn_req ||
			    (mask && !(mask & (1LL << r->nodes[i].gpu_type))))
				continue;
			if (best < 0 || avail[i] < avail[best])
				best = i;
		}
		if (best < 0)
			break;
		pick[got++] = best;
	}
	if (got == j->nodes_req)
		for (k = 0; k < got; k++)
			avail[pick[k]] -= j->gpn_req;
	return got == j->nodes_req;
}

/*
 * Builds the policy's input: every running GPU job, every pending elastic
 * job, and per partition the rigid pending jobs in priority order as long
 * as they fit the free GPUs together (each the GPUs of its type on nodes it
 * may use), plus the first that does not when it heads its partition (the
 * policy may shrink elastic jobs for it). All the rigid jobs handed to the
 * policy can start at once, so the policy cannot start one before a job of
 * higher priority; the others wait with a reason.
 */
void copus__round_input(struct copus__sched *s, struct copus__round *r)
{
	struct copus__round_job **order;
	int n = 0, i, t, part = -1, *avail, *pick;
	bool blocked = false, head = true;

	copus__round_users(s, r);
	for (t = 0; t < r->ntypes; t++)
		r->type_ptrs[t] = r->types[t];
	r->jobs = calloc(r->nrj + 1, sizeof(*r->jobs));
	r->rj_of = calloc(r->nrj + 1, sizeof(*r->rj_of));
	r->models = calloc((size_t)(r->nrj + 1) * r->ntypes,
			   sizeof(*r->models));
	r->model_ptrs = calloc((size_t)(r->nrj + 1) * r->ntypes,
			       sizeof(*r->model_ptrs));
	order = calloc(r->nrj + 1, sizeof(*order));
	avail = calloc(r->nnodes + 1, sizeof(*avail));
	pick = calloc(r->nnodes + 1, sizeof(*pick));
	if (!r->jobs || !r->rj_of || !r->models || !r->model_ptrs || !order ||
	    !avail || !pick) {
		snprintf(r->error, sizeof(r->error), "out of memory for the "
			 "policy's input");
		goto out;
	}
	for (i = 0; i < r->nrj; i++) {
		struct copus__round_job *j = &r->rj[i];
		int64_t mask;

		if (j->running && j->rigid)
			continue;
		if (j->running) {
			mask = _type_mask(r, j, copus__memo_find(s, j->id));
			/* It runs where it runs: its own type is allowed. */
			if (mask > 0)
				mask |= 1LL << j->alloc_type;
			_input_job(s, r, i, mask < 0 ? 0 : (uint32_t)mask);
			continue;
		}
		if (j->gpn_req == 0) {
			/* No GPUs: Slurm places it. */
			j->action = COPUS__ACT_START;
			continue;
		}
		mask = _type_mask(r, j, copus__memo_find(s, j->id));
		if (mask < 0) {
			j->reason = "copus: none of its GPU types is in the "
				    "cluster";
			j->never = true;
			continue;
		}
		if (r->user_left &&
		    (j->rigid ? j->gpn_req * j->nodes_req : j->emin) >
			    r->user_left[j->user_grp]) {
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: its user's jobs hold the %d GPUs of "
				 "copus_max_gpus_per_user",
				 s->params.user_cap);
			j->reason = j->reason_buf;
			continue;
		}
		if (j->rigid && !_ever_fits(r, j, mask)) {
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: no %d node(s) it may use have %d "
				 "GPU(s) of its type each", j->nodes_req,
				 j->gpn_req);
			j->reason = j->reason_buf;
			j->never = true;
			continue;
		}
		if (!j->rigid) {
			_input_job(s, r, i, (uint32_t)mask);
			continue;
		}
		order[n++] = j;
	}
	qsort(order, n, sizeof(*order), _rj_order);
	memcpy(avail, r->free, r->nnodes * sizeof(*avail));
	for (i = 0; i < n; i++) {
		struct copus__round_job *j = order[i];
		int64_t mask = _type_mask(r, j, copus__memo_find(s, j->id));

		if (j->part != part) {
			part = j->part;
			blocked = false;
			head = true;
		}
		if (!blocked && !_reserve(r, j, mask, avail, pick)) {
			/* The first job that does not fit ends the list. */
			blocked = true;
			if (head) {
				_input_job(s, r, j - r->rj, (uint32_t)mask);
				continue;
			}
		}
		head = false;
		if (blocked) {
			j->reason = "copus: a job of higher priority in the "
				    "partition starts first";
			continue;
		}
		_input_job(s, r, j - r->rj, (uint32_t)mask);
	}
	copus__round_estimate(s, r);
	copus__round_predict(s, r);
	_time_limits(r);
out:
	free(pick);
	free(avail);
	free(order);
}


/*
 * Every job's time limit goes to the policy as it is (copus_job.time_limit,
 * which backfill plans with). A rigid job's limit also bounds what it can
 * still need: no remaining time, from its hint or the predictor, goes past
 * the end of its limit (a job with no estimate gets that bound). An elastic
 * job's limit holds for each of its runs, and a rescale starts a new one,
 * so it bounds nothing.
 */
static void _time_limits(struct copus__round *r)
{
	int i;

	for (i = 0; i < r->njobs; i++) {
		const struct copus__round_job *j = &r->rj[r->rj_of[i]];
		copus_job *c = &r->jobs[i];
		double left;

		c->time_limit = j->limit_s > 0 ? (double)j->limit_s :
				j->limit_s < 0 ? INFINITY : 0.0;
		if (j->limit_s <= 0 || !j->rigid || j->silent || j->fixed)
			continue;
		left = (double)j->limit_s;
		if (j->running)
			left -= (double)(r->when - j->start);
		if (left < 0.0)
			left = 0.0;
		if (c->remaining < 0.0 || c->remaining > left)
			c->remaining = left;
	}
}

int copus__type_index(const struct copus__round *r, const char *name)
{
	int t;

	for (t = 0; t < r->ntypes; t++)
		if (!strcmp(r->types[t], name))
			return t;
	return -1;
}

int copus__hint_models(const copus_hint *h, const char *const *type_names,
		       int ntypes, copus_model *models,
		       const copus_model **ptrs)
{
	const copus_perf_params *dflt = NULL;
	int t, i, n = 0;

	for (i = 0; i < h->n_perf; i++)
		if (!strcmp(h->perf[i].type, "default"))
			dflt = &h->perf[i].perf;
	for (t = 0; t < ntypes; t++) {
		const copus_perf_params *pp = dflt;

		ptrs[t] = NULL;
		for (i = 0; type_names && type_names[t] && i < h->n_perf; i++)
			if (!strcmp(h->perf[i].type, type_names[t]))
				pp = &h->perf[i].perf;
		if (!pp)
			continue;
		memset(&models[t], 0, sizeof(models[t]));
		models[t].perf = *pp;
		models[t].grad = h->grad;
		models[t].limits = h->limits;
		if (copus_model_check(&models[t]) != COPUS_OK)
			continue;
		ptrs[t] = &models[t];
		n++;
	}
	return n;
}

double copus__claim_ratio(const copus_model *m, int nodes, int gpus,
			  double seen_rate)
{
	copus_batch_plan plan;
	double claimed;

	if (!m || nodes < 1 || gpus < nodes || !(m->limits.init_batch > 0.0) ||
	    copus_best_batch(m, nodes, gpus, &plan) != COPUS_OK)
		return 0.0;
	claimed = plan.goodput / m->limits.init_batch;
	if (!(claimed > 0.0) || !isfinite(claimed))
		return 0.0;
	if (!(seen_rate > 0.0))
		return HUGE_VAL;
	return claimed / seen_rate;
}

double copus__remaining(const copus_hint *h, double rate)
{
	double left;

	if (!(h->target > 0.0) || !(rate > 0.0) || !isfinite(rate))
		return -1.0;
	left = h->target - h->progress;
	if (left <= 0.0)
		return 0.0;
	return left / rate;
}

bool copus__round_held(const struct copus__sched *s,
		       const struct copus__round *r,
		       const struct copus__round_job *j)
{
	return j->restarts > 0 && r->when - j->start < s->params.restart_delay;
}
