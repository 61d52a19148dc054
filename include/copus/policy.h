/*
 * copus core: the scheduling policy interface.
 * Reader: contributors who call a policy (the simulator, the slurmctld
 * plugin, the tests) or write one (core/policy/, one file a policy).
 *
 * One call per scheduling round turns a snapshot of the cluster and of the
 * jobs into a decision for every job: a cell (GPU type and GPUs on chosen
 * nodes, or nothing = queued) and a batch configuration. The simulator
 * (copus-sim) and the slurmctld plugin call the same code; the policy never
 * reads files, clocks or Slurm state, it only computes on what the caller
 * hands it. A policy object keeps the state a policy needs across rounds
 * (Tiresias' queues, Pollux's previous solution); create one per cluster.
 *
 * Usage:
 *
 *	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
 *	copus_policy *pol;
 *	rc = copus_policy_create("pollux", &prm, &pol);
 *	every round:
 *		fill copus_cluster and copus_job[n] (pointers stay the caller's)
 *		rc = copus_policy_decide(pol, &cluster, jobs, n, now, decisions);
 *		apply decisions[i] to jobs[i]
 *	copus_policy_destroy(pol);
 *
 * Guarantees: the decisions never place more GPUs on a node than
 * copus_node.gpus, never place anything on an unusable node or on a node of
 * a type the job does not allow, and never mix GPU types inside one job.
 * Inconsistent input (an allocation on a missing node, min > max, a type
 * index out of range, ...) makes copus_policy_decide return COPUS_EINVAL
 * with nothing decided; a job that cannot be considered for a reason that
 * concerns only itself is left queued with the reason in its decision.
 */
#ifndef COPUS_POLICY_H
#define COPUS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <copus/error.h>
#include <copus/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most GPU types a cluster may have (bits of copus_job.type_mask). */
#define COPUS_MAX_GPU_TYPES 32

/* One node of the cluster. */
typedef struct copus_node {
	int gpu_type; /* index into the cluster's types, 0 .. num_types-1 */
	int gpus;     /* GPUs the policy may use on the node (>= 0) */
	bool usable;  /* false: down, drained or reserved; nothing goes there */
} copus_node;

/* The cluster: nodes and the names of their GPU types. */
typedef struct copus_cluster {
	int num_nodes;
	const copus_node *nodes;    /* num_nodes entries */
	int num_types;              /* 1 .. COPUS_MAX_GPU_TYPES */
	const char *const *type_names; /* num_types names, or NULL */
	/*
	 * Each type's training speed from its GPU's constants, only their
	 * ratios meaning anything (copus_planner_gpus_speed; 0 for a type not
	 * known), or NULL. The copus policy reads it for a job that has run
	 * nowhere yet, so that it starts on the faster GPUs when both are
	 * free; a job's measured or estimated models override it.
	 */
	const double *type_speeds;
} copus_cluster;

/* GPUs of one job on one node. */
typedef struct copus_slot {
	int node;
	int gpus;
} copus_slot;

/*
 * A cell a job can run on and its time per iteration there: GPU type, GPUs
 * and the nodes they are spread over (gpus / nodes on each), with the best
 * parallel plan of the job's model and batch on that cell.
 */
typedef struct copus_cell_time {
	int gpu_type;   /* index into the cluster's types */
	int gpus;       /* total GPUs */
	int nodes;      /* nodes, each with gpus / nodes of them */
	double seconds; /* seconds per iteration (> 0) */
} copus_cell_time;

/* One pending or running job, as the scheduler sees it this round. */
typedef struct copus_job {
	uint64_t id;         /* the caller's id, copied into the decision */
	bool elastic;        /* false: rigid, runs on exactly req_gpus */
	int min_gpus;        /* elastic bounds, 1 <= min <= max */
	int max_gpus;
	int req_gpus;        /* the user's request (rigid size, fair baseline) */
	double req_batch;    /* the user's total batch size (0: unknown) */
	bool fixed_batch;    /* the job may not change its batch size */
	uint32_t type_mask;  /* bit t: may run on GPU type t; 0 = any type */
	double submit_time;  /* seconds, same clock as 'now' */
	int restarts;        /* reallocations so far (0 before the first) */
	double attained;     /* attained service, GPU-seconds */
	double priority;     /* Slurm priority (higher first), rigid ordering */
	/*
	 * Predicted remaining run time in seconds on req_gpus (an oracle in the
	 * simulator, the predictor in the plugin); < 0 when unknown. Used by
	 * fifo's backfill and by optimus.
	 */
	double remaining;
	/*
	 * The job's goodput model per GPU type: models[t] for type t, NULL
	 * when nothing is learned yet on that type (the array itself may be
	 * NULL). The model's grad and limits are the job's current ones.
	 */
	const copus_model *const *models;
	int max_gpus_had;    /* the most GPUs the job has held (growth cap) */
	/*
	 * Current allocation: alloc_slots slots (a node index and the GPUs
	 * held there, each node at most once), all on nodes of type
	 * alloc_type; NULL / 0 slots when queued. Sparse, so that a round's
	 * input grows with the GPUs in use, not with jobs x nodes.
	 */
	const copus_slot *alloc;
	int alloc_slots;
	int alloc_type;
	/*
	 * For a job of a fixed batch whose speed on each cell is known (a
	 * table of measured or planned iteration times): the cells it can run
	 * on, num_cells of them, and the iterations it has left (< 0 when
	 * unknown; read only with a table). A cell that is not in the table
	 * does not fit the job (its memory, or a time per iteration too long
	 * to be worth it). NULL / 0 when the caller has no such table; a
	 * policy then uses models (or nothing) as before.
	 */
	const copus_cell_time *cells;
	int num_cells;
	double remaining_iters;
	/*
	 * The job runs only on a multiple of this many GPUs (its pipeline x
	 * tensor degree: each replica of its model spans that many); 0 or 1:
	 * any count. The copus policy never gives it another size; the
	 * others treat a job with granularity above 1 as rigid.
	 */
	int granularity;
	/*
	 * The fair-share factor of the job's user, as Slurm's multifactor
	 * priority defines it: 2^(-usage / shares), in (0, 1]; 1 for a user
	 * who has used nothing, 0.5 for one who has used exactly their share,
	 * towards 0 the more they have used beyond it. 0: unknown (neutral).
	 * The copus policy weighs a job by it (copus_policy_params.fairshare,
	 * or its option fairshare=W); the others ignore it.
	 */
	double fairshare;
	/*
	 * The job's time limit in seconds, Slurm's --time: how long each run
	 * of the job may last. 0: none given (a policy that needs one uses
	 * its default, as Slurm uses the partition's DefaultTime or MaxTime);
	 * INFINITY: unlimited. Read by backfill; the others ignore it.
	 */
	double time_limit;
	/*
	 * Keep the job where it runs this round: a running job its caller
	 * will not move now (sched/copus: one that has run less than its
	 * copus_restart_delay). An elastic policy (traits.elastic) decides for
	 * the other jobs on the GPUs the kept ones leave, and gives each kept
	 * job its allocation; told nothing, it would plan the others on GPUs
	 * that do not come free. Ignored for a queued job, for one whose
	 * allocation no policy could give (a node not usable, a type it may
	 * not run on), and by the policies that do not resize jobs.
	 */
	bool keep;
} copus_job;

/* The decision for one job. */
typedef struct copus_decision {
	uint64_t id;       /* copus_job.id */
	int gpu_type;      /* -1: queued (no GPUs) */
	int gpus;          /* total GPUs, sum of slots */
	int num_slots;     /* nodes used */
	/* Slots in node order; owned by the policy, valid until the next
	 * copus_policy_decide or copus_policy_destroy. */
	const copus_slot *slots;
	int batch;         /* total batch size (0: keep the job's own) */
	int local;         /* micro-batch per GPU (0: the job decides) */
	int accum_steps;   /* accumulation steps before each sync */
	bool changed;      /* differs from the current allocation */
	char reason[64];   /* for admins: why the job got this */
} copus_decision;

/*
 * Version of copus_policy_params this header describes. A caller built
 * against version 1 (without fairshare) is still served: its fields are
 * read and the later ones keep their defaults.
 */
#define COPUS_POLICY_PARAMS_VERSION 2

/* Tunables; set with COPUS_POLICY_PARAMS_INITIALIZER and then change. */
typedef struct copus_policy_params {
	size_t size;          /* sizeof(copus_policy_params) */
	unsigned version;     /* COPUS_POLICY_PARAMS_VERSION */
	double interval;      /* seconds between rounds (60) */
	double restart_delay; /* seconds a reallocation costs (30) */
	double fairness_p;    /* pollux power-mean exponent (-1) */
	double tiresias_threshold; /* GPU-seconds to demote (16 GPU-hours) */
	int search_rounds;    /* pollux: improvement sweeps per round (0: auto) */
	uint64_t seed;        /* for policies with random choices */
	/* copus: a job on several nodes gets the same GPUs on each (as Slurm
	 * allocates GRES per node); false: any split (as Pollux's simulator) */
	bool equal_per_node;
	/*
	 * Weight W of the users' fair-share factors (copus_job.fairshare),
	 * in [0, COPUS_POLICY_FAIRSHARE_MAX], for a policy that weighs jobs by them: the copus
	 * policy multiplies a job's value by 2^(W (2F - 1)) unless its
	 * option fairshare=W sets another; 0 turns the term off (1). The
	 * other policies ignore it. Since version 2.
	 */
	double fairshare;
} copus_policy_params;

/* The largest copus_policy_params.fairshare. */
#define COPUS_POLICY_FAIRSHARE_MAX 10.0

#define COPUS_POLICY_PARAMS_INITIALIZER                                       \
	{ sizeof(copus_policy_params), COPUS_POLICY_PARAMS_VERSION, 60.0,     \
	  30.0, -1.0, 16.0 * 3600.0, 0, 1, false, 1.0 }

typedef struct copus_policy copus_policy;

/*
 * Create a policy by name: "fifo" (first come first served on the requested
 * GPUs with EASY backfill over the jobs' remaining times), "backfill"
 * (Slurm's sched/backfill at its defaults: submit order, a reservation for
 * each waiting job within a day, against the jobs' time limits; see
 * core/policy/backfill.c for its options), "tiresias"
 * (two-queue least attained service, requested size), "optimus"
 * (marginal gain of remaining time, requested batch), "pollux" (power mean
 * of speedups over a fair share, batch re-optimised), "sia" (one
 * configuration per job and GPU type by an integer program over normalised
 * goodputs, Sia's; "sia:p=X,lambda_n=X,lambda_a=X,time_limit_ms=N" sets its
 * parameters, see core/policy/sia.c) and "copus" (requests
 * admitted shortest remaining work first, GPUs beyond them by goodput, see
 * core/policy/copus.c). "copus:OPT,..." runs copus without some of its
 * ingredients, to measure each: no-srpt, no-restart-cost, no-fairness,
 * no-placement, no-spread; its option fairshare=W stands over
 * params->fairshare. Returns COPUS_EINVAL for an unknown name or option or
 * a parameter out of range, and COPUS_EVERSION for params of a version
 * this library does not know (or the wrong size for theirs).
 * params may be NULL for the defaults.
 */
int copus_policy_create(const char *name, const copus_policy_params *params,
			copus_policy **out);

/* The policy's name as given to copus_policy_create. */
const char *copus_policy_name(const copus_policy *p);

/*
 * The name of the i-th policy that copus_policy_create knows, counting
 * from 0, or NULL past the last: for listing them in a message or a
 * --help.
 */
const char *copus_policy_name_at(size_t i);

/* Where a policy's copus_job.remaining comes from. */
typedef enum copus_remaining_source {
	COPUS_REMAINING_NONE,    /* unused: leave it -1 */
	COPUS_REMAINING_ORACLE,  /* the true remaining time (an assumption of
				  * the policy, as fifo's backfill and optimus
				  * make it) */
	COPUS_REMAINING_PREDICT, /* a prediction, as good as the caller has */
} copus_remaining_source;

/* Where a policy's copus_job.models come from. */
typedef enum copus_model_source {
	COPUS_MODELS_NONE,    /* unused: leave them NULL */
	COPUS_MODELS_ORACLE,  /* fitted to the job's true profile (optimus) */
	COPUS_MODELS_LEARNED, /* learned online from the job's own steps */
} copus_model_source;

/*
 * What a policy does and needs, so that callers (the simulator, the plugin)
 * never match on its name.
 */
struct copus_policy_traits {
	bool elastic;      /* resizes jobs within their [min, max] GPUs */
	bool picks_batch;  /* chooses each job's batch size and micro-batch */
	/*
	 * Moves a running job to other nodes in the same shape only when that
	 * is worth its restart; a policy without it may place a job anew
	 * every round, and a caller leaves such a move undone.
	 */
	bool moves_jobs;
	copus_remaining_source remaining;
	copus_model_source models;
	/*
	 * Chooses each job's cell (GPU type, count, locality) from the job's
	 * table of cells (copus_job.cells) with the plan that goes with it,
	 * so that a restart needs no search for a plan: it runs on a job of
	 * fixed batch without a goodput model.
	 */
	bool picks_cells;
	/*
	 * The prior of the fit that the jobs' own agents run, whose models
	 * the policy is told (COPUS_MODELS_LEARNED): libcopus's for copus,
	 * Pollux's agent's for the baselines. The simulator fits its jobs'
	 * models with it; sched/copus reads whatever libcopus's hints say.
	 */
	copus_fit_prior fit_prior;
};

/* The traits of the policy p; never NULL (all false / NONE for NULL). */
const struct copus_policy_traits *copus_policy_traits(const copus_policy *p);

/*
 * Decide one round. out has n entries, filled in job order. now is the
 * time of the round in the jobs' clock (seconds). Returns COPUS_OK, or
 * COPUS_EINVAL on inconsistent input (nothing in out is then valid).
 */
int copus_policy_decide(copus_policy *p, const copus_cluster *c,
			const copus_job *jobs, size_t n, double now,
			copus_decision *out);

/*
 * Sets the restart cost the policy counts from the next round on
 * (copus_policy_params.restart_delay), for a caller that measures what its
 * restarts cost (sched/copus's copus_restart_cost=measured). Returns
 * COPUS_EINVAL for a NULL policy or a cost that is not a finite number
 * >= 0, and the cost in effect stays.
 */
int copus_policy_set_restart_delay(copus_policy *p, double seconds);

void copus_policy_destroy(copus_policy *p);

/*
 * Check a cluster and jobs the way copus_policy_decide does (exposed for
 * callers that want the reason before deciding). On error, *bad_job is the
 * index of the first bad job, or -1 when the cluster itself is bad.
 */
int copus_policy_check_input(const copus_cluster *c, const copus_job *jobs,
			     size_t n, long *bad_job);

/*
 * The largest part of a placement that can be asked of a scheduler that
 * gives every node of a job the same GPU count (Slurm's GPUs per node): the
 * k of the n slots and the g GPUs on each that make k * g largest, the
 * fewest nodes on a tie, never more GPUs on a node than the placement puts
 * there. Writes those k slots to out (room for n; node order kept, each
 * with g GPUs; out may not be slots), sets *per_node to g and returns k;
 * 0 when n is 0. An even placement is returned as it is. A policy that
 * spreads GPUs unevenly (pollux: 2 + 1) is thus applied as 2 on one node,
 * not as 1 + 1.
 */
int copus_even_slots(const copus_slot *slots, int n, copus_slot *out,
		     int *per_node);

/*
 * An even placement of gpus GPUs of the type: the same count g on each of
 * k nodes, k * g = gpus, with the fewest nodes that fit and g at most
 * max_per_node (0: no bound). A node fits that is usable, of the type,
 * allowed (allowed[node] nonzero; allowed NULL: every node) and has g or
 * more of avail[node]. The nodes of prefer (n_prefer slots, in their
 * order) are taken first, then the others in node order. Writes the k
 * slots to out (room for c->num_nodes; node order), sets *per_node to g
 * and returns k; 0 (and *per_node 0) when no such placement fits.
 */
int copus_even_fit(const copus_cluster *c, const int *avail,
		   const unsigned char *allowed, int type, int gpus,
		   int max_per_node, const copus_slot *prefer, int n_prefer,
		   copus_slot *out, int *per_node);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_POLICY_H */
