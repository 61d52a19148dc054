/*
 * The state of a copus-sim simulation and its round (engine-round.c),
 * private to the engine: engine.c sets a simulation up, moves it on a round
 * at a time with copus__sim_round and reads its figures; engine-round.c
 * calls engine-apply.c, engine-job.c and engine-predict.c, nothing of
 * engine.c.
 */
#ifndef COPUS_SIM_ENGINE_ROUND_H
#define COPUS_SIM_ENGINE_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include <copus/policy.h>
#include <copus/predict.h>

#include "engine-job.h"
#include "engine-predict.h"

/*
 * A simulation: the cluster, the options and the result, the policy and
 * the predictor, the jobs, the buffers each round fills for the policy,
 * and the samples kept for the figures. engine.c's sim_setup fills it,
 * copus__sim_round moves it on a round, sim_figures reads it once every
 * job is done and sim_finish releases it.
 */
struct sim_state {
	const struct sim_cluster *c;
	const struct sim_opts *o;
	struct sim_result *res;
	char *err;
	size_t len;
	size_t n; /* jobs */
	copus_policy *pol;
	const struct copus_policy_traits *tr;
	copus_predictor *pred; /* NULL: no prediction asked */
	const char *tnames[SIM_MAX_TYPES];
	double tspeeds[SIM_MAX_TYPES]; /* copus_cluster.type_speeds */
	copus_cluster cl;	       /* the policy's view of c */
	int N, total_gpus;
	int g0;	   /* GPUs per node of type 0's largest */
	double t0; /* the CPU time at the start, seconds */
	double now;
	size_t done; /* jobs finished */
	struct sjob *jobs;
	struct copus_type_ratios ratios; /* the estimates' memory */
	/* A round's input and output: na jobs, idx[k] the index of the
	 * k-th; the predictor's input and answer. */
	copus_job *cj;
	copus_decision *dec;
	size_t *idx;
	copus_job_attrs *attrs;
	double *pdone, *pleft;
	double *errs; /* the predictions' relative errors */
	size_t nerr, caperr;
	double *dts; /* the decisions' CPU milliseconds */
	size_t ndt, capdt;
	/* --equal-per-node: GPUs taken per node (N), each job's part or -1
	 * (n). */
	int *used, *part;
	/* --event-rounds: the free GPUs of each node (N); jobs submitted
	 * by then have been seen by a round. */
	copus_node *free_nodes;
	double seen_until;
	uint64_t rng; /* --restart-delays' draws */
	/* --restart-measured: the last moves' costs, the next slot. */
	double costs[SIM_COSTS_MAX];
	int ncosts, next_cost;
};

/* One round: the jobs progress an interval (or to the next event with
 * --event-rounds), then the policy decides for the jobs in the system and
 * its decisions are applied. COPUS_ERANGE, said in s->err, when jobs still
 * run after SIM_MAX_TIME. */
int copus__sim_round(struct sim_state *s);

#endif
