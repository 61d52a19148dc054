/*
 * libcopus: the runtime that a training job links so that the copus
 * scheduler can see its goodput and resize it without losing work.
 * Reader: ML engineers who add libcopus to a training loop (and the
 * bindings that wrap it, such as contrib/pytorch/copus_torch.py).
 *
 * A training loop with libcopus:
 *
 *	copus_config cfg = COPUS_CONFIG_INITIALIZER;
 *	cfg.limits = (copus_batch_limits){ 128, 4096, 8, 256, true };
 *	cfg.ckpt_dir = "/scratch/me/run1";
 *	cfg.save = my_save; cfg.load = my_load; cfg.cb_arg = &state;
 *	cfg.agree = my_allreduce_max; cfg.comm_arg = &comm;
 *	copus_init(&cfg, &ctx);           (restores the checkpoint, if any)
 *	copus_plan_get(ctx, &plan);       (batch, micro-batch, lr gain)
 *	for (;;) {
 *		copus_step_begin(ctx);
 *		for each micro-batch: forward, backward,
 *			copus_grad_local(ctx, |local gradient|^2);
 *		copus_sync_begin(ctx); all-reduce; copus_sync_end(ctx);
 *		copus_grad_total(ctx, |synchronised gradient|^2);
 *		optimizer step with lr * plan.lr_gain;
 *		copus_step_end(ctx, plan.local, plan.accum_steps);
 *	}
 *
 * copus_step_end() is where a rescale request (a signal, see copus/hint.h)
 * is honoured: the ranks agree, the checkpoint is written, the scheduler is
 * told, and the process exits with COPUS_EXIT_REQUEUE. It is also where the
 * periodic checkpoints are written (cfg.ckpt_interval), after which the job
 * trains on: a restart after a node failure resumes from the latest one.
 *
 * Every function returns COPUS_OK or a negative copus_status; the context's
 * copus_errmsg() says what went wrong in a sentence. A context is used by one
 * thread at a time; one context per process (the signal flag is global).
 *
 * Environment (read once, by copus_init):
 *   SLURM_JOB_ID, SLURM_RESTART_COUNT, SLURM_JOB_NUM_NODES (or
 *   SLURM_NNODES), SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID,
 *   SLURM_GPUS_ON_NODE        the allocation
 *   COPUS_JOB_ID              the job id when SLURM_JOB_ID is unset (another
 *                             resource manager; hints name their job)
 *   RANK, WORLD_SIZE, LOCAL_RANK   (torchrun) take precedence over Slurm's
 *   CUDA_VISIBLE_DEVICES      GPUs per node when SLURM_GPUS_ON_NODE is unset
 *   COPUS_CKPT_DIR            checkpoint directory when cfg.ckpt_dir is NULL
 *   COPUS_CKPT_INTERVAL       seconds between periodic checkpoints when
 *                             cfg.ckpt_interval is 0 (unset: none)
 *   COPUS_GPU_TYPE            GPU type named in hints ("default"), and
 *                             whose constants plan the model (below)
 *   COPUS_PLANNER_GPUS        a file of calibrated GPU constants (the text
 *                             of copus_planner_gpus_parse(), written by
 *                             copus-plan calibrate) for planning the model
 *   COPUS_SIGNAL              rescale signal, a number or USR1, USR2, ...
 *   COPUS_REQUEUE_EXIT        exit code after a rescale checkpoint (75)
 *   COPUS_HINTS=0|1           0: publish no hints (default 1)
 *   COPUS_SCONTROL            the scontrol program used for hints
 *   COPUS_NO_PMIX=0|1         1: bootstrap through cfg.bcast even under PMIx
 *   COPUS_DEBUG=0|1|2         log what the runtime does (stderr)
 * A malformed value is an error of copus_init that names the variable.
 *
 * Checkpoints: by default one file per shard of the model (pipeline stage
 * and tensor slice), written by the shard's first data-parallel replica;
 * every rank of the restarted job loads its shard's file, whatever the data
 * degree, so the directory must be visible to all nodes of the new
 * allocation. Without pipeline and tensor degrees that is one file, rank
 * 0's. With save_all_ranks, rank r loads rank r's file. The manifest
 * records the layout (data, tensor, pipeline degrees); a run under other
 * pipeline or tensor degrees (or another number of ranks with
 * save_all_ranks) restores it through cfg.reshard, which is told both
 * layouts and given only the files of the shards this rank needs, or,
 * without that callback, refuses the checkpoint on every rank.
 * copus_init() succeeds on every rank or on none: the ranks agree before
 * any of them trains. The manifest holds each file's size and CRC-32; a
 * file that does not match is refused, never loaded. The manifest also
 * holds a CRC-32 of its own text: one edited or corrupt is refused (an
 * error of copus_init() naming it), never trained from. With save_all_ranks
 * each rank loads the file of the old rank at its own coordinates (data,
 * pipeline and tensor rank), whichever of the two layouts of ranks
 * (copus/plan.h, data_inner) either run had. copus_init() creates the
 * checkpoint directory and checks that it can write a file there (an
 * error naming it, rather than a failed checkpoint at the first rescale);
 * when it restores a checkpoint rank 0 says so on stderr, in one line
 * with the directory, the step, the checkpoint's layout and ranks, and
 * when and by which job and restart it was written. What a crash or a
 * failed checkpoint left in the directory
 * (temporary files, files no manifest names) is removed when a new run
 * starts and after each checkpoint that commits. The manifest
 * names the restart count (SLURM_RESTART_COUNT) of the run that wrote it;
 * an older run of the job that is still alive (on a node Slurm gave up on)
 * is refused when it tries to checkpoint over it.
 *
 * Planned degrees: a job that describes its model (cfg.model) and sets
 * pipeline_degree = tensor_degree = 0 lets copus_init() choose its degrees
 * with the core planner (copus_planner_best of copus/planner.h), the code
 * the scheduler plans the job's cells with, so that both agree by
 * construction. The inputs are the model, the batch cfg.limits.init_batch
 * and the cell: SLURM_JOB_NUM_NODES nodes x world / nodes ranks of the GPU
 * type above, with the type's constants from the file COPUS_PLANNER_GPUS
 * names when it lists the type, else copus_planner_gpu_default(). Every
 * rank computes the plan from these same inputs (and the ranks check that
 * they agree); no plan that fits is an error of copus_init() naming the
 * model, the batch and the cell. The plan sets the data, tensor and
 * pipeline degrees and each stage's layers (the planner's layers of the
 * model: copus_plan_get()'s first_layer and n_layers); copus_planned()
 * gives the whole of it (micro-batches included), and rank 0 logs it in one
 * line, "plan type=a100 gpus=4 nodes=1 dp=2 tp=1 pp=2 mb=4". The hints
 * then carry the model ("mdl") and no granularity: the scheduler plans
 * each cell it considers. Ranks are laid out as the plan says: as in
 * copus/plan.h (tensor fastest, then pipeline, then data), or, when the
 * plan has data_inner, with the data ranks inside the pipeline ranks
 * (rank = (pipeline_rank x data + data_rank) x tensor + tensor_rank);
 * copus_plan_get() and copus_comms_create() follow it.
 *
 * Shrinking in place: a job asked to give up nodes whose ranks are whole
 * data-parallel replicas can, with NCCL 2.27 or later, keep its other
 * processes and shrink their communicators (copus_comms_shrink(), below)
 * rather than checkpoint and be requeued; see there what it must redo.
 */
#ifndef COPUS_COPUS_H
#define COPUS_COPUS_H

#include <stddef.h>
#include <stdint.h>

#include <copus/error.h>
#include <copus/hint.h>
#include <copus/model.h>
#include <copus/planner.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the copus_config layout and of this API. */
#define COPUS_API_VERSION 1
#define COPUS_CONFIG_MAGIC 0x636f7075u /* "copu" */

/* ------------------------------------------------------------------------
 * Runtime configuration
 * ------------------------------------------------------------------------ */

typedef enum copus_optimizer {
	COPUS_OPT_SGD = 0,  /* learning-rate gain: AdaScale's */
	COPUS_OPT_ADAM = 1, /* Adam-type: the square root of AdaScale's */
} copus_optimizer;

/*
 * Application callbacks. Each returns 0 on success, anything else on
 * failure. save writes the application's state (model, optimizer, data
 * position) to path, a temporary file that libcopus then makes durable and
 * renames; load reads it back. step is the number of steps completed.
 */
typedef int (*copus_save_cb)(void *arg, const char *path, int64_t step);
typedef int (*copus_load_cb)(void *arg, const char *path, int64_t step);
/* The degrees of parallelism a checkpoint was written in, or loaded in. */
typedef struct copus_ckpt_layout {
	int data, tensor, pipeline;
} copus_ckpt_layout;

/*
 * One shard (pipeline stage and tensor slice) of a checkpoint written in
 * another layout, as the reshard callback sees it.
 */
typedef struct copus_ckpt_shard {
	const char *path;    /* its file; NULL: this rank needs none of it */
	int pipeline_rank;   /* its stage and slice in the old layout */
	int tensor_rank;
	int first_layer;     /* the layers of its stage (0, 0 without layers) */
	int n_layers;
} copus_ckpt_shard;

/*
 * Restore a checkpoint written in another layout: shards[] lists every
 * shard of the old layout; those whose layers (and tensor slices) overlap
 * this rank's new stage and slice carry a path, checked against the
 * manifest's size and CRC-32; the others are NULL and need not be read.
 * mine is this rank's shard in the new layout (now), as copus_plan_get()
 * will give it, with a NULL path; n_shards = old->pipeline x old->tensor.
 */
typedef int (*copus_reshard_cb)(void *arg, int64_t step,
				const copus_ckpt_layout *old,
				const copus_ckpt_layout *now,
				const copus_ckpt_shard *mine,
				const copus_ckpt_shard *shards, int n_shards);
/* In-place maximum all-reduce of n values across all ranks. */
typedef int (*copus_agree_cb)(void *arg, int64_t *values, int n);
/* Broadcast len bytes from rank 0 to all ranks (bootstrap fallback). */
typedef int (*copus_bcast_cb)(void *arg, void *buf, size_t len);
/* Deliver a hint (replaces the Slurm channel; for tests and other RMs). */
typedef int (*copus_publish_cb)(void *arg, const char *hint);

typedef struct copus_config {
	size_t size;      /* sizeof(copus_config) */
	uint32_t magic;   /* COPUS_CONFIG_MAGIC */
	uint32_t version; /* COPUS_API_VERSION */

	/* The job's batch limits; init_batch is required. */
	copus_batch_limits limits;
	copus_optimizer optimizer;
	/* Optional prior throughput parameters (all zero: none). */
	copus_perf_params prior;
	/* Progress (iterations at init_batch) at which the job ends; 0: unknown. */
	double target_progress;

	/* The allocation; -1 reads it from the environment. */
	int rank;
	int world;
	int local_rank;
	int nodes;
	int gpus_per_node;
	/* GPU type name for the hints; NULL: $COPUS_GPU_TYPE or "default". */
	const char *gpu_type;

	/* The parallel plan: world = data * pipeline * tensor degrees; both
	 * 0 with a model: the planner chooses (see the top of this header). */
	int pipeline_degree;
	int tensor_degree;
	/* Optional per-layer costs; pipeline stages get contiguous layers. */
	const double *layer_costs;
	int n_layers;

	/* Checkpoints: NULL reads $COPUS_CKPT_DIR; none disables rescale. */
	const char *ckpt_dir;
	/*
	 * 0: the first replica of each shard (pipeline stage, tensor slice)
	 * saves, rank 0 alone when the model is not split; 1: every rank.
	 */
	int save_all_ranks;
	copus_save_cb save;
	copus_load_cb load;
	void *cb_arg;

	/* Communication among ranks (needed when world > 1). */
	copus_agree_cb agree;
	copus_bcast_cb bcast;
	void *comm_arg;

	/*
	 * Hints: NULL publishes through Slurm (scontrol) when in a job; a
	 * callback replaces that channel (for tests and other resource
	 * managers) and needs the job's id (SLURM_JOB_ID or COPUS_JOB_ID).
	 */
	copus_publish_cb publish;
	void *publish_arg;
	/* Seconds between hints; at least COPUS_HINT_INTERVAL for Slurm. */
	double hint_interval;

	/* Rescale: 0 takes $COPUS_SIGNAL or COPUS_RESCALE_SIGNAL. */
	int rescale_signal;
	/* Exit code after a rescale checkpoint; 0: $COPUS_REQUEUE_EXIT or 75. */
	int exit_code;
	/* 1: copus_step_end() exits after a rescale checkpoint; 0: it returns
	 * and copus_state() says COPUS_STATE_CHECKPOINTED. */
	int exit_on_rescale;
	/* Steps between two agreements on a pending request (>= 1). */
	int agree_interval;
	/* Decay of the gradient statistics' moving average; 0: 0.95. */
	double noise_decay;
	/* 1: do not install the signal handlers (the application calls
	 * copus_request_rescale itself, e.g. from its own handler). */
	int no_signal_handler;
	/*
	 * Seconds between periodic checkpoints, so that a node failure loses
	 * at most that much training; 0: $COPUS_CKPT_INTERVAL, or none when it
	 * is unset; < 0: none. Taken at the first step boundary after the
	 * interval on any rank (the ranks agree); a failed one is logged and
	 * training goes on.
	 */
	double ckpt_interval;
	/*
	 * Optional: load a checkpoint written under other pipeline or tensor
	 * degrees (called instead of load, with cb_arg). Without it such a
	 * checkpoint is refused on every rank.
	 */
	copus_reshard_cb reshard;
	/*
	 * Optional: the model (copied by copus_init). It travels in the
	 * hints ("mdl") so that the scheduler plans the job's cells; with
	 * pipeline_degree = tensor_degree = 0 the planner also chooses the
	 * job's degrees and stages, and n_layers must be 0 (the stages are
	 * the planner's layers of the model). Appended last: a config built
	 * with COPUS_CONFIG_INITIALIZER leaves it NULL.
	 */
	const copus_planner_desc *model;
	/*
	 * Optional: a name of the model's shape and code (1 to
	 * COPUS_FINGERPRINT_MAX - 1 printable bytes, such as a hash of its
	 * architecture), recorded in the checkpoint's manifest. A checkpoint
	 * whose manifest names another fingerprint is refused by copus_init()
	 * on every rank, which names both; a manifest without one, or a
	 * config without one (NULL or ""), is accepted. Appended after model:
	 * COPUS_CONFIG_INITIALIZER leaves it NULL.
	 */
	const char *fingerprint;
} copus_config;

/* Bytes of a model fingerprint, its terminating zero included. */
#define COPUS_FINGERPRINT_MAX 128

#define COPUS_CONFIG_INITIALIZER                                              \
	{                                                                     \
		.size = sizeof(copus_config), .magic = COPUS_CONFIG_MAGIC,    \
		.version = COPUS_API_VERSION, .rank = -1, .world = -1,        \
		.local_rank = -1, .nodes = -1, .gpus_per_node = -1,           \
		.pipeline_degree = 1, .tensor_degree = 1,                     \
		.exit_on_rescale = 1, .agree_interval = 1,                    \
	}

/*
 * Fill *cfg (of size bytes) as COPUS_CONFIG_INITIALIZER does (for FFI).
 * size is sizeof(copus_config), or the size of an older layout: before
 * model was appended (offsetof(copus_config, model)) or before fingerprint
 * was (offsetof(copus_config, fingerprint)); copus_init() takes those too,
 * their newer fields zero.
 */
int copus_config_init(copus_config *cfg, size_t size);

/* ------------------------------------------------------------------------
 * The runtime
 * ------------------------------------------------------------------------ */

typedef struct copus_ctx copus_ctx;

/* What the runtime found about the job. */
typedef struct copus_job_info {
	uint32_t job_id;      /* 0 outside Slurm */
	int restart_count;
	int nodes;
	int world;
	int rank;
	int local_rank;
	int gpus_per_node;
	int restored;         /* 1: state restored from a checkpoint */
	int64_t step;         /* steps completed (restored ones included) */
	double progress;      /* scale-invariant iterations */
	int64_t samples;      /* samples processed */
} copus_job_info;

/* The batch and parallel plan for the current allocation. */
typedef struct copus_plan {
	double batch;        /* total batch */
	int local;           /* micro-batch per GPU */
	int accum_steps;     /* accumulation steps before a sync */
	double lr_gain;      /* multiply the learning rate tuned for M0 */
	double efficiency;
	double throughput;   /* predicted samples/s */
	double goodput;
	int data_degree, pipeline_degree, tensor_degree;
	int data_rank, pipeline_rank, tensor_rank;
	int first_layer;     /* this rank's pipeline stage: layers */
	int n_layers;        /* [first_layer, first_layer + n_layers) */
} copus_plan;

/*
 * Read the allocation from the environment listed at the top of this header
 * (torchrun's RANK, WORLD_SIZE and LOCAL_RANK take precedence over Slurm's
 * SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID; the node count is
 * SLURM_JOB_NUM_NODES or SLURM_NNODES), install the rescale signal handler,
 * and restore the latest checkpoint through cfg->load when one exists.
 */
int copus_init(const copus_config *cfg, copus_ctx **out);

/* Flush the last hint, restore the signal handlers, free the context. */
int copus_finalize(copus_ctx *ctx);

/*
 * The last error of the context, a sentence; never NULL. With ctx NULL:
 * why this thread's last copus_init failed (its context is gone).
 */
const char *copus_errmsg(const copus_ctx *ctx);

int copus_info(const copus_ctx *ctx, copus_job_info *out);

/* Mark the start of a step (monotonic clock). */
int copus_step_begin(copus_ctx *ctx);
/* Mark the synchronisation part of the step (optional). */
int copus_sync_begin(copus_ctx *ctx);
int copus_sync_end(copus_ctx *ctx);

/*
 * Squared norm of one micro-batch's local gradient (before the all-reduce),
 * and of the synchronised gradient (the mean over all micro-batches of all
 * data-parallel replicas). Both optional; when given, copus_step_end()
 * updates the gradient statistics.
 */
int copus_grad_local(copus_ctx *ctx, double sqnorm);
int copus_grad_total(copus_ctx *ctx, double sqnorm);

/*
 * One process without accumulation has one gradient per step: the noise
 * is then measured from consecutive steps, as two estimates of the same
 * gradient (the model moves little in one step). Give this step's squared
 * norm to copus_grad_local() and the dot product of this step's gradient
 * with the previous step's here (copus_grad_total() is not needed).
 */
int copus_grad_dot(copus_ctx *ctx, double dot);

/*
 * End a step that used micro-batches of local samples per GPU and accum_steps
 * accumulation steps: record its time, update progress and the gradient
 * statistics, publish a hint when due (rank 0), and honour a rescale request.
 * A checkpoint that fails here (rescale or periodic) never fails the step:
 * the reason is logged, the previous checkpoint stays, training goes on at
 * the same size. After a failed rescale checkpoint rank 0 publishes its
 * hint with the state running at once (it had said checkpointing), which
 * tells the scheduler that the job stays where it is; the process does not
 * exit, so nothing is requeued without a checkpoint.
 */
int copus_step_end(copus_ctx *ctx, int local, int accum_steps);

/* The smoothed gradient statistics; COPUS_ENODATA before any. */
int copus_grad_stats_get(const copus_ctx *ctx, copus_grad_stats *out);

/*
 * The plan that maximises goodput on the current allocation. It is the same
 * on every rank that calls it after the same step: with several ranks it is
 * computed from the inputs the ranks agreed on at the latest step boundary
 * (rank 0's gradient statistics and fitted throughput, refitted at most once
 * a second), never from one rank's own measurements; before the first
 * boundary, from the restored checkpoint (or cfg.prior).
 */
int copus_plan_get(copus_ctx *ctx, copus_plan *out);

/*
 * The step boundary's agreement carried by the application's own collective
 * (its gradient all-reduce), so that the runtime adds no collective of its
 * own to a step. In a step, before the all-reduce, copus_agree_pack() fills
 * COPUS_AGREE_LEN values; the application sums them over all ranks with its
 * gradients (exact in float32 and float64, not in float16) and hands the
 * sums to copus_agree_unpack() before copus_step_end(), which then calls no
 * agree callback (and ignores agree_interval). Every rank folds in the same
 * steps; a step that does not fold falls back to the agree callback. Sums
 * over fewer ranks than the job's, or rounded ones, are COPUS_EINVAL.
 */
#define COPUS_AGREE_LEN 48
int copus_agree_pack(copus_ctx *ctx, double *out, int n);
int copus_agree_unpack(copus_ctx *ctx, const double *sums, int n);

/* The throughput parameters fitted from the steps measured so far on the
 * current run's GPU type: each configuration (nodes, GPUs, micro-batch,
 * accumulation) by its mean step time, leaving out those of fewer than 3
 * steps once one configuration has 3 (a lone step is an outlier, the first
 * at a new micro-batch above all). */
int copus_perf_get(copus_ctx *ctx, copus_perf_params *out);

/*
 * The hint rank 0 would publish now. Once the current type has a fit, its
 * "perf" holds it first, then the model of each other type the job's
 * checkpoints kept steps of, each fitted from that type's steps only, at
 * most COPUS_HINT_MAX_TYPES in all.
 */
int copus_hint_get(const copus_ctx *ctx, copus_hint *out);

/* Publish a hint now, ignoring the interval (rank 0 only). */
int copus_publish(copus_ctx *ctx);

/* Ask for a rescale, as the signal does; honoured at the next boundary. */
int copus_request_rescale(copus_ctx *ctx);

/* Write a checkpoint now (collective: every rank calls it after a step). */
int copus_checkpoint(copus_ctx *ctx);

/*
 * The planner's plan of this job (planned degrees, see the top of this
 * header): degrees, micro-batches, the first layer of every stage and the
 * predicted times. COPUS_ENODATA when the job chose its own degrees.
 */
int copus_planned(const copus_ctx *ctx, copus_planner_plan *out);

/* Running, checkpointing, or checkpointed (the process should exit). */
int copus_state(const copus_ctx *ctx, copus_job_state *out);

/* The exit code a checkpointed process exits with. */
int copus_exit_code(const copus_ctx *ctx, int *out);

/*
 * Share len bytes of rank 0 (an ncclUniqueId) with every rank: through PMIx
 * (Put, Commit, Fence, Get) when launched by srun --mpi=pmix, otherwise
 * through cfg->bcast; trivial with one rank.
 */
int copus_bootstrap(copus_ctx *ctx, void *blob, size_t len);

/*
 * NCCL communicators of the plan (only with NCCL; COPUS_ESTATE otherwise).
 * The members are ncclComm_t. The CUDA device is set to local_rank modulo
 * the visible devices.
 */
typedef struct copus_comms {
	void *world;
	void *data;
	void *pipeline;
	void *tensor;
} copus_comms;

int copus_comms_create(copus_ctx *ctx, copus_comms *out);
int copus_comms_destroy(copus_ctx *ctx, copus_comms *comms);

/*
 * Go on without some ranks, without a restart: the communicators of the
 * ranks that stay when whole data-parallel replicas leave (for instance
 * the ranks of nodes the job gives up: copus_plan_ranks_of_nodes() of
 * copus/plan.h). Collective: every rank of comms calls it with the same
 * leaving[] (n_leaving ranks of the current world, as in
 * copus_plan_shrink()), at a step boundary, once the step's collectives on
 * comms have completed.
 *
 * With ncclCommShrink (NCCL 2.27 and later) a rank that stays gets in *out
 * the world communicator shrunk to the ranks that stay and its data,
 * pipeline and tensor groups split from it, laid out as the plan of the
 * smaller data degree (copus_plan_shrink() gives the degrees and each
 * rank's new rank); its pipeline stage and tensor slice do not change, so
 * it keeps its shard of the model and of the optimizer state. A leaving
 * rank takes no part in the shrink: it gets COPUS_OK and an empty *out
 * (all NULL), and should exit (after copus_comms_destroy(ctx, comms)).
 * Every rank then destroys comms, which the new communicators do not need;
 * the ranks that stay use *out from then on.
 *
 * Only the communicators change: the context still describes the world it
 * was initialised with (copus_info(), copus_plan_get(), checkpoints and
 * hints), and the agree and bcast callbacks are the application's, which
 * it rebuilds for the ranks that stay. The caller re-initialises libcopus
 * for the new world: copus_checkpoint() (before the shrink, on every rank),
 * copus_finalize(), then, on the ranks that stay, copus_init() with
 * cfg.rank and cfg.world (and cfg.nodes) of the new plan and the pipeline
 * and tensor degrees it runs (a planned job gives them explicitly, so that
 * they are not planned anew), which restores that checkpoint under the new
 * data degree (every rank loads its shard's file), and takes its batch from
 * the new copus_plan_get(): the same global batch over fewer replicas is
 * more samples, or accumulation steps, per replica (copus/plan.h,
 * copus_plan_shrink). Under the planner's data_inner layout the new context
 * lays ranks out as copus/plan.h does, unlike the shrunk communicators: such
 * a job takes its coordinates from copus_plan_coords_of_layout(), not from
 * copus_plan_get(). Re-initialising is the caller's because the context's
 * measurements, checkpoints and hints all depend on the world.
 *
 * The scheduler (sched/copus) still asks a job to shrink by the rescale
 * signal, after which the job checkpoints and is requeued at its new size.
 * A job told to shrink whose nodes that leave hold whole replicas can use
 * this instead and skip the restart; libcopus does not hand the nodes back
 * to Slurm for it.
 *
 * COPUS_ERANGE when the leaving ranks cut a replica or are every rank;
 * COPUS_EVERSION when the NCCL libcopus was built with has no
 * ncclCommShrink (the caller falls back to the checkpoint and restart);
 * COPUS_ESTATE in a libcopus built without NCCL; COPUS_EIO when NCCL
 * fails (what was built is aborted; comms is left as it was).
 */
int copus_comms_shrink(copus_ctx *ctx, copus_comms *comms, const int *leaving,
		       int n_leaving, copus_comms *out);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_COPUS_H */
