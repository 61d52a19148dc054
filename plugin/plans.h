/*
 * The parallel plans of jobs whose hint describes their model ("mdl"):
 * sched/copus asks the core planner (copus/planner.h) for the plan of each
 * cell a job may run on, so that the policy chooses among cells where the
 * job has a plan, and no job is given a size on which it has none. Plain C,
 * no Slurm: included by round.c, statefile.c and sched_copus.c, and by
 * tests/test-plugin-round.c.
 */
#ifndef COPUS_PLUGIN_PLANS_H
#define COPUS_PLUGIN_PLANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "copus/planner.h"
#include "copus/policy.h"

/* The most GPU types the cache numbers (more are planned uncached). */
#define COPUS__PLAN_GPU_TYPES 32

/*
 * Answers the planner cache keeps before it is emptied: a round asks for a
 * few cells per job with a model (types x counts of its range), so this
 * holds the answers of hundreds of such jobs, and bounds the memory.
 */
#define COPUS__PLAN_CACHE 8192

/* The plan of one cell: what the job runs as there, and how fast. */
struct copus__plan {
	int gpu_type;			/* index among the round's types */
	int gpus, nodes;		/* gpus / nodes on each node */
	int dp, tp, pp, mb;		/* data, tensor, pipeline degrees and
					 * micro-batches */
	double seconds;			/* predicted seconds per iteration */
};

/*
 * The planner's side of the plugin's state: the GPU constants read from
 * copus_planner_gpus (types not in it get the built-in ones), and the
 * cache of the planner's answers, keyed by a model id per job.
 */
struct copus__planner {
	char path[256];			/* the file read, "" none */
	int ntypes;			/* types read from it */
	copus_planner_gpu_type gpus[COPUS_PLANNER_MAX_GPUS];
	copus_planner_cache *cache;
	size_t cached;			/* answers stored since emptied */
	int32_t next_model;		/* the last model id handed out */
	/* The cache's keys of GPU types, by name: the round's indices may
	 * change from one round to the next, the names do not. */
	char seen[COPUS__PLAN_GPU_TYPES][16];
	int nseen;
	copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS]; /* scratch */
};

/*
 * Reads the constants of path ("" or NULL: none, the built-in ones for
 * every type). On success they replace those in effect and the cache is
 * emptied; on failure (err names the file, the line and the field when the
 * parser tells them) the constants in effect stay. The cache is emptied
 * either way: a reconfigure starts afresh. Returns COPUS_OK or a negative
 * copus_status.
 */
int copus__planner_load(struct copus__planner *p, const char *path,
			char *err, size_t errlen);

/* Frees the cache. */
void copus__planner_free(struct copus__planner *p);

/*
 * The constants of a GPU type: from the file when it names the type, else
 * the built-in ones (copus_planner_gpu_default; for a name it does not
 * know, its generic constants, as the job's runtime takes them).
 */
int copus__planner_gpu(const struct copus__planner *p, const char *type,
		       copus_planner_gpu *out);

/* What the plan table of one job is built from. */
struct copus__plan_ask {
	int32_t model_id;		/* the job's model, as the cache keys it */
	const copus_planner_desc *model;
	int batch;			/* the job's total batch (its b0) */
	int kmin, kmax;			/* its range of GPU counts */
	uint32_t type_mask;		/* types it may use (0: any) */
	int cur_type, cur_gpus, cur_nodes; /* running: its cell; else -1 */
};

/*
 * The job's cells with a plan, into cells[] and plans[] (max entries each,
 * in the same order), their number in *n: for every type it may use and
 * every count of its range, the count on the fewest nodes of the type it
 * can take evenly (gpus per node = min(count, the largest usable node of the
 * type, as the policy counts nodes)), and the cell it runs on; only those
 * where a plan fits. ntypes and type_names are the round's types, nodes its
 * nodes. Returns COPUS_OK (possibly with *n = 0) or a negative copus_status
 * (the model does not describe a model the planner knows: COPUS_EINVAL).
 */
int copus__plan_cells(struct copus__planner *p, const struct copus__plan_ask *a,
		      const copus_node *nodes, int nnodes, int ntypes,
		      const char (*type_names)[16], copus_cell_time *cells,
		      struct copus__plan *plans, int max, int *n);

/* The plan of a cell among n plans, or NULL. */
const struct copus__plan *copus__plan_find(const struct copus__plan *plans,
					   int n, int type, int gpus,
					   int nodes);

/* A plan as the status shows it: "dp2.tp1.pp2.mb4" ("-" for NULL). */
void copus__plan_name(const struct copus__plan *pl, char *buf, size_t len);

/*
 * A plan in the words of the job's own log line (libcopus, rank 0: "copus:
 * plan type=a100 gpus=4 nodes=1 dp=2 tp=1 pp=2 mb=4"), type its GPU type's
 * name: "type=a100 gpus=4 nodes=1 dp=2 tp=1 pp=2 mb=4".
 */
void copus__plan_words(const struct copus__plan *pl, const char *type,
		       char *buf, size_t len);

#endif /* COPUS_PLUGIN_PLANS_H */
