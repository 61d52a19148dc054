/* copus-plan's readers: models, devices, collectives, measured times. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "plan-data.h"
#include "sim.h"

/* ------------------------------------------------------------ contents */
static int read_models(const char *path, struct plan_data *d, char *err,
		       size_t errlen);
static int read_devices(const char *path, struct plan_data *d, char *err,
			size_t errlen);
static int read_comm(const char *path, struct plan_data *d, char *err,
		     size_t errlen);
static int read_json(const char *path, struct json_object **out, char *err,
		     size_t errlen);

/*
 * Starting constants of a GPU type before calibration. The listed peak is
 * the single-precision rate of the CUDA cores; 2-byte models run their
 * matrix products on tensor cores (4 to 16 times that peak on the GPUs of
 * the data) at part of their rate, 4-byte convolutions on the CUDA cores
 * at half of theirs.
 */
#define PRIOR_EFFICIENCY_HALF 2.0
#define PRIOR_EFFICIENCY_SINGLE 0.5

/*
 * Bounds of what a device or a measured collective may say. Beyond them
 * the products and weighted sums of the fits leave the doubles (a peak of
 * 1e300 GFLOP/s is an infinite FLOP/s; a time of 1e-200 s an infinite
 * weight), and no real device or measurement comes near them.
 */
#define MAX_PEAK_GFLOPS 1e9    /* an exaFLOP/s */
#define MAX_MEMORY_MB 1e9      /* a petabyte */
#define MAX_BANDWIDTH_GB 1e9   /* an exabyte per second */
#define MIN_COMM_SECONDS 1e-9  /* a nanosecond */
#define MAX_COMM_SECONDS 1e6   /* eleven days */
#define MAX_COMM_ELEMENTS 1e15 /* several petabytes */

/* The efficiency class of a described model. */
static int kind_of(const copus_planner_desc *d)
{
	return (int)d->arch - 1;
}

/*
 * GPU types that devices.json may lack, from their vendors' data sheets:
 * NVIDIA A10, 31.2 TFLOP/s single precision, 24 GB (22,731 MiB usable),
 * 600 GB/s.
 */
static const struct {
	const char *type;
	double peak_gflops;
	double memory_mb;
	double bandwidth_gb;
} known_devices[] = {
	{ "a10", 31240.0, 22731.0, 600.0 },
};

/* ---------------------------------------------------------------- helpers */

static int field_int(const struct csv *c, size_t row, int col, int *out,
		     char *err, size_t errlen)
{
	const char *s = c->rows[row][col];
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < 1 || v > 1000000000) {
		snprintf(err, errlen,
			 "%s:%ld: field '%s': '%s' is not a positive integer",
			 c->path, c->lines[row], c->header[col], s);
		return COPUS_EPARSE;
	}
	*out = (int)v;
	return COPUS_OK;
}

static int col_of(const struct csv *c, const char *name, int *col, char *err,
		  size_t errlen)
{
	*col = sim_csv_col(c, name, err, errlen);
	return *col < 0 ? COPUS_EPARSE : COPUS_OK;
}

int plan_model_find(const struct plan_data *d, const char *name)
{
	char buf[PLAN_NAME_LEN];
	const char *dd = strstr(name, "__");

	/* Arena's trace writes "<family>__<size>". */
	if (dd != NULL && strlen(name) < sizeof(buf)) {
		size_t k = (size_t)(dd - name);
		memcpy(buf, name, k);
		snprintf(buf + k, sizeof(buf) - k, "_%s", dd + 2);
		name = buf;
	}
	for (int i = 0; i < d->n_models; i++)
		if (strcmp(d->models[i].name, name) == 0)
			return i;
	return -1;
}

static int gpu_find(const struct plan_data *d, const char *type)
{
	for (int i = 0; i < d->n_gpus; i++)
		if (strcmp(d->gpus[i].type, type) == 0)
			return i;
	return -1;
}

int plan_cell_parse(const struct plan_data *d, const char *name, int *gpu,
		    copus_planner_cell *cell, char *err, size_t errlen)
{
	char type[16], canon[PLAN_NAME_LEN];
	int nodes, nodes2, gpn, used = 0, g;

	/* Only the canonical spelling (no sign, space or leading zero), so
	 * that one cell has one name in every file that names it. */
	if (strlen(name) >= PLAN_NAME_LEN ||
	    sscanf(name, "%d_%15[a-z0-9]_%d_n_%d_d%n", &nodes, type, &nodes2,
		   &gpn, &used) != 4 ||
	    used != (int)strlen(name) || nodes < 1 || gpn < 1 ||
	    nodes != nodes2 || nodes > 4096 || gpn > 4096 ||
	    snprintf(canon, sizeof(canon), "%d_%s_%d_n_%d_d", nodes, type,
		     nodes, gpn) >= (int)sizeof(canon) ||
	    strcmp(canon, name) != 0) {
		snprintf(err, errlen,
			 "cell '%s' is not <nodes>_<type>_<nodes>_n_<gpus per "
			 "node>_d (e.g. 2_a40_2_n_2_d)",
			 name);
		return COPUS_EPARSE;
	}
	g = gpu_find(d, type);
	if (g < 0) {
		snprintf(err, errlen,
			 "cell '%s': GPU type '%s' is not in devices.json",
			 name, type);
		return COPUS_EINVAL;
	}
	*gpu = g;
	cell->nodes = nodes;
	cell->gpus_per_node = gpn;
	return COPUS_OK;
}

/* ---------------------------------------------------------------- models */

static int model_desc(const struct csv *c, size_t r, copus_planner_desc *m,
		      char *err, size_t errlen)
{
	int cf, cd, rc = COPUS_OK;
	const char *family, *dtype;

	if ((rc = col_of(c, "family", &cf, err, errlen)) ||
	    (rc = col_of(c, "dtype", &cd, err, errlen)))
		return rc;
	family = c->rows[r][cf];
	dtype = c->rows[r][cd];
	memset(m, 0, sizeof(*m));
	if (strcmp(dtype, "float16") == 0 || strcmp(dtype, "bfloat16") == 0)
		m->dtype_bytes = 2;
	else if (strcmp(dtype, "float32") == 0)
		m->dtype_bytes = 4;
	else {
		snprintf(err, errlen, "%s:%ld: field 'dtype': unknown '%s'",
			 c->path, c->lines[r], dtype);
		return COPUS_EPARSE;
	}
	struct {
		const char *col;
		int *dst;
	} f[8];
	int nf = 0;
	if (strcmp(family, "bert") == 0 || strcmp(family, "gpt") == 0 ||
	    strcmp(family, "moe") == 0) {
		m->arch = strcmp(family, "moe") == 0 ? COPUS_ARCH_MOE
						     : COPUS_ARCH_TRANSFORMER;
		f[nf++] = (typeof(f[0])){ "num_layers", &m->layers };
		f[nf++] = (typeof(f[0])){ "hidden_size", &m->hidden };
		f[nf++] = (typeof(f[0])){ "num_heads", &m->heads };
		f[nf++] = (typeof(f[0])){ "seq_len", &m->seq_len };
		f[nf++] = (typeof(f[0])){ "vocab_size", &m->vocab };
		if (m->arch == COPUS_ARCH_MOE)
			f[nf++] = (typeof(f[0])){ "num_experts",
						  &m->experts };
		if (m->arch == COPUS_ARCH_MOE)
			f[nf++] = (typeof(f[0])){ "expert_group_size",
						  &m->expert_group };
	} else if (strcmp(family, "wide_resnet") == 0) {
		m->arch = COPUS_ARCH_WIDE_RESNET;
		f[nf++] = (typeof(f[0])){ "layer_num", &m->depth };
		f[nf++] = (typeof(f[0])){ "width_factor", &m->width_factor };
		f[nf++] = (typeof(f[0])){ "num_channels", &m->channels };
		f[nf++] = (typeof(f[0])){ "num_classes", &m->classes };
		f[nf++] = (typeof(f[0])){ "image_size", &m->image_size };
	} else {
		snprintf(err, errlen,
			 "%s:%ld: field 'family': unknown architecture '%s' "
			 "(bert, gpt, moe or wide_resnet)",
			 c->path, c->lines[r], family);
		return COPUS_EPARSE;
	}
	for (int i = 0; i < nf; i++) {
		int col;
		if ((rc = col_of(c, f[i].col, &col, err, errlen)) ||
		    (rc = field_int(c, r, col, f[i].dst, err, errlen)))
			return rc;
	}
	return COPUS_OK;
}

static int read_models(const char *path, struct plan_data *d, char *err,
		       size_t errlen)
{
	struct csv c;
	int cf, cs, rc;

	rc = sim_csv_read(path, &c, err, errlen);
	if (rc)
		return COPUS_EPARSE;
	if ((rc = col_of(&c, "family", &cf, err, errlen)) ||
	    (rc = col_of(&c, "size", &cs, err, errlen)))
		goto out;
	d->models = calloc(c.nrows ? c.nrows : 1, sizeof(*d->models));
	if (d->models == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t r = 0; r < c.nrows; r++) {
		struct plan_model *m = &d->models[d->n_models];
		int n;

		/* A size of letters, digits and dots keeps the model's name
		 * "<family>_<size>" apart from Arena's "<family>__<size>",
		 * which plan_model_find() reads as the same model. */
		const char *size = c.rows[r][cs];

		if (size[0] == '\0' ||
		    size[strspn(size, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "abcdefghijklmnopqrstuvwxyz"
				      "0123456789.")] != '\0') {
			snprintf(err, errlen,
				 "%s:%ld: field 'size': '%s' is not letters, "
				 "digits and dots",
				 path, c.lines[r], size);
			rc = COPUS_EPARSE;
			goto out;
		}
		if (snprintf(m->name, sizeof(m->name), "%s_%s", c.rows[r][cf],
			     size) >= (int)sizeof(m->name)) {
			snprintf(err, errlen, "%s:%ld: field 'size': too long",
				 path, c.lines[r]);
			rc = COPUS_EPARSE;
			goto out;
		}
		if (plan_model_find(d, m->name) >= 0) {
			snprintf(err, errlen,
				 "%s:%ld: model '%s' is listed twice", path,
				 c.lines[r], m->name);
			rc = COPUS_EPARSE;
			goto out;
		}
		rc = model_desc(&c, r, &m->desc, err, errlen);
		if (rc)
			goto out;
		m->layers = calloc(COPUS_PLANNER_MAX_LAYERS,
				   sizeof(*m->layers));
		if (m->layers == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		d->n_models++;
		rc = copus_planner_layers(&m->desc, m->layers,
					  COPUS_PLANNER_MAX_LAYERS, &n);
		if (rc) {
			snprintf(err, errlen, "%s:%ld: model '%s': %s", path,
				 c.lines[r], m->name, copus_strerror(rc));
			goto out;
		}
		m->model.layers = m->layers;
		m->model.n_layers = n;
		m->model.dtype_bytes = m->desc.dtype_bytes;
		m->model.kind = kind_of(&m->desc);
	}
out:
	sim_csv_free(&c);
	return rc;
}

/* --------------------------------------------------------------- devices */

static int read_json(const char *path, struct json_object **out, char *err,
		     size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long len;
	struct json_tokener *tok;
	int rc = COPUS_OK;

	if (f == NULL) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		return COPUS_EIO;
	}
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET)) {
		snprintf(err, errlen, "%s: cannot read", path);
		fclose(f);
		return COPUS_EIO;
	}
	text = malloc((size_t)len + 1);
	if (text == NULL || fread(text, 1, (size_t)len, f) != (size_t)len) {
		snprintf(err, errlen, "%s: cannot read", path);
		free(text);
		fclose(f);
		return COPUS_EIO;
	}
	fclose(f);
	text[len] = '\0';
	tok = json_tokener_new();
	if (tok == NULL) {
		free(text);
		return COPUS_ENOMEM;
	}
	*out = json_tokener_parse_ex(tok, text, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	if (len == 0) {
		snprintf(err, errlen, "%s: empty, not JSON", path);
		json_object_put(*out);
		*out = NULL;
		rc = COPUS_EPARSE;
	} else if (*out == NULL || je != json_tokener_success) {
		size_t at = json_tokener_get_parse_end(tok);
		long line = 1;
		/* A file's last newline ends its last line: the end of the
		 * file is on that line. */
		for (size_t i = 0; i < at && i + 1 < (size_t)len; i++)
			line += text[i] == '\n';
		if (je == json_tokener_continue)
			snprintf(err, errlen, "%s:%ld: JSON ends too early",
				 path, line);
		else
			snprintf(err, errlen, "%s:%ld: JSON: %s", path, line,
				 json_tokener_error_desc(je));
		json_object_put(*out);
		*out = NULL;
		rc = COPUS_EPARSE;
	}
	json_tokener_free(tok);
	free(text);
	return rc;
}

static void gpu_init(struct plan_gpu *g, const char *type, double gflops,
		     double mb, double bandwidth_gb)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->type, sizeof(g->type), "%s", type);
	g->gpu.peak_flops = gflops * 1e9;
	g->gpu.memory_bytes = mb * 1048576.0;
	g->gpu.memory_bandwidth = bandwidth_gb * 1e9;
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		g->gpu.efficiency[k] = PRIOR_EFFICIENCY_HALF;
	g->gpu.efficiency[COPUS_ARCH_WIDE_RESNET - 1] =
		PRIOR_EFFICIENCY_SINGLE;
	g->gpu.comm_scale[COPUS_LINK_INTRA] = 1.0;
	g->gpu.comm_scale[COPUS_LINK_INTER] = 1.0;
	/* The servers that comm.csv measured have one network adapter each:
	 * the groups with ranks on a node share it. */
	g->gpu.inter_links = 1.0;
}

static int json_number(struct json_object *o, const char *key, double *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    (!json_object_is_type(v, json_type_double) &&
	     !json_object_is_type(v, json_type_int)))
		return COPUS_EPARSE;
	*out = json_object_get_double(v);
	return isfinite(*out) ? COPUS_OK : COPUS_EPARSE;
}

static int read_devices(const char *path, struct plan_data *d, char *err,
			size_t errlen)
{
	struct json_object *root;
	int rc = read_json(path, &root, err, errlen);

	if (rc)
		return rc;
	if (!json_object_is_type(root, json_type_array)) {
		snprintf(err, errlen, "%s: not a JSON array of devices", path);
		json_object_put(root);
		return COPUS_EPARSE;
	}
	for (size_t i = 0; i < json_object_array_length(root); i++) {
		struct json_object *e = json_object_array_get_idx(root, i);
		struct json_object *t;
		double gflops, mb, bw;
		const char *type;

		if (!json_object_object_get_ex(e, "gpu_type", &t) ||
		    !json_object_is_type(t, json_type_string)) {
			snprintf(err, errlen,
				 "%s: device %zu: no string field 'gpu_type'",
				 path, i);
			rc = COPUS_EPARSE;
			break;
		}
		type = json_object_get_string(t);
		if (json_number(e, "peak_gflops_per_second", &gflops) ||
		    !(gflops > 0.0) || gflops > MAX_PEAK_GFLOPS) {
			snprintf(err, errlen,
				 "%s: device '%s': field "
				 "'peak_gflops_per_second' is not a positive "
				 "number up to %g",
				 path, type, MAX_PEAK_GFLOPS);
			rc = COPUS_EPARSE;
			break;
		}
		if (json_number(e, "total_gpu_mem_size_mb", &mb) ||
		    !(mb > 0.0) || mb > MAX_MEMORY_MB) {
			snprintf(err, errlen,
				 "%s: device '%s': field "
				 "'total_gpu_mem_size_mb' is not a positive "
				 "number up to %g",
				 path, type, MAX_MEMORY_MB);
			rc = COPUS_EPARSE;
			break;
		}
		/* The memory bandwidth is optional: without it the
		 * planner leaves out its memory-bound term. */
		if (!json_object_object_get_ex(e, "mem_bandwidth_gb", NULL)) {
			bw = 0.0;
		} else if (json_number(e, "mem_bandwidth_gb", &bw) ||
			   !(bw > 0.0) || bw > MAX_BANDWIDTH_GB) {
			snprintf(err, errlen,
				 "%s: device '%s': field 'mem_bandwidth_gb' "
				 "is not a positive number up to %g",
				 path, type, MAX_BANDWIDTH_GB);
			rc = COPUS_EPARSE;
			break;
		}
		/* What a cell name can carry (plan_cell_parse). */
		if (type[0] == '\0' ||
		    strlen(type) >= sizeof(d->gpus[0].type) ||
		    type[strspn(type, "abcdefghijklmnopqrstuvwxyz"
				      "0123456789")] != '\0') {
			snprintf(err, errlen,
				 "%s: device %zu: field 'gpu_type': '%s' is "
				 "not 1 to %zu lower-case letters and digits",
				 path, i, type, sizeof(d->gpus[0].type) - 1);
			rc = COPUS_EPARSE;
			break;
		}
		if (gpu_find(d, type) >= 0 || d->n_gpus == PLAN_MAX_TYPES) {
			snprintf(err, errlen,
				 "%s: device '%s': listed twice or more than "
				 "%d devices",
				 path, type, PLAN_MAX_TYPES);
			rc = COPUS_EPARSE;
			break;
		}
		gpu_init(&d->gpus[d->n_gpus++], type, gflops, mb, bw);
	}
	json_object_put(root);
	if (rc)
		return rc;
	for (size_t k = 0; k < sizeof(known_devices) / sizeof(*known_devices);
	     k++)
		if (gpu_find(d, known_devices[k].type) < 0 &&
		    d->n_gpus < PLAN_MAX_TYPES)
			gpu_init(&d->gpus[d->n_gpus++], known_devices[k].type,
				 known_devices[k].peak_gflops,
				 known_devices[k].memory_mb,
				 known_devices[k].bandwidth_gb);
	return COPUS_OK;
}

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

static int read_comm(const char *path, struct plan_data *d, char *err,
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

/* ------------------------------------------------------------- the data */

int plan_data_load(const char *dir, struct plan_data *d, char *err,
		   size_t errlen)
{
	char path[4096];
	int rc;

	memset(d, 0, sizeof(*d));
	snprintf(path, sizeof(path), "%s/models.csv", dir);
	rc = read_models(path, d, err, errlen);
	if (rc == COPUS_OK) {
		snprintf(path, sizeof(path), "%s/devices.json", dir);
		rc = read_devices(path, d, err, errlen);
	}
	if (rc == COPUS_OK) {
		snprintf(path, sizeof(path), "%s/comm.csv", dir);
		rc = read_comm(path, d, err, errlen);
	}
	if (rc)
		plan_data_free(d);
	return rc;
}

void plan_data_free(struct plan_data *d)
{
	if (d == NULL)
		return;
	for (int i = 0; i < d->n_models; i++)
		free(d->models[i].layers);
	free(d->models);
	memset(d, 0, sizeof(*d));
}

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
		   struct plan_row **rows, size_t *n, char *err,
		   size_t errlen)
{
	struct json_object *root, *opt;
	size_t cap = 0;
	int rc = read_json(path, &root, err, errlen);

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
	json_object_object_foreach(opt, key, cells)
	{
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
		json_object_object_foreach(cells, cell, v)
		{
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
		    struct plan_row **rows, size_t *n, char *err,
		    size_t errlen)
{
	struct csv c;
	int cm, cb, cc, rc;
	size_t cap = 0;

	*rows = NULL;
	*n = 0;
	if (sim_csv_read(path, &c, err, errlen))
		return COPUS_EPARSE;
	if ((rc = col_of(&c, "model", &cm, err, errlen)) ||
	    (rc = col_of(&c, "batch", &cb, err, errlen)) ||
	    (rc = col_of(&c, "cell", &cc, err, errlen)))
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
		if ((rc = field_int(&c, i, cb, &r.batch, err, errlen)))
			goto out;
		rc = plan_cell_parse(d, c.rows[i][cc], &r.gpu, &r.cell, why,
				     sizeof(why));
		if (rc) {
			snprintf(err, errlen, "%s:%ld: field 'cell': %s", path,
				 r.line, why);
			goto out;
		}
		snprintf(r.cell_name, sizeof(r.cell_name), "%s",
			 c.rows[i][cc]);
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
	if ((rc = col_of(&c, "model", &cm, err, errlen)) ||
	    (rc = col_of(&c, "cell", &cc, err, errlen)) ||
	    (rc = col_of(&c, "total_s", &ct, err, errlen)))
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
