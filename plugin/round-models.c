/*
 * A round's models and remaining times (round-models.h): each job's models
 * on the GPU types it has not run on, estimated from what the cluster has,
 * and the predictor's remaining time of each job whose hint gives none. No
 * Slurm header, no Slurm call, no lock.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "copus/model.h"
#include "copus/planner.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "round-models.h"
#include "round.h"
#include "sched_copus.h"

/*
 * Each GPU type's speed from its constants, into r->speeds: the site's
 * copus_planner_gpus file, else the built-in table, else 0.
 */
void copus__round_speeds(const struct copus__sched *s, struct copus__round *r)
{
	for (int t = 0; t < r->ntypes && t < COPUS_MAX_GPU_TYPES; t++)
		r->speeds[t] = copus_planner_gpus_speed(s->planner.gpus,
							s->planner.ntypes,
							r->types[t]);
}

/*
 * Completes each input job's models with estimates on the GPU types its
 * hint does not name (copus_models_estimate): from its models on the
 * others, the round's jobs that have measured both types (of its
 * application first), then the GPU constants of the types' names. Only
 * the models the round trusts are read (a job whose claims the round
 * distrusts gives none and gets none), and the estimates are made again
 * every round, so a job's own measurement replaces its estimate as soon
 * as a hint carries it. The types' ratios that jobs showed stay in s for
 * the later rounds (a job that measured two types may have ended). Without
 * the memory for them, the jobs keep what their hints say. The types'
 * speeds are copus__round_speeds'.
 */
void copus__round_estimate(struct copus__sched *s, struct copus__round *r)
{
	size_t n = (size_t)r->njobs, T = (size_t)r->ntypes;
	const copus_model **known;
	const char **apps;
	size_t i, t;

	if (n == 0 || T < 2)
		return;
	known = calloc(n * T, sizeof(*known));
	apps = calloc(n, sizeof(*apps));
	r->est_models = calloc(n * T, sizeof(*r->est_models));
	r->estimated = calloc(n * T, sizeof(*r->estimated));
	if (!known || !apps || !r->est_models || !r->estimated)
		goto out;
	/* The memory holds the types it was learned on, in their order. */
	for (t = 0; (int)T == s->ratio_ntypes && t < T; t++)
		if (strcmp(s->ratio_types[t], r->types[t]) != 0)
			break;
	if ((int)T != s->ratio_ntypes || t < T) {
		memset(&s->ratios, 0, sizeof(s->ratios));
		memcpy(s->ratio_types, r->types, T * sizeof(r->types[0]));
		s->ratio_ntypes = (int)T;
	}
	for (i = 0; i < n; i++) {
		apps[i] = r->rj[r->rj_of[i]].app;
		if (r->jobs[i].models)
			memcpy(&known[i * T], r->jobs[i].models,
			       T * sizeof(*known));
	}
	if (copus_models_estimate_mem(known, n, (int)T, apps, r->speeds,
				      &s->ratios, r->est_models,
				      r->estimated) != COPUS_OK)
		goto out;
	for (i = 0; i < n; i++)
		for (t = 0; r->jobs[i].models && t < T; t++)
			if (r->estimated[i * T + t])
				r->model_ptrs[i * T + t] =
					&r->est_models[i * T + t];
out:
	free(apps);
	free(known);
}

/*
 * Predicts the remaining time of the input jobs whose hints give none: the
 * predicted total work minus the GPU-seconds received, in seconds on the
 * job's request. Nothing before the predictor has seen a completed job (the
 * jobs stay "unknown"). r->predict_rc tells why the predictor gave nothing.
 */
void copus__round_predict(struct copus__sched *s, struct copus__round *r)
{
	copus_job_attrs *attrs;
	double *done, *left;
	int *which, i, n = 0;

	if (!s->predictor || !copus_predictor_count(s->predictor) ||
	    !r->njobs)
		return;
	attrs = calloc(r->njobs, sizeof(*attrs));
	done = calloc(r->njobs, sizeof(*done));
	left = calloc(r->njobs, sizeof(*left));
	which = calloc(r->njobs, sizeof(*which));
	if (!attrs || !done || !left || !which) {
		r->predict_rc = COPUS_ENOMEM;
		goto out;
	}
	for (i = 0; i < r->njobs; i++) {
		copus_job *c = &r->jobs[i];
		const struct copus__round_job *j = &r->rj[r->rj_of[i]];

		if (c->remaining >= 0.0)
			continue;
		attrs[n].application = j->app;
		attrs[n].user = j->user;
		attrs[n].gpus = c->req_gpus;
		attrs[n].batch = c->req_batch;
		done[n] = c->attained;
		which[n++] = i;
	}
	if (n)
		r->predict_rc = copus_predictor_remaining_many(s->predictor,
							       attrs, done, n,
							       left);
	if (n && r->predict_rc == COPUS_OK)
		for (i = 0; i < n; i++)
			if (isfinite(left[i]) && left[i] >= 0.0)
				r->jobs[which[i]].remaining =
					left[i] / r->jobs[which[i]].req_gpus;
out:
	free(attrs);
	free(done);
	free(left);
	free(which);
}
