/*
 * The scheduling policy interface of include/copus/policy.h: creating a
 * policy by name from the list in core/policy/ops.h, checking a round's
 * input, and checking and completing what the policy decides (slots in
 * node order, whether each job changes, the batch plan). The policies
 * themselves live in core/policy/, one file each.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/model.h>
#include <copus/policy.h>

#include "policy/ops.h"

#define COPUS__POLICY_ENTRY(name) &copus__##name##_ops,
static const struct copus__policy_ops *const policies[] = {
	COPUS__POLICIES(COPUS__POLICY_ENTRY)
};
#undef COPUS__POLICY_ENTRY

#define NUM_POLICIES (sizeof(policies) / sizeof(policies[0]))

struct copus_policy {
	char name[64];
	const struct copus__policy_ops *ops;
	void *state;
	copus_policy_params prm;
	copus_slot *slots; /* the decisions' slots, kept between rounds */
	size_t cap_slots;
};

int copus_policy_check_input(const copus_cluster *c, const copus_job *jobs,
			     size_t n, long *bad_job)
{
	long dummy;
	int *used = NULL;
	int rc = COPUS_OK;

	if (bad_job == NULL)
		bad_job = &dummy;
	*bad_job = -1;
	if (c == NULL || c->nodes == NULL || c->num_nodes < 1 ||
	    c->num_types < 1 || c->num_types > COPUS_MAX_GPU_TYPES ||
	    (n > 0 && jobs == NULL))
		return COPUS_EINVAL;
	for (int k = 0; k < c->num_nodes; k++)
		if (c->nodes[k].gpu_type < 0 ||
		    c->nodes[k].gpu_type >= c->num_types ||
		    c->nodes[k].gpus < 0 || c->nodes[k].gpus > 1 << 16)
			return COPUS_EINVAL;
	used = calloc((size_t)c->num_nodes, sizeof(*used));
	if (used == NULL)
		return COPUS_ENOMEM;
	for (size_t j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];

		*bad_job = (long)j;
		rc = COPUS_EINVAL;
		if (jb->min_gpus < 1 || jb->max_gpus < jb->min_gpus ||
		    jb->req_gpus < 1 || !(jb->req_batch >= 0.0) ||
		    !isfinite(jb->submit_time) || !(jb->attained >= 0.0) ||
		    jb->restarts < 0 || jb->max_gpus_had < 0 ||
		    !isfinite(jb->remaining) || !isfinite(jb->priority))
			goto out;
		if (c->num_types < 32 && (jb->type_mask >> c->num_types) != 0)
			goto out;
		if (jb->granularity < 0 ||
		    !(jb->fairshare >= 0.0 && jb->fairshare <= 1.0) ||
		    !(jb->time_limit >= 0.0))
			goto out;
		if (jb->num_cells < 0 || (jb->num_cells > 0 && jb->cells == NULL))
			goto out;
		for (int i = 0; i < jb->num_cells; i++) {
			const copus_cell_time *ct = &jb->cells[i];

			if (ct->gpu_type < 0 || ct->gpu_type >= c->num_types ||
			    ct->gpus < 1 || ct->nodes < 1 ||
			    ct->gpus % ct->nodes != 0 ||
			    !(ct->seconds > 0.0) || !isfinite(ct->seconds))
				goto out;
		}
		if (jb->cells != NULL && !isfinite(jb->remaining_iters))
			goto out;
		if (jb->alloc_slots < 0 ||
		    (jb->alloc_slots > 0 && jb->alloc == NULL))
			goto out;
		for (int i = 0; i < jb->alloc_slots; i++) {
			int k = jb->alloc[i].node, g = jb->alloc[i].gpus;

			if (k < 0 || k >= c->num_nodes || g < 0)
				goto out;
			if (g == 0)
				continue;
			if (jb->alloc_type < 0 ||
			    jb->alloc_type >= c->num_types ||
			    c->nodes[k].gpu_type != jb->alloc_type)
				goto out;
			used[k] += g;
			if (used[k] > c->nodes[k].gpus)
				goto out;
		}
	}
	*bad_job = -1;
	rc = COPUS_OK;
out:
	free(used);
	return rc;
}

/*
 * The policy that "name" or "name:options" names, with *opts pointing at
 * the options (NULL without a colon); NULL when none has that name.
 */
static const struct copus__policy_ops *lookup(const char *name,
					      const char **opts)
{
	const char *colon = strchr(name, ':');
	size_t len = colon != NULL ? (size_t)(colon - name) : strlen(name);

	*opts = colon != NULL ? colon + 1 : NULL;
	for (size_t i = 0; i < NUM_POLICIES; i++)
		if (strlen(policies[i]->name) == len &&
		    strncmp(name, policies[i]->name, len) == 0)
			return policies[i];
	return NULL;
}

/*
 * The size of copus_policy_params at a version this library knows, 0 for
 * another: each version adds fields at the end.
 */
static size_t params_size(unsigned version)
{
	switch (version) {
	case 1:
		return offsetof(copus_policy_params, fairshare);
	case COPUS_POLICY_PARAMS_VERSION:
		return sizeof(copus_policy_params);
	}
	return 0;
}

int copus_policy_create(const char *name, const copus_policy_params *params,
			copus_policy **out)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	const struct copus__policy_ops *ops;
	const char *opts;
	void *state = NULL;
	copus_policy *p;
	int rc;

	if (name == NULL || out == NULL || strlen(name) >= sizeof(p->name))
		return COPUS_EINVAL;
	ops = lookup(name, &opts);
	if (ops == NULL)
		return COPUS_EINVAL;
	/* A policy without state takes no options either. */
	if (ops->create == NULL && opts != NULL)
		return COPUS_EINVAL;
	if (ops->create != NULL && (rc = ops->create(opts, &state)) != COPUS_OK)
		return rc;
	rc = COPUS_EVERSION;
	if (params != NULL) {
		size_t size = params_size(params->version);

		if (size == 0 || params->size != size)
			goto fail;
		/* An older caller's fields; the later ones keep the defaults. */
		memcpy(&prm, params, size);
		prm.size = sizeof(prm);
		prm.version = COPUS_POLICY_PARAMS_VERSION;
	}
	rc = COPUS_EINVAL;
	if (!(prm.interval > 0.0) || !(prm.restart_delay >= 0.0) ||
	    !isfinite(prm.fairness_p) || !(prm.tiresias_threshold >= 0.0) ||
	    prm.search_rounds < 0 ||
	    !(prm.fairshare >= 0.0 &&
	      prm.fairshare <= COPUS_POLICY_FAIRSHARE_MAX))
		goto fail;
	rc = COPUS_ENOMEM;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		goto fail;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->ops = ops;
	p->state = state;
	p->prm = prm;
	*out = p;
	return COPUS_OK;
fail:
	if (ops->destroy != NULL)
		ops->destroy(state);
	return rc;
}

int copus_policy_set_restart_delay(copus_policy *p, double seconds)
{
	if (p == NULL || !isfinite(seconds) || seconds < 0.0)
		return COPUS_EINVAL;
	p->prm.restart_delay = seconds;
	return COPUS_OK;
}

const char *copus_policy_name(const copus_policy *p)
{
	return p == NULL ? "" : p->name;
}

const char *copus_policy_name_at(size_t i)
{
	return i < NUM_POLICIES ? policies[i]->name : NULL;
}

const struct copus_policy_traits *copus_policy_traits(const copus_policy *p)
{
	static const struct copus_policy_traits none = { 0 };

	return p == NULL ? &none : &p->ops->traits;
}

void copus_policy_destroy(copus_policy *p)
{
	if (p == NULL)
		return;
	if (p->ops->destroy != NULL)
		p->ops->destroy(p->state);
	free(p->slots);
	free(p);
}

/* Batch plan of a decided job: the requested batch, or the best one. */
static void fill_batch(const copus_job *jb, bool optimise, copus_decision *d)
{
	const copus_model *m = copus__job_model(jb, d->gpu_type);
	copus_batch_plan plan;
	int nodes = d->num_slots;

	if (d->gpus == 0)
		return;
	if (optimise && !jb->fixed_batch && m != NULL &&
	    copus_best_batch(m, nodes, d->gpus, &plan) == COPUS_OK) {
		d->batch = (int)plan.batch;
		d->local = plan.local;
		d->accum_steps = plan.accum_steps;
		return;
	}
	d->batch = (int)jb->req_batch;
	if (m != NULL && jb->req_batch > 0) {
		double local = ceil(jb->req_batch / d->gpus - 1e-8);
		int accum = (int)ceil(local / m->limits.max_local - 1e-8) - 1;

		if (accum < 0)
			accum = 0;
		d->accum_steps = accum;
		d->local = (int)ceil(local / (accum + 1) - 1e-8);
	}
}

/* Does job j's decided cell equal its current allocation? mark is N zeros. */
static bool same_cell(const copus_job *jb, const copus_slot *sl, int ns,
		      int type, int *mark)
{
	bool same = true;
	int have = 0, want = 0;

	for (int i = 0; i < jb->alloc_slots; i++) {
		mark[jb->alloc[i].node] += jb->alloc[i].gpus;
		have += jb->alloc[i].gpus;
	}
	for (int i = 0; i < ns; i++) {
		if (mark[sl[i].node] != sl[i].gpus)
			same = false;
		want += sl[i].gpus;
	}
	for (int i = 0; i < jb->alloc_slots; i++)
		mark[jb->alloc[i].node] = 0;
	if (have != want)
		return false;
	return want == 0 || (same && type == jb->alloc_type);
}

/* k rounded to a multiple of g, down (up when below g). */
static int multiple_of(int k, int g)
{
	return k < g ? g : k - k % g;
}

/*
 * The jobs as the policy gets them when some have a granularity above 1:
 * their bounds and request on multiples of it (at least one multiple: a job
 * runs on no fewer GPUs than one replica of its model takes), and rigid on
 * their request for a policy that does not honour it. *copy is NULL when no
 * job has one (the policy gets jobs itself).
 */
static int granular_jobs(const copus_job *jobs, size_t n, bool honours,
			 copus_job **copy)
{
	size_t j;

	*copy = NULL;
	for (j = 0; j < n && jobs[j].granularity <= 1; j++)
		;
	if (j == n)
		return COPUS_OK;
	*copy = malloc(n * sizeof(**copy));
	if (*copy == NULL)
		return COPUS_ENOMEM;
	memcpy(*copy, jobs, n * sizeof(**copy));
	for (j = 0; j < n; j++) {
		copus_job *jb = &(*copy)[j];
		int g = jb->granularity;

		if (g <= 1)
			continue;
		jb->req_gpus = multiple_of(jb->req_gpus, g);
		if (!jb->elastic)
			continue;
		jb->max_gpus = multiple_of(jb->max_gpus, g);
		jb->min_gpus = (jb->min_gpus + g - 1) / g * g;
		if (jb->min_gpus > jb->max_gpus)
			jb->min_gpus = jb->max_gpus;
		if (jb->req_gpus > jb->max_gpus)
			jb->req_gpus = jb->max_gpus;
		if (jb->req_gpus < jb->min_gpus)
			jb->req_gpus = jb->min_gpus;
		if (!honours) {
			/* It keeps what it runs on, else starts at its request. */
			int cur = 0;
			for (int i = 0; i < jb->alloc_slots; i++)
				cur += jb->alloc[i].gpus;
			jb->elastic = false;
			jb->req_gpus = cur > 0 && cur % g == 0 ? cur
							       : jb->req_gpus;
			jb->min_gpus = jb->max_gpus = jb->req_gpus;
		}
	}
	return COPUS_OK;
}

/* Could the policy give job jb its allocation (copus_job.keep)? */
static bool keepable(const copus_cluster *c, const copus_job *jb)
{
	if (!jb->keep || jb->alloc_slots < 1 || jb->alloc_type < 0 ||
	    !copus__type_allowed(jb, jb->alloc_type))
		return false;
	/* As a decision's slots are: in node order, none empty. */
	for (int i = 0; i < jb->alloc_slots; i++) {
		const copus_slot *sl = &jb->alloc[i];
		const copus_node *nd = &c->nodes[sl->node];

		if (!nd->usable || nd->gpu_type != jb->alloc_type ||
		    sl->gpus < 1 || (i > 0 && sl->node <= sl[-1].node))
			return false;
	}
	return true;
}

/*
 * The policy's decisions into res: for the jobs it may decide for, on the
 * GPUs the kept ones (copus_job.keep) leave, and each kept job's
 * allocation as its own.
 */
static int decide_around_kept(copus_policy *p, const copus_cluster *c,
			      const copus_job *jobs, size_t n, double now,
			      struct copus__result *res)
{
	copus_node *nodes = NULL;
	copus_job *sub = NULL;
	size_t *idx = NULL, m = 0, j;
	int rc = COPUS_OK;

	for (j = 0; j < n && !keepable(c, &jobs[j]); j++)
		;
	if (j == n || !p->ops->traits.elastic)
		return p->ops->decide(p->state, &p->prm, c, jobs, n, now, res);
	nodes = malloc((size_t)c->num_nodes * sizeof(*nodes));
	sub = malloc(n * sizeof(*sub));
	idx = malloc(n * sizeof(*idx));
	if (!nodes || !sub || !idx) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	memcpy(nodes, c->nodes, (size_t)c->num_nodes * sizeof(*nodes));
	for (j = 0; j < n; j++) {
		if (!keepable(c, &jobs[j])) {
			sub[m] = jobs[j];
			idx[m++] = j;
			continue;
		}
		for (int i = 0; i < jobs[j].alloc_slots; i++)
			nodes[jobs[j].alloc[i].node].gpus -=
				jobs[j].alloc[i].gpus;
	}
	copus_cluster free_part = *c;

	free_part.nodes = nodes;
	rc = p->ops->decide(p->state, &p->prm, &free_part, sub, m, now, res);
	if (rc != COPUS_OK)
		goto out;
	/* Each result to its job's place (idx[i] >= i: from the last). */
	for (size_t i = m; i-- > 0;) {
		res->off[idx[i]] = res->off[i];
		res->cnt[idx[i]] = res->cnt[i];
		res->types[idx[i]] = res->types[i];
		memcpy(res->reasons[idx[i]], res->reasons[i],
		       sizeof(res->reasons[i]));
	}
	for (j = 0; j < n; j++) {
		const copus_job *jb = &jobs[j];

		if (!keepable(c, jb))
			continue;
		if (res->used + (size_t)jb->alloc_slots > res->cap) {
			rc = COPUS_ESTATE;
			goto out;
		}
		res->off[j] = res->used;
		res->cnt[j] = jb->alloc_slots;
		res->types[j] = jb->alloc_type;
		memcpy(res->slots + res->used, jb->alloc,
		       (size_t)jb->alloc_slots * sizeof(*jb->alloc));
		res->used += (size_t)jb->alloc_slots;
		snprintf(res->reasons[j], sizeof(res->reasons[j]),
			 "kept where it runs this round");
	}
out:
	free(nodes);
	free(sub);
	free(idx);
	return rc;
}

int copus_policy_decide(copus_policy *p, const copus_cluster *c,
			const copus_job *jobs, size_t n, double now,
			copus_decision *out)
{
	copus_job *gjobs = NULL;
	struct copus__result res = { 0 };
	int *mark = NULL, *types = NULL;
	size_t total = 0;
	int rc;

	if (p == NULL || (n > 0 && out == NULL) || !isfinite(now))
		return COPUS_EINVAL;
	if ((rc = copus_policy_check_input(c, jobs, n, NULL)) != COPUS_OK)
		return rc;
	types = malloc((n + 1) * sizeof(int));
	mark = calloc((size_t)c->num_nodes, sizeof(int));
	res.off = malloc((n + 1) * sizeof(*res.off));
	res.cnt = calloc(n + 1, sizeof(*res.cnt));
	res.reasons = calloc(n + 1, sizeof(*res.reasons));
	if (!types || !mark || !res.off || !res.cnt || !res.reasons) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < n; j++)
		types[j] = -1;
	for (int k = 0; k < c->num_nodes; k++)
		total += (size_t)c->nodes[k].gpus;
	/* Every slot holds at least one GPU: total bounds them all. */
	if (p->cap_slots < total + 1) {
		copus_slot *s = realloc(p->slots, (total + 1) * sizeof(*s));

		if (s == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		p->slots = s;
		p->cap_slots = total + 1;
	}
	res.slots = p->slots;
	res.cap = p->cap_slots;
	res.types = types;
	for (size_t j = 0; j < n; j++) {
		memset(&out[j], 0, sizeof(out[j]));
		out[j].id = jobs[j].id;
		out[j].gpu_type = -1;
	}
	if ((rc = granular_jobs(jobs, n, p->ops->granular, &gjobs)) != COPUS_OK)
		goto out;
	rc = decide_around_kept(p, c, gjobs ? gjobs : jobs, n, now, &res);
	if (rc != COPUS_OK)
		goto out;
	for (size_t j = 0; j < n; j++) {
		res.reasons[j][63] = '\0';
		snprintf(out[j].reason, sizeof(out[j].reason), "%s",
			 res.reasons[j]);
	}
	/*
	 * Whatever a policy computed, the caller gets nothing that does not
	 * fit: every slot on a usable node of one allowed type, no node over
	 * its GPUs. A violation is a bug in a policy, reported as such.
	 */
	for (size_t j = 0; j < n; j++) {
		const copus_slot *sl = res.slots + res.off[j];
		int t = types[j], gpus = 0;

		if (res.cnt[j] < 0 || res.off[j] + (size_t)res.cnt[j] > res.used) {
			rc = COPUS_ESTATE;
			goto out;
		}
		for (int i = 0; i < res.cnt[j]; i++)
			gpus += sl[i].gpus;
		/* A size off the granularity only as the job already runs. */
		int cur = 0;
		for (int i = 0; i < jobs[j].alloc_slots; i++)
			cur += jobs[j].alloc[i].gpus;
		if (jobs[j].granularity > 1 && gpus % jobs[j].granularity &&
		    gpus != cur) {
			rc = COPUS_ESTATE;
			goto out;
		}
		for (int i = 0; i < res.cnt[j]; i++) {
			int k = sl[i].node;

			if (k < 0 || k >= c->num_nodes || sl[i].gpus <= 0 ||
			    (i > 0 && k <= sl[i - 1].node) ||
			    !c->nodes[k].usable ||
			    c->nodes[k].gpu_type != t ||
			    !copus__type_allowed(&jobs[j], t) ||
			    (mark[k] += sl[i].gpus) > c->nodes[k].gpus) {
				rc = COPUS_ESTATE;
				goto out;
			}
		}
	}
	memset(mark, 0, (size_t)c->num_nodes * sizeof(int));
	for (size_t j = 0; j < n; j++) {
		copus_decision *d = &out[j];

		d->slots = res.slots + res.off[j];
		d->num_slots = res.cnt[j];
		for (int i = 0; i < d->num_slots; i++)
			d->gpus += d->slots[i].gpus;
		d->gpu_type = d->gpus > 0 ? types[j] : -1;
		d->changed = !same_cell(&jobs[j], d->slots, d->num_slots,
					d->gpu_type, mark);
		fill_batch(&jobs[j], p->ops->traits.picks_batch, d);
	}
out:
	free(gjobs);
	free(types);
	free(mark);
	free(res.off);
	free(res.cnt);
	free(res.reasons);
	return rc;
}

static int _gpus_desc(const void *a, const void *b)
{
	const copus_slot *x = a, *y = b;

	return (x->gpus < y->gpus) - (x->gpus > y->gpus);
}

int copus_even_slots(const copus_slot *slots, int n, copus_slot *out,
		     int *per_node)
{
	int i, k = 0, g = 0;
	long best = 0;

	*per_node = 0;
	if (n <= 0 || !slots || !out)
		return 0;
	/* The i+1 largest counts, at the (i+1)-th largest each. */
	memcpy(out, slots, (size_t)n * sizeof(*out));
	qsort(out, (size_t)n, sizeof(*out), _gpus_desc);
	for (i = 0; i < n && out[i].gpus > 0; i++)
		if ((long)(i + 1) * out[i].gpus > best) {
			best = (long)(i + 1) * out[i].gpus;
			k = i + 1;
			g = out[i].gpus;
		}
	/*
	 * Exactly k slots hold g or more: had m > k of them, m nodes of the
	 * m-th largest count (g at least) would give more than k * g.
	 */
	for (i = 0, k = 0; i < n && g > 0; i++)
		if (slots[i].gpus >= g)
			out[k++] = (copus_slot){ slots[i].node, g };
	*per_node = g;
	return k;
}

static int _node_asc(const void *a, const void *b)
{
	const copus_slot *x = a, *y = b;

	return (x->node > y->node) - (x->node < y->node);
}

static bool _fits(const copus_cluster *c, const int *avail,
		  const unsigned char *allowed, int type, int node, int g)
{
	return node >= 0 && node < c->num_nodes && c->nodes[node].usable &&
	       c->nodes[node].gpu_type == type &&
	       (!allowed || allowed[node]) && avail[node] >= g;
}

static bool _preferred(const copus_slot *prefer, int n_prefer, int node)
{
	for (int i = 0; i < n_prefer; i++)
		if (prefer[i].node == node)
			return true;
	return false;
}

int copus_even_fit(const copus_cluster *c, const int *avail,
		   const unsigned char *allowed, int type, int gpus,
		   int max_per_node, const copus_slot *prefer, int n_prefer,
		   copus_slot *out, int *per_node)
{
	int g, i, k, n;

	*per_node = 0;
	if (!c || !avail || !out || gpus <= 0 || c->num_nodes <= 0)
		return 0;
	if (!prefer)
		n_prefer = 0;
	g = max_per_node > 0 && max_per_node < gpus ? max_per_node : gpus;
	for (; g >= 1; g--) {
		if (gpus % g || (k = gpus / g) > c->num_nodes)
			continue;
		n = 0;
		for (i = 0; i < n_prefer && n < k; i++)
			if (_fits(c, avail, allowed, type, prefer[i].node, g) &&
			    !_preferred(prefer, i, prefer[i].node))
				out[n++] = (copus_slot){ prefer[i].node, g };
		for (i = 0; i < c->num_nodes && n < k; i++)
			if (_fits(c, avail, allowed, type, i, g) &&
			    !_preferred(prefer, n_prefer, i))
				out[n++] = (copus_slot){ i, g };
		if (n == k) {
			qsort(out, (size_t)k, sizeof(*out), _node_asc);
			*per_node = g;
			return k;
		}
	}
	return 0;
}
