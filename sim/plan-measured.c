/*
 * copus-plan's measured and queried iterations: times in the format of
 * Arena's prof_database.json, query files, Crius's own estimates, and the
 * calibration of the GPU constants on measured times.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "plan-read.h"

/* --------------------------------------------------------- measurements */

static int rows_push(struct plan_row **rows, size_t *n, size_t *cap,
		     const struct plan_row *r)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		struct plan_row *q = realloc(*rows, c * sizeof(*q));
		if (q == NULL)
			return COPUS_ENOMEM;
		*rows = q;
		*cap = c;
	}
	(*rows)[(*n)++] = *r;
	return COPUS_OK;
}

/* "<family>_<size>_<batch>": the model and the batch. */
static int split_key(const struct plan_data *d, const char *key, int *model,
		     int *batch)
{
	const char *u = strrchr(key, '_');
	char name[PLAN_NAME_LEN];
	char *end;
	long b;

	if (u == NULL || (size_t)(u - key) >= sizeof(name))
		return -1;
	memcpy(name, key, (size_t)(u - key));
	name[u - key] = '\0';
	/* Digits without a leading zero: one model, batch and cell has one
	 * key. */
	if (u[1] < '1' || u[1] > '9')
		return -1;
	b = strtol(u + 1, &end, 10);
	if (*end != '\0' || b < 1 || b > 1 << 24)
		return -1;
	*model = plan_model_find(d, name);
	*batch = (int)b;
	return *model < 0 ? -2 : 0;
}

int plan_prof_load(const char *path, const struct plan_data *d,
		   struct plan_row **rows, size_t *n, char *err, size_t errlen)
{
	struct json_object *root, *opt;
	size_t cap = 0;
	int rc = copus__plan_read_json(path, &root, err, errlen);

	*rows = NULL;
	*n = 0;
	if (rc)
		return rc;
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "optimal", &opt) ||
	    !json_object_is_type(opt, json_type_object)) {
		snprintf(err, errlen, "%s: no object 'optimal' at the top",
			 path);
		json_object_put(root);
		return COPUS_EPARSE;
	}
	json_object_object_foreach(opt, key, cells) {
		struct plan_row r = { 0 };
		int k = split_key(d, key, &r.model, &r.batch);

		if (k == -1) {
			snprintf(err, errlen,
				 "%s: key 'optimal.%s' is not "
				 "<family>_<size>_<batch>",
				 path, key);
			rc = COPUS_EPARSE;
			break;
		}
		if (k == -2) {
			snprintf(err, errlen,
				 "%s: key 'optimal.%s': model not in "
				 "models.csv",
				 path, key);
			rc = COPUS_EINVAL;
			break;
		}
		if (!json_object_is_type(cells, json_type_object)) {
			snprintf(err, errlen,
				 "%s: 'optimal.%s' is not an object of cells",
				 path, key);
			rc = COPUS_EPARSE;
			break;
		}
		json_object_object_foreach(cells, cell, v) {
			char why[512];

			rc = plan_cell_parse(d, cell, &r.gpu, &r.cell, why,
					     sizeof(why));
			if (rc) {
				snprintf(err, errlen, "%s: 'optimal.%s.%s': %s",
					 path, key, cell, why);
				break;
			}
			if (!json_object_is_type(v, json_type_double) &&
			    !json_object_is_type(v, json_type_int)) {
				snprintf(err, errlen,
					 "%s: 'optimal.%s.%s' is not a number",
					 path, key, cell);
				rc = COPUS_EPARSE;
				break;
			}
			r.seconds = json_object_get_double(v);
			if (!isfinite(r.seconds) ||
			    (r.seconds <= 0.0 && r.seconds != -1.0)) {
				snprintf(err, errlen,
					 "%s: 'optimal.%s.%s': %g is neither "
					 "a positive time nor -1",
					 path, key, cell, r.seconds);
				rc = COPUS_EPARSE;
				break;
			}
			snprintf(r.cell_name, sizeof(r.cell_name), "%s", cell);
			/* "bert_1B" and Arena's "bert__1B" are one model: a
			 * time given under both is given twice. */
			for (size_t i = 0; i < *n && rc == COPUS_OK; i++)
				if ((*rows)[i].model == r.model &&
				    (*rows)[i].batch == r.batch &&
				    strcmp((*rows)[i].cell_name, cell) == 0) {
					snprintf(err, errlen,
						 "%s: 'optimal.%s.%s': the "
						 "model, batch and cell of an "
						 "earlier key",
						 path, key, cell);
					rc = COPUS_EPARSE;
				}
			if (rc)
				break;
			rc = rows_push(rows, n, &cap, &r);
			if (rc)
				break;
		}
		if (rc)
			break;
	}
	json_object_put(root);
	if (rc) {
		free(*rows);
		*rows = NULL;
		*n = 0;
	}
	return rc;
}

int plan_query_load(const char *path, const struct plan_data *d,
		    struct plan_row **rows, size_t *n, char *err, size_t errlen)
{
	struct csv c;
	int cm, cb, cc, rc;
	size_t cap = 0;

	*rows = NULL;
	*n = 0;
	if (sim_csv_read(path, &c, err, errlen))
		return COPUS_EPARSE;
	if ((rc = copus__plan_col_of(&c, "model", &cm, err, errlen)) ||
	    (rc = copus__plan_col_of(&c, "batch", &cb, err, errlen)) ||
	    (rc = copus__plan_col_of(&c, "cell", &cc, err, errlen)))
		goto out;
	for (size_t i = 0; i < c.nrows; i++) {
		struct plan_row r = { 0 };
		char why[512];

		r.line = c.lines[i];
		r.model = plan_model_find(d, c.rows[i][cm]);
		if (r.model < 0) {
			snprintf(err, errlen,
				 "%s:%ld: field 'model': unknown model '%s' "
				 "(not in models.csv)",
				 path, r.line, c.rows[i][cm]);
			rc = COPUS_EINVAL;
			goto out;
		}
		if ((rc = copus__plan_field_int(&c, i, cb, &r.batch, err,
						errlen)))
			goto out;
		rc = plan_cell_parse(d, c.rows[i][cc], &r.gpu, &r.cell, why,
				     sizeof(why));
		if (rc) {
			snprintf(err, errlen, "%s:%ld: field 'cell': %s", path,
				 r.line, why);
			goto out;
		}
		snprintf(r.cell_name, sizeof(r.cell_name), "%s", c.rows[i][cc]);
		if ((rc = rows_push(rows, n, &cap, &r)))
			goto out;
	}
out:
	sim_csv_free(&c);
	if (rc) {
		free(*rows);
		*rows = NULL;
		*n = 0;
	}
	return rc;
}

int plan_crius_load(const char *path, const struct plan_data *d,
		    const struct plan_row *rows, size_t n, double *est,
		    char *err, size_t errlen)
{
	struct csv c;
	int cm, cc, ct, rc;

	for (size_t i = 0; i < n; i++)
		est[i] = -1.0;
	if (sim_csv_read(path, &c, err, errlen))
		return COPUS_EPARSE;
	if ((rc = copus__plan_col_of(&c, "model", &cm, err, errlen)) ||
	    (rc = copus__plan_col_of(&c, "cell", &cc, err, errlen)) ||
	    (rc = copus__plan_col_of(&c, "total_s", &ct, err, errlen)))
		goto out;
	for (size_t r = 0; r < c.nrows; r++) {
		int model, batch;
		double t;
		char *end;

		if (split_key(d, c.rows[r][cm], &model, &batch))
			continue;
		t = strtod(c.rows[r][ct], &end);
		if (*end != '\0' || !(t > 0.0) || !isfinite(t))
			continue;
		for (size_t i = 0; i < n; i++)
			if (rows[i].model == model && rows[i].batch == batch &&
			    strcmp(rows[i].cell_name, c.rows[r][cc]) == 0 &&
			    (est[i] < 0.0 || t < est[i]))
				est[i] = t;
	}
out:
	sim_csv_free(&c);
	return rc;
}

/* The GPU constants of d calibrated on the measured times of rows. */
int plan_calibrate(struct plan_data *d, const struct plan_row *rows, size_t n,
		   const bool *use, char *err, size_t errlen)
{
	copus_planner_sample *s = calloc(n ? n : 1, sizeof(*s));
	copus_planner_gpu g[PLAN_MAX_TYPES];
	size_t k = 0;
	int rc;

	if (s == NULL)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (rows[i].seconds <= 0.0 || (use && !use[i]))
			continue;
		s[k].model = &d->models[rows[i].model].model;
		s[k].batch = rows[i].batch;
		s[k].gpu_index = rows[i].gpu;
		s[k].cell = rows[i].cell;
		s[k].seconds = rows[i].seconds;
		k++;
	}
	for (int i = 0; i < d->n_gpus; i++)
		g[i] = d->gpus[i].gpu;
	rc = copus_planner_calibrate(s, k, g, d->n_gpus, NULL);
	if (rc == COPUS_OK)
		for (int i = 0; i < d->n_gpus; i++)
			d->gpus[i].gpu = g[i];
	else
		snprintf(err, errlen, "calibration failed: %s",
			 copus_strerror(rc));
	free(s);
	return rc;
}
