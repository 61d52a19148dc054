/* Helpers of the policies, shared with their tests; not public API. */
#ifndef COPUS_CORE_POLICY_INTERNAL_H
#define COPUS_CORE_POLICY_INTERNAL_H

#include <stdint.h>

#include <copus/policy.h>

/*
 * Consolidated placement of k GPUs on the free GPUs of the cluster (see
 * policy.c); dist marks nodes that already hold a multi-node job (NULL to
 * ignore the one-multi-node-job-per-node rule).
 */
int copus__place(const copus_cluster *c, const int *fr, const int *dist,
		 uint32_t mask, int k, int *out_row, int *out_type);

/*
 * As copus__place, with the same number of GPUs on every node of the job:
 * k = p x m on the fewest nodes m (one node if it fits), each with p GPUs
 * free; the nodes that fit p most tightly.
 */
int copus__place_equal(const copus_cluster *c, const int *fr, const int *dist,
		       uint32_t mask, int k, int *out_row, int *out_type);

/* One job's term of the power mean with exponent p (to be maximised). */
double copus__power_util(double v, double p);

#endif /* COPUS_CORE_POLICY_INTERNAL_H */
