/*
 * A round's decisions applied to the jobs of copus-sim's engine
 * (engine-apply.h): as the policy made them, or (--equal-per-node) as
 * sched/copus asks Slurm for them.
 */
#include <string.h>

#include "engine-apply.h"

/*
 * With --equal-per-node, a decision as sched/copus asks Slurm for it: its
 * largest part with the same GPUs on each node (copus_even_slots), written
 * to j->slots (the policy's input, rebuilt before each round); a running
 * job keeps its GPUs when that part is its own shape (same GPUs, nodes and
 * type) and the policy does not move jobs, or when it goes nowhere or the
 * other way than the decision. Returns the slots' count, or -1 to keep the
 * job as it is.
 */
static int even_part(const struct sim_apply *a, struct sjob *j,
		     const copus_decision *d)
{
	int per, k, got;

	k = copus_even_slots(d->slots, d->num_slots, j->slots, &per);
	got = k * per;
	if (j->gpus == 0)
		return k;
	if (got == j->gpus && k == j->nodes && d->gpu_type == j->type) {
		int same = 0;

		for (int i = 0; i < k; i++)
			same += j->place[j->slots[i].node] == per;
		if (same == k || !a->moves_jobs)
			return -1;
	}
	if (got != d->gpus && (d->gpus > j->gpus   ? got <= j->gpus
			       : d->gpus < j->gpus ? got >= j->gpus
						   : true))
		return -1;
	return k;
}

bool copus__sim_held(double min_run, double now, const struct sjob *j)
{
	return min_run > 0 && j->gpus > 0 && j->restarts > 0 &&
	       now - j->run_start < min_run;
}

static bool held(const struct sim_apply *a, const struct sjob *j)
{
	return copus__sim_held(a->min_run, a->now, j);
}

/* Whether the n slots fit the GPUs left on their nodes (used). */
static bool slots_fit(const struct sim_apply *a, const int *used,
		      const copus_slot *slots, int n)
{
	for (int k = 0; k < n; k++)
		if (used[slots[k].node] + slots[k].gpus >
		    a->nodes[slots[k].node].gpus)
			return false;
	return true;
}

/* The cost of a job's allocation (its first when first): --restart-delay's,
 * or one of --restart-delays' of its kind drawn uniformly. */
static double restart_cost(const struct sim_apply *a, bool first)
{
	const struct sim_delays *d = a->delays;
	const double *v;
	size_t n;

	if (d == NULL)
		return a->restart_delay;
	v = first && d->nfirst ? d->first : d->rescale;
	n = first && d->nfirst ? d->nfirst : d->nrescale;
	if (n == 0) {
		v = d->first;
		n = d->nfirst;
	}
	return v[sim_rng_next(a->rng) % n];
}

/* A job takes the n slots (none: it stops) and pays its restart. */
static void job_take(const struct sim_apply *a, struct sjob *j, int type,
		     const copus_slot *slots, int n)
{
	bool moved = j->gpus > 0 && j->restarts >= 0;

	memset(j->place, 0, (size_t)a->N * sizeof(int));
	for (int k = 0; k < n; k++)
		j->place[slots[k].node] = slots[k].gpus;
	copus__sim_update_shape(j, a->N);
	if (j->gpus > 0) {
		j->type = type;
		copus__sim_update_local(j);
		j->rescale = j->app->restart_delay >= 0.0
				     ? j->app->restart_delay
				     : restart_cost(a, j->restarts < 0);
		j->run_start = a->now + j->rescale;
		j->moved = moved;
		j->move_cost = j->rescale;
		j->restarts++;
	} else {
		j->atomic = 0;
		j->accum = 0;
		j->moved = false;
	}
}

/*
 * With --equal-per-node, the decisions as Slurm carries them out: each
 * changed job's part (even_part) unless it is held; the jobs that move
 * give up their GPUs first, then each takes its part where the GPUs are
 * still free (a job kept as it is may hold GPUs the policy gave to
 * another), or else goes back to the GPUs it had when they are free, or
 * waits.
 */
static void apply_even(const struct sim_apply *a, struct sjob *jobs,
		       const size_t *idx, const copus_decision *dec, size_t na)
{
	int *used = a->used, *part = a->part;

	memset(used, 0, (size_t)a->N * sizeof(*used));
	for (size_t q = 0; q < na; q++) {
		struct sjob *j = &jobs[idx[q]];
		const copus_decision *d = &dec[q];

		part[q] = -1;
		if (d->changed && !held(a, j))
			part[q] = d->gpu_type < 0 ? 0 : even_part(a, j, d);
		for (int k = 0; part[q] < 0 && k < a->N; k++)
			used[k] += j->place[k];
	}
	for (size_t q = 0; q < na; q++) {
		struct sjob *j = &jobs[idx[q]];
		int n = part[q], had = 0;

		if (n < 0)
			continue;
		if (slots_fit(a, used, j->slots, n)) {
			job_take(a, j, dec[q].gpu_type, j->slots, n);
		} else {
			for (int k = 0; k < a->N; k++)
				if (j->place[k] > 0)
					j->slots[had++] =
						(copus_slot){ k, j->place[k] };
			if (!had || !slots_fit(a, used, j->slots, had))
				job_take(a, j, -1, NULL, 0);
		}
		for (int k = 0; k < a->N; k++)
			used[k] += j->place[k];
	}
}

void copus__sim_apply(const struct sim_apply *a, struct sjob *jobs,
		      const size_t *idx, const copus_decision *dec, size_t na)
{
	if (a->equal_per_node) {
		apply_even(a, jobs, idx, dec, na);
		return;
	}
	for (size_t q = 0; q < na; q++) {
		const copus_decision *d = &dec[q];

		if (d->changed)
			job_take(a, &jobs[idx[q]], d->gpu_type, d->slots,
				 d->num_slots);
	}
}
