/*
 * Internals of libcopus shared by the files of runtime/. The files call down,
 * never back up: runtime.c, the facade of copus/copus.h, calls rescale.c,
 * publish.c, checkpoint.c and measure.c; rescale.c calls checkpoint.c and
 * publish.c; publish.c calls measure.c; checkpoint.c calls
 * checkpoint-reshard.c, checkpoint-check.c and checkpoint-format.c,
 * checkpoint-reshard.c and checkpoint-check.c call checkpoint-format.c;
 * runtime.c also calls checkpoint-check.c (the start-up checks); every
 * file calls common.c. nccl.c builds on the
 * public copus_plan_get() and copus_bootstrap().
 */
#ifndef COPUS_RUNTIME_INTERNAL_H
#define COPUS_RUNTIME_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <copus/copus.h>
#include <copus/noise.h>
#include <copus/plan.h>

/* Distinct measured configurations kept for the fit. */
#define COPUS_MAX_OBS 64
/* Bytes of the context's last error message. */
#define COPUS_ERRMSG_LEN 512
/* Seconds to wait for the acknowledgement to reach the scheduler. */
#define COPUS_ACK_TIMEOUT 20.0
/* The manifest that names the latest complete checkpoint. */
#define COPUS_MANIFEST "copus.manifest"
/*
 * 4: a CRC-32 of the rest of its text ("checksum", last), the layout's
 * data_inner, when it was written, and the model's fingerprint (optional);
 * 3: the layout (data, tensor, pipeline degrees) of the run that wrote it;
 * 2: every file with its CRC-32 and the saving mode; 1 (sizes only). All
 * four are read.
 */
#define COPUS_MANIFEST_VERSION 4
/* Largest manifest read back (it holds at most COPUS_MAX_OBS entries). */
#define COPUS_MANIFEST_MAX (256 * 1024)

/* The longest interval between periodic checkpoints: 30 days. */
#define COPUS__MAX_CKPT_INTERVAL (30 * 86400.0)

#define COPUS__STR(x) COPUS__STR_(x)
#define COPUS__STR_(x) #x

/*
 * The COPUS_* environment variables libcopus reads, all of them, in one
 * table: X(NAME, TYPE, DEFAULT, LO, HI, DOC) for COPUS_<NAME>. TYPE is
 * TEXT (any text), INT (an integer in [LO, HI]), SECONDS (a number of
 * seconds in [LO, HI]) or SIGNAL (a signal number in [LO, HI], or USR1,
 * USR2, TERM or INT, with or without SIG); DEFAULT is the text an unset or
 * empty variable stands for (NULL: none). A field of copus_config, where
 * there is one, stands over its variable. Files read them only through
 * copus__env_*() (common.c), each time copus_init runs. Users find the
 * list in include/copus/copus.h; tests/test-runtime-env.sh checks that the
 * two agree and that nothing else in runtime/ reads a COPUS_ variable.
 */
#define COPUS__ENV_VARS(X)                                                    \
	X(JOB_ID, TEXT, NULL, 0, 0,                                           \
	  "the job id when SLURM_JOB_ID is unset (another resource manager)") \
	X(CKPT_DIR, TEXT, NULL, 0, 0,                                         \
	  "checkpoint directory when copus_config.ckpt_dir is NULL")          \
	X(CKPT_INTERVAL, SECONDS, "0", 0, COPUS__MAX_CKPT_INTERVAL,           \
	  "seconds between periodic checkpoints (0: none)")                   \
	X(GPU_TYPE, TEXT, "default", 0, 0,                                    \
	  "GPU type named in hints, whose constants plan the model")          \
	X(PLANNER_GPUS, TEXT, NULL, 0, 0,                                     \
	  "a file of calibrated GPU constants for planning the model")        \
	X(SIGNAL, SIGNAL, COPUS__STR(COPUS_RESCALE_SIGNAL), 1, NSIG - 1,     \
	  "the rescale signal, a number or a name")                           \
	X(REQUEUE_EXIT, INT, COPUS__STR(COPUS_EXIT_REQUEUE), 1, 255,          \
	  "exit code after a rescale checkpoint")                             \
	X(HINTS, INT, "1", 0, 1, "0: publish no hints")                       \
	X(SCONTROL, TEXT, "scontrol", 0, 0,                                   \
	  "the scontrol program that publishes hints")                        \
	X(NO_PMIX, INT, "0", 0, 1,                                            \
	  "1: bootstrap through copus_config.bcast even under PMIx")          \
	X(DEBUG, INT, "0", 0, 2, "log what the runtime does on stderr (0-2)")

enum copus__env_var {
#define COPUS__ENV_ENUM(name, type, def, lo, hi, doc) COPUS__ENV_##name,
	COPUS__ENV_VARS(COPUS__ENV_ENUM)
#undef COPUS__ENV_ENUM
	COPUS__ENV_COUNT
};

/* One measured configuration: sums for the mean times. */
struct copus__obs {
	char type[COPUS_HINT_TYPE_LEN];
	int nodes, replicas, local, accum_steps;
	double sum_compute; /* per micro-batch */
	double sum_step;
	int64_t n;
};

struct copus__publisher;

/* Where a restored checkpoint came from: rank 0's line at the start. */
struct copus__origin {
	bool restored;
	int64_t step;
	int world;
	copus_plan_degrees layout;
	int data_inner;       /* -1: not recorded (before version 4) */
	int64_t written;      /* UTC seconds; -1: not recorded */
	int64_t job;          /* -1: not recorded */
	int restart;          /* -1: not recorded */
};

/*
 * What the ranks agree on at a step boundary: whether any rank was asked to
 * rescale or is due for a periodic checkpoint, and rank 0's inputs of the
 * plan (its gradient statistics and fitted throughput parameters), so that
 * every rank computes the same plan.
 */
struct copus__boundary {
	bool rescale;
	bool ckpt_due;
	bool have_grad;
	copus_grad_stats grad;
	bool have_perf;
	copus_perf_params perf;
};

struct copus_ctx {
	copus_config cfg;        /* the caller's config, copied */
	char *ckpt_dir;          /* owned copies of the config's strings */
	char *fingerprint;       /* NULL: none */
	double *layer_costs;
	char gpu_type[COPUS_HINT_TYPE_LEN];
	copus_job_info info;
	copus_plan_degrees degrees;
	/* The model (cfg.model, copied) and, when the planner chose the
	 * degrees, its plan. */
	bool has_model;
	copus_planner_desc model;
	bool planned;
	copus_planner_plan plan;
	char err[COPUS_ERRMSG_LEN];
	int verbose;             /* COPUS_DEBUG */
	bool no_hints;           /* COPUS_HINTS=0 */
	bool no_pmix;            /* COPUS_NO_PMIX=1 */

	/* The step being measured. */
	bool in_step, in_sync;
	struct timespec t_begin, t_sync;
	double sync_time;
	int64_t skip_obs;        /* steps left before timings count */

	/* Gradient norms of the current step. */
	double local_sum;
	int local_count;
	double total_sqr;
	bool have_total;
	/* Consecutive steps of one gradient each (copus_grad_dot). */
	double dot;
	bool have_dot;
	double prev_sqr;         /* the previous step's squared norm; < 0: none */
	int prev_local;          /* and its micro-batch */
	copus_noise noise;
	copus_grad_stats last_raw;

	/* Observations and fitted parameters per GPU type. */
	struct copus__obs obs[COPUS_MAX_OBS];
	int n_obs;
	copus_hint_perf perf[COPUS_HINT_MAX_TYPES];
	int n_perf;
	bool obs_dirty;

	/* The rescale state machine. */
	copus_job_state state;
	int exit_code;
	int signals[2];
	struct sigaction old_act[2];
	bool handlers_installed;
	int64_t since_agree;
	int64_t ckpt_step;       /* step of the latest committed checkpoint */
	double ckpt_interval;    /* seconds between periodic ones; 0: none */
	double last_ckpt;        /* monotonic seconds of the latest attempt */
	char **ckpt_files;       /* its files, for removal once replaced */
	int n_ckpt_files;
	struct copus__origin origin; /* of the checkpoint restored at init */

	/*
	 * The plan's inputs as the ranks last agreed on them (rank 0's): the
	 * plan of every rank is computed from these alone.
	 */
	copus_grad_stats plan_grad;
	copus_perf_params plan_perf;
	bool plan_have_perf;
	double last_refit;       /* monotonic seconds of rank 0's last fit */
	/* The agreement of this step, delivered by copus_agree_unpack(). */
	struct copus__boundary folded;
	bool have_folded;

	/* Hints. */
	struct copus__publisher *pub;
	double hint_interval;
	double last_hint;        /* monotonic seconds; < 0: never */
	bool hint_modelled;      /* a hint of this run carried a model of
				  * its placement, or a fit failed: no
				  * early hint */
	uint64_t last_hint_seq;
};

/* common.c */
/* Keep the reason copus_init failed for copus_errmsg(NULL) (this thread). */
void copus__init_failed(const copus_ctx *ctx, int status);
/* Set the context's error message and return status. */
int copus__fail(copus_ctx *ctx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The runtime's one logger: "copus[rank]: message" on stderr. */
void copus__log(const copus_ctx *ctx, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Seconds on the monotonic clock. */
double copus__now(void);
/* "COPUS_<NAME>" of a variable of COPUS__ENV_VARS. */
const char *copus__env_name(enum copus__env_var v);
/* Its text: the value when set and not empty, else its default (or NULL). */
const char *copus__env_text(enum copus__env_var v);
/*
 * The value of an INT or SIGNAL variable (its default when unset), or of
 * a SECONDS one; a malformed value is an error of ctx that names the
 * variable, and leaves *out alone.
 */
int copus__env_int(copus_ctx *ctx, enum copus__env_var v, int *out);
int copus__env_seconds(copus_ctx *ctx, enum copus__env_var v, double *out);
/*
 * An integer in [lo, hi] from a variable of another program (Slurm's,
 * torchrun's): unset or empty, *found = false and COPUS_OK; malformed, an
 * error naming it.
 */
int copus__env_foreign_int(copus_ctx *ctx, const char *name, long lo,
			   long hi, int *out, bool *found);
/*
 * In-place maximum of n values over all ranks (the application's agree
 * callback); trivial with one rank.
 */
int copus__agree(copus_ctx *ctx, int64_t *values, int n);
/*
 * The coordinates and groups of a rank under the job's degrees: those of
 * copus/plan.h's layout, or, when the planner chose its degrees with the
 * data ranks inside the pipeline ranks (data_inner), of that layout.
 */
int copus__coords(const copus_ctx *ctx, int rank, copus_plan_coords *out);
/* Whether the job's ranks are laid out with the data ranks inside. */
int copus__data_inner(const copus_ctx *ctx);
/*
 * The layers of a pipeline stage when the model's layers are split into
 * stages (copus_plan_stages over the layer costs; by count when the tables
 * do not fit in memory): 0 and 0 without layers.
 */
void copus__stage_layers(const copus_ctx *ctx, int stages, int stage,
			 int *first, int *count);

/* planned.c */
/* Whether the model is one the hint carries (an error names the field). */
int copus__model_check(copus_ctx *ctx, const copus_planner_desc *d);
/*
 * The planner's plan of ctx->model at the batch init_batch on the job's
 * cell: sets ctx->plan, ctx->degrees, and the model's layers (their
 * number and FLOPs as costs) in ctx->cfg; an error names the model, the
 * batch and the cell when no plan fits.
 */
int copus__plan_model(copus_ctx *ctx);
/* Rank 0's one line about the plan (nothing when not planned). */
void copus__plan_log(const copus_ctx *ctx);

/* measure.c */
/*
 * Account for a step of micro-batches of local samples and accum_steps
 * accumulation steps that took step seconds, compute of them outside the
 * synchronisation: the gradient statistics, the step count, samples and
 * progress, and (after the warm-up) the observation of its configuration.
 */
void copus__measure_step(copus_ctx *ctx, int local, int accum_steps,
			 double step, double compute);
/* The gradient statistics, or zeros (no information) before any. */
copus_grad_stats copus__grad(const copus_ctx *ctx);
/*
 * Fit the throughput parameters of the current GPU type when new steps were
 * observed; COPUS_ENODATA while there are none.
 */
int copus__fit(copus_ctx *ctx);
/* The fitted parameters of the current GPU type, or NULL. */
const copus_perf_params *copus__perf_of_type(const copus_ctx *ctx);
/*
 * Whether the run's own placement (its GPU type, nodes and data-parallel
 * replicas) has a configuration measured on enough steps to be fitted.
 */
bool copus__placement_measured(const copus_ctx *ctx);

/* checkpoint.c */
/*
 * Read the manifest of ckpt_dir, if any, and restore the runtime's state
 * and the application's (through the load callback).
 */
int copus__restore(copus_ctx *ctx);
/* Forget the files of the latest checkpoint. */
void copus__ckpt_files_free(copus_ctx *ctx);
/*
 * The file slot of a rank in a checkpoint: with save_all_ranks its rank;
 * otherwise its shard (pipeline stage and tensor slice, the data group of
 * copus/plan.h) when it is the first replica of the shard; -1 when the rank
 * saves nothing. *nslots: the number of files.
 */
int copus__ckpt_slot(const copus_ctx *ctx, int rank, int *nslots);

/* A checkpoint as its manifest names it. */
struct copus__manifest {
	int64_t step;
	int world;            /* the ranks of the run that wrote it */
	bool all_ranks;       /* every rank saved a file (else one per shard) */
	/* Its degrees; version 2 and 1 manifests: world x 1 x 1. */
	copus_plan_degrees layout;
	int n_layers;         /* the model's layers (0: not given) */
	/* The first layer of each stage and the end (pipeline + 1 values);
	 * NULL when the manifest does not say. */
	int *stages;
	int nfiles;
	char **files;
	long long *sizes;
	int64_t *crcs;        /* CRC-32 of each file; -1: not recorded */
	/* Version 4: the layout's data_inner (-1: not recorded), when it
	 * was written (UTC seconds, -1), the model's fingerprint (NULL). */
	int data_inner;
	int64_t written;
	char *fingerprint;
	int64_t job;          /* the run that wrote it; -1: not recorded */
	int restart;
};
/*
 * Parse a manifest's text (path only names it in errors) into m and the
 * runtime's state in ctx; COPUS_EPARSE with ctx's error naming the field.
 * Not static so that tests/fuzz/fuzz-manifest.c reaches the parser without
 * a checkpoint directory. Free m with copus__manifest_free().
 */

/* checkpoint-format.c */
struct json_object;
int copus__parse_manifest(copus_ctx *ctx, const char *path, const char *text,
			  struct copus__manifest *m);
void copus__manifest_free(struct copus__manifest *m);
/*
 * The manifest of the runtime's state and the checkpoint's files of a step
 * (nfiles names, sizes and CRC-32s), as JSON text to free; NULL when out of
 * memory.
 */
char *copus__manifest_text(copus_ctx *ctx, int64_t step, char **files,
			   const long long *sizes, const uint32_t *crcs,
			   int nfiles);
/*
 * Read a manifest at path (at most COPUS_MANIFEST_MAX bytes) into *out, to
 * free; COPUS_ENODATA when there is none.
 */
int copus__manifest_read(copus_ctx *ctx, const char *path, char **out);
/* The finite number o holds under key, if any. */
bool copus__manifest_num(struct json_object *o, const char *key,
			 double *out);
/*
 * Whether s (len bytes, as JSON gave it) is a model fingerprint: 1 to
 * COPUS_FINGERPRINT_MAX - 1 bytes, none of them a control character.
 */
bool copus__fingerprint_ok(const char *s, size_t len);
/* Free n file names and their array (NULL: nothing). */
void copus__ckpt_names_free(char **names, int n);
/* The CRC-32 of a whole file (zlib's polynomial). */
int copus__ckpt_crc(copus_ctx *ctx, const char *path, uint32_t *out);
/*
 * Whether file idx of the manifest is there, of its size and CRC-32; path:
 * its path (len bytes).
 */
int copus__ckpt_check_file(copus_ctx *ctx, const struct copus__manifest *m,
			   int idx, char *path, size_t len);

/* checkpoint-reshard.c */
/*
 * The file of the manifest that holds the state of the rank at the given
 * coordinates of its layout: with a file per rank, the old rank of those
 * coordinates under the old degrees and data_inner (which must be known);
 * else the shard's. -1 when the coordinates are outside the old layout.
 */
int copus__ckpt_file_at(const struct copus__manifest *m, int data_rank,
			int pipeline_rank, int tensor_rank);
/*
 * Whether the checkpoint's stages hold other layers than this run's (same
 * pipeline degree, another split: a planned job on another cell).
 */
bool copus__ckpt_stages_differ(const copus_ctx *ctx,
			       const struct copus__manifest *m);
/*
 * Restore under another layout through the reshard callback: this rank's
 * overlapping shards of the old layout, each checked first.
 */
int copus__ckpt_reshard(copus_ctx *ctx, const struct copus__manifest *m);

/* checkpoint-check.c */
/*
 * Take the checkpoint directory (config, else COPUS_CKPT_DIR) and the
 * model's fingerprint from the config: owned copies, the fingerprint
 * checked.
 */
int copus__ckpt_setup(copus_ctx *ctx, const copus_config *cfg);
/* Free what copus__ckpt_setup() and the checkpoints took. */
void copus__ckpt_free(copus_ctx *ctx);
/* Create the directory (and its parents) when it is not there. */
int copus__ckpt_mkdirs(copus_ctx *ctx, const char *dir);
/*
 * At start: the checkpoint directory, when there is one, can be created
 * and written (a file created and removed in it); COPUS_EIO naming it.
 */
int copus__ckpt_dir_check(copus_ctx *ctx);
/*
 * Whether this job may restore the checkpoint m names: the model's
 * fingerprint, when both have one, is the same.
 */
int copus__ckpt_compatible(copus_ctx *ctx, const struct copus__manifest *m);
/*
 * "data D x tensor T x pipeline P (data inner|outer)" in buf; without
 * the last part when data_inner is -1 (not recorded).
 */
const char *copus__layout_name(char *buf, size_t len,
			       const copus_plan_degrees *d, int data_inner);
/* Rank 0's line about the checkpoint it resumed from (none: nothing). */
void copus__resume_log(const copus_ctx *ctx);

/* publish.c */
int copus__publisher_start(copus_ctx *ctx);
void copus__publisher_stop(copus_ctx *ctx);
/* Deliver text now (callback) or queue it (Slurm); *seq identifies it. */
int copus__publish_text(copus_ctx *ctx, const char *text, uint64_t *seq);
/* Wait until the message seq was delivered; its status. */
int copus__publish_wait(copus_ctx *ctx, uint64_t seq, double timeout);
/* Encode and publish the current hint in the given state. */
int copus__publish_hint(copus_ctx *ctx, copus_job_state state, bool wait);

/* rescale.c */
/* This rank's side of the agreement at a step boundary. */
void copus__boundary_local(copus_ctx *ctx, struct copus__boundary *b);
/* Take the agreed plan inputs of b as the plan's. */
void copus__boundary_apply(copus_ctx *ctx, const struct copus__boundary *b);
int copus__signals_install(copus_ctx *ctx);
void copus__signals_restore(copus_ctx *ctx);
/*
 * At the end of a step, every agree_interval steps: the ranks agree whether
 * any of them was asked to rescale or is due for a periodic checkpoint. A
 * rescale checkpoints and rank 0 tells the scheduler; *checkpointed: the
 * checkpoint is durable and the process should exit with ctx->exit_code. A
 * periodic checkpoint leaves *checkpointed false and never fails the step.
 */
int copus__step_boundary(copus_ctx *ctx, bool *checkpointed);

#endif /* COPUS_RUNTIME_INTERNAL_H */
