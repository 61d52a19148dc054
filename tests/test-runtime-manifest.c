/*
 * tests/test-runtime: the checkpoint's manifest read back: a malformed one
 * is refused, one of version 1 still loads.
 */
#include <copus_config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
