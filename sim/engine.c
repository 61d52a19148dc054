/*
 * The simulation loop: jobs progress by the measured tables between rounds
 * (Pollux's simulator rules), and every round a copus policy decides. A
 * round is in engine-round.c, a job's own progress in engine-job.c
 * (sim/engine-job.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/predict.h>

#include "engine-round.h"

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
 * The plugin's predictor for a policy that takes a prediction of the
 * remaining time, unless o->remaining says the truth or nothing; it knows
 * the history before the first round.
 */
static int sim_predictor(struct sim_state *s)
{
	int rc;

	if (s->tr->remaining != COPUS_REMAINING_PREDICT ||
	    s->o->remaining != SIM_REMAINING_PREDICT)
		return COPUS_OK;
	rc = copus_predictor_create(NULL, &s->pred);
	if (rc != COPUS_OK) {
		snprintf(s->err, s->len, "predictor: %s", copus_strerror(rc));
		return rc;
	}
	rc = copus__sim_learn_history(s->pred, s->o->history, s->o->nhistory);
	if (rc != COPUS_OK)
		snprintf(s->err, s->len, "predictor: the history: %s",
			 copus_strerror(rc));
	return rc;
}

/*
 * Everything but the policy: the predictor, the cluster as the policy
 * sees it, the buffers and the results' arrays, and each job waiting for
 * its submission, with the batch it trains at and its epochs alone on
 * its request tabulated.
 */
static int sim_setup(struct sim_state *s, const struct app *apps,
		     const struct sim_jobspec *specs)
{
	const struct sim_cluster *c = s->c;
	struct sim_result *res = s->res;
	size_t n = s->n;
	int rc;

	if ((rc = sim_predictor(s)) != COPUS_OK)
		return rc;
	for (int t = 0; t < c->ntypes; t++) {
		s->tnames[t] = c->type_names[t];
		s->tspeeds[t] = copus_planner_gpus_speed(c->gpus, c->ngpus,
							 c->type_names[t]);
	}
	s->cl.num_nodes = s->N;
	s->cl.nodes = c->nodes;
	s->cl.num_types = c->ntypes;
	s->cl.type_names = s->tnames;
	s->cl.type_speeds = s->tspeeds;
	for (int k = 0; k < s->N; k++) {
		s->total_gpus += c->nodes[k].gpus;
		if (c->nodes[k].gpu_type == 0 && c->nodes[k].gpus > s->g0)
			s->g0 = c->nodes[k].gpus;
	}
	s->jobs = calloc(n + 1, sizeof(*s->jobs));
	s->attrs = calloc(n + 1, sizeof(*s->attrs));
	s->pdone = calloc(n + 1, sizeof(*s->pdone));
	s->pleft = calloc(n + 1, sizeof(*s->pleft));
	if (s->attrs == NULL || s->pdone == NULL || s->pleft == NULL)
		return COPUS_ENOMEM;
	s->cj = calloc(n + 1, sizeof(*s->cj));
	s->dec = calloc(n + 1, sizeof(*s->dec));
	s->used = calloc((size_t)s->N + 1, sizeof(*s->used));
	s->free_nodes = calloc((size_t)s->N + 1, sizeof(*s->free_nodes));
	s->part = calloc(n + 1, sizeof(*s->part));
	s->idx = calloc(n + 1, sizeof(*s->idx));
	res->names = calloc(n + 1, sizeof(*res->names));
	res->jct = calloc(n + 1, sizeof(double));
	res->ftf = calloc(n + 1, sizeof(double));
	res->restarts_of = calloc(n + 1, sizeof(int));
	res->finished = calloc(n + 1, sizeof(*res->finished));
	if (!s->jobs || !s->cj || !s->dec || !s->used || !s->free_nodes ||
	    !s->part || !s->idx || !res->names || !res->jct || !res->ftf ||
	    !res->restarts_of || !res->finished)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &s->jobs[i];

		j->spec = &specs[i];
		j->app = &apps[specs[i].app];
		j->place = calloc((size_t)s->N, sizeof(int));
		j->slots = calloc((size_t)s->N, sizeof(copus_slot));
		if (j->place == NULL || j->slots == NULL)
			return COPUS_ENOMEM;
		j->restarts = -1;
		j->completion = -1;
		j->hint_type = -1;
		j->learn = s->tr->models == COPUS_MODELS_LEARNED;
		j->fit_prior = s->tr->fit_prior;
		/* A policy that picks the batch does, unless the model keeps
		 * its own; the others train with the workload's batch. */
		if (s->tr->picks_batch)
			j->target_batch = j->app->fixed_batch;
		else
			j->target_batch = specs[i].batch;
		snprintf(res->names[i], sizeof(res->names[i]), "%s",
			 specs[i].name);
		if ((rc = copus__sim_solo_table(j, s->g0)) != COPUS_OK)
			return rc;
		res->jct[i] = -1;
	}
	return COPUS_OK;
}

/*
 * The figures once every job is done: per job its finish-time fairness
 * (its JCT over its time alone on its request) and restarts; the mean and
 * p99 JCT, the makespan, the GPU-hours and the decision times.
 */
static int sim_figures(struct sim_state *s)
{
	struct sim_result *res = s->res;
	size_t n = s->n;
	double sum = 0, *tmp = calloc(n + 1, sizeof(double));

	if (tmp == NULL)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &s->jobs[i];
		double solo =
			sim_solo_time(j->app, 0, s->g0, j->spec->replicas,
				      j->target_batch > 0 ? j->target_batch
							  : j->spec->batch,
				      0, 0) +
			s->o->restart_delay;

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
	if (s->ndt > 0) {
		res->decide_ms_median = sim_quantile(s->dts, s->ndt, 0.5);
		res->decide_ms_p95 = sim_quantile(s->dts, s->ndt, 0.95);
		res->decide_ms_max = s->dts[s->ndt - 1];
	}
	return COPUS_OK;
}

/*
 * The end, whatever rc: the wall time and the predictor's figures go to
 * the result, which is released on an error, and the state is released.
 */
static void sim_finish(struct sim_state *s, int rc)
{
	struct sim_result *res = s->res;

	free(s->dts);
	res->wall = (double)clock() / CLOCKS_PER_SEC - s->t0;
	if (s->jobs)
		for (size_t i = 0; i < s->n; i++) {
			free(s->jobs[i].place);
			free(s->jobs[i].slots);
			for (int t = 0; t < SIM_MAX_TYPES; t++)
				free(s->jobs[i].obs[t]);
			free(s->jobs[i].solo_rate);
			free(s->jobs[i].solo_tail);
		}
	free(s->jobs);
	free(s->cj);
	free(s->dec);
	free(s->used);
	free(s->free_nodes);
	free(s->part);
	free(s->idx);
	copus_policy_destroy(s->pol);
	res->pred_trainings = (long)copus_predictor_trainings(s->pred);
	copus_predictor_destroy(s->pred);
	res->pred_samples = (long)s->nerr;
	if (s->nerr > 0) {
		res->pred_err_median = sim_quantile(s->errs, s->nerr, 0.5);
		res->pred_err_p90 = sim_quantile(s->errs, s->nerr, 0.9);
	}
	free(s->errs);
	free(s->attrs);
	free(s->pdone);
	free(s->pleft);
	if (rc != COPUS_OK)
		sim_result_free(res);
}

/*
 * The simulation (sim.h): the policy, the setup, rounds until every job
 * is done, then the figures; on an error, res is released and err says
 * why.
 */
int sim_run(const struct sim_cluster *c, const struct app *apps,
	    const struct sim_jobspec *specs, size_t n, const struct sim_opts *o,
	    struct sim_result *res, char *err, size_t len)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct sim_state s = { .c = c,
			       .o = o,
			       .res = res,
			       .err = err,
			       .len = len,
			       .n = n,
			       .N = c->nnodes,
			       .rng = o->seed };
	int rc;

	s.t0 = (double)clock() / CLOCKS_PER_SEC;
	/* Each round first moves now on by an interval. */
	if (o->round_phase > 0)
		s.now = o->round_phase - o->interval;
	s.seen_until = -INFINITY;
	memset(res, 0, sizeof(*res));
	res->restart_counted = o->restart_delay;
	prm.interval = o->interval;
	prm.restart_delay = o->restart_delay;
	prm.equal_per_node = o->equal_per_node;
	rc = copus_policy_create(o->policy, &prm, &s.pol);
	if (rc != COPUS_OK) {
		unknown_policy(err, len, o->policy);
		return rc;
	}
	s.tr = copus_policy_traits(s.pol);
	res->pred_err_median = res->pred_err_p90 = NAN;
	if ((rc = sim_setup(&s, apps, specs)) != COPUS_OK)
		goto out;
	while (s.done < n)
		if ((rc = copus__sim_round(&s)) != COPUS_OK)
			goto out;
	rc = sim_figures(&s);
out:
	sim_finish(&s, rc);
	return rc;
}
