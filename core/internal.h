/* Functions shared inside the core library; not part of the public API. */
#ifndef COPUS_CORE_INTERNAL_H
#define COPUS_CORE_INTERNAL_H

#include <copus/model.h>

#define COPUS_PARAM_MIN 1e-8
#define COPUS_GAMMA_MIN 1.0
#define COPUS_GAMMA_MAX 10.0

#include <stdbool.h>
#include <stddef.h>

/* Writes a message into err (errlen bytes) when err is not NULL, for the
 * functions that explain a refusal (core/error.c). */
void copus__err_set(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

int copus__shape_check(int nodes, int replicas);
double copus__sync_time(const copus_perf_params *p, int nodes, int replicas);
double copus__overlap(double grad, double sync, double gamma);
double copus__gain(const copus_grad_stats *g, double scale);
double copus__goodput(const copus_model *m, int nodes, int replicas,
		      int local, int accum_steps, double *throughput,
		      double *efficiency);
int copus__best_batch(const copus_model *m, int nodes, int replicas,
		      copus_batch_plan *out);

/*
 * A speedup table (base: one GPU) that remembers only the shapes of
 * replicas on the fewest nodes of node_gpus GPUs each, the ones a policy
 * that packs asks for: max_replicas + 1 entries, not nodes x replicas.
 * Other shapes are answered too, computed each time.
 */
int copus__speedup_create_packed(const copus_model *m, int node_gpus,
				 int max_replicas, copus_speedup **out);
/* The goodput of the table's base shape (finite, > 0). */
double copus__speedup_base(const copus_speedup *s);
/*
 * At least what copus_speedup_get answers for a shape, without computing
 * it; the answer itself, and *known, when it is known (or refused: 0).
 */
double copus__speedup_bound(const copus_speedup *s, int nodes, int replicas,
			    bool *known);
/*
 * The goodput of copus__best_batch(m, nodes, replicas), bit for bit, with
 * fewer candidates priced (the speedup tables' path); returns as it.
 */
int copus__speedup_goodput(const copus_model *m, int nodes, int replicas,
			   double *out);



/* The fitting objective at p and, when grad is not NULL, its gradient
 * (alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma). */
double copus__fit_objective(const copus_observation *obs, size_t n,
			    const copus_perf_params *p, double *grad);

/* The planner (core/planner.c), for its calibration (core/planner-fit.c). */
#include <copus/planner.h>

/* The time and memory of plan p, checked against memory_limit bytes:
 * COPUS_OK or COPUS_ERANGE (does not fit). Arguments are not checked. */
int copus__planner_price(const copus_planner_model *m, int batch,
			 const copus_planner_gpu *g,
			 const copus_planner_cell *cell, double memory_limit,
			 copus_planner_plan *p);

/* fn on every plan of the search that fits, until fn returns non-zero.
 * Arguments are not checked. */
int copus__planner_each(const copus_planner_model *m, int batch,
			const copus_planner_gpu *g,
			const copus_planner_cell *cell,
			const copus_planner_options *o,
			int (*fn)(const copus_planner_plan *p, void *arg),
			void *arg);

/*
 * The hint message (core/hint.c), its "mdl" member (core/hint-model.c) and
 * the writer and readers of one member (core/hint-field.c). hint.c calls
 * the other two, hint-model.c calls hint-field.c.
 */
#include <stdbool.h>
#include <stdint.h>

#include <copus/hint.h>

struct json_object;

/* The parser's state: the root object and where its error goes. */
struct copus__hint_parse {
	struct json_object *root;
	char *err;
	size_t errlen;
	int clamped;
};

/* Append to buf at *pos; false when the text does not fit. */
bool copus__hint_put(char *buf, size_t size, size_t *pos, const char *fmt,
		     ...) __attribute__((format(printf, 4, 5)));
/* A JSON number (int or real) that is finite and >= 0. */
int copus__hint_number(struct copus__hint_parse *p, struct json_object *v,
		       const char *name, double *out);
/* A JSON integer in [lo, hi]. */
int copus__hint_integer(struct copus__hint_parse *p, struct json_object *v,
			const char *name, int64_t lo, int64_t hi,
			int64_t *out);

/*
 * Whether a model descriptor is one that "mdl" may carry (an error names
 * the field).
 */
int copus__hint_model_check(const copus_planner_desc *d, char *err,
			    size_t errlen);
/* Append "mdl" to the encoder's text; false when it does not fit. */
bool copus__hint_model_encode(const copus_planner_desc *d, char *buf,
			      size_t size, size_t *pos);
/* Parse "mdl" into out->model and set out->has_model. */
int copus__hint_model_parse(struct copus__hint_parse *p,
			    struct json_object *mdl, copus_hint *out);

#endif /* COPUS_CORE_INTERNAL_H */
