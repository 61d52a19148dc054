/*
 * The gradient noise estimators against synthetic gradients whose true
 * gradient norm and per-sample variance are known.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <copus/noise.h>

#include "harness.h"

#define DIM 256

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
	/* xorshift64*: fast and good enough for a test. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return ((rng_state * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static double gaussian(void)
{
	double u = uniform(), v = uniform();

	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/*
 * One step: count micro-batch gradients of b samples each, drawn as
 * G + N(0, sigma^2 / b I); returns the mean squared norm of the micro-batch
 * gradients and the squared norm of their mean, as a training job would.
 */
static void synthetic_step(const double *G, double sigma, double b, int count,
			   double *local_sqr, double *total_sqr)
{
	double mean[DIM] = { 0 };
	double sum_sq = 0.0, tot = 0.0;

	for (int i = 0; i < count; i++) {
		double sq = 0.0;
		for (int k = 0; k < DIM; k++) {
			double g = G[k] + sigma / sqrt(b) * gaussian();
			sq += g * g;
			mean[k] += g / count;
		}
		sum_sq += sq;
	}
	for (int k = 0; k < DIM; k++)
		tot += mean[k] * mean[k];
	*local_sqr = sum_sq / count;
	*total_sqr = tot;
}

static void make_gradient(double *G, double norm_sq)
{
	double s = 0.0;

	for (int k = 0; k < DIM; k++) {
		G[k] = gaussian();
		s += G[k] * G[k];
	}
	for (int k = 0; k < DIM; k++)
		G[k] *= sqrt(norm_sq / s);
}

/* Average the raw per-step estimates over many steps; compare with truth. */
static void check_known_noise(int count, double b, double M0, double sigma,
			      double norm_sq, int steps)
{
	double G[DIM], local, total;
	double sum_sqr = 0.0, sum_var = 0.0;
	copus_grad_stats raw;

	make_gradient(G, norm_sq);
	for (int s = 0; s < steps; s++) {
		synthetic_step(G, sigma, b, count, &local, &total);
		ASSERT_STATUS(copus_noise_estimate(local, total, count, b, M0,
						   &raw), COPUS_OK);
		sum_sqr += raw.sqr;
		sum_var += raw.var;
	}
	double true_var = DIM * sigma * sigma / M0;
	double true_phi = DIM * sigma * sigma / norm_sq;
	double est_sqr = sum_sqr / steps, est_var = sum_var / steps;
	ASSERT_CLOSE(est_sqr / norm_sq, 1.0, 0.03);
	ASSERT_CLOSE(est_var / true_var, 1.0, 0.03);
	ASSERT_CLOSE((M0 * est_var / est_sqr) / true_phi, 1.0, 0.05);
}

static void test_replicas_and_accumulation(void)
{
	/* 4 replicas x 2 accumulation steps, micro-batch 16, M0 = 64. */
	check_known_noise(8, 16, 64, 0.5, 1.0, 3000);
}

static void test_high_noise(void)
{
	/* Noise scale 256 / 0.5 = 512: the noise dominates each step. */
	check_known_noise(4, 32, 128, 1.0, 0.5, 4000);
}

static void test_consecutive_steps_one_gpu(void)
{
	/* Two consecutive steps on one GPU act as two micro-batches. */
	check_known_noise(2, 32, 32, 1.0, 2.0, 6000);
}

static void test_moving_average(void)
{
	double G[DIM], local, total;
	copus_noise nz;
	copus_grad_stats raw, avg;
	const double M0 = 32, b = 8, sigma = 1.0, norm_sq = 4.0;

	make_gradient(G, norm_sq);
	ASSERT_STATUS(copus_noise_init(&nz, 0.99), COPUS_OK);
	ASSERT_STATUS(copus_noise_get(&nz, &avg), COPUS_ENODATA);
	synthetic_step(G, sigma, b, 4, &local, &total);
	ASSERT_STATUS(copus_noise_estimate(local, total, 4, b, M0, &raw),
		      COPUS_OK);
	ASSERT_STATUS(copus_noise_update(&nz, &raw), COPUS_OK);
	/* Bias correction: one update averages to the update itself. */
	ASSERT_STATUS(copus_noise_get(&nz, &avg), COPUS_OK);
	ASSERT_CLOSE(avg.sqr, fmax(raw.sqr, 1e-30), 1e-12);
	ASSERT_CLOSE(avg.var, fmax(raw.var, 0.0), 1e-12);
	for (int s = 0; s < 3000; s++) {
		synthetic_step(G, sigma, b, 4, &local, &total);
		ASSERT_STATUS(copus_noise_estimate(local, total, 4, b, M0,
						   &raw), COPUS_OK);
		ASSERT_STATUS(copus_noise_update(&nz, &raw), COPUS_OK);
	}
	ASSERT_STATUS(copus_noise_get(&nz, &avg), COPUS_OK);
	/* With decay 0.99 the average spans ~100 steps: within ~15%. */
	ASSERT_CLOSE(avg.sqr / norm_sq, 1.0, 0.15);
	ASSERT_CLOSE(avg.var / (DIM * sigma * sigma / M0), 1.0, 0.15);
	double phi;
	ASSERT_STATUS(copus_noise_scale(&avg, M0, &phi), COPUS_OK);
	ASSERT_CLOSE(phi / (DIM * sigma * sigma / norm_sq), 1.0, 0.25);
}

static void test_bad_arguments(void)
{
	copus_grad_stats g = { 1, 1 };
	copus_noise nz;

	ASSERT_STATUS(copus_noise_estimate(1, 1, 1, 8, 8, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_estimate(1, 1, 2, 8, 8, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_estimate(-1, 1, 2, 8, 8, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_estimate(1, NAN, 2, 8, 8, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_estimate(1, 1, 2, 0, 8, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_estimate(1, 1, 2, 8, -8, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_init(NULL, 0.9), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_init(&nz, 1.0), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_init(&nz, NAN), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_init(&nz, 0.9), COPUS_OK);
	ASSERT_STATUS(copus_noise_update(&nz, NULL), COPUS_EINVAL);
	g.sqr = INFINITY;
	ASSERT_STATUS(copus_noise_update(&nz, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_get(NULL, &g), COPUS_EINVAL);
	ASSERT_STATUS(copus_noise_get(&nz, NULL), COPUS_EINVAL);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(test_replicas_and_accumulation),
		TEST(test_high_noise),
		TEST(test_consecutive_steps_one_gpu),
		TEST(test_moving_average),
		TEST(test_bad_arguments),
	};

	return RUN_TESTS("noise", tests);
}
