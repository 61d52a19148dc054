/*
 * What copus-sim reports of its workloads: a few lines each on stdout, the
 * JSON summary (--summary), the timelines of all of them in one file
 * (--timeline) and a plot of each (--plot, with gnuplot).
 */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef GNUPLOT
#define GNUPLOT ""
#endif

static const char *const remaining_names[] = { "predict", "oracle", "none" };

/*
 * The remaining-time knowledge a policy actually gets, as its traits say:
 * --remaining for a policy that takes a prediction (copus); the oracle for
 * one that assumes the truth (fifo's backfill, optimus); none for the
 * others (and for a name that is no policy).
 */
enum sim_remaining used_remaining(const char *policy, enum sim_remaining rem)
{
	enum sim_remaining used = SIM_REMAINING_NONE;
	copus_policy *p;

	if (copus_policy_create(policy, NULL, &p) != COPUS_OK)
		return used;
	switch (copus_policy_traits(p)->remaining) {
	case COPUS_REMAINING_PREDICT: used = rem; break;
	case COPUS_REMAINING_ORACLE: used = SIM_REMAINING_ORACLE; break;
	case COPUS_REMAINING_NONE: break;
	}
	copus_policy_destroy(p);
	return used;
}

/* Whether the policy learns the jobs' models (the one that --probes feeds). */
bool learns_models(const char *policy)
{
	bool learns = false;
	copus_policy *p;

	if (copus_policy_create(policy, NULL, &p) != COPUS_OK)
		return learns;
	learns = copus_policy_traits(p)->models == COPUS_MODELS_LEARNED;
	copus_policy_destroy(p);
	return learns;
}

/* A number for JSON, or null when it is not one (no samples). */
static json_object *json_number(double v)
{
	return isfinite(v) ? json_object_new_double(v) : NULL;
}

int write_summary(const char *path, const char *policy, enum sim_remaining rem,
		  bool probes, struct wl *w, size_t nw, double mean)
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
	json_object *rj = json_object_new_object();
	json_object *dm = json_object_new_object();
	int rc = COPUS_OK;

	for (size_t i = 0; i < nw; i++) {
		json_object *jw = json_object_new_object();
		json_object *jr = json_object_new_object();
		const struct sim_result *r = &w[i].res;

		for (size_t k = 0; k < r->njobs; k++) {
			json_object_object_add(jw, r->names[k],
					       json_object_new_double(
						       r->jct[k]));
			json_object_object_add(jr, r->names[k],
					       json_object_new_int(
						       r->restarts_of[k]));
		}
		json_object_object_add(jcts, w[i].name, jw);
		json_object_object_add(rj, w[i].name, jr);
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
					       json_object_new_double(
						       r->decide_ms_median));
			json_object_object_add(e, "p95",
					       json_object_new_double(
						       r->decide_ms_p95));
			json_object_object_add(e, "max",
					       json_object_new_double(
						       r->decide_ms_max));
			json_object_object_add(dm, w[i].name, e);
		}
		if (rem == SIM_REMAINING_PREDICT) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "median",
					       json_number(r->pred_err_median));
			json_object_object_add(e, "p90",
					       json_number(r->pred_err_p90));
			json_object_object_add(e, "samples",
					       json_object_new_int64(
						       r->pred_samples));
			json_object_object_add(e, "unknown",
					       json_object_new_int64(
						       r->pred_unknown));
			json_object_object_add(e, "trainings",
					       json_object_new_int64(
						       r->pred_trainings));
			json_object_object_add(e, "cpu_seconds",
					       json_object_new_double(
						       r->pred_seconds));
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
	/* Each job's restarts, so that a mean over jobs can be read beside
	 * the one job a policy moved most (thrash). */
	json_object_object_add(root, "job_restarts", rj);
	/* CPU milliseconds of the policy's decision per round. */
	json_object_object_add(root, "decide_ms", dm);
	json_object_object_add(root, "remaining",
			       json_object_new_string(remaining_names[rem]));
	/* Whether the policy was told the jobs' speeds on the types they had
	 * not run on (--probes), which the plugin is not. */
	json_object_object_add(root, "probes", json_object_new_boolean(probes));
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

int print_results(const struct wl *w, size_t nw, const char *policy,
		  enum sim_remaining rem, double *mean)
{
	int status = 0;

	for (size_t i = 0; i < nw; i++) {
		if (w[i].rc != COPUS_OK) {
			fprintf(stderr, "copus-sim: %s: %s\n", w[i].name,
				w[i].err);
			status = 1;
			continue;
		}
		*mean += w[i].res.avg_jct / (double)nw;
		printf("%-16s %-8s avg_jct %8.0f s  p99 %8.0f s  makespan "
		       "%8.0f s  max_ftf %6.2f  gpu_hours %7.1f  restarts "
		       "%5ld  (%.2f s)\n",
		       w[i].name, policy, w[i].res.avg_jct, w[i].res.p99_jct,
		       w[i].res.makespan, w[i].res.max_ftf, w[i].res.gpu_hours,
		       w[i].res.restarts, w[i].res.wall);
		printf("%-16s %-8s decisions: median %.2f ms, p95 %.2f ms, max "
		       "%.2f ms of CPU\n",
		       w[i].name, policy, w[i].res.decide_ms_median,
		       w[i].res.decide_ms_p95, w[i].res.decide_ms_max);
		if (used_remaining(policy, rem) == SIM_REMAINING_PREDICT)
			printf("%-16s %-8s remaining predicted with median error "
			       "%.0f%%, 90th percentile %.0f%% (%ld job-rounds, "
			       "%ld unknown); %ld trainings, %.2f s\n",
			       w[i].name, policy,
			       100 * w[i].res.pred_err_median,
			       100 * w[i].res.pred_err_p90,
			       w[i].res.pred_samples, w[i].res.pred_unknown,
			       w[i].res.pred_trainings, w[i].res.pred_seconds);
	}
	return status;
}

int write_timeline(const char *path, const struct wl *w, size_t nw)
{
	FILE *out = fopen(path, "w");

	if (out == NULL) {
		fprintf(stderr, "copus-sim: %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(out, "workload,time,job,gpus,nodes,batch,goodput,progress,"
		     "epoch,type\n");
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
		return 1;
	return 0;
}

void draw_plots(const char *png, const struct wl *w, size_t nw, int total_gpus)
{
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
