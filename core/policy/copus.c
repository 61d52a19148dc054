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
 *    request) beyond FTF_GUARD times the mean of the other jobs' raises its
 *    weight quadratically, so long jobs are delayed but never starved. The
 *    guard is relative: under contention every job is slowed, and it lifts
 *    the jobs slowed more than the rest, not all of them (which would put
 *    the longest waiting first instead of the shortest).
 *  - Unknown work: without a prediction, a job is expected to need as much
 *    again as it has received (least attained service first for newcomers).
 *  - Unknown types: a job with no model on any type scales linearly up to
 *    its request, each GPU worth its type's speed over the fastest
 *    (copus_cluster.type_speeds, the GPUs' constants), so that it starts
 *    on the faster GPUs when they are free.
 *  - Scarcity: while the jobs' requests exceed the cluster more than
 *    twofold, every speedup counts as S^g instead of S, g = 2 x the
 *    cluster's GPUs over the GPUs requested, at least SPREAD_FLOOR: the
 *    fewer GPUs there are for what is asked, the less a job's further GPUs
 *    are worth against another job's first ones, so GPUs spread over more
 *    jobs, each nearer its most efficient size, and fewer running jobs are
 *    preempted for newcomers (Sia's power of normalised goodput does this
 *    at every load). Up to twice the cluster, SRPT with each job at its
 *    request already keeps the GPUs on the jobs that finish first, and
 *    g = 1. Jobs with a table of cells (a fixed batch, sizes bound by
 *    memory) keep g = 1.
 *  - Fair share: a job whose user has a fair-share factor F (Slurm's
 *    multifactor meaning, copus_job.fairshare) is worth 2^(W (2F - 1))
 *    times as much, W the option fairshare=W, else the parameter
 *    copus_policy_params.fairshare (default 1): a user who has
 *    used nothing counts double, one far beyond their share half, so one
 *    user's many short jobs cannot keep another user's jobs waiting.
 *
 * On a small cluster the greedy's cells are then replaced by the exact
 * optimum of the same values under each type's capacity (exact_dp, a
 * multiple-choice knapsack over the GPUs used of each type).
 *
 * Within a node an elastic job's size is a power of two (in replicas),
 * its minimum, request, maximum or current size (copus__cp_size_tiles):
 * such sizes tile a node, and a job is not resized through every count
 * that happens to be free.
 *
 * Placement follows the chosen sizes: a job that keeps its size and type
 * keeps its GPUs; the others are placed largest first on the fewest nodes
 * (core/policy/place.c), at most one multi-node job per node, never mixing
 * types; an elastic job that does not fit shrinks to what does. When that
 * still leaves a chosen cell out, running elastic jobs may move (same cell,
 * other nodes) to make room, if the room is worth more than their restarts
 * (place_all). GPUs left idle go to waiting jobs (fill_idle).
 *
 * This file runs the round; copus-value.c holds what a cell is worth to a
 * job, copus-greedy.c the choice of cells, copus-place.c their GPUs
 * (copus-work.h: the working data of a round they share).
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
#include "copus-work.h"
#include "copus.h"
#include "ops.h"
#include "place.h"

/* The weight in "fairshare=W" (spec at the option, len its length). */
static bool fairshare_parse(const char *spec, size_t len, double *w)
{
	static const char key[] = "fairshare=";
	char buf[32], *end;

	if (len <= sizeof(key) - 1 || len >= sizeof(buf) ||
	    strncmp(spec, key, sizeof(key) - 1) != 0)
		return false;
	memcpy(buf, spec + sizeof(key) - 1, len - (sizeof(key) - 1));
	buf[len - (sizeof(key) - 1)] = '\0';
	*w = strtod(buf, &end);
	return *end == '\0' && *w >= 0.0 && *w <= COPUS_POLICY_FAIRSHARE_MAX;
}

/*
 * Parse "no-srpt,no-restart-cost,...,fairshare=W" (any subset,
 * comma-separated; empty or NULL for none); COPUS_EINVAL names nothing, so
 * callers report spec.
 */
static int opts_parse(const char *spec, struct copus__copus_opts *o)
{
	static const char *const names[] = { "no-srpt", "no-restart-cost",
					     "no-fairness", "no-placement",
					     "no-spread" };
	bool *flags[] = { &o->no_srpt, &o->no_restart_cost, &o->no_fairness,
			  &o->no_placement, &o->no_spread };

	memset(o, 0, sizeof(*o));
	o->fairshare = NAN; /* not given: copus_policy_params.fairshare */
	while (spec != NULL && *spec != '\0') {
		size_t len = strcspn(spec, ",");
		bool known = fairshare_parse(spec, len, &o->fairshare);
		for (int i = 0; i < 5; i++)
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
	else
		(*out)->opt.fairshare = COPUS__FAIRSHARE_DEFAULT;
	return COPUS_OK;
}

void copus__state_destroy(struct copus_state *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++)
		copus_speedup_destroy(s->e[i].sp);
	free(s->e);
	free(s->slot);
	free(s->w);
	free(s->w_sp);
	free(s->w_rel);
	free(s);
}

/*
 * The jobs' working data for a round of n jobs on T GPU types, zeroed, or
 * NULL: kept in s between rounds, so that a round does not fault in its
 * pages again.
 */
static struct jw *jobs_work(struct copus_state *s, size_t n, int T)
{
	size_t nt = (n + 1) * (size_t)(T > 0 ? T : 1);

	if (s->w != NULL && s->w_cap >= n + 1) {
		memset(s->w, 0, (n + 1) * sizeof(*s->w));
	} else {
		free(s->w);
		s->w_cap = 0;
		if ((s->w = calloc(n + 1, sizeof(*s->w))) == NULL)
			return NULL;
		s->w_cap = n + 1;
	}
	if (s->w_sp != NULL && s->wt_cap >= nt) {
		memset(s->w_sp, 0, nt * sizeof(*s->w_sp));
	} else {
		free(s->w_sp);
		free(s->w_rel);
		s->wt_cap = 0;
		s->w_sp = calloc(nt, sizeof(*s->w_sp));
		s->w_rel = calloc(nt, sizeof(*s->w_rel));
		if (s->w_sp == NULL || s->w_rel == NULL)
			return NULL;
		s->wt_cap = nt;
	}
	copus__cp_bind_types(s->w, n + 1, T, s->w_sp, s->w_rel);
	return s->w;
}

/*
 * The capacity and slack (cp, sl) that the cells now in g->w leave of the
 * whole cluster's (cap, slack), each cell taken again as the greedy takes
 * one.
 */
static void take_cells(struct greedy_ctx *g, const int *cap, const int *slack,
		       int *cp, int *sl)
{
	memcpy(cp, cap, COPUS_MAX_GPU_TYPES * sizeof(int));
	memcpy(sl, slack, COPUS_MAX_GPU_TYPES * sizeof(int));
	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &g->w[j];
		int t = x->t, k = x->k;

		if (k <= 0)
			continue;
		x->t = -1;
		x->k = 0;
		copus__cp_take_cell(x, t, k, g->T, g->node_gpus, cp, sl);
	}
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
	struct copus__free_index fix = { 0 };
	const int N = c->num_nodes, T = c->num_types;
	int node_gpus[COPUS_MAX_GPU_TYPES] = { 0 },
	    cap[COPUS_MAX_GPU_TYPES] = { 0 };
	struct jw *w = jobs_work(s, n, T);
	struct heap_item *heap = calloc(n + 1, sizeof(*heap));
	size_t *idx = calloc(n + 1, sizeof(*idx));
	int *free_gpus = calloc((size_t)N, sizeof(int));
	int *dist = calloc((size_t)N, sizeof(int));
	int *row = calloc((size_t)N, sizeof(int));
	int total[COPUS_MAX_GPU_TYPES], slack[COPUS_MAX_GPU_TYPES];
	int rc = COPUS_OK;

	/* The policy object's parameters are the same every round. */
	if (isnan(s->opt.fairshare))
		s->opt.fairshare = prm->fairshare;
	if (!w || !heap || !idx || !free_gpus || !dist || !row ||
	    copus__placer_init(&pl, N) != COPUS_OK) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	res->used = 0;
	for (int k = 0; k < N; k++)
		free_gpus[k] = c->nodes[k].usable ? c->nodes[k].gpus : 0;
	copus__cp_cluster_caps(c, node_gpus, cap);
	memcpy(total, cap, sizeof(total));
	rc = copus__cp_prepare_jobs(s, prm, c, jobs, n, now, node_gpus, cap, w);
	if (rc != COPUS_OK)
		goto out;
	/* What each type must keep for the jobs that can run nowhere else. */
	memcpy(slack, cap, sizeof(slack));
	for (size_t j = 0; j < n; j++) {
		int t = copus__cp_only_type(&w[j], T, node_gpus);
		if (t >= 0)
			slack[t] -= copus__cp_base_need(&w[j]);
	}

	/*
	 * The greedy from two starts, keeping the one of higher value: from
	 * nothing, and with the largest jobs' smallest cells placed first (a
	 * big rigid job is not crowded out of its type by small ones). Sizes
	 * and types only; placement follows. (Starting from the running jobs'
	 * current cells as well held them in place and doubled the worst
	 * finish-time fairness at 0.5x load in copus-sim.)
	 */
	struct greedy_ctx g = { w,   n,	      heap, node_gpus, T,
				prm, &s->opt, &pl,  NULL,      NULL };
	int best_start = -1;
	double best_v = -1.0;
	for (int start = 0; start < 2; start++) {
		int cp[COPUS_MAX_GPU_TYPES], sl[COPUS_MAX_GPU_TYPES];
		memcpy(cp, cap, sizeof(cp));
		memcpy(sl, slack, sizeof(sl));
		double v = copus__cp_greedy(&g, start, idx, cp, sl);
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
		take_cells(&g, cap, slack, cp, sl);
		if (copus__cp_improve(&g, idx, cp, sl) <= best_v) {
			for (size_t j = 0; j < n; j++) {
				w[j].t = w[j].best_t;
				w[j].k = w[j].best_k;
			}
			take_cells(&g, cap, slack, cp, sl);
		}
		if (T > 1)
			copus__cp_migrate(&g, idx, cp, sl);
		copus__cp_exact_dp(&g, total);
	}

	/* Placement: unchanged jobs keep their GPUs, the rest largest first;
	 * if that leaves a chosen cell out, the repacking, when worth more.
	 * With the same GPUs on every node of a job, the free GPUs are
	 * indexed, so that each placement does not scan every node. */
	if (prm->equal_per_node && !s->opt.no_placement) {
		rc = copus__free_index_init(&fix, c, free_gpus, dist);
		if (rc == COPUS_ENOMEM)
			goto out;
		g.ix_free = rc == COPUS_OK ? &fix : NULL;
	}
	rc = copus__cp_place_all(&g, c, jobs, res, free_gpus, dist, row, idx);
	if (rc != COPUS_OK)
		goto out;
	rc = copus__cp_fill_idle(&g, c, jobs, res, free_gpus, dist, row);
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
				 "queued: needs %d GPUs, %d usable", need,
				 most);
		else if (res->reasons[j][0] == '\0')
			snprintf(res->reasons[j], 64,
				 "queued: shorter jobs first");
	}
	copus__cp_sp_sweep(s);
out:
	copus__cp_release_jobs(w, n);
	free(heap);
	free(idx);
	free(free_gpus);
	free(dist);
	free(row);
	copus__placer_release(&pl);
	copus__free_index_release(&fix);
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
	.traits = { .elastic = true,
		    .picks_batch = true,
		    .moves_jobs = true,
		    .remaining = COPUS_REMAINING_PREDICT,
		    .models = COPUS_MODELS_LEARNED,
		    .picks_cells = true,
		    .fit_prior = COPUS_FIT_PRIOR_RING },
	.granular = true,
	.create = copus_create,
	.destroy = copus_destroy,
	.decide = copus_decide,
};
