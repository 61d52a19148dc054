/*
 * The copus policy on small hand-made cases: which jobs run and on how many
 * GPUs (the shortest remaining work first, goodput beyond the requests, the
 * cost of a restart, the fairness guard and fair share, unknown work and
 * scaling, replicas of several GPUs), its ingredients switched off by name,
 * and bad input; the bound on a speedup that lets it leave cells unvalued.
 * Where the jobs go: test-policy-copus-place.c; jobs
 * described by cells and clusters of several GPU types:
 * test-policy-copus-cells.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"
#include "internal.h"
#include "policy-world.h"

static void shortest_remaining_work_goes_first(void)
{
	struct world w;

	world_init(&w, 1, 4);
	add_job(&w, false, 4, 5000, scalable());
	add_job(&w, false, 4, 300, scalable());
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 4);
}

/*
 * A new elastic job without a model asks for 4 GPUs; 2 are free on each of
 * two nodes, but one of them holds a multi-node job, so 4 do not fit: it
 * starts on 2 rather than leave them idle for a round. A longer job, which
 * the chosen sizes left queued, then takes the 2 GPUs still idle.
 */
static void a_new_job_starts_on_what_fits(void)
{
	struct world w;

	world_init(&w, 3, 4);
	add_job(&w, false, 6, 50, scalable());
	run_alloc(&w, 0, 0, 4);
	run_alloc(&w, 0, 1, 2);
	add_job(&w, false, 2, 50, scalable());
	run_alloc(&w, 1, 2, 2);
	copus_job *x = add_job(&w, true, 4, 1000, scalable());
	x->models = NULL;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 6);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 2);
	CU_ASSERT_EQUAL(gpus_of(&w, 2), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(w.reasons[2], "starts on 2 GPUs"));

	add_job(&w, true, 2, 50000, scalable());
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 2), 2);
	CU_ASSERT_EQUAL(gpus_of(&w, 3), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(w.reasons[3], "idle GPUs"));
}

/*
 * A running elastic job spread over two nodes leaves no two whole nodes for
 * a rigid 8-GPU job: it moves (a restart) when that is worth more, and
 * stays when it would lose more than the new job gains. The rigid running
 * job never moves.
 */
static void a_running_job_moves_to_make_room(void)
{
	struct world w;

	for (int near_end = 0; near_end < 2; near_end++) {
		world_init(&w, 4, 4);
		copus_job *x = add_job(&w, true, 4, near_end ? 20 : 3000,
				       scalable());
		x->models = NULL;
		run_alloc(&w, 0, 0, 4);
		run_alloc(&w, 0, 1, 1);
		add_job(&w, false, 1, 5000, scalable());
		run_alloc(&w, 1, 2, 1);
		add_job(&w, false, 8, 1000, scalable());
		decide(&w, 0);
		CU_ASSERT_EQUAL(w.rows[1 * 4 + 2], 1);
		CU_ASSERT_EQUAL(gpus_of(&w, 0), 5);
		if (near_end) {
			CU_ASSERT_EQUAL(w.rows[0 * 4 + 0], 4);
			CU_ASSERT_EQUAL(w.rows[0 * 4 + 1], 1);
			CU_ASSERT_EQUAL(gpus_of(&w, 2), 0);
			continue;
		}
		CU_ASSERT_EQUAL(gpus_of(&w, 2), 8);
		for (int k = 0; k < 4; k++) {
			int r = w.rows[2 * 4 + k];
			CU_ASSERT(r == 0 || r == 4);
			/* At most one multi-node job per node. */
			CU_ASSERT(r == 0 || w.rows[0 * 4 + k] == 0);
		}
		CU_ASSERT_PTR_NOT_NULL(strstr(w.reasons[0], "to make room"));
	}
}

static void rigid_jobs_keep_their_request(void)
{
	struct world w;

	world_init(&w, 2, 4);
	add_job(&w, false, 3, 1000, scalable());
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 3);
}

static void goodput_decides_how_many_gpus_a_job_uses(void)
{
	struct world w;

	world_init(&w, 2, 4);
	add_job(&w, true, 2, 2000, scalable());
	add_job(&w, true, 2, 2000, poor());
	decide(&w, 0);
	/* The scalable job takes more of the cluster than the poor one. */
	CU_ASSERT(gpus_of(&w, 0) > gpus_of(&w, 1));
	CU_ASSERT(gpus_of(&w, 1) >= 1);
	CU_ASSERT(gpus_of(&w, 0) + gpus_of(&w, 1) <= 8);
}

static void restart_cost_holds_a_nearly_finished_job(void)
{
	struct world w;

	world_init(&w, 1, 4);
	copus_job *jb = add_job(&w, true, 2, 40, scalable());
	run_alloc(&w, 0, 0, 2);
	jb->restarts = 1;
	/* It has run for an hour. */
	decide(&w, 3600);
	/* Growing would pay off, but not within the 40 s it has left. */
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 2);
	CU_ASSERT_EQUAL(w.rows[0], 2);

	/* With hours left the same job grows. */
	w.jobs[0].remaining = 20000;
	decide(&w, 3600);
	CU_ASSERT(gpus_of(&w, 0) > 2);

	/* Unless it has spent most of that hour restarting (Pollux's
	 * restart factor). */
	w.jobs[0].restarts = 100;
	decide(&w, 3600);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 2);
}

/*
 * The restart cost a caller measured (sched/copus's copus_restart_cost=
 * measured) reaches the next round: the nearly finished job above grows
 * once a move costs half a second instead of 30; a cost that is not a
 * number >= 0 is refused and the one in effect stays.
 */
static void a_measured_restart_cost_reaches_the_next_round(void)
{
	struct world w;
	copus_decision d[MAXJ];
	copus_policy *p = NULL;
	int gpus;

	world_init(&w, 1, 4);
	copus_job *jb = add_job(&w, true, 2, 40, scalable());
	run_alloc(&w, 0, 0, 2);
	jb->restarts = 1;
	ASSERT_STATUS(copus_policy_create("copus", &PRM, &p), COPUS_OK);
	for (int round = 0; round < 4; round++) {
		if (round == 1) {
			ASSERT_STATUS(copus_policy_set_restart_delay(p, 0.5),
				      COPUS_OK);
		}
		if (round == 2) {
			ASSERT_STATUS(copus_policy_set_restart_delay(p, NAN),
				      COPUS_EINVAL);
			ASSERT_STATUS(copus_policy_set_restart_delay(p, -1.0),
				      COPUS_EINVAL);
		}
		if (round == 3) {
			ASSERT_STATUS(copus_policy_set_restart_delay(p, 30.0),
				      COPUS_OK);
		}
		ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, w.n, 3600,
						  d),
			      COPUS_OK);
		gpus = 0;
		for (int i = 0; i < d[0].num_slots; i++)
			gpus += d[0].slots[i].gpus;
		if (round == 0 || round == 3) {
			CU_ASSERT_EQUAL(gpus, 2);
		} else {
			CU_ASSERT(gpus > 2);
		}
	}
	copus_policy_destroy(p);
	ASSERT_STATUS(copus_policy_set_restart_delay(NULL, 1.0), COPUS_EINVAL);
}

static void fairness_guard_lets_a_starved_job_in(void)
{
	struct world w;

	world_init(&w, 1, 4);
	copus_job *old = add_job(&w, false, 4, 3000, scalable());
	old->submit_time = 0;
	copus_job *young = add_job(&w, false, 4, 1000, scalable());
	young->submit_time = 99000;
	/* Shortly after both arrived, shorter first. */
	old->submit_time = young->submit_time = 0;
	decide(&w, 60);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 4);
	/* The long job has waited 10x its own length: it goes first. */
	old->submit_time = 0;
	young->submit_time = 29000;
	decide(&w, 30000);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 0);
}

/*
 * Under contention every job waits: when all are treated about as unfairly
 * as each other, the guard leaves them in order of the work they have left
 * (it does not put the longest waiting first).
 */
static void fairness_guard_is_relative_to_the_other_jobs(void)
{
	struct world w;

	world_init(&w, 1, 4);
	copus_job *shorter = add_job(&w, false, 4, 1000, scalable());
	copus_job *longer = add_job(&w, false, 4, 3000, scalable());
	/* Finish-time fairness 3 and 4 (waited 2,000 s and 9,000 s). */
	shorter->submit_time = 8000;
	longer->submit_time = 1000;
	decide(&w, 10000);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 0);
}

static void unknown_work_favours_the_least_served(void)
{
	struct world w;

	world_init(&w, 1, 4);
	copus_job *a = add_job(&w, false, 4, -1, scalable());
	a->attained = 4 * 3600;
	copus_job *b = add_job(&w, false, 4, -1, scalable());
	b->attained = 0;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 4);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 0);
}

/*
 * Up to its request a short job goes first; GPUs beyond the requests go
 * where they add the most goodput, not to the shortest job: two identical
 * scalable jobs that differ only in remaining work split a node evenly.
 */
static void growth_beyond_the_request_follows_goodput(void)
{
	struct world w;

	world_init(&w, 1, 8);
	add_job(&w, true, 2, 100, scalable());
	add_job(&w, true, 2, 100000, scalable());
	w.jobs[0].max_gpus_had = w.jobs[1].max_gpus_had = 8;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0) + gpus_of(&w, 1), 8);
	CU_ASSERT(abs(gpus_of(&w, 0) - gpus_of(&w, 1)) <= 1);
	/* With room for one request only, the short job has it. */
	world_init(&w, 1, 2);
	add_job(&w, true, 2, 100000, scalable());
	add_job(&w, true, 2, 100, scalable());
	w.jobs[0].min_gpus = w.jobs[1].min_gpus = 2;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 2);
}

/*
 * Within a node, an elastic job's size is a power of two (in replicas of
 * its granularity), its minimum, request or maximum: with 3 of 8 GPUs
 * held by a shorter rigid job, a long job that would use the other 5
 * takes 4;
 * one of two-GPU replicas takes two replicas, not three; a job whose
 * maximum is 5 may have 5.
 */
static void sizes_within_a_node_tile_it(void)
{
	struct world w;

	for (int c = 0; c < 3; c++) {
		world_init(&w, 1, 8);
		add_job(&w, false, 3, 1000, scalable());
		run_alloc(&w, 0, 0, 3);
		copus_job *x = add_job(&w, true, 2, 100000, scalable());
		x->max_gpus_had = 8;
		if (c == 1) {
			x->granularity = 2;
			add_job(&w, false, 1, 1000, scalable());
			run_alloc(&w, 2, 0, 1);
		}
		if (c == 2)
			x->max_gpus = 5;
		decide(&w, 0);
		CU_ASSERT_EQUAL(gpus_of(&w, 0), 3);
		CU_ASSERT_EQUAL(gpus_of(&w, 1), c == 2 ? 5 : 4);
	}
}

/*
 * Two users' rigid jobs want the same two GPUs: the user far beyond their
 * share waits, though their job is the shorter, unless the term is off.
 */
static void fair_share_lets_the_less_served_user_in(void)
{
	const char *specs[] = { "copus", "copus:fairshare=0" };
	copus_policy *p = NULL;
	copus_decision d[2];
	struct world w;

	for (int i = 0; i < 2; i++) {
		world_init(&w, 1, 2);
		add_job(&w, false, 2, 1000, scalable())->fairshare = 0.05;
		add_job(&w, false, 2, 2000, scalable())->fairshare = 0.95;
		ASSERT_STATUS(copus_policy_create(specs[i], &PRM, &p),
			      COPUS_OK);
		ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, 2, 0, d),
			      COPUS_OK);
		CU_ASSERT_EQUAL(d[0].gpus, i == 0 ? 0 : 2);
		CU_ASSERT_EQUAL(d[1].gpus, i == 0 ? 2 : 0);
		copus_policy_destroy(p);
	}
	/* A factor outside [0, 1] is refused; a weight out of range too. */
	world_init(&w, 1, 2);
	add_job(&w, false, 2, 1000, scalable())->fairshare = 1.5;
	ASSERT_STATUS(copus_policy_create("copus", &PRM, &p), COPUS_OK);
	CU_ASSERT_EQUAL(copus_policy_decide(p, &w.c, w.jobs, 1, 0, d),
			COPUS_EINVAL);
	copus_policy_destroy(p);
	ASSERT_STATUS(copus_policy_create("copus:fairshare=11", &PRM, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("copus:fairshare=-1", &PRM, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("copus:fairshare=", &PRM, &p),
		      COPUS_EINVAL);
}

/*
 * Requests of four times the cluster: speedups count less than linearly,
 * so the GPUs go to more jobs, each on fewer of them, than without the
 * term (copus:no-spread); when the requests fit, the two agree.
 */
static void scarce_gpus_spread_over_more_jobs(void)
{
	const char *specs[] = { "copus", "copus:no-spread" };
	int running[2] = { 0, 0 }, gpus[2][8];

	for (int load = 0; load < 2; load++)
		for (int i = 0; i < 2; i++) {
			copus_policy *p = NULL;
			copus_decision d[8];
			struct world w;
			int n = load ? 8 : 2;

			world_init(&w, 2, 4);
			for (int j = 0; j < n; j++)
				add_job(&w, true, 4, 3600 + 60 * j, scalable());
			ASSERT_STATUS(copus_policy_create(specs[i], &PRM, &p),
				      COPUS_OK);
			ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs,
							  (size_t)n, 0, d),
				      COPUS_OK);
			running[i] = 0;
			for (int j = 0; j < n; j++) {
				gpus[i][j] = d[j].gpus;
				running[i] += d[j].gpus > 0;
			}
			copus_policy_destroy(p);
			if (i == 1 && !load)
				for (int j = 0; j < n; j++)
					CU_ASSERT_EQUAL(gpus[0][j], gpus[1][j]);
		}
	if (running[0] <= running[1])
		fprintf(stderr, "running: %d with the term, %d without\n",
			running[0], running[1]);
	CU_ASSERT(running[0] > running[1]);
}

/* The ablation names select ingredients; an unknown one is refused. */
static void ingredients_can_be_switched_off_by_name(void)
{
	copus_policy *p = NULL;
	struct world w;
	copus_decision d[2];

	ASSERT_STATUS(copus_policy_create("copus:bogus", NULL, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("copus:no-srpt,no-restart-cost,"
					  "nofairness", NULL, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("copus:", NULL, &p), COPUS_OK);
	copus_policy_destroy(p);
	/* Without SRPT, the long job (first in order) is not displaced. */
	world_init(&w, 1, 2);
	add_job(&w, true, 2, 100000, scalable());
	add_job(&w, true, 2, 100, scalable());
	w.jobs[0].min_gpus = w.jobs[1].min_gpus = 2;
	ASSERT_STATUS(copus_policy_create("copus:no-srpt,no-fairness", &PRM,
					  &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, 2, 0, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus + d[1].gpus, 2);
	copus_policy_destroy(p);
	/* Without placement rules, a 6-GPU job is spread first-fit. */
	world_init(&w, 3, 4);
	add_job(&w, false, 2, 100, scalable());
	add_job(&w, false, 6, 100, scalable());
	run_alloc(&w, 0, 1, 2);
	ASSERT_STATUS(copus_policy_create("copus:no-placement", &PRM, &p),
		      COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, 2, 0, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[1].gpus, 6);
	CU_ASSERT_EQUAL(d[1].num_slots, 2);
	CU_ASSERT_EQUAL(d[1].slots[0].node, 0);
	CU_ASSERT_EQUAL(d[1].slots[0].gpus, 4);
	CU_ASSERT_EQUAL(d[1].slots[1].node, 1);
	copus_policy_destroy(p);
}

/*
 * Inconsistent input: a job bigger than the cluster waits with a reason, a
 * model with NaN is ignored (the job runs on its request), GPUs in use
 * beyond a node's count are refused; nothing is over-allocated.
 */
static void bad_input_is_skipped_or_refused(void)
{
	struct world w;
	copus_policy *p = NULL;
	copus_decision d[3];

	world_init(&w, 2, 4);
	add_job(&w, false, 16, 100, scalable());
	add_job(&w, true, 2, 100, scalable());
	w.models[1].perf.beta_c = NAN;
	add_job(&w, true, 2, 500, scalable());
	ASSERT_STATUS(copus_policy_create("copus", &PRM, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, 3, 0, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(d[0].reason, "needs 16 GPUs, 8 usable"));
	CU_ASSERT_EQUAL(d[1].gpus, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(d[1].reason, "bad model"));
	CU_ASSERT(d[1].gpus + d[2].gpus <= 8);
	/* 3 + 2 GPUs held on a node of 4. */
	run_alloc(&w, 1, 0, 3);
	run_alloc(&w, 2, 0, 2);
	ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, 3, 60, d),
		      COPUS_EINVAL);
	copus_policy_destroy(p);
}

/*
 * An elastic job whose scaling is unknown (no model) gets its request
 * while every request fits; when they do not, it starts on its minimum,
 * then may double what it ran on. A rigid job always
 * gets its request.
 */
static void unknown_scaling_starts_small_under_contention(void)
{
	struct world w;

	world_init(&w, 1, 8);
	copus_job *e = add_job(&w, true, 4, 3600, scalable());
	copus_job *r = add_job(&w, false, 2, 3600, scalable());
	e->models = NULL;
	r->models = NULL;
	e->max_gpus = 8;
	e->max_gpus_had = 0;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 2);

	/* A third job: 4 + 2 + 4 GPUs asked of 8. */
	add_job(&w, false, 4, 7200, scalable())->models = NULL;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 1);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 2);
	run_alloc(&w, 0, 0, 1);
	decide(&w, 60);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 2);
}

/*
 * A job whose model spans two GPUs per replica (pipeline x tensor = 2) gets
 * an even count, from copus and, as a rigid job, from every other policy.
 */
static void a_granular_job_gets_only_whole_replicas(void)
{
	struct world w;

	world_init(&w, 1, 5);
	copus_job *jb = add_job(&w, true, 4, 5000, scalable());
	jb->granularity = 2;
	jb->max_gpus = 5;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	/* On 3 free GPUs it starts on 2, not 3. */
	world_init(&w, 1, 3);
	jb = add_job(&w, true, 4, 5000, scalable());
	jb->granularity = 2;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 2);
	/* Running on 2, it is not shrunk to 1 for a newcomer. */
	adopt_decision(&w, 0);
	add_job(&w, false, 1, 10, scalable());
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0) % 2, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 1);

	/* Every other policy runs it at a multiple as well (rigid). */
	for (size_t i = 0; copus_policy_name_at(i) != NULL; i++) {
		const char *name = copus_policy_name_at(i);
		copus_decision d[MAXJ];
		copus_policy *p = NULL;

		world_init(&w, 1, 3);
		jb = add_job(&w, true, 3, 5000, scalable());
		jb->granularity = 2;
		jb->min_gpus = 1;
		ASSERT_STATUS(copus_policy_create(name, &PRM, &p), COPUS_OK);
		ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, w.n, 0, d),
			      COPUS_OK);
		if (d[0].gpus % 2 != 0)
			fprintf(stderr, "%s gave %d GPUs\n", name, d[0].gpus);
		CU_ASSERT_EQUAL(d[0].gpus % 2, 0);
		copus_policy_destroy(p);
	}
}

/*
 * The greedy leaves a size unvalued when a bound on its value cannot reach
 * the best gain so far, so the bound must never be below the speedup:
 * over models across the parameters' range and every packed shape, with
 * and without accumulation, before the speedup is known and after (then
 * it is the speedup itself).
 */
static void a_speedup_bound_is_never_below_the_speedup(void)
{
	unsigned long long rng = 7;
	int below = 0, shapes = 0, pruned = 0;

#define UNI(lo, hi)                                                           \
	((rng = rng * 6364136223846793005ull + 1442695040888963407ull),       \
	 (lo) + ((hi) - (lo)) * ((double)(rng >> 11) / 9007199254740992.0))
	for (int i = 0; i < 300; i++) {
		double ar = UNI(1e-3, 0.1), an = ar * UNI(1.1, 5.0);
		copus_model m = {
			{ UNI(0.0, 0.2), UNI(1e-5, 5e-3), an, an * UNI(0, 0.1),
			  ar, ar * UNI(0, 0.1), UNI(1.0, 10.0) },
			{ UNI(0.0, 2.0), UNI(0.0, 1000.0) },
			{ 16.0 * (1 + i % 8), 4096.0, 1 + i % 4, 64 << (i % 3),
			  i % 2 == 0 }
		};
		copus_speedup *sp = NULL;
		int g = 4 << (i % 2);
		if (m.perf.alpha_c <= 0.0)
			m.perf.alpha_c = 1e-3;
		if (copus__speedup_create_packed(&m, g, 64, &sp) != COPUS_OK)
			continue;
		for (int k = 1; k <= 64; k++) {
			int nodes = (k + g - 1) / g;
			bool known;
			double b = copus__speedup_bound(sp, nodes, k, &known);
			double v = 0.0, again;
			ASSERT_STATUS(copus_speedup_get(sp, nodes, k, &v),
				      COPUS_OK);
			again = copus__speedup_bound(sp, nodes, k, &known);
			shapes++;
			pruned += b < 0.5 * k;
			if (!(b >= v) || !known || again != v) {
				if (below++ < 5)
					printf("model %d, %d GPUs on %d nodes: "
					       "bound %.17g, speedup %.17g, "
					       "then %.17g\n", i, k, nodes, b,
					       v, again);
			}
		}
		copus_speedup_destroy(sp);
	}
#undef UNI
	printf("%d shapes, %d with a bound below half their GPUs\n", shapes,
	       pruned);
	CU_ASSERT(shapes > 10000);
	CU_ASSERT_EQUAL(below, 0);
}

/*
 * The speedup tables price a shape's goodput with fewer candidates than
 * copus__best_batch (copus__speedup_goodput): the same goodput, bit for
 * bit, and the same status, over models across the parameters' range and
 * at its extremes, with and without accumulation, on every shape up to 64
 * GPUs.
 */
static void the_tables_goodput_is_best_batch_s(void)
{
	unsigned long long rng = 11;
	int differ = 0, shapes = 0;

#define UNI(lo, hi)                                                           \
	((rng = rng * 6364136223846793005ull + 1442695040888963407ull),       \
	 (lo) + ((hi) - (lo)) * ((double)(rng >> 11) / 9007199254740992.0))
	for (int i = 0; i < 200; i++) {
		double ar = UNI(1e-3, 0.1), an = ar * UNI(1.1, 5.0);
		copus_model m = {
			{ UNI(0.0, 0.2), UNI(1e-5, 5e-3), an, an * UNI(0, 0.1),
			  ar, ar * UNI(0, 0.1), UNI(1.0, 10.0) },
			{ UNI(0.0, 2.0), UNI(0.0, 1000.0) },
			{ 16.0 * (1 + i % 8), 4096.0, 1 + i % 4, 64 << (i % 3),
			  i % 2 == 0 }
		};
		if (m.perf.alpha_c <= 0.0)
			m.perf.alpha_c = 1e-3;
		/* The extremes: no noise, no signal, no fixed time, no sync
		 * within a node. */
		if (i % 10 == 1)
			m.grad.var = 0.0;
		if (i % 10 == 2)
			m.grad.sqr = 0.0;
		if (i % 10 == 3)
			m.perf.alpha_c = 0.0;
		if (i % 10 == 4)
			m.perf.alpha_r = m.perf.beta_r = 0.0;
		if (copus_model_check(&m) != COPUS_OK)
			continue;
		for (int k = 1; k <= 64; k++)
			for (int nodes = 1; nodes <= k; nodes *= 2) {
				copus_batch_plan plan;
				double gp = -1.0;
				int want = copus__best_batch(&m, nodes, k,
							     &plan);
				int got = copus__speedup_goodput(&m, nodes, k,
								 &gp);
				shapes++;
				if (got == want &&
				    (want != COPUS_OK ||
				     memcmp(&gp, &plan.goodput,
					    sizeof(gp)) == 0))
					continue;
				if (differ++ < 5)
					printf("model %d, %d GPUs on %d nodes: "
					       "%d %.17g, best_batch %d "
					       "%.17g\n", i, k, nodes, got, gp,
					       want, plan.goodput);
			}
	}
#undef UNI
	printf("%d shapes\n", shapes);
	CU_ASSERT(shapes > 10000);
	CU_ASSERT_EQUAL(differ, 0);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(shortest_remaining_work_goes_first),
		TEST(a_granular_job_gets_only_whole_replicas),
		TEST(rigid_jobs_keep_their_request),
		TEST(a_new_job_starts_on_what_fits),
		TEST(a_running_job_moves_to_make_room),
		TEST(goodput_decides_how_many_gpus_a_job_uses),
		TEST(restart_cost_holds_a_nearly_finished_job),
		TEST(a_measured_restart_cost_reaches_the_next_round),
		TEST(fairness_guard_lets_a_starved_job_in),
		TEST(fairness_guard_is_relative_to_the_other_jobs),
		TEST(unknown_work_favours_the_least_served),
		TEST(growth_beyond_the_request_follows_goodput),
		TEST(sizes_within_a_node_tile_it),
		TEST(fair_share_lets_the_less_served_user_in),
		TEST(scarce_gpus_spread_over_more_jobs),
		TEST(ingredients_can_be_switched_off_by_name),
		TEST(bad_input_is_skipped_or_refused),
		TEST(unknown_scaling_starts_small_under_contention),
		TEST(a_speedup_bound_is_never_below_the_speedup),
		TEST(the_tables_goodput_is_best_batch_s),
	};
	return RUN_TESTS("policy-copus", tests);
}
