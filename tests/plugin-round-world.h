/*
 * The world of sched/copus's round tests (test-plugin-round.c,
 * test-plugin-restart.c): a cluster of a100 nodes, jobs pending or running
 * on it as the snapshot fills them, their hints, and the round's decision
 * with the copus policy as the plugin creates it. No root, no Slurm daemons.
 */
#ifndef COPUS_TEST_PLUGIN_ROUND_WORLD_H
#define COPUS_TEST_PLUGIN_ROUND_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "round.h"
#include "sched_copus.h"

#define NODES 4
#define JOBS 8
#define NOW 1000000

/* A round and the plugin state it is decided with. */
struct round_world {
	struct copus__sched s;
	struct copus__round r;
	copus_node nodes[NODES];
	char names[NODES][64];
	int free[NODES], cfg[NODES];
	struct copus__round_job rj[JOBS];
	uint8_t eligible[JOBS][NODES];
	copus_slot alloc[JOBS][NODES];
};
extern struct round_world W;

/* A cluster of n nodes with gpus a100 GPUs each, all free and usable. */
void rw_cluster(int n, int gpus);
/* The next job of the round, neither pending nor running yet. */
struct copus__round_job *rw_job(uint32_t id, int emin, int emax);
/*
 * A pending job asking for nodes x gpn GPUs, elastic within [emin, emax]
 * (0, 0: rigid), that may use every node.
 */
struct copus__round_job *rw_pending(uint32_t id, int nodes, int gpn,
				    int emin, int emax);
/*
 * A job running since start with gpn GPUs on each of nodes nodes from
 * node first on. Its GPUs are not free; those of an elastic job are the
 * policy's to use, those of a rigid one are not (as the snapshot counts
 * them).
 */
struct copus__round_job *rw_running(uint32_t id, int first, int nodes,
				    int gpn, int emin, int emax, time_t start);
/*
 * Gives the job a record with a running job's hint: its id, restarts and
 * time, then the members in rest (a JSON object's inside).
 */
void rw_hint_text(const struct copus__round_job *j, const char *rest);
/*
 * Gives the job a record with a hint that has a model for a100, and a
 * granularity when gran > 1.
 */
void rw_hint_gran(const struct copus__round_job *j, int gran);
void rw_hint(const struct copus__round_job *j);

/*
 * A model too big for one GPU: a 2.5-billion-parameter transformer (32
 * layers of hidden size 2560), whose weights, gradients and Adam's state
 * take 16 bytes a parameter, 40 GB, more than one a100 holds; on two GPUs
 * its tensor or pipeline split, or ZeRO's split of the optimizer's state
 * over data ranks, brings it within reach.
 */
#define BIG_MODEL "{\"a\":\"tf\",\"dt\":2,\"l\":32,\"h\":2560," \
		  "\"n\":32,\"s\":512,\"v\":50000}"

/* Gives the job a record with a hint that describes its model (no perf). */
void rw_hint_model(const struct copus__round_job *j, const char *mdl);
/* The plan of a job's table for count GPUs on one node, or NULL. */
const struct copus__plan *rw_plan_on(const struct copus__round_job *j,
				     int count);
void rw_decide(void);
/* Writes text to a fresh file; its path in path (len bytes). */
void rw_write_file(const char *text, char *path, size_t len);
/* Two GPU types under a site's own names: dgx-ext (index 0) and aws. */
void rw_site_types(void);
/*
 * copus_planner_gpus: a file that names the site's types after the built-in
 * a100 and t4 (named), or none.
 */
void rw_site_constants(bool named);
/* Frees what the world holds, at the end of a program. */
void rw_free(void);

/* Each action's name, for messages. */
extern const char *const rw_action[];
/* What the round made of a job, for messages. */
void rw_show(const struct copus__round_job *j);

/* Fails with what the round made of the job when the action differs. */
#define ASSERT_ACTION(j, want)                                                \
	do {                                                                  \
		if ((j)->action != (want)) {                                  \
			fprintf(stderr, "%s:%d: expected %s; ",               \
				__FILE__, __LINE__, rw_action[want]);         \
			rw_show(j);                                           \
		}                                                             \
		CU_ASSERT_EQUAL((j)->action, (want));                         \
	} while (0)

#endif
