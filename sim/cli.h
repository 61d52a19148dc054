/*
 * copus-sim's command line: the options of a run of workloads (struct
 * cli_opts), a workload and its result (struct wl), and the entry of each
 * part: main.c, its options and usage; main-arena.c, the --arena mode;
 * main-workloads.c, the mode that replays Pollux-format workloads, which
 * calls main-run.c (the workloads simulated in child processes),
 * main-history.c (--history and --save-history) and main-report.c (the
 * lines printed, the summary, the timeline and the plots). Private to
 * copus-sim: main.c calls main-arena.c and main-workloads.c, and none of
 * them calls back.
 */
#ifndef COPUS_SIM_CLI_H
#define COPUS_SIM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <copus/predict.h>

#include "arena.h"
#include "sim.h"

/* The options of a run of workloads, as main.c parses them. */
struct cli_opts {
	const char *cluster, *profiles, *policy;
	const char *summary, *timeline, *png;
	const char *history_in, *history_out, *rules;
	const char *gpus; /* --gpus FILE.json */
	double interval, delay;
	double min_run; /* --min-run (sim_opts.min_run) */
	double phase;	/* --round-phase (sim_opts.round_phase) */
	double event_rounds; /* --event-rounds (sim_opts.event_rounds) */
	/* --restart-delays FILE and --seed, and the costs read from FILE
	 * (sim_opts.delays; NULL: none). */
	const char *delays_file;
	unsigned long seed;
	const struct sim_delays *delays;
	enum sim_remaining rem;
	bool probes;	     /* --probes (sim_opts.probes) */
	bool equal_per_node; /* --equal-per-node (sim_opts.equal_per_node) */
	bool restart_measured; /* --restart-measured (sim_opts.restart_measured) */
	long par;	     /* workloads simulated at once (--jobs) */
};

/* A workload: its file, its jobs, and its result once simulated. */
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

/* main-arena.c */
/* copus-sim --arena: read the world, replay it, report. */
int arena_main(const char *dir, struct arena_opts *o, const char *summary,
	       const char *timeline);

/* main-workloads.c */
/*
 * copus-sim WORKLOAD.csv...: read the cluster, the history and the
 * workloads with their models, simulate them and report; the exit status.
 * t0 is when copus-sim started (for the wall time it prints).
 */
int workloads_main(const struct cli_opts *o, char *const *paths, size_t nw,
		   const struct timespec *t0);

/* main-run.c */
/*
 * Simulates the nw workloads of w, up to o->par at a time in child
 * processes, each result (or error) in its struct wl. -1 when no process
 * could be started, else 0.
 */
int run_workloads(const struct sim_cluster *c, const struct app *apps,
		  struct wl *w, size_t nw, const struct cli_opts *o,
		  const copus_history_entry *history, size_t nhistory);

/* main-history.c */
/*
 * Reads a history file into *history (malloc'd, which the caller frees
 * also on failure) and *nhistory; a status, with a message on stderr.
 */
int read_history(const char *path, copus_history_entry **history,
		 size_t *nhistory);
/* Writes the jobs that finished, workload by workload (beside, renamed). */
int write_history(const char *path, const struct wl *w, size_t nw);

/* main-report.c */
/*
 * Prints each workload's figures (or its error) and adds its mean JCT's
 * share to *mean; 1 when a workload failed, else 0.
 */
int print_results(const struct wl *w, size_t nw, const char *policy,
		  enum sim_remaining rem, double *mean);
/* The JSON summary (--summary) of the workloads. */
int write_summary(const char *path, const char *policy, enum sim_remaining rem,
		  bool probes, struct wl *w, size_t nw, double mean);
/* The workloads' timelines in one file (--timeline); 1 on failure. */
int write_timeline(const char *path, const struct wl *w, size_t nw);
/* A plot per workload (--plot), png itself when there is one workload. */
void draw_plots(const char *png, const struct wl *w, size_t nw, int total_gpus);
/* The remaining-time knowledge a policy actually gets. */
enum sim_remaining used_remaining(const char *policy, enum sim_remaining rem);
/* Whether the policy learns the jobs' models (what --probes changes). */
bool learns_models(const char *policy);

#endif /* COPUS_SIM_CLI_H */
