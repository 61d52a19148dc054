/*
 * sched/copus internals without Slurm: SchedulerParameters and the interim
 * priority-order placement (see sched.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copus/error.h"
#include "sched.h"

void copus__params_default(struct copus__params *p)
{
	p->interval = 10;
	p->restart_delay = 120;
	p->ckpt_deadline = 120;
	p->fairness = -1.0;
	p->max_jobs = 1000;
}

struct _int_key {
	const char *name;
	size_t off;
	long min, max;
};

static const struct _int_key _int_keys[] = {
	{ "copus_interval", offsetof(struct copus__params, interval), 1, 3600 },
	{ "copus_restart_delay", offsetof(struct copus__params, restart_delay),
	  0, 86400 },
	{ "copus_checkpoint_deadline",
	  offsetof(struct copus__params, ckpt_deadline), 1, 86400 },
	{ "copus_max_jobs", offsetof(struct copus__params, max_jobs), 1,
	  100000 },
};

static void _report(void (*report)(const char *, void *), void *arg,
		    const char *fmt, const char *key, const char *val,
		    long min, long max)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, key, val, min, max);
	if (report)
		report(msg, arg);
}

/* Handles one "key=value" item; returns 1 on a copus_ error, else 0. */
static int _param(const char *item, struct copus__params *p,
		  void (*report)(const char *, void *), void *arg)
{
	char key[64];
	const char *eq = strchr(item, '=');
	const char *val;
	size_t klen;
	unsigned i;

	if (strncmp(item, "copus_", 6) != 0)
		return 0;
	klen = eq ? (size_t)(eq - item) : strlen(item);
	if (klen >= sizeof(key)) {
		_report(report, arg, "SchedulerParameters: unknown key '%s%s'",
			item, "", 0, 0);
		return 1;
	}
	memcpy(key, item, klen);
	key[klen] = '\0';
	val = eq ? eq + 1 : NULL;
	for (i = 0; i < sizeof(_int_keys) / sizeof(_int_keys[0]); i++) {
		const struct _int_key *k = &_int_keys[i];
		char *end;
		long v;

		if (strcmp(key, k->name))
			continue;
		if (!val || !*val) {
			_report(report, arg, "SchedulerParameters: %s needs a "
				"value%s (a whole number from %ld to %ld)",
				key, "", k->min, k->max);
			return 1;
		}
		errno = 0;
		v = strtol(val, &end, 10);
		if (errno || *end || v < k->min || v > k->max) {
			_report(report, arg, "SchedulerParameters: %s=%s is not "
				"a whole number from %ld to %ld; using the "
				"default", key, val, k->min, k->max);
			return 1;
		}
		*(int *)((char *)p + k->off) = (int)v;
		return 0;
	}
	if (!strcmp(key, "copus_fairness")) {
		char *end;
		double v;

		if (!val || !*val) {
			_report(report, arg, "SchedulerParameters: %s needs a "
				"value%s (a number from %ld to %ld)", key, "",
				-10, 1);
			return 1;
		}
		errno = 0;
		v = strtod(val, &end);
		if (errno || *end || !isfinite(v) || v < -10.0 || v > 1.0) {
			_report(report, arg, "SchedulerParameters: %s=%s is not "
				"a number from %ld to %ld; using the default",
				key, val, -10, 1);
			return 1;
		}
		p->fairness = v;
		return 0;
	}
	_report(report, arg, "SchedulerParameters: unknown key '%s'%s; known: "
		"copus_interval, copus_restart_delay, "
		"copus_checkpoint_deadline, copus_fairness, copus_max_jobs",
		key, "", 0, 0);
	return 1;
}

int copus__params_parse(const char *sched_params, struct copus__params *p,
			void (*report)(const char *msg, void *arg), void *arg)
{
	char item[256];
	const char *s = sched_params, *comma;
	int errors = 0;
	size_t len;

	copus__params_default(p);
	while (s && *s) {
		comma = strchr(s, ',');
		len = comma ? (size_t)(comma - s) : strlen(s);
		if (len >= sizeof(item)) {
			if (!strncmp(s, "copus_", 6)) {
				_report(report, arg, "SchedulerParameters: "
					"item starting '%.40s'%s is too long",
					s, "", 0, 0);
				errors++;
			}
		} else if (len) {
			memcpy(item, s, len);
			item[len] = '\0';
			errors += _param(item, p, report, arg);
		}
		s = comma ? comma + 1 : NULL;
	}
	return errors;
}

static int _job_order(const void *a, const void *b)
{
	const struct copus__job *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int _type_ok(const struct copus__job *j, const struct copus__node *n)
{
	int i;

	if (j->gpus_per_node == 0)
		return 1;
	if (j->type[0])
		return !strcmp(j->type, n->type);
	if (j->ntypes == 0)
		return 1;
	for (i = 0; i < j->ntypes; i++)
		if (!strcmp(j->types[i], n->type))
			return 1;
	return 0;
}

int copus__place_priority(struct copus__node *nodes, int nnodes,
			  struct copus__job *jobs, int njobs,
			  struct copus__decision *dec, int *node_buf,
			  size_t node_buf_len)
{
	size_t used = 0;
	uint8_t *blocked = NULL, *taken = NULL;
	int maxpart = 0, i, k, n, ndec = 0, rc = COPUS_OK;

	if ((nnodes && !nodes) || (njobs && (!jobs || !dec)) || nnodes < 0 ||
	    njobs < 0)
		return COPUS_EINVAL;
	for (i = 0; i < njobs; i++)
		if (jobs[i].part > maxpart)
			maxpart = jobs[i].part;
	blocked = calloc((size_t)maxpart + 1, 1);
	taken = calloc((size_t)nnodes + 1, 1);
	if (!blocked || !taken) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	qsort(jobs, (size_t)njobs, sizeof(*jobs), _job_order);
	for (i = 0; i < njobs; i++) {
		struct copus__job *j = &jobs[i];
		struct copus__decision *d = &dec[ndec++];
		int fits = 0, ever = 0;

		d->id = j->id;
		d->nodes = NULL;
		if (j->part < 0 || j->nodes < 1) {
			d->verdict = COPUS__NEVER;
			continue;
		}
		/* Could the job ever run here (all GPUs free)? */
		for (n = 0; n < nnodes; n++)
			if ((!j->eligible || j->eligible[n]) && _type_ok(j, &nodes[n]) &&
			    nodes[n].gpus >= j->gpus_per_node)
				ever++;
		if (ever < j->nodes) {
			d->verdict = COPUS__NEVER;
			continue;
		}
		if (blocked[j->part]) {
			d->verdict = COPUS__WAIT_PRIORITY;
			continue;
		}
		if (used + (size_t)j->nodes > node_buf_len) {
			rc = COPUS_EINVAL;
			goto out;
		}
		memset(taken, 0, (size_t)nnodes);
		/* Best fit: each time the node with the fewest free GPUs
		 * that still holds the job's share. */
		for (k = 0; k < j->nodes; k++) {
			int best = -1;

			for (n = 0; n < nnodes; n++) {
				struct copus__node *nd = &nodes[n];

				if (taken[n] || !nd->usable ||
				    (j->eligible && !j->eligible[n]) ||
				    !_type_ok(j, nd) ||
				    nd->gpus_free < j->gpus_per_node)
					continue;
				if (best < 0 ||
				    nd->gpus_free < nodes[best].gpus_free)
					best = n;
			}
			if (best < 0)
				break;
			taken[best] = 1;
			node_buf[used + (size_t)k] = best;
			fits++;
		}
		if (fits < j->nodes) {
			d->verdict = COPUS__WAIT_RESOURCES;
			blocked[j->part] = 1;
			continue;
		}
		d->verdict = COPUS__START;
		d->nodes = &node_buf[used];
		for (k = 0; k < j->nodes; k++)
			nodes[node_buf[used + (size_t)k]].gpus_free -=
				j->gpus_per_node;
		used += (size_t)j->nodes;
	}
	rc = ndec;
out:
	free(blocked);
	free(taken);
	return rc;
}

int copus__rescale_interim(const struct copus__node *nodes, int nnodes,
			   const struct copus__running *run, int nrun,
			   const struct copus__job *blocked, int64_t now,
			   int restart_delay, int *target)
{
	int *free_gpus = NULL, i, n = 0, best = -1, best_gpn = 0;

	if ((nnodes && !nodes) || (nrun && (!run || !target)) || nnodes < 0 ||
	    nrun < 0)
		return COPUS_EINVAL;
	for (i = 0; i < nrun; i++)
		target[i] = 0;
	free_gpus = calloc((size_t)nnodes + 1, sizeof(*free_gpus));
	if (!free_gpus)
		return COPUS_ENOMEM;
	for (i = 0; i < nnodes; i++)
		free_gpus[i] = nodes[i].gpus_free;
	for (i = 0; i < nrun; i++) {
		const struct copus__running *r = &run[i];
		const struct copus__node *nd;
		int lo, hi, give;

		if (!r->elastic_max || r->nodes != 1 || r->node < 0 ||
		    r->node >= nnodes || r->gpus_per_node < 1 ||
		    now - r->since < restart_delay)
			continue;
		nd = &nodes[r->node];
		if (!nd->usable)
			continue;
		lo = r->elastic_min > 1 ? r->elastic_min : 1;
		hi = r->elastic_max < nd->gpus ? r->elastic_max : nd->gpus;
		if (blocked) {
			/* Shrink: the blocked job must fit on this node. */
			int need;

			if (blocked->nodes != 1 || !_type_ok(blocked, nd) ||
			    (blocked->eligible && !blocked->eligible[r->node]))
				continue;
			need = blocked->gpus_per_node - free_gpus[r->node];
			if (need <= 0 || r->gpus_per_node - need < lo)
				continue;
			if (best < 0 || r->gpus_per_node > best_gpn) {
				best = i;
				best_gpn = r->gpus_per_node;
			}
			continue;
		}
		give = free_gpus[r->node];
		if (r->gpus_per_node >= hi || give <= 0)
			continue;
		if (give > hi - r->gpus_per_node)
			give = hi - r->gpus_per_node;
		target[i] = r->gpus_per_node + give;
		free_gpus[r->node] -= give;
		n++;
	}
	if (best >= 0) {
		const struct copus__running *r = &run[best];

		target[best] = r->gpus_per_node -
			       (blocked->gpus_per_node - free_gpus[r->node]);
		n = 1;
	}
	free(free_gpus);
	return n;
}
