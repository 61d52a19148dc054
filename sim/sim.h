/*
 * copus-sim: a discrete-time replay of a workload trace on a cluster whose
 * jobs behave as the measured profiles say (Pollux's simulator rules), with
 * the decisions taken by a copus policy (include/copus/policy.h).
 */
#ifndef COPUS_SIM_H
#define COPUS_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <copus/model.h>
#include <copus/planner.h>
#include <copus/policy.h>
#include <copus/predict.h>

#define SIM_MAX_TYPES 8
#define SIM_MAX_APPS 16
#define SIM_ERR_LEN 1024

/* The next number of a splitmix64 sequence whose state is *s. */
static inline uint64_t sim_rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------- csv.c */

/* A parsed CSV file: a header and rows of fields, all kept as strings. */
struct csv {
	char path[256];
	int ncols;
	char **header;
	size_t nrows;
	char ***rows; /* rows[i][c] */
	long *lines;  /* the file line of each row (1-based) */
};

/* Read a whole CSV file; on error, err names the file and line. */
int sim_csv_read(const char *path, struct csv *out, char *err, size_t errlen);
void sim_csv_free(struct csv *c);
/* The index of a named column, or -1 with a message in err. */
int sim_csv_col(const struct csv *c, const char *name, char *err,
		size_t errlen);
/* A field as a number; on error, err names file, line, column and value. */
int sim_csv_double(const struct csv *c, size_t row, int col, double *out,
		   char *err, size_t errlen);

/* ----------------------------------------------------------- trace.c */

/* One measured step: placement (or nodes/replicas) and local batch. */
struct prow {
	char placement[24]; /* digits, "" for scalability rows */
	int nodes;
	int replicas;
	double local;
	double step;
	double sync;
};

struct ptable {
	struct prow *rows;
	size_t n;
	struct prow *grid; /* per (nodes, replicas, local) means + scalability */
	size_t ngrid;
};

/* One validation run at total batch 'batch': one row per epoch. */
struct valid {
	double batch;
	size_t nepochs;
	double *progress, *iteration, *sqr, *var;
};

/* A model's measured behaviour. */
struct app {
	char name[32];
	struct ptable tab[SIM_MAX_TYPES]; /* per cluster GPU type */
	struct valid *v;
	size_t nv;
	double init_batch, max_batch;
	int min_local, max_local;
	int max_epochs;
	/* The batch the model keeps under a policy that picks batches (0:
	 * none, the policy picks), and the most GPUs an elastic policy may
	 * give it (0: as many as its batch allows). */
	double fixed_batch;
	int max_gpus;
	copus_model oracle[SIM_MAX_TYPES]; /* fitted to the whole table */
	bool has_oracle[SIM_MAX_TYPES];
	/* From --app-rules: the model trains this many times slower than its
	 * profile says (1: as profiled), and a restart costs it this many
	 * seconds (< 0: --restart-delay). */
	double slowdown;
	double restart_delay;
};

/*
 * Read per-model rules (CSV: application,slowdown,restart_delay) into the
 * loaded models that the file names; models it does not name keep theirs,
 * rows for models not loaded are ignored. err names file, line and column.
 */
int sim_app_rules(struct app *apps, size_t napps, const char *path, char *err,
		  size_t len);

/*
 * Measured costs of an allocation, in seconds: of a job's first start
 * (first) and of its later ones (rescale). A set that is empty takes the
 * other's.
 */
struct sim_delays {
	double *first, *rescale;
	size_t nfirst, nrescale;
};

/*
 * Read the costs of --restart-delays: CSV with a restart_delay column
 * (seconds in [0, 86400]) and an optional first column (1: a first start's
 * cost, 0: a later allocation's; without it, every row is both); at least
 * one row. err names file, line and column. sim_delays_free releases them.
 */
int sim_restart_delays(const char *path, struct sim_delays *d, char *err,
		       size_t len);
void sim_delays_free(struct sim_delays *d);

/* Completion epochs of Pollux's simulator. */
int sim_app_epochs(const char *name);

/*
 * Load <dir>/<name>/ for the cluster's GPU types (type name "" reads
 * placements.csv; otherwise placements-<type>.csv).
 */
int sim_app_load(struct app *a, const char *dir, const char *name,
		 const char *const *types, int ntypes, char *err, size_t len);
void sim_app_free(struct app *a);

/*
 * True step and sync time of a placement (GPUs per node, in node order,
 * zeros ignored) at micro-batch 'local' on GPU type t.
 */
int sim_app_throughput(const struct app *a, int t, const int *placement, int nn,
		       double local, double *step, double *sync);
/* Gradient statistics at total batch 'batch' during epoch 'epoch'. */
void sim_app_grad(const struct app *a, double batch, int epoch, double *sqr,
		  double *var);
/* Progress at the end of 'epoch' epochs (0 for 0). */
double sim_app_progress(const struct app *a, int epoch);
/* Iterations done after finishing epoch index 'epoch' at batch 'batch'. */
double sim_app_iteration(const struct app *a, double batch, int epoch);

/* -------------------------- engine.c, engine-input.c, engine-job.c */

struct sim_cluster {
	int ntypes;
	char type_names[SIM_MAX_TYPES][32]; /* "" for an untyped cluster */
	int nnodes;
	copus_node *nodes;
	/* The GPU constants of --gpus (copus/planner.h's text; NULL: none),
	 * whose types' speeds stand over the built-in table's in estimates
	 * across types, as copus_planner_gpus does in the plugin. */
	copus_planner_gpu_type *gpus;
	int ngpus;
};

/* Parse "16x4" or "aws:6x4,rtx:3x8". */
int sim_cluster_parse(const char *spec, struct sim_cluster *out, char *err,
		      size_t len);
void sim_cluster_free(struct sim_cluster *c);

/* Where the copus policy's remaining work comes from. */
enum sim_remaining {
	SIM_REMAINING_PREDICT, /* copus's predictor, trained on finished jobs */
	SIM_REMAINING_ORACLE,  /* the true time left on the request */
	SIM_REMAINING_NONE,    /* unknown to the policy */
};

struct sim_opts {
	const char *policy;
	/* for a policy that takes a prediction of the remaining time; the
	 * others get the oracle or nothing, as their traits say */
	enum sim_remaining remaining;
	double interval;
	double restart_delay;
	FILE *timeline; /* NULL: none */
	const char *workload_name;
	FILE *series; /* per round: time, used GPUs, queued */
	/* Finished jobs the predictor knows before the first round (a
	 * cluster's history; see copus/predict.h). */
	const copus_history_entry *history;
	size_t nhistory;
	/*
	 * What a policy that learns models is told of a job's speed on the
	 * GPU types it is not running on. false (the default): what the
	 * plugin learns from the job's hints, its model on the type of its
	 * last run and none on the others (or that model on every type when
	 * the type is named "default"). true (--probes): a one-GPU step timed
	 * on every type when the job arrives, as Sia profiles jobs, scales
	 * its model to the types it has not run on.
	 */
	bool probes;
	/* Every job gets the same GPUs on each of its nodes, as Slurm gives
	 * them and as sched/copus asks its policy (--equal-per-node). */
	bool equal_per_node;
	/*
	 * --restart-measured: the policy is told the mean cost of the last
	 * SIM_COSTS_MAX moves (a running job's allocation changed, not a
	 * start from the queue), each counted once the job trains again, and
	 * restart_delay until then: what sched/copus measures and counts with
	 * copus_restart_cost=measured.
	 */
	bool restart_measured;
	/* --min-run: least seconds a job trains on its GPUs before the
	 * decisions may move it again (sched/copus's copus_restart_delay;
	 * with equal_per_node), 0 for none. */
	double min_run;
	/* --round-phase: the rounds fall at round_phase, round_phase +
	 * interval, ... (0: at interval, 2 interval, ...), as a testbed's
	 * slurmctld ticks at its own phase. */
	double round_phase;
	/*
	 * --event-rounds S: between two rounds, every S seconds in which a
	 * job arrived or finished, an event round starts pending jobs on the
	 * free GPUs (the policy decides for them alone; running jobs keep
	 * theirs), as sched/copus's event rounds do. 0: none.
	 */
	double event_rounds;
	/* --restart-delays: each allocation costs one of the measured costs,
	 * drawn uniformly with seed (none: restart_delay, which the policy is
	 * told in either case). */
	const struct sim_delays *delays;
	uint64_t seed;
};

/* The moves whose cost --restart-measured averages. */
#define SIM_COSTS_MAX 16

struct sim_jobspec {
	char name[64];
	double submit;
	char app_name[32];
	int app;      /* index into the app table, set by the caller */
	int replicas; /* the user's request */
	double batch;
};

struct sim_result {
	size_t njobs;
	char (*names)[64];
	double *jct; /* < 0: did not finish */
	double *ftf;
	int *restarts_of; /* per job: its starts after the first */
	double avg_jct, p99_jct, makespan, max_ftf, gpu_hours;
	long restarts; /* of all jobs */
	/* The cost of a move the policy was told in the last round with
	 * jobs: restart_delay, or with restart_measured the measured mean. */
	double restart_counted;
	/* The predictor's relative error on remaining time (sampled every
	 * round over running jobs): median and 90th percentile; NAN when not
	 * predicting. */
	double pred_err_median, pred_err_p90;
	/* Job-rounds with a prediction and without one (no job finished
	 * yet), and the predictor's cost: trainings of the forest and CPU
	 * seconds spent learning and predicting. */
	long pred_samples, pred_unknown, pred_trainings;
	double pred_seconds;
	double wall;
	long rounds;
	/* CPU milliseconds of the policy's decision per round that had jobs:
	 * median, 95th percentile and most. */
	double decide_ms_median, decide_ms_p95, decide_ms_max;
	/* The jobs that finished, in order, as history entries: the work is
	 * in seconds alone on the request, what the predictor learns. */
	copus_history_entry *finished;
	size_t nfinished;
};

/* Read a Pollux workload CSV (app indices left at -1). */
int sim_workload_read(const char *path, struct sim_jobspec **out, size_t *n,
		      char *err, size_t len);

/* Run one workload to completion (or the round limit). */
int sim_run(const struct sim_cluster *c, const struct app *apps,
	    const struct sim_jobspec *jobs, size_t n, const struct sim_opts *o,
	    struct sim_result *res, char *err, size_t len);
void sim_result_free(struct sim_result *r);

/* v in ascending order. */
void sim_sort_doubles(double *v, size_t n);
/*
 * The q-quantile of v's n values by nearest rank (the ceil(q n)-th
 * smallest; the median of an even count is the lower middle one), sorting
 * v; NAN when n is 0. Every quantile the simulator and copus-plan report
 * (p99 JCT, decision times, prediction and planner errors) is this one.
 */
double sim_quantile(double *v, size_t n, double q);

/*
 * The time a job takes alone on its requested GPUs with its requested
 * batch (consolidated on nodes of g GPUs of type t), from the tables; the
 * oracle that fifo's backfill and the finish-time fairness use. from_epoch
 * and progress give the starting point.
 */
double sim_solo_time(const struct app *a, int t, int g, int replicas,
		     double batch, int from_epoch, double progress);

/* Micro-batch and accumulation of a total batch on 'replicas' GPUs. */
void sim_split_batch(const struct app *a, double batch, int replicas,
		     int *atomic, int *accum);

#endif /* COPUS_SIM_H */
