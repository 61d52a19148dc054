/* The co-adaptive policy's entry point, called by core/policy.c. */
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
};

/*
 * Parse "no-srpt,no-restart-cost,..." (any subset, comma-separated; empty
 * or NULL for none); COPUS_EINVAL names nothing, so callers report spec.
 */
int copus__copus_opts_parse(const char *spec, struct copus__copus_opts *o);

int copus__state_create(const struct copus__copus_opts *opt,
			struct copus_state **out);
void copus__state_destroy(struct copus_state *s);

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

/*
 * Decide one round into res (off, cnt, types and reasons have n entries;
 * cnt and reasons zeroed, types -1). The input has been checked. Memory
 * grows with jobs + nodes + GPUs in use, never with jobs x nodes.
 */
int copus__decide_copus(struct copus_state *s, const copus_policy_params *prm,
			const copus_cluster *c, const copus_job *jobs, size_t n,
			double now, struct copus__result *res);

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
