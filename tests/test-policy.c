/* The baseline policies on small hand-made clusters. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"

static copus_node nodes4[4];

static copus_cluster make_cluster(int n, int g)
{
	copus_cluster c = { 0 };

	for (int k = 0; k < n; k++) {
		nodes4[k].gpu_type = 0;
		nodes4[k].gpus = g;
		nodes4[k].usable = true;
	}
	c.num_nodes = n;
	c.nodes = nodes4;
	c.num_types = 1;
	return c;
}

static copus_job rigid(uint64_t id, int gpus, double submit, double rem)
{
	copus_job j = { 0 };

	j.id = id;
	j.min_gpus = 1;
	j.max_gpus = gpus;
	j.req_gpus = gpus;
	j.req_batch = 128;
	j.submit_time = submit;
	j.remaining = rem;
	return j;
}

static void test_create_rejects_bad_input(void)
{
	copus_policy *p = NULL;
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;

	ASSERT_STATUS(copus_policy_create("nonesuch", NULL, &p), COPUS_EINVAL);
	prm.version = 99;
	ASSERT_STATUS(copus_policy_create("fifo", &prm, &p), COPUS_EVERSION);
	prm.version = COPUS_POLICY_PARAMS_VERSION;
	prm.interval = 0;
	ASSERT_STATUS(copus_policy_create("fifo", &prm, &p), COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("pollux", NULL, &p), COPUS_OK);
	CU_ASSERT_STRING_EQUAL(copus_policy_name(p), "pollux");
	copus_policy_destroy(p);
}

/*
 * Parameters of version 1 (before fairshare) are still taken, the later
 * fields at their defaults; a size that is not its version's is refused,
 * and so is a fair-share weight out of [0, COPUS_POLICY_FAIRSHARE_MAX] for
 * every policy.
 */
static void test_params_of_an_older_version_are_taken(void)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	copus_policy *p = NULL;

	CU_ASSERT_EQUAL(prm.version, 2);
	ASSERT_CLOSE(prm.fairshare, 1.0, 0);
	prm.version = 1;
	ASSERT_STATUS(copus_policy_create("copus", &prm, &p), COPUS_EVERSION);
	prm.size = offsetof(copus_policy_params, fairshare);
	ASSERT_STATUS(copus_policy_create("copus", &prm, &p), COPUS_OK);
	copus_policy_destroy(p);
	prm.version = COPUS_POLICY_PARAMS_VERSION;
	ASSERT_STATUS(copus_policy_create("copus", &prm, &p), COPUS_EVERSION);
	prm.size = sizeof(prm);
	for (size_t i = 0; copus_policy_name_at(i) != NULL; i++) {
		const char *name = copus_policy_name_at(i);
		const double bad[] = { -0.5, COPUS_POLICY_FAIRSHARE_MAX + 0.5,
				       NAN };

		prm.fairshare = COPUS_POLICY_FAIRSHARE_MAX;
		ASSERT_STATUS(copus_policy_create(name, &prm, &p), COPUS_OK);
		copus_policy_destroy(p);
		for (int k = 0; k < 3; k++) {
			prm.fairshare = bad[k];
			ASSERT_STATUS(copus_policy_create(name, &prm, &p),
				      COPUS_EINVAL);
		}
	}
}

/*
 * Which of two rigid jobs on the same two GPUs spec starts under a
 * fair-share weight w (copus_policy_params.fairshare): 1 or 2, 0 for
 * neither. Job 1 is the shorter; its user's factor is f1, job 2's f2.
 */
static int fair_share_pick(const char *spec, double w, double f1, double f2)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	copus_cluster c = make_cluster(1, 2);
	copus_job j[2] = { rigid(1, 2, 0, 1000), rigid(2, 2, 0, 2000) };
	copus_decision d[2];
	copus_policy *p = NULL;
	int rc;

	j[0].fairshare = f1;
	j[1].fairshare = f2;
	prm.fairshare = w;
	ASSERT_STATUS(copus_policy_create(spec, &prm, &p), COPUS_OK);
	if (p == NULL)
		return -1;
	rc = copus_policy_decide(p, &c, j, 2, 0, d);
	copus_policy_destroy(p);
	CU_ASSERT_EQUAL(rc, COPUS_OK);
	if (rc != COPUS_OK)
		return -1;
	return d[0].gpus > 0 ? 1 : d[1].gpus > 0 ? 2 : 0;
}

/*
 * The copus policy, with options or without, weighs the users' fair-share
 * factors by the parameter copus_policy_params.fairshare; its option
 * fairshare=W stands over the parameter.
 */
static void test_the_fair_share_weight_is_a_parameter(void)
{
	/* Shortest first without the term; the less served user with it. */
	CU_ASSERT_EQUAL(fair_share_pick("copus", 0.0, 0.05, 0.95), 1);
	CU_ASSERT_EQUAL(fair_share_pick("copus", 1.0, 0.05, 0.95), 2);
	CU_ASSERT_EQUAL(fair_share_pick("copus:no-restart-cost", 0.0, 0.05,
					0.95), 1);
	CU_ASSERT_EQUAL(fair_share_pick("copus:no-restart-cost", 2.0, 0.05,
					0.95), 2);
	/* Without SRPT the factors alone decide, whichever way they go. */
	CU_ASSERT_EQUAL(fair_share_pick("copus:no-srpt", 1.0, 0.05, 0.95), 2);
	CU_ASSERT_EQUAL(fair_share_pick("copus:no-srpt", 1.0, 0.95, 0.05), 1);
	/* The option stands over the parameter. */
	CU_ASSERT_EQUAL(fair_share_pick("copus:fairshare=0", 5.0, 0.05, 0.95),
			1);
	CU_ASSERT_EQUAL(fair_share_pick("copus:fairshare=1", 0.0, 0.05, 0.95),
			2);
	/* A policy that does not weigh the factors ignores the weight. */
	CU_ASSERT_EQUAL(fair_share_pick("fifo", 5.0, 0.05, 0.95), 1);
}

static void test_inconsistent_input_is_rejected(void)
{
	copus_cluster c = make_cluster(2, 4);
	copus_job j[2] = { rigid(1, 4, 0, 10), rigid(2, 2, 0, 10) };
	copus_slot a1[1] = { { 0, 3 } }, a2[1] = { { 0, 2 } };
	copus_decision d[2];
	copus_policy *p;
	long bad;

	j[0].alloc = a1;
	j[0].alloc_slots = 1;
	j[1].alloc = a2;
	j[1].alloc_slots = 1;
	/* 3 + 2 GPUs on a node of 4. */
	ASSERT_STATUS(copus_policy_check_input(&c, j, 2, &bad), COPUS_EINVAL);
	CU_ASSERT_EQUAL(bad, 1);
	ASSERT_STATUS(copus_policy_create("tiresias", NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_EINVAL);
	a2[0].gpus = 1;
	j[1].alloc_slots = 2; /* slots but no array */
	j[1].alloc = NULL;
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_EINVAL);
	j[1].alloc = a2;
	a2[0].node = 2; /* a node the cluster does not have */
	j[1].alloc_slots = 1;
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_EINVAL);
	a2[0].node = 0;
	j[1].min_gpus = 3; /* min > max */
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_EINVAL);
	j[1].min_gpus = 1;
	j[1].type_mask = 1u << 5; /* a type the cluster does not have */
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_EINVAL);
	j[1].type_mask = 0;
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_OK);
	{
		/* A table of cells: each entry a cell of the cluster with a
		 * positive time per iteration, and a finite count left. */
		copus_cell_time ct[2] = { { 0, 2, 1, 1.5 }, { 0, 4, 2, 0.8 } };

		j[1].cells = ct;
		j[1].num_cells = 2;
		j[1].remaining_iters = 100;
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_OK);
		j[1].cells = NULL; /* a count without a table */
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d),
			      COPUS_EINVAL);
		j[1].cells = ct;
		ct[1].gpu_type = 1; /* a type the cluster does not have */
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d),
			      COPUS_EINVAL);
		ct[1].gpu_type = 0;
		ct[1].nodes = 3; /* 4 GPUs do not spread evenly on 3 */
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d),
			      COPUS_EINVAL);
		ct[1].nodes = 2;
		ct[0].seconds = 0;
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d),
			      COPUS_EINVAL);
		ct[0].seconds = 1.5;
		j[1].remaining_iters = NAN;
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d),
			      COPUS_EINVAL);
		j[1].remaining_iters = -1; /* unknown */
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_OK);
	}
	copus_policy_destroy(p);
}

/*
 * EASY backfill: the head (8 GPUs) waits for the running job (ends at
 * 100 s); a 2-GPU job that ends by then starts, one that would delay the
 * head does not.
 */
static void test_fifo_backfills_without_delaying_the_head(void)
{
	copus_cluster c = make_cluster(2, 4);
	copus_job j[4] = { rigid(1, 4, 0, 100), rigid(2, 8, 1, 1000),
			   rigid(3, 2, 2, 50), rigid(4, 2, 3, 500) };
	copus_slot a1[1] = { { 0, 4 } };
	copus_decision d[4];
	copus_policy *p;

	j[0].alloc = a1;
	j[0].alloc_slots = 1;
	ASSERT_STATUS(copus_policy_create("fifo", NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 4, 0, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus, 4);
	CU_ASSERT_FALSE(d[0].changed);
	CU_ASSERT_EQUAL(d[1].gpus, 0);
	CU_ASSERT_EQUAL(d[2].gpus, 2);
	CU_ASSERT_EQUAL(d[2].slots[0].node, 1);
	CU_ASSERT_EQUAL(d[3].gpus, 0);
	/* With the long job alone, it starts in order. */
	ASSERT_STATUS(copus_policy_decide(p, &c, &j[3], 1, 0, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus, 2);
	copus_policy_destroy(p);
}

/* A job past the threshold yields to a new one; the new one is packed. */
static void test_tiresias_demotes_and_preempts(void)
{
	copus_cluster c = make_cluster(2, 4);
	copus_job j[3] = { rigid(1, 4, 0, -1), rigid(2, 4, 10, -1),
			   rigid(3, 4, 20, -1) };
	copus_slot a1[1] = { { 0, 4 } }, a2[1] = { { 1, 4 } };
	copus_decision d[3];
	copus_policy *p;

	j[0].alloc = a1;
	j[0].alloc_slots = 1;
	j[0].attained = 17 * 3600.0 * 4;
	j[1].alloc = a2;
	j[1].alloc_slots = 1;
	j[1].attained = 3600.0;
	ASSERT_STATUS(copus_policy_create("tiresias", NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 3, 100, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus, 0);  /* demoted, preempted */
	CU_ASSERT_EQUAL(d[1].gpus, 4);  /* keeps its node */
	CU_ASSERT_FALSE(d[1].changed);
	CU_ASSERT_EQUAL(d[2].gpus, 4);
	CU_ASSERT_EQUAL(d[2].num_slots, 1);
	CU_ASSERT_EQUAL(d[2].slots[0].node, 0);
	copus_policy_destroy(p);
}

static copus_model toy_model(double alpha_n, double beta_c)
{
	copus_model m = { 0 };

	m.perf.alpha_c = 0.01;
	m.perf.beta_c = beta_c;
	m.perf.alpha_n = alpha_n;
	m.perf.beta_n = alpha_n / 10;
	m.perf.alpha_r = alpha_n / 4;
	m.perf.beta_r = alpha_n / 40;
	m.perf.gamma = 1.5;
	m.grad.sqr = 1.0;
	m.grad.var = 50.0;
	m.limits.init_batch = 64;
	m.limits.max_batch = 4096;
	m.limits.min_local = 8;
	m.limits.max_local = 256;
	m.limits.accumulation = true;
	return m;
}

/* Each job gets one GPU first; spare GPUs go to the longest job. */
static void test_optimus_gives_spare_gpus_to_long_jobs(void)
{
	copus_cluster c = make_cluster(1, 4);
	copus_model m = toy_model(0.001, 0.002);
	const copus_model *mp[1] = { &m };
	copus_job j[2] = { rigid(1, 1, 0, 10), rigid(2, 1, 1, 100000) };
	copus_decision d[2];
	copus_policy *p;

	for (int i = 0; i < 2; i++) {
		j[i].elastic = true;
		j[i].max_gpus = 4;
		j[i].req_batch = 1024;
		j[i].models = mp;
	}
	ASSERT_STATUS(copus_policy_create("optimus", NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 2, 0, d), COPUS_OK);
	CU_ASSERT_EQUAL(d[0].gpus, 1);
	CU_ASSERT_EQUAL(d[1].gpus, 3);
	CU_ASSERT_EQUAL(d[1].batch, 1024);
	copus_policy_destroy(p);
}

/* A small deterministic generator for the random instances. */
static uint64_t rng = 88172645463325252ull;

static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static void check_feasible(const copus_cluster *c, const copus_decision *d,
			   size_t n, bool one_dist)
{
	int used[4] = { 0 }, dist[4] = { 0 };

	for (size_t j = 0; j < n; j++) {
		int s = 0;

		for (int k = 0; k < d[j].num_slots; k++) {
			used[d[j].slots[k].node] += d[j].slots[k].gpus;
			if (d[j].num_slots > 1)
				dist[d[j].slots[k].node]++;
			s += d[j].slots[k].gpus;
		}
		CU_ASSERT_EQUAL(s, d[j].gpus);
	}
	for (int k = 0; k < c->num_nodes; k++) {
		CU_ASSERT(used[k] <= c->nodes[k].gpus);
		CU_ASSERT(!one_dist || dist[k] <= 1);
	}
}

/* Random instances: never more GPUs than a node has under every policy,
 * and one multi-node job per node under pollux (the baselines, as in
 * Pollux's simulator, do not have that rule). */
static void test_policies_never_over_allocate(void)
{
	static const char *const names[] = { "fifo", "tiresias", "optimus",
					     "pollux" };
	copus_cluster c = make_cluster(4, 4);
	copus_model m[8];
	const copus_model *mp[8][1];
	copus_job j[8];
	copus_decision d[8];
	copus_slot alloc[8][4];

	for (int pi = 0; pi < 4; pi++) {
		copus_policy *p;

		ASSERT_STATUS(copus_policy_create(names[pi], NULL, &p),
			      COPUS_OK);
		for (int round = 0; round < 30; round++) {
			int n = 1 + (int)(urand() * 8);

			for (int i = 0; i < n; i++) {
				m[i] = toy_model(0.001 + urand() * 0.05,
						 0.0005 + urand() * 0.005);
				mp[i][0] = &m[i];
				j[i] = rigid((uint64_t)i, 1 + (int)(urand() * 8),
					     urand() * 100, urand() * 1000);
				j[i].elastic = pi >= 2;
				j[i].max_gpus = 16;
				j[i].max_gpus_had = (int)(urand() * 8);
				j[i].attained = urand() * 1e5;
				j[i].models = urand() < 0.8 ? mp[i] : NULL;
				j[i].req_batch = 512;
			}
			ASSERT_STATUS(copus_policy_decide(p, &c, j, (size_t)n,
							  200 + round * 60, d),
				      COPUS_OK);
			check_feasible(&c, d, (size_t)n, pi == 3);
			/* Feed the decisions back as current allocations. */
			for (int i = 0; i < n; i++) {
				for (int k = 0; k < d[i].num_slots; k++)
					alloc[i][k] = d[i].slots[k];
				j[i].alloc = alloc[i];
				j[i].alloc_slots = d[i].num_slots;
				j[i].alloc_type = 0;
			}
			ASSERT_STATUS(copus_policy_decide(p, &c, j, (size_t)n,
							  260 + round * 60, d),
				      COPUS_OK);
			check_feasible(&c, d, (size_t)n, pi == 3);
			for (int i = 0; i < n; i++) {
				j[i].alloc = NULL;
				j[i].alloc_slots = 0;
			}
		}
		copus_policy_destroy(p);
	}
}

/*
 * Pollux's objective computed independently of the policy: the -1 power
 * mean of speedups over the fair share, scaled so a node's worth is 1.
 * The speedups of every shape are tabulated once per instance.
 */
static double sp_tab[3][5][9];

static void tabulate(const copus_cluster *c, const copus_model *m, int nj)
{
	int total = 0;

	for (int k = 0; k < c->num_nodes; k++)
		total += c->nodes[k].gpus;
	int fair = (total + nj - 1) / nj;

	for (int j = 0; j < nj; j++)
		for (int nn = 1; nn <= c->num_nodes; nn++)
			for (int r = nn; r <= total && r < 9; r++) {
				copus_batch_plan a, b;
				double s = 0.0;

				if (copus_best_batch(&m[j], nn, r, &a) ==
				    COPUS_OK &&
				    copus_best_batch(&m[j], 1, fair, &b) ==
				    COPUS_OK)
					s = a.goodput / b.goodput;
				sp_tab[j][nn][r] = s * c->num_nodes / total;
			}
}

static double objective(const copus_cluster *c, int nj, int (*st)[4])
{
	double sum = 0.0;

	for (int j = 0; j < nj; j++) {
		int r = 0, nn = 0;
		double s = 0.0;

		for (int k = 0; k < c->num_nodes; k++) {
			r += st[j][k];
			nn += st[j][k] > 0;
		}
		if (r > 0)
			s = sp_tab[j][nn][r];
		sum += pow(s + 1e-3, -1.0);
	}
	return pow(sum / nj, -1.0);
}

static double best;

static void enumerate(const copus_cluster *c, int nj,
		      int (*st)[4], int pos, const int *cap)
{
	int N = c->num_nodes;

	if (pos == nj * N) {
		int used[4] = { 0 }, dist[4] = { 0 };

		for (int j = 0; j < nj; j++) {
			int r = 0, nn = 0;

			for (int k = 0; k < N; k++) {
				r += st[j][k];
				nn += st[j][k] > 0;
				used[k] += st[j][k];
			}
			if (r > cap[j])
				return;
			if (nn > 1)
				for (int k = 0; k < N; k++)
					dist[k] += st[j][k] > 0;
		}
		for (int k = 0; k < N; k++)
			if (used[k] > c->nodes[k].gpus || dist[k] > 1)
				return;
		double v = objective(c, nj, st);

		if (v > best)
			best = v;
		return;
	}
	for (int g = 0; g <= c->nodes[pos % N].gpus; g++) {
		st[pos / N][pos % N] = g;
		enumerate(c, nj, st, pos + 1, cap);
	}
	st[pos / N][pos % N] = 0;
}

/*
 * On small instances the search reaches the exhaustive optimum of the
 * Pollux objective (within 1%), where Pollux's genetic algorithm gives no
 * guarantee.
 */
static void test_pollux_search_matches_exhaustive(void)
{
	copus_cluster c = make_cluster(3, 2);
	copus_model m[3];
	const copus_model *mp[3][1];
	copus_job j[3];
	copus_decision d[3];
	int st[3][4], cap[3];
	double worst = 1.0;

	for (int inst = 0; inst < 12; inst++) {
		copus_policy *p;
		double v;

		for (int i = 0; i < 3; i++) {
			m[i] = toy_model(0.0005 + urand() * 0.05,
					 0.0002 + urand() * 0.004);
			m[i].grad.var = 1 + urand() * 500;
			mp[i][0] = &m[i];
			j[i] = rigid((uint64_t)i, 1, 0, -1);
			j[i].elastic = true;
			j[i].max_gpus = 6;
			j[i].max_gpus_had = 3;
			j[i].models = mp[i];
			cap[i] = 6;
		}
		ASSERT_STATUS(copus_policy_create("pollux", NULL, &p), COPUS_OK);
		/* Age large enough that restarts cost nothing. */
		ASSERT_STATUS(copus_policy_decide(p, &c, j, 3, 1e12, d),
			      COPUS_OK);
		memset(st, 0, sizeof(st));
		for (int i = 0; i < 3; i++)
			for (int k = 0; k < d[i].num_slots; k++)
				st[i][d[i].slots[k].node] = d[i].slots[k].gpus;
		tabulate(&c, m, 3);
		v = objective(&c, 3, st);
		best = -INFINITY;
		memset(st, 0, sizeof(st));
		enumerate(&c, 3, st, 0, cap);
		if (v / best < worst)
			worst = v / best;
		if (!(v >= best * 0.99))
			fprintf(stderr, "instance %d: search %.6g, exhaustive "
				"%.6g\n", inst, v, best);
		CU_ASSERT(v >= best * 0.99);
		copus_policy_destroy(p);
	}
	printf("\n  worst search/exhaustive objective ratio: %.4f\n", worst);
}

/* A multi-node job never shares a node with another multi-node job. */
static void test_pollux_one_multinode_job_per_node(void)
{
	copus_cluster c = make_cluster(4, 4);
	copus_model m = toy_model(0.0001, 0.01);
	const copus_model *mp[1] = { &m };
	copus_job j[3];
	copus_decision d[3];
	copus_policy *p;

	for (int i = 0; i < 3; i++) {
		j[i] = rigid((uint64_t)i, 1, 0, -1);
		j[i].elastic = true;
		j[i].max_gpus = 16;
		j[i].max_gpus_had = 8;
		j[i].models = mp;
	}
	ASSERT_STATUS(copus_policy_create("pollux", NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &c, j, 3, 1e9, d), COPUS_OK);
	check_feasible(&c, d, 3, true);
	/* A scalable model wants many GPUs: the cluster is used up. */
	CU_ASSERT(d[0].gpus + d[1].gpus + d[2].gpus >= 14);
	CU_ASSERT(d[0].batch >= 64);
	copus_policy_destroy(p);
}


/*
 * An elastic job runs within its bounds under pollux: more jobs than GPUs,
 * each of a model that scales poorly (pollux would spread the GPUs one or
 * two a job), each needing at least 3: every job gets none or 3 to 8, in
 * the first round and from its allocation the next.
 */
/*
 * An elastic job of --elastic=3-8 runs on none or 3 to 8 GPUs under every
 * policy that resizes jobs, even on a cluster too small for all of them at
 * their minimum.
 */
static void test_elastic_policies_keep_jobs_within_their_bounds(void)
{
	static const char *const names[] = { "pollux", "optimus", "tiresias" };

	for (int n = 0; n < 3; n++) {
		copus_cluster c = make_cluster(4, 4);
		copus_model m = toy_model(0.05, 0.004);
		const copus_model *mp[1] = { &m };
		copus_job j[10];
		copus_decision d[10];
		copus_slot alloc[10][4];
		copus_policy *p;

		for (int i = 0; i < 10; i++) {
			j[i] = rigid((uint64_t)i, 3, i, -1);
			j[i].elastic = true;
			j[i].min_gpus = 3;
			j[i].max_gpus = 8;
			j[i].max_gpus_had = 1;
			j[i].models = mp;
		}
		ASSERT_STATUS(copus_policy_create(names[n], NULL, &p),
			      COPUS_OK);
		for (int round = 0; round < 2; round++) {
			int used = 0;

			ASSERT_STATUS(copus_policy_decide(p, &c, j, 10,
							  600 + 60 * round, d),
				      COPUS_OK);
			check_feasible(&c, d, 10, true);
			for (int i = 0; i < 10; i++) {
				CU_ASSERT(d[i].gpus == 0 ||
					  (d[i].gpus >= 3 && d[i].gpus <= 8));
				if (d[i].gpus != 0 &&
				    (d[i].gpus < 3 || d[i].gpus > 8))
					fprintf(stderr,
						"%s: job %d on %d GPUs\n",
						names[n], i, d[i].gpus);
				used += d[i].gpus;
				for (int k = 0; k < d[i].num_slots; k++)
					alloc[i][k] = d[i].slots[k];
				j[i].alloc = alloc[i];
				j[i].alloc_slots = d[i].num_slots;
				j[i].alloc_type = 0;
			}
			CU_ASSERT(used >= 12);
		}
		copus_policy_destroy(p);
	}
}

/* Do the two decisions give the same GPU type and slots? */
static bool same_decision(const copus_decision *a, const copus_decision *b)
{
	if (a->gpu_type != b->gpu_type || a->gpus != b->gpus ||
	    a->num_slots != b->num_slots)
		return false;
	for (int k = 0; k < a->num_slots; k++)
		if (a->slots[k].node != b->slots[k].node ||
		    a->slots[k].gpus != b->slots[k].gpus)
			return false;
	return true;
}

/*
 * A kept job (copus_job.keep) gets its allocation, unchanged, and every
 * elastic policy decides for the others exactly as it would on the GPUs
 * the kept ones leave, without them; told nothing, the policies do move
 * such jobs on these instances.
 */
static void test_a_kept_job_keeps_its_gpus_and_the_others_share_the_rest(void)
{
	static const char *const names[] = { "optimus", "pollux", "sia",
					     "copus" };
	copus_model m[6];
	const copus_model *mp[6][1];
	copus_job j[6], rest[6], told[6];
	copus_decision d[6], dk[6], dr[6];
	copus_slot alloc[6][4];
	copus_node left[4];
	int moved = 0;

	for (int pi = 0; pi < 4; pi++) {
		for (int round = 0; round < 20; round++) {
			copus_cluster c = make_cluster(4, 4), cr = c;
			copus_policy *p, *pk, *pr;
			size_t nr = 0, ir[6];

			ASSERT_STATUS(copus_policy_create(names[pi], NULL, &p),
				      COPUS_OK);
			ASSERT_STATUS(copus_policy_create(names[pi], NULL, &pk),
				      COPUS_OK);
			ASSERT_STATUS(copus_policy_create(names[pi], NULL, &pr),
				      COPUS_OK);
			for (int i = 0; i < 6; i++) {
				m[i] = toy_model(0.001 + urand() * 0.05,
						 0.0005 + urand() * 0.005);
				mp[i][0] = &m[i];
				j[i] = rigid((uint64_t)i + 1,
					     1 + (int)(urand() * 6), urand() * 100,
					     urand() * 1000);
				j[i].elastic = true;
				j[i].max_gpus = 12;
				j[i].attained = urand() * 1e4;
				j[i].models = mp[i];
			}
			/* Three start; the three others arrive. */
			ASSERT_STATUS(copus_policy_decide(p, &c, j, 3, 100, d),
				      COPUS_OK);
			for (int i = 0; i < 3; i++) {
				for (int k = 0; k < d[i].num_slots; k++)
					alloc[i][k] = d[i].slots[k];
				j[i].alloc = alloc[i];
				j[i].alloc_slots = d[i].num_slots;
				j[i].alloc_type = d[i].gpu_type;
				j[i].keep = d[i].gpus > 0 && i < 2;
			}
			/* A queued job's keep is ignored. */
			j[5].keep = true;
			for (int k = 0; k < 4; k++)
				left[k] = c.nodes[k];
			for (int i = 0; i < 6; i++) {
				if (!j[i].keep || j[i].alloc_slots == 0) {
					rest[nr] = j[i];
					ir[nr++] = (size_t)i;
					continue;
				}
				for (int k = 0; k < j[i].alloc_slots; k++)
					left[j[i].alloc[k].node].gpus -=
						j[i].alloc[k].gpus;
			}
			cr.nodes = left;
			for (int i = 0; i < 6; i++) {
				told[i] = j[i];
				told[i].keep = false;
			}
			ASSERT_STATUS(copus_policy_decide(p, &c, told, 6, 400, d),
				      COPUS_OK);
			ASSERT_STATUS(copus_policy_decide(pk, &c, j, 6, 400, dk),
				      COPUS_OK);
			ASSERT_STATUS(copus_policy_decide(pr, &cr, rest, nr, 400,
							  dr),
				      COPUS_OK);
			check_feasible(&c, dk, 6, false);
			for (int i = 0; i < 6; i++) {
				if (!j[i].keep || j[i].alloc_slots == 0)
					continue;
				CU_ASSERT_FALSE(dk[i].changed);
				CU_ASSERT_EQUAL(dk[i].num_slots, j[i].alloc_slots);
				for (int k = 0; k < dk[i].num_slots; k++) {
					CU_ASSERT_EQUAL(dk[i].slots[k].node,
							j[i].alloc[k].node);
					CU_ASSERT_EQUAL(dk[i].slots[k].gpus,
							j[i].alloc[k].gpus);
				}
				/* Told nothing, does the policy move it? */
				moved += d[i].changed;
			}
			for (size_t q = 0; q < nr; q++)
				if (!same_decision(&dk[ir[q]], &dr[q]))
					CU_FAIL("a job not kept is decided "
						"otherwise than on the GPUs the "
						"kept ones leave");
			copus_policy_destroy(p);
			copus_policy_destroy(pk);
			copus_policy_destroy(pr);
		}
	}
	CU_ASSERT(moved > 0);
}

static const struct test_case tests[] = {
	TEST(test_create_rejects_bad_input),
	TEST(test_params_of_an_older_version_are_taken),
	TEST(test_the_fair_share_weight_is_a_parameter),
	TEST(test_inconsistent_input_is_rejected),
	TEST(test_fifo_backfills_without_delaying_the_head),
	TEST(test_tiresias_demotes_and_preempts),
	TEST(test_optimus_gives_spare_gpus_to_long_jobs),
	TEST(test_policies_never_over_allocate),
	TEST(test_pollux_search_matches_exhaustive),
	TEST(test_pollux_one_multinode_job_per_node),
	TEST(test_elastic_policies_keep_jobs_within_their_bounds),
	TEST(test_a_kept_job_keeps_its_gpus_and_the_others_share_the_rest),
};

int main(void)
{
	return RUN_TESTS("policy", tests);
}
