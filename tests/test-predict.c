/* The remaining-work predictor on synthetic recurring jobs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/predict.h>

#include "harness.h"

static const char *APPS[] = { "resnet", "bert", "ncf", "yolo" };
static const double APP_WORK[] = { 9000, 1500, 400, 30000 };
static const char *USERS[] = { "ana", "bo", "chen", "dee", "eli", "fay" };
static const double USER_FACTOR[] = { 1.0, 2.5, 0.6, 1.6, 4.0, 0.8 };

static unsigned rng = 12345;

static double uniform(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (rng >> 8) / 16777216.0;
}

/* A recurring job: its work depends on application, user and size, with
 * +-5% run-to-run noise. */
static double draw(copus_job_attrs *job)
{
	int a = (int)(uniform() * 4), u = (int)(uniform() * 6);
	int g = 1 << (int)(uniform() * 4);

	job->application = APPS[a];
	job->user = USERS[u];
	job->gpus = g;
	job->batch = 32.0 * g;
	return APP_WORK[a] * USER_FACTOR[u] * (1.0 + 0.25 * log2(g)) *
	       (0.95 + 0.1 * uniform());
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void forest_learns_recurring_jobs(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs job;
	double err[200], base[200], all[400];

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (int i = 0; i < 400; i++) {
		all[i] = draw(&job);
		ASSERT_STATUS(copus_predictor_add(p, &job, all[i]), COPUS_OK);
	}
	qsort(all, 400, sizeof(double), cmp);
	double median_work = all[200];
	for (int i = 0; i < 200; i++) {
		double truth = draw(&job), pred = 0;
		ASSERT_STATUS(copus_predictor_total(p, &job, &pred), COPUS_OK);
		err[i] = fabs(pred - truth) / truth;
		base[i] = fabs(median_work - truth) / truth;
	}
	qsort(err, 200, sizeof(double), cmp);
	qsort(base, 200, sizeof(double), cmp);
	printf("forest median |error| %.1f%%, global median's %.1f%%\n",
	       100 * err[100], 100 * base[100]);
	CU_ASSERT(err[100] < 0.15);
	CU_ASSERT(err[100] * 3 < base[100]);
	copus_predictor_destroy(p);
}

static void batch_prediction_equals_single_predictions(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs jobs[20];
	double many[20], one;

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	for (int i = 0; i < 60; i++) {
		double w = draw(&jobs[0]);
		ASSERT_STATUS(copus_predictor_add(p, &jobs[0], w), COPUS_OK);
	}
	for (int i = 0; i < 20; i++)
		draw(&jobs[i]);
	ASSERT_STATUS(copus_predictor_total_many(p, jobs, 20, many), COPUS_OK);
	for (int i = 0; i < 20; i++) {
		ASSERT_STATUS(copus_predictor_total(p, &jobs[i], &one), COPUS_OK);
		ASSERT_CLOSE(many[i], one, 1e-12);
	}
	ASSERT_STATUS(copus_predictor_total_many(p, jobs, 0, many), COPUS_OK);
	ASSERT_STATUS(copus_predictor_total_many(p, NULL, 2, many), COPUS_EINVAL);
	jobs[3].gpus = -1;
	ASSERT_STATUS(copus_predictor_total_many(p, jobs, 20, many), COPUS_EINVAL);
	copus_predictor_destroy(p);
}

static void few_samples_fall_back_to_the_median(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs job = { "a", "u", 1, 32 };
	double v;

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_predictor_total(p, &job, &v), COPUS_ENODATA);
	ASSERT_STATUS(copus_predictor_add(p, &job, 100), COPUS_OK);
	ASSERT_STATUS(copus_predictor_add(p, &job, 300), COPUS_OK);
	ASSERT_STATUS(copus_predictor_add(p, &job, 200), COPUS_OK);
	ASSERT_STATUS(copus_predictor_total(p, &job, &v), COPUS_OK);
	ASSERT_CLOSE(v, 200, 1e-5);
	copus_predictor_destroy(p);
}

static void remaining_work_uses_target_then_prediction(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs job = { "a", "u", 1, 32 };
	double v;

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	/* A known target needs no history. */
	ASSERT_STATUS(copus_predictor_remaining(p, &job, 30, 100, &v), COPUS_OK);
	ASSERT_CLOSE(v, 70, 1e-12);
	ASSERT_STATUS(copus_predictor_remaining(p, &job, 130, 100, &v), COPUS_OK);
	ASSERT_CLOSE(v, 0, 0);
	ASSERT_STATUS(copus_predictor_remaining(p, &job, 30, 0, &v),
		      COPUS_ENODATA);
	for (int i = 0; i < 10; i++)
		ASSERT_STATUS(copus_predictor_add(p, &job, 1000), COPUS_OK);
	ASSERT_STATUS(copus_predictor_remaining(p, &job, 400, 0, &v), COPUS_OK);
	ASSERT_CLOSE(v, 600, 1e-3);
	/* Beyond its prediction a job still has as much again to do. */
	ASSERT_STATUS(copus_predictor_remaining(p, &job, 3000, 0, &v), COPUS_OK);
	ASSERT_CLOSE(v, 3000, 1e-12);
	copus_predictor_destroy(p);
}

/* The median relative error of the predicted remaining work of 100 fresh
 * jobs, each looked at a random fraction of the way through. */
static double remaining_error(copus_predictor *p)
{
	copus_job_attrs jobs[100];
	double truth[100], done[100], rem[100], err[100];

	for (int i = 0; i < 100; i++) {
		truth[i] = draw(&jobs[i]);
		done[i] = truth[i] * 0.9 * uniform();
	}
	ASSERT_STATUS(copus_predictor_remaining_many(p, jobs, done, 100, rem),
		      COPUS_OK);
	for (int i = 0; i < 100; i++) {
		CU_ASSERT(rem[i] > 0);
		err[i] = fabs(rem[i] - (truth[i] - done[i])) /
			 (truth[i] - done[i]);
	}
	qsort(err, 100, sizeof(double), cmp);
	return err[50];
}

/* Recurring jobs: the more of them finish, the better the prediction of
 * the remaining work of the next ones, and it is retrained along the way. */
static void error_shrinks_as_jobs_finish(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs job;
	double e[4];
	int finished = 0;
	const int upto[4] = { 4, 16, 64, 256 };

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_predictor_remaining_many(p, &job, e, 0, e),
		      COPUS_OK);
	for (int k = 0; k < 4; k++) {
		while (finished < upto[k]) {
			double w = draw(&job);
			ASSERT_STATUS(copus_predictor_add(p, &job, w), COPUS_OK);
			finished++;
		}
		e[k] = remaining_error(p);
		printf("%3d finished: median |error| of remaining work %.1f%%\n",
		       finished, 100 * e[k]);
	}
	CU_ASSERT(e[1] < e[0]);
	CU_ASSERT(e[2] < e[1]);
	CU_ASSERT(e[3] <= e[2] + 0.02);
	CU_ASSERT(e[3] < 0.15);
	/* Retrained often while young, then every retrain_every jobs. */
	CU_ASSERT(copus_predictor_trainings(p) >= 256 / 8);
	CU_ASSERT(copus_predictor_trainings(p) < 256 / 2);
	copus_predictor_destroy(p);
}

/* The remaining work the predictor gives a job of application app that
 * has done done, alone or beside others running. */
static double left_of(copus_predictor *p, const char *app, double done)
{
	copus_job_attrs job = { app, "u", 2, 64 };
	double v = -1;

	ASSERT_STATUS(copus_predictor_remaining(p, &job, done, 0, &v),
		      COPUS_OK);
	return v;
}

/* Jobs that recur with the same total: one that has outlived its
 * prediction is nearly done (before the forest's sample was used, it was
 * taken to need as much again as it had done). */
static void recurring_job_past_its_prediction_is_nearly_done(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs a = { "a", "u", 2, 64 }, b = { "b", "u", 2, 64 };

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	for (int i = 0; i < 40; i++) {
		ASSERT_STATUS(copus_predictor_add(p, &a, 980 + i), COPUS_OK);
		ASSERT_STATUS(copus_predictor_add(p, &b, 100 + i), COPUS_OK);
	}
	double past = left_of(p, "a", 1010), half = left_of(p, "a", 500);
	printf("left at 1010: %.0f, at 500: %.0f\n", past, half);
	CU_ASSERT(past > 0 && past < 20);
	CU_ASSERT(fabs(half - 500) < 25);
	copus_predictor_destroy(p);
}

/* Heavy-tailed totals (log-uniform over four decades): the longer a job
 * has run, the more it is expected to need. */
static void heavy_tailed_jobs_need_more_the_longer_they_run(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs h = { "h", "u", 2, 64 };

	copus_job_attrs hs[200];
	double tot[200];

	/* Added at once, so that the forest is trained on all of them. */
	for (int i = 0; i < 200; i++) {
		hs[i] = h;
		tot[i] = 10 * pow(1e4, (i + 0.5) / 200);
	}
	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_predictor_add_many(p, hs, tot, 200), COPUS_OK);
	double l0 = left_of(p, "h", 0), l1 = left_of(p, "h", 100);
	double l2 = left_of(p, "h", 5000);
	printf("left at 0: %.0f, at 100: %.0f, at 5000: %.0f\n", l0, l1, l2);
	/* Medians of a log-uniform total above 0, 100 and 5000: 1000, 3162
	 * and 22361. */
	CU_ASSERT(fabs(l0 - 1000) < 100);
	CU_ASSERT(fabs(l1 - 3062) < 300);
	CU_ASSERT(fabs(l2 - 17361) < 1700);
	/* As much again as done, or the prediction less done, would be
	 * 5000 and about 900 for the last two. */
	copus_predictor_destroy(p);
}

/* Jobs still running beyond most finished ones are not forgotten: they
 * move the estimate of the total of a job like them upwards. */
static void running_jobs_count_as_censored_totals(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs c[41];
	double done[41], left[41], alone;

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	for (int i = 0; i < 41; i++)
		c[i] = (copus_job_attrs){ "c", "u", 2, 64 };
	/* Totals 100.5, 103, ..., 198 (the sample above 150 has 20, the
	 * median 173); then 40 others like it running at 170. */
	for (int i = 0; i < 40; i++)
		done[i] = 100.5 + 2.5 * i;
	ASSERT_STATUS(copus_predictor_add_many(p, c, done, 40), COPUS_OK);
	alone = left_of(p, "c", 150);
	done[0] = 150;
	for (int i = 1; i < 41; i++)
		done[i] = 170;
	ASSERT_STATUS(copus_predictor_remaining_many(p, c, done, 41, left),
		      COPUS_OK);
	printf("left at 150 alone: %.1f, beside 40 at 170: %.1f\n", alone,
	       left[0]);
	CU_ASSERT(fabs(alone - 23) < 3);
	/* The 40 take most of the mass of the 8 ends below 170 to the 12
	 * above it: the median moves to the fifth of those, 180.5. */
	CU_ASSERT(left[0] > 28);
	copus_predictor_destroy(p);
}

/*
 * The forest's answers for a feature row are kept between calls of
 * remaining_many: asked again, the answers are the same; after the forest
 * learned more, they are those of a predictor that kept none (q, fed the
 * same jobs in the same order, asked for the first time).
 */
static void remaining_work_is_the_same_asked_again_or_after_learning(void)
{
	copus_predictor *p = NULL, *q = NULL;
	copus_job_attrs jobs[120], more[100];
	double done[120], a[120], b[120], work[100];
	int differ = 0;

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_predictor_create(NULL, &q), COPUS_OK);
	for (int i = 0; i < 200; i++) {
		double w = draw(&jobs[0]);
		ASSERT_STATUS(copus_predictor_add(p, &jobs[0], w), COPUS_OK);
		ASSERT_STATUS(copus_predictor_add(q, &jobs[0], w), COPUS_OK);
	}
	/* Jobs that share rows, queued (0 done), running, and past any
	 * total (the rule of remaining_many). */
	for (int i = 0; i < 120; i++) {
		double w = draw(&jobs[i]);
		done[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 0.4 * w : 50.0 * w;
	}
	ASSERT_STATUS(copus_predictor_remaining_many(p, jobs, done, 120, a),
		      COPUS_OK);
	ASSERT_STATUS(copus_predictor_remaining_many(p, jobs, done, 120, b),
		      COPUS_OK);
	CU_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	/* A retraining on jobs that split the rows anew: p's kept answers
	 * are of the old forest. */
	for (int i = 0; i < 100; i++) {
		work[i] = draw(&more[i]) * (i % 2 ? 30.0 : 0.1);
		more[i].user = i % 2 ? "new" : more[i].user;
	}
	size_t before = copus_predictor_trainings(p);
	ASSERT_STATUS(copus_predictor_add_many(p, more, work, 100), COPUS_OK);
	ASSERT_STATUS(copus_predictor_add_many(q, more, work, 100), COPUS_OK);
	CU_ASSERT(copus_predictor_trainings(p) > before);
	/* Half of the rows again, in another order. */
	for (int i = 0; i < 60; i++) {
		copus_job_attrs j = jobs[i];
		double d = done[i];
		jobs[i] = jobs[119 - i];
		done[i] = done[119 - i];
		jobs[119 - i] = j;
		done[119 - i] = d;
	}
	ASSERT_STATUS(copus_predictor_remaining_many(p, jobs, done, 60, a),
		      COPUS_OK);
	ASSERT_STATUS(copus_predictor_remaining_many(q, jobs, done, 60, b),
		      COPUS_OK);
	for (int i = 0; i < 60; i++)
		if (a[i] != b[i]) {
			printf("job %d: %.17g kept, %.17g fresh\n", i, a[i],
			       b[i]);
			differ++;
		}
	CU_ASSERT_EQUAL(differ, 0);
	copus_predictor_destroy(p);
	copus_predictor_destroy(q);
}

static void unseen_attributes_still_get_an_answer(void)
{
	copus_predictor *p = NULL;
	copus_job_attrs job;
	copus_job_attrs stranger = { "never-seen", NULL, 3, 0 };
	double v;

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	for (int i = 0; i < 50; i++) {
		double w = draw(&job);
		ASSERT_STATUS(copus_predictor_add(p, &job, w), COPUS_OK);
	}
	ASSERT_STATUS(copus_predictor_total(p, &stranger, &v), COPUS_OK);
	CU_ASSERT(isfinite(v) && v > 0);
	copus_predictor_destroy(p);
}

static void history_keeps_the_most_recent_jobs(void)
{
	copus_predictor_params params = COPUS_PREDICTOR_PARAMS_INITIALIZER;
	copus_predictor *p = NULL;
	copus_job_attrs job = { "a", "u", 1, 32 };
	double v;

	params.history = 16;
	params.min_samples = 1000; /* stay on the median */
	ASSERT_STATUS(copus_predictor_create(&params, &p), COPUS_OK);
	for (int i = 0; i < 16; i++)
		ASSERT_STATUS(copus_predictor_add(p, &job, 10), COPUS_OK);
	for (int i = 0; i < 16; i++)
		ASSERT_STATUS(copus_predictor_add(p, &job, 1000), COPUS_OK);
	CU_ASSERT_EQUAL(copus_predictor_count(p), 16);
	ASSERT_STATUS(copus_predictor_total(p, &job, &v), COPUS_OK);
	ASSERT_CLOSE(v, 1000, 1e-5);
	copus_predictor_destroy(p);
}

/*
 * A saved history given back at once (as sched/copus does after a slurmctld
 * restart) trains the forest once and predicts as well as the same jobs
 * added one by one; a history with one bad job is refused whole.
 */
static void saved_history_is_restored_at_once(void)
{
	copus_predictor *one = NULL, *many = NULL;
	copus_job_attrs jobs[300], probe[50];
	double work[300], a[50], b[50];

	ASSERT_STATUS(copus_predictor_create(NULL, &one), COPUS_OK);
	ASSERT_STATUS(copus_predictor_create(NULL, &many), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(one);
	CU_ASSERT_PTR_NOT_NULL_FATAL(many);
	for (int i = 0; i < 300; i++) {
		work[i] = draw(&jobs[i]);
		ASSERT_STATUS(copus_predictor_add(one, &jobs[i], work[i]),
			      COPUS_OK);
	}
	double w7 = work[7];
	work[7] = -1.0;
	ASSERT_STATUS(copus_predictor_add_many(many, jobs, work, 300),
		      COPUS_EINVAL);
	CU_ASSERT_EQUAL(copus_predictor_count(many), 0);
	work[7] = w7;
	ASSERT_STATUS(copus_predictor_add_many(many, jobs, work, 7), COPUS_OK);
	ASSERT_STATUS(copus_predictor_add_many(many, jobs + 7, work + 7, 293),
		      COPUS_OK);
	CU_ASSERT_EQUAL(copus_predictor_count(many), 300);
	/* Below min_samples (8) no training; then one for the rest. */
	CU_ASSERT_EQUAL(copus_predictor_trainings(many), 1);
	CU_ASSERT(copus_predictor_trainings(one) > 10);
	for (int i = 0; i < 50; i++)
		draw(&probe[i]);
	ASSERT_STATUS(copus_predictor_total_many(one, probe, 50, a), COPUS_OK);
	ASSERT_STATUS(copus_predictor_total_many(many, probe, 50, b), COPUS_OK);
	double ea = 0.0, eb = 0.0;
	for (int i = 0; i < 50; i++) {
		copus_job_attrs *j = &probe[i];
		int ai = 0, ui = 0;
		while (strcmp(APPS[ai], j->application))
			ai++;
		while (strcmp(USERS[ui], j->user))
			ui++;
		double truth = APP_WORK[ai] * USER_FACTOR[ui] *
			       (1.0 + 0.25 * log2(j->gpus));
		ea += fabs(a[i] - truth) / truth;
		eb += fabs(b[i] - truth) / truth;
	}
	printf("  mean error: added one by one %.1f%%, restored at once %.1f%%\n",
	       2.0 * ea, 2.0 * eb);
	CU_ASSERT(eb / 50 < 0.2);
	CU_ASSERT(eb < 1.5 * ea + 0.5);
	copus_predictor_destroy(one);
	copus_predictor_destroy(many);
}

/* History lines: written, read back the same; bad lines name the field. */
static void history_lines_round_trip(void)
{
	copus_history_entry e = { .work = 1234.5, .gpus = 4, .batch = 256 }, r;
	char buf[160];
	const char *why = NULL;

	snprintf(e.user, sizeof(e.user), "1001");
	snprintf(e.app, sizeof(e.app), "bert large\tv2");
	ASSERT_STATUS(copus_history_format(&e, buf, sizeof(buf)), COPUS_OK);
	CU_ASSERT_STRING_EQUAL(buf, "1234.5 4 256 1001 bert large v2\n");
	ASSERT_STATUS(copus_history_parse(buf, &r, &why), COPUS_OK);
	CU_ASSERT_PTR_NULL(why);
	CU_ASSERT_EQUAL(r.work, 1234.5);
	CU_ASSERT_EQUAL(r.gpus, 4);
	CU_ASSERT_EQUAL(r.batch, 256);
	CU_ASSERT_STRING_EQUAL(r.user, "1001");
	CU_ASSERT_STRING_EQUAL(r.app, "bert large v2");
	copus_job_attrs a = copus_history_attrs(&r);
	CU_ASSERT_STRING_EQUAL(a.application, "bert large v2");
	CU_ASSERT_STRING_EQUAL(a.user, "1001");
	CU_ASSERT_EQUAL(a.gpus, 4);
	/* No user: "-", read back as none. */
	e.user[0] = '\0';
	ASSERT_STATUS(copus_history_format(&e, buf, sizeof(buf)), COPUS_OK);
	CU_ASSERT_STRING_EQUAL(buf, "1234.5 4 256 - bert large v2\n");
	ASSERT_STATUS(copus_history_parse(buf, &r, &why), COPUS_OK);
	CU_ASSERT_STRING_EQUAL(r.user, "");
	CU_ASSERT_PTR_NULL(copus_history_attrs(&r).user);
	ASSERT_STATUS(copus_history_format(&e, buf, 10), COPUS_ERANGE);
	e.work = NAN;
	ASSERT_STATUS(copus_history_format(&e, buf, sizeof(buf)), COPUS_EINVAL);

	static const struct {
		const char *line, *why;
	} bad[] = {
		{ "12 1 32 u job", "incomplete line" },
		{ "", "incomplete line" },
		{ "12 one 32 u job\n", "expected WORK GPUS BATCH USER NAME" },
		{ "12 1 32\n", "expected WORK GPUS BATCH USER NAME" },
		{ "-3 1 32 u job\n", "WORK is not a positive number" },
		{ "nan 1 32 u job\n", "WORK is not a positive number" },
		{ "12 0 32 u job\n", "GPUS is below 1" },
		{ "12 1 -1 u job\n", "BATCH is not a number >= 0" },
		{ "12 1 32 u 0123456789012345678901234567890123456789012345678"
		  "901234567890123456789\n", "NAME is too long" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		ASSERT_STATUS(copus_history_parse(bad[i].line, &r, &why),
			      COPUS_EINVAL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(why);
		CU_ASSERT_STRING_EQUAL(why, bad[i].why);
	}
	/* An empty name is a name. */
	ASSERT_STATUS(copus_history_parse("12 1 32 u \n", &r, &why), COPUS_OK);
	CU_ASSERT_STRING_EQUAL(r.app, "");
}

static void bad_input_is_rejected(void)
{
	copus_predictor_params params = COPUS_PREDICTOR_PARAMS_INITIALIZER;
	copus_predictor *p = NULL;
	copus_job_attrs job = { "a", "u", 1, 32 }, bad = job;
	double v;

	ASSERT_STATUS(copus_predictor_create(NULL, NULL), COPUS_EINVAL);
	params.version = 99;
	ASSERT_STATUS(copus_predictor_create(&params, &p), COPUS_EVERSION);
	params.version = COPUS_PREDICTOR_PARAMS_VERSION;
	params.size = 3;
	ASSERT_STATUS(copus_predictor_create(&params, &p), COPUS_EVERSION);
	params.size = sizeof(params);
	params.trees = 0;
	ASSERT_STATUS(copus_predictor_create(&params, &p), COPUS_EINVAL);
	params.trees = 10;
	params.subsample = 0;
	ASSERT_STATUS(copus_predictor_create(&params, &p), COPUS_EINVAL);
	CU_ASSERT_PTR_NULL(p);

	ASSERT_STATUS(copus_predictor_create(NULL, &p), COPUS_OK);
	ASSERT_STATUS(copus_predictor_add(p, &job, 0), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add(p, &job, NAN), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add(p, &job, -5), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add(p, NULL, 5), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add(NULL, &job, 5), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add_many(p, NULL, &v, 1), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add_many(NULL, &job, &v, 1), COPUS_EINVAL);
	bad.gpus = 0;
	ASSERT_STATUS(copus_predictor_add(p, &bad, 5), COPUS_EINVAL);
	bad = job;
	bad.batch = NAN;
	ASSERT_STATUS(copus_predictor_add(p, &bad, 5), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_add(p, &job, 5), COPUS_OK);
	ASSERT_STATUS(copus_predictor_total(p, &bad, &v), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_total(p, &job, NULL), COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_remaining(p, &job, -1, 0, &v),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_remaining(p, &job, NAN, 0, &v),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_remaining(p, &job, 1, -1, &v),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_predictor_remaining_many(p, &job, NULL, 1, &v),
		      COPUS_EINVAL);
	v = -1;
	ASSERT_STATUS(copus_predictor_remaining_many(p, &job, &v, 1, &v),
		      COPUS_EINVAL);
	CU_ASSERT_EQUAL(copus_predictor_count(NULL), 0);
	CU_ASSERT_EQUAL(copus_predictor_trainings(NULL), 0);
	copus_predictor_destroy(p);
	copus_predictor_destroy(NULL);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(forest_learns_recurring_jobs),
		TEST(batch_prediction_equals_single_predictions),
		TEST(few_samples_fall_back_to_the_median),
		TEST(remaining_work_uses_target_then_prediction),
		TEST(error_shrinks_as_jobs_finish),
		TEST(recurring_job_past_its_prediction_is_nearly_done),
		TEST(heavy_tailed_jobs_need_more_the_longer_they_run),
		TEST(running_jobs_count_as_censored_totals),
		TEST(remaining_work_is_the_same_asked_again_or_after_learning),
		TEST(unseen_attributes_still_get_an_answer),
		TEST(history_keeps_the_most_recent_jobs),
		TEST(saved_history_is_restored_at_once),
		TEST(history_lines_round_trip),
		TEST(bad_input_is_rejected),
	};
	return RUN_TESTS("predict", tests);
}
