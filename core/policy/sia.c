/*
 * sia: heterogeneity-aware goodput scheduling (Sia, SOSP'23). Every round
 * each job is offered a short list of configurations per GPU type (1 GPU,
 * powers of two up to a node, then 2, 3, ... whole nodes), each worth the
 * job's goodput there normalised by its smallest; an integer program
 * picks at most one configuration per job, within each type's GPUs, to
 * minimise the sum of the normalised goodputs raised to p (p < 0; with
 * p > 0 it maximises), with a cost lambda_n for each job left out and
 * Pollux's restart factor on every configuration but a job's current one.
 * The chosen sizes are then placed on nodes: jobs that keep their size
 * stay where they are, multi-node jobs take whole nodes. Elastic; learns
 * the jobs' models.
 *
 * Options, after "sia:", comma separated: p=X (-0.5), lambda_n=X (1.1),
 * lambda_a=X (0.01), time_limit_ms=N (10000), as Sia's --policy_p_val,
 * --mip_lambda_n and --mip_lambda_a. Sia's own solver builds lambda_a but
 * never puts it in the objective (the restart factor does that work), and
 * neither does this policy; the option is accepted so that Sia's command
 * lines carry over.
 *
 * A job's model on every type is used as given (copus-sim --probes gives
 * jobs models bootstrapped from one-GPU probes, as Sia profiles them; by
 * default, as in the plugin, a job has a model of each type it has run
 * on).
 * Where a job has a model on some GPU types only, the others are valued by
 * the first modelled type's goodput times the ratio of one-GPU throughputs
 * between the two types. Sia reads that ratio, per application, from
 * profiles taken before the job starts; copus has no such profiles, so the
 * ratio is learned across the cluster from the jobs that have a model on
 * both types (1 until one has).
 */
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glpk.h>

#include <copus/model.h>
#include <copus/policy.h>

#include "ops.h"
#include "sia.h"

/* Sia's published defaults (its simulator_config.py). */
#define SIA_P		-0.5
#define SIA_LAMBDA_A	0.01
#define SIA_LAMBDA_N	1.1
/* Normalised goodputs below this count as this; powers clip at SIA_CLIP. */
#define SIA_FLOOR	1e-4
#define SIA_CLIP	3000.0
/* Sia's relative optimality gap. */
#define SIA_MIP_GAP	1e-4
#define SIA_TIME_LIMIT_MS 10000

/* One configuration a job is offered. */
struct conf {
	int type;
	int gpus;
	int nodes;
	double value; /* goodput, then normalised, then the coefficient */
};

/* One round's view of a GPU type. */
struct tinfo {
	int g;       /* GPUs of its largest usable node */
	int full;    /* usable nodes with g GPUs */
	long cap;    /* usable GPUs */
};

/* ------------------------------------------------------------ options */

static int parse_opts(struct copus__sia_state *s, const char *opts)
{
	char buf[256], *save = NULL, *tok;

	if (opts == NULL)
		return COPUS_OK;
	if (strlen(opts) >= sizeof(buf))
		return COPUS_EINVAL;
	strcpy(buf, opts);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		double v;

		if (eq == NULL)
			return COPUS_EINVAL;
		*eq = '\0';
		v = strtod(eq + 1, &end);
		if (end == eq + 1 || *end != '\0' || !isfinite(v))
			return COPUS_EINVAL;
		if (strcmp(tok, "p") == 0 && v != 0.0)
			s->p = v;
		else if (strcmp(tok, "lambda_n") == 0)
			s->lambda_n = v;
		else if (strcmp(tok, "lambda_a") == 0)
			s->lambda_a = v;
		else if (strcmp(tok, "time_limit_ms") == 0 && v >= 1 &&
			 v <= 3600e3)
			s->time_limit_ms = (int)v;
		else
			return COPUS_EINVAL;
	}
	return COPUS_OK;
}

static int sia_create(const char *opts, void **state)
{
	struct copus__sia_state *s = calloc(1, sizeof(*s));
	int rc;

	if (s == NULL)
		return COPUS_ENOMEM;
	s->p = SIA_P;
	s->lambda_a = SIA_LAMBDA_A;
	s->lambda_n = SIA_LAMBDA_N;
	s->time_limit_ms = SIA_TIME_LIMIT_MS;
	s->solve = copus__sia_solve;
	if ((rc = parse_opts(s, opts)) != COPUS_OK) {
		free(s);
		return rc;
	}
	*state = s;
	return COPUS_OK;
}

static void sia_destroy(void *state)
{
	free(state);
}

/* ------------------------------------------------------------- solver */

struct vkey {
	double key;
	size_t v;
};

static int key_cmp(const void *a, const void *b)
{
	const struct vkey *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->v < y->v ? -1 : x->v > y->v;
}

/*
 * An incumbent for the branch and cut, from the relaxation at the root:
 * the variables at 1 stay, then the others enter, best objective first,
 * while every row holds. A good incumbent early lets the search prune most
 * of a tree that the many equal coefficients make wide. It works on the
 * presolved program GLPK hands over, so it reads only rows and columns.
 */
static void root_incumbent(glp_tree *tree, void *info)
{
	glp_prob *lp;
	int m, n, *ind = NULL;
	double *x = NULL, *act = NULL, *val = NULL, dir;
	struct vkey *k = NULL;
	bool ok = true;

	(void)info;
	if (glp_ios_reason(tree) != GLP_IHEUR || glp_ios_curr_node(tree) != 1)
		return;
	lp = glp_ios_get_prob(tree);
	m = glp_get_num_rows(lp);
	n = glp_get_num_cols(lp);
	dir = glp_get_obj_dir(lp) == GLP_MAX ? -1.0 : 1.0;
	x = calloc((size_t)n + 1, sizeof(*x));
	act = calloc((size_t)m + 1, sizeof(*act));
	ind = malloc(((size_t)m + 1) * sizeof(*ind));
	val = malloc(((size_t)m + 1) * sizeof(*val));
	k = malloc(((size_t)n + 1) * sizeof(*k));
	if (!x || !act || !ind || !val || !k)
		goto out;
	for (int j = 1; j <= n; j++) {
		k[j - 1].key = dir * glp_get_obj_coef(lp, j);
		k[j - 1].v = (size_t)j;
		if (glp_get_col_prim(lp, j) > 1.0 - 1e-6 ||
		    glp_get_col_lb(lp, j) > 0.5)
			x[j] = 1.0;
	}
	qsort(k, (size_t)n, sizeof(*k), key_cmp);
	for (int j = 1; j <= n; j++) {
		int len = glp_get_mat_col(lp, j, ind, val);

		for (int i = 1; i <= len; i++)
			act[ind[i]] += x[j] * val[i];
	}
	for (int q = 0; q < n && k[q].key < 0.0; q++) {
		int j = (int)k[q].v, len;
		bool fits = true;

		if (x[j] > 0.5 || glp_get_col_ub(lp, j) < 0.5)
			continue;
		len = glp_get_mat_col(lp, j, ind, val);
		for (int i = 1; i <= len && fits; i++) {
			int t = glp_get_row_type(lp, ind[i]);

			if ((t == GLP_UP || t == GLP_DB || t == GLP_FX) &&
			    act[ind[i]] + val[i] > glp_get_row_ub(lp, ind[i]) +
			    1e-9)
				fits = false;
		}
		if (!fits)
			continue;
		x[j] = 1.0;
		for (int i = 1; i <= len; i++)
			act[ind[i]] += val[i];
	}
	for (int i = 1; i <= m && ok; i++) {
		int t = glp_get_row_type(lp, i);

		if ((t == GLP_LO || t == GLP_DB || t == GLP_FX) &&
		    act[i] < glp_get_row_lb(lp, i) - 1e-9)
			ok = false;
		if ((t == GLP_UP || t == GLP_DB || t == GLP_FX) &&
		    act[i] > glp_get_row_ub(lp, i) + 1e-9)
			ok = false;
	}
	if (ok)
		glp_ios_heur_sol(tree, x);
out:
	free(x);
	free(act);
	free(ind);
	free(val);
	free(k);
}

/*
 * GLPK ends a fatal error (no memory, an entry outside the program) by
 * aborting the process, after calling the error hook; in slurmctld that
 * would be the controller. The hook returns to the solve instead, which
 * frees GLPK's environment (everything GLPK holds in this thread) and
 * reports the error.
 */
static _Thread_local jmp_buf glpk_fatal_at;

static void glpk_fatal(void *info)
{
	(void)info;
	longjmp(glpk_fatal_at, 1);
}

int copus__sia_solve(const struct copus__sia_ip *ip, long *choice,
		     double *obj)
{
	glp_prob *lp = NULL;
	glp_iocp parm;
	int *ia = NULL, *ja = NULL, rows, rc = COPUS_ENOMEM;
	double *ar = NULL;
	size_t ne;

	for (size_t j = 0; j < ip->njobs; j++)
		choice[j] = -1;
	if (obj != NULL)
		*obj = 0.0;
	if (ip->nvars == 0)
		return COPUS_OK;
	if (ip->nvars > (size_t)INT32_MAX / 4 || ip->njobs > (size_t)INT32_MAX / 2)
		return COPUS_ERANGE;
	ia = malloc((2 * ip->nvars + 1) * sizeof(int));
	ja = malloc((2 * ip->nvars + 1) * sizeof(int));
	ar = malloc((2 * ip->nvars + 1) * sizeof(double));
	if (ia == NULL || ja == NULL || ar == NULL)
		goto out;
	if (setjmp(glpk_fatal_at) != 0) {
		glp_error_hook(NULL, NULL);
		glp_free_env();
		free(ia);
		free(ja);
		free(ar);
		return COPUS_ESTATE;
	}
	glp_error_hook(glpk_fatal, NULL);
	lp = glp_create_prob();
	/* Rows: one per job (at most one configuration), one per type. */
	rows = (int)ip->njobs + ip->ntypes;
	glp_set_obj_dir(lp, ip->maximize ? GLP_MAX : GLP_MIN);
	glp_add_rows(lp, rows);
	for (size_t j = 0; j < ip->njobs; j++)
		glp_set_row_bnds(lp, (int)j + 1, GLP_UP, 0.0, 1.0);
	for (int t = 0; t < ip->ntypes; t++)
		glp_set_row_bnds(lp, (int)ip->njobs + t + 1, GLP_UP, 0.0,
				 (double)ip->cap[t]);
	glp_add_cols(lp, (int)ip->nvars);
	ne = 0;
	for (size_t v = 0; v < ip->nvars; v++) {
		int col = (int)v + 1;

		glp_set_col_kind(lp, col, GLP_BV);
		glp_set_obj_coef(lp, col, ip->coef[v]);
		ne++;
		ia[ne] = (int)ip->job[v] + 1;
		ja[ne] = col;
		ar[ne] = 1.0;
		ne++;
		ia[ne] = (int)ip->njobs + ip->type[v] + 1;
		ja[ne] = col;
		ar[ne] = (double)ip->gpus[v];
	}
	glp_load_matrix(lp, (int)ne, ia, ja, ar);
	glp_init_iocp(&parm);
	parm.presolve = GLP_ON;
	parm.msg_lev = GLP_MSG_OFF;
	parm.mip_gap = SIA_MIP_GAP;
	parm.tm_lim = ip->time_limit_ms;
	parm.br_tech = GLP_BR_PCH;
	parm.mir_cuts = GLP_ON;
	parm.cb_func = root_incumbent;
	if (glp_intopt(lp, &parm) != 0 || glp_mip_status(lp) != GLP_OPT) {
		rc = COPUS_ERANGE;
		goto out;
	}
	for (size_t v = 0; v < ip->nvars; v++)
		if (glp_mip_col_val(lp, (int)v + 1) > 0.5)
			choice[ip->job[v]] = (long)v;
	if (obj != NULL)
		*obj = glp_mip_obj_val(lp);
	rc = COPUS_OK;
out:
	if (lp != NULL)
		glp_delete_prob(lp);
	glp_error_hook(NULL, NULL);
	free(ia);
	free(ja);
	free(ar);
	return rc;
}

/* --------------------------------------------------------- goodputs */

/*
 * The job's model on type t as Sia plans with it: a batch no larger than
 * the user's request (Sia's speedup functions take the request as the
 * largest batch; the job itself may then train with a larger one).
 */
static bool plan_model(const copus_job *jb, int t, copus_model *out)
{
	const copus_model *m = copus__job_model(jb, t);

	if (m == NULL)
		return false;
	*out = *m;
	if (jb->req_batch > 0 && jb->req_batch < out->limits.max_batch)
		out->limits.max_batch = fmax(jb->req_batch,
					     out->limits.init_batch);
	return true;
}

static double best_goodput(const copus_model *m, int nodes, int gpus)
{
	copus_batch_plan bp;

	if (copus_best_batch(m, nodes, gpus, &bp) != COPUS_OK ||
	    !(bp.goodput > 0.0) || !isfinite(bp.goodput))
		return 0.0;
	return bp.goodput;
}

/* One-GPU throughput at the largest micro-batch, as Sia compares types. */
static double one_gpu_rate(const copus_model *m)
{
	double x;

	if (copus_throughput(&m->perf, 1, 1, m->limits.max_local, 0, &x) !=
	    COPUS_OK || !(x > 0.0) || !isfinite(x))
		return 0.0;
	return x;
}

/*
 * Learn the one-GPU throughput ratios between types from this round's
 * jobs with models on both; a pair no job covers keeps what it had.
 */
static void learn_ratios(struct copus__sia_state *s, const copus_cluster *c,
			 const copus_job *jobs, size_t n)
{
	int T = c->num_types;
	double sum[COPUS_MAX_GPU_TYPES][COPUS_MAX_GPU_TYPES];
	int cnt[COPUS_MAX_GPU_TYPES][COPUS_MAX_GPU_TYPES];
	double rate[COPUS_MAX_GPU_TYPES];

	memset(sum, 0, sizeof(sum));
	memset(cnt, 0, sizeof(cnt));
	for (size_t j = 0; j < n; j++) {
		int have = 0;

		for (int t = 0; t < T; t++) {
			const copus_model *m = copus__job_model(&jobs[j], t);

			rate[t] = m != NULL ? one_gpu_rate(m) : 0.0;
			have += rate[t] > 0.0;
		}
		if (have < 2)
			continue;
		for (int t = 0; t < T; t++)
			for (int u = 0; u < T; u++)
				if (t != u && rate[t] > 0.0 && rate[u] > 0.0) {
					sum[t][u] += log(rate[t] / rate[u]);
					cnt[t][u]++;
				}
	}
	for (int t = 0; t < T; t++)
		for (int u = 0; u < T; u++)
			if (cnt[t][u] > 0) {
				s->log_ratio[t][u] = sum[t][u] / cnt[t][u];
				s->known[t][u] = true;
			}
}

/* Sia's restart factor: Pollux's, with the restart's cost in seconds. */
static double restart_factor(const copus_job *jb, double now, double cost)
{
	double age = now - jb->submit_time;

	if (age < cost)
		return 1.0;
	return fmax(age - jb->restarts * cost, 0.0) / (age + cost);
}

/* GPUs and type of the job's current allocation (0 when queued). */
static int current_gpus(const copus_job *jb)
{
	int k = 0;

	for (int i = 0; i < jb->alloc_slots; i++)
		k += jb->alloc[i].gpus;
	return k;
}

/*
 * The configurations of job jb on type t into out (room for enough), with
 * their goodputs; returns how many. Sizes outside the job's limits are
 * not offered.
 */
static int type_confs(const copus_job *jb, int t, const struct tinfo *ti,
		      int kmin, int kmax, struct conf *out)
{
	int n = 0;

	if (!jb->elastic) {
		int k = jb->req_gpus;

		if (k <= ti->cap)
			out[n++] = (struct conf){ t, k, (k + ti->g - 1) / ti->g,
						  0.0 };
		return n;
	}
	for (int k = 1; k <= ti->g; k = k < ti->g && 2 * k > ti->g ? ti->g :
	     2 * k)
		if (k >= kmin && k <= kmax)
			out[n++] = (struct conf){ t, k, 1, 0.0 };
	for (int m = 2; m <= ti->full; m++) {
		int k = m * ti->g;

		if (k > kmax)
			break;
		if (k >= kmin)
			out[n++] = (struct conf){ t, k, m, 0.0 };
	}
	return n;
}

/* ---------------------------------------------------------- placement */

/* A chosen size on one type, to be placed. */
struct want {
	size_t j;
	int k;
	bool keep; /* the job holds k GPUs of this type now */
};

static int want_cmp(const void *a, const void *b)
{
	const struct want *x = a, *y = b;

	if (x->k != y->k)
		return x->k > y->k ? -1 : 1;
	if (x->keep != y->keep)
		return x->keep ? -1 : 1;
	return x->j < y->j ? -1 : x->j > y->j;
}

/* Can job jb's current slots be had from fr? Takes them when they can. */
static bool take_current(const copus_job *jb, int *fr, int *row)
{
	for (int i = 0; i < jb->alloc_slots; i++)
		if (fr[jb->alloc[i].node] < jb->alloc[i].gpus)
			return false;
	for (int i = 0; i < jb->alloc_slots; i++) {
		fr[jb->alloc[i].node] -= jb->alloc[i].gpus;
		row[jb->alloc[i].node] += jb->alloc[i].gpus;
	}
	return true;
}

/* Is node n of type t whole and free in fr? */
static bool whole_free(const copus_cluster *c, int t, int g, const int *fr,
		       int n)
{
	return c->nodes[n].gpu_type == t && c->nodes[n].usable &&
	       c->nodes[n].gpus == g && fr[n] == g;
}

/*
 * Place k GPUs of type t (nodes of g GPUs) from fr into row: on the
 * fullest node that has room; else on k / g whole free nodes, the rest on
 * the fullest node with room for it (a whole one only if no other has).
 * Lowest index among equals. Nothing is taken when it does not fit.
 */
static bool take_new(const copus_cluster *c, int t, int g, int k, int *fr,
		     int *row)
{
	int N = c->num_nodes, best = -1, whole = k / g, rest = k % g, free_whole = 0;

	for (int n = 0; n < N; n++)
		if (c->nodes[n].gpu_type == t && fr[n] >= k &&
		    (best < 0 || fr[n] < fr[best]))
			best = n;
	if (best >= 0) {
		fr[best] -= k;
		row[best] += k;
		return true;
	}
	for (int n = 0; n < N; n++)
		free_whole += whole_free(c, t, g, fr, n);
	if (free_whole < whole)
		return false;
	if (rest > 0) {
		for (int n = 0; n < N; n++)
			if (c->nodes[n].gpu_type == t && fr[n] >= rest &&
			    !whole_free(c, t, g, fr, n) &&
			    (best < 0 || fr[n] < fr[best]))
				best = n;
		if (best < 0 && free_whole > whole)
			for (int n = N - 1; n >= 0; n--)
				if (whole_free(c, t, g, fr, n))
					best = n;
		if (best < 0)
			return false;
	}
	for (int n = 0; n < N && whole > 0; n++)
		if (n != best && whole_free(c, t, g, fr, n)) {
			fr[n] -= g;
			row[n] += g;
			whole--;
		}
	if (best >= 0) {
		fr[best] -= rest;
		row[best] += rest;
	}
	return true;
}

/* Free GPUs of type t (all of them, or 0 elsewhere). */
static void type_free(const copus_cluster *c, int t, int *fr)
{
	for (int n = 0; n < c->num_nodes; n++)
		fr[n] = c->nodes[n].usable && c->nodes[n].gpu_type == t ?
			c->nodes[n].gpus : 0;
}

/*
 * Place the sizes w[0..nw) chosen on type t into rows (n x N). First every
 * job that keeps its size keeps its nodes and the others are placed
 * largest first; if one does not fit, all are placed again largest first,
 * each on its own nodes when they are still free. A job that still does
 * not fit gets nothing (placed[] false).
 */
static void place_type(const copus_cluster *c, const copus_job *jobs, int t,
		       int g, struct want *w, size_t nw, int *fr, int *rows,
		       bool *placed)
{
	int N = c->num_nodes;
	bool ok = true;

	qsort(w, nw, sizeof(*w), want_cmp);
	type_free(c, t, fr);
	for (size_t i = 0; i < nw; i++)
		placed[w[i].j] = w[i].keep &&
			take_current(&jobs[w[i].j], fr,
				     rows + w[i].j * (size_t)N);
	for (size_t i = 0; i < nw && ok; i++)
		if (!placed[w[i].j])
			ok = placed[w[i].j] = take_new(c, t, g, w[i].k, fr,
						       rows + w[i].j * (size_t)N);
	if (ok)
		return;
	type_free(c, t, fr);
	for (size_t i = 0; i < nw; i++) {
		int *rw = rows + w[i].j * (size_t)N;

		memset(rw, 0, (size_t)N * sizeof(int));
		placed[w[i].j] = (w[i].keep &&
				  take_current(&jobs[w[i].j], fr, rw)) ||
				 take_new(c, t, g, w[i].k, fr, rw);
	}
}

/* -------------------------------------------------------------- round */

/* Scratch of one round. */
struct round {
	struct conf *cf;    /* configurations, job by job */
	size_t *off;        /* job j's at cf[off[j] .. off[j + 1]) */
	size_t *vjob;       /* the program's variables */
	int *vtype, *vgpus;
	double *vcoef;
	size_t *vconf;      /* variable -> configuration */
	long *choice;
	int *rows;          /* n x N GPUs per node */
	int *fr;
	bool *placed;
	struct want *w;
};

static void round_free(struct round *r)
{
	free(r->cf);
	free(r->off);
	free(r->vjob);
	free(r->vtype);
	free(r->vgpus);
	free(r->vcoef);
	free(r->vconf);
	free(r->choice);
	free(r->rows);
	free(r->fr);
	free(r->placed);
	free(r->w);
}

/* Is the job's current allocation on usable nodes of an allowed type? */
static bool alloc_ok(const copus_cluster *c, const copus_job *jb)
{
	if (jb->alloc_slots < 1 || !copus__type_allowed(jb, jb->alloc_type))
		return false;
	for (int i = 0; i < jb->alloc_slots; i++) {
		const copus_node *nd = &c->nodes[jb->alloc[i].node];

		if (!nd->usable || nd->gpu_type != jb->alloc_type)
			return false;
	}
	return true;
}

/*
 * Job jb's configurations with their normalised goodputs (Sia's
 * normalisation: the smallest goodput of any configuration is 1; a type
 * the job has no goodput for at all offers its smallest size at 1).
 */
static size_t job_confs(const struct copus__sia_state *s,
			const copus_cluster *c, const copus_job *jb,
			const struct tinfo *ti, struct conf *out)
{
	int T = c->num_types, src = -1, kmin, kmax;
	size_t n = 0;
	double lo = INFINITY;
	copus_model ms, mt;
	bool unknown[COPUS_MAX_GPU_TYPES];

	kmin = jb->min_gpus > 1 ? jb->min_gpus : 1;
	kmax = 2 * jb->max_gpus_had;
	if (kmax < 1)
		kmax = 1;
	if (kmax > jb->max_gpus)
		kmax = jb->max_gpus;
	for (int t = 0; t < T && src < 0; t++)
		if (copus__job_model(jb, t) != NULL)
			src = t;
	if (src >= 0)
		plan_model(jb, src, &ms);
	for (int t = 0; t < T; t++) {
		size_t first = n, kept = n;
		bool own;

		unknown[t] = false;
		if (!copus__type_allowed(jb, t) || ti[t].cap < 1)
			continue;
		n += (size_t)type_confs(jb, t, &ti[t], kmin, kmax, out + n);
		if (n == first)
			continue;
		own = plan_model(jb, t, &mt);
		for (size_t i = first; own || src >= 0 ? i < n : false; i++) {
			struct conf q = out[i];

			if (own) {
				q.value = best_goodput(&mt, q.nodes, q.gpus);
			} else {
				int g = ti[src].g, nodes = (q.gpus + g - 1) / g;
				double ratio = s->known[t][src] ?
					exp(s->log_ratio[t][src]) : 1.0;

				q.value = best_goodput(&ms, nodes, q.gpus) *
					  ratio;
			}
			if (!(q.value > 0.0))
				continue;
			if (q.value < lo)
				lo = q.value;
			out[kept++] = q;
		}
		/* Nothing known on t: its smallest size, at 1. */
		if (kept == first) {
			unknown[t] = true;
			kept = first + 1;
		}
		n = kept;
	}
	if (!isfinite(lo))
		lo = 1.0;
	for (size_t i = 0; i < n; i++) {
		struct conf *q = &out[i];

		q->value = unknown[q->type] ? 1.0 : q->value / lo;
		if (q->value < SIA_FLOOR)
			q->value = SIA_FLOOR;
	}
	return n;
}

/*
 * The coefficient of a configuration in the program: the normalised
 * goodput (times the restart factor unless it is the job's current
 * configuration) to the power p, rounded to two decimals and clipped as
 * Sia does, less the cost lambda_n of the job going without.
 */
static double coefficient(const struct copus__sia_state *s, double v,
			  double factor)
{
	double a = pow(fmax(v * factor, SIA_FLOOR), s->p);

	a = round(a * 100.0) / 100.0;
	if (a > SIA_CLIP)
		a = SIA_CLIP;
	return a - s->lambda_n;
}

static int sia_decide(void *state, const copus_policy_params *prm,
		      const copus_cluster *c, const copus_job *jobs, size_t n,
		      double now, struct copus__result *res)
{
	struct copus__sia_state *s = state;
	struct tinfo ti[COPUS_MAX_GPU_TYPES];
	struct round r;
	struct copus__sia_ip ip;
	int T = c->num_types, N = c->num_nodes, per_job = 0, rc = COPUS_ENOMEM;
	size_t nconf = 0, nv = 0;
	long cap[COPUS_MAX_GPU_TYPES];
	clock_t t0;

	memset(&r, 0, sizeof(r));
	memset(ti, 0, sizeof(ti));
	for (int k = 0; k < N; k++) {
		const copus_node *nd = &c->nodes[k];

		if (!nd->usable || nd->gpus < 1)
			continue;
		ti[nd->gpu_type].cap += nd->gpus;
		if (nd->gpus > ti[nd->gpu_type].g) {
			ti[nd->gpu_type].g = nd->gpus;
			ti[nd->gpu_type].full = 0;
		}
		if (nd->gpus == ti[nd->gpu_type].g)
			ti[nd->gpu_type].full++;
	}
	for (int t = 0; t < T; t++) {
		int single = 0;

		for (int k = 1; k <= ti[t].g; k *= 2)
			single++;
		per_job += single + 1 + ti[t].full;
		cap[t] = ti[t].cap;
	}
	r.cf = malloc((n * (size_t)per_job + 1) * sizeof(*r.cf));
	r.off = malloc((n + 1) * sizeof(*r.off));
	r.choice = malloc((n + 1) * sizeof(*r.choice));
	r.rows = calloc(n * (size_t)N + 1, sizeof(*r.rows));
	r.fr = malloc(((size_t)N + 1) * sizeof(*r.fr));
	r.placed = calloc(n + 1, sizeof(*r.placed));
	r.w = malloc((n + 1) * sizeof(*r.w));
	if (!r.cf || !r.off || !r.choice || !r.rows || !r.fr || !r.placed ||
	    !r.w)
		goto out;
	learn_ratios(s, c, jobs, n);
	for (size_t j = 0; j < n; j++) {
		r.off[j] = nconf;
		nconf += job_confs(s, c, &jobs[j], ti, r.cf + nconf);
	}
	r.off[n] = nconf;
	r.vjob = malloc((nconf + 1) * sizeof(*r.vjob));
	r.vtype = malloc((nconf + 1) * sizeof(*r.vtype));
	r.vgpus = malloc((nconf + 1) * sizeof(*r.vgpus));
	r.vcoef = malloc((nconf + 1) * sizeof(*r.vcoef));
	r.vconf = malloc((nconf + 1) * sizeof(*r.vconf));
	if (!r.vjob || !r.vtype || !r.vgpus || !r.vcoef || !r.vconf)
		goto out;
	for (size_t j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];
		bool has = alloc_ok(c, jb);
		int kcur = has ? current_gpus(jb) : 0;
		double f = has ? restart_factor(jb, now, prm->restart_delay) :
			1.0;

		for (size_t i = r.off[j]; i < r.off[j + 1]; i++) {
			const struct conf *q = &r.cf[i];
			bool same = has && q->type == jb->alloc_type &&
				    q->gpus == kcur;
			double a = coefficient(s, q->value, same ? 1.0 : f);

			/* A variable that cannot beat leaving the job out
			 * never enters an optimum. */
			if (s->p < 0 ? a >= 0.0 : a <= 0.0)
				continue;
			r.vjob[nv] = j;
			r.vtype[nv] = q->type;
			r.vgpus[nv] = q->gpus;
			r.vcoef[nv] = a;
			r.vconf[nv] = i;
			nv++;
		}
	}
	ip = (struct copus__sia_ip){
		.njobs = n, .ntypes = T, .nvars = nv, .job = r.vjob,
		.type = r.vtype, .gpus = r.vgpus, .coef = r.vcoef, .cap = cap,
		.maximize = s->p > 0, .time_limit_ms = s->time_limit_ms,
	};
	t0 = clock();
	s->last_status = s->solve(&ip, r.choice, NULL);
	s->last_solve_ms = 1e3 * (double)(clock() - t0) / CLOCKS_PER_SEC;
	s->last_vars = nv;
	if (s->last_status == COPUS_ENOMEM) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	if (s->last_status != COPUS_OK) {
		/* No optimum: every job keeps what it holds, if it still can. */
		memset(r.fr, 0, (size_t)N * sizeof(int));
		for (int k = 0; k < N; k++)
			r.fr[k] = c->nodes[k].usable ? c->nodes[k].gpus : 0;
		for (size_t j = 0; j < n; j++) {
			const copus_job *jb = &jobs[j];

			r.placed[j] = alloc_ok(c, jb) &&
				take_current(jb, r.fr, r.rows + j * (size_t)N);
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "sia: no solution this round, %s",
				 r.placed[j] ? "keeps its GPUs" : "waits");
		}
	} else {
		for (int t = 0; t < T; t++) {
			size_t nw = 0;

			for (size_t j = 0; j < n; j++) {
				const copus_job *jb = &jobs[j];
				const struct conf *q;

				if (r.choice[j] < 0)
					continue;
				q = &r.cf[r.vconf[r.choice[j]]];
				if (q->type != t)
					continue;
				r.w[nw++] = (struct want){
					j, q->gpus,
					alloc_ok(c, jb) && jb->alloc_type == t &&
					current_gpus(jb) == q->gpus };
			}
			if (nw > 0)
				place_type(c, jobs, t, ti[t].g, r.w, nw, r.fr,
					   r.rows, r.placed);
		}
		for (size_t j = 0; j < n; j++) {
			const struct conf *q = r.choice[j] >= 0 ?
				&r.cf[r.vconf[r.choice[j]]] : NULL;

			if (q == NULL)
				snprintf(res->reasons[j],
					 sizeof(res->reasons[j]),
					 "sia: waits (%zu configurations)",
					 r.off[j + 1] - r.off[j]);
			else if (!r.placed[j])
				snprintf(res->reasons[j],
					 sizeof(res->reasons[j]),
					 "sia: %d GPUs chosen, no room on nodes",
					 q->gpus);
			else
				snprintf(res->reasons[j],
					 sizeof(res->reasons[j]),
					 "sia: %d GPUs, goodput x%.2f", q->gpus,
					 q->value);
		}
	}
	/* The rows, in node order, as the result's slots. */
	res->used = 0;
	for (size_t j = 0; j < n; j++) {
		const int *rw = r.rows + j * (size_t)N;
		int t = -1;

		res->off[j] = res->used;
		res->cnt[j] = 0;
		res->types[j] = -1;
		if (!r.placed[j])
			continue;
		for (int k = 0; k < N; k++) {
			if (rw[k] == 0)
				continue;
			if (res->used == res->cap) {
				rc = COPUS_ESTATE;
				goto out;
			}
			t = c->nodes[k].gpu_type;
			res->slots[res->used++] = (copus_slot){ k, rw[k] };
			res->cnt[j]++;
		}
		res->types[j] = t;
	}
	rc = COPUS_OK;
out:
	round_free(&r);
	return rc;
}

const struct copus__policy_ops copus__sia_ops = {
	.name = "sia",
	.traits = { .elastic = true, .picks_batch = true,
		    .models = COPUS_MODELS_LEARNED },
	.create = sia_create,
	.destroy = sia_destroy,
	.decide = sia_decide,
};
