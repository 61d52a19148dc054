/*
 * copus-trainer: a training job stand-in linked with libcopus.
 *
 * It does no arithmetic on a real model; it sleeps, for every step, the time
 * the fitted throughput model of a real application predicts for its batch
 * on the GPUs Slurm gave it, and hands libcopus the gradient statistics such
 * an application would measure, with a gradient noise scale that grows as
 * training progresses. Everything else is libcopus as a real job uses it:
 * the measured step times, the batch plan, the hints to sched/copus, the
 * checkpoint on a rescale request and the resume after the requeue. It exits
 * 0 when its progress reaches the target, 75 after a rescale checkpoint
 * (libcopus), 2 on a bad argument, 1 on another error.
 *
 * Run "copus-trainer --help" for the options.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <copus/copus.h>

#include "profile.h"

#define PROG "copus-trainer"
#define MAX_TYPES 8

/*
 * Per application: the fitted throughput parameters on a T4 and on an A100,
 * the initial (tuned) batch, the batch and micro-batch ranges, and the
 * gradient noise scale phi = M0 var / |G|^2 at the start and its growth by
 * the end of training.
 *
 * Where they come from: the T4 parameters are copus_fit() (core/fit.c) on
 * the Pollux traces measured on T4 GPUs (shared data
 * pollux/traces/APP/placements.csv, step time minus sync time as the
 * compute time); the A100 ones the same fit on Sia's
 * sia/traces/APP/placements-dgx-ext.csv. Batch and micro-batch ranges are
 * those of the traces' validation runs and placement tables. phi0 and the
 * growth are read off the first and last epochs of the smallest-batch
 * validation run (grad_var and grad_sqr); the growth is capped at 100 so
 * that a short demo target still shows the shape. They are inputs of a
 * stand-in, not measurements of this machine.
 */
struct app {
	const char *name;
	copus_perf_params t4, a100;
	double init_batch, max_batch;
	int min_local, max_local;
	double phi0, growth;
	double target; /* progress of a full run (epochs x steps at M0) */
};

static const struct app apps[] = {
	{ "cifar10",
	  { 0.01733, 0.0007018, 0.1211, 0.002393, 0.0316, 0.001011, 2.0 },
	  { 0.02448, 8.716e-05, 0.01423, 0.0007984, 0.01349, 0.001448, 2.61 },
	  128, 4096, 32, 1024, 72, 100, 39063 },
	{ "imagenet",
	  { 0.06445, 0.004474, 0.299, 0.005552, 0.07675, 0.0007081, 2.49 },
	  { 0.09402, 0.0008458, 0.007204, 0.001219, 0.01121, 0.00116, 1.0 },
	  200, 12800, 20, 200, 928, 15.5, 576526 },
	{ "bert",
	  { 0.1692, 0.0586, 1.352, 0.01425, 0.2871, 0.01118, 1.9 },
	  { 0.09728, 0.004746, 0.0352, 0.003392, 0.03115, 0.005708, 1.58 },
	  12, 384, 4, 12, 423, 2.66, 14774 },
	{ "deepspeech2",
	  { 0.3041, 0.02423, 0.3778, 0.0285, 0.087, 0.00186, 1.43 },
	  { 0.4306, 0.01354, 0.2321, 0.01161, 0.1619, 0.01538, 1.88 },
	  20, 640, 10, 80, 10, 100, 28536 },
	{ "yolov3",
	  { 0.1827, 0.02595, 0.699, 0.02336, 0.1389, 0.02149, 1.16 },
	  { 0.3128, 0.01833, 0.06339, 0.01703, 0.09152, 0.02284, 1.0 },
	  8, 512, 4, 16, 1, 100, 103444 },
};

struct typed_perf {
	char type[COPUS_HINT_TYPE_LEN];
	copus_perf_params p;
};

struct opts {
	const struct app *app;
	struct typed_perf perf[MAX_TYPES];
	int n_perf;
	bool have_default_perf;
	copus_perf_params default_perf;
	const char *gpu_type;
	double init_batch, max_batch;
	int min_local, max_local;
	double target;
	double phi0, growth;
	double speedup;
	const char *ckpt_dir;
	double ckpt_interval;
	int gpus, nodes;
	long print_every;
	long max_steps;
	unsigned seed;
	/* --profile: the truth is copus-sim's job of this model (profile.c). */
	const char *profile;
	double fixed_batch; /* > 0: trains at this total batch (rigid) */
	bool stamp;         /* prints the wall-clock time of its first step */
};

/* What a checkpoint holds and what the save callback reads. */
struct state {
	copus_ctx *ctx;
	int64_t step;
	double progress;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"  --app NAME          cifar10 (default), imagenet, bert, deepspeech2, yolov3\n"
		"  --perf [TYPE=]A_C,B_C,A_N,B_N,A_R,B_R,GAMMA\n"
		"                      the true throughput parameters (Pollux's model), for\n"
		"                      one GPU type or all; repeatable\n"
		"  --gpu-type NAME     the GPU type it runs on (default $COPUS_GPU_TYPE;\n"
		"                      t4 unless the app's table has the type)\n"
		"  --batch M0          initial (tuned) total batch\n"
		"  --max-batch M       largest total batch\n"
		"  --local MIN-MAX     micro-batch range per GPU\n"
		"  --target P          progress (steps at M0) at which it ends\n"
		"  --noise PHI0,GROWTH gradient noise scale at the start, and the factor\n"
		"                      by which it grows until the target\n"
		"  --speedup X         sleep the modelled step time divided by X (default 1)\n"
		"  --checkpoint DIR    checkpoint directory (default $COPUS_CKPT_DIR)\n"
		"  --checkpoint-interval S\n"
		"                      a checkpoint every S seconds, so that a node\n"
		"                      failure loses at most S seconds of training\n"
		"                      (default $COPUS_CKPT_INTERVAL, or none)\n"
		"  --gpus N --nodes N  the allocation (default: from Slurm's environment)\n"
		"  --print-every N     a progress line every N steps (default 10)\n"
		"  --max-steps N       stop, exit 0, after N steps of this run\n"
		"  --seed N            random seed of the gradient noise\n"
		"  --profile DIR/MODEL train as copus-sim's job of MODEL does: step and\n"
		"                      sync times from the profile's tables of its GPU\n"
		"                      type, gradient statistics from its validation\n"
		"                      runs, the target where copus-sim ends the job\n"
		"                      (replaces --app, --perf and --noise)\n"
		"  --fixed-batch B     train at total batch B whatever the plan (a rigid\n"
		"                      job, as copus-sim runs one under a policy that\n"
		"                      does not pick batches); needs --profile\n"
		"  --stamp             print \"first step at T\" (T: seconds since the\n"
		"                      epoch) after the first step of every run\n");
}

static int bad(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, PROG ": %s: '%s' %s\n", opt, val, why);
	return 2;
}

/* A finite number in [lo, hi], the whole string. */
static bool parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < lo ||
	    v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* Seven comma-separated parameters, as copus_perf_params orders them. */
static bool parse_perf(const char *s, copus_perf_params *p)
{
	double v[7];
	char buf[256], *tok, *save = NULL;
	int n = 0;

	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == 7 || !parse_num(tok, 0, 1e4, &v[n]))
			return false;
		n++;
	}
	if (n != 7 || v[0] <= 0 || v[1] <= 0 || v[6] < 1 || v[6] > 10)
		return false;
	*p = (copus_perf_params){ v[0], v[1], v[2], v[3], v[4], v[5], v[6] };
	return true;
}

static bool valid_type(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n >= COPUS_HINT_TYPE_LEN)
		return false;
	return strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789_.-") == n;
}

/* The long options' ids (getopt_long's values). */
enum opt_id {
	O_APP = 256, O_PERF, O_TYPE, O_BATCH, O_MAXB, O_LOCAL, O_TARGET,
	O_NOISE, O_SPEED, O_CKPT, O_CKPT_INT, O_GPUS, O_NODES, O_PRINT, O_MAXS,
	O_SEED, O_PROFILE, O_FIXED, O_STAMP, O_HELP
};

/*
 * The values given for what the app also sets (0: not given), kept apart
 * so that explicit values win over the app's, whatever the order.
 */
struct explicit_vals {
	double batch, maxb, target, phi0, growth;
	long lmin, lmax;
};

/* --perf [TYPE=]PARAMS: one GPU type's true parameters, or every type's. */
static int parse_perf_opt(char *arg, struct opts *o)
{
	char *eq = strchr(arg, '=');

	if (eq == NULL) {
		if (!parse_perf(arg, &o->default_perf))
			goto bad_perf;
		o->have_default_perf = true;
		return 0;
	}
	if (o->n_perf == MAX_TYPES)
		return bad("--perf", arg, "is one GPU type too many (at most 8)");
	*eq = '\0';
	if (!valid_type(arg)) {
		*eq = '=';
		return bad("--perf", arg,
			   "does not start with a GPU type name (1..15 of A-Z a-z 0-9 _ . -)");
	}
	snprintf(o->perf[o->n_perf].type, sizeof(o->perf[0].type), "%s", arg);
	*eq = '=';
	if (!parse_perf(eq + 1, &o->perf[o->n_perf].p))
		goto bad_perf;
	o->n_perf++;
	return 0;
bad_perf:
	return bad("--perf", arg,
		   "is not seven comma-separated numbers a_c,b_c,a_n,b_n,a_r,b_r,gamma (a_c, b_c > 0, others >= 0, 1 <= gamma <= 10)");
}

/*
 * Option c with its value arg if it says what is trained (the app, its
 * throughput, batches, target and noise, or the profile): 0 when taken, 2
 * on a bad value (the message printed), -1 when c is not one of these.
 */
static int parse_model_opt(int c, char *arg, struct opts *o,
			   struct explicit_vals *x)
{
	char *dash, *comma;

	switch (c) {
	case O_APP:
		o->app = NULL;
		for (size_t i = 0; i < sizeof(apps) / sizeof(*apps); i++)
			if (strcmp(apps[i].name, arg) == 0)
				o->app = &apps[i];
		if (o->app == NULL)
			return bad("--app", arg,
				   "is not one of cifar10, imagenet, bert, deepspeech2, yolov3");
		return 0;
	case O_PERF:
		return parse_perf_opt(arg, o);
	case O_TYPE:
		if (!valid_type(arg))
			return bad("--gpu-type", arg,
				   "is not a GPU type name (1..15 of A-Z a-z 0-9 _ . -)");
		o->gpu_type = arg;
		return 0;
	case O_BATCH:
		if (!parse_num(arg, 1, 1e7, &x->batch))
			return bad("--batch", arg,
				   "is not a batch size between 1 and 1e7");
		return 0;
	case O_MAXB:
		if (!parse_num(arg, 1, 1e7, &x->maxb))
			return bad("--max-batch", arg,
				   "is not a batch size between 1 and 1e7");
		return 0;
	case O_LOCAL:
		dash = strchr(arg, '-');
		if (dash == NULL)
			return bad("--local", arg,
				   "is not MIN-MAX (micro-batch per GPU)");
		*dash = '\0';
		if (!parse_int(arg, 1, 1000000, &x->lmin) ||
		    !parse_int(dash + 1, 1, 1000000, &x->lmax) ||
		    x->lmax < x->lmin) {
			*dash = '-';
			return bad("--local", arg,
				   "is not MIN-MAX with 1 <= MIN <= MAX <= 1000000");
		}
		*dash = '-';
		return 0;
	case O_TARGET:
		if (!parse_num(arg, 1e-3, 1e15, &x->target))
			return bad("--target", arg,
				   "is not a progress between 0.001 and 1e15");
		return 0;
	case O_NOISE:
		comma = strchr(arg, ',');
		if (comma == NULL)
			return bad("--noise", arg, "is not PHI0,GROWTH");
		*comma = '\0';
		if (!parse_num(arg, 1e-6, 1e12, &x->phi0) ||
		    !parse_num(comma + 1, 1, 1e6, &x->growth)) {
			*comma = ',';
			return bad("--noise", arg,
				   "is not PHI0,GROWTH with PHI0 > 0 and GROWTH >= 1");
		}
		*comma = ',';
		return 0;
	case O_PROFILE:
		if (*arg == '\0')
			return bad("--profile", arg, "is not DIR/MODEL");
		o->profile = arg;
		return 0;
	case O_FIXED:
		if (!parse_num(arg, 1, 1e9, &o->fixed_batch))
			return bad("--fixed-batch", arg,
				   "is not a batch size (1 or more)");
		return 0;
	}
	return -1;
}

/*
 * Option c with its value arg if it says how the run goes (its speed,
 * checkpoints, allocation, output, length and seed): 0 when taken, 2 on a
 * bad value (the message printed), -1 when c is not one of these.
 */
static int parse_run_opt(int c, char *arg, struct opts *o)
{
	long v;

	switch (c) {
	case O_SPEED:
		if (!parse_num(arg, 1e-3, 1e6, &o->speedup))
			return bad("--speedup", arg,
				   "is not a factor between 0.001 and 1e6");
		return 0;
	case O_CKPT:
		if (*arg == '\0')
			return bad("--checkpoint", arg,
				   "is not a directory name");
		o->ckpt_dir = arg;
		return 0;
	case O_CKPT_INT:
		if (!parse_num(arg, 1e-3, 30 * 86400.0, &o->ckpt_interval))
			return bad("--checkpoint-interval", arg,
				   "is not a number of seconds between 0.001 and 30 days");
		return 0;
	case O_GPUS:
		if (!parse_int(arg, 1, 4096, &v))
			return bad("--gpus", arg,
				   "is not a GPU count between 1 and 4096");
		o->gpus = (int)v;
		return 0;
	case O_NODES:
		if (!parse_int(arg, 1, 4096, &v))
			return bad("--nodes", arg,
				   "is not a node count between 1 and 4096");
		o->nodes = (int)v;
		return 0;
	case O_PRINT:
		if (!parse_int(arg, 1, 1000000000, &o->print_every))
			return bad("--print-every", arg,
				   "is not a positive step count");
		return 0;
	case O_MAXS:
		if (!parse_int(arg, 1, 1000000000000L, &o->max_steps))
			return bad("--max-steps", arg,
				   "is not a positive step count");
		return 0;
	case O_SEED:
		if (!parse_int(arg, 0, 4294967295L, &v))
			return bad("--seed", arg,
				   "is not a number between 0 and 4294967295");
		o->seed = (unsigned)v;
		return 0;
	case O_STAMP:
		o->stamp = true;
		return 0;
	}
	return -1;
}

/*
 * What the options leave to the app (its batches, micro-batches, target
 * and noise) and the checks across options: 0, or 2 with the message
 * printed.
 */
static int finish_args(struct opts *o, const struct explicit_vals *x)
{
	if (o->fixed_batch > 0 && o->profile == NULL)
		return bad("--fixed-batch", "", "needs --profile");
	o->init_batch = x->batch > 0 ? x->batch : o->app->init_batch;
	o->max_batch = x->maxb > 0 ? x->maxb
				   : fmax(o->app->max_batch, o->init_batch);
	o->min_local = x->lmin > 0 ? (int)x->lmin : o->app->min_local;
	o->max_local = x->lmax > 0 ? (int)x->lmax : o->app->max_local;
	o->target = x->target > 0 ? x->target : o->app->target;
	o->phi0 = x->phi0 > 0 ? x->phi0 : o->app->phi0;
	o->growth = x->growth > 0 ? x->growth : o->app->growth;
	if (o->max_batch < o->init_batch) {
		char b[64];
		snprintf(b, sizeof(b), "%g", o->max_batch);
		return bad("--max-batch", b, "is smaller than the initial batch");
	}
	return 0;
}

/*
 * The command line into o: the defaults, each option in turn (--help
 * prints the usage and exits 0), then what the app fills in. 0, or 2 on a
 * bad argument with the message printed.
 */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "app", required_argument, NULL, O_APP },
		{ "perf", required_argument, NULL, O_PERF },
		{ "gpu-type", required_argument, NULL, O_TYPE },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "max-batch", required_argument, NULL, O_MAXB },
		{ "local", required_argument, NULL, O_LOCAL },
		{ "target", required_argument, NULL, O_TARGET },
		{ "noise", required_argument, NULL, O_NOISE },
		{ "speedup", required_argument, NULL, O_SPEED },
		{ "checkpoint", required_argument, NULL, O_CKPT },
		{ "checkpoint-interval", required_argument, NULL, O_CKPT_INT },
		{ "gpus", required_argument, NULL, O_GPUS },
		{ "nodes", required_argument, NULL, O_NODES },
		{ "print-every", required_argument, NULL, O_PRINT },
		{ "max-steps", required_argument, NULL, O_MAXS },
		{ "seed", required_argument, NULL, O_SEED },
		{ "profile", required_argument, NULL, O_PROFILE },
		{ "fixed-batch", required_argument, NULL, O_FIXED },
		{ "stamp", no_argument, NULL, O_STAMP },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct explicit_vals x = { 0 };
	int c, rc;

	o->app = &apps[0];
	o->speedup = 1;
	o->print_every = 10;
	o->seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if ((rc = parse_model_opt(c, optarg, o, &x)) >= 0 ||
		    (rc = parse_run_opt(c, optarg, o)) >= 0) {
			if (rc != 0)
				return rc;
			continue;
		}
		if (c == O_HELP) {
			usage(stdout);
			exit(0);
		}
		if (optopt != 0)
			fprintf(stderr, PROG ": option '%s' needs a value\n",
				argv[optind - 1]);
		else
			fprintf(stderr, PROG ": unknown option '%s'\n",
				argv[optind - 1]);
		usage(stderr);
		return 2;
	}
	if (optind < argc)
		return bad("argument", argv[optind],
			   "is not an option (copus-trainer takes no operands)");
	return finish_args(o, &x);
}

/* The true parameters on this GPU type: --perf, then the app's table. */
static copus_perf_params true_perf(const struct opts *o, const char *type)
{
	for (int i = 0; i < o->n_perf; i++)
		if (strcmp(o->perf[i].type, type) == 0)
			return o->perf[i].p;
	if (o->have_default_perf)
		return o->default_perf;
	if (strcmp(type, "a100") == 0)
		return o->app->a100;
	return o->app->t4;
}

/* A standard normal draw (Box-Muller on rand_r). */
static double gauss(unsigned *seed)
{
	double u = (rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);
	double v = (rand_r(seed) + 1.0) / ((double)RAND_MAX + 2.0);

	return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/*
 * The squared norm of a mean of gradients whose noise has variance
 * var * M0 / samples: |G|^2 plus a chi-square-like fluctuation of the noise
 * (64 effective dimensions), never negative.
 */
static double grad_sqnorm(double sqr, double var, double m0, double samples,
			  unsigned *seed)
{
	double noise = var * m0 / samples;
	double x = noise * (1 + gauss(seed) * sqrt(2.0 / 64));

	return fmax(sqr + x, 1e-12);
}

/*
 * The dot product of two consecutive steps' gradients, each the mean over
 * samples of noise var * M0 / samples around the same |G|^2 (the model
 * moves little in one step): |G|^2 plus the fluctuations of G.(n1 + n2)
 * and n1.n2 over 64 effective dimensions.
 */
static double grad_dot(double sqr, double var, double m0, double samples,
		       unsigned *seed)
{
	double noise = var * m0 / samples;

	return sqr + sqrt(2 * sqr * noise / 64) * gauss(seed) +
	       noise / 8 * gauss(seed);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * Sleep s seconds of modelled time. The sleeps run to deadlines on one
 * clock (the sum of every modelled time since the run started), so the
 * loop's own cost and a late wake-up on a busy machine are made up by the
 * next steps instead of adding up: at a large --speedup a step's sleep is a
 * millisecond, as long as that cost. A sleep still lasts at least half its
 * time, so that a delay (the runtime's refit after a new batch size, a busy
 * machine) is made up over the next steps and no step measures near zero,
 * which no GPU does. A signal does not shorten a sleep.
 */
static double due = -1;

static void sleep_for(double s)
{
	struct timespec d;
	double t = now(), until;

	if (due < 0)
		due = t;
	if (!(s > 0))
		return;
	due += s;
	until = fmax(due, t + s / 2);
	d.tv_sec = (time_t)until;
	d.tv_nsec = (long)((until - (double)d.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL) == EINTR)
		;
}

/* Rescale decisions by several ranks: this one process stands for all. */
static int agree_self(void *arg, int64_t *values, int n)
{
	(void)arg;
	(void)values;
	(void)n;
	return 0;
}

static int save_cb(void *arg, const char *path, int64_t step)
{
	struct state *st = arg;
	copus_job_info in;
	FILE *f;

	if (copus_info(st->ctx, &in) != COPUS_OK)
		return 1;
	f = fopen(path, "w");
	if (f == NULL)
		return 1;
	fprintf(f, "copus-trainer 1\nstep %lld\nprogress %.17g\n",
		(long long)step, in.progress);
	return fclose(f) == 0 ? 0 : 1;
}

static int load_cb(void *arg, const char *path, int64_t step)
{
	struct state *st = arg;
	long long s;
	double p;
	int ver, rc = 1;
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		fprintf(stderr, PROG ": checkpoint %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	if (fscanf(f, "copus-trainer %d step %lld progress %lg", &ver, &s,
		   &p) != 3 || ver != 1 || s < 0 || !(p >= 0)) {
		fprintf(stderr, PROG ": checkpoint %s: not a copus-trainer checkpoint\n",
			path);
	} else if (s != step) {
		fprintf(stderr, PROG ": checkpoint %s: holds step %lld, the manifest says %lld\n",
			path, s, (long long)step);
	} else {
		st->step = s;
		st->progress = p;
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* GPUs per node from Slurm's environment, or the visible devices. */
static int env_gpus_per_node(void)
{
	const char *s = getenv("SLURM_GPUS_ON_NODE");
	long v;

	if (s != NULL && parse_int(s, 1, 4096, &v))
		return (int)v;
	s = getenv("CUDA_VISIBLE_DEVICES");
	if (s != NULL && *s != '\0' && strcmp(s, "NoDevFiles") != 0) {
		int n = 1;
		for (; *s; s++)
			n += *s == ',';
		return n;
	}
	return 1;
}

static int env_nodes(void)
{
	const char *s = getenv("SLURM_JOB_NUM_NODES");
	long v;

	if (s == NULL)
		s = getenv("SLURM_NNODES");
	if (s != NULL && parse_int(s, 1, 4096, &v))
		return (int)v;
	return 1;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct state st = { 0 };
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	copus_job_info in;
	copus_perf_params perf;
	copus_ctx *ctx = NULL;
	struct trainer_profile *prof = NULL;
	const char *type;
	double t0, var = 1.0;
	bool first = true;
	long run_steps = 0;
	int rc, gpus, nodes, first_node;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = parse_args(argc, argv, &o);
	if (rc != 0)
		return rc;
	type = o.gpu_type != NULL ? o.gpu_type : getenv("COPUS_GPU_TYPE");
	if (type == NULL || *type == '\0')
		type = "t4";
	if (!valid_type(type))
		return bad("COPUS_GPU_TYPE", type,
			   "is not a GPU type name (1..15 of A-Z a-z 0-9 _ . -)");
	perf = true_perf(&o, type);
	if (o.profile != NULL) {
		char err[512];

		if (trainer_profile_load(&prof, o.profile, type, err,
					 sizeof(err)) != 0) {
			fprintf(stderr, PROG ": %s\n", err);
			return 2;
		}
		trainer_profile_limits(prof, &o.init_batch, &o.max_batch,
				       &o.min_local, &o.max_local, &o.target);
	}
	nodes = o.nodes > 0 ? o.nodes : env_nodes();
	/* The GPUs of the node this runs on (the job's first). */
	first_node = env_gpus_per_node();
	gpus = o.gpus > 0 ? o.gpus : first_node * nodes;
	if (gpus < nodes) {
		fprintf(stderr, PROG ": %d GPUs on %d nodes: fewer GPUs than nodes\n",
			gpus, nodes);
		return 2;
	}

	/*
	 * One process drives every GPU of the allocation: it is rank 0 of a
	 * world of one replica per GPU, and agrees with itself.
	 */
	cfg.limits = (copus_batch_limits){ o.init_batch, o.max_batch,
					   o.min_local, o.max_local, true };
	cfg.target_progress = o.target;
	cfg.rank = 0;
	cfg.local_rank = 0;
	cfg.world = gpus;
	cfg.nodes = nodes;
	cfg.gpus_per_node = (gpus + nodes - 1) / nodes;
	cfg.gpu_type = type;
	cfg.ckpt_dir = o.ckpt_dir;
	cfg.ckpt_interval = o.ckpt_interval;
	cfg.save = save_cb;
	cfg.load = load_cb;
	cfg.cb_arg = &st;
	cfg.agree = agree_self;
	rc = copus_init(&cfg, &ctx);
	if (rc != COPUS_OK) {
		fprintf(stderr, PROG ": copus_init: %s\n", copus_strerror(rc));
		return 1;
	}
	st.ctx = ctx;
	copus_info(ctx, &in);
	printf("%s job %u restart %d: %s on %d %s GPUs, %d nodes; target progress %g\n",
	       in.restored ? "resumed" : "started", in.job_id,
	       in.restart_count, o.profile != NULL ? trainer_profile_name(prof) : o.app->name,
	       gpus, type, nodes, o.target);
	if (in.restored)
		printf("restored step %lld progress %.1f\n", (long long)in.step,
		       in.progress);
	t0 = now();
	for (;;) {
		copus_plan plan;
		copus_step_times t;
		copus_grad_stats g;
		double phi, sqr, frac, grad, rest, jitter;
		int replicas = gpus, accum, local, count;

		copus_info(ctx, &in);
		if (in.progress >= o.target)
			break;
		if (o.max_steps > 0 && run_steps >= o.max_steps)
			break;
		rc = copus_plan_get(ctx, &plan);
		if (rc != COPUS_OK) {
			fprintf(stderr, PROG ": plan: %s\n", copus_errmsg(ctx));
			goto fail;
		}
		local = plan.local;
		accum = plan.accum_steps;
		if (o.fixed_batch > 0)
			trainer_profile_split(prof, o.fixed_batch, replicas,
					      &local, &accum);
		/* Steps vary by a few per cent, as on real GPUs. */
		jitter = fmax(0.8, 1 + 0.03 * gauss(&o.seed));
		if (o.profile != NULL) {
			if (trainer_profile_step(prof, nodes, replicas,
						 first_node, local, accum,
						 &grad, &rest) != 0) {
				fprintf(stderr, PROG ": step time: %d GPUs on %d nodes at micro-batch %d: not in the profile\n",
					replicas, nodes, local);
				goto fail;
			}
			grad *= jitter;
			rest *= jitter;
			t.iter = (grad + rest) / jitter;
			trainer_profile_grad(prof,
					     (double)replicas * local * (accum + 1),
					     in.progress, &sqr, &var);
		} else {
			rc = copus_step_time(&perf,
					     nodes < replicas ? nodes : replicas,
					     replicas, local, accum, &t);
			if (rc != COPUS_OK) {
				fprintf(stderr, PROG ": step time: %s\n",
					copus_strerror(rc));
				goto fail;
			}
			grad = (accum + 1) * t.grad * jitter;
			rest = fmax(t.iter * jitter - grad, 0);

			/* The noise scale grows geometrically with progress. */
			frac = fmin(in.progress / o.target, 1.0);
			phi = o.phi0 * pow(o.growth, frac);
			sqr = o.init_batch * var / phi;
		}

		copus_step_begin(ctx);
		sleep_for(grad / o.speedup);
		count = replicas * (accum + 1);
		for (int k = 0; k <= accum; k++) {
			/* The mean over replicas of one micro-batch each. */
			double x = 0;
			for (int r = 0; r < replicas; r++)
				x += grad_sqnorm(sqr, var, o.init_batch, local,
						 &o.seed);
			copus_grad_local(ctx, x / replicas);
		}
		copus_sync_begin(ctx);
		sleep_for(rest / o.speedup);
		copus_sync_end(ctx);
		copus_grad_total(ctx, grad_sqnorm(sqr, var, o.init_batch,
						  (double)local * count,
						  &o.seed));
		/* One gradient a step: its noise shows against the last
		 * step's, as an application gives it (copus_grad_dot). */
		if (count == 1)
			copus_grad_dot(ctx, grad_dot(sqr, var, o.init_batch,
						     local, &o.seed));
		/* On a rescale request this checkpoints and exits (75). */
		rc = copus_step_end(ctx, local, accum);
		if (rc != COPUS_OK) {
			fprintf(stderr, PROG ": step: %s\n", copus_errmsg(ctx));
			goto fail;
		}
		run_steps++;
		if (first && o.stamp) {
			struct timespec w;

			clock_gettime(CLOCK_REALTIME, &w);
			printf("first step at %.3f\n",
			       (double)w.tv_sec + 1e-9 * (double)w.tv_nsec);
		}
		first = false;
		if (run_steps % o.print_every == 0) {
			copus_info(ctx, &in);
			if (copus_grad_stats_get(ctx, &g) != COPUS_OK)
				g = (copus_grad_stats){ 0, 0 };
			printf("step %lld progress %.1f/%g (%.0f%%) gpus %d nodes %d %s batch %.0f (%d x %d x %d) step %.3fs eff %.2f phi %.0f\n",
			       (long long)in.step, in.progress, o.target,
			       100 * fmin(in.progress / o.target, 1.0), gpus,
			       nodes, type, (double)replicas * local * (accum + 1), replicas, local,
			       accum + 1, t.iter * jitter / o.speedup,
			       plan.efficiency,
			       g.sqr > 0 ? o.init_batch * g.var / g.sqr : 0);
		}
	}
	copus_info(ctx, &in);
	printf("%s step %lld progress %.1f after %.1f s in this run\n",
	       in.progress >= o.target ? "done" : "stopped",
	       (long long)in.step, in.progress, now() - t0);
	copus_finalize(ctx);
	trainer_profile_free(prof);
	return 0;
fail:
	copus_finalize(ctx);
	trainer_profile_free(prof);
	return 1;
}
