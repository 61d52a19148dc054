/*
 * Benchmark of the remaining-work predictor: time to train the forest on a
 * full history, time per prediction of a total, and time per job of the
 * remaining work of 2,000 running jobs at once (what the plugin asks every
 * round).
 */
#include <stdio.h>
#include <time.h>

#include <copus/predict.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	static const char *apps[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	static const char *users[] = { "u0", "u1", "u2", "u3", "u4", "u5",
				       "u6", "u7", "u8", "u9" };
	const size_t sizes[] = { 256, 1024, 4096 };

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		copus_predictor_params params = COPUS_PREDICTOR_PARAMS_INITIALIZER;
		copus_predictor *p;
		unsigned x = 1;

		params.history = sizes[s];
		params.retrain_every = (int)sizes[s]; /* train once, at the end */
		params.min_samples = (int)sizes[s];
		if (copus_predictor_create(&params, &p) != COPUS_OK)
			return 1;
		double t0 = now();
		for (size_t i = 0; i < sizes[s]; i++) {
			x = x * 1664525u + 1013904223u;
			copus_job_attrs job = { apps[x % 8], users[(x >> 8) % 10],
						1 << ((x >> 16) % 4), 32.0 };
			copus_predictor_add(p, &job, 100.0 + (x >> 20));
		}
		double t1 = now();
		int n = 2000;
		double sink = 0;
		for (int i = 0; i < n; i++) {
			copus_job_attrs job = { apps[i % 8], users[i % 10],
						1 << (i % 4), 32.0 };
			double v;
			copus_predictor_total(p, &job, &v);
			sink += v;
		}
		double t2 = now();
		static copus_job_attrs many[2000];
		static double out[2000];
		for (int i = 0; i < n; i++)
			many[i] = (copus_job_attrs){ apps[i % 8], users[i % 10],
						     1 << (i % 4), 32.0 };
		copus_predictor_total_many(p, many, n, out);
		double t3 = now();
		static double done[2000], left[2000];
		for (int i = 0; i < n; i++)
			done[i] = 50.0 + (i * 37 % 4096);
		int rc = copus_predictor_remaining_many(p, many, done, n, left);
		double t4 = now();
		printf("history %5zu: train %7.2f ms, predict %6.1f us per job "
		       "alone, %6.2f us per job in a batch of %d, remaining "
		       "%6.2f us per job%s\n",
		       sizes[s], (t1 - t0) * 1e3, (t2 - t1) / n * 1e6,
		       (t3 - t2) / n * 1e6, n, (t4 - t3) / n * 1e6,
		       sink > 0 && out[0] > 0 && rc == COPUS_OK ?
			       "" : " (no predictions)");
		copus_predictor_destroy(p);
	}
	return 0;
}
