/*
 * The working data of a copus round: each job's (struct jw), the greedy's
 * (struct greedy_ctx), the speedup tables kept between rounds (struct
 * copus_state), and the functions over them that the files of the copus
 * policy share (core/policy/copus.c, the round; copus-value.c, what a cell
 * is worth to a job; copus-greedy.c, the cells chosen; copus-place.c, the
 * GPUs that carry them). Private to them.
 */
#ifndef COPUS_CORE_POLICY_COPUS_WORK_H
#define COPUS_CORE_POLICY_COPUS_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <copus/model.h>
#include <copus/policy.h>

#include "copus.h"
#include "ops.h"
#include "place.h"


/*
 * Across GPU types, S_j counts in GPUs of the job's fastest type: its
 * speedup table on type t (in GPUs of t) is scaled by its goodput on one
 * GPU of t over that on one GPU of its fastest type. A slower GPU is worth
 * less to a job, and worth least to the jobs it slows down most, so the
 * greedy sends each job where its GPUs count for the most.
 */

/* A job's memoised speedup on one GPU type. */
struct sp_entry {
	uint64_t id;
	int type;
	int node_gpus, max_gpus;
	copus_model model;
	copus_speedup *sp;
	double g1; /* goodput on one GPU of this type */
	bool used;
};

struct copus_state {
	struct copus__copus_opts opt;
	struct sp_entry *e;
	size_t n, cap;
	/*
	 * Where the entry of each (id, type) is, so that finding it costs the
	 * same for a job seen before and a new one (a scan of the entries
	 * would make a round of n new jobs, the first after a start, cost
	 * n^2): open addressing, e's index + 1 (0: empty), nslots a power of
	 * two at least twice n.
	 */
	size_t *slot;
	size_t nslots;
	/* The jobs' working data of the last round, kept for the next
	 * (copus.c, jobs_work): w_cap entries, and their arrays by GPU
	 * type (struct jw's sp and rel), wt_cap entries each. */
	struct jw *w;
	size_t w_cap;
	copus_speedup **w_sp;
	double *w_rel;
	size_t wt_cap;
};

/* Per-job working data of one round. */
struct jw {
	const copus_job *job;
	/*
	 * By GPU type t, for the cluster's T types (arrays of T entries
	 * that copus__cp_bind_types gives each job, so that a job's data
	 * does not grow with COPUS_MAX_GPU_TYPES): its speedup table
	 * (NULL: no model), and one GPU of type t against one of the job's
	 * fastest type.
	 */
	copus_speedup **sp;
	double *rel;
	/*
	 * A job with a table of cells (copus_job.cells): its speedup on k
	 * GPUs of type t is cs[t * (cs_kmax + 1) + k], 0 where no cell fits;
	 * bit t of has_cells when some cell of type t does. NULL otherwise.
	 */
	double *cs;
	int cs_kmax;
	uint32_t has_cells;
	double R;      /* remaining work, base-GPU-seconds */
	double boost;  /* fairness weight */
	double ftf;    /* estimated finish-time fairness */
	double remain; /* remaining seconds on the request (estimated) */
	double weight; /* SRPT weight up to the request */
	double life;   /* Pollux's factor: its life's share left to work */
	int q;         /* the request within the elastic bounds */
	int cur_t, cur_k;
	int t, k;      /* the greedy's choice */
	int best_t, best_k; /* the best start's choice */
	bool bad_model; /* a model was given but is not usable */
	/* The exponent its speedups count with (core/policy/copus.c,
	 * "Scarcity"): 1, or less while the requests exceed the cluster
	 * more than twofold (jobs without cells). */
	double spread;
	int base; /* copus__cp_base_need */
};

struct heap_item {
	double score;
	size_t j;
};

struct greedy_ctx {
	struct jw *w;
	size_t n;
	struct heap_item *heap;
	const int *node_gpus;
	int T;
	const copus_policy_params *prm;
	const struct copus__copus_opts *o;
	struct copus__placer *pl; /* scratch of place_job */
	/* The free GPUs indexed for the equal placement (copus-place.c),
	 * or NULL (the nodes are scanned). */
	struct copus__free_index *ix_free, *ix_avail;
};

struct victim {
	double ratio; /* value lost per GPU freed */
	size_t i;
	int k;        /* the size it shrinks to (0: queued) */
	int freed;
};

/* What a cell is worth to a job (copus-value.c). */

/* The smallest size job x runs at (its fixed size without a model), set
 * when its request is final (copus__cp_prepare_jobs): the greedy's order
 * and its slack ask for it at every step. */
static inline int copus__cp_base_need(const struct jw *x)
{
	return x->base;
}

bool copus__cp_cell_allowed(const struct jw *x, int t, int k,
		const int *node_gpus, const struct copus__copus_opts *o);
bool copus__cp_size_tiles(const struct jw *x, int t, int k,
		const int *node_gpus);
void copus__cp_cluster_caps(const copus_cluster *c, int *node_gpus, int *cap);
int copus__cp_growth_cap(const copus_job *j);
void copus__cp_bind_types(struct jw *w, size_t n, int T, copus_speedup **sp,
		double *rel);
bool copus__cp_known(const struct jw *w, int t);
int copus__cp_only_type(const struct jw *x, int T, const int *node_gpus);
int copus__cp_prepare_jobs(struct copus_state *s,
		const copus_policy_params *prm, const copus_cluster *c,
		const copus_job *jobs, size_t n, double now,
		const int *node_gpus, const int *cap, struct jw *w);
void copus__cp_release_jobs(struct jw *w, size_t n);
int copus__cp_request(const copus_job *j);
double copus__cp_restart_factor(const struct jw *w, double s,
		const copus_policy_params *prm,
		const struct copus__copus_opts *o);
void copus__cp_sp_sweep(struct copus_state *s);
double copus__cp_speedup(const struct jw *w, int t, int k,
		const int *node_gpus);
double copus__cp_value(const struct jw *w, int t, int k, const int *node_gpus,
		const copus_policy_params *prm,
		const struct copus__copus_opts *o);
double copus__cp_value_bound(const struct jw *w, int t, int k,
		const int *node_gpus, const copus_policy_params *prm);

/* The cells chosen (copus-greedy.c). */

void copus__cp_exact_dp(struct greedy_ctx *g, const int *total);
double copus__cp_greedy(struct greedy_ctx *g, int start, size_t *idx, int *cap,
		int *slack);
double copus__cp_improve(struct greedy_ctx *g, size_t *idx, int *cap,
		int *slack);
bool copus__cp_migrate(struct greedy_ctx *g, size_t *idx, int *cap, int *slack);
void copus__cp_take_cell(struct jw *x, int t, int k, int T,
		const int *node_gpus, int *cap, int *slack);

/* The GPUs that carry them (copus-place.c). */

int copus__cp_fill_idle(struct greedy_ctx *g, const copus_cluster *c,
		const copus_job *jobs, struct copus__result *res,
		int *free_gpus, int *dist, int *row);
int copus__cp_place_all(struct greedy_ctx *g, const copus_cluster *c,
		const copus_job *jobs, struct copus__result *res,
		int *free_gpus, int *dist, int *row, size_t *idx);

#endif /* COPUS_CORE_POLICY_COPUS_WORK_H */
