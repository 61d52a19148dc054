/*
 * Phase 2 of a sched/copus round, the decision (see round.h): the policy's
 * input (round-input.c, with the estimates and remaining times of
 * round-models.c, the users' usage and cap of round-users.c and the input of
 * a job whose hint describes its model of round-plans.c), the policy's
 * decisions, and an action and a reason per job. No Slurm header, no Slurm
 * call, no lock: tests/test-plugin-round runs it without slurmctld.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "round-input.h"
#include "round-models.h"
#include "round-users.h"
#include "round.h"
#include "sched_copus.h"

/* The policy's decisions */
static void _decide(struct copus__sched *s, struct copus__round *r);

/* Decisions into actions and reasons */
static bool _policy_moves(struct copus__sched *s);
static bool _rj_same_cell(struct copus__round *r,
			  const struct copus__round_job *j);
static void _plan(struct copus__sched *s, struct copus__round *r);

void copus__round_decide(struct copus__sched *s, struct copus__round *r)
{
	copus__round_user_room(s, r);
	copus__round_speeds(s, r);
	copus__round_input(s, r);
	_decide(s, r);
	copus__round_hold_pins(r);
	_plan(s, r);
}

uint32_t copus__priority_cut(uint32_t *prio, int n, int max_jobs)
{
	int lo = 0, hi = n - 1, k = max_jobs - 1;

	if (max_jobs <= 0 || n <= max_jobs)
		return 0;
	/*
	 * Selection by three-way partition, highest first: [lo, lt) above
	 * the pivot, [lt, gt] equal to it, (gt, hi] below; then on into the
	 * part that holds position k. Many equal priorities (the common case)
	 * end it at once.
	 */
	while (lo < hi) {
		uint32_t a = prio[lo], b = prio[lo + (hi - lo) / 2], c = prio[hi];
		uint32_t pivot = a < b ? (b < c ? b : (a < c ? c : a))
				       : (a < c ? a : (b < c ? c : b));
		int lt = lo, gt = hi, i = lo;

		while (i <= gt) {
			uint32_t v = prio[i];

			if (v > pivot) {
				prio[i++] = prio[lt];
				prio[lt++] = v;
			} else if (v < pivot) {
				prio[i] = prio[gt];
				prio[gt--] = v;
			} else {
				i++;
			}
		}
		if (k < lt)
			hi = lt - 1;
		else if (k > gt)
			lo = gt + 1;
		else
			return pivot;
	}
	return prio[k];
}

void copus__round_free(struct copus__round *r)
{
	int i;

	for (i = 0; r->rj && i < r->nrj; i++) {
		free(r->rj[i].cells);
		free(r->rj[i].plans);
		r->rj[i].cells = NULL;
		r->rj[i].plans = NULL;
		r->rj[i].plan = NULL;
		r->rj[i].ncells = 0;
	}
	free(r->jobs);
	free(r->models);
	free(r->model_ptrs);
	free(r->est_models);
	free(r->estimated);
	free(r->rj_of);
	free(r->dec);
	free(r->pin_slots);
	r->pin_slots = NULL;
	free(r->user_left);
	r->user_left = NULL;
	r->jobs = NULL;
	r->models = NULL;
	r->model_ptrs = NULL;
	r->est_models = NULL;
	r->estimated = NULL;
	r->rj_of = NULL;
	r->dec = NULL;
	r->njobs = 0;
}

/*
 * Runs the policy on the input. Why it did not run, if it did not, is in
 * r->error.
 */
static void _decide(struct copus__sched *s, struct copus__round *r)
{
	copus_cluster c;
	long bad = -1;
	int rc;

	/* A snapshot cut short (r->error) decides nothing. */
	if (!r->njobs || !s->policy || r->error[0])
		return;
	memset(&c, 0, sizeof(c));
	c.num_nodes = r->nnodes;
	c.nodes = r->nodes;
	c.num_types = r->ntypes;
	c.type_names = r->type_ptrs;
	/* For a job that has run nowhere yet: the faster GPUs first. */
	c.type_speeds = r->speeds;
	r->dec = calloc(r->njobs + 1, sizeof(*r->dec));
	if (!r->dec) {
		snprintf(r->error, sizeof(r->error), "out of memory for the "
			 "decisions");
		return;
	}
	/* The cost of a move it counts: the configured one, or what the
	 * last rescales were measured to cost. */
	s->stats.restart_cost_counted =
		s->params.restart_measured
			? copus__costs_mean(&s->costs, s->params.restart_cost)
			: s->params.restart_cost;
	copus_policy_set_restart_delay(s->policy,
				       s->stats.restart_cost_counted);
	rc = copus_policy_decide(s->policy, &c, r->jobs, r->njobs,
				 (double)r->when, r->dec);
	if (rc != COPUS_OK) {
		copus_policy_check_input(&c, r->jobs, r->njobs, &bad);
		snprintf(r->error, sizeof(r->error), "the %s policy failed "
			 "(%s) on job %u", s->params.policy, copus_strerror(rc),
			 bad >= 0 ? (unsigned)r->jobs[bad].id : 0u);
		return;
	}
	r->decided = 1;
}

/*
 * Whether the policy moves a running job to other nodes in the same shape
 * only when that is worth its restart (copus: to make room for a job that
 * does not fit otherwise). Other policies may place a job anew every round;
 * for them such a move is not worth a restart and is left undone.
 */
static bool _policy_moves(struct copus__sched *s)
{
	return copus_policy_traits(s->policy)->moves_jobs;
}

static bool _rj_same_cell(struct copus__round *r,
			  const struct copus__round_job *j)
{
	return j->per_node * j->num_nodes == j->cur_gpus &&
	       j->num_nodes == j->nalloc && j->dtype == j->alloc_type;
}

/*
 * Whether what the round can ask Slurm for a running job (the same GPU
 * count on each node: the decision's largest such part) goes where the
 * policy's decision goes: a policy that places GPUs unevenly over nodes
 * (pollux: 2 + 1) may decide a count Slurm cannot be asked for, and the
 * count asked for instead may be the job's own, or less than it has where
 * the policy meant it to grow. Such a restart would gain nothing.
 */
static bool _expressible(const copus_decision *d,
			 const struct copus__round_job *j)
{
	int want = 0, got = j->per_node * j->num_nodes, k;

	for (k = 0; k < d->num_slots; k++)
		want += d->slots[k].gpus;
	if (want == got)
		return true;
	if (want > j->cur_gpus)
		return got > j->cur_gpus;
	if (want < j->cur_gpus)
		return got < j->cur_gpus;
	return false;
}

/* Adds sign x the GPUs of decision d to the per-node counts. */
static void _take(int *per_node, const copus_decision *d, int sign)
{
	int k;

	for (k = 0; d->gpu_type >= 0 && k < d->num_slots; k++)
		per_node[d->slots[k].node] += sign * d->slots[k].gpus;
}

/*
 * What a held job may be placed on (copus__round_hold_pins): per node,
 * GPUs Slurm has free less what the round's decisions start pending jobs
 * on, and no more than the GPUs no decision takes.
 */
static void _room(const struct copus__round *r, int *avail, int *spare)
{
	int i, k;

	for (k = 0; k < r->nnodes; k++) {
		avail[k] = r->nodes[k].usable ? r->free[k] : 0;
		spare[k] = r->nodes[k].usable ? r->nodes[k].gpus : 0;
	}
	/*
	 * A running job's decision is not taken from the free GPUs (it holds
	 * its own already), only from the GPUs no decision takes: one the
	 * round grows in place on a node counts there through that cap.
	 */
	for (i = 0; i < r->njobs; i++) {
		if (!r->rj[r->rj_of[i]].running)
			_take(avail, &r->dec[i], -1);
		_take(spare, &r->dec[i], -1);
	}
	for (k = 0; k < r->nnodes; k++)
		if (avail[k] > spare[k])
			avail[k] = spare[k];
}

void copus__round_hold_pins(struct copus__round *r)
{
	copus_cluster c = { .num_nodes = r->nnodes, .nodes = r->nodes,
			    .num_types = r->ntypes };
	int *avail = NULL, *spare = NULL, used = 0, total = 0, i, k;
	copus_slot *even = NULL;

	for (i = 0; r->decided && i < r->njobs; i++)
		if (r->rj[r->rj_of[i]].pin_gpus > 0)
			break;
	if (!r->decided || i == r->njobs)
		return;
	/* A slot holds a GPU at least: a held job's GPUs bound its slots. */
	for (k = i; k < r->njobs; k++)
		total += r->rj[r->rj_of[k]].pin_gpus > 0 ?
				 r->rj[r->rj_of[k]].pin_gpus : 0;
	avail = calloc(r->nnodes + 1, sizeof(*avail));
	spare = calloc(r->nnodes + 1, sizeof(*spare));
	even = calloc(r->nnodes + 1, sizeof(*even));
	free(r->pin_slots);
	r->pin_slots = calloc(total + 1, sizeof(*r->pin_slots));
	if (!avail || !spare || !even || !r->pin_slots)
		goto out;	/* the policy's decisions stay */
	_room(r, avail, spare);
	for (; i < r->njobs; i++) {
		copus_decision *d = &r->dec[i];
		struct copus__round_job *j = &r->rj[r->rj_of[i]];
		int g, n, max_g = 0;

		if (j->pin_gpus <= 0 || j->running)
			continue;
		if (d->gpu_type == j->pin_type &&
		    copus_even_slots(d->slots, d->num_slots, even, &g) * g >=
		    j->pin_gpus)
			continue;
		/* Its own decided GPUs are its to place again. */
		_take(avail, d, 1);
		/* Never a size without a plan (plans.h): fewer GPUs a node,
		 * on more nodes, until one has. */
		for (;;) {
			n = copus_even_fit(&c, avail, j->eligible, j->pin_type,
					   j->pin_gpus, max_g, d->gpu_type >= 0 ?
					   d->slots : NULL, d->num_slots,
					   r->pin_slots + used, &g);
			if (n <= 0 || !j->planned ||
			    copus__plan_find(j->plans, j->ncells, j->pin_type,
					     j->pin_gpus, n))
				break;
			if ((max_g = g - 1) < 1) {
				n = 0;
				break;
			}
		}
		if (n <= 0) {
			_take(avail, d, -1);
			continue;
		}
		d->gpu_type = j->pin_type;
		d->gpus = j->pin_gpus;
		d->slots = r->pin_slots + used;
		d->num_slots = n;
		d->batch = d->local = d->accum_steps = 0;
		d->changed = true;
		snprintf(d->reason, sizeof(d->reason), "restarts on the cell "
			 "it was moved to");
		_take(avail, d, -1);
		used += n;
	}
out:
	free(avail);
	free(spare);
	free(even);
}

/* A held job may start at t: the earliest such time, for the agent. */
static void _wake(struct copus__round *r, time_t t)
{
	if (!r->wake || t < r->wake)
		r->wake = t;
}

/*
 * The holds on a pending job that has run before, in the order _plan
 * applies them: the nodes' registrations settling after a restart, a run
 * of it from before slurmctld's restart to clear on its nodes, the clear's
 * KillWait, and the release gap after its requeue.
 */
enum _hold { HOLD_NONE, HOLD_SETTLING, HOLD_STRAYS, HOLD_CLEARING,
	     HOLD_RELEASE };

static const char *const _hold_reason[] = {
	[HOLD_SETTLING] = "copus: has run before, restarts once the nodes "
			  "that registered have settled",
	[HOLD_STRAYS] = "copus: started before slurmctld restarted; its "
			"nodes forget that run first",
	[HOLD_CLEARING] = "copus: started before slurmctld restarted; "
			  "restarts in a moment",
	[HOLD_RELEASE] = "copus: requeued, restarts in a moment",
};

time_t copus__round_release(const struct copus__round_job *j)
{
	time_t t = j->end + COPUS__RELEASE_GAP;

	if (j->requeued && j->requeued + 1 < t)
		t = j->requeued + 1;
	return t;
}

/* The job's first hold, and in *until when it ends. */
static enum _hold _hold(const struct copus__round *r,
			const struct copus__round_job *j, time_t *until)
{
	if ((j->restarts > 0 || j->ran) && r->when < r->reg_quiet) {
		*until = r->reg_quiet;
		return HOLD_SETTLING;
	}
	/* Its nodes are told now; it may start a gap and KillWait later. */
	if (j->strays) {
		*until = r->when + COPUS__RELEASE_GAP + r->kill_wait;
		return HOLD_STRAYS;
	}
	if (j->cleared && r->when < j->cleared + COPUS__RELEASE_GAP +
				   r->kill_wait) {
		*until = j->cleared + COPUS__RELEASE_GAP + r->kill_wait;
		return HOLD_CLEARING;
	}
	if (j->restarts > 0 && r->when < copus__round_release(j)) {
		*until = copus__round_release(j);
		return HOLD_RELEASE;
	}
	*until = 0;
	return HOLD_NONE;
}

/*
 * Whether a job held only for its release gap may start now on the nodes
 * decided for it: it was requeued for the rescale x, whose run it ended
 * (no run since), the decision places it on none of that run's nodes, and
 * only the plugin starts jobs (sched_interval=-1), which start it there
 * alone (actions.c). The credential slurmd refuses is one created in the
 * second the node revoked the job's last one or before: a node outside the
 * run revoked none since that run started, and every earlier run ended
 * before it started, in an earlier second than this one.
 */
static bool _early(const struct copus__sched *s, const struct copus__round *r,
		   const struct copus__round_job *j,
		   const struct copus__rescale *x, const copus_decision *d)
{
	if (!s->params.fifo_off || !x || x->gave_up || x->nran < 1 ||
	    x->ran_reconfigs != r->reconfigs || j->restarts != x->rc + 1 ||
	    x->ran_start >= r->when || d->gpu_type < 0 || d->num_slots < 1)
		return false;
	for (int k = 0; k < d->num_slots; k++)
		for (int i = 0; i < x->nran; i++)
			if (d->slots[k].node == x->ran[i])
				return false;
	return true;
}

/* Turns the decisions into actions and reasons (no locks). */
static void _plan(struct copus__sched *s, struct copus__round *r)
{
	/* What Slurm is asked for: the decision's largest even part. */
	copus_slot *even = calloc(r->nnodes + 1, sizeof(*even));
	int i;

	if (!even) {
		snprintf(r->error, sizeof(r->error), "out of memory for the "
			 "decisions' cells");
		r->decided = 0;
		return;
	}

	for (i = 0; r->decided && i < r->njobs; i++) {
		const copus_decision *d = &r->dec[i];
		struct copus__round_job *j = &r->rj[r->rj_of[i]];
		struct copus__memo *in = copus__memo_find(s, j->id);
		struct copus__rescale *x = copus__rescale_find(s, j->id);
		enum _hold hold;
		time_t until;

		if (in)
			snprintf(in->reason, sizeof(in->reason), "%s",
				 d->reason);
		j->dtype = d->gpu_type;
		j->num_nodes = copus_even_slots(d->slots, d->num_slots, even,
						&j->per_node);
		if (j->planned && d->gpu_type >= 0) {
			/* Never a size without a plan (plans.h). */
			j->plan = copus__plan_find(j->plans, j->ncells,
						   j->dtype,
						   j->per_node * j->num_nodes,
						   j->num_nodes);
			j->no_plan = !j->plan && (d->changed || !j->running);
		}
		if (j->running) {
			/* Queued (d->gpu_type < 0): it checkpoints and waits
			 * in the queue for the policy to start it again. */
			if (!d->changed || (d->gpu_type >= 0 && j->per_node < 1))
				continue;
			if (j->checkpointed) {
				if (x && !x->requeue_sent)
					j->action = COPUS__ACT_REQUEUE;
				continue;
			}
			if (x || r->between ||
			    (d->gpu_type >= 0 && _rj_same_cell(r, j) &&
			     !_policy_moves(s)) ||
			    copus__round_held(s, r, j))
				continue;
			if (d->gpu_type >= 0 && !_expressible(d, j))
				continue;
			if (j->no_plan)
				continue;
			if (!copus__round_user_takes(
				    r, j,
				    d->gpu_type < 0 ? 0 :
				    j->per_node * j->num_nodes - j->cur_gpus,
				    s->params.user_cap))
				continue;
			j->action = COPUS__ACT_ASK;
			continue;
		}
		hold = _hold(r, j, &until);
		if (hold == HOLD_RELEASE && _early(s, r, j, x, d)) {
			hold = HOLD_NONE;
			j->early = true;
		}
		/*
		 * Held to its cell until a round could place it there; held
		 * again (a node registered since), until one can again: the
		 * pin must not lapse while the job may not start.
		 */
		if (x && hold != HOLD_NONE)
			x->ready = 0;
		else if (x && !x->ready)
			x->ready = r->when;
		if (d->gpu_type < 0) {
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: %s", d->reason);
			j->reason = j->reason_buf;
			continue;
		}
		if (j->no_plan) {
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: no plan of its model fits %d %s "
				 "GPU(s) on %d node(s)",
				 j->per_node * j->num_nodes,
				 r->types[j->dtype], j->num_nodes);
			j->reason = j->reason_buf;
			continue;
		}
		/*
		 * Held. Within the release gap even a job whose request and
		 * begin time already fit (set by an earlier round that placed
		 * it off its nodes, _early) waits: this round may place it on
		 * them.
		 */
		if (hold != HOLD_NONE) {
			if (hold == HOLD_STRAYS)
				j->action = COPUS__ACT_CLEAR;
			_wake(r, until);
			j->reason = _hold_reason[hold];
			continue;
		}
		if (j->rigid ||
		    (j->per_node == j->gpn_req && j->num_nodes == j->nodes_req &&
		     (!j->type_req[0] ||
		      !strcmp(j->type_req, r->types[j->dtype])))) {
			if (!j->waits_release) {
				if (copus__round_user_takes(r, j, j->rigid ?
						j->gpn_req * j->nodes_req :
						j->per_node * j->num_nodes,
						s->params.user_cap))
					j->action = COPUS__ACT_START;
				continue;
			}
		}
		if (j->rigid) {
			j->reason = "copus: waiting for its begin time";
			continue;
		}
		if (!copus__round_user_takes(r, j, j->per_node * j->num_nodes,
					     s->params.user_cap))
			continue;
		j->action = COPUS__ACT_RESIZE;
		snprintf(j->reason_buf, sizeof(j->reason_buf),
			 "copus: starts with %d %s GPU(s) on %d node(s)",
			 j->per_node * j->num_nodes, r->types[j->dtype],
			 j->num_nodes);
		j->reason = j->reason_buf;
	}
	free(even);
	/* Running jobs the policy ran without: rescale bookkeeping. */
	for (i = 0; i < r->nrj; i++) {
		struct copus__round_job *j = &r->rj[i];
		struct copus__rescale *x;

		if (!j->running || !j->in_rescale ||
		    j->action != COPUS__ACT_NONE)
			continue;
		x = copus__rescale_find(s, j->id);
		if (j->checkpointed && x && !x->requeue_sent)
			j->action = COPUS__ACT_REQUEUE;
	}
}

/*
 * What a job's hint comes to for the policy, and a decision for Slurm
 * (round.h; also tested by tests/test-plugin-sched).
 */

double copus__model_speedup(const copus_model *m, int nodes, int per_node)
{
	copus_batch_plan one, many;

	if (!m || nodes < 1 || per_node < 1)
		return 0.0;
	if (copus_best_batch(m, 1, 1, &one) != COPUS_OK ||
	    copus_best_batch(m, nodes, nodes * per_node, &many) != COPUS_OK ||
	    !(one.goodput > 0.0) || !isfinite(many.goodput))
		return 0.0;
	return many.goodput / one.goodput;
}
