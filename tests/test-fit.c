/* Fitting the throughput model: synthetic recovery, gradient, priors. */
#include <math.h>
#include <stdlib.h>

#include <copus/model.h>

#include "harness.h"
#include "internal.h"

static const copus_perf_params TRUTH = {
	.alpha_c = 0.05, .beta_c = 0.002,
	.alpha_n = 0.2, .beta_n = 0.01,
	.alpha_r = 0.03, .beta_r = 0.004,
	.gamma = 1.5,
};

/* Observations of TRUTH on a grid, with multiplicative noise of +-noise. */
static size_t synth(copus_observation *obs, size_t cap, double noise,
		    unsigned seed, int max_nodes, int max_per_node,
		    int nlocal)
{
	static const int locals[] = { 16, 32, 64, 128 };
	size_t n = 0;

	srand(seed);
	for (int nodes = 1; nodes <= max_nodes; nodes++) {
		for (int per = 1; per <= max_per_node; per++) {
			for (int l = 0; l < nlocal && n < cap; l++) {
				int replicas = nodes * per;
				copus_step_times t;
				copus_step_time(&TRUTH, nodes, replicas,
						locals[l], 0, &t);
				double e1 = 1 + noise * (2.0 * rand() / RAND_MAX - 1);
				double e2 = 1 + noise * (2.0 * rand() / RAND_MAX - 1);
				obs[n++] = (copus_observation){
					.nodes = nodes, .replicas = replicas,
					.local = locals[l],
					.compute_time = t.grad * e1,
					.step_time = t.iter * e2,
				};
			}
		}
	}
	return n;
}

static double rel_err(double a, double b)
{
	return fabs(a - b) / b;
}

static void fit_recovers_known_parameters(void)
{
	copus_observation obs[128];
	copus_perf_params p;
	copus_fit_report rep;
	size_t n = synth(obs, 128, 0.0, 1, 4, 4, 4);

	ASSERT_STATUS(copus_fit(obs, n, &p, &rep), COPUS_OK);
	CU_ASSERT_EQUAL(rep.fixed, 0u);
	CU_ASSERT(rep.rmsle_step < 0.01);
	CU_ASSERT(rel_err(p.alpha_c, TRUTH.alpha_c) < 0.05);
	CU_ASSERT(rel_err(p.beta_c, TRUTH.beta_c) < 0.05);
	CU_ASSERT(rel_err(p.alpha_n, TRUTH.alpha_n) < 0.15);
	CU_ASSERT(rel_err(p.alpha_r, TRUTH.alpha_r) < 0.15);
	CU_ASSERT(fabs(p.gamma - TRUTH.gamma) < 0.3);
	if (rel_err(p.alpha_n, TRUTH.alpha_n) >= 0.15 || rep.rmsle_step >= 0.01)
		fprintf(stderr, "fit: ac %g bc %g an %g bn %g ar %g br %g g %g rmsle %g\n",
			p.alpha_c, p.beta_c, p.alpha_n, p.beta_n, p.alpha_r,
			p.beta_r, p.gamma, rep.rmsle_step);
}

static void fit_with_noise_predicts_unseen_shapes(void)
{
	copus_observation obs[128];
	copus_perf_params p;
	size_t n = synth(obs, 128, 0.05, 7, 3, 4, 3);

	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_OK);
	/* Predict 4 nodes x 4 GPUs, never observed. */
	copus_step_times want, got;
	copus_step_time(&TRUTH, 4, 16, 64, 0, &want);
	ASSERT_STATUS(copus_step_time(&p, 4, 16, 64, 0, &got), COPUS_OK);
	CU_ASSERT(rel_err(got.iter, want.iter) < 0.10);
}

static void objective_gradient_matches_finite_differences(void)
{
	copus_observation obs[128];
	size_t n = synth(obs, 128, 0.1, 3, 3, 4, 3);
	copus_perf_params at = { 0.07, 0.003, 0.15, 0.02, 0.05, 0.002, 2.3 };
	double grad[7];
	double *fields[7] = { &at.alpha_c, &at.beta_c, &at.alpha_n, &at.beta_n,
			      &at.alpha_r, &at.beta_r, &at.gamma };

	copus__fit_objective(obs, n, &at, grad);
	for (int k = 0; k < 7; k++) {
		double x = *fields[k], h = 1e-6 * x;
		*fields[k] = x + h;
		double fp = copus__fit_objective(obs, n, &at, NULL);
		*fields[k] = x - h;
		double fm = copus__fit_objective(obs, n, &at, NULL);
		*fields[k] = x;
		double fd = (fp - fm) / (2 * h);
		if (fabs(fd - grad[k]) > 1e-4 * (fabs(fd) + 1e-3))
			fprintf(stderr, "d/dp%d: exact %g, numeric %g\n", k,
				grad[k], fd);
		CU_ASSERT(fabs(fd - grad[k]) <= 1e-4 * (fabs(fd) + 1e-3));
	}
}

static void priors_hold_what_was_not_observed(void)
{
	copus_observation obs[16];
	copus_perf_params p;
	copus_fit_report rep;

	/* One GPU, one micro-batch size: alpha_c is half the mean compute
	 * time and every sync term stays at its floor. */
	size_t n = synth(obs, 16, 0.0, 1, 1, 1, 1);
	ASSERT_STATUS(copus_fit(obs, n, &p, &rep), COPUS_OK);
	CU_ASSERT_EQUAL(rep.fixed, 0x3du); /* all but beta_c */
	ASSERT_CLOSE(p.alpha_c, obs[0].compute_time / 2, 1e-12);
	CU_ASSERT(p.alpha_r <= 1e-8 * 1.0001 && p.beta_r <= 1e-8 * 1.0001);

	/* One node with up to 4 GPUs: the inter-node terms are assumed at
	 * least 1.1 x the in-node ones. */
	n = synth(obs, 16, 0.0, 1, 1, 4, 2);
	ASSERT_STATUS(copus_fit(obs, n, &p, &rep), COPUS_OK);
	CU_ASSERT_EQUAL(rep.fixed, (1u << 2) | (1u << 3));
	CU_ASSERT(p.alpha_n >= 1.1 * p.alpha_r * 0.999999);
	CU_ASSERT(p.beta_n >= 1.1 * p.beta_r * 0.999999);
	CU_ASSERT(rel_err(p.alpha_r, TRUTH.alpha_r) < 0.2);

	/* Two GPUs at most: no retrogression can be learned. */
	n = synth(obs, 16, 0.0, 1, 1, 2, 2);
	ASSERT_STATUS(copus_fit(obs, n, &p, &rep), COPUS_OK);
	CU_ASSERT(rep.fixed & (1u << 5));
	CU_ASSERT(rep.fixed & (1u << 3));
}

/*
 * libcopus's prior (COPUS_FIT_PRIOR_RING): fitted on one node of up to 4
 * GPUs, the sync across nodes is 1.1 x the sync at 4 GPUs in a node, at 8
 * nodes as at 2; Pollux's prior keeps growing it by beta_r per replica.
 * With multi-node steps observed, the two fits agree.
 */
static void ring_prior_levels_the_sync_across_nodes(void)
{
	copus_observation obs[64];
	copus_perf_params ring, pollux;
	copus_fit_report rep;
	copus_step_times in4, two, many, many_p;

	size_t n = synth(obs, 64, 0.0, 1, 1, 4, 2);
	ASSERT_STATUS(copus_fit_with(obs, n, COPUS_FIT_PRIOR_RING, &ring,
				     &rep),
		      COPUS_OK);
	CU_ASSERT_EQUAL(rep.fixed, (1u << 2) | (1u << 3));
	ASSERT_STATUS(copus_fit(obs, n, &pollux, NULL), COPUS_OK);
	/* The in-node terms are the same fit. */
	ASSERT_CLOSE(ring.alpha_r, pollux.alpha_r, 1e-9);
	ASSERT_CLOSE(ring.beta_r, pollux.beta_r, 1e-9);
	CU_ASSERT(ring.beta_r > 1e-6); /* the data has a growth to level */
	ASSERT_STATUS(copus_step_time(&ring, 1, 4, 32, 0, &in4), COPUS_OK);
	ASSERT_STATUS(copus_step_time(&ring, 2, 2, 32, 0, &two), COPUS_OK);
	ASSERT_STATUS(copus_step_time(&ring, 8, 32, 32, 0, &many), COPUS_OK);
	ASSERT_STATUS(copus_step_time(&pollux, 8, 32, 32, 0, &many_p),
		      COPUS_OK);
	ASSERT_CLOSE(two.sync, 1.1 * in4.sync, 1e-6);
	ASSERT_CLOSE(many.sync, two.sync, 1e-6);
	ASSERT_CLOSE(many_p.sync, 1.1 * (pollux.alpha_r + 30 * pollux.beta_r),
		     1e-6);
	CU_ASSERT(many_p.sync > 2.0 * many.sync);

	/* One GPU only: no sync anywhere, as with Pollux's prior. */
	n = synth(obs, 64, 0.0, 1, 1, 1, 2);
	ASSERT_STATUS(copus_fit_with(obs, n, COPUS_FIT_PRIOR_RING, &ring,
				     NULL),
		      COPUS_OK);
	CU_ASSERT(ring.alpha_n <= 1.1e-8 * 1.0001);
	CU_ASSERT(ring.beta_n <= 1e-8 * 1.0001);

	/* Multi-node steps seen: the prior plays no part. */
	n = synth(obs, 64, 0.0, 1, 3, 4, 2);
	ASSERT_STATUS(copus_fit_with(obs, n, COPUS_FIT_PRIOR_RING, &ring,
				     &rep),
		      COPUS_OK);
	CU_ASSERT_EQUAL(rep.fixed, 0u);
	ASSERT_STATUS(copus_fit(obs, n, &pollux, NULL), COPUS_OK);
	ASSERT_CLOSE(ring.alpha_n, pollux.alpha_n, 1e-12);
	ASSERT_CLOSE(ring.beta_n, pollux.beta_n, 1e-12);

	ASSERT_STATUS(copus_fit_with(obs, n, (copus_fit_prior)7, &ring, NULL),
		      COPUS_EINVAL);
}

static void fit_rejects_bad_observations(void)
{
	copus_observation obs[4];
	copus_perf_params p;
	size_t n = synth(obs, 4, 0.0, 1, 1, 2, 2);

	ASSERT_STATUS(copus_fit(NULL, 3, &p, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_fit(obs, n, NULL, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_fit(obs, 0, &p, NULL), COPUS_ENODATA);
	obs[1].step_time = NAN;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
	n = synth(obs, 4, 0.0, 1, 1, 2, 2);
	obs[0].compute_time = -1;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
	n = synth(obs, 4, 0.0, 1, 1, 2, 2);
	obs[2].replicas = 0;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
	n = synth(obs, 4, 0.0, 1, 1, 2, 2);
	obs[2].nodes = 3;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
	n = synth(obs, 4, 0.0, 1, 1, 2, 2);
	obs[3].local = 0;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
	n = synth(obs, 4, 0.0, 1, 1, 2, 2);
	obs[3].accum_steps = -2;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
	n = synth(obs, 4, 0.0, 1, 1, 2, 2);
	obs[0].step_time = INFINITY;
	ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_EINVAL);
}

static void fit_result_is_a_valid_model(void)
{
	copus_observation obs[128];
	copus_perf_params p;

	for (unsigned seed = 1; seed <= 20; seed++) {
		size_t n = synth(obs, 128, 0.3, seed, 1 + seed % 4,
				 1 + seed % 4, 1 + seed % 4);
		ASSERT_STATUS(copus_fit(obs, n, &p, NULL), COPUS_OK);
		ASSERT_STATUS(copus_perf_params_check(&p), COPUS_OK);
	}
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(fit_recovers_known_parameters),
		TEST(fit_with_noise_predicts_unseen_shapes),
		TEST(objective_gradient_matches_finite_differences),
		TEST(priors_hold_what_was_not_observed),
		TEST(ring_prior_levels_the_sync_across_nodes),
		TEST(fit_rejects_bad_observations),
		TEST(fit_result_is_a_valid_model),
	};
	return RUN_TESTS("fit", tests);
}
