/*
 * The sia policy: its integer program against enumeration of every choice,
 * the limits and capacities of its decisions, its options, and what it does
 * when the solver fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"
#include "policy/ops.h"
#include "policy/sia.h"

#define MAXN 8
#define MAXJ 12
#define MAXV 24

/* A small deterministic generator, so that a failure can be replayed. */
static uint64_t rng_state;

static unsigned rnd(unsigned n)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(rng_state >> 33) % n;
}

/* The best objective of ip over every choice, by enumeration. */
static double brute(const struct copus__sia_ip *ip, size_t j, long *used,
		    double acc)
{
	double best;

	if (j == ip->njobs)
		return acc;
	best = brute(ip, j + 1, used, acc); /* job j left out */
	for (size_t v = 0; v < ip->nvars; v++) {
		double x;

		if (ip->job[v] != j ||
		    used[ip->type[v]] + ip->gpus[v] > ip->cap[ip->type[v]])
			continue;
		used[ip->type[v]] += ip->gpus[v];
		x = brute(ip, j + 1, used, acc + ip->coef[v]);
		used[ip->type[v]] -= ip->gpus[v];
		if (ip->maximize ? x > best : x < best)
			best = x;
	}
	return best;
}

static void the_program_finds_the_optimum_of_every_choice(void)
{
	rng_state = 42;
	for (int trial = 0; trial < 300; trial++) {
		size_t job[MAXV], nv = 0, nj = 1 + rnd(6);
		int type[MAXV], gpus[MAXV], T = 1 + (int)rnd(3);
		double coef[MAXV], got, want;
		long cap[3], used[3] = { 0 }, choice[MAXJ];
		bool maximize = rnd(2);
		struct copus__sia_ip ip;

		for (int t = 0; t < T; t++)
			cap[t] = (long)rnd(12);
		for (size_t j = 0; j < nj; j++)
			for (unsigned k = rnd(5); k > 0 && nv < MAXV; k--) {
				job[nv] = j;
				type[nv] = (int)rnd((unsigned)T);
				gpus[nv] = 1 << rnd(4);
				/* Sia's coefficients: two decimals. */
				coef[nv] = (maximize ? 1 : -1) *
					   (1 + (int)rnd(300)) / 100.0;
				nv++;
			}
		ip = (struct copus__sia_ip){ nj, T, nv, job, type, gpus, coef,
					     cap, maximize, 10000 };
		ASSERT_STATUS(copus__sia_solve(&ip, choice, &got), COPUS_OK);
		want = brute(&ip, 0, used, 0.0);
		if (fabs(got - want) > 1e-6)
			fprintf(stderr, "trial %d: %zu jobs, %zu variables, "
				"%d types\n", trial, nj, nv, T);
		ASSERT_CLOSE(got, want, 1e-6);
		/* The choice is what the objective says, and feasible. */
		{
			double sum = 0.0;
			long u[3] = { 0 };

			for (size_t j = 0; j < nj; j++) {
				long v = choice[j];

				if (v < 0)
					continue;
				CU_ASSERT((size_t)v < nv && job[v] == j);
				sum += coef[v];
				u[type[v]] += gpus[v];
			}
			ASSERT_CLOSE(sum, want, 1e-6);
			for (int t = 0; t < T; t++)
				CU_ASSERT(u[t] <= cap[t]);
		}
	}
}

/* ------------------------------------------------------------ a world */

/* A job that scales well (cheap sync) with plenty of gradient noise. */
static copus_model scalable(double speed)
{
	copus_model m = {
		.perf = { 0.05 / speed, 0.002 / speed, 0.02, 0.001, 0.005,
			  0.0005, 1.5 },
		.grad = { .sqr = 1.0, .var = 200.0 },
		.limits = { .init_batch = 64, .max_batch = 8192, .min_local = 8,
			    .max_local = 256, .accumulation = true },
	};
	return m;
}

struct world {
	copus_node nodes[MAXN];
	copus_cluster c;
	copus_job jobs[MAXJ];
	copus_model models[MAXJ][2];
	const copus_model *mp[MAXJ][2];
	copus_slot alloc[MAXJ][MAXN];
	size_t n;
};

/* Type 0: four nodes of 4 GPUs; type 1: two nodes of 8. */
static void world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
	for (int k = 0; k < 4; k++)
		w->nodes[k] = (copus_node){ 0, 4, true };
	for (int k = 4; k < 6; k++)
		w->nodes[k] = (copus_node){ 1, 8, true };
	w->c = (copus_cluster){ 6, w->nodes, 2, NULL, NULL };
}

static copus_job *add_job(struct world *w, int max_gpus, int had,
			  uint32_t mask, bool model0, bool model1)
{
	size_t i = w->n++;
	copus_job *j = &w->jobs[i];

	memset(j, 0, sizeof(*j));
	j->id = 100 + i;
	j->elastic = true;
	j->min_gpus = 1;
	j->max_gpus = max_gpus;
	j->req_gpus = 1;
	j->req_batch = 1024;
	j->type_mask = mask;
	j->submit_time = 0;
	j->remaining = -1;
	j->max_gpus_had = had;
	j->alloc_type = -1;
	w->models[i][0] = scalable(1.0);
	w->models[i][1] = scalable(3.0);
	w->mp[i][0] = model0 ? &w->models[i][0] : NULL;
	w->mp[i][1] = model1 ? &w->models[i][1] : NULL;
	j->models = w->mp[i];
	j->alloc = w->alloc[i];
	return j;
}

/* Apply decisions as the caller would: the job now holds what it got. */
static void apply(struct world *w, const copus_decision *d)
{
	for (size_t i = 0; i < w->n; i++) {
		copus_job *j = &w->jobs[i];

		j->alloc_slots = d[i].num_slots;
		j->alloc_type = d[i].gpu_type;
		for (int s = 0; s < d[i].num_slots; s++)
			w->alloc[i][s] = d[i].slots[s];
		if (d[i].changed && d[i].gpus > 0)
			j->restarts++;
		if (d[i].gpus > j->max_gpus_had)
			j->max_gpus_had = d[i].gpus;
	}
}

/* Every decision within the job's limits, types and the nodes' GPUs. */
static void check_decisions(const struct world *w, const copus_decision *d)
{
	int used[MAXN] = { 0 };

	for (size_t i = 0; i < w->n; i++) {
		const copus_job *j = &w->jobs[i];
		int cap = 2 * j->max_gpus_had > 1 ? 2 * j->max_gpus_had : 1;
		int g = 0;

		if (d[i].gpus == 0)
			continue;
		if (cap > j->max_gpus)
			cap = j->max_gpus;
		if (d[i].gpus > cap || d[i].gpus < j->min_gpus)
			fprintf(stderr, "job %zu: %d GPUs outside [%d, %d]\n",
				i, d[i].gpus, j->min_gpus, cap);
		CU_ASSERT(d[i].gpus <= cap && d[i].gpus >= j->min_gpus);
		CU_ASSERT(copus__type_allowed(j, d[i].gpu_type));
		for (int s = 0; s < d[i].num_slots; s++) {
			const copus_slot *sl = &d[i].slots[s];
			const copus_node *nd = &w->nodes[sl->node];

			CU_ASSERT(nd->usable);
			CU_ASSERT_EQUAL(nd->gpu_type, d[i].gpu_type);
			/* A job on several nodes has them whole. */
			if (d[i].num_slots > 1)
				CU_ASSERT_EQUAL(sl->gpus, nd->gpus);
			used[sl->node] += sl->gpus;
			g += sl->gpus;
		}
		CU_ASSERT_EQUAL(g, d[i].gpus);
	}
	for (int k = 0; k < w->c.num_nodes; k++) {
		if (used[k] > w->nodes[k].gpus)
			fprintf(stderr, "node %d: %d GPUs of %d used\n", k,
				used[k], w->nodes[k].gpus);
		CU_ASSERT(used[k] <= w->nodes[k].gpus);
	}
}

static void decisions_keep_limits_types_and_capacities(void)
{
	rng_state = 7;
	for (int trial = 0; trial < 40; trial++) {
		struct world w;
		copus_policy *p;
		copus_decision d[MAXJ];
		size_t nj = 2 + rnd(MAXJ - 1);

		world_init(&w);
		for (size_t i = 0; i < nj; i++) {
			uint32_t mask = rnd(3); /* any, type 0 only, type 1 only */
			copus_job *j = add_job(&w, 1 + (int)rnd(24),
					       (int)rnd(9), mask, rnd(2),
					       rnd(2));

			j->min_gpus = 1 + (int)rnd(2);
			if (j->min_gpus > j->max_gpus)
				j->min_gpus = j->max_gpus;
			j->submit_time = -60.0 * rnd(100);
		}
		ASSERT_STATUS(copus_policy_create("sia", NULL, &p), COPUS_OK);
		for (int round = 0; round < 6; round++) {
			ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs,
							  w.n, 60.0 * round, d),
				      COPUS_OK);
			check_decisions(&w, d);
			apply(&w, d);
		}
		copus_policy_destroy(p);
	}
}

static void a_job_with_nothing_learned_starts_on_one_gpu(void)
{
	struct world w;
	copus_policy *p;
	copus_decision d[MAXJ];

	world_init(&w);
	add_job(&w, 64, 0, 0, false, false);
	ASSERT_STATUS(copus_policy_create("sia", NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, w.n, 0.0, d),
		      COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus, 1);
	copus_policy_destroy(p);
}

static void a_lone_job_grows_by_doubling_onto_whole_nodes(void)
{
	struct world w;
	copus_policy *p;
	copus_decision d[MAXJ];
	int seen[8], nseen = 0;

	world_init(&w);
	add_job(&w, 64, 0, 1u << 1, false, true);
	ASSERT_STATUS(copus_policy_create("sia", NULL, &p), COPUS_OK);
	for (int round = 0; round < 6; round++) {
		ASSERT_STATUS(copus_policy_decide(p, &w.c, w.jobs, w.n,
						  3600.0 * (round + 1), d),
			      COPUS_OK);
		check_decisions(&w, d);
		seen[nseen++] = d[0].gpus;
		apply(&w, d);
	}
	/* One GPU before it has run, then twice the most it has had. */
	CU_ASSERT_EQUAL(seen[0], 1);
	CU_ASSERT_EQUAL(seen[1], 2);
	CU_ASSERT_EQUAL(seen[2], 4);
	CU_ASSERT_EQUAL(seen[3], 8);
	CU_ASSERT_EQUAL(seen[4], 16);
	CU_ASSERT_EQUAL(d[0].num_slots, 2);
	copus_policy_destroy(p);
}

static void options_are_sias_and_bad_ones_are_refused(void)
{
	copus_policy *p = NULL;

	ASSERT_STATUS(copus_policy_create("sia:p=-1,lambda_n=1.2,lambda_a=0.02"
					  ",time_limit_ms=500", NULL, &p),
		      COPUS_OK);
	copus_policy_destroy(p);
	ASSERT_STATUS(copus_policy_create("sia:p=0", NULL, &p), COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("sia:q=1", NULL, &p), COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("sia:p=", NULL, &p), COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("sia:time_limit_ms=0", NULL, &p),
		      COPUS_EINVAL);
}

static int failing_solver(const struct copus__sia_ip *ip, long *choice,
			  double *obj)
{
	(void)ip;
	(void)choice;
	(void)obj;
	return COPUS_ERANGE;
}

static void a_failed_solve_keeps_jobs_where_they_were(void)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct world w;
	struct copus__sia_state *s;
	void *state;
	copus_slot slots[64];
	size_t off[MAXJ];
	int cnt[MAXJ] = { 0 }, types[MAXJ];
	char reasons[MAXJ][64];
	struct copus__result res = { slots, 64, 0, off, cnt, types, reasons };

	world_init(&w);
	add_job(&w, 16, 8, 0, true, true);   /* two nodes of type 0 */
	add_job(&w, 16, 8, 0, true, true);   /* 3 GPUs on a type-1 node */
	add_job(&w, 16, 0, 0, false, false); /* queued */
	add_job(&w, 16, 2, 1u << 1, true, true); /* on a node now down */
	w.jobs[0].alloc_type = 0;
	w.jobs[0].alloc_slots = 2;
	w.alloc[0][0] = (copus_slot){ 1, 4 };
	w.alloc[0][1] = (copus_slot){ 2, 4 };
	w.jobs[1].alloc_type = 1;
	w.jobs[1].alloc_slots = 1;
	w.alloc[1][0] = (copus_slot){ 4, 3 };
	w.jobs[3].alloc_type = 1;
	w.jobs[3].alloc_slots = 1;
	w.alloc[3][0] = (copus_slot){ 5, 2 };
	w.nodes[5].usable = false;

	ASSERT_STATUS(copus__sia_ops.create(NULL, &state), COPUS_OK);
	s = state;
	s->solve = failing_solver;
	for (size_t j = 0; j < MAXJ; j++)
		types[j] = -1;
	ASSERT_STATUS(copus__sia_ops.decide(state, &prm, &w.c, w.jobs, w.n,
					    600.0, &res),
		      COPUS_OK);
	CU_ASSERT_EQUAL(s->last_status, COPUS_ERANGE);
	CU_ASSERT_EQUAL(types[0], 0);
	CU_ASSERT_EQUAL(cnt[0], 2);
	CU_ASSERT(cnt[0] == 2 && slots[off[0]].node == 1 &&
		  slots[off[0]].gpus == 4 && slots[off[0] + 1].node == 2);
	CU_ASSERT_EQUAL(types[1], 1);
	CU_ASSERT(cnt[1] == 1 && slots[off[1]].node == 4 &&
		  slots[off[1]].gpus == 3);
	CU_ASSERT_EQUAL(cnt[2], 0);
	CU_ASSERT_EQUAL(types[2], -1);
	CU_ASSERT_EQUAL(cnt[3], 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(reasons[0], "no solution"));
	copus__sia_ops.destroy(state);
}

/*
 * GLPK stops on a fatal error (here a matrix entry outside the program, as
 * a broken caller would give it) by aborting the process; in slurmctld
 * that is the controller. The solve reports the error instead, and GLPK
 * works again afterwards.
 */
static void a_fatal_solver_error_is_an_error_not_an_abort(void)
{
	size_t job[1] = { 0 };
	int bad_type[1] = { 5 }, type[1] = { 0 }, gpus[1] = { 1 };
	double coef[1] = { 1.0 }, got;
	long cap[1] = { 4 }, choice[1];
	struct copus__sia_ip ip = { 1, 1, 1, job, bad_type, gpus, coef, cap,
				    true, 1000 };

	CU_ASSERT_NOT_EQUAL(copus__sia_solve(&ip, choice, &got), COPUS_OK);
	ip.type = type;
	ASSERT_STATUS(copus__sia_solve(&ip, choice, &got), COPUS_OK);
	CU_ASSERT_EQUAL(choice[0], 0);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(the_program_finds_the_optimum_of_every_choice),
		TEST(decisions_keep_limits_types_and_capacities),
		TEST(a_job_with_nothing_learned_starts_on_one_gpu),
		TEST(a_lone_job_grows_by_doubling_onto_whole_nodes),
		TEST(options_are_sias_and_bad_ones_are_refused),
		TEST(a_failed_solve_keeps_jobs_where_they_were),
		TEST(a_fatal_solver_error_is_an_error_not_an_abort),
	};

	return RUN_TESTS("policy-sia", tests);
}
