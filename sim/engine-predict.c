/*
 * What copus-sim's engine tells a policy of the work its jobs have left
 * (engine-predict.h): the truth, nothing, or the plugin's predictor,
 * trained on the finished jobs as they finish, with each prediction's error
 * against the truth.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-job.h"
#include "engine-predict.h"

copus_job_attrs copus__sim_job_attrs(const struct sjob *j)
{
	return (copus_job_attrs){ .application = j->app->name,
				  .user = NULL,
				  .gpus = j->spec->replicas,
				  .batch = j->spec->batch };
}

/* A finished job, as the predictor learns it (its name is its app's). */
void copus__sim_record_finished(struct sim_result *res, const struct sjob *j)
{
	copus_history_entry *e = &res->finished[res->nfinished++];

	memset(e, 0, sizeof(*e));
	e->work = j->solo_tail[0];
	e->gpus = j->spec->replicas;
	e->batch = j->spec->batch;
	snprintf(e->app, sizeof(e->app), "%s", j->app->name);
}

/* The history, given to the predictor in one training. */
int copus__sim_learn_history(copus_predictor *p, const copus_history_entry *h,
			     size_t n)
{
	copus_job_attrs *a;
	double *w;
	int rc;

	if (n == 0)
		return COPUS_OK;
	a = calloc(n, sizeof(*a));
	w = calloc(n, sizeof(*w));
	rc = a != NULL && w != NULL ? COPUS_OK : COPUS_ENOMEM;
	for (size_t i = 0; rc == COPUS_OK && i < n; i++) {
		a[i] = copus_history_attrs(&h[i]);
		w[i] = h[i].work;
	}
	if (rc == COPUS_OK)
		rc = copus_predictor_add_many(p, a, w, n);
	free(a);
	free(w);
	return rc;
}

/* Whether job j is in the system at now with a remaining time to predict. */
static bool in_system(const struct sjob *j, double now)
{
	return j->spec->submit <= now && j->completion < 0 &&
	       isfinite(copus__sim_solo_remaining(j));
}

/*
 * The remaining time of every job in the system, all at once, once the
 * predictor has learned from a finished job (copus_predictor_remaining_many:
 * each running job also tells the predictor that its total is more than it
 * has done). attrs, done and left hold n values each.
 */
int copus__sim_predict_left(copus_predictor *p, struct sjob *jobs, size_t n,
			    double now, copus_job_attrs *attrs, double *done,
			    double *left)
{
	size_t m = 0;
	int rc;

	if (copus_predictor_count(p) == 0)
		return COPUS_OK;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &jobs[i];
		if (!in_system(j, now))
			continue;
		attrs[m] = copus__sim_job_attrs(j);
		done[m++] = fmax(j->solo_tail[0] - copus__sim_solo_remaining(j),
				 0.0);
	}
	if (m == 0)
		return COPUS_OK;
	if ((rc = copus_predictor_remaining_many(p, attrs, done, m, left)) !=
	    COPUS_OK)
		return rc;
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (in_system(&jobs[i], now)) {
			jobs[i].pred_left = left[m++];
			jobs[i].predicted = true;
		}
	return COPUS_OK;
}

/*
 * The remaining time on the request that the copus policy is told: the
 * truth, nothing (-1), or what the predictor expects (predict_left).
 */
double copus__sim_remaining(const struct sjob *j, enum sim_remaining how)
{
	double truth = copus__sim_solo_remaining(j);

	if (how == SIM_REMAINING_ORACLE)
		return isfinite(truth) ? truth : -1.0;
	if (how == SIM_REMAINING_NONE || !j->predicted || !isfinite(truth))
		return -1.0;
	return j->pred_left;
}

/* Record how far a prediction of remaining time is from the truth. */
int copus__sim_sample_error(const struct sjob *j, double predicted,
			    double **errs, size_t *n, size_t *cap)
{
	double truth = copus__sim_solo_remaining(j);

	if (!(truth > 0.0) || !isfinite(truth) || predicted < 0.0)
		return COPUS_OK;
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		double *e = realloc(*errs, nc * sizeof(*e));
		if (e == NULL)
			return COPUS_ENOMEM;
		*errs = e;
		*cap = nc;
	}
	(*errs)[(*n)++] = fabs(predicted - truth) / truth;
	return COPUS_OK;
}
