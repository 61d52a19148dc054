/*
 * A round of copus-sim (sim/engine-round.h): the jobs progress by the
 * measured tables until it (Pollux's simulator rules), the policy is told
 * each job as sched/copus would tell it (its models, its remaining time,
 * whether it is held where it runs) and decides, and the decisions are
 * applied.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine-apply.h"
#include "engine-round.h"

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
						       j->epoch - 1)
				   : 0);
		return fmax(it, 1.0) * (st + (st - sy) * ac);
	}
	left = copus__sim_solo_remaining(j) + j->rescale;
	return isfinite(left) ? left : -1;
}

/*
 * Every waiting or running job's models as a policy with models from src
 * is told them this round (j->models): with probes, or as the plugin knows
 * them, where the plugin's estimate on the types a job has not run on
 * (copus_models_estimate_mem, kept in j->boot) completes what its hints
 * say, with the types' ratios remembered across rounds in mem, as the
 * plugin remembers them.
 */
static int round_models(struct sjob *jobs, size_t n, double now,
			struct copus_type_ratios *mem,
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
		speeds[t] = copus_planner_gpus_speed(c->gpus, c->ngpus,
						     c->type_names[t]);
	na = 0;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = &jobs[i];

		if (j->spec->submit > now || j->completion >= 0)
			continue;
		apps[na] = j->app->name;
		memcpy(&known[na++ * (size_t)T], j->models,
		       (size_t)T * sizeof(*known));
	}
	rc = copus_models_estimate_mem(known, na, T, apps, speeds, mem, est,
				       made);
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

/*
 * The round that ends: every job progresses sec seconds from now (an
 * interval, or a part of one with --event-rounds), and a job that finishes
 * gets its JCT, leaves its GPUs and teaches the predictor its total work,
 * in seconds alone on its request (a unit that does not depend on how it
 * was scheduled).
 */
static int round_progress(struct sim_state *s, double sec)
{
	struct sim_result *res = s->res;
	clock_t pc;
	int rc;

	for (size_t i = 0; i < s->n; i++) {
		struct sjob *j = &s->jobs[i];
		bool was = j->completion >= 0;
		copus_job_attrs at;

		copus__sim_job_step(j, s->now, sec, s->N);
		if (was || j->completion < 0)
			continue;
		res->jct[i] = j->completion - j->spec->submit;
		s->done++;
		if (j->solo_tail[0] > 0.0)
			copus__sim_record_finished(res, j);
		if (s->pred != NULL && j->solo_tail[0] > 0.0) {
			at = copus__sim_job_attrs(j);
			pc = clock();
			rc = copus_predictor_add(s->pred, &at, j->solo_tail[0]);
			res->pred_seconds +=
				(double)(clock() - pc) / CLOCKS_PER_SEC;
			if (rc != COPUS_OK)
				return rc;
		}
		memset(j->place, 0, (size_t)s->N * sizeof(int));
		copus__sim_update_shape(j, s->N);
	}
	return COPUS_OK;
}

/*
 * Job i as the policy sees it in q: its request and history, its models,
 * what the policy is told of its work left (a prediction's error
 * sampled) and its allocation.
 */
static int round_job_input(struct sim_state *s, size_t i, copus_job *q)
{
	const struct copus_policy_traits *tr = s->tr;
	struct sjob *j = &s->jobs[i];
	int rc;

	memset(q, 0, sizeof(*q));
	q->id = i;
	q->req_gpus = j->spec->replicas;
	q->req_batch = j->target_batch > 0 ? j->target_batch : j->spec->batch;
	q->fixed_batch = j->target_batch > 0;
	q->submit_time = j->spec->submit;
	q->restarts = j->restarts > 0 ? j->restarts : 0;
	q->attained = j->attained;
	q->remaining = -1;
	q->min_gpus = 1;
	q->max_gpus = q->req_gpus;
	q->max_gpus_had = j->max_prof;
	q->elastic = tr->elastic;
	q->keep = copus__sim_held(s->o->min_run, s->now, j);
	if (tr->elastic)
		q->max_gpus =
			elastic_max_gpus(j, tr->picks_batch, s->total_gpus);
	if (tr->models != COPUS_MODELS_NONE)
		q->models = j->models;
	if (tr->remaining == COPUS_REMAINING_PREDICT) {
		q->remaining = copus__sim_remaining(j, s->o->remaining);
		if (s->pred != NULL && !j->predicted)
			s->res->pred_unknown++;
		if (s->pred != NULL && j->predicted &&
		    (rc = copus__sim_sample_error(j, q->remaining, &s->errs,
						  &s->nerr, &s->caperr)) !=
			    COPUS_OK)
			return rc;
	} else if (tr->remaining == COPUS_REMAINING_ORACLE) {
		q->remaining = oracle_remaining(j, tr->models, s->g0);
	}
	q->alloc = j->slots;
	q->alloc_slots = 0;
	for (int k = 0; j->gpus > 0 && k < s->N; k++)
		if (j->place[k] > 0)
			j->slots[q->alloc_slots++] =
				(copus_slot){ k, j->place[k] };
	q->alloc_type = j->type;
	return COPUS_OK;
}

/*
 * The policy's input: the predictor's answers, the models, and each job
 * the scheduler sees this round (submitted, not finished); their count in
 * *na.
 */
static int round_input(struct sim_state *s, size_t *na)
{
	clock_t pc;
	int rc;

	if (s->pred != NULL) {
		pc = clock();
		rc = copus__sim_predict_left(s->pred, s->jobs, s->n, s->now,
					     s->attrs, s->pdone, s->pleft);
		s->res->pred_seconds += (double)(clock() - pc) / CLOCKS_PER_SEC;
		if (rc != COPUS_OK)
			return rc;
	}
	if (s->tr->models != COPUS_MODELS_NONE &&
	    (rc = round_models(s->jobs, s->n, s->now, &s->ratios, s->c,
			       s->tr->models, s->o->probes)) != COPUS_OK)
		return rc;
	*na = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct sjob *j = &s->jobs[i];

		if (j->spec->submit > s->now || j->completion >= 0)
			continue;
		if ((rc = round_job_input(s, i, &s->cj[*na])) != COPUS_OK)
			return rc;
		s->idx[(*na)++] = i;
	}
	return COPUS_OK;
}

/* The policy decides for the na jobs, its CPU time kept. */
/*
 * --restart-measured: the moves of jobs that train again by now are
 * counted, and the policy is told their mean cost, as sched/copus measures
 * a rescale once the job's first hint of its new run arrives.
 */
static void round_costs(struct sim_state *s)
{
	double sum = 0.0;

	for (size_t i = 0; i < s->n; i++) {
		struct sjob *j = &s->jobs[i];

		if (!j->moved || j->gpus <= 0 || s->now < j->run_start)
			continue;
		s->costs[s->next_cost] = j->move_cost;
		s->next_cost = (s->next_cost + 1) % SIM_COSTS_MAX;
		if (s->ncosts < SIM_COSTS_MAX)
			s->ncosts++;
		j->moved = false;
	}
	for (int k = 0; k < s->ncosts; k++)
		sum += s->costs[k];
	if (s->ncosts > 0) {
		s->res->restart_counted = sum / s->ncosts;
		copus_policy_set_restart_delay(s->pol, s->res->restart_counted);
	}
}

static int round_decide(struct sim_state *s, const copus_cluster *cl, size_t na)
{
	struct timespec c0, c1;
	int rc;

	if (s->o->restart_measured)
		round_costs(s);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	rc = copus_policy_decide(s->pol, cl, s->cj, na, s->now, s->dec);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	if (s->ndt == s->capdt) {
		size_t nc = s->capdt ? 2 * s->capdt : 1024;
		double *g = realloc(s->dts, nc * sizeof(*g));

		if (g == NULL) {
			snprintf(s->err, s->len, "out of memory");
			return COPUS_ENOMEM;
		}
		s->dts = g;
		s->capdt = nc;
	}
	s->dts[s->ndt++] = (double)(c1.tv_sec - c0.tv_sec) * 1e3 +
			   (double)(c1.tv_nsec - c0.tv_nsec) * 1e-6;
	if (rc != COPUS_OK)
		snprintf(s->err, s->len, "%s: policy %s failed at t=%.0f: %s",
			 s->o->workload_name, s->o->policy, s->now,
			 copus_strerror(rc));
	return rc;
}

/* The decisions applied (engine-apply.c) on the nodes of cl. */
static void round_apply(struct sim_state *s, const copus_cluster *cl, size_t na)
{
	const struct sim_apply ap = {
		.nodes = cl->nodes,
		.N = s->N,
		.equal_per_node = s->o->equal_per_node,
		.moves_jobs = s->tr->moves_jobs,
		.now = s->now,
		.min_run = s->o->min_run,
		.restart_delay = s->o->restart_delay,
		.delays = s->o->delays,
		.rng = &s->rng,
		.used = s->used,
		.part = s->part,
	};

	copus__sim_apply(&ap, s->jobs, s->idx, s->dec, na);
}

/*
 * The round's lines of the timeline and the series, and the check that
 * the policy used no more GPUs than the cluster has.
 */
static int round_report(struct sim_state *s, size_t na)
{
	const struct sim_opts *o = s->o;
	int used = 0, queued = 0;

	for (size_t q = 0; q < na; q++) {
		struct sjob *j = &s->jobs[s->idx[q]];

		used += j->gpus;
		queued += j->gpus == 0;
		if (o->timeline)
			fprintf(o->timeline,
				"%s,%.0f,%s,%d,%d,%d,%.6g,%.6g,%d,%s\n",
				o->workload_name, s->now, j->spec->name,
				j->gpus, j->nodes,
				j->gpus * j->atomic * (j->accum + 1),
				j->gpus ? j->goodput : 0.0, j->progress,
				j->epoch,
				j->gpus > 0 && s->c->ntypes > 1
					? s->tnames[j->type]
					: "");
	}
	if (used > s->total_gpus) {
		snprintf(s->err, s->len, "internal error: %d GPUs used of %d",
			 used, s->total_gpus);
		return COPUS_ESTATE;
	}
	if (o->series)
		fprintf(o->series, "%.0f %d %d %zu\n", s->now, used, queued,
			na);
	return COPUS_OK;
}

/*
 * --event-rounds: the pending jobs started on the free GPUs, as
 * sched/copus's event round does: the policy decides for them alone, on
 * the GPUs the running jobs leave free.
 */
static int round_event(struct sim_state *s)
{
	copus_cluster cl = s->cl;
	size_t na = 0, m = 0;
	int free_gpus = 0, rc;

	for (int k = 0; k < s->N; k++)
		s->free_nodes[k] = s->cl.nodes[k];
	for (size_t i = 0; i < s->n; i++)
		for (int k = 0; s->jobs[i].gpus > 0 && k < s->N; k++)
			s->free_nodes[k].gpus -= s->jobs[i].place[k];
	for (int k = 0; k < s->N; k++)
		free_gpus += s->free_nodes[k].gpus;
	if (free_gpus <= 0)
		return COPUS_OK;
	if ((rc = round_input(s, &na)) != COPUS_OK)
		return rc;
	for (size_t q = 0; q < na; q++) {
		if (s->jobs[s->idx[q]].gpus > 0)
			continue;
		s->cj[m] = s->cj[q];
		s->idx[m++] = s->idx[q];
	}
	if (m == 0)
		return COPUS_OK;
	cl.nodes = s->free_nodes;
	if ((rc = round_decide(s, &cl, m)) != COPUS_OK)
		return rc;
	round_apply(s, &cl, m);
	return COPUS_OK;
}

/*
 * The jobs progress an interval; with --event-rounds, in parts of that
 * many seconds, each followed by an event round when a job arrived or
 * finished in it.
 */
static int round_interval(struct sim_state *s)
{
	double t0 = s->now, step = s->o->event_rounds;
	double left = s->o->interval;
	int rc;

	while (step > 0 && left > step * (1 + 1e-9)) {
		size_t done = s->done;
		bool arrived = false;

		if ((rc = round_progress(s, step)) != COPUS_OK)
			return rc;
		s->now += step;
		left -= step;
		for (size_t i = 0; i < s->n && !arrived; i++)
			arrived = s->jobs[i].spec->submit > s->seen_until &&
				  s->jobs[i].spec->submit <= s->now;
		if (!arrived && s->done == done)
			continue;
		s->seen_until = s->now;
		if ((rc = round_event(s)) != COPUS_OK)
			return rc;
	}
	if ((rc = round_progress(s, left)) != COPUS_OK)
		return rc;
	s->now = t0 + s->o->interval;
	s->seen_until = s->now;
	return COPUS_OK;
}

/* A simulation still running after SIM_MAX_TIME is given up. */
int copus__sim_round(struct sim_state *s)
{
	size_t na = 0;
	int rc;

	if (s->now > SIM_MAX_TIME) {
		snprintf(s->err, s->len,
			 "%s: jobs still running after %.0f "
			 "simulated days",
			 s->o->workload_name, SIM_MAX_TIME / 86400);
		return COPUS_ERANGE;
	}
	if ((rc = round_interval(s)) != COPUS_OK)
		return rc;
	s->res->rounds++;
	if ((rc = round_input(s, &na)) != COPUS_OK)
		return rc;
	if (na > 0 && (rc = round_decide(s, &s->cl, na)) != COPUS_OK)
		return rc;
	round_apply(s, &s->cl, na);
	return round_report(s, na);
}
