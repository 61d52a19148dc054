/* The co-adaptive policy's entry point, called by core/policy.c. */
#ifndef COPUS_CORE_POLICY_COPUS_H
#define COPUS_CORE_POLICY_COPUS_H

#include <copus/policy.h>

/* What the policy keeps between rounds (memoised speedup tables). */
struct copus_state;

int copus__state_create(struct copus_state **out);
void copus__state_destroy(struct copus_state *s);

/*
 * Decide one round. rows is n x num_nodes GPUs per node (zeroed by the
 * caller), types[j] the GPU type of job j's row (-1: queued), reasons[j] a
 * 64-byte buffer for the admin's reason. The input has been checked.
 */
int copus__decide_copus(struct copus_state *s, const copus_policy_params *prm,
			const copus_cluster *c, const copus_job *jobs, size_t n,
			double now, int *rows, int *types, char (*reasons)[64]);

#endif /* COPUS_CORE_POLICY_COPUS_H */
