/*
 * The copus policy's own internals that its tests reach
 * (core/policy/copus.c): its state, its ablation options and its value
 * table. Not public API; everything else goes through copus__copus_ops.
 */
#ifndef COPUS_CORE_POLICY_COPUS_H
#define COPUS_CORE_POLICY_COPUS_H

#include <stdbool.h>

#include <copus/policy.h>

/* What the policy keeps between rounds (memoised speedup tables). */
struct copus_state;

/* Ingredients the policy can be run without, to measure each one. */
struct copus__copus_opts {
	bool no_srpt;         /* every job weighs the same up to its request */
	bool no_restart_cost; /* moves are free */
	bool no_fairness;     /* no finish-time fairness guard */
	bool no_placement;    /* first fit in node order, any node sharing */
	bool no_spread;       /* speedups count linearly under contention */
	/* Weight of the users' fair-share factors (option fairshare=W,
	 * 0 .. COPUS_POLICY_FAIRSHARE_MAX): a job's value is multiplied by
	 * 2^(W (2F - 1)) for its user's factor F; 0 turns the term off. */
	double fairshare;
};

/* The weight of the fair-share term when no option sets it (its most:
 * COPUS_POLICY_FAIRSHARE_MAX, as for copus_policy_params.fairshare). */
#define COPUS__FAIRSHARE_DEFAULT 1.0

/* A fresh state; opt NULL for the policy with all its ingredients. */
int copus__state_create(const struct copus__copus_opts *opt,
			struct copus_state **out);
void copus__state_destroy(struct copus_state *s);

/*
 * The round's value table: v[(j * T + t) * (kmax + 1) + k] is the value
 * the copus policy gives job j on k GPUs of type t (T = c->num_types; 0
 * where the job may not have that cell). The policy maximises the sum of
 * its jobs' values subject to each type's capacity; this exposes the
 * objective so that tests can compare the greedy with an exact optimum.
 */
int copus__copus_values(struct copus_state *s, const copus_policy_params *prm,
			const copus_cluster *c, const copus_job *jobs, size_t n,
			double now, int kmax, double *v);

#endif /* COPUS_CORE_POLICY_COPUS_H */
