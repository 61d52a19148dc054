/*
 * backfill: Slurm's sched/backfill as a site runs it out of the box
 * (Slurm 22.05, src/plugins/sched/backfill/backfill.c), the baseline that
 * copus replaces; rigid, never preempts.
 *
 * Order. Slurm's default PriorityType is priority/basic, first in first
 * out; priority/multifactor with its default weights (PriorityWeightAge,
 * PriorityWeightJobSize and the rest all 0) gives every job the same
 * priority, and the queue falls back to submit order too. So the order is
 * copus_job.priority (the plugin hands Slurm's own, whatever the site's
 * priority plugin; the simulator 0), then submit time, then id. For callers
 * without a priority (the simulator), age=W and size=W add multifactor's
 * age term W x min(waited / max_age, 1) (PriorityMaxAge, 7 days unless
 * max_age=S) and its job-size term W x the job's share of the usable GPUs
 * (favouring large jobs, as PriorityFavorSmall=NO does, in GPUs where Slurm
 * counts nodes and CPUs).
 *
 * Backfill. The jobs are tested in that order, at most max_test of them
 * (bf_max_job_test, 500). Each gets the earliest time its requested GPUs
 * of one type it accepts are free for its whole time limit, given the
 * running jobs (each until its start plus its limit) and the reservations
 * of the jobs tested before it. A job whose time is now starts now, on its
 * requested count and type (any type when it accepts several), placed as
 * the other baselines place; one whose time lies within the window
 * (bf_window, 1 day) gets a reservation there, which no later job may
 * delay; one further out waits without one. So a lower-priority job starts
 * now only if it fits and either ends, by its limit, before the GPUs it
 * uses are reserved, or uses GPUs no reservation needs. Slurm reserves for
 * every job it tests, not only the first as EASY backfill does; the option
 * easy keeps only the first reservation, to measure the difference.
 *
 * Time limits. A job's limit is copus_job.time_limit when the caller gives
 * one (Slurm's --time); else default_time=S (the partition's DefaultTime,
 * or its MaxTime); else unlimited, Slurm's MaxTime default, which Slurm's
 * backfill counts as a year. With unlimited limits nothing frees GPUs
 * within the window, so no job gets a reservation and the policy starts,
 * in order, every job that fits: that is sched/backfill with no limits
 * configured. limit_factor=F gives a job without a limit F times its true
 * run time, copus_job.remaining when the policy first sees it (an oracle of
 * the simulator: users who give limits F times too long); the simulator's
 * jobs have no --time.
 *
 * Two schedulers. Slurm's main scheduler starts jobs in priority order at
 * every event (a submission, a job's end) and stops at the first job that
 * cannot start; only the backfill cycle, every bf_interval (30 s), starts
 * jobs behind it and makes reservations. With bf_interval=S a round within
 * S seconds of the last backfill pass is such a main-scheduler pass; by
 * default every round is a backfill pass (a round of 60 s is longer than
 * Slurm's cycle). On a cluster whose time runs faster than the trace (the
 * testbed), S is the cycle in trace seconds.
 *
 * An event does not start the main scheduler at once: slurmctld runs it at
 * most once every batch_sched_delay (3 s), and then only if a job was
 * submitted or ended since its last run. sched_delay=S does so: a round
 * less than S seconds after the last main-scheduler pass, or with no job
 * new or ended since, starts nothing unless it is a backfill pass. By
 * default (0) every round is a main-scheduler pass: with rounds of 60 s
 * the delay is lost in the round. On the testbed, whose rounds are a
 * second of wall time, S is batch_sched_delay in trace seconds.
 *
 * What Slurm does that this does not: the free GPUs of the future are
 * counted per GPU type, not per node (a job that fits by count may not
 * place; it is then tested again from the next time GPUs free up); times
 * are exact, not rounded to bf_resolution; a job that overruns its limit is
 * not killed (the simulator has no such end) but is expected to end within
 * a minute; a running job's start is the round in which this policy object
 * first saw it run.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <copus/policy.h>

#include "ops.h"
#include "place.h"
#include "round.h"

/* Slurm's backfill defaults (backfill.c, slurm.conf(5)). */
#define BF_WINDOW (24.0 * 3600.0)      /* bf_window: 1 day */
#define BF_MAX_JOB_TEST 500            /* bf_max_job_test */
#define BF_UNLIMITED (365.0 * 86400.0) /* an INFINITE limit: YEAR_MINUTES */
#define BF_RESOLUTION 60.0             /* the shortest reservation */
#define BF_MAX_AGE (7.0 * 86400.0)     /* PriorityMaxAge */

struct bf_opts {
	double default_time; /* INFINITY: unlimited */
	double limit_factor; /* 0: off */
	double window;
	long max_test;
	bool easy;
	double w_age, w_size, max_age;
	double bf_interval; /* 0: a backfill pass every round */
	double sched_delay; /* 0: a main-scheduler pass every round */
};

/* What the policy remembers of a job between rounds. */
struct bf_seen {
	uint64_t id;
	double limit; /* limit_factor x its run time; < 0: none */
	double start; /* when its current run began; NAN: not running */
};

struct backfill {
	struct bf_opts o;
	struct bf_seen *seen; /* sorted by id */
	size_t nseen;
	double last_pass; /* when the last backfill pass ran; -INFINITY */
	double last_sched; /* the last main-scheduler pass; -INFINITY */
	bool event; /* a job was submitted or ended since then */
};

/*
 * The GPUs of one type in use over time, from now on: segment i spans
 * [t[i], t[i + 1]) (the last one has no end) with used[i] GPUs in use or
 * reserved, of total.
 */
struct profile {
	double *t;
	int *used;
	size_t n, cap;
	int total;
};

/* ------------------------------------------------------------ options */

static int parse_opts(struct bf_opts *o, const char *opts)
{
	char buf[256], *save = NULL, *tok;

	if (opts == NULL)
		return COPUS_OK;
	if (strlen(opts) >= sizeof(buf))
		return COPUS_EINVAL;
	strcpy(buf, opts);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		double v;

		if (strcmp(tok, "easy") == 0) {
			o->easy = true;
			continue;
		}
		if (eq == NULL)
			return COPUS_EINVAL;
		*eq = '\0';
		v = strtod(eq + 1, &end);
		if (end == eq + 1 || *end != '\0' || !isfinite(v) || v < 0.0)
			return COPUS_EINVAL;
		if (strcmp(tok, "default_time") == 0 && v > 0.0)
			o->default_time = v;
		else if (strcmp(tok, "limit_factor") == 0 && v > 0.0)
			o->limit_factor = v;
		else if (strcmp(tok, "window") == 0 && v > 0.0)
			o->window = v;
		else if (strcmp(tok, "max_test") == 0 && v >= 1.0 &&
			 v <= 1e6 && v == floor(v))
			o->max_test = (long)v;
		else if (strcmp(tok, "age") == 0)
			o->w_age = v;
		else if (strcmp(tok, "size") == 0)
			o->w_size = v;
		else if (strcmp(tok, "max_age") == 0 && v > 0.0)
			o->max_age = v;
		else if (strcmp(tok, "bf_interval") == 0)
			o->bf_interval = v;
		else if (strcmp(tok, "sched_delay") == 0)
			o->sched_delay = v;
		else
			return COPUS_EINVAL;
	}
	return COPUS_OK;
}

static int backfill_create(const char *opts, void **state)
{
	struct backfill *b = calloc(1, sizeof(*b));
	int rc;

	if (b == NULL)
		return COPUS_ENOMEM;
	b->o.default_time = INFINITY;
	b->last_pass = -INFINITY;
	b->last_sched = -INFINITY;
	b->o.window = BF_WINDOW;
	b->o.max_test = BF_MAX_JOB_TEST;
	b->o.max_age = BF_MAX_AGE;
	if ((rc = parse_opts(&b->o, opts)) != COPUS_OK) {
		free(b);
		return rc;
	}
	*state = b;
	return COPUS_OK;
}

static void backfill_destroy(void *state)
{
	struct backfill *b = state;

	if (b == NULL)
		return;
	free(b->seen);
	free(b);
}

static int seen_cmp(const void *a, const void *b)
{
	const struct bf_seen *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

static const struct bf_seen *seen_find(const struct backfill *b, uint64_t id)
{
	struct bf_seen key = { .id = id };

	if (b->nseen == 0)
		return NULL;
	return bsearch(&key, b->seen, b->nseen, sizeof(key), seen_cmp);
}

/* ------------------------------------------------------------ profile */

static int profile_init(struct profile *p, double now, int total)
{
	p->cap = 16;
	p->n = 1;
	p->total = total;
	p->t = malloc(p->cap * sizeof(*p->t));
	p->used = malloc(p->cap * sizeof(*p->used));
	if (p->t == NULL || p->used == NULL)
		return COPUS_ENOMEM;
	p->t[0] = now;
	p->used[0] = 0;
	return COPUS_OK;
}

static void profile_free(struct profile *p)
{
	free(p->t);
	free(p->used);
}

/* The segment that holds time x (x >= t[0]). */
static size_t profile_at(const struct profile *p, double x)
{
	size_t lo = 0, hi = p->n;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (p->t[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Make x the start of a segment; *at its index. */
static int profile_split(struct profile *p, double x, size_t *at)
{
	size_t i = profile_at(p, x);

	if (p->t[i] == x) {
		*at = i;
		return COPUS_OK;
	}
	if (p->n == p->cap) {
		size_t nc = 2 * p->cap;
		double *t = realloc(p->t, nc * sizeof(*t));
		int *u;

		if (t == NULL)
			return COPUS_ENOMEM;
		p->t = t;
		u = realloc(p->used, nc * sizeof(*u));
		if (u == NULL)
			return COPUS_ENOMEM;
		p->used = u;
		p->cap = nc;
	}
	memmove(p->t + i + 2, p->t + i + 1, (p->n - i - 1) * sizeof(*p->t));
	memmove(p->used + i + 2, p->used + i + 1,
		(p->n - i - 1) * sizeof(*p->used));
	p->t[i + 1] = x;
	p->used[i + 1] = p->used[i];
	p->n++;
	*at = i + 1;
	return COPUS_OK;
}

/* g GPUs in use over [from, to) (from >= t[0]). */
static int profile_add(struct profile *p, double from, double to, int g)
{
	size_t a, b;
	int rc;

	if ((rc = profile_split(p, from, &a)) != COPUS_OK ||
	    (rc = profile_split(p, to, &b)) != COPUS_OK)
		return rc;
	for (size_t i = a; i < b; i++)
		p->used[i] += g;
	return COPUS_OK;
}

/*
 * The earliest time at or after from at which k GPUs stay free for len
 * seconds; INFINITY when never.
 */
static double profile_earliest(const struct profile *p, int k, double len,
			       double from)
{
	double s = from;

	if (k > p->total)
		return INFINITY;
	for (size_t i = profile_at(p, from); i < p->n; i++) {
		double end = i + 1 < p->n ? p->t[i + 1] : INFINITY;

		if (p->used[i] + k > p->total) {
			s = end; /* not here: from this segment's end on */
			continue;
		}
		if (end >= s + len)
			return s;
	}
	return s;
}

/* The first time after from at which the profile changes. */
static double profile_next(const struct profile *p, double from)
{
	size_t i = profile_at(p, from);

	return i + 1 < p->n ? p->t[i + 1] : INFINITY;
}

/* ------------------------------------------------------------- decide */

/* Place job j on k GPUs of type t now; false when they do not place. */
static bool take_type(struct copus__round *r, size_t j, int k, int t)
{
	int got;

	copus__placer_prep(&r->pl, r->c, r->free, NULL, 1u << t);
	if (copus__placer_get(&r->pl, k, row(r, j), &got) != COPUS_OK)
		return false;
	r->types[j] = got;
	for (int n = 0; n < r->N; n++)
		r->free[n] -= row(r, j)[n];
	return true;
}

/* Job jb's time limit, from the caller, its remembered limit or the
 * default; never below the resolution. */
static double job_limit(const struct bf_opts *o, const copus_job *jb,
			const struct bf_seen *s)
{
	double l = jb->time_limit > 0.0 ? jb->time_limit :
		   s->limit >= 0.0 ? s->limit : o->default_time;

	if (!isfinite(l) || l > BF_UNLIMITED)
		l = BF_UNLIMITED;
	return l < BF_RESOLUTION ? BF_RESOLUTION : l;
}

/* A reason for the admin: what, and when (dt s from now) on type t. */
static void reason(char *buf, size_t len, const char *what, double dt,
		   const copus_cluster *c, int t)
{
	const char *tn = c->type_names != NULL ? c->type_names[t] : NULL;

	if (dt < 0.0)
		snprintf(buf, len, "backfill: %s", what);
	else
		snprintf(buf, len, "backfill: %s in %.0f s on %s", what, dt,
			 tn != NULL ? tn : "its type");
}

static int backfill_decide(void *state, const copus_policy_params *prm,
			   const copus_cluster *c, const copus_job *jobs,
			   size_t njobs, double now, struct copus__result *res)
{
	struct backfill *b = state;
	const struct bf_opts *o = &b->o;
	struct copus__round *r = NULL;
	struct copus__order_key *ord = NULL;
	struct bf_seen *ns = NULL;
	struct profile prof[COPUS_MAX_GPU_TYPES];
	int nt = c->num_types, total = 0;
	long tested = 0;
	bool reserved = false, waited = false, main_pass;
	/* A backfill pass, or the main scheduler's (see the top). */
	bool pass = !(now - b->last_pass < o->bf_interval);
	size_t ran_before = 0, still_running = 0;
	int rc = copus__round_create(c, jobs, njobs, &r);

	(void)prm;
	if (pass)
		b->last_pass = now;
	if (rc != COPUS_OK)
		return rc;
	/* A job new since the last round, or one that ran then and no
	 * longer does, is an event for the main scheduler. */
	for (size_t i = 0; i < b->nseen; i++)
		ran_before += isfinite(b->seen[i].start);
	for (size_t j = 0; j < r->n; j++) {
		const struct bf_seen *old = seen_find(b, r->jobs[j].id);

		if (old == NULL)
			b->event = true;
		else if (isfinite(old->start) && copus__alloc_valid(r, j))
			still_running++;
	}
	if (still_running < ran_before)
		b->event = true;
	main_pass = o->sched_delay <= 0.0 ||
		    (b->event && !(now - b->last_sched < o->sched_delay));
	if (main_pass) {
		b->last_sched = now;
		b->event = false;
	}
	memset(prof, 0, sizeof(prof));
	ord = calloc(r->n + 1, sizeof(*ord));
	ns = calloc(r->n + 1, sizeof(*ns));
	if (ord == NULL || ns == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (int t = 0; t < nt; t++) {
		int g = 0;

		for (int n = 0; n < r->N; n++)
			if (c->nodes[n].gpu_type == t && c->nodes[n].usable)
				g += c->nodes[n].gpus;
		total += g;
		if ((rc = profile_init(&prof[t], now, g)) != COPUS_OK)
			goto out;
	}
	/* The running jobs keep their GPUs until their limits end. */
	for (size_t j = 0; j < r->n; j++) {
		const copus_job *jb = &r->jobs[j];
		const struct bf_seen *old = seen_find(b, jb->id);

		ns[j].id = jb->id;
		ns[j].limit = old != NULL ? old->limit : -1.0;
		ns[j].start = NAN;
		if (ns[j].limit < 0.0 && o->limit_factor > 0.0 &&
		    jb->remaining >= 0.0)
			ns[j].limit = o->limit_factor * jb->remaining;
		if (copus__alloc_valid(r, j)) {
			double end;

			copus__keep(r, j);
			ns[j].start = old != NULL && isfinite(old->start) ?
				      old->start : now;
			end = ns[j].start + job_limit(o, jb, &ns[j]);
			if (end < now + BF_RESOLUTION)
				end = now + BF_RESOLUTION; /* overran */
			rc = profile_add(&prof[jb->alloc_type], now, end,
					 copus__row_sum(row(r, j), r->N, NULL));
			if (rc != COPUS_OK)
				goto out;
			snprintf(res->reasons[j], sizeof(res->reasons[j]),
				 "backfill: running");
		}
		ord[j].j = j;
		ord[j].k1 = -(jb->priority +
			      o->w_age * fmin(fmax(now - jb->submit_time, 0.0) /
					      o->max_age, 1.0) +
			      (total > 0 ? o->w_size * jb->req_gpus / total :
			       0.0));
		ord[j].k2 = jb->submit_time;
		ord[j].k3 = (double)jb->id;
	}
	qsort(ord, r->n, sizeof(*ord), copus__order_cmp);
	for (size_t i = 0; i < r->n; i++) {
		size_t j = ord[i].j;
		const copus_job *jb = &r->jobs[j];
		int k = jb->req_gpus, best = -1;
		double len = job_limit(o, jb, &ns[j]), when = INFINITY;
		double from[COPUS_MAX_GPU_TYPES];

		if (r->types[j] >= 0)
			continue;
		if (!main_pass && !pass) {
			reason(res->reasons[j], sizeof(res->reasons[j]),
			       "waits for Slurm's next scheduling pass", -1, c,
			       0);
			continue;
		}
		if (waited && !pass) {
			reason(res->reasons[j], sizeof(res->reasons[j]),
			       "waits for the next backfill cycle", -1, c, 0);
			continue;
		}
		if (++tested > o->max_test) {
			waited = true;
			reason(res->reasons[j], sizeof(res->reasons[j]),
			       "not tested (max_test)", -1, c, 0);
			continue;
		}
		for (int t = 0; t < nt; t++)
			from[t] = now;
		/* Start now on the first type that places it, or find when. */
		for (;;) {
			best = -1;
			when = INFINITY;
			for (int t = 0; t < nt; t++) {
				double s;

				if (!copus__type_allowed(jb, t))
					continue;
				s = profile_earliest(&prof[t], k, len, from[t]);
				if (s < when) {
					when = s;
					best = t;
				}
			}
			if (best < 0 || when > now)
				break;
			if (take_type(r, j, k, best))
				break;
			/* Free by count but not by node: not before the
			 * next change of that type. */
			from[best] = profile_next(&prof[best], now);
		}
		if (best >= 0 && when <= now) {
			rc = profile_add(&prof[best], now, now + len, k);
			if (rc != COPUS_OK)
				goto out;
			ns[j].start = now;
			reason(res->reasons[j], sizeof(res->reasons[j]),
			       waited ? "backfilled" : "started in order", -1,
			       c, 0);
			continue;
		}
		waited = true;
		if (!pass) {
			reason(res->reasons[j], sizeof(res->reasons[j]),
			       "waits for the next backfill cycle", -1, c, 0);
			continue;
		}
		if (best < 0 || when > now + o->window ||
		    (o->easy && reserved)) {
			reason(res->reasons[j], sizeof(res->reasons[j]),
			       best < 0 ? "waits, no type has room" :
			       when > now + o->window ?
			       "waits, beyond the window" :
			       "waits, behind the reservation", -1, c, 0);
			continue;
		}
		rc = profile_add(&prof[best], when, when + len, k);
		if (rc != COPUS_OK)
			goto out;
		reserved = true;
		reason(res->reasons[j], sizeof(res->reasons[j]), "reserved",
		       when - now, c, best);
	}
	qsort(ns, r->n, sizeof(*ns), seen_cmp);
	free(b->seen);
	b->seen = ns;
	b->nseen = r->n;
	ns = NULL;
out:
	rc = copus__round_finish(r, rc, res);
	for (int t = 0; t < nt; t++)
		profile_free(&prof[t]);
	free(ord);
	free(ns);
	return rc;
}

const struct copus__policy_ops copus__backfill_ops = {
	.name = "backfill",
	/* Only limit_factor reads copus_job.remaining (the truth, in the
	 * simulator); the other settings ignore it. */
	.traits = { .remaining = COPUS_REMAINING_ORACLE },
	.create = backfill_create,
	.destroy = backfill_destroy,
	.decide = backfill_decide,
};
