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

int copus_plan_coords_of_layout(const copus_plan_degrees *d, int data_inner,
				int rank, copus_plan_coords *out)
{
	if (d != NULL && data_inner && d->data > 0 && d->pipeline > 0 &&
	    d->tensor > 0 && rank >= 0) {
		int t = rank % d->tensor;
		int dr = (rank / d->tensor) % d->data;
		int p = rank / d->tensor / d->data;

		/* A rank beyond the world stays beyond it. */
		if (p >= d->pipeline)
			return COPUS_EINVAL;
		rank = (dr * d->pipeline + p) * d->tensor + t;
	}
	return copus_plan_coords_of_rank(d, rank, out);
}

/* The rank of the given coordinates in the layout data_inner names. */
static int rank_of_layout(const copus_plan_degrees *d, int data_inner,
			  int data_rank, int pipeline_rank, int tensor_rank)
{
	if (data_inner)
		return (pipeline_rank * d->data + data_rank) * d->tensor +
		       tensor_rank;
	return (data_rank * d->pipeline + pipeline_rank) * d->tensor +
	       tensor_rank;
}

int copus_plan_shrink(const copus_plan_degrees *d, int data_inner, int world,
		      const int *leaving, int n_leaving,
		      copus_plan_degrees *out, int *new_rank)
{
	copus_plan_degrees nd;
	copus_plan_coords at;
	char *gone = NULL;    /* per old rank: 1 when it leaves */
	int *kept = NULL;     /* per old data rank: its new one, or -1 */
	int shard, rc = COPUS_OK;

	if (d == NULL || out == NULL || new_rank == NULL || n_leaving < 0 ||
	    (n_leaving > 0 && leaving == NULL) || world < 1 ||
	    d->data < 1 || d->pipeline < 1 || d->tensor < 1 ||
	    (long long)d->pipeline * d->tensor > world ||
	    (long long)d->data * (d->pipeline * d->tensor) != world)
		return COPUS_EINVAL;
	for (int i = 0; i < n_leaving; i++)
		if (leaving[i] < 0 || leaving[i] >= world)
			return COPUS_EINVAL;
	gone = calloc((size_t)world, 1);
	kept = malloc(sizeof(int) * (size_t)d->data);
	if (gone == NULL || kept == NULL) {
		rc = COPUS_ENOMEM;
		goto done;
	}
	for (int i = 0; i < n_leaving; i++)
		gone[leaving[i]] = 1;
	/*
	 * A replica goes when all of its shard's ranks leave, stays when none
	 * does; anything between cuts it. Its ranks are those of one data
	 * rank, whatever the layout.
	 */
	shard = d->pipeline * d->tensor;
	nd = *d;
	nd.data = 0;
	for (int dr = 0; dr < d->data; dr++) {
		int n_gone = 0;

		for (int p = 0; p < d->pipeline; p++)
			for (int t = 0; t < d->tensor; t++)
				n_gone += gone[rank_of_layout(d, data_inner,
							      dr, p, t)];
		if (n_gone != 0 && n_gone != shard) {
			rc = COPUS_ERANGE;
			goto done;
		}
		kept[dr] = n_gone == 0 ? nd.data++ : -1;
	}
	if (nd.data == 0) {
		rc = COPUS_ERANGE;
		goto done;
	}
	for (int r = 0; r < world; r++) {
		copus_plan_coords_of_layout(d, data_inner, r, &at);
		new_rank[r] = kept[at.data_rank] < 0 ? -1 :
			rank_of_layout(&nd, data_inner, kept[at.data_rank],
				       at.pipeline_rank, at.tensor_rank);
	}
	*out = nd;
done:
	free(gone);
	free(kept);
	return rc;
}

int copus_plan_ranks_of_nodes(int world, int ranks_per_node, const int *nodes,
			      int n_nodes, int *ranks)
{
	int n_all;

	if (world < 1 || ranks_per_node < 1 || world % ranks_per_node != 0 ||
	    n_nodes < 0 || (n_nodes > 0 && (nodes == NULL || ranks == NULL)))
		return COPUS_EINVAL;
	n_all = world / ranks_per_node;
	for (int i = 0; i < n_nodes; i++) {
		if (nodes[i] < 0 || nodes[i] >= n_all)
			return COPUS_EINVAL;
		for (int j = 0; j < i; j++)
			if (nodes[j] == nodes[i])
				return COPUS_EINVAL;
	}
	for (int i = 0; i < n_nodes; i++)
		for (int k = 0; k < ranks_per_node; k++)
			ranks[i * ranks_per_node + k] =
				nodes[i] * ranks_per_node + k;
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
