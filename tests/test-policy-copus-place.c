/*
 * Where the copus policy puts jobs: the equal and consolidated placements
 * and the placer, on hand-made and random clusters, and placements that
 * hold over rounds (a steady workload stays put, a move is not undone the
 * next round).
 */
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"
#include "policy-world.h"
#include "policy/place.h"

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
	copus_cluster c = { 4, nodes, 2, NULL, NULL };
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
	copus_cluster c = { 5, nodes, 2, NULL, NULL };
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
	copus_cluster c = { N, nodes, 3, NULL, NULL };
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

/*
 * The free index answers the equal placement as the scan does, on random
 * clusters whose free GPUs and multi-node marks change between questions
 * (counts beyond a node's size included), each change synced.
 */
static void the_free_index_places_as_the_scan_does(void)
{
	enum { N = 150 };
	copus_node nodes[N];
	copus_cluster c = { N, nodes, 3, NULL, NULL };
	int fr[N], dist[N], a[N], b[N], list[64], ta = -1, tb = -1, m;
	unsigned seed = 4242;

	for (int cluster = 0; cluster < 40; cluster++) {
		struct copus__free_index ix;
		const int *d = cluster % 3 ? dist : NULL;

		for (int n = 0; n < N; n++) {
			nodes[n].gpu_type = rand_r(&seed) % 3;
			nodes[n].gpus = 1 + rand_r(&seed) % 8;
			nodes[n].usable = rand_r(&seed) % 6 != 0;
			fr[n] = rand_r(&seed) % (nodes[n].gpus + 1);
			dist[n] = rand_r(&seed) % 4 == 0;
		}
		ASSERT_STATUS(copus__free_index_init(&ix, &c, fr, d), COPUS_OK);
		memset(b, 0, sizeof(b));
		for (int q = 0; q < 500; q++) {
			uint32_t mask = (uint32_t)(rand_r(&seed) % 8);
			int k = 1 + rand_r(&seed) % 40, ra, rb;

			for (int ch = rand_r(&seed) % 4; ch > 0; ch--) {
				int n = rand_r(&seed) % N;
				fr[n] = rand_r(&seed) % (nodes[n].gpus + 2) -
					(rand_r(&seed) % 8 == 0);
				dist[n] = rand_r(&seed) % 4 == 0;
				copus__free_index_sync(&ix, n);
			}
			ra = copus__place_equal(&c, fr, d, mask, k, a, &ta);
			rb = copus__free_index_equal(&ix, mask, k, b, list, &m,
						     &tb);
			CU_ASSERT_EQUAL_FATAL(ra, rb);
			CU_ASSERT_FATAL(memcmp(a, b, sizeof(a)) == 0);
			if (ra != COPUS_OK) {
				CU_ASSERT_EQUAL_FATAL(m, 0);
				continue;
			}
			CU_ASSERT_EQUAL_FATAL(ta, tb);
			for (int i = 0; i < m; i++) {
				CU_ASSERT_FATAL(b[list[i]] > 0);
				CU_ASSERT_FATAL(i == 0 || list[i - 1] < list[i]);
				b[list[i]] = 0;
			}
			/* Every node it wrote is listed. */
			for (int n = 0; n < N; n++)
				CU_ASSERT_EQUAL_FATAL(b[n], 0);
		}
		copus__free_index_release(&ix);
	}
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
		w.c = (copus_cluster){ N, w.nodes, 2, NULL, NULL };
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
 *
 * That exemption came with the rule that sizes within a node tile it
 * (copus__cp_size_tiles): a job's next size up is its double, so a job
 * that grew into GPUs nobody else wanted may give them back the next
 * round when another job's goodput gains more from them than its own.
 * Such a return is a reallocation the policy chose on the jobs' value, not
 * a cycle of its own making, but it does cost the job two restarts. In
 * these 60 worlds it excuses 2 returns, both of a grown job: world 22,
 * job 2 (4 GPUs of type 0, then 8 of type 1, then 4 of type 0 again) and
 * world 49, job 4 (2, then 4, then 2 GPUs of type 1). Any other return
 * fails the test.
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

int main(void)
{
	static const struct test_case tests[] = {
		TEST(equal_per_node_gives_every_node_the_same),
		TEST(equal_placement_splits_evenly),
		TEST(consolidated_placement_takes_the_tightest_node_else_the_fewest),
		TEST(first_and_later_sizes_are_placed_alike),
		TEST(the_free_index_places_as_the_scan_does),
		TEST(placement_respects_nodes_and_types),
		TEST(a_steady_workload_stays_put),
		TEST(a_move_is_not_undone_the_next_round),
	};
	return RUN_TESTS("policy-copus-place", tests);
}
