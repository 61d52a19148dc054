/*
 * The simulation loop: jobs progress by the measured tables between rounds
 * (Pollux's simulator rules), and every round a copus policy decides. A
 * job's own progress is in engine-job.c (sim/engine-parts.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/predict.h>

#include "engine-parts.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* v in ascending order. */
void sim_sort_doubles(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
}

double sim_quantile(double *v, size_t n, double q)
{
	size_t k;

	if (n == 0)
		return NAN;
	sim_sort_doubles(v, n);
	k = (size_t)ceil(q * (double)n);
	return v[k > 0 ? k - 1 : 0];
}

void sim_result_free(struct sim_result *r)
{
	if (r == NULL)
		return;
	free(r->names);
	free(r->jct);
	free(r->ftf);
	free(r->restarts_of);
	free(r->finished);
	memset(r, 0, sizeof(*r));
}


/* What the predictor knows of a job: its application, request, batch. */
static copus_job_attrs job_attrs(const struct sjob *j)
{
	return (copus_job_attrs){ .application = j->app->name, .user = NULL,
				  .gpus = j->spec->replicas,
				  .batch = j->spec->batch };
}

/* A finished job, as the predictor learns it (its name is its app's). */
static void record_finished(struct sim_result *res, const struct sjob *j)
{
	copus_history_entry *e = &res->finished[res->nfinished++];

	memset(e, 0, sizeof(*e));
	e->work = j->solo_tail[0];
	e->gpus = j->spec->replicas;
	e->batch = j->spec->batch;
	snprintf(e->app, sizeof(e->app), "%s", j->app->name);
}

/* The history, given to the predictor in one training. */
static int learn_history(copus_predictor *p, const copus_history_entry *h,
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
static int predict_left(copus_predictor *p, struct sjob *jobs, size_t n,
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
		attrs[m] = job_attrs(j);
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
static double copus_remaining(const struct sjob *j, enum sim_remaining how)
{
	double truth = copus__sim_solo_remaining(j);

	if (how == SIM_REMAINING_ORACLE)
		return isfinite(truth) ? truth : -1.0;
	if (how == SIM_REMAINING_NONE || !j->predicted || !isfinite(truth))
		return -1.0;
	return j->pred_left;
}

/* Record how far a prediction of remaining time is from the truth. */
static int sample_error(const struct sjob *j, double predicted, double **errs,
			size_t *n, size_t *cap)
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

/* "unknown policy 'name' (fifo, ...)", listing the policies the core has. */
static void unknown_policy(char *err, size_t len, const char *name)
{
	size_t at = (size_t)snprintf(err, len, "unknown policy '%s' (", name);
	const char *p;

	for (size_t i = 0; (p = copus_policy_name_at(i)) != NULL && at < len;
	     i++)
		at += (size_t)snprintf(err + at, len - at, "%s%s",
				       i > 0 ? ", " : "", p);
	if (at < len)
		snprintf(err + at, len - at, ")");
}

/*
 * The most GPUs an elastic policy may give job j: as many as keep the
 * model's smallest micro-batch on each GPU at the largest batch the job
 * may train with (the model's largest, and no more GPUs than the cluster
 * has, when the policy picks the batch; its own batch otherwise), within
 * the model's own limit.
 */
static int elastic_max_gpus(const struct sjob *j, bool picks_batch,
			    int total_gpus)
{
	const struct app *a = j->app;
	int k;

	if (picks_batch) {
		k = (int)(a->max_batch / a->min_local);
		if (k > total_gpus)
			k = total_gpus;
	} else {
		k = (int)(j->target_batch / a->min_local);
	}
	if (a->max_gpus > 0 && k > a->max_gpus)
		k = a->max_gpus;
	return k < 1 ? 1 : k;
}

/*
 * The truth about job j's remaining time, in the form the policy uses it
 * (-1 when unknown). A policy with oracle models divides it by its model's
 * step time to count iterations, so it is told the true remaining
 * iterations at the job's batch times the true step time on the request
 * (g0 GPUs a node); any other policy the true time the job would still
 * take alone on its request, its pending restart included, as a user's
 * accurate estimate.
 */
static double oracle_remaining(const struct sjob *j, copus_model_source src,
			       int g0)
{
	const struct app *a = j->app;
	int req = j->spec->replicas;
	double left;

	if (src == COPUS_MODELS_ORACLE) {
		int pl[4096], nn, at, ac;
		double st, sy, it;

		nn = copus__sim_consolidated(req > 4096 ? 4096 : req, g0, pl);
		sim_split_batch(a, j->target_batch, req, &at, &ac);
		if (sim_app_throughput(a, 0, pl, nn, at, &st, &sy) != 0)
			return -1;
		it = sim_app_iteration(a, j->target_batch, a->max_epochs - 1) -
		     (j->epoch > 0 ? sim_app_iteration(a, j->target_batch,
						       j->epoch - 1) : 0);
		return fmax(it, 1.0) * (st + (st - sy) * ac);
	}
	left = copus__sim_solo_remaining(j) + j->rescale;
	return isfinite(left) ? left : -1;
}

/*
 * Every waiting or running job's models as a policy with models from src
 * is told them this round (j->models): with probes, or as the plugin knows
 * them, where the plugin's estimate on the types a job has not run on
 * (copus_models_estimate, kept in j->boot) completes what its hints say.
 */
static int round_models(struct sjob *jobs, size_t n, double now,
			const struct sim_cluster *c, copus_model_source src,
			bool probes)
{
	int T = c->ntypes, rc = COPUS_ENOMEM;
	bool estimate = src == COPUS_MODELS_LEARNED && !probes && T > 1;
	size_t na = 0;
	const copus_model **known = NULL;
	const char **apps = NULL;
	copus_model *est = NULL;
	bool *made = NULL;
	double speeds[SIM_MAX_TYPES];

	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &jobs[i];

		if (j->spec->submit > now || j->completion >= 0)
			continue;
		for (int t = 0; t < T; t++)
			j->models[t] = copus__sim_job_model(j, src, t, probes,
							    c->type_names);
		na++;
	}
	if (!estimate || na == 0)
		return COPUS_OK;
	known = malloc(na * (size_t)T * sizeof(*known));
	apps = malloc(na * sizeof(*apps));
	est = malloc(na * (size_t)T * sizeof(*est));
	made = malloc(na * (size_t)T * sizeof(*made));
	if (!known || !apps || !est || !made)
		goto out;
	for (int t = 0; t < T; t++)
		speeds[t] = copus_gpu_type_speed(c->type_names[t]);
	na = 0;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &jobs[i];

		if (j->spec->submit > now || j->completion >= 0)
			continue;
		apps[na] = j->app->name;
		memcpy(&known[na++ * (size_t)T], j->models,
		       (size_t)T * sizeof(*known));
	}
	rc = copus_models_estimate(known, na, T, apps, speeds, est, made);
	na = 0;
	for (size_t i = 0; rc == COPUS_OK && i < n; i++) {
		struct sjob *j = &jobs[i];

		if (j->spec->submit > now || j->completion >= 0)
			continue;
		for (int t = 0; t < T; t++) {
			if (!made[na * (size_t)T + t])
				continue;
			j->boot[t] = est[na * (size_t)T + t];
			j->models[t] = &j->boot[t];
		}
		na++;
	}
out:
	free(made);
	free(est);
	free(apps);
	free(known);
	return rc;
}

int sim_run(const struct sim_cluster *c, const struct app *apps,
	    const struct sim_jobspec *specs, size_t n,
	    const struct sim_opts *o, struct sim_result *res, char *err,
	    size_t len)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	copus_policy *pol = NULL;
	struct sjob *jobs = NULL;
	copus_job *cj = NULL;
	copus_decision *dec = NULL;
	size_t *idx = NULL;
	copus_predictor *pred = NULL;
	copus_job_attrs *attrs = NULL;
	double *pdone = NULL, *pleft = NULL, *errs = NULL;
	size_t nerr = 0, caperr = 0;
	clock_t pc;
	const char *tnames[SIM_MAX_TYPES];
	copus_cluster cl;
	int N = c->nnodes, total_gpus = 0, g0 = 0, rc;
	const struct copus_policy_traits *tr;
	double now = 0.0, t0 = (double)clock() / CLOCKS_PER_SEC;
	double *dts = NULL; /* the decisions' CPU milliseconds */
	size_t ndt = 0, capdt = 0;
	size_t done = 0;

	memset(res, 0, sizeof(*res));
	prm.interval = o->interval;
	prm.restart_delay = o->restart_delay;
	rc = copus_policy_create(o->policy, &prm, &pol);
	if (rc != COPUS_OK) {
		unknown_policy(err, len, o->policy);
		return rc;
	}
	tr = copus_policy_traits(pol);
	res->pred_err_median = res->pred_err_p90 = NAN;
	/* A policy that takes a prediction of the remaining time gets the
	 * plugin's predictor, unless o->remaining says the truth or nothing. */
	if (tr->remaining == COPUS_REMAINING_PREDICT &&
	    o->remaining == SIM_REMAINING_PREDICT) {
		rc = copus_predictor_create(NULL, &pred);
		if (rc != COPUS_OK) {
			snprintf(err, len, "predictor: %s", copus_strerror(rc));
			goto out;
		}
		rc = learn_history(pred, o->history, o->nhistory);
		if (rc != COPUS_OK) {
			snprintf(err, len, "predictor: the history: %s",
				 copus_strerror(rc));
			goto out;
		}
	}
	for (int t = 0; t < c->ntypes; t++)
		tnames[t] = c->type_names[t];
	cl.num_nodes = N;
	cl.nodes = c->nodes;
	cl.num_types = c->ntypes;
	cl.type_names = tnames;
	for (int k = 0; k < N; k++) {
		total_gpus += c->nodes[k].gpus;
		if (c->nodes[k].gpu_type == 0 && c->nodes[k].gpus > g0)
			g0 = c->nodes[k].gpus;
	}
	jobs = calloc(n + 1, sizeof(*jobs));
	attrs = calloc(n + 1, sizeof(*attrs));
	pdone = calloc(n + 1, sizeof(*pdone));
	pleft = calloc(n + 1, sizeof(*pleft));
	if (attrs == NULL || pdone == NULL || pleft == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	cj = calloc(n + 1, sizeof(*cj));
	dec = calloc(n + 1, sizeof(*dec));
	idx = calloc(n + 1, sizeof(*idx));
	res->names = calloc(n + 1, sizeof(*res->names));
	res->jct = calloc(n + 1, sizeof(double));
	res->ftf = calloc(n + 1, sizeof(double));
	res->restarts_of = calloc(n + 1, sizeof(int));
	res->finished = calloc(n + 1, sizeof(*res->finished));
	if (!jobs || !cj || !dec || !idx || !res->names || !res->jct ||
	    !res->ftf || !res->restarts_of || !res->finished) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &jobs[i];

		j->spec = &specs[i];
		j->app = &apps[specs[i].app];
		j->place = calloc((size_t)N, sizeof(int));
		j->slots = calloc((size_t)N, sizeof(copus_slot));
		if (j->place == NULL || j->slots == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		j->restarts = -1;
		j->completion = -1;
		j->hint_type = -1;
		j->learn = tr->models == COPUS_MODELS_LEARNED;
		/* A policy that picks the batch does, unless the model keeps
		 * its own; the others train with the workload's batch. */
		if (tr->picks_batch)
			j->target_batch = j->app->fixed_batch;
		else
			j->target_batch = specs[i].batch;
		snprintf(res->names[i], sizeof(res->names[i]), "%s",
			 specs[i].name);
		if ((rc = copus__sim_solo_table(j, g0)) != COPUS_OK)
			goto out;
		res->jct[i] = -1;
	}
	while (done < n) {
		size_t na = 0;
		int used = 0, queued = 0;

		if (now > SIM_MAX_TIME) {
			snprintf(err, len, "%s: jobs still running after %.0f "
				 "simulated days", o->workload_name,
				 SIM_MAX_TIME / 86400);
			rc = COPUS_ERANGE;
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			struct sjob *j = &jobs[i];
			bool was = j->completion >= 0;

			copus__sim_job_step(j, now, o->interval, N);
			if (!was && j->completion >= 0) {
				res->jct[i] = j->completion - j->spec->submit;
				done++;
				/* The predictor learns the job's total work, in
				 * seconds alone on its request (a unit that does
				 * not depend on how it was scheduled). */
				if (j->solo_tail[0] > 0.0)
					record_finished(res, j);
				if (pred != NULL && j->solo_tail[0] > 0.0) {
					copus_job_attrs at = job_attrs(j);
					pc = clock();
					rc = copus_predictor_add(pred, &at,
								 j->solo_tail[0]);
					res->pred_seconds += (double)(clock() - pc) /
							     CLOCKS_PER_SEC;
					if (rc != COPUS_OK)
						goto out;
				}
				memset(j->place, 0, (size_t)N * sizeof(int));
				copus__sim_update_shape(j, N);
			}
		}
		now += o->interval;
		res->rounds++;
		/* The jobs the scheduler sees this round. */
		if (pred != NULL) {
			pc = clock();
			rc = predict_left(pred, jobs, n, now, attrs, pdone,
					  pleft);
			res->pred_seconds += (double)(clock() - pc) /
					     CLOCKS_PER_SEC;
			if (rc != COPUS_OK)
				goto out;
		}
		if (tr->models != COPUS_MODELS_NONE &&
		    (rc = round_models(jobs, n, now, c, tr->models,
				       o->probes)) != COPUS_OK)
			goto out;
		for (size_t i = 0; i < n; i++) {
			struct sjob *j = &jobs[i];
			copus_job *q = &cj[na];

			if (j->spec->submit > now || j->completion >= 0)
				continue;
			memset(q, 0, sizeof(*q));
			q->id = i;
			q->req_gpus = j->spec->replicas;
			q->req_batch = j->target_batch > 0 ? j->target_batch :
				j->spec->batch;
			q->fixed_batch = j->target_batch > 0;
			q->submit_time = j->spec->submit;
			q->restarts = j->restarts > 0 ? j->restarts : 0;
			q->attained = j->attained;
			q->remaining = -1;
			q->min_gpus = 1;
			q->max_gpus = q->req_gpus;
			q->max_gpus_had = j->max_prof;
			q->elastic = tr->elastic;
			if (tr->elastic)
				q->max_gpus = elastic_max_gpus(j, tr->picks_batch,
							       total_gpus);
			if (tr->models != COPUS_MODELS_NONE)
				q->models = j->models;
			if (tr->remaining == COPUS_REMAINING_PREDICT) {
				q->remaining = copus_remaining(j, o->remaining);
				if (pred != NULL && !j->predicted)
					res->pred_unknown++;
				if (pred != NULL && j->predicted &&
				    (rc = sample_error(j, q->remaining, &errs,
						       &nerr, &caperr)) != COPUS_OK)
					goto out;
			} else if (tr->remaining == COPUS_REMAINING_ORACLE) {
				q->remaining = oracle_remaining(j, tr->models,
								g0);
			}
			q->alloc = j->slots;
			q->alloc_slots = 0;
			for (int k = 0; j->gpus > 0 && k < N; k++)
				if (j->place[k] > 0)
					j->slots[q->alloc_slots++] =
						(copus_slot){ k, j->place[k] };
			q->alloc_type = j->type;
			idx[na++] = i;
		}
		if (na > 0) {
			struct timespec c0, c1;

			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
			rc = copus_policy_decide(pol, &cl, cj, na, now, dec);
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
			if (ndt == capdt) {
				size_t nc = capdt ? 2 * capdt : 1024;
				double *g = realloc(dts, nc * sizeof(*g));

				if (g == NULL) {
					rc = COPUS_ENOMEM;
					snprintf(err, len, "out of memory");
					goto out;
				}
				dts = g;
				capdt = nc;
			}
			dts[ndt++] = (double)(c1.tv_sec - c0.tv_sec) * 1e3 +
				     (double)(c1.tv_nsec - c0.tv_nsec) * 1e-6;
			if (rc != COPUS_OK) {
				snprintf(err, len, "%s: policy %s failed at "
					 "t=%.0f: %s", o->workload_name,
					 o->policy, now, copus_strerror(rc));
				goto out;
			}
		}
		for (size_t q = 0; q < na; q++) {
			struct sjob *j = &jobs[idx[q]];
			const copus_decision *d = &dec[q];

			if (!d->changed)
				continue;
			memset(j->place, 0, (size_t)N * sizeof(int));
			for (int s = 0; s < d->num_slots; s++)
				j->place[d->slots[s].node] = d->slots[s].gpus;
			copus__sim_update_shape(j, N);
			if (j->gpus > 0) {
				j->type = d->gpu_type;
				copus__sim_update_local(j);
				j->rescale = j->app->restart_delay >= 0.0 ?
						     j->app->restart_delay :
						     o->restart_delay;
				j->restarts++;
			} else {
				j->atomic = 0;
				j->accum = 0;
			}
		}
		for (size_t q = 0; q < na; q++) {
			struct sjob *j = &jobs[idx[q]];

			used += j->gpus;
			queued += j->gpus == 0;
			if (o->timeline)
				fprintf(o->timeline,
					"%s,%.0f,%s,%d,%d,%d,%.6g,%.6g,%d,%s\n",
					o->workload_name, now, j->spec->name,
					j->gpus, j->nodes,
					j->gpus * j->atomic * (j->accum + 1),
					j->gpus ? j->goodput : 0.0,
					j->progress, j->epoch,
					j->gpus > 0 && c->ntypes > 1 ?
						tnames[j->type] : "");
		}
		if (used > total_gpus) {
			snprintf(err, len, "internal error: %d GPUs used of "
				 "%d", used, total_gpus);
			rc = COPUS_ESTATE;
			goto out;
		}
		if (o->series)
			fprintf(o->series, "%.0f %d %d %zu\n", now, used,
				queued, na);
	}
	/* Summary figures. */
	{
		double sum = 0, *tmp = calloc(n + 1, sizeof(double));

		if (tmp == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			struct sjob *j = &jobs[i];
			double solo = sim_solo_time(j->app, 0, g0,
						    j->spec->replicas,
						    j->target_batch > 0 ?
						    j->target_batch :
						    j->spec->batch, 0, 0) +
				      o->restart_delay;

			sum += res->jct[i];
			tmp[i] = res->jct[i];
			res->ftf[i] = res->jct[i] / solo;
			if (res->ftf[i] > res->max_ftf)
				res->max_ftf = res->ftf[i];
			if (j->completion > res->makespan)
				res->makespan = j->completion;
			res->gpu_hours += j->attained / 3600.0;
			res->restarts_of[i] = j->restarts > 0 ? j->restarts : 0;
			res->restarts += res->restarts_of[i];
		}
		res->njobs = n;
		res->avg_jct = n ? sum / (double)n : 0;
		res->p99_jct = sim_quantile(tmp, n, 0.99);
		free(tmp);
	}
	if (ndt > 0) {
		res->decide_ms_median = sim_quantile(dts, ndt, 0.5);
		res->decide_ms_p95 = sim_quantile(dts, ndt, 0.95);
		res->decide_ms_max = dts[ndt - 1];
	}
	rc = COPUS_OK;
out:
	free(dts);
	res->wall = (double)clock() / CLOCKS_PER_SEC - t0;
	if (jobs)
		for (size_t i = 0; i < n; i++) {
			free(jobs[i].place);
			free(jobs[i].slots);
			for (int t = 0; t < SIM_MAX_TYPES; t++)
				free(jobs[i].obs[t]);
			free(jobs[i].solo_rate);
			free(jobs[i].solo_tail);
		}
	free(jobs);
	free(cj);
	free(dec);
	free(idx);
	copus_policy_destroy(pol);
	res->pred_trainings = (long)copus_predictor_trainings(pred);
	copus_predictor_destroy(pred);
	res->pred_samples = (long)nerr;
	if (nerr > 0) {
		res->pred_err_median = sim_quantile(errs, nerr, 0.5);
		res->pred_err_p90 = sim_quantile(errs, nerr, 0.9);
	}
	free(errs);
	free(attrs);
	free(pdone);
	free(pleft);
	if (rc != COPUS_OK)
		sim_result_free(res);
	return rc;
}
