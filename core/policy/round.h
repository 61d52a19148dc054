/*
 * One round of a policy that works on dense rows of GPUs per node (fifo,
 * tiresias, optimus, pollux): the rows, the jobs' current allocations, the
 * free GPUs, and the steps such a policy takes on them (core/policy/
 * round.c). The dense rows cost jobs x nodes; the copus policy, which
 * must scale further, works on sparse slots instead. Not public API.
 */
#ifndef COPUS_CORE_POLICY_ROUND_H
#define COPUS_CORE_POLICY_ROUND_H

#include <stdbool.h>
#include <stddef.h>

#include <copus/policy.h>

#include "ops.h"
#include "place.h"

struct copus__round {
	const copus_cluster *c;
	const copus_job *jobs;
	size_t n;
	int N;
	int *rows;   /* n x N GPUs per node: the decision */
	int *cur;    /* n x N current allocations */
	int *types;  /* GPU type of each job's row, -1 when empty */
	int *free;   /* N free GPUs */
	int total_gpus;    /* usable GPUs */
	int max_node_gpus; /* GPUs of the largest usable node */
	struct copus__placer pl;
};

/* A round with every job queued and every usable GPU free. */
int copus__round_create(const copus_cluster *c, const copus_job *jobs,
			size_t n, struct copus__round **out);

/*
 * End round r (NULL: none was made) with the policy's status rc: when rc
 * is COPUS_OK, the rows in node order become res's slots and their types
 * res's types (COPUS_ESTATE if they do not fit). The round is freed either
 * way; returns the status.
 */
int copus__round_finish(struct copus__round *r, int rc,
			struct copus__result *res);

/* Job j's row of GPUs per node. */
static inline int *row(struct copus__round *r, size_t j)
{
	return r->rows + j * (size_t)r->N;
}

/* Job j's current allocation as GPUs per node. */
static inline const int *cur_row(const struct copus__round *r, size_t j)
{
	return r->cur + j * (size_t)r->N;
}

/* GPUs in a row of N nodes; *nodes (if not NULL) the nodes used. */
int copus__row_sum(const int *r, int N, int *nodes);

/* Place job j on k GPUs in the round's free pool and take them. */
int copus__take(struct copus__round *r, size_t j, int k);

/* Give job j's GPUs back to the pool. */
void copus__give(struct copus__round *r, size_t j);

/* Is job j's current allocation still valid on usable, allowed nodes? */
bool copus__alloc_valid(const struct copus__round *r, size_t j);

/* Keep job j on its current allocation (the caller checked validity). */
void copus__keep(struct copus__round *r, size_t j);

/*
 * An order of jobs: by k1, then k2, then k3 (each ascending), then by job
 * index j, for qsort over an array of keys.
 */
struct copus__order_key {
	size_t j;
	double k1, k2, k3;
};

int copus__order_cmp(const void *a, const void *b);

#endif /* COPUS_CORE_POLICY_ROUND_H */
