/* The parallel plan: degrees, the layout of ranks, pipeline stages. */
#include <math.h>
#include <stdlib.h>

#include <copus/plan.h>

int copus_plan_degrees_of_world(int world, int pipeline, int tensor,
				copus_plan_degrees *out)
{
	if (out == NULL || world < 1 || pipeline < 1 || tensor < 1)
		return COPUS_EINVAL;
	/* pipeline x tensor is not formed before it is known to fit an int. */
	if (pipeline > world || tensor > world / pipeline ||
	    world % (pipeline * tensor) != 0)
		return COPUS_EINVAL;
	out->data = world / (pipeline * tensor);
	out->pipeline = pipeline;
	out->tensor = tensor;
	return COPUS_OK;
}

int copus_plan_coords_of_rank(const copus_plan_degrees *d, int rank,
			      copus_plan_coords *out)
{
	int tp, pp;

	if (d == NULL || out == NULL || d->data < 1 || d->pipeline < 1 ||
	    d->tensor < 1 || rank < 0 ||
	    rank / d->tensor / d->pipeline >= d->data)
		return COPUS_EINVAL;
	tp = d->tensor;
	pp = d->pipeline;
	out->tensor_rank = rank % tp;
	out->pipeline_rank = (rank / tp) % pp;
	out->data_rank = rank / tp / pp;
	out->data_group = out->pipeline_rank * tp + out->tensor_rank;
	out->pipeline_group = out->data_rank * tp + out->tensor_rank;
	out->tensor_group = rank / tp;
	return COPUS_OK;
}

int copus_plan_stage_even(int n_layers, int stages, int stage,
			  int *first_layer, int *n_stage_layers)
{
	int base, extra;

	if (n_layers < 0 || stages < 1 || stage < 0 || stage >= stages ||
	    first_layer == NULL || n_stage_layers == NULL)
		return COPUS_EINVAL;
	base = n_layers / stages;
	extra = n_layers % stages;
	*first_layer = stage * base + (stage < extra ? stage : extra);
	*n_stage_layers = base + (stage < extra ? 1 : 0);
	return COPUS_OK;
}

int copus_plan_stages(const double *layer_costs, int n_layers, int stages,
		      int *first_layer)
{
	double *pre, *best;
	int *cut, end, n = n_layers;

	if (n_layers < 0 || stages < 1 || first_layer == NULL ||
	    (n_layers > 0 && layer_costs == NULL))
		return COPUS_EINVAL;
	for (int i = 0; i < n; i++)
		if (!isfinite(layer_costs[i]) || layer_costs[i] < 0)
			return COPUS_EINVAL;
	if (stages > n) {
		int count;

		for (int s = 0; s < stages; s++)
			copus_plan_stage_even(n, stages, s, &first_layer[s],
					      &count);
		first_layer[stages] = n;
		return COPUS_OK;
	}
	/*
	 * best(i, s): the least largest stage cost of the first i layers in s
	 * stages; cut(i, s): where its last stage starts.
	 */
	pre = calloc((size_t)n + 1, sizeof(double));
	best = calloc((size_t)(n + 1) * (size_t)(stages + 1), sizeof(double));
	cut = calloc((size_t)(n + 1) * (size_t)(stages + 1), sizeof(int));
	if (pre == NULL || best == NULL || cut == NULL) {
		free(pre);
		free(best);
		free(cut);
		return COPUS_ENOMEM;
	}
	for (int i = 0; i < n; i++)
		pre[i + 1] = pre[i] + layer_costs[i];
#define B(i, s) best[(size_t)(i) * (size_t)(stages + 1) + (size_t)(s)]
#define C(i, s) cut[(size_t)(i) * (size_t)(stages + 1) + (size_t)(s)]
	for (int i = 0; i <= n; i++)
		for (int s = 0; s <= stages; s++)
			B(i, s) = INFINITY;
	B(0, 0) = 0;
	for (int s = 1; s <= stages; s++) {
		for (int i = s; i <= n; i++) {
			for (int j = s - 1; j < i; j++) {
				double v = fmax(B(j, s - 1), pre[i] - pre[j]);
				if (v < B(i, s)) {
					B(i, s) = v;
					C(i, s) = j;
				}
			}
		}
	}
	/* Walk the cuts back from the last stage. */
	end = n;
	first_layer[stages] = n;
	for (int s = stages; s >= 1; s--) {
		end = C(end, s);
		first_layer[s - 1] = end;
	}
#undef B
#undef C
	free(pre);
	free(best);
	free(cut);
	return COPUS_OK;
}
