/*
 * Placement: copus_even_slots and copus_even_fit (core/policy.c), the same
 * count on every node, and fifo:arena, Arena's FCFS, which places at best
 * locality on a cluster of two types.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"

/* ------------------------------------------------------------ fifo:arena */

/* Two types: nodes 0-2 with 4 GPUs of type 0, nodes 3-6 with 2 of type 1. */
static copus_node arena_nodes[7];

static copus_cluster arena_cluster(void)
{
	copus_cluster c = { 0 };

	for (int k = 0; k < 7; k++)
		arena_nodes[k] = (copus_node){ k < 3 ? 0 : 1, k < 3 ? 4 : 2,
					       true };
	c.num_nodes = 7;
	c.nodes = arena_nodes;
	c.num_types = 2;
	return c;
}

#define AJ 8
struct arena_round {
	copus_job j[AJ];
	copus_slot held[AJ][8];
	copus_decision d[AJ];
	size_t n;
};

static copus_job *arena_job(struct arena_round *r, uint64_t id, int gpus,
			    int type, double submit)
{
	copus_job *j = &r->j[r->n++];

	*j = (copus_job){ .id = id,
			  .min_gpus = gpus,
			  .max_gpus = gpus,
			  .req_gpus = gpus,
			  .req_batch = 128,
			  .submit_time = submit,
			  .remaining = -1,
			  .type_mask = 1u << type };
	return j;
}

/* The decision applied to the jobs, as the simulator does. */
static void arena_apply(struct arena_round *r)
{
	for (size_t i = 0; i < r->n; i++) {
		memcpy(r->held[i], r->d[i].slots,
		       (size_t)r->d[i].num_slots * sizeof(copus_slot));
		r->j[i].alloc = r->held[i];
		r->j[i].alloc_slots = r->d[i].num_slots;
		r->j[i].alloc_type = r->d[i].gpu_type;
	}
}

/* Drop job i from the round (it ended). */
static void arena_end(struct arena_round *r, size_t i)
{
	for (size_t k = i; k + 1 < r->n; k++) {
		r->j[k] = r->j[k + 1];
		memcpy(r->held[k], r->held[k + 1], sizeof(r->held[k]));
		r->j[k].alloc = r->held[k];
	}
	r->n--;
}

static void test_fifo_arena_spreads_over_the_emptiest_nodes(void)
{
	copus_cluster c = arena_cluster();
	struct arena_round r = { .n = 0 };
	copus_slot a0[1] = { { 0, 3 } }, a2[1] = { { 2, 2 } };
	copus_policy *p;

	ASSERT_STATUS(copus_policy_create("fifo:arena", NULL, &p), COPUS_OK);
	arena_job(&r, 1, 3, 0, 0)->alloc = a0;
	r.j[0].alloc_slots = 1;
	r.j[0].alloc_type = 0;
	arena_job(&r, 2, 2, 0, 0)->alloc = a2;
	r.j[1].alloc_slots = 1;
	r.j[1].alloc_type = 0;
	arena_job(&r, 3, 1, 0, 10); /* free: node 0 1, node 1 4, node 2 2 */
	arena_job(&r, 4, 2, 0, 10);
	arena_job(&r, 5, 4, 1, 10); /* two whole nodes of 2 */
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 0, r.d), COPUS_OK);
	CU_ASSERT(!r.d[0].changed && !r.d[1].changed);
	/* The emptiest node, not the tightest: node 1 both times. */
	CU_ASSERT_EQUAL_FATAL(r.d[2].num_slots, 1);
	CU_ASSERT_EQUAL(r.d[2].slots[0].node, 1);
	CU_ASSERT_EQUAL_FATAL(r.d[3].num_slots, 1);
	CU_ASSERT_EQUAL(r.d[3].slots[0].node, 1);
	CU_ASSERT_EQUAL(r.d[3].gpus, 2);
	/* Best locality on nodes of 2: 2 x 2, the first nodes among equals. */
	CU_ASSERT_EQUAL_FATAL(r.d[4].num_slots, 2);
	CU_ASSERT_EQUAL(r.d[4].gpu_type, 1);
	CU_ASSERT(r.d[4].slots[0].node == 3 && r.d[4].slots[0].gpus == 2);
	CU_ASSERT(r.d[4].slots[1].node == 4 && r.d[4].slots[1].gpus == 2);
	copus_policy_destroy(p);
}

static void test_fifo_arena_waits_in_order_and_retries_after_an_end(void)
{
	copus_cluster c = arena_cluster();
	struct arena_round r = { .n = 0 };
	copus_policy *p;

	ASSERT_STATUS(copus_policy_create("fifo:arena", NULL, &p), COPUS_OK);
	/* Round 0: three jobs fill 11 of type 0's 12 GPUs. */
	arena_job(&r, 1, 4, 0, 0);
	arena_job(&r, 2, 4, 0, 0);
	arena_job(&r, 3, 2, 0, 0);
	arena_job(&r, 10, 1, 0, 0);
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 0, r.d), COPUS_OK);
	for (size_t i = 0; i < r.n; i++)
		CU_ASSERT(r.d[i].gpus > 0);
	arena_apply(&r);
	arena_end(&r, 3); /* job 10 ends: type 0 has 2 GPUs free */
	/* Round 1: a job of 4 waits; then a job of 1 of the same type waits
	 * behind it though it fits; a job of the other type starts. */
	arena_job(&r, 4, 4, 0, 300);
	arena_job(&r, 5, 1, 0, 300);
	arena_job(&r, 6, 1, 1, 300);
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 300, r.d), COPUS_OK);
	CU_ASSERT_EQUAL(r.d[3].gpus, 0);
	CU_ASSERT_EQUAL(r.d[4].gpus, 0);
	CU_ASSERT_EQUAL(r.d[5].gpus, 1);
	arena_apply(&r);
	/* Round 2: a node of 4 more, but no job ended: nobody is retried. */
	c.num_nodes = 7;
	arena_nodes[1].gpus = 8;
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 600, r.d), COPUS_OK);
	CU_ASSERT_EQUAL(r.d[3].gpus, 0);
	CU_ASSERT_EQUAL(r.d[4].gpus, 0);
	arena_apply(&r);
	/* Round 3: job 3 ends (2 GPUs): both waiting jobs start, in order. */
	arena_end(&r, 2);
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 900, r.d), COPUS_OK);
	CU_ASSERT_EQUAL(r.d[2].id, 4);
	CU_ASSERT_EQUAL(r.d[2].gpus, 4);
	CU_ASSERT_EQUAL(r.d[3].id, 5);
	CU_ASSERT_EQUAL(r.d[3].gpus, 1);
	copus_policy_destroy(p);
}

static void test_fifo_arena_stops_a_type_at_the_first_that_does_not_fit(void)
{
	copus_cluster c = arena_cluster();
	struct arena_round r = { .n = 0 };
	copus_policy *p;

	ASSERT_STATUS(copus_policy_create("fifo:arena", NULL, &p), COPUS_OK);
	arena_job(&r, 1, 4, 0, 0);
	arena_job(&r, 2, 4, 0, 0);
	arena_job(&r, 3, 4, 0, 0);
	arena_job(&r, 4, 8, 0, 1);  /* 2 x 4: waits */
	arena_job(&r, 5, 2, 0, 2);  /* waits behind it */
	arena_job(&r, 6, 2, 1, 3);  /* the other type: starts */
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 0, r.d), COPUS_OK);
	CU_ASSERT(r.d[3].gpus == 0 && r.d[4].gpus == 0 && r.d[5].gpus == 2);
	arena_apply(&r);
	/* Job 1 ends: 4 GPUs free. Job 4 does not fit; job 5 would, but
	 * type 0 stops at job 4. */
	arena_end(&r, 0);
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 300, r.d), COPUS_OK);
	CU_ASSERT_EQUAL(r.d[2].id, 4);
	CU_ASSERT_EQUAL(r.d[2].gpus, 0);
	CU_ASSERT_EQUAL(r.d[3].id, 5);
	CU_ASSERT_EQUAL(r.d[3].gpus, 0);
	copus_policy_destroy(p);
}

static void test_fifo_arena_drops_a_job_its_request_does_not_fit(void)
{
	copus_cluster c = arena_cluster();
	struct arena_round r = { .n = 0 };
	/* The job fits 1 GPU of type 0 and 2 x 2 of type 1, not 1 x 4. */
	copus_cell_time cells[2] = { { 0, 1, 1, 2.0 }, { 1, 4, 2, 0.5 } };
	copus_job *j;
	copus_policy *p;

	ASSERT_STATUS(copus_policy_create("fifo:arena", NULL, &p), COPUS_OK);
	j = arena_job(&r, 1, 4, 0, 0);
	j->cells = cells;
	j->num_cells = 2;
	arena_job(&r, 2, 4, 0, 1)->cells = cells;
	r.j[1].num_cells = 2;
	r.j[1].type_mask = 1u << 1; /* asks for 2 x 2 of type 1: fits */
	arena_job(&r, 3, 4, 0, 2);  /* no table: fits */
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 0, r.d), COPUS_OK);
	CU_ASSERT_EQUAL(r.d[0].gpus, 0);
	CU_ASSERT(strstr(r.d[0].reason, "dropped") != NULL);
	CU_ASSERT_EQUAL(r.d[1].gpus, 4);
	CU_ASSERT_EQUAL(r.d[1].num_slots, 2);
	/* The dropped job does not hold its type back. */
	CU_ASSERT_EQUAL(r.d[2].gpus, 4);
	arena_apply(&r);
	/* Nor is it started later, when a job has ended. */
	arena_end(&r, 2);
	ASSERT_STATUS(copus_policy_decide(p, &c, r.j, r.n, 300, r.d), COPUS_OK);
	CU_ASSERT_EQUAL(r.d[0].gpus, 0);
	copus_policy_destroy(p);
	/* An unknown option of fifo is refused. */
	ASSERT_STATUS(copus_policy_create("fifo:arenas", NULL, &p),
		      COPUS_EINVAL);
}

/*
 * A placement asked as the same count on every node: the part with the
 * most GPUs (fewest nodes on a tie), in node order, against every choice
 * of nodes and count on small placements.
 */
static void test_even_slots_keep_the_most_gpus_a_node_count_can(void)
{
	copus_slot in[5], out[5];
	int per = -1, k, n, trial, i;

	/* pollux's 2 + 1: 2 on one node, not 1 + 1. */
	in[0] = (copus_slot){ 3, 2 };
	in[1] = (copus_slot){ 5, 1 };
	k = copus_even_slots(in, 2, out, &per);
	CU_ASSERT_EQUAL(k, 1);
	CU_ASSERT_EQUAL(per, 2);
	CU_ASSERT_EQUAL(out[0].node, 3);
	/* 4 + 1 + 1 (6 GPUs): 4 on one node, not 1 x 3. */
	in[0] = (copus_slot){ 0, 1 };
	in[1] = (copus_slot){ 1, 4 };
	in[2] = (copus_slot){ 2, 1 };
	k = copus_even_slots(in, 3, out, &per);
	CU_ASSERT(k == 1 && per == 4 && out[0].node == 1);
	/* 4 + 2 + 4: 2 x 4 = 8 (3 x 2 is 6), in node order. */
	in[0] = (copus_slot){ 0, 4 };
	in[1] = (copus_slot){ 2, 2 };
	in[2] = (copus_slot){ 3, 4 };
	k = copus_even_slots(in, 3, out, &per);
	CU_ASSERT(k == 2 && per == 4 && out[0].node == 0 && out[1].node == 3);
	/* Even: as it is. 2 + 2 + 1 + 1: 2 x 2 = 4 against 4 x 1 = 4, the
	 * fewer nodes. */
	in[0] = (copus_slot){ 0, 2 };
	in[1] = (copus_slot){ 1, 2 };
	k = copus_even_slots(in, 2, out, &per);
	CU_ASSERT(k == 2 && per == 2);
	in[2] = (copus_slot){ 2, 1 };
	in[3] = (copus_slot){ 3, 1 };
	k = copus_even_slots(in, 4, out, &per);
	CU_ASSERT(k == 2 && per == 2 && out[1].node == 1);
	CU_ASSERT_EQUAL(copus_even_slots(in, 0, out, &per), 0);
	CU_ASSERT_EQUAL(per, 0);
	/* Against every subset and count, on pseudo-random placements. */
	srand(7);
	for (trial = 0; trial < 2000; trial++) {
		int top = 0, bestk = 0;

		n = 1 + rand() % 5;
		for (i = 0; i < n; i++)
			in[i] = (copus_slot){ 2 * i, 1 + rand() % 8 };
		for (int mask = 1; mask < 1 << n; mask++) {
			int least = 8, cnt = 0;

			for (i = 0; i < n; i++)
				if (mask >> i & 1) {
					cnt++;
					if (in[i].gpus < least)
						least = in[i].gpus;
				}
			if (cnt * least > top ||
			    (cnt * least == top && cnt < bestk)) {
				top = cnt * least;
				bestk = cnt;
			}
		}
		k = copus_even_slots(in, n, out, &per);
		CU_ASSERT_EQUAL(k * per, top);
		CU_ASSERT_EQUAL(k, bestk);
		for (i = 0; i < k; i++) {
			int m = out[i].node / 2;

			CU_ASSERT(out[i].gpus == per && in[m].gpus >= per);
			CU_ASSERT(i == 0 || out[i].node > out[i - 1].node);
		}
	}
}

/*
 * A cell of a GPU count and type placed evenly on GPUs that are free: the
 * fewest nodes that fit, the preferred nodes first, never a node that is
 * down, of another type, not allowed, or short of GPUs.
 */
static void test_even_fit_places_a_count_on_the_fewest_nodes(void)
{
	copus_node nodes[6];
	copus_cluster c = { .num_nodes = 3, .nodes = nodes, .num_types = 2 };
	copus_slot out[6], pref[2];
	int avail[6], per = -1, k, trial, i;
	unsigned char allowed[6] = { 0, 1, 1, 1, 1, 1 };

	for (i = 0; i < 6; i++)
		nodes[i] = (copus_node){ .gpu_type = 0, .gpus = 4,
					 .usable = true };
	/* 6 on nodes with 4, 2 and 4 free: 3 + 3 on nodes 0 and 2. */
	avail[0] = 4, avail[1] = 2, avail[2] = 4;
	k = copus_even_fit(&c, avail, NULL, 0, 6, 0, NULL, 0, out, &per);
	CU_ASSERT(k == 2 && per == 3 && out[0].node == 0 && out[1].node == 2);
	CU_ASSERT(out[0].gpus == 3 && out[1].gpus == 3);
	/* 4: one node; the preferred one (node 2) before node order. */
	avail[1] = 4;
	k = copus_even_fit(&c, avail, NULL, 0, 4, 0, NULL, 0, out, &per);
	CU_ASSERT(k == 1 && per == 4 && out[0].node == 0);
	pref[0] = (copus_slot){ 2, 2 };
	k = copus_even_fit(&c, avail, NULL, 0, 4, 0, pref, 1, out, &per);
	CU_ASSERT(k == 1 && per == 4 && out[0].node == 2);
	/* A node named twice is taken once. */
	pref[1] = pref[0];
	k = copus_even_fit(&c, avail, NULL, 0, 8, 0, pref, 2, out, &per);
	CU_ASSERT(k == 2 && per == 4 && out[0].node == 0 && out[1].node == 2);
	/* Not allowed, down, another type: passed over. */
	k = copus_even_fit(&c, avail, allowed, 0, 4, 0, NULL, 0, out, &per);
	CU_ASSERT(k == 1 && out[0].node == 1);
	nodes[1].usable = false;
	nodes[2].gpu_type = 1;
	k = copus_even_fit(&c, avail, allowed, 0, 4, 0, NULL, 0, out, &per);
	CU_ASSERT(k == 0 && per == 0);
	k = copus_even_fit(&c, avail, NULL, 1, 2, 0, NULL, 0, out, &per);
	CU_ASSERT(k == 1 && per == 2 && out[0].node == 2);
	/* At most 2 a node: 4 as 2 + 2, on the nodes of type 0 that fit. */
	nodes[1].usable = true;
	nodes[2].gpu_type = 0;
	k = copus_even_fit(&c, avail, NULL, 0, 4, 2, NULL, 0, out, &per);
	CU_ASSERT(k == 2 && per == 2 && out[0].node == 0 && out[1].node == 1);
	/* More than there is free: none, and bad input: none. */
	CU_ASSERT_EQUAL(copus_even_fit(&c, avail, NULL, 0, 13, 0, NULL, 0,
				       out, &per), 0);
	CU_ASSERT_EQUAL(copus_even_fit(&c, avail, NULL, 0, 0, 0, NULL, 0,
				       out, &per), 0);
	CU_ASSERT_EQUAL(copus_even_fit(NULL, avail, NULL, 0, 2, 0, NULL, 0,
				       out, &per), 0);
	/* Against every count per node, on pseudo-random free GPUs. */
	srand(11);
	c.num_nodes = 6;
	for (trial = 0; trial < 2000; trial++) {
		int gpus = 1 + rand() % 16, cap = rand() % 3 ? 0 : 1 + rand() % 4;
		int top_g = 0, fit, used[6] = { 0 };

		for (i = 0; i < 6; i++) {
			avail[i] = rand() % 5;
			nodes[i].gpu_type = rand() % 4 ? 0 : 1;
			nodes[i].usable = rand() % 6 != 0;
		}
		for (int g = 1; g <= gpus; g++) {
			if (gpus % g || (cap && g > cap))
				continue;
			fit = 0;
			for (i = 0; i < 6; i++)
				fit += nodes[i].usable && !nodes[i].gpu_type &&
				       avail[i] >= g;
			if (fit >= gpus / g)
				top_g = g;
		}
		pref[0] = (copus_slot){ rand() % 6, 1 };
		k = copus_even_fit(&c, avail, NULL, 0, gpus, cap, pref, 1, out,
				   &per);
		CU_ASSERT_EQUAL(per, top_g);
		CU_ASSERT_EQUAL(k, top_g ? gpus / top_g : 0);
		for (i = 0; i < k; i++) {
			int m = out[i].node;

			CU_ASSERT(out[i].gpus == per && avail[m] >= per &&
				  nodes[m].usable && nodes[m].gpu_type == 0);
			CU_ASSERT(!used[m]++);
		}
	}
}

static const struct test_case tests[] = {
	TEST(test_fifo_arena_spreads_over_the_emptiest_nodes),
	TEST(test_fifo_arena_waits_in_order_and_retries_after_an_end),
	TEST(test_fifo_arena_stops_a_type_at_the_first_that_does_not_fit),
	TEST(test_fifo_arena_drops_a_job_its_request_does_not_fit),
	TEST(test_even_slots_keep_the_most_gpus_a_node_count_can),
	TEST(test_even_fit_places_a_count_on_the_fewest_nodes),
};

int main(void)
{
	return RUN_TESTS("policy-place", tests);
}
