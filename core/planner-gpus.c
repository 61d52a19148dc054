/*
 * GPU constants shared by the scheduler and the job (see copus/planner.h):
 * the default constants of common GPU types, and the text of calibrated
 * constants, parsed strictly with json-c and written with snprintf. Pure:
 * no I/O.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <copus/planner.h>

#include "internal.h"

/* ------------------------------------------------------------ contents */
struct gpu_row;
struct slot;
static void gpu_of_row(const struct gpu_row *r, copus_planner_gpu *g);
static int slots_of(copus_planner_gpu *g, struct slot *s);
static int check_gpu(const char *name, const copus_planner_gpu *g, char *err,
		     size_t errlen);
static int parse_type(struct json_object *o, const char *name,
		      copus_planner_gpu *g, char *err, size_t errlen);

/* The planner's uncalibrated efficiencies (as copus-plan starts from). */
#define PRIOR_EFFICIENCY_HALF 2.0
#define PRIOR_EFFICIENCY_SINGLE 0.5

/*
 * Bus bandwidth of a link: 80% of its rate in one direction, what NCCL's
 * collectives typically reach on it.
 */
#define LINK_SHARE 0.8

/* Rates in one direction, GB/s, per GPU. */
#define NVLINK2 150.0  /* V100 SXM2: 300 GB/s both ways */
#define NVLINK3 300.0  /* A100 SXM4: 600 GB/s both ways */
#define NVLINK4 450.0  /* H100/H200 SXM5: 900 GB/s both ways */
#define PCIE3 16.0     /* PCIe 3.0 x16 */
#define PCIE4 32.0     /* PCIe 4.0 x16 */
#define PCIE3_HOST 8.0 /* PCIe 3.0 x16 without peer-to-peer */
#define PCIE4_HOST 16.0 /* PCIe 4.0 x16 without peer-to-peer: through the
			 * host's memory, half the link */
#define IB_EDR 12.5    /* 100 Gb/s */
#define IB_HDR 25.0    /* 200 Gb/s */
#define IB_NDR 50.0    /* 400 Gb/s */
#define ETH_100G 12.5
#define ETH_25G 3.125
#define ETH_10G 1.25

/* Latencies of a collective, microseconds. */
#define LAT_NVLINK 10.0
#define LAT_PCIE 15.0
#define LAT_IB 20.0
#define LAT_ETH 50.0

/*
 * The table: single-precision peak of the CUDA cores, memory and memory
 * bandwidth from the vendors' data sheets (GB read as 10^9 bytes, a
 * little less than the memory holds, which leaves the driver's and ECC's
 * share), and the usual link within a node and network adapter per GPU
 * across nodes of the servers each type comes in. The first row is the
 * generic fallback.
 */
static const struct gpu_row {
	const char *name;
	double tflops;     /* FP32, CUDA cores */
	double memory_gb;
	double bandwidth_gbs; /* memory */
	double intra_gbs, intra_us;
	double inter_gbs, inter_us;
	double links; /* network adapters per server */
} gpu_table[] = {
	/* NVIDIA A100 SXM4 40GB: 19.5 TFLOP/s, NVLink 3, HDR per GPU. */
	{ "a100", 19.5, 40.0, 1555.0, NVLINK3, LAT_NVLINK, IB_HDR, LAT_IB, 8 },
	{ "a100-80g", 19.5, 80.0, 2039.0, NVLINK3, LAT_NVLINK, IB_HDR,
	  LAT_IB, 8 },
	/* NVIDIA H100 SXM5 80GB: 67 TFLOP/s, NVLink 4, NDR per GPU. */
	{ "h100", 67.0, 80.0, 3350.0, NVLINK4, LAT_NVLINK, IB_NDR, LAT_IB, 8 },
	/* NVIDIA H200 SXM 141GB: as the H100 with more memory. */
	{ "h200", 67.0, 141.0, 4800.0, NVLINK4, LAT_NVLINK, IB_NDR, LAT_IB, 8 },
	/* NVIDIA V100 SXM2 32GB / 16GB: 15.7 TFLOP/s, NVLink 2, EDR, four
	 * adapters for eight GPUs (DGX-1). */
	{ "v100", 15.7, 32.0, 900.0, NVLINK2, LAT_NVLINK, IB_EDR, LAT_IB, 4 },
	{ "v100-16g", 15.7, 16.0, 900.0, NVLINK2, LAT_NVLINK, IB_EDR, LAT_IB,
	  4 },
	/* PCIe 4.0 data-centre cards, one 100 Gb/s adapter per server. */
	{ "a40", 37.4, 48.0, 696.0, PCIE4, LAT_PCIE, ETH_100G, LAT_ETH, 1 },
	{ "a30", 10.3, 24.0, 933.0, PCIE4, LAT_PCIE, ETH_100G, LAT_ETH, 1 },
	{ "a10", 31.2, 24.0, 600.0, PCIE4, LAT_PCIE, ETH_100G, LAT_ETH, 1 },
	{ "l4", 30.3, 24.0, 300.0, PCIE4, LAT_PCIE, ETH_100G, LAT_ETH, 1 },
	{ "l40s", 91.6, 48.0, 864.0, PCIE4, LAT_PCIE, ETH_100G, LAT_ETH, 1 },
	{ "rtxa6000", 38.7, 48.0, 768.0, PCIE4, LAT_PCIE, ETH_100G, LAT_ETH,
	  1 },
	/* NVIDIA T4: 8.1 TFLOP/s, 16 GB, PCIe 3.0, 25 Gb/s Ethernet. */
	{ "t4", 8.1, 16.0, 320.0, PCIE3, LAT_PCIE, ETH_25G, LAT_ETH, 1 },
	/* NVIDIA Quadro RTX 6000: 16.3 TFLOP/s, 24 GB, PCIe 3.0. */
	{ "rtx6000", 16.3, 24.0, 672.0, PCIE3, LAT_PCIE, ETH_25G, LAT_ETH, 1 },
	/* GeForce cards: no peer-to-peer, 10 Gb/s Ethernet. */
	{ "rtx2080ti", 13.4, 11.0, 616.0, PCIE3_HOST, LAT_PCIE, ETH_10G,
	  LAT_ETH, 1 },
	{ "rtx3090", 35.6, 24.0, 936.0, PCIE4_HOST, LAT_PCIE, ETH_10G,
	  LAT_ETH, 1 },
	{ "rtx4090", 82.6, 24.0, 1008.0, PCIE4_HOST, LAT_PCIE, ETH_10G,
	  LAT_ETH, 1 },
};

#define N_ROWS (sizeof(gpu_table) / sizeof(*gpu_table))

static void gpu_of_row(const struct gpu_row *r, copus_planner_gpu *g)
{
	memset(g, 0, sizeof(*g));
	g->peak_flops = r->tflops * 1e12;
	g->memory_bytes = r->memory_gb * 1e9;
	g->memory_bandwidth = r->bandwidth_gbs * 1e9;
	g->inter_links = r->links;
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		g->efficiency[k] = PRIOR_EFFICIENCY_HALF;
	g->efficiency[COPUS_ARCH_WIDE_RESNET - 1] = PRIOR_EFFICIENCY_SINGLE;
	g->comm_scale[COPUS_LINK_INTRA] = 1.0;
	g->comm_scale[COPUS_LINK_INTER] = 1.0;
	for (int c = 0; c < COPUS_COLL_COUNT; c++) {
		g->alpha[COPUS_LINK_INTRA][c] = r->intra_us / 1e6;
		g->inv_beta[COPUS_LINK_INTRA][c] =
			1.0 / (LINK_SHARE * r->intra_gbs * 1e9);
		g->alpha[COPUS_LINK_INTER][c] = r->inter_us / 1e6;
		g->inv_beta[COPUS_LINK_INTER][c] =
			1.0 / (LINK_SHARE * r->inter_gbs * 1e9);
	}
}

/* ASCII case-insensitive equality, whatever the locale. */
static bool same_name(const char *a, const char *b)
{
	for (;; a++, b++) {
		char x = *a, y = *b;

		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return false;
		if (x == '\0')
			return true;
	}
}

/* The built-in table's names into buf: "a100, a100-80g, ...". */
static void table_names(char *buf, size_t size)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_ROWS && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s",
				       i ? ", " : "", gpu_table[i].name);
}

int copus_planner_gpu_default(const char *type, copus_planner_gpu *out)
{
	if (out == NULL)
		return COPUS_EINVAL;
	for (size_t i = 0; type != NULL && i < N_ROWS; i++) {
		if (same_name(type, gpu_table[i].name)) {
			gpu_of_row(&gpu_table[i], out);
			return COPUS_OK;
		}
	}
	gpu_of_row(&gpu_table[0], out);
	return COPUS_ENODATA;
}

/* ------------------------------------------------------- the text's slots */


static const char *const link_names[COPUS_LINK_COUNT] = { "intra", "inter" };
static const char *const coll_names[COPUS_COLL_COUNT] = {
	"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send",
};
static const char *const shape_names[COPUS_SHAPE_COUNT] = {
	"peers", "ranks_per_node", "groups_per_node", "nodes",
};

/* One number of copus_planner_gpu: its path in the text and its bounds
 * (lo excluded when lo_open). */
struct slot {
	char path[40];
	double *v;
	double lo, hi;
	bool lo_open;
};

#define N_SLOTS (4 + 2 * COPUS_PLANNER_KINDS + COPUS_LINK_COUNT + 2 + \
		 2 * COPUS_LINK_COUNT * COPUS_COLL_COUNT + COPUS_SHAPE_COUNT)

static void slot_set(struct slot *s, double *v, double lo, bool lo_open,
		     double hi, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void slot_set(struct slot *s, double *v, double lo, bool lo_open,
		     double hi, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->path, sizeof(s->path), fmt, ap);
	va_end(ap);
	s->v = v;
	s->lo = lo;
	s->lo_open = lo_open;
	s->hi = hi;
}

/* Every number of g, in the order of the text; returns their count. */
static int slots_of(copus_planner_gpu *g, struct slot *s)
{
	int n = 0;

	slot_set(&s[n++], &g->peak_flops, 0, true, COPUS_PLANNER_GPU_PEAK_MAX,
		 "peak_flops");
	slot_set(&s[n++], &g->memory_bytes, 0, true,
		 COPUS_PLANNER_GPU_MEMORY_MAX, "memory_bytes");
	slot_set(&s[n++], &g->memory_bandwidth, 0, false,
		 COPUS_PLANNER_GPU_BANDWIDTH_MAX, "memory_bandwidth");
	slot_set(&s[n++], &g->inter_links, 0, false,
		 COPUS_PLANNER_GPU_LINKS_MAX, "inter_links");
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		slot_set(&s[n++], &g->efficiency[k], 0, true,
			 COPUS_PLANNER_GPU_EFFICIENCY_MAX, "efficiency[%d]", k);
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		slot_set(&s[n++], &g->param_s[k], 0, false,
			 COPUS_PLANNER_GPU_PARAM_S_MAX, "param_s[%d]", k);
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		slot_set(&s[n++], &g->comm_scale[l], 0, true,
			 COPUS_PLANNER_GPU_SCALE_MAX, "comm_scale.%s",
			 link_names[l]);
	slot_set(&s[n++], &g->overhead_s, 0, false,
		 COPUS_PLANNER_GPU_SECONDS_MAX, "overhead_s");
	slot_set(&s[n++], &g->layer_s, 0, false, COPUS_PLANNER_GPU_SECONDS_MAX,
		 "layer_s");
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		for (int c = 0; c < COPUS_COLL_COUNT; c++)
			slot_set(&s[n++], &g->alpha[l][c], 0, false,
				 COPUS_PLANNER_GPU_SECONDS_MAX, "alpha.%s.%s",
				 link_names[l], coll_names[c]);
	for (int l = 0; l < COPUS_LINK_COUNT; l++)
		for (int c = 0; c < COPUS_COLL_COUNT; c++)
			slot_set(&s[n++], &g->inv_beta[l][c], 0, false,
				 COPUS_PLANNER_GPU_INV_BETA_MAX,
				 "inv_beta.%s.%s", link_names[l],
				 coll_names[c]);
	for (int e = 0; e < COPUS_SHAPE_COUNT; e++)
		slot_set(&s[n++], &g->shape_exp[e],
			 -COPUS_PLANNER_GPU_SHAPE_EXP_MAX, false,
			 COPUS_PLANNER_GPU_SHAPE_EXP_MAX, "shape.%s",
			 shape_names[e]);
	return n;
}

/* A GPU type name: 1..COPUS_PLANNER_TYPE_LEN - 1 of [A-Za-z0-9_.-]. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n < COPUS_PLANNER_TYPE_LEN &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789_.-") == n;
}

static int check_gpu(const char *name, const copus_planner_gpu *g, char *err,
		     size_t errlen)
{
	copus_planner_gpu copy = *g;
	struct slot s[N_SLOTS];
	int n = slots_of(&copy, s);

	for (int i = 0; i < n; i++) {
		double x = *s[i].v;

		if (!isfinite(x) || x > s[i].hi || x < s[i].lo ||
		    (s[i].lo_open && x == s[i].lo)) {
			copus__err_set(err, errlen,
				"GPU type \"%s\": \"%s\": %g is not in %s%g, %g]",
				name, s[i].path, x, s[i].lo_open ? "(" : "[",
				s[i].lo, s[i].hi);
			return COPUS_EPARSE;
		}
	}
	return COPUS_OK;
}

/* ----------------------------------------------------------------- format */

struct out {
	char *buf;
	size_t size, pos; /* pos: the length so far, even past size */
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->pos < o->size ? o->buf + o->pos : NULL,
		      o->pos < o->size ? o->size - o->pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/*
 * The shortest of %.15g, %.16g and %.17g that reads back as x: every
 * double survives the text, and round figures stay round.
 */
static const char *num(char buf[32], double x)
{
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, 32, "%.*g", digits, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	return buf;
}

static void put_colls(struct out *o, const char *key,
		      const double v[COPUS_LINK_COUNT][COPUS_COLL_COUNT],
		      bool last)
{
	char b[32];

	put(o, "      \"%s\": {\n", key);
	for (int l = 0; l < COPUS_LINK_COUNT; l++) {
		put(o, "        \"%s\": {", link_names[l]);
		for (int c = 0; c < COPUS_COLL_COUNT; c++)
			put(o, "%s\"%s\": %s", c ? ", " : "", coll_names[c],
			    num(b, v[l][c]));
		put(o, "}%s\n", l + 1 < COPUS_LINK_COUNT ? "," : "");
	}
	put(o, "      }%s\n", last ? "" : ",");
}

static void put_kinds(struct out *o, const char *key, const double *v)
{
	char b[32];

	put(o, "      \"%s\": [", key);
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++)
		put(o, "%s%s", k ? ", " : "", num(b, v[k]));
	put(o, "],\n");
}

int copus_planner_gpus_format(const copus_planner_gpu_type *gpus, int n,
			      char *buf, size_t size, size_t *len, char *err,
			      size_t errlen)
{
	struct out o = { buf, size, 0 };
	int rc;

	if ((gpus == NULL && n > 0) || n < 0 || n > COPUS_PLANNER_MAX_GPUS ||
	    buf == NULL || size == 0) {
		copus__err_set(err, errlen, "copus_planner_gpus_format: bad argument");
		return COPUS_EINVAL;
	}
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (!name_ok(gpus[i].name)) {
			copus__err_set(err, errlen,
				"GPU type %d: name is not 1..%d characters of "
				"[A-Za-z0-9_.-]", i, COPUS_PLANNER_TYPE_LEN - 1);
			return COPUS_EINVAL;
		}
		for (int j = 0; j < i; j++) {
			if (strcmp(gpus[i].name, gpus[j].name) == 0) {
				copus__err_set(err, errlen,
					"GPU type \"%s\" is listed twice",
					gpus[i].name);
				return COPUS_EINVAL;
			}
		}
		if ((rc = check_gpu(gpus[i].name, &gpus[i].gpu, err,
				    errlen)) != COPUS_OK)
			return COPUS_EINVAL;
	}
	put(&o, "{\n  \"version\": %d,\n  \"gpus\": {\n",
	    COPUS_PLANNER_GPUS_VERSION);
	for (int i = 0; i < n; i++) {
		const copus_planner_gpu *g = &gpus[i].gpu;
		char b1[32], b2[32];

		put(&o, "    \"%s\": {\n", gpus[i].name);
		put(&o, "      \"peak_flops\": %s,\n", num(b1, g->peak_flops));
		put(&o, "      \"memory_bytes\": %s,\n",
		    num(b1, g->memory_bytes));
		put(&o, "      \"memory_bandwidth\": %s,\n",
		    num(b1, g->memory_bandwidth));
		put(&o, "      \"inter_links\": %s,\n",
		    num(b1, g->inter_links));
		put_kinds(&o, "efficiency", g->efficiency);
		put_kinds(&o, "param_s", g->param_s);
		put(&o, "      \"comm_scale\": {\"intra\": %s, "
			"\"inter\": %s},\n",
		    num(b1, g->comm_scale[COPUS_LINK_INTRA]),
		    num(b2, g->comm_scale[COPUS_LINK_INTER]));
		put(&o, "      \"overhead_s\": %s,\n", num(b1, g->overhead_s));
		put(&o, "      \"layer_s\": %s,\n", num(b1, g->layer_s));
		put_colls(&o, "alpha", g->alpha, false);
		put_colls(&o, "inv_beta", g->inv_beta, false);
		put(&o, "      \"shape\": {");
		for (int e = 0; e < COPUS_SHAPE_COUNT; e++)
			put(&o, "%s\"%s\": %s", e ? ", " : "", shape_names[e],
			    num(b1, g->shape_exp[e]));
		put(&o, "}\n");
		put(&o, "    }%s\n", i + 1 < n ? "," : "");
	}
	put(&o, "  }\n}\n");
	if (len != NULL)
		*len = o.pos;
	if (o.pos >= size) {
		buf[0] = '\0';
		copus__err_set(err, errlen, "the text takes %zu bytes, the buffer %zu",
			o.pos + 1, size);
		return COPUS_ERANGE;
	}
	return COPUS_OK;
}

/* ------------------------------------------------------------------ parse */

/* The 1-based line of offset off in text. */
static long line_of(const char *text, size_t off)
{
	long line = 1;

	for (size_t i = 0; i < off && text[i] != '\0'; i++)
		line += text[i] == '\n';
	return line;
}

/* Members of every object under o: compared with the colons of the text,
 * it finds the duplicate keys json-c drops. */
static long members_of(struct json_object *o)
{
	long n = 0;

	if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, key, v) {
			(void)key;
			n += 1 + members_of(v);
		}
	} else if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			n += members_of(json_object_array_get_idx(o, i));
	}
	return n;
}

static long colons_of(const char *s)
{
	bool in_str = false, esc = false;
	long colons = 0;

	for (; *s != '\0'; s++) {
		if (in_str) {
			if (esc)
				esc = false;
			else if (*s == '\\')
				esc = true;
			else if (*s == '"')
				in_str = false;
		} else if (*s == '"') {
			in_str = true;
		} else if (*s == ':') {
			colons++;
		}
	}
	return colons;
}

/* Only the keys of names (n of them) in o, each of them present. */
static int keys_exactly(struct json_object *o, const char *const *names,
			int n, const char *type, const char *where, char *err,
			size_t errlen)
{
	if (!json_object_is_type(o, json_type_object)) {
		copus__err_set(err, errlen, "GPU type \"%s\": \"%s\": %.40s is not an "
			"object", type, where, json_object_to_json_string(o));
		return COPUS_EPARSE;
	}
	json_object_object_foreach(o, key, v) {
		bool known = false;

		(void)v;
		for (int i = 0; i < n; i++)
			known = known || strcmp(key, names[i]) == 0;
		if (!known) {
			copus__err_set(err, errlen,
				"GPU type \"%s\": member \"%s%s%.32s\" is unknown",
				type, where, where[0] ? "." : "", key);
			return COPUS_EPARSE;
		}
	}
	for (int i = 0; i < n; i++) {
		if (!json_object_object_get_ex(o, names[i], NULL)) {
			copus__err_set(err, errlen,
				"GPU type \"%s\": member \"%s%s%s\" is missing",
				type, where, where[0] ? "." : "", names[i]);
			return COPUS_EPARSE;
		}
	}
	return COPUS_OK;
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

static int number(struct json_object *v, const char *type, const char *path,
		  double *out, char *err, size_t errlen)
{
	if (v == NULL || (!json_object_is_type(v, json_type_double) &&
			  !json_object_is_type(v, json_type_int))) {
		copus__err_set(err, errlen, "GPU type \"%s\": \"%s\": %.40s is not a "
			"number", type, path,
			v ? json_object_to_json_string(v) : "null");
		return COPUS_EPARSE;
	}
	/* -0 is 0: the text then writes it back as it reads it. */
	*out = json_object_get_double(v) + 0.0;
	return COPUS_OK;
}

static int kinds(struct json_object *o, const char *type, const char *key,
		 double *out, char *err, size_t errlen)
{
	struct json_object *a = get(o, key);
	char path[40];

	if (a == NULL || !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) != COPUS_PLANNER_KINDS) {
		copus__err_set(err, errlen, "GPU type \"%s\": \"%s\": %.60s is not an "
			"array of %d numbers", type, key,
			a ? json_object_to_json_string(a) : "null",
			COPUS_PLANNER_KINDS);
		return COPUS_EPARSE;
	}
	for (int k = 0; k < COPUS_PLANNER_KINDS; k++) {
		snprintf(path, sizeof(path), "%s[%d]", key, k);
		if (number(json_object_array_get_idx(a, k), type, path,
			   &out[k], err, errlen))
			return COPUS_EPARSE;
	}
	return COPUS_OK;
}

/* An object of n numbers named names[], into out in their order. */
static int named(struct json_object *o, const char *type, const char *key,
		 const char *const *names, int n, double *out, char *err,
		 size_t errlen)
{
	struct json_object *v = get(o, key);
	char path[48];
	int rc;

	rc = keys_exactly(v, names, n, type, key, err, errlen);
	for (int i = 0; rc == COPUS_OK && i < n; i++) {
		snprintf(path, sizeof(path), "%s.%s", key, names[i]);
		rc = number(get(v, names[i]), type, path, &out[i], err,
			    errlen);
	}
	return rc;
}

static int colls(struct json_object *o, const char *type, const char *key,
		 double out[COPUS_LINK_COUNT][COPUS_COLL_COUNT], char *err,
		 size_t errlen)
{
	struct json_object *v = get(o, key);
	char path[48];
	int rc;

	rc = keys_exactly(v, link_names, COPUS_LINK_COUNT, type, key, err,
			  errlen);
	for (int l = 0; rc == COPUS_OK && l < COPUS_LINK_COUNT; l++) {
		struct json_object *w = get(v, link_names[l]);

		snprintf(path, sizeof(path), "%s.%s", key, link_names[l]);
		rc = keys_exactly(w, coll_names, COPUS_COLL_COUNT, type, path,
				  err, errlen);
		for (int c = 0; rc == COPUS_OK && c < COPUS_COLL_COUNT; c++) {
			snprintf(path, sizeof(path), "%s.%s.%s", key,
				 link_names[l], coll_names[c]);
			rc = number(get(w, coll_names[c]), type, path,
				    &out[l][c], err, errlen);
		}
	}
	return rc;
}

static int parse_type(struct json_object *o, const char *name,
		      copus_planner_gpu *g, char *err, size_t errlen)
{
	/* The members a text may leave out come last. */
	static const char *const optional[] = { "memory_bandwidth",
						 "inter_links", "shape" };
	const char *members[12] = {
		"peak_flops", "memory_bytes", "efficiency", "param_s",
		"comm_scale", "overhead_s", "layer_s", "alpha", "inv_beta",
	};
	struct json_object *bandwidth = NULL, *links_o = NULL;
	int rc, n_members = 9;

	memset(g, 0, sizeof(*g));
	for (int i = 0; i < 3; i++)
		if (json_object_object_get_ex(o, optional[i], NULL))
			members[n_members++] = optional[i];
	rc = keys_exactly(o, members, n_members, name, "", err, errlen);
	if (rc == COPUS_OK)
		rc = number(get(o, "peak_flops"), name, "peak_flops",
			    &g->peak_flops, err, errlen);
	if (rc == COPUS_OK)
		rc = number(get(o, "memory_bytes"), name, "memory_bytes",
			    &g->memory_bytes, err, errlen);
	/* Present (even as null, which number() refuses) or left out. */
	if (rc == COPUS_OK &&
	    json_object_object_get_ex(o, "memory_bandwidth", &bandwidth))
		rc = number(bandwidth, name, "memory_bandwidth",
			    &g->memory_bandwidth, err, errlen);
	if (rc == COPUS_OK &&
	    json_object_object_get_ex(o, "inter_links", &links_o))
		rc = number(links_o, name, "inter_links", &g->inter_links, err,
			    errlen);
	if (rc == COPUS_OK)
		rc = kinds(o, name, "efficiency", g->efficiency, err, errlen);
	if (rc == COPUS_OK)
		rc = kinds(o, name, "param_s", g->param_s, err, errlen);
	if (rc == COPUS_OK)
		rc = named(o, name, "comm_scale", link_names, COPUS_LINK_COUNT,
			   g->comm_scale, err, errlen);
	if (rc == COPUS_OK)
		rc = number(get(o, "overhead_s"), name, "overhead_s",
			    &g->overhead_s, err, errlen);
	if (rc == COPUS_OK)
		rc = number(get(o, "layer_s"), name, "layer_s", &g->layer_s,
			    err, errlen);
	if (rc == COPUS_OK)
		rc = colls(o, name, "alpha", g->alpha, err, errlen);
	if (rc == COPUS_OK)
		rc = colls(o, name, "inv_beta", g->inv_beta, err, errlen);
	if (rc == COPUS_OK && json_object_object_get_ex(o, "shape", NULL))
		rc = named(o, name, "shape", shape_names, COPUS_SHAPE_COUNT,
			   g->shape_exp, err, errlen);
	if (rc == COPUS_OK)
		rc = check_gpu(name, g, err, errlen);
	return rc;
}

/*
 * A type named after one of the built-in table ("dgx-ext": "a100"): a
 * site's own GRES type name for a GPU the table knows, with its default
 * constants.
 */
static int alias_type(struct json_object *o, const char *name,
		      copus_planner_gpu *g, char *err, size_t errlen)
{
	const char *like = json_object_get_string(o);
	char names[N_ROWS * COPUS_PLANNER_TYPE_LEN];

	if (copus_planner_gpu_default(like, g) == COPUS_OK)
		return COPUS_OK;
	table_names(names, sizeof(names));
	copus__err_set(err, errlen, "GPU type \"%.32s\": \"%.32s\" is not a "
		       "type of the built-in table (%s)", name, like, names);
	return COPUS_EPARSE;
}

/* Nesting of the text: root, "gpus", a type, "alpha", a link. */
#define GPUS_JSON_DEPTH 6

int copus_planner_gpus_parse(const char *text, copus_planner_gpu_type *out,
			     int max, int *n, char *err, size_t errlen)
{
	struct json_tokener *tok = NULL;
	struct json_object *root = NULL, *v, *gpus;
	size_t len;
	int rc = COPUS_OK, count = 0;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (text == NULL || out == NULL || n == NULL || max < 0) {
		copus__err_set(err, errlen, "copus_planner_gpus_parse: NULL argument");
		return COPUS_EINVAL;
	}
	*n = 0;
	len = strlen(text);
	if (len > (size_t)INT32_MAX) {
		copus__err_set(err, errlen, "text of %zu bytes is too long", len);
		return COPUS_EPARSE;
	}
	tok = json_tokener_new_ex(GPUS_JSON_DEPTH);
	if (tok == NULL) {
		copus__err_set(err, errlen, "out of memory");
		return COPUS_ENOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	root = json_tokener_parse_ex(tok, text, (int)len);
	if (root == NULL || json_tokener_get_error(tok) != json_tokener_success ||
	    text[json_tokener_get_parse_end(tok) +
		 strspn(text + json_tokener_get_parse_end(tok), " \t\r\n")] !=
		    '\0') {
		enum json_tokener_error e = json_tokener_get_error(tok);
		size_t end = json_tokener_get_parse_end(tok);

		if (root != NULL && e == json_tokener_success) {
			end += strspn(text + end, " \t\r\n");
			copus__err_set(err, errlen, "line %ld: trailing characters",
				line_of(text, end));
		} else if (e == json_tokener_continue || len == 0) {
			copus__err_set(err, errlen, "line %ld: the text ends inside "
				"its JSON value", line_of(text, len));
		} else {
			copus__err_set(err, errlen, "line %ld: not valid JSON: %s",
				line_of(text, end), json_tokener_error_desc(e));
		}
		rc = COPUS_EPARSE;
		goto out;
	}
	if (!json_object_is_type(root, json_type_object)) {
		copus__err_set(err, errlen, "line 1: the text is not a JSON object");
		rc = COPUS_EPARSE;
		goto out;
	}
	if (members_of(root) != colons_of(text)) {
		copus__err_set(err, errlen, "the text has a duplicate key");
		rc = COPUS_EPARSE;
		goto out;
	}
	json_object_object_foreach(root, key, val) {
		(void)val;
		if (strcmp(key, "version") != 0 && strcmp(key, "gpus") != 0) {
			copus__err_set(err, errlen, "member \"%.32s\" is unknown", key);
			rc = COPUS_EPARSE;
			goto out;
		}
	}
	v = get(root, "version");
	if (v == NULL || !json_object_is_type(v, json_type_int)) {
		copus__err_set(err, errlen, "member \"version\": %.40s is not an integer",
			v ? json_object_to_json_string(v) : "missing");
		rc = COPUS_EPARSE;
		goto out;
	}
	if (json_object_get_int64(v) != COPUS_PLANNER_GPUS_VERSION) {
		copus__err_set(err, errlen, "member \"version\": %.40s, expected %d",
			json_object_to_json_string(v),
			COPUS_PLANNER_GPUS_VERSION);
		rc = COPUS_EVERSION;
		goto out;
	}
	gpus = get(root, "gpus");
	if (gpus == NULL || !json_object_is_type(gpus, json_type_object)) {
		copus__err_set(err, errlen, "member \"gpus\": %.40s is not an object",
			gpus ? json_object_to_json_string(gpus) : "missing");
		rc = COPUS_EPARSE;
		goto out;
	}
	json_object_object_foreach(gpus, name, o) {
		if (!name_ok(name)) {
			copus__err_set(err, errlen, "GPU type \"%.32s\" is not 1..%d "
				"characters of [A-Za-z0-9_.-]", name,
				COPUS_PLANNER_TYPE_LEN - 1);
			rc = COPUS_EPARSE;
			goto out;
		}
		if (count == max) {
			copus__err_set(err, errlen, "more than %d GPU types", max);
			rc = COPUS_ERANGE;
			goto out;
		}
		memset(&out[count], 0, sizeof(out[count]));
		if (json_object_is_type(o, json_type_string)) {
			rc = alias_type(o, name, &out[count].gpu, err, errlen);
		} else if (json_object_is_type(o, json_type_object)) {
			rc = parse_type(o, name, &out[count].gpu, err, errlen);
		} else {
			copus__err_set(err, errlen, "GPU type \"%.32s\": %.40s is "
				"neither an object of constants nor the name "
				"of a built-in type", name,
				json_object_to_json_string(o));
			rc = COPUS_EPARSE;
		}
		if (rc != COPUS_OK)
			goto out;
		snprintf(out[count].name, sizeof(out[count].name), "%s", name);
		count++;
	}
	*n = count;
out:
	if (rc != COPUS_OK)
		memset(out, 0, sizeof(*out) * (size_t)(count < max ? count + 1
								  : max));
	if (root != NULL)
		json_object_put(root);
	json_tokener_free(tok);
	return rc;
}

const copus_planner_gpu_type *
copus_planner_gpus_find(const copus_planner_gpu_type *gpus, int n,
			const char *type)
{
	for (int i = 0; gpus != NULL && type != NULL && i < n; i++)
		if (strcmp(gpus[i].name, type) == 0)
			return &gpus[i];
	return NULL;
}
