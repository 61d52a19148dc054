/*
 * copus-plan's comm.csv: measured collectives, fitted into each GPU
 * type's communication constants.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan-parts.h"

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
	static const char *names[COPUS_COLL_COUNT] = {
		"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
		"send"
	};

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
 * The size of the first group of a "[[0,1],[2,3]]" list, whether any
 * group holds ranks of two nodes (ranks in blocks of gpn), and *share,
 * the most groups that span nodes with ranks on one node: they run at
 * once and share that node's link, as the planner prices them. "null" is
 * one pair of ranks, on two nodes when there are several.
 */
static int groups_of(const char *s, int nodes, int gpn, int *size,
		     int *across, int *share)
{
	int depth = 0, first_size = 0, cur = 0, groups = 0, lo = 0, hi = 0;
	int on_node[SHARE_NODES] = { 0 };
	uint64_t touched = 0;
	const char *p = s;

	*across = 0;
	*share = 1;
	if (strcmp(s, "null") == 0) {
		*size = 2;
		*across = nodes > 1;
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
				if (groups++ == 0)
					first_size = cur;
				if (lo / gpn != hi / gpn) {
					*across = 1;
					for (int k = 0; k < SHARE_NODES; k++)
						if ((touched >> k & 1) &&
						    ++on_node[k] > *share)
							*share = on_node[k];
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
	*size = first_size;
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int copus__plan_read_comm(const char *path, struct plan_data *d, char *err,
			  size_t errlen)
{
	static const char *header = "cell,collective,groups,elements,dtype,"
				    "seconds";
	FILE *f = fopen(path, "r");
	struct lsq(*sums)[COPUS_LINK_COUNT][COPUS_COLL_COUNT];
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
	sums = calloc(PLAN_MAX_TYPES, sizeof(*sums));
	if (sums == NULL) {
		fclose(f);
		return COPUS_ENOMEM;
	}
	/* Whole lines, however long, so that an error names the right one. */
	while ((len = getline(&line, &linecap, f)) >= 0) {
		char *fld[6];
		int gpu, size, across, share, coll, bytes;
		copus_planner_cell cell;
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
			snprintf(err, errlen, "%s:%ld: not 6 fields", path,
				 ln);
			rc = COPUS_EPARSE;
			break;
		}
		/* Cells measured over InfiniBand carry an "_ib" suffix; they
		 * are cells of the same type and shape. */
		snprintf(cellname, sizeof(cellname), "%s", fld[0]);
		ib = strstr(cellname, "_ib");
		if (ib != NULL && ib[3] == '\0')
			*ib = '\0';
		rc = plan_cell_parse(d, cellname, &gpu, &cell, err + 0,
				     errlen);
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
		if (groups_of(fld[2], cell.nodes, cell.gpus_per_node, &size,
			      &across, &share) || size < 2) {
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
		lsq_add(&sums[gpu][across][coll],
			coll_factor(coll, size) * share * elems * bytes,
			secs);
	}
	fclose(f);
	free(line);
	if (rc) {
		free(sums);
		return rc;
	}
	/* Fit what was measured; a type, link and collective without
	 * measurements takes the median of the types that have them. */
	for (int l = 0; l < COPUS_LINK_COUNT; l++) {
		for (int c = 0; c < COPUS_COLL_COUNT; c++) {
			double a[PLAN_MAX_TYPES], b[PLAN_MAX_TYPES];
			int k = 0;

			for (int g = 0; g < d->n_gpus; g++) {
				struct plan_gpu *pg = &d->gpus[g];
				if (sums[g][l][c].n < 2)
					continue;
				lsq_solve(&sums[g][l][c],
					  &pg->gpu.alpha[l][c],
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
					 path, c,
					 l ? "nodes" : "one node");
				free(sums);
				return COPUS_ENODATA;
			}
			qsort(a, (size_t)k, sizeof(double), cmp_double);
			qsort(b, (size_t)k, sizeof(double), cmp_double);
			for (int g = 0; g < d->n_gpus; g++) {
				struct plan_gpu *pg = &d->gpus[g];
				if (pg->measured[l][c])
					continue;
				pg->gpu.alpha[l][c] = a[k / 2];
				pg->gpu.inv_beta[l][c] = b[k / 2];
			}
		}
	}
	free(sums);
	return COPUS_OK;
}
