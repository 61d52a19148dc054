/* The hint message: round trip, strict rejection, clamping. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <copus/hint.h>

#include "harness.h"

static copus_hint sample_hint(void)
{
	copus_hint h = {
		.version = COPUS_HINT_VERSION,
		.job_id = 4242,
		.state = COPUS_STATE_CHECKPOINTED,
		.step = 123456,
		.restart_count = 3,
		.time = 1790000000,
		.limits = { 128, 4096, 8, 256, true },
		.grad = { 0.5123456789, 3.25e-3 },
		.progress = 9876.5,
		.target = 20000,
		.n_perf = 2,
	};
	copus_perf_params a = { 0.01, 4e-4, 0.05, 1e-3, 0.02, 5e-4, 1.5 };
	copus_perf_params b = { 0.03, 9e-4, 0.07, 2e-3, 0.04, 7e-4, 2.25 };

	strcpy(h.perf[0].type, "a100");
	h.perf[0].perf = a;
	strcpy(h.perf[1].type, "v100-32g");
	h.perf[1].perf = b;
	return h;
}

static char *encode(const copus_hint *h)
{
	static char buf[COPUS_HINT_MAX_LEN + 1];
	char err[256];

	ASSERT_STATUS(copus_hint_encode(h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_OK);
	return buf;
}

static void perf_close(const copus_perf_params *x, const copus_perf_params *y)
{
	ASSERT_CLOSE(x->alpha_c, y->alpha_c, 1e-9);
	ASSERT_CLOSE(x->beta_c, y->beta_c, 1e-9);
	ASSERT_CLOSE(x->alpha_n, y->alpha_n, 1e-9);
	ASSERT_CLOSE(x->beta_n, y->beta_n, 1e-9);
	ASSERT_CLOSE(x->alpha_r, y->alpha_r, 1e-9);
	ASSERT_CLOSE(x->beta_r, y->beta_r, 1e-9);
	ASSERT_CLOSE(x->gamma, y->gamma, 1e-9);
}

static void test_round_trip(void)
{
	copus_hint h = sample_hint(), back;
	char err[256];
	size_t len = 0;
	char buf[COPUS_HINT_MAX_LEN + 1];

	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), &len, err,
					sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(len, strlen(buf));
	CU_ASSERT(len <= COPUS_HINT_MAX_LEN);
	CU_ASSERT(strncmp(buf, COPUS_HINT_PREFIX, strlen(COPUS_HINT_PREFIX)) == 0);
	ASSERT_STATUS(copus_hint_parse(buf, &back, err, sizeof(err)), COPUS_OK);
	if (err[0] != '\0')
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_EQUAL(back.version, COPUS_HINT_VERSION);
	CU_ASSERT_EQUAL(back.job_id, h.job_id);
	CU_ASSERT_EQUAL(back.state, h.state);
	CU_ASSERT_EQUAL(back.step, h.step);
	CU_ASSERT_EQUAL(back.restart_count, h.restart_count);
	CU_ASSERT_EQUAL(back.time, h.time);
	ASSERT_CLOSE(back.limits.init_batch, 128, 0);
	ASSERT_CLOSE(back.limits.max_batch, 4096, 0);
	CU_ASSERT_EQUAL(back.limits.min_local, 8);
	CU_ASSERT_EQUAL(back.limits.max_local, 256);
	CU_ASSERT(back.limits.accumulation);
	ASSERT_CLOSE(back.grad.sqr, h.grad.sqr, 1e-9);
	ASSERT_CLOSE(back.grad.var, h.grad.var, 1e-9);
	ASSERT_CLOSE(back.progress, h.progress, 1e-9);
	ASSERT_CLOSE(back.target, h.target, 1e-9);
	CU_ASSERT_EQUAL(back.n_perf, 2);
	CU_ASSERT_EQUAL(back.clamped, 0);
	/* json-c keeps the insertion order of an object's members. */
	CU_ASSERT_STRING_EQUAL(back.perf[0].type, "a100");
	CU_ASSERT_STRING_EQUAL(back.perf[1].type, "v100-32g");
	perf_close(&back.perf[0].perf, &h.perf[0].perf);
	perf_close(&back.perf[1].perf, &h.perf[1].perf);
}

static void test_round_trip_minimal(void)
{
	copus_hint h = sample_hint(), back;

	h.n_perf = 0;
	h.target = 0;
	h.state = COPUS_STATE_RUNNING;
	h.limits.accumulation = false;
	ASSERT_STATUS(copus_hint_parse(encode(&h), &back, NULL, 0), COPUS_OK);
	CU_ASSERT_EQUAL(back.n_perf, 0);
	CU_ASSERT_EQUAL(back.state, COPUS_STATE_RUNNING);
	CU_ASSERT(!back.limits.accumulation);
	ASSERT_CLOSE(back.target, 0, 0);
}

static void test_encode_rejects_bad_fields(void)
{
	char buf[COPUS_HINT_MAX_LEN + 1], err[256];
	copus_hint h;

	ASSERT_STATUS(copus_hint_encode(NULL, buf, sizeof(buf), NULL, NULL, 0),
		      COPUS_EINVAL);
	h = sample_hint();
	ASSERT_STATUS(copus_hint_encode(&h, NULL, 10, NULL, NULL, 0),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_hint_encode(&h, buf, 0, NULL, NULL, 0),
		      COPUS_EINVAL);
	h.version = 2;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EVERSION);
	h = sample_hint();
	h.job_id = 0;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	CU_ASSERT(strstr(err, "\"job\"") != NULL);
	h = sample_hint();
	h.grad.var = NAN;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	h = sample_hint();
	strcpy(h.perf[1].type, "bad\"name");
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	h = sample_hint();
	h.perf[0].perf.gamma = 0.5;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	CU_ASSERT(strstr(err, "gamma") != NULL);
	h = sample_hint();
	h.n_perf = COPUS_HINT_MAX_TYPES + 1;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	h = sample_hint();
	h.state = (copus_job_state)7;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	h = sample_hint();
	h.limits.max_batch = 64; /* below b0 */
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
}

static void test_encode_bounded(void)
{
	copus_hint h = sample_hint();
	char small[40], buf[COPUS_HINT_MAX_LEN + 1];
	size_t len;

	ASSERT_STATUS(copus_hint_encode(&h, small, sizeof(small), NULL, NULL, 0),
		      COPUS_ERANGE);
	CU_ASSERT_EQUAL(small[0], '\0');
	/* The largest message the encoder can produce still fits Slurm. */
	h.n_perf = COPUS_HINT_MAX_TYPES;
	for (int i = 0; i < COPUS_HINT_MAX_TYPES; i++) {
		snprintf(h.perf[i].type, sizeof(h.perf[i].type),
			 "type-%09d", i);
		h.perf[i].perf = (copus_perf_params){
			1.234567891e-7, 2.345678912e-7, 3.456789123e-7,
			4.567891234e-7, 5.678912345e-7, 6.789123456e-7,
			1.234567891 };
	}
	h.job_id = UINT32_MAX;
	h.step = COPUS_HINT_STEP_MAX;
	h.time = INT64_MAX;
	h.grad = (copus_grad_stats){ 1.234567891e-29, 1.234567891e-29 };
	h.progress = 1.234567891e14;
	h.target = 1.234567891e14;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), &len, NULL, 0),
		      COPUS_OK);
	CU_ASSERT(len <= COPUS_HINT_MAX_LEN);
}

/* Parse text; expect want, and an error message that mentions needle. */
static void expect_reject(const char *text, int want, const char *needle)
{
	copus_hint out;
	char err[256] = "";

	memset(&out, 0xab, sizeof(out));
	int rc = copus_hint_parse(text, &out, err, sizeof(err));
	if (rc != want || (needle != NULL && strstr(err, needle) == NULL))
		fprintf(stderr, "hint %.80s: %d (%s), expected %d with \"%s\"\n",
			text, rc, err, want, needle ? needle : "");
	CU_ASSERT_EQUAL(rc, want);
	if (needle != NULL)
		CU_ASSERT(strstr(err, needle) != NULL);
	/* A rejected hint leaves nothing half-filled behind. */
	CU_ASSERT_EQUAL(out.job_id, 0);
	CU_ASSERT_EQUAL(out.n_perf, 0);
}

#define BASE "\"v\":1,\"job\":7,\"st\":\"running\",\"step\":10,\"rc\":0," \
	     "\"t\":5,\"b0\":32,\"bmax\":512,\"lmin\":4,\"lmax\":64,"      \
	     "\"acc\":true,\"sqr\":1,\"var\":2,\"prog\":3"

static void test_parse_accepts_base(void)
{
	copus_hint out;

	ASSERT_STATUS(copus_hint_parse("copus1:{" BASE "}", &out, NULL, 0),
		      COPUS_OK);
	CU_ASSERT_EQUAL(out.job_id, 7);
	CU_ASSERT_EQUAL(out.clamped, 0);
	/* Integers are fine where reals are expected. */
	ASSERT_CLOSE(out.limits.init_batch, 32, 0);
	ASSERT_STATUS(copus_hint_parse("copus1:{" BASE ",\"perf\":{}}", &out,
				       NULL, 0), COPUS_OK);
	CU_ASSERT(copus_hint_is_hint("copus1:{}"));
	CU_ASSERT(!copus_hint_is_hint("my own comment"));
	CU_ASSERT(!copus_hint_is_hint(NULL));
}

static void test_parse_rejects_malformed(void)
{
	copus_hint out;

	ASSERT_STATUS(copus_hint_parse(NULL, &out, NULL, 0), COPUS_EINVAL);
	ASSERT_STATUS(copus_hint_parse("copus1:{}", NULL, NULL, 0),
		      COPUS_EINVAL);
	expect_reject("", COPUS_EPARSE, "start");
	expect_reject("hello world", COPUS_EPARSE, "start");
	expect_reject("{" BASE "}", COPUS_EPARSE, "start");
	expect_reject("copus2:{" BASE "}", COPUS_EVERSION, "prefix");
	expect_reject("copus1:", COPUS_EPARSE, "JSON");
	expect_reject("copus1:{" BASE, COPUS_EPARSE, "JSON");
	expect_reject("copus1:{" BASE "}}", COPUS_EPARSE, "JSON");
	expect_reject("copus1:{" BASE "} x", COPUS_EPARSE, "JSON");
	expect_reject("copus1:{" BASE ",}", COPUS_EPARSE, "JSON");
	/* json-c accepts single quotes even in strict mode; still rejected. */
	expect_reject("copus1:{'v':1}", COPUS_EPARSE, NULL);
	expect_reject("copus1:[1,2]", COPUS_EPARSE, "object");
	expect_reject("copus1:\"x\"", COPUS_EPARSE, "object");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a\":[[[[1]]]]}}",
		      COPUS_EPARSE, "JSON");
	expect_reject("copus1:{" BASE ",\"sqr\":NaN}", COPUS_EPARSE, NULL);
	expect_reject("copus1:{\"v\":1,\"v\":1}", COPUS_EPARSE, NULL);
	/* json-c keeps the last of duplicate keys: the parser notices. */
	expect_reject("copus1:{" BASE ",\"job\":8}", COPUS_EPARSE, "duplicate");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a\":[1,1,1,1,1,1,1],"
		      "\"a\":[2,2,2,2,2,2,2]}}", COPUS_EPARSE, "duplicate");
}

static void test_parse_rejects_fields(void)
{
	expect_reject("copus1:{" BASE ",\"extra\":1}", COPUS_EPARSE, "extra");
	expect_reject("copus1:{\"v\":2}", COPUS_EVERSION, "\"v\"");
	expect_reject("copus1:{\"v\":\"1\"}", COPUS_EPARSE, "\"v\"");
	expect_reject("copus1:{\"job\":7}", COPUS_EPARSE, "\"v\" is missing");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":\"running\"}",
		      COPUS_EPARSE, "\"step\" is missing");
	expect_reject("copus1:{\"v\":1,\"job\":0,\"st\":\"running\"}",
		      COPUS_EPARSE, "\"job\"");
	expect_reject("copus1:{\"v\":1,\"job\":4294967296}", COPUS_EPARSE,
		      "\"job\"");
	expect_reject("copus1:{\"v\":1,\"job\":7.5}", COPUS_EPARSE,
		      "not an integer");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":\"sleeping\"}",
		      COPUS_EPARSE, "sleeping");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":1}", COPUS_EPARSE,
		      "\"st\"");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":\"running\","
		      "\"step\":-1}", COPUS_EPARSE, "\"step\"");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":\"running\","
		      "\"step\":1,\"rc\":1,\"t\":1,\"b0\":\"32\"}",
		      COPUS_EPARSE, "\"b0\"");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":\"running\","
		      "\"step\":1,\"rc\":1,\"t\":1,\"b0\":-32}",
		      COPUS_EPARSE, "\"b0\"");
	expect_reject("copus1:{\"v\":1,\"job\":7,\"st\":\"running\","
		      "\"step\":1,\"rc\":1,\"t\":1,\"b0\":32,\"bmax\":64,"
		      "\"lmin\":1,\"lmax\":8,\"acc\":1}", COPUS_EPARSE,
		      "\"acc\"");
	expect_reject("copus1:{" BASE ",\"tgt\":-1}", COPUS_EPARSE, "\"tgt\"");
	expect_reject("copus1:{" BASE ",\"perf\":[1]}", COPUS_EPARSE,
		      "\"perf\"");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a\":[1,1,1,1,1,1]}}",
		      COPUS_EPARSE, "perf.a");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a\":[1,1,1,1,1,1,\"x\"]}}",
		      COPUS_EPARSE, "perf.a.gamma");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a\":[1,-1,1,1,1,1,1]}}",
		      COPUS_EPARSE, "perf.a.beta_c");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a b\":[1,1,1,1,1,1,1]}}",
		      COPUS_EPARSE, "GPU type");
	expect_reject("copus1:{" BASE ",\"perf\":{\"abcdefghijklmnop\":"
		      "[1,1,1,1,1,1,1]}}", COPUS_EPARSE, "GPU type");
	expect_reject("copus1:{" BASE ",\"perf\":{\"a\":[1,1,1,1,1,1,1],"
		      "\"b\":[1,1,1,1,1,1,1],\"c\":[1,1,1,1,1,1,1],"
		      "\"d\":[1,1,1,1,1,1,1],\"e\":[1,1,1,1,1,1,1]}}",
		      COPUS_EPARSE, "at most");
}

static void test_parse_rejects_oversized(void)
{
	size_t n = COPUS_HINT_MAX_LEN + 100;
	char *text = malloc(n + 1);
	int len;

	len = snprintf(text, n + 1, "copus1:{" BASE ",\"tgt\":1");
	/* Pad with spaces (valid JSON whitespace) past the limit. */
	memset(text + len, ' ', n - (size_t)len - 1);
	text[n - 1] = '}';
	text[n] = '\0';
	expect_reject(text, COPUS_EPARSE, "longer");
	/* The same message within the limit is accepted. */
	text[COPUS_HINT_MAX_LEN - 1] = '}';
	text[COPUS_HINT_MAX_LEN] = '\0';
	copus_hint out;
	ASSERT_STATUS(copus_hint_parse(text, &out, NULL, 0), COPUS_OK);
	free(text);
}

static void test_parse_clamps(void)
{
	copus_hint out;
	char err[256];

	ASSERT_STATUS(copus_hint_parse(
		"copus1:{\"v\":1,\"job\":7,\"st\":\"running\",\"step\":10,"
		"\"rc\":0,\"t\":5,\"b0\":0.5,\"bmax\":1e9,\"lmin\":0,"
		"\"lmax\":0,\"acc\":false,\"sqr\":1e40,\"var\":2,\"prog\":3,"
		"\"perf\":{\"a100\":[0,1e5,1,1,1,1,20]}}", &out, err,
		sizeof(err)), COPUS_OK);
	ASSERT_CLOSE(out.limits.init_batch, 1, 0);
	ASSERT_CLOSE(out.limits.max_batch, COPUS_HINT_BATCH_MAX, 0);
	CU_ASSERT_EQUAL(out.limits.min_local, 1);
	CU_ASSERT_EQUAL(out.limits.max_local, 1);
	ASSERT_CLOSE(out.grad.sqr, COPUS_HINT_GRAD_MAX, 0);
	ASSERT_CLOSE(out.perf[0].perf.alpha_c, COPUS_HINT_TIME_MIN, 0);
	ASSERT_CLOSE(out.perf[0].perf.beta_c, COPUS_HINT_TIME_MAX, 0);
	ASSERT_CLOSE(out.perf[0].perf.gamma, COPUS_HINT_GAMMA_MAX, 0);
	/* b0, bmax, lmin, lmax, sqr, alpha_c, beta_c, gamma. */
	CU_ASSERT_EQUAL(out.clamped, 8);
	/* A parsed, clamped hint is a valid model input. */
	copus_model m = { out.perf[0].perf, out.grad, out.limits };
	ASSERT_STATUS(copus_model_check(&m), COPUS_OK);
}

/* Every truncation of a valid hint is rejected; none crashes. */
static void test_parse_truncations(void)
{
	copus_hint h = sample_hint(), out;
	char *full = strdup(encode(&h));
	size_t n = strlen(full);

	for (size_t cut = 0; cut < n; cut++) {
		char *t = strndup(full, cut);
		int rc = copus_hint_parse(t, &out, NULL, 0);
		if (rc == COPUS_OK)
			fprintf(stderr, "truncation at %zu accepted\n", cut);
		CU_ASSERT(rc < 0);
		free(t);
	}
	free(full);
}

/* Random byte mutations: the parser returns a status, never crashes. */
static void test_parse_mutations(void)
{
	copus_hint h = sample_hint(), out;
	char *full = strdup(encode(&h));
	size_t n = strlen(full);
	unsigned seed = 12345;
	int ok = 0, rejected = 0;

	for (int i = 0; i < 20000; i++) {
		char *t = strdup(full);
		int edits = 1 + (int)(rand_r(&seed) % 3);
		for (int e = 0; e < edits; e++)
			t[rand_r(&seed) % n] = (char)(1 + rand_r(&seed) % 255);
		int rc = copus_hint_parse(t, &out, NULL, 0);
		CU_ASSERT(rc == COPUS_OK || rc == COPUS_EPARSE ||
			  rc == COPUS_EVERSION);
		if (rc == COPUS_OK) {
			ok++;
			copus_model m = { out.n_perf > 0 ? out.perf[0].perf
							 : (copus_perf_params){
								   1, 1, 1, 1, 1, 1, 1 },
					  out.grad, out.limits };
			CU_ASSERT_EQUAL(copus_model_check(&m), COPUS_OK);
		} else {
			rejected++;
		}
		free(t);
	}
	CU_ASSERT(rejected > 0);
	free(full);
	(void)ok;
}

/* A model spread over several GPUs says its granularity; older hints
 * without it stay valid and mean any count. */
static void test_granularity(void)
{
	copus_hint h = sample_hint(), back;
	char buf[COPUS_HINT_MAX_LEN + 1], err[256];

	ASSERT_STATUS(copus_hint_parse("copus1:{" BASE "}", &back, NULL, 0),
		      COPUS_OK);
	CU_ASSERT_EQUAL(back.granularity, 0);
	h.granularity = 4;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"gran\":4"));
	ASSERT_STATUS(copus_hint_parse(buf, &back, NULL, 0), COPUS_OK);
	CU_ASSERT_EQUAL(back.granularity, 4);
	h.granularity = 1;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_OK);
	CU_ASSERT_PTR_NULL(strstr(buf, "gran"));
	h.granularity = COPUS_HINT_GRAN_MAX + 1;
	CU_ASSERT_EQUAL(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					  sizeof(err)), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "gran"));
	expect_reject("copus1:{" BASE ",\"gran\":0}", COPUS_EPARSE, "gran");
	expect_reject("copus1:{" BASE ",\"gran\":2.5}", COPUS_EPARSE, "gran");
	expect_reject("copus1:{" BASE ",\"gran\":\"2\"}", COPUS_EPARSE, "gran");
	expect_reject("copus1:{" BASE ",\"gran\":5000}", COPUS_EPARSE, "gran");
}

/* A small transformer, as a job that lets the planner choose describes
 * itself. */
static copus_planner_desc sample_model(void)
{
	return (copus_planner_desc){
		.arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2, .layers = 24,
		.hidden = 1024, .heads = 16, .seq_len = 512, .vocab = 30522,
	};
}

/* The model travels with the hint and comes back field by field; hints
 * without it stay valid and carry none. */
static void test_model_round_trip(void)
{
	copus_planner_desc wrn = {
		.arch = COPUS_ARCH_WIDE_RESNET, .dtype_bytes = 4, .depth = 101,
		.width_factor = 2, .channels = 64, .classes = 1000,
		.image_size = 224,
	};
	copus_planner_desc moe = {
		.arch = COPUS_ARCH_MOE, .dtype_bytes = 2, .layers = 12,
		.hidden = 768, .heads = 12, .seq_len = 1024, .vocab = 32000,
		.experts = 16, .expert_group = 2048,
	};
	const copus_planner_desc models[3] = { sample_model(), moe, wrn };
	char buf[COPUS_HINT_MAX_LEN + 1], err[256] = "";
	copus_hint h = sample_hint(), back;

	ASSERT_STATUS(copus_hint_parse("copus1:{" BASE "}", &back, NULL, 0),
		      COPUS_OK);
	CU_ASSERT_EQUAL(back.has_model, 0);
	ASSERT_STATUS(copus_hint_parse(encode(&h), &back, NULL, 0), COPUS_OK);
	CU_ASSERT_EQUAL(back.has_model, 0);
	CU_ASSERT_PTR_NULL(strstr(encode(&h), "mdl"));
	for (int i = 0; i < 3; i++) {
		h.has_model = 1;
		h.model = models[i];
		ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
						sizeof(err)), COPUS_OK);
		ASSERT_STATUS(copus_hint_parse(buf, &back, err, sizeof(err)),
			      COPUS_OK);
		if (err[0] != '\0')
			fprintf(stderr, "%s: %s\n", buf, err);
		CU_ASSERT_EQUAL(back.has_model, 1);
		CU_ASSERT(memcmp(&back.model, &models[i],
				 sizeof(back.model)) == 0);
		/* The rest of the hint is untouched by the model. */
		CU_ASSERT_EQUAL(back.n_perf, 2);
		CU_ASSERT_EQUAL(back.job_id, h.job_id);
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"mdl\":{\"a\":\"wrn\",\"dt\":4,"
					  "\"d\":101,\"w\":2,\"c\":64,"
					  "\"k\":1000,\"i\":224}"));
	ASSERT_STATUS(copus_hint_parse(
		"copus1:{" BASE ",\"mdl\":{\"a\":\"tf\",\"dt\":2,\"l\":24,"
		"\"h\":1024,\"n\":16,\"s\":512,\"v\":30522}}", &back, err,
		sizeof(err)), COPUS_OK);
	CU_ASSERT(memcmp(&back.model, &models[0], sizeof(back.model)) == 0);
}

#define MDL_TF "\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":16," \
	       "\"s\":512,\"v\":30522"

/* Every bad member of "mdl" is refused, and the message names it. */
static void test_model_rejects_fields(void)
{
	static const struct {
		const char *mdl, *needle;
	} bad[] = {
		{ "[1]", "\"mdl\"" },
		{ "\"tf\"", "\"mdl\"" },
		{ "{\"dt\":2}", "\"mdl.a\" is missing" },
		{ "{\"a\":1}", "\"mdl.a\"" },
		{ "{\"a\":\"cnn\"}", "cnn" },
		{ "{" MDL_TF ",\"x\":1}", "\"mdl.x\" is unknown" },
		{ "{" MDL_TF ",\"e\":8}", "\"mdl.e\" is not a member" },
		{ "{" MDL_TF ",\"d\":50}", "\"mdl.d\" is not a member" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":512}", "\"mdl.v\" is missing" },
		{ "{\"a\":\"moe\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":30522,\"e\":8}", "\"mdl.g\" is missing" },
		{ "{\"a\":\"tf\",\"dt\":3,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":30522}", "\"mdl.dt\": 3" },
		{ "{\"a\":\"tf\",\"dt\":8,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":30522}", "\"mdl.dt\": 8" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":0,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":30522}", "\"mdl.l\": 0" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":511,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":30522}", "\"mdl.l\": 511" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":-1,\"n\":16,"
		  "\"s\":512,\"v\":30522}", "\"mdl.h\": -1" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":1.5,"
		  "\"s\":512,\"v\":30522}", "\"mdl.n\": 1.5" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":\"512\",\"v\":30522}", "\"mdl.s\"" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":16777217}", "\"mdl.v\": 16777217" },
		{ "{\"a\":\"tf\",\"dt\":2,\"l\":24,\"h\":1048577,\"n\":16,"
		  "\"s\":512,\"v\":30522}", "\"mdl.h\": 1048577" },
		{ "{\"a\":\"moe\",\"dt\":2,\"l\":24,\"h\":1024,\"n\":16,"
		  "\"s\":512,\"v\":30522,\"e\":0,\"g\":64}", "\"mdl.e\": 0" },
		{ "{\"a\":\"wrn\",\"dt\":4,\"d\":75,\"w\":2,\"c\":64,"
		  "\"k\":1000,\"i\":224}", "\"mdl.d\": 75" },
		{ "{\"a\":\"wrn\",\"dt\":4,\"d\":50,\"w\":2,\"c\":64,"
		  "\"k\":1000,\"i\":16}", "\"mdl.i\": 16" },
		{ "{\"a\":\"wrn\",\"dt\":4,\"d\":50,\"w\":2,\"c\":64,"
		  "\"k\":1000,\"i\":224,\"l\":3}", "\"mdl.l\" is not a member" },
		{ "{" MDL_TF ",\"l\":25}", "duplicate" },
	};
	char text[COPUS_HINT_MAX_LEN + 1];

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(text, sizeof(text), "copus1:{" BASE ",\"mdl\":%s}",
			 bad[i].mdl);
		expect_reject(text, COPUS_EPARSE, bad[i].needle);
	}
}

/* The encoder never sends a model the parser would refuse. */
static void test_model_encode_rejects(void)
{
	char buf[COPUS_HINT_MAX_LEN + 1], err[256];
	copus_hint h = sample_hint();

	h.has_model = 1;
	h.model = sample_model();
	h.model.heads = 0;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"mdl.n\": 0"));
	CU_ASSERT_EQUAL(buf[0], '\0');
	h.model = sample_model();
	h.model.arch = (copus_planner_arch)9;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"mdl.a\""));
	h.model = sample_model();
	h.model.dtype_bytes = 3;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"mdl.dt\""));
	/* A member of another architecture is not the model's: ignored. */
	h.model = sample_model();
	h.model.experts = -5;
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), NULL, err,
					sizeof(err)), COPUS_OK);
	CU_ASSERT_PTR_NULL(strstr(buf, "\"e\""));
}

/* The largest hint, with a full MoE model, four GPU types, a target and a
 * granularity, every number at its longest, still fits Slurm's Comment. */
static void test_model_largest_fits(void)
{
	copus_hint h = sample_hint(), back;
	char buf[COPUS_HINT_MAX_LEN + 1], err[256] = "";
	size_t len = 0;

	h.n_perf = COPUS_HINT_MAX_TYPES;
	for (int i = 0; i < COPUS_HINT_MAX_TYPES; i++) {
		snprintf(h.perf[i].type, sizeof(h.perf[i].type),
			 "type-%09d", i);
		h.perf[i].perf = (copus_perf_params){
			1.234567891e-7, 2.345678912e-7, 3.456789123e-7,
			4.567891234e-7, 5.678912345e-7, 6.789123456e-7,
			1.234567891 };
	}
	h.job_id = UINT32_MAX;
	h.step = COPUS_HINT_STEP_MAX;
	h.restart_count = COPUS_HINT_RESTART_MAX;
	h.time = INT64_MAX;
	h.limits = (copus_batch_limits){ 1.234567891e6, 9.876543219e6,
					 COPUS_HINT_LOCAL_MAX - 1,
					 COPUS_HINT_LOCAL_MAX, true };
	h.grad = (copus_grad_stats){ 1.234567891e-29, 1.234567891e-29 };
	h.progress = 1.234567891e14;
	h.target = 1.234567891e14;
	h.state = COPUS_STATE_CHECKPOINTING;
	h.granularity = COPUS_HINT_GRAN_MAX;
	h.has_model = 1;
	h.model = (copus_planner_desc){
		.arch = COPUS_ARCH_MOE, .dtype_bytes = 2,
		.layers = COPUS_PLANNER_MAX_LAYERS - 2,
		.hidden = COPUS_HINT_MODEL_MAX, .heads = COPUS_HINT_MODEL_MAX,
		.seq_len = COPUS_HINT_MODEL_MAX, .vocab = COPUS_HINT_VOCAB_MAX,
		.experts = COPUS_HINT_MODEL_MAX,
		.expert_group = COPUS_HINT_MODEL_MAX,
	};
	ASSERT_STATUS(copus_hint_encode(&h, buf, sizeof(buf), &len, err,
					sizeof(err)), COPUS_OK);
	if (len > COPUS_HINT_MAX_LEN || err[0] != '\0')
		fprintf(stderr, "largest hint: %zu bytes: %s\n", len, err);
	CU_ASSERT(len <= COPUS_HINT_MAX_LEN);
	/* What hint.h says the model costs. */
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, ",\"mdl\":"));
	CU_ASSERT_EQUAL(strlen(strstr(buf, ",\"mdl\":")) - 1, 106);
	ASSERT_STATUS(copus_hint_parse(buf, &back, err, sizeof(err)),
		      COPUS_OK);
	CU_ASSERT_EQUAL(back.has_model, 1);
	CU_ASSERT_EQUAL(back.n_perf, COPUS_HINT_MAX_TYPES);
	CU_ASSERT(memcmp(&back.model, &h.model, sizeof(h.model)) == 0);
	fprintf(stderr, "largest hint with a model: %zu of %d bytes\n", len,
		COPUS_HINT_MAX_LEN);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(test_round_trip),
		TEST(test_round_trip_minimal),
		TEST(test_encode_rejects_bad_fields),
		TEST(test_encode_bounded),
		TEST(test_parse_accepts_base),
		TEST(test_parse_rejects_malformed),
		TEST(test_parse_rejects_fields),
		TEST(test_parse_rejects_oversized),
		TEST(test_parse_clamps),
		TEST(test_parse_truncations),
		TEST(test_parse_mutations),
		TEST(test_granularity),
		TEST(test_model_round_trip),
		TEST(test_model_rejects_fields),
		TEST(test_model_encode_rejects),
		TEST(test_model_largest_fits),
	};

	return RUN_TESTS("hint", tests);
}
