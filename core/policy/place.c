/*
 * Where a job's GPUs go: the one consolidated placement that every policy
 * uses (a single node when one has room, else the fewest nodes of one
 * type), its variant with the same GPUs on every node of a job, and
 * Arena's spread of a job over the emptiest nodes (for fifo:arena).
 *
 * The placer answers the first size asked of a state of the free GPUs by
 * scanning the nodes of each type (linear in the nodes, as one placement
 * should be: the copus policy places most jobs with one question). From the
 * second size on, it sorts the nodes of each type once (ascending for the
 * tightest single node, descending for the multi-node fill), so each further
 * size costs a binary search or a short walk: Pollux's search asks for
 * every size of a job in turn. Both ways pick the same nodes.
 *
 * The equal placement has an index too (copus__free_index): the nodes of
 * each type listed by their free GPUs and kept as the caller's free GPUs
 * change, so that a round of tens of thousands of placements on thousands
 * of nodes does not scan the nodes several times for each. It picks the
 * same nodes as copus__place_equal.
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
	pl->taken = calloc((size_t)num_nodes + 1, sizeof(int));
	if (pl->asc == NULL || pl->desc == NULL || pl->taken == NULL) {
		copus__placer_release(pl);
		return COPUS_ENOMEM;
	}
	return COPUS_OK;
}

void copus__placer_release(struct copus__placer *pl)
{
	free(pl->asc);
	free(pl->desc);
	free(pl->taken);
	pl->asc = pl->desc = pl->taken = NULL;
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
	}
	pl->off_asc[c->num_types] = na;
	pl->off_desc[c->num_types] = nd;
	pl->gets = 0;
	pl->sorted = false;
}

static void _sort(struct copus__placer *pl)
{
	for (int t = 0; t < pl->c->num_types; t++) {
		qsort_r(pl->asc + pl->off_asc[t],
			(size_t)(pl->off_asc[t + 1] - pl->off_asc[t]),
			sizeof(int), asc_cmp, (void *)pl->fr);
		qsort_r(pl->desc + pl->off_desc[t],
			(size_t)(pl->off_desc[t + 1] - pl->off_desc[t]),
			sizeof(int), desc_cmp, (void *)pl->fr);
	}
	pl->sorted = true;
}

/* The node of type t with the fewest free GPUs >= k (the lowest index among
 * equals); -1 when none. */
static int _tightest(const struct copus__placer *pl, int t, int k)
{
	const int *fr = pl->fr;
	int lo = pl->off_asc[t], hi = pl->off_asc[t + 1], m = -1;

	if (pl->sorted) {
		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (fr[pl->asc[mid]] >= k)
				hi = mid;
			else
				lo = mid + 1;
		}
		return lo < pl->off_asc[t + 1] ? pl->asc[lo] : -1;
	}
	for (int i = lo; i < hi; i++) {
		int n = pl->asc[i];

		if (fr[n] >= k && (m < 0 || fr[n] < fr[m]))
			m = n;
	}
	return m;
}

/*
 * The emptiest-first fill of k GPUs on type t: the nodes with the most
 * free GPUs first (the lowest index among equals). Returns the nodes it
 * takes; out_row (when not NULL) gets their GPUs.
 */
static int _fill(struct copus__placer *pl, int t, int k, int *out_row)
{
	const int *fr = pl->fr;
	int need = k, nodes = 0, lo = pl->off_desc[t], hi = pl->off_desc[t + 1];

	while (need > 0) {
		int n = -1;

		if (pl->sorted) {
			n = pl->desc[lo + nodes];
		} else {
			for (int i = lo; i < hi; i++) {
				int x = pl->desc[i];

				if (!pl->taken[x] && (n < 0 || fr[x] > fr[n]))
					n = x;
			}
			pl->taken[n] = 1;
		}
		if (out_row != NULL)
			out_row[n] = fr[n] < need ? fr[n] : need;
		need -= fr[n];
		nodes++;
	}
	if (!pl->sorted)
		for (int i = lo; i < hi; i++)
			pl->taken[pl->desc[i]] = 0;
	return nodes;
}

int copus__placer_get(struct copus__placer *pl, int k, int *out_row,
		      int *out_type)
{
	const copus_cluster *c = pl->c;
	int best_t = -1, best_nodes = 0, best_single = -1;

	if (k <= 0)
		return COPUS_EINVAL;
	if (pl->gets++ == 1 && !pl->sorted)
		_sort(pl);
	for (int t = 0; t < c->num_types; t++) {
		int single, nodes;

		if (!type_in(pl->mask, t))
			continue;
		single = _tightest(pl, t, k);
		if (single >= 0) {
			if (best_t < 0 || best_nodes > 1) {
				best_t = t;
				best_nodes = 1;
				best_single = single;
			}
			continue;
		}
		if (pl->avail[t] < k)
			continue;
		/* Count the nodes the emptiest-first fill needs. */
		nodes = _fill(pl, t, k, NULL);
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
	if (best_single >= 0)
		out_row[best_single] = k;
	else
		_fill(pl, best_t, k, out_row);
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

static int node_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int copus__place_emptiest(const copus_cluster *c, const int *fr, int t, int p,
			  int m, int *out_nodes)
{
	int have = 0;

	if (p <= 0 || m <= 0)
		return COPUS_EINVAL;
	/*
	 * Keep the m best nodes seen so far in out_nodes, best first: a
	 * node enters when it has more free GPUs than the last kept (ties
	 * keep the earlier node), an insertion into a list of m.
	 */
	for (int n = 0; n < c->num_nodes; n++) {
		int i;

		if (c->nodes[n].gpu_type != t || !c->nodes[n].usable ||
		    fr[n] < p)
			continue;
		if (have == m && fr[n] <= fr[out_nodes[m - 1]])
			continue;
		i = have < m ? have++ : m - 1;
		while (i > 0 && fr[out_nodes[i - 1]] < fr[n]) {
			out_nodes[i] = out_nodes[i - 1];
			i--;
		}
		out_nodes[i] = n;
	}
	if (have < m)
		return COPUS_ERANGE;
	qsort(out_nodes, (size_t)m, sizeof(*out_nodes), node_cmp);
	return COPUS_OK;
}

/*
 * The free index (place.h). A bitmap's lower level has a bit per node, its
 * upper level a bit per word of the lower that is not zero, so the next
 * node of a list is found in a few words however sparse the list.
 */

/* Beyond this many words of bitmaps, scanning the nodes is cheaper. */
#define FREE_INDEX_MAX_WORDS (1u << 22)

static uint64_t *_fam(const struct copus__free_index *ix, int t, int f, int u)
{
	size_t i = ((size_t)t * (size_t)(ix->fmax + 1) + (size_t)f) * 2 +
		   (size_t)u;

	return ix->bits + i * (size_t)(ix->w0 + ix->w1);
}

static int *_famcnt(const struct copus__free_index *ix, int t, int f, int u)
{
	return ix->cnt + ((size_t)t * (size_t)(ix->fmax + 1) + (size_t)f) * 2 +
	       (size_t)u;
}

static void _bit_set(uint64_t *b, int w0, int n)
{
	b[n >> 6] |= 1ull << (n & 63);
	b[w0 + (n >> 12)] |= 1ull << ((n >> 6) & 63);
}

static void _bit_clear(uint64_t *b, int w0, int n)
{
	b[n >> 6] &= ~(1ull << (n & 63));
	if (b[n >> 6] == 0)
		b[w0 + (n >> 12)] &= ~(1ull << ((n >> 6) & 63));
}

/* The first node from n on in bitmap b, or -1. */
static int _bit_next(const uint64_t *b, int w0, int n)
{
	int w = n >> 6;

	if (w >= w0)
		return -1;
	uint64_t x = b[w] & (~0ull << (n & 63));
	if (x != 0)
		return (w << 6) + __builtin_ctzll(x);
	/* The next word that is not zero, from the upper level. */
	for (w++; w < w0;) {
		int u = w >> 6;
		uint64_t y = b[w0 + u] & (~0ull << (w & 63));
		if (y != 0) {
			w = (u << 6) + __builtin_ctzll(y);
			return (w << 6) + __builtin_ctzll(b[w]);
		}
		w = (u + 1) << 6;
	}
	return -1;
}

/* Enter (sign 1) or remove (-1) node n with f free and mark d. */
static void _index_put(struct copus__free_index *ix, int n, int f, int d,
		       int sign)
{
	int t = ix->c->nodes[n].gpu_type;

	if (f <= 0)
		return;
	if (f > ix->fmax) {
		ix->over += sign;
		return;
	}
	for (int u = 0; u < 2; u++) {
		if (u == 1 && d)
			continue;
		if (sign > 0)
			_bit_set(_fam(ix, t, f, u), ix->w0, n);
		else
			_bit_clear(_fam(ix, t, f, u), ix->w0, n);
		*_famcnt(ix, t, f, u) += sign;
	}
}

void copus__free_index_sync(struct copus__free_index *ix, int n)
{
	int f = ix->c->nodes[n].usable && ix->fr[n] > 0 ? ix->fr[n] : 0;
	unsigned char d = ix->dist != NULL && ix->dist[n] != 0;

	if (f == ix->f[n] && d == ix->d[n])
		return;
	_index_put(ix, n, ix->f[n], ix->d[n], -1);
	_index_put(ix, n, f, d, 1);
	ix->f[n] = f;
	ix->d[n] = d;
}

void copus__free_index_build(struct copus__free_index *ix)
{
	const copus_cluster *c = ix->c;
	size_t fams = (size_t)c->num_types * (size_t)(ix->fmax + 1) * 2;

	memset(ix->bits, 0, fams * (size_t)(ix->w0 + ix->w1) * sizeof(uint64_t));
	memset(ix->cnt, 0, fams * sizeof(int));
	memset(ix->f, 0, (size_t)c->num_nodes * sizeof(int));
	memset(ix->d, 0, (size_t)c->num_nodes);
	ix->over = 0;
	for (int n = 0; n < c->num_nodes; n++)
		copus__free_index_sync(ix, n);
}

int copus__free_index_init(struct copus__free_index *ix,
			   const copus_cluster *c, const int *fr,
			   const int *dist)
{
	const int N = c->num_nodes;

	memset(ix, 0, sizeof(*ix));
	ix->c = c;
	ix->fr = fr;
	ix->dist = dist;
	for (int n = 0; n < N; n++) {
		const copus_node *nd = &c->nodes[n];
		if (!nd->usable)
			continue;
		if (nd->gpus > ix->most[nd->gpu_type])
			ix->most[nd->gpu_type] = nd->gpus;
		if (nd->gpus > ix->fmax)
			ix->fmax = nd->gpus;
	}
	ix->w0 = (N + 63) / 64;
	ix->w1 = (ix->w0 + 63) / 64;
	size_t fams = (size_t)c->num_types * (size_t)(ix->fmax + 1) * 2;
	if ((double)fams * (ix->w0 + ix->w1) > FREE_INDEX_MAX_WORDS)
		return COPUS_ERANGE;
	ix->bits = malloc((fams * (size_t)(ix->w0 + ix->w1) + 1) *
			  sizeof(uint64_t));
	ix->cnt = malloc((fams + 1) * sizeof(int));
	ix->f = malloc(((size_t)N + 1) * sizeof(int));
	ix->d = malloc((size_t)N + 1);
	if (ix->bits == NULL || ix->cnt == NULL || ix->f == NULL ||
	    ix->d == NULL) {
		copus__free_index_release(ix);
		return COPUS_ENOMEM;
	}
	copus__free_index_build(ix);
	return COPUS_OK;
}

void copus__free_index_release(struct copus__free_index *ix)
{
	free(ix->bits);
	free(ix->cnt);
	free(ix->f);
	free(ix->d);
	ix->bits = NULL;
	ix->cnt = ix->f = NULL;
	ix->d = NULL;
}

int copus__free_index_equal(const struct copus__free_index *ix, uint32_t mask,
			    int k, int *out_row, int *out_nodes, int *out_m,
			    int *out_type)
{
	const copus_cluster *c = ix->c;
	int best_t = -1, best_p = 0, best_m = 0, got = 0;

	*out_m = 0;
	if (k <= 0)
		return COPUS_EINVAL;
	if (ix->over > 0) {
		/* A count the lists do not hold: the scan answers. */
		int rc = copus__place_equal(c, ix->fr, ix->dist, mask, k,
					    out_row, out_type);
		for (int n = 0; rc == COPUS_OK && n < c->num_nodes; n++)
			if (out_row[n] > 0)
				out_nodes[(*out_m)++] = n;
		return rc;
	}
	/* As copus__place_equal, with the nodes counted from the lists. */
	for (int t = 0; t < c->num_types; t++) {
		if (!type_in(mask, t))
			continue;
		for (int p = k < ix->most[t] ? k : ix->most[t]; p >= 1; p--) {
			int m = k / p, have = 0;

			if (k % p != 0)
				continue;
			if (best_t >= 0 && m >= best_m)
				break;
			for (int f = p; f <= ix->fmax && have < m; f++)
				have += *_famcnt(ix, t, f, m > 1);
			if (have >= m) {
				best_t = t;
				best_p = p;
				best_m = m;
				break;
			}
		}
	}
	if (best_t < 0)
		return COPUS_ERANGE;
	/* The tightest nodes first, the lowest index among equals. */
	for (int f = best_p; f <= ix->fmax && got < best_m; f++) {
		const uint64_t *b = _fam(ix, best_t, f, best_m > 1);
		for (int n = _bit_next(b, ix->w0, 0); n >= 0 && got < best_m;
		     n = _bit_next(b, ix->w0, n + 1)) {
			out_row[n] = best_p;
			out_nodes[got++] = n;
		}
	}
	for (int i = 1; i < got; i++) {
		int n = out_nodes[i], j = i;
		for (; j > 0 && out_nodes[j - 1] > n; j--)
			out_nodes[j] = out_nodes[j - 1];
		out_nodes[j] = n;
	}
	*out_m = got;
	*out_type = best_t;
	return COPUS_OK;
}
