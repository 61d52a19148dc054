/*
 * tests/test-runtime: the ranks of the rescale tests, forked processes
 * that train a small model (or a model of layers in pipeline stages) with
 * libcopus, agree over a star of pipes, checkpoint and restore; launch()
 * runs them, and the run's report and manifest say what they did.
 */
#include <copus_config.h>

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <copus/copus.h>
#include <copus/plan.h>

#include "harness.h"
#include "test-runtime.h"

static void app_step(struct app *a)
{
	a->w = a->w * 0.5 + (double)(a->step + 1);
	a->step++;
}

int app_save(void *arg, const char *path, int64_t step)
{
	struct app *a = arg;
	FILE *f;

	a->saves++;
	if (a->fail_on_save)
		return -1;
	f = fopen(path, "w");
	if (f == NULL)
		return -1;
	if (a->crash_on_save) {
		fprintf(f, "%lld ", (long long)step);
		fflush(f);
		_exit(9);
	}
	fprintf(f, "%lld %.17g\n", (long long)step, a->w);
	return fclose(f) == 0 ? 0 : -1;
}

int app_load(void *arg, const char *path, int64_t step)
{
	struct app *a = arg;
	long long s;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return -1;
	if (fscanf(f, "%lld %lg", &s, &a->w) != 2 || s != step) {
		fclose(f);
		return -2;
	}
	fclose(f);
	a->step = s;
	a->loads++;
	return 0;
}

static double expected_w_from(double w0, int64_t steps)
{
	struct app a = { .w = w0 };

	while (a.step < steps)
		app_step(&a);
	return a.w;
}

double expected_w(int64_t steps)
{
	struct app a = { 0 };

	while (a.step < steps)
		app_step(&a);
	return a.w;
}

/*
 * A star of pipes for the max all-reduce of several forked ranks: rank 0
 * reads every other rank's values, takes the maximum, writes it back.
 */
struct star {
	int world;
	int up[MAX_RANKS][2];   /* rank r -> rank 0 */
	int down[MAX_RANKS][2]; /* rank 0 -> rank r */
	int rank;
	int agree_calls;        /* this rank's calls of star_agree */
};

/* The sum of n doubles over the ranks (the application's all-reduce). */
static int star_sum(struct star *s, double *v, int n)
{
	double buf[COPUS_AGREE_LEN];
	size_t len = sizeof(double) * (size_t)n;

	if (n > COPUS_AGREE_LEN)
		return -1;
	if (s->rank == 0) {
		for (int r = 1; r < s->world; r++) {
			if (read(s->up[r][0], buf, len) != (ssize_t)len)
				return -1;
			for (int i = 0; i < n; i++)
				v[i] += buf[i];
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

static int star_agree(void *arg, int64_t *v, int n)
{
	struct star *s = arg;
	int64_t buf[16];
	size_t len = sizeof(int64_t) * (size_t)n;

	s->agree_calls++;
	if (n > 16)
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

/*
 * A model of layers, each a value that depends on every step in order;
 * a rank holds its pipeline stage's layers only and saves them with their
 * numbers, so that a run of another pipeline degree can pick its own.
 */
#define LAYERS 6
struct lapp {
	int first, n;         /* this rank's layers */
	double w[LAYERS];     /* valid for first .. first + n - 1 */
	int64_t step;
	int read_files;       /* files the restore read */
};

static double layer_value(int layer, int64_t steps)
{
	double w = 10.0 * layer;

	for (int64_t t = 0; t < steps; t++)
		w = w * 0.5 + (double)(t + 1) + layer;
	return w;
}

static int lapp_save(void *arg, const char *path, int64_t step)
{
	struct lapp *a = arg;
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fprintf(f, "%lld %d %d", (long long)step, a->first, a->n);
	for (int l = a->first; l < a->first + a->n; l++)
		fprintf(f, " %.17g", a->w[l]);
	fprintf(f, "\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* Read the layers of one file that fall in [lo, hi) into a->w. */
static int lapp_read(struct lapp *a, const char *path, int64_t step, int lo,
		     int hi, bool *have)
{
	long long s;
	int first, n;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return -1;
	a->read_files++;
	if (fscanf(f, "%lld %d %d", &s, &first, &n) != 3 || s != step ||
	    first < 0 || n < 0 || first + n > LAYERS) {
		fclose(f);
		return -2;
	}
	for (int l = first; l < first + n; l++) {
		double v;

		if (fscanf(f, "%lg", &v) != 1) {
			fclose(f);
			return -3;
		}
		if (l >= lo && l < hi) {
			a->w[l] = v;
			have[l] = true;
		}
	}
	fclose(f);
	a->step = step;
	return 0;
}

static int lapp_load(void *arg, const char *path, int64_t step)
{
	struct lapp *a = arg;
	bool have[LAYERS] = { false };

	if (lapp_read(a, path, step, a->first, a->first + a->n, have) != 0)
		return -1;
	for (int l = a->first; l < a->first + a->n; l++)
		if (!have[l])
			return -4;
	return 0;
}

static int lapp_reshard(void *arg, int64_t step, const copus_ckpt_layout *old,
			const copus_ckpt_layout *now,
			const copus_ckpt_shard *mine,
			const copus_ckpt_shard *shards, int n_shards)
{
	struct lapp *a = arg;
	bool have[LAYERS] = { false };

	if (n_shards != old->pipeline * old->tensor || now->pipeline < 1 ||
	    mine->first_layer != a->first || mine->n_layers != a->n)
		return -5;
	for (int i = 0; i < n_shards; i++)
		if (shards[i].path != NULL &&
		    lapp_read(a, shards[i].path, step, a->first,
			      a->first + a->n, have) != 0)
			return -1;
	for (int l = a->first; l < a->first + a->n; l++)
		if (!have[l])
			return -4;
	return 0;
}

static int star_agree(void *arg, int64_t *v, int n);

static void layered_main(const struct run *run, struct star *s, int rank,
			 const char *report)
{
	static const double costs[LAYERS] = { 1, 1, 1, 1, 1, 1 };
	copus_config c = base_config();
	struct lapp a = { 0 };
	copus_ctx *ctx;
	copus_job_info in;
	copus_plan p;
	char env[32];

	snprintf(env, sizeof(env), "%d", run->restart);
	setenv("SLURM_RESTART_COUNT", env, 1);
	setenv("COPUS_HINTS", "0", 1);
	c.world = run->world;
	c.rank = rank;
	c.ckpt_dir = tmpdir;
	c.pipeline_degree = run->pipeline > 0 ? run->pipeline : 1;
	c.tensor_degree = run->tensor > 0 ? run->tensor : 1;
	c.layer_costs = costs;
	c.n_layers = LAYERS;
	c.save = lapp_save;
	c.load = lapp_load;
	c.reshard = run->reshard ? lapp_reshard : NULL;
	c.cb_arg = &a;
	c.agree = star_agree;
	c.comm_arg = s;
	c.no_signal_handler = 0;
	/* The callbacks need this rank's layers before init restores. */
	{
		copus_plan_degrees d;
		copus_plan_coords at;
		int b[LAYERS + 1];

		if (copus_plan_degrees_of_world(c.world, c.pipeline_degree,
						c.tensor_degree, &d) != COPUS_OK ||
		    copus_plan_coords_of_rank(&d, rank, &at) != COPUS_OK ||
		    copus_plan_stages(costs, LAYERS, c.pipeline_degree, b) !=
			    COPUS_OK)
			_exit(29);
		a.first = b[at.pipeline_rank];
		a.n = b[at.pipeline_rank + 1] - b[at.pipeline_rank];
	}
	for (int l = 0; l < LAYERS; l++)
		a.w[l] = 10.0 * l;
	if (copus_init(&c, &ctx) != COPUS_OK)
		_exit(20);
	copus_info(ctx, &in);
	if (copus_plan_get(ctx, &p) != COPUS_OK || p.first_layer != a.first ||
	    p.n_layers != a.n)
		_exit(29);
	if (in.restored && in.step != a.step)
		_exit(21);
	if (report != NULL) {
		char path[600];
		FILE *f;

		snprintf(path, sizeof(path), "%s.%d", report, rank);
		f = fopen(path, "w");
		if (f != NULL) {
			fprintf(f, "%d\n", a.read_files);
			fclose(f);
		}
	}
	while (a.step < run->steps) {
		copus_step_begin(ctx);
		if (a.step == run->signal_at && rank == run->signal_rank)
			raise(SIGUSR1);
		for (int l = a.first; l < a.first + a.n; l++)
			a.w[l] = a.w[l] * 0.5 + (double)(a.step + 1) + l;
		a.step++;
		if (copus_step_end(ctx, 16, 0) != COPUS_OK)
			_exit(22);
	}
	for (int l = a.first; l < a.first + a.n; l++)
		if (a.w[l] != layer_value(l, a.step))
			_exit(25);
	copus_finalize(ctx);
	_exit(0);
}

/* One rank's training loop; the exit status tells the parent what happened. */
static void rank_main(const struct run *run, struct star *s, int rank,
		      const char *report)
{
	copus_config c = base_config();
	struct app a = { 0 };
	copus_ctx *ctx;
	copus_job_info in;
	char env[32];
	FILE *f;
	int rc;

	s->rank = rank;
	/* Keep only this rank's ends of the pipes. */
	for (int r = 1; r < s->world; r++) {
		if (rank == 0) {
			close(s->up[r][1]);
			close(s->down[r][0]);
		} else {
			if (r != rank) {
				close(s->up[r][1]);
				close(s->down[r][0]);
			}
			close(s->up[r][0]);
			close(s->down[r][1]);
		}
	}
	if (run->layered)
		layered_main(run, s, rank, report);
	snprintf(env, sizeof(env), "%d", run->restart);
	setenv("SLURM_RESTART_COUNT", env, 1);
	setenv("COPUS_HINTS", "0", 1);
	c.world = run->world;
	c.rank = rank;
	c.ckpt_dir = tmpdir;
	c.save = app_save;
	c.load = app_load;
	c.cb_arg = &a;
	c.agree = star_agree;
	c.comm_arg = s;
	c.no_signal_handler = 0;
	c.ckpt_interval = run->ckpt_interval;
	c.save_all_ranks = run->save_all;
	if (run->distinct)
		c.prior = (copus_perf_params){ 0.02, 0.001, 0.1, 0.01, 0.05,
					       0.005, 1.5 };
	if (run->pipeline > 0)
		c.pipeline_degree = run->pipeline;
	if (run->rank_state)
		a.w = 1000.0 * rank;
	a.crash_on_save = rank == 0 && run->crash_on_save;
	a.fail_on_save = rank == 0 && run->fail_on_save;
	if (copus_init(&c, &ctx) != COPUS_OK)
		_exit(20);
	copus_info(ctx, &in);
	if (in.restored && in.step != a.step)
		_exit(21);
	if (run->leftovers_after_init) {
		/* A crash of an earlier attempt, as seen by this run. */
		char path[512];

		snprintf(path, sizeof(path), "%s/ckpt-6.r%d", tmpdir, rank);
		if ((f = fopen(path, "w")) == NULL || fclose(f) != 0)
			_exit(28);
		snprintf(path, sizeof(path), "%s/ckpt-7.r%d.tmp", tmpdir, rank);
		if ((f = fopen(path, "w")) == NULL || fclose(f) != 0)
			_exit(28);
	}
	while (a.step < run->steps) {
		copus_step_begin(ctx);
		if (a.step == run->signal_at && rank == run->signal_rank)
			raise(SIGUSR1);
		app_step(&a);
		if (run->distinct) {
			/* Each rank sees its own noise and its own speed. */
			spin(0.001 * (rank + 1));
			/* |G|^2 = 1, tr(Sigma) = 200 or 400, batches 16, 32. */
			copus_grad_local(ctx, 1.0 + 200.0 * (rank + 1) / 16);
			copus_grad_total(ctx, 1.0 + 200.0 * (rank + 1) / 32);
		}
		if (run->fold) {
			double v[COPUS_AGREE_LEN];

			if (copus_agree_pack(ctx, v, COPUS_AGREE_LEN) != COPUS_OK ||
			    star_sum(s, v, COPUS_AGREE_LEN) != 0 ||
			    copus_agree_unpack(ctx, v, COPUS_AGREE_LEN) !=
				    COPUS_OK)
				_exit(26);
		}
		/* A failed rescale checkpoint is logged; the step succeeds. */
		rc = copus_step_end(ctx, 16, 0);
		if (rc != COPUS_OK)
			_exit(22);
		if (a.step == run->checkpoint_at &&
		    copus_checkpoint(ctx) != COPUS_OK)
			_exit(23);
		if (run->step_us > 0)
			usleep((useconds_t)run->step_us);
		/* A node failure: no checkpoint, no goodbye. */
		if (run->die_at > 0 && a.step == run->die_at)
			_exit(31);
	}
	copus_info(ctx, &in);
	/* Folded: one agreement of the runtime's own, at init. */
	if (run->fold && s->agree_calls != 1)
		_exit(27);
	/* Each rank's own state went through the checkpoints intact. */
	if (run->rank_state && a.w != expected_w_from(1000.0 * rank, a.step))
		_exit(25);
	if (run->plans != NULL) {
		copus_plan p;
		char path[512];

		snprintf(path, sizeof(path), "%s.%d", run->plans, rank);
		f = fopen(path, "w");
		if (f == NULL || copus_plan_get(ctx, &p) != COPUS_OK)
			_exit(24);
		fprintf(f, "%.17g %d %d %.17g %.17g\n", p.batch, p.local,
			p.accum_steps, p.lr_gain, p.efficiency);
		fclose(f);
	}
	if (report != NULL && rank == 0) {
		f = fopen(report, "w");
		if (f != NULL) {
			fprintf(f, "%lld %.17g %d %d\n", (long long)in.step, a.w,
				a.loads, in.restored);
			fclose(f);
		}
	}
	copus_finalize(ctx);
	_exit(0);
}

/* Fork the ranks of a run; their exit statuses in status[]. */
void launch(const struct run *run, int *status, const char *report)
{
	struct star s = { .world = run->world };
	pid_t pids[MAX_RANKS];

	for (int r = 1; r < run->world; r++) {
		CU_ASSERT_EQUAL_FATAL(pipe(s.up[r]), 0);
		CU_ASSERT_EQUAL_FATAL(pipe(s.down[r]), 0);
	}
	fflush(NULL);
	for (int r = 0; r < run->world; r++) {
		pids[r] = fork();
		CU_ASSERT_FATAL(pids[r] >= 0);
		if (pids[r] == 0)
			rank_main(run, &s, r, report);
	}
	for (int r = 1; r < run->world; r++) {
		close(s.up[r][0]);
		close(s.up[r][1]);
		close(s.down[r][0]);
		close(s.down[r][1]);
	}
	for (int r = 0; r < run->world; r++) {
		int st = 0;
		waitpid(pids[r], &st, 0);
		status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

int64_t manifest_step(void)
{
	char path[512], buf[8192];
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/copus.manifest", tmpdir);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strstr(buf, "\"step\":");
	return p != NULL ? atoll(p + 7) : -2;
}

void read_report(const char *report, int64_t *step, double *w,
			int *loads, int *restored)
{
	long long s = -1;
	FILE *f = fopen(report, "r");

	*w = NAN;
	*loads = *restored = -1;
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fscanf(f, "%lld %lg %d %d", &s, w, loads, restored), 4);
	fclose(f);
	*step = s;
}

