/*
 * The measured profiles of a model (Pollux's trace layout) and the true
 * behaviour the simulator derives from them: step and sync time of any
 * placement, gradient statistics and progress per epoch.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/*
 * Completion epochs and per-model settings of Pollux's simulator: the
 * epochs a job trains for; for yolov3, the largest micro-batch that fits a
 * GPU (the tables go further than the model fits in memory); for ncf, the
 * batch it keeps under a policy that picks batches and the one GPU that an
 * elastic policy may give it.
 */
static const struct app_default {
	const char *name;
	int epochs;
	int max_local;
	double fixed_batch; /* 0: a policy that picks batches may */
	int max_gpus;	    /* 0: as many as the batch allows */
} app_defaults[] = {
	{ "bert", 2, 0, 0, 0 },		{ "cifar10", 100, 0, 0, 0 },
	{ "ncf", 10, 0, 32768, 1 },	{ "imagenet", 90, 0, 0, 0 },
	{ "deepspeech2", 80, 0, 0, 0 }, { "yolov3", 50, 8, 0, 0 },
};

/* The settings of the model called name, or NULL for a model not listed. */
static const struct app_default *app_default(const char *name)
{
	for (size_t i = 0; i < sizeof(app_defaults) / sizeof(app_defaults[0]);
	     i++)
		if (strcmp(app_defaults[i].name, name) == 0)
			return &app_defaults[i];
	return NULL;
}

int sim_app_epochs(const char *name)
{
	const struct app_default *d = app_default(name);

	return d != NULL ? d->epochs : 0;
}

/* The largest micro-batch a placement row may hold (as copus/hint.h). */
#define LOCAL_BSZ_MAX 1e6

static int prow_cmp(const void *a, const void *b)
{
	const struct prow *x = a, *y = b;
	int c = strcmp(x->placement, y->placement);

	if (c)
		return c;
	if (x->nodes != y->nodes)
		return x->nodes - y->nodes;
	if (x->replicas != y->replicas)
		return x->replicas - y->replicas;
	return x->local < y->local ? -1 : x->local > y->local;
}

static int load_placements(struct ptable *t, const char *path, char *err,
			   size_t len)
{
	struct csv c;
	int cp, cl, cs, cy, rc;

	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((cp = sim_csv_col(&c, "placement", err, len)) < 0 ||
	    (cl = sim_csv_col(&c, "local_bsz", err, len)) < 0 ||
	    (cs = sim_csv_col(&c, "step_time", err, len)) < 0 ||
	    (cy = sim_csv_col(&c, "sync_time", err, len)) < 0)
		goto out;
	t->rows = calloc(c.nrows + 1, sizeof(*t->rows));
	if (t->rows == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.nrows; i++) {
		struct prow *p = &t->rows[t->n];
		const char *s = c.rows[i][cp];
		size_t l = strlen(s);

		if (l == 0 || l >= sizeof(p->placement) ||
		    strspn(s, "123456789") != l) {
			snprintf(err, len,
				 "%s:%ld: column %d (placement): '%s' is not "
				 "a string of GPUs per node (digits 1-9)",
				 path, c.lines[i], cp + 1, s);
			goto out;
		}
		memcpy(p->placement, s, l + 1);
		p->nodes = (int)l;
		for (size_t k = 0; k < l; k++)
			p->replicas += s[k] - '0';
		if (sim_csv_double(&c, i, cl, &p->local, err, len) ||
		    sim_csv_double(&c, i, cs, &p->step, err, len) ||
		    sim_csv_double(&c, i, cy, &p->sync, err, len))
			goto out;
		/*
		 * The micro-batch becomes an int (the model's limits, the
		 * fit's observations): a larger one would not convert.
		 */
		if (!(p->local >= 1) || p->local > LOCAL_BSZ_MAX ||
		    !(p->step > 0) || !(p->sync >= 0) || p->sync > p->step) {
			snprintf(err, len,
				 "%s:%ld: 1 <= local_bsz <= %.0f, step_time > 0 "
				 "and 0 <= sync_time <= step_time expected",
				 path, c.lines[i], LOCAL_BSZ_MAX);
			goto out;
		}
		t->n++;
	}
	if (t->n == 0) {
		snprintf(err, len, "%s: no measurements", path);
		goto out;
	}
	qsort(t->rows, t->n, sizeof(*t->rows), prow_cmp);
	rc = COPUS_OK;
out:
	sim_csv_free(&c);
	return rc;
}

/* Append the scalability rows and build the grid of means. */
static int load_grid(struct ptable *t, const char *path, char *err, size_t len)
{
	struct csv c;
	int cn, cr, cl, cs, cy, rc;
	size_t cap;

	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((cn = sim_csv_col(&c, "num_nodes", err, len)) < 0 ||
	    (cr = sim_csv_col(&c, "num_replicas", err, len)) < 0 ||
	    (cl = sim_csv_col(&c, "local_bsz", err, len)) < 0 ||
	    (cs = sim_csv_col(&c, "step_time", err, len)) < 0 ||
	    (cy = sim_csv_col(&c, "sync_time", err, len)) < 0)
		goto out;
	cap = t->n + c.nrows + 1;
	t->grid = calloc(cap, sizeof(*t->grid));
	if (t->grid == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	/* Means of the placement rows per (nodes, replicas, local). */
	{
		struct prow *tmp = calloc(t->n + 1, sizeof(*tmp));

		if (tmp == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < t->n; i++) {
			tmp[i] = t->rows[i];
			tmp[i].placement[0] = '\0';
		}
		qsort(tmp, t->n, sizeof(*tmp), prow_cmp);
		for (size_t i = 0; i < t->n;) {
			size_t k = i;
			struct prow m = tmp[i];

			m.step = m.sync = 0;
			while (k < t->n && tmp[k].nodes == m.nodes &&
			       tmp[k].replicas == m.replicas &&
			       tmp[k].local == m.local) {
				m.step += tmp[k].step;
				m.sync += tmp[k].sync;
				k++;
			}
			m.step /= (double)(k - i);
			m.sync /= (double)(k - i);
			t->grid[t->ngrid++] = m;
			i = k;
		}
		free(tmp);
	}
	for (size_t i = 0; i < c.nrows; i++) {
		struct prow *p = &t->grid[t->ngrid];
		double n, r;

		if (sim_csv_double(&c, i, cn, &n, err, len) ||
		    sim_csv_double(&c, i, cr, &r, err, len) ||
		    sim_csv_double(&c, i, cl, &p->local, err, len) ||
		    sim_csv_double(&c, i, cs, &p->step, err, len) ||
		    sim_csv_double(&c, i, cy, &p->sync, err, len))
			goto out;
		if (n < 1 || r < n || n != floor(n) || r != floor(r) ||
		    r > 1e6 || !(p->local >= 1) || !(p->step > 0) ||
		    !(p->sync >= 0)) {
			snprintf(err, len,
				 "%s:%ld: 1 <= num_nodes <= num_replicas "
				 "(integers), local_bsz >= 1, step_time > 0 "
				 "expected",
				 path, c.lines[i]);
			goto out;
		}
		p->nodes = (int)n;
		p->replicas = (int)r;
		t->ngrid++;
	}
	qsort(t->grid, t->ngrid, sizeof(*t->grid), prow_cmp);
	rc = COPUS_OK;
out:
	sim_csv_free(&c);
	return rc;
}

static int valid_cmp(const void *a, const void *b)
{
	const struct valid *x = a, *y = b;

	return x->batch < y->batch ? -1 : x->batch > y->batch;
}

static int load_valid(struct valid *v, const char *path, double batch,
		      char *err, size_t len)
{
	struct csv c;
	int cp, ci, cs, cv, rc;

	memset(v, 0, sizeof(*v));
	v->batch = batch;
	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((cp = sim_csv_col(&c, "progress", err, len)) < 0 ||
	    (ci = sim_csv_col(&c, "iteration", err, len)) < 0 ||
	    (cs = sim_csv_col(&c, "grad_sqr", err, len)) < 0 ||
	    (cv = sim_csv_col(&c, "grad_var", err, len)) < 0)
		goto out;
	if (c.nrows == 0) {
		snprintf(err, len, "%s: no epochs", path);
		goto out;
	}
	v->progress = calloc(c.nrows, sizeof(double));
	v->iteration = calloc(c.nrows, sizeof(double));
	v->sqr = calloc(c.nrows, sizeof(double));
	v->var = calloc(c.nrows, sizeof(double));
	if (!v->progress || !v->iteration || !v->sqr || !v->var) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.nrows; i++) {
		if (sim_csv_double(&c, i, cp, &v->progress[i], err, len) ||
		    sim_csv_double(&c, i, ci, &v->iteration[i], err, len) ||
		    sim_csv_double(&c, i, cs, &v->sqr[i], err, len) ||
		    sim_csv_double(&c, i, cv, &v->var[i], err, len))
			goto out;
		if (!(v->progress[i] > (i ? v->progress[i - 1] : 0.0)) ||
		    v->sqr[i] < 0 || v->var[i] < 0) {
			snprintf(err, len,
				 "%s:%ld: progress must grow, grad_sqr and "
				 "grad_var must be >= 0",
				 path, c.lines[i]);
			goto out;
		}
	}
	v->nepochs = c.nrows;
	rc = COPUS_OK;
out:
	sim_csv_free(&c);
	return rc;
}

static void valid_free(struct valid *v)
{
	free(v->progress);
	free(v->iteration);
	free(v->sqr);
	free(v->var);
}

void sim_app_free(struct app *a)
{
	if (a == NULL)
		return;
	for (int t = 0; t < SIM_MAX_TYPES; t++) {
		free(a->tab[t].rows);
		free(a->tab[t].grid);
	}
	for (size_t i = 0; i < a->nv; i++)
		valid_free(&a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

static int fit_oracle(struct app *a, int t)
{
	struct ptable *tab = &a->tab[t];
	copus_observation *obs = calloc(tab->n, sizeof(*obs));
	int rc;

	if (obs == NULL)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < tab->n; i++) {
		obs[i].nodes = tab->rows[i].nodes;
		obs[i].replicas = tab->rows[i].replicas;
		obs[i].local = (int)tab->rows[i].local;
		obs[i].accum_steps = 0;
		obs[i].compute_time = tab->rows[i].step - tab->rows[i].sync;
		obs[i].step_time = tab->rows[i].step;
		if (obs[i].compute_time <= 0)
			obs[i].compute_time = 1e-6;
	}
	rc = copus_fit(obs, tab->n, &a->oracle[t].perf, NULL);
	free(obs);
	if (rc == COPUS_OK) {
		a->oracle[t].limits.init_batch = a->init_batch;
		a->oracle[t].limits.max_batch = a->max_batch;
		a->oracle[t].limits.min_local = a->min_local;
		a->oracle[t].limits.max_local = a->max_local;
		a->oracle[t].limits.accumulation = true;
		a->oracle[t].grad.sqr = a->v[0].sqr[0];
		a->oracle[t].grad.var = a->v[0].var[0];
		a->has_oracle[t] = true;
	}
	return rc;
}

/* Row i's restart cost in column col of c: seconds in [0, 86400]. */
static int restart_delay_at(const struct csv *c, size_t i, int col, double *v,
			    char *err, size_t len)
{
	if (sim_csv_double(c, i, col, v, err, len) != COPUS_OK)
		return COPUS_EPARSE;
	if (!(*v >= 0.0) || *v > 86400.0) {
		snprintf(err, len,
			 "%s:%ld: column %d (restart_delay): '%s' is not in "
			 "[0, 86400] seconds",
			 c->path, c->lines[i], col + 1, c->rows[i][col]);
		return COPUS_EPARSE;
	}
	return COPUS_OK;
}

int sim_app_rules(struct app *apps, size_t napps, const char *path, char *err,
		  size_t len)
{
	struct csv c;
	int ca, cs, cr, rc;

	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((ca = sim_csv_col(&c, "application", err, len)) < 0 ||
	    (cs = sim_csv_col(&c, "slowdown", err, len)) < 0 ||
	    (cr = sim_csv_col(&c, "restart_delay", err, len)) < 0)
		goto out;
	for (size_t i = 0; i < c.nrows; i++) {
		double sd, rd;

		if (sim_csv_double(&c, i, cs, &sd, err, len) != COPUS_OK ||
		    restart_delay_at(&c, i, cr, &rd, err, len) != COPUS_OK)
			goto out;
		if (!(sd > 0.0) || sd > 1000.0) {
			snprintf(err, len,
				 "%s:%ld: column %d (slowdown): '%s' "
				 "is not in (0, 1000]",
				 path, c.lines[i], cs + 1, c.rows[i][cs]);
			goto out;
		}
		for (size_t a = 0; a < napps; a++)
			if (strcmp(apps[a].name, c.rows[i][ca]) == 0) {
				apps[a].slowdown = sd;
				apps[a].restart_delay = rd;
			}
	}
	rc = COPUS_OK;
out:
	sim_csv_free(&c);
	return rc;
}

void sim_delays_free(struct sim_delays *d)
{
	free(d->first);
	free(d->rescale);
	memset(d, 0, sizeof(*d));
}

int sim_restart_delays(const char *path, struct sim_delays *d, char *err,
		       size_t len)
{
	struct csv c;
	int col, cf = -1, rc;

	memset(d, 0, sizeof(*d));
	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((col = sim_csv_col(&c, "restart_delay", err, len)) < 0)
		goto out;
	for (int k = 0; k < c.ncols; k++)
		if (strcmp(c.header[k], "first") == 0)
			cf = k;
	if (c.nrows == 0) {
		snprintf(err, len, "%s: no restart_delay rows", path);
		goto out;
	}
	d->first = malloc(c.nrows * sizeof(*d->first));
	d->rescale = malloc(c.nrows * sizeof(*d->rescale));
	if (d->first == NULL || d->rescale == NULL) {
		snprintf(err, len, "%s: out of memory", path);
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.nrows; i++) {
		const char *f = cf >= 0 ? c.rows[i][cf] : "";
		double v;

		if (restart_delay_at(&c, i, col, &v, err, len) != COPUS_OK)
			goto out;
		if (cf >= 0 && strcmp(f, "0") != 0 && strcmp(f, "1") != 0) {
			snprintf(err, len,
				 "%s:%ld: column %d (first): '%s' is not 0 "
				 "or 1",
				 path, c.lines[i], cf + 1, f);
			goto out;
		}
		if (cf < 0 || f[0] == '1')
			d->first[d->nfirst++] = v;
		if (cf < 0 || f[0] == '0')
			d->rescale[d->nrescale++] = v;
	}
	rc = COPUS_OK;
out:
	if (rc != COPUS_OK)
		sim_delays_free(d);
	sim_csv_free(&c);
	return rc;
}

int sim_app_load(struct app *a, const char *dir, const char *name,
		 const char *const *types, int ntypes, char *err, size_t len)
{
	char path[1024];
	DIR *d = NULL;
	struct dirent *de;
	const struct app_default *def;
	int rc;

	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->slowdown = 1.0;
	a->restart_delay = -1.0;
	for (int t = 0; t < ntypes; t++) {
		const char *sep = types[t][0] ? "-" : "";

		snprintf(path, sizeof(path), "%s/%s/placements%s%s.csv", dir,
			 name, sep, types[t]);
		if ((rc = load_placements(&a->tab[t], path, err, len)))
			goto fail;
		snprintf(path, sizeof(path), "%s/%s/scalability%s%s.csv", dir,
			 name, sep, types[t]);
		if ((rc = load_grid(&a->tab[t], path, err, len)))
			goto fail;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	d = opendir(path);
	if (d == NULL) {
		snprintf(err, len, "%s: cannot open the profile directory",
			 path);
		rc = COPUS_EIO;
		goto fail;
	}
	while ((de = readdir(d)) != NULL) {
		char *end;
		long b;
		struct valid *nv;

		if (strncmp(de->d_name, "validation-", 11) != 0)
			continue;
		b = strtol(de->d_name + 11, &end, 10);
		if (b < 1 || strcmp(end, ".csv") != 0)
			continue;
		nv = realloc(a->v, (a->nv + 1) * sizeof(*nv));
		if (nv == NULL) {
			rc = COPUS_ENOMEM;
			goto fail;
		}
		a->v = nv;
		snprintf(path, sizeof(path), "%s/%s/%s", dir, name, de->d_name);
		rc = load_valid(&a->v[a->nv], path, (double)b, err, len);
		if (rc) {
			valid_free(&a->v[a->nv]);
			goto fail;
		}
		a->nv++;
	}
	closedir(d);
	d = NULL;
	if (a->nv == 0) {
		snprintf(err, len, "%s/%s: no validation-<batch>.csv files",
			 dir, name);
		rc = COPUS_ENODATA;
		goto fail;
	}
	qsort(a->v, a->nv, sizeof(*a->v), valid_cmp);
	/*
	 * Two files of one batch ("validation-8.csv", "validation-08.csv")
	 * would leave the directory's order to pick the one used.
	 */
	for (size_t i = 1; i < a->nv; i++) {
		if (a->v[i].batch == a->v[i - 1].batch) {
			snprintf(err, len,
				 "%s/%s: two validation files of "
				 "batch %.0f",
				 dir, name, a->v[i].batch);
			rc = COPUS_EPARSE;
			goto fail;
		}
	}
	a->init_batch = a->v[0].batch;
	a->max_batch = a->v[a->nv - 1].batch;
	a->min_local = (int)a->tab[0].rows[0].local;
	a->max_local = 0;
	for (size_t i = 0; i < a->tab[0].n; i++) {
		if (a->tab[0].rows[i].local < a->min_local)
			a->min_local = (int)a->tab[0].rows[i].local;
		if (a->tab[0].rows[i].local > a->max_local)
			a->max_local = (int)a->tab[0].rows[i].local;
	}
	def = app_default(name);
	if (def != NULL && def->max_local > 0)
		a->max_local = def->max_local;
	a->fixed_batch = def != NULL ? def->fixed_batch : 0;
	a->max_gpus = def != NULL ? def->max_gpus : 0;
	a->max_epochs = sim_app_epochs(name);
	for (size_t i = 0; i < a->nv; i++)
		if (a->max_epochs == 0 ||
		    (size_t)a->max_epochs > a->v[i].nepochs)
			a->max_epochs = (int)a->v[i].nepochs;
	for (int t = 0; t < ntypes; t++)
		if (fit_oracle(a, t) != COPUS_OK)
			a->has_oracle[t] = false;
	return COPUS_OK;
fail:
	if (d)
		closedir(d);
	sim_app_free(a);
	return rc;
}

/*
 * Linear interpolation over the local batch among rows [lo, hi) of one
 * shape, sorted by local. Outside the measured range the nearest
 * measurement is used (Pollux's interpolator would fail there; a clamp
 * keeps the time of a slightly larger micro-batch at the largest one
 * measured, an optimistic but bounded choice).
 */
static void interp_local(const struct prow *r, size_t lo, size_t hi,
			 double local, double *step, double *sync)
{
	size_t k;

	if (local <= r[lo].local) {
		*step = r[lo].step;
		*sync = r[lo].sync;
		return;
	}
	if (local >= r[hi - 1].local) {
		*step = r[hi - 1].step;
		*sync = r[hi - 1].sync;
		return;
	}
	for (k = lo + 1; k < hi && r[k].local < local; k++)
		;
	{
		double w = (local - r[k - 1].local) /
			   (r[k].local - r[k - 1].local);

		*step = r[k - 1].step + w * (r[k].step - r[k - 1].step);
		*sync = r[k - 1].sync + w * (r[k].sync - r[k - 1].sync);
	}
}

/* Interpolate over the replicas of one node level, then the local batch. */
static void interp_level(const struct ptable *t, int nodes, double replicas,
			 double local, double *step, double *sync)
{
	int r0 = -1, r1 = -1;
	double s0, y0, s1, y1;
	size_t lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;

	for (size_t i = 0; i < t->ngrid; i++) {
		const struct prow *g = &t->grid[i];

		if (g->nodes != nodes)
			continue;
		if (g->replicas <= replicas && g->replicas > r0)
			r0 = g->replicas;
		if (g->replicas >= replicas && (r1 < 0 || g->replicas < r1))
			r1 = g->replicas;
	}
	/* Outside the measured replicas the nearest level is used. */
	if (r0 < 0)
		r0 = r1;
	if (r1 < 0)
		r1 = r0;
	for (size_t i = 0; i < t->ngrid; i++) {
		const struct prow *g = &t->grid[i];

		if (g->nodes != nodes)
			continue;
		if (g->replicas == r0) {
			if (hi0 == 0)
				lo0 = i;
			hi0 = i + 1;
		}
		if (g->replicas == r1) {
			if (hi1 == 0)
				lo1 = i;
			hi1 = i + 1;
		}
	}
	interp_local(t->grid, lo0, hi0, local, &s0, &y0);
	interp_local(t->grid, lo1, hi1, local, &s1, &y1);
	if (r1 == r0) {
		*step = s0;
		*sync = y0;
	} else {
		double w = (replicas - r0) / (double)(r1 - r0);

		*step = s0 + w * (s1 - s0);
		*sync = y0 + w * (y1 - y0);
	}
}

int sim_app_throughput(const struct app *a, int t, const int *placement, int nn,
		       double local, double *step, double *sync)
{
	const struct ptable *tab = &a->tab[t];
	char id[24], best[24], rot[24];
	int l = 0, replicas = 0;

	for (int k = 0; k < nn; k++) {
		if (placement[k] <= 0)
			continue;
		replicas += placement[k];
		if (l < (int)sizeof(id) - 1)
			id[l] = placement[k] > 9 ? ':'
						 : (char)('0' + placement[k]);
		l++;
	}
	if (l == 0 || local <= 0)
		return COPUS_EINVAL;
	if (l < (int)sizeof(id)) {
		/* The smallest rotation names a measured placement. */
		id[l] = '\0';
		memcpy(best, id, (size_t)l + 1);
		for (int s = 1; s < l; s++) {
			memcpy(rot, id + s, (size_t)(l - s));
			memcpy(rot + l - s, id, (size_t)s);
			rot[l] = '\0';
			if (strcmp(rot, best) < 0)
				memcpy(best, rot, (size_t)l + 1);
		}
		for (size_t i = 0; i < tab->n; i++) {
			if (strcmp(tab->rows[i].placement, best) != 0)
				continue;
			size_t k = i;

			while (k < tab->n &&
			       strcmp(tab->rows[k].placement, best) == 0)
				k++;
			interp_local(tab->rows, i, k, local, step, sync);
			return COPUS_OK;
		}
	}
	/*
	 * Not measured: interpolate linearly over nodes between the two
	 * nearest measured node counts, and within each over replicas and the
	 * local batch. Beyond the largest (or below the smallest) measured
	 * node count, the nearest one is used: the hull is not extrapolated.
	 */
	{
		int n0 = -1, n1 = -1;
		double s0, y0, s1, y1;

		for (size_t i = 0; i < tab->ngrid; i++) {
			int n = tab->grid[i].nodes;

			if (n <= l && n > n0)
				n0 = n;
			if (n >= l && (n1 < 0 || n < n1))
				n1 = n;
		}
		if (n0 < 0)
			n0 = n1;
		if (n1 < 0)
			n1 = n0;
		if (n0 < 0)
			return COPUS_ENODATA;
		interp_level(tab, n0, replicas, local, &s0, &y0);
		if (n1 == n0) {
			*step = s0;
			*sync = y0;
		} else {
			double w = (double)(l - n0) / (double)(n1 - n0);

			interp_level(tab, n1, replicas, local, &s1, &y1);
			*step = s0 + w * (s1 - s0);
			*sync = y0 + w * (y1 - y0);
		}
	}
	return COPUS_OK;
}

/* The validated batch sizes around 'batch' (clamped to the measured). */
static void bracket(const struct app *a, double batch, size_t *lo, size_t *hi,
		    double *w)
{
	size_t i;

	if (batch <= a->v[0].batch) {
		*lo = *hi = 0;
		*w = 0;
		return;
	}
	if (batch >= a->v[a->nv - 1].batch) {
		*lo = *hi = a->nv - 1;
		*w = 0;
		return;
	}
	for (i = 1; i < a->nv && a->v[i].batch < batch; i++)
		;
	*lo = i - 1;
	*hi = i;
	*w = (batch - a->v[i - 1].batch) / (a->v[i].batch - a->v[i - 1].batch);
}

static size_t eidx(const struct valid *v, int epoch)
{
	if (epoch < 0)
		return 0;
	return (size_t)epoch < v->nepochs ? (size_t)epoch : v->nepochs - 1;
}

void sim_app_grad(const struct app *a, double batch, int epoch, double *sqr,
		  double *var)
{
	size_t lo, hi;
	double w;
	const struct valid *l, *h;

	bracket(a, batch, &lo, &hi, &w);
	l = &a->v[lo];
	h = &a->v[hi];
	*sqr = l->sqr[eidx(l, epoch)] +
	       w * (h->sqr[eidx(h, epoch)] - l->sqr[eidx(l, epoch)]);
	*var = l->var[eidx(l, epoch)] +
	       w * (h->var[eidx(h, epoch)] - l->var[eidx(l, epoch)]);
}

double sim_app_iteration(const struct app *a, double batch, int epoch)
{
	size_t lo, hi;
	double w;
	const struct valid *l, *h;

	bracket(a, batch, &lo, &hi, &w);
	l = &a->v[lo];
	h = &a->v[hi];
	return l->iteration[eidx(l, epoch)] +
	       w * (h->iteration[eidx(h, epoch)] -
		    l->iteration[eidx(l, epoch)]);
}

double sim_app_progress(const struct app *a, int epoch)
{
	double p = INFINITY;

	if (epoch <= 0)
		return 0.0;
	for (size_t i = 0; i < a->nv; i++) {
		double x = a->v[i].progress[eidx(&a->v[i], epoch - 1)];

		if (x < p)
			p = x;
	}
	return p;
}
