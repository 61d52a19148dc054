/*
 * Placement of a job's GPUs on the free GPUs of the cluster, for every
 * policy (core/policy/place.c). Not public API; the tests use it.
 */
#ifndef COPUS_CORE_POLICY_PLACE_H
#define COPUS_CORE_POLICY_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include <copus/policy.h>

/*
 * The free GPUs of one moment (fr, one entry per node), prepared for the
 * consolidated placement of any number of GPUs: the usable nodes of each
 * allowed type. Set up with copus__placer_init, then copus__placer_prep
 * whenever fr, dist or the types change, then copus__placer_get for each
 * size; fr and c stay the caller's. The first size asked of a state is
 * found by scanning the nodes; the second sorts them, so that every further
 * size costs a binary search or a short walk.
 */
struct copus__placer {
	const copus_cluster *c;
	const int *fr;
	int *asc;     /* usable nodes grouped by type (free ascending once
		       * sorted, else in node order) */
	int *desc;    /* multi-node eligible nodes by type (free descending
		       * once sorted, else in node order) */
	int *taken;   /* scratch of the unsorted fill, all zero between calls */
	int off_asc[COPUS_MAX_GPU_TYPES + 1];
	int off_desc[COPUS_MAX_GPU_TYPES + 1];
	long avail[COPUS_MAX_GPU_TYPES];
	uint32_t mask;
	int gets;     /* sizes asked since the last prep */
	bool sorted;
};

/* Room for a cluster of num_nodes nodes (COPUS_ENOMEM). */
int copus__placer_init(struct copus__placer *pl, int num_nodes);
void copus__placer_release(struct copus__placer *pl);

/*
 * Gather the nodes for the free GPUs fr of the GPU types in mask (0: any).
 * dist marks nodes that already hold a multi-node job (NULL to ignore the
 * one-multi-node-job-per-node rule).
 */
void copus__placer_prep(struct copus__placer *pl, const copus_cluster *c,
			const int *fr, const int *dist, uint32_t mask);

/*
 * Consolidated placement of k GPUs: on one node when a node of an allowed
 * type has room (the fullest such node, to keep whole nodes free; the
 * lowest index among equals), otherwise over the fewest nodes of one type,
 * emptiest first (lowest index among equals), skipping the nodes marked in
 * dist. A single node wins over several; among types of the same count,
 * the first. out_row (N entries) gets the GPUs per node and *out_type the
 * type; out_row is all zero and COPUS_ERANGE returned when k does not fit.
 */
int copus__placer_get(struct copus__placer *pl, int k, int *out_row,
		      int *out_type);

/*
 * As copus__placer_get, with the same number of GPUs on every node of the
 * job: k = p x m on the fewest nodes m (one node if it fits), each with p
 * GPUs free; the nodes that fit p most tightly.
 */
int copus__place_equal(const copus_cluster *c, const int *fr, const int *dist,
		       uint32_t mask, int k, int *out_row, int *out_type);

/*
 * The free GPUs of one placement's nodes (fr, one entry per node), indexed
 * for copus__place_equal's question so that a round of many placements does
 * not scan every node for each: for each GPU type and each count f of free
 * GPUs, the usable nodes of that type with f free, in node order (a bitmap
 * of two levels, the upper with one bit per word of the lower), once over
 * all of them and once over those not marked in dist. fr and dist stay the
 * caller's: after changing fr[n] or dist[n], call copus__free_index_sync for
 * n (or copus__free_index_build after changing many).
 */
struct copus__free_index {
	const copus_cluster *c;
	const int *fr;
	const int *dist;   /* NULL: no node is marked */
	int fmax;          /* the most GPUs of a usable node */
	int w0, w1;        /* words of a bitmap's lower and upper level */
	uint64_t *bits;    /* per (type, f, unmarked only): w0 + w1 words */
	int *cnt;          /* per (type, f, unmarked only): the nodes */
	int *f;            /* per node: its count as indexed (0: in no list) */
	unsigned char *d;  /* per node: its mark as indexed */
	int over;          /* nodes with more free than fmax (then: scans) */
	int most[COPUS_MAX_GPU_TYPES]; /* the largest usable node per type */
};

/*
 * Index fr and dist (dist may be NULL) of cluster c. COPUS_ENOMEM; or
 * COPUS_ERANGE when the index would take more memory than scanning is
 * worth saving (then use copus__place_equal).
 */
int copus__free_index_init(struct copus__free_index *ix,
			   const copus_cluster *c, const int *fr,
			   const int *dist);
void copus__free_index_release(struct copus__free_index *ix);
/* Index every node anew from fr and dist. */
void copus__free_index_build(struct copus__free_index *ix);
/* Index node n anew from fr[n] and dist[n]. */
void copus__free_index_sync(struct copus__free_index *ix, int n);

/*
 * copus__place_equal(ix->c, ix->fr, ix->dist, mask, k, out_row, out_type),
 * the same nodes, from the index: out_row must be all zero on entry, and
 * only the nodes the job takes are written, listed in ascending order in
 * out_nodes (room for k) with *out_m their number.
 */
int copus__free_index_equal(const struct copus__free_index *ix, uint32_t mask,
			    int k, int *out_row, int *out_nodes, int *out_m,
			    int *out_type);

/*
 * Arena's placement of m x p GPUs of type t (its fcfs): the m usable nodes
 * of type t with the most free GPUs among those with at least p free, the
 * lowest index among equals. Writes the m nodes in ascending order to
 * out_nodes (m entries); COPUS_ERANGE when fewer than m nodes have p GPUs
 * free (out_nodes then holds nothing of use).
 */
int copus__place_emptiest(const copus_cluster *c, const int *fr, int t, int p,
			  int m, int *out_nodes);

#endif /* COPUS_CORE_POLICY_PLACE_H */
