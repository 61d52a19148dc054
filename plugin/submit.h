/*
 * What job_submit/copus refuses at submission: jobs that sched/copus could
 * never run as they ask. Plain C, no Slurm: included by
 * plugin/job_submit_copus.c, which copies the request out of Slurm's job
 * description, and by tests/test-plugin-sched.c.
 */
#ifndef COPUS_PLUGIN_SUBMIT_H
#define COPUS_PLUGIN_SUBMIT_H

#include <stddef.h>

/* A job's request as submitted, copied out of Slurm's job description. */
struct copus__submit {
	const char *elastic;		/* COPUS_ELASTIC, NULL: rigid */
	const char *types;		/* COPUS_GPU_TYPES, NULL: none */
	const char *multiple;		/* COPUS_GPU_MULTIPLE, NULL: none */
	const char *tres_per_node;	/* "gres:gpu:a100:4,..." or NULL */
	const char *tres_per_job;	/* --gpus */
	const char *tres_per_task;	/* --gpus-per-task */
	const char *tres_per_socket;	/* --gpus-per-socket */
	int min_nodes;			/* 0: not given (one node) */
	int het;			/* a component of a heterogeneous job */
	/* The GPU types the cluster's nodes have; ntypes 0: unknown. */
	const char *const *cluster_types;
	int ntypes;
};

/*
 * Checks a submission. Returns 0 when sched/copus can run it, or -1 with a
 * message for the user in why (starting "copus: "), naming the option and
 * the value that is wrong.
 */
int copus__submit_check(const struct copus__submit *sub, char *why,
			size_t len);

#endif /* COPUS_PLUGIN_SUBMIT_H */
