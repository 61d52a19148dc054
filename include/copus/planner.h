/*
 * copus core: the planner, which finds the parallel plan of least iteration
 * time for a model, a total batch and a cell of GPUs.
 * Reader: the policy and the simulator, which ask it for every job and cell;
 * copus-plan, which calibrates it; contributors.
 *
 * A model is a list of layers in the order it runs them, each described by
 * what costs time and memory: forward FLOPs, parameters, the activations it
 * passes on and holds, and the elements its tensor-parallel and expert
 * (all-to-all) exchanges move. copus_planner_layers() builds that list from
 * a compact description of the three architectures of the trace (a uniform
 * transformer, a mixture of experts, a Wide-ResNet); a runtime that has
 * timed its own layers may fill the list itself.
 *
 * A cell is nodes x GPUs per node of one GPU type. The planner tries every
 * data x tensor x pipeline split of the cell's GPUs (ranks laid out with the
 * tensor rank fastest, as in copus/plan.h, so that a tensor group stays on
 * one node whenever it can), either order of the data and pipeline ranks,
 * and powers of two of micro-batches; splits the layers into stages with a
 * dynamic program over layers (copus_plan_stages, then a memory-balanced
 * split when that one does not fit); rejects a plan whose fullest GPU
 * exceeds its memory; and prices the rest with the cost model below.
 *
 * Cost model (seconds per iteration), from first principles:
 *   compute   = remat x FLOPs / (tensor x efficiency[kind] x peak), with
 *               remat = 4 (forward, recomputed forward, backward twice the
 *               forward), plus the memory-bound time of the
 *               elementwise kernels (normalisation, activation
 *               functions, residual sums, softmax) that read and write
 *               the activations the layer holds: 7 passes of each
 *               element through memory (written and read forward, again
 *               when recomputed, and in the backward pass the
 *               activation and its gradient read and a gradient
 *               written), split over tensor ranks, at the device's
 *               memory bandwidth; plus a fixed time per layer, per
 *               micro-batch and stage;
 *   tensor    = the all-reduces of each layer's activations over its tensor
 *               group, and the expert all-to-alls over data x tensor ranks;
 *   pipeline  = the activations sent between stages, forward and backward;
 *               a pipeline of M micro-batches over stages of times t_s takes
 *               sum(t_s) + (M - 1) max(t_s) (GPipe and 1F1B alike);
 *   data      = the all-reduce of each stage's gradients over its data
 *               group, once per iteration;
 *   plus a time per parameter of the slowest stage's weights (the work on
 *   weights that does not shrink with the batch), counted on the stage's
 *   weights whole rather than on a tensor rank's share of them (expert
 *   weights split over data ranks, as each data rank's experts are
 *   distinct): the calibrated time per parameter is tens of times what
 *   an optimizer step's memory traffic takes, so what it prices is work
 *   that splitting the weights over tensor ranks does not divide, and
 *   iteration times measured on cells of 1 to 16 GPUs are predicted
 *   better so; and a fixed overhead per iteration.
 * A collective of b bytes over a group of n GPUs takes alpha + s f(n) h b /
 * beta, with s a calibrated scale of the type's measured bandwidths (one
 * within a node, one across nodes), f = 2(n - 1)/n for an all-reduce,
 * (n - 1)/n for all-gather, reduce-scatter and all-to-all, and 1 for a
 * send, and h the shape factor of the group (copus_planner_group); alpha
 * and 1/beta are kept per GPU type, collective and link (within a node or
 * across nodes). Within a node h = (n - 1)^e_peers: the GPUs of an NVLink
 * mesh reach each peer over its own links, so that a larger group moves
 * more bytes at once. Across nodes, groups that run at once share each
 * node's link: h = L^(1 + e_groups) m^e_ranks (k / 2)^e_nodes, with L the
 * groups of the collective's kind with ranks on one node over the node's
 * inter_links links (at least 1; 1 when the links are unknown), m the
 * group's ranks on one node and k the nodes it spans: a data all-reduce's
 * groups are the data groups, an expert all-to-all's the stages (data x
 * tensor ranks), a pipeline send's the ranks of one stage on a node, which
 * send at once to another node. 1/beta across nodes is the time per byte
 * of one group of one rank per node on two nodes alone on a link. The
 * exponents e are per GPU type, fitted on measured collectives of several
 * shapes (0: a fair share of the link and no other effect of the shape).
 *
 * Memory per GPU (bytes): 16 per parameter held (2-byte models: weights
 * and gradients in 2 bytes each, an fp32 master copy and Adam's two
 * moments; 4-byte models: weights, gradients and two moments), parameters
 * split over tensor ranks and expert parameters over data x tensor ranks;
 * weights and gradients are whole on each data rank and the optimizer's
 * state is split over the data ranks (as ZeRO's first stage does); plus,
 * per layer of the stage, its input for each micro-batch in flight
 * (min(M, stages - s) under 1F1B), plus the working activations of the
 * largest layer of one micro-batch, split over tensor ranks.
 *
 * The functions are pure: no I/O and no global state. A cache object that
 * the caller owns memoises answers. Every function returns COPUS_OK or a
 * negative copus_status; copus_planner_best() returns COPUS_ERANGE when no
 * plan fits the cell.
 */
#ifndef COPUS_PLANNER_H
#define COPUS_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include <copus/error.h>
#include <copus/plan.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most layers a model and the most stages a plan may have. */
#define COPUS_PLANNER_MAX_LAYERS 512
#define COPUS_PLANNER_MAX_STAGES 64

/* One layer: its costs per sample of the batch. */
typedef struct copus_planner_layer {
	double flops;         /* forward FLOPs */
	double params;        /* parameters, split over tensor ranks */
	double expert_params; /* parameters split over data x tensor ranks */
	double out_elems;     /* activation elements it passes on */
	double work_elems;    /* activation elements it holds while it runs */
	double tensor_elems;  /* elements all-reduced over the tensor group
			       * per forward pass (the backward pass moves
			       * as many) */
	double a2a_elems;     /* elements sent all-to-all over data x tensor
			       * ranks per forward pass */
	int tensor_divides;   /* a tensor degree must divide it (an attention
			       * layer's heads, the channels a convolution
			       * splits); 0: any degree */
} copus_planner_layer;

/* The architectures that copus_planner_layers() describes. */
typedef enum copus_planner_arch {
	COPUS_ARCH_TRANSFORMER = 1, /* BERT/GPT: attention and MLP layers */
	COPUS_ARCH_MOE,             /* GShard: every MLP is top-2 experts */
	COPUS_ARCH_WIDE_RESNET      /* bottleneck blocks, wide 3x3 convs */
} copus_planner_arch;

/* A compact description of one model; the fields of its architecture. */
typedef struct copus_planner_desc {
	copus_planner_arch arch;
	int dtype_bytes; /* 2 (float16) or 4 (float32) */
	/* Transformer and MoE. */
	int layers, hidden, heads, seq_len, vocab;
	/* MoE only: experts per layer, and the tokens of one routing group
	 * (GShard dispatches a group's tokens to expert slots of capacity
	 * 2 x group / experts with one-hot einsums). */
	int experts, expert_group;
	/* Wide-ResNet: depth 50 or 101, width factor of the 3x3 convs,
	 * channels of the first stage, classes, image side in pixels. */
	int depth, width_factor, channels, classes, image_size;
} copus_planner_desc;

/*
 * Efficiency classes: models whose kernels run at different shares of a
 * GPU's peak (matrix products, expert dispatch einsums, convolutions) keep
 * separate calibrated efficiencies. A described model's class is its
 * architecture - 1.
 */
#define COPUS_PLANNER_KINDS 4

/* A model as the planner sees it. */
typedef struct copus_planner_model {
	const copus_planner_layer *layers;
	int n_layers;
	int dtype_bytes;
	int kind; /* efficiency class, 0 .. COPUS_PLANNER_KINDS - 1 */
} copus_planner_model;

/*
 * The layers of a described model into out (max entries), their number in
 * *n. COPUS_EINVAL for a field out of range, COPUS_ERANGE when max is too
 * small.
 */
int copus_planner_layers(const copus_planner_desc *d,
			 copus_planner_layer *out, int max, int *n);

/* Total parameters of a model (dense and expert). */
double copus_planner_params(const copus_planner_model *m);

/* The collectives the cost model prices. */
typedef enum copus_collective {
	COPUS_COLL_ALL_REDUCE,
	COPUS_COLL_ALL_GATHER,
	COPUS_COLL_REDUCE_SCATTER,
	COPUS_COLL_ALL_TO_ALL,
	COPUS_COLL_SEND,
	COPUS_COLL_COUNT
} copus_collective;

/* Where a group's GPUs are: all on one node, or on several. */
typedef enum copus_link {
	COPUS_LINK_INTRA,
	COPUS_LINK_INTER,
	COPUS_LINK_COUNT
} copus_link;

/* The exponents of a group's shape factor (see above). */
typedef enum copus_planner_shape {
	COPUS_SHAPE_PEERS,           /* within a node: of ranks - 1 */
	COPUS_SHAPE_RANKS_PER_NODE,  /* across nodes: of its ranks on a node */
	COPUS_SHAPE_GROUPS_PER_NODE, /* across nodes: of the link's share,
				      * beyond a fair share */
	COPUS_SHAPE_NODES,           /* across nodes: of the nodes over 2 */
	COPUS_SHAPE_COUNT
} copus_planner_shape;

/* One GPU type: its device constants and its calibrated constants. */
typedef struct copus_planner_gpu {
	double peak_flops;   /* FLOP/s as listed for the device */
	double memory_bytes; /* usable memory of one GPU */
	/* Achieved FLOP/s over peak_flops, by efficiency class
	 * (calibrated). */
	double efficiency[COPUS_PLANNER_KINDS];
	/* Scale of the measured collective times per byte in training,
	 * within a node and across nodes (calibrated; 1 for the measured
	 * rates). */
	double comm_scale[COPUS_LINK_COUNT];
	double overhead_s; /* fixed time per iteration (calibrated) */
	/* Time per parameter of a stage's weights (whole over its tensor
	 * ranks), per iteration, by efficiency class: the work on weights
	 * that does not shrink with the batch (optimizer step, gradient
	 * accumulation, weight layouts; calibrated). */
	double param_s[COPUS_PLANNER_KINDS];
	/* Fixed time of one layer's forward and backward pass on one
	 * micro-batch (kernel launches, small kernels; calibrated). */
	double layer_s;
	/* Bytes per second of one GPU's memory, as listed for the device;
	 * 0 when unknown, which leaves the memory-bound time out. */
	double memory_bandwidth;
	/* Network links of a node, which the groups that span nodes share
	 * (1: one adapter for the node's GPUs; 8 for a server with an
	 * adapter per GPU); 0 when unknown, which leaves the sharing out. */
	double inter_links;
	/* Collective time alpha (s) + f(n) h bytes x inv_beta (s/byte). */
	double alpha[COPUS_LINK_COUNT][COPUS_COLL_COUNT];
	double inv_beta[COPUS_LINK_COUNT][COPUS_COLL_COUNT];
	/* Exponents of the shape factor h of a group (see above), by
	 * copus_planner_shape; 0 when the shape is unmeasured. */
	double shape_exp[COPUS_SHAPE_COUNT];
} copus_planner_gpu;

/*
 * The shape of the group of one collective: its ranks, the nodes they
 * span, its ranks on one node, and the groups of its kind (itself
 * included) that run at once with ranks on that node.
 */
typedef struct copus_planner_group {
	int ranks, nodes, ranks_per_node, groups_per_node;
} copus_planner_group;

/*
 * Seconds of collective c over group grp of a GPU type g, bytes per rank
 * as the cost model counts them (the message of an all-reduce, each rank's
 * whole buffer of an all-gather): alpha + s f(n) h bytes inv_beta, 0 for a
 * group of one rank or no bytes. The link is within a node when the group
 * spans one node. The arguments are not checked: g as
 * copus_planner_best() takes it, grp with 1 <= ranks_per_node <= ranks,
 * nodes >= 1 and groups_per_node >= 1.
 */
double copus_planner_collective(const copus_planner_gpu *g,
				copus_collective c,
				const copus_planner_group *grp, double bytes);

/* A cell: nodes x GPUs per node of one type. */
typedef struct copus_planner_cell {
	int nodes;
	int gpus_per_node;
} copus_planner_cell;

/* Choices of the search. */
typedef struct copus_planner_options {
	int max_micro_batches; /* powers of two up to this */
	/* Share of memory_bytes a plan may use; the rest is left to the
	 * CUDA context, the allocator's fragmentation and workspaces. */
	double memory_fraction;
} copus_planner_options;

#define COPUS_PLANNER_OPTIONS_INITIALIZER { 16, 0.9 }

/* A plan and its predicted time. */
typedef struct copus_planner_plan {
	copus_plan_degrees degrees;
	int micro_batches;
	/* 1 when data ranks are laid out inside pipeline ranks (rank =
	 * (pipeline_rank x data + data_rank) x tensor + tensor_rank), 0 for
	 * copus/plan.h's order. */
	int data_inner;
	/* Stage s holds layers first_layer[s] .. first_layer[s + 1] - 1. */
	int first_layer[COPUS_PLANNER_MAX_STAGES + 1];
	double seconds; /* per iteration, the sum of the five below */
	/* compute_s includes the time per parameter; overhead_s is
	 * the fixed time per iteration. */
	double compute_s, tensor_s, pipeline_s, data_s, overhead_s;
	double memory_bytes; /* on the fullest GPU */
} copus_planner_plan;

/*
 * The best plan for a model at a total batch on a cell of one GPU type
 * (opt NULL for the defaults). COPUS_ERANGE when no plan fits the cell's
 * memory (or the batch cannot be split over any data degree), COPUS_EINVAL
 * for an argument out of range.
 */
int copus_planner_best(const copus_planner_model *m, int batch,
		       const copus_planner_gpu *gpu,
		       const copus_planner_cell *cell,
		       const copus_planner_options *opt,
		       copus_planner_plan *out);

/*
 * The time of one given plan: degrees, micro_batches, data_inner and
 * first_layer of *plan are read, its times and memory are written.
 * COPUS_ERANGE when it does not fit, COPUS_EINVAL when it is not a plan of
 * the cell.
 */
int copus_planner_price(const copus_planner_model *m, int batch,
			const copus_planner_gpu *gpu,
			const copus_planner_cell *cell,
			const copus_planner_options *opt,
			copus_planner_plan *plan);

/*
 * Memoisation of copus_planner_best(). The caller keys each answer by
 * small integers it chooses (a model id, the batch, a GPU type index, the
 * cell's shape). A key it does not hold is then looked for by what the
 * answer is computed from (the model's layers, the batch, the GPU's
 * constants, the options, the cell), so that jobs of one model under
 * different keys share their plans; a key it holds is answered without
 * looking inside, so a caller that changes a GPU's constants under the
 * same key clears the cache.
 */
typedef struct copus_planner_cache copus_planner_cache;

typedef struct copus_planner_key {
	int32_t model, batch, gpu, nodes, gpus_per_node;
} copus_planner_key;

/* A cache of capacity answers at most (it stops storing when full). */
int copus_planner_cache_new(size_t capacity, copus_planner_cache **out);
void copus_planner_cache_free(copus_planner_cache *c);
void copus_planner_cache_clear(copus_planner_cache *c);

/*
 * The stored answer for key: COPUS_OK with *plan pointing into the cache,
 * COPUS_ERANGE when the stored answer is "no plan fits", COPUS_ENODATA when
 * nothing is stored.
 */
int copus_planner_cache_find(const copus_planner_cache *c,
			     const copus_planner_key *key,
			     const copus_planner_plan **plan);

/*
 * copus_planner_best() through the cache: the stored answer when there is
 * one, else computed and stored. Returns as copus_planner_best(). When the
 * cache is full a new answer is not stored and *plan lasts until the next
 * call on the cache.
 */
int copus_planner_best_cached(copus_planner_cache *c,
			      const copus_planner_key *key,
			      const copus_planner_model *m,
			      const copus_planner_gpu *gpu,
			      const copus_planner_options *opt,
			      const copus_planner_plan **plan);

/*
 * Calibration of the per-type constants (efficiency and time per
 * parameter by class, the scales of collective bandwidths, the time per
 * layer and the overhead per iteration) on measured iteration times: the times of samples[i] (model,
 * batch, cell of GPU type gpu_index) are fitted by least squares on the
 * logarithm of the ratio of predicted to measured time, with NLopt, for
 * each GPU type separately, except Wide-ResNet's efficiency: one share of
 * peak_flops for every type, fitted on that class's samples of all types
 * (between a fit of each type alone and a second fit of each type's other
 * constants with it held), so that a type with few Wide-ResNet samples
 * takes it from the others. Every type, with samples or not, receives the
 * shared efficiency; otherwise types without samples keep their
 * constants, and a class without samples of a type keeps its efficiency
 * and time per parameter. gpus is updated in place.
 */
typedef struct copus_planner_sample {
	const copus_planner_model *model;
	int batch;
	int gpu_index;
	copus_planner_cell cell;
	double seconds; /* measured */
} copus_planner_sample;

int copus_planner_calibrate(const copus_planner_sample *samples, size_t n,
			    copus_planner_gpu *gpus, int n_gpus,
			    const copus_planner_options *opt);

/*
 * GPU constants that the scheduler and a job share (core/planner-gpus.c),
 * so that both compute the same plan for the same model, batch and cell.
 *
 * Defaults: copus_planner_gpu_default() gives the constants of a GPU type
 * by its Slurm GRES type name (matched without regard to case: "a100",
 * "a100-80g", "h100", "h200", "v100", "v100-16g", "a40", "a30", "a10",
 * "l4", "l40s", "t4", "rtx3090", "rtx4090", "rtxa6000"; the table in
 * core/planner-gpus.c lists each with its figures). peak_flops is the
 * single-precision rate of the CUDA cores from the vendor's data sheet,
 * the convention of copus-plan's devices.json, so that the efficiencies
 * stay the planner's uncalibrated priors: 2 for the classes whose 2-byte
 * matrix products run on tensor cores (several times that peak), 0.5 for
 * Wide-ResNet's 4-byte convolutions. memory_bytes and memory_bandwidth
 * are the data sheet's memory and its bandwidth. Collectives take the
 * typical interconnect of the type's usual servers: a latency alpha and
 * a bus bandwidth (1 / inv_beta, the planner multiplies it by the
 * collective's factor f(n)) within a node (NVLink, or PCIe for PCIe
 * cards) and across nodes (the usual network adapter per GPU), the same
 * for every collective, and the network links of such a server
 * (inter_links). comm_scale is 1; overhead_s,
 * param_s and layer_s are 0. None of these is fitted to measured times:
 * calibrate with copus-plan for that.
 *
 * Calibrated constants travel as text (copus-plan calibrate writes it;
 * libcopus reads the file named by COPUS_PLANNER_GPUS): one JSON object
 *   {"version": 1, "gpus": {"<type>": {
 *      "peak_flops": F, "memory_bytes": B, "memory_bandwidth": W,
 *      "inter_links": L,
 *      "efficiency": [k0, k1, k2, k3], "param_s": [k0, k1, k2, k3],
 *      "comm_scale": {"intra": x, "inter": x},
 *      "overhead_s": x, "layer_s": x,
 *      "alpha": {"intra": C, "inter": C}, "inv_beta": {"intra": C,
 *      "inter": C},
 *      "shape": {"peers": x, "ranks_per_node": x, "groups_per_node": x,
 *      "nodes": x}}, ...}}
 * with C = {"all_reduce": x, "all_gather": x, "reduce_scatter": x,
 * "all_to_all": x, "send": x}, the arrays by efficiency class
 * (architecture - 1, then a reserved class). Every member is required
 * except memory_bandwidth, inter_links and shape, which a text written
 * before the planner had them leaves out (they read as 0: unknown, the
 * memory-bound time and the sharing of links left out; no shape effect
 * beyond the link's share; as that text's plans were priced), and no other
 * is allowed; numbers are
 * finite and within the bounds below (COPUS_PLANNER_GPU_*); a type name
 * is 1..COPUS_PLANNER_TYPE_LEN - 1 characters of [A-Za-z0-9_.-], listed
 * once. In place of its object, a type may name a type of the built-in
 * table whose default constants it takes ("dgx-ext": "a100"): a site's
 * own GRES type name for a GPU the table knows. The format writes each number
 * with the fewest digits (15 to 17) that read back as the same double, so
 * that parsing gives back the same constants and the same plans.
 */
#define COPUS_PLANNER_GPUS_VERSION 1
#define COPUS_PLANNER_TYPE_LEN 16
/* The most types a text may hold. */
#define COPUS_PLANNER_MAX_GPUS 64

/* Bounds of the text's numbers (what a device or a fit can say). */
#define COPUS_PLANNER_GPU_PEAK_MAX 1e18     /* FLOP/s */
#define COPUS_PLANNER_GPU_MEMORY_MAX 1e15   /* bytes */
#define COPUS_PLANNER_GPU_BANDWIDTH_MAX 1e15 /* bytes/s */
#define COPUS_PLANNER_GPU_LINKS_MAX 1024.0
#define COPUS_PLANNER_GPU_EFFICIENCY_MAX 1e3
#define COPUS_PLANNER_GPU_SCALE_MAX 1e3
#define COPUS_PLANNER_GPU_SECONDS_MAX 1e6   /* overhead, layer, alpha */
#define COPUS_PLANNER_GPU_PARAM_S_MAX 1.0   /* s per parameter */
#define COPUS_PLANNER_GPU_INV_BETA_MAX 1.0  /* s per byte */
#define COPUS_PLANNER_GPU_SHAPE_EXP_MAX 8.0 /* |exponent| */

/* A GPU type's name and constants. */
typedef struct copus_planner_gpu_type {
	char name[COPUS_PLANNER_TYPE_LEN];
	copus_planner_gpu gpu;
} copus_planner_gpu_type;

/*
 * The default constants of a GPU type into *out: COPUS_OK for a type of
 * the table, COPUS_ENODATA for another name (or NULL), with *out then
 * holding the generic constants (the a100's). COPUS_EINVAL when out is
 * NULL.
 */
int copus_planner_gpu_default(const char *type, copus_planner_gpu *out);

/*
 * Parse a text of calibrated constants into out (max entries), their
 * number in *n. COPUS_EPARSE for malformed text (err names the line, for
 * a JSON error) or a member that is unknown, missing, of the wrong type,
 * not finite or out of its bounds (err names the type, the member and the
 * value); COPUS_ERANGE when the text holds more than max types;
 * COPUS_EVERSION for another version; COPUS_EINVAL for NULL arguments.
 */
int copus_planner_gpus_parse(const char *text, copus_planner_gpu_type *out,
			     int max, int *n, char *err, size_t errlen);

/*
 * Write n types as that text (NUL-terminated) into buf of size bytes;
 * *len (may be NULL) receives the length the text needs, without the NUL.
 * COPUS_ERANGE when it does not fit in size - 1 bytes (buf then holds ""),
 * COPUS_EINVAL when a type or value would not parse back (err says which).
 */
int copus_planner_gpus_format(const copus_planner_gpu_type *gpus, int n,
			      char *buf, size_t size, size_t *len, char *err,
			      size_t errlen);

/*
 * The training speed of a GPU of these constants, as
 * copus_gpu_type_speed() (copus/model.h) reckons it for a type of the
 * built-in table: the geometric mean of peak_flops and memory_bandwidth;
 * 0 when either is unknown (0) or not finite.
 */
double copus_planner_gpu_speed(const copus_planner_gpu *g);

/*
 * The speed of a GPU type (copus_planner_gpu_speed) from the constants of
 * gpus (n of them, a text's) when they name it, else from the built-in
 * table's (copus_gpu_type_speed); 0 for a type neither knows.
 */
double copus_planner_gpus_speed(const copus_planner_gpu_type *gpus, int n,
				const char *type);

/* The entry of gpus named type (exact match), or NULL. */
const copus_planner_gpu_type *
copus_planner_gpus_find(const copus_planner_gpu_type *gpus, int n,
			const char *type);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_PLANNER_H */
