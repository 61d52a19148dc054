/*
 * The copus policy for jobs described by their cells (an iteration time per
 * GPU type, count and nodes, as the planner or a profile gives them) and on
 * clusters of several GPU types.
 */
#include <string.h>

#include <copus/policy.h>

#include "harness.h"
#include "policy-world.h"

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

/*
 * Two jobs with opposite strengths on two GPU types (each runs 4x slower
 * on the other's): whatever the job order, each ends on the type that
 * suits it.
 */
static void each_job_goes_where_its_gpus_count_most(void)
{
	for (int order = 0; order < 2; order++) {
		copus_node nodes[2] = { { 0, 2, true }, { 1, 2, true } };
		copus_cluster c = { 2, nodes, 2, NULL, NULL };
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
 * A new job with no model on any type, told the types' speeds (the fast
 * type 3.4 times the slow one): it starts on the fast GPUs while they are
 * free, whichever type comes first, and on the slow ones when a job with
 * as much work left, 3.4 times slower there, holds the fast ones, rather
 * than wait or move that job. Its request is met either way.
 */
static void a_new_job_starts_on_the_faster_type(void)
{
	struct world w;

	for (int fast = 0; fast < 2; fast++) {
		double speeds[2] = { fast == 0 ? 3.4 : 1.0,
				     fast == 1 ? 3.4 : 1.0 };
		for (int full = 0; full < 2; full++) {
			two_types(&w, 2, 4, 1);
			w.c.type_speeds = speeds;
			copus_model m = scalable(), slow;
			ASSERT_STATUS(copus_model_bootstrap(&m, 1.0, 3.4,
							    &slow),
				      COPUS_OK);
			if (full) {
				/* As fast as the others on the fast type. */
				add_job(&w, false, 4, 100000, m);
				w.mp[0][1 - fast] = &slow;
				w.alloc[0][0] = (copus_slot){ fast, 4 };
				w.jobs[0].alloc = w.alloc[0];
				w.jobs[0].alloc_slots = 1;
				w.jobs[0].alloc_type = fast;
			}
			copus_job *x = add_job(&w, true, 4, 100000, scalable());
			x->models = NULL;
			x->max_gpus_had = 0;
			decide(&w, 0);
			size_t j = w.n - 1;
			CU_ASSERT_EQUAL(gpus_of(&w, j), 4);
			CU_ASSERT_EQUAL(w.types[j], full ? 1 - fast : fast);
			if (full)
				CU_ASSERT_EQUAL(w.types[0], fast);
		}
	}
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(a_job_with_cells_gets_only_the_sizes_of_its_cells),
		TEST(a_job_with_cells_never_runs_where_it_does_not_fit),
		TEST(a_job_with_cells_goes_to_its_fastest_type),
		TEST(cells_order_jobs_by_iterations_left),
		TEST(a_poor_cell_across_nodes_is_left_to_others),
		TEST(each_job_goes_where_its_gpus_count_most),
		TEST(a_new_job_starts_on_the_faster_type),
	};
	return RUN_TESTS("policy-copus-cells", tests);
}
