/*
 * tests/test-runtime: the checkpoint's manifest read back: a malformed one
 * is refused, one of versions 1 and 2 still loads, an edited one of version
 * 4 is refused by its checksum, and one of another model by its fingerprint.
 */
#include <copus_config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include <copus/copus.h>

#include "harness.h"
#include "test-runtime.h"

void test_bad_manifest(void)
{
	copus_config c = base_config();
	char path[512];
	copus_ctx *ctx;
	FILE *f;

	clear_env();
	make_tmpdir();
	c.ckpt_dir = tmpdir;
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":\"x\"}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":1,\"files\":[[\"../etc/passwd\",10]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	/* A manifest naming a file that is not there. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":1,\"files\":[[\"ckpt-3.r0\",10]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	c.load = app_load;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EIO);
	/* One file for five ranks that all saved; two files from rank 0. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":5,\"save_all_ranks\":1,"
		   "\"files\":[[\"ckpt-3.r0\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":2,\"save_all_ranks\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,7],[\"ckpt-3.r1\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	/* A version 1 manifest (world 5, one file) had no saving mode. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":5,\"files\":[[\"ckpt-3.r0\",10],[\"ckpt-3.r1\",10]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	/* A layout that is not the world, or one file for two stages. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":4,\"save_all_ranks\":0,\"layout\":[1,1,2],\"layers\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,7],[\"ckpt-3.r2\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "layout"));
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":3,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":4,\"save_all_ranks\":0,\"layout\":[2,1,2],\"layers\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,7]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "files"));
	/* A CRC-32 out of range. */
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":1,\"progress\":1,"
		   "\"world\":1,\"save_all_ranks\":0,"
		   "\"files\":[[\"ckpt-3.r0\",10,4294967296]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_EPARSE);
	remove_tmpdir();
}

/* A checkpoint written before manifests had checksums still loads. */
void test_version_1_manifest_loads(void)
{
	copus_config c = base_config();
	struct app a = { 0 };
	copus_job_info in;
	char path[512];
	copus_ctx *ctx = NULL;
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/ckpt-3.r0", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "3 1.5\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":1,\"step\":3,\"samples\":96,\"progress\":3,"
		   "\"world\":1,\"files\":[[\"ckpt-3.r0\",6]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}");
	fclose(f);
	c.ckpt_dir = tmpdir;
	c.load = app_load;
	c.cb_arg = &a;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	copus_info(ctx, &in);
	CU_ASSERT_EQUAL(in.step, 3);
	CU_ASSERT_EQUAL(in.restored, 1);
	CU_ASSERT_EQUAL(a.loads, 1);
	ASSERT_CLOSE(a.w, 1.5, 1e-12);
	copus_finalize(ctx);
	remove_tmpdir();
}

void put_manifest_v4(const char *body)
{
	char path[512];
	unsigned long crc = crc32(0L, (const Bytef *)body, (uInt)strlen(body));
	FILE *f;

	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "%s,\"checksum\":\"%08lx\"}", body, crc);
	fclose(f);
}

/* A checkpoint of step steps by one process; the manifest's text. */
static void write_checkpoint(copus_config *c, int steps, char *text,
			     size_t len)
{
	char path[512];
	copus_ctx *ctx;

	ASSERT_STATUS(copus_init(c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	for (int i = 0; i < steps; i++) {
		copus_step_begin(ctx);
		copus_grad_local(ctx, 2.0 + i);
		copus_grad_total(ctx, 1.0);
		ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	}
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_OK);
	copus_finalize(ctx);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	read_line(path, text, len);
}

/* The manifest with what follows key's colon prefixed by insert. */
static void put_edited(const char *text, const char *key, const char *insert)
{
	char path[512];
	const char *at = strstr(text, key);
	FILE *f;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	at += strlen(key);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "%.*s%s%s", (int)(at - text), text, insert, at);
	fclose(f);
}

/*
 * A manifest of version 4 carries a CRC-32 of the rest of its text: one
 * whose progress or noise was edited, or whose checksum is gone or was
 * kept over a version edited back to 3, is refused, naming the manifest;
 * the manifest as written loads.
 */
void test_edited_manifest_is_refused(void)
{
	copus_config c = base_config();
	struct app a = { 0 };
	char text[8192], path[512];
	copus_job_info in;
	copus_ctx *ctx;

	clear_env();
	make_tmpdir();
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	c.cb_arg = &a;
	write_checkpoint(&c, 3, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"copus_ckpt\":4,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, ",\"checksum\":\""));
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	/* A digit before the progress and before the noise's decay. */
	put_edited(text, "\"progress\":", "1");
	expect_init_error(&c, COPUS_EPARSE,
			  "does not match its content (edited or corrupt)");
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), path));
	put_edited(text, "\"noise\":[", "1");
	expect_init_error(&c, COPUS_EPARSE,
			  "does not match its content (edited or corrupt)");
	put_edited(text, "\"checksum\":\"", "0");
	expect_init_error(&c, COPUS_EPARSE, "\"checksum\"");
	put_edited(text, "\"copus_ckpt\":", "3,\"was\":");
	expect_init_error(&c, COPUS_EPARSE, "\"checksum\"");
	/* As written: it loads. */
	put_edited(text, "\"copus_ckpt\":", "");
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	copus_info(ctx, &in);
	CU_ASSERT_EQUAL(in.step, 3);
	CU_ASSERT_EQUAL(in.restored, 1);
	copus_finalize(ctx);
	remove_tmpdir();
}

/* Version 2 (CRC-32s, no layout) is still read. */
void test_version_2_manifest_loads(void)
{
	copus_config c = base_config();
	struct app a = { 0 };
	char path[512];
	copus_ctx *ctx = NULL;
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/ckpt-3.r0", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "3 1.5\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "w");
	fprintf(f, "{\"copus_ckpt\":2,\"step\":3,\"samples\":96,\"progress\":3,"
		   "\"world\":1,\"save_all_ranks\":0,"
		   "\"files\":[[\"ckpt-3.r0\",6,%lu]],"
		   "\"noise\":[0.9,0,0,1,0],\"obs\":[]}",
		crc32(0L, (const Bytef *)"3 1.5\n", 6));
	fclose(f);
	c.ckpt_dir = tmpdir;
	c.load = app_load;
	c.cb_arg = &a;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_EQUAL(a.loads, 1);
	ASSERT_CLOSE(a.w, 1.5, 1e-12);
	if (ctx != NULL)
		copus_finalize(ctx);
	remove_tmpdir();
}

/*
 * The model's fingerprint travels in the manifest: a job of another
 * fingerprint is refused, naming both; a job without one, or a manifest
 * without one, is accepted.
 */
void test_fingerprint_of_another_model_is_refused(void)
{
	copus_config c = base_config();
	struct app a = { 0 };
	char text[8192];
	copus_ctx *ctx;

	clear_env();
	make_tmpdir();
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	c.cb_arg = &a;
	c.fingerprint = "gpt-2l-256h";
	write_checkpoint(&c, 2, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"fingerprint\":\"gpt-2l-256h\""));
	c.fingerprint = "gpt-4l-256h";
	expect_init_error(&c, COPUS_ESTATE,
			  "step 2 was written by a model with fingerprint 'gpt-2l-256h'; this job's model is 'gpt-4l-256h'");
	c.fingerprint = NULL;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	copus_finalize(ctx);
	c.fingerprint = "gpt-2l-256h";
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	copus_finalize(ctx);
	/* Printed in errors: no control characters. */
	c.fingerprint = "two\nlines";
	expect_init_error(&c, COPUS_EINVAL, "fingerprint");
	remove_tmpdir();

	/* A manifest without one. */
	make_tmpdir();
	c.ckpt_dir = tmpdir;
	c.fingerprint = NULL;
	write_checkpoint(&c, 2, text, sizeof(text));
	CU_ASSERT_PTR_NULL(strstr(text, "fingerprint"));
	c.fingerprint = "gpt-4l-256h";
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	copus_finalize(ctx);
	remove_tmpdir();
}

/* A program built before the fingerprint was appended keeps working. */
void test_config_without_fingerprint(void)
{
	unsigned char raw[sizeof(copus_config) + 16];
	copus_config *c = (copus_config *)raw;
	size_t old = offsetof(copus_config, fingerprint);
	copus_ctx *ctx;

	clear_env();
	/* Bytes past the older layout are not the caller's: poison them. */
	memset(raw, 0xab, sizeof(raw));
	ASSERT_STATUS(copus_config_init(c, old), COPUS_OK);
	CU_ASSERT_EQUAL(c->size, old);
	CU_ASSERT_EQUAL(raw[old], 0xab);
	c->limits = (copus_batch_limits){ 64, 2048, 4, 128, true };
	c->no_signal_handler = 1;
	ASSERT_STATUS(copus_init(c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL(ctx);
	if (ctx != NULL)
		copus_finalize(ctx);
	ASSERT_STATUS(copus_config_init(c, sizeof(copus_config)), COPUS_OK);
	CU_ASSERT_PTR_NULL(c->fingerprint);
}

/* Steps of a process on one GPU, each at least seconds long. */
void spin(double seconds);

static void timed_steps(copus_ctx *ctx, int steps, double seconds)
{
	for (int i = 0; i < steps; i++) {
		copus_step_begin(ctx);
		spin(seconds);
		copus_grad_local(ctx, 2.0 + i);
		copus_grad_total(ctx, 1.0);
		ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	}
}

static void assert_same_perf(const copus_perf_params *got,
			     const copus_perf_params *want)
{
	ASSERT_CLOSE(got->alpha_c, want->alpha_c, 1e-9);
	ASSERT_CLOSE(got->beta_c, want->beta_c, 1e-9);
	ASSERT_CLOSE(got->alpha_n, want->alpha_n, 1e-9);
	ASSERT_CLOSE(got->beta_n, want->beta_n, 1e-9);
	ASSERT_CLOSE(got->alpha_r, want->alpha_r, 1e-9);
	ASSERT_CLOSE(got->beta_r, want->beta_r, 1e-9);
	ASSERT_CLOSE(got->gamma, want->gamma, 1e-9);
}

/*
 * A job that ran on type "slow", checkpointed, and restarted on type
 * "fast" tells the scheduler its model on both: "fast" first, fitted from
 * this run's steps, then "slow", the fit of the steps the checkpoint kept,
 * the same model the first run published; before its first steps on
 * "fast", "slow" alone.
 */
void test_hint_carries_the_models_of_earlier_types(void)
{
	copus_config c = base_config();
	copus_perf_params slow, fast;
	struct app a = { 0 };
	copus_job_info in;
	copus_ctx *ctx;
	copus_hint h;

	clear_env();
	make_tmpdir();
	setenv("SLURM_JOB_ID", "4251", 1);
	setenv("COPUS_HINTS", "0", 1);
	setenv("COPUS_GPU_TYPE", "slow", 1);
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	c.cb_arg = &a;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	timed_steps(ctx, 8, 0.004);
	ASSERT_STATUS(copus_perf_get(ctx, &slow), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	CU_ASSERT_EQUAL_FATAL(h.n_perf, 1);
	CU_ASSERT_STRING_EQUAL(h.perf[0].type, "slow");
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_OK);
	copus_finalize(ctx);

	setenv("COPUS_GPU_TYPE", "fast", 1);
	setenv("SLURM_RESTART_COUNT", "1", 1);
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	ASSERT_STATUS(copus_info(ctx, &in), COPUS_OK);
	CU_ASSERT_EQUAL(in.restored, 1);
	/*
	 * Before its first fit on "fast", no model of it; the hint still
	 * tells the scheduler how the job did on "slow", so that it does not
	 * decide on its estimates alone until "fast" is measured.
	 */
	ASSERT_STATUS(copus_perf_get(ctx, &fast), COPUS_ENODATA);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	if (h.n_perf != 1)
		fprintf(stderr, "before a step on fast the hint has %d "
			"models, expected 1 (slow)\n", h.n_perf);
	CU_ASSERT_EQUAL_FATAL(h.n_perf, 1);
	CU_ASSERT_STRING_EQUAL(h.perf[0].type, "slow");
	assert_same_perf(&h.perf[0].perf, &slow);
	timed_steps(ctx, 8, 0.001);
	ASSERT_STATUS(copus_perf_get(ctx, &fast), COPUS_OK);
	ASSERT_STATUS(copus_hint_get(ctx, &h), COPUS_OK);
	if (h.n_perf != 2)
		fprintf(stderr, "the hint has %d models (the first: %s), "
			"expected 2 (fast, slow)\n", h.n_perf,
			h.n_perf > 0 ? h.perf[0].type : "none");
	CU_ASSERT_EQUAL_FATAL(h.n_perf, 2);
	CU_ASSERT_STRING_EQUAL(h.perf[0].type, "fast");
	assert_same_perf(&h.perf[0].perf, &fast);
	CU_ASSERT_STRING_EQUAL(h.perf[1].type, "slow");
	assert_same_perf(&h.perf[1].perf, &slow);
	/* Each from its own steps: 4 ms a step is not 1 ms a step. */
	CU_ASSERT(memcmp(&h.perf[0].perf, &h.perf[1].perf,
			 sizeof(h.perf[0].perf)) != 0);
	copus_finalize(ctx);
	remove_tmpdir();
	clear_env();
}
