/*
 * The estimate of a job's model on a GPU type it has not run on
 * (copus_models_estimate): which source sets the ratio, that a measured
 * model stays, and that one job's claim cannot set the others'.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include <copus/model.h>

#include "harness.h"

#define MAXJ 8
#define T 3

/* A model whose compute time of a micro-batch of 32 is 32 * scale / 10. */
static copus_model model(double scale)
{
	copus_model m;

	memset(&m, 0, sizeof(m));
	m.perf = (copus_perf_params){ .alpha_c = 0.0, .beta_c = scale / 10.0,
				      .alpha_n = 0.3, .beta_n = 0.02,
				      .alpha_r = 0.05, .beta_r = 0.01,
				      .gamma = 1.5 };
	m.grad = (copus_grad_stats){ .sqr = 1.0, .var = 4.0 };
	m.limits = (copus_batch_limits){ .init_batch = 32, .max_batch = 4096,
					 .min_local = 1, .max_local = 64,
					 .accumulation = true };
	return m;
}

/* The jobs of one test: each job's measured models, NULL where none. */
struct world {
	copus_model m[MAXJ][T];
	const copus_model *known[MAXJ * T];
	const char *apps[MAXJ];
	copus_model est[MAXJ * T];
	bool made[MAXJ * T];
	size_t n;
};

static void world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
}

/* A job of app with compute scale s[t] on type t (0: not run there). */
static void add_job(struct world *w, const char *app, double s0, double s1,
		    double s2)
{
	const double s[T] = { s0, s1, s2 };
	size_t i = w->n++;

	w->apps[i] = app;
	for (int t = 0; t < T; t++) {
		w->m[i][t] = model(s[t] > 0.0 ? s[t] : 1.0);
		w->known[i * T + t] = s[t] > 0.0 ? &w->m[i][t] : NULL;
	}
}

static int estimate(struct world *w, const double *speeds)
{
	return copus_models_estimate(w->known, w->n, T, w->apps, speeds,
				     w->est, w->made);
}

/* The compute scale of job i's estimate on type t. */
static double est_scale(const struct world *w, size_t i, int t)
{
	return w->est[i * T + t].perf.beta_c * 10.0;
}

static void a_ratio_of_the_same_application_scales_the_compute_time(void)
{
	struct world w;
	const copus_model *e;

	world_init(&w);
	add_job(&w, "bert", 1.0, 3.0, 0.0);
	add_job(&w, "bert", 2.0, 0.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	CU_ASSERT_TRUE(w.made[1 * T + 1]);
	ASSERT_CLOSE(est_scale(&w, 1, 1), 6.0, 1e-12);
	/* The links are not the GPU's: synchronisation, overlap, gradient
	 * statistics and limits stay the job's own. */
	e = &w.est[1 * T + 1];
	ASSERT_CLOSE(e->perf.alpha_n, 0.3, 1e-12);
	ASSERT_CLOSE(e->perf.beta_r, 0.01, 1e-12);
	ASSERT_CLOSE(e->perf.gamma, 1.5, 1e-12);
	ASSERT_CLOSE(e->grad.var, 4.0, 1e-12);
	CU_ASSERT_EQUAL(e->limits.max_local, 64);
	/* Type 2: nobody ran there and nothing else says. */
	CU_ASSERT_FALSE(w.made[1 * T + 2]);
}

static void a_measured_model_is_never_replaced(void)
{
	struct world w;

	world_init(&w);
	add_job(&w, "bert", 1.0, 3.0, 0.0);
	add_job(&w, "bert", 2.0, 5.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	for (size_t i = 0; i < w.n; i++) {
		CU_ASSERT_FALSE(w.made[i * T + 0]);
		CU_ASSERT_FALSE(w.made[i * T + 1]);
	}
}

static void the_application_ratio_comes_before_the_cluster_ratio(void)
{
	struct world w;

	world_init(&w);
	/* bert is 4x slower on type 1, the others 0.5x. */
	add_job(&w, "bert", 1.0, 4.0, 0.0);
	add_job(&w, "ncf", 1.0, 0.5, 0.0);
	add_job(&w, "ncf", 2.0, 1.0, 0.0);
	add_job(&w, "yolo", 1.0, 0.5, 0.0);
	add_job(&w, "bert", 1.0, 0.0, 0.0);
	add_job(&w, "cifar", 1.0, 0.0, 0.0);
	add_job(&w, "", 1.0, 0.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 4, 1), 4.0, 1e-12);
	/* No cifar job ran on type 1: the median of all four jobs that did
	 * (0.5, 0.5, 0.5, 4). */
	ASSERT_CLOSE(est_scale(&w, 5, 1), 0.5, 1e-12);
	/* A job without an application takes the cluster's ratio too. */
	ASSERT_CLOSE(est_scale(&w, 6, 1), 0.5, 1e-12);
}

static void one_jobs_claim_does_not_set_the_others_estimates(void)
{
	struct world w;

	world_init(&w);
	add_job(&w, "bert", 1.0, 2.0, 0.0);
	add_job(&w, "bert", 1.0, 2.0, 0.0);
	/* A hint is a claim: this one says type 1 is 1000x slower. */
	add_job(&w, "bert", 1.0, 1000.0, 0.0);
	add_job(&w, "bert", 3.0, 0.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 3, 1), 6.0, 1e-12);
}

static void an_estimate_does_not_feed_another(void)
{
	struct world w;

	world_init(&w);
	add_job(&w, "bert", 1.0, 2.0, 0.0);
	add_job(&w, "bert", 0.0, 1.0, 5.0);
	add_job(&w, "bert", 1.0, 0.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	/* Type 1 from job 0; type 2 would need the estimate on type 1 and
	 * job 1's ratio after it: no one measured types 0 and 2 together. */
	CU_ASSERT_TRUE(w.made[2 * T + 1]);
	CU_ASSERT_FALSE(w.made[2 * T + 2]);
	/* Job 1 gets type 0 the other way round (1 / 2 of its type 1). */
	ASSERT_CLOSE(est_scale(&w, 1, 0), 0.5, 1e-12);
}

static void the_gpu_table_orders_the_types_when_nothing_is_learned(void)
{
	const char *names[T] = { "t4", "a100", "h100" };
	double speeds[T];
	struct world w;

	for (int t = 0; t < T; t++)
		speeds[t] = copus_gpu_type_speed(names[t]);
	CU_ASSERT_TRUE(speeds[0] > 0.0);
	CU_ASSERT_TRUE(speeds[1] > speeds[0]);
	CU_ASSERT_TRUE(speeds[2] > speeds[1]);
	world_init(&w);
	add_job(&w, "bert", 0.0, 2.0, 0.0);
	ASSERT_STATUS(estimate(&w, speeds), COPUS_OK);
	CU_ASSERT_TRUE(w.made[0] && w.made[2]);
	ASSERT_CLOSE(est_scale(&w, 0, 0), 2.0 * speeds[1] / speeds[0],
		     1e-12);
	ASSERT_CLOSE(est_scale(&w, 0, 2), 2.0 * speeds[1] / speeds[2],
		     1e-12);
	CU_ASSERT_TRUE(est_scale(&w, 0, 0) > 2.0);
	CU_ASSERT_TRUE(est_scale(&w, 0, 2) < 2.0);
	/* A ratio that jobs of another application measured comes after
	 * the table's: a small model gains little from a larger GPU. */
	add_job(&w, "ncf", 1.0, 1.5, 0.0);
	ASSERT_STATUS(estimate(&w, speeds), COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 0, 0), 2.0 * speeds[1] / speeds[0],
		     1e-12);
	/* One of its own application comes before the table's. */
	add_job(&w, "bert", 1.0, 1.5, 0.0);
	ASSERT_STATUS(estimate(&w, speeds), COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 0, 0), 2.0 / 1.5, 1e-12);
	/* Without the table, the other applications' ratio serves. */
	world_init(&w);
	add_job(&w, "bert", 0.0, 2.0, 0.0);
	add_job(&w, "ncf", 1.0, 1.5, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 0, 0), 2.0 / 1.5, 1e-12);
}

static void the_table_speed_is_the_mean_of_flops_and_bandwidth(void)
{
	/* A100 SXM4 40GB: 19.5 TFLOP/s, 1555 GB/s. */
	ASSERT_CLOSE(copus_gpu_type_speed("a100"), sqrt(19.5e12 * 1555e9),
		     1e-12);
	ASSERT_CLOSE(copus_gpu_type_speed("A100"),
		     copus_gpu_type_speed("a100"), 0.0);
	CU_ASSERT_EQUAL(copus_gpu_type_speed("aws"), 0.0);
	CU_ASSERT_EQUAL(copus_gpu_type_speed(NULL), 0.0);
}

static void bad_arguments_are_refused(void)
{
	struct world w;

	world_init(&w);
	add_job(&w, "bert", 1.0, 2.0, 0.0);
	ASSERT_STATUS(copus_models_estimate(w.known, 1, 0, NULL, NULL, w.est,
					    w.made), COPUS_EINVAL);
	ASSERT_STATUS(copus_models_estimate(w.known, 1,
					    COPUS_ESTIMATE_MAX_TYPES + 1,
					    NULL, NULL, w.est, w.made),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_models_estimate(NULL, 1, T, NULL, NULL, w.est,
					    w.made), COPUS_EINVAL);
	ASSERT_STATUS(copus_models_estimate(w.known, 1, T, NULL, NULL, NULL,
					    w.made), COPUS_EINVAL);
	ASSERT_STATUS(copus_models_estimate(NULL, 0, T, NULL, NULL, NULL,
					    NULL), COPUS_OK);
	/* An invalid model is no evidence and no base. */
	w.m[0][1].perf.gamma = 0.0;
	add_job(&w, "bert", 1.0, 0.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	CU_ASSERT_FALSE(w.made[1 * T + 1]);
	CU_ASSERT_FALSE(w.made[0 * T + 1]);
}

/*
 * A job that measured two types teaches the memory; after it has ended, a
 * job alone on one type still gets an estimate on the other from it, and a
 * newer measurement of the pair replaces what was remembered.
 */
static void the_ratios_of_ended_jobs_are_remembered(void)
{
	struct copus_type_ratios mem;
	struct world w;

	memset(&mem, 0, sizeof(mem));
	world_init(&w);
	add_job(&w, "cifar10", 4.0, 1.0, 0.0);
	ASSERT_STATUS(copus_models_estimate_mem(w.known, w.n, T, w.apps, NULL,
						&mem, w.est, w.made),
		      COPUS_OK);
	CU_ASSERT_EQUAL(mem.count[1][0], 1);
	CU_ASSERT_EQUAL(mem.count[0][2], 0);
	/* The next round: the cifar10 job has ended; an imagenet job runs on
	 * type 0 only. Without the memory it gets nothing. */
	world_init(&w);
	add_job(&w, "imagenet", 8.0, 0.0, 0.0);
	ASSERT_STATUS(estimate(&w, NULL), COPUS_OK);
	CU_ASSERT_FALSE(w.made[0 * T + 1]);
	ASSERT_STATUS(copus_models_estimate_mem(w.known, w.n, T, w.apps, NULL,
						&mem, w.est, w.made),
		      COPUS_OK);
	CU_ASSERT_TRUE(w.made[0 * T + 1]);
	ASSERT_CLOSE(est_scale(&w, 0, 1), 2.0, 1e-12);
	CU_ASSERT_FALSE(w.made[0 * T + 2]);
	/* A job of this round that measured both shows a new ratio: it
	 * replaces the remembered one, for this round and the next. */
	add_job(&w, "bert", 3.0, 1.5, 0.0);
	ASSERT_STATUS(copus_models_estimate_mem(w.known, w.n, T, w.apps, NULL,
						&mem, w.est, w.made),
		      COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 0, 1), 4.0, 1e-12);
	world_init(&w);
	add_job(&w, "imagenet", 8.0, 0.0, 0.0);
	ASSERT_STATUS(copus_models_estimate_mem(w.known, w.n, T, w.apps, NULL,
						&mem, w.est, w.made),
		      COPUS_OK);
	ASSERT_CLOSE(est_scale(&w, 0, 1), 4.0, 1e-12);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(a_ratio_of_the_same_application_scales_the_compute_time),
		TEST(a_measured_model_is_never_replaced),
		TEST(the_application_ratio_comes_before_the_cluster_ratio),
		TEST(one_jobs_claim_does_not_set_the_others_estimates),
		TEST(an_estimate_does_not_feed_another),
		TEST(the_gpu_table_orders_the_types_when_nothing_is_learned),
		TEST(the_table_speed_is_the_mean_of_flops_and_bandwidth),
		TEST(bad_arguments_are_refused),
		TEST(the_ratios_of_ended_jobs_are_remembered),
	};

	return RUN_TESTS("estimate", tests);
}
