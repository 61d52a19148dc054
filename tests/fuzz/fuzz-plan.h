/*
 * What the fuzz targets of copus-plan's readers (sim/plan-data.h) share: a
 * small, valid planner directory written once into the scratch directory
 * and loaded, for the targets that fuzz a file read against it, and the
 * invariants of loaded planner data. Reader: whoever adds such a target.
 */
#ifndef COPUS_FUZZ_PLAN_H
#define COPUS_FUZZ_PLAN_H

#include <math.h>

#include "plan-data.h"
#include "sim.h"

#include "fuzz.h"

/* comm.csv: two sizes of every collective within a node and across. */
static inline void fuzz_plan_write_comm(const char *path)
{
	static const char *const colls[] = { "all-reduce", "all-gather",
					     "reduce-scatter", "all-to-all",
					     "send" };
	char text[4096];
	size_t n;

	n = (size_t)snprintf(text, sizeof(text),
			     "cell,collective,groups,elements,dtype,seconds\n");
	for (int c = 0; c < 5; c++)
		for (int e = 1; e <= 2; e++)
			n += (size_t)snprintf(text + n, sizeof(text) - n,
					      "2_a40_2_n_2_d,%s,\"[[0,1],[2,3]]\","
					      "%d,float32,%g\n2_a40_2_n_2_d,%s,"
					      "\"[[0,2],[1,3]]\",%d,float32,%g\n",
					      colls[c], e * 1024,
					      1e-5 * e, colls[c], e * 1024,
					      3e-5 * e);
	FUZZ_CHECK(n < sizeof(text));
	fuzz_write_file(path, (const uint8_t *)text, n);
}

/* The planner data every input of a file target is read against. */
static inline const struct plan_data *fuzz_plan_fixture(void)
{
	/* Two models of the families that take different fields. */
	static const char models[] =
		"family,size,dtype,num_layers,hidden_size,num_heads,seq_len,"
		"vocab_size,num_experts,expert_group_size,layer_num,"
		"width_factor,num_channels,num_classes,image_size\n"
		"bert,1B,float16,4,256,4,128,1000,,,,,,,\n"
		"wide_resnet,1B,float32,,,,,,,,50,2,3,10,32\n";
	static const char devices[] =
		"[{\"gpu_type\": \"a40\", \"peak_gflops_per_second\": 19200,"
		" \"total_gpu_mem_size_mb\": 45487}]\n";
	static struct plan_data d;
	static int loaded;
	char dir[512], path[600], err[SIM_ERR_LEN] = "";

	if (loaded)
		return &d;
	snprintf(dir, sizeof(dir), "%s/planner", fuzz_scratch());
	FUZZ_CHECK(mkdir(dir, 0700) == 0);
	snprintf(path, sizeof(path), "%s/models.csv", dir);
	fuzz_write_file(path, (const uint8_t *)models,
			sizeof(models) - 1);
	snprintf(path, sizeof(path), "%s/devices.json", dir);
	fuzz_write_file(path, (const uint8_t *)devices,
			sizeof(devices) - 1);
	snprintf(path, sizeof(path), "%s/comm.csv", dir);
	fuzz_plan_write_comm(path);
	if (plan_data_load(dir, &d, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "fixture: %s\n", err);
		abort();
	}
	loaded = 1;
	return &d;
}

/* A NUL-terminated name of 1 to len - 1 characters. */
#define FUZZ_NAME_OK(s)                                                       \
	FUZZ_CHECK(strnlen((s), sizeof(s)) >= 1 &&                            \
		   strnlen((s), sizeof(s)) < sizeof(s))

/* Whether name is the one spelling of a cell of type gpu. */
static inline int fuzz_plan_canonical(const struct plan_data *d, int gpu,
				      const copus_planner_cell *cell,
				      const char *name)
{
	char canon[PLAN_NAME_LEN];

	snprintf(canon, sizeof(canon), "%d_%s_%d_n_%d_d", cell->nodes,
		 d->gpus[gpu].type, cell->nodes, cell->gpus_per_node);
	return strcmp(canon, name) == 0;
}

/* A row of a measurement or query file that d accepted. */
static inline void fuzz_plan_check_row(const struct plan_data *d,
				const struct plan_row *r)
{
	FUZZ_CHECK(r->model >= 0 && r->model < d->n_models);
	FUZZ_CHECK(r->gpu >= 0 && r->gpu < d->n_gpus);
	FUZZ_CHECK(r->batch >= 1);
	FUZZ_CHECK(r->cell.nodes >= 1 && r->cell.gpus_per_node >= 1);
	FUZZ_NAME_OK(r->cell_name);
	FUZZ_CHECK(fuzz_plan_canonical(d, r->gpu, &r->cell, r->cell_name));
	FUZZ_CHECK(isfinite(r->seconds) &&
		   (r->seconds > 0 || r->seconds == -1 || r->seconds == 0));
}

/* Planner data as plan_data_load() leaves it. */
static inline void fuzz_plan_check_data(const struct plan_data *d)
{
	FUZZ_CHECK(d->n_models >= 0 && (d->n_models == 0 || d->models));
	for (int i = 0; i < d->n_models; i++) {
		const struct plan_model *m = &d->models[i];

		FUZZ_NAME_OK(m->name);
		FUZZ_CHECK(plan_model_find(d, m->name) == i);
		FUZZ_CHECK(m->model.layers == m->layers);
		FUZZ_CHECK(m->model.n_layers >= 1 &&
			   m->model.n_layers <= COPUS_PLANNER_MAX_LAYERS);
		FUZZ_CHECK(m->model.dtype_bytes == 2 ||
			   m->model.dtype_bytes == 4);
		FUZZ_CHECK(m->model.kind >= 0 &&
			   m->model.kind < COPUS_PLANNER_KINDS);
		for (int k = 0; k < m->model.n_layers; k++) {
			const copus_planner_layer *l = &m->layers[k];
			const double v[] = { l->flops, l->params,
					     l->expert_params, l->out_elems,
					     l->work_elems, l->tensor_elems,
					     l->a2a_elems };

			for (size_t j = 0; j < sizeof(v) / sizeof(*v); j++)
				FUZZ_CHECK(isfinite(v[j]) && v[j] >= 0);
		}
	}
	FUZZ_CHECK(d->n_gpus >= 1 && d->n_gpus <= PLAN_MAX_TYPES);
	for (int g = 0; g < d->n_gpus; g++) {
		const struct plan_gpu *p = &d->gpus[g];

		FUZZ_NAME_OK(p->type);
		FUZZ_CHECK(isfinite(p->gpu.peak_flops) &&
			   p->gpu.peak_flops > 0);
		FUZZ_CHECK(isfinite(p->gpu.memory_bytes) &&
			   p->gpu.memory_bytes > 0);
		for (int l = 0; l < COPUS_LINK_COUNT; l++)
			for (int c = 0; c < COPUS_COLL_COUNT; c++) {
				FUZZ_CHECK(isfinite(p->gpu.alpha[l][c]) &&
					   p->gpu.alpha[l][c] >= 0);
				FUZZ_CHECK(isfinite(p->gpu.inv_beta[l][c]) &&
					   p->gpu.inv_beta[l][c] >= 0);
			}
	}
}

#endif /* COPUS_FUZZ_PLAN_H */
