/*
 * copus core: the parallel plan of a job, the layout of its ranks and the
 * layers of its pipeline stages.
 * Reader: contributors; the policy and the runtime.
 *
 * A job of world ranks (one process per GPU) runs with three degrees of
 * parallelism whose product is world: tensor (each layer's matrices split
 * over ranks), pipeline (contiguous layers in stages) and data (replicas of
 * the whole model). Ranks are laid out with the tensor rank fastest, then
 * the pipeline rank, then the data rank:
 *
 *   rank = (data_rank * pipeline + pipeline_rank) * tensor + tensor_rank
 *
 * so the ranks of a tensor group, which communicate most, are neighbours
 * (on one node when the launcher places consecutive ranks together, as
 * Slurm's default block distribution does).
 *
 * Units: degrees, ranks and group numbers count processes; layers are
 * numbered from 0 in the order the model runs them; a layer cost is in any
 * unit the caller keeps consistent (seconds, FLOPs), since only sums and
 * comparisons of costs are taken.
 *
 * The functions are pure: no I/O, no global state, and the same answer on
 * every rank for the same arguments. Every function checks its arguments and
 * returns COPUS_OK or a negative copus_status.
 */
#ifndef COPUS_PLAN_H
#define COPUS_PLAN_H

#include <copus/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The degrees of parallelism: world = data x pipeline x tensor ranks. */
typedef struct copus_plan_degrees {
	int data;     /* replicas of the model */
	int pipeline; /* stages of contiguous layers */
	int tensor;   /* ranks that share each layer */
} copus_plan_degrees;

/* Where one rank stands in the plan. */
typedef struct copus_plan_coords {
	/* Its coordinates: 0 <= data_rank < data, and so on. */
	int data_rank;
	int pipeline_rank;
	int tensor_rank;
	/*
	 * The groups it communicates in, numbered from 0 within each kind (the
	 * colour that ncclCommSplit and MPI_Comm_split take); inside its group
	 * a rank's position is the matching coordinate above. A data group
	 * holds the ranks of equal pipeline and tensor rank (they all-reduce
	 * gradients), a pipeline group those of equal data and tensor rank
	 * (they pass activations between stages), a tensor group those of
	 * equal data and pipeline rank.
	 */
	int data_group;     /* 0 .. pipeline x tensor - 1 */
	int pipeline_group; /* 0 .. data x tensor - 1 */
	int tensor_group;   /* 0 .. data x pipeline - 1 */
} copus_plan_coords;

/*
 * The degrees of world ranks with the given pipeline and tensor degrees: the
 * data degree is what remains. COPUS_EINVAL when a value is below 1, out is
 * NULL, or world is not a multiple of pipeline x tensor.
 */
int copus_plan_degrees_of_world(int world, int pipeline, int tensor,
				copus_plan_degrees *out);

/* The coordinates and groups of rank, 0 <= rank < data x pipeline x tensor. */
int copus_plan_coords_of_rank(const copus_plan_degrees *d, int rank,
			      copus_plan_coords *out);

/*
 * The coordinates and groups of rank in one of the two layouts of ranks:
 * data_inner 0 is the layout above; data_inner 1 is the planner's layout
 * with the data ranks inside the pipeline ranks (copus/planner.h),
 *
 *   rank = (pipeline_rank * data + data_rank) * tensor + tensor_rank.
 *
 * Under either layout a rank gets the coordinates, and the group numbers,
 * of the rank of the layout above with the same coordinates, so that a
 * group's number does not depend on the layout.
 */
int copus_plan_coords_of_layout(const copus_plan_degrees *d, int data_inner,
				int rank, copus_plan_coords *out);

/*
 * The plan left when some ranks leave a running job and the others go on
 * without a restart (see copus_comms_shrink() in copus/copus.h).
 *
 * The job runs world = d->data x d->pipeline x d->tensor ranks laid out as
 * data_inner says (as in copus_plan_coords_of_layout()); leaving[] names
 * n_leaving of its ranks (a set: order and repeats do not matter). The
 * ranks that stay still form a plan only when the leaving ranks are whole
 * data-parallel replicas (every rank of some data ranks, at every pipeline
 * and tensor rank): the others then hold every shard of the model. The new
 * plan keeps the tensor and pipeline degrees and the layout and has one
 * data rank fewer per replica gone; the replicas that stay keep their order.
 *
 * On success *out holds the new degrees and new_rank[r] (world entries) the
 * new rank of old rank r, -1 for a leaving rank. The new ranks are laid out
 * as a plan of the new degrees (same data_inner), so that a rank keeps its
 * tensor and pipeline coordinates (its shard) and only its data coordinate
 * closes the gaps. They are also the old ranks renumbered in order, with the
 * leaving ones taken out: what ncclCommShrink() gives the ranks of the world
 * communicator. No leaving ranks leave the plan as it is.
 *
 * The batch: each replica ran global_batch / d->data samples a step. With
 * out->data replicas, keeping each replica's micro-batch and accumulation
 * steps runs global_batch x out->data / d->data; keeping the global batch
 * (the optimizer's and learning rate's) takes global_batch / out->data per
 * replica, so the caller re-divides it: more accumulation steps, or a
 * larger micro-batch where memory allows. copus_plan_get() plans the batch
 * for the world libcopus was initialised with: after a shrink, take the plan
 * of a context initialised for the new world.
 *
 * COPUS_ERANGE (nothing written) when a leaving rank's replica has ranks
 * that stay (the leaving ranks cut a replica) or when no replica would be
 * left; COPUS_EINVAL for a degree below 1, a world that is not their
 * product, a rank outside the world, or a NULL pointer; COPUS_ENOMEM.
 */
int copus_plan_shrink(const copus_plan_degrees *d, int data_inner, int world,
		      const int *leaving, int n_leaving,
		      copus_plan_degrees *out, int *new_rank);

/*
 * The ranks on nodes that leave a job of world ranks with ranks_per_node
 * ranks on each node, consecutive ranks together as Slurm's default block
 * distribution places them: node k holds the ranks k x ranks_per_node ..
 * (k + 1) x ranks_per_node - 1. ranks[] gets n_nodes x ranks_per_node
 * entries, node by node in the order of nodes[]: the leaving[] of
 * copus_plan_shrink(). COPUS_EINVAL when world is not a multiple of
 * ranks_per_node, a node is outside 0 .. world / ranks_per_node - 1 or
 * named twice, n_nodes < 0, or a pointer is NULL (nodes may be NULL when
 * n_nodes is 0).
 */
int copus_plan_ranks_of_nodes(int world, int ranks_per_node, const int *nodes,
			      int n_nodes, int *ranks);

/*
 * Contiguous layers into stages so that the largest stage cost is least
 * (the linear partition problem, solved exactly by dynamic programming over
 * prefix sums: O(stages x n_layers^2) time, O(stages x n_layers) memory).
 * Stage s holds the layers first_layer[s] .. first_layer[s + 1] - 1;
 * first_layer has stages + 1 entries, from 0 to n_layers. Every stage holds
 * at least one layer. With more stages than layers the split is
 * copus_plan_stage_even()'s. layer_costs are finite and >= 0 (NULL when
 * n_layers is 0). COPUS_ENOMEM when the tables do not fit in memory.
 */
int copus_plan_stages(const double *layer_costs, int n_layers, int stages,
		      int *first_layer);

/*
 * The layers of one stage when n_layers layers are split into stages by
 * count alone, as for layers of equal cost: the first n_layers % stages
 * stages hold one layer more than the others. With more stages than layers
 * the last stages hold none (*n_stage_layers 0, *first_layer n_layers).
 */
int copus_plan_stage_even(int n_layers, int stages, int stage,
			  int *first_layer, int *n_stage_layers);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_PLAN_H */
