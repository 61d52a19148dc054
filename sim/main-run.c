/*
 * copus-sim's workloads simulated, each in a child process, up to --jobs at
 * a time (or in copus-sim itself for one at a time); a child sends its
 * result back as text lines over a pipe.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static int run_one(const struct sim_cluster *c, const struct app *apps,
		   struct wl *w, const struct cli_opts *co,
		   const copus_history_entry *history, size_t nhistory)
{
	struct sim_opts o = { .policy = co->policy,
			      .remaining = co->rem,
			      .interval = co->interval,
			      .restart_delay = co->delay,
			      .delays = co->delays,
			      .seed = co->seed,
			      .workload_name = w->name,
			      .history = history,
			      .nhistory = nhistory,
			      .probes = co->probes,
			      .equal_per_node = co->equal_per_node,
			      .restart_measured = co->restart_measured,
			      .min_run = co->min_run,
			      .round_phase = co->phase,
			      .event_rounds = co->event_rounds };
	bool want_timeline = co->timeline != NULL;
	bool want_series = co->png != NULL;
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

		fprintf(f,
			"OK\t%zu\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%ld\t"
			"%ld\t%.17g\t%.17g\t%.17g\t%ld\t%ld\t%ld\t%.17g\t"
			"%.17g\t%.17g\t%.17g\n",
			r->njobs, r->avg_jct, r->p99_jct, r->makespan,
			r->max_ftf, r->gpu_hours, r->restarts, r->rounds,
			r->wall, r->pred_err_median, r->pred_err_p90,
			r->pred_samples, r->pred_unknown, r->pred_trainings,
			r->pred_seconds, r->decide_ms_median, r->decide_ms_p95,
			r->decide_ms_max);
		for (size_t i = 0; i < r->njobs; i++)
			fprintf(f, "%s\t%.17g\t%.17g\t%d\n", r->names[i],
				r->jct[i], r->ftf[i], r->restarts_of[i]);
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
	if (sscanf(line,
		   "OK\t%zu\t%lg\t%lg\t%lg\t%lg\t%lg\t%ld\t%ld\t%lg"
		   "\t%lg\t%lg\t%ld\t%ld\t%ld\t%lg\t%lg\t%lg\t%lg",
		   &r->njobs, &r->avg_jct, &r->p99_jct, &r->makespan,
		   &r->max_ftf, &r->gpu_hours, &r->restarts, &r->rounds,
		   &r->wall, &r->pred_err_median, &r->pred_err_p90,
		   &r->pred_samples, &r->pred_unknown, &r->pred_trainings,
		   &r->pred_seconds, &r->decide_ms_median, &r->decide_ms_p95,
		   &r->decide_ms_max) != 18 ||
	    r->njobs != w->n)
		goto out;
	r->names = calloc(r->njobs + 1, sizeof(*r->names));
	r->jct = calloc(r->njobs + 1, sizeof(double));
	r->ftf = calloc(r->njobs + 1, sizeof(double));
	r->restarts_of = calloc(r->njobs + 1, sizeof(int));
	if (!r->names || !r->jct || !r->ftf || !r->restarts_of)
		goto out;
	for (size_t i = 0; i < r->njobs; i++) {
		char *t1, *t2, *t3;

		if (getline(&line, &cap, f) < 0)
			goto out;
		t1 = strchr(line, '\t');
		if (t1 == NULL)
			goto out;
		*t1++ = '\0';
		t2 = strchr(t1, '\t');
		if (t2 == NULL)
			goto out;
		t3 = strchr(t2 + 1, '\t');
		if (t3 == NULL)
			goto out;
		snprintf(r->names[i], sizeof(r->names[i]), "%s", line);
		r->jct[i] = strtod(t1, NULL);
		r->ftf[i] = strtod(t2 + 1, NULL);
		r->restarts_of[i] = atoi(t3 + 1);
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
		    copus_history_parse(line, &r->finished[i], &why) !=
			    COPUS_OK)
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

/* Run the workloads, up to --jobs at a time in child processes. */
int run_workloads(const struct sim_cluster *c, const struct app *apps,
		  struct wl *w, size_t nw, const struct cli_opts *o,
		  const copus_history_entry *history, size_t nhistory)
{
	pid_t *pids = calloc(nw, sizeof(pid_t));
	int *fds = calloc(nw, sizeof(int));
	size_t next = 0, running = 0, finished = 0;

	if (pids == NULL || fds == NULL) {
		free(pids);
		free(fds);
		return -1;
	}
	if (o->par == 1 || nw == 1) {
		for (size_t i = 0; i < nw; i++)
			run_one(c, apps, &w[i], o, history, nhistory);
	} else {
		while (finished < nw) {
			while (running < (size_t)o->par && next < nw) {
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
					run_one(c, apps, &w[next], o, history,
						nhistory);
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
				fprintf(stderr,
					"copus-sim: cannot "
					"start a process: %s\n",
					strerror(errno));
				free(pids);
				free(fds);
				return -1;
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
	return 0;
}
