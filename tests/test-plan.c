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

/* Fail with both rank maps printed when they differ. */
static void expect_map(const int *got, const int *want, int n,
		       const char *what)
{
	bool same = memcmp(got, want, sizeof(int) * (size_t)n) == 0;

	if (!same) {
		fprintf(stderr, "%s: new ranks", what);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", got[i]);
		fprintf(stderr, ", expected");
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", want[i]);
		fprintf(stderr, "\n");
	}
	CU_ASSERT(same);
}

/*
 * The coordinates of rank r of a layout, as the test reads the layouts
 * itself: copus_plan_coords_of_rank() for copus/plan.h's, the formula of
 * copus/planner.h for data_inner.
 */
static void layout_coords(const copus_plan_degrees *d, int inner, int r,
			  int *dr, int *pr, int *tr)
{
	copus_plan_coords c;

	if (inner) {
		*tr = r % d->tensor;
		*dr = (r / d->tensor) % d->data;
		*pr = r / d->tensor / d->data;
		return;
	}
	ASSERT_STATUS(copus_plan_coords_of_rank(d, r, &c), COPUS_OK);
	*dr = c.data_rank;
	*pr = c.pipeline_rank;
	*tr = c.tensor_rank;
}

/* Data 4 x pipeline 2 x tensor 2 (16 ranks) gives up replicas 1 and 3. */
static void two_whole_replicas_leave_and_the_others_close_the_gap(void)
{
	static const copus_plan_degrees d = { 4, 2, 2 };
	static const int plain_leaving[] = { 4, 5, 6, 7, 12, 13, 14, 15 };
	static const int plain_want[16] = { 0, 1, 2, 3, -1, -1, -1, -1,
					    4, 5, 6, 7, -1, -1, -1, -1 };
	/* With data_inner, replica 1 is ranks 2, 3, 10, 11 and so on. */
	static const int inner_leaving[] = { 14, 2, 3, 10, 11, 6, 7, 15 };
	static const int inner_want[16] = { 0, 1, -1, -1, 2, 3, -1, -1,
					    4, 5, -1, -1, 6, 7, -1, -1 };
	copus_plan_degrees nd;
	copus_plan_coords c;
	int map[16];

	ASSERT_STATUS(copus_plan_shrink(&d, 0, 16, plain_leaving, 8, &nd, map),
		      COPUS_OK);
	CU_ASSERT(nd.data == 2 && nd.pipeline == 2 && nd.tensor == 2);
	expect_map(map, plain_want, 16, "plain layout");
	/* Old rank 9 (data 2, pipeline 0, tensor 1) is new rank 5. */
	ASSERT_STATUS(copus_plan_coords_of_rank(&nd, map[9], &c), COPUS_OK);
	CU_ASSERT(c.data_rank == 1 && c.pipeline_rank == 0 &&
		  c.tensor_rank == 1);

	ASSERT_STATUS(copus_plan_shrink(&d, 1, 16, inner_leaving, 8, &nd, map),
		      COPUS_OK);
	CU_ASSERT(nd.data == 2 && nd.pipeline == 2 && nd.tensor == 2);
	expect_map(map, inner_want, 16, "data_inner layout");
	/* Old rank 12 (pipeline 1, data 2, tensor 0) is new rank 6. */
	ASSERT_STATUS(copus_plan_coords_of_layout(&nd, 1, map[12], &c),
		      COPUS_OK);
	CU_ASSERT(c.data_rank == 1 && c.pipeline_rank == 1 &&
		  c.tensor_rank == 0);
}

static void leaving_ranks_that_cut_a_replica_are_refused(void)
{
	static const copus_plan_degrees d = { 4, 2, 2 };
	/* Replica 1 without its last rank; then with a rank of replica 2. */
	static const int part[] = { 4, 5, 6 };
	static const int more[] = { 4, 5, 6, 7, 8 };
	/* Under data_inner, ranks 4..7 are half of replicas 2 and 3. */
	static const int node[] = { 4, 5, 6, 7 };
	static const int every[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
				     12, 13, 14, 15 };
	copus_plan_degrees nd = { -7, -7, -7 };
	int map[16];

	for (int i = 0; i < 16; i++)
		map[i] = -7;
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 16, part, 3, &nd, map),
		      COPUS_ERANGE);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 16, more, 5, &nd, map),
		      COPUS_ERANGE);
	ASSERT_STATUS(copus_plan_shrink(&d, 1, 16, node, 4, &nd, map),
		      COPUS_ERANGE);
	/* Nothing would remain. */
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 16, every, 16, &nd, map),
		      COPUS_ERANGE);
	ASSERT_STATUS(copus_plan_shrink(&d, 1, 16, every, 16, &nd, map),
		      COPUS_ERANGE);
	/* A refusal writes nothing. */
	CU_ASSERT(nd.data == -7 && nd.pipeline == -7 && nd.tensor == -7);
	for (int i = 0; i < 16; i++)
		CU_ASSERT_EQUAL(map[i], -7);
	/* Under copus/plan.h's layout ranks 4..7 are replica 1: allowed. */
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 16, node, 4, &nd, map),
		      COPUS_OK);
	CU_ASSERT_EQUAL(nd.data, 3);
}

static void bad_shrink_arguments_are_refused(void)
{
	copus_plan_degrees d = { 2, 1, 2 }, nd;
	copus_plan_degrees zero = { 0, 1, 2 }, huge = { 2, 1 << 20, 1 << 20 };
	int map[4], one = 3, outside = 4, negative = -1;

	ASSERT_STATUS(copus_plan_shrink(&d, 0, 5, &one, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&zero, 0, 0, &one, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&huge, 0, 4, &one, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, &outside, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, &negative, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, NULL, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, &one, -1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(NULL, 0, 4, &one, 1, &nd, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, &one, 1, NULL, map),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, &one, 1, &nd, NULL),
		      COPUS_EINVAL);
	/* No leaving ranks: the same plan, every rank where it was. */
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 4, NULL, 0, &nd, map),
		      COPUS_OK);
	CU_ASSERT(nd.data == 2 && nd.pipeline == 1 && nd.tensor == 2);
	for (int r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(map[r], r);
}

/*
 * Every degree combination of at most 16 ranks, both layouts, every set of
 * whole replicas leaving: each rank that stays keeps its pipeline and
 * tensor coordinates, its replica's order among those that stay, and its
 * order among the ranks that stay (ncclCommShrink's renumbering); the new
 * ranks are 0 .. new world - 1, each once. A leaving set that cuts a
 * replica, one rank short or one rank over, is refused.
 */
static void every_small_shrink_keeps_each_shard_where_it_was(void)
{
	int checked = 0, failures = 0;

	for (int w = 1; w <= 16; w++)
	for (int tp = 1; tp <= w; tp++)
	for (int pp = 1; pp * tp <= w; pp++) {
		copus_plan_degrees d, nd;
		int dp, leaving[17], map[16], seen[16], n;

		if (w % (pp * tp) != 0)
			continue;
		dp = w / (pp * tp);
		d = (copus_plan_degrees){ dp, pp, tp };
		for (int inner = 0; inner <= 1; inner++)
		for (int mask = 0; mask < (1 << dp); mask++) {
			int n_kept = 0, below = 0, rc;

			n = 0;
			for (int r = w - 1; r >= 0; r--) {
				int dr, pr, tr;
				copus_plan_coords c;

				layout_coords(&d, inner, r, &dr, &pr, &tr);
				ASSERT_STATUS(copus_plan_coords_of_layout(
						      &d, inner, r, &c),
					      COPUS_OK);
				CU_ASSERT(c.data_rank == dr &&
					  c.pipeline_rank == pr &&
					  c.tensor_rank == tr);
				/* The groups do not depend on the layout. */
				CU_ASSERT(c.data_group == pr * tp + tr &&
					  c.pipeline_group == dr * tp + tr &&
					  c.tensor_group == dr * pp + pr);
				if (mask & (1 << dr))
					leaving[n++] = r;
			}
			for (int i = 0; i < dp; i++)
				n_kept += !(mask & (1 << i));
			/* Listed from the top, one of them twice. */
			if (n > 0)
				leaving[n] = leaving[0];
			for (int r = 0; r < w; r++)
				map[r] = -7;
			rc = copus_plan_shrink(&d, inner, w, leaving,
					       n > 0 ? n + 1 : 0, &nd, map);
			if (n_kept == 0) {
				ASSERT_STATUS(rc, COPUS_ERANGE);
				for (int r = 0; r < w; r++)
					CU_ASSERT_EQUAL(map[r], -7);
				continue;
			}
			ASSERT_STATUS(rc, COPUS_OK);
			if (rc != COPUS_OK)
				continue;
			CU_ASSERT(nd.data == n_kept && nd.pipeline == pp &&
				  nd.tensor == tp);
			memset(seen, 0, sizeof(seen));
			for (int r = 0; r < w; r++) {
				int dr, pr, tr, ndr, npr, ntr, kept_below = 0;
				bool ok;

				layout_coords(&d, inner, r, &dr, &pr, &tr);
				if (mask & (1 << dr)) {
					CU_ASSERT_EQUAL(map[r], -1);
					continue;
				}
				if (map[r] < 0 || map[r] >= n_kept * pp * tp) {
					CU_FAIL("a new rank outside the new world");
					continue;
				}
				seen[map[r]]++;
				for (int i = 0; i < dr; i++)
					kept_below += !(mask & (1 << i));
				layout_coords(&nd, inner, map[r], &ndr, &npr,
					      &ntr);
				ok = npr == pr && ntr == tr &&
				     ndr == kept_below && map[r] == below;
				if (!ok)
					fprintf(stderr,
						"%dx%dx%d inner %d mask %#x: rank %d"
						" (d%d p%d t%d) -> %d (d%d p%d t%d),"
						" expected d%d and rank %d\n",
						dp, pp, tp, inner, mask, r, dr,
						pr, tr, map[r], ndr, npr, ntr,
						kept_below, below);
				CU_ASSERT(ok);
				/* A broken map fails fast, not millions of times. */
				if (!ok && ++failures > 20)
					return;
				below++;
			}
			for (int i = 0; i < n_kept * pp * tp; i++)
				CU_ASSERT_EQUAL(seen[i], 1);
			checked++;
			if (n == 0 || pp * tp == 1)
				continue;
			/* One rank short: the replica is cut. */
			map[0] = -7;
			ASSERT_STATUS(copus_plan_shrink(&d, inner, w,
							leaving + 1, n - 1,
							&nd, map),
				      COPUS_ERANGE);
			CU_ASSERT_EQUAL(map[0], -7);
		}
		/* One rank over: a rank of a replica that stays. */
		for (int inner = 0; inner <= 1 && dp > 1 && pp * tp > 1;
		     inner++) {
			n = 0;
			for (int r = 0; r < w; r++) {
				int dr, pr, tr;

				layout_coords(&d, inner, r, &dr, &pr, &tr);
				if (dr == 0 || r == w - 1)
					leaving[n++] = r;
			}
			ASSERT_STATUS(copus_plan_shrink(&d, inner, w, leaving,
							n, &nd, map),
				      COPUS_ERANGE);
		}
	}
	/* Not vacuous: every (degrees, layout, replicas kept) was seen. */
	CU_ASSERT(checked > 1000);
}

static void the_ranks_of_leaving_nodes_are_their_blocks(void)
{
	static const int nodes[] = { 3, 1 };
	static const int want[] = { 12, 13, 14, 15, 4, 5, 6, 7 };
	static const int twice[] = { 1, 1 }, outside[] = { 4 };
	static const copus_plan_degrees d = { 4, 2, 2 };
	copus_plan_degrees nd;
	int ranks[8], map[16];

	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 4, nodes, 2, ranks),
		      COPUS_OK);
	expect_map(ranks, want, 8, "ranks of nodes 3 and 1");
	/* Those nodes hold replicas 1 and 3, or 2 and 3 under data_inner. */
	ASSERT_STATUS(copus_plan_shrink(&d, 0, 16, ranks, 8, &nd, map),
		      COPUS_OK);
	CU_ASSERT_EQUAL(nd.data, 2);
	ASSERT_STATUS(copus_plan_shrink(&d, 1, 16, ranks, 8, &nd, map),
		      COPUS_OK);
	CU_ASSERT_EQUAL(nd.data, 2);
	/* Node 1 alone holds half of replicas 2 and 3 under data_inner. */
	ASSERT_STATUS(copus_plan_shrink(&d, 1, 16, ranks + 4, 4, &nd, map),
		      COPUS_ERANGE);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 4, NULL, 0, NULL),
		      COPUS_OK);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 4, twice, 2, ranks),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 4, outside, 1, ranks),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 3, nodes, 2, ranks),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 0, nodes, 2, ranks),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 4, nodes, -1, ranks),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_plan_ranks_of_nodes(16, 4, nodes, 2, NULL),
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
		TEST(two_whole_replicas_leave_and_the_others_close_the_gap),
		TEST(leaving_ranks_that_cut_a_replica_are_refused),
		TEST(bad_shrink_arguments_are_refused),
		TEST(every_small_shrink_keeps_each_shard_where_it_was),
		TEST(the_ranks_of_leaving_nodes_are_their_blocks),
	};

	return RUN_TESTS("plan", tests);
}
