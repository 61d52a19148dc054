/*
 * copus: the hint and rescale protocol between a training job (libcopus)
 * and the scheduler (sched/copus in slurmctld).
 * Reader: both sides: the runtime that publishes hints and the scheduler
 * that reads them.
 *
 * ---------------------------------------------------------------------------
 * The channel: the job's own Comment field
 * ---------------------------------------------------------------------------
 * Rank 0 of a job publishes its hint by setting the Comment of its own job:
 * libcopus runs "scontrol update JobId=<id> Comment=<hint>" in a child
 * process (runtime/publish.c says why libslurm stays out of the training
 * process), and scontrol sends slurmctld libslurm's job update request
 * (slurm_update_job2(), REQUEST_UPDATE_JOB) with the job id and the comment
 * set, nothing else. We rely on these properties of Slurm 22.05.8, checked
 * in its source (src/scontrol/update_job.c, src/slurmctld/job_mgr.c):
 *
 *  - Authenticated: the request is signed by munge (or the configured auth
 *    plugin); _update_job() refuses it unless the caller is the job's owner
 *    or an operator ("(job_ptr->user_id != uid) && !operator"). Nobody else
 *    can forge a job's hint. Unlike AdminComment, Comment needs no privilege.
 *  - Writable while the job runs: only finished jobs are refused
 *    (ESLURM_JOB_FINISHED); a running or pending job may change its comment.
 *  - Bounded: _test_job_desc_fields() refuses a comment longer than 1024
 *    bytes (ESLURM_PATHNAME_TOO_LONG). A hint is at most COPUS_HINT_MAX_LEN
 *    (1024) bytes, prefix included, terminating NUL excluded.
 *  - Persistent, no shared file system: job_ptr->comment is part of the job
 *    record that slurmctld packs into its state save (StateSaveLocation) and
 *    reloads after a restart; the plugin reads it from job_ptr->comment under
 *    the job read lock.
 *
 * A job that runs with libcopus hands its Comment to copus: whatever the user
 * put there is overwritten by the first hint. The Comment is visible to other
 * users through squeue; hints hold only performance figures.
 *
 * ---------------------------------------------------------------------------
 * The hint message
 * ---------------------------------------------------------------------------
 * COPUS_HINT_PREFIX ("copus1:") followed by one compact JSON object. Every key
 * below is required unless marked optional; no other key is allowed. Numbers
 * are JSON numbers (integers are accepted where a real is expected; a real is
 * not accepted where an integer is expected).
 *
 *   "v"    int     schema version, equal to COPUS_HINT_VERSION (1)
 *   "job"  int     the Slurm job id (1 .. 2^32-1); the receiver ignores a
 *                  hint whose id differs from the job that carries it
 *   "st"   string  "running", "checkpointing" or "checkpointed"
 *   "step" int     the job's iteration count; for "checkpointed" the step
 *                  the checkpoint holds (0 .. 2^53)
 *   "rc"   int     SLURM_RESTART_COUNT seen by the job (0 .. 1e6)
 *   "t"    int     Unix time of publication, seconds (>= 0)
 *   "b0"   number  initial (tuned) total batch size M0
 *   "bmax" number  largest total batch the job accepts
 *   "lmin" int     smallest micro-batch per GPU
 *   "lmax" int     largest micro-batch per GPU
 *   "acc"  bool    gradient accumulation allowed
 *   "sqr"  number  |G|^2 at batch b0 (0 with "var" 0: not yet measured)
 *   "var"  number  tr(Sigma) at batch b0
 *   "prog" number  progress in scale-invariant iterations (iterations at b0)
 *   "tgt"  number  optional: the progress at which the job ends
 *   "gran" int     optional: the job runs only on a multiple of this many
 *                  GPUs (its pipeline x tensor degree), 1 ..
 *                  COPUS_HINT_GRAN_MAX; absent: any count
 *   "perf" object  optional: fitted throughput parameters per GPU type,
 *                  { "<type>": [alpha_c, beta_c, alpha_n, beta_n, alpha_r,
 *                  beta_r, gamma], ... } (copus_perf_params order), at most
 *                  COPUS_HINT_MAX_TYPES types; a type name is 1..15 chars of
 *                  [A-Za-z0-9_.-] (Slurm's GRES type, or "default")
 *   "mdl"  object  optional: the model, so that the scheduler plans its
 *                  cells with the core planner (copus/planner.h) as the
 *                  job itself does; absent: the job chose its own degrees.
 *                  Integer members, all of its architecture's and no other:
 *                    "a"  string  "tf" (transformer), "moe" (mixture of
 *                                 experts) or "wrn" (Wide-ResNet)
 *                    "dt" int     bytes of the data type, 2 or 4
 *                  "tf" and "moe":
 *                    "l" layers (1 .. COPUS_PLANNER_MAX_LAYERS - 2),
 *                    "h" hidden size, "n" attention heads, "s" sequence
 *                    length, "v" vocabulary;
 *                  "moe" also: "e" experts per layer, "g" tokens of one
 *                    routing group;
 *                  "wrn": "d" depth (50 or 101), "w" width factor, "c"
 *                    channels of the first stage, "k" classes, "i" image
 *                    side in pixels (at least 32).
 *                  Each at least 1 and at most COPUS_HINT_MODEL_MAX (the
 *                  vocabulary and classes COPUS_HINT_VOCAB_MAX); the
 *                  descriptor must give copus_planner_layers() a model.
 *
 * A full "mdl" ({"a":"moe","dt":2, and the seven MoE members at their
 * largest}) takes 106 bytes with its comma: a hint with it, four "perf"
 * types, "tgt" and "gran", every number at its longest, takes 913 bytes,
 * within COPUS_HINT_MAX_LEN; nothing has to be dropped.
 *
 * Example (wrapped here; one line in the Comment):
 *   copus1:{"v":1,"job":42,"st":"running","step":1200,"rc":1,"t":1790000000,
 *   "b0":128,"bmax":4096,"lmin":8,"lmax":256,"acc":true,"sqr":0.51,
 *   "var":3.2,"prog":950.5,"perf":{"a100":[0.01,0.0004,0.05,0.001,0.02,
 *   0.0005,1.5]},"mdl":{"a":"tf","dt":2,"l":24,"h":1024,"n":16,"s":512,
 *   "v":30522}}
 *
 * The receiver treats a hint as untrusted input. copus_hint_parse() rejects:
 * a missing prefix, more than COPUS_HINT_MAX_LEN bytes, malformed JSON
 * (json-c in strict mode, nesting depth at most 4), a value that is not an
 * object, an unknown, duplicate or missing key, a wrong type, a non-finite
 * or negative number, an unknown state, a bad GPU type name, too many types,
 * a model member out of its range or of another architecture, and a version other than 1 (COPUS_EVERSION). It clamps, and counts in
 * copus_hint.clamped, values that have the right sign but lie outside the
 * bounds below (COPUS_HINT_* limits): the batch sizes to [1, 1e7] with
 * bmax >= b0, micro-batches to [1, 1e6] with lmax >= lmin, time parameters to
 * [1e-8, 1e4] s, gamma to [1, 10], sqr and var to at most 1e30, progress to
 * at most 1e15. The plugin logs a rejected hint (the message names the field
 * and value) and keeps the last good one.
 *
 * Rate: libcopus publishes at most once every COPUS_HINT_INTERVAL (30) s,
 * except the state changes of a rescale ("checkpointing", "checkpointed"),
 * which go out at once (at most two per rescale request), and the first
 * hint of a run with a throughput model: a run's first hint goes out at its
 * first step, before anything is measured (or with the model its checkpoint
 * kept), and the first one that carries a model of the run's own placement
 * (its GPU type, nodes and data-parallel replicas, measured on 3 steps or
 * more) follows COPUS_HINT_FIRST_MODEL (2) s later or as soon as that
 * placement is measured after that (once per run), so that the scheduler
 * can size a job within seconds of its start or of its rescale instead of
 * an interval later. The plugin reads
 * the Comment once per scheduling round, so a misbehaving job costs it at
 * most one parse per round.
 *
 * ---------------------------------------------------------------------------
 * The rescale protocol
 * ---------------------------------------------------------------------------
 *  1. The plugin decides to move a running job and sends it
 *     COPUS_RESCALE_SIGNAL (SIGUSR1) on every step and the batch shell
 *     (slurm_kill_job(job_id, SIGUSR1, KILL_FULL_JOB), or job_signal()
 *     inside slurmctld; by hand: scancel --full --signal=USR1 JOBID). A job
 *     may choose another signal with COPUS_SIGNAL=<number or name>; SIGTERM
 *     (Slurm's requeue and preemption signal) also requests a checkpoint.
 *     The batch script should forward it or run the training with exec.
 *  2. Every rank's signal handler only sets a flag. At the next step boundary
 *     (copus_step_end) the ranks agree through the application's agreement
 *     callback (a max all-reduce; trivial with one process) so that all of
 *     them checkpoint after the same step, even if the signal reached them at
 *     different times.
 *  3. Rank 0 publishes st="checkpointing" with the current step, the save
 *     callbacks run, the checkpoint is written atomically (temporary file,
 *     fsync, rename, fsync of the directory; then a manifest the same way),
 *     rank 0 publishes st="checkpointed" with "step" = the step the
 *     checkpoint holds, and every process exits with COPUS_EXIT_REQUEUE (75,
 *     or COPUS_REQUEUE_EXIT=<code>). With RequeueExit=75 in slurm.conf Slurm
 *     requeues the job by itself; the plugin may equally requeue it (held)
 *     as soon as it sees "checkpointed", set the new size and release it.
 *  4. The plugin waits for "checkpointed" with a deadline; a job that does not
 *     answer is not resized. A job that sees no hint channel (no Slurm) keeps
 *     running: publication failures are logged, never fatal.
 *  5. On restart (SLURM_RESTART_COUNT > 0, or a manifest present), libcopus
 *     reads the manifest, calls the load callback, and publishes
 *     st="running" with the restored step and the new restart count.
 *
 * The functions below are pure (core library): they encode and parse the
 * message on strings the caller hands in; no I/O.
 */
#ifndef COPUS_HINT_H
#define COPUS_HINT_H

#include <stddef.h>
#include <stdint.h>

#include <copus/error.h>
#include <copus/model.h>
#include <copus/planner.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COPUS_HINT_PREFIX "copus1:"
#define COPUS_HINT_VERSION 1
/* Bytes of a hint, prefix included, NUL excluded (Slurm's Comment limit). */
#define COPUS_HINT_MAX_LEN 1024
#define COPUS_HINT_MAX_TYPES 4
/* Bytes of a GPU type name including its NUL. */
#define COPUS_HINT_TYPE_LEN 16
/* Least seconds between two "running" hints. */
#define COPUS_HINT_INTERVAL 30
/* Least seconds from a run's first hint to its first with a model. */
#define COPUS_HINT_FIRST_MODEL 2
/* The default signal that asks a job to checkpoint (SIGUSR1 on Linux). */
#define COPUS_RESCALE_SIGNAL 10
/* The exit code of a process that checkpointed for a rescale. */
#define COPUS_EXIT_REQUEUE 75

/* Bounds the receiver clamps to. */
#define COPUS_HINT_BATCH_MAX 1e7
#define COPUS_HINT_LOCAL_MAX 1000000
#define COPUS_HINT_TIME_MIN 1e-8
#define COPUS_HINT_TIME_MAX 1e4
#define COPUS_HINT_GAMMA_MIN 1.0
#define COPUS_HINT_GAMMA_MAX 10.0
#define COPUS_HINT_GRAD_MAX 1e30
#define COPUS_HINT_PROGRESS_MAX 1e15
#define COPUS_HINT_RESTART_MAX 1000000
#define COPUS_HINT_STEP_MAX 9007199254740992LL /* 2^53 */
#define COPUS_HINT_GRAN_MAX 4096
/* The largest member of "mdl" but its vocabulary and classes. */
#define COPUS_HINT_MODEL_MAX 1048576     /* 2^20 */
#define COPUS_HINT_VOCAB_MAX 16777216    /* 2^24 */

typedef enum copus_job_state {
	COPUS_STATE_RUNNING = 0,
	COPUS_STATE_CHECKPOINTING = 1,
	COPUS_STATE_CHECKPOINTED = 2,
} copus_job_state;

typedef struct copus_hint_perf {
	char type[COPUS_HINT_TYPE_LEN]; /* GPU type, NUL-terminated */
	copus_perf_params perf;
} copus_hint_perf;

/* The decoded message. */
typedef struct copus_hint {
	int version;          /* COPUS_HINT_VERSION */
	uint32_t job_id;
	copus_job_state state;
	int64_t step;
	int restart_count;
	int64_t time;         /* Unix seconds */
	copus_batch_limits limits;
	copus_grad_stats grad;
	double progress;
	double target;        /* 0: unknown */
	int granularity;      /* GPUs in multiples of this; 0 or 1: any */
	int n_perf;           /* 0 .. COPUS_HINT_MAX_TYPES */
	copus_hint_perf perf[COPUS_HINT_MAX_TYPES];
	int has_model;        /* 1: model holds the job's "mdl" */
	copus_planner_desc model;
	int clamped;          /* parse only: values clamped into range */
} copus_hint;

/* The state's name in the message ("running", ...), or NULL. */
const char *copus_job_state_name(copus_job_state s);

/*
 * Write the message (prefix and JSON, NUL-terminated) into buf of size bytes.
 * *len (may be NULL) receives its length. COPUS_EINVAL when a field is out of
 * its range (the message names it in err when err is not NULL), COPUS_ERANGE
 * when the message would exceed COPUS_HINT_MAX_LEN or size - 1.
 */
int copus_hint_encode(const copus_hint *h, char *buf, size_t size,
		      size_t *len, char *err, size_t errlen);

/*
 * Parse a message (NUL-terminated text, e.g. a job's Comment) into *out.
 * Returns COPUS_OK (possibly with out->clamped > 0), COPUS_EPARSE for
 * malformed or out-of-range input, COPUS_EVERSION for another version,
 * COPUS_EINVAL for NULL arguments. On failure err (when not NULL) receives
 * a sentence naming the field and value, and *out is left zeroed.
 */
int copus_hint_parse(const char *text, copus_hint *out, char *err,
		     size_t errlen);

/* Whether text starts with the prefix of some copus hint version. */
int copus_hint_is_hint(const char *text);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_HINT_H */
