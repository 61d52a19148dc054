/*
 * Remaining-work prediction: a random forest (XGBoost's gbtree booster with
 * one round of many parallel trees, learning rate 1, features sampled per
 * split, rows optionally subsampled) over the attributes of finished jobs,
 * predicting the logarithm of their total work.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xgboost/c_api.h>

#include <copus/predict.h>

enum { F_APP, F_USER, F_GPUS, F_BATCH, F_COUNT };

struct copus_predictor {
	copus_predictor_params params;
	/* Strings seen in finished jobs; a string's code is its index. */
	char **names;
	size_t nnames, capnames;
	/* Finished jobs, a ring of params.history rows. */
	float *x;
	float *y; /* log(total work) */
	size_t count, next;
	BoosterHandle booster;
	int since_train;
	size_t trainings;
};

static int params_check(const copus_predictor_params *p)
{
	if (p->size != sizeof(*p) || p->version != COPUS_PREDICTOR_PARAMS_VERSION)
		return COPUS_EVERSION;
	if (p->trees < 1 || p->trees > 10000 || p->max_depth < 1 ||
	    p->max_depth > 30 || !(p->subsample > 0.0 && p->subsample <= 1.0) ||
	    p->min_samples < 1 || p->retrain_every < 1 || p->history < 2)
		return COPUS_EINVAL;
	return COPUS_OK;
}

int copus_predictor_create(const copus_predictor_params *params,
			   copus_predictor **out)
{
	static const copus_predictor_params defaults =
		COPUS_PREDICTOR_PARAMS_INITIALIZER;
	copus_predictor *p;
	int rc;

	if (out == NULL)
		return COPUS_EINVAL;
	if (params == NULL)
		params = &defaults;
	if ((rc = params_check(params)) != COPUS_OK)
		return rc;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return COPUS_ENOMEM;
	p->params = *params;
	p->x = calloc(params->history * F_COUNT, sizeof(float));
	p->y = calloc(params->history, sizeof(float));
	if (p->x == NULL || p->y == NULL) {
		copus_predictor_destroy(p);
		return COPUS_ENOMEM;
	}
	*out = p;
	return COPUS_OK;
}

void copus_predictor_destroy(copus_predictor *p)
{
	if (p == NULL)
		return;
	if (p->booster != NULL)
		XGBoosterFree(p->booster);
	for (size_t i = 0; i < p->nnames; i++)
		free(p->names[i]);
	free(p->names);
	free(p->x);
	free(p->y);
	free(p);
}

size_t copus_predictor_count(const copus_predictor *p)
{
	return p == NULL ? 0 : p->count;
}

size_t copus_predictor_trainings(const copus_predictor *p)
{
	return p == NULL ? 0 : p->trainings;
}

/* The code of a string, or -1 when unknown and insert is false. */
static long name_code(copus_predictor *p, const char *s, bool insert)
{
	for (size_t i = 0; i < p->nnames; i++)
		if (strcmp(p->names[i], s) == 0)
			return (long)i;
	if (!insert)
		return -1;
	if (p->nnames == p->capnames) {
		size_t cap = p->capnames ? 2 * p->capnames : 64;
		char **grown = realloc(p->names, cap * sizeof(*grown));
		if (grown == NULL)
			return -2;
		p->names = grown;
		p->capnames = cap;
	}
	p->names[p->nnames] = strdup(s);
	if (p->names[p->nnames] == NULL)
		return -2;
	return (long)p->nnames++;
}

static int attrs_check(const copus_job_attrs *job)
{
	if (job == NULL || job->gpus < 1 || !isfinite(job->batch) ||
	    job->batch < 0.0)
		return COPUS_EINVAL;
	return COPUS_OK;
}

/*
 * The feature row of a job. Strings never seen in a finished job are
 * missing values (NaN), which the trees route by their learned default.
 */
static int features(copus_predictor *p, const copus_job_attrs *job,
		    bool insert, float *row)
{
	const char *s[2] = { job->application, job->user };

	for (int k = 0; k < 2; k++) {
		if (s[k] == NULL) {
			row[k] = NAN;
			continue;
		}
		long code = name_code(p, s[k], insert);
		if (code == -2)
			return COPUS_ENOMEM;
		row[k] = code < 0 ? NAN : (float)code;
	}
	row[F_GPUS] = (float)log2(job->gpus);
	row[F_BATCH] = job->batch > 0.0 ? (float)log2(job->batch) : NAN;
	return COPUS_OK;
}

#define XGB(call)                              \
	do {                                   \
		if ((call) != 0)               \
			goto fail;             \
	} while (0)

static int train(copus_predictor *p)
{
	DMatrixHandle dm = NULL;
	BoosterHandle b = NULL;
	char buf[32];
	double mean = 0.0;

	for (size_t i = 0; i < p->count; i++)
		mean += p->y[i];
	mean /= (double)p->count;

	XGB(XGDMatrixCreateFromMat(p->x, p->count, F_COUNT, NAN, &dm));
	XGB(XGDMatrixSetFloatInfo(dm, "label", p->y, p->count));
	XGB(XGBoosterCreate(&dm, 1, &b));
	XGB(XGBoosterSetParam(b, "verbosity", "0"));
	XGB(XGBoosterSetParam(b, "nthread", "1"));
	XGB(XGBoosterSetParam(b, "booster", "gbtree"));
	XGB(XGBoosterSetParam(b, "objective", "reg:squarederror"));
	XGB(XGBoosterSetParam(b, "eta", "1"));
	XGB(XGBoosterSetParam(b, "lambda", "1e-6"));
	XGB(XGBoosterSetParam(b, "min_child_weight", "1"));
	XGB(XGBoosterSetParam(b, "colsample_bynode", "0.75"));
	snprintf(buf, sizeof(buf), "%.17g", mean);
	XGB(XGBoosterSetParam(b, "base_score", buf));
	snprintf(buf, sizeof(buf), "%d", p->params.trees);
	XGB(XGBoosterSetParam(b, "num_parallel_tree", buf));
	snprintf(buf, sizeof(buf), "%d", p->params.max_depth);
	XGB(XGBoosterSetParam(b, "max_depth", buf));
	snprintf(buf, sizeof(buf), "%g", p->params.subsample);
	XGB(XGBoosterSetParam(b, "subsample", buf));
	snprintf(buf, sizeof(buf), "%u", p->params.seed);
	XGB(XGBoosterSetParam(b, "seed", buf));
	XGB(XGBoosterUpdateOneIter(b, 0, dm));
	XGDMatrixFree(dm);
	if (p->booster != NULL)
		XGBoosterFree(p->booster);
	p->booster = b;
	p->since_train = 0;
	p->trainings++;
	return COPUS_OK;
fail:
	if (b != NULL)
		XGBoosterFree(b);
	if (dm != NULL)
		XGDMatrixFree(dm);
	return COPUS_EFIT;
}

/* Record one finished job (checked by the caller) without training. */
static int record(copus_predictor *p, const copus_job_attrs *job,
		  double total_work)
{
	float row[F_COUNT];
	int rc;

	if ((rc = features(p, job, true, row)) != COPUS_OK)
		return rc;
	memcpy(&p->x[p->next * F_COUNT], row, sizeof(row));
	p->y[p->next] = (float)log(total_work);
	p->next = (p->next + 1) % p->params.history;
	if (p->count < p->params.history)
		p->count++;
	p->since_train++;
	return COPUS_OK;
}

int copus_predictor_add(copus_predictor *p, const copus_job_attrs *job,
			double total_work)
{
	int rc;

	if (p == NULL || !isfinite(total_work) || total_work <= 0.0)
		return COPUS_EINVAL;
	if ((rc = attrs_check(job)) != COPUS_OK)
		return rc;
	if ((rc = record(p, job, total_work)) != COPUS_OK)
		return rc;
	if (p->count >= (size_t)p->params.min_samples &&
	    (p->booster == NULL || p->since_train >= p->params.retrain_every ||
	     4 * (size_t)p->since_train >= p->count))
		return train(p);
	return COPUS_OK;
}

int copus_predictor_add_many(copus_predictor *p, const copus_job_attrs *jobs,
			     const double *total_work, size_t n)
{
	int rc;

	if (p == NULL || (n > 0 && (jobs == NULL || total_work == NULL)))
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(total_work[i]) || total_work[i] <= 0.0)
			return COPUS_EINVAL;
		if ((rc = attrs_check(&jobs[i])) != COPUS_OK)
			return rc;
	}
	for (size_t i = 0; i < n; i++)
		if ((rc = record(p, &jobs[i], total_work[i])) != COPUS_OK)
			return rc;
	if (n > 0 && p->count >= (size_t)p->params.min_samples)
		return train(p);
	return COPUS_OK;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* The median of the recorded totals, used until the forest is trained. */
static int median_total(const copus_predictor *p, double *out)
{
	float *sorted = malloc(p->count * sizeof(float));

	if (sorted == NULL)
		return COPUS_ENOMEM;
	memcpy(sorted, p->y, p->count * sizeof(float));
	qsort(sorted, p->count, sizeof(float), cmp_float);
	*out = exp(sorted[p->count / 2]);
	free(sorted);
	return COPUS_OK;
}

int copus_predictor_total_many(copus_predictor *p, const copus_job_attrs *jobs,
			       size_t n, double *total_work)
{
	DMatrixHandle dm = NULL;
	float *rows = NULL;
	int rc = COPUS_OK;

	if (p == NULL || total_work == NULL || (jobs == NULL && n > 0))
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((rc = attrs_check(&jobs[i])) != COPUS_OK)
			return rc;
	if (n == 0)
		return COPUS_OK;
	if (p->count == 0)
		return COPUS_ENODATA;
	if (p->booster == NULL) {
		double median;
		if ((rc = median_total(p, &median)) != COPUS_OK)
			return rc;
		for (size_t i = 0; i < n; i++)
			total_work[i] = median;
		return COPUS_OK;
	}

	rows = malloc(n * F_COUNT * sizeof(float));
	if (rows == NULL)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if ((rc = features(p, &jobs[i], false, &rows[i * F_COUNT])) !=
		    COPUS_OK)
			goto out;

	bst_ulong len = 0;
	const float *pred = NULL;
	if (XGDMatrixCreateFromMat(rows, n, F_COUNT, NAN, &dm) != 0 ||
	    XGBoosterPredict(p->booster, dm, 0, 0, 0, &len, &pred) != 0 ||
	    len != n) {
		rc = COPUS_EFIT;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(pred[i])) {
			rc = COPUS_EFIT;
			goto out;
		}
		total_work[i] = exp(pred[i]);
	}
out:
	if (dm != NULL)
		XGDMatrixFree(dm);
	free(rows);
	return rc;
}

int copus_predictor_total(copus_predictor *p, const copus_job_attrs *job,
			  double *total_work)
{
	if (job == NULL)
		return COPUS_EINVAL;
	return copus_predictor_total_many(p, job, 1, total_work);
}

int copus_predictor_remaining(copus_predictor *p, const copus_job_attrs *job,
			      double done, double target, double *remaining)
{
	double total;
	int rc;

	if (remaining == NULL || !isfinite(done) || done < 0.0 ||
	    !isfinite(target) || target < 0.0)
		return COPUS_EINVAL;
	if (target > 0.0) {
		*remaining = target > done ? target - done : 0.0;
		return COPUS_OK;
	}
	if ((rc = copus_predictor_total(p, job, &total)) != COPUS_OK)
		return rc;
	*remaining = total > done ? total - done : done;
	return COPUS_OK;
}

int copus_predictor_remaining_many(copus_predictor *p,
				   const copus_job_attrs *jobs,
				   const double *done, size_t n,
				   double *remaining)
{
	int rc;

	if (remaining == NULL || (done == NULL && n > 0))
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(done[i]) || done[i] < 0.0)
			return COPUS_EINVAL;
	/* The totals go into remaining, then become what is left. */
	if ((rc = copus_predictor_total_many(p, jobs, n, remaining)) !=
	    COPUS_OK)
		return rc;
	for (size_t i = 0; i < n; i++)
		remaining[i] = remaining[i] > done[i] ? remaining[i] - done[i]
						      : done[i];
	return COPUS_OK;
}
