/*
 * The world of the copus policy's tests (test-policy-copus*.c): a cluster,
 * jobs added one by one with their goodput models and allocations, and one
 * round of the copus policy, whose decisions come back as a row of GPUs per
 * node, a GPU type and a reason for every job.
 */
#ifndef COPUS_TEST_POLICY_WORLD_H
#define COPUS_TEST_POLICY_WORLD_H

#include <stdbool.h>
#include <stddef.h>

#include <copus/policy.h>

#define MAXN 16
#define MAXJ 16

/* The policy's default parameters, which every test starts from. */
extern const copus_policy_params PRM;

/* A job that scales well (cheap sync) with plenty of gradient noise. */
copus_model scalable(void);
/* A job that gains nothing from more GPUs (no noise, costly sync). */
copus_model poor(void);

struct world {
	copus_node nodes[MAXN];
	copus_cluster c;
	copus_job jobs[MAXJ];
	copus_model models[MAXJ];
	const copus_model *mp[MAXJ][COPUS_MAX_GPU_TYPES];
	copus_slot alloc[MAXJ][MAXN];
	copus_cell_time cells[MAXJ][16];
	int rows[MAXJ * MAXN];   /* the last decision: job j's GPUs on node k
				  * at j * num_nodes + k */
	int types[MAXJ];         /* its GPU type, -1 for none */
	char reasons[MAXJ][64];  /* and its reason */
	size_t n;
};

/* An empty cluster of nodes alike, all of GPU type 0. */
void world_init(struct world *w, int nodes, int gpus);
/*
 * A waiting job with model m on every GPU type: rigid at req GPUs, or
 * elastic from 1 to 16; remaining is its work left in seconds (-1 when
 * unknown).
 */
copus_job *add_job(struct world *w, bool elastic, int req, double remaining,
		   copus_model m);
/* Job j holds gpus GPUs of node too (of type 0). */
void run_alloc(struct world *w, size_t j, int node, int gpus);
/* The GPUs of job j's last decision. */
int gpus_of(const struct world *w, size_t j);
/* Job j's last decision becomes its allocation. */
void adopt_decision(struct world *w, size_t j);
/* One round of the copus policy; its decisions as rows, types, reasons. */
void decide_with(struct world *w, double now, const copus_policy_params *prm);
/* The same with the default parameters (PRM). */
void decide(struct world *w, double now);

#endif
