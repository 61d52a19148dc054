/*
 * copus-plan's comm.csv: measured collectives, fitted into each GPU
 * type's communication constants.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan-read.h"

/* ----------------------------------------------------------- collectives */

/* Weighted least-squares sums of t = alpha + x inv_beta, weights 1/t^2
 * (relative error). */
struct lsq {
	double w, wx, wxx, wt, wxt;
	long n;
};

static void lsq_add(struct lsq *s, double x, double t)
{
	double w = 1.0 / (t * t);

	s->w += w;
	s->wx += w * x;
	s->wxx += w * x * x;
	s->wt += w * t;
	s->wxt += w * x * t;
	s->n++;
}

static void lsq_solve(const struct lsq *s, double *alpha, double *inv_beta)
{
	double det = s->w * s->wxx - s->wx * s->wx;
	double a = 0.0, b = 0.0;

	if (det > 0.0) {
		a = (s->wxx * s->wt - s->wx * s->wxt) / det;
		b = (s->w * s->wxt - s->wx * s->wt) / det;
	}
	if (!(det > 0.0) || a < 0.0) {
		a = 0.0;
		b = s->wxx > 0.0 ? s->wxt / s->wxx : 0.0;
	}
	if (b < 0.0) {
		b = 0.0;
		a = s->w > 0.0 ? s->wt / s->w : 0.0;
	}
	*alpha = a;
	*inv_beta = b;
}

static int collective_of(const char *s)
{
	static const char *names[COPUS_COLL_COUNT] = { "all-reduce",
						       "all-gather",
						       "reduce-scatter",
						       "all-to-all", "send" };

	for (int c = 0; c < COPUS_COLL_COUNT; c++)
		if (strcmp(s, names[c]) == 0)
			return c;
	return -1;
}

/* Split a comm.csv line into 6 fields; the groups field may be quoted. */
static int split_comm(char *line, char *f[6])
{
	int n = 0;
	char *p = line;

	while (n < 6) {
		if (*p == '"') {
			char *e = strchr(p + 1, '"');
			if (e == NULL)
				return -1;
			f[n++] = p + 1;
			*e = '\0';
			p = e + 1;
			if (*p == ',')
				p++;
			else if (*p != '\0')
				return -1;
			else
				break;
		} else {
			char *e = strchr(p, ',');
			f[n++] = p;
			if (e == NULL)
				break;
			*e = '\0';
			p = e + 1;
		}
	}
	return n;
}

/* Nodes whose groups comm_share counts. */
#define SHARE_NODES 64

/*
 * The shape of the first group of a "[[0,1],[2,3]]" list (ranks in blocks
 * of gpn): its ranks, the nodes it spans and its ranks on one node, and
 * groups_per_node, the most groups that span nodes with ranks on one
 * node: they run at once and share that node's link, as the planner
 * prices them. *across: whether any group holds ranks of two nodes.
 * "null" is one pair of ranks, on two nodes when there are several.
 */
static int groups_of(const char *s, int nodes, int gpn,
		     copus_planner_group *grp, int *across)
{
	int depth = 0, first_size = 0, cur = 0, groups = 0, lo = 0, hi = 0;
	int on_node[SHARE_NODES] = { 0 }, first_nodes = 1, share = 1;
	uint64_t touched = 0;
	const char *p = s;

	*across = 0;
	if (strcmp(s, "null") == 0) {
		*across = nodes > 1;
		*grp = (copus_planner_group){ 2, 1 + *across, 2 - *across, 1 };
		return 0;
	}
	while (*p) {
		if (*p == '[') {
			depth++;
			if (depth == 2) {
				cur = 0;
				lo = 1 << 30;
				hi = -1;
				touched = 0;
			}
			p++;
		} else if (*p == ']') {
			if (depth == 2) {
				if (cur == 0)
					return -1;
				if (groups++ == 0) {
					first_size = cur;
					first_nodes =
						__builtin_popcountll(touched);
				}
				if (lo / gpn != hi / gpn) {
					*across = 1;
					for (int k = 0; k < SHARE_NODES; k++)
						if ((touched >> k & 1) &&
						    ++on_node[k] > share)
							share = on_node[k];
				}
			}
			depth--;
			p++;
		} else if (*p == ',' || *p == ' ') {
			p++;
		} else if (isdigit((unsigned char)*p) && depth == 2) {
			char *e;
			long r = strtol(p, &e, 10);
			if (r < 0 || r >= (long)nodes * gpn)
				return -1;
			cur++;
			if (r / gpn < SHARE_NODES)
				touched |= (uint64_t)1 << (r / gpn);
			if (r < lo)
				lo = (int)r;
			if (r > hi)
				hi = (int)r;
			p = e;
		} else {
			return -1;
		}
	}
	if (depth != 0 || groups == 0)
		return -1;
	if (first_nodes < 1)
		first_nodes = 1;
	grp->ranks = first_size;
	grp->nodes = first_nodes;
	grp->ranks_per_node = (first_size + first_nodes - 1) / first_nodes;
	grp->groups_per_node = first_nodes > 1 ? share : 1;
	return 0;
}

static double coll_factor(int c, int n)
{
	if (c == COPUS_COLL_ALL_REDUCE)
		return 2.0 * (n - 1) / n;
	if (c == COPUS_COLL_SEND)
		return 1.0;
	return (double)(n - 1) / n;
}

/* ------------------------------------------------------------- the fit */

/*
 * The rows of one shape: a GPU type, a collective and a group shape of one
 * cell, with the weighted sums of its times against f(n) x bytes, and
 * whether it was measured over InfiniBand or over the plain network of a
 * type whose other cells were (socket).
 */
struct shape_rows {
	int gpu, coll, ib, socket;
	copus_planner_group grp;
	struct lsq sums;
};

struct shapes {
	struct shape_rows *v;
	size_t n, cap;
};

static struct shape_rows *shape_find(struct shapes *t, int gpu, int coll,
				     int ib, const copus_planner_group *grp)
{
	/* Rows of one shape come together: look at the last first. */
	for (size_t k = t->n; k-- > 0;) {
		struct shape_rows *r = &t->v[k];
		if (r->gpu == gpu && r->coll == coll && r->ib == ib &&
		    memcmp(&r->grp, grp, sizeof(*grp)) == 0)
			return r;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct shape_rows *v = realloc(t->v, cap * sizeof(*v));
		if (v == NULL)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	memset(&t->v[t->n], 0, sizeof(t->v[t->n]));
	t->v[t->n].gpu = gpu;
	t->v[t->n].coll = coll;
	t->v[t->n].ib = ib;
	t->v[t->n].grp = *grp;
	return &t->v[t->n++];
}

/* The regression of the shape exponents: an intercept per collective,
 * then the exponents' columns, then the plain network's. */
#define N_COEF (COPUS_COLL_COUNT + COPUS_SHAPE_COUNT + 1)
#define COEF_SOCKET (N_COEF - 1)
/* Ridge weights (in shapes' worth of squared log error) that hold an
 * exponent at 0 unless the shapes say otherwise, and keep the system
 * solvable where a column is empty or two are collinear. */
#define RIDGE_EXP 0.01
#define RIDGE_FREE 1e-6

/* The link's share a group gets (see copus/planner.h). */
static double link_share(const copus_planner_gpu *g,
			 const copus_planner_group *grp)
{
	return g->inter_links > 0.0
		       ? fmax(1.0, grp->groups_per_node / g->inter_links)
		       : 1.0;
}

/* The columns of one shape: z[] for the collective's intercept, the
 * logarithms of the shape's terms and the plain network. */
static void shape_columns(const copus_planner_gpu *g,
			  const struct shape_rows *r, double z[N_COEF])
{
	memset(z, 0, sizeof(double) * N_COEF);
	z[r->coll] = 1.0;
	if (r->grp.nodes <= 1) {
		z[COPUS_COLL_COUNT + COPUS_SHAPE_PEERS] =
			log(r->grp.ranks - 1.0);
		return;
	}
	z[COPUS_COLL_COUNT + COPUS_SHAPE_RANKS_PER_NODE] =
		log(r->grp.ranks_per_node);
	z[COPUS_COLL_COUNT + COPUS_SHAPE_GROUPS_PER_NODE] =
		log(link_share(g, &r->grp));
	z[COPUS_COLL_COUNT + COPUS_SHAPE_NODES] = log(r->grp.nodes / 2.0);
	z[COEF_SOCKET] = r->socket;
}

/* Solve a x = b (n unknowns) by Gaussian elimination with partial
 * pivoting; -1 when singular. */
static int solve(double a[N_COEF][N_COEF], double b[N_COEF], int n,
		 double x[N_COEF])
{
	for (int i = 0; i < n; i++) {
		int p = i;
		for (int r = i + 1; r < n; r++)
			if (fabs(a[r][i]) > fabs(a[p][i]))
				p = r;
		if (!(fabs(a[p][i]) > 1e-300))
			return -1;
		for (int c = 0; c < n; c++) {
			double t = a[i][c];
			a[i][c] = a[p][c];
			a[p][c] = t;
		}
		double t = b[i];
		b[i] = b[p];
		b[p] = t;
		for (int r = i + 1; r < n; r++) {
			double f = a[r][i] / a[i][i];
			for (int c = i; c < n; c++)
				a[r][c] -= f * a[i][c];
			b[r] -= f * b[i];
		}
	}
	for (int i = n - 1; i >= 0; i--) {
		double s = b[i];
		for (int c = i + 1; c < n; c++)
			s -= a[i][c] * x[c];
		x[i] = s / a[i][i];
	}
	return 0;
}

/* Whether the planner prices shapes like r: its pipeline sends are
 * between pairs of ranks. */
static int priced(const struct shape_rows *r)
{
	return r->coll != COPUS_COLL_SEND || r->grp.ranks == 2;
}

/*
 * The shape exponents of type gpu over link from its measured shapes:
 * each shape's time per byte (fitted alone) against the logarithms of its
 * terms, least squares with a ridge. Returns the shapes used; *socket
 * gets the plain network's factor over InfiniBand's.
 */
static int fit_exponents(const struct shapes *t, struct plan_gpu *pg, int gpu,
			 int link, double *socket)
{
	double a[N_COEF][N_COEF] = { { 0 } }, b[N_COEF] = { 0 }, x[N_COEF];
	int used = 0;

	*socket = 1.0;
	for (size_t k = 0; k < t->n; k++) {
		const struct shape_rows *r = &t->v[k];
		double alpha, inv_beta, z[N_COEF], y;

		if (r->gpu != gpu || (r->grp.nodes > 1) != link || !priced(r) ||
		    r->sums.n < 2)
			continue;
		lsq_solve(&r->sums, &alpha, &inv_beta);
		if (!(inv_beta > 0.0))
			continue;
		shape_columns(&pg->gpu, r, z);
		/* The fair share of the link is in the model already. */
		y = log(inv_beta) -
		    (link ? log(link_share(&pg->gpu, &r->grp)) : 0.0);
		for (int i = 0; i < N_COEF; i++) {
			for (int j = 0; j < N_COEF; j++)
				a[i][j] += z[i] * z[j];
			b[i] += z[i] * y;
		}
		used++;
	}
	if (used == 0)
		return 0;
	for (int i = 0; i < N_COEF; i++)
		a[i][i] += i >= COPUS_COLL_COUNT && i != COEF_SOCKET
				   ? RIDGE_EXP
				   : RIDGE_FREE;
	if (solve(a, b, N_COEF, x) != 0)
		return 0;
	for (int e = 0; e < COPUS_SHAPE_COUNT; e++)
		if ((e == COPUS_SHAPE_PEERS) == !link)
			pg->gpu.shape_exp[e] =
				fmax(-COPUS_PLANNER_GPU_SHAPE_EXP_MAX,
				     fmin(COPUS_PLANNER_GPU_SHAPE_EXP_MAX,
					  x[COPUS_COLL_COUNT + e]));
	if (link)
		*socket = exp(fmax(-30.0, fmin(30.0, x[COEF_SOCKET])));
	return used;
}

/* The factor of shape r's time per f(n) x byte under pg's exponents
 * (and the plain network's factor socket), as the planner prices it. */
static double shape_factor_of(const struct plan_gpu *pg,
			      const struct shape_rows *r, double socket)
{
	copus_planner_gpu unit = pg->gpu;

	for (int l = 0; l < COPUS_LINK_COUNT; l++) {
		unit.comm_scale[l] = 1.0;
		for (int c = 0; c < COPUS_COLL_COUNT; c++) {
			unit.alpha[l][c] = 0.0;
			unit.inv_beta[l][c] = 1.0;
		}
	}
	return copus_planner_collective(&unit, r->coll, &r->grp, 1.0) /
	       coll_factor(r->coll, r->grp.ranks) * (r->socket ? socket : 1.0);
}

/*
 * Each type's shape exponents per link, then its alpha and 1/beta per
 * link and collective on all its priced shapes, each shape's bytes
 * weighted by its factor. A type, link and collective without
 * measurements takes the median of the types that have them, and a type
 * without measured shapes on a link the median exponents.
 */
static int fit_types(const struct shapes *t, struct plan_data *d,
		     const char *path, char *err, size_t errlen)
{
	double socket[PLAN_MAX_TYPES][COPUS_LINK_COUNT];
	int shaped[PLAN_MAX_TYPES][COPUS_LINK_COUNT] = { { 0 } };

	for (int g = 0; g < d->n_gpus; g++)
		for (int l = 0; l < COPUS_LINK_COUNT; l++)
			shaped[g][l] = fit_exponents(t, &d->gpus[g], g, l,
						     &socket[g][l]) > 0;
	for (int e = 0; e < COPUS_SHAPE_COUNT; e++) {
		int l = e == COPUS_SHAPE_PEERS ? COPUS_LINK_INTRA
					       : COPUS_LINK_INTER;
		double v[PLAN_MAX_TYPES];
		int k = 0;
		for (int g = 0; g < d->n_gpus; g++)
			if (shaped[g][l])
				v[k++] = d->gpus[g].gpu.shape_exp[e];
		if (k == 0)
			continue;
		sim_sort_doubles(v, (size_t)k);
		for (int g = 0; g < d->n_gpus; g++)
			if (!shaped[g][l])
				d->gpus[g].gpu.shape_exp[e] = v[k / 2];
	}
	for (int l = 0; l < COPUS_LINK_COUNT; l++) {
		for (int c = 0; c < COPUS_COLL_COUNT; c++) {
			double a[PLAN_MAX_TYPES], b[PLAN_MAX_TYPES];
			int k = 0;

			for (int g = 0; g < d->n_gpus; g++) {
				struct plan_gpu *pg = &d->gpus[g];
				struct lsq s = { 0 };
				for (size_t i = 0; i < t->n; i++) {
					const struct shape_rows *r = &t->v[i];
					double h;
					if (r->gpu != g || r->coll != c ||
					    (r->grp.nodes > 1) != l ||
					    !priced(r))
						continue;
					h = shape_factor_of(pg, r,
							    socket[g][l]);
					s.w += r->sums.w;
					s.wx += h * r->sums.wx;
					s.wxx += h * h * r->sums.wxx;
					s.wt += r->sums.wt;
					s.wxt += h * r->sums.wxt;
					s.n += r->sums.n;
				}
				if (s.n < 2)
					continue;
				lsq_solve(&s, &pg->gpu.alpha[l][c],
					  &pg->gpu.inv_beta[l][c]);
				pg->measured[l][c] = 1;
				a[k] = pg->gpu.alpha[l][c];
				b[k] = pg->gpu.inv_beta[l][c];
				k++;
			}
			if (k == 0) {
				snprintf(err, errlen,
					 "%s: no type has measurements of "
					 "collective %d across %s",
					 path, c, l ? "nodes" : "one node");
				return COPUS_ENODATA;
			}
			sim_sort_doubles(a, (size_t)k);
			sim_sort_doubles(b, (size_t)k);
			for (int g = 0; g < d->n_gpus; g++) {
				struct plan_gpu *pg = &d->gpus[g];
				if (pg->measured[l][c])
					continue;
				pg->gpu.alpha[l][c] = a[k / 2];
				pg->gpu.inv_beta[l][c] = b[k / 2];
			}
		}
	}
	return COPUS_OK;
}

int copus__plan_read_comm(const char *path, struct plan_data *d, char *err,
			  size_t errlen)
{
	static const char *header = "cell,collective,groups,elements,dtype,"
				    "seconds";
	FILE *f = fopen(path, "r");
	struct shapes t = { 0 };
	char *line = NULL;
	size_t linecap = 0;
	ssize_t len;
	long ln = 0;
	int rc = COPUS_OK;

	if (f == NULL) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		return COPUS_EIO;
	}
	/* Whole lines, however long, so that an error names the right one. */
	while ((len = getline(&line, &linecap, f)) >= 0) {
		char *fld[6];
		int gpu, across, coll, bytes, is_ib;
		copus_planner_cell cell;
		copus_planner_group grp;
		struct shape_rows *r;
		char cellname[PLAN_NAME_LEN], *ib;
		double elems, secs;

		ln++;
		if (memchr(line, '\0', (size_t)len) != NULL) {
			snprintf(err, errlen, "%s:%ld: a NUL byte in the line",
				 path, ln);
			rc = COPUS_EPARSE;
			break;
		}
		line[strcspn(line, "\r\n")] = '\0';
		if (ln == 1) {
			if (strcmp(line, header) != 0) {
				snprintf(err, errlen,
					 "%s:1: header is not '%s'", path,
					 header);
				rc = COPUS_EPARSE;
				break;
			}
			continue;
		}
		if (line[0] == '\0')
			continue;
		if (split_comm(line, fld) != 6) {
			snprintf(err, errlen, "%s:%ld: not 6 fields", path, ln);
			rc = COPUS_EPARSE;
			break;
		}
		/* Cells measured over InfiniBand carry an "_ib" suffix; they
		 * are cells of the same type and shape. */
		snprintf(cellname, sizeof(cellname), "%s", fld[0]);
		ib = strstr(cellname, "_ib");
		is_ib = ib != NULL && ib[3] == '\0';
		if (is_ib)
			*ib = '\0';
		rc = plan_cell_parse(d, cellname, &gpu, &cell, err + 0, errlen);
		if (rc == COPUS_EINVAL) {
			/* A type the devices do not list is of no use. */
			rc = COPUS_OK;
			continue;
		}
		if (rc) {
			char why[512];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "%s:%ld: field 'cell': %s", path,
				 ln, why);
			break;
		}
		coll = collective_of(fld[1]);
		if (coll < 0) {
			snprintf(err, errlen,
				 "%s:%ld: field 'collective': unknown '%s'",
				 path, ln, fld[1]);
			rc = COPUS_EPARSE;
			break;
		}
		if (groups_of(fld[2], cell.nodes, cell.gpus_per_node, &grp,
			      &across) ||
		    grp.ranks < 2) {
			snprintf(err, errlen,
				 "%s:%ld: field 'groups': '%s' is not a list "
				 "of groups of the cell's ranks",
				 path, ln, fld[2]);
			rc = COPUS_EPARSE;
			break;
		}
		if (strcmp(fld[4], "float32") == 0)
			bytes = 4;
		else if (strcmp(fld[4], "float16") == 0)
			bytes = 2;
		else {
			snprintf(err, errlen,
				 "%s:%ld: field 'dtype': unknown '%s'", path,
				 ln, fld[4]);
			rc = COPUS_EPARSE;
			break;
		}
		char *e1, *e2;
		elems = strtod(fld[3], &e1);
		secs = strtod(fld[5], &e2);
		if (*fld[3] == '\0' || *e1 != '\0' || !(elems >= 1.0) ||
		    elems > MAX_COMM_ELEMENTS) {
			snprintf(err, errlen,
				 "%s:%ld: field 'elements': '%s' is not a "
				 "number in 1..%g",
				 path, ln, fld[3], MAX_COMM_ELEMENTS);
			rc = COPUS_EPARSE;
			break;
		}
		if (*fld[5] == '\0' || *e2 != '\0' ||
		    !(secs >= MIN_COMM_SECONDS) || secs > MAX_COMM_SECONDS) {
			snprintf(err, errlen,
				 "%s:%ld: field 'seconds': '%s' is not a "
				 "time in %g..%g",
				 path, ln, fld[5], MIN_COMM_SECONDS,
				 MAX_COMM_SECONDS);
			rc = COPUS_EPARSE;
			break;
		}
		r = shape_find(&t, gpu, coll, is_ib, &grp);
		if (r == NULL) {
			rc = COPUS_ENOMEM;
			break;
		}
		lsq_add(&r->sums, coll_factor(coll, grp.ranks) * elems * bytes,
			secs);
	}
	fclose(f);
	free(line);
	/* The plain network of a type whose cells were also measured over
	 * InfiniBand is told apart from it: the planner prices the faster. */
	for (size_t k = 0; k < t.n; k++) {
		struct shape_rows *r = &t.v[k];
		int has_ib = 0;
		for (size_t i = 0; i < t.n && !has_ib; i++)
			has_ib = t.v[i].gpu == r->gpu && t.v[i].ib;
		r->socket = has_ib && !r->ib && r->grp.nodes > 1;
	}
	if (rc == COPUS_OK)
		rc = fit_types(&t, d, path, err, errlen);
	free(t.v);
	return rc;
}
