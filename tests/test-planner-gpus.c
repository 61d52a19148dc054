/*
 * The GPU constants the scheduler and the job share: the defaults of
 * common types, and the text of calibrated constants (round trip, strict
 * refusals).
 */
#include <stdlib.h>
#include <string.h>

#include <copus/model.h>
#include <copus/planner.h>

#include "harness.h"

static const char *const listed[] = {
	"a100", "a100-80g", "h100", "h200", "v100", "v100-16g", "a40", "a30",
	"a10", "l4", "l40s", "t4", "rtx3090", "rtx4090", "rtxa6000",
	"rtx6000", "rtx2080ti",
};

#define N_LISTED (int)(sizeof(listed) / sizeof(*listed))

/* A small transformer: 1 GPU holds it. */
static copus_planner_model small_model(copus_planner_layer *layers)
{
	copus_planner_desc d = {
		.arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2, .layers = 8,
		.hidden = 512, .heads = 8, .seq_len = 256, .vocab = 8000,
	};
	int n = 0;

	ASSERT_STATUS(copus_planner_layers(&d, layers, COPUS_PLANNER_MAX_LAYERS,
					   &n), COPUS_OK);
	return (copus_planner_model){ layers, n, 2, 0 };
}

/* Every listed type has constants the planner accepts, with the figures of
 * its data sheet and the planner's priors. */
static void test_defaults_of_listed_types(void)
{
	copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_model m = small_model(layers);
	copus_planner_cell cell = { 2, 4 };
	copus_planner_plan plan;
	copus_planner_gpu g;

	for (int i = 0; i < N_LISTED; i++) {
		ASSERT_STATUS(copus_planner_gpu_default(listed[i], &g),
			      COPUS_OK);
		ASSERT_CLOSE(g.efficiency[0], 2.0, 0);
		ASSERT_CLOSE(g.efficiency[1], 2.0, 0);
		ASSERT_CLOSE(g.efficiency[2], 0.5, 0);
		ASSERT_CLOSE(g.comm_scale[0], 1.0, 0);
		ASSERT_CLOSE(g.comm_scale[1], 1.0, 0);
		ASSERT_CLOSE(g.overhead_s, 0.0, 0);
		CU_ASSERT(g.memory_bandwidth > 0.0);
		/* Across nodes is slower than within one. */
		CU_ASSERT(g.inv_beta[COPUS_LINK_INTER][0] >
			  g.inv_beta[COPUS_LINK_INTRA][0]);
		ASSERT_STATUS(copus_planner_best(&m, 64, &g, &cell, NULL,
						 &plan), COPUS_OK);
	}
	ASSERT_STATUS(copus_planner_gpu_default("a100", &g), COPUS_OK);
	ASSERT_CLOSE(g.peak_flops, 19.5e12, 0);
	ASSERT_CLOSE(g.memory_bytes, 40e9, 0);
	ASSERT_CLOSE(g.memory_bandwidth, 1555e9, 0);
	/* NVLink 3: 300 GB/s each way, 80% of it. */
	ASSERT_CLOSE(1.0 / g.inv_beta[COPUS_LINK_INTRA][COPUS_COLL_ALL_REDUCE],
		     240e9, 1e-12);
	ASSERT_STATUS(copus_planner_gpu_default("h100", &g), COPUS_OK);
	ASSERT_CLOSE(g.peak_flops, 67e12, 0);
	ASSERT_CLOSE(g.memory_bytes, 80e9, 0);
	ASSERT_STATUS(copus_planner_gpu_default("t4", &g), COPUS_OK);
	ASSERT_CLOSE(g.memory_bytes, 16e9, 0);
}

/* Slurm's type names are matched whatever their case; another name gets
 * the generic constants and says so. */
static void test_default_names(void)
{
	copus_planner_gpu a, b;

	ASSERT_STATUS(copus_planner_gpu_default("A100", &a), COPUS_OK);
	ASSERT_STATUS(copus_planner_gpu_default("a100", &b), COPUS_OK);
	CU_ASSERT(memcmp(&a, &b, sizeof(a)) == 0);
	ASSERT_STATUS(copus_planner_gpu_default("H100", &a), COPUS_OK);
	CU_ASSERT(memcmp(&a, &b, sizeof(a)) != 0);
	ASSERT_STATUS(copus_planner_gpu_default("mi250x", &a), COPUS_ENODATA);
	CU_ASSERT(memcmp(&a, &b, sizeof(a)) == 0);
	ASSERT_STATUS(copus_planner_gpu_default(NULL, &a), COPUS_ENODATA);
	CU_ASSERT(memcmp(&a, &b, sizeof(a)) == 0);
	ASSERT_STATUS(copus_planner_gpu_default("a100x", &a), COPUS_ENODATA);
	ASSERT_STATUS(copus_planner_gpu_default("a100", NULL), COPUS_EINVAL);
}

/* A faster GPU type gives a faster plan of the same model. */
static void test_defaults_order_types(void)
{
	copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_model m = small_model(layers);
	copus_planner_cell cell = { 1, 4 };
	copus_planner_plan ph, pa, pt;
	copus_planner_gpu g;

	copus_planner_gpu_default("h100", &g);
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &cell, NULL, &ph),
		      COPUS_OK);
	copus_planner_gpu_default("a100", &g);
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &cell, NULL, &pa),
		      COPUS_OK);
	copus_planner_gpu_default("t4", &g);
	ASSERT_STATUS(copus_planner_best(&m, 64, &g, &cell, NULL, &pt),
		      COPUS_OK);
	CU_ASSERT(ph.seconds < pa.seconds);
	CU_ASSERT(pa.seconds < pt.seconds);
}

/* Constants as a calibration leaves them: no round numbers. */
static copus_planner_gpu odd_gpu(void)
{
	copus_planner_gpu g;

	copus_planner_gpu_default("v100", &g);
	g.efficiency[0] = 1.0 / 3.0;
	g.efficiency[3] = 7.0 / 11.0;
	g.param_s[1] = 1.2345678901234567e-9;
	g.comm_scale[COPUS_LINK_INTER] = 3.0 / 7.0;
	g.overhead_s = 0.1 + 0.2;
	g.layer_s = 5e-324; /* the least double */
	g.memory_bandwidth = 1e12 / 7.0;
	g.alpha[1][4] = 1.0 / 9.0;
	g.inv_beta[0][3] = 2.0 / 3.0 * 1e-11;
	return g;
}

/* Every type formatted and parsed back is the same to the last bit, and
 * plans the same. */
static void test_round_trip(void)
{
	copus_planner_gpu_type in[N_LISTED + 1], back[N_LISTED + 4];
	copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS];
	copus_planner_model m = small_model(layers);
	copus_planner_cell cell = { 2, 2 };
	char *buf, err[256] = "";
	size_t len = 0, size = 1 << 16;
	int n = 0;

	for (int i = 0; i < N_LISTED; i++) {
		snprintf(in[i].name, sizeof(in[i].name), "%s", listed[i]);
		copus_planner_gpu_default(listed[i], &in[i].gpu);
	}
	snprintf(in[N_LISTED].name, sizeof(in[N_LISTED].name), "V100_fit.2");
	in[N_LISTED].gpu = odd_gpu();
	buf = malloc(size);
	ASSERT_STATUS(copus_planner_gpus_format(in, N_LISTED + 1, buf, size,
						&len, err, sizeof(err)),
		      COPUS_OK);
	CU_ASSERT_EQUAL(len, strlen(buf));
	ASSERT_STATUS(copus_planner_gpus_parse(buf, back, N_LISTED + 4, &n,
					       err, sizeof(err)), COPUS_OK);
	if (err[0] != '\0')
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_EQUAL(n, N_LISTED + 1);
	for (int i = 0; i < n && i <= N_LISTED; i++) {
		copus_planner_plan p1, p2;

		CU_ASSERT_STRING_EQUAL(back[i].name, in[i].name);
		if (memcmp(&back[i].gpu, &in[i].gpu, sizeof(in[i].gpu)) != 0)
			fprintf(stderr, "type %s differs after a round trip\n",
				in[i].name);
		CU_ASSERT(memcmp(&back[i].gpu, &in[i].gpu,
				 sizeof(in[i].gpu)) == 0);
		ASSERT_STATUS(copus_planner_best(&m, 32, &in[i].gpu, &cell,
						 NULL, &p1), COPUS_OK);
		ASSERT_STATUS(copus_planner_best(&m, 32, &back[i].gpu, &cell,
						 NULL, &p2), COPUS_OK);
		CU_ASSERT(memcmp(&p1, &p2, sizeof(p1)) == 0);
	}
	CU_ASSERT_PTR_EQUAL(copus_planner_gpus_find(back, n, "V100_fit.2"),
			    &back[N_LISTED]);
	CU_ASSERT_PTR_NULL(copus_planner_gpus_find(back, n, "v100_fit.2"));
	/* No types is a valid text too. */
	ASSERT_STATUS(copus_planner_gpus_format(in, 0, buf, size, NULL, err,
						sizeof(err)), COPUS_OK);
	ASSERT_STATUS(copus_planner_gpus_parse(buf, back, 4, &n, err,
					       sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(n, 0);
	free(buf);
}

/* The formatter tells a short buffer the length it needs, and never writes
 * what the parser would refuse. */
static void test_format_refuses(void)
{
	copus_planner_gpu_type t[2];
	char small[64], big[8192], err[256] = "";
	size_t len = 0, need = 0;

	snprintf(t[0].name, sizeof(t[0].name), "a100");
	copus_planner_gpu_default("a100", &t[0].gpu);
	t[1] = t[0];
	ASSERT_STATUS(copus_planner_gpus_format(t, 1, big, sizeof(big), &need,
						err, sizeof(err)), COPUS_OK);
	ASSERT_STATUS(copus_planner_gpus_format(t, 1, small, sizeof(small),
						&len, err, sizeof(err)),
		      COPUS_ERANGE);
	CU_ASSERT_EQUAL(len, need);
	CU_ASSERT_EQUAL(small[0], '\0');
	ASSERT_STATUS(copus_planner_gpus_format(t, 1, big, need, NULL, err,
						sizeof(err)), COPUS_ERANGE);
	ASSERT_STATUS(copus_planner_gpus_format(t, 1, big, need + 1, NULL, err,
						sizeof(err)), COPUS_OK);
	ASSERT_STATUS(copus_planner_gpus_format(t, 2, big, sizeof(big), NULL,
						err, sizeof(err)),
		      COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "twice"));
	snprintf(t[1].name, sizeof(t[1].name), "a b");
	ASSERT_STATUS(copus_planner_gpus_format(t, 2, big, sizeof(big), NULL,
						err, sizeof(err)),
		      COPUS_EINVAL);
	snprintf(t[1].name, sizeof(t[1].name), "b");
	t[1].gpu.alpha[1][2] = NAN;
	ASSERT_STATUS(copus_planner_gpus_format(t, 2, big, sizeof(big), NULL,
						err, sizeof(err)),
		      COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"b\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "alpha.inter.reduce_scatter"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "nan"));
	t[1].gpu = t[0].gpu;
	t[1].gpu.peak_flops = 0;
	ASSERT_STATUS(copus_planner_gpus_format(t, 2, big, sizeof(big), NULL,
						err, sizeof(err)),
		      COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "peak_flops"));
	ASSERT_STATUS(copus_planner_gpus_format(NULL, 1, big, sizeof(big), NULL,
						err, sizeof(err)),
		      COPUS_EINVAL);
}

/* The valid text of one a100, with from replaced by to (once). */
static char *mutated(const char *from, const char *to)
{
	copus_planner_gpu_type t;
	static char buf[8192];
	char *out, *at;

	snprintf(t.name, sizeof(t.name), "a100");
	copus_planner_gpu_default("a100", &t.gpu);
	copus_planner_gpus_format(&t, 1, buf, sizeof(buf), NULL, NULL, 0);
	at = strstr(buf, from);
	if (at == NULL) {
		fprintf(stderr, "\"%s\" is not in the text:\n%s", from, buf);
		CU_FAIL("mutation not applied");
		return strdup(buf);
	}
	out = malloc(strlen(buf) + strlen(to) + 1);
	memcpy(out, buf, (size_t)(at - buf));
	strcpy(out + (at - buf), to);
	strcat(out, at + strlen(from));
	return out;
}

static void expect_refused(const char *text, int want, const char *needle)
{
	copus_planner_gpu_type out[4];
	char err[256] = "";
	int n = -1;
	int rc = copus_planner_gpus_parse(text, out, 4, &n, err, sizeof(err));

	if (rc != want || strstr(err, needle) == NULL)
		fprintf(stderr, "got %d (%s), expected %d with \"%s\" for:\n%s\n",
			rc, err, want, needle, text);
	CU_ASSERT_EQUAL(rc, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
	CU_ASSERT_EQUAL(n, 0);
}

/* Unknown, missing and mistyped members, values out of bounds and broken
 * JSON are refused; the message names the type, the member and the value,
 * or the line. */
static void test_parse_refuses(void)
{
	static const struct {
		const char *from, *to, *needle;
		int rc;
	} bad[] = {
		{ "\"version\": 1", "\"version\": 2", "version", COPUS_EVERSION },
		{ "\"version\": 1", "\"version\": \"1\"", "version",
		  COPUS_EPARSE },
		{ "\"version\": 1,", "", "version", COPUS_EPARSE },
		{ "\"version\": 1", "\"version\": 1, \"extra\": 0",
		  "\"extra\" is unknown", COPUS_EPARSE },
		{ "\"peak_flops\"", "\"peak_flop\"",
		  "GPU type \"a100\": member \"peak_flop\" is unknown",
		  COPUS_EPARSE },
		{ "\"layer_s\": 0,", "",
		  "GPU type \"a100\": member \"layer_s\" is missing",
		  COPUS_EPARSE },
		{ "\"peak_flops\": 19500000000000",
		  "\"peak_flops\": \"19500000000000\"",
		  "GPU type \"a100\": \"peak_flops\": \"19500000000000\"",
		  COPUS_EPARSE },
		{ "\"peak_flops\": 19500000000000", "\"peak_flops\": -1",
		  "GPU type \"a100\": \"peak_flops\": -1", COPUS_EPARSE },
		{ "\"peak_flops\": 19500000000000", "\"peak_flops\": 0",
		  "\"peak_flops\": 0 is not in (0", COPUS_EPARSE },
		{ "\"memory_bytes\": 40000000000", "\"memory_bytes\": 1e999",
		  "\"memory_bytes\": inf", COPUS_EPARSE },
		{ "\"memory_bytes\": 40000000000", "\"memory_bytes\": NaN",
		  "memory_bytes", COPUS_EPARSE },
		{ "\"memory_bytes\": 40000000000", "\"memory_bytes\": 2e15",
		  "\"memory_bytes\": 2e+15", COPUS_EPARSE },
		{ "\"memory_bandwidth\": 1555000000000",
		  "\"memory_bandwidth\": -1",
		  "GPU type \"a100\": \"memory_bandwidth\": -1", COPUS_EPARSE },
		{ "\"memory_bandwidth\": 1555000000000",
		  "\"memory_bandwidth\": 2e15", "\"memory_bandwidth\": 2e+15",
		  COPUS_EPARSE },
		{ "\"memory_bandwidth\": 1555000000000",
		  "\"memory_bandwidth\": null", "memory_bandwidth",
		  COPUS_EPARSE },
		{ "\"inter_links\": 8", "\"inter_links\": -1",
		  "GPU type \"a100\": \"inter_links\": -1", COPUS_EPARSE },
		{ "\"inter_links\": 8", "\"inter_links\": 2000",
		  "\"inter_links\": 2000 is not in [0, 1024]", COPUS_EPARSE },
		{ "\"efficiency\": [2, 2, 0.5, 2]",
		  "\"efficiency\": [2, 2, 0.5]", "\"efficiency\"",
		  COPUS_EPARSE },
		{ "\"efficiency\": [2, 2, 0.5, 2]",
		  "\"efficiency\": [2, 2, true, 2]", "\"efficiency[2]\": true",
		  COPUS_EPARSE },
		{ "\"param_s\": [0, 0, 0, 0]", "\"param_s\": [0, 0, -1e-9, 0]",
		  "\"param_s[2]\": -1e-09", COPUS_EPARSE },
		{ "\"comm_scale\": {\"intra\": 1,",
		  "\"comm_scale\": {\"intra\": 1, \"extra\": 1,",
		  "member \"comm_scale.extra\" is unknown", COPUS_EPARSE },
		{ "\"comm_scale\": {\"intra\": 1,", "\"comm_scale\": {\"intra\": 0,",
		  "\"comm_scale.intra\": 0", COPUS_EPARSE },
		{ "\"send\": 2e-05}",
		  "\"send\": 2e-05, \"gather\": 1}",
		  "member \"alpha.inter.gather\" is unknown", COPUS_EPARSE },
		{ ", \"send\": 2e-05}", "}",
		  "member \"alpha.inter.send\" is missing", COPUS_EPARSE },
		{ "\"all_reduce\": 2e-05",
		  "\"all_reduce\": 2e7", "\"alpha.inter.all_reduce\": 2e+07",
		  COPUS_EPARSE },
		{ "\"a100\": {", "\"a 100\": {", "GPU type \"a 100\"",
		  COPUS_EPARSE },
		{ "\"a100\": {", "\"abcdefghijklmnop\": {", "abcdefghijklmnop",
		  COPUS_EPARSE },
		{ "\"overhead_s\": 0,", "\"overhead_s\": 0, \"overhead_s\": 1,",
		  "duplicate", COPUS_EPARSE },
		{ "\"layer_s\": 0,", "\"layer_s\": 0", "line 14", COPUS_EPARSE },
		{ "\"gpus\": {", "\"gpus\": [", "line 4", COPUS_EPARSE },
		{ "\n}\n", "\n}\n}", "line 26", COPUS_EPARSE },
		{ "\"nodes\": 0}", "\"nodes\": 9}", "\"shape.nodes\": 9",
		  COPUS_EPARSE },
		{ "\"nodes\": 0}", "\"nodes\": 0, \"links\": 0}",
		  "member \"shape.links\" is unknown", COPUS_EPARSE },
		{ "\"peers\": 0, ", "", "member \"shape.peers\" is missing",
		  COPUS_EPARSE },
		{ "\"gpus\": {", "\"gpus\": 3, \"x\": {", "\"x\" is unknown",
		  COPUS_EPARSE },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char *t = mutated(bad[i].from, bad[i].to);
		expect_refused(t, bad[i].rc, bad[i].needle);
		free(t);
	}
	expect_refused("", COPUS_EPARSE, "line 1");
	expect_refused("[1]", COPUS_EPARSE, "not a JSON object");
	expect_refused("{\"version\": 1, \"gpus\": {\n\"a\": {\n",
		       COPUS_EPARSE, "line 3");
	expect_refused("{\"version\": 1}", COPUS_EPARSE, "\"gpus\"");
}

/* A text written before the memory bandwidth (or the network links) was a
 * member parses, with it unknown (0), and prices plans as it did then. */
static void test_parse_without_bandwidth(void)
{
	copus_planner_gpu_type out[2];
	char err[256] = "";
	char *t = mutated("      \"memory_bandwidth\": 1555000000000,\n", "");
	int n = -1;

	ASSERT_STATUS(copus_planner_gpus_parse(t, out, 2, &n, err,
					       sizeof(err)), COPUS_OK);
	if (err[0] != '\0')
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_EQUAL(n, 1);
	ASSERT_CLOSE(out[0].gpu.memory_bandwidth, 0.0, 0);
	ASSERT_CLOSE(out[0].gpu.memory_bytes, 40e9, 0);
	free(t);
	/* Nor the network links of a node, before the planner shared
	 * them: unknown, no sharing. */
	t = mutated("      \"inter_links\": 8,\n", "");
	ASSERT_STATUS(copus_planner_gpus_parse(t, out, 2, &n, err,
					       sizeof(err)), COPUS_OK);
	ASSERT_CLOSE(out[0].gpu.inter_links, 0.0, 0);
	ASSERT_CLOSE(out[0].gpu.memory_bandwidth, 1555e9, 0);
	free(t);
	/* Nor the exponents of a group's shape, before the planner had
	 * them: 0, the link's share alone. */
	t = mutated("      },\n      \"shape\": {\"peers\": 0, "
		    "\"ranks_per_node\": 0, \"groups_per_node\": 0, "
		    "\"nodes\": 0}\n",
		    "      }\n");
	ASSERT_STATUS(copus_planner_gpus_parse(t, out, 2, &n, err,
					       sizeof(err)), COPUS_OK);
	for (int e = 0; e < COPUS_SHAPE_COUNT; e++)
		ASSERT_CLOSE(out[0].gpu.shape_exp[e], 0.0, 0);
	ASSERT_CLOSE(out[0].gpu.inter_links, 8.0, 0);
	free(t);
}

/* More types than the caller has room for is its own error. */
static void test_parse_too_many(void)
{
	copus_planner_gpu_type t[3], out[2];
	char buf[16384], err[256] = "";
	int n = -1;

	for (int i = 0; i < 3; i++) {
		snprintf(t[i].name, sizeof(t[i].name), "%s", listed[i]);
		copus_planner_gpu_default(listed[i], &t[i].gpu);
	}
	ASSERT_STATUS(copus_planner_gpus_format(t, 3, buf, sizeof(buf), NULL,
						err, sizeof(err)), COPUS_OK);
	ASSERT_STATUS(copus_planner_gpus_parse(buf, out, 2, &n, err,
					       sizeof(err)), COPUS_ERANGE);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "more than 2"));
	ASSERT_STATUS(copus_planner_gpus_parse(NULL, out, 2, &n, err,
					       sizeof(err)), COPUS_EINVAL);
}

/*
 * A site's own GRES type name for a GPU of the built-in table takes that
 * type's constants, beside a type given in full; a name the table does
 * not know is refused with the type, the name and the table's names.
 */
static void test_parse_alias(void)
{
	copus_planner_gpu_type out[3];
	copus_planner_gpu a100, t4;
	char err[512] = "";
	int n = -1;

	copus_planner_gpu_default("a100", &a100);
	copus_planner_gpu_default("t4", &t4);
	ASSERT_STATUS(copus_planner_gpus_parse(
			      "{\"version\": 1, \"gpus\": {\"dgx-ext\": \"a100\", "
			      "\"aws\": \"T4\"}}",
			      out, 3, &n, err, sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_PTR_NOT_NULL(copus_planner_gpus_find(out, n, "dgx-ext"));
	CU_ASSERT_EQUAL(memcmp(&copus_planner_gpus_find(out, n, "dgx-ext")->gpu,
			       &a100, sizeof(a100)), 0);
	CU_ASSERT_EQUAL(memcmp(&copus_planner_gpus_find(out, n, "aws")->gpu,
			       &t4, sizeof(t4)), 0);
	/* Their speeds are the table's types'; a type the text does not name
	 * keeps the table's own, and one neither knows has none. */
	ASSERT_CLOSE(copus_planner_gpus_speed(out, n, "dgx-ext"),
		     copus_gpu_type_speed("a100"), 0.0);
	CU_ASSERT_TRUE(copus_gpu_type_speed("a100") > 0.0);
	ASSERT_CLOSE(copus_planner_gpus_speed(out, n, "h100"),
		     copus_gpu_type_speed("h100"), 0.0);
	CU_ASSERT_EQUAL(copus_planner_gpus_speed(out, n, "quad"), 0.0);
	CU_ASSERT_EQUAL(copus_planner_gpus_speed(NULL, 0, "aws"), 0.0);
	CU_ASSERT_EQUAL(copus_planner_gpu_speed(NULL), 0.0);

	ASSERT_STATUS(copus_planner_gpus_parse(
			      "{\"version\": 1, \"gpus\": {\"quad\": "
			      "\"k80\"}}",
			      out, 3, &n, err, sizeof(err)), COPUS_EPARSE);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"quad\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"k80\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "a100, a100-80g"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "rtxa6000"));
	ASSERT_STATUS(copus_planner_gpus_parse(
			      "{\"version\": 1, \"gpus\": {\"quad\": 7}}", out,
			      3, &n, err, sizeof(err)), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "GPU type \"quad\": 7 is neither"));
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(test_defaults_of_listed_types),
		TEST(test_default_names),
		TEST(test_defaults_order_types),
		TEST(test_round_trip),
		TEST(test_format_refuses),
		TEST(test_parse_refuses),
		TEST(test_parse_without_bandwidth),
		TEST(test_parse_too_many),
		TEST(test_parse_alias),
	};

	return RUN_TESTS("planner-gpus", tests);
}
