/*
 * A job of copus-sim's engine: struct sjob, as the round loop (engine.c)
 * and the workload's reader (engine-input.c) see it, and what
 * engine-job.c does to it: its time alone on its request, its progress
 * between rounds and the models a policy is told. Private to the engine:
 * engine.c calls engine-job.c, which calls nothing of engine.c.
 */
#ifndef COPUS_SIM_ENGINE_JOB_H
#define COPUS_SIM_ENGINE_JOB_H

#include <stdbool.h>

#include <copus/model.h>
#include <copus/policy.h>

#include "sim.h"

/* Longest simulated time before giving up: 60 days. */
#define SIM_MAX_TIME (60.0 * 86400.0)

/* A job of the simulation, as the round loop and its progress see it. */
struct sjob {
	const struct sim_jobspec *spec;
	const struct app *app;
	int *place;         /* GPUs per node */
	copus_slot *slots;  /* place as the policy's sparse allocation */
	int type;
	int gpus, nodes;
	int atomic, accum;
	double progress;
	int epoch;
	double attained;    /* GPU-seconds */
	double rescale;     /* seconds of restart left */
	double run_start;   /* when it began to train on its GPUs */
	bool moved;         /* its last move's cost is not yet counted */
	double move_cost;   /* what that move cost (--restart-measured) */
	int restarts;       /* -1 before the first allocation */
	double completion;  /* < 0 while running */
	double target_batch; /* <= 0: the policy chooses */
	/* What the job has measured and learned, per GPU type. */
	copus_observation *obs[SIM_MAX_TYPES];
	size_t nobs[SIM_MAX_TYPES], capobs[SIM_MAX_TYPES];
	int max_prof;
	copus_model model[SIM_MAX_TYPES];
	bool has_model[SIM_MAX_TYPES];
	copus_model boot[SIM_MAX_TYPES]; /* bootstrapped from the probes */
	int hint_type;      /* the type of its last measured step; -1: none */
	bool learn;
	copus_fit_prior fit_prior; /* of its agent's fit (the policy's trait) */
	double goodput;
	const copus_model *models[SIM_MAX_TYPES];
	double *solo_rate;  /* fifo's oracle: progress per second by epoch */
	double *solo_tail;  /* seconds from the start of epoch e to the end */
	bool predicted;     /* the predictor has answered for it */
	double pred_left;   /* expected seconds left alone on the request */
};

/* engine-job.c */
/* Consolidated placement of k GPUs on nodes of g (pl: GPUs per node). */
int copus__sim_consolidated(int k, int g, int *pl);
/* The largest micro-batch that fits a GPU of type t. */
int copus__sim_max_local(const struct app *a, int t);
/* Tabulate the job's epochs alone on its request (nodes of g GPUs). */
int copus__sim_solo_table(struct sjob *j, int g);
/* Seconds the job still takes alone on its request (copus__sim_solo_table). */
double copus__sim_solo_remaining(const struct sjob *j);
/* The job's GPUs and nodes from its placement on N nodes. */
void copus__sim_update_shape(struct sjob *j, int N);
/* The job's micro-batch and accumulation after a change. */
void copus__sim_update_local(struct sjob *j);
/* Advance the job by sec seconds from time now on a cluster of N nodes. */
void copus__sim_job_step(struct sjob *j, double now, double sec, int N);
/*
 * Job j's model on GPU type t as a policy with models from src is told it
 * (NULL: none), on a cluster whose types are named type_names: with probes,
 * or as the plugin knows it (sim_opts.probes).
 */
const copus_model *copus__sim_job_model(struct sjob *j,
					copus_model_source src, int t,
					bool probes,
					const char (*type_names)[32]);

#endif /* COPUS_SIM_ENGINE_JOB_H */
