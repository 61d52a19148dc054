/*
 * Synthetic policy instances for the policy benchmark and the exactness
 * test: a cluster of nodes of one size (4 or 8 GPUs) and up to three GPU
 * types, and jobs with fitted-model-like goodput curves (parameter ranges
 * of fits of Pollux's six models, a slower copy of the model on each
 * slower GPU type), elastic or rigid, some restricted to one type, some
 * without a model, and some already running on a current allocation that
 * respects the nodes' sizes and types. Seeded and deterministic.
 *
 * Header-only (static inline) so that each test or benchmark program can
 * include it without a build rule of its own.
 */
#ifndef COPUS_TESTS_POLICY_GEN_H
#define COPUS_TESTS_POLICY_GEN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#define PGEN_MAX_TYPES 3

struct pgen_params {
	uint64_t seed;
	int jobs;
	int nodes;
	int node_gpus;    /* GPUs on every node */
	int types;        /* 1 .. PGEN_MAX_TYPES; node k has type k % types */
	int max_req;      /* requests are powers of two up to this */
	int max_gpus;     /* an elastic job's upper bound */
	double elastic;   /* share of elastic jobs */
	double running;   /* share of jobs that try to hold GPUs already */
	double one_type;  /* share of jobs restricted to one type */
	double no_model;  /* share of jobs without a model */
};

struct pgen {
	copus_cluster c;
	copus_node *nodes;
	copus_job *jobs;
	copus_model *models;      /* types models per job */
	const copus_model **mp;   /* types pointers per job */
	copus_slot *slots;        /* the current allocations */
	int *used;                /* GPUs in use per node */
	int *room;                /* GPUs a new job may take per node */
	size_t n;
	int cap[PGEN_MAX_TYPES];  /* GPUs per type */
	int busy[PGEN_MAX_TYPES]; /* GPUs held by running jobs per type */
	uint64_t rng;
};

/* A 64-bit LCG; the top 53 bits give a double in [0, 1). */
static inline double pgen_uni(struct pgen *g, double lo, double hi)
{
	g->rng = g->rng * 6364136223846793005ull + 1442695040888963407ull;
	return lo + (hi - lo) * ((double)(g->rng >> 11) / 9007199254740992.0);
}

static inline int pgen_pick(struct pgen *g, int lo, int hi)
{
	int v = lo + (int)pgen_uni(g, 0.0, hi - lo + 1.0);

	return v > hi ? hi : v;
}

/*
 * Give job j k GPUs of type t on the fewest nodes it can find, scanning
 * from the node at *cursor (the first node that may have room): a job
 * within one node takes part of one node; a bigger one takes whole free
 * nodes, so that no node ends up shared by a multi-node job. Returns the
 * slots used, 0 when it does not fit (nothing taken).
 */
static inline int pgen_hold(struct pgen *g, size_t j, int t, int k,
			    size_t nslots, int *cursor)
{
	const int G = g->nodes[0].gpus, N = g->c.num_nodes;
	copus_job *jb = &g->jobs[j];
	int s = 0;

	if (k <= G) {
		for (int i = *cursor; i < N; i++) {
			if (g->nodes[i].gpu_type != t || g->room[i] < k)
				continue;
			g->used[i] += k;
			g->room[i] -= k;
			g->slots[nslots] = (copus_slot){ i, k };
			s = 1;
			break;
		}
	} else {
		int need = (k + G - 1) / G, found = 0;
		for (int i = *cursor; i < N && found < need; i++)
			if (g->nodes[i].gpu_type == t && g->used[i] == 0)
				found++;
		if (found < need)
			return 0;
		for (int i = *cursor, left = k; i < N && left > 0; i++) {
			if (g->nodes[i].gpu_type != t || g->used[i] != 0)
				continue;
			int take = left < G ? left : G;
			/* The rest of a node that a multi-node job ends
			 * part-way into stays free but is not shared. */
			g->used[i] = take;
			g->room[i] = 0;
			g->slots[nslots + (size_t)s] = (copus_slot){ i, take };
			s++;
			left -= take;
		}
	}
	while (*cursor < N && g->room[*cursor] == 0)
		(*cursor)++;
	if (s == 0)
		return 0;
	jb->alloc = &g->slots[nslots];
	jb->alloc_slots = s;
	jb->alloc_type = t;
	jb->restarts = 1;
	if (k > jb->max_gpus_had)
		jb->max_gpus_had = k;
	g->busy[t] += k;
	return s;
}

static inline void pgen_destroy(struct pgen *g)
{
	free(g->nodes);
	free(g->jobs);
	free(g->models);
	free(g->mp);
	free(g->slots);
	free(g->used);
	free(g->room);
	memset(g, 0, sizeof(*g));
}

/* Build an instance; COPUS_EINVAL for bad parameters, COPUS_ENOMEM. */
static inline int pgen_create(const struct pgen_params *p, struct pgen *g)
{
	/* Slower GPU types compute slower; the network is the same. */
	static const double speed[PGEN_MAX_TYPES] = { 1.0, 0.6, 0.35 };
	const int T = p->types;
	int cursor[PGEN_MAX_TYPES] = { 0 };
	size_t nslots = 0;

	memset(g, 0, sizeof(*g));
	if (p->jobs < 0 || p->nodes < 1 || p->node_gpus < 1 || T < 1 ||
	    T > PGEN_MAX_TYPES || p->max_req < 1 || p->max_gpus < 1)
		return COPUS_EINVAL;
	g->rng = p->seed * 2862933555777941757ull + 3037000493ull;
	g->n = (size_t)p->jobs;
	g->nodes = calloc((size_t)p->nodes, sizeof(*g->nodes));
	g->used = calloc((size_t)p->nodes, sizeof(*g->used));
	g->room = calloc((size_t)p->nodes, sizeof(*g->room));
	g->jobs = calloc(g->n + 1, sizeof(*g->jobs));
	g->models = calloc((g->n + 1) * (size_t)T, sizeof(*g->models));
	g->mp = calloc((g->n + 1) * (size_t)T, sizeof(*g->mp));
	/* Every slot holds at least one GPU. */
	g->slots = calloc((size_t)p->nodes * (size_t)p->node_gpus + 1,
			  sizeof(*g->slots));
	if (!g->nodes || !g->used || !g->room || !g->jobs || !g->models ||
	    !g->mp ||
	    !g->slots) {
		pgen_destroy(g);
		return COPUS_ENOMEM;
	}
	for (int k = 0; k < p->nodes; k++) {
		g->nodes[k] = (copus_node){ k % T, p->node_gpus, true };
		g->room[k] = p->node_gpus;
		g->cap[k % T] += p->node_gpus;
	}
	g->c = (copus_cluster){ p->nodes, g->nodes, T, NULL, NULL };
	int log2max = 0;
	while ((2 << log2max) <= p->max_req)
		log2max++;
	for (size_t j = 0; j < g->n; j++) {
		copus_job *jb = &g->jobs[j];
		double ac = pgen_uni(g, 0.005, 0.2);
		double bc = pgen_uni(g, 1e-5, 5e-3);
		double ar = pgen_uni(g, 1e-3, 0.1);
		double an = ar * pgen_uni(g, 1.1, 5.0);
		copus_model m = {
			.perf = { ac, bc, an, an * pgen_uni(g, 0.001, 0.1), ar,
				  ar * pgen_uni(g, 0.001, 0.1),
				  pgen_uni(g, 1.0, 3.0) },
			.grad = { 1.0, pgen_uni(g, 1.0, 1000.0) },
			.limits = { 64, 64 * 64, 4, 256, true },
		};
		int req = 1 << pgen_pick(g, 0, log2max);

		for (int t = 0; t < T; t++) {
			copus_model *mt = &g->models[j * (size_t)T + (size_t)t];
			*mt = m;
			mt->perf.alpha_c /= speed[t];
			mt->perf.beta_c /= speed[t];
			g->mp[j * (size_t)T + (size_t)t] = mt;
		}
		*jb = (copus_job){
			.id = (uint64_t)j + 1,
			.elastic = pgen_uni(g, 0, 1) < p->elastic,
			.min_gpus = 1, .max_gpus = p->max_gpus,
			.req_gpus = req, .req_batch = 64,
			.remaining = pgen_uni(g, 60, 36000),
			.models = &g->mp[j * (size_t)T],
			.max_gpus_had = req,
			.submit_time = -pgen_uni(g, 0, 3600),
		};
		if (!jb->elastic || jb->max_gpus < req)
			jb->min_gpus = jb->max_gpus = req;
		if (T > 1 && pgen_uni(g, 0, 1) < p->one_type)
			jb->type_mask = 1u << pgen_pick(g, 0, T - 1);
		if (pgen_uni(g, 0, 1) < p->no_model)
			jb->models = NULL;
		if (pgen_uni(g, 0, 1) >= p->running)
			continue;
		/* A running job holds its request or, if elastic, a size
		 * between its bounds, on a type it allows. */
		int k = jb->elastic ? pgen_pick(g, jb->min_gpus,
						2 * req < jb->max_gpus ?
						2 * req : jb->max_gpus) : req;
		int t = jb->type_mask ? __builtin_ctz(jb->type_mask) :
					pgen_pick(g, 0, T - 1);
		int s = pgen_hold(g, j, t, k, nslots, &cursor[t]);
		if (s > 0) {
			jb->attained = pgen_uni(g, 60, 36000) * k;
			nslots += (size_t)s;
		}
	}
	return COPUS_OK;
}

#endif /* COPUS_TESTS_POLICY_GEN_H */
