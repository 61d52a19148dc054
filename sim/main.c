/*
 * copus-sim: replay Pollux-format workloads on a simulated cluster.
 *
 *   copus-sim --cluster 16x4 --profiles DIR --policy pollux \
 *             [--interval 60] [--restart-delay 30] [--jobs 2] \
 *             [--summary FILE.json] [--timeline FILE.csv] [--plot FILE.png] \
 *             [--history FILE] [--save-history FILE] WORKLOAD.csv...
 *   copus-sim --arena DIR --policy fifo:arena --max-rounds 1500 \
 *             [--arena-rules arena|honest] [--summary FILE.json]
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "sim.h"

#ifndef GNUPLOT
#define GNUPLOT ""
#endif

struct wl {
	const char *path;
	char name[128];
	struct sim_jobspec *jobs;
	size_t n;
	struct sim_result res;
	char err[SIM_ERR_LEN];
	int rc;
	char series[128];
	char timeline[128];
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: copus-sim --cluster SPEC --profiles DIR [options] "
		"WORKLOAD.csv...\n"
		"  --cluster SPEC       16x4 (nodes x GPUs) or aws:6x4,rtx:3x8\n"
		"  --profiles DIR       job profiles in Pollux's layout\n"
		"  --policy NAME        ");
	for (size_t i = 0; copus_policy_name_at(i) != NULL; i++)
		fprintf(f, "%s%s", i > 0 ? ", " : "", copus_policy_name_at(i));
	fprintf(f,
		" (pollux);\n"
		"                       copus:no-srpt,no-restart-cost,"
		"no-fairness,no-placement,no-spread\n"
		"                       runs copus without those ingredients;\n"
		"                       fifo:arena is Arena's fcfs (--arena)\n"
		"  --remaining HOW      what copus knows of the work left: "
		"predict\n"
		"                       (its predictor, trained on the jobs "
		"finished so\n"
		"                       far; default), oracle (the truth) or "
		"none;\n"
		"                       fifo's backfill and optimus always "
		"get the oracle,\n"
		"                       as in Pollux's evaluation\n"
		"  --history FILE       finished jobs the predictor knows "
		"before the first\n"
		"                       round (a cluster's history, the "
		"plugin's format)\n"
		"  --save-history FILE  write the jobs that finished, in "
		"that format\n"
		"  --interval S         seconds between rounds (60)\n"
		"  --restart-delay S    seconds a reallocation costs (30)\n"
		"  --app-rules FILE     per model (CSV application,slowdown,\n"
		"                       restart_delay): it trains slowdown times\n"
		"                       slower than profiled, and a restart costs\n"
		"                       it restart_delay s (the policy is not told)\n"
		"  --jobs N             workloads simulated at once (2)\n"
		"  --summary FILE.json  JCTs and summary figures\n"
		"  --timeline FILE.csv  per round and job: GPUs, nodes, "
		"batch, goodput, progress, epoch, GPU type\n"
		"  --plot FILE.png      cluster allocation and queue over "
		"time (gnuplot)\n"
		"or:    copus-sim --arena DIR --policy NAME [options]\n"
		"  --arena DIR          replay Arena's trace, cluster and table "
		"of iteration\n"
		"                       times (DIR: traces/, resources/, "
		"database/)\n"
		"  --max-rounds N       rounds of 300 s to replay (6000)\n"
		"  --arena-rules R      arena (progress re-valued at the "
		"current speed, a\n"
		"                       restart over 300 s loses a round) or "
		"honest (progress\n"
		"                       kept, a restart costs its time)\n"
		"  --throughput T       what the policy knows of each cell's "
		"speed: oracle\n"
		"                       (the table) or planner\n"
		"  --cell-choice C      what a policy that picks cells may "
		"change: all\n"
		"                       (type, count, locality; default), "
		"count (on the\n"
		"                       requested type) or none (the request)\n"
		"  --summary FILE.json  finished jobs, mean JCTs and more\n"
		"  --timeline FILE.csv  per round and job: cell and work "
		"left\n");
}

/* copus-sim --arena: read the world, replay it, report. */
static int arena_main(const char *dir, struct arena_opts *o,
		      const char *summary, const char *timeline)
{
	struct arena_world w;
	struct arena_result r;
	char err[SIM_ERR_LEN];
	int status = 0;

	char pdir[4096];

	if (arena_world_read(dir, &w, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		return 2;
	}
	snprintf(pdir, sizeof(pdir), "%s/planner", dir);
	o->planner_dir = pdir;
	if (timeline != NULL) {
		if ((o->timeline = fopen(timeline, "w")) == NULL) {
			fprintf(stderr, "copus-sim: %s: %s\n", timeline,
				strerror(errno));
			arena_world_free(&w);
			return 2;
		}
		fprintf(o->timeline, "time,job,gpu_type,gpus,nodes,"
			"seconds_per_iteration,remaining_iterations\n");
	}
	if (arena_run(&w, o, &r, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		if (o->timeline != NULL)
			fclose(o->timeline);
		arena_world_free(&w);
		return 2;
	}
	printf("arena %s (%s rules): %zu of %zu submitted jobs finished in "
	       "%ld rounds, mean JCT %.2f h finished, %.2f h all (an "
	       "unfinished job counted to the horizon); %zu never started, "
	       "%ld restarts, %.0f GPU-hours\n", o->policy,
	       o->rules == ARENA_RULES_ARENA ? "Arena's" : "honest",
	       r.finished, r.submitted, r.rounds, r.mean_jct_finished / 3600,
	       r.mean_jct_all / 3600, r.never_started, r.restarts,
	       r.gpu_hours);
	printf("arena %s bounds (each job alone on its fastest cell from its "
	       "submission): mean JCT %.2f h all; %.2f h for the jobs "
	       "finished here; %.2f h for any %zu finished\n", o->policy,
	       r.bound_all / 3600, r.bound_these / 3600, r.bound_any / 3600,
	       r.finished);
	printf("arena %s decisions: median %.2f ms, p95 %.2f ms, max %.2f ms "
	       "of CPU; wall %.2f s\n", o->policy, r.decide_ms_median,
	       r.decide_ms_p95, r.decide_ms_max, r.wall);
	if (r.refused > 0)
		printf("arena %s: %ld decisions put a job on a cell it does "
		       "not fit (left waiting)\n", o->policy, r.refused);
	if (o->timeline != NULL && (fflush(o->timeline) != 0 ||
				    ferror(o->timeline))) {
		fprintf(stderr, "copus-sim: --timeline: write error\n");
		status = 1;
	}
	if (summary && arena_summary_write(summary, &w, o, &r, err,
					   sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		status = 1;
	}
	if (o->timeline != NULL && fclose(o->timeline) != 0)
		status = 1;
	arena_result_free(&r);
	arena_world_free(&w);
	return status;
}

static void wl_name(struct wl *w)
{
	char tmp[512], *b, *dot;

	snprintf(tmp, sizeof(tmp), "%s", w->path);
	b = basename(tmp);
	snprintf(w->name, sizeof(w->name), "%s", b);
	dot = strrchr(w->name, '.');
	if (dot && strcmp(dot, ".csv") == 0)
		*dot = '\0';
}

/* The history given with --history (the same for every workload). */
static copus_history_entry *history;
static size_t nhistory;

static int run_one(const struct sim_cluster *c, const struct app *apps,
		   struct wl *w, const char *policy, enum sim_remaining rem,
		   double interval, double delay, bool want_timeline,
		   bool want_series)
{
	struct sim_opts o = { .policy = policy, .remaining = rem,
			      .interval = interval, .restart_delay = delay,
			      .workload_name = w->name, .history = history,
			      .nhistory = nhistory };
	FILE *tl = NULL, *se = NULL;

	if (want_timeline && (tl = fopen(w->timeline, "w")) == NULL) {
		snprintf(w->err, sizeof(w->err), "%s: %s", w->timeline,
			 strerror(errno));
		return COPUS_EIO;
	}
	if (want_series && (se = fopen(w->series, "w")) == NULL) {
		snprintf(w->err, sizeof(w->err), "%s: %s", w->series,
			 strerror(errno));
		if (tl)
			fclose(tl);
		return COPUS_EIO;
	}
	o.timeline = tl;
	o.series = se;
	w->rc = sim_run(c, apps, w->jobs, w->n, &o, &w->res, w->err,
			sizeof(w->err));
	if (tl)
		fclose(tl);
	if (se)
		fclose(se);
	return w->rc;
}

/* A child sends its result back as text lines over a pipe. */
static void send_result(int fd, const struct wl *w)
{
	FILE *f = fdopen(fd, "w");

	if (f == NULL)
		_exit(3);
	if (w->rc != COPUS_OK) {
		fprintf(f, "ERR\t%d\t%s\n", w->rc, w->err);
	} else {
		const struct sim_result *r = &w->res;

		fprintf(f, "OK\t%zu\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%ld\t"
			"%ld\t%.17g\t%.17g\t%.17g\t%ld\t%ld\t%ld\t%.17g\t"
			"%.17g\t%.17g\t%.17g\n",
			r->njobs, r->avg_jct, r->p99_jct, r->makespan,
			r->max_ftf, r->gpu_hours, r->restarts, r->rounds,
			r->wall, r->pred_err_median, r->pred_err_p90,
			r->pred_samples, r->pred_unknown, r->pred_trainings,
			r->pred_seconds, r->decide_ms_median, r->decide_ms_p95,
			r->decide_ms_max);
		for (size_t i = 0; i < r->njobs; i++)
			fprintf(f, "%s\t%.17g\t%.17g\n", r->names[i], r->jct[i],
				r->ftf[i]);
		fprintf(f, "%zu\n", r->nfinished);
		for (size_t i = 0; i < r->nfinished; i++) {
			char buf[160];

			if (copus_history_format(&r->finished[i], buf,
						 sizeof(buf)) != COPUS_OK)
				_exit(3);
			fputs(buf, f);
		}
	}
	fclose(f);
}

/*
 * Reads a history file (as the plugin's StateSaveLocation/copus_history).
 * Unlike the plugin, which skips a line cut short by a crash, the
 * simulator refuses any bad line: its input must be what was meant.
 */
static int read_history(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0, n = 0, room = 0;
	int rc = COPUS_EINVAL;

	if (f == NULL) {
		fprintf(stderr, "copus-sim: --history: %s: %s\n", path,
			strerror(errno));
		return COPUS_EIO;
	}
	while (getline(&line, &cap, f) >= 0) {
		const char *why;

		if (++lineno == 1) {
			if (strcmp(line, COPUS_HISTORY_MAGIC "\n") != 0) {
				fprintf(stderr, "copus-sim: %s line 1: not a "
					"copus history (expected \"%s\")\n",
					path, COPUS_HISTORY_MAGIC);
				goto out;
			}
			continue;
		}
		if (n == room) {
			size_t nr = room ? 2 * room : 1024;
			copus_history_entry *g = realloc(history,
							 nr * sizeof(*g));
			if (g == NULL) {
				rc = COPUS_ENOMEM;
				goto out;
			}
			history = g;
			room = nr;
		}
		if (copus_history_parse(line, &history[n], &why) != COPUS_OK) {
			fprintf(stderr, "copus-sim: %s line %zu: %s\n", path,
				lineno, why);
			goto out;
		}
		n++;
	}
	if (lineno == 0) {
		fprintf(stderr, "copus-sim: %s: empty, not a copus history\n",
			path);
		goto out;
	}
	nhistory = n;
	rc = COPUS_OK;
out:
	free(line);
	fclose(f);
	return rc;
}

/* Writes the jobs that finished, workload by workload (beside, renamed). */
static int write_history(const char *path, const struct wl *w, size_t nw)
{
	char tmp[4096], buf[160];
	FILE *f;
	int rc = COPUS_OK;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	if ((f = fopen(tmp, "w")) == NULL) {
		fprintf(stderr, "copus-sim: --save-history: %s: %s\n", tmp,
			strerror(errno));
		return COPUS_EIO;
	}
	fprintf(f, "%s\n", COPUS_HISTORY_MAGIC);
	for (size_t i = 0; i < nw && rc == COPUS_OK; i++)
		for (size_t k = 0; k < w[i].res.nfinished && rc == COPUS_OK;
		     k++) {
			rc = copus_history_format(&w[i].res.finished[k], buf,
						  sizeof(buf));
			if (rc == COPUS_OK)
				fputs(buf, f);
		}
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
		rc = COPUS_EIO;
	if (fclose(f) != 0)
		rc = COPUS_EIO;
	if (rc == COPUS_OK && rename(tmp, path) != 0)
		rc = COPUS_EIO;
	if (rc != COPUS_OK) {
		fprintf(stderr, "copus-sim: --save-history: %s: %s\n", path,
			copus_strerror(rc));
		unlink(tmp);
	}
	return rc;
}

static int recv_result(int fd, struct wl *w)
{
	FILE *f = fdopen(fd, "r");
	char *line = NULL;
	size_t cap = 0;
	struct sim_result *r = &w->res;
	int rc = COPUS_EIO;

	if (f == NULL) {
		close(fd);
		return COPUS_EIO;
	}
	if (getline(&line, &cap, f) < 0)
		goto out;
	if (strncmp(line, "ERR\t", 4) == 0) {
		char *msg = strchr(line + 4, '\t');

		w->rc = atoi(line + 4);
		snprintf(w->err, sizeof(w->err), "%s",
			 msg ? msg + 1 : "unknown error");
		w->err[strcspn(w->err, "\n")] = '\0';
		rc = w->rc ? w->rc : COPUS_EIO;
		goto out;
	}
	/* The predictor's errors are "nan" when it did not run. */
	if (sscanf(line, "OK\t%zu\t%lg\t%lg\t%lg\t%lg\t%lg\t%ld\t%ld\t%lg"
		   "\t%lg\t%lg\t%ld\t%ld\t%ld\t%lg\t%lg\t%lg\t%lg",
		   &r->njobs, &r->avg_jct,
		   &r->p99_jct, &r->makespan, &r->max_ftf, &r->gpu_hours,
		   &r->restarts, &r->rounds, &r->wall, &r->pred_err_median,
		   &r->pred_err_p90, &r->pred_samples, &r->pred_unknown,
		   &r->pred_trainings, &r->pred_seconds, &r->decide_ms_median,
		   &r->decide_ms_p95, &r->decide_ms_max) != 18 ||
	    r->njobs != w->n)
		goto out;
	r->names = calloc(r->njobs + 1, sizeof(*r->names));
	r->jct = calloc(r->njobs + 1, sizeof(double));
	r->ftf = calloc(r->njobs + 1, sizeof(double));
	if (!r->names || !r->jct || !r->ftf)
		goto out;
	for (size_t i = 0; i < r->njobs; i++) {
		char *t1, *t2;

		if (getline(&line, &cap, f) < 0)
			goto out;
		t1 = strchr(line, '\t');
		if (t1 == NULL)
			goto out;
		*t1++ = '\0';
		t2 = strchr(t1, '\t');
		if (t2 == NULL)
			goto out;
		snprintf(r->names[i], sizeof(r->names[i]), "%s", line);
		r->jct[i] = strtod(t1, NULL);
		r->ftf[i] = strtod(t2 + 1, NULL);
	}
	if (getline(&line, &cap, f) < 0 ||
	    sscanf(line, "%zu", &r->nfinished) != 1 || r->nfinished > r->njobs)
		goto out;
	r->finished = calloc(r->nfinished + 1, sizeof(*r->finished));
	if (r->finished == NULL)
		goto out;
	for (size_t i = 0; i < r->nfinished; i++) {
		const char *why;

		if (getline(&line, &cap, f) < 0 ||
		    copus_history_parse(line, &r->finished[i], &why) != COPUS_OK)
			goto out;
	}
	rc = w->rc = COPUS_OK;
out:
	free(line);
	fclose(f);
	if (rc != COPUS_OK && w->err[0] == '\0')
		snprintf(w->err, sizeof(w->err),
			 "%s: the simulation process failed", w->name);
	w->rc = rc;
	return rc;
}

static const char *const remaining_names[] = { "predict", "oracle", "none" };

/*
 * The remaining-time knowledge a policy actually gets, as its traits say:
 * --remaining for a policy that takes a prediction (copus); the oracle for
 * one that assumes the truth (fifo's backfill, optimus); none for the
 * others (and for a name that is no policy).
 */
static enum sim_remaining used_remaining(const char *policy,
					 enum sim_remaining rem)
{
	enum sim_remaining used = SIM_REMAINING_NONE;
	copus_policy *p;

	if (copus_policy_create(policy, NULL, &p) != COPUS_OK)
		return used;
	switch (copus_policy_traits(p)->remaining) {
	case COPUS_REMAINING_PREDICT:
		used = rem;
		break;
	case COPUS_REMAINING_ORACLE:
		used = SIM_REMAINING_ORACLE;
		break;
	case COPUS_REMAINING_NONE:
		break;
	}
	copus_policy_destroy(p);
	return used;
}

/* A number for JSON, or null when it is not one (no samples). */
static json_object *json_number(double v)
{
	return isfinite(v) ? json_object_new_double(v) : NULL;
}

static int write_summary(const char *path, const char *policy,
			 enum sim_remaining rem, struct wl *w, size_t nw,
			 double mean)
{
	json_object *pe = json_object_new_object();
	json_object *root = json_object_new_object();
	json_object *jcts = json_object_new_object();
	json_object *avgs = json_object_new_object();
	json_object *mk = json_object_new_object();
	json_object *p99 = json_object_new_object();
	json_object *ftf = json_object_new_object();
	json_object *gh = json_object_new_object();
	json_object *rs = json_object_new_object();
	json_object *dm = json_object_new_object();
	int rc = COPUS_OK;

	for (size_t i = 0; i < nw; i++) {
		json_object *jw = json_object_new_object();
		const struct sim_result *r = &w[i].res;

		for (size_t k = 0; k < r->njobs; k++)
			json_object_object_add(jw, r->names[k],
				json_object_new_double(r->jct[k]));
		json_object_object_add(jcts, w[i].name, jw);
		json_object_object_add(avgs, w[i].name,
				       json_object_new_double(r->avg_jct));
		json_object_object_add(mk, w[i].name,
				       json_object_new_double(r->makespan));
		json_object_object_add(p99, w[i].name,
				       json_object_new_double(r->p99_jct));
		json_object_object_add(ftf, w[i].name,
				       json_object_new_double(r->max_ftf));
		json_object_object_add(gh, w[i].name,
				       json_object_new_double(r->gpu_hours));
		json_object_object_add(rs, w[i].name,
				       json_object_new_int64(r->restarts));
		{
			json_object *e = json_object_new_object();

			json_object_object_add(e, "median",
				json_object_new_double(r->decide_ms_median));
			json_object_object_add(e, "p95",
				json_object_new_double(r->decide_ms_p95));
			json_object_object_add(e, "max",
				json_object_new_double(r->decide_ms_max));
			json_object_object_add(dm, w[i].name, e);
		}
		if (rem == SIM_REMAINING_PREDICT) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "median",
				json_number(r->pred_err_median));
			json_object_object_add(e, "p90",
				json_number(r->pred_err_p90));
			json_object_object_add(e, "samples",
				json_object_new_int64(r->pred_samples));
			json_object_object_add(e, "unknown",
				json_object_new_int64(r->pred_unknown));
			json_object_object_add(e, "trainings",
				json_object_new_int64(r->pred_trainings));
			json_object_object_add(e, "cpu_seconds",
				json_object_new_double(r->pred_seconds));
			json_object_object_add(pe, w[i].name, e);
		}
	}
	json_object_object_add(root, "policy", json_object_new_string(policy));
	json_object_object_add(root, "jcts", jcts);
	json_object_object_add(root, "avgs", avgs);
	json_object_object_add(root, "mean", json_object_new_double(mean));
	json_object_object_add(root, "makespan", mk);
	json_object_object_add(root, "p99_jct", p99);
	json_object_object_add(root, "max_ftf", ftf);
	json_object_object_add(root, "gpu_hours", gh);
	json_object_object_add(root, "restarts", rs);
	/* CPU milliseconds of the policy's decision per round. */
	json_object_object_add(root, "decide_ms", dm);
	json_object_object_add(root, "remaining",
			       json_object_new_string(remaining_names[rem]));
	/* Relative error of the predicted remaining time, sampled every
	 * round over running jobs, how many job-rounds had no prediction
	 * yet, and what the predictor cost (predict only). */
	json_object_object_add(root, "prediction_error", pe);
	if (json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY) != 0) {
		fprintf(stderr, "copus-sim: %s: cannot write: %s\n", path,
			json_util_get_last_err());
		rc = COPUS_EIO;
	}
	json_object_put(root);
	return rc;
}

static void plot(const char *png, const struct wl *w, int total_gpus)
{
	char cmd[2048];
	FILE *g;

	if (GNUPLOT[0] == '\0' || access(GNUPLOT, X_OK) != 0) {
		fprintf(stderr, "copus-sim: gnuplot not found, no plot\n");
		return;
	}
	g = popen(GNUPLOT, "w");
	if (g == NULL)
		return;
	snprintf(cmd, sizeof(cmd),
		 "set terminal png size 1000,500\nset output '%s'\n"
		 "set title '%s'\nset xlabel 'hours'\n"
		 "set ylabel 'GPUs allocated (of %d)'\nset y2label 'jobs'\n"
		 "set y2tics\nset ytics nomirror\n"
		 /* Headroom, so that a full cluster is not drawn on the
		  * border; the legend goes below the plot. */
		 "set yrange [0:%g]\nset y2range [0:*]\nset key below\n"
		 "plot '%s' using ($1/3600):2 with steps title 'GPUs "
		 "allocated', '%s' using ($1/3600):3 axes x1y2 with steps "
		 "title 'jobs queued', '%s' using ($1/3600):4 axes x1y2 with "
		 "steps title 'jobs active'\n",
		 png, w->name, total_gpus, total_gpus * 1.1 + 1, w->series,
		 w->series, w->series);
	fputs(cmd, g);
	if (pclose(g) != 0)
		fprintf(stderr, "copus-sim: gnuplot failed for %s\n", png);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "profiles", required_argument, NULL, 'p' },
		{ "policy", required_argument, NULL, 'P' },
		{ "remaining", required_argument, NULL, 'R' },
		{ "interval", required_argument, NULL, 'i' },
		{ "restart-delay", required_argument, NULL, 'r' },
		{ "app-rules", required_argument, NULL, 'A' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "summary", required_argument, NULL, 's' },
		{ "timeline", required_argument, NULL, 't' },
		{ "plot", required_argument, NULL, 'g' },
		{ "history", required_argument, NULL, 'H' },
		{ "save-history", required_argument, NULL, 'S' },
		{ "arena", required_argument, NULL, 'a' },
		{ "arena-rules", required_argument, NULL, 'L' },
		{ "throughput", required_argument, NULL, 'T' },
		{ "cell-choice", required_argument, NULL, 'C' },
		{ "max-rounds", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cluster = "16x4", *profiles = NULL, *policy = "pollux";
	const char *summary = NULL, *timeline = NULL, *png = NULL;
	const char *history_in = NULL, *history_out = NULL, *rules = NULL;
	double interval = 60, delay = 30, mean = 0;
	enum sim_remaining rem = SIM_REMAINING_PREDICT;
	long par = 2;
	struct sim_cluster c = { 0 };
	struct app apps[SIM_MAX_APPS];
	size_t napps = 0, nw = 0;
	struct wl *w = NULL;
	char err[SIM_ERR_LEN], tmpdir[] = "/tmp/copus-sim-XXXXXX";
	bool have_tmp = false;
	int opt, status = 1, total_gpus = 0;
	struct timespec ts0, ts1;
	const char *arena = NULL;
	struct arena_opts ao = { .rules = ARENA_RULES_ARENA,
				 .throughput = ARENA_THROUGHPUT_ORACLE,
				 .max_rounds = 6000 };

	clock_gettime(CLOCK_MONOTONIC, &ts0);
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;

		switch (opt) {
		case 'c': cluster = optarg; break;
		case 'p': profiles = optarg; break;
		case 'P': policy = optarg; break;
		case 'R':
			if (strcmp(optarg, "predict") == 0) {
				rem = SIM_REMAINING_PREDICT;
			} else if (strcmp(optarg, "oracle") == 0) {
				rem = SIM_REMAINING_ORACLE;
			} else if (strcmp(optarg, "none") == 0) {
				rem = SIM_REMAINING_NONE;
			} else {
				fprintf(stderr, "copus-sim: --remaining: '%s' "
					"is not predict, oracle or none\n",
					optarg);
				return 2;
			}
			break;
		case 's': summary = optarg; break;
		case 't': timeline = optarg; break;
		case 'g': png = optarg; break;
		case 'H': history_in = optarg; break;
		case 'A': rules = optarg; break;
		case 'S': history_out = optarg; break;
		case 'i':
		case 'r':
			errno = 0;
			{
				double v = strtod(optarg, &end);

				if (*end || errno || !(v >= (opt == 'i')) ||
				    v > 86400 || v != floor(v)) {
					fprintf(stderr, "copus-sim: --%s: '%s' "
						"is not a whole number of "
						"seconds\n", opt == 'i' ?
						"interval" : "restart-delay",
						optarg);
					return 2;
				}
				if (opt == 'i')
					interval = v;
				else
					delay = v;
			}
			break;
		case 'j':
			par = strtol(optarg, &end, 10);
			if (*end || par < 1 || par > 256) {
				fprintf(stderr, "copus-sim: --jobs: '%s' is not "
					"in 1..256\n", optarg);
				return 2;
			}
			break;
		case 'a': arena = optarg; break;
		case 'L':
			if (strcmp(optarg, "arena") == 0) {
				ao.rules = ARENA_RULES_ARENA;
			} else if (strcmp(optarg, "honest") == 0) {
				ao.rules = ARENA_RULES_HONEST;
			} else {
				fprintf(stderr, "copus-sim: --arena-rules: '%s' "
					"is not arena or honest\n", optarg);
				return 2;
			}
			break;
		case 'T':
			if (strcmp(optarg, "oracle") == 0) {
				ao.throughput = ARENA_THROUGHPUT_ORACLE;
			} else if (strcmp(optarg, "planner") == 0) {
				ao.throughput = ARENA_THROUGHPUT_PLANNER;
			} else {
				fprintf(stderr, "copus-sim: --throughput: '%s' "
					"is not oracle or planner\n", optarg);
				return 2;
			}
			break;
		case 'C':
			if (strcmp(optarg, "all") == 0) {
				ao.choice = ARENA_CHOICE_ALL;
			} else if (strcmp(optarg, "count") == 0) {
				ao.choice = ARENA_CHOICE_COUNT;
			} else if (strcmp(optarg, "none") == 0) {
				ao.choice = ARENA_CHOICE_NONE;
			} else {
				fprintf(stderr, "copus-sim: --cell-choice: '%s' "
					"is not all, count or none\n", optarg);
				return 2;
			}
			break;
		case 'm':
			errno = 0;
			ao.max_rounds = strtol(optarg, &end, 10);
			if (*end || errno || ao.max_rounds < 1 ||
			    ao.max_rounds > 10000000) {
				fprintf(stderr, "copus-sim: --max-rounds: '%s' "
					"is not a number of rounds >= 1\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (arena != NULL) {
		if (optind < argc) {
			fprintf(stderr, "copus-sim: --arena reads its own trace; "
				"'%s' is not used\n", argv[optind]);
			return 2;
		}
		ao.policy = policy;
		ao.remaining = rem;
		return arena_main(arena, &ao, summary, timeline);
	}
	if (profiles == NULL || optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (sim_cluster_parse(cluster, &c, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		return 2;
	}
	if (history_in != NULL && read_history(history_in) != COPUS_OK) {
		sim_cluster_free(&c);
		free(history);
		return 2;
	}
	for (int k = 0; k < c.nnodes; k++)
		total_gpus += c.nodes[k].gpus;
	nw = (size_t)(argc - optind);
	w = calloc(nw, sizeof(*w));
	if (w == NULL)
		goto out;
	if (mkdtemp(tmpdir) == NULL) {
		fprintf(stderr, "copus-sim: mkdtemp: %s\n", strerror(errno));
		goto out;
	}
	have_tmp = true;
	for (size_t i = 0; i < nw; i++) {
		w[i].path = argv[optind + (int)i];
		wl_name(&w[i]);
		snprintf(w[i].series, sizeof(w[i].series), "%s/series-%zu",
			 tmpdir, i);
		snprintf(w[i].timeline, sizeof(w[i].timeline),
			 "%s/timeline-%zu", tmpdir, i);
		if (sim_workload_read(w[i].path, &w[i].jobs, &w[i].n, err,
				      sizeof(err)) != COPUS_OK) {
			fprintf(stderr, "copus-sim: %s\n", err);
			goto out;
		}
		for (size_t k = 0; k < w[i].n; k++) {
			struct sim_jobspec *j = &w[i].jobs[k];
			size_t a;

			for (a = 0; a < napps; a++)
				if (strcmp(apps[a].name, j->app_name) == 0)
					break;
			if (a == napps) {
				const char *tn[SIM_MAX_TYPES];

				if (napps == SIM_MAX_APPS) {
					fprintf(stderr, "copus-sim: more than "
						"%d models\n", SIM_MAX_APPS);
					goto out;
				}
				for (int t = 0; t < c.ntypes; t++)
					tn[t] = c.type_names[t];
				if (sim_app_load(&apps[a], profiles,
						 j->app_name, tn, c.ntypes, err,
						 sizeof(err)) != COPUS_OK) {
					fprintf(stderr, "copus-sim: %s (model "
						"of job %s in %s)\n", err,
						j->name, w[i].path);
					goto out;
				}
				napps++;
			}
			j->app = (int)a;
		}
	}
	if (rules && sim_app_rules(apps, napps, rules, err, sizeof(err)) !=
			     COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		goto out;
	}
	/* Run the workloads, up to 'par' at a time in child processes. */
	{
		pid_t *pids = calloc(nw, sizeof(pid_t));
		int *fds = calloc(nw, sizeof(int));
		size_t next = 0, running = 0, finished = 0;

		if (pids == NULL || fds == NULL) {
			free(pids);
			free(fds);
			goto out;
		}
		if (par == 1 || nw == 1) {
			for (size_t i = 0; i < nw; i++)
				run_one(&c, apps, &w[i], policy, rem, interval,
					delay, timeline != NULL, png != NULL);
		} else {
			while (finished < nw) {
				while (running < (size_t)par && next < nw) {
					int p[2];
					pid_t pid;

					if (pipe(p) != 0)
						break;
					fflush(NULL);
					pid = fork();
					if (pid < 0) {
						close(p[0]);
						close(p[1]);
						break;
					}
					if (pid == 0) {
						close(p[0]);
						run_one(&c, apps, &w[next],
							policy, rem, interval,
							delay,
							timeline != NULL,
							png != NULL);
						send_result(p[1], &w[next]);
						_exit(0);
					}
					close(p[1]);
					pids[next] = pid;
					fds[next] = p[0];
					next++;
					running++;
				}
				if (running == 0) {
					fprintf(stderr, "copus-sim: cannot "
						"start a process: %s\n",
						strerror(errno));
					free(pids);
					free(fds);
					goto out;
				}
				/* Collect the oldest running child. */
				recv_result(fds[finished], &w[finished]);
				waitpid(pids[finished], NULL, 0);
				finished++;
				running--;
			}
		}
		free(pids);
		free(fds);
	}
	status = 0;
	for (size_t i = 0; i < nw; i++) {
		if (w[i].rc != COPUS_OK) {
			fprintf(stderr, "copus-sim: %s: %s\n", w[i].name,
				w[i].err);
			status = 1;
			continue;
		}
		mean += w[i].res.avg_jct / (double)nw;
		printf("%-16s %-8s avg_jct %8.0f s  p99 %8.0f s  makespan "
		       "%8.0f s  max_ftf %6.2f  gpu_hours %7.1f  restarts "
		       "%5ld  (%.2f s)\n", w[i].name, policy, w[i].res.avg_jct,
		       w[i].res.p99_jct, w[i].res.makespan, w[i].res.max_ftf,
		       w[i].res.gpu_hours, w[i].res.restarts, w[i].res.wall);
		printf("%-16s %-8s decisions: median %.2f ms, p95 %.2f ms, max "
		       "%.2f ms of CPU\n", w[i].name, policy,
		       w[i].res.decide_ms_median, w[i].res.decide_ms_p95,
		       w[i].res.decide_ms_max);
		if (used_remaining(policy, rem) == SIM_REMAINING_PREDICT)
			printf("%-16s %-8s remaining predicted with median error "
			       "%.0f%%, 90th percentile %.0f%% (%ld job-rounds, "
			       "%ld unknown); %ld trainings, %.2f s\n", w[i].name,
			       policy, 100 * w[i].res.pred_err_median,
			       100 * w[i].res.pred_err_p90,
			       w[i].res.pred_samples, w[i].res.pred_unknown,
			       w[i].res.pred_trainings, w[i].res.pred_seconds);
	}
	if (status != 0)
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	printf("mean avg_jct %.0f s over %zu workloads, policy %s, wall %.2f "
	       "s\n", mean, nw, policy, (double)(ts1.tv_sec - ts0.tv_sec) +
	       (double)(ts1.tv_nsec - ts0.tv_nsec) * 1e-9);
	if (summary &&
	    write_summary(summary, policy, used_remaining(policy, rem), w, nw,
			  mean) != COPUS_OK)
		status = 1;
	if (history_out && write_history(history_out, w, nw) != COPUS_OK)
		status = 1;
	if (timeline) {
		FILE *out = fopen(timeline, "w");

		if (out == NULL) {
			fprintf(stderr, "copus-sim: %s: %s\n", timeline,
				strerror(errno));
			status = 1;
		} else {
			fprintf(out, "workload,time,job,gpus,nodes,batch,"
				"goodput,progress,epoch,type\n");
			for (size_t i = 0; i < nw; i++) {
				FILE *in = fopen(w[i].timeline, "r");
				char buf[8192];
				size_t r;

				if (in == NULL)
					continue;
				while ((r = fread(buf, 1, sizeof(buf), in)) > 0)
					fwrite(buf, 1, r, out);
				fclose(in);
			}
			if (fclose(out) != 0)
				status = 1;
		}
	}
	if (png) {
		for (size_t i = 0; i < nw; i++) {
			char name[1024];

			if (nw == 1) {
				snprintf(name, sizeof(name), "%s", png);
			} else {
				char base[512], *dot;

				snprintf(base, sizeof(base), "%s", png);
				dot = strrchr(base, '.');
				if (dot && strcmp(dot, ".png") == 0)
					*dot = '\0';
				snprintf(name, sizeof(name), "%s-%s.png", base,
					 w[i].name);
			}
			plot(name, &w[i], total_gpus);
		}
	}
out:
	if (w) {
		for (size_t i = 0; i < nw; i++) {
			if (have_tmp) {
				unlink(w[i].series);
				unlink(w[i].timeline);
			}
			free(w[i].jobs);
			sim_result_free(&w[i].res);
		}
		free(w);
	}
	if (have_tmp)
		rmdir(tmpdir);
	for (size_t a = 0; a < napps; a++)
		sim_app_free(&apps[a]);
	sim_cluster_free(&c);
	free(history);
	return status;
}
