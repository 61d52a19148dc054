/*
 * copus-emulate: a training job that does no arithmetic but behaves like a
 * measured one. It links libcopus as a real job does: it sleeps the step
 * time that a goodput model fitted to a Pollux profile predicts for its
 * allocation, batch and accumulation (divided by --speedup), reports
 * gradient norms whose noise follows the profile's validation run (the
 * noise scale grows as training progresses), publishes hints, checkpoints
 * on a rescale request and resumes from the checkpoint after a requeue, and
 * exits 0 when it reaches its target progress.
 *
 *   copus-emulate --profile DIR [--target ITER | --epochs N] [options]
 *
 * One process plays every GPU of the allocation (the data-parallel replicas
 * are emulated, not run), so a job needs one task however many GPUs it has.
 * See usage() for the options; a bad argument exits with status 2.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <copus/copus.h>

#define PROG "copus-emulate"
/* Dimensions of the emulated gradient vector. */
#define GRAD_DIMS 32
/* Rows of a validation table kept (Pollux's have at most about 100). */
#define MAX_EPOCHS 4096
#define MAX_TYPES 8

/* The measured behaviour the job imitates. */
struct profile {
	copus_perf_params perf;		/* the true throughput model */
	double init_batch, max_batch;
	int min_local, max_local;
	int nepochs;			/* rows of the noise table */
	double progress[MAX_EPOCHS];	/* at the end of each epoch */
	double sqr[MAX_EPOCHS], var[MAX_EPOCHS];
};

struct options {
	const char *profile;
	bool have_perf;
	copus_perf_params perf;
	double batch, max_batch;
	int min_local, max_local;
	double target;
	int epochs;
	double speedup;
	int gpus, nodes;
	const char *ckpt_dir;
	long steps;
	uint64_t seed;
	double jitter;
	double report;
	const char *gpu_type;
	int ntypes;
	char type_name[MAX_TYPES][COPUS_HINT_TYPE_LEN];
	double type_factor[MAX_TYPES];
};

/* What the checkpoint holds: libcopus keeps step and progress too. */
struct state {
	int64_t step;
	double progress;
	uint64_t rng;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " --profile DIR [--target ITER | --epochs N] [options]\n"
"  --profile DIR       a Pollux trace directory (placements.csv,\n"
"                      validation-<batch>.csv), e.g. $COPUS_DATA/pollux/traces/cifar10\n"
"  --perf a,b,c,d,e,f,g  throughput parameters (alpha_c, beta_c, alpha_n,\n"
"                      beta_n, alpha_r, beta_r, gamma) instead of fitting\n"
"                      placements.csv\n"
"  --target ITER       progress at which the job ends, in iterations at the\n"
"                      initial batch (default: --epochs 1)\n"
"  --epochs N          the progress of N epochs of the profile's run\n"
"  --batch M0          initial batch (default: the smallest validated)\n"
"  --max-batch M       largest batch (default: the largest validated)\n"
"  --local MIN-MAX     micro-batch bounds (default: placements.csv's)\n"
"  --speedup S         sleep step_time / S (default 1)\n"
"  --gpus K, --nodes N the allocation (default: from Slurm's environment)\n"
"  --gpu-type NAME     GPU type in hints (default $COPUS_GPU_TYPE)\n"
"  --type-speed T=F,.. step time divided by F on GPU type T\n"
"  --ckpt-dir DIR      checkpoint directory (default $COPUS_CKPT_DIR)\n"
"  --steps N           stop after N steps of this run (exit 0)\n"
"  --jitter X          relative noise of the step time (default 0.03)\n"
"  --report SECONDS    seconds between progress lines (default 10)\n"
"  --seed N            random seed (default: the Slurm job id)\n");
}

static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(" PROG " --help for the options)\n");
	exit(2);
}

static double parse_num(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) ||
	    v < lo || v > hi)
		die_usage("%s: '%s' is not a number in [%g, %g]", opt, s, lo,
			  hi);
	return v;
}

static long parse_int(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
		die_usage("%s: '%s' is not an integer in [%ld, %ld]", opt, s,
			  lo, hi);
	return v;
}

static void parse_perf(const char *s, copus_perf_params *p)
{
	double v[7];
	const char *c = s;
	char *end;
	int i;

	for (i = 0; i < 7; i++) {
		errno = 0;
		v[i] = strtod(c, &end);
		if (end == c || errno != 0 || !isfinite(v[i]))
			break;
		c = end;
		if (i < 6 && *c++ != ',')
			break;
	}
	if (i < 7 || *c != '\0')
		die_usage("--perf: '%s' is not seven comma-separated numbers",
			  s);
	*p = (copus_perf_params){ v[0], v[1], v[2], v[3], v[4], v[5], v[6] };
	if (copus_perf_params_check(p) != COPUS_OK)
		die_usage("--perf: '%s' is out of range (times >= 0, "
			  "1 <= gamma <= 10)", s);
}

static void parse_type_speed(const char *s, struct options *o)
{
	char buf[256], *save = NULL, *tok;

	if (strlen(s) >= sizeof(buf))
		die_usage("--type-speed: value too long");
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		size_t l = eq ? (size_t)(eq - tok) : 0;

		if (eq == NULL || l == 0 || l >= COPUS_HINT_TYPE_LEN ||
		    o->ntypes == MAX_TYPES)
			die_usage("--type-speed: '%s' is not TYPE=FACTOR (at "
				  "most %d types)", tok, MAX_TYPES);
		memcpy(o->type_name[o->ntypes], tok, l);
		o->type_name[o->ntypes][l] = '\0';
		o->type_factor[o->ntypes] =
			parse_num("--type-speed", eq + 1, 1e-3, 1e3);
		o->ntypes++;
	}
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "profile", required_argument, NULL, 'p' },
		{ "perf", required_argument, NULL, 'P' },
		{ "target", required_argument, NULL, 't' },
		{ "epochs", required_argument, NULL, 'e' },
		{ "batch", required_argument, NULL, 'b' },
		{ "max-batch", required_argument, NULL, 'B' },
		{ "local", required_argument, NULL, 'l' },
		{ "speedup", required_argument, NULL, 's' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "gpu-type", required_argument, NULL, 'T' },
		{ "type-speed", required_argument, NULL, 'y' },
		{ "ckpt-dir", required_argument, NULL, 'c' },
		{ "steps", required_argument, NULL, 'S' },
		{ "jitter", required_argument, NULL, 'j' },
		{ "report", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->speedup = 1;
	o->jitter = 0.03;
	o->report = 10;
	o->seed = UINT64_MAX;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': o->profile = optarg; break;
		case 'P': parse_perf(optarg, &o->perf); o->have_perf = true; break;
		case 't': o->target = parse_num("--target", optarg, 1e-9, 1e15); break;
		case 'e': o->epochs = (int)parse_int("--epochs", optarg, 1, MAX_EPOCHS); break;
		case 'b': o->batch = parse_num("--batch", optarg, 1, 1e7); break;
		case 'B': o->max_batch = parse_num("--max-batch", optarg, 1, 1e7); break;
		case 'l': {
			char *end;
			long lo = strtol(optarg, &end, 10), hi;

			if (end == optarg || *end != '-')
				die_usage("--local: '%s' is not MIN-MAX", optarg);
			hi = parse_int("--local", end + 1, 1, 1000000);
			if (lo < 1 || lo > hi)
				die_usage("--local: '%s' needs 1 <= MIN <= MAX", optarg);
			o->min_local = (int)lo;
			o->max_local = (int)hi;
			break;
		}
		case 's': o->speedup = parse_num("--speedup", optarg, 1e-3, 1e6); break;
		case 'g': o->gpus = (int)parse_int("--gpus", optarg, 1, 4096); break;
		case 'n': o->nodes = (int)parse_int("--nodes", optarg, 1, 4096); break;
		case 'T': o->gpu_type = optarg; break;
		case 'y': parse_type_speed(optarg, o); break;
		case 'c': o->ckpt_dir = optarg; break;
		case 'S': o->steps = parse_int("--steps", optarg, 1, 1000000000L); break;
		case 'j': o->jitter = parse_num("--jitter", optarg, 0, 1); break;
		case 'r': o->report = parse_num("--report", optarg, 0, 1e6); break;
		case 'R': o->seed = (uint64_t)parse_int("--seed", optarg, 0, 0x7fffffffffffffffL); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (o->profile == NULL)
		die_usage("--profile DIR is required (the noise of the "
			  "gradients comes from its validation run)");
	if (o->target > 0 && o->epochs > 0)
		die_usage("--target and --epochs exclude each other");
	if (o->gpus > 0 && o->nodes > o->gpus)
		die_usage("--nodes %d is more than --gpus %d", o->nodes, o->gpus);
}

/* ---------------------------------------------------------------- CSV */

/*
 * Reads a comma-separated file with a header, calling row() for each data
 * row with the values of the wanted columns (numbers, except column 0 when
 * first_text is set). Errors name file, line, column and value.
 */
typedef int (*row_fn)(void *arg, const char *path, long line,
		      const char *text, const double *v);

static int read_table(const char *path, const char *const *cols, int ncols,
		      bool first_text, row_fn row, void *arg)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL, *save, *tok;
	size_t cap = 0;
	long line = 0;
	int idx[8], rc = -1, hdr_n = 0;

	if (f == NULL) {
		fprintf(stderr, PROG ": %s: cannot open: %s\n", path,
			strerror(errno));
		return -1;
	}
	for (int i = 0; i < ncols; i++)
		idx[i] = -1;
	while (getline(&buf, &cap, f) >= 0) {
		double v[8] = { 0 };
		const char *text = NULL;
		int k = 0, found = 0;

		line++;
		buf[strcspn(buf, "\r\n")] = '\0';
		if (buf[0] == '\0')
			continue;
		for (tok = strtok_r(buf, ",", &save); tok != NULL;
		     tok = strtok_r(NULL, ",", &save), k++) {
			for (int i = 0; i < ncols; i++) {
				if (hdr_n == 0) {
					if (strcmp(tok, cols[i]) == 0)
						idx[i] = k;
					continue;
				}
				if (idx[i] != k)
					continue;
				found++;
				if (i == 0 && first_text) {
					text = tok;
				} else {
					char *end;

					errno = 0;
					v[i] = strtod(tok, &end);
					if (*tok == '\0' || *end != '\0' ||
					    errno != 0 || !isfinite(v[i])) {
						fprintf(stderr, PROG ": %s:%ld: column %s: '%s' is not a finite number\n",
							path, line, cols[i], tok);
						goto out;
					}
				}
			}
		}
		if (hdr_n == 0) {
			hdr_n = k;
			for (int i = 0; i < ncols; i++) {
				if (idx[i] < 0) {
					fprintf(stderr, PROG ": %s:1: no column '%s' in the header\n",
						path, cols[i]);
					goto out;
				}
			}
			continue;
		}
		if (k != hdr_n || found != ncols) {
			fprintf(stderr, PROG ": %s:%ld: %d fields, the header has %d\n",
				path, line, k, hdr_n);
			goto out;
		}
		if (row(arg, path, line, text, v) != 0)
			goto out;
	}
	if (hdr_n == 0) {
		fprintf(stderr, PROG ": %s: empty file (no header)\n", path);
		goto out;
	}
	rc = 0;
out:
	free(buf);
	fclose(f);
	return rc;
}

struct placements {
	copus_observation *obs;
	size_t n, cap;
	int min_local, max_local;
};

static int placement_row(void *arg, const char *path, long line,
			 const char *text, const double *v)
{
	struct placements *p = arg;
	copus_observation *o;
	size_t l = strlen(text);
	int replicas = 0;

	if (l == 0 || l > 16 || strspn(text, "123456789") != l) {
		fprintf(stderr, PROG ": %s:%ld: column placement: '%s' is not a string of GPUs per node (digits 1-9)\n",
			path, line, text);
		return -1;
	}
	for (size_t i = 0; i < l; i++)
		replicas += text[i] - '0';
	if (!(v[1] >= 1 && v[1] <= 1e6) || !(v[2] > 0) || !(v[3] >= 0) ||
	    v[3] > v[2]) {
		fprintf(stderr, PROG ": %s:%ld: local_bsz %g, step_time %g, sync_time %g: expected local_bsz >= 1 and 0 <= sync_time <= step_time > 0\n",
			path, line, v[1], v[2], v[3]);
		return -1;
	}
	if (p->n == p->cap) {
		size_t nc = p->cap ? 2 * p->cap : 64;
		copus_observation *no = realloc(p->obs, nc * sizeof(*no));

		if (no == NULL) {
			fprintf(stderr, PROG ": out of memory\n");
			return -1;
		}
		p->obs = no;
		p->cap = nc;
	}
	o = &p->obs[p->n++];
	o->nodes = (int)l;
	o->replicas = replicas;
	o->local = (int)v[1];
	o->accum_steps = 0;
	o->step_time = v[2];
	o->compute_time = fmax(v[2] - v[3], 1e-6);
	if (p->min_local == 0 || o->local < p->min_local)
		p->min_local = o->local;
	if (o->local > p->max_local)
		p->max_local = o->local;
	return 0;
}

static int valid_row(void *arg, const char *path, long line,
		     const char *text, const double *v)
{
	struct profile *p = arg;
	int i = p->nepochs;

	(void)text;
	if (i == MAX_EPOCHS)
		return 0;
	if (!(v[0] > (i ? p->progress[i - 1] : 0)) || v[1] < 0 || v[2] < 0) {
		fprintf(stderr, PROG ": %s:%ld: progress %g, grad_sqr %g, grad_var %g: progress must grow, the others be >= 0\n",
			path, line, v[0], v[1], v[2]);
		return -1;
	}
	p->progress[i] = v[0];
	p->sqr[i] = v[1];
	p->var[i] = v[2];
	p->nepochs++;
	return 0;
}

static int load_profile(const struct options *o, struct profile *p)
{
	static const char *const pcols[] = { "placement", "local_bsz",
					      "step_time", "sync_time" };
	static const char *const vcols[] = { "progress", "grad_sqr",
					      "grad_var" };
	struct placements pl = { 0 };
	char path[4096];
	DIR *d;
	struct dirent *de;
	long bmin = 0, bmax = 0;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	d = opendir(o->profile);
	if (d == NULL) {
		fprintf(stderr, PROG ": %s: cannot open the profile directory: %s\n",
			o->profile, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		char *end;
		long b;

		if (strncmp(de->d_name, "validation-", 11) != 0)
			continue;
		b = strtol(de->d_name + 11, &end, 10);
		if (b < 1 || strcmp(end, ".csv") != 0)
			continue;
		if (bmin == 0 || b < bmin)
			bmin = b;
		if (b > bmax)
			bmax = b;
	}
	closedir(d);
	if (bmin == 0) {
		fprintf(stderr, PROG ": %s: no validation-<batch>.csv file\n",
			o->profile);
		return -1;
	}
	/* The noise of the smallest batch's run, as a function of progress. */
	snprintf(path, sizeof(path), "%s/validation-%ld.csv", o->profile, bmin);
	if (read_table(path, vcols, 3, false, valid_row, p) != 0)
		goto out;
	if (p->nepochs == 0) {
		fprintf(stderr, PROG ": %s: no epochs\n", path);
		goto out;
	}
	p->init_batch = o->batch > 0 ? o->batch : (double)bmin;
	p->max_batch = o->max_batch > 0 ? o->max_batch : (double)bmax;
	if (p->max_batch < p->init_batch)
		p->max_batch = p->init_batch;
	if (o->have_perf) {
		p->perf = o->perf;
		p->min_local = 1;
		p->max_local = (int)p->init_batch;
	} else {
		copus_fit_report rep;

		snprintf(path, sizeof(path), "%s/placements.csv", o->profile);
		if (read_table(path, pcols, 4, true, placement_row, &pl) != 0)
			goto out;
		if (pl.n == 0) {
			fprintf(stderr, PROG ": %s: no measurements\n", path);
			goto out;
		}
		rc = copus_fit(pl.obs, pl.n, &p->perf, &rep);
		if (rc != COPUS_OK) {
			fprintf(stderr, PROG ": fitting %s: %s\n", path,
				copus_strerror(rc));
			rc = -1;
			goto out;
		}
		rc = -1;
		p->min_local = pl.min_local;
		p->max_local = pl.max_local;
	}
	if (o->max_local > 0) {
		p->min_local = o->min_local;
		p->max_local = o->max_local;
	}
	rc = 0;
out:
	free(pl.obs);
	return rc;
}

/* Gradient statistics at a progress, linear between epochs. */
static void grad_at(const struct profile *p, double progress, double *sqr,
		    double *var)
{
	int i;
	double w;

	if (progress <= p->progress[0] || p->nepochs == 1) {
		*sqr = p->sqr[0];
		*var = p->var[0];
		return;
	}
	for (i = 1; i < p->nepochs && p->progress[i] < progress; i++)
		;
	if (i == p->nepochs) {
		*sqr = p->sqr[i - 1];
		*var = p->var[i - 1];
		return;
	}
	w = (progress - p->progress[i - 1]) /
	    (p->progress[i] - p->progress[i - 1]);
	*sqr = p->sqr[i - 1] + w * (p->sqr[i] - p->sqr[i - 1]);
	*var = p->var[i - 1] + w * (p->var[i] - p->var[i - 1]);
}

/* ------------------------------------------------------------ randomness */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_normal(uint64_t *s)
{
	double u = ((double)(rng_next(s) >> 11) + 0.5) * 0x1.0p-53;
	double v = ((double)(rng_next(s) >> 11) + 0.5) * 0x1.0p-53;

	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* --------------------------------------------------------------- the job */

static struct state _st;

static int save_cb(void *arg, const char *path, int64_t step)
{
	FILE *f = fopen(path, "w");
	int ok;

	(void)arg;
	if (f == NULL)
		return 1;
	ok = fprintf(f, "copus-emulate 1\nstep %lld\nprogress %.17g\nrng %llu\n",
		     (long long)step, _st.progress,
		     (unsigned long long)_st.rng) > 0;
	return fclose(f) == 0 && ok ? 0 : 1;
}

static int load_cb(void *arg, const char *path, int64_t step)
{
	FILE *f = fopen(path, "r");
	long long s;
	unsigned long long r;
	double prog;
	int n;

	(void)arg;
	if (f == NULL)
		return 1;
	n = fscanf(f, "copus-emulate 1 step %lld progress %lg rng %llu", &s,
		   &prog, &r);
	fclose(f);
	if (n != 3 || s != step || !isfinite(prog) || prog < 0) {
		fprintf(stderr, PROG ": %s: not a checkpoint of step %lld\n",
			path, (long long)step);
		return 2;
	}
	_st.step = s;
	_st.progress = prog;
	_st.rng = r;
	return 0;
}

/* The emulated replicas are one process: nothing to agree with. */
static int agree_cb(void *arg, int64_t *v, int n)
{
	(void)arg;
	(void)v;
	(void)n;
	return 0;
}

static int env_count(const char *name)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return 0;
	v = strtol(s, &end, 10);
	return *end == '\0' && v > 0 && v < 100000 ? (int)v : 0;
}

/* GPUs per node that Slurm gave the job. */
static int slurm_gpus_per_node(void)
{
	const char *s = getenv("CUDA_VISIBLE_DEVICES");
	int n = env_count("SLURM_GPUS_ON_NODE");

	if (n > 0)
		return n;
	if (s == NULL || *s == '\0' || strcmp(s, "NoDevFiles") == 0)
		return 0;
	n = 1;
	for (; *s; s++)
		n += *s == ',';
	return n;
}

static void sleep_s(double s)
{
	struct timespec d;

	if (!(s > 0))
		return;
	d.tv_sec = (time_t)s;
	d.tv_nsec = (long)((s - (double)d.tv_sec) * 1e9);
	while (nanosleep(&d, &d) != 0 && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * One step's gradient norms: a true gradient G of |G|^2 = sqr and
 * micro-batch gradients G + noise of trace var * M0 / local each; libcopus
 * gets this process's (rank 0's) micro-batches and the norm of the mean over
 * all replicas' micro-batches, as after the all-reduce.
 */
static void emulate_grads(copus_ctx *ctx, uint64_t *rng, double sqr,
			  double var, double init_batch, int replicas,
			  int local, int micro)
{
	double g = sqrt(sqr / GRAD_DIMS);
	double sd = sqrt(var * init_batch / local / GRAD_DIMS);
	double sum[GRAD_DIMS] = { 0 };
	int total = replicas * micro;

	for (int k = 0; k < total; k++) {
		double n2 = 0;

		for (int d = 0; d < GRAD_DIMS; d++) {
			double x = g + sd * rng_normal(rng);

			sum[d] += x;
			n2 += x * x;
		}
		if (k < micro)
			copus_grad_local(ctx, n2);
	}
	{
		double t2 = 0;

		for (int d = 0; d < GRAD_DIMS; d++)
			t2 += (sum[d] / total) * (sum[d] / total);
		copus_grad_total(ctx, t2);
	}
}

int main(int argc, char **argv)
{
	struct options o;
	struct profile *p;
	copus_config cfg = COPUS_CONFIG_INITIALIZER;
	copus_ctx *ctx = NULL;
	copus_job_info in;
	copus_plan plan;
	const char *type;
	double target, factor = 1.0, t_report, t_start;
	int gpus, nodes, rc, ret = 1;
	long steps = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv, &o);
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return 1;
	if (load_profile(&o, p) != 0) {
		ret = 2;
		goto out;
	}
	if (o.target > 0) {
		target = o.target;
	} else {
		int e = o.epochs > 0 ? o.epochs : 1;

		if (e > p->nepochs) {
			fprintf(stderr, PROG ": --epochs %d: the profile's run has %d epochs\n",
				e, p->nepochs);
			ret = 2;
			goto out;
		}
		target = p->progress[e - 1];
	}

	/* The allocation: what Slurm gave, unless the options say. */
	nodes = o.nodes > 0 ? o.nodes : env_count("SLURM_JOB_NUM_NODES");
	if (nodes == 0)
		nodes = 1;
	gpus = o.gpus > 0 ? o.gpus : nodes * slurm_gpus_per_node();
	if (gpus == 0)
		gpus = 1;
	if (nodes > gpus)
		nodes = gpus;
	if (gpus % nodes != 0) {
		fprintf(stderr, PROG ": %d GPUs do not divide over %d nodes\n",
			gpus, nodes);
		ret = 2;
		goto out;
	}
	type = o.gpu_type ? o.gpu_type : getenv("COPUS_GPU_TYPE");
	for (int i = 0; i < o.ntypes && type != NULL; i++)
		if (strcmp(o.type_name[i], type) == 0)
			factor = o.type_factor[i];

	cfg.limits = (copus_batch_limits){ p->init_batch, p->max_batch,
					   p->min_local, p->max_local, true };
	cfg.target_progress = target;
	cfg.rank = 0;
	cfg.local_rank = 0;
	cfg.world = gpus;
	cfg.nodes = nodes;
	cfg.gpus_per_node = gpus / nodes;
	cfg.gpu_type = type;
	cfg.ckpt_dir = o.ckpt_dir;
	cfg.save = save_cb;
	cfg.load = load_cb;
	cfg.agree = agree_cb;
	_st.rng = o.seed != UINT64_MAX ? o.seed
				       : (uint64_t)env_count("SLURM_JOB_ID");
	rc = copus_init(&cfg, &ctx);
	if (rc != COPUS_OK) {
		fprintf(stderr, PROG ": copus_init: %s\n", copus_strerror(rc));
		goto out;
	}
	copus_info(ctx, &in);
	/* A fresh run draws from a stream of its own restart. */
	if (!in.restored)
		_st.rng ^= 0x5deece66dull * (uint64_t)(in.restart_count + 1);
	printf("start job=%u restart=%d gpus=%d nodes=%d type=%s step=%lld progress=%.1f target=%.1f%s\n",
	       in.job_id, in.restart_count, gpus, nodes, type ? type : "default",
	       (long long)in.step, in.progress, target,
	       in.restored ? " (restored)" : "");
	t_start = t_report = now_s();
	while (in.progress < target && (o.steps == 0 || steps < o.steps)) {
		copus_step_times t;
		double sqr, var, j, compute;
		int micro;

		rc = copus_plan_get(ctx, &plan);
		if (rc != COPUS_OK) {
			fprintf(stderr, PROG ": plan: %s\n", copus_errmsg(ctx));
			goto out;
		}
		micro = plan.accum_steps + 1;
		rc = copus_step_time(&p->perf, nodes, gpus, plan.local,
				     plan.accum_steps, &t);
		if (rc != COPUS_OK) {
			fprintf(stderr, PROG ": step time of %d GPUs on %d nodes, micro-batch %d: %s\n",
				gpus, nodes, plan.local, copus_strerror(rc));
			goto out;
		}
		j = exp(o.jitter * rng_normal(&_st.rng)) / (factor * o.speedup);
		grad_at(p, in.progress, &sqr, &var);

		copus_step_begin(ctx);
		compute = micro * t.grad;
		sleep_s(compute * j);
		emulate_grads(ctx, &_st.rng, sqr, var, p->init_batch, gpus,
			      plan.local, micro);
		/* The last micro-batch overlaps the all-reduce. */
		copus_sync_begin(ctx);
		sleep_s((t.iter - compute) * j);
		copus_sync_end(ctx);
		/* On a rescale request this checkpoints and exits (75). */
		rc = copus_step_end(ctx, plan.local, plan.accum_steps);
		if (rc != COPUS_OK) {
			fprintf(stderr, PROG ": step: %s\n", copus_errmsg(ctx));
			goto out;
		}
		copus_info(ctx, &in);
		_st.step = in.step;
		_st.progress = in.progress;
		steps++;
		if (o.report > 0 && now_s() - t_report >= o.report) {
			copus_grad_stats g = { 0, 0 };
			double phi = 0;

			t_report = now_s();
			if (copus_grad_stats_get(ctx, &g) == COPUS_OK && g.sqr > 0)
				phi = p->init_batch * g.var / g.sqr;
			printf("step=%lld progress=%.1f/%.1f batch=%.0f local=%d accum=%d efficiency=%.3f noise_scale=%.0f step_time=%.4f\n",
			       (long long)in.step, in.progress, target,
			       plan.batch, plan.local, plan.accum_steps,
			       plan.efficiency, phi, t.iter);
		}
	}
	printf("%s step=%lld progress=%.1f in %.1f s\n",
	       in.progress >= target ? "done" : "stopped", (long long)in.step,
	       in.progress, now_s() - t_start);
	ret = 0;
out:
	if (ctx != NULL)
		copus_finalize(ctx);
	free(p);
	return ret;
}
