/*
 * NCCL communicators of the plan (built only with CUDA and NCCL): one world
 * communicator from a unique id shared by copus_bootstrap(), split into the
 * data-, pipeline- and tensor-parallel groups. Ranks are laid out with the
 * tensor rank fastest, then the pipeline rank, then the data rank, as
 * copus/plan.h lays them out. A rescale restarts the processes, so the communicators
 * are built afresh for the new size on every start; a job that gives up
 * whole data-parallel replicas can instead shrink them in place
 * (copus_comms_shrink, with ncclCommShrink of NCCL 2.27 and later).
 */
#include <copus_config.h>

#include <stdlib.h>
#include <string.h>

/* NCCL's header declares some functions without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include "internal.h"

#define NCCLCHECK(call, what)                                              \
	do {                                                               \
		ncclResult_t r_ = (call);                                  \
		if (r_ != ncclSuccess) {                                   \
			rc = copus__fail(ctx, COPUS_EIO, "%s: %s", (what), \
					 ncclGetErrorString(r_));          \
			goto fail;                                         \
		}                                                          \
	} while (0)

/*
 * Split world into the data, pipeline and tensor groups of the rank at
 * (its colours and positions in each group), and fill out; world becomes
 * out->world. On failure, everything is aborted, world included.
 */
static int split_groups(copus_ctx *ctx, ncclComm_t world,
			const copus_plan_coords *at, copus_comms *out)
{
	ncclComm_t data = NULL, pipe = NULL, tensor = NULL;
	int rc;

	/* Same (pipeline, tensor) coordinates: one data-parallel group. */
	NCCLCHECK(ncclCommSplit(world, at->data_group, at->data_rank, &data,
				NULL),
		  "ncclCommSplit (data)");
	NCCLCHECK(ncclCommSplit(world, at->pipeline_group, at->pipeline_rank,
				&pipe, NULL),
		  "ncclCommSplit (pipeline)");
	NCCLCHECK(ncclCommSplit(world, at->tensor_group, at->tensor_rank,
				&tensor, NULL),
		  "ncclCommSplit (tensor)");
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
	ncclCommAbort(world);
	return rc;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
/*
 * Shrink comms->world to the ranks that stay (new_rank[r] >= 0) and split
 * the result into the groups of the new plan nd; a leaving rank takes no
 * part and gets an empty out.
 */
static int shrink_world(copus_ctx *ctx, copus_comms *comms, const int *new_rank,
			const copus_plan_degrees *nd, int inner,
			copus_comms *out)
{
	ncclComm_t world = NULL;
	ncclResult_t r;
	copus_plan_coords at;
	int *exclude, n_exclude = 0, count = 0, got = -1, rc;
	int me = ctx->info.rank, n_new = nd->data * nd->pipeline * nd->tensor;

	if (new_rank[me] < 0)
		return COPUS_OK;
	exclude = malloc(sizeof(int) * (size_t)ctx->info.world);
	if (exclude == NULL)
		return COPUS_ENOMEM;
	/* Each leaving rank once, in order (NCCL sorts the list in place). */
	for (int i = 0; i < ctx->info.world; i++)
		if (new_rank[i] < 0)
			exclude[n_exclude++] = i;
	r = ncclCommShrink((ncclComm_t)comms->world, exclude, n_exclude, &world,
			   NULL, NCCL_SHRINK_DEFAULT);
	free(exclude);
	if (r != ncclSuccess)
		return copus__fail(ctx, COPUS_EIO, "ncclCommShrink (world): %s",
				   ncclGetErrorString(r));
	/*
	 * NCCL numbers the ranks that stay in their old order, which is the
	 * new plan's layout (copus_plan_shrink); the groups are split by that
	 * layout, so a difference would put ranks in the wrong groups.
	 */
	if (ncclCommCount(world, &count) != ncclSuccess ||
	    ncclCommUserRank(world, &got) != ncclSuccess || count != n_new ||
	    got != new_rank[me]) {
		ncclCommAbort(world);
		return copus__fail(ctx, COPUS_EIO,
				   "ncclCommShrink made rank %d of %d, the plan rank %d of %d",
				   got, count, new_rank[me], n_new);
	}
	rc = copus_plan_coords_of_layout(nd, inner, new_rank[me], &at);
	if (rc != COPUS_OK) {
		ncclCommAbort(world);
		return rc;
	}
	return split_groups(ctx, world, &at, out);
}
#else
static int shrink_world(copus_ctx *ctx, copus_comms *comms, const int *new_rank,
			const copus_plan_degrees *nd, int inner,
			copus_comms *out)
{
	(void)comms;
	(void)new_rank;
	(void)nd;
	(void)inner;
	(void)out;
	return copus__fail(ctx, COPUS_EVERSION,
			   "NCCL %d.%d has no ncclCommShrink (2.27 and later): checkpoint and restart instead",
			   NCCL_MAJOR, NCCL_MINOR);
}
#endif

int copus_comms_create(copus_ctx *ctx, copus_comms *out)
{
	ncclComm_t world = NULL;
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
	return split_groups(ctx, world, &at, out);
fail:
	if (world != NULL)
		ncclCommAbort(world);
	return rc;
}

int copus_comms_shrink(copus_ctx *ctx, copus_comms *comms, const int *leaving,
		       int n_leaving, copus_comms *out)
{
	copus_plan_degrees nd;
	int *new_rank, inner, rc;

	if (ctx == NULL || comms == NULL || comms->world == NULL ||
	    out == NULL || out == comms || leaving == NULL || n_leaving < 1)
		return COPUS_EINVAL;
	memset(out, 0, sizeof(*out));
	inner = ctx->planned && ctx->plan.data_inner;
	new_rank = malloc(sizeof(int) * (size_t)ctx->info.world);
	if (new_rank == NULL)
		return COPUS_ENOMEM;
	rc = copus_plan_shrink(&ctx->degrees, inner, ctx->info.world, leaving,
			       n_leaving, &nd, new_rank);
	if (rc == COPUS_ERANGE)
		rc = copus__fail(ctx, rc,
				 "the %d leaving ranks are not whole data-parallel replicas (%d x %d ranks each), or are all of them",
				 n_leaving, ctx->degrees.pipeline,
				 ctx->degrees.tensor);
	else if (rc != COPUS_OK)
		rc = copus__fail(ctx, rc, "cannot shrink %d ranks by %d: %s",
				 ctx->info.world, n_leaving,
				 copus_strerror(rc));
	else
		rc = shrink_world(ctx, comms, new_rank, &nd, inner, out);
	free(new_rank);
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
