/*
 * copus-sim --arena: the replay of Arena's trace in 300 s rounds, each
 * decided by a copus policy, under Arena's rules or honest ones
 * (sim/arena.h).
 *
 * A round: the running jobs are credited the round that ends (and those
 * done leave, their JCT counted to the round's end), the jobs of the next
 * chunk of the trace arrive, the policy decides, and a job whose GPUs
 * changed pays its restart.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/predict.h>

#include "arena.h"
#include "plan-data.h"

/* A job's life in the replay. */
struct ajob {
	enum {
		WAITING,
		IN,
		DONE
	} state;
	double submit; /* the start of its round of arrival */
	copus_slot alloc[ARENA_MAX_GPUS];
	int nslots, gpus, type;
	int nodes;	  /* of the cell it is valued at */
	double it;	  /* seconds per iteration on its cell; 0 never ran */
	double exec;	  /* Arena: seconds run so far */
	double done;	  /* honest: iterations done */
	double remaining; /* iterations left */
	double reported;  /* the most iterations done it has reported */
	bool skip_next;	  /* Arena: the next round brings no progress */
	double debt;	  /* honest: restart seconds still to pay */
	bool ran;
	int restarts, max_gpus;
	double attained;
	double jct;
};

/*
 * What copus's predictor (include/copus/predict.h) knows of a job when it
 * arrives: its model (family and size) as the application, its requested
 * GPUs and its batch; no user, as the trace has none. It learns each
 * finished job's iterations.
 */
static copus_job_attrs job_attrs(const struct arena_world *w, size_t i,
				 char (*names)[48])
{
	const struct arena_job *tj = &w->jobs[i];
	const struct arena_model *m = &w->models[tj->model];

	return (copus_job_attrs){ .application = names[tj->model],
				  .gpus = tj->gpus,
				  .batch = m->batch };
}

/*
 * The iterations left of every job in the system, as the predictor
 * answers from the jobs finished so far (-1 before the first finishes),
 * given the iterations each has reported: the most it has done so far, as
 * a job's own step counter never goes back (under Arena's rules the work
 * done is valued again at each cell's speed, and falls on a slower one).
 */
static int predict_remaining(copus_predictor *p, const struct arena_world *w,
			     const struct ajob *jobs, char (*names)[48],
			     size_t nin, copus_job_attrs *attrs, double *done,
			     double *out)
{
	size_t m = 0;
	int rc;

	for (size_t i = 0; i < w->njobs && m < nin; i++) {
		if (jobs[i].state != IN)
			continue;
		attrs[m] = job_attrs(w, i, names);
		done[m++] = jobs[i].reported;
	}
	if (copus_predictor_count(p) == 0) {
		for (size_t k = 0; k < m; k++)
			out[k] = -1.0;
		return COPUS_OK;
	}
	rc = copus_predictor_remaining_many(p, attrs, done, m, out);
	return rc == COPUS_ENODATA ? COPUS_OK : rc;
}

/* a // b as Python computes it for a >= 0, b > 0 (Arena's progress). */
static double py_floordiv(double a, double b)
{
	double mod = fmod(a, b), div = (a - mod) / b, fl;

	if (div == 0.0)
		return 0.0;
	fl = floor(div);
	if (div - fl > 0.5)
		fl += 1.0;
	return fl;
}

/* The cell a decision's slots make: GPUs, nodes and GPUs on each. An
 * uneven spread is valued as the even one of its smallest share (rounded
 * down to a power of two), which it is no faster than. */
static void slots_cell(const copus_decision *d, int *nodes)
{
	int least = d->gpus, per = 1;

	for (int i = 0; i < d->num_slots; i++)
		if (d->slots[i].gpus < least)
			least = d->slots[i].gpus;
	while (per * 2 <= least)
		per *= 2;
	*nodes = d->gpus / per;
}

static bool job_size(int g)
{
	return g == 1 || g == 2 || g == 4 || g == 8 || g == 16;
}

/* Credit job j the round that ends at 'now'; true when it is done. */
static bool credit(const struct arena_world *w, const struct arena_opts *o,
		   struct ajob *j, size_t i, double now)
{
	const struct arena_job *tj = &w->jobs[i];

	j->attained += ARENA_ROUND * j->gpus;
	if (o->rules == ARENA_RULES_ARENA) {
		if (j->skip_next) {
			j->skip_next = false;
			return false;
		}
		j->exec += ARENA_ROUND;
		j->remaining = (double)tj->iters - py_floordiv(j->exec, j->it);
		if (j->remaining <= 0) {
			j->jct = now - j->submit;
			return true;
		}
		return false;
	}
	{
		double avail = ARENA_ROUND,
		       pay = j->debt < avail ? j->debt : avail, need;

		j->debt -= pay;
		avail -= pay;
		need = ((double)tj->iters - j->done) * j->it;
		if (need <= avail) {
			j->done = (double)tj->iters;
			j->remaining = 0;
			j->jct = now - ARENA_ROUND + pay + need - j->submit;
			return true;
		}
		j->done += avail / j->it;
		j->remaining = (double)tj->iters - j->done;
		return false;
	}
}

/* The seconds per iteration a policy is told for a job not running: its
 * request at the best locality, or its last cell. */
static double told_seconds(const struct arena_world *w, const struct ajob *j,
			   size_t i)
{
	const struct arena_job *tj = &w->jobs[i];
	int cap = w->per_node[tj->type];
	double s;

	if (j->gpus > 0 || j->it > 0)
		return j->it;
	if (arena_cell_seconds(&w->models[tj->model], tj->type, tj->gpus,
			       tj->gpus <= cap ? 1 : tj->gpus / cap, &s))
		return s;
	return -1;
}

/*
 * The planner's view of the cells (--throughput planner): what copus's
 * planner predicts for every model of the trace on every GPU type and
 * count, on the fewest nodes, with its per-type constants calibrated on
 * the measured times of the one- and two-GPU cells (the profile a cluster
 * takes of a model on one node), then refined as jobs run: a cell a job
 * ran on takes the time it measured there, a cell it did not fit leaves
 * the table. The simulator's progress always follows the truth.
 */
struct planner_view {
	struct plan_data d;
	int gpu_of_type[ARENA_MAX_TYPES]; /* index in d.gpus, -1: none */
	copus_cell_time **cells;	  /* per model, owned */
	int *n;
};

static void planner_view_free(struct planner_view *v, size_t nmodels)
{
	for (size_t m = 0; v->cells != NULL && m < nmodels; m++)
		free(v->cells[m]);
	free(v->cells);
	free(v->n);
	plan_data_free(&v->d);
}

static int planner_view_make(const struct arena_world *w, const char *dir,
			     struct planner_view *v, char *err, size_t len)
{
	struct plan_row *rows = NULL;
	int *model_of = NULL, rc;
	size_t nrows = 0;
	char name[96];

	memset(v, 0, sizeof(*v));
	if (dir == NULL) {
		snprintf(err, len, "--throughput planner: no planner data");
		return COPUS_EINVAL;
	}
	if ((rc = plan_data_load(dir, &v->d, err, len)) != COPUS_OK)
		return rc;
	for (int t = 0; t < w->ntypes; t++) {
		v->gpu_of_type[t] = -1;
		for (int g = 0; g < v->d.n_gpus; g++)
			if (strcmp(v->d.gpus[g].type, w->type_names[t]) == 0)
				v->gpu_of_type[t] = g;
	}
	rc = COPUS_ENOMEM;
	model_of = calloc(w->nmodels + 1, sizeof(*model_of));
	v->cells = calloc(w->nmodels + 1, sizeof(*v->cells));
	v->n = calloc(w->nmodels + 1, sizeof(*v->n));
	rows = calloc(w->ndb + 1, sizeof(*rows));
	if (!model_of || !v->cells || !v->n || !rows)
		goto out;
	for (size_t m = 0; m < w->nmodels; m++) {
		const struct arena_family *f =
			&w->families[w->models[m].family];
		snprintf(name, sizeof(name), "%s_%s", f->name,
			 f->sizes[w->models[m].size]);
		model_of[m] = plan_model_find(&v->d, name);
	}
	/* The profile: every measured one- and two-GPU cell. */
	for (size_t i = 0; i < w->ndb; i++) {
		const struct arena_entry *e = &w->db[i];
		const struct arena_family *f = &w->families[e->family];
		int pm, g = v->gpu_of_type[e->type];

		if (e->nodes * e->per > 2 || !(e->seconds > 0.0) || g < 0)
			continue;
		snprintf(name, sizeof(name), "%s_%s", f->name,
			 f->sizes[e->size]);
		if ((pm = plan_model_find(&v->d, name)) < 0)
			continue;
		rows[nrows++] = (struct plan_row){ .model = pm,
						   .batch = e->batch,
						   .gpu = g,
						   .cell = { e->nodes, e->per },
						   .seconds = e->seconds };
	}
	if ((rc = plan_calibrate(&v->d, rows, nrows, NULL, err, len)) !=
	    COPUS_OK)
		goto out;
	for (size_t m = 0; m < w->nmodels; m++) {
		int k = 0;

		v->cells[m] = calloc((size_t)w->ntypes * 5 + 1,
				     sizeof(copus_cell_time));
		if (v->cells[m] == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		for (int t = 0; model_of[m] >= 0 && t < w->ntypes; t++) {
			int g = v->gpu_of_type[t], per = w->per_node[t];

			for (int gpus = 1; g >= 0 && gpus <= ARENA_MAX_GPUS;
			     gpus *= 2) {
				copus_planner_cell cell;
				copus_planner_plan p;

				cell.nodes = gpus <= per ? 1 : gpus / per;
				cell.gpus_per_node = gpus / cell.nodes;
				if (cell.nodes > w->node_num[t])
					continue;
				rc = copus_planner_best(&v->d.models[model_of[m]]
								 .model,
							w->models[m].batch,
							&v->d.gpus[g].gpu,
							&cell, NULL, &p);
				if (rc == COPUS_ERANGE)
					continue;
				if (rc != COPUS_OK) {
					snprintf(err, len, "planner: %s",
						 copus_strerror(rc));
					goto out;
				}
				if (!(p.seconds > 0.0) ||
				    p.seconds > ARENA_ROUND)
					continue;
				v->cells[m][k++] =
					(copus_cell_time){ t, gpus, cell.nodes,
							   p.seconds };
			}
		}
		v->n[m] = k;
	}
	rc = COPUS_OK;
out:
	free(model_of);
	free(rows);
	if (rc != COPUS_OK)
		planner_view_free(v, w->nmodels);
	return rc;
}

/*
 * What a job of model m found on a cell: the time it measured there
 * (seconds > 0), or that it does not fit there (seconds 0).
 */
static void planner_view_learn(struct planner_view *v, size_t m, int type,
			       int gpus, int nodes, double seconds)
{
	copus_cell_time *c = v->cells[m];

	for (int i = 0; i < v->n[m]; i++) {
		if (c[i].gpu_type != type || c[i].gpus != gpus ||
		    c[i].nodes != nodes)
			continue;
		if (seconds > 0.0)
			c[i].seconds = seconds;
		else
			c[i] = c[--v->n[m]];
		return;
	}
}

/*
 * A replay: the world and its options, the policy deciding its rounds, the
 * jobs' lives, the buffers each round fills for the policy, and the figures
 * (r). arena_setup fills it, arena_round moves it on a round,
 * arena_figures reads it at the horizon and arena_state_free releases it.
 */
struct arena_state {
	const struct arena_world *w;
	const struct arena_opts *o;
	struct arena_result *r;
	char *err;
	size_t len;
	copus_policy *pol;
	const struct copus_policy_traits *tr;
	bool tell_remaining;   /* the policy is told the truth */
	copus_predictor *pred; /* or else predicts it; NULL: neither */
	copus_cluster c;       /* over nodes and tnames */
	copus_node *nodes;
	const char **tnames;
	struct ajob *jobs;	/* per job of the world */
	size_t next;		/* the first job yet to arrive */
	size_t nin;		/* jobs in the system */
	char (*names)[48];	/* per model: the predictor's name */
	struct planner_view pv; /* --throughput planner */
	bool have_pv;
	const copus_cell_time **view; /* per model: the cells a policy sees */
	int *nview;
	/* A round's input and output: n jobs in the system, idx[k] the
	 * world's index of the k-th. */
	copus_job *cj;
	copus_decision *dec;
	size_t *idx;
	copus_job_attrs *pattrs;
	double *pdone, *prem; /* the predictor's input and answer */
	double *dms;	      /* per round decided: its CPU ms */
	size_t ndms;
	double *done_jct; /* arena_figures' scratch */
};

/* Release what the replay holds; r stays the caller's. */
static void arena_state_free(struct arena_state *s)
{
	if (s->have_pv)
		planner_view_free(&s->pv, s->w->nmodels);
	copus_policy_destroy(s->pol);
	copus_predictor_destroy(s->pred);
	free(s->names);
	free(s->pattrs);
	free(s->pdone);
	free(s->prem);
	free(s->nodes);
	free(s->tnames);
	free(s->jobs);
	free(s->cj);
	free(s->dec);
	free(s->idx);
	free(s->dms);
	free(s->done_jct);
	free(s->view);
	free(s->nview);
}

/*
 * The policy of --policy, created with Arena's round and restart cost once
 * its traits say which restart cost Arena charges it, and what it learns
 * of each job's work left: the truth, the predictor's answer or nothing.
 * A policy that needs a goodput model is refused: Arena's jobs have none.
 */
static int arena_policy(struct arena_state *s)
{
	const struct arena_opts *o = s->o;
	struct arena_result *r = s->r;
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	bool predict;
	int rc;

	if (copus_policy_create(o->policy, NULL, &s->pol) != COPUS_OK) {
		snprintf(s->err, s->len, "unknown policy or option '%s'",
			 o->policy);
		return COPUS_EINVAL;
	}
	s->tr = copus_policy_traits(s->pol);
	if (s->tr->models != COPUS_MODELS_NONE && !s->tr->picks_cells) {
		snprintf(s->err, s->len,
			 "policy '%s' needs a goodput model "
			 "of each job (throughput and statistical efficiency "
			 "by batch size), which Arena's jobs do not have; on "
			 "--arena use fifo, fifo:arena or tiresias",
			 o->policy);
		return COPUS_EINVAL;
	}
	/* Arena charges crius, which searches plans pruned by its profile,
	 * 10 s per GPU (at most 40 s) to restart, and every other policy a
	 * full plan search, 150 s per GPU (at most 600 s); a policy that
	 * picks cells with their plans pays what crius pays. */
	r->restart_cost_per_gpu = s->tr->picks_cells ? 10 : 150;
	r->restart_cost_max = s->tr->picks_cells ? 40 : 600;
	copus_policy_destroy(s->pol);
	s->pol = NULL;
	prm.interval = ARENA_ROUND;
	prm.restart_delay = r->restart_cost_max;
	prm.equal_per_node = true;
	if ((rc = copus_policy_create(o->policy, &prm, &s->pol)) != COPUS_OK) {
		snprintf(s->err, s->len, "policy '%s': %s", o->policy,
			 copus_strerror(rc));
		return rc;
	}
	s->tr = copus_policy_traits(s->pol);
	s->tell_remaining = s->tr->remaining == COPUS_REMAINING_ORACLE ||
			    (s->tr->remaining == COPUS_REMAINING_PREDICT &&
			     o->remaining == SIM_REMAINING_ORACLE);
	predict = s->tr->remaining == COPUS_REMAINING_PREDICT &&
		  o->remaining == SIM_REMAINING_PREDICT;
	if (predict &&
	    (rc = copus_predictor_create(NULL, &s->pred)) != COPUS_OK) {
		snprintf(s->err, s->len, "predictor: %s", copus_strerror(rc));
		return rc;
	}
	return COPUS_OK;
}

/*
 * Everything but the policy: the buffers, each model's name, the cells the
 * policy sees (the table, or the planner's view of --throughput planner)
 * and the cluster, its nodes in the spec's order of types, as Arena
 * numbers them.
 */
static int arena_setup(struct arena_state *s)
{
	const struct arena_world *w = s->w;
	int nnodes = 0, rc;

	for (int t = 0; t < w->ntypes; t++)
		nnodes += w->node_num[t];
	s->nodes = calloc((size_t)nnodes, sizeof(*s->nodes));
	s->tnames = calloc((size_t)w->ntypes, sizeof(*s->tnames));
	s->jobs = calloc(w->njobs + 1, sizeof(*s->jobs));
	s->cj = calloc(w->njobs + 1, sizeof(*s->cj));
	s->dec = calloc(w->njobs + 1, sizeof(*s->dec));
	s->idx = calloc(w->njobs + 1, sizeof(*s->idx));
	s->dms = calloc((size_t)s->o->max_rounds + 1, sizeof(*s->dms));
	s->done_jct = calloc(w->njobs + 1, sizeof(*s->done_jct));
	s->r->jct = calloc(w->njobs + 1, sizeof(*s->r->jct));
	s->view = calloc(w->nmodels + 1, sizeof(*s->view));
	s->nview = calloc(w->nmodels + 1, sizeof(*s->nview));
	s->names = calloc(w->nmodels + 1, sizeof(*s->names));
	s->pattrs = calloc(w->njobs + 1, sizeof(*s->pattrs));
	s->pdone = calloc(w->njobs + 1, sizeof(*s->pdone));
	s->prem = calloc(w->njobs + 1, sizeof(*s->prem));
	if (!s->nodes || !s->tnames || !s->jobs || !s->cj || !s->dec ||
	    !s->idx || !s->dms || !s->done_jct || !s->r->jct || !s->view ||
	    !s->nview || !s->names || !s->pattrs || !s->pdone || !s->prem) {
		snprintf(s->err, s->len, "out of memory");
		return COPUS_ENOMEM;
	}
	for (size_t m = 0; m < w->nmodels; m++) {
		const struct arena_family *f =
			&w->families[w->models[m].family];
		snprintf(s->names[m], sizeof(s->names[m]), "%s_%s", f->name,
			 f->sizes[w->models[m].size]);
	}
	if (s->o->throughput == ARENA_THROUGHPUT_PLANNER) {
		if ((rc = planner_view_make(w, s->o->planner_dir, &s->pv,
					    s->err, s->len)) != COPUS_OK)
			return rc;
		s->have_pv = true;
	}
	for (size_t m = 0; m < w->nmodels; m++) {
		s->view[m] = s->have_pv ? s->pv.cells[m] : w->models[m].cells;
		s->nview[m] = s->have_pv ? s->pv.n[m] : w->models[m].ncells;
	}
	s->r->njobs = w->njobs;
	nnodes = 0;
	for (int t = 0; t < w->ntypes; t++) {
		s->tnames[t] = w->type_names[t];
		for (int k = 0; k < w->node_num[t]; k++)
			s->nodes[nnodes++] =
				(copus_node){ t, w->per_node[t], true };
	}
	s->c = (copus_cluster){ .num_nodes = nnodes,
				.nodes = s->nodes,
				.num_types = w->ntypes,
				.type_names = s->tnames };
	return COPUS_OK;
}

/*
 * The round that ends at 'now': each running job is credited it, and one
 * done leaves, its iterations taught to the predictor.
 */
static int round_credit(struct arena_state *s, double now)
{
	const struct arena_world *w = s->w;
	int rc;

	for (size_t i = 0; i < w->njobs; i++) {
		struct ajob *j = &s->jobs[i];
		copus_job_attrs at;

		if (j->state != IN || j->gpus == 0)
			continue;
		s->r->gpu_hours += j->gpus * ARENA_ROUND / 3600.0;
		if (!credit(w, s->o, j, i, now))
			continue;
		j->state = DONE;
		j->gpus = j->nslots = 0;
		s->nin--;
		if (s->pred == NULL)
			continue;
		at = job_attrs(w, i, s->names);
		rc = copus_predictor_add(s->pred, &at,
					 (double)w->jobs[i].iters);
		if (rc != COPUS_OK) {
			snprintf(s->err, s->len, "predictor: %s",
				 copus_strerror(rc));
			return rc;
		}
	}
	return COPUS_OK;
}

/* The jobs of round's chunk of the trace arrive at 'now'. */
static void round_arrive(struct arena_state *s, long round, double now)
{
	const struct arena_world *w = s->w;

	while (s->next < w->njobs && w->jobs[s->next].round <= round) {
		struct ajob *j = &s->jobs[s->next];

		j->state = IN;
		j->submit = now;
		j->remaining = (double)w->jobs[s->next].iters;
		s->next++;
		s->nin++;
	}
}

/*
 * The policy's view of job i (the n-th in the system): its request, its
 * history, its cells and what it is told of its work left. A policy that
 * picks cells may change what the request says, as far as --cell-choice
 * lets it.
 */
static void round_job_input(struct arena_state *s, size_t i, size_t n)
{
	const struct arena_world *w = s->w;
	const struct arena_opts *o = s->o;
	const struct arena_job *tj = &w->jobs[i];
	struct ajob *j = &s->jobs[i];
	copus_job *q = &s->cj[n];
	double sec;

	memset(q, 0, sizeof(*q));
	q->id = (uint64_t)i + 1;
	q->min_gpus = q->max_gpus = q->req_gpus = tj->gpus;
	q->req_batch = w->models[tj->model].batch;
	q->fixed_batch = true;
	q->type_mask = 1u << tj->type;
	q->submit_time = j->submit;
	q->restarts = j->restarts;
	q->attained = j->attained;
	q->max_gpus_had = j->max_gpus;
	q->remaining = -1;
	q->alloc = j->alloc;
	q->alloc_slots = j->nslots;
	q->alloc_type = j->gpus > 0 ? j->type : -1;
	q->cells = s->view[tj->model];
	q->num_cells = s->nview[tj->model];
	q->remaining_iters = -1;
	if (s->tell_remaining || s->pred != NULL) {
		double left = s->tell_remaining ? j->remaining : s->prem[n];

		q->remaining_iters = left;
		sec = told_seconds(w, j, i);
		if (sec > 0 && left >= 0)
			q->remaining = left * sec;
	}
	if (s->tr->picks_cells && o->choice != ARENA_CHOICE_NONE) {
		q->elastic = true;
		q->min_gpus = 1;
		q->max_gpus = ARENA_MAX_GPUS;
		if (o->choice == ARENA_CHOICE_ALL)
			q->type_mask = 0;
	}
}

/*
 * The policy's input: the cells as the planner's view now has them, the
 * iterations each job has reported, the predictor's answers, and each job
 * in the system (idx maps them back). Their count in *n.
 */
static int round_input(struct arena_state *s, size_t *n)
{
	const struct arena_world *w = s->w;
	int rc;

	for (size_t m = 0; s->have_pv && m < w->nmodels; m++)
		s->nview[m] = s->pv.n[m];
	for (size_t i = 0; i < w->njobs; i++) {
		struct ajob *j = &s->jobs[i];

		if (j->state == IN)
			j->reported =
				fmax(j->reported,
				     (double)w->jobs[i].iters - j->remaining);
	}
	if (s->pred != NULL &&
	    (rc = predict_remaining(s->pred, w, s->jobs, s->names, s->nin,
				    s->pattrs, s->pdone, s->prem)) !=
		    COPUS_OK) {
		snprintf(s->err, s->len, "predictor: %s", copus_strerror(rc));
		return rc;
	}
	*n = 0;
	for (size_t i = 0; i < w->njobs && *n < s->nin; i++) {
		if (s->jobs[i].state != IN)
			continue;
		round_job_input(s, i, *n);
		s->idx[(*n)++] = i;
	}
	return COPUS_OK;
}

/*
 * Apply the policy's decision d for job i: it stops, waits on a cell it
 * does not fit (which the planner's view forgets), or runs on its new
 * cell, at the cell's speed, after its restart.
 */
static void round_apply(struct arena_state *s, const copus_decision *d,
			size_t i)
{
	const struct arena_world *w = s->w;
	struct arena_result *r = s->r;
	struct ajob *j = &s->jobs[i];
	const struct arena_model *m = &w->models[w->jobs[i].model];
	double sec, cost;
	int cn;

	if (!d->changed)
		return;
	if (d->gpus == 0) {
		j->gpus = j->nslots = 0;
		return;
	}
	slots_cell(d, &cn);
	if (!job_size(d->gpus) || d->num_slots > ARENA_MAX_GPUS ||
	    !arena_cell_seconds(m, d->gpu_type, d->gpus, cn, &sec)) {
		/* A cell the job does not fit: it waits. */
		if (s->have_pv)
			planner_view_learn(&s->pv, (size_t)w->jobs[i].model,
					   d->gpu_type, d->gpus, cn, 0.0);
		r->refused++;
		j->gpus = j->nslots = 0;
		return;
	}
	if (j->ran)
		r->restarts++, j->restarts++;
	j->ran = true;
	j->gpus = d->gpus;
	j->type = d->gpu_type;
	j->nodes = cn;
	j->nslots = d->num_slots;
	memcpy(j->alloc, d->slots, (size_t)d->num_slots * sizeof(*d->slots));
	if (j->gpus > j->max_gpus)
		j->max_gpus = j->gpus;
	j->it = sec;
	if (s->have_pv)
		planner_view_learn(&s->pv, (size_t)w->jobs[i].model,
				   d->gpu_type, d->gpus, cn, sec);
	cost = fmin(r->restart_cost_per_gpu * j->gpus, r->restart_cost_max);
	if (s->o->rules == ARENA_RULES_ARENA)
		j->skip_next = cost > ARENA_ROUND;
	else
		j->debt = cost;
}

/* The timeline's lines of the round at 'now': each of the n jobs' cell. */
static void round_timeline(const struct arena_state *s, size_t n, double now)
{
	const struct arena_world *w = s->w;

	for (size_t k = 0; k < n; k++) {
		const struct ajob *j = &s->jobs[s->idx[k]];

		fprintf(s->o->timeline, "%.0f,%s,%s,%d,%d,%.17g,%.17g\n",
			now - w->first_submit, w->jobs[s->idx[k]].name,
			j->gpus > 0 ? w->type_names[j->type] : "", j->gpus,
			j->gpus > 0 ? j->nodes : 0, j->gpus > 0 ? j->it : 0.0,
			j->remaining);
	}
}

/*
 * One round: the round that ends is credited, the next chunk arrives, the
 * policy decides (its CPU time kept when it had jobs) and its decisions
 * are applied.
 */
static int arena_round(struct arena_state *s, long round)
{
	double now = s->w->first_submit + ARENA_ROUND * (double)round;
	size_t n = 0;
	clock_t cpu;
	int rc;

	if ((rc = round_credit(s, now)) != COPUS_OK)
		return rc;
	round_arrive(s, round, now);
	if ((rc = round_input(s, &n)) != COPUS_OK)
		return rc;
	cpu = clock();
	rc = copus_policy_decide(s->pol, &s->c, s->cj, n, now, s->dec);
	if (n > 0)
		s->dms[s->ndms++] =
			1000.0 * (double)(clock() - cpu) / CLOCKS_PER_SEC;
	if (rc != COPUS_OK) {
		snprintf(s->err, s->len, "round %ld: policy %s: %s", round,
			 s->o->policy, copus_strerror(rc));
		return rc;
	}
	for (size_t k = 0; k < n; k++)
		round_apply(s, &s->dec[k], s->idx[k]);
	if (s->o->timeline != NULL)
		round_timeline(s, n, now);
	s->r->rounds++;
	return COPUS_OK;
}

/*
 * The figures at the horizon: per job submitted before it its JCT (< 0
 * unfinished), the means (an unfinished job counted to the horizon), the
 * makespan, the bounds and the policy's decision times.
 */
static void arena_figures(struct arena_state *s)
{
	const struct arena_world *w = s->w;
	struct arena_result *r = s->r;
	double sum_f = 0, sum_a = 0, end;
	size_t nf = 0;

	r->horizon = ARENA_ROUND * (double)s->o->max_rounds;
	end = w->first_submit + r->horizon;
	for (size_t i = 0; i < w->njobs; i++) {
		const struct ajob *j = &s->jobs[i];

		if (w->jobs[i].round >= s->o->max_rounds) {
			r->jct[i] = NAN;
			continue;
		}
		r->submitted++;
		if (!j->ran)
			r->never_started++;
		if (j->state == DONE) {
			r->jct[i] = j->jct;
			s->done_jct[nf++] = j->jct;
			sum_f += j->jct;
			sum_a += j->jct;
			if (j->submit + j->jct - w->first_submit > r->makespan)
				r->makespan =
					j->submit + j->jct - w->first_submit;
		} else {
			r->jct[i] = -1;
			sum_a += end - j->submit;
		}
	}
	r->finished = nf;
	r->mean_jct_finished = nf ? sum_f / (double)nf : NAN;
	r->mean_jct_all = r->submitted ? sum_a / (double)r->submitted : NAN;
	r->p99_jct = nf ? sim_quantile(s->done_jct, nf, 0.99) : NAN;
	arena_bounds(w, s->o, r, s->done_jct);
	r->decide_ms_median = sim_quantile(s->dms, s->ndms, 0.5);
	r->decide_ms_p95 = sim_quantile(s->dms, s->ndms, 0.95);
	r->decide_ms_max = s->ndms ? s->dms[s->ndms - 1] : 0;
}

/*
 * The replay (sim/arena.h): the policy and the setup, max_rounds rounds,
 * then the figures; on an error, r is released and err says why.
 */
int arena_run(const struct arena_world *w, const struct arena_opts *o,
	      struct arena_result *r, char *err, size_t len)
{
	struct arena_state s = {
		.w = w, .o = o, .r = r, .err = err, .len = len
	};
	struct timespec t0, t1;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(r, 0, sizeof(*r));
	if (o->max_rounds < 1) {
		snprintf(err, len,
			 "--max-rounds: %ld is not a number of rounds "
			 ">= 1",
			 o->max_rounds);
		return COPUS_EINVAL;
	}
	if ((rc = arena_policy(&s)) != COPUS_OK ||
	    (rc = arena_setup(&s)) != COPUS_OK)
		goto out;
	for (long round = 0; round < o->max_rounds; round++)
		if ((rc = arena_round(&s, round)) != COPUS_OK)
			goto out;
	arena_figures(&s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r->wall = (double)(t1.tv_sec - t0.tv_sec) +
		  (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
out:
	arena_state_free(&s);
	if (rc != COPUS_OK)
		arena_result_free(r);
	return rc;
}

void arena_result_free(struct arena_result *r)
{
	if (r == NULL)
		return;
	free(r->jct);
	r->jct = NULL;
}
