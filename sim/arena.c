/*
 * Arena's world for copus-sim --arena: the cluster spec, the database of
 * measured iteration times, the trace, and Arena's rules for valuing a cell
 * that was not measured (sim/arena.h).
 */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "plan-read.h"

/* Arena's GPUs per node for the GPU types it knows (a spec entry may give
 * its own with "gpus_per_node"). */
static const struct {
	const char *type;
	int per_node;
} known_nodes[] = {
	{ "a100", 4 }, { "v100", 16 }, { "a40", 2 },
	{ "a10", 2 },  { "p100", 8 },  { "1080ti", 8 },
	{ "3090", 8 }, { "h100", 8 },  { "l20", 16 },
};

static const int job_sizes[] = { 1, 2, 4, 8, 16 };

/* ------------------------------------------------------------ cluster */

static int type_index(const struct arena_world *w, const char *name)
{
	for (int t = 0; t < w->ntypes; t++)
		if (strcmp(w->type_names[t], name) == 0)
			return t;
	return -1;
}

/* A JSON integer in [lo, hi] (an integral double is accepted). */
static bool json_int(json_object *o, long lo, long hi, long *out)
{
	double v;

	if (o == NULL || !(json_object_is_type(o, json_type_int) ||
			   json_object_is_type(o, json_type_double)))
		return false;
	v = json_object_get_double(o);
	if (v != floor(v) || v < (double)lo || v > (double)hi)
		return false;
	*out = (long)v;
	return true;
}

int arena_cluster_read(const char *path, struct arena_world *w, char *err,
		       size_t len)
{
	json_object *root, *spec;
	int rc;

	if ((rc = copus__plan_read_json(path, &root, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	/* Arena writes the spec as an array of one object. */
	spec = root;
	if (json_object_is_type(root, json_type_array) &&
	    json_object_array_length(root) == 1)
		spec = json_object_array_get_idx(root, 0);
	if (!json_object_is_type(spec, json_type_object)) {
		snprintf(err, len,
			 "%s: expected an object of GPU types (or "
			 "an array of one)",
			 path);
		goto out;
	}
	w->ntypes = 0;
	json_object_object_foreach(spec, name, val) {
		json_object *nn, *pn;
		long nodes, per = 0;
		int t = w->ntypes;

		if (t == ARENA_MAX_TYPES) {
			snprintf(err, len, "%s: more than %d GPU types", path,
				 ARENA_MAX_TYPES);
			goto out;
		}
		if (strlen(name) == 0 ||
		    strlen(name) >= sizeof(w->type_names[0]) ||
		    strchr(name, '_') != NULL) {
			snprintf(err, len,
				 "%s: GPU type '%s': not a name of 1 "
				 "to %zu characters without '_'",
				 path, name, sizeof(w->type_names[0]) - 1);
			goto out;
		}
		if (!json_object_is_type(val, json_type_object) ||
		    !json_object_object_get_ex(val, "node_num", &nn) ||
		    !json_int(nn, 1, 1 << 20, &nodes)) {
			snprintf(err, len,
				 "%s: GPU type '%s': field node_num: "
				 "'%s' is not a whole number of nodes >= 1",
				 path, name,
				 json_object_is_type(val, json_type_object) &&
						 json_object_object_get_ex(val,
									   "node_num",
									   &nn)
					 ? json_object_to_json_string(nn)
					 : "(missing)");
			goto out;
		}
		if (json_object_object_get_ex(val, "gpus_per_node", &pn)) {
			if (!json_int(pn, 1, 1024, &per)) {
				snprintf(err, len,
					 "%s: GPU type '%s': field "
					 "gpus_per_node: '%s' is not a whole "
					 "number >= 1",
					 path, name,
					 json_object_to_json_string(pn));
				goto out;
			}
		} else {
			for (size_t i = 0;
			     i < sizeof(known_nodes) / sizeof(known_nodes[0]);
			     i++)
				if (strcmp(known_nodes[i].type, name) == 0)
					per = known_nodes[i].per_node;
			if (per == 0) {
				snprintf(err, len,
					 "%s: GPU type '%s': GPUs per "
					 "node unknown (give gpus_per_node)",
					 path, name);
				goto out;
			}
		}
		snprintf(w->type_names[t], sizeof(w->type_names[t]), "%s",
			 name);
		w->node_num[t] = (int)nodes;
		w->per_node[t] = (int)per;
		w->ntypes++;
	}
	if (w->ntypes == 0) {
		snprintf(err, len, "%s: no GPU type", path);
		goto out;
	}
	rc = COPUS_OK;
out:
	json_object_put(root);
	return rc;
}

/* ----------------------------------------------------------- families */

/* Parameters of a size such as "760M" or "1.3B"; < 0 when not one. */
static double size_params(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !(v > 0) || !isfinite(v) || end[0] == '\0' ||
	    end[1] != '\0')
		return -1;
	switch (end[0]) {
	case 'K': return v * 1e3;
	case 'M': return v * 1e6;
	case 'B': return v * 1e9;
	case 'T': return v * 1e12;
	default: return -1;
	}
}

int arena_family_size(struct arena_world *w, const char *family,
		      const char *size, int *fam, char *err, size_t len)
{
	struct arena_family *f = NULL;
	double p = size_params(size);
	int i;

	if (p < 0 || strlen(size) >= sizeof(f->sizes[0])) {
		snprintf(err, len,
			 "size '%s' is not a number of parameters "
			 "with K, M, B or T",
			 size);
		return -1;
	}
	if (strlen(family) == 0 || strlen(family) >= sizeof(f->name)) {
		snprintf(err, len,
			 "family '%s' is not a name of 1 to %zu "
			 "characters",
			 family, sizeof(f->name) - 1);
		return -1;
	}
	for (i = 0; i < w->nfamilies; i++)
		if (strcmp(w->families[i].name, family) == 0)
			break;
	if (i == w->nfamilies) {
		if (i == ARENA_MAX_FAMILIES) {
			snprintf(err, len, "more than %d model families",
				 ARENA_MAX_FAMILIES);
			return -1;
		}
		snprintf(w->families[i].name, sizeof(w->families[i].name), "%s",
			 family);
		w->nfamilies++;
	}
	f = &w->families[i];
	*fam = i;
	for (int k = 0; k < f->nsizes; k++)
		if (strcmp(f->sizes[k], size) == 0)
			return k;
	if (f->nsizes == ARENA_MAX_SIZES) {
		snprintf(err, len, "family %s: more than %d sizes", family,
			 ARENA_MAX_SIZES);
		return -1;
	}
	/* Keep the sizes in order of parameters; indices of the entries
	 * read so far move with them. */
	{
		int at = f->nsizes;

		while (at > 0 && f->params[at - 1] > p) {
			memcpy(f->sizes[at], f->sizes[at - 1],
			       sizeof(f->sizes[0]));
			f->params[at] = f->params[at - 1];
			at--;
		}
		snprintf(f->sizes[at], sizeof(f->sizes[at]), "%s", size);
		f->params[at] = p;
		f->nsizes++;
		for (size_t e = 0; e < w->ndb; e++)
			if (w->db[e].family == i && w->db[e].size >= at)
				w->db[e].size++;
		for (size_t m = 0; m < w->nmodels; m++)
			if (w->models[m].family == i && w->models[m].size >= at)
				w->models[m].size++;
		return at;
	}
}

/* Sizes of the families from planner/models.csv (family,size,...). */
static int models_csv_read(const char *path, struct arena_world *w, char *err,
			   size_t len)
{
	struct csv c;
	char why[256];
	int fc, sc, rc;

	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((fc = sim_csv_col(&c, "family", err, len)) < 0 ||
	    (sc = sim_csv_col(&c, "size", err, len)) < 0)
		goto out;
	for (size_t r = 0; r < c.nrows; r++) {
		int fam;

		if (arena_family_size(w, c.rows[r][fc], c.rows[r][sc], &fam,
				      why, sizeof(why)) < 0) {
			snprintf(err, len, "%s:%ld: %s", path, c.lines[r], why);
			goto out;
		}
	}
	rc = COPUS_OK;
out:
	sim_csv_free(&c);
	return rc;
}

/* ----------------------------------------------------------- database */

/* Parse a cell key "<n>_<type>_<n>_n_<m>_d". */
static bool cell_parse(const struct arena_world *w, const char *key, int *type,
		       int *nodes, int *per, bool *known)
{
	char tname[32], canon[80];
	int n1, n2, m, used = 0;

	if (sscanf(key, "%d_%31[^_]_%d_n_%d_%n", &n1, tname, &n2, &m, &used) !=
		    4 ||
	    used == 0 || strcmp(key + used, "d") != 0)
		return false;
	if (n1 != n2 || n1 < 1 || m < 1 || m > 1024 || n1 > 1 << 20)
		return false;
	/* Only the canonical spelling (no sign, space or leading zero): two
	 * spellings of one cell would be two entries of the database. */
	snprintf(canon, sizeof(canon), "%d_%s_%d_n_%d_d", n1, tname, n1, m);
	if (strcmp(canon, key) != 0)
		return false;
	*type = type_index(w, tname);
	*known = *type >= 0;
	*nodes = n1;
	*per = m;
	return true;
}

/* Split a database key "<family>_<size>_<batch>" (the family may hold
 * '_'). */
static bool model_key_parse(const char *key, char *family, size_t flen,
			    char *size, size_t slen, long *batch)
{
	const char *b = strrchr(key, '_'), *s;
	char *end;

	if (b == NULL || b == key)
		return false;
	for (s = b - 1; s > key && *s != '_'; s--)
		;
	if (s == key || (size_t)(b - s - 1) >= slen ||
	    (size_t)(s - key) >= flen)
		return false;
	/* Digits without a leading zero: one model, batch and cell has one
	 * key. */
	if (b[1] < '1' || b[1] > '9')
		return false;
	errno = 0;
	*batch = strtol(b + 1, &end, 10);
	if (*end != '\0' || errno || *batch < 1 || *batch > 1 << 24)
		return false;
	memcpy(family, key, (size_t)(s - key));
	family[s - key] = '\0';
	memcpy(size, s + 1, (size_t)(b - s - 1));
	size[b - s - 1] = '\0';
	return true;
}

int arena_db_read(const char *path, struct arena_world *w, char *err,
		  size_t len)
{
	json_object *root, *opt;
	size_t cap = 0;
	int rc;

	if ((rc = copus__plan_read_json(path, &root, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "optimal", &opt) ||
	    !json_object_is_type(opt, json_type_object)) {
		snprintf(err, len,
			 "%s: expected an object with an object "
			 "\"optimal\"",
			 path);
		goto out;
	}
	json_object_object_foreach(opt, mkey, cells) {
		char family[32], size[16], why[256];
		long batch;
		int fam, sz;

		if (!model_key_parse(mkey, family, sizeof(family), size,
				     sizeof(size), &batch)) {
			snprintf(err, len,
				 "%s: optimal key '%s' is not "
				 "<family>_<size>_<batch>",
				 path, mkey);
			goto out;
		}
		if ((sz = arena_family_size(w, family, size, &fam, why,
					    sizeof(why))) < 0) {
			snprintf(err, len, "%s: optimal key '%s': %s", path,
				 mkey, why);
			goto out;
		}
		if (!json_object_is_type(cells, json_type_object)) {
			snprintf(err, len,
				 "%s: optimal.%s: expected an object "
				 "of cells",
				 path, mkey);
			goto out;
		}
		json_object_object_foreach(cells, ckey, val) {
			struct arena_entry *e;
			int type, nodes, per;
			bool known;
			double v;

			if (!cell_parse(w, ckey, &type, &nodes, &per, &known)) {
				snprintf(err, len,
					 "%s: optimal.%s: cell '%s' is "
					 "not <nodes>_<type>_<nodes>_n_<gpus>_d",
					 path, mkey, ckey);
				goto out;
			}
			if (!(json_object_is_type(val, json_type_double) ||
			      json_object_is_type(val, json_type_int)) ||
			    !isfinite(v = json_object_get_double(val)) ||
			    (v <= 0 && v != -1)) {
				snprintf(err, len,
					 "%s: optimal.%s.%s: '%s' is "
					 "not seconds per iteration (> 0, or -1: "
					 "does not fit)",
					 path, mkey, ckey,
					 json_object_to_json_string(val));
				goto out;
			}
			/* A type the cluster does not have is never asked. */
			if (!known)
				continue;
			if (w->ndb == cap) {
				struct arena_entry *g =
					realloc(w->db, (cap = 2 * cap + 64) *
							       sizeof(*g));

				if (g == NULL) {
					rc = COPUS_ENOMEM;
					snprintf(err, len, "out of memory");
					goto out;
				}
				w->db = g;
			}
			e = &w->db[w->ndb++];
			*e = (struct arena_entry){ fam,	  sz,  (int)batch, type,
						   nodes, per, v };
		}
	}
	rc = COPUS_OK;
out:
	json_object_put(root);
	return rc;
}

static const struct arena_entry *db_find(const struct arena_world *w, int f,
					 int s, int b, int t, int nodes,
					 int per)
{
	for (size_t i = 0; i < w->ndb; i++) {
		const struct arena_entry *e = &w->db[i];

		if (e->family == f && e->size == s && e->batch == b &&
		    e->type == t && e->nodes == nodes && e->per == per)
			return e;
	}
	return NULL;
}

/* x rounded to 3 decimals, as Arena rounds throughputs and times. */
static double round3(double x)
{
	return nearbyint(x * 1000.0) / 1000.0;
}

/*
 * The seconds of a stored value e scaled by factor on throughput, as
 * Arena computes them: throughput batch / seconds rounded, scaled, and
 * turned back into seconds rounded. A stored value of 0, -1 or over a
 * round does not fit.
 */
static bool scaled(const struct arena_entry *e, double factor, double *sec)
{
	double thr;

	if (e->seconds == 0 || e->seconds > ARENA_ROUND)
		return false;
	thr = round3(e->batch / e->seconds) * factor;
	if (!(thr > 0))
		return false;
	*sec = round3(e->batch / thr);
	return *sec > 0;
}

bool arena_lookup(const struct arena_world *w, int f, int s, int b, int t,
		  int nodes, int per, double *seconds)
{
	const struct arena_entry *e;
	int g = nodes * per, cap, bn, bp;

	if (f < 0 || f >= w->nfamilies || t < 0 || t >= w->ntypes ||
	    nodes < 1 || per < 1)
		return false;
	if ((e = db_find(w, f, s, b, t, nodes, per)) != NULL)
		return scaled(e, 1.0, seconds);
	/* The best locality of g GPUs: one node, or whole nodes. */
	cap = w->per_node[t];
	bp = g <= cap ? g : cap;
	bn = g / bp;
	if (bp > per && bp % per == 0 &&
	    (e = db_find(w, f, s, b, t, bn, bp)) != NULL) {
		int halvings = 0;

		for (int q = bp / per; q > 1; q /= 2)
			halvings++;
		return scaled(e, pow(0.9, halvings), seconds);
	}
	for (int k = s + 1; k < w->families[f].nsizes; k++)
		if ((e = db_find(w, f, k, b, t, nodes, per)) != NULL)
			return scaled(e, pow(1.8, k - s), seconds);
	return false;
}

bool arena_cell_seconds(const struct arena_model *m, int type, int gpus,
			int nodes, double *seconds)
{
	for (int i = 0; i < m->ncells; i++)
		if (m->cells[i].gpu_type == type && m->cells[i].gpus == gpus &&
		    m->cells[i].nodes == nodes) {
			*seconds = m->cells[i].seconds;
			return true;
		}
	return false;
}

/* The feasible cells of a model: every type, size and even spread. */
static int model_cells(const struct arena_world *w, struct arena_model *m)
{
	int cap = 0;

	for (int t = 0; t < w->ntypes; t++)
		cap += 5 * 5;
	m->cells = calloc((size_t)cap, sizeof(*m->cells));
	if (m->cells == NULL)
		return COPUS_ENOMEM;
	m->ncells = 0;
	for (int t = 0; t < w->ntypes; t++)
		for (size_t i = 0; i < sizeof(job_sizes) / sizeof(job_sizes[0]);
		     i++)
			for (int per = job_sizes[i]; per >= 1; per /= 2) {
				int g = job_sizes[i], nodes = g / per;
				double sec;

				if (per > w->per_node[t] ||
				    nodes > w->node_num[t])
					continue;
				if (!arena_lookup(w, m->family, m->size,
						  m->batch, t, nodes, per,
						  &sec))
					continue;
				m->cells[m->ncells++] =
					(copus_cell_time){ t, g, nodes, sec };
			}
	return COPUS_OK;
}

/* -------------------------------------------------------------- trace */

/* A whole number in [lo, hi] from a field; err names file, line, column
 * and value. */
static int field_long(const struct csv *c, size_t r, int col, long lo, long hi,
		      long *out, char *err, size_t len)
{
	const char *s = c->rows[r][col];
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < lo || v > hi) {
		snprintf(err, len,
			 "%s:%ld: %s: '%s' is not a whole number in "
			 "%ld..%ld",
			 c->path, c->lines[r], c->header[col], s, lo, hi);
		return COPUS_EPARSE;
	}
	*out = v;
	return COPUS_OK;
}

/* Jobs by name, then by line. */
static int job_cmp(const void *a, const void *b)
{
	const struct arena_job *x = *(const struct arena_job *const *)a;
	const struct arena_job *y = *(const struct arena_job *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/*
 * A job id names one job: the summary keys each job's completion time by
 * it. An error names the first line that repeats an id.
 */
static int job_ids_unique(const char *path, const struct arena_world *w,
			  char *err, size_t len)
{
	const struct arena_job **by = malloc(w->njobs * sizeof(*by));
	const struct arena_job *dup = NULL, *first = NULL;

	if (by == NULL) {
		snprintf(err, len, "%s: out of memory", path);
		return COPUS_ENOMEM;
	}
	for (size_t i = 0; i < w->njobs; i++)
		by[i] = &w->jobs[i];
	qsort(by, w->njobs, sizeof(*by), job_cmp);
	for (size_t i = 1; i < w->njobs; i++)
		if (strcmp(by[i - 1]->name, by[i]->name) == 0 &&
		    (dup == NULL || by[i]->line < dup->line)) {
			first = by[i - 1];
			dup = by[i];
		}
	if (dup != NULL)
		snprintf(err, len,
			 "%s:%ld: job_id: '%s' is already the id of "
			 "line %ld",
			 path, dup->line, dup->name, first->line);
	free(by);
	return dup != NULL ? COPUS_EPARSE : COPUS_OK;
}

int arena_trace_read(const char *path, struct arena_world *w, char *err,
		     size_t len)
{
	static const char *const cols[] = {
		"job_id",   "submission_time", "num_iteration", "model_name",
		"deadline", "batch_size",      "num_gpu",	"gpu_type",
	};
	struct csv c;
	int ci[8];
	long round = 0;
	int rc;

	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	for (int i = 0; i < 8; i++)
		if ((ci[i] = sim_csv_col(&c, cols[i], err, len)) < 0)
			goto out;
	if (c.nrows == 0) {
		snprintf(err, len, "%s: no jobs", path);
		goto out;
	}
	w->jobs = calloc(c.nrows, sizeof(*w->jobs));
	if (w->jobs == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t r = 0; r < c.nrows; r++) {
		struct arena_job *j = &w->jobs[r];
		const char *model = c.rows[r][ci[3]], *sep;
		char family[32], size[16], why[256];
		long sub, iters, ddl, batch, gpus, k;
		bool pow2 = false;
		int fam, sz, t;
		size_t m;

		if (c.rows[r][ci[0]][0] == '\0' ||
		    strlen(c.rows[r][ci[0]]) >= sizeof(j->name)) {
			snprintf(err, len,
				 "%s:%ld: job_id: '%s' is not an id of "
				 "1 to %zu characters",
				 path, c.lines[r], c.rows[r][ci[0]],
				 sizeof(j->name) - 1);
			goto out;
		}
		if (field_long(&c, r, ci[1], 0, 1L << 50, &sub, err, len) ||
		    field_long(&c, r, ci[2], ARENA_ITER_DIVISOR, 1L << 50,
			       &iters, err, len) ||
		    field_long(&c, r, ci[4], 0, 1L << 50, &ddl, err, len) ||
		    field_long(&c, r, ci[5], 1, 1L << 24, &batch, err, len) ||
		    field_long(&c, r, ci[6], 1, ARENA_MAX_GPUS, &gpus, err,
			       len))
			goto out;
		for (size_t i = 0; i < 5; i++)
			pow2 |= gpus == job_sizes[i];
		if (!pow2) {
			snprintf(err, len,
				 "%s:%ld: num_gpu: '%s' is not 1, 2, "
				 "4, 8 or 16",
				 path, c.lines[r], c.rows[r][ci[6]]);
			goto out;
		}
		if ((t = type_index(w, c.rows[r][ci[7]])) < 0) {
			snprintf(err, len,
				 "%s:%ld: gpu_type: '%s' is not a type "
				 "of the cluster",
				 path, c.lines[r], c.rows[r][ci[7]]);
			goto out;
		}
		sep = strstr(model, "__");
		if (sep == NULL || sep == model ||
		    (size_t)(sep - model) >= sizeof(family) ||
		    strlen(sep + 2) >= sizeof(size)) {
			snprintf(err, len,
				 "%s:%ld: model_name: '%s' is not "
				 "<family>__<size>",
				 path, c.lines[r], model);
			goto out;
		}
		memcpy(family, model, (size_t)(sep - model));
		family[sep - model] = '\0';
		snprintf(size, sizeof(size), "%s", sep + 2);
		for (fam = 0; fam < w->nfamilies; fam++)
			if (strcmp(w->families[fam].name, family) == 0)
				break;
		if (fam == w->nfamilies) {
			snprintf(err, len,
				 "%s:%ld: model_name: '%s': the "
				 "database has no model of family '%s'",
				 path, c.lines[r], model, family);
			goto out;
		}
		if ((sz = arena_family_size(w, family, size, &fam, why,
					    sizeof(why))) < 0) {
			snprintf(err, len, "%s:%ld: model_name: '%s': %s", path,
				 c.lines[r], model, why);
			goto out;
		}
		snprintf(j->name, sizeof(j->name), "%s", c.rows[r][ci[0]]);
		j->line = c.lines[r];
		j->submitted = (double)sub;
		j->iters = iters / ARENA_ITER_DIVISOR;
		j->gpus = (int)gpus;
		j->type = t;
		/*
		 * Arena cuts the trace into rounds from the first submission:
		 * a job joins the round whose end it does not pass, and a job
		 * out of order joins the current round.
		 */
		if (r == 0)
			w->first_submit = (double)sub;
		k = (long)ceil(((double)sub - w->first_submit) / ARENA_ROUND) -
		    1;
		if (k > round)
			round = k;
		j->round = round;
		for (m = 0; m < w->nmodels; m++)
			if (w->models[m].family == fam &&
			    w->models[m].size == sz &&
			    w->models[m].batch == (int)batch)
				break;
		if (m == w->nmodels) {
			struct arena_model *g =
				realloc(w->models, (m + 1) * sizeof(*g));

			if (g == NULL) {
				rc = COPUS_ENOMEM;
				goto out;
			}
			w->models = g;
			w->models[m] =
				(struct arena_model){ fam, sz, (int)batch, NULL,
						      0 };
			w->nmodels++;
		}
		j->model = (int)m;
		w->njobs++;
	}
	rc = job_ids_unique(path, w, err, len);
out:
	sim_csv_free(&c);
	return rc;
}

/* ------------------------------------------------------------- world */

int arena_world_read(const char *dir, struct arena_world *w, char *err,
		     size_t len)
{
	char path[4096];
	int rc;

	memset(w, 0, sizeof(*w));
	snprintf(path, sizeof(path), "%s/resources/sim_cluster_spec.json", dir);
	if ((rc = arena_cluster_read(path, w, err, len)) != COPUS_OK)
		goto fail;
	snprintf(path, sizeof(path), "%s/planner/models.csv", dir);
	if (access(path, R_OK) == 0 &&
	    (rc = models_csv_read(path, w, err, len)) != COPUS_OK)
		goto fail;
	snprintf(path, sizeof(path), "%s/database/prof_database.json", dir);
	if ((rc = arena_db_read(path, w, err, len)) != COPUS_OK)
		goto fail;
	snprintf(path, sizeof(path), "%s/traces/simulate_trace_philly.csv",
		 dir);
	if ((rc = arena_trace_read(path, w, err, len)) != COPUS_OK)
		goto fail;
	for (size_t m = 0; m < w->nmodels; m++)
		if ((rc = model_cells(w, &w->models[m])) != COPUS_OK) {
			snprintf(err, len, "out of memory");
			goto fail;
		}
	return COPUS_OK;
fail:
	arena_world_free(w);
	return rc;
}

void arena_world_free(struct arena_world *w)
{
	if (w == NULL)
		return;
	for (size_t m = 0; m < w->nmodels; m++)
		free(w->models[m].cells);
	free(w->models);
	free(w->db);
	free(w->jobs);
	memset(w, 0, sizeof(*w));
}
