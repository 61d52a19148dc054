/*
 * The plans of jobs with a model (see plans.h): the GPU constants of
 * copus_planner_gpus, and each job's table of cells with their plans, by
 * the core planner through a cache.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "copus/planner.h"
#include "../runtime/file.h"
#include "plans.h"

static int _type_key(struct copus__planner *p, const char *name);

int copus__planner_load(struct copus__planner *p, const char *path,
			char *err, size_t errlen)
{
	copus_planner_gpu_type *gpus;
	char why[256] = "";
	char *text = NULL;
	int n = 0, rc;

	if (err && errlen)
		err[0] = '\0';
	if (p->cache)
		copus_planner_cache_clear(p->cache);
	p->cached = 0;
	if (!path || !path[0]) {
		p->path[0] = '\0';
		p->ntypes = 0;
		return COPUS_OK;
	}
	rc = copus__file_read(path, &text, NULL, err ? err : why,
			      err ? errlen : sizeof(why));
	if (rc != COPUS_OK)
		return rc;
	gpus = calloc(COPUS_PLANNER_MAX_GPUS, sizeof(*gpus));
	rc = !gpus ? COPUS_ENOMEM :
	     copus_planner_gpus_parse(text, gpus, COPUS_PLANNER_MAX_GPUS, &n,
				      why, sizeof(why));
	free(text);
	if (rc != COPUS_OK) {
		if (err)
			snprintf(err, errlen, "%s: %s", path,
				 why[0] ? why : copus_strerror(rc));
		free(gpus);
		return rc;
	}
	memcpy(p->gpus, gpus, n * sizeof(*gpus));
	free(gpus);
	p->ntypes = n;
	snprintf(p->path, sizeof(p->path), "%s", path);
	return COPUS_OK;
}

void copus__planner_free(struct copus__planner *p)
{
	copus_planner_cache_free(p->cache);
	p->cache = NULL;
	p->cached = 0;
}

int copus__planner_gpu(const struct copus__planner *p, const char *type,
		       copus_planner_gpu *out)
{
	const copus_planner_gpu_type *f =
		copus_planner_gpus_find(p->gpus, p->ntypes, type);
	int rc;

	if (f) {
		*out = f->gpu;
		return COPUS_OK;
	}
	rc = copus_planner_gpu_default(type, out);
	return rc == COPUS_ENODATA ? COPUS_OK : rc;
}

/*
 * A type's key in the cache: the round's type indices may change from one
 * round to the next (nodes come and go), the names do not. Types are
 * numbered as first seen; -1 when there are too many to number.
 */
static int _type_key(struct copus__planner *p, const char *name)
{
	int i;

	for (i = 0; i < p->nseen; i++)
		if (!strcmp(p->seen[i], name))
			return i;
	if (p->nseen == COPUS__PLAN_GPU_TYPES)
		return -1;
	snprintf(p->seen[p->nseen], sizeof(p->seen[0]), "%s", name);
	return p->nseen++;
}

/* The plan of model m (layers built once a call, on the first miss). */
struct _asker {
	struct copus__planner *p;
	const struct copus__plan_ask *a;
	copus_planner_model m;
	bool built;
};

/*
 * The plan of one cell into *out: 1 when one fits, 0 when none does, a
 * negative copus_status on error.
 */
static int _ask(struct _asker *k, int type, int tkey,
		const copus_planner_gpu *gpu, int gpus, int nodes,
		struct copus__plan *out)
{
	struct copus__planner *p = k->p;
	copus_planner_key key = { k->a->model_id, k->a->batch, tkey, nodes,
				  gpus / nodes };
	const copus_planner_plan *plan;
	copus_planner_cell cell = { nodes, gpus / nodes };
	copus_planner_plan own;
	int rc, n;

	rc = tkey < 0 || !p->cache ? COPUS_ENODATA :
	     copus_planner_cache_find(p->cache, &key, &plan);
	if (rc == COPUS_ENODATA) {
		if (!k->built) {
			rc = copus_planner_layers(k->a->model, p->layers,
						  COPUS_PLANNER_MAX_LAYERS, &n);
			if (rc != COPUS_OK)
				return rc;
			k->m.layers = p->layers;
			k->m.n_layers = n;
			k->m.dtype_bytes = k->a->model->dtype_bytes;
			k->m.kind = (int)k->a->model->arch - 1;
			k->built = true;
		}
		if (tkey < 0 || !p->cache) {
			rc = copus_planner_best(&k->m, k->a->batch, gpu, &cell,
						NULL, &own);
			plan = &own;
		} else {
			/* A full cache stores nothing more: empty it. */
			if (p->cached >= COPUS__PLAN_CACHE) {
				copus_planner_cache_clear(p->cache);
				p->cached = 0;
			}
			rc = copus_planner_best_cached(p->cache, &key, &k->m,
						       gpu, NULL, &plan);
			p->cached++;
		}
	}
	if (rc == COPUS_ERANGE)
		return 0;
	if (rc != COPUS_OK)
		return rc;
	out->gpu_type = type;
	out->gpus = gpus;
	out->nodes = nodes;
	out->dp = plan->degrees.data;
	out->tp = plan->degrees.tensor;
	out->pp = plan->degrees.pipeline;
	out->mb = plan->micro_batches;
	out->seconds = plan->seconds;
	return out->seconds > 0.0 ? 1 : 0;
}

int copus__plan_cells(struct copus__planner *p, const struct copus__plan_ask *a,
		      const copus_node *nodes, int nnodes, int ntypes,
		      const char (*type_names)[16], copus_cell_time *cells,
		      struct copus__plan *plans, int max, int *n)
{
	struct _asker k = { p, a, { 0 }, false };
	int t, i, g, rc;

	*n = 0;
	if (!a->model || a->batch < 1 || a->kmin < 1 || a->kmax < a->kmin)
		return COPUS_EINVAL;
	if (!p->cache && copus_planner_cache_new(COPUS__PLAN_CACHE,
						 &p->cache) != COPUS_OK)
		p->cache = NULL;
	for (t = 0; t < ntypes; t++) {
		copus_planner_gpu gpu;
		int most = 0, count = 0, tkey, cur = -1;

		if (a->type_mask && !(a->type_mask & (1u << t)))
			continue;
		/* The largest usable node of the type, as the policy counts
		 * them (copus__cp_cluster_caps). */
		for (i = 0; i < nnodes; i++) {
			if (!nodes[i].usable || nodes[i].gpu_type != t ||
			    nodes[i].gpus < 1)
				continue;
			count++;
			if (nodes[i].gpus > most)
				most = nodes[i].gpus;
		}
		if (t == a->cur_type)
			cur = a->cur_gpus;
		if ((!most && cur < 0) ||
		    copus__planner_gpu(p, type_names[t], &gpu) != COPUS_OK)
			continue;
		tkey = _type_key(p, type_names[t]);
		for (g = a->kmin; most && g <= a->kmax && *n < max; g++) {
			int per = g < most ? g : most;

			if (g % per || g / per > count)
				continue;
			rc = _ask(&k, t, tkey, &gpu, g, g / per, &plans[*n]);
			if (rc < 0)
				return rc;
			*n += rc;
		}
		/* The cell it runs on, when that is not the fewest nodes. */
		if (cur > 0 && a->cur_nodes > 0 && cur % a->cur_nodes == 0 &&
		    *n < max &&
		    !copus__plan_find(plans, *n, t, cur, a->cur_nodes)) {
			rc = _ask(&k, t, tkey, &gpu, cur, a->cur_nodes,
				  &plans[*n]);
			if (rc < 0)
				return rc;
			*n += rc;
		}
	}
	for (i = 0; i < *n; i++) {
		cells[i].gpu_type = plans[i].gpu_type;
		cells[i].gpus = plans[i].gpus;
		cells[i].nodes = plans[i].nodes;
		cells[i].seconds = plans[i].seconds;
	}
	return COPUS_OK;
}

const struct copus__plan *copus__plan_find(const struct copus__plan *plans,
					   int n, int type, int gpus,
					   int nodes)
{
	int i;

	for (i = 0; plans && i < n; i++)
		if (plans[i].gpu_type == type && plans[i].gpus == gpus &&
		    plans[i].nodes == nodes)
			return &plans[i];
	return NULL;
}

void copus__plan_name(const struct copus__plan *pl, char *buf, size_t len)
{
	if (!pl)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "dp%d.tp%d.pp%d.mb%d", pl->dp, pl->tp,
			 pl->pp, pl->mb);
}

void copus__plan_words(const struct copus__plan *pl, const char *type,
		       char *buf, size_t len)
{
	snprintf(buf, len, "type=%s gpus=%d nodes=%d dp=%d tp=%d pp=%d mb=%d",
		 type, pl->gpus, pl->nodes, pl->dp, pl->tp, pl->pp, pl->mb);
}
