/*
 * copus-plan: the planner from the command line.
 *
 *   copus-plan predict --data DIR [--calibrate TRAIN.json] --query Q.csv
 *   copus-plan show MODEL BATCH CELL --data DIR [--calibrate TRAIN.json]
 *   copus-plan evaluate --data DIR --prof PROF.json [--seeds 1,2,3]
 *                       [--residuals OUT.csv]
 *                       [--exclude-cell CELL|MODEL:BATCH:CELL,...]
 *   copus-plan calibrate --data DIR [--calibrate TRAIN.json] --out GPUS.json
 *
 * predict and show also take --gpus GPUS.json: constants that calibrate
 * wrote (or an administrator edited), in place of those of DIR's types.
 * DIR holds models.csv, devices.json and comm.csv (and crius-estimates.csv
 * for evaluate); TRAIN.json and PROF.json are in the format of Arena's
 * prof_database.json.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/planner.h>

#include "../runtime/file.h"
#include "plan-data.h"
#include "sim.h"

#define ERR_LEN 1024

static const char usage[] =
	"usage: copus-plan predict --data DIR [--calibrate TRAIN.json] "
	"--query Q.csv\n"
	"       copus-plan show MODEL BATCH CELL --data DIR "
	"[--calibrate TRAIN.json]\n"
	"       copus-plan evaluate --data DIR --prof PROF.json "
	"[--seeds 1,2,3] [--residuals OUT.csv]\n"
	"                [--exclude-cell CELL|MODEL:BATCH:CELL[,...]]\n"
	"       copus-plan calibrate --data DIR [--calibrate TRAIN.json] "
	"--out GPUS.json\n"
	"predict and show also take --gpus GPUS.json.\n";

struct args {
	const char *data, *calibrate, *query, *prof, *seeds, *out, *gpus;
	const char *residuals, *exclude;
	int nargs;
	char **args;
};

static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "calibrate", required_argument, NULL, 'c' },
		{ "query", required_argument, NULL, 'q' },
		{ "prof", required_argument, NULL, 'p' },
		{ "seeds", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'o' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "residuals", required_argument, NULL, 'r' },
		{ "exclude-cell", required_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(a, 0, sizeof(*a));
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': a->data = optarg; break;
		case 'c': a->calibrate = optarg; break;
		case 'q': a->query = optarg; break;
		case 'p': a->prof = optarg; break;
		case 's': a->seeds = optarg; break;
		case 'o': a->out = optarg; break;
		case 'g': a->gpus = optarg; break;
		case 'r': a->residuals = optarg; break;
		case 'x': a->exclude = optarg; break;
		case 'h': fputs(usage, stdout); exit(0);
		default: return -1;
		}
	}
	a->nargs = argc - optind;
	a->args = argv + optind;
	return 0;
}

/*
 * The constants of the file's types replace those of d's types of the
 * same name; a type of d that the file lacks keeps its own, a type of the
 * file that d lacks is of no use to it.
 */
static int load_gpus(const char *path, struct plan_data *d, char *err)
{
	copus_planner_gpu_type *t;
	char *text, why[512];
	int n = 0, rc;

	if ((rc = copus__file_read(path, &text, NULL, err, ERR_LEN)) !=
	    COPUS_OK)
		return rc;
	t = calloc(COPUS_PLANNER_MAX_GPUS, sizeof(*t));
	if (t == NULL) {
		free(text);
		return COPUS_ENOMEM;
	}
	rc = copus_planner_gpus_parse(text, t, COPUS_PLANNER_MAX_GPUS, &n, why,
				      sizeof(why));
	if (rc) {
		snprintf(err, ERR_LEN, "%s: %s", path, why);
	} else {
		for (int g = 0; g < d->n_gpus; g++) {
			const copus_planner_gpu_type *e =
				copus_planner_gpus_find(t, n, d->gpus[g].type);
			if (e != NULL)
				d->gpus[g].gpu = e->gpu;
		}
	}
	free(t);
	free(text);
	return rc;
}

static int load(const struct args *a, struct plan_data *d, char *err)
{
	struct plan_row *rows;
	size_t n;
	int rc;

	memset(d, 0, sizeof(*d));
	if (a->data == NULL) {
		snprintf(err, ERR_LEN, "--data DIR is required");
		return COPUS_EINVAL;
	}
	rc = plan_data_load(a->data, d, err, ERR_LEN);
	if (rc)
		return rc;
	if (a->calibrate != NULL) {
		rc = plan_prof_load(a->calibrate, d, &rows, &n, err, ERR_LEN);
		if (rc == COPUS_OK)
			rc = plan_calibrate(d, rows, n, NULL, err, ERR_LEN);
		free(rows);
	}
	if (rc == COPUS_OK && a->gpus != NULL)
		rc = load_gpus(a->gpus, d, err);
	if (rc)
		plan_data_free(d);
	return rc;
}

static int best(const struct plan_data *d, const struct plan_row *r,
		copus_planner_plan *p)
{
	return copus_planner_best(&d->models[r->model].model, r->batch,
				  &d->gpus[r->gpu].gpu, &r->cell, NULL, p);
}

/* ---------------------------------------------------------------- predict */

static int cmd_predict(const struct args *a)
{
	struct plan_data d;
	struct plan_row *q = NULL;
	size_t n = 0;
	char err[ERR_LEN];
	int rc;

	if (a->query == NULL || a->nargs != 0) {
		fputs(usage, stderr);
		return 2;
	}
	rc = load(a, &d, err);
	if (rc == COPUS_OK)
		rc = plan_query_load(a->query, &d, &q, &n, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "copus-plan: %s\n", err);
		plan_data_free(&d);
		return 1;
	}
	printf("model,batch,cell,seconds,dp,tp,pp,micro_batches,compute_s,"
	       "tensor_s,pipeline_s,data_s,overhead_s,memory_gib\n");
	for (size_t i = 0; i < n; i++) {
		copus_planner_plan p;
		const char *name = d.models[q[i].model].name;

		rc = best(&d, &q[i], &p);
		if (rc == COPUS_ERANGE) {
			printf("%s,%d,%s,,,,,,,,,,,\n", name, q[i].batch,
			       q[i].cell_name);
			continue;
		}
		if (rc) {
			fprintf(stderr, "copus-plan: %s:%ld: %s\n", a->query,
				q[i].line, copus_strerror(rc));
			free(q);
			plan_data_free(&d);
			return 1;
		}
		printf("%s,%d,%s,%.6g,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,"
		       "%.3f\n",
		       name, q[i].batch, q[i].cell_name, p.seconds,
		       p.degrees.data, p.degrees.tensor, p.degrees.pipeline,
		       p.micro_batches, p.compute_s, p.tensor_s, p.pipeline_s,
		       p.data_s, p.overhead_s, p.memory_bytes / 1073741824.0);
	}
	free(q);
	plan_data_free(&d);
	return 0;
}

/* ------------------------------------------------------------------- show */

static int cmd_show(const struct args *a)
{
	struct plan_data d;
	struct plan_row r = { 0 };
	copus_planner_plan p;
	char err[ERR_LEN], why[512], *end;
	long batch;
	int rc;

	if (a->nargs != 3) {
		fputs(usage, stderr);
		return 2;
	}
	if (load(a, &d, err)) {
		fprintf(stderr, "copus-plan: %s\n", err);
		return 1;
	}
	r.model = plan_model_find(&d, a->args[0]);
	errno = 0;
	batch = strtol(a->args[1], &end, 10);
	if (r.model < 0) {
		fprintf(stderr,
			"copus-plan: MODEL: unknown model '%s' (not in "
			"%s/models.csv)\n",
			a->args[0], a->data);
		rc = 1;
	} else if (a->args[1][0] == '\0' || *end || errno || batch < 1 ||
		   batch > 1 << 24) {
		fprintf(stderr,
			"copus-plan: BATCH: '%s' is not a positive integer\n",
			a->args[1]);
		rc = 1;
	} else if (plan_cell_parse(&d, a->args[2], &r.gpu, &r.cell, why,
				   sizeof(why))) {
		fprintf(stderr, "copus-plan: CELL: %s\n", why);
		rc = 1;
	} else {
		rc = 0;
	}
	if (rc) {
		plan_data_free(&d);
		return 1;
	}
	r.batch = (int)batch;
	const struct plan_model *m = &d.models[r.model];
	const struct plan_gpu *g = &d.gpus[r.gpu];
	printf("model %s: %d layers, %.3g parameters, %d-byte elements\n",
	       m->name, m->model.n_layers, copus_planner_params(&m->model),
	       m->model.dtype_bytes);
	printf("cell %s: %d node(s) x %d %s (%.1f GiB, %.1f TFLOP/s listed, "
	       "efficiency %.3g, %.3g ns per parameter held, overhead %.3g s, "
	       "%.3g s per layer, collectives x %.3g within a node, x %.3g "
	       "across)\n",
	       a->args[2], r.cell.nodes, r.cell.gpus_per_node, g->type,
	       g->gpu.memory_bytes / 1073741824.0, g->gpu.peak_flops / 1e12,
	       g->gpu.efficiency[m->model.kind],
	       1e9 * g->gpu.param_s[m->model.kind], g->gpu.overhead_s,
	       g->gpu.layer_s, g->gpu.comm_scale[COPUS_LINK_INTRA],
	       g->gpu.comm_scale[COPUS_LINK_INTER]);
	rc = best(&d, &r, &p);
	if (rc == COPUS_ERANGE) {
		printf("batch %d: no plan fits this cell's memory\n", r.batch);
		plan_data_free(&d);
		return 0;
	}
	if (rc) {
		fprintf(stderr, "copus-plan: %s\n", copus_strerror(rc));
		plan_data_free(&d);
		return 1;
	}
	printf("batch %d: data %d x tensor %d x pipeline %d, %d "
	       "micro-batch(es) of %g, data ranks %s pipeline ranks\n",
	       r.batch, p.degrees.data, p.degrees.tensor, p.degrees.pipeline,
	       p.micro_batches,
	       (double)r.batch / (p.degrees.data * p.micro_batches),
	       p.data_inner ? "inside" : "outside");
	for (int s = 0; s < p.degrees.pipeline; s++)
		printf("  stage %d: layers %d-%d\n", s, p.first_layer[s],
		       p.first_layer[s + 1] - 1);
	printf("memory per GPU: %.2f GiB (fullest stage) of %.2f GiB\n",
	       p.memory_bytes / 1073741824.0,
	       g->gpu.memory_bytes / 1073741824.0);
	printf("seconds per iteration: %.4g = compute %.4g + tensor %.4g + "
	       "pipeline %.4g + data %.4g + overhead %.4g\n",
	       p.seconds, p.compute_s, p.tensor_s, p.pipeline_s, p.data_s,
	       p.overhead_s);
	plan_data_free(&d);
	return 0;
}

/* --------------------------------------------------------------- evaluate */

/* Relative errors of the predictions for the rows where test[i]; a row
 * with no plan counts as an error of 100%. The median of each
 * architecture follows on the same line. When res is not NULL, each
 * predicted row is also written to it as a line of CSV (see
 * RESIDUALS_HEADER), its first field what, quoted. */
#define RESIDUALS_HEADER                                          \
	"split,model,batch,cell,measured_s,predicted_s,dp,tp,pp," \
	"micro_batches,compute_s,tensor_s,pipeline_s,data_s,overhead_s\n"

static void report(const char *what, struct plan_data *d,
		   const struct plan_row *rows, size_t n, const bool *test,
		   size_t n_train, FILE *res, double *median, double *p90)
{
	static const char *arch[4] = { "", "transformer", "moe",
				       "wide-resnet" };
	double *e = malloc((n ? n : 1) * sizeof(*e) * 5);
	size_t k = 0, none = 0, ka[4] = { 0 };

	*median = *p90 = NAN;
	if (e == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		copus_planner_plan p;
		double err;
		int a = (int)d->models[rows[i].model].desc.arch;

		if (!test[i] || rows[i].seconds <= 0.0)
			continue;
		if (best(d, &rows[i], &p) != COPUS_OK) {
			err = 1.0;
			none++;
			if (res)
				fprintf(res, "\"%s\",%s,%d,%s,%.6g,,,,,,,,,,\n",
					what, d->models[rows[i].model].name,
					rows[i].batch, rows[i].cell_name,
					rows[i].seconds);
		} else {
			err = fabs(p.seconds - rows[i].seconds) /
			      rows[i].seconds;
			if (res)
				fprintf(res,
					"\"%s\",%s,%d,%s,%.6g,%.6g,%d,%d,%d,%d,"
					"%.6g,%.6g,%.6g,%.6g,%.6g\n",
					what, d->models[rows[i].model].name,
					rows[i].batch, rows[i].cell_name,
					rows[i].seconds, p.seconds,
					p.degrees.data, p.degrees.tensor,
					p.degrees.pipeline, p.micro_batches,
					p.compute_s, p.tensor_s, p.pipeline_s,
					p.data_s, p.overhead_s);
		}
		e[k++] = err;
		if (a >= 1 && a <= 3)
			e[n * (size_t)(a + 1) + ka[a]++] = err;
	}
	*median = sim_quantile(e, k, 0.5);
	*p90 = sim_quantile(e, k, 0.9);
	printf("%s: calibrated on %zu, predicted %zu: median %.1f%%, "
	       "p90 %.1f%%, no plan for %zu (median",
	       what, n_train, k, 100.0 * *median, 100.0 * *p90, none);
	for (int a = 1; a <= 3; a++)
		if (ka[a])
			printf(" %s %.1f%%", arch[a],
			       100.0 * sim_quantile(e + n * (size_t)(a + 1),
						    ka[a], 0.5));
	printf(")\n");
	free(e);
}

/*
 * Whether row r is among list's entries: a cell name ("4_a40_4_n_2_d",
 * every model's time there) or one measured time, "MODEL:BATCH:CELL".
 */
/* Whether one entry of --exclude-cell (K characters at E), CELL or
 * MODEL:BATCH:CELL, names row R. */
static bool entry_matches(const char *e, size_t k, const struct plan_data *d,
			  const struct plan_row *r)
{
	char one[3 * PLAN_NAME_LEN], *c1, *c2, *end;

	if (k >= sizeof(one))
		return false;
	memcpy(one, e, k);
	one[k] = '\0';
	c1 = strchr(one, ':');
	c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (c2 == NULL)
		return strcmp(one, r->cell_name) == 0;
	*c1 = *c2 = '\0';
	return strcmp(one, d->models[r->model].name) == 0 &&
	       strtol(c1 + 1, &end, 10) == r->batch && end == c2 &&
	       strcmp(c2 + 1, r->cell_name) == 0;
}

/* Calls FN on each comma-separated entry of LIST until it returns true;
 * returns whether one did. */
static bool each_entry(const char *list,
		       bool (*fn)(const char *e, size_t k, void *ctx),
		       void *ctx)
{
	for (const char *s = list; s != NULL && *s;) {
		const char *end = strchr(s, ',');
		size_t k = end ? (size_t)(end - s) : strlen(s);
		if (fn(s, k, ctx))
			return true;
		s = end ? end + 1 : NULL;
	}
	return false;
}

struct entry_ctx {
	const struct plan_data *d;
	const struct plan_row *rows;
	size_t n;
	const char *bad; /* the first entry that names no row */
	size_t bad_len;
};

static bool matches_row(const char *e, size_t k, void *ctx)
{
	struct entry_ctx *c = ctx;
	return entry_matches(e, k, c->d, c->rows);
}

static bool matches_nothing(const char *e, size_t k, void *ctx)
{
	struct entry_ctx *c = ctx;
	for (size_t i = 0; i < c->n; i++)
		if (entry_matches(e, k, c->d, &c->rows[i]))
			return false;
	c->bad = e;
	c->bad_len = k;
	return true;
}

/* Whether --exclude-cell's LIST names row R. */
static bool listed(const char *list, const struct plan_data *d,
		   const struct plan_row *r)
{
	struct entry_ctx c = { .d = d, .rows = r, .n = 1 };
	return each_entry(list, matches_row, &c);
}

/*
 * The table of the random halves, one line a seed, and the worst of them:
 * the targets hold for every split, not on average, so the worst median
 * and the worst 90th percentile are what to read.
 */
static void split_table(const unsigned long *seed, const double *med,
			const double *p90, size_t n)
{
	size_t wm = 0, wp = 0;
	double sm = 0.0, sp = 0.0;

	if (n == 0)
		return;
	printf("per split (relative error on the held-out half):\n"
	       "  seed  median     p90\n");
	for (size_t i = 0; i < n; i++) {
		printf("  %4lu  %5.1f%%  %5.1f%%\n", seed[i], 100.0 * med[i],
		       100.0 * p90[i]);
		if (med[i] > med[wm])
			wm = i;
		if (p90[i] > p90[wp])
			wp = i;
		sm += med[i];
		sp += p90[i];
	}
	printf("  mean  %5.1f%%  %5.1f%%\n", 100.0 * sm / n, 100.0 * sp / n);
	printf("worst split: median %.1f%% (seed %lu), p90 %.1f%% (seed %lu)\n",
	       100.0 * med[wm], seed[wm], 100.0 * p90[wp], seed[wp]);
}

static int cmd_evaluate(const struct args *a)
{
	struct plan_data d;
	struct plan_row *rows = NULL;
	size_t n = 0, nv = 0;
	copus_planner_gpu prior[PLAN_MAX_TYPES];
	char err[ERR_LEN], path[4096], what[64];
	const char *seeds = a->seeds ? a->seeds : "1,2,3,4,5";
	bool *train = NULL, *test = NULL, *out_cell = NULL;
	size_t *idx = NULL, n_split = 0, n_out = 0;
	unsigned long *split_seed = NULL;
	double *split_med = NULL, *split_p90 = NULL, med, p90;
	FILE *res = NULL;
	int rc;

	if (a->prof == NULL || a->nargs != 0) {
		fputs(usage, stderr);
		return 2;
	}
	if (a->data == NULL) {
		fprintf(stderr, "copus-plan: --data DIR is required\n");
		return 1;
	}
	rc = plan_data_load(a->data, &d, err, sizeof(err));
	if (rc == COPUS_OK)
		rc = plan_prof_load(a->prof, &d, &rows, &n, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "copus-plan: %s\n", err);
		plan_data_free(&d);
		return 1;
	}
	train = calloc(n + 1, sizeof(*train));
	test = calloc(n + 1, sizeof(*test));
	out_cell = calloc(n + 1, sizeof(*out_cell));
	idx = calloc(n + 1, sizeof(*idx));
	/* At most one split a character of the list. */
	split_seed = calloc(strlen(seeds) + 1, sizeof(*split_seed));
	split_med = calloc(strlen(seeds) + 1, sizeof(*split_med));
	split_p90 = calloc(strlen(seeds) + 1, sizeof(*split_p90));
	if (!train || !test || !out_cell || !idx || !split_seed || !split_med ||
	    !split_p90) {
		fprintf(stderr, "copus-plan: out of memory\n");
		rc = 1;
		goto out;
	}
	for (int g = 0; g < d.n_gpus; g++)
		prior[g] = d.gpus[g].gpu;
	/* The cells and times of --exclude-cell take no part: neither
	 * calibrated on nor predicted. An entry that names none of them is
	 * a mistake (a typo would otherwise exclude nothing, unsaid). */
	struct entry_ctx ec = { .d = &d, .rows = rows, .n = n };
	if (each_entry(a->exclude, matches_nothing, &ec)) {
		fprintf(stderr,
			"copus-plan: --exclude-cell: '%.*s' names no measured "
			"time in %s (entries are CELL or MODEL:BATCH:CELL)\n",
			(int)ec.bad_len, ec.bad, a->prof);
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		out_cell[i] = listed(a->exclude, &d, &rows[i]);
		n_out += out_cell[i];
		if (rows[i].seconds > 0.0 && !out_cell[i])
			idx[nv++] = i;
	}
	printf("%zu measured times (%zu entries with no plan)\n", nv,
	       n - nv - n_out);
	if (n_out)
		printf("excluded: %zu entries of %s\n", n_out, a->exclude);

	/* Devices and collectives alone. */
	for (size_t i = 0; i < n; i++)
		test[i] = !out_cell[i];
	if (a->residuals != NULL) {
		res = fopen(a->residuals, "w");
		if (res == NULL) {
			fprintf(stderr, "copus-plan: %s: cannot open: %s\n",
				a->residuals, strerror(errno));
			rc = 1;
			goto out;
		}
		fputs(RESIDUALS_HEADER, res);
	}
	report("uncalibrated", &d, rows, n, test, 0, res, &med, &p90);

	/* Random halves. */
	for (const char *s = seeds; *s;) {
		char *end;
		unsigned long seed = strtoul(s, &end, 10);
		uint64_t st = seed;

		if (end == s) {
			fprintf(stderr,
				"copus-plan: --seeds: '%s' is not a "
				"list of integers\n",
				seeds);
			rc = 1;
			goto out;
		}
		/* Shuffled from the file's order: a seed names one split,
		 * whichever seeds come before it. The times of
		 * --exclude-cell are shuffled too, then left out of both
		 * halves, so that every other time falls in the half it
		 * falls in without the option. */
		size_t nm = 0, n_train = 0;
		for (size_t i = 0; i < n; i++)
			if (rows[i].seconds > 0.0)
				idx[nm++] = i;
		for (size_t i = nm; i > 1; i--) {
			size_t j = (size_t)(sim_rng_next(&st) % i);
			size_t t = idx[i - 1];
			idx[i - 1] = idx[j];
			idx[j] = t;
		}
		memset(train, 0, n * sizeof(*train));
		memset(test, 0, n * sizeof(*test));
		for (size_t k = 0; k < nm; k++) {
			if (out_cell[idx[k]])
				continue;
			(k < nm / 2 ? train : test)[idx[k]] = true;
			n_train += k < nm / 2;
		}
		for (int g = 0; g < d.n_gpus; g++)
			d.gpus[g].gpu = prior[g];
		if (plan_calibrate(&d, rows, n, train, err, sizeof(err))) {
			fprintf(stderr, "copus-plan: %s\n", err);
			rc = 1;
			goto out;
		}
		snprintf(what, sizeof(what), "seed %lu, random half", seed);
		report(what, &d, rows, n, test, n_train, res, &med, &p90);
		split_seed[n_split] = seed;
		split_med[n_split] = med;
		split_p90[n_split++] = p90;
		s = *end == ',' ? end + 1 : end;
	}

	split_table(split_seed, split_med, split_p90, n_split);

	/* 1-GPU and 2-GPU cells only. */
	size_t small = 0;
	for (size_t i = 0; i < n; i++) {
		int w = rows[i].cell.nodes * rows[i].cell.gpus_per_node;
		train[i] = w <= 2 && rows[i].seconds > 0.0 && !out_cell[i];
		test[i] = w > 2 && !out_cell[i];
		small += train[i];
	}
	for (int g = 0; g < d.n_gpus; g++)
		d.gpus[g].gpu = prior[g];
	if (plan_calibrate(&d, rows, n, train, err, sizeof(err))) {
		fprintf(stderr, "copus-plan: %s\n", err);
		rc = 1;
		goto out;
	}
	report("1- and 2-GPU cells, predicting the larger", &d, rows, n, test,
	       small, res, &med, &p90);

	/* Crius's own estimator. */
	snprintf(path, sizeof(path), "%s/crius-estimates.csv", a->data);
	double *est = calloc(n + 1, sizeof(*est));
	if (est != NULL && plan_crius_load(path, &d, rows, n, est, err,
					   sizeof(err)) == COPUS_OK) {
		double *e = calloc(n + 1, sizeof(*e));
		size_t k = 0;
		for (size_t i = 0; e && i < n; i++)
			if (est[i] > 0.0 && rows[i].seconds > 0.0 &&
			    !out_cell[i])
				e[k++] = fabs(est[i] - rows[i].seconds) /
					 rows[i].seconds;
		printf("crius's estimator (%s): %zu model x cell pairs: median "
		       "%.1f%%, p90 %.1f%%\n",
		       path, k, 100.0 * sim_quantile(e, k, 0.5),
		       100.0 * sim_quantile(e, k, 0.9));
		free(e);
	} else if (est != NULL) {
		printf("crius's estimator: %s\n", err);
	}
	free(est);
	rc = 0;
out:
	if (res != NULL && fclose(res) != 0 && rc == 0) {
		fprintf(stderr, "copus-plan: %s: cannot write\n", a->residuals);
		rc = 1;
	}
	free(train);
	free(test);
	free(out_cell);
	free(idx);
	free(split_seed);
	free(split_med);
	free(split_p90);
	free(rows);
	plan_data_free(&d);
	return rc;
}

/* -------------------------------------------------------------- calibrate */

/* Write text to path through a temporary file renamed over it, so that a
 * reader never sees half a file. "-" is the standard output. */
static int write_text(const char *path, const char *text, char *err)
{
	char tmp[4096];
	FILE *f;

	if (strcmp(path, "-") == 0)
		return fputs(text, stdout) < 0 ? COPUS_EIO : COPUS_OK;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		snprintf(err, ERR_LEN, "%.900s: path too long", path);
		return COPUS_EINVAL;
	}
	f = fopen(tmp, "w");
	if (f == NULL || fputs(text, f) < 0 || fflush(f) != 0 || ferror(f)) {
		snprintf(err, ERR_LEN, "%.900s: cannot write: %s", tmp,
			 strerror(errno));
		if (f != NULL)
			fclose(f);
		remove(tmp);
		return COPUS_EIO;
	}
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		snprintf(err, ERR_LEN, "%.900s: cannot write: %s", path,
			 strerror(errno));
		remove(tmp);
		return COPUS_EIO;
	}
	return COPUS_OK;
}

static int cmd_calibrate(const struct args *a)
{
	copus_planner_gpu_type *t = NULL;
	struct plan_data d;
	char err[ERR_LEN], *text = NULL;
	size_t need = 0;
	int rc;

	if (a->out == NULL || a->nargs != 0 || a->gpus != NULL) {
		fputs(usage, stderr);
		return 2;
	}
	if (load(a, &d, err)) {
		fprintf(stderr, "copus-plan: %s\n", err);
		return 1;
	}
	t = calloc((size_t)d.n_gpus + 1, sizeof(*t));
	rc = t == NULL ? COPUS_ENOMEM : COPUS_OK;
	for (int g = 0; rc == COPUS_OK && g < d.n_gpus; g++) {
		snprintf(t[g].name, sizeof(t[g].name), "%s", d.gpus[g].type);
		t[g].gpu = d.gpus[g].gpu;
	}
	/* Once to learn the length, once to write. */
	if (rc == COPUS_OK) {
		char probe[1];
		rc = copus_planner_gpus_format(t, d.n_gpus, probe, 1, &need,
					       err, sizeof(err));
		if (rc == COPUS_ERANGE)
			rc = (text = malloc(need + 1)) ? COPUS_OK
						       : COPUS_ENOMEM;
	}
	if (rc == COPUS_OK)
		rc = copus_planner_gpus_format(t, d.n_gpus, text, need + 1,
					       NULL, err, sizeof(err));
	if (rc == COPUS_OK)
		rc = write_text(a->out, text, err);
	else if (rc == COPUS_ENOMEM)
		snprintf(err, sizeof(err), "out of memory");
	if (rc)
		fprintf(stderr, "copus-plan: %s\n", err);
	free(text);
	free(t);
	plan_data_free(&d);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct args a;
	const char *cmd;

	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (parse_args(argc - 1, argv + 1, &a)) {
		fputs(usage, stderr);
		return 2;
	}
	if (strcmp(cmd, "predict") == 0)
		return cmd_predict(&a);
	if (strcmp(cmd, "show") == 0)
		return cmd_show(&a);
	if (strcmp(cmd, "evaluate") == 0)
		return cmd_evaluate(&a);
	if (strcmp(cmd, "calibrate") == 0)
		return cmd_calibrate(&a);
	fprintf(stderr, "copus-plan: unknown command '%s'\n%s", cmd, usage);
	return 2;
}
