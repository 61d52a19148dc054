/*
 * How good and how fast is pollux's search? On random instances of a
 * 16 x 4 cluster, compare the objective of copus_policy_decide("pollux")
 * with a much longer simulated-annealing search over the same objective
 * (started from the policy's answer and from an empty cluster), and time
 * one decision.
 *
 *   tests/bench-sim-search [instances] [jobs]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/policy.h>

#define N 16
#define G 4
#define MAXJ 64

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static double sp[MAXJ][N + 1][N * G + 1];
static int cap[MAXJ];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Pollux's objective: -1 power mean of scaled speedups (no restarts). */
static double objective(int nj, int (*st)[N])
{
	double sum = 0;

	for (int j = 0; j < nj; j++) {
		int r = 0, nn = 0;

		for (int k = 0; k < N; k++) {
			r += st[j][k];
			nn += st[j][k] > 0;
		}
		sum += 1.0 / ((r ? sp[j][nn][r] : 0.0) + 1e-3);
	}
	return nj / sum;
}

static int feasible(int nj, int (*st)[N])
{
	int used[N] = { 0 }, dist[N] = { 0 };

	for (int j = 0; j < nj; j++) {
		int r = 0, nn = 0;

		for (int k = 0; k < N; k++) {
			r += st[j][k];
			nn += st[j][k] > 0;
			used[k] += st[j][k];
		}
		if (r > cap[j])
			return 0;
		for (int k = 0; nn > 1 && k < N; k++)
			dist[k] += st[j][k] > 0;
	}
	for (int k = 0; k < N; k++)
		if (used[k] > G || dist[k] > 1)
			return 0;
	return 1;
}

/* Simulated annealing with single-GPU moves between jobs and free. */
static double anneal(int nj, int (*st)[N], long iters)
{
	double cur = objective(nj, st), best = cur, T = 0.05 * cur;

	for (long it = 0; it < iters; it++) {
		int a = (int)(urand() * (nj + 1)) - 1; /* -1: free pool */
		int b = (int)(urand() * (nj + 1)) - 1;
		int k = (int)(urand() * N);
		double v;

		if (a == b || (a >= 0 && st[a][k] == 0))
			continue;
		if (a >= 0)
			st[a][k]--;
		if (b >= 0)
			st[b][k]++;
		if (feasible(nj, st)) {
			v = objective(nj, st);
			if (v >= cur || urand() < exp((v - cur) / T)) {
				cur = v;
				if (cur > best)
					best = cur;
				goto next;
			}
		}
		if (a >= 0)
			st[a][k]++;
		if (b >= 0)
			st[b][k]--;
next:
		T *= 0.99995;
	}
	return best;
}

int main(int argc, char **argv)
{
	int instances = argc > 1 ? atoi(argv[1]) : 10;
	int nj = argc > 2 ? atoi(argv[2]) : 24;
	copus_node nodes[N];
	copus_cluster c = { N, nodes, 1, NULL, NULL };
	copus_model m[MAXJ];
	const copus_model *mp[MAXJ][1];
	copus_job jobs[MAXJ];
	copus_decision d[MAXJ];
	static int st[MAXJ][N];
	double worst = INFINITY, sum_ratio = 0, t_policy = 0, t_sa = 0;

	if (nj < 1 || nj > MAXJ || instances < 1) {
		fprintf(stderr, "usage: bench-sim-search [instances] [1..64]\n");
		return 2;
	}
	for (int k = 0; k < N; k++) {
		nodes[k].gpu_type = 0;
		nodes[k].gpus = G;
		nodes[k].usable = true;
	}
	printf("instance  jobs  policy_obj  annealed_obj  ratio  policy_ms\n");
	for (int in = 0; in < instances; in++) {
		copus_policy *p;
		double t0, t1, dt, v, best;
		int fair = (N * G + nj - 1) / nj;

		for (int j = 0; j < nj; j++) {
			memset(&m[j], 0, sizeof(m[j]));
			m[j].perf.alpha_c = 0.01 + urand() * 0.1;
			m[j].perf.beta_c = 0.0002 + urand() * 0.004;
			m[j].perf.alpha_r = 0.001 + urand() * 0.02;
			m[j].perf.beta_r = m[j].perf.alpha_r * urand() * 0.2;
			m[j].perf.alpha_n = m[j].perf.alpha_r * (1.1 + urand() * 5);
			m[j].perf.beta_n = m[j].perf.alpha_n * urand() * 0.2;
			m[j].perf.gamma = 1 + urand();
			m[j].grad.sqr = 1;
			m[j].grad.var = 1 + urand() * 1000;
			m[j].limits.init_batch = 128;
			m[j].limits.max_batch = 128 * (1 << (int)(urand() * 6));
			m[j].limits.min_local = 16;
			m[j].limits.max_local = 256;
			m[j].limits.accumulation = true;
			mp[j][0] = &m[j];
			memset(&jobs[j], 0, sizeof(jobs[j]));
			jobs[j].id = (uint64_t)j;
			jobs[j].elastic = true;
			jobs[j].min_gpus = 1;
			jobs[j].req_gpus = 1;
			jobs[j].max_gpus = (int)(m[j].limits.max_batch / 16);
			if (jobs[j].max_gpus > N * G)
				jobs[j].max_gpus = N * G;
			jobs[j].max_gpus_had = 1 + (int)(urand() * 16);
			jobs[j].models = mp[j];
			jobs[j].attained = urand() * 1e5;
			cap[j] = 2 * jobs[j].max_gpus_had < jobs[j].max_gpus ?
				2 * jobs[j].max_gpus_had : jobs[j].max_gpus;
			for (int nn = 1; nn <= N; nn++)
				for (int r = nn; r <= N * G; r++) {
					copus_batch_plan a, b;

					sp[j][nn][r] = 0;
					if (copus_best_batch(&m[j], nn, r, &a) == 0 &&
					    copus_best_batch(&m[j], 1, fair, &b) == 0)
						sp[j][nn][r] = a.goodput /
							b.goodput * N / (N * G);
				}
		}
		if (copus_policy_create("pollux", NULL, &p) != COPUS_OK)
			return 1;
		t0 = now_s();
		if (copus_policy_decide(p, &c, jobs, (size_t)nj, 1e12, d) !=
		    COPUS_OK)
			return 1;
		t1 = now_s();
		dt = t1 - t0;
		t_policy += dt;
		memset(st, 0, sizeof(st));
		for (int j = 0; j < nj; j++)
			for (int s = 0; s < d[j].num_slots; s++)
				st[j][d[j].slots[s].node] = d[j].slots[s].gpus;
		if (!feasible(nj, st)) {
			printf("instance %d: infeasible decision\n", in);
			return 1;
		}
		v = objective(nj, st);
		t0 = now_s();
		best = anneal(nj, st, 3000000);
		memset(st, 0, sizeof(st));
		{
			double b2 = anneal(nj, st, 3000000);

			if (b2 > best)
				best = b2;
		}
		t_sa += now_s() - t0;
		if (v / best < worst)
			worst = v / best;
		sum_ratio += v / best;
		printf("%8d  %4d  %10.5f  %12.5f  %5.3f  %9.3f\n", in, nj, v,
		       best, v / best, dt * 1e3);
		copus_policy_destroy(p);
	}
	printf("policy/annealing objective: mean %.4f, worst %.4f; "
	       "policy %.2f ms per decision, annealing %.0f ms per "
	       "instance\n", sum_ratio / instances, worst,
	       t_policy / instances * 1e3, t_sa / instances * 1e3);
	return 0;
}
