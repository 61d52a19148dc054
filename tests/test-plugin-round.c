/*
 * The decision phase of sched/copus (plugin/round.c), run on rounds built
 * by hand the way the snapshot fills them (plugin-round-world.h): what the
 * policy's decisions become for pending and running jobs, their users,
 * their plans and their models. A job's models on the GPU types it has not
 * run on are in test-plugin-types.c; the rescale's later steps and the
 * restarts after a crash in test-plugin-restart.c.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/planner.h"
#include "copus/policy.h"
#include "plugin-round-world.h"

/*
 * Elastic jobs whose request lies outside their range (1 x 1 GPU for 2-3,
 * 1 x 4 for 2-3): the policy gives each a cell within the range, and the
 * round sets the request to it before the job starts.
 */
static void a_pending_elastic_job_gets_gpus_within_its_range(void)
{
	struct copus__round_job *small, *large;

	rw_cluster(2, 4);
	small = rw_pending(1, 1, 1, 2, 3);
	large = rw_pending(2, 1, 4, 2, 3);
	rw_decide();
	CU_ASSERT_EQUAL(W.r.decided, 1);
	ASSERT_ACTION(small, COPUS__ACT_RESIZE);
	ASSERT_ACTION(large, COPUS__ACT_RESIZE);
	CU_ASSERT(small->per_node * small->num_nodes >= 2);
	CU_ASSERT(small->per_node * small->num_nodes <= 3);
	CU_ASSERT(large->per_node * large->num_nodes >= 2);
	CU_ASSERT(large->per_node * large->num_nodes <= 3);
	CU_ASSERT_EQUAL(small->dtype, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(large->reason, "copus: starts with"));
}

/*
 * A job whose hint says its model spans two GPUs per replica (pipeline x
 * tensor 2) starts on an even count: on a node of 3 free GPUs, 2 of its
 * 1-3, where without it it would take all 3.
 */
static void a_job_of_two_gpus_per_replica_gets_an_even_count(void)
{
	struct copus__round_job *j;

	rw_cluster(1, 3);
	j = rw_pending(1, 1, 3, 1, 3);
	rw_hint(j);
	rw_decide();
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 3);
	rw_cluster(1, 3);
	j = rw_pending(1, 1, 3, 1, 3);
	rw_hint_gran(j, 2);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
}

/*
 * Before its first hint, a job submitted with --gpu-multiple=2 starts on an
 * even count: on a node of 3 free GPUs, 2 of its 1-3.
 */
static void a_job_of_a_gpu_multiple_starts_on_a_multiple(void)
{
	struct copus__round_job *j;

	rw_cluster(1, 3);
	j = rw_pending(1, 1, 3, 1, 3);
	j->multiple = 2;
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
	/* Its hint may say more: 3 GPUs per replica. */
	rw_cluster(1, 4);
	j = rw_pending(1, 1, 4, 1, 4);
	j->multiple = 2;
	rw_hint_gran(j, 3);
	rw_decide();
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 3);
}

static void a_pending_elastic_job_on_its_request_starts_as_it_is(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	j = rw_pending(1, 1, 2, 1, 4);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_START);
	CU_ASSERT_EQUAL(j->per_node, 2);
	CU_ASSERT_EQUAL(j->num_nodes, 1);
	CU_ASSERT_PTR_NULL(j->reason);
}

static void a_running_rigid_job_is_never_moved(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	j = rw_running(1, 0, 1, 4, 0, 0, NOW - 1000);
	W.nodes[0].usable = false;
	rw_decide();
	/* The policy never sees it: its GPUs are simply taken. */
	CU_ASSERT_EQUAL(j->job, -1);
	CU_ASSERT_EQUAL(W.r.njobs, 0);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

static void a_job_on_an_unusable_node_is_asked_to_move(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	j = rw_running(1, 0, 1, 4, 1, 4, NOW - 1000);
	W.nodes[0].usable = false;
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_ASK);
	CU_ASSERT_EQUAL(W.r.dec[j->job].num_slots, 1);
	CU_ASSERT_EQUAL(W.r.dec[j->job].slots[0].node, 1);
}

/*
 * The cost of a move the round's policy counts: copus_restart_cost's
 * seconds, or with copus_restart_cost=measured the mean cost of the last
 * measured rescales (the seconds until there is one); copusctl stats shows
 * it (restart_cost_counted).
 */
static void the_round_counts_the_measured_restart_cost(void)
{
	for (int mode = 0; mode < 3; mode++) {
		rw_cluster(1, 4);
		rw_pending(1, 1, 2, 1, 4);
		W.s.params.restart_cost = 12.5;
		W.s.params.restart_measured = mode > 0;
		if (mode != 1) {
			copus__costs_add(&W.s.costs, 0.5);
			copus__costs_add(&W.s.costs, 1.5);
		}
		rw_decide();
		CU_ASSERT_EQUAL(W.r.decided, 1);
		ASSERT_CLOSE(W.s.stats.restart_cost_counted,
			     mode == 2 ? 1.0 : 12.5, 1e-12);
	}
}

/*
 * A run that a requeue began (restart count 1) is not asked within its
 * copus_restart_delay; a job's first run is, as soon as the policy moves
 * it: it started on the GPUs that were free and paid no checkpoint.
 */
static void a_job_is_not_asked_again_within_its_restart_delay(void)
{
	for (int first = 0; first < 2; first++) {
		struct copus__round_job *j;

		rw_cluster(2, 4);
		j = rw_running(1, 0, 1, 4, 1, 4,
			       NOW - W.s.params.restart_delay + 1);
		j->restarts = !first;
		W.nodes[0].usable = false;
		rw_decide();
		CU_ASSERT(W.r.dec[j->job].changed);
		CU_ASSERT_EQUAL(W.r.jobs[j->job].keep, !first);
		ASSERT_ACTION(j, first ? COPUS__ACT_ASK : COPUS__ACT_NONE);
	}
}

/* The round's policy from now on, placing jobs as Slurm asks for them. */
static void _use_policy(const char *name)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;

	copus_policy_destroy(W.s.policy);
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create(name, &prm, &W.s.policy), COPUS_OK);
}

/*
 * A running job within its copus_restart_delay of a requeue is never
 * moved, so the
 * policy is told to keep it (copus_job.keep) and plans the others on the
 * GPUs it leaves: a job arriving on a node full of it waits, where after
 * that delay pollux shares the node between the two.
 */
static void a_job_within_its_restart_delay_keeps_its_gpus_from_the_others(void)
{
	for (int late = 0; late < 2; late++) {
		struct copus__round_job *run, *wait;
		time_t since = late ? 1000 : W.s.params.restart_delay - 1;

		rw_cluster(1, 4);
		_use_policy("pollux");
		run = rw_running(1, 0, 1, 4, 1, 4, NOW - since);
		run->restarts = 1;
		wait = rw_pending(2, 1, 1, 1, 4);
		rw_decide();
		CU_ASSERT_FATAL(run->job >= 0 && wait->job >= 0);
		CU_ASSERT_EQUAL(W.r.jobs[run->job].keep, !late);
		CU_ASSERT_EQUAL(W.r.dec[run->job].changed, late);
		CU_ASSERT_EQUAL(W.r.dec[wait->job].gpus > 0, late);
		if (!late)
			ASSERT_ACTION(wait, COPUS__ACT_NONE);
		ASSERT_ACTION(run, late ? COPUS__ACT_ASK : COPUS__ACT_NONE);
	}
}

/*
 * A job of exactly 4 GPUs on a node that went down: the same cell on the
 * other node. The copus policy makes such a move when it is worth the
 * restart; a policy that places jobs anew every round does not, and the
 * round leaves that move undone.
 */
static void _same_shape_move(const char *policy, enum copus__action want)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	_use_policy(policy);
	CU_ASSERT_EQUAL(copus_policy_traits(W.s.policy)->moves_jobs,
			want == COPUS__ACT_ASK);
	j = rw_running(1, 0, 1, 4, 4, 4, NOW - 1000);
	W.nodes[0].usable = false;
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0 && W.r.decided);
	CU_ASSERT(W.r.dec[j->job].changed);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 4);
	CU_ASSERT_EQUAL(j->num_nodes, 1);
	ASSERT_ACTION(j, want);
}

/*
 * Decisions Slurm cannot be asked for as they are: pollux gives a job on
 * node 0 a third GPU on node 1, 2 + 1, where Slurm's request is the same
 * count on every node. The round asks for the largest part of it Slurm
 * can be asked for: 2 GPUs on node 0. For a job that has 2 there, that is
 * its own cell, and a restart that gains nothing is not asked for; a job
 * that has 1 there is asked to grow to 2 on that one node (not to 1 + 1 on
 * two nodes).
 */
static struct copus__round_job *_pollux_two_plus_one(int gpus)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	rw_cluster(2, 4);
	copus_policy_destroy(W.s.policy);
	prm.equal_per_node = false;
	ASSERT_STATUS(copus_policy_create("pollux", &prm, &W.s.policy),
		      COPUS_OK);
	j = rw_running(1, 0, 1, gpus, 1, 8, NOW - 1000);
	{
		char text[COPUS_HINT_MAX_LEN + 1], err[128];
		struct copus__memo *in = copus__memo_get(&W.s, j->id);

		/* Compute-bound: more GPUs are worth it, even on two nodes. */
		snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":1,"
			 "\"st\":\"running\",\"step\":10,\"rc\":0,\"t\":%d,"
			 "\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,"
			 "\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":10,"
			 "\"tgt\":100000,\"perf\":{\"a100\":[0.02,0.01,0.0001,"
			 "0.00001,0.0001,0.00001,1.5]}}", NOW - 10);
		ASSERT_STATUS(copus_hint_parse(text, &in->hint, err,
					       sizeof(err)), COPUS_OK);
		in->have_hint = true;
		in->req_gpus = gpus;
		in->max_had = 2;
	}
	rw_running(2, 0, 1, 2, 0, 0, NOW - 1000);
	rw_running(3, 1, 1, 3, 0, 0, NOW - 1000);
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0 && W.r.decided);
	/* The case at hand: 3 GPUs as 2 on node 0 + 1 on node 1. */
	CU_ASSERT(W.r.dec[j->job].changed);
	CU_ASSERT_EQUAL(W.r.dec[j->job].gpus, 3);
	CU_ASSERT_EQUAL(W.r.dec[j->job].num_slots, 2);
	CU_ASSERT_EQUAL(j->per_node, 2);
	CU_ASSERT_EQUAL(j->num_nodes, 1);
	return j;
}

static void a_move_slurm_cannot_express_is_asked_as_its_largest_part(void)
{
	ASSERT_ACTION(_pollux_two_plus_one(2), COPUS__ACT_NONE);
	ASSERT_ACTION(_pollux_two_plus_one(1), COPUS__ACT_ASK);
}

static void a_same_shape_move_needs_a_policy_that_moves_jobs(void)
{
	_same_shape_move("copus", COPUS__ACT_ASK);
	_same_shape_move("fifo", COPUS__ACT_NONE);
}

/*
 * Two elastic jobs fill the cluster, each with twice its request; a rigid
 * job of 2 GPUs waits. The policy takes the GPUs from the job whose hint
 * says what they are worth (without a model a job's speedup counts as
 * linear, so its extra GPUs look worth more), and only that job is asked
 * to checkpoint, whichever of the two published the hint.
 */
static void _two_elastic_jobs_and_a_rigid_one(uint32_t hinted)
{
	struct copus__round_job *a, *b, *c, *with, *without;

	rw_cluster(2, 4);
	a = rw_running(1, 0, 1, 4, 1, 4, NOW - 1000);
	b = rw_running(2, 1, 1, 4, 1, 4, NOW - 1000);
	with = hinted == 1 ? a : b;
	without = hinted == 1 ? b : a;
	rw_hint(with);
	copus__memo_get(&W.s, 1)->req_gpus = 2;
	copus__memo_get(&W.s, 2)->req_gpus = 2;
	copus__memo_get(&W.s, 1)->attained = 40000;
	copus__memo_get(&W.s, 2)->attained = 40000;
	c = rw_pending(3, 1, 2, 0, 0);
	rw_decide();
	ASSERT_ACTION(with, COPUS__ACT_ASK);
	CU_ASSERT_EQUAL(with->per_node * with->num_nodes, 2);
	ASSERT_ACTION(without, COPUS__ACT_NONE);
	CU_ASSERT_FALSE(W.r.dec[without->job].changed);
	/* The rigid job is to start on the GPUs the shrink frees. */
	ASSERT_ACTION(c, COPUS__ACT_START);
}

static void a_shrink_asks_the_job_with_a_hint_not_the_one_without(void)
{
	_two_elastic_jobs_and_a_rigid_one(1);
	_two_elastic_jobs_and_a_rigid_one(2);
}

static void a_rigid_job_waits_for_one_of_higher_priority(void)
{
	struct copus__round_job *first, *second;

	rw_cluster(2, 4);
	first = rw_pending(1, 2, 4, 0, 0);
	second = rw_pending(2, 1, 4, 0, 0);
	rw_decide();
	ASSERT_ACTION(first, COPUS__ACT_START);
	/* The second does not fit beside the first: not even offered. */
	CU_ASSERT_EQUAL(second->job, -1);
	ASSERT_ACTION(second, COPUS__ACT_NONE);
	CU_ASSERT_STRING_EQUAL(second->reason, "copus: a job of higher "
			       "priority in the partition starts first");
}

/*
 * copus_max_gpus_per_user=3: a user whose running job holds 2 GPUs gets one
 * more, not the idle rest; another user is not held back.
 */
static void one_user_cannot_take_more_than_the_cap(void)
{
	struct copus__round_job *run, *rigid, *elastic, *other;

	rw_cluster(2, 4);
	W.s.params.user_cap = 3;
	run = rw_running(1, 0, 1, 2, 0, 0, NOW - 1000);
	rigid = rw_pending(2, 1, 2, 0, 0);
	elastic = rw_pending(3, 1, 1, 1, 4);
	other = rw_pending(4, 1, 2, 0, 0);
	strcpy(run->user, "100");
	strcpy(rigid->user, "100");
	strcpy(elastic->user, "100");
	strcpy(other->user, "200");
	rw_decide();
	ASSERT_ACTION(run, COPUS__ACT_NONE);
	/* 2 + 2 > 3: the rigid job waits, and says why. */
	ASSERT_ACTION(rigid, COPUS__ACT_NONE);
	CU_ASSERT_PTR_NOT_NULL(rigid->reason);
	if (rigid->reason)
		CU_ASSERT_PTR_NOT_NULL(strstr(rigid->reason,
					      "copus_max_gpus_per_user"));
	/* The elastic job starts within what is left: one GPU. */
	CU_ASSERT(elastic->action == COPUS__ACT_START ||
		  elastic->action == COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(elastic->per_node * elastic->num_nodes, 1);
	/* The other user's job is not held back. */
	ASSERT_ACTION(other, COPUS__ACT_START);
	/* Without the cap the same round gives user 100 more. */
	rw_cluster(2, 4);
	run = rw_running(1, 0, 1, 2, 0, 0, NOW - 1000);
	rigid = rw_pending(2, 1, 2, 0, 0);
	strcpy(run->user, "100");
	strcpy(rigid->user, "100");
	rw_decide();
	ASSERT_ACTION(rigid, COPUS__ACT_START);
}

/*
 * Two users' jobs want the same two GPUs. The one whose user has used the
 * cluster (copus's own tally) waits, though it is first in every other
 * order; Slurm's fair-share factor, when it has one, is used instead.
 */
static void the_less_served_user_starts_first(void)
{
	struct copus__round_job *heavy, *light;

	for (int slurm = 0; slurm < 2; slurm++) {
		rw_cluster(1, 2);
		heavy = rw_pending(2, 1, 2, 2, 2);
		light = rw_pending(3, 1, 2, 2, 2);
		heavy->uid = 100;
		light->uid = 200;
		rw_hint(heavy);
		rw_hint(light);
		CU_ASSERT_EQUAL(copus__usage_charge(&W.s.usage, 100, 3.6e6), 0);
		CU_ASSERT_EQUAL(copus__usage_charge(&W.s.usage, 200, 1e3), 0);
		if (slurm) {
			/* Slurm's factors say the opposite: they win. */
			heavy->fs_slurm = 0.9;
			light->fs_slurm = 0.1;
		}
		rw_decide();
		ASSERT_ACTION(slurm ? heavy : light, COPUS__ACT_START);
		ASSERT_ACTION(slurm ? light : heavy, COPUS__ACT_NONE);
		CU_ASSERT_EQUAL(W.r.nusers, 2);
	}
}

static void a_job_that_can_never_run_here_says_why(void)
{
	struct copus__round_job *big, *typed;

	rw_cluster(2, 4);
	big = rw_pending(1, 3, 4, 0, 0);
	typed = rw_pending(2, 1, 1, 1, 4);
	strcpy(typed->types[0], "v100");
	typed->ntypes = 1;
	rw_decide();
	CU_ASSERT(big->never);
	CU_ASSERT_STRING_EQUAL(big->reason, "copus: no 3 node(s) it may use "
			       "have 4 GPU(s) of its type each");
	CU_ASSERT(typed->never);
	CU_ASSERT_STRING_EQUAL(typed->reason, "copus: none of its GPU types "
			       "is in the cluster");
	CU_ASSERT_EQUAL(W.r.njobs, 0);
}

static void a_job_without_gpus_is_left_to_slurm(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	j = rw_pending(1, 1, 0, 0, 0);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_START);
	CU_ASSERT_EQUAL(j->job, -1);
}

static void a_policy_failure_decides_nothing_and_names_the_job(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	j = rw_running(7, 0, 1, 4, 1, 4, NOW - 1000);
	/* An allocation on a node the cluster does not have. */
	j->alloc[0].node = 5;
	rw_decide();
	CU_ASSERT_EQUAL(W.r.decided, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(W.r.error, "the copus policy failed"));
	CU_ASSERT_PTR_NOT_NULL(strstr(W.r.error, "on job 7"));
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * A job whose hint describes a model too big for one GPU: the policy gets
 * its table of cells from the planner (2 to 4 GPUs, never 1), at its own
 * batch and with its remaining iterations, and the job starts on a count
 * with a plan although it asks for one GPU. With one GPU free it does not
 * start at all, where a job without a model starts on that one GPU.
 */
static void a_job_with_a_model_gets_only_counts_with_a_plan(void)
{
	struct copus__round_job *j;
	const copus_job *c;
	int k, n;

	rw_cluster(1, 4);
	j = rw_pending(1, 1, 1, 1, 4);
	rw_hint_model(j, BIG_MODEL);
	rw_decide();
	CU_ASSERT_FATAL(j->planned && j->job >= 0);
	CU_ASSERT_EQUAL(j->plan_rc, COPUS_OK);
	c = &W.r.jobs[j->job];
	CU_ASSERT_PTR_EQUAL(c->cells, j->cells);
	CU_ASSERT_EQUAL(c->num_cells, j->ncells);
	CU_ASSERT(c->fixed_batch);
	ASSERT_CLOSE(c->remaining_iters, 100000 - 10, 1e-12);
	CU_ASSERT(j->ncells >= 1);
	CU_ASSERT_PTR_NULL(rw_plan_on(j, 1));
	for (k = 0; k < j->ncells; k++) {
		if (j->cells[k].gpus < 2)
			fprintf(stderr, "a cell of %d GPU(s) in the table\n",
				j->cells[k].gpus);
		CU_ASSERT(j->cells[k].gpus >= 2);
		CU_ASSERT(j->cells[k].seconds > 0);
		ASSERT_CLOSE(j->cells[k].seconds, j->plans[k].seconds, 0);
		CU_ASSERT_EQUAL(j->plans[k].dp * j->plans[k].tp * j->plans[k].pp,
				j->cells[k].gpus);
	}
	CU_ASSERT(j->action == COPUS__ACT_RESIZE ||
		  j->action == COPUS__ACT_START);
	n = j->per_node * j->num_nodes;
	if (n < 2)
		rw_show(j);
	CU_ASSERT(n >= 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->plan);
	CU_ASSERT_EQUAL(j->plan->gpus, n);
	CU_ASSERT_PTR_EQUAL(j->plan, rw_plan_on(j, n));
	CU_ASSERT_FALSE(j->no_plan);

	/* One GPU free, three held by a rigid job. */
	rw_cluster(1, 4);
	rw_running(2, 0, 1, 3, 0, 0, NOW - 100);
	j = rw_pending(1, 1, 1, 1, 4);
	rw_hint_model(j, BIG_MODEL);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT_EQUAL(j->ncells, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->reason);
	CU_ASSERT_PTR_NOT_NULL(strstr(j->reason, "has a plan that fits its "
				      "model"));
	/* The same job without a model takes the GPU. */
	rw_cluster(1, 4);
	rw_running(2, 0, 1, 3, 0, 0, NOW - 100);
	j = rw_pending(1, 1, 1, 1, 4);
	rw_hint(j);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_START);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 1);
}

/*
 * A policy that does not choose among cells (fifo) sees a job with a model
 * rigid on the count with a plan nearest its request: 2 GPUs for a request
 * of 1, where it would start the job on 1.
 */
static void a_policy_without_cells_gets_a_count_with_a_plan(void)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	rw_cluster(1, 4);
	copus_policy_destroy(W.s.policy);
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create("fifo", &prm, &W.s.policy), COPUS_OK);
	j = rw_pending(1, 1, 1, 1, 4);
	rw_hint_model(j, BIG_MODEL);
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_FALSE(W.r.jobs[j->job].elastic);
	CU_ASSERT_EQUAL(W.r.jobs[j->job].req_gpus, 2);
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
	CU_ASSERT_PTR_NOT_NULL(j->plan);
}

/*
 * A cell without a plan is never applied: under tiresias (no cells) a job
 * rigid on 2 GPUs, the count with a plan nearest its request, placed on
 * the free GPU of each of two nodes (its plan of 2 GPUs is on one node:
 * the other GPU of each node is held by another job) waits, and says why.
 */
static void a_decided_cell_without_a_plan_is_not_applied(void)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	rw_cluster(2, 2);
	copus_policy_destroy(W.s.policy);
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create("tiresias", &prm, &W.s.policy),
		      COPUS_OK);
	rw_running(2, 0, 2, 1, 1, 4, NOW - 100);
	j = rw_pending(1, 1, 1, 1, 4);
	rw_hint_model(j, BIG_MODEL);
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0 && W.r.decided);
	CU_ASSERT_EQUAL(W.r.jobs[j->job].req_gpus, 2);
	/* The policy placed it on one GPU of each node. */
	CU_ASSERT_EQUAL(W.r.dec[j->job].gpus, 2);
	CU_ASSERT_EQUAL(W.r.dec[j->job].num_slots, 2);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT(j->no_plan);
	CU_ASSERT_PTR_NULL(j->plan);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->reason);
	CU_ASSERT_STRING_EQUAL(j->reason, "copus: no plan of its model fits 2 "
			       "a100 GPU(s) on 2 node(s)");
}

/*
 * The constants text with the value of member replaced by value, into out
 * (len bytes).
 */
static void _bad_member(const char *text, const char *member,
			const char *value, char *out, size_t len)
{
	const char *at = strstr(text, member), *end;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	at = strchr(at, ':');
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	end = at + 1 + strcspn(at + 1, ",}");
	snprintf(out, len, "%.*s %s%s", (int)(at + 1 - text), text, value,
		 end);
}

/* Decides the round again, as the next round would (same jobs). */
static void _decide_again(struct copus__round_job *j)
{
	copus__round_free(&W.r);
	j->action = COPUS__ACT_NONE;
	j->reason = NULL;
	j->planned = j->no_plan = false;
	rw_decide();
}

/*
 * A reconfigure with a constants file (copus_planner_gpus) changes the
 * plans: an a100 with eight times the memory and twice the speed holds the
 * model on one GPU, and the plan on two GPUs is faster. A bad file is
 * refused with the file, line or field named, and the constants in effect
 * stay; without the key the built-in constants come back.
 */
/*
 * Each job's --time reaches the policy (backfill plans with it): seconds,
 * INFINITY when unlimited, 0 when none was given.
 */
static void time_limits_reach_the_policy(void)
{
	struct copus__round_job *a, *b, *c;

	rw_cluster(1, 4);
	a = rw_pending(1, 1, 1, 1, 1);
	a->limit_s = 600;
	b = rw_pending(2, 1, 1, 1, 1);
	b->limit_s = -1;
	c = rw_pending(3, 1, 1, 1, 1);
	rw_decide();
	CU_ASSERT_FATAL(a->job >= 0 && b->job >= 0 && c->job >= 0);
	ASSERT_CLOSE(W.r.jobs[a->job].time_limit, 600, 0);
	CU_ASSERT(isinf(W.r.jobs[b->job].time_limit));
	ASSERT_CLOSE(W.r.jobs[c->job].time_limit, 0, 0);
}

static void a_reconfigure_with_a_constants_file_changes_the_plan(void)
{
	copus_planner_gpu_type g;
	struct copus__round_job *j;
	struct copus__plan before;
	char good[64], bad[64], syntax[64], err[512], text[8192];
	char wrong[8300];
	const struct copus__plan *p2;

	rw_cluster(1, 4);
	j = rw_pending(1, 1, 2, 1, 4);
	rw_hint_model(j, BIG_MODEL);
	rw_decide();
	CU_ASSERT_PTR_NULL(rw_plan_on(j, 1));
	p2 = rw_plan_on(j, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
	before = *p2;

	memset(&g, 0, sizeof(g));
	snprintf(g.name, sizeof(g.name), "a100");
	ASSERT_STATUS(copus_planner_gpu_default("a100", &g.gpu), COPUS_OK);
	g.gpu.memory_bytes *= 8;
	g.gpu.peak_flops *= 2;
	ASSERT_STATUS(copus_planner_gpus_format(&g, 1, text, sizeof(text), NULL,
						err, sizeof(err)), COPUS_OK);
	rw_write_file(text, good, sizeof(good));
	snprintf(W.s.params.planner_gpus, sizeof(W.s.params.planner_gpus), "%s",
		 good);
	ASSERT_STATUS(copus__planner_load(&W.s.planner, W.s.params.planner_gpus,
					  err, sizeof(err)), COPUS_OK);
	_decide_again(j);
	CU_ASSERT_PTR_NOT_NULL(rw_plan_on(j, 1));
	p2 = rw_plan_on(j, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
	if (!(p2->seconds < before.seconds))
		fprintf(stderr, "plan on 2 GPUs: %g s before, %g s after\n",
			before.seconds, p2->seconds);
	CU_ASSERT(p2->seconds < before.seconds);

	/* A member of the wrong type, and a file that is not JSON. */
	_bad_member(text, "peak_flops", "\"fast\"", wrong, sizeof(wrong));
	rw_write_file(wrong, bad, sizeof(bad));
	CU_ASSERT(copus__planner_load(&W.s.planner, bad, err, sizeof(err)) !=
		  COPUS_OK);
	if (!strstr(err, bad) || !strstr(err, "peak_flops"))
		fprintf(stderr, "the error does not name the file and the "
			"field: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, bad));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "peak_flops"));
	rw_write_file("{\"version\": 1,\n\"gpus\": {\n\"a100\": [,\n", syntax,
		      sizeof(syntax));
	CU_ASSERT(copus__planner_load(&W.s.planner, syntax, err,
				      sizeof(err)) != COPUS_OK);
	if (!strstr(err, syntax) || !strstr(err, "line"))
		fprintf(stderr, "the error does not name the file and the "
			"line: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, syntax));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line"));
	CU_ASSERT_STRING_EQUAL(W.s.planner.path, good);
	_decide_again(j);
	CU_ASSERT_PTR_NOT_NULL(rw_plan_on(j, 1));

	/* The key removed: the built-in constants. */
	ASSERT_STATUS(copus__planner_load(&W.s.planner, "", err, sizeof(err)),
		      COPUS_OK);
	_decide_again(j);
	CU_ASSERT_PTR_NULL(rw_plan_on(j, 1));
	p2 = rw_plan_on(j, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
	ASSERT_CLOSE(p2->seconds, before.seconds, 1e-12);
	unlink(good);
	unlink(bad);
	unlink(syntax);
}

static int _desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x > y ? -1 : x < y;
}

/*
 * copus_max_jobs: the cut is the max_jobs-th highest priority, as a full
 * sort finds it, with few or many equal priorities, and 0 when no more
 * jobs than that are pending.
 */
static void the_priority_cut_is_the_max_jobs_th_highest(void)
{
	static const int spreads[] = { 1, 3, 50, 1000000 };
	static const int counts[] = { 1, 2, 7, 100, 5000 };
	uint32_t *v = malloc(5000 * sizeof(*v)), *w = malloc(5000 * sizeof(*w));
	uint32_t two[] = { 9, 4 };
	unsigned seed = 7;
	int a, b, k, i;

	CU_ASSERT_EQUAL(copus__priority_cut(two, 2, 2), 0);
	CU_ASSERT_EQUAL(copus__priority_cut(two, 2, 0), 0);
	CU_ASSERT_EQUAL(copus__priority_cut(two, 2, 1), 9);
	CU_ASSERT_EQUAL(copus__priority_cut(NULL, 0, 5), 0);
	for (a = 0; a < 4; a++)
		for (b = 0; b < 5; b++) {
			int n = counts[b];

			for (i = 0; i < n; i++)
				v[i] = 1 + (uint32_t)(rand_r(&seed) % spreads[a]);
			memcpy(w, v, n * sizeof(*v));
			qsort(w, n, sizeof(*w), _desc);
			for (k = 1; k < n; k += 1 + n / 7) {
				uint32_t got = copus__priority_cut(v, n, k);

				CU_ASSERT_EQUAL(got, w[k - 1]);
				if (got != w[k - 1])
					fprintf(stderr, "spread %d, %d jobs, "
						"max_jobs %d: cut %u, not %u\n",
						spreads[a], n, k, got,
						w[k - 1]);
			}
		}
	/* Sorted either way: the median of three keeps it linear. */
	for (i = 0; i < 5000; i++)
		v[i] = (uint32_t)i;
	CU_ASSERT_EQUAL(copus__priority_cut(v, 5000, 1000), 4000);
	for (i = 0; i < 5000; i++)
		v[i] = (uint32_t)(5000 - i);
	CU_ASSERT_EQUAL(copus__priority_cut(v, 5000, 1000), 4001);
	free(v);
	free(w);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(a_pending_elastic_job_gets_gpus_within_its_range),
		TEST(a_pending_elastic_job_on_its_request_starts_as_it_is),
		TEST(a_job_of_two_gpus_per_replica_gets_an_even_count),
		TEST(a_job_of_a_gpu_multiple_starts_on_a_multiple),
		TEST(a_running_rigid_job_is_never_moved),
		TEST(a_job_on_an_unusable_node_is_asked_to_move),
		TEST(the_round_counts_the_measured_restart_cost),
		TEST(a_job_is_not_asked_again_within_its_restart_delay),
		TEST(a_job_within_its_restart_delay_keeps_its_gpus_from_the_others),
		TEST(a_same_shape_move_needs_a_policy_that_moves_jobs),
		TEST(a_move_slurm_cannot_express_is_asked_as_its_largest_part),
		TEST(a_shrink_asks_the_job_with_a_hint_not_the_one_without),
		TEST(a_rigid_job_waits_for_one_of_higher_priority),
		TEST(one_user_cannot_take_more_than_the_cap),
		TEST(the_less_served_user_starts_first),
		TEST(a_job_that_can_never_run_here_says_why),
		TEST(a_job_without_gpus_is_left_to_slurm),
		TEST(a_policy_failure_decides_nothing_and_names_the_job),
		TEST(a_job_with_a_model_gets_only_counts_with_a_plan),
		TEST(a_policy_without_cells_gets_a_count_with_a_plan),
		TEST(a_reconfigure_with_a_constants_file_changes_the_plan),
		TEST(a_decided_cell_without_a_plan_is_not_applied),
		TEST(time_limits_reach_the_policy),
		TEST(the_priority_cut_is_the_max_jobs_th_highest),
	};
	int rc = RUN_TESTS("plugin-round", tests);

	rw_free();
	return rc;
}
