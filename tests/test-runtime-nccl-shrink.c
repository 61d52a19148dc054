/*
 * copus_comms_shrink on a GPU machine: four forked ranks (one GPU each,
 * data 2 x tensor 2) build the plan's communicators, then replica 1
 * (ranks 2 and 3) leaves. The ranks that stay check their new world
 * (2 ranks, the same order), its groups and an all-reduce on each; the
 * leaving ranks check that they got no communicators. Prints "nccl shrink
 * ok" and exits 0; exits 77 with fewer than four CUDA devices, or when the
 * NCCL it was built with has no ncclCommShrink.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* CUDA's and NCCL's headers declare some functions without prototypes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#include <copus/copus.h>

#define WORLD 4
#define N 256

/*
 * A star of pipes among the forked ranks: rank 0 broadcasts the NCCL id
 * (bcast) and takes the maximum of every rank's values (agree).
 */
struct star {
	int rank;
	int up[WORLD][2];   /* rank r -> rank 0 */
	int down[WORLD][2]; /* rank 0 -> rank r */
};

static int star_bcast(void *arg, void *buf, size_t len)
{
	struct star *s = arg;

	if (s->rank != 0)
		return read(s->down[s->rank][0], buf, len) == (ssize_t)len ?
			       0 : -1;
	for (int r = 1; r < WORLD; r++)
		if (write(s->down[r][1], buf, len) != (ssize_t)len)
			return -1;
	return 0;
}

static int star_agree(void *arg, int64_t *v, int n)
{
	struct star *s = arg;
	int64_t buf[64];
	size_t len = sizeof(int64_t) * (size_t)n;

	if (n > 64)
		return -1;
	if (s->rank != 0)
		return write(s->up[s->rank][1], v, len) == (ssize_t)len &&
				       read(s->down[s->rank][0], v, len) ==
					       (ssize_t)len ?
			       0 : -1;
	for (int r = 1; r < WORLD; r++) {
		if (read(s->up[r][0], buf, len) != (ssize_t)len)
			return -1;
		for (int i = 0; i < n; i++)
			v[i] = buf[i] > v[i] ? buf[i] : v[i];
	}
	for (int r = 1; r < WORLD; r++)
		if (write(s->down[r][1], v, len) != (ssize_t)len)
			return -1;
	return 0;
}

/*
 * The sum over comm of every member's value: true when it is want and the
 * communicator has size ranks with this one at position.
 */
static int sum_is(void *comm, float value, float want, int size, int position,
		  const char *name, int rank)
{
	float host[N], *dev = NULL;
	int count = -1, at = -1, ok = 1;

	if (ncclCommCount((ncclComm_t)comm, &count) != ncclSuccess ||
	    ncclCommUserRank((ncclComm_t)comm, &at) != ncclSuccess ||
	    count != size || at != position) {
		fprintf(stderr, "rank %d: %s has %d ranks, this one %d; expected %d and %d\n",
			rank, name, count, at, size, position);
		return 0;
	}
	for (int i = 0; i < N; i++)
		host[i] = value;
	if (cudaMalloc((void **)&dev, sizeof(host)) != cudaSuccess ||
	    cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice) !=
		    cudaSuccess ||
	    ncclAllReduce(dev, dev, N, ncclFloat, ncclSum, (ncclComm_t)comm,
			  0) != ncclSuccess ||
	    cudaStreamSynchronize(0) != cudaSuccess ||
	    cudaMemcpy(host, dev, sizeof(host), cudaMemcpyDeviceToHost) !=
		    cudaSuccess) {
		fprintf(stderr, "rank %d: %s all-reduce failed\n", rank, name);
		ok = 0;
	}
	for (int i = 0; ok && i < N; i++)
		ok = host[i] == want;
	if (dev != NULL)
		cudaFree(dev);
	if (!ok)
		fprintf(stderr, "rank %d: %s sums to %g, expected %g\n", rank,
			name, (double)host[0], (double)want);
	return ok;
}

/* One rank: 0 when everything it checked held. */
static int rank_main(struct star *s, int rank)
{
	static const int leaving[] = { 2, 3 };
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	copus_comms comms, small;
	copus_ctx *ctx;
	int rc, ok = 1;

	alarm(120); /* a rank that waits on a dead one fails, not hangs */
	cfg.limits = (copus_batch_limits){ 32, 256, 1, 64, true };
	cfg.world = WORLD;
	cfg.rank = rank;
	cfg.local_rank = rank;
	cfg.tensor_degree = 2;
	cfg.no_signal_handler = 1;
	cfg.agree = star_agree;
	cfg.bcast = star_bcast;
	cfg.comm_arg = s;
	if (copus_init(&cfg, &ctx) != COPUS_OK) {
		fprintf(stderr, "rank %d: init: %s\n", rank, copus_errmsg(NULL));
		return 1;
	}
	if (copus_comms_create(ctx, &comms) != COPUS_OK) {
		fprintf(stderr, "rank %d: comms: %s\n", rank,
			copus_errmsg(ctx));
		return 1;
	}
	/* 1 + 2 + 3 + 4 over the world; the tensor pairs (0 1) (2 3). */
	ok = sum_is(comms.world, (float)(rank + 1), 10, 4, rank, "world",
		    rank) &&
	     sum_is(comms.tensor, (float)(rank + 1), rank < 2 ? 3 : 7, 2,
		    rank % 2, "tensor", rank);
	rc = copus_comms_shrink(ctx, &comms, leaving, 2, &small);
	if (rc == COPUS_EVERSION) {
		printf("SKIP: %s\n", copus_errmsg(ctx));
		return 77;
	}
	if (rc != COPUS_OK) {
		fprintf(stderr, "rank %d: shrink: %s\n", rank,
			copus_errmsg(ctx));
		ok = 0;
	} else if (rank >= 2) {
		/* Replica 1 leaves with nothing. */
		ok = ok && small.world == NULL && small.data == NULL &&
		     small.pipeline == NULL && small.tensor == NULL;
	} else {
		/*
		 * Data 1 x tensor 2: the world and the tensor group are the
		 * two ranks that stay, in their order; the data groups are
		 * each rank alone.
		 */
		ok = ok &&
		     sum_is(small.world, (float)(rank + 1), 3, 2, rank,
			    "shrunk world", rank) &&
		     sum_is(small.tensor, (float)(rank + 1), 3, 2, rank,
			    "shrunk tensor", rank) &&
		     sum_is(small.data, (float)(rank + 1), (float)(rank + 1),
			    1, 0, "shrunk data", rank) &&
		     sum_is(small.pipeline, (float)(rank + 1),
			    (float)(rank + 1), 1, 0, "shrunk pipeline", rank);
		copus_comms_destroy(ctx, &small);
	}
	copus_comms_destroy(ctx, &comms);
	copus_finalize(ctx);
	return ok ? 0 : 1;
}

/* The CUDA devices, counted in a child: a parent that touched CUDA could
 * not fork ranks that use it. */
static int device_count(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int n = 0;

		if (cudaGetDeviceCount(&n) != cudaSuccess)
			n = 0;
		_exit(n > 100 ? 100 : n);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

int main(void)
{
	struct star s;
	pid_t pids[WORLD];
	int ndev = device_count(), failed = 0, skipped = 0;

	if (ndev < WORLD) {
		printf("SKIP: %d CUDA devices, the shrink test needs %d\n", ndev,
		       WORLD);
		return 77;
	}
	setenv("COPUS_HINTS", "0", 1);
	setenv("COPUS_NO_PMIX", "1", 1);
	memset(&s, 0, sizeof(s));
	for (int r = 1; r < WORLD; r++)
		if (pipe(s.up[r]) != 0 || pipe(s.down[r]) != 0)
			return 1;
	for (int r = 0; r < WORLD; r++) {
		pids[r] = fork();
		if (pids[r] < 0)
			return 1;
		if (pids[r] == 0) {
			s.rank = r;
			_exit(rank_main(&s, r));
		}
	}
	for (int r = 0; r < WORLD; r++) {
		int status = 0;

		if (waitpid(pids[r], &status, 0) != pids[r] ||
		    !WIFEXITED(status)) {
			fprintf(stderr, "rank %d did not exit\n", r);
			failed = 1;
		} else if (WEXITSTATUS(status) == 77) {
			skipped = 1;
		} else if (WEXITSTATUS(status) != 0) {
			fprintf(stderr, "rank %d failed (%d)\n", r,
				WEXITSTATUS(status));
			failed = 1;
		}
	}
	if (!failed && skipped)
		return 77;
	printf("nccl shrink %s\n", failed ? "FAILED" : "ok");
	return failed ? 1 : 0;
}
