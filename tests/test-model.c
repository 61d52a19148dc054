/* The goodput model on hand-computed cases, and its answers to bad input. */
#include <math.h>

#include <copus/model.h>

#include "harness.h"

static const copus_perf_params P = {
	.alpha_c = 0.1, .beta_c = 0.01,
	.alpha_n = 0.3, .beta_n = 0.02,
	.alpha_r = 0.05, .beta_r = 0.01,
	.gamma = 1.0,
};

static void step_time_one_gpu_has_no_sync(void)
{
	copus_step_times t;

	ASSERT_STATUS(copus_step_time(&P, 1, 1, 10, 0, &t), COPUS_OK);
	ASSERT_CLOSE(t.grad, 0.2, 1e-12);
	ASSERT_CLOSE(t.sync, 0.0, 1e-12);
	ASSERT_CLOSE(t.iter, 0.2, 1e-12);
}

static void step_time_in_node_and_across_nodes(void)
{
	copus_step_times t;
	double tput;

	/* One node, 4 GPUs: sync = 0.05 + 0.01 * 2, no overlap (gamma 1). */
	ASSERT_STATUS(copus_step_time(&P, 1, 4, 10, 0, &t), COPUS_OK);
	ASSERT_CLOSE(t.sync, 0.07, 1e-12);
	ASSERT_CLOSE(t.iter, 0.27, 1e-12);
	ASSERT_STATUS(copus_throughput(&P, 1, 4, 10, 0, &tput), COPUS_OK);
	ASSERT_CLOSE(tput, 40 / 0.27, 1e-12);

	/* Two nodes, 8 GPUs, 2 accumulation steps. */
	ASSERT_STATUS(copus_step_time(&P, 2, 8, 10, 2, &t), COPUS_OK);
	ASSERT_CLOSE(t.sync, 0.42, 1e-12);
	ASSERT_CLOSE(t.opt, 0.62, 1e-12);
	ASSERT_CLOSE(t.iter, 1.02, 1e-12);
	ASSERT_STATUS(copus_throughput(&P, 2, 8, 10, 2, &tput), COPUS_OK);
	ASSERT_CLOSE(tput, 8 * 10 * 3 / 1.02, 1e-12);

	/* Two GPUs: no retrogression term. */
	ASSERT_STATUS(copus_step_time(&P, 1, 2, 10, 0, &t), COPUS_OK);
	ASSERT_CLOSE(t.sync, 0.05, 1e-12);
}

static void overlap_follows_gamma(void)
{
	copus_perf_params p = P;
	copus_step_times t;

	p.gamma = 2.0;
	ASSERT_STATUS(copus_step_time(&p, 1, 2, 10, 0, &t), COPUS_OK);
	ASSERT_CLOSE(t.opt, sqrt(0.2 * 0.2 + 0.05 * 0.05), 1e-12);
	/* gamma 10 is close to max(grad, sync). */
	p.gamma = 10.0;
	ASSERT_STATUS(copus_step_time(&p, 1, 2, 10, 0, &t), COPUS_OK);
	CU_ASSERT(t.opt > 0.2 && t.opt < 0.2001);
}

static void efficiency_and_gain_match_hand_values(void)
{
	copus_grad_stats g = { .sqr = 1.0, .var = 4.0 };
	double v;

	ASSERT_STATUS(copus_noise_scale(&g, 32, &v), COPUS_OK);
	ASSERT_CLOSE(v, 128.0, 1e-12);
	ASSERT_STATUS(copus_efficiency(&g, 32, 128, &v), COPUS_OK);
	ASSERT_CLOSE(v, 160.0 / 256.0, 1e-12);
	ASSERT_STATUS(copus_gain(&g, 32, 128, &v), COPUS_OK);
	ASSERT_CLOSE(v, 2.5, 1e-12);
	ASSERT_STATUS(copus_efficiency(&g, 32, 32, &v), COPUS_OK);
	ASSERT_CLOSE(v, 1.0, 1e-12);
	ASSERT_STATUS(copus_gain(&g, 32, 32, &v), COPUS_OK);
	ASSERT_CLOSE(v, 1.0, 1e-12);
}

static void efficiency_at_the_extremes(void)
{
	copus_grad_stats none = { 0, 0 }, noisy = { .sqr = 0.0, .var = 1.0 };
	double v;

	/* Nothing measured: a bigger batch brings no gain. */
	ASSERT_STATUS(copus_efficiency(&none, 32, 64, &v), COPUS_OK);
	ASSERT_CLOSE(v, 0.5, 1e-12);
	ASSERT_STATUS(copus_gain(&none, 32, 64, &v), COPUS_OK);
	ASSERT_CLOSE(v, 1.0, 1e-12);
	/* Pure noise: every sample counts, the gain is the full scale. */
	ASSERT_STATUS(copus_efficiency(&noisy, 32, 64, &v), COPUS_OK);
	ASSERT_CLOSE(v, 1.0, 1e-12);
	ASSERT_STATUS(copus_gain(&noisy, 32, 64, &v), COPUS_OK);
	ASSERT_CLOSE(v, 2.0, 1e-12);
	ASSERT_STATUS(copus_noise_scale(&noisy, 32, &v), COPUS_OK);
	CU_ASSERT(isinf(v));
}

static copus_model model(double sqr, double var, double max_batch,
			 int max_local, bool accumulation)
{
	copus_model m = {
		.perf = P,
		.grad = { .sqr = sqr, .var = var },
		.limits = { .init_batch = 32, .max_batch = max_batch,
			    .min_local = 1, .max_local = max_local,
			    .accumulation = accumulation },
	};
	return m;
}

static void best_batch_without_noise_keeps_the_initial_batch(void)
{
	/* var = 0: efficiency M0/M, goodput M0/T_iter, smallest batch wins. */
	copus_model m = model(1.0, 0.0, 256, 64, false);
	copus_batch_plan plan;

	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &plan), COPUS_OK);
	CU_ASSERT_EQUAL(plan.local, 32);
	CU_ASSERT_EQUAL(plan.accum_steps, 0);
	ASSERT_CLOSE(plan.batch, 32, 0);
	ASSERT_CLOSE(plan.goodput, 32 / (0.1 + 0.32), 1e-9);
}

static void best_batch_with_high_noise_goes_to_the_maximum(void)
{
	/* Efficiency ~1: goodput ~ throughput, which grows with m. */
	copus_model m = model(1e-12, 1.0, 256, 256, false);
	copus_batch_plan plan;
	double eff;

	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &plan), COPUS_OK);
	CU_ASSERT_EQUAL(plan.local, 256);
	CU_ASSERT_EQUAL(plan.accum_steps, 0);
	ASSERT_STATUS(copus_efficiency(&m.grad, 32, 256, &eff), COPUS_OK);
	ASSERT_CLOSE(plan.goodput, 256 / (0.1 + 2.56) * eff, 1e-9);
}

static void best_batch_accumulates_beyond_the_gpu_limit(void)
{
	/* 2 GPUs, micro-batch at most 64, total up to 512: 3 accumulation
	 * steps of 64 amortise the sync best (hand-computed T_iter 3.01). */
	copus_model m = model(1e-12, 1.0, 512, 64, true);
	copus_batch_plan plan;
	double eff;

	ASSERT_STATUS(copus_best_batch(&m, 1, 2, &plan), COPUS_OK);
	CU_ASSERT_EQUAL(plan.local, 64);
	CU_ASSERT_EQUAL(plan.accum_steps, 3);
	ASSERT_CLOSE(plan.batch, 512, 0);
	ASSERT_STATUS(copus_efficiency(&m.grad, 32, 512, &eff), COPUS_OK);
	ASSERT_CLOSE(plan.goodput, 512 / 3.01 * eff, 1e-9);

	/* The same job without accumulation cannot exceed 2 x 64. */
	m.limits.accumulation = false;
	ASSERT_STATUS(copus_best_batch(&m, 1, 2, &plan), COPUS_OK);
	CU_ASSERT(plan.local <= 64);
	CU_ASSERT_EQUAL(plan.accum_steps, 0);
}

static void best_batch_on_one_gpu_accumulates_once_beyond_m0(void)
{
	copus_model m = model(1e-12, 1.0, 128, 256, true);
	copus_batch_plan plan;

	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &plan), COPUS_OK);
	CU_ASSERT(plan.accum_steps >= 1);
	CU_ASSERT_EQUAL(plan.local * (plan.accum_steps + 1), 128);
}

static void best_batch_reports_shapes_that_cannot_hold_the_limits(void)
{
	copus_model m = model(1.0, 1.0, 512, 64, true);
	copus_batch_plan plan;

	m.limits.min_local = 16;
	/* 64 GPUs x at least 16 samples exceeds the largest batch 512. */
	ASSERT_STATUS(copus_best_batch(&m, 16, 64, &plan), COPUS_ERANGE);
}

static void goodput_is_throughput_times_efficiency(void)
{
	copus_model m = model(1.0, 4.0, 512, 64, true);
	double gp, tput, eff;

	ASSERT_STATUS(copus_goodput(&m, 1, 4, 32, 0, &gp), COPUS_OK);
	ASSERT_STATUS(copus_throughput(&m.perf, 1, 4, 32, 0, &tput), COPUS_OK);
	ASSERT_STATUS(copus_efficiency(&m.grad, 32, 128, &eff), COPUS_OK);
	ASSERT_CLOSE(gp, tput * eff, 1e-12);
}

static void speedup_is_memoised_ratio_of_best_goodputs(void)
{
	copus_model m = model(1.0, 40.0, 1024, 128, true);
	copus_speedup *s = NULL;
	copus_batch_plan base, plan;
	double v, again;

	ASSERT_STATUS(copus_speedup_create(&m, 16, 64, 1, 1, &s), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	ASSERT_STATUS(copus_speedup_get(s, 1, 1, &v), COPUS_OK);
	ASSERT_CLOSE(v, 1.0, 1e-12);
	ASSERT_STATUS(copus_speedup_get(s, 0, 0, &v), COPUS_OK);
	ASSERT_CLOSE(v, 0.0, 0);
	ASSERT_STATUS(copus_speedup_get(s, 2, 8, &v), COPUS_OK);
	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &base), COPUS_OK);
	ASSERT_STATUS(copus_best_batch(&m, 2, 8, &plan), COPUS_OK);
	ASSERT_CLOSE(v, plan.goodput / base.goodput, 1e-12);
	ASSERT_STATUS(copus_speedup_get(s, 2, 8, &again), COPUS_OK);
	CU_ASSERT_EQUAL(v, again);
	CU_ASSERT(v > 1.0);

	/* After a model change the table answers for the new model. */
	m.grad.var = 0.0;
	ASSERT_STATUS(copus_speedup_reset(s, &m), COPUS_OK);
	ASSERT_STATUS(copus_speedup_get(s, 2, 8, &again), COPUS_OK);
	CU_ASSERT(again < v);

	ASSERT_STATUS(copus_speedup_get(s, 3, 2, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_get(s, 17, 20, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_get(s, 1, 65, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_get(s, 0, 1, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_get(s, -1, 1, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_get(NULL, 1, 1, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_get(s, 1, 1, NULL), COPUS_EINVAL);
	copus_speedup_destroy(s);
	copus_speedup_destroy(NULL);
}

/*
 * A model bootstrapped for another type: one GPU's step scales by the
 * probes' ratio, the sync across nodes stays, and bad probes are refused.
 */
static void bootstrap_scales_compute_keeps_sync(void)
{
	copus_model k = {
		.perf = P,
		.grad = { .sqr = 1.0, .var = 10.0 },
		.limits = { .init_batch = 64, .max_batch = 4096, .min_local = 1,
			    .max_local = 128, .accumulation = true },
	}, o;
	copus_step_times a, b;

	ASSERT_STATUS(copus_model_bootstrap(&k, 0.2, 0.5, &o), COPUS_OK);
	ASSERT_STATUS(copus_step_time(&k.perf, 1, 1, 10, 0, &a), COPUS_OK);
	ASSERT_STATUS(copus_step_time(&o.perf, 1, 1, 10, 0, &b), COPUS_OK);
	ASSERT_CLOSE(b.iter, a.iter * 2.5, 1e-12);
	ASSERT_STATUS(copus_step_time(&k.perf, 2, 4, 10, 0, &a), COPUS_OK);
	ASSERT_STATUS(copus_step_time(&o.perf, 2, 4, 10, 0, &b), COPUS_OK);
	ASSERT_CLOSE(b.sync, a.sync, 1e-12);
	CU_ASSERT_EQUAL(o.grad.var, k.grad.var);
	CU_ASSERT_EQUAL(o.limits.max_local, k.limits.max_local);
	ASSERT_STATUS(copus_model_bootstrap(&k, 0.0, 0.5, &o), COPUS_EINVAL);
	ASSERT_STATUS(copus_model_bootstrap(&k, 0.2, NAN, &o), COPUS_EINVAL);
	ASSERT_STATUS(copus_model_bootstrap(NULL, 0.2, 0.5, &o), COPUS_EINVAL);
}

static void bad_parameters_are_rejected(void)
{
	copus_step_times t;
	copus_perf_params p;
	double v;

	ASSERT_STATUS(copus_step_time(NULL, 1, 1, 10, 0, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 1, 1, 10, 0, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 0, 0, 10, 0, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 1, 0, 10, 0, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 3, 2, 10, 0, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 1, 1, 0, 0, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 1, 1, NAN, 0, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_step_time(&P, 1, 1, 10, -1, &t), COPUS_EINVAL);
	ASSERT_STATUS(copus_throughput(&P, 1, 1, 10, 0, NULL), COPUS_EINVAL);

	p = P;
	p.alpha_c = NAN;
	ASSERT_STATUS(copus_perf_params_check(&p), COPUS_EINVAL);
	ASSERT_STATUS(copus_throughput(&p, 1, 1, 10, 0, &v), COPUS_EINVAL);
	p = P;
	p.beta_r = -1;
	ASSERT_STATUS(copus_perf_params_check(&p), COPUS_EINVAL);
	p = P;
	p.gamma = 0.5;
	ASSERT_STATUS(copus_perf_params_check(&p), COPUS_EINVAL);
	p.gamma = 11;
	ASSERT_STATUS(copus_perf_params_check(&p), COPUS_EINVAL);
	p = P;
	p.alpha_c = p.beta_c = 0;
	ASSERT_STATUS(copus_perf_params_check(&p), COPUS_EINVAL);
	p = P;
	p.alpha_n = INFINITY;
	ASSERT_STATUS(copus_perf_params_check(&p), COPUS_EINVAL);
	ASSERT_STATUS(copus_perf_params_check(NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_perf_params_check(&P), COPUS_OK);
}

static void bad_gradient_statistics_and_limits_are_rejected(void)
{
	copus_grad_stats nan = { NAN, 1 }, neg = { 1, -1 }, ok = { 1, 1 };
	copus_model m = model(1.0, 1.0, 256, 64, true);
	copus_batch_plan plan;
	double v;

	ASSERT_STATUS(copus_efficiency(&nan, 32, 64, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_efficiency(&neg, 32, 64, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_efficiency(NULL, 32, 64, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_efficiency(&ok, 0, 64, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_efficiency(&ok, 32, -64, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_efficiency(&ok, 32, NAN, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_efficiency(&ok, 32, 64, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_gain(&nan, 32, 64, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_gain(&ok, 32, 0, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_scale(&neg, 32, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_scale(&ok, 0, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_scale(&ok, 32, NULL), COPUS_EINVAL);

	ASSERT_STATUS(copus_model_check(&m), COPUS_OK);
	m.limits.max_batch = 16; /* below M0 */
	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &plan), COPUS_EINVAL);
	m = model(1.0, 1.0, 256, 64, true);
	m.limits.min_local = 0;
	ASSERT_STATUS(copus_best_batch(&m, 1, 1, &plan), COPUS_EINVAL);
	m = model(1.0, 1.0, 256, 64, true);
	m.limits.max_local = 0;
	ASSERT_STATUS(copus_model_check(&m), COPUS_EINVAL);
	m = model(1.0, 1.0, 256, 64, true);
	m.limits.init_batch = NAN;
	ASSERT_STATUS(copus_model_check(&m), COPUS_EINVAL);
	m = model(1.0, 1.0, 256, 64, true);
	m.grad.var = NAN;
	ASSERT_STATUS(copus_goodput(&m, 1, 1, 32, 0, &v), COPUS_EINVAL);
	m = model(1.0, 1.0, 256, 64, true);
	ASSERT_STATUS(copus_goodput(&m, 1, 1, 0, 0, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_goodput(&m, 2, 1, 32, 0, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_goodput(&m, 1, 1, 32, 0, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_best_batch(&m, 0, 0, &plan), COPUS_EINVAL);
	ASSERT_STATUS(copus_best_batch(&m, 1, 1, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_best_batch(NULL, 1, 1, &plan), COPUS_EINVAL);
	ASSERT_STATUS(copus_model_check(NULL), COPUS_EINVAL);
}

static void speedup_create_rejects_bad_tables(void)
{
	copus_model m = model(1.0, 1.0, 256, 64, true);
	copus_speedup *s = NULL;

	ASSERT_STATUS(copus_speedup_create(&m, 0, 4, 1, 1, &s), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_create(&m, 4, 2, 1, 1, &s), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_create(&m, 4, 16, 2, 1, &s), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_create(&m, 4, 16, 5, 8, &s), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_create(&m, 4, 16, 1, 1, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_create(NULL, 4, 16, 1, 1, &s), COPUS_EINVAL);
	ASSERT_STATUS(copus_speedup_create(&m, 1 << 16, 1 << 16, 1, 1, &s),
		      COPUS_ERANGE);
	m.perf.gamma = NAN;
	ASSERT_STATUS(copus_speedup_create(&m, 4, 16, 1, 1, &s), COPUS_EINVAL);
	CU_ASSERT_PTR_NULL(s);
}

static void every_status_has_a_message(void)
{
	for (int rc = 0; rc >= COPUS_ESTATE; rc--) {
		const char *msg = copus_strerror(rc);
		CU_ASSERT_PTR_NOT_NULL(msg);
		CU_ASSERT_STRING_NOT_EQUAL(msg, "unknown copus status");
	}
	CU_ASSERT_STRING_EQUAL(copus_strerror(-1000), "unknown copus status");
}

static void every_status_has_its_name(void)
{
	CU_ASSERT_STRING_EQUAL(copus_status_name(COPUS_OK), "COPUS_OK");
	CU_ASSERT_STRING_EQUAL(copus_status_name(COPUS_EINVAL), "COPUS_EINVAL");
	CU_ASSERT_STRING_EQUAL(copus_status_name(COPUS_ESTATE), "COPUS_ESTATE");
	for (int rc = 0; rc >= COPUS_ESTATE; rc--)
		CU_ASSERT_STRING_NOT_EQUAL(copus_status_name(rc),
					   "COPUS_UNKNOWN");
	CU_ASSERT_STRING_EQUAL(copus_status_name(1), "COPUS_UNKNOWN");
	CU_ASSERT_STRING_EQUAL(copus_status_name(COPUS_ESTATE - 1),
			       "COPUS_UNKNOWN");
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(bootstrap_scales_compute_keeps_sync),
		TEST(step_time_one_gpu_has_no_sync),
		TEST(step_time_in_node_and_across_nodes),
		TEST(overlap_follows_gamma),
		TEST(efficiency_and_gain_match_hand_values),
		TEST(efficiency_at_the_extremes),
		TEST(best_batch_without_noise_keeps_the_initial_batch),
		TEST(best_batch_with_high_noise_goes_to_the_maximum),
		TEST(best_batch_accumulates_beyond_the_gpu_limit),
		TEST(best_batch_on_one_gpu_accumulates_once_beyond_m0),
		TEST(best_batch_reports_shapes_that_cannot_hold_the_limits),
		TEST(goodput_is_throughput_times_efficiency),
		TEST(speedup_is_memoised_ratio_of_best_goodputs),
		TEST(bad_parameters_are_rejected),
		TEST(bad_gradient_statistics_and_limits_are_rejected),
		TEST(speedup_create_rejects_bad_tables),
		TEST(every_status_has_a_message),
		TEST(every_status_has_its_name),
	};
	return RUN_TESTS("model", tests);
}
