/*
 * Where a job's GPUs go: the one consolidated placement that every policy
 * uses (a single node when one has room, else the fewest nodes of one
 * type), and its variant with the same GPUs on every node of a job.
 *
 * The placer sorts the nodes of each type once for a state of the free
 * GPUs (ascending for the tightest single node, descending for the
 * multi-node fill), so each size asked of that state costs a binary search
 * or a short walk: Pollux's search asks for every size of a job in turn,
 * and the copus policy shrinks a job one GPU at a time until it fits.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "place.h"

int copus__placer_init(struct copus__placer *pl, int num_nodes)
{
	memset(pl, 0, sizeof(*pl));
	pl->asc = calloc((size_t)num_nodes + 1, sizeof(int));
	pl->desc = calloc((size_t)num_nodes + 1, sizeof(int));
	if (pl->asc == NULL || pl->desc == NULL) {
		copus__placer_release(pl);
		return COPUS_ENOMEM;
	}
	return COPUS_OK;
}

void copus__placer_release(struct copus__placer *pl)
{
	free(pl->asc);
	free(pl->desc);
	pl->asc = pl->desc = NULL;
}

/* Fewer free GPUs first, then the lower node index. */
static int asc_cmp(const void *a, const void *b, void *arg)
{
	const int *fr = arg;
	int i = *(const int *)a, j = *(const int *)b;

	if (fr[i] != fr[j])
		return fr[i] < fr[j] ? -1 : 1;
	return (i > j) - (i < j);
}

/* More free GPUs first, then the lower node index. */
static int desc_cmp(const void *a, const void *b, void *arg)
{
	const int *fr = arg;
	int i = *(const int *)a, j = *(const int *)b;

	if (fr[i] != fr[j])
		return fr[i] > fr[j] ? -1 : 1;
	return (i > j) - (i < j);
}

static bool type_in(uint32_t mask, int t)
{
	return mask == 0 || (mask >> t) & 1u;
}

void copus__placer_prep(struct copus__placer *pl, const copus_cluster *c,
			const int *fr, const int *dist, uint32_t mask)
{
	int na = 0, nd = 0;

	pl->c = c;
	pl->fr = fr;
	pl->mask = mask;
	for (int t = 0; t < c->num_types; t++) {
		pl->off_asc[t] = na;
		pl->off_desc[t] = nd;
		pl->avail[t] = 0;
		if (!type_in(mask, t))
			continue;
		for (int n = 0; n < c->num_nodes; n++) {
			if (c->nodes[n].gpu_type != t || !c->nodes[n].usable)
				continue;
			pl->asc[na++] = n;
			if (fr[n] > 0 && !(dist && dist[n])) {
				pl->desc[nd++] = n;
				pl->avail[t] += fr[n];
			}
		}
		qsort_r(pl->asc + pl->off_asc[t],
			(size_t)(na - pl->off_asc[t]), sizeof(int), asc_cmp,
			(void *)fr);
		qsort_r(pl->desc + pl->off_desc[t],
			(size_t)(nd - pl->off_desc[t]), sizeof(int), desc_cmp,
			(void *)fr);
	}
	pl->off_asc[c->num_types] = na;
	pl->off_desc[c->num_types] = nd;
}

int copus__placer_get(const struct copus__placer *pl, int k, int *out_row,
		      int *out_type)
{
	const copus_cluster *c = pl->c;
	const int *fr = pl->fr;
	int best_t = -1, best_nodes = 0, best_single = -1;

	if (k <= 0)
		return COPUS_EINVAL;
	for (int t = 0; t < c->num_types; t++) {
		int lo = pl->off_asc[t], hi = pl->off_asc[t + 1], nodes = 0;
		long need;

		if (!type_in(pl->mask, t))
			continue;
		/* First node with at least k free GPUs. */
		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (fr[pl->asc[mid]] >= k)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo < pl->off_asc[t + 1]) {
			if (best_t < 0 || best_nodes > 1) {
				best_t = t;
				best_nodes = 1;
				best_single = pl->asc[lo];
			}
			continue;
		}
		if (pl->avail[t] < k)
			continue;
		/* Count the nodes the emptiest-first fill needs. */
		need = k;
		for (int i = pl->off_desc[t]; need > 0; i++) {
			need -= fr[pl->desc[i]];
			nodes++;
		}
		if (best_t < 0 || nodes < best_nodes) {
			best_t = t;
			best_nodes = nodes;
			best_single = -1;
		}
	}
	for (int n = 0; n < c->num_nodes; n++)
		out_row[n] = 0;
	if (best_t < 0)
		return COPUS_ERANGE;
	if (best_single >= 0) {
		out_row[best_single] = k;
	} else {
		int need = k;

		for (int i = pl->off_desc[best_t]; need > 0; i++) {
			int n = pl->desc[i];

			out_row[n] = fr[n] < need ? fr[n] : need;
			need -= out_row[n];
		}
	}
	*out_type = best_t;
	return COPUS_OK;
}

/* The usable untaken node of type t with the fewest free GPUs >= p (not
 * holding a multi-node job when dist is given); -1 when none. */
static int tightest_node(const copus_cluster *c, const int *fr,
			 const int *dist, int t, int p, const int *taken)
{
	int m = -1;

	for (int n = 0; n < c->num_nodes; n++) {
		if (taken[n] || c->nodes[n].gpu_type != t ||
		    !c->nodes[n].usable || fr[n] < p || (dist && dist[n]))
			continue;
		if (m < 0 || fr[n] < fr[m])
			m = n;
	}
	return m;
}

int copus__place_equal(const copus_cluster *c, const int *fr, const int *dist,
		       uint32_t mask, int k, int *out_row, int *out_type)
{
	int best_t = -1, best_p = 0, best_m = 0;

	if (k <= 0)
		return COPUS_EINVAL;
	for (int t = 0; t < c->num_types; t++) {
		int most = 0;

		if (!type_in(mask, t))
			continue;
		for (int n = 0; n < c->num_nodes; n++)
			if (c->nodes[n].gpu_type == t && c->nodes[n].usable &&
			    c->nodes[n].gpus > most)
				most = c->nodes[n].gpus;
		/* The largest share per node that enough nodes have free. */
		for (int p = k < most ? k : most; p >= 1; p--) {
			int m = k / p, have = 0;

			if (k % p != 0)
				continue;
			if (best_t >= 0 && m >= best_m)
				break;
			for (int n = 0; n < c->num_nodes && have < m; n++)
				if (c->nodes[n].gpu_type == t &&
				    c->nodes[n].usable && fr[n] >= p &&
				    !(m > 1 && dist && dist[n]))
					have++;
			if (have >= m) {
				best_t = t;
				best_p = p;
				best_m = m;
				break;
			}
		}
	}
	for (int n = 0; n < c->num_nodes; n++)
		out_row[n] = 0;
	if (best_t < 0)
		return COPUS_ERANGE;
	for (int i = 0; i < best_m; i++) {
		int n = tightest_node(c, fr, best_m > 1 ? dist : NULL, best_t,
				      best_p, out_row);
		out_row[n] = best_p;
	}
	*out_type = best_t;
	return COPUS_OK;
}
