/*
 * NCCL communicators of the plan (built only with CUDA and NCCL): one world
 * communicator from a unique id shared by copus_bootstrap(), split into the
 * data-, pipeline- and tensor-parallel groups. Ranks are laid out with the
 * tensor rank fastest, then the pipeline rank, then the data rank, as
 * copus/plan.h lays them out. A rescale restarts the processes, so the communicators
 * are built afresh for the new size on every start.
 */
#include <copus_config.h>

#include <string.h>

/* NCCL's header declares some functions without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "internal.h"

#define NCCLCHECK(call, what)                                                 \
	do {                                                                  \
		ncclResult_t r_ = (call);                                     \
		if (r_ != ncclSuccess) {                                      \
			rc = copus__fail(ctx, COPUS_EIO, "%s: %s", (what),    \
					 ncclGetErrorString(r_));             \
			goto fail;                                            \
		}                                                             \
	} while (0)

int copus_comms_create(copus_ctx *ctx, copus_comms *out)
{
	ncclComm_t world = NULL, data = NULL, pipe = NULL, tensor = NULL;
	ncclUniqueId id;
	copus_plan plan;
	copus_plan_coords at;
	int ndev = 0, rc, rank;

	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	memset(out, 0, sizeof(*out));
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
		return copus__fail(ctx, COPUS_ESTATE, "no CUDA device visible");
	if (cudaSetDevice(ctx->info.local_rank % ndev) != cudaSuccess)
		return copus__fail(ctx, COPUS_EIO, "cudaSetDevice(%d) failed",
				   ctx->info.local_rank % ndev);
	rc = copus_plan_get(ctx, &plan);
	if (rc != COPUS_OK)
		return rc;
	rank = ctx->info.rank;
	rc = copus__coords(ctx, rank, &at);
	if (rc != COPUS_OK)
		return rc;
	memset(&id, 0, sizeof(id));
	if (rank == 0)
		NCCLCHECK(ncclGetUniqueId(&id), "ncclGetUniqueId");
	rc = copus_bootstrap(ctx, &id, sizeof(id));
	if (rc != COPUS_OK)
		return rc;
	NCCLCHECK(ncclCommInitRank(&world, ctx->info.world, id, rank),
		  "ncclCommInitRank (world)");
	/* Same (pipeline, tensor) coordinates: one data-parallel group. */
	NCCLCHECK(ncclCommSplit(world, at.data_group, plan.data_rank, &data,
				NULL), "ncclCommSplit (data)");
	NCCLCHECK(ncclCommSplit(world, at.pipeline_group, plan.pipeline_rank,
				&pipe, NULL), "ncclCommSplit (pipeline)");
	NCCLCHECK(ncclCommSplit(world, at.tensor_group, plan.tensor_rank,
				&tensor, NULL), "ncclCommSplit (tensor)");
	out->world = world;
	out->data = data;
	out->pipeline = pipe;
	out->tensor = tensor;
	return COPUS_OK;
fail:
	/* After a failure, abort (never destroy) whatever was created. */
	if (tensor != NULL)
		ncclCommAbort(tensor);
	if (pipe != NULL)
		ncclCommAbort(pipe);
	if (data != NULL)
		ncclCommAbort(data);
	if (world != NULL)
		ncclCommAbort(world);
	return rc;
}

int copus_comms_destroy(copus_ctx *ctx, copus_comms *comms)
{
	void **c[4];

	if (ctx == NULL || comms == NULL)
		return COPUS_EINVAL;
	c[0] = &comms->world;
	c[1] = &comms->data;
	c[2] = &comms->pipeline;
	c[3] = &comms->tensor;
	/* Reverse order of creation. */
	for (int i = 3; i >= 0; i--) {
		if (*c[i] != NULL)
			ncclCommDestroy((ncclComm_t)*c[i]);
		*c[i] = NULL;
	}
	return COPUS_OK;
}
