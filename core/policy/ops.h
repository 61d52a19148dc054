/*
 * What a scheduling policy implements, and the list of the policies that
 * core/policy.c dispatches to. Not public API.
 *
 * A policy is one file in core/policy/ that defines a
 * 'const struct copus__policy_ops copus__<name>_ops' and a line in
 * COPUS__POLICIES below; core/policy.c checks the input, calls the
 * policy's decide, and checks and completes what it returns. The policies
 * share the placement (place.h) and, for those that work on dense rows of
 * GPUs per node, the round (round.h); nothing they call calls back into
 * core/policy.c.
 */
#ifndef COPUS_CORE_POLICY_OPS_H
#define COPUS_CORE_POLICY_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include <copus/policy.h>

/*
 * A round's result in sparse form: job j holds cnt[j] slots (node order)
 * at slots[off[j]]; used counts the slots filled, cap is the array's size.
 */
struct copus__result {
	copus_slot *slots;
	size_t cap, used;
	size_t *off;
	int *cnt;
	int *types;          /* GPU type of job j, -1: queued */
	char (*reasons)[64]; /* for the admin */
};

struct copus__policy_ops {
	/* The name copus_policy_create takes, before any ":options". */
	const char *name;
	struct copus_policy_traits traits;
	/*
	 * Gives a job with a granularity above 1 (copus_job.granularity) only
	 * multiples of it; copus_policy_decide hands the other policies such
	 * a job as rigid.
	 */
	bool granular;
	/*
	 * Make the state the policy keeps between rounds into *state; opts is
	 * the text after "name:" (NULL without a colon). NULL when the policy
	 * keeps nothing and takes no options.
	 */
	int (*create)(const char *opts, void **state);
	void (*destroy)(void *state);
	/*
	 * Decide one round into res (off, cnt, types and reasons have n
	 * entries; cnt and reasons zeroed, types -1; slots has room for one
	 * slot per GPU of the cluster). The input has been checked
	 * (copus_policy_check_input).
	 */
	int (*decide)(void *state, const copus_policy_params *prm,
		      const copus_cluster *c, const copus_job *jobs, size_t n,
		      double now, struct copus__result *res);
};

/*
 * The policies, in the order copus_policy_name_at lists them: X(name)
 * for each 'copus__<name>_ops'.
 */
#define COPUS__POLICIES(X) \
	X(fifo)            \
	X(backfill)        \
	X(tiresias)        \
	X(optimus)         \
	X(pollux)          \
	X(sia)             \
	X(copus)

#define COPUS__POLICY_DECLARE(name) \
	extern const struct copus__policy_ops copus__##name##_ops;
COPUS__POLICIES(COPUS__POLICY_DECLARE)
#undef COPUS__POLICY_DECLARE

/* May job j run on GPU type t? */
static inline bool copus__type_allowed(const copus_job *j, int t)
{
	if (t < 0 || t >= COPUS_MAX_GPU_TYPES)
		return false;
	return j->type_mask == 0 || (j->type_mask >> t) & 1u;
}

/*
 * Do two models hold the same values? Field by field: the padding of a
 * model the caller filled member by member is not its value.
 */
static inline bool copus__model_same(const copus_model *a,
				     const copus_model *b)
{
	const copus_perf_params *p = &a->perf, *q = &b->perf;
	const copus_batch_limits *l = &a->limits, *k = &b->limits;

	return p->alpha_c == q->alpha_c && p->beta_c == q->beta_c &&
	       p->alpha_n == q->alpha_n && p->beta_n == q->beta_n &&
	       p->alpha_r == q->alpha_r && p->beta_r == q->beta_r &&
	       p->gamma == q->gamma && a->grad.sqr == b->grad.sqr &&
	       a->grad.var == b->grad.var && l->init_batch == k->init_batch &&
	       l->max_batch == k->max_batch && l->min_local == k->min_local &&
	       l->max_local == k->max_local &&
	       l->accumulation == k->accumulation;
}

/* Job j's goodput model on GPU type t, or NULL (none, or t < 0). */
static inline const copus_model *copus__job_model(const copus_job *j, int t)
{
	if (j->models == NULL || t < 0)
		return NULL;
	return j->models[t];
}

#endif /* COPUS_CORE_POLICY_OPS_H */
