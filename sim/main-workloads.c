/*
 * copus-sim WORKLOAD.csv...: the cluster, the history and each workload
 * with the models of its jobs read, the workloads simulated
 * (main-run.c) and the results reported (main-report.c).
 */
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/file.h"
#include "cli.h"

/*
 * Reads --gpus: GPU constants in copus/planner.h's text (or built-in types
 * under the site's names) into c; a status, with a message on stderr.
 */
static int read_gpus(const char *path, struct sim_cluster *c)
{
	char err[SIM_ERR_LEN], *text = NULL;
	int rc;

	c->gpus = calloc(COPUS_PLANNER_MAX_GPUS, sizeof(*c->gpus));
	if (c->gpus == NULL)
		return COPUS_ENOMEM;
	rc = copus__file_read(path, &text, NULL, err, sizeof(err));
	if (rc == COPUS_OK) {
		rc = copus_planner_gpus_parse(text, c->gpus,
					      COPUS_PLANNER_MAX_GPUS, &c->ngpus,
					      err, sizeof(err));
		if (rc != COPUS_OK)
			fprintf(stderr, "copus-sim: --gpus: %s: %s\n", path,
				err);
	} else {
		fprintf(stderr, "copus-sim: --gpus: %s\n", err);
	}
	free(text);
	return rc;
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

int workloads_main(const struct cli_opts *o, char *const *paths, size_t nw,
		   const struct timespec *t0)
{
	struct sim_cluster c = { 0 };
	struct app apps[SIM_MAX_APPS];
	size_t napps = 0;
	struct wl *w = NULL;
	char err[SIM_ERR_LEN], tmpdir[] = "/tmp/copus-sim-XXXXXX";
	bool have_tmp = false;
	int status = 1, total_gpus = 0;
	/* The history given with --history (the same for every workload). */
	copus_history_entry *history = NULL;
	size_t nhistory = 0;
	double mean = 0;
	struct sim_delays delays = { 0 };
	struct timespec ts1;
	struct cli_opts ro = *o; /* o with the costs of --restart-delays */

	if (sim_cluster_parse(o->cluster, &c, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		return 2;
	}
	if (o->gpus != NULL && read_gpus(o->gpus, &c) != COPUS_OK) {
		sim_cluster_free(&c);
		return 2;
	}
	if (o->history_in != NULL &&
	    read_history(o->history_in, &history, &nhistory) != COPUS_OK) {
		sim_cluster_free(&c);
		free(history);
		return 2;
	}
	for (int k = 0; k < c.nnodes; k++)
		total_gpus += c.nodes[k].gpus;
	w = calloc(nw, sizeof(*w));
	if (w == NULL)
		goto out;
	if (mkdtemp(tmpdir) == NULL) {
		fprintf(stderr, "copus-sim: mkdtemp: %s\n", strerror(errno));
		goto out;
	}
	have_tmp = true;
	for (size_t i = 0; i < nw; i++) {
		w[i].path = paths[i];
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
					fprintf(stderr,
						"copus-sim: more than "
						"%d models\n",
						SIM_MAX_APPS);
					goto out;
				}
				for (int t = 0; t < c.ntypes; t++)
					tn[t] = c.type_names[t];
				if (sim_app_load(&apps[a], o->profiles,
						 j->app_name, tn, c.ntypes, err,
						 sizeof(err)) != COPUS_OK) {
					fprintf(stderr,
						"copus-sim: %s (model "
						"of job %s in %s)\n",
						err, j->name, w[i].path);
					goto out;
				}
				napps++;
			}
			j->app = (int)a;
		}
	}
	if (o->rules && sim_app_rules(apps, napps, o->rules, err,
				      sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		goto out;
	}
	if (o->delays_file && sim_restart_delays(o->delays_file, &delays, err,
						 sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		goto out;
	}
	ro.delays = o->delays_file ? &delays : NULL;
	if (run_workloads(&c, apps, w, nw, &ro, history, nhistory) != 0)
		goto out;
	status = print_results(w, nw, o->policy, o->rem, &mean);
	if (status != 0)
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	printf("mean avg_jct %.0f s over %zu workloads, policy %s, wall %.2f "
	       "s\n",
	       mean, nw, o->policy,
	       (double)(ts1.tv_sec - t0->tv_sec) +
		       (double)(ts1.tv_nsec - t0->tv_nsec) * 1e-9);
	if (o->summary && write_summary(o->summary, o->policy,
					used_remaining(o->policy, o->rem),
					o->probes && learns_models(o->policy),
					w, nw, mean) != COPUS_OK)
		status = 1;
	if (o->history_out && write_history(o->history_out, w, nw) != COPUS_OK)
		status = 1;
	if (o->timeline && write_timeline(o->timeline, w, nw) != 0)
		status = 1;
	if (o->png)
		draw_plots(o->png, w, nw, total_gpus);
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
	sim_delays_free(&delays);
	return status;
}
