/*
 * The simulation loop: jobs progress by the measured tables between rounds
 * (Pollux's simulator rules), and every round a copus policy decides.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/predict.h>

#include "sim.h"

/* Longest simulated time before giving up: 60 days. */
#define SIM_MAX_TIME (60.0 * 86400.0)

int sim_cluster_parse(const char *spec, struct sim_cluster *out, char *err,
		      size_t len)
{
	char *copy = NULL, *save = NULL, *tok;
	int rc = COPUS_EINVAL;

	memset(out, 0, sizeof(*out));
	if (spec == NULL || *spec == '\0') {
		snprintf(err, len, "--cluster: empty specification");
		return COPUS_EINVAL;
	}
	copy = strdup(spec);
	if (copy == NULL)
		return COPUS_ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *shape = tok, *end;
		long nodes, gpus;
		copus_node *nn;
		int t;

		if (out->ntypes >= SIM_MAX_TYPES) {
			snprintf(err, len, "--cluster: more than %d GPU types",
				 SIM_MAX_TYPES);
			goto out;
		}
		t = out->ntypes;
		if (colon) {
			*colon = '\0';
			shape = colon + 1;
			if (*tok == '\0' || strlen(tok) >= 32 ||
			    strspn(tok, "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
				    strlen(tok)) {
				snprintf(err, len,
					 "--cluster: bad GPU type name '%s'",
					 tok);
				goto out;
			}
			snprintf(out->type_names[t], 32, "%s", tok);
		} else if (strchr(spec, ':') || out->ntypes > 0) {
			snprintf(err, len,
				 "--cluster: '%s': give every part a type "
				 "(type:NODESxGPUS) or use one NODESxGPUS", tok);
			goto out;
		}
		for (int u = 0; u < t; u++)
			if (strcmp(out->type_names[u], out->type_names[t]) == 0) {
				snprintf(err, len,
					 "--cluster: GPU type '%s' twice",
					 out->type_names[t]);
				goto out;
			}
		nodes = strtol(shape, &end, 10);
		if (end == shape || (*end != 'x' && *end != 'X')) {
			snprintf(err, len,
				 "--cluster: '%s' is not NODESxGPUS", shape);
			goto out;
		}
		shape = end + 1;
		gpus = strtol(shape, &end, 10);
		if (end == shape || *end != '\0' || nodes < 1 ||
		    nodes > 100000 || gpus < 1 || gpus > 9) {
			snprintf(err, len,
				 "--cluster: '%s': 1..100000 nodes of 1..9 GPUs "
				 "expected", tok);
			goto out;
		}
		nn = realloc(out->nodes, (size_t)(out->nnodes + nodes) *
					 sizeof(*nn));
		if (nn == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		out->nodes = nn;
		for (long k = 0; k < nodes; k++) {
			out->nodes[out->nnodes].gpu_type = t;
			out->nodes[out->nnodes].gpus = (int)gpus;
			out->nodes[out->nnodes].usable = true;
			out->nnodes++;
		}
		out->ntypes++;
	}
	rc = out->ntypes > 0 ? COPUS_OK : COPUS_EINVAL;
	if (rc)
		snprintf(err, len, "--cluster: empty specification");
out:
	free(copy);
	if (rc)
		sim_cluster_free(out);
	return rc;
}

void sim_cluster_free(struct sim_cluster *c)
{
	if (c == NULL)
		return;
	free(c->nodes);
	memset(c, 0, sizeof(*c));
}

/* Whether s holds a control character (a tab, a carriage return, ...). */
static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return true;
	return false;
}

int sim_workload_read(const char *path, struct sim_jobspec **out, size_t *n,
		      char *err, size_t len)
{
	struct csv c;
	int cn, ct, ca, cr, cb, rc;
	struct sim_jobspec *js = NULL;

	*out = NULL;
	*n = 0;
	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((cn = sim_csv_col(&c, "name", err, len)) < 0 ||
	    (ct = sim_csv_col(&c, "time", err, len)) < 0 ||
	    (ca = sim_csv_col(&c, "application", err, len)) < 0 ||
	    (cr = sim_csv_col(&c, "num_replicas", err, len)) < 0 ||
	    (cb = sim_csv_col(&c, "batch_size", err, len)) < 0)
		goto out;
	js = calloc(c.nrows + 1, sizeof(*js));
	if (js == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.nrows; i++) {
		struct sim_jobspec *j = &js[i];
		double r;

		/*
		 * A name travels tab-separated from a simulation process to
		 * copus-sim's (main.c): a tab or another control character
		 * in it would cut the line and mislabel the results.
		 */
		if (strlen(c.rows[i][cn]) == 0 ||
		    strlen(c.rows[i][cn]) >= sizeof(j->name) ||
		    strpbrk(c.rows[i][cn], "\"\\") != NULL ||
		    has_control(c.rows[i][cn])) {
			snprintf(err, len,
				 "%s:%ld: column %d (name): '%s' is empty, too "
				 "long or has quotes or control characters",
				 path, c.lines[i], cn + 1, c.rows[i][cn]);
			goto out;
		}
		snprintf(j->name, sizeof(j->name), "%s", c.rows[i][cn]);
		if (strlen(c.rows[i][ca]) == 0 ||
		    strlen(c.rows[i][ca]) >= sizeof(j->app_name) ||
		    strpbrk(c.rows[i][ca], "/.") != NULL) {
			snprintf(err, len,
				 "%s:%ld: column %d (application): '%s' is "
				 "not a model name", path, c.lines[i], ca + 1,
				 c.rows[i][ca]);
			goto out;
		}
		snprintf(j->app_name, sizeof(j->app_name), "%s",
			 c.rows[i][ca]);
		j->app = -1;
		if (sim_csv_double(&c, i, ct, &j->submit, err, len) ||
		    sim_csv_double(&c, i, cr, &r, err, len) ||
		    sim_csv_double(&c, i, cb, &j->batch, err, len))
			goto out;
		if (j->submit < 0 || j->submit > SIM_MAX_TIME) {
			snprintf(err, len,
				 "%s:%ld: column %d (time): '%s' is out of "
				 "range", path, c.lines[i], ct + 1,
				 c.rows[i][ct]);
			goto out;
		}
		if (r < 1 || r > 4096 || r != floor(r)) {
			snprintf(err, len,
				 "%s:%ld: column %d (num_replicas): '%s' is "
				 "not an integer in 1..4096", path, c.lines[i],
				 cr + 1, c.rows[i][cr]);
			goto out;
		}
		j->replicas = (int)r;
		if (j->batch < 1 || j->batch > 1e8) {
			snprintf(err, len,
				 "%s:%ld: column %d (batch_size): '%s' is out "
				 "of range", path, c.lines[i], cb + 1,
				 c.rows[i][cb]);
			goto out;
		}
	}
	*out = js;
	*n = c.nrows;
	js = NULL;
	rc = COPUS_OK;
out:
	free(js);
	sim_csv_free(&c);
	return rc;
}

void sim_split_batch(const struct app *a, double batch, int replicas,
		     int *atomic, int *accum)
{
	double local = ceil(batch / replicas - 1e-8);
	int s = (int)ceil(local / a->max_local - 1e-8) - 1;
	int count;
	double at;

	if (s < 0)
		s = 0;
	/* One GPU beyond the initial batch accumulates, as in Pollux. */
	if (replicas == 1 && batch > a->init_batch && s < 1)
		s = 1;
	at = ceil(local / (s + 1) - 1e-8);
	count = replicas * (s + 1);
	if (at > floor(a->max_batch / count))
		at = floor(a->max_batch / count);
	if (at < 1)
		at = 1;
	*atomic = (int)at;
	*accum = s;
}

/* Consolidated placement of k GPUs on nodes of g. */
static int consolidated(int k, int g, int *pl)
{
	int n = 0;

	while (k > 0) {
		pl[n] = k < g ? k : g;
		k -= pl[n++];
	}
	return n;
}

/* Samples-per-progress rate of a configuration during an epoch. */
static double true_goodput(const struct app *a, int t, const int *pl, int nn,
			   int atomic, int accum, int epoch, double *total)
{
	double step, sync, sqr, var, scale, gain, batch;
	int replicas = 0;

	for (int k = 0; k < nn; k++)
		replicas += pl[k];
	if (sim_app_throughput(a, t, pl, nn, atomic, &step, &sync) != COPUS_OK)
		return 0.0;
	batch = (double)replicas * atomic * (accum + 1);
	scale = batch / a->init_batch;
	sim_app_grad(a, batch, epoch, &sqr, &var);
	gain = (var + sqr) / (var / scale + sqr);
	if (!isfinite(gain) || gain <= 0)
		gain = 1.0;
	*total = step + (step - sync) * accum;
	return gain / *total;
}

double sim_solo_time(const struct app *a, int t, int g, int replicas,
		     double batch, int from_epoch, double progress)
{
	int pl[4096], nn, atomic, accum;
	double time = 0.0, total;

	if (replicas > 4096)
		replicas = 4096;
	nn = consolidated(replicas, g, pl);
	sim_split_batch(a, batch, replicas, &atomic, &accum);
	for (int e = from_epoch; e < a->max_epochs; e++) {
		double gp = true_goodput(a, t, pl, nn, atomic, accum, e, &total);
		double from = e == from_epoch ? progress : sim_app_progress(a, e);

		if (!(gp > 0))
			return INFINITY;
		time += (sim_app_progress(a, e + 1) - from) / gp;
	}
	return time;
}

/* ---------------------------------------------------------------- jobs */

struct sjob {
	const struct sim_jobspec *spec;
	const struct app *app;
	int *place;         /* GPUs per node */
	copus_slot *slots;  /* place as the policy's sparse allocation */
	int type;
	int gpus, nodes;
	int atomic, accum;
	double progress;
	int epoch;
	double attained;    /* GPU-seconds */
	double rescale;     /* seconds of restart left */
	int restarts;       /* -1 before the first allocation */
	double completion;  /* < 0 while running */
	double target_batch; /* <= 0: the policy chooses */
	/* What the job has measured and learned, per GPU type. */
	copus_observation *obs[SIM_MAX_TYPES];
	size_t nobs[SIM_MAX_TYPES], capobs[SIM_MAX_TYPES];
	int max_prof;
	copus_model model[SIM_MAX_TYPES];
	bool has_model[SIM_MAX_TYPES];
	copus_model boot[SIM_MAX_TYPES]; /* bootstrapped (job_model) */
	bool learn;
	double goodput;
	const copus_model *models[SIM_MAX_TYPES];
	double *solo_rate;  /* fifo's oracle: progress per second by epoch */
	double *solo_tail;  /* seconds from the start of epoch e to the end */
	bool predicted;     /* the predictor has answered for it */
	double pred_left;   /* expected seconds left alone on the request */
};

/*
 * Tabulate the job's epochs alone on its request: fifo's oracle, copus's
 * remaining work, the work the history records.
 */
static int solo_table(struct sjob *j, int g)
{
	const struct app *a = j->app;
	int pl[4096], nn, atomic, accum, E = a->max_epochs;
	int k = j->spec->replicas > 4096 ? 4096 : j->spec->replicas;
	double total;

	j->solo_rate = calloc((size_t)E + 1, sizeof(double));
	j->solo_tail = calloc((size_t)E + 2, sizeof(double));
	if (j->solo_rate == NULL || j->solo_tail == NULL)
		return COPUS_ENOMEM;
	nn = consolidated(k, g, pl);
	sim_split_batch(a, j->target_batch > 0 ? j->target_batch :
			j->spec->batch, k, &atomic, &accum);
	for (int e = 0; e < E; e++)
		j->solo_rate[e] = true_goodput(a, 0, pl, nn, atomic, accum, e,
					       &total);
	for (int e = E - 1; e >= 0; e--)
		j->solo_tail[e] = j->solo_tail[e + 1] +
			(sim_app_progress(a, e + 1) - sim_app_progress(a, e)) /
			j->solo_rate[e];
	return COPUS_OK;
}

static double solo_remaining(const struct sjob *j)
{
	int e = j->epoch;

	if (e >= j->app->max_epochs)
		return 0.0;
	return (sim_app_progress(j->app, e + 1) - j->progress) /
	       j->solo_rate[e] + j->solo_tail[e + 1];
}

static void update_shape(struct sjob *j, int N)
{
	j->gpus = j->nodes = 0;
	for (int k = 0; k < N; k++) {
		j->gpus += j->place[k];
		j->nodes += j->place[k] > 0;
	}
}

/* Pollux's choice of micro-batch and accumulation after each change. */
static void update_local(struct sjob *j)
{
	const struct app *a = j->app;
	double batch = j->target_batch;
	int count;

	if (j->gpus == 0)
		return;
	if (batch <= 0 && !j->has_model[j->type])
		batch = fmax(a->init_batch, (double)a->min_local * j->gpus);
	if (batch <= 0) {
		copus_batch_plan plan;

		if (copus_best_batch(&j->model[j->type], j->nodes, j->gpus,
				     &plan) ==
		    COPUS_OK) {
			j->atomic = plan.local;
			j->accum = plan.accum_steps;
		} else {
			sim_split_batch(a, fmax(a->init_batch,
						(double)a->min_local * j->gpus),
					j->gpus, &j->atomic, &j->accum);
		}
	} else {
		sim_split_batch(a, batch, j->gpus, &j->atomic, &j->accum);
	}
	count = j->gpus * (j->accum + 1);
	if (j->atomic > (int)(a->max_batch / count))
		j->atomic = (int)(a->max_batch / count);
	if (j->atomic < 1)
		j->atomic = 1;
}

/* Learn from a measured step, as the plugin learns from hints. */
static int observe(struct sjob *j, double step, double sync, double sqr,
		   double var)
{
	const struct app *a = j->app;
	copus_observation *o;
	int t = j->type;
	copus_model *m = &j->model[t];

	/* The gradient noise does not depend on the GPU type. */
	for (int u = 0; u < SIM_MAX_TYPES; u++) {
		j->model[u].grad.sqr = sqr;
		j->model[u].grad.var = var;
	}
	for (size_t i = 0; i < j->nobs[t]; i++)
		if (j->obs[t][i].nodes == j->nodes &&
		    j->obs[t][i].replicas == j->gpus &&
		    j->obs[t][i].local == j->atomic)
			return COPUS_OK;
	if (j->nobs[t] == j->capobs[t]) {
		size_t nc = j->capobs[t] ? 2 * j->capobs[t] : 8;
		copus_observation *no = realloc(j->obs[t], nc * sizeof(*no));

		if (no == NULL)
			return COPUS_ENOMEM;
		j->obs[t] = no;
		j->capobs[t] = nc;
	}
	o = &j->obs[t][j->nobs[t]++];
	o->nodes = j->nodes;
	o->replicas = j->gpus;
	o->local = j->atomic;
	o->accum_steps = 0;
	o->step_time = step;
	o->compute_time = step - sync > 1e-9 ? step - sync : 1e-9;
	if (j->gpus > j->max_prof)
		j->max_prof = j->gpus;
	if (copus_fit(j->obs[t], j->nobs[t], &m->perf, NULL) == COPUS_OK) {
		m->limits.init_batch = a->init_batch;
		m->limits.max_batch = a->max_batch;
		m->limits.min_local = a->min_local;
		m->limits.max_local = a->max_local;
		m->limits.accumulation = true;
		j->has_model[t] = copus_model_check(m) == COPUS_OK;
	}
	return COPUS_OK;
}

/* Advance one job by 'sec' seconds from time 'now' (Pollux's Job.step). */
static void job_step(struct sjob *j, double now, double sec, int N)
{
	const struct app *a = j->app;
	double delay, t = now;
	int guard = 0;
	int pl[64], nn = 0;

	if (j->gpus == 0 || j->completion >= 0)
		return;
	for (int k = 0; k < N && nn < 64; k++)
		if (j->place[k] > 0)
			pl[nn++] = j->place[k];
	delay = fmin(j->rescale, sec);
	t += delay;
	j->attained += delay * j->gpus;
	j->rescale -= delay;
	sec -= delay;
	while (sec > 0 && j->completion < 0 && guard++ < 100000) {
		double step, sync, sqr, var, batch, scale, gain, total, gp;
		double next, delta;

		batch = (double)j->gpus * j->atomic * (j->accum + 1);
		scale = batch / a->init_batch;
		if (sim_app_throughput(a, j->type, pl, nn, j->atomic, &step,
				       &sync) != COPUS_OK)
			return;
		sim_app_grad(a, batch, j->epoch, &sqr, &var);
		gain = (var + sqr) / (var / scale + sqr);
		if (!isfinite(gain) || gain <= 0)
			gain = 1.0;
		if (j->learn)
			observe(j, step, sync, sqr, var);
		total = step + (step - sync) * j->accum;
		gp = gain / (total * a->slowdown);
		j->goodput = gp;
		next = sim_app_progress(a, j->epoch + 1);
		if (j->progress + gp * sec < next) {
			j->progress += gp * sec;
			t += sec;
			j->attained += sec * j->gpus;
			sec = 0;
		} else {
			j->epoch++;
			delta = round((next - j->progress) / gp);
			if (delta > sec)
				delta = sec;
			if (j->epoch >= a->max_epochs)
				j->completion = t + delta;
			j->progress = next;
			t += delta;
			j->attained += delta * j->gpus;
			sec -= delta;
		}
		/* The batch is re-optimised between epochs. */
		update_local(j);
	}
}

static double pctl(double *v, size_t n, double q)
{
	size_t k;

	if (n == 0)
		return 0;
	for (size_t i = 1; i < n; i++) {
		double x = v[i];
		size_t m = i;

		while (m > 0 && v[m - 1] > x) {
			v[m] = v[m - 1];
			m--;
		}
		v[m] = x;
	}
	k = (size_t)ceil(q * (double)n);
	if (k < 1)
		k = 1;
	return v[k - 1];
}

void sim_result_free(struct sim_result *r)
{
	if (r == NULL)
		return;
	free(r->names);
	free(r->jct);
	free(r->ftf);
	free(r->finished);
	memset(r, 0, sizeof(*r));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
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
	       isfinite(solo_remaining(j));
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
		done[m++] = fmax(j->solo_tail[0] - solo_remaining(j), 0.0);
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
	double truth = solo_remaining(j);

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
	double truth = solo_remaining(j);

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

/* Job j's model on GPU type t from the source the policy wants. */
/*
 * One step of the job's first micro-batch on one GPU of type t, seconds
 * (0 when the profile has none): what the job measures on each type when
 * it arrives, as Sia's profiling does.
 */
static double probe_step(const struct sjob *j, int t)
{
	const struct app *a = j->app;
	int one = 1;
	double local = fmin(a->init_batch, (double)a->max_local), st, sy;

	if (local < a->min_local)
		local = a->min_local;
	if (sim_app_throughput(a, t, &one, 1, local, &st, &sy) != 0 ||
	    !(st > 0.0) || !isfinite(st))
		return 0.0;
	return st;
}

static const copus_model *job_model(struct sjob *j, copus_model_source src,
				    int t)
{
	if (src == COPUS_MODELS_LEARNED && !j->has_model[t]) {
		/* Not run on t yet: its model on the type it ran on longest
		 * (the most observations), scaled by the probes. */
		int u = -1;
		double pt, pu;

		for (int v = 0; v < SIM_MAX_TYPES; v++)
			if (j->has_model[v] && (u < 0 || j->nobs[v] > j->nobs[u]))
				u = v;
		if (u < 0 || !((pt = probe_step(j, t)) > 0.0) ||
		    !((pu = probe_step(j, u)) > 0.0) ||
		    copus_model_bootstrap(&j->model[u], pu, pt, &j->boot[t]) !=
			    COPUS_OK)
			return NULL;
		return &j->boot[t];
	}
	if (src == COPUS_MODELS_LEARNED)
		return j->has_model[t] ? &j->model[t] : NULL;
	if (src == COPUS_MODELS_ORACLE)
		return j->app->has_oracle[t] ? &j->app->oracle[t] : NULL;
	return NULL;
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

		nn = consolidated(req > 4096 ? 4096 : req, g0, pl);
		sim_split_batch(a, j->target_batch, req, &at, &ac);
		if (sim_app_throughput(a, 0, pl, nn, at, &st, &sy) != 0)
			return -1;
		it = sim_app_iteration(a, j->target_batch, a->max_epochs - 1) -
		     (j->epoch > 0 ? sim_app_iteration(a, j->target_batch,
						       j->epoch - 1) : 0);
		return fmax(it, 1.0) * (st + (st - sy) * ac);
	}
	left = solo_remaining(j) + j->rescale;
	return isfinite(left) ? left : -1;
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
	res->finished = calloc(n + 1, sizeof(*res->finished));
	if (!jobs || !cj || !dec || !idx || !res->names || !res->jct ||
	    !res->ftf || !res->finished) {
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
		j->learn = tr->models == COPUS_MODELS_LEARNED;
		/* A policy that picks the batch does, unless the model keeps
		 * its own; the others train with the workload's batch. */
		if (tr->picks_batch)
			j->target_batch = j->app->fixed_batch;
		else
			j->target_batch = specs[i].batch;
		snprintf(res->names[i], sizeof(res->names[i]), "%s",
			 specs[i].name);
		if ((rc = solo_table(j, g0)) != COPUS_OK)
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

			job_step(j, now, o->interval, N);
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
				update_shape(j, N);
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
			if (tr->models != COPUS_MODELS_NONE) {
				for (int t = 0; t < c->ntypes; t++)
					j->models[t] = job_model(j, tr->models,
								 t);
				q->models = j->models;
			}
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
			update_shape(j, N);
			if (j->gpus > 0) {
				j->type = d->gpu_type;
				update_local(j);
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
			res->restarts += j->restarts > 0 ? j->restarts : 0;
		}
		res->njobs = n;
		res->avg_jct = n ? sum / (double)n : 0;
		res->p99_jct = pctl(tmp, n, 0.99);
		free(tmp);
	}
	if (ndt > 0) {
		qsort(dts, ndt, sizeof(*dts), cmp_double);
		res->decide_ms_median = dts[(ndt - 1) / 2];
		res->decide_ms_p95 = dts[(size_t)(0.95 * (double)(ndt - 1))];
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
		qsort(errs, nerr, sizeof(*errs), cmp_double);
		res->pred_err_median = errs[nerr / 2];
		res->pred_err_p90 = errs[(size_t)(0.9 * (double)(nerr - 1))];
	}
	free(errs);
	free(attrs);
	free(pdone);
	free(pleft);
	if (rc != COPUS_OK)
		sim_result_free(res);
	return rc;
}
