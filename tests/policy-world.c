/* The world of the copus policy's tests (policy-world.h). */
#include <string.h>

#include <copus/policy.h>

#include "harness.h"
#include "policy-world.h"

const copus_policy_params PRM = COPUS_POLICY_PARAMS_INITIALIZER;

/* A job that scales well (cheap sync) with plenty of gradient noise. */
copus_model scalable(void)
{
	copus_model m = {
		.perf = { 0.05, 0.002, 0.02, 0.001, 0.005, 0.0005, 1.5 },
		.grad = { .sqr = 1.0, .var = 200.0 },
		.limits = { .init_batch = 64, .max_batch = 8192, .min_local = 8,
			    .max_local = 256, .accumulation = true },
	};
	return m;
}

/* A job that gains nothing from more GPUs (no noise, costly sync). */
copus_model poor(void)
{
	copus_model m = scalable();
	m.grad.var = 0.0;
	m.perf.alpha_r = m.perf.alpha_n = 0.5;
	return m;
}

void world_init(struct world *w, int nodes, int gpus)
{
	memset(w, 0, sizeof(*w));
	for (int k = 0; k < nodes; k++)
		w->nodes[k] = (copus_node){ 0, gpus, true };
	w->c = (copus_cluster){ nodes, w->nodes, 1, NULL, NULL };
}

copus_job *add_job(struct world *w, bool elastic, int req,
			  double remaining, copus_model m)
{
	size_t j = w->n++;
	copus_job *jb = &w->jobs[j];

	w->models[j] = m;
	for (int t = 0; t < COPUS_MAX_GPU_TYPES; t++)
		w->mp[j][t] = &w->models[j];
	*jb = (copus_job){
		.id = 100 + j, .elastic = elastic,
		.min_gpus = elastic ? 1 : req, .max_gpus = elastic ? 16 : req,
		.req_gpus = req, .req_batch = 64, .remaining = remaining,
		.models = w->mp[j], .max_gpus_had = req,
	};
	return jb;
}

void run_alloc(struct world *w, size_t j, int node, int gpus)
{
	w->alloc[j][w->jobs[j].alloc_slots++] = (copus_slot){ node, gpus };
	w->jobs[j].alloc = w->alloc[j];
	w->jobs[j].alloc_type = 0;
	if (gpus > w->jobs[j].max_gpus_had)
		w->jobs[j].max_gpus_had = gpus;
}

int gpus_of(const struct world *w, size_t j)
{
	int s = 0;
	for (int k = 0; k < w->c.num_nodes; k++)
		s += w->rows[j * w->c.num_nodes + k];
	return s;
}

/* Job j's last decision becomes its allocation. */
void adopt_decision(struct world *w, size_t j)
{
	copus_job *jb = &w->jobs[j];
	int N = w->c.num_nodes;

	jb->alloc_slots = 0;
	for (int k = 0; k < N; k++)
		if (w->rows[j * N + k] > 0)
			run_alloc(w, j, k, w->rows[j * N + k]);
	jb->alloc_type = w->types[j] < 0 ? 0 : w->types[j];
}

/* One round of the copus policy; its decisions as rows, types, reasons. */
void decide_with(struct world *w, double now,
			const copus_policy_params *prm)
{
	copus_decision d[MAXJ];
	copus_policy *p = NULL;

	memset(w->rows, 0, sizeof(w->rows));
	for (size_t j = 0; j < MAXJ; j++)
		w->types[j] = -1;
	memset(w->reasons, 0, sizeof(w->reasons));
	ASSERT_STATUS(copus_policy_create("copus", prm, &p), COPUS_OK);
	ASSERT_STATUS(copus_policy_decide(p, &w->c, w->jobs, w->n, now, d),
		      COPUS_OK);
	for (size_t j = 0; j < w->n; j++) {
		for (int i = 0; i < d[j].num_slots; i++)
			w->rows[j * w->c.num_nodes + d[j].slots[i].node] =
				d[j].slots[i].gpus;
		w->types[j] = d[j].gpu_type;
		memcpy(w->reasons[j], d[j].reason, sizeof(w->reasons[j]));
	}
	copus_policy_destroy(p);
}

void decide(struct world *w, double now)
{
	decide_with(w, now, &PRM);
}
