/*
 * copus-sim --arena: the world of Arena's simulator (Crius, EuroSys'26):
 * its job trace, its cluster, its table of measured iteration times with
 * the rules by which a cell that was not measured is valued, and a replay
 * of the trace in Arena's 300 s rounds with the decisions taken by a copus
 * policy (include/copus/policy.h).
 *
 * Reader: contributors to copus-sim and its tests. sim/arena.c reads the
 * world and answers the lookups; sim/arena-run.c replays it.
 */
#ifndef COPUS_SIM_ARENA_H
#define COPUS_SIM_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <copus/policy.h>

#include "sim.h"

#define ARENA_ROUND 300.0     /* seconds a round lasts */
#define ARENA_MAX_TYPES 8
#define ARENA_MAX_FAMILIES 16
#define ARENA_MAX_SIZES 16
#define ARENA_MAX_GPUS 16     /* job sizes are 1, 2, 4, 8, 16 GPUs */
/* A job's work is the trace's num_iteration divided by this (Arena's
 * simulator runs a fifth of each job). */
#define ARENA_ITER_DIVISOR 5

/* A model family and its sizes, smallest first. */
struct arena_family {
	char name[32];
	int nsizes;
	char sizes[ARENA_MAX_SIZES][16];
	double params[ARENA_MAX_SIZES]; /* parameters, for the order */
};

/* One measured value of the database: a model, batch and cell. */
struct arena_entry {
	int family, size, batch;
	int type;       /* index into the world's types */
	int nodes, per; /* nodes, GPUs on each */
	double seconds; /* as stored: -1 when no plan fits */
};

/* The cells of one model and batch that the trace uses. */
struct arena_model {
	int family, size, batch;
	copus_cell_time *cells; /* the feasible ones, by type, GPUs, nodes */
	int ncells;
};

/* One job of the trace. */
struct arena_job {
	char name[64];
	long line;        /* in the trace file */
	double submitted; /* the trace's submission time */
	long round;       /* the round that submits it */
	long iters;       /* iterations to run */
	int model;        /* index into the world's models */
	int gpus, type;   /* the request */
};

struct arena_world {
	int ntypes;
	char type_names[ARENA_MAX_TYPES][16];
	int node_num[ARENA_MAX_TYPES];
	int per_node[ARENA_MAX_TYPES];
	int nfamilies;
	struct arena_family families[ARENA_MAX_FAMILIES];
	struct arena_entry *db;
	size_t ndb;
	struct arena_model *models;
	size_t nmodels;
	struct arena_job *jobs;
	size_t njobs;
	double first_submit;
};

/*
 * Read DIR/resources/sim_cluster_spec.json, DIR/database/prof_database.json
 * and DIR/traces/simulate_trace_philly.csv (and DIR/planner/models.csv for
 * the sizes of each family, when it is there). err names the file, the line
 * or key, the field and the value that is wrong.
 */
int arena_world_read(const char *dir, struct arena_world *w, char *err,
		     size_t len);
void arena_world_free(struct arena_world *w);

/* The parts of arena_world_read, for the tests. */
int arena_cluster_read(const char *path, struct arena_world *w, char *err,
		       size_t len);
int arena_db_read(const char *path, struct arena_world *w, char *err,
		  size_t len);
int arena_trace_read(const char *path, struct arena_world *w, char *err,
		     size_t len);
/* Add a size ("760M", "1.3B") to a family (made if new); its index or < 0
 * with err set when the size is not a number with K, M, B or T. */
int arena_family_size(struct arena_world *w, const char *family,
		      const char *size, int *fam, char *err, size_t len);

/*
 * Seconds per iteration of a model (family f, size s, batch b) on nodes x
 * per GPUs of type t, by Arena's rules: the measured value of that cell;
 * else, when the model and batch were measured at the best locality of that
 * many GPUs (as few nodes as possible), that value with the throughput
 * times 0.9 for each halving of the GPUs per node; else the next larger size
 * of the family measured on that cell, with the throughput times 1.8 for
 * each size it is larger. A stored value above 300 s, or -1, does not fit.
 * Returns true with *seconds when the cell fits.
 */
bool arena_lookup(const struct arena_world *w, int f, int s, int b, int t,
		  int nodes, int per, double *seconds);

/* A job's seconds per iteration on a cell of its model's table; false
 * when the cell is not there (does not fit). */
bool arena_cell_seconds(const struct arena_model *m, int type, int gpus,
			int nodes, double *seconds);

/* ---------------------------------------------------------- arena-run.c */

enum arena_rules {
	ARENA_RULES_ARENA,  /* Arena's: progress re-valued at the current
			     * cell's speed; a restart over 300 s loses the
			     * next round */
	ARENA_RULES_HONEST, /* progress accumulated at each cell's speed; a
			     * restart costs its delay in time */
};

/* What a policy that picks cells may change of a job's request. */
enum arena_cell_choice {
	ARENA_CHOICE_ALL,   /* GPU type, count and locality */
	ARENA_CHOICE_COUNT, /* count and locality on the requested type */
	ARENA_CHOICE_NONE,  /* the requested type and count */
};

enum arena_throughput {
	ARENA_THROUGHPUT_ORACLE,  /* the table itself, by the lookup rules */
	ARENA_THROUGHPUT_PLANNER, /* the planner's predictions */
};

struct arena_opts {
	const char *policy;
	enum arena_rules rules;
	enum arena_throughput throughput;
	enum arena_cell_choice choice;
	/* the planner's data (models.csv, devices.json, comm.csv), for
	 * --throughput planner */
	const char *planner_dir;
	long max_rounds;
	/* what a policy that takes a prediction of the work left gets */
	enum sim_remaining remaining;
	/* per round and job in the system: the cell and the work left
	 * (NULL: none) */
	FILE *timeline;
};

struct arena_result {
	size_t njobs;      /* the world's jobs */
	double *jct;       /* per job: seconds, < 0 unfinished, NAN when not
			    * submitted before the horizon */
	size_t submitted, finished;
	size_t never_started; /* submitted, never given GPUs */
	double mean_jct_finished, mean_jct_all, p99_jct, makespan;
	double horizon;    /* seconds after the first submission */
	double gpu_hours;
	long restarts;     /* moves of a job that had run before */
	long refused;      /* decisions on a cell the job does not fit */
	long rounds;
	double decide_ms_median, decide_ms_p95, decide_ms_max;
	double restart_cost_per_gpu, restart_cost_max;
	/*
	 * Lower bounds (arena_bounds): every job alone on its fastest cell
	 * from its submission, its JCT a whole number of rounds. Of the mean
	 * JCT of all jobs (an unfinished one counted to the horizon), of the
	 * mean JCT of the jobs this run finished, and of the mean JCT of any
	 * as many finished jobs.
	 */
	double bound_all, bound_these, bound_any;
	double wall;
};

/* Replay the world's trace for o->max_rounds rounds. */
int arena_run(const struct arena_world *w, const struct arena_opts *o,
	      struct arena_result *r, char *err, size_t len);
void arena_result_free(struct arena_result *r);

/*
 * Fill r's lower bounds (after arena_run has counted the jobs it
 * finished); tmp holds a value per job of the world.
 */
void arena_bounds(const struct arena_world *w, const struct arena_opts *o,
		  struct arena_result *r, double *tmp);

/* Write the result as JSON (the summary of copus-sim --arena). */
int arena_summary_write(const char *path, const struct arena_world *w,
			const struct arena_opts *o,
			const struct arena_result *r, char *err, size_t len);

#endif /* COPUS_SIM_ARENA_H */
