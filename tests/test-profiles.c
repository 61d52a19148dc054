/*
 * The throughput model on Pollux's measured profiles: fitted on three
 * quarters of the measured placements, it predicts the step time of the
 * placements it never saw, and fitted on up to 4 nodes it predicts 6 to 16
 * nodes. Needs the reference data (COPUS_DATA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/model.h>

#include "harness.h"
#include "profiles.h"
#include "sim.h"

static const char *data_dir;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* A placement is held back when its position among the distinct
 * placements, in file order, is a multiple of 4. */
static int held_back(const struct placement_row *rows, long i)
{
	int distinct = 0;
	for (long j = 0; j < i; j++) {
		int seen = 0;
		for (long k = 0; k < j && !seen; k++)
			seen = strcmp(rows[k].placement, rows[j].placement) == 0;
		if (!seen && strcmp(rows[j].placement, rows[i].placement) == 0)
			return distinct % 4 == 0;
		distinct += !seen;
	}
	return distinct % 4 == 0;
}

static double median_error(const char *model)
{
	struct placement_row *rows = NULL;
	long n = read_placements(data_dir, model, &rows);
	CU_ASSERT_FATAL(n > 0);

	copus_observation *train = calloc(n, sizeof(*train));
	double *err = calloc(n, sizeof(*err));
	char *hold = calloc(n, 1);
	long ntrain = 0, ntest = 0;
	for (long i = 0; i < n; i++) {
		hold[i] = (char)held_back(rows, i);
		if (!hold[i])
			train[ntrain++] = rows[i].obs;
	}
	copus_perf_params p;
	copus_fit_report rep;
	ASSERT_STATUS(copus_fit(train, ntrain, &p, &rep), COPUS_OK);
	for (long i = 0; i < n; i++) {
		if (!hold[i])
			continue;
		copus_step_times t;
		const copus_observation *o = &rows[i].obs;
		copus_step_time(&p, o->nodes, o->replicas, o->local, 0, &t);
		err[ntest++] = fabs(t.iter - o->step_time) / o->step_time;
	}
	qsort(err, ntest, sizeof(*err), cmp_double);
	double median = ntest ? err[ntest / 2] : NAN;
	printf("%-12s train %4ld rows, held back %4ld rows: median |error| "
	       "%5.1f%%, 90th pct %5.1f%% (fit rmsle %.3f)\n",
	       model, ntrain, ntest, 100 * median,
	       ntest ? 100 * err[ntest * 9 / 10] : NAN, rep.rmsle_step);
	free(rows);
	free(train);
	free(err);
	free(hold);
	return median;
}

/*
 * Extrapolation: fitted on every placement (up to 4 nodes), predict the
 * scalability table (6 to 16 nodes). This is harder than interpolation, so
 * the bound is looser.
 */
static double median_extrapolation_error(const char *model)
{
	struct placement_row *rows = NULL;
	long n = read_placements(data_dir, model, &rows);
	CU_ASSERT_FATAL(n > 0);

	copus_observation *train = calloc(n, sizeof(*train));
	for (long i = 0; i < n; i++)
		train[i] = rows[i].obs;
	copus_perf_params p;
	ASSERT_STATUS(copus_fit(train, n, &p, NULL), COPUS_OK);

	char path[4200], msg[512];
	struct csv tab;
	snprintf(path, sizeof(path), "%s/%s/scalability.csv", data_dir, model);
	if (sim_csv_read(path, &tab, msg, sizeof(msg)) != COPUS_OK) {
		fprintf(stderr, "%s\n", msg);
		CU_FAIL_FATAL("unreadable scalability table");
	}
	static const char *const names[] = { "num_nodes", "num_replicas",
					     "local_bsz", "step_time" };
	int col[4];
	for (int k = 0; k < 4; k++) {
		col[k] = sim_csv_col(&tab, names[k], msg, sizeof(msg));
		CU_ASSERT_FATAL(col[k] >= 0);
	}
	double *err = calloc(tab.nrows + 1, sizeof(*err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(err);
	long m = 0;
	for (size_t i = 0; i < tab.nrows; i++) {
		double v[4];
		for (int k = 0; k < 4; k++) {
			if (sim_csv_double(&tab, i, col[k], &v[k], msg,
					   sizeof(msg)) != COPUS_OK) {
				fprintf(stderr, "%s\n", msg);
				CU_FAIL("malformed scalability row");
				v[3] = -1;
			}
		}
		copus_step_times t;
		if (v[3] <= 0 || copus_step_time(&p, (int)v[0], (int)v[1], v[2],
						 0, &t) != COPUS_OK)
			continue;
		err[m++] = fabs(t.iter - v[3]) / v[3];
	}
	sim_csv_free(&tab);
	qsort(err, m, sizeof(*err), cmp_double);
	double median = m ? err[m / 2] : NAN;
	printf("%-12s 6-16 nodes, %4ld rows: median |error| %5.1f%%, "
	       "90th pct %5.1f%%\n", model, m, 100 * median,
	       m ? 100 * err[m * 9 / 10] : NAN);
	free(err);
	free(train);
	free(rows);
	return median;
}

#define PROFILE_TEST(name)                                           \
	static void name##_step_time_is_predicted(void)              \
	{                                                            \
		CU_ASSERT(median_error(#name) < 0.15);               \
	}                                                            \
	static void name##_step_time_extrapolates_to_16_nodes(void)  \
	{                                                            \
		CU_ASSERT(median_extrapolation_error(#name) < 0.20); \
	}

PROFILE_TEST(bert)
PROFILE_TEST(cifar10)
PROFILE_TEST(deepspeech2)
PROFILE_TEST(imagenet)
PROFILE_TEST(ncf)
PROFILE_TEST(yolov3)

int main(void)
{
	static const struct test_case tests[] = {
		TEST(bert_step_time_is_predicted),
		TEST(cifar10_step_time_is_predicted),
		TEST(deepspeech2_step_time_is_predicted),
		TEST(imagenet_step_time_is_predicted),
		TEST(ncf_step_time_is_predicted),
		TEST(yolov3_step_time_is_predicted),
		TEST(bert_step_time_extrapolates_to_16_nodes),
		TEST(cifar10_step_time_extrapolates_to_16_nodes),
		TEST(deepspeech2_step_time_extrapolates_to_16_nodes),
		TEST(imagenet_step_time_extrapolates_to_16_nodes),
		TEST(ncf_step_time_extrapolates_to_16_nodes),
		TEST(yolov3_step_time_extrapolates_to_16_nodes),
	};
	const char *root = getenv("COPUS_DATA");
	static char dir[4096];

	if (root == NULL) {
		fprintf(stderr, "COPUS_DATA is not set: no reference data\n");
		return EXIT_SKIP;
	}
	snprintf(dir, sizeof(dir), "%s/pollux/traces", root);
	FILE *probe = fopen(strcat(strcpy((char[4200]){ 0 }, dir), "/bert/placements.csv"), "r");
	if (probe == NULL) {
		fprintf(stderr, "%s: no Pollux profiles there\n", dir);
		return EXIT_SKIP;
	}
	fclose(probe);
	data_dir = dir;
	return RUN_TESTS("profiles", tests);
}
