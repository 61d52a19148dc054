/*
 * The copus policy (core/policy/copus.c): the cells chosen from the jobs'
 * values, by a greedy over gains per GPU, the swaps that admit a queued job,
 * the moves between GPU types, and the exact optimum on small clusters.
 */
#define _GNU_SOURCE /* qsort_r */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "../heap.h"
#include "copus-work.h"
#include "copus.h"
#include "ops.h"
#include "place.h"

/* The best step found so far, and how to compare a candidate with it. */
struct step {
	double score;
	int t, k;
	const int *slack; /* per type: free GPUs less what only it can serve */
};

static void consider(struct step *b, double g, int t, int k)
{
	double tol = 1e-12 * fabs(b->score);

	/* Equal gains: the type other jobs need least. */
	if (g > b->score + tol || (b->k > 0 && g >= b->score - tol &&
				   t != b->t && b->slack[t] > b->slack[b->t])) {
		b->score = g;
		b->t = t;
		b->k = k;
	}
}

/*
 * The best next step of job j: a type and a larger size, with the gain in
 * value per added GPU. Returns false when there is none.
 */
static bool best_step(const struct jw *w, const int *cap, const int *slack,
		      const int *node_gpus, int ntypes,
		      const copus_policy_params *prm,
		      const struct copus__copus_opts *o, double *score,
		      int *to_t, int *to_k)
{
	const copus_job *j = w->job;
	struct step b = { 0.0, -1, 0, slack };

	for (int t = 0; t < ntypes; t++) {
		if (w->t >= 0 && t != w->t)
			continue;
		if (!copus__type_allowed(j, t) || node_gpus[t] <= 0)
			continue;
		int g = node_gpus[t];
		int k0 = w->t == t ? w->k : 0;
		int kmax = copus__cp_growth_cap(j);
		if (kmax > k0 + cap[t])
			kmax = k0 + cap[t];
		double v0 =
			k0 > 0 ? copus__cp_value(w, t, k0, node_gpus, prm, o)
			       : 0.0;
/*
 * A size whose value cannot reach the best gain so far is not valued (its
 * speedup table is not filled): consider() would not take it.
 */
#define TRY(kk)                                                                \
	do {                                                                   \
		if (b.k > 0 &&                                                 \
		    (copus__cp_value_bound(w, t, (kk), node_gpus, prm) - v0) / \
				    ((kk)-k0) <                                \
			    b.score - 1e-12 * fabs(b.score))                   \
			break;                                                 \
		consider(&b,                                                   \
			 (copus__cp_value(w, t, (kk), node_gpus, prm, o) -     \
			  v0) / ((kk)-k0),                                     \
			 t, (kk));                                             \
	} while (0)
		if (!j->elastic || !copus__cp_known(w, t)) {
			/* Fixed size: the request (clamped to elastic bounds),
			 * or for a running elastic job its current size. */
			int want = w->q;
			if (want > k0 && want <= kmax)
				TRY(want);
			if (j->elastic && t == w->cur_t && w->cur_k > k0 &&
			    w->cur_k <= kmax && w->cur_k != want)
				TRY(w->cur_k);
			continue;
		}
		int lo = k0 > 0 ? k0 + 1 : j->min_gpus;
		int hi = k0 + g;
		if (hi > kmax)
			hi = kmax;
		if (lo > hi && lo <= kmax)
			TRY(lo); /* a minimum beyond one node */
		for (int k = lo; k <= hi; k++) {
			/*
			 * A multi-node job has its nodes to itself (one such
			 * job per node), so a size that ends part-way into a
			 * node strands the rest of it: whole nodes only.
			 */
			if (k > g && k % g != 0 && k != j->max_gpus &&
			    k != w->q && !(t == w->cur_t && k == w->cur_k) &&
			    !o->no_placement)
				continue;
			/* Within a node, sizes that tile it. */
			if (!o->no_placement &&
			    !copus__cp_size_tiles(w, t, k, node_gpus))
				continue;
			TRY(k);
		}
		/*
		 * Whole nodes beyond the look-ahead: across a node boundary
		 * the sync cost jumps, so a speedup curve may dip after one
		 * node and rise again over several, and the greedy would never
		 * cross the dip one node at a time.
		 */
		for (int k = (hi / g + 1) * g; k <= kmax; k += g)
			TRY(k);
		/* The request and the current size may lie beyond that. */
		if (w->q > hi && w->q <= kmax && w->q % g != 0)
			TRY(w->q);
		if (t == w->cur_t && w->cur_k > hi && w->cur_k <= kmax &&
		    w->cur_k % g != 0 && w->cur_k != w->q)
			TRY(w->cur_k);
#undef TRY
	}
	*score = b.score;
	*to_t = b.t;
	*to_k = b.k;
	return b.k > 0 && b.score > 0.0;
}

/* The heap of the greedy's steps: the largest gain per GPU on top. */
static bool heap_above(const void *a, const void *b)
{
	return ((const struct heap_item *)a)->score >
	       ((const struct heap_item *)b)->score;
}

static void heap_push(struct heap_item *h, size_t *n, struct heap_item it)
{
	copus__heap_push(h, n, sizeof(*h), &it, heap_above);
}

static struct heap_item heap_pop(struct heap_item *h, size_t *n)
{
	struct heap_item top;

	copus__heap_pop(h, n, sizeof(*h), &top, heap_above);
	return top;
}

/* Give job x the cell (t, k), taking the GPUs from cap and slack. */
void copus__cp_take_cell(struct jw *x, int t, int k, int T,
			 const int *node_gpus, int *cap, int *slack)
{
	cap[t] -= k - (x->t == t ? x->k : 0);
	slack[t] -= k - (x->t == t ? x->k : 0);
	if (x->t < 0 && copus__cp_only_type(x, T, node_gpus) == t)
		slack[t] += copus__cp_base_need(x);
	x->t = t;
	x->k = k;
}

/* Job order for the second start: largest smallest-cell first. */
static int cmp_need(const void *a, const void *b, void *arg)
{
	const struct jw *w = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int x = copus__cp_base_need(&w[i]), y = copus__cp_base_need(&w[j]);

	if (x != y)
		return y - x;
	return (i > j) - (i < j);
}

/*
 * One run of the greedy from a start (0: nothing, 1: largest smallest
 * cells first, 3: the cells already in w): GPUs go by the largest gain in
 * value per GPU. Returns the total value reached; the cells are in w.
 */
double copus__cp_greedy(struct greedy_ctx *g, int start, size_t *idx, int *cap,
			int *slack)
{
	struct jw *w = g->w;
	size_t nheap = 0;
	double total = 0.0;

	for (size_t j = 0; start < 3 && j < g->n; j++) {
		w[j].t = -1;
		w[j].k = 0;
		idx[j] = j;
	}
	if (start == 1)
		qsort_r(idx, g->n, sizeof(*idx), cmp_need, w);
	for (size_t i = 0; start > 0 && start < 3 && i < g->n; i++) {
		struct jw *x = &w[idx[i]];
		int t = -1, k = copus__cp_base_need(x);
		double best = 0.0;
		for (int u = 0; u < g->T; u++) {
			if (!copus__type_allowed(x->job, u) || cap[u] < k ||
			    g->node_gpus[u] <= 0)
				continue;
			double v = copus__cp_value(x, u, k, g->node_gpus,
						   g->prm, g->o);
			if (v > best ||
			    (v == best && t >= 0 && slack[u] > slack[t])) {
				best = v;
				t = u;
			}
		}
		if (t >= 0 && best > 0.0)
			copus__cp_take_cell(x, t, k, g->T, g->node_gpus, cap,
					    slack);
	}
	for (size_t j = 0; j < g->n; j++) {
		double s;
		int t, k;
		if (best_step(&w[j], cap, slack, g->node_gpus, g->T, g->prm,
			      g->o, &s, &t, &k))
			heap_push(g->heap, &nheap, (struct heap_item){ s, j });
	}
	while (nheap > 0) {
		struct heap_item it = heap_pop(g->heap, &nheap);
		struct jw *x = &w[it.j];
		double s;
		int t, k;
		if (!best_step(x, cap, slack, g->node_gpus, g->T, g->prm, g->o,
			       &s, &t, &k))
			continue;
		if (s < it.score * (1.0 - 1e-12)) {
			/* The capacity changed since it was queued: requeue. */
			heap_push(g->heap, &nheap,
				  (struct heap_item){ s, it.j });
			continue;
		}
		copus__cp_take_cell(x, t, k, g->T, g->node_gpus, cap, slack);
		if (best_step(x, cap, slack, g->node_gpus, g->T, g->prm, g->o,
			      &s, &t, &k))
			heap_push(g->heap, &nheap,
				  (struct heap_item){ s, it.j });
	}
	for (size_t j = 0; j < g->n; j++)
		if (w[j].k > 0)
			total += copus__cp_value(&w[j], w[j].t, w[j].k,
						 g->node_gpus, g->prm, g->o);
	return total;
}

/* How many queued jobs the swap step tries each round (bounds its cost). */
#define SWAP_TRIES 32

static int cmp_victim(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	if (x->ratio != y->ratio)
		return x->ratio < y->ratio ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/*
 * How swap_in chooses what to displace: each job's cheapest shrink per GPU
 * freed, whole jobs only, or the one job whose shrink alone frees enough
 * at the least loss.
 */
enum swap_mode {
	SWAP_RATIO,
	SWAP_WHOLE,
	SWAP_SINGLE
};

/*
 * The jobs of type t that could make room for need GPUs (need > 0), each
 * with its cheapest way to (mode), in vic; returns their number. With
 * SWAP_SINGLE only the cheapest of them, else all, cheapest first.
 */
static int victims(const struct greedy_ctx *g, int t, int need,
		   enum swap_mode mode, struct victim *vic)
{
	bool whole = mode == SWAP_WHOLE;
	const struct jw *w = g->w;
	int nv = 0;

	for (size_t i = 0; i < g->n; i++) {
		const struct jw *y = &w[i];
		if (y->t != t || y->k <= 0)
			continue;
		double v =
			copus__cp_value(y, t, y->k, g->node_gpus, g->prm, g->o);
		struct victim best = { v / y->k, i, 0, y->k };
		if (mode == SWAP_SINGLE)
			best.ratio = y->k >= need ? v : INFINITY;
		/* A smaller size the job may have, if it loses less. */
		for (int kk = copus__cp_base_need(y); !whole && kk < y->k;
		     kk++) {
			if (!copus__cp_cell_allowed(y, t, kk, g->node_gpus,
						    g->o))
				continue;
			double loss =
				v - copus__cp_value(y, t, kk, g->node_gpus,
						    g->prm, g->o);
			double r =
				mode == SWAP_SINGLE
					? (y->k - kk >= need ? loss : INFINITY)
					: loss / (y->k - kk);
			if (r < best.ratio)
				best = (struct victim){ r, i, kk, y->k - kk };
		}
		if (!isfinite(best.ratio))
			continue;
		/* Only the cheapest single job. */
		if (mode == SWAP_SINGLE && nv == 1) {
			if (cmp_victim(&best, &vic[0]) < 0)
				vic[0] = best;
			continue;
		}
		vic[nv++] = best;
	}
	if (mode != SWAP_SINGLE)
		qsort(vic, (size_t)nv, sizeof(*vic), cmp_victim);
	return nv;
}

/*
 * The victims of the swaps tried while the cells stay as they are: most
 * tries fail and change nothing, so the next try of the same type (and,
 * for SWAP_SINGLE, the same need) reads them here instead of valuing every
 * job of the type again. version counts the changes to the cells.
 */
struct swap_memo {
	unsigned version;
	struct victim *list[2][COPUS_MAX_GPU_TYPES]; /* RATIO, WHOLE */
	int nlist[2][COPUS_MAX_GPU_TYPES];
	unsigned at[2][COPUS_MAX_GPU_TYPES]; /* version + 1; 0: none */
	struct victim single[COPUS_MAX_GPU_TYPES];
	int single_need[COPUS_MAX_GPU_TYPES], nsingle[COPUS_MAX_GPU_TYPES];
	unsigned single_at[COPUS_MAX_GPU_TYPES];
};

static void swap_memo_free(struct swap_memo *sm)
{
	for (int m = 0; m < 2; m++)
		for (int t = 0; t < COPUS_MAX_GPU_TYPES; t++)
			free(sm->list[m][t]);
}

/* The victims for (t, need, mode) now: *vic points at them. -1: no memory. */
static int memo_victims(const struct greedy_ctx *g, struct swap_memo *sm, int t,
			int need, enum swap_mode mode, struct victim **vic)
{
	if (mode == SWAP_SINGLE) {
		if (sm->single_at[t] != sm->version + 1 ||
		    sm->single_need[t] != need) {
			sm->nsingle[t] =
				victims(g, t, need, mode, &sm->single[t]);
			sm->single_need[t] = need;
			sm->single_at[t] = sm->version + 1;
		}
		*vic = &sm->single[t];
		return sm->nsingle[t];
	}
	int m = mode == SWAP_WHOLE;
	if (sm->list[m][t] == NULL) {
		sm->list[m][t] = malloc((g->n + 1) * sizeof(struct victim));
		if (sm->list[m][t] == NULL)
			return -1;
	}
	/* need only matters to SWAP_SINGLE. */
	if (sm->at[m][t] != sm->version + 1) {
		sm->nlist[m][t] = victims(g, t, need, mode, sm->list[m][t]);
		sm->at[m][t] = sm->version + 1;
	}
	*vic = sm->list[m][t];
	return sm->nlist[m][t];
}

/*
 * Try to admit queued job j on (t, k) by shrinking or queueing jobs of
 * type t that lose the least value per GPU freed. Applies the change and
 * returns the net gain when it is positive; otherwise changes nothing.
 * -1 without memory.
 */
static double swap_in(struct greedy_ctx *g, size_t j, int t, int k, int *cap,
		      int *slack, struct swap_memo *sm, enum swap_mode mode)
{
	struct jw *w = g->w, *x = &w[j];
	double gain = copus__cp_value(x, t, k, g->node_gpus, g->prm, g->o);
	int need = k - cap[t], freed = 0;

	if (!(gain > 0.0))
		return 0.0;
	if (need > 0) {
		struct victim *vic;
		int nv = memo_victims(g, sm, t, need, mode, &vic), m = 0;
		if (nv < 0)
			return -1.0;
		for (; m < nv && freed < need; m++) {
			struct jw *y = &w[vic[m].i];
			gain -= copus__cp_value(y, t, y->k, g->node_gpus,
						g->prm, g->o) -
				(vic[m].k > 0 ? copus__cp_value(y, t, vic[m].k,
								g->node_gpus,
								g->prm, g->o)
					      : 0.0);
			freed += vic[m].freed;
		}
		if (freed < need || !(gain > 1e-12))
			return 0.0;
		for (int q = 0; q < m; q++) {
			struct jw *y = &w[vic[q].i];
			cap[t] += vic[q].freed;
			slack[t] += vic[q].freed;
			y->k = vic[q].k;
			if (y->k == 0) {
				if (copus__cp_only_type(y, g->T,
							g->node_gpus) == t)
					slack[t] -= copus__cp_base_need(y);
				y->t = -1;
			}
		}
	}
	copus__cp_take_cell(x, t, k, g->T, g->node_gpus, cap, slack);
	sm->version++;
	return gain;
}

/*
 * Improve the greedy's cells: a queued job whose smallest cell is worth
 * more than what it would displace takes it (the greedy, adding one step
 * at a time by value per GPU, passes over large cells such as a big rigid
 * job's), then the greedy resumes on what is left.
 */
double copus__cp_improve(struct greedy_ctx *g, size_t *idx, int *cap,
			 int *slack)
{
	struct swap_memo sm = { 0 };
	struct jw *w = g->w;
	size_t tries = 0;
	bool changed = false;

	for (size_t j = 0; j < g->n && tries < SWAP_TRIES; j++) {
		struct jw *x = &w[j];
		if (x->k > 0)
			continue;
		int need = copus__cp_base_need(x);
		int bt = -1;
		double bv = 0.0;
		for (int t = 0; t < g->T; t++) {
			if (!copus__cp_cell_allowed(x, t, need, g->node_gpus,
						    g->o))
				continue;
			double v = copus__cp_value(x, t, need, g->node_gpus,
						   g->prm, g->o);
			if (v > bv) {
				bv = v;
				bt = t;
			}
		}
		if (bt < 0)
			continue;
		tries++;
		/* Shrinking others where that loses least; else queueing them. */
		static const enum swap_mode modes[] = { SWAP_RATIO, SWAP_SINGLE,
							SWAP_WHOLE };
		double gain = 0.0;
		for (int i = 0; i < 3 && gain == 0.0; i++)
			gain = swap_in(g, j, bt, need, cap, slack, &sm,
				       modes[i]);
		if (gain < 0.0) {
			/* Out of memory: the caller restores the greedy's
			 * cells, as when no swap helps. */
			changed = false;
			break;
		}
		changed |= gain > 0.0;
	}
	swap_memo_free(&sm);
	if (!changed)
		return -1.0;
	return copus__cp_greedy(g, 3, idx, cap, slack);
}

/*
 * Move jobs to another GPU type where the GPUs still free there are worth
 * more to them than the cell the greedy gave them (the greedy grows a job
 * only on the type of its first step, so a type nobody started on stays
 * idle while jobs crowd a faster one), then let the greedy hand out what
 * they leave. Every move raises the job's value and only frees GPUs, so
 * the total never falls. Returns whether a job moved.
 */
bool copus__cp_migrate(struct greedy_ctx *g, size_t *idx, int *cap, int *slack)
{
	struct jw *w = g->w;
	bool moved = false;

	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &w[j];
		if (x->k <= 0)
			continue;
		double bv = copus__cp_value(x, x->t, x->k, g->node_gpus, g->prm,
					    g->o);
		int bt = -1, bk = 0, kmax = copus__cp_growth_cap(x->job);
		if (x->cs != NULL && kmax > x->cs_kmax)
			kmax = x->cs_kmax;
		bv *= 1.0 + 1e-9;
		for (int t = 0; t < g->T; t++) {
			if (t == x->t)
				continue;
			for (int k = 1; k <= kmax && k <= cap[t]; k++) {
				if (!copus__cp_cell_allowed(x, t, k,
							    g->node_gpus, g->o))
					continue;
				double v =
					copus__cp_value(x, t, k, g->node_gpus,
							g->prm, g->o);
				if (v > bv) {
					bv = v;
					bt = t;
					bk = k;
				}
			}
		}
		if (bt < 0)
			continue;
		int t0 = x->t, k0 = x->k;
		cap[t0] += k0;
		slack[t0] += k0;
		x->t = -1;
		x->k = 0;
		if (copus__cp_only_type(x, g->T, g->node_gpus) == t0)
			slack[t0] -= copus__cp_base_need(x);
		copus__cp_take_cell(x, bt, bk, g->T, g->node_gpus, cap, slack);
		moved = true;
	}
	if (moved)
		copus__cp_greedy(g, 3, idx, cap, slack);
	return moved;
}

/* A cell of a job for exact_dp: a type and a size (0: queued), its value. */
struct cell {
	int t, k;
	double v;
};

/*
 * The exact optimum of the value table on small clusters: with each type's
 * capacity as the only constraint (placement follows, as for the greedy),
 * choosing one cell per job is a multiple-choice knapsack in as many
 * dimensions as there are GPU types, solved by dynamic programming over the
 * GPUs used of each type. DP_BUDGET bounds its work (states x cells); a
 * bigger instance keeps the greedy's cells. The cells change only when the
 * optimum is worth more than the greedy's.
 */
#define DP_BUDGET 4000000.0

void copus__cp_exact_dp(struct greedy_ctx *g, const int *total)
{
	struct jw *w = g->w;
	const int T = g->T;
	size_t n = g->n, S = 1, stride[COPUS_MAX_GPU_TYPES];
	double work = 0.0;

	for (int t = 0; t < T; t++) {
		stride[t] = S;
		S *= (size_t)(total[t] > 0 ? total[t] : 0) + 1;
		if (S > 1u << 20)
			return;
	}
	size_t *first = calloc(n + 1, sizeof(*first));
	if (first == NULL)
		return;
	for (size_t j = 0; j < n; j++) {
		size_t c = 1;
		for (int t = 0; t < T; t++)
			for (int k = 1; k <= total[t]; k++)
				c += copus__cp_cell_allowed(&w[j], t, k,
							    g->node_gpus, g->o);
		first[j + 1] = first[j] + c;
		work += (double)c * (double)S;
		if (work > DP_BUDGET) {
			free(first);
			return;
		}
	}
	struct cell *cells = malloc(first[n] * sizeof(*cells));
	double *dp = malloc(2 * S * sizeof(*dp));
	unsigned short *pick = malloc(n * S * sizeof(*pick));
	if (cells == NULL || dp == NULL || pick == NULL)
		goto out;
	for (size_t j = 0; j < n; j++) {
		size_t m = first[j];
		cells[m++] = (struct cell){ -1, 0, 0.0 };
		for (int t = 0; t < T; t++)
			for (int k = 1; k <= total[t]; k++)
				if (copus__cp_cell_allowed(&w[j], t, k,
							   g->node_gpus, g->o))
					cells[m++] = (struct cell){
						t, k,
						copus__cp_value(&w[j], t, k,
								g->node_gpus,
								g->prm, g->o)
					};
		if (first[j + 1] - first[j] > USHRT_MAX)
			goto out;
	}
	/* dp[s]: the most value of the jobs so far using s's GPUs per type. */
	double *cur = dp, *next = dp + S;
	for (size_t s = 0; s < S; s++)
		cur[s] = s == 0 ? 0.0 : -1.0;
	for (size_t j = 0; j < n; j++) {
		for (size_t s = 0; s < S; s++)
			next[s] = -1.0;
		for (size_t s = 0; s < S; s++) {
			if (cur[s] < 0.0)
				continue;
			for (size_t p = first[j]; p < first[j + 1]; p++) {
				const struct cell *u = &cells[p];
				size_t s2 = s;
				if (u->k > 0) {
					size_t used = s / stride[u->t] %
						      (size_t)(total[u->t] + 1);
					if (used + (size_t)u->k >
					    (size_t)total[u->t])
						continue;
					s2 += (size_t)u->k * stride[u->t];
				}
				double v = cur[s] + u->v;
				if (v > next[s2]) {
					next[s2] = v;
					pick[j * S + s2] =
						(unsigned short)(p - first[j]);
				}
			}
		}
		double *tmp = cur;
		cur = next;
		next = tmp;
	}
	size_t bs = 0;
	for (size_t s = 1; s < S; s++)
		if (cur[s] > cur[bs])
			bs = s;
	double have = 0.0;
	for (size_t j = 0; j < n; j++)
		if (w[j].k > 0)
			have += copus__cp_value(&w[j], w[j].t, w[j].k,
						g->node_gpus, g->prm, g->o);
	if (!(cur[bs] > have + 1e-9 * (have + 1.0)))
		goto out;
	for (size_t j = n; j-- > 0;) {
		const struct cell *u = &cells[first[j] + pick[j * S + bs]];
		w[j].t = u->t;
		w[j].k = u->k;
		if (u->k > 0)
			bs -= (size_t)u->k * stride[u->t];
	}
out:
	free(cells);
	free(dp);
	free(pick);
	free(first);
}
