/*
 * Sharing a blob of rank 0 (an ncclUniqueId) with every rank: through PMIx
 * when the job was launched by srun --mpi=pmix (Slurm's PMIx server supports
 * Put, Commit, Fence with data collection and Get), otherwise through the
 * application's broadcast callback.
 */
#include <copus_config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "internal.h"

/* Each call uses a fresh key: a PMIx key is published once per process. */
static int bootstrap_round;

static int _pmix_share(copus_ctx *ctx, void *blob, size_t len)
{
	pmix_proc_t me, root;
	pmix_value_t val, *got = NULL;
	pmix_byte_object_t bo;
	pmix_info_t info;
	pmix_status_t st;
	bool collect = true;
	char key[PMIX_MAX_KEYLEN + 1];
	int rc = COPUS_OK;

	st = PMIx_Init(&me, NULL, 0);
	if (st != PMIX_SUCCESS)
		return copus__fail(ctx, COPUS_EIO, "PMIx_Init failed: %s",
				   PMIx_Error_string(st));
	snprintf(key, sizeof(key), "copus.boot.%d", bootstrap_round++);
	if (me.rank == 0) {
		bo.bytes = blob;
		bo.size = len;
		PMIX_VALUE_LOAD(&val, &bo, PMIX_BYTE_OBJECT);
		st = PMIx_Put(PMIX_GLOBAL, key, &val);
		/* PMIX_VALUE_LOAD copied the bytes. */
		PMIX_VALUE_DESTRUCT(&val);
		if (st == PMIX_SUCCESS)
			st = PMIx_Commit();
		if (st != PMIX_SUCCESS) {
			rc = copus__fail(ctx, COPUS_EIO,
					 "PMIx_Put/Commit of %s failed: %s",
					 key, PMIx_Error_string(st));
			goto out;
		}
	}
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	st = PMIx_Fence(NULL, 0, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (st != PMIX_SUCCESS) {
		rc = copus__fail(ctx, COPUS_EIO, "PMIx_Fence failed: %s",
				 PMIx_Error_string(st));
		goto out;
	}
	if (me.rank != 0) {
		PMIX_PROC_LOAD(&root, me.nspace, 0);
		st = PMIx_Get(&root, key, NULL, 0, &got);
		if (st != PMIX_SUCCESS || got == NULL ||
		    got->type != PMIX_BYTE_OBJECT || got->data.bo.size != len) {
			rc = copus__fail(ctx, COPUS_EIO,
					 "PMIx_Get of %s from rank 0 failed: %s",
					 key, PMIx_Error_string(st));
			goto out;
		}
		memcpy(blob, got->data.bo.bytes, len);
	}
out:
	if (got != NULL)
		PMIX_VALUE_RELEASE(got);
	PMIx_Finalize(NULL, 0);
	return rc;
}

int copus_bootstrap(copus_ctx *ctx, void *blob, size_t len)
{
	const char *ns;
	int rc;

	if (ctx == NULL || blob == NULL || len == 0)
		return ctx == NULL
			       ? COPUS_EINVAL
			       : copus__fail(ctx, COPUS_EINVAL,
					     "bootstrap: NULL or empty blob");
	if (ctx->info.world == 1)
		return COPUS_OK;
	ns = getenv("PMIX_NAMESPACE");
	if (ns != NULL && *ns != '\0' && !ctx->no_pmix)
		return _pmix_share(ctx, blob, len);
	if (ctx->cfg.bcast == NULL)
		return copus__fail(ctx, COPUS_ESTATE,
				   "bootstrap of %d ranks: not launched by srun --mpi=pmix and no bcast callback",
				   ctx->info.world);
	rc = ctx->cfg.bcast(ctx->cfg.comm_arg, blob, len);
	if (rc != 0)
		return copus__fail(ctx, COPUS_EIO,
				   "the bcast callback failed (%d)", rc);
	return COPUS_OK;
}

#ifndef HAVE_NCCL
int copus_comms_create(copus_ctx *ctx, copus_comms *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	memset(out, 0, sizeof(*out));
	return copus__fail(ctx, COPUS_ESTATE,
			   "libcopus was built without CUDA and NCCL");
}

int copus_comms_destroy(copus_ctx *ctx, copus_comms *comms)
{
	if (ctx == NULL || comms == NULL)
		return COPUS_EINVAL;
	return COPUS_OK;
}

int copus_comms_shrink(copus_ctx *ctx, copus_comms *comms, const int *leaving,
		       int n_leaving, copus_comms *out)
{
	(void)leaving;
	(void)n_leaving;
	if (ctx == NULL || comms == NULL || out == NULL)
		return COPUS_EINVAL;
	memset(out, 0, sizeof(*out));
	return copus__fail(ctx, COPUS_ESTATE,
			   "libcopus was built without CUDA and NCCL");
}
#endif
