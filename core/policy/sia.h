/*
 * The sia policy's integer program and its state (core/policy/sia.c), for
 * the policy itself and its tests. Not public API.
 */
#ifndef COPUS_CORE_POLICY_SIA_H
#define COPUS_CORE_POLICY_SIA_H

#include <stdbool.h>
#include <stddef.h>

#include <copus/policy.h>

/*
 * One round's integer program: variable v gives job job[v] the gpus[v] GPUs
 * of type type[v] and is worth coef[v]. At most one variable per job; per
 * type t, the GPUs of the chosen variables at most cap[t]. The objective is
 * the sum of the chosen coefficients, maximised or minimised.
 */
struct copus__sia_ip {
	size_t njobs;
	int ntypes;
	size_t nvars;
	const size_t *job;
	const int *type;
	const int *gpus;
	const double *coef;
	const long *cap;   /* ntypes entries */
	bool maximize;
	int time_limit_ms; /* the solver stops there and reports failure */
};

/*
 * Solve ip: choice[j] is the variable chosen for job j, or -1; *obj (when
 * not NULL) the objective. COPUS_OK only with a proven optimum (within
 * Sia's relative gap of 1e-4); COPUS_ERANGE when the solver failed or ran
 * out of time, and then choice means nothing.
 */
typedef int (*copus__sia_solver)(const struct copus__sia_ip *ip, long *choice,
				 double *obj);

/* The solver the policy uses: GLPK's branch and cut with its presolver. */
int copus__sia_solve(const struct copus__sia_ip *ip, long *choice,
		     double *obj);

/* What the policy keeps between rounds. */
struct copus__sia_state {
	double p;          /* power of the normalised goodputs (-0.5) */
	double lambda_a;   /* accepted, unused: see core/policy/sia.c */
	double lambda_n;   /* the cost of a job left without GPUs (1.1) */
	int time_limit_ms; /* for each solve */
	copus__sia_solver solve; /* copus__sia_solve; the tests swap it */
	/*
	 * log(one-GPU throughput on t / on u), learned from the jobs that
	 * have a model on both types; known[t][u] once seen.
	 */
	double log_ratio[COPUS_MAX_GPU_TYPES][COPUS_MAX_GPU_TYPES];
	bool known[COPUS_MAX_GPU_TYPES][COPUS_MAX_GPU_TYPES];
	/* The last round's solve: its status and milliseconds (CPU time). */
	int last_status;
	double last_solve_ms;
	size_t last_vars;
};

#endif /* COPUS_CORE_POLICY_SIA_H */
