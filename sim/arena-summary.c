/*
 * copus-sim --arena: the figures of a replay beyond its own counts (the
 * lower bounds no policy can beat) and its JSON summary (sim/arena.h).
 */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"

/*
 * The lower bounds of r (struct arena_result): a job's least JCT is its
 * iterations on the fastest of its model's cells, rounded up to whole
 * rounds (restarts cost nothing, it never waits). tmp holds a value per
 * job.
 */
void arena_bounds(const struct arena_world *w, const struct arena_opts *o,
		  struct arena_result *r, double *tmp)
{
	double end = w->first_submit + r->horizon, all = 0, these = 0;
	size_t nany = 0;

	for (size_t i = 0; i < w->njobs; i++) {
		const struct arena_model *m = &w->models[w->jobs[i].model];
		double submit = w->first_submit +
				ARENA_ROUND * (double)w->jobs[i].round;
		double best = INFINITY, b;

		if (w->jobs[i].round >= o->max_rounds)
			continue;
		for (int c = 0; c < m->ncells; c++)
			best = fmin(best, m->cells[c].seconds);
		b = ARENA_ROUND *
		    ceil((double)w->jobs[i].iters * best / ARENA_ROUND);
		all += fmin(b, end - submit);
		if (r->jct[i] > 0)
			these += b;
		if (submit + b <= end)
			tmp[nany++] = b;
	}
	r->bound_all = r->submitted ? all / (double)r->submitted : NAN;
	r->bound_these = r->finished ? these / (double)r->finished : NAN;
	sim_sort_doubles(tmp, nany);
	r->bound_any = NAN;
	if (r->finished > 0 && r->finished <= nany) {
		double sum = 0;
		for (size_t i = 0; i < r->finished; i++)
			sum += tmp[i];
		r->bound_any = sum / (double)r->finished;
	}
}

static json_object *number(double v)
{
	return isfinite(v) ? json_object_new_double(v) : NULL;
}

int arena_summary_write(const char *path, const struct arena_world *w,
			const struct arena_opts *o,
			const struct arena_result *r, char *err, size_t len)
{
	json_object *root = json_object_new_object();
	json_object *jcts = json_object_new_object();
	json_object *jw = json_object_new_object();
	json_object *dm = json_object_new_object();
	int rc = COPUS_OK;

	for (size_t i = 0; i < r->njobs; i++)
		if (!isnan(r->jct[i]))
			json_object_object_add(jw, w->jobs[i].name,
					       json_object_new_double(
						       r->jct[i]));
	json_object_object_add(jcts, "arena", jw);
	json_object_object_add(root, "policy",
			       json_object_new_string(o->policy));
	json_object_object_add(root, "rules",
			       json_object_new_string(
				       o->rules == ARENA_RULES_ARENA
					       ? "arena"
					       : "honest"));
	json_object_object_add(root, "throughput",
			       json_object_new_string(
				       o->throughput == ARENA_THROUGHPUT_PLANNER
					       ? "planner"
					       : "oracle"));
	json_object_object_add(root, "rounds",
			       json_object_new_int64(r->rounds));
	json_object_object_add(root, "horizon", number(r->horizon));
	json_object_object_add(root, "submitted",
			       json_object_new_int64((int64_t)r->submitted));
	json_object_object_add(root, "finished",
			       json_object_new_int64((int64_t)r->finished));
	json_object_object_add(root, "never_started",
			       json_object_new_int64(
				       (int64_t)r->never_started));
	json_object_object_add(root, "mean_jct_finished",
			       number(r->mean_jct_finished));
	json_object_object_add(root, "mean_jct_all", number(r->mean_jct_all));
	json_object_object_add(root, "bound_jct_all", number(r->bound_all));
	json_object_object_add(root, "bound_jct_finished",
			       number(r->bound_these));
	json_object_object_add(root, "bound_jct_any_finished",
			       number(r->bound_any));
	json_object_object_add(root, "jcts", jcts);
	/* As copus-sim's summary of workloads: the one workload "arena". */
	{
		json_object *avgs = json_object_new_object();

		json_object_object_add(avgs, "arena",
				       number(r->mean_jct_finished));
		json_object_object_add(root, "avgs", avgs);
	}
	json_object_object_add(root, "mean", number(r->mean_jct_finished));
	json_object_object_add(root, "p99_jct", number(r->p99_jct));
	json_object_object_add(root, "makespan", number(r->makespan));
	json_object_object_add(root, "gpu_hours", number(r->gpu_hours));
	json_object_object_add(root, "restarts",
			       json_object_new_int64(r->restarts));
	json_object_object_add(root, "refused",
			       json_object_new_int64(r->refused));
	json_object_object_add(root, "restart_cost_per_gpu",
			       number(r->restart_cost_per_gpu));
	json_object_object_add(root, "restart_cost_max",
			       number(r->restart_cost_max));
	json_object_object_add(dm, "median", number(r->decide_ms_median));
	json_object_object_add(dm, "p95", number(r->decide_ms_p95));
	json_object_object_add(dm, "max", number(r->decide_ms_max));
	json_object_object_add(root, "decide_ms", dm);
	json_object_object_add(root, "wall", number(r->wall));
	if (json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY) != 0) {
		snprintf(err, len, "%s: cannot write: %s", path,
			 json_util_get_last_err());
		rc = COPUS_EIO;
	}
	json_object_put(root);
	return rc;
}
