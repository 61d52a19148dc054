/* The co-adaptive policy's ingredients on small hand-made cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"
#include "policy/place.h"

#define MAXN 16
#define MAXJ 16

static const copus_policy_params PRM = COPUS_POLICY_PARAMS_INITIALIZER;

/* A job that scales well (cheap sync) with plenty of gradient noise. */
static copus_model scalable(void)
{
	copus_model m = {
		.perf = { 0.05, 0.002, 0.02, 0.001, 0.005, 0.0005, 1.5 },
		.grad = { .sqr = 1.0, .var = 200.0 },
		.limits = { .init_batch = 64, .max_batch = 8192, .min_local = 8,
			    .max_local = 256, .accumulation = true },
	};
	return m;
}

/* A job that gains nothing from more GPUs (no noise, costly sync). */
static copus_model poor(void)
{
	copus_model m = scalable();
	m.grad.var = 0.0;
	m.perf.alpha_r = m.perf.alpha_n = 0.5;
	return m;
}

struct world {
	copus_node nodes[MAXN];
	copus_cluster c;
	copus_job jobs[MAXJ];
	copus_model models[MAXJ];
	const copus_model *mp[MAXJ][COPUS_MAX_GPU_TYPES];
	copus_slot alloc[MAXJ][MAXN];
	copus_cell_time cells[MAXJ][16];
	int rows[MAXJ * MAXN];
	int types[MAXJ];
	char reasons[MAXJ][64];
	size_t n;
};

static void world_init(struct world *w, int nodes, int gpus)
{
	memset(w, 0, sizeof(*w));
	for (int k = 0; k < nodes; k++)
		w->nodes[k] = (copus_node){ 0, gpus, true };
	w->c = (copus_cluster){ nodes, w->nodes, 1, NULL };
}

static copus_job *add_job(struct world *w, bool elastic, int req,
			  double remaining, copus_model m)
{
	size_t j = w->n++;
	copus_job *jb = &w->jobs[j];

	w->models[j] = m;
	for (int t = 0; t < COPUS_MAX_GPU_TYPES; t++)
		w->mp[j][t] = &w->models[j];
	*jb = (copus_job){
		.id = 100 + j, .elastic = elastic,
		.min_gpus = elastic ? 1 : req, .max_gpus = elastic ? 16 : req,
		.req_gpus = req, .req_batch = 64, .remaining = remaining,
		.models = w->mp[j], .max_gpus_had = req,
	};
	return jb;
}

static void run_alloc(struct world *w, size_t j, int node, int gpus)
{
	w->alloc[j][w->jobs[j].alloc_slots++] = (copus_slot){ node, gpus };
	w->jobs[j].alloc = w->alloc[j];
	w->jobs[j].alloc_type = 0;
	if (gpus > w->jobs[j].max_gpus_had)
		w->jobs[j].max_gpus_had = gpus;
}

static int gpus_of(const struct world *w, size_t j)
{
	int s = 0;
	for (int k = 0; k < w->c.num_nodes; k++)
		s += w->rows[j * w->c.num_nodes + k];
	return s;
}

/* Job j's last decision becomes its allocation. */
static void adopt_decision(struct world *w, size_t j)
{
	copus_job *jb = &w->jobs[j];
	int N = w->c.num_nodes;

	jb->alloc_slots = 0;
	for (int k = 0; k < N; k++)
		if (w->rows[j * N + k] > 0)
			run_alloc(w, j, k, w->rows[j * N + k]);
	jb->alloc_type = w->types[j] < 0 ? 0 : w->types[j];
}

/* One round of the copus policy; its decisions as rows, types, reasons. */
static void decide_with(struct world *w, double now,
			const copus_policy_params *prm)
{
	copus_decision d[MAXJ];
	copus_policy *p = NULL;

	memset(w->rows, 0, sizeof(w->rows));
	for (size_t j = 0; j < MAXJ; j++)
		w->types[j] = -1;
	memset(w->reasons, 0, sizeof(w->reasons));
	ASSERT_STATUS(copus_policy_create("copus", prm, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &w->c, w->jobs, w->n, now, d),
		      COPUS_OK);
	for (size_t j = 0; j < w->n; j++) {
		for (int i = 0; i < d[j].num_slots; i++)
			w->rows[j * w->c.num_nodes + d[j].slots[i].node] =
				d[j].slots[i].gpus;
		w->types[j] = d[j].gpu_type;
		memcpy(w->reasons[j], d[j].reason, sizeof(w->reasons[j]));
	}
	copus_policy_destroy(p);
}

static void decide(struct world *w, double now)
{
	decide_with(w, now, &PRM);
}

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

/*
 * Nodes of 4 GPUs with 3, 3 and 4 free: an elastic job of 8 (at least 2)
 * spreads over all three (4 + 3 + 1) by default, and with equal_per_node
 * (the plugin's setting, as Slurm allocates GPUs per node) runs on 6 as
 * 3 + 3.
 */
static void equal_per_node_gives_every_node_the_same(void)
{
	copus_policy_params prm = PRM;
	struct world w;

	for (int equal = 0; equal < 2; equal++) {
		world_init(&w, 3, 4);
		add_job(&w, false, 1, 5000, scalable());
		run_alloc(&w, 0, 0, 1);
		add_job(&w, false, 1, 5000, scalable());
		run_alloc(&w, 1, 1, 1);
		copus_job *x = add_job(&w, true, 8, 1000, scalable());
		x->models = NULL;
		x->min_gpus = 2;
		x->max_gpus = 8;
		prm.equal_per_node = equal;
		decide_with(&w, 0, &prm);
		int per = -1, nodes = 0;
		bool same = true;
		for (int k = 0; k < 3; k++) {
			int r = w.rows[2 * 3 + k];
			if (r == 0)
				continue;
			nodes++;
			same &= per < 0 || r == per;
			per = r;
		}
		if (!equal) {
			CU_ASSERT_EQUAL(gpus_of(&w, 2), 8);
			CU_ASSERT_EQUAL(nodes, 3);
			continue;
		}
		CU_ASSERT(same);
		CU_ASSERT_EQUAL(gpus_of(&w, 2), 6);
		CU_ASSERT_EQUAL(nodes, 2);
		CU_ASSERT_EQUAL(w.rows[2 * 3 + 2], 0);
	}
}

/* The equal split itself: fewest nodes, tightest fit, the rules kept. */
static void equal_placement_splits_evenly(void)
{
	copus_node nodes[4] = { { 0, 4, true }, { 0, 4, true }, { 0, 4, true },
				{ 1, 8, true } };
	copus_cluster c = { 4, nodes, 2, NULL };
	int row[4], t = -1;

	int fr1[4] = { 4, 3, 4, 8 };
	ASSERT_STATUS(copus__place_equal(&c, fr1, NULL, 1u, 8, row, &t),
		      COPUS_OK);
	CU_ASSERT(t == 0 && row[0] == 4 && row[1] == 0 && row[2] == 4);
	/* One node when it fits: the other type's node of 8. */
	ASSERT_STATUS(copus__place_equal(&c, fr1, NULL, 0u, 8, row, &t),
		      COPUS_OK);
	CU_ASSERT(t == 1 && row[3] == 8);
	int fr2[4] = { 3, 3, 4, 0 };
	ASSERT_STATUS(copus__place_equal(&c, fr2, NULL, 1u, 6, row, &t),
		      COPUS_OK);
	CU_ASSERT(row[0] == 3 && row[1] == 3 && row[2] == 0);
	/* 5 GPUs: one node of 5 or five of 1; neither is there. */
	ASSERT_STATUS(copus__place_equal(&c, fr2, NULL, 1u, 5, row, &t),
		      COPUS_ERANGE);
	CU_ASSERT(row[0] == 0 && row[1] == 0 && row[2] == 0 && row[3] == 0);
	/* A node holding a multi-node job takes no other. */
	int dist[4] = { 1, 0, 0, 0 };
	ASSERT_STATUS(copus__place_equal(&c, fr2, dist, 1u, 6, row, &t),
		      COPUS_OK);
	CU_ASSERT(row[0] == 0 && row[1] == 3 && row[2] == 3);
	/* A single-node job may share it. */
	ASSERT_STATUS(copus__place_equal(&c, fr2, dist, 1u, 3, row, &t),
		      COPUS_OK);
	CU_ASSERT(row[0] == 3);
	/* Unusable nodes take nothing. */
	nodes[1].usable = false;
	ASSERT_STATUS(copus__place_equal(&c, fr2, dist, 1u, 6, row, &t),
		      COPUS_ERANGE);
}

/*
 * The consolidated placement every policy uses: the tightest single node
 * (the lowest index among equals), else the fewest nodes of one type,
 * emptiest first (again the lowest index among equals).
 */
static void consolidated_placement_takes_the_tightest_node_else_the_fewest(void)
{
	copus_node nodes[5] = { { 0, 4, true }, { 0, 4, true }, { 0, 4, true },
				{ 0, 4, true }, { 1, 8, true } };
	copus_cluster c = { 5, nodes, 2, NULL };
	int fr[5] = { 3, 2, 3, 4, 8 }, dist[5] = { 0, 0, 0, 1, 0 };
	struct copus__placer pl;
	int row[5], t = -1;

	ASSERT_STATUS(copus__placer_init(&pl, 5), COPUS_OK);
	copus__placer_prep(&pl, &c, fr, NULL, 0u);
	/* 3 GPUs: nodes 0 and 2 fit as tightly; the lower index wins. */
	ASSERT_STATUS(copus__placer_get(&pl, 3, row, &t), COPUS_OK);
	CU_ASSERT(t == 0 && row[0] == 3 && row[1] == 0 && row[2] == 0);
	/* 6 GPUs: one node of the other type beats two of the first. */
	ASSERT_STATUS(copus__placer_get(&pl, 6, row, &t), COPUS_OK);
	CU_ASSERT(t == 1 && row[4] == 6 && row[3] == 0);
	/* Type 0 only: node 3 (4 free), then node 0 before node 2. */
	copus__placer_prep(&pl, &c, fr, NULL, 1u);
	ASSERT_STATUS(copus__placer_get(&pl, 6, row, &t), COPUS_OK);
	CU_ASSERT(t == 0 && row[3] == 4 && row[0] == 2 && row[1] == 0 &&
		  row[2] == 0);
	/* A node holding a multi-node job takes no other one... */
	copus__placer_prep(&pl, &c, fr, dist, 1u);
	ASSERT_STATUS(copus__placer_get(&pl, 6, row, &t), COPUS_OK);
	CU_ASSERT(row[3] == 0 && row[0] == 3 && row[2] == 3);
	/* ...but a single-node job may share it. */
	ASSERT_STATUS(copus__placer_get(&pl, 4, row, &t), COPUS_OK);
	CU_ASSERT(row[3] == 4);
	/* More than the type has free: nothing. */
	ASSERT_STATUS(copus__placer_get(&pl, 13, row, &t), COPUS_ERANGE);
	CU_ASSERT(row[0] == 0 && row[3] == 0 && row[4] == 0);
	copus__placer_release(&pl);
}

/*
 * The placer answers the first size of a state by scanning the nodes and
 * later sizes from sorted nodes: on random clusters both pick the same
 * nodes and type, ties, unusable nodes, masks and multi-node marks included.
 */
static void first_and_later_sizes_are_placed_alike(void)
{
	enum { N = 24 };
	copus_node nodes[N];
	copus_cluster c = { N, nodes, 3, NULL };
	int fr[N], dist[N], a[N], b[N], ta, tb;
	struct copus__placer pl;
	unsigned seed = 12345;

	ASSERT_STATUS(copus__placer_init(&pl, N), COPUS_OK);
	for (int trial = 0; trial < 20000; trial++) {
		uint32_t mask = (uint32_t)(rand_r(&seed) % 8);
		int k = 1 + rand_r(&seed) % 20, ra, rb;
		const int *d = rand_r(&seed) % 2 ? dist : NULL;

		for (int n = 0; n < N; n++) {
			nodes[n].gpu_type = rand_r(&seed) % 3;
			nodes[n].gpus = 1 + rand_r(&seed) % 8;
			nodes[n].usable = rand_r(&seed) % 6 != 0;
			fr[n] = rand_r(&seed) % (nodes[n].gpus + 1);
			dist[n] = rand_r(&seed) % 4 == 0;
		}
		copus__placer_prep(&pl, &c, fr, d, mask);
		ra = copus__placer_get(&pl, k, a, &ta);
		copus__placer_prep(&pl, &c, fr, d, mask);
		copus__placer_get(&pl, 1, b, &tb);
		rb = copus__placer_get(&pl, k, b, &tb);
		CU_ASSERT_EQUAL_FATAL(ra, rb);
		if (ra == COPUS_OK)
			CU_ASSERT_EQUAL_FATAL(ta, tb);
		CU_ASSERT_FATAL(memcmp(a, b, sizeof(a)) == 0);
	}
	copus__placer_release(&pl);
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

static void placement_respects_nodes_and_types(void)
{
	/* Random instances on two GPU types: never over-allocate, never mix
	 * types, never two multi-node jobs on one node. */
	unsigned x = 7;
	for (int round = 0; round < 200; round++) {
		struct world w;
		memset(&w, 0, sizeof(w));
		int N = 2 + round % 6;
		for (int k = 0; k < N; k++)
			w.nodes[k] = (copus_node){ k % 2, k % 2 ? 8 : 4,
						   k != 1 || round % 5 };
		w.c = (copus_cluster){ N, w.nodes, 2, NULL };
		int nj = 1 + round % 9;
		for (int j = 0; j < nj; j++) {
			x = x * 1103515245u + 12345u;
			copus_job *jb = add_job(&w, (x >> 9) & 1,
						1 + (x >> 12) % 8,
						100 + (x >> 16) % 5000,
						(x >> 20) & 1 ? scalable() : poor());
			jb->type_mask = (x >> 24) % 3; /* any, type 0, type 1 */
		}
		decide(&w, 0);
		int used[MAXN] = { 0 }, multi[MAXN] = { 0 };
		for (size_t j = 0; j < w.n; j++) {
			int nodes = 0;
			for (int k = 0; k < N; k++) {
				int g = w.rows[j * N + k];
				if (g == 0)
					continue;
				nodes++;
				used[k] += g;
				CU_ASSERT(w.nodes[k].usable);
				CU_ASSERT_EQUAL(w.nodes[k].gpu_type, w.types[j]);
			}
			if (w.types[j] >= 0 && w.jobs[j].type_mask)
				CU_ASSERT((w.jobs[j].type_mask >> w.types[j]) & 1);
			for (int k = 0; nodes > 1 && k < N; k++)
				if (w.rows[j * N + k] > 0)
					multi[k]++;
			int g = gpus_of(&w, j);
			if (!w.jobs[j].elastic)
				CU_ASSERT(g == 0 || g == w.jobs[j].req_gpus);
		}
		for (int k = 0; k < N; k++) {
			CU_ASSERT(used[k] <= w.nodes[k].gpus);
			CU_ASSERT(multi[k] <= 1);
		}
	}
}

/*
 * Two jobs with opposite strengths on two GPU types (each runs 4x slower
 * on the other's): whatever the job order, each ends on the type that
 * suits it.
 */
static void each_job_goes_where_its_gpus_count_most(void)
{
	for (int order = 0; order < 2; order++) {
		copus_node nodes[2] = { { 0, 2, true }, { 1, 2, true } };
		copus_cluster c = { 2, nodes, 2, NULL };
		copus_model fast = scalable(), slow;
		const copus_model *mp[2][2];
		copus_job jobs[2];
		copus_decision d[2];
		copus_policy *p = NULL;

		ASSERT_STATUS(copus_model_bootstrap(&fast, 1.0, 4.0, &slow),
			      COPUS_OK);
		for (int j = 0; j < 2; j++) {
			/* Job "a" (0) is fast on type 0, "b" (1) on type 1. */
			int who = order ? 1 - j : j;
			mp[j][0] = who == 0 ? &fast : &slow;
			mp[j][1] = who == 0 ? &slow : &fast;
			jobs[j] = (copus_job){
				.id = 100 + j, .elastic = true, .min_gpus = 1,
				.max_gpus = 2, .req_gpus = 2, .req_batch = 64,
				.remaining = 3600, .models = mp[j],
				.max_gpus_had = 2,
			};
		}
		ASSERT_STATUS(copus_policy_create("copus", &PRM, &p), COPUS_OK);
		ASSERT_STATUS(copus_policy_decide(p, &c, jobs, 2, 0, d),
			      COPUS_OK);
		for (int j = 0; j < 2; j++) {
			int who = order ? 1 - j : j;
			CU_ASSERT_EQUAL(d[j].gpu_type, who);
		}
		copus_policy_destroy(p);
	}
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
 * A steady workload: the same jobs round after round, their work running
 * down as they progress on what they were given. Once the policy has
 * placed them, the right answer is to leave every job where it is (no
 * thrash), on one GPU type, on two alike and on two of different speeds.
 */
static void a_steady_workload_stays_put(void)
{
	for (int types = 1; types <= 3; types++) {
		struct world w;
		int before[MAXJ * MAXN];
		copus_model slow[MAXJ];

		world_init(&w, 4, 4);
		if (types >= 2) {
			w.nodes[2].gpu_type = w.nodes[3].gpu_type = 1;
			w.c.num_types = 2;
		}
		for (int j = 0; j < 6; j++) {
			copus_job *jb = add_job(&w, true, 1 + j % 3,
						3600.0 * (1 + j), j % 2 ?
						scalable() : poor());
			jb->submit_time = -7200;
			/* The third world: type 1 is 2 to 4 times slower. */
			if (types == 3) {
				ASSERT_STATUS(copus_model_bootstrap(
						      &w.models[j], 1.0,
						      2.0 + j % 3, &slow[j]),
					      COPUS_OK);
				w.mp[j][1] = &slow[j];
			}
		}
		for (int round = 0; round < 8; round++) {
			decide(&w, 60.0 * round);
			if (round >= 2)
				for (size_t j = 0; j < w.n; j++)
					for (int k = 0; k < w.c.num_nodes; k++)
						CU_ASSERT_EQUAL(
							w.rows[j * w.c.num_nodes + k],
							before[j * w.c.num_nodes + k]);
			memcpy(before, w.rows, sizeof(before));
			/* The decision becomes the jobs' allocation. */
			for (size_t j = 0; j < w.n; j++) {
				copus_job *jb = &w.jobs[j];
				int moved = 0;
				for (int k = 0; k < w.c.num_nodes; k++) {
					int cur = 0;
					for (int i = 0; i < jb->alloc_slots; i++)
						if (w.alloc[j][i].node == k)
							cur = w.alloc[j][i].gpus;
					moved |= cur != w.rows[j * w.c.num_nodes + k];
				}
				if (moved)
					jb->restarts++;
				adopt_decision(&w, j);
				jb->remaining -= 60.0;
			}
		}
	}
}

/*
 * Random worlds on two GPU types of different speeds, the decisions fed
 * back as the jobs' allocations round after round (work unchanged): a job
 * moved off a cell is never moved back onto it the next round (no
 * two-round cycles, each of which would cost two restarts for nothing),
 * unless it shrinks back to make room for another job that grows, on its
 * type or on the GPUs it gives up (a job exploring its scaling doubles its
 * size).
 */
static void a_move_is_not_undone_the_next_round(void)
{
	unsigned x = 11;

	for (int world = 0; world < 60; world++) {
		struct world w;
		copus_model slow[MAXJ];
		int t_hist[3][MAXJ], k_hist[3][MAXJ];

		world_init(&w, 4, 4);
		w.nodes[2].gpu_type = w.nodes[3].gpu_type = 1;
		w.nodes[3].gpus = 8;
		w.c.num_types = 2;
		int nj = 2 + world % 5;
		for (int j = 0; j < nj; j++) {
			x = x * 1103515245u + 12345u;
			copus_job *jb = add_job(&w, true, 1 + (x >> 8) % 4,
						600.0 * (1 + (x >> 12) % 20),
						(x >> 20) & 1 ? scalable() :
								poor());
			jb->submit_time = -36000;
			jb->max_gpus = 8;
			/* Type 1 is faster for some jobs, slower for others. */
			double r = (x >> 24) & 1 ? 0.3 : 3.0;
			ASSERT_STATUS(copus_model_bootstrap(&w.models[j], 1.0,
							    r, &slow[j]),
				      COPUS_OK);
			w.mp[j][1] = &slow[j];
		}
		for (int round = 0; round < 8; round++) {
			decide(&w, 60.0 * round);
			for (size_t j = 0; j < w.n; j++) {
				t_hist[round % 3][j] = w.types[j];
				k_hist[round % 3][j] = gpus_of(&w, j);
			}
			for (size_t j = 0; round >= 2 && j < w.n; j++) {
				int a = (round - 2) % 3, b = (round - 1) % 3,
				    c = round % 3;
				bool moved = t_hist[b][j] != t_hist[a][j] ||
					     k_hist[b][j] != k_hist[a][j];
				bool back = t_hist[c][j] == t_hist[a][j] &&
					    k_hist[c][j] == k_hist[a][j];
				/* Unless it shrinks back for another job
				 * that grows on its type or the type it
				 * leaves. */
				for (size_t i = 0; back && i < w.n; i++)
					if (i != j &&
					    (t_hist[c][i] == t_hist[c][j] ||
					     t_hist[c][i] == t_hist[b][j]) &&
					    k_hist[c][j] < k_hist[b][j] &&
					    k_hist[c][i] > k_hist[b][i])
						back = false;
				if (moved && back && k_hist[a][j] > 0)
					fprintf(stderr, "world %d round %d job "
						"%zu: %d/%d -> %d/%d -> back\n",
						world, round, j, t_hist[a][j],
						k_hist[a][j], t_hist[b][j],
						k_hist[b][j]);
				CU_ASSERT(!(moved && back && k_hist[a][j] > 0));
			}
			for (size_t j = 0; j < w.n; j++)
				adopt_decision(&w, j);
		}
	}
}

/*
 * A job described by its cells (a fixed batch, an iteration time per GPU
 * type, count and nodes, as the planner or a profile gives them), with
 * iterations left and no goodput model.
 */
static copus_job *add_cell_job(struct world *w, bool elastic, int req,
			       double iters, const copus_cell_time *cells,
			       int ncells)
{
	size_t j = w->n++;
	copus_job *jb = &w->jobs[j];

	memcpy(w->cells[j], cells, (size_t)ncells * sizeof(*cells));
	*jb = (copus_job){
		.id = 100 + j, .elastic = elastic,
		.min_gpus = elastic ? 1 : req, .max_gpus = elastic ? 16 : req,
		.req_gpus = req, .req_batch = 64, .fixed_batch = true,
		.remaining = -1, .max_gpus_had = req,
		.cells = w->cells[j], .num_cells = ncells,
		.remaining_iters = iters,
	};
	return jb;
}

/* Nodes 0 .. split-1 of type 0, the rest of type 1. */
static void two_types(struct world *w, int nodes, int gpus, int split)
{
	world_init(w, nodes, gpus);
	for (int k = split; k < nodes; k++)
		w->nodes[k].gpu_type = 1;
	w->c.num_types = 2;
}

static int type_of_rows(const struct world *w, size_t j)
{
	int t = -1;
	for (int k = 0; k < w->c.num_nodes; k++)
		if (w->rows[j * w->c.num_nodes + k] > 0) {
			CU_ASSERT(t < 0 || t == w->nodes[k].gpu_type);
			t = w->nodes[k].gpu_type;
		}
	return t;
}

/* A job with cells gets a size one of its cells has, never another. */
static void a_job_with_cells_gets_only_the_sizes_of_its_cells(void)
{
	/* Does not fit one GPU; 2 and 4 GPUs on one node. */
	static const copus_cell_time cells[] = {
		{ 0, 2, 1, 1.0 }, { 0, 4, 1, 0.55 },
	};
	struct world w;

	world_init(&w, 1, 3);
	add_cell_job(&w, true, 4, 1000, cells, 2);
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 2);
	world_init(&w, 1, 1);
	add_cell_job(&w, true, 2, 1000, cells, 2);
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 0);
	CU_ASSERT_EQUAL(w.types[0], -1);
}

/* A type on which no plan of the job fits is never given to it. */
static void a_job_with_cells_never_runs_where_it_does_not_fit(void)
{
	static const copus_cell_time fits1[] = { { 1, 4, 1, 1.0 } };
	static const copus_cell_time any[] = { { 0, 4, 1, 1.0 },
					       { 1, 4, 1, 1.0 } };
	struct world w;

	two_types(&w, 2, 4, 1);
	add_cell_job(&w, false, 4, 100, any, 2);
	run_alloc(&w, 0, 1, 4);
	w.jobs[0].alloc_type = 1;
	add_cell_job(&w, true, 4, 10, fits1, 1);
	decide(&w, 0);
	CU_ASSERT_NOT_EQUAL(type_of_rows(&w, 1), 0);
	if (gpus_of(&w, 1) > 0)
		CU_ASSERT_EQUAL(w.types[1], 1);
}

/* Between two GPU types, a job goes where its cells run fastest. */
static void a_job_with_cells_goes_to_its_fastest_type(void)
{
	static const copus_cell_time cells[] = {
		{ 0, 1, 1, 3.0 }, { 0, 2, 1, 1.6 }, { 0, 4, 1, 0.9 },
		{ 1, 1, 1, 1.0 }, { 1, 2, 1, 0.55 }, { 1, 4, 1, 0.3 },
	};
	struct world w;

	two_types(&w, 2, 4, 1);
	add_cell_job(&w, true, 4, 1000, cells, 6);
	decide(&w, 0);
	CU_ASSERT_EQUAL(w.types[0], 1);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	CU_ASSERT_EQUAL(type_of_rows(&w, 0), 1);
}

/* Fewer iterations left (at the same speed) go first. */
static void cells_order_jobs_by_iterations_left(void)
{
	static const copus_cell_time cells[] = { { 0, 4, 1, 1.0 } };
	struct world w;

	world_init(&w, 1, 4);
	add_cell_job(&w, false, 4, 10000, cells, 1);
	add_cell_job(&w, false, 4, 100, cells, 1);
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 4);
	/* The same the other way round: the order comes from the work. */
	w.jobs[0].remaining_iters = 50;
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 0);
}

/*
 * Cells across nodes: a job whose 8-GPU cell is barely faster than its
 * 4-GPU one leaves the second node to a job that needs it.
 */
static void a_poor_cell_across_nodes_is_left_to_others(void)
{
	static const copus_cell_time poor[] = {
		{ 0, 4, 1, 1.0 }, { 0, 8, 2, 0.95 },
	};
	static const copus_cell_time other[] = { { 0, 4, 1, 1.0 } };
	struct world w;

	world_init(&w, 2, 4);
	add_cell_job(&w, true, 8, 1000, poor, 2);
	add_cell_job(&w, false, 4, 2000, other, 1);
	decide(&w, 0);
	CU_ASSERT_EQUAL(gpus_of(&w, 0), 4);
	CU_ASSERT_EQUAL(gpus_of(&w, 1), 4);
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


int main(void)
{
	static const struct test_case tests[] = {
		TEST(shortest_remaining_work_goes_first),
		TEST(a_job_with_cells_gets_only_the_sizes_of_its_cells),
		TEST(a_job_with_cells_never_runs_where_it_does_not_fit),
		TEST(a_job_with_cells_goes_to_its_fastest_type),
		TEST(cells_order_jobs_by_iterations_left),
		TEST(a_poor_cell_across_nodes_is_left_to_others),
		TEST(a_granular_job_gets_only_whole_replicas),
		TEST(rigid_jobs_keep_their_request),
		TEST(a_new_job_starts_on_what_fits),
		TEST(a_running_job_moves_to_make_room),
		TEST(equal_per_node_gives_every_node_the_same),
		TEST(equal_placement_splits_evenly),
		TEST(consolidated_placement_takes_the_tightest_node_else_the_fewest),
		TEST(first_and_later_sizes_are_placed_alike),
		TEST(goodput_decides_how_many_gpus_a_job_uses),
		TEST(restart_cost_holds_a_nearly_finished_job),
		TEST(fairness_guard_lets_a_starved_job_in),
		TEST(fairness_guard_is_relative_to_the_other_jobs),
		TEST(unknown_work_favours_the_least_served),
		TEST(placement_respects_nodes_and_types),
		TEST(growth_beyond_the_request_follows_goodput),
		TEST(sizes_within_a_node_tile_it),
		TEST(fair_share_lets_the_less_served_user_in),
		TEST(scarce_gpus_spread_over_more_jobs),
		TEST(ingredients_can_be_switched_off_by_name),
		TEST(bad_input_is_skipped_or_refused),
		TEST(each_job_goes_where_its_gpus_count_most),
		TEST(unknown_scaling_starts_small_under_contention),
		TEST(a_steady_workload_stays_put),
		TEST(a_move_is_not_undone_the_next_round),
	};
	return RUN_TESTS("policy-copus", tests);
}
