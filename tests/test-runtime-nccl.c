/*
 * The NCCL path of libcopus on a GPU machine: communicators for the plan,
 * an all-reduce on each, then a rebuild (as after a restart). One process
 * (one GPU); prints "nccl ok" and exits 0, or exits 77 without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>

/* CUDA's and NCCL's headers declare some functions without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include <copus/copus.h>

#define N 1024

static int allreduce_check(void *comm, const char *name)
{
	float host[N], *dev = NULL;
	int ok = 1;

	for (int i = 0; i < N; i++)
		host[i] = (float)i;
	if (cudaMalloc((void **)&dev, sizeof(host)) != cudaSuccess ||
	    cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice) !=
		    cudaSuccess) {
		fprintf(stderr, "%s: CUDA allocation failed\n", name);
		return 0;
	}
	if (ncclAllReduce(dev, dev, N, ncclFloat, ncclSum, (ncclComm_t)comm,
			  0) != ncclSuccess ||
	    cudaStreamSynchronize(0) != cudaSuccess ||
	    cudaMemcpy(host, dev, sizeof(host), cudaMemcpyDeviceToHost) !=
		    cudaSuccess) {
		fprintf(stderr, "%s: all-reduce failed\n", name);
		ok = 0;
	}
	for (int i = 0; ok && i < N; i++)
		ok = host[i] == (float)i; /* one rank: the sum is the input */
	cudaFree(dev);
	printf("%s all-reduce %s\n", name, ok ? "ok" : "wrong");
	return ok;
}

int main(void)
{
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	copus_comms comms;
	copus_ctx *ctx;
	int ndev = 0, ok = 1;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("SKIP: no CUDA device\n");
		return 77;
	}
	cfg.limits = (copus_batch_limits){ 32, 256, 1, 64, true };
	cfg.world = 1;
	cfg.rank = 0;
	cfg.local_rank = 0;
	if (copus_init(&cfg, &ctx) != COPUS_OK)
		return 1;
	for (int round = 0; round < 2 && ok; round++) {
		if (copus_comms_create(ctx, &comms) != COPUS_OK) {
			fprintf(stderr, "comms: %s\n", copus_errmsg(ctx));
			ok = 0;
			break;
		}
		ok = allreduce_check(comms.world, "world") &&
		     allreduce_check(comms.data, "data") &&
		     allreduce_check(comms.pipeline, "pipeline") &&
		     allreduce_check(comms.tensor, "tensor");
		copus_comms_destroy(ctx, &comms);
	}
	copus_finalize(ctx);
	printf("nccl %s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
