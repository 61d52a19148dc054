/*
 * A job of the simulation: its time alone on its request, from the
 * measured tables, its progress between rounds with what it learns of its
 * own speed, and what a policy is told of that speed on each GPU type
 * (sim/engine-job.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <copus/hint.h>

#include "engine-job.h"

/* The micro-batch and accumulation of a batch, micro-batches <= max_local. */
static void split_batch(const struct app *a, int max_local, double batch,
			int replicas, int *atomic, int *accum)
{
	double local = ceil(batch / replicas - 1e-8);
	int s = (int)ceil(local / max_local - 1e-8) - 1;
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

void sim_split_batch(const struct app *a, double batch, int replicas,
		     int *atomic, int *accum)
{
	split_batch(a, a->max_local, batch, replicas, atomic, accum);
}

/*
 * The largest micro-batch a GPU of type t holds: the largest its placement
 * table measures, as each type's table is measured within its own GPU's
 * memory (an A100's holds four times a T4's), or the model's own limit
 * where it has one (sim_app_load: a max_local below the largest of the
 * first type's table, yolov3's).
 */
int copus__sim_max_local(const struct app *a, int t)
{
	double mt = 0.0, m0 = 0.0;

	for (size_t i = 0; i < a->tab[t].n; i++)
		mt = fmax(mt, a->tab[t].rows[i].local);
	for (size_t i = 0; i < a->tab[0].n; i++)
		m0 = fmax(m0, a->tab[0].rows[i].local);
	if (!(mt >= 1.0) || a->max_local < m0)
		return a->max_local;
	return (int)mt;
}

/* Consolidated placement of k GPUs on nodes of g. */
int copus__sim_consolidated(int k, int g, int *pl)
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
	nn = copus__sim_consolidated(replicas, g, pl);
	sim_split_batch(a, batch, replicas, &atomic, &accum);
	for (int e = from_epoch; e < a->max_epochs; e++) {
		double gp =
			true_goodput(a, t, pl, nn, atomic, accum, e, &total);
		double from =
			e == from_epoch ? progress : sim_app_progress(a, e);

		if (!(gp > 0))
			return INFINITY;
		time += (sim_app_progress(a, e + 1) - from) / gp;
	}
	return time;
}

/* ---------------------------------------------------------------- jobs */

/*
 * Tabulate the job's epochs alone on its request: fifo's oracle, copus's
 * remaining work, the work the history records.
 */
int copus__sim_solo_table(struct sjob *j, int g)
{
	const struct app *a = j->app;
	int pl[4096], nn, atomic, accum, E = a->max_epochs;
	int k = j->spec->replicas > 4096 ? 4096 : j->spec->replicas;
	double total;

	j->solo_rate = calloc((size_t)E + 1, sizeof(double));
	j->solo_tail = calloc((size_t)E + 2, sizeof(double));
	if (j->solo_rate == NULL || j->solo_tail == NULL)
		return COPUS_ENOMEM;
	nn = copus__sim_consolidated(k, g, pl);
	sim_split_batch(a,
			j->target_batch > 0 ? j->target_batch : j->spec->batch,
			k, &atomic, &accum);
	for (int e = 0; e < E; e++)
		j->solo_rate[e] =
			true_goodput(a, 0, pl, nn, atomic, accum, e, &total);
	for (int e = E - 1; e >= 0; e--)
		j->solo_tail[e] =
			j->solo_tail[e + 1] +
			(sim_app_progress(a, e + 1) - sim_app_progress(a, e)) /
				j->solo_rate[e];
	return COPUS_OK;
}

double copus__sim_solo_remaining(const struct sjob *j)
{
	int e = j->epoch;

	if (e >= j->app->max_epochs)
		return 0.0;
	return (sim_app_progress(j->app, e + 1) - j->progress) /
		       j->solo_rate[e] +
	       j->solo_tail[e + 1];
}

void copus__sim_update_shape(struct sjob *j, int N)
{
	j->gpus = j->nodes = 0;
	for (int k = 0; k < N; k++) {
		j->gpus += j->place[k];
		j->nodes += j->place[k] > 0;
	}
}

/* Pollux's choice of micro-batch and accumulation after each change. */
void copus__sim_update_local(struct sjob *j)
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
				     &plan) == COPUS_OK) {
			j->atomic = plan.local;
			j->accum = plan.accum_steps;
		} else {
			split_batch(a, copus__sim_max_local(a, j->type),
				    fmax(a->init_batch,
					 (double)a->min_local * j->gpus),
				    j->gpus, &j->atomic, &j->accum);
		}
	} else {
		split_batch(a, copus__sim_max_local(a, j->type), batch, j->gpus,
			    &j->atomic, &j->accum);
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

	/* Its hints carry the model of the type it measures now. */
	j->hint_type = t;
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
	if (copus_fit_with(j->obs[t], j->nobs[t], j->fit_prior, &m->perf,
			   NULL) == COPUS_OK) {
		m->limits.init_batch = a->init_batch;
		m->limits.max_batch = a->max_batch;
		m->limits.min_local = a->min_local;
		m->limits.max_local = copus__sim_max_local(a, t);
		m->limits.accumulation = true;
		j->has_model[t] = copus_model_check(m) == COPUS_OK;
	}
	return COPUS_OK;
}

/* Advance one job by 'sec' seconds from time 'now' (Pollux's Job.step). */
void copus__sim_job_step(struct sjob *j, double now, double sec, int N)
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
		copus__sim_update_local(j);
	}
}

/*
 * One step of the job's first micro-batch on one GPU of type t, seconds
 * (0 when the profile has none): what the job measures on each type when
 * it arrives, as Sia's profiling does (--probes).
 */
static double probe_step(const struct sjob *j, int t)
{
	const struct app *a = j->app;
	int one = 1;
	double local = fmin(a->init_batch, (double)copus__sim_max_local(a, t));
	double st, sy;

	if (local < a->min_local)
		local = a->min_local;
	if (sim_app_throughput(a, t, &one, 1, local, &st, &sy) != 0 ||
	    !(st > 0.0) || !isfinite(st))
		return 0.0;
	return st;
}

/*
 * With probes: the job's model on each type it has run on, and on the
 * others its model on the type it ran on longest (the most observations),
 * scaled by the probes.
 */
static const copus_model *probed_model(struct sjob *j, int t)
{
	int u = -1;
	double pt, pu;

	if (j->has_model[t])
		return &j->model[t];
	for (int v = 0; v < SIM_MAX_TYPES; v++)
		if (j->has_model[v] && (u < 0 || j->nobs[v] > j->nobs[u]))
			u = v;
	if (u < 0 || !((pt = probe_step(j, t)) > 0.0) ||
	    !((pu = probe_step(j, u)) > 0.0) ||
	    copus_model_bootstrap(&j->model[u], pu, pt, &j->boot[t]) !=
		    COPUS_OK)
		return NULL;
	/* t's memory, not u's, bounds its micro-batch. */
	j->boot[t].limits.max_local = copus__sim_max_local(j->app, t);
	return &j->boot[t];
}

/*
 * Without probes: what the plugin knows, the models of the job's last hint
 * as copus__hint_models (plugin/round.c) reads them. The runtime names its
 * model after the GPU type of its run ($COPUS_GPU_TYPE, "default" when
 * unset; an untyped cluster's type here) and fits one model per type it has
 * observations of, each from that type's own observations, kept across runs
 * in its checkpoints (runtime/measure.c copus__fit): a hint carries the
 * model of the type the job last ran on, then those of the other types it
 * ran on, at most COPUS_HINT_MAX_TYPES in all. The plugin keeps the last
 * hint only (plugin/intake.c) and gives each model to its own type, or a
 * model named "default" to every type; the round then estimates the types
 * left (copus_models_estimate, in sim/engine.c round_models as in
 * plugin/round.c).
 */
static const copus_model *hint_model(struct sjob *j, int t,
				     const char (*type_names)[32])
{
	int u = j->hint_type, carried = 1;

	if (u < 0 || !j->has_model[u])
		return NULL;
	if (u == t || type_names[u][0] == '\0' ||
	    strcmp(type_names[u], "default") == 0)
		return &j->model[u];
	if (!j->has_model[t])
		return NULL;
	/* The other types in the hint, up to its bound (the runtime takes
	 * them in the order of its observations; here, of the types). */
	for (int v = 0; v < t; v++)
		if (v != u && j->has_model[v])
			carried++;
	return carried < COPUS_HINT_MAX_TYPES ? &j->model[t] : NULL;
}

const copus_model *copus__sim_job_model(struct sjob *j, copus_model_source src,
					int t, bool probes,
					const char (*type_names)[32])
{
	if (src == COPUS_MODELS_LEARNED)
		return probes ? probed_model(j, t)
			      : hint_model(j, t, type_names);
	if (src == COPUS_MODELS_ORACLE)
		return j->app->has_oracle[t] ? &j->app->oracle[t] : NULL;
	return NULL;
}
