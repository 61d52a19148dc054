/*
 * The parallel plan: the data degree that a world leaves, the layout of
 * ranks and their groups, and the layers of pipeline stages (against every
 * split of small instances).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <copus/plan.h>

#include "harness.h"

/* Fail with both arrays printed when they differ. */
static void expect_bounds(const int *got, const int *want, int n,
			  const char *what)
{
	bool same = memcmp(got, want, sizeof(int) * (size_t)n) == 0;

	if (!same) {
		fprintf(stderr, "%s: first layers", what);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", got[i]);
		fprintf(stderr, ", expected");
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", want[i]);
		fprintf(stderr, "\n");
	}
	CU_ASSERT(same);
}

static void the_data_degree_is_what_the_world_leaves(void)
{
	copus_plan_degrees d;

	ASSERT_STATUS(copus_plan_degrees_of_world(12, 3, 2, &d), COPUS_OK);
	CU_ASSERT_EQUAL(d.data, 2);
	CU_ASSERT_EQUAL(d.pipeline, 3);
	CU_ASSERT_EQUAL(d.tensor, 2);
	ASSERT_STATUS(copus_plan_degrees_of_world(6, 3, 2, &d), COPUS_OK);
	CU_ASSERT_EQUAL(d.data, 1);
	ASSERT_STATUS(copus_plan_degrees_of_world(4, 1, 1, &d), COPUS_OK);
	CU_ASSERT_EQUAL(d.data, 4);
}

static void a_world_that_is_no_multiple_is_refused(void)
{
	copus_plan_degrees d;

	ASSERT_STATUS(copus_plan_degrees_of_world(1, 1, 2, &d), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_degrees_of_world(10, 3, 1, &d), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_degrees_of_world(8, 1, 16, &d), COPUS_EINVAL);
	/* A product of degrees beyond an int is no multiple either. */
	ASSERT_STATUS(copus_plan_degrees_of_world(1 << 24, 1 << 20, 1 << 20,
						  &d), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_degrees_of_world(0, 1, 1, &d), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_degrees_of_world(4, 0, 1, &d), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_degrees_of_world(4, 1, -1, &d), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_degrees_of_world(4, 1, 1, NULL), COPUS_EINVAL);
}

static void ranks_go_tensor_first_then_pipeline_then_data(void)
{
	copus_plan_degrees d;
	copus_plan_coords c;

	/* 6 ranks, pipeline 3 x tensor 2: one replica. */
	ASSERT_STATUS(copus_plan_degrees_of_world(6, 3, 2, &d), COPUS_OK);
	for (int r = 0; r < 6; r++) {
		ASSERT_STATUS(copus_plan_coords_of_rank(&d, r, &c), COPUS_OK);
		CU_ASSERT_EQUAL(c.data_rank, 0);
		CU_ASSERT_EQUAL(c.tensor_rank, r % 2);
		CU_ASSERT_EQUAL(c.pipeline_rank, r / 2);
	}
	/* 4 ranks of data parallelism alone. */
	ASSERT_STATUS(copus_plan_degrees_of_world(4, 1, 1, &d), COPUS_OK);
	ASSERT_STATUS(copus_plan_coords_of_rank(&d, 1, &c), COPUS_OK);
	CU_ASSERT_EQUAL(c.data_rank, 1);
	CU_ASSERT_EQUAL(c.pipeline_rank, 0);
	CU_ASSERT_EQUAL(c.tensor_rank, 0);
	/* Every rank of 2 x 3 x 2 is the layout's formula of its coordinates. */
	ASSERT_STATUS(copus_plan_degrees_of_world(12, 3, 2, &d), COPUS_OK);
	for (int r = 0; r < 12; r++) {
		ASSERT_STATUS(copus_plan_coords_of_rank(&d, r, &c), COPUS_OK);
		CU_ASSERT(c.data_rank >= 0 && c.data_rank < 2);
		CU_ASSERT(c.pipeline_rank >= 0 && c.pipeline_rank < 3);
		CU_ASSERT(c.tensor_rank >= 0 && c.tensor_rank < 2);
		CU_ASSERT_EQUAL((c.data_rank * 3 + c.pipeline_rank) * 2 +
				c.tensor_rank, r);
	}
}

/*
 * Two ranks share a group of a kind exactly when they agree on the other two
 * coordinates, and a group's members hold distinct positions in it.
 */
static void groups_hold_the_ranks_that_share_the_other_coordinates(void)
{
	copus_plan_degrees d;
	copus_plan_coords c[24];
	int n = 24;

	ASSERT_STATUS(copus_plan_degrees_of_world(n, 3, 4, &d), COPUS_OK);
	CU_ASSERT_EQUAL(d.data, 2);
	for (int r = 0; r < n; r++)
		ASSERT_STATUS(copus_plan_coords_of_rank(&d, r, &c[r]),
			      COPUS_OK);
	for (int a = 0; a < n; a++) {
		CU_ASSERT(c[a].data_group >= 0 && c[a].data_group < 3 * 4);
		CU_ASSERT(c[a].pipeline_group >= 0 &&
			  c[a].pipeline_group < 2 * 4);
		CU_ASSERT(c[a].tensor_group >= 0 && c[a].tensor_group < 2 * 3);
		for (int b = 0; b < n; b++) {
			bool dp = c[a].data_rank == c[b].data_rank;
			bool pp = c[a].pipeline_rank == c[b].pipeline_rank;
			bool tp = c[a].tensor_rank == c[b].tensor_rank;

			CU_ASSERT_EQUAL(c[a].data_group == c[b].data_group,
					pp && tp);
			CU_ASSERT_EQUAL(c[a].pipeline_group ==
					c[b].pipeline_group, dp && tp);
			CU_ASSERT_EQUAL(c[a].tensor_group == c[b].tensor_group,
					dp && pp);
		}
	}
	/* The colours the NCCL communicators of the runtime split by. */
	for (int r = 0; r < n; r++) {
		CU_ASSERT_EQUAL(c[r].data_group, r % (4 * 3));
		CU_ASSERT_EQUAL(c[r].pipeline_group,
				c[r].data_rank * 4 + c[r].tensor_rank);
		CU_ASSERT_EQUAL(c[r].tensor_group, r / 4);
	}
}

static void a_rank_outside_the_world_is_refused(void)
{
	copus_plan_degrees d = { 2, 3, 2 }, bad = { 0, 1, 1 };
	copus_plan_coords c;

	ASSERT_STATUS(copus_plan_coords_of_rank(&d, 11, &c), COPUS_OK);
	ASSERT_STATUS(copus_plan_coords_of_rank(&d, 12, &c), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_coords_of_rank(&d, -1, &c), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_coords_of_rank(&bad, 0, &c), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_coords_of_rank(NULL, 0, &c), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_coords_of_rank(&d, 0, NULL), COPUS_EINVAL);
}

static void stages_take_contiguous_layers_with_the_least_largest_cost(void)
{
	static const double costs[] = { 1, 2, 3, 4, 5, 6 };
	int first[4], want[4] = { 0, 3, 5, 6 };

	ASSERT_STATUS(copus_plan_stages(costs, 6, 3, first), COPUS_OK);
	/* The best split's largest stage is 4 + 5 = 9. */
	expect_bounds(first, want, 4, "costs 1..6 in 3 stages");

	/* One stage holds everything; as many stages as layers, one each. */
	ASSERT_STATUS(copus_plan_stages(costs, 6, 1, first), COPUS_OK);
	CU_ASSERT_EQUAL(first[0], 0);
	CU_ASSERT_EQUAL(first[1], 6);
	{
		int all[7], each[7] = { 0, 1, 2, 3, 4, 5, 6 };

		ASSERT_STATUS(copus_plan_stages(costs, 6, 6, all), COPUS_OK);
		expect_bounds(all, each, 7, "6 layers in 6 stages");
	}
}

/* The largest stage cost of the best split, by trying every split. */
static double best_by_search(const double *cost, int n, int stages, int from)
{
	double best = INFINITY, sum = 0;

	if (stages == 1) {
		for (int i = from; i < n; i++)
			sum += cost[i];
		return sum;
	}
	/* The first stage is layers from .. end - 1; each stage gets one. */
	for (int end = from + 1; end <= n - (stages - 1); end++) {
		sum += cost[end - 1];
		best = fmin(best, fmax(sum, best_by_search(cost, n, stages - 1,
							   end)));
	}
	return best;
}

static void stages_match_a_search_of_every_split(void)
{
	uint64_t x = 0x2545f4914f6cdd1dull;
	double cost[9];
	int first[10];

	for (int round = 0; round < 200; round++) {
		int n = 1 + round % 9, stages = 1 + (round / 9) % n;
		double largest = 0;

		for (int i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* Some layers cost nothing; the others 1 .. 16. */
			cost[i] = (double)(x % 17);
		}
		ASSERT_STATUS(copus_plan_stages(cost, n, stages, first),
			      COPUS_OK);
		CU_ASSERT_EQUAL(first[0], 0);
		CU_ASSERT_EQUAL(first[stages], n);
		for (int s = 0; s < stages; s++) {
			double sum = 0;

			CU_ASSERT(first[s + 1] > first[s]);
			for (int i = first[s]; i < first[s + 1]; i++)
				sum += cost[i];
			largest = fmax(largest, sum);
		}
		ASSERT_CLOSE(largest, best_by_search(cost, n, stages, 0), 0);
	}
}

static void more_stages_than_layers_split_by_count(void)
{
	static const double costs[] = { 5, 1, 1 };
	int first[5], want[5] = { 0, 1, 2, 3, 3 };

	ASSERT_STATUS(copus_plan_stages(costs, 3, 4, first), COPUS_OK);
	expect_bounds(first, want, 5, "3 layers in 4 stages");
	ASSERT_STATUS(copus_plan_stages(NULL, 0, 2, first), COPUS_OK);
	CU_ASSERT_EQUAL(first[0], 0);
	CU_ASSERT_EQUAL(first[1], 0);
	CU_ASSERT_EQUAL(first[2], 0);
}

static void bad_layer_costs_are_refused(void)
{
	double costs[] = { 1, 2, 3 };
	int first[4];

	ASSERT_STATUS(copus_plan_stages(NULL, 3, 2, first), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stages(costs, 3, 2, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stages(costs, 3, 0, first), COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stages(costs, -1, 2, first), COPUS_EINVAL);
	costs[1] = -1;
	ASSERT_STATUS(copus_plan_stages(costs, 3, 2, first), COPUS_EINVAL);
	costs[1] = NAN;
	ASSERT_STATUS(copus_plan_stages(costs, 3, 2, first), COPUS_EINVAL);
	costs[1] = INFINITY;
	ASSERT_STATUS(copus_plan_stages(costs, 3, 2, first), COPUS_EINVAL);
}

static void an_even_split_gives_the_first_stages_one_layer_more(void)
{
	int want_first[4] = { 0, 3, 6, 8 }, want_count[4] = { 3, 3, 2, 2 };
	int first, count;

	for (int s = 0; s < 4; s++) {
		ASSERT_STATUS(copus_plan_stage_even(10, 4, s, &first, &count),
			      COPUS_OK);
		CU_ASSERT_EQUAL(first, want_first[s]);
		CU_ASSERT_EQUAL(count, want_count[s]);
	}
	/* 3 layers in 4 stages: the last stage holds none. */
	ASSERT_STATUS(copus_plan_stage_even(3, 4, 3, &first, &count), COPUS_OK);
	CU_ASSERT_EQUAL(first, 3);
	CU_ASSERT_EQUAL(count, 0);
	ASSERT_STATUS(copus_plan_stage_even(3, 4, 4, &first, &count),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stage_even(3, 4, -1, &first, &count),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stage_even(3, 0, 0, &first, &count),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stage_even(-1, 4, 0, &first, &count),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stage_even(3, 4, 0, NULL, &count),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_stage_even(3, 4, 0, &first, NULL),
		      COPUS_EINVAL);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(the_data_degree_is_what_the_world_leaves),
		TEST(a_world_that_is_no_multiple_is_refused),
		TEST(ranks_go_tensor_first_then_pipeline_then_data),
		TEST(groups_hold_the_ranks_that_share_the_other_coordinates),
		TEST(a_rank_outside_the_world_is_refused),
		TEST(stages_take_contiguous_layers_with_the_least_largest_cost),
		TEST(stages_match_a_search_of_every_split),
		TEST(more_stages_than_layers_split_by_count),
		TEST(bad_layer_costs_are_refused),
		TEST(an_even_split_gives_the_first_stages_one_layer_more),
	};

	return RUN_TESTS("plan", tests);
}
