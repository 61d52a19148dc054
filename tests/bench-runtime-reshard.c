/*
 * Time to save a model's state in one pipeline layout and to restore it in
 * another through libcopus's reshard callback, on CPU and the local disk:
 * synthetic state of 32 layers of equal size, saved by the ranks of the old
 * layout (one file per stage, in parallel), then restored by the ranks of
 * the new one, each reading only the old stages that hold its layers. The
 * files are dropped from the page cache between the two (fadvise), so the
 * restore reads the disk. Usage:
 *
 *   bench-runtime-reshard [GiB] [old pipeline] [new pipeline] [dir]
 *
 * (defaults: 1 GiB, 2 stages to 4, a new directory under /tmp).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <copus/copus.h>

#define LAYERS 32
#define MAX_RANKS 16
#define CHUNK (4 << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The maximum all-reduce of forked ranks through a star of pipes. */
struct star {
	int world, rank;
	int up[MAX_RANKS][2], down[MAX_RANKS][2];
};

static int star_agree(void *arg, int64_t *v, int n)
{
	struct star *s = arg;
	int64_t buf[64];
	size_t len = sizeof(int64_t) * (size_t)n;

	if (n > 64)
		return -1;
	if (s->rank == 0) {
		for (int r = 1; r < s->world; r++) {
			if (read(s->up[r][0], buf, len) != (ssize_t)len)
				return -1;
			for (int i = 0; i < n; i++)
				v[i] = buf[i] > v[i] ? buf[i] : v[i];
		}
		for (int r = 1; r < s->world; r++)
			if (write(s->down[r][1], v, len) != (ssize_t)len)
				return -1;
		return 0;
	}
	if (write(s->up[s->rank][1], v, len) != (ssize_t)len ||
	    read(s->down[s->rank][0], v, len) != (ssize_t)len)
		return -1;
	return 0;
}

struct app {
	int first, n;           /* this rank's layers */
	long long layer_bytes;
	unsigned char *buf;
	long long read_bytes;
	uint64_t sum;           /* of what was read, so that it is used */
};

/* A file: per layer its number and bytes, then the bytes. */
static int app_save(void *arg, const char *path, int64_t step)
{
	struct app *a = arg;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	(void)step;
	if (fd < 0)
		return -1;
	for (int l = a->first; l < a->first + a->n; l++) {
		long long head[2] = { l, a->layer_bytes };

		if (write(fd, head, sizeof(head)) != (ssize_t)sizeof(head))
			goto fail;
		memset(a->buf, l & 0xff, CHUNK);
		for (long long off = 0; off < a->layer_bytes; off += CHUNK) {
			size_t k = a->layer_bytes - off < CHUNK
					   ? (size_t)(a->layer_bytes - off)
					   : CHUNK;
			if (write(fd, a->buf, k) != (ssize_t)k)
				goto fail;
		}
	}
	return close(fd) == 0 ? 0 : -1;
fail:
	close(fd);
	return -1;
}

/* Read this rank's layers out of one old stage's file, skip the others. */
static int read_layers(struct app *a, const char *path)
{
	int fd = open(path, O_RDONLY);
	long long head[2];

	if (fd < 0)
		return -1;
	while (read(fd, head, sizeof(head)) == (ssize_t)sizeof(head)) {
		if (head[0] < a->first || head[0] >= a->first + a->n) {
			lseek(fd, head[1], SEEK_CUR);
			continue;
		}
		for (long long off = 0; off < head[1]; off += CHUNK) {
			size_t k = head[1] - off < CHUNK ? (size_t)(head[1] - off)
							 : CHUNK;
			ssize_t got = read(fd, a->buf, k);

			if (got != (ssize_t)k) {
				close(fd);
				return -1;
			}
			a->sum += a->buf[0] + a->buf[k - 1];
			a->read_bytes += got;
		}
	}
	close(fd);
	return 0;
}

static int app_load(void *arg, const char *path, int64_t step)
{
	(void)step;
	return read_layers(arg, path);
}

static int app_reshard(void *arg, int64_t step, const copus_ckpt_layout *old,
		       const copus_ckpt_layout *new_layout,
		       const copus_ckpt_shard *mine,
		       const copus_ckpt_shard *shards, int n_shards)
{
	struct app *a = arg;

	(void)step;
	(void)old;
	(void)new_layout;
	a->first = mine->first_layer;
	a->n = mine->n_layers;
	for (int i = 0; i < n_shards; i++)
		if (shards[i].path != NULL && read_layers(a, shards[i].path) != 0)
			return -1;
	return 0;
}

/*
 * One rank: init (restoring), and in the first phase one checkpoint. It
 * writes its times to the pipe: init seconds, checkpoint seconds, bytes
 * read.
 */
static void rank_main(struct star *s, int rank, int pipeline, const char *dir,
		      long long layer_bytes, int restart, int out_fd)
{
	static double costs[LAYERS];
	copus_config c = COPUS_CONFIG_INITIALIZER;
	struct app a = { .layer_bytes = layer_bytes };
	copus_ctx *ctx;
	copus_plan p;
	double t0, res[3] = { 0, 0, 0 };
	char env[16];

	s->rank = rank;
	for (int l = 0; l < LAYERS; l++)
		costs[l] = 1.0;
	a.buf = malloc(CHUNK);
	if (a.buf == NULL)
		_exit(2);
	snprintf(env, sizeof(env), "%d", restart);
	setenv("SLURM_RESTART_COUNT", env, 1);
	setenv("COPUS_HINTS", "0", 1);
	c.limits = (copus_batch_limits){ 64, 64, 64, 64, false };
	c.world = s->world;
	c.rank = rank;
	c.pipeline_degree = pipeline;
	c.layer_costs = costs;
	c.n_layers = LAYERS;
	c.ckpt_dir = dir;
	c.save = app_save;
	c.load = app_load;
	c.reshard = app_reshard;
	c.cb_arg = &a;
	c.agree = star_agree;
	c.comm_arg = s;
	c.no_signal_handler = 1;
	t0 = now();
	if (copus_init(&c, &ctx) != COPUS_OK) {
		fprintf(stderr, "rank %d: %s\n", rank, copus_errmsg(NULL));
		_exit(3);
	}
	res[0] = now() - t0;
	copus_plan_get(ctx, &p);
	a.first = p.first_layer;
	a.n = p.n_layers;
	if (restart == 0) {
		copus_step_begin(ctx);
		copus_step_end(ctx, 64, 0);
		t0 = now();
		if (copus_checkpoint(ctx) != COPUS_OK) {
			fprintf(stderr, "rank %d: %s\n", rank, copus_errmsg(ctx));
			_exit(4);
		}
		res[1] = now() - t0;
	}
	res[2] = (double)a.read_bytes;
	if (write(out_fd, res, sizeof(res)) != (ssize_t)sizeof(res))
		_exit(5);
	copus_finalize(ctx);
	_exit(0);
}

/* Run world ranks; the maximum of each of their three figures. */
static int phase(int world, int pipeline, const char *dir,
		 long long layer_bytes, int restart, double max[3])
{
	struct star s = { .world = world };
	int res[2];
	pid_t pids[MAX_RANKS];
	int ok = 0;

	if (pipe(res) != 0)
		return -1;
	for (int r = 1; r < world; r++)
		if (pipe(s.up[r]) != 0 || pipe(s.down[r]) != 0)
			return -1;
	for (int r = 0; r < world; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			rank_main(&s, r, pipeline, dir, layer_bytes, restart,
				  res[1]);
	}
	close(res[1]);
	for (int r = 1; r < world; r++) {
		close(s.up[r][0]);
		close(s.up[r][1]);
		close(s.down[r][0]);
		close(s.down[r][1]);
	}
	max[0] = max[1] = max[2] = 0;
	for (int r = 0; r < world; r++) {
		double v[3];

		if (read(res[0], v, sizeof(v)) != (ssize_t)sizeof(v))
			continue;
		for (int k = 0; k < 3; k++)
			max[k] = v[k] > max[k] ? v[k] : max[k];
	}
	close(res[0]);
	for (int r = 0; r < world; r++) {
		int st;

		waitpid(pids[r], &st, 0);
		ok |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return ok ? -1 : 0;
}

/* Drop the checkpoint's files from the page cache (they are fsynced). */
static void drop_cache(const char *dir, int world)
{
	char path[4096];

	for (int r = 0; r < world; r++) {
		for (int step = 0; step < 4; step++) {
			int fd;

			snprintf(path, sizeof(path), "%s/ckpt-%d.r%d", dir, step,
				 r);
			fd = open(path, O_RDONLY);
			if (fd < 0)
				continue;
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	double gib = argc > 1 ? atof(argv[1]) : 1.0;
	int from = argc > 2 ? atoi(argv[2]) : 2;
	int to = argc > 3 ? atoi(argv[3]) : 4;
	char dir[256], cmd[300];
	long long layer_bytes;
	double save[3], load[3];

	if (gib <= 0 || from < 1 || to < 1 || from > MAX_RANKS ||
	    to > MAX_RANKS) {
		fprintf(stderr, "usage: %s [GiB] [old pipeline 1..16] [new pipeline 1..16] [dir]\n",
			argv[0]);
		return 2;
	}
	if (argc > 4) {
		snprintf(dir, sizeof(dir), "%s", argv[4]);
	} else {
		snprintf(dir, sizeof(dir), "/tmp/copus-bench-reshard-XXXXXX");
		if (mkdtemp(dir) == NULL)
			return 1;
	}
	layer_bytes = (long long)(gib * 1073741824.0 / LAYERS);
	signal(SIGPIPE, SIG_IGN);
	if (phase(from, from, dir, layer_bytes, 0, save) != 0) {
		fprintf(stderr, "the saving phase failed\n");
		return 1;
	}
	drop_cache(dir, from);
	if (phase(to, to, dir, layer_bytes, 1, load) != 0) {
		fprintf(stderr, "the restoring phase failed\n");
		return 1;
	}
	printf("%.2f GiB in %d layers: saved by %d stages in %.2f s (%.0f MiB/s); "
	       "resharded into %d stages in %.2f s (%.0f MiB/s), at most %.0f MiB read by a rank\n",
	       gib, LAYERS, from, save[1], gib * 1024 / save[1], to, load[0],
	       gib * 1024 / load[0], load[2] / 1048576.0);
	if (argc <= 4) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
