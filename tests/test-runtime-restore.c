/*
 * tests/test-runtime: copus_init's checks of the checkpoint at start: the
 * directory can be written, a checkpoint saved by every rank is restored
 * by coordinates under either layout of ranks (or refused naming both
 * layouts), and rank 0 says which checkpoint it resumes from.
 */
#include <copus_config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <copus/copus.h>
#include <copus/planner.h>

#include "harness.h"
#include "test-runtime.h"

/*
 * The transformer of test-runtime-planned.c that the planner lays out with
 * data ranks inside pipeline ranks on 2 nodes of 4 A100s: data 4 x tensor
 * 1 x pipeline 2.
 */
static const copus_planner_desc inner_model = {
	.arch = COPUS_ARCH_TRANSFORMER, .dtype_bytes = 2, .layers = 4,
	.hidden = 256, .heads = 4, .seq_len = 128, .vocab = 1000,
};

/* The file a load callback was given, without its directory. */
static char loaded[256];

static int record_load(void *arg, const char *path, int64_t step)
{
	const char *name = strrchr(path, '/');

	(void)arg, (void)step;
	snprintf(loaded, sizeof(loaded), "%s", name != NULL ? name + 1 : path);
	return 0;
}

/* ------------------------------------------------------------------------
 * Capturing stderr
 * ------------------------------------------------------------------------ */

static int saved_stderr = -1;
static char capture_path[64];

static void capture_start(void)
{
	int fd;

	snprintf(capture_path, sizeof(capture_path),
		 "/tmp/copus-test-stderr-XXXXXX");
	fd = mkstemp(capture_path);
	CU_ASSERT_FATAL(fd >= 0);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* What went to stderr since capture_start, in buf (and to stderr again). */
static void capture_stop(char *buf, size_t len)
{
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	f = fopen(capture_path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(capture_path);
	fputs(buf, stderr);
}

/* ------------------------------------------------------------------------
 * The directory
 * ------------------------------------------------------------------------ */

/*
 * copus_init creates the checkpoint directory and writes a file in it, so
 * that one it cannot use fails the start, naming it and why, rather than
 * the first rescale. The tests run as root, whom a mode does not stop: a
 * path under a regular file (ENOTDIR) and /proc (where nobody creates
 * files) cannot be written by anyone.
 */
void test_unwritable_checkpoint_dir_fails_init(void)
{
	copus_config c = base_config();
	char dir[1500], file[1400], cmd[1600];
	copus_ctx *ctx;
	struct stat st;
	int n = 0;
	FILE *f;

	clear_env();
	make_tmpdir();
	snprintf(file, sizeof(file), "%s/plain-file", tmpdir);
	f = fopen(file, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fclose(f);
	snprintf(dir, sizeof(dir), "%s/ckpt", file);
	c.ckpt_dir = dir;
	expect_init_error(&c, COPUS_EIO, dir);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(NULL), "Not a directory"));
	c.ckpt_dir = "/proc";
	expect_init_error(&c, COPUS_EIO, "checkpoint directory /proc is not writable");
	/* Through the environment as well. */
	c.ckpt_dir = NULL;
	setenv("COPUS_CKPT_DIR", dir, 1);
	expect_init_error(&c, COPUS_EIO, dir);
	clear_env();
	unsetenv("COPUS_CKPT_DIR");

	/* A directory that is not there yet is created, and left empty. */
	snprintf(dir, sizeof(dir), "%s/new/ckpt", tmpdir);
	c.ckpt_dir = dir;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	CU_ASSERT(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
	copus_finalize(ctx);
	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	f = popen(cmd, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fscanf(f, "%d", &n), 1);
	pclose(f);
	CU_ASSERT_EQUAL(n, 0);
	remove_tmpdir();
}

/* ------------------------------------------------------------------------
 * A file per rank under either layout of ranks
 * ------------------------------------------------------------------------ */

/*
 * A checkpoint of step 3 saved by every one of world ranks of data x
 * tensor 1 x pipeline, laid out as data_inner says: rank q's file holds
 * "rank q".
 */
static void put_all_ranks(int data, int pipeline, int data_inner)
{
	char body[4096], files[3072] = "", path[512];
	int world = data * pipeline;
	size_t at = 0;

	for (int q = 0; q < world; q++) {
		char text[32];
		unsigned long crc;
		FILE *f;

		snprintf(text, sizeof(text), "rank %d\n", q);
		snprintf(path, sizeof(path), "%s/ckpt-3.r%d", tmpdir, q);
		f = fopen(path, "w");
		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		fputs(text, f);
		fclose(f);
		crc = crc32(0L, (const Bytef *)text, (uInt)strlen(text));
		at += (size_t)snprintf(files + at, sizeof(files) - at,
				       "%s[\"ckpt-3.r%d\",%zu,%lu]",
				       q > 0 ? "," : "", q, strlen(text), crc);
	}
	snprintf(body, sizeof(body),
		 "{\"copus_ckpt\":4,\"job\":5,\"restart\":0,\"step\":3,"
		 "\"samples\":1,\"progress\":1,\"world\":%d,"
		 "\"save_all_ranks\":1,\"layout\":[%d,1,%d],\"data_inner\":%d,"
		 "\"written\":0,\"layers\":0,\"files\":[%s],"
		 "\"noise\":[0.9,0,0,1,0],\"obs\":[]",
		 world, data, pipeline, data_inner, files);
	put_manifest_v4(body);
}

static copus_config all_ranks_config(int world, int rank)
{
	copus_config c = base_config();

	c.world = world;
	c.rank = rank;
	c.agree = agree_noop;
	c.ckpt_dir = tmpdir;
	c.save_all_ranks = 1;
	c.load = record_load;
	return c;
}

/*
 * Saved by every rank of data 4 x pipeline 2 with the data ranks inside
 * (the planner's layout), restored under the same degrees laid out as
 * copus/plan.h does: each rank loads the file of the old rank with its
 * coordinates, rank (pipeline x 4 + data), not its own number's.
 */
void test_all_ranks_restore_by_coordinates_from_data_inner(void)
{
	copus_ctx *ctx;
	char want[32];

	clear_env();
	make_tmpdir();
	put_all_ranks(4, 2, 1);
	for (int r = 0; r < 8; r++) {
		copus_config c = all_ranks_config(8, r);
		int d = r / 2, p = r % 2;

		c.pipeline_degree = 2;
		loaded[0] = '\0';
		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
		snprintf(want, sizeof(want), "ckpt-3.r%d", p * 4 + d);
		if (strcmp(loaded, want) != 0)
			fprintf(stderr, "rank %d loaded %s, expected %s\n", r,
				loaded, want);
		CU_ASSERT_STRING_EQUAL(loaded, want);
		copus_finalize(ctx);
	}
	remove_tmpdir();
}

/*
 * The other way: saved by every rank of data 4 x pipeline 2 laid out as
 * copus/plan.h does, restored by a planned job whose ranks have the data
 * ranks inside: rank r (data r % 4, pipeline r / 4) loads old rank
 * (data x 2 + pipeline).
 */
void test_all_ranks_restore_by_coordinates_into_data_inner(void)
{
	copus_planner_plan plan;
	copus_ctx *ctx;
	char want[32];

	clear_env();
	make_tmpdir();
	setenv("COPUS_GPU_TYPE", "a100", 1);
	setenv("SLURM_JOB_NUM_NODES", "2", 1);
	put_all_ranks(4, 2, 0);
	for (int r = 0; r < 8; r++) {
		copus_config c = all_ranks_config(8, r);
		int d = r % 4, p = r / 4;

		c.model = &inner_model;
		c.pipeline_degree = 0;
		c.tensor_degree = 0;
		loaded[0] = '\0';
		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
		ASSERT_STATUS(copus_planned(ctx, &plan), COPUS_OK);
		CU_ASSERT_EQUAL_FATAL(plan.data_inner, 1);
		CU_ASSERT_EQUAL_FATAL(plan.degrees.data, 4);
		CU_ASSERT_EQUAL_FATAL(plan.degrees.pipeline, 2);
		snprintf(want, sizeof(want), "ckpt-3.r%d", d * 2 + p);
		if (strcmp(loaded, want) != 0)
			fprintf(stderr, "rank %d loaded %s, expected %s\n", r,
				loaded, want);
		CU_ASSERT_STRING_EQUAL(loaded, want);
		copus_finalize(ctx);
	}
	clear_env();
	remove_tmpdir();
}

/* The shards a reshard callback was handed. */
static char shard_files[4][64];
static int n_shards_seen;

static int record_reshard(void *arg, int64_t step, const copus_ckpt_layout *old,
			  const copus_ckpt_layout *now,
			  const copus_ckpt_shard *mine,
			  const copus_ckpt_shard *shards, int n_shards)
{
	(void)arg, (void)step, (void)old, (void)now, (void)mine;
	n_shards_seen = n_shards;
	for (int i = 0; i < n_shards && i < 4; i++) {
		const char *p = shards[i].path;
		const char *name = p != NULL ? strrchr(p, '/') : NULL;

		snprintf(shard_files[i], sizeof(shard_files[i]), "%s",
			 name != NULL ? name + 1 : "");
	}
	return 0;
}

/*
 * Under other degrees and no reshard callback, a checkpoint saved by every
 * rank is refused, naming both layouts; with the callback, each old shard
 * is its first replica's file under the old layout (data inner: stage 1's
 * is rank 2's, not rank 1's, which holds stage 0).
 */
void test_all_ranks_of_another_layout_name_both_layouts(void)
{
	copus_config c;
	copus_ctx *ctx;

	clear_env();
	make_tmpdir();
	put_all_ranks(2, 2, 1);
	c = all_ranks_config(4, 0);
	expect_init_error(&c, COPUS_ESTATE,
			  "step 3 was saved by every rank under data 2 x tensor 1 x pipeline 2 (data inner), 4 ranks; this job runs data 4 x tensor 1 x pipeline 1 (data outer), 4 ranks");
	c.reshard = record_reshard;
	n_shards_seen = 0;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	CU_ASSERT_EQUAL(n_shards_seen, 2);
	CU_ASSERT_STRING_EQUAL(shard_files[0], "ckpt-3.r0");
	CU_ASSERT_STRING_EQUAL(shard_files[1], "ckpt-3.r2");
	copus_finalize(ctx);
	remove_tmpdir();
}

/* ------------------------------------------------------------------------
 * The line about the checkpoint resumed from
 * ------------------------------------------------------------------------ */

/*
 * Rank 0, and no other rank, says which checkpoint it resumes from: the
 * directory, the step, the layout and ranks, and when (UTC) and by which
 * job and restart it was written, as the manifest records it.
 */
void test_resume_is_logged_by_rank_0(void)
{
	char body[1024], want[1024], out[8192];
	copus_ctx *ctx;

	clear_env();
	make_tmpdir();
	put_tmp_file("ckpt-60.r0", "60 1\n");
	snprintf(body, sizeof(body),
		 "{\"copus_ckpt\":4,\"job\":123,\"restart\":1,\"step\":60,"
		 "\"samples\":1,\"progress\":1,\"world\":2,"
		 "\"save_all_ranks\":0,\"layout\":[2,1,1],\"data_inner\":0,"
		 "\"written\":1795827723,\"layers\":0,"
		 "\"files\":[[\"ckpt-60.r0\",5,%lu]],"
		 "\"noise\":[0.9,0,0,1,0],\"obs\":[]",
		 crc32(0L, (const Bytef *)"60 1\n", 5));
	put_manifest_v4(body);
	snprintf(want, sizeof(want),
		 "copus[0]: resuming from checkpoint %s at step 60 (layout data 2 x tensor 1 x pipeline 1 (data outer), 2 ranks), written 2026-11-28T01:02:03Z by job 123 restart 1\n",
		 tmpdir);
	for (int r = 0; r < 2; r++) {
		copus_config c = base_config();

		c.world = 2;
		c.rank = r;
		c.agree = agree_noop;
		c.ckpt_dir = tmpdir;
		c.load = record_load;
		capture_start();
		ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
		capture_stop(out, sizeof(out));
		CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
		copus_finalize(ctx);
		if (r == 0 && strstr(out, want) == NULL)
			fprintf(stderr, "no line \"%s\" in \"%s\"\n", want, out);
		CU_ASSERT((r == 0) == (strstr(out, want) != NULL));
		CU_ASSERT((r == 0) == (strstr(out, "resuming") != NULL));
	}
	remove_tmpdir();
}

/*
 * The manifest records when it was written (UTC seconds) and the layout's
 * data_inner; a run that starts without a checkpoint says nothing of one.
 */
void test_manifest_records_when_and_how_it_was_written(void)
{
	copus_config c = base_config();
	char text[8192], path[512], out[4096];
	struct app a = { 0 };
	long long written = -1;
	const char *at;
	copus_ctx *ctx;
	time_t t0, t1;

	clear_env();
	make_tmpdir();
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	c.cb_arg = &a;
	capture_start();
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	capture_stop(out, sizeof(out));
	CU_ASSERT_PTR_NULL(strstr(out, "resuming"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	copus_step_begin(ctx);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	t0 = time(NULL);
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_OK);
	t1 = time(NULL);
	copus_finalize(ctx);
	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	read_line(path, text, sizeof(text));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"data_inner\":0"));
	at = strstr(text, "\"written\":");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	CU_ASSERT_EQUAL(sscanf(at, "\"written\":%lld", &written), 1);
	CU_ASSERT(written >= (long long)t0 && written <= (long long)t1);
	remove_tmpdir();
}
