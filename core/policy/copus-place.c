/*
 * The copus policy (core/policy/copus.c): the GPUs that carry the chosen
 * cells, the moves that make room, and the fill of GPUs left idle.
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

/* Job order for placement: the larger size first, ties in job order. */
static int cmp_size(const void *a, const void *b, void *arg)
{
	const struct jw *w = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;

	if (w[i].k != w[j].k)
		return w[i].k > w[j].k ? -1 : 1;
	return (i > j) - (i < j);
}

/*
 * Placement without copus's rules, for the ablation "no-placement": the
 * first free GPUs of type t in node order, however many nodes that takes
 * and whatever else runs there.
 */
static int first_fit(const copus_cluster *c, const int *free_gpus, int t, int k,
		     int *row)
{
	int need = k;

	for (int i = 0; i < c->num_nodes && need > 0; i++) {
		if (c->nodes[i].gpu_type != t || !c->nodes[i].usable ||
		    free_gpus[i] <= 0)
			continue;
		row[i] = free_gpus[i] < need ? free_gpus[i] : need;
		need -= row[i];
	}
	if (need == 0)
		return COPUS_OK;
	memset(row, 0, (size_t)c->num_nodes * sizeof(int));
	return COPUS_ERANGE;
}

static int cmp_slot(const void *a, const void *b)
{
	const copus_slot *x = a, *y = b;

	return (x->node > y->node) - (x->node < y->node);
}

/*
 * The GPUs a job is placed on: row (N entries, zero on the other nodes)
 * and, when the placement listed them (the free index does), its nodes in
 * ascending order, m of them; m is -1 when only row tells, so that using
 * or clearing a placement costs its nodes, not the cluster's.
 */
struct spot {
	int *row;
	int *nodes;
	int m;
};

/* Zero sp's row, which is then listed and empty. */
static void spot_clear(struct spot *sp, int N)
{
	if (sp->m < 0)
		memset(sp->row, 0, (size_t)N * sizeof(int));
	for (int i = 0; i < sp->m; i++)
		sp->row[sp->nodes[i]] = 0;
	sp->m = 0;
}

static int nodes_of(const int *row, int N)
{
	int k = 0;
	for (int i = 0; i < N; i++)
		k += row[i] > 0;
	return k;
}

/* The nodes sp uses. */
static int spot_nodes(const struct spot *sp, int N)
{
	return sp->m >= 0 ? sp->m : nodes_of(sp->row, N);
}

/* Move src's placement to dst (cleared first); src is left clear. */
static void spot_move(struct spot *dst, struct spot *src, int N)
{
	spot_clear(dst, N);
	if (src->m < 0) {
		memcpy(dst->row, src->row, (size_t)N * sizeof(int));
		dst->m = -1;
	} else {
		for (int i = 0; i < src->m; i++)
			dst->row[src->nodes[i]] = src->row[src->nodes[i]];
		memcpy(dst->nodes, src->nodes, (size_t)src->m * sizeof(int));
		dst->m = src->m;
	}
	spot_clear(src, N);
}

/* The free index of node n follows its free GPUs and mark. */
static void sync_node(const struct greedy_ctx *g, int n)
{
	if (g->ix_free != NULL)
		copus__free_index_sync(g->ix_free, n);
	if (g->ix_avail != NULL)
		copus__free_index_sync(g->ix_avail, n);
}

/*
 * Append job j's cell to the result: from sp (cleared here) or, with sp
 * NULL, from the job's current slots. Marks the nodes of a multi-node job
 * in dist and takes the GPUs from free_gpus (and the indexes follow).
 */
static int emit(const struct greedy_ctx *g, struct copus__result *res, size_t j,
		const copus_job *jb, struct spot *sp, int N, int *free_gpus,
		int *dist)
{
	size_t o = res->used;

	res->off[j] = o;
	if (sp != NULL && sp->m >= 0) {
		for (int i = 0; i < sp->m; i++) {
			int k = sp->nodes[i];
			if (sp->row[k] <= 0)
				continue;
			if (res->used == res->cap)
				return COPUS_ESTATE;
			res->slots[res->used].node = k;
			res->slots[res->used].gpus = sp->row[k];
			res->used++;
			sp->row[k] = 0;
		}
		sp->m = 0;
	} else if (sp == NULL) {
		for (int i = 0; i < jb->alloc_slots; i++) {
			if (jb->alloc[i].gpus <= 0)
				continue;
			if (res->used == res->cap)
				return COPUS_ESTATE;
			res->slots[res->used++] = jb->alloc[i];
		}
		qsort(res->slots + o, res->used - o, sizeof(copus_slot),
		      cmp_slot);
	} else {
		int *row = sp->row;
		for (int k = 0; k < N; k++) {
			if (row[k] <= 0)
				continue;
			if (res->used == res->cap)
				return COPUS_ESTATE;
			res->slots[res->used].node = k;
			res->slots[res->used].gpus = row[k];
			res->used++;
			row[k] = 0;
		}
		sp->m = 0;
	}
	res->cnt[j] = (int)(res->used - o);
	for (size_t i = o; i < res->used; i++) {
		free_gpus[res->slots[i].node] -= res->slots[i].gpus;
		if (res->cnt[j] > 1)
			dist[res->slots[i].node] = 1;
		sync_node(g, res->slots[i].node);
	}
	return COPUS_OK;
}

/*
 * GPUs that placement left free (a job shrank to fit, or did not fit at
 * all) go to queued jobs, each on its most valuable cell that the free GPUs
 * hold (smaller if that does not fit on the nodes), the job of most value
 * per GPU first, until none fits: the chosen sizes count a
 * type's GPUs, not how they lie on the nodes, and idle GPUs help nobody.
 */
/* Has job jb a cell of k GPUs of type t on that many nodes? */
static bool has_cell(const copus_job *jb, int t, int k, int nodes)
{
	for (int i = 0; i < jb->num_cells; i++)
		if (jb->cells[i].gpu_type == t && jb->cells[i].gpus == k &&
		    jb->cells[i].nodes == nodes)
			return true;
	return false;
}

/*
 * Places job x on its type x->t at the largest size from x->k down that
 * fits. An elastic job shrinks to fit when its speedup is known, or when it
 * is starting (a running job without a model keeps its size; a new one
 * starts on what there is rather than leave the GPUs idle for a round).
 * With whole set it does not shrink. The GPUs go in sp (clear on entry),
 * x->k becomes the size and *type the type; *type is -1 (sp clear) when
 * nothing fits. ix is free_gpus's index, or NULL.
 */
static int place_job(const struct greedy_ctx *g, const copus_cluster *c,
		     const copus_job *jb, struct jw *x, const int *free_gpus,
		     const struct copus__free_index *ix, const int *dist,
		     struct spot *sp, int *type, bool whole)
{
	int *row = sp->row;

	int lo = !whole && jb->elastic &&
				 (copus__cp_known(x, x->t) || x->cur_k == 0)
			 ? jb->min_gpus
			 : x->k;

	if (!g->o->no_placement && !g->prm->equal_per_node)
		copus__placer_prep(g->pl, c, free_gpus, dist, 1u << x->t);
	for (int k = x->k; k >= lo; k--) {
		int rc, t = -1;
		if ((x->cs != NULL || jb->granularity > 1) &&
		    !(copus__cp_speedup(x, x->t, k, g->node_gpus) > 0.0))
			continue; /* no cell or no whole replica of that size */
		if (k < x->k && !g->o->no_placement &&
		    !copus__cp_size_tiles(x, x->t, k, g->node_gpus))
			continue; /* shrinks only to a size that tiles */
		sp->m = -1;
		if (g->o->no_placement) {
			rc = first_fit(c, free_gpus, x->t, k, row);
			t = x->t;
		} else if (g->prm->equal_per_node && ix != NULL) {
			rc = copus__free_index_equal(ix, 1u << x->t, k, row,
						     sp->nodes, &sp->m, &t);
		} else if (g->prm->equal_per_node) {
			rc = copus__place_equal(c, free_gpus, dist, 1u << x->t,
						k, row, &t);
		} else {
			rc = copus__placer_get(g->pl, k, row, &t);
		}
		if (rc == COPUS_ENOMEM)
			return rc;
		if (rc == COPUS_OK && x->cs != NULL &&
		    !has_cell(jb, t, k, spot_nodes(sp, c->num_nodes))) {
			/* Spread where the job has no plan: a smaller size. */
			spot_clear(sp, c->num_nodes);
			continue;
		}
		if (rc == COPUS_OK) {
			x->k = k;
			*type = t;
			return COPUS_OK;
		}
	}
	spot_clear(sp, c->num_nodes);
	*type = -1;
	return COPUS_OK;
}

/* How many queued jobs the fill tries each round (bounds its cost). */
#define FILL_TRIES 64

int copus__cp_fill_idle(struct greedy_ctx *g, const copus_cluster *c,
			const copus_job *jobs, struct copus__result *res,
			int *free_gpus, int *dist, int *row)
{
	const int N = c->num_nodes;
	bool *tried = calloc(g->n + 1, sizeof(*tried));
	struct spot sp = { row, calloc((size_t)N + 1, sizeof(int)), 0 };
	int rc = COPUS_OK;

	if (tried == NULL || sp.nodes == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (int tries = 0; tries < FILL_TRIES; tries++) {
		int fr[COPUS_MAX_GPU_TYPES] = { 0 };
		for (int k = 0; k < N; k++)
			if (c->nodes[k].usable)
				fr[c->nodes[k].gpu_type] += free_gpus[k];
		size_t bj = g->n;
		int bt = -1, bk = 0;
		double bs = 0.0;
		for (size_t j = 0; j < g->n; j++) {
			struct jw *x = &g->w[j];
			int jt = -1, jk = 0;
			double jv = 0.0;
			if (x->k != 0 || tried[j])
				continue;
			/* The job's most valuable cell that the free GPUs hold. */
			for (int t = 0; t < g->T; t++)
				for (int k = fr[t]; k >= 1; k--) {
					if (!copus__cp_cell_allowed(x, t, k,
								    g->node_gpus,
								    g->o))
						continue;
					double v =
						copus__cp_value(x, t, k,
								g->node_gpus,
								g->prm, g->o);
					if (v > jv) {
						jv = v;
						jt = t;
						jk = k;
					}
				}
			if (jt >= 0 && jv / jk > bs) {
				bs = jv / jk;
				bj = j;
				bt = jt;
				bk = jk;
			}
		}
		if (bj == g->n)
			break;
		struct jw *x = &g->w[bj];
		int t;
		tried[bj] = true;
		x->t = bt;
		x->k = bk;
		rc = place_job(g, c, &jobs[bj], x, free_gpus, g->ix_free, dist,
			       &sp, &t, false);
		if (rc != COPUS_OK)
			goto out;
		if (t < 0) {
			x->k = 0;
			continue;
		}
		x->t = t;
		if ((rc = emit(g, res, bj, &jobs[bj], &sp, N, free_gpus,
			       dist)) != COPUS_OK)
			goto out;
		res->types[bj] = t;
		snprintf(res->reasons[bj], 64,
			 "starts on %d idle GPUs, %.0f s left", x->k,
			 x->remain);
	}
out:
	free(tried);
	free(sp.nodes);
	return rc;
}

/* Are job j's current GPUs free, and its nodes free of other multi-node
 * jobs if it spans several? */
static bool fits_current(const copus_job *jb, const int *free_gpus,
			 const int *dist)
{
	int used = 0;

	for (int i = 0; i < jb->alloc_slots; i++)
		used += jb->alloc[i].gpus > 0;
	for (int i = 0; i < jb->alloc_slots; i++) {
		const copus_slot *sl = &jb->alloc[i];
		if (sl->gpus <= 0)
			continue;
		if (free_gpus[sl->node] < sl->gpus ||
		    (used > 1 && dist[sl->node]))
			return false;
	}
	return true;
}

/* Does job x keep its cell and its GPUs (all on usable nodes)? */
static bool keeps(const struct jw *x, const copus_job *jb,
		  const copus_cluster *c)
{
	if (x->k != x->cur_k || x->t != x->cur_t)
		return false;
	for (int i = 0; i < jb->alloc_slots; i++)
		if (jb->alloc[i].gpus > 0 &&
		    !c->nodes[jb->alloc[i].node].usable)
			return false;
	return true;
}

/* Take job j's slots in res out of avail (the GPUs free less those held
 * for the jobs still to place). */
static void take_avail(const struct greedy_ctx *g,
		       const struct copus__result *res, size_t j, int *avail)
{
	for (int i = 0; i < res->cnt[j]; i++) {
		int n = res->slots[res->off[j] + (size_t)i].node;
		avail[n] -= res->slots[res->off[j] + (size_t)i].gpus;
		if (g->ix_avail != NULL)
			copus__free_index_sync(g->ix_avail, n);
	}
}

/* avail[n] += d, and its index follows. */
static void avail_add(const struct greedy_ctx *g, int *avail, int n, int d)
{
	avail[n] += d;
	if (g->ix_avail != NULL)
		copus__free_index_sync(g->ix_avail, n);
}

/*
 * One placement pass over the chosen cells. Without repack: jobs that keep
 * their cell keep their GPUs, the others go largest first. With repack,
 * only rigid jobs are fixed: every other job goes largest first, an
 * elastic job that keeps its cell stays where it is if it still can, and
 * a job that does not fit around the GPUs still held for the running jobs
 * to come may take them, moving those jobs (at the cost of their restart).
 * *score is the sum of the placed jobs' values, less the restarts of the
 * moved ones; avail and moved have N and n entries.
 */
static int place_pass(struct greedy_ctx *g, const copus_cluster *c,
		      const copus_job *jobs, struct copus__result *res,
		      int *free_gpus, int *dist, struct spot *sp,
		      struct spot *sp2, size_t *idx, int repack, int *avail,
		      bool *moved, double *score)
{
	const int N = c->num_nodes;
	struct jw *w = g->w;
	size_t m = 0;
	int rc;

	memcpy(avail, free_gpus, (size_t)N * sizeof(int));
	if (g->ix_avail != NULL)
		copus__free_index_build(g->ix_avail);
	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &w[j];
		moved[j] = false;
		if (x->k == 0)
			continue;
		bool keep = keeps(x, &jobs[j], c);
		if (!keep || (repack && jobs[j].elastic)) {
			idx[m++] = j;
			for (int i = 0; keep && i < jobs[j].alloc_slots; i++)
				avail_add(g, avail, jobs[j].alloc[i].node,
					  -jobs[j].alloc[i].gpus);
			continue;
		}
		rc = emit(g, res, j, &jobs[j], NULL, N, free_gpus, dist);
		if (rc != COPUS_OK)
			return rc;
		take_avail(g, res, j, avail);
		res->types[j] = x->t;
		snprintf(res->reasons[j], 64, "keeps %d GPUs", x->k);
	}
	qsort_r(idx, m, sizeof(*idx), cmp_size, w);
	if (repack == 2) {
		/* The jobs that do not run yet first, each part largest first. */
		size_t *tmp = malloc((m + 1) * sizeof(*tmp)), a = 0;
		if (tmp == NULL)
			return COPUS_ENOMEM;
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < m; i++)
				if (keeps(&w[idx[i]], &jobs[idx[i]], c) ==
				    (pass == 1))
					tmp[a++] = idx[i];
		memcpy(idx, tmp, m * sizeof(*tmp));
		free(tmp);
	}
	for (size_t i = 0; i < m; i++) {
		size_t j = idx[i];
		struct jw *x = &w[j];
		int t = -1;
		if (keeps(x, &jobs[j], c)) {
			for (int s = 0; s < jobs[j].alloc_slots; s++)
				avail_add(g, avail, jobs[j].alloc[s].node,
					  jobs[j].alloc[s].gpus);
			if (fits_current(&jobs[j], free_gpus, dist)) {
				rc = emit(g, res, j, &jobs[j], NULL, N,
					  free_gpus, dist);
				if (rc != COPUS_OK)
					return rc;
				take_avail(g, res, j, avail);
				res->types[j] = x->t;
				snprintf(res->reasons[j], 64, "keeps %d GPUs",
					 x->k);
				continue;
			}
			moved[j] = true;
		}
		if (repack) {
			/* Around the GPUs held for the running jobs, unless
			 * taking some of them needs fewer nodes. */
			int t2 = -1;
			rc = place_job(g, c, &jobs[j], x, avail, g->ix_avail,
				       dist, sp, &t, true);
			if (rc == COPUS_OK && t >= 0)
				rc = place_job(g, c, &jobs[j], x, free_gpus,
					       g->ix_free, dist, sp2, &t2,
					       true);
			if (rc != COPUS_OK)
				return rc;
			if (t2 >= 0 && spot_nodes(sp2, N) < spot_nodes(sp, N)) {
				spot_move(sp, sp2, N);
				t = t2;
			}
			spot_clear(sp2, N);
		}
		if (t < 0) {
			rc = place_job(g, c, &jobs[j], x, free_gpus, g->ix_free,
				       dist, sp, &t, false);
			if (rc != COPUS_OK)
				return rc;
		}
		if (t < 0) {
			res->off[j] = res->used;
			snprintf(res->reasons[j], 64,
				 "queued: %d GPUs do not fit", x->k);
			x->k = 0;
			moved[j] = false;
			continue;
		}
		rc = emit(g, res, j, &jobs[j], sp, N, free_gpus, dist);
		if (rc != COPUS_OK)
			return rc;
		take_avail(g, res, j, avail);
		res->types[j] = t;
		x->t = t;
		if (moved[j])
			snprintf(res->reasons[j], 64,
				 "moves its %d GPUs to make "
				 "room",
				 x->k);
		else
			snprintf(res->reasons[j], 64,
				 "%s %d GPUs, %.0f s left%s",
				 x->cur_k > 0 ? "moved to" : "starts on", x->k,
				 x->remain, x->bad_model ? " (bad model)" : "");
	}
	*score = 0.0;
	for (size_t j = 0; j < g->n; j++) {
		struct jw *x = &w[j];
		if (x->k <= 0 || res->types[j] < 0)
			continue;
		double v = copus__cp_value(x, x->t, x->k, g->node_gpus, g->prm,
					   g->o);
		/* A move in the same cell; copus__cp_value() counts any other change. */
		if (moved[j] && x->k == x->cur_k && x->t == x->cur_t)
			v *= copus__cp_restart_factor(x,
						      copus__cp_speedup(x, x->t,
									x->k,
									g->node_gpus),
						      g->prm, g->o);
		*score += v;
	}
	return COPUS_OK;
}

/*
 * The repacking passes run when jobs x nodes stay under this: each is a
 * whole placement pass, and on big clusters a job left out by
 * fragmentation finds room elsewhere anyway.
 */
#define REPACK_BUDGET 4000000.0

/* A placement pass's outcome, kept while another pass runs. */
struct placed {
	size_t used;
	copus_slot *slots;
	size_t *off;
	int *cnt, *types, *k, *t, *free_gpus, *dist;
	char (*reasons)[64];
};

static void placed_free(struct placed *p)
{
	free(p->slots);
	free(p->off);
	free(p->cnt);
	free(p->types);
	free(p->k);
	free(p->t);
	free(p->free_gpus);
	free(p->dist);
	free(p->reasons);
}

static int placed_alloc(struct placed *p, size_t slots, size_t n, int N)
{
	memset(p, 0, sizeof(*p));
	p->slots = malloc((slots + 1) * sizeof(*p->slots));
	p->off = malloc((n + 1) * sizeof(*p->off));
	p->cnt = malloc((n + 1) * sizeof(int));
	p->types = malloc((n + 1) * sizeof(int));
	p->k = malloc((n + 1) * sizeof(int));
	p->t = malloc((n + 1) * sizeof(int));
	p->free_gpus = malloc(((size_t)N + 1) * sizeof(int));
	p->dist = malloc(((size_t)N + 1) * sizeof(int));
	p->reasons = malloc((n + 1) * sizeof(*p->reasons));
	if (!p->slots || !p->off || !p->cnt || !p->types || !p->k || !p->t ||
	    !p->free_gpus || !p->dist || !p->reasons) {
		placed_free(p);
		return COPUS_ENOMEM;
	}
	return COPUS_OK;
}

/* Copy the round's placement state into p (save) or back (restore). */
static void placed_copy(struct placed *p, bool save, struct copus__result *res,
			struct jw *w, size_t n, int *free_gpus, int *dist,
			int N)
{
#define COPY(dst, src, bytes)                        \
	memcpy(save ? (void *)(dst) : (void *)(src), \
	       save ? (const void *)(src) : (const void *)(dst), bytes)
	if (save)
		p->used = res->used;
	else
		res->used = p->used;
	COPY(p->slots, res->slots, p->used * sizeof(*p->slots));
	COPY(p->off, res->off, n * sizeof(*p->off));
	COPY(p->cnt, res->cnt, n * sizeof(int));
	COPY(p->types, res->types, n * sizeof(int));
	COPY(p->reasons, res->reasons, n * sizeof(*p->reasons));
	COPY(p->free_gpus, free_gpus, (size_t)N * sizeof(int));
	COPY(p->dist, dist, (size_t)N * sizeof(int));
#undef COPY
	for (size_t j = 0; j < n; j++) {
		if (save) {
			p->k[j] = w[j].k;
			p->t[j] = w[j].t;
		} else {
			w[j].k = p->k[j];
			w[j].t = p->t[j];
		}
	}
}

/*
 * Places the chosen cells (place_pass without repack). When that leaves a
 * chosen cell out or smaller and an elastic job could move to make room,
 * two repacking passes run too (largest first; the jobs that are not
 * running first, then the running ones), and the pass worth the most wins.
 */
int copus__cp_place_all(struct greedy_ctx *g, const copus_cluster *c,
			const copus_job *jobs, struct copus__result *res,
			int *free_gpus, int *dist, int *row, size_t *idx)
{
	const int N = c->num_nodes;
	const size_t n = g->n;
	struct jw *w = g->w;
	struct placed chosen = { 0 }, best = { 0 };
	struct copus__free_index aix = { 0 };
	int *avail = calloc((size_t)N + 1, sizeof(int));
	struct spot sp = { row, calloc((size_t)N + 1, sizeof(int)), 0 };
	struct spot sp2 = { calloc((size_t)N + 1, sizeof(int)),
			    calloc((size_t)N + 1, sizeof(int)), 0 };
	bool *moved = calloc(n + 1, sizeof(bool));
	double score = 0.0, best_score;
	bool shortfall = false, movable = false;
	int rc = COPUS_ENOMEM;

	if (!avail || !sp.nodes || !sp2.row || !sp2.nodes || !moved ||
	    placed_alloc(&chosen, res->cap, n, N) != COPUS_OK)
		goto out;
	/* avail is indexed as free_gpus is (built anew by each pass). */
	if (g->ix_free != NULL) {
		rc = copus__free_index_init(&aix, c, avail, dist);
		if (rc == COPUS_ENOMEM)
			goto out;
		g->ix_avail = rc == COPUS_OK ? &aix : NULL;
	}
	placed_copy(&chosen, true, res, w, n, free_gpus, dist, N);
	for (size_t j = 0; j < n; j++)
		movable |= w[j].k > 0 && jobs[j].elastic &&
			   keeps(&w[j], &jobs[j], c);
	rc = place_pass(g, c, jobs, res, free_gpus, dist, &sp, &sp2, idx, 0,
			avail, moved, &score);
	if (rc != COPUS_OK)
		goto out;
	for (size_t j = 0; j < n; j++)
		shortfall |= chosen.k[j] > 0 &&
			     (res->types[j] < 0 || w[j].k < chosen.k[j]);
	if (!shortfall || !movable || g->o->no_placement ||
	    (double)n * (double)N > REPACK_BUDGET)
		goto out;
	if ((rc = placed_alloc(&best, res->cap, n, N)) != COPUS_OK)
		goto out;
	placed_copy(&best, true, res, w, n, free_gpus, dist, N);
	best_score = score;
	for (int mode = 1; mode <= 2; mode++) {
		placed_copy(&chosen, false, res, w, n, free_gpus, dist, N);
		if (g->ix_free != NULL)
			copus__free_index_build(g->ix_free);
		rc = place_pass(g, c, jobs, res, free_gpus, dist, &sp, &sp2,
				idx, mode, avail, moved, &score);
		if (rc != COPUS_OK)
			goto out;
		if (score > best_score * (1.0 + 1e-9)) {
			best_score = score;
			placed_copy(&best, true, res, w, n, free_gpus, dist, N);
		}
	}
	placed_copy(&best, false, res, w, n, free_gpus, dist, N);
	if (g->ix_free != NULL)
		copus__free_index_build(g->ix_free);
out:
	g->ix_avail = NULL;
	copus__free_index_release(&aix);
	placed_free(&chosen);
	placed_free(&best);
	free(avail);
	free(sp.nodes);
	free(sp2.row);
	free(sp2.nodes);
	free(moved);
	return rc;
}
