/*
 * The policy's input of a job whose hint describes its model (see
 * round-plans.h): its cells with a plan, from the planner (plans.h), or,
 * for a policy that does not choose among cells, the job rigid on a count
 * with a plan. round.c calls it for each such job of the input. No Slurm
 * header, no Slurm call, no lock.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "copus/policy.h"
#include "round-plans.h"
#include "round.h"
#include "sched_copus.h"

static void _rigid_on_a_plan(const struct copus__round_job *j, copus_job *c);

/*
 * The cells of a job whose hint describes its model, by the planner (see
 * plans.h): the policy chooses among them, at the job's own batch (the
 * plan is for that batch), and the granularity of its hint gives way to
 * them (a plan's pipeline x tensor degree differs from cell to cell). A
 * running job with no cell at all keeps its GPUs as a rigid job does; a
 * policy that does not pick cells sees it rigid on a count with a plan.
 */
void copus__round_input_plans(struct copus__sched *s, struct copus__round *r,
			      struct copus__round_job *j, copus_job *c,
			      struct copus__memo *in)
{
	struct copus__planner *pl = &s->planner;
	struct copus__plan_ask a;
	int max, n = 0;

	j->planned = true;
	if (!in->model_id ||
	    memcmp(&in->model, &in->hint.model, sizeof(in->model))) {
		/* A new model: a new key, so no stale plan is found. */
		if (pl->next_model == INT32_MAX) {
			if (pl->cache)
				copus_planner_cache_clear(pl->cache);
			pl->cached = 0;
			pl->next_model = 0;
		}
		in->model = in->hint.model;
		in->model_id = ++pl->next_model;
	}
	memset(&a, 0, sizeof(a));
	a.model_id = in->model_id;
	a.model = &in->model;
	a.batch = (int)lround(in->hint.limits.init_batch);
	a.kmin = c->min_gpus;
	a.kmax = c->max_gpus;
	a.type_mask = c->type_mask;
	a.cur_type = j->running ? j->alloc_type : -1;
	a.cur_gpus = j->running ? j->cur_gpus : 0;
	a.cur_nodes = j->running ? j->nalloc : 0;
	max = (a.kmax - a.kmin + 2) * r->ntypes;
	j->cells = calloc(max, sizeof(*j->cells));
	j->plans = calloc(max, sizeof(*j->plans));
	j->plan_rc = !j->cells || !j->plans ? COPUS_ENOMEM :
		     copus__plan_cells(pl, &a, r->nodes, r->nnodes, r->ntypes,
				       (const char (*)[16])r->types, j->cells,
				       j->plans, max, &n);
	j->ncells = j->plan_rc == COPUS_OK ? n : 0;
	c->fixed_batch = true;
	c->granularity = j->multiple;
	c->remaining_iters = in->hint.target > 0.0 ?
			     fmax(in->hint.target - in->hint.progress, 0.0) :
			     -1.0;
	if (!j->ncells) {
		/* Running (a pending one is left out): where it runs. */
		c->elastic = false;
		c->req_gpus = c->min_gpus = c->max_gpus = j->cur_gpus;
		return;
	}
	c->cells = j->cells;
	c->num_cells = j->ncells;
	if (!copus_policy_traits(s->policy)->picks_cells)
		_rigid_on_a_plan(j, c);
}

/*
 * For a policy that does not choose among cells: the job rigid where it
 * runs, or on the count with a plan nearest its request (the smaller of
 * two as near), so that the policy gives it a size with a plan; a cell
 * the policy then places on more nodes than the plan's is not applied.
 */
static void _rigid_on_a_plan(const struct copus__round_job *j, copus_job *c)
{
	int k, best = 0;

	if (j->running) {
		best = j->cur_gpus;
	} else {
		for (k = 0; k < j->ncells; k++) {
			int g = j->cells[k].gpus;

			if (!best || abs(g - c->req_gpus) < abs(best - c->req_gpus) ||
			    (abs(g - c->req_gpus) == abs(best - c->req_gpus) &&
			     g < best))
				best = g;
		}
	}
	c->elastic = false;
	c->req_gpus = c->min_gpus = c->max_gpus = best;
}
