/*
 * copus-plan's data directory: its models (models.csv) and GPU types
 * (devices.json), and the loader of the three files (plan-comm.c reads
 * comm.csv).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "plan-read.h"

/* ------------------------------------------------------------ contents */
static int read_models(const char *path, struct plan_data *d, char *err,
		       size_t errlen);
static int read_devices(const char *path, struct plan_data *d, char *err,
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

/* ---------------------------------------------------------------- models */

static int model_desc(const struct csv *c, size_t r, copus_planner_desc *m,
		      char *err, size_t errlen)
{
	int cf, cd, rc = COPUS_OK;
	const char *family, *dtype;

	if ((rc = copus__plan_col_of(c, "family", &cf, err, errlen)) ||
	    (rc = copus__plan_col_of(c, "dtype", &cd, err, errlen)))
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
			f[nf++] = (typeof(f[0])){ "num_experts", &m->experts };
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
		if ((rc = copus__plan_col_of(c, f[i].col, &col, err, errlen)) ||
		    (rc = copus__plan_field_int(c, r, col, f[i].dst, err,
						errlen)))
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
	if ((rc = copus__plan_col_of(&c, "family", &cf, err, errlen)) ||
	    (rc = copus__plan_col_of(&c, "size", &cs, err, errlen)))
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
		m->layers =
			calloc(COPUS_PLANNER_MAX_LAYERS, sizeof(*m->layers));
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
	g->gpu.efficiency[COPUS_ARCH_WIDE_RESNET - 1] = PRIOR_EFFICIENCY_SINGLE;
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
	int rc = copus__plan_read_json(path, &root, err, errlen);

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
		if (copus__plan_gpu_find(d, type) >= 0 ||
		    d->n_gpus == PLAN_MAX_TYPES) {
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
		if (copus__plan_gpu_find(d, known_devices[k].type) < 0 &&
		    d->n_gpus < PLAN_MAX_TYPES)
			gpu_init(&d->gpus[d->n_gpus++], known_devices[k].type,
				 known_devices[k].peak_gflops,
				 known_devices[k].memory_mb,
				 known_devices[k].bandwidth_gb);
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
		rc = copus__plan_read_comm(path, d, err, errlen);
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
