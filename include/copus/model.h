/*
 * copus core: the goodput model of a data-parallel training job.
 * Reader: contributors (the policies, the simulator, the runtime's fit).
 *
 * The model follows Pollux (OSDI'21). The time of one iteration on K GPUs
 * spread over N nodes with a per-GPU micro-batch m and s accumulation steps is
 *
 *   T_grad = alpha_c + beta_c * m                      (one micro-batch)
 *   T_sync = 0                                          (K = 1)
 *          = alpha_r + beta_r * (K - 2)                 (N = 1, K > 1)
 *          = alpha_n + beta_n * (K - 2)                 (N > 1)
 *   T_opt  = (T_grad^gamma + T_sync^gamma)^(1/gamma)    (overlap, 1..10)
 *   T_iter = s * T_grad + T_opt
 *
 * (K - 2 is taken as at least 0.) The throughput is K * m * (s + 1) / T_iter
 * samples per second. The statistical efficiency of a total batch M relative
 * to the initial batch M0 comes from the gradient noise: with the squared
 * gradient norm sqr = |G|^2 and the variance var = tr(Sigma) at batch M0,
 * phi = M0 * var / sqr and E(M) = (phi + M0) / (phi + M). Goodput is
 * throughput x efficiency, in M0-equivalent samples per second.
 *
 * All functions are pure: no I/O, no global state. Every function checks its
 * arguments and returns COPUS_OK or a negative copus_status.
 */
#ifndef COPUS_MODEL_H
#define COPUS_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include <copus/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The seven parameters of the throughput model (seconds, seconds/sample). */
typedef struct copus_perf_params {
	double alpha_c; /* constant compute time of one micro-batch */
	double beta_c;  /* compute time per sample of a micro-batch */
	double alpha_n; /* constant synchronisation time across nodes */
	double beta_n;  /* growth of the cross-node sync time per replica */
	double alpha_r; /* constant synchronisation time within a node */
	double beta_r;  /* growth of the in-node sync time per replica */
	double gamma;   /* overlap of compute and sync, 1 (none) .. 10 */
} copus_perf_params;

/* Gradient statistics at the initial batch size M0. */
typedef struct copus_grad_stats {
	double sqr; /* |G|^2, squared norm of the true gradient */
	double var; /* tr(Sigma), gradient variance at batch M0 */
} copus_grad_stats;

/* What a job allows for its batch size. */
typedef struct copus_batch_limits {
	double init_batch; /* M0: the batch size the job was tuned for */
	double max_batch;  /* the largest total batch the job accepts */
	int min_local;     /* smallest micro-batch per GPU */
	int max_local;     /* largest micro-batch that fits one GPU */
	bool accumulation; /* gradient accumulation allowed */
} copus_batch_limits;

/* Everything the scheduler knows about one job's goodput. */
typedef struct copus_model {
	copus_perf_params perf;
	copus_grad_stats grad;
	copus_batch_limits limits;
} copus_model;

/* The predicted times of one iteration, in seconds. */
typedef struct copus_step_times {
	double grad; /* T_grad: one micro-batch's forward and backward */
	double sync; /* T_sync: gradient synchronisation */
	double opt;  /* T_opt: last micro-batch overlapped with the sync */
	double iter; /* T_iter: the whole iteration */
} copus_step_times;

/* A batch configuration and what it is worth. */
typedef struct copus_batch_plan {
	double batch;      /* total batch: replicas * local * (accum + 1) */
	int local;         /* micro-batch per GPU */
	int accum_steps;   /* accumulation steps before each sync */
	double throughput; /* samples per second */
	double efficiency; /* statistical efficiency of the batch, 0..1 */
	double goodput;    /* throughput * efficiency */
} copus_batch_plan;

/* Number of total batch sizes copus_best_batch() tries. */
#define COPUS_BATCH_CANDIDATES 50

/* Check that parameters are finite and within their bounds. */
int copus_perf_params_check(const copus_perf_params *p);

/* Check a complete model (parameters, gradient statistics, limits). */
int copus_model_check(const copus_model *m);

/* Predicted times of one iteration; nodes >= 1, replicas >= nodes. */
int copus_step_time(const copus_perf_params *p, int nodes, int replicas,
		    double local, int accum_steps, copus_step_times *out);

/* Samples per second of the configuration. */
int copus_throughput(const copus_perf_params *p, int nodes, int replicas,
		     double local, int accum_steps, double *out);

/* Gradient noise scale phi = M0 * var / sqr (infinite when sqr is 0). */
int copus_noise_scale(const copus_grad_stats *g, double init_batch,
		      double *out);

/*
 * Statistical efficiency E(M) = (phi + M0) / (phi + M) of the total batch M.
 * With no gradient information (sqr = var = 0) the efficiency is M0 / M:
 * a larger batch is assumed to bring no gain until the job has measured its
 * noise.
 */
int copus_efficiency(const copus_grad_stats *g, double init_batch,
		     double batch, double *out);

/*
 * Learning-rate gain of the batch M, AdaScale's
 * (var + sqr) / (var / scale + sqr) with scale = M / M0; between 1 and scale.
 */
int copus_gain(const copus_grad_stats *g, double init_batch, double batch,
	       double *out);

/* Goodput of one configuration (samples of M0-equivalent progress / s). */
int copus_goodput(const copus_model *m, int nodes, int replicas, int local,
		  int accum_steps, double *out);

/*
 * A job's model on a GPU type it has not run on yet, from its model on a
 * type it has run on (known) and one step of the same micro-batch timed on
 * one GPU of each (known_step and other_step, seconds): the compute times
 * scale by other_step / known_step; the synchronisation times, which depend
 * on the links rather than on the GPU, stay. The gradient statistics and
 * batch limits are the job's own and stay as well. COPUS_EINVAL when a time
 * is not positive and finite or the known model is not valid.
 */
int copus_model_bootstrap(const copus_model *known, double known_step,
			  double other_step, copus_model *out);

/*
 * Estimates of jobs' models on the GPU types they have not run on
 * (core/estimate.c), for a scheduler that knows each job's models only on
 * the types it has measured. known[i * ntypes + t] is job i's measured
 * model on type t, NULL where it has none (a job with none at all gets no
 * estimate). A type a job lacks gets, by copus_model_bootstrap, the model
 * of a type u it has, its compute times scaled by the ratio of one
 * micro-batch's compute time on t to that on u, taken from the first
 * source that has it:
 *   1. the median over the other jobs of the same application (apps[i],
 *      "" or apps NULL for none) that have measured models on both types;
 *   2. speeds[u] / speeds[t], the types' speeds from their constants
 *      (copus_gpu_type_speed, copus_planner_gpus_speed; 0 where unknown,
 *      speeds may be NULL);
 *   3. the median over all the jobs that have measured both types.
 * Other applications come after the constants: how much faster one GPU
 * is than another depends on the model (a small one gains little from a
 * larger GPU), so their median says less of this job than the GPUs'
 * figures do; they order types the constants do not know.
 * Among the types the job has, the one whose ratio has the best source
 * and then the most jobs behind it is the base. A median keeps any one job
 * (its hint a claim) from setting the others' estimates. Only measured
 * models are read, so an estimate never feeds another, and a measured
 * model always replaces it. est[i * ntypes + t] receives the estimate
 * and estimated[i * ntypes + t] is true where one was made; both are left
 * alone elsewhere (false in estimated). COPUS_EINVAL for NULL arrays or
 * ntypes outside 1..COPUS_ESTIMATE_MAX_TYPES, COPUS_ENOMEM.
 */
#define COPUS_ESTIMATE_MAX_TYPES 32
int copus_models_estimate(const copus_model *const *known, size_t njobs,
			  int ntypes, const char *const *apps,
			  const double *speeds, copus_model *est,
			  bool *estimated);

/*
 * What a scheduler remembers of its GPU types' relative speeds between
 * rounds: per pair of types (t, u), the median of log(compute time on t /
 * compute time on u) over the jobs of the last round that had measured
 * models on both, and how many did (0: never seen). A job that measured
 * both types may have ended since; its evidence stays, so that a job
 * running alone still gets an estimate on a type it has not run on.
 * Zero-initialise it; its types are the caller's, in the caller's order.
 */
struct copus_type_ratios {
	double log_ratio[COPUS_ESTIMATE_MAX_TYPES][COPUS_ESTIMATE_MAX_TYPES];
	int count[COPUS_ESTIMATE_MAX_TYPES][COPUS_ESTIMATE_MAX_TYPES];
};

/*
 * copus_models_estimate with a memory: mem (NULL: none) first learns the
 * ratios of this round's jobs that have measured two types (a pair seen
 * now replaces what was remembered of it), then serves as the last source,
 * after the other applications' median (3): what the round's jobs show now comes
 * first, and a remembered ratio, which a job found lying since may have
 * set, serves only types that the constants do not know.
 */
int copus_models_estimate_mem(const copus_model *const *known, size_t njobs,
			      int ntypes, const char *const *apps,
			      const double *speeds,
			      struct copus_type_ratios *mem,
			      copus_model *est, bool *estimated);

/*
 * The training speed of a GPU type from its default constants
 * (copus_planner_gpu_default): the geometric mean of its peak FLOP/s and
 * its memory bandwidth, since a training step is partly bound by each and
 * nothing says which part weighs more. Only ratios between types mean
 * anything. 0 for a name the table does not hold.
 */
double copus_gpu_type_speed(const char *type);

/*
 * The batch configuration of highest goodput on the given allocation.
 * Tries COPUS_BATCH_CANDIDATES geometrically spaced total batch sizes from
 * max(M0, replicas * min_local) to max_batch; a micro-batch above max_local
 * is split into accumulation steps when accumulation is allowed (and a job
 * on one GPU that goes beyond M0 always accumulates at least once, so that
 * its gradient noise stays measurable), otherwise it is not a candidate.
 * Returns COPUS_ERANGE when no candidate fits the limits.
 */
int copus_best_batch(const copus_model *m, int nodes, int replicas,
		     copus_batch_plan *out);

/* One measured configuration, the input of copus_fit(). */
typedef struct copus_observation {
	int nodes;
	int replicas;
	int local;           /* micro-batch per GPU */
	int accum_steps;
	double compute_time; /* measured T_grad of one micro-batch, s */
	double step_time;    /* measured T_iter of the whole iteration, s */
} copus_observation;

/* What a fit did, for logs and tests. */
typedef struct copus_fit_report {
	double objective;  /* final value of the objective */
	double rmsle_step; /* RMS log error of the step time */
	int evaluations;   /* objective evaluations */
	int optimizer_status; /* the optimiser's own result code */
	unsigned fixed;    /* bit i set: parameter i was held by a prior */
} copus_fit_report;

/*
 * Fit the seven parameters to observations, as Pollux does: minimise the RMS
 * log error of the step time plus the RMS log error of the compute time, plus
 * 1e-3 (gamma - 1)^2 and 1e-2 ((beta_n/alpha_n)^2 + (beta_r/alpha_r)^2),
 * with every parameter >= 1e-8 and 1 <= gamma <= 10, by NLopt's bounded
 * L-BFGS with the exact gradient. Dimensions not yet observed keep Pollux's
 * optimistic priors: one micro-batch size seen fixes alpha_c at half the mean
 * compute time; no multi-node observation fixes the inter-node terms and
 * afterwards raises them to at least 1.1 x the in-node terms; no single-node
 * multi-GPU observation fixes the in-node terms; no observation with more
 * than two GPUs fixes both beta terms. report may be NULL.
 */
int copus_fit(const copus_observation *obs, size_t n,
	      copus_perf_params *out, copus_fit_report *report);

/*
 * What a fit assumes of the sync across nodes before it has seen a
 * multi-node step (the in-node terms fitted on 1 node of up to K GPUs).
 */
typedef enum copus_fit_prior {
	/*
	 * Pollux's: alpha_n and beta_n at least 1.1 x alpha_r and beta_r,
	 * so that the sync time keeps growing by beta_r per replica across
	 * nodes. Fitted on 2 to 4 GPUs, where a ring all-reduce's time
	 * still grows fast, that growth predicts a sync at 32 GPUs many
	 * times the one at 4.
	 */
	COPUS_FIT_PRIOR_POLLUX,
	/*
	 * libcopus's: alpha_n 1.1 x the in-node sync time at the most GPUs
	 * seen (alpha_r + beta_r (K - 2)) and beta_n at its floor, as a ring
	 * all-reduce moves 2 (n - 1) / n of the gradients whatever n: across
	 * nodes the sync costs a little more than the most it cost in a node,
	 * and no more with more nodes, until a multi-node step says what it
	 * costs.
	 */
	COPUS_FIT_PRIOR_RING,
} copus_fit_prior;

/* copus_fit with the given prior for the sync across nodes (copus_fit's is
 * COPUS_FIT_PRIOR_POLLUX); COPUS_EINVAL for a prior outside the enum. */
int copus_fit_with(const copus_observation *obs, size_t n,
		   copus_fit_prior prior, copus_perf_params *out,
		   copus_fit_report *report);

/*
 * Speedup of a job on (nodes, replicas) relative to a base allocation: the
 * ratio of the best goodputs (batch size re-optimised for each). The table
 * is memoised: the first query of a shape computes it, later ones are an
 * array lookup. Rebuild it (copus_speedup_reset) when the model changes.
 */
typedef struct copus_speedup copus_speedup;

int copus_speedup_create(const copus_model *m, int max_nodes, int max_replicas,
			 int base_nodes, int base_replicas,
			 copus_speedup **out);
void copus_speedup_destroy(copus_speedup *s);
int copus_speedup_reset(copus_speedup *s, const copus_model *m);

/*
 * Speedup of (nodes, replicas); 0 for (0, 0) and for shapes on which the job
 * cannot run within its batch limits. nodes <= replicas <= max_replicas.
 */
int copus_speedup_get(copus_speedup *s, int nodes, int replicas, double *out);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_MODEL_H */
