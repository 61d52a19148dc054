/*
 * What copus-sim's engine tells a policy of the work its jobs have left
 * (engine-predict.c), private to the engine: engine.c calls it, and it
 * calls engine-job.c, nothing of engine.c.
 */
#ifndef COPUS_SIM_ENGINE_PREDICT_H
#define COPUS_SIM_ENGINE_PREDICT_H

#include <stddef.h>

#include <copus/predict.h>

#include "engine-job.h"

/* The job's attributes, as the predictor knows a job. */
copus_job_attrs copus__sim_job_attrs(const struct sjob *j);

/* A finished job, as the predictor learns it (its name is its app's). */
void copus__sim_record_finished(struct sim_result *res, const struct sjob *j);

/* The history, given to the predictor in one training. */
int copus__sim_learn_history(copus_predictor *p, const copus_history_entry *h,
			     size_t n);

/*
 * The remaining time of every job in the system at now, all at once, once
 * the predictor has learned from a finished job; attrs, done and left hold
 * room for n values each.
 */
int copus__sim_predict_left(copus_predictor *p, struct sjob *jobs, size_t n,
			    double now, copus_job_attrs *attrs, double *done,
			    double *left);

/*
 * The remaining time on the request that the copus policy is told: the
 * truth, nothing (-1), or what the predictor expects.
 */
double copus__sim_remaining(const struct sjob *j, enum sim_remaining how);

/* Record how far a prediction of remaining time is from the truth. */
int copus__sim_sample_error(const struct sjob *j, double predicted,
			    double **errs, size_t *n, size_t *cap);

#endif /* COPUS_SIM_ENGINE_PREDICT_H */
