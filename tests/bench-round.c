/*
 * Benchmark of one sched/copus round without Slurm: the round's Slurm-free
 * phases (plugin/round.c and the files it needs) on rounds built the way
 * the snapshot (plugin/snapshot.c) fills them, at up to 100,000 pending
 * jobs on 65,536 GPUs.
 *
 * The cluster has nodes of 8 GPUs of three types, in blocks of nodes of
 * one type, in two partitions (all nodes, and the first half). About 85%
 * of the GPUs are held by running jobs (1 to 8 GPUs on one node, or 16 or
 * 32 on whole nodes of one type): most elastic with a hint from their
 * current run (a model per type, a progress rate the plugin has seen), a
 * few elastic without one (kept as they are, as the snapshot marks them),
 * the rest rigid. The pending jobs ask for 1 to 32 GPUs, most elastic,
 * some for given types; a fifth have run before and carry the hint of
 * their last run, and 1% of those describe their model ("mdl", so the
 * planner gives their cells). 500 users share them, with the plugin's own
 * usage table; the predictor has learned 2,000 completed jobs.
 *
 * As the snapshot does, a round considers the copus_max_jobs pending jobs
 * of highest priority (the plugin's default unless --max-jobs N; --all:
 * every pending job); every running GPU job is in it. Each pending job of
 * the round has its own row of eligible nodes, and every job of the round
 * (running, or pending with GPUs) a record (memo.h), as the snapshot gives
 * them.
 *
 * A round, timed: the records swept (copus__memo_sweep), the decision
 * (copus__round_decide: users, input, predictor, policy, actions), the
 * starts marked and taken back (copus__round_launches) and the decision
 * freed; not timed: Slurm's phases (snapshot, actions, requests, files).
 * Each round decides the same snapshot again, 10 s later, with the
 * decision's fields cleared as a new snapshot would have them: round 1 is
 * the first round after slurmctld starts (the policy's speedup tables and
 * the planner's cache cold), the others are warm. The digest is a hash of
 * round 1's decisions (each job's action, type, nodes, GPUs each and
 * reason, and the policy's slots), to tell that a change to the code did
 * not change what the round decides.
 *
 * Each size runs in a child process so that its peak resident set is its
 * own. The CPU time of a round is what one core spends on it; on a shared
 * machine the wall clock also counts the time other processes hold it.
 *
 *   bench-round [--quick] [--rounds R] [--max-jobs N | --all]
 *               [--own-rows] [JOBS GPUS]...
 *
 * Default sizes: 1,000, 10,000 and 100,000 pending jobs on 8,192 and
 * 65,536 GPUs, 5 rounds each; --quick: 1,000 jobs on both, 3 rounds.
 * --own-rows: see _shared_rows.
 */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "round.h"
#include "sched_copus.h"

#define GPUS_PER_NODE 8
#define NTYPES 3
#define NUSERS 500
#define NAPPS 20
#define NOW 1700000000

static const char *const _type_names[NTYPES] = { "h100", "a100", "v100" };
/* One GPU of each type, against the fastest. */
static const double _speed[NTYPES] = { 1.0, 0.6, 0.35 };

struct result {
	double first, median, min, max;	/* seconds, wall clock */
	double cpu_first, cpu_median;	/* seconds of CPU time */
	long flt_first;			/* page faults of round 1 */
	int considered, over, running, input;
	int starts, resizes, asks;
	uint64_t digest;
	long rss_input;			/* KiB, after building the input */
};

/* What the bench owns of a round, besides the round itself. */
struct world {
	struct copus__sched s;
	struct copus__round r;
	int jobs_cap;
	uint64_t rng;
	uint8_t *part_rows[2];		/* each partition's, shared */
};

/*
 * The pending jobs of a partition share its row of eligible nodes, as the
 * snapshot gives every job that asks for no nodes of its own (the round
 * only reads the rows); --own-rows gives each job a row of its own, as a
 * job that names nodes or a reservation has.
 */
static bool _shared_rows = true;

/* A 64-bit LCG; the top 53 bits give a double in [0, 1). */
static double _uni(struct world *w, double lo, double hi)
{
	w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
	return lo + (hi - lo) * ((double)(w->rng >> 11) / 9007199254740992.0);
}

static int _pick(struct world *w, int lo, int hi)
{
	int v = lo + (int)_uni(w, 0.0, hi - lo + 1.0);

	return v > hi ? hi : v;
}

static double _clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int _cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The page faults of this process so far (minor and major). */
static long _faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return ru.ru_minflt + ru.ru_majflt;
}

static long _peak_rss_kib(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_maxrss;
}

/* The user, application and uid of a job. */
static void _owner(struct world *w, struct copus__round_job *j)
{
	int u = _pick(w, 0, NUSERS - 1);

	j->uid = 10000 + (uint32_t)u;
	snprintf(j->user, sizeof(j->user), "u%d", u);
	snprintf(j->app, sizeof(j->app), "app%d", _pick(w, 0, NAPPS - 1));
}

/*
 * A hint of the job's current run (restart count rc): a model on each
 * type (slower types compute slower) or, with mdl, the description of its
 * model; a progress rate the plugin has seen for long enough to trust it.
 */
static int _hint(struct world *w, struct copus__memo *in, uint32_t id,
		 int rc, bool mdl)
{
	char text[COPUS_HINT_MAX_LEN + 1], err[160], perf[1024] = "";
	double ac = _uni(w, 0.005, 0.2), bc = _uni(w, 1e-5, 5e-3);
	double ar = _uni(w, 1e-3, 0.1), an = ar * _uni(w, 1.1, 5.0);
	double bn = an * _uni(w, 0.001, 0.1), br = ar * _uni(w, 0.001, 0.1);
	double gamma = _uni(w, 1.0, 3.0), rate = _uni(w, 0.5, 5.0);
	double left = rate * _uni(w, 600.0, 36000.0), prog = 1000.0;
	size_t n = 0;
	int t, rcode;

	if (mdl) {
		static const int layers[] = { 12, 24, 32 };
		static const int hidden[] = { 768, 1024, 2048, 2560 };

		snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":%u,"
			 "\"st\":\"running\",\"step\":10,\"rc\":%d,\"t\":%d,"
			 "\"b0\":16,\"bmax\":16,\"lmin\":1,\"lmax\":16,"
			 "\"acc\":true,\"sqr\":0,\"var\":0,\"prog\":%.0f,"
			 "\"tgt\":%.0f,\"mdl\":{\"a\":\"tf\",\"dt\":2,"
			 "\"l\":%d,\"h\":%d,\"n\":32,\"s\":512,\"v\":50000}}",
			 id, rc, NOW - 10, prog, prog + left,
			 layers[_pick(w, 0, 2)], hidden[_pick(w, 0, 3)]);
	} else {
		for (t = 0; t < NTYPES; t++)
			n += (size_t)snprintf(perf + n, sizeof(perf) - n,
					      "%s\"%s\":[%g,%g,%g,%g,%g,%g,%g]",
					      t ? "," : "", _type_names[t],
					      ac / _speed[t], bc / _speed[t],
					      an, bn, ar, br, gamma);
		snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":%u,"
			 "\"st\":\"running\",\"step\":10,\"rc\":%d,\"t\":%d,"
			 "\"b0\":64,\"bmax\":4096,\"lmin\":4,\"lmax\":256,"
			 "\"acc\":true,\"sqr\":1,\"var\":%g,\"prog\":%.0f,"
			 "\"tgt\":%.0f,\"perf\":{%s}}", id, rc, NOW - 10,
			 _uni(w, 1.0, 1000.0), prog, prog + left, perf);
	}
	rcode = copus_hint_parse(text, &in->hint, err, sizeof(err));
	if (rcode != COPUS_OK) {
		fprintf(stderr, "bench-round: a hint does not parse: %s\n",
			err);
		return rcode;
	}
	in->have_hint = true;
	in->rate_rc = rc;
	in->rate = rate;
	in->base_prog = prog;
	in->base_t = NOW - 600;
	/* Seen for ten minutes, faster than any model claims: trusted. */
	in->seen_rc = rc;
	in->seen_t0 = NOW - 610;
	in->seen_t1 = NOW - 10;
	in->seen_p0 = 0.0;
	in->seen_p1 = 600.0 * 1e6;
	return COPUS_OK;
}

/* A new job of the round, or NULL without memory. */
static struct copus__round_job *_rj_new(struct world *w)
{
	struct copus__round *r = &w->r;

	if (r->nrj == w->jobs_cap) {
		int cap = w->jobs_cap ? 2 * w->jobs_cap : 1024;
		struct copus__round_job *g = realloc(r->rj, cap * sizeof(*g));

		if (!g)
			return NULL;
		r->rj = g;
		w->jobs_cap = cap;
	}
	memset(&r->rj[r->nrj], 0, sizeof(r->rj[0]));
	r->rj[r->nrj].job = -1;
	return &r->rj[r->nrj++];
}

/* The cluster: nodes of 8 GPUs, the types in blocks, all usable. */
static int _nodes(struct world *w, int gpus)
{
	struct copus__round *r = &w->r;
	int i, t;

	r->nnodes = gpus / GPUS_PER_NODE;
	r->nodes = calloc(r->nnodes + 1, sizeof(*r->nodes));
	r->names = calloc(r->nnodes + 1, sizeof(*r->names));
	r->free = calloc(r->nnodes + 1, sizeof(*r->free));
	r->cfg = calloc(r->nnodes + 1, sizeof(*r->cfg));
	if (!r->nodes || !r->names || !r->free || !r->cfg)
		return COPUS_ENOMEM;
	r->ntypes = NTYPES;
	for (t = 0; t < NTYPES; t++)
		snprintf(r->types[t], sizeof(r->types[t]), "%s",
			 _type_names[t]);
	for (i = 0; i < r->nnodes; i++) {
		snprintf(r->names[i], sizeof(r->names[i]), "gpu%05d", i);
		r->nodes[i].gpu_type = (int)((long)i * NTYPES / r->nnodes);
		r->nodes[i].gpus = GPUS_PER_NODE;
		r->nodes[i].usable = true;
		r->free[i] = r->cfg[i] = GPUS_PER_NODE;
	}
	return COPUS_OK;
}

/*
 * A running job of k GPUs on nodes first.., k / nodes each: 70% elastic,
 * of which 5% have no hint from their current run (kept as rigid, as the
 * snapshot marks them); its GPUs are no longer free.
 */
static int _running(struct world *w, uint32_t id, int first, int nodes,
		    int gpn)
{
	struct copus__round *r = &w->r;
	struct copus__round_job *j = _rj_new(w);
	struct copus__memo *in;
	int k;

	if (!j || !(j->alloc = calloc(nodes, sizeof(*j->alloc))))
		return COPUS_ENOMEM;
	j->id = id;
	j->running = true;
	j->nodes_req = nodes;
	j->gpn_req = gpn;
	for (k = 0; k < nodes; k++) {
		j->alloc[k].node = first + k;
		j->alloc[k].gpus = gpn;
		r->free[first + k] -= gpn;
	}
	j->nalloc = nodes;
	j->cur_gpus = nodes * gpn;
	j->alloc_type = r->nodes[first].gpu_type;
	j->rigid = _uni(w, 0, 1) >= 0.7;
	if (!j->rigid) {
		j->emin = j->cur_gpus > 1 ? j->cur_gpus / 2 : 1;
		j->emax = 2 * j->cur_gpus < 64 ? 2 * j->cur_gpus : 64;
	}
	j->part = 0;
	j->priority = (uint32_t)_pick(w, 1, 1000000);
	j->start = NOW - (time_t)_uni(w, 600, 36000);
	j->submit = j->start - (time_t)_uni(w, 0, 7200);
	j->restarts = _pick(w, 0, 2);
	_owner(w, j);
	if (!(in = copus__memo_get(&w->s, id)))
		return COPUS_ENOMEM;
	in->seen = true;
	in->req_gpus = j->cur_gpus;
	in->max_had = j->cur_gpus;
	in->attained = (double)j->cur_gpus * (double)(NOW - j->start);
	in->last = NOW;
	in->last_gpus = j->cur_gpus;
	if (!j->rigid && _uni(w, 0, 1) < 0.05) {
		j->rigid = j->silent = true;
		j->reason = "copus: no hint from its current run: keeps its "
			    "GPUs";
		return COPUS_OK;
	}
	if (!j->rigid)
		return _hint(w, in, id, j->restarts, false);
	return COPUS_OK;
}

/*
 * Running jobs on about 85% of the nodes: a node is taken whole by a job
 * of 8, 16 or 32 GPUs (on whole nodes of its type) or shared by jobs of
 * 1 to 4.
 */
static int _fill(struct world *w, uint32_t *id)
{
	struct copus__round *r = &w->r;
	int i = 0, rc = COPUS_OK;

	while (rc == COPUS_OK && i < r->nnodes) {
		double u = _uni(w, 0, 1);
		int n, k, left;

		if (u >= 0.85) {
			i++;
			continue;
		}
		if (u < 0.25) {
			/* 1, 2 or 4 whole nodes of one type. */
			n = 1 << _pick(w, 0, 2);
			for (k = 1; k < n && i + k < r->nnodes; k++)
				if (r->nodes[i + k].gpu_type !=
				    r->nodes[i].gpu_type)
					break;
			rc = _running(w, (*id)++, i, k, GPUS_PER_NODE);
			i += k;
			continue;
		}
		for (left = GPUS_PER_NODE; rc == COPUS_OK && left > 0;) {
			int g = 1 << _pick(w, 0, 2);

			if (g > left)
				g = left;
			/* Now and then a GPU stays free. */
			if (g == 1 && _uni(w, 0, 1) < 0.3)
				break;
			rc = _running(w, (*id)++, i, 1, g);
			left -= g;
		}
		i++;
	}
	return rc;
}

/* Sorts priorities, highest first. */
static int _cmp_priority(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x > y ? -1 : x < y;
}

/*
 * The pending jobs: 1 to 32 GPUs (8 a node at most), 60% elastic within
 * [1, twice the request], 15% for a list of types and 10% for one type, a
 * tenth in the partition of the first half of the nodes. A fifth have run
 * before, with the hint of their last run (1% of those with a model
 * description). As the snapshot does, in the order of Slurm's job list
 * (submission), a job joins the round while there are fewer than max_jobs
 * and its priority is among the max_jobs highest; the others are counted
 * over.
 */
static int _pending(struct world *w, uint32_t *id, int jobs, int max_jobs)
{
	struct copus__round *r = &w->r;
	struct copus__round_job *all = calloc(jobs + 1, sizeof(*all));
	uint32_t *prio = calloc(jobs + 1, sizeof(*prio)), cut = 0;
	int i, k, rc = COPUS_OK;

	if (!all || !prio) {
		free(all);
		free(prio);
		return COPUS_ENOMEM;
	}
	for (i = 0; i < jobs; i++) {
		struct copus__round_job *j = &all[i];
		int req = 1 << _pick(w, 0, 5);
		double u;

		j->id = (*id)++;
		j->gpn_req = req < GPUS_PER_NODE ? req : GPUS_PER_NODE;
		j->nodes_req = req / j->gpn_req;
		j->rigid = _uni(w, 0, 1) >= 0.6;
		if (!j->rigid) {
			j->emin = 1;
			j->emax = 2 * req;
		}
		u = _uni(w, 0, 1);
		if (u < 0.15) {
			j->ntypes = _pick(w, 1, 2);
			for (k = 0; k < j->ntypes; k++)
				snprintf(j->types[k], sizeof(j->types[k]),
					 "%s", _type_names[(k + _pick(w, 0, 2)) %
							   NTYPES]);
		} else if (u < 0.25) {
			snprintf(j->type_req, sizeof(j->type_req), "%s",
				 _type_names[_pick(w, 0, NTYPES - 1)]);
		}
		j->part = _uni(w, 0, 1) < 0.1;
		j->priority = (uint32_t)_pick(w, 1, 1000000);
		j->submit = NOW - (time_t)_uni(w, 0, 86400);
		if (_uni(w, 0, 1) < 0.2) {
			j->restarts = _pick(w, 1, 3);
			j->end = j->submit;
			j->ran = true;
		}
		_owner(w, j);
		j->job = -1;
		prio[i] = j->priority;
	}
	if (jobs > max_jobs) {
		qsort(prio, jobs, sizeof(*prio), _cmp_priority);
		cut = prio[max_jobs - 1];
	}
	free(prio);
	for (i = 0; rc == COPUS_OK && i < jobs; i++) {
		struct copus__round_job *j;
		struct copus__memo *in;
		int n;

		if (r->npending >= max_jobs || all[i].priority < cut) {
			r->nover++;
			continue;
		}
		if (!(j = _rj_new(w))) {
			rc = COPUS_ENOMEM;
			break;
		}
		*j = all[i];
		/* Its partition's row of eligible nodes, or its own. */
		n = j->part ? r->nnodes / 2 : r->nnodes;
		if (_shared_rows && w->part_rows[j->part]) {
			j->eligible = w->part_rows[j->part];
		} else if (!(j->eligible = calloc(r->nnodes + 1, 1))) {
			rc = COPUS_ENOMEM;
			break;
		} else {
			memset(j->eligible, 1, n);
			if (_shared_rows)
				w->part_rows[j->part] = j->eligible;
		}
		r->npending++;
		if (!(in = copus__memo_get(&w->s, j->id))) {
			rc = COPUS_ENOMEM;
			break;
		}
		in->seen = true;
		in->req_gpus = j->gpn_req * j->nodes_req;
		in->submit = j->submit;
		if (!j->restarts)
			continue;
		in->launched = j->end - 600;
		in->attained = 600.0 * in->req_gpus;
		in->max_had = in->req_gpus;
		if (!j->rigid)
			rc = _hint(w, in, j->id, j->restarts,
				   _uni(w, 0, 1) < 0.01);
	}
	r->max_jobs = max_jobs;
	free(all);
	return rc;
}

/*
 * The predictor as the plugin has it after 2,000 completed jobs, and the
 * users' usage.
 */
static int _history(struct world *w)
{
	enum { N = 2000 };
	copus_job_attrs *a = calloc(N, sizeof(*a));
	double *work = calloc(N, sizeof(*work));
	char (*app)[16] = calloc(N, sizeof(*app));
	char (*user)[16] = calloc(N, sizeof(*user));
	int i, rc;

	rc = copus_predictor_create(NULL, &w->s.predictor);
	if (rc == COPUS_OK && (!a || !work || !app || !user))
		rc = COPUS_ENOMEM;
	for (i = 0; rc == COPUS_OK && i < N; i++) {
		snprintf(app[i], sizeof(app[i]), "app%d",
			 _pick(w, 0, NAPPS - 1));
		snprintf(user[i], sizeof(user[i]), "u%d",
			 _pick(w, 0, NUSERS - 1));
		a[i].application = app[i];
		a[i].user = user[i];
		a[i].gpus = 1 << _pick(w, 0, 5);
		a[i].batch = 64;
		work[i] = a[i].gpus * _uni(w, 600, 86400);
	}
	if (rc == COPUS_OK)
		rc = copus_predictor_add_many(w->s.predictor, a, work, N);
	for (i = 0; rc == COPUS_OK && i < NUSERS; i++)
		if (copus__usage_charge(&w->s.usage, 10000 + (uint32_t)i,
					_uni(w, 1.0, 1e7)) != 0)
			rc = COPUS_ENOMEM;
	free(a);
	free(work);
	free(app);
	free(user);
	return rc;
}

/*
 * The snapshot's last step: a node's GPUs for the policy are the free ones
 * and those of the elastic jobs it may move (a rigid job's are taken).
 */
static void _managed(struct copus__round *r)
{
	int i, k;

	for (i = 0; i < r->nnodes; i++)
		r->nodes[i].gpus = r->free[i];
	for (i = 0; i < r->nrj; i++)
		for (k = 0; !r->rj[i].rigid && k < r->rj[i].nalloc; k++)
			r->nodes[r->rj[i].alloc[k].node].gpus +=
				r->rj[i].alloc[k].gpus;
}

/* The plugin's state and the round of a size; see the top of the file. */
static int _build(struct world *w, int jobs, int gpus, int max_jobs)
{
	copus_policy_params prm;
	uint32_t id = 1;
	int rc;

	memset(w, 0, sizeof(*w));
	w->rng = 42u * 2862933555777941757ull + 3037000493ull;
	copus__params_default(&w->s.params);
	/* The policy as sched_copus.c creates it. */
	copus__policy_params(&w->s.params, &prm);
	if ((rc = copus_policy_create(w->s.params.policy, &prm,
				      &w->s.policy)) != COPUS_OK)
		return rc;
	w->r.when = NOW;
	w->r.decay_hl = 7 * 86400.0;
	if ((rc = _nodes(w, gpus)) != COPUS_OK ||
	    (rc = _fill(w, &id)) != COPUS_OK)
		return rc;
	w->r.nrunning = w->r.nrj;
	if ((rc = _pending(w, &id, jobs, max_jobs)) != COPUS_OK ||
	    (rc = _history(w)) != COPUS_OK)
		return rc;
	_managed(&w->r);
	return COPUS_OK;
}

static void _destroy(struct world *w)
{
	int i;

	copus__round_free(&w->r);
	for (i = 0; i < w->r.nrj; i++) {
		free(w->r.rj[i].alloc);
		if (!_shared_rows)
			free(w->r.rj[i].eligible);
	}
	free(w->part_rows[0]);
	free(w->part_rows[1]);
	free(w->r.rj);
	free(w->r.nodes);
	free(w->r.names);
	free(w->r.free);
	free(w->r.cfg);
	copus_policy_destroy(w->s.policy);
	copus_predictor_destroy(w->s.predictor);
	copus__memo_free(&w->s);
	copus__usage_free(&w->s.usage);
	copus__planner_free(&w->s.planner);
}

/*
 * The round's jobs as the next snapshot has them: the decision's fields
 * cleared (all of them follow `never`), every record seen.
 */
static void _next_snapshot(struct world *w)
{
	const size_t off = offsetof(struct copus__round_job, never);
	int i;

	for (i = 0; i < w->r.nrj; i++) {
		struct copus__round_job *j = &w->r.rj[i];

		memset((char *)j + off, 0, sizeof(*j) - off);
		j->job = -1;
		if (j->silent)
			j->reason = "copus: no hint from its current run: "
				    "keeps its GPUs";
		else
			j->reason = NULL;
	}
	for (i = 0; i < w->s.nmemo; i++)
		w->s.memo[i].seen = true;
	w->r.njobs = 0;
	w->r.decided = 0;
	w->r.wake = 0;
	w->r.error[0] = '\0';
	w->r.predict_rc = COPUS_OK;
}

static uint64_t _fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	while (n--)
		h = (h ^ *c++) * 1099511628211ull;
	return h;
}

/* A hash of what the round decided. */
static uint64_t _digest(const struct copus__round *r)
{
	uint64_t h = 14695981039346656037ull;
	int i, k;

	for (i = 0; i < r->nrj; i++) {
		const struct copus__round_job *j = &r->rj[i];
		int v[5] = { (int)j->id, (int)j->action, j->dtype, j->per_node,
			     j->num_nodes };

		h = _fnv(h, v, sizeof(v));
		if (j->reason)
			h = _fnv(h, j->reason, strlen(j->reason));
		if (j->job < 0 || !r->decided)
			continue;
		for (k = 0; k < r->dec[j->job].num_slots; k++)
			h = _fnv(h, &r->dec[j->job].slots[k],
				 sizeof(r->dec[j->job].slots[k]));
	}
	return _fnv(h, r->error, strlen(r->error));
}

/* The rounds of one size. */
static int _run_size(int jobs, int gpus, int max_jobs, int rounds,
		     struct result *out)
{
	struct world *w = calloc(1, sizeof(*w));
	double *t = calloc(rounds, sizeof(*t)), *cpu = calloc(rounds,
							       sizeof(*cpu));
	int rc, i, k;

	memset(out, 0, sizeof(*out));
	if (!w || !t || !cpu) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	if ((rc = _build(w, jobs, gpus, max_jobs)) != COPUS_OK)
		goto out;
	out->rss_input = _peak_rss_kib();
	out->considered = w->r.npending;
	out->over = w->r.nover;
	out->running = w->r.nrunning;
	for (i = 0; i < rounds; i++) {
		double t0, c0;
		long f0;

		_next_snapshot(w);
		f0 = _faults();
		t0 = _clock_s(CLOCK_MONOTONIC);
		c0 = _clock_s(CLOCK_PROCESS_CPUTIME_ID);
		copus__memo_sweep(&w->s, false);
		copus__round_decide(&w->s, &w->r);
		copus__round_launches(&w->s, &w->r, true);
		copus__round_launches(&w->s, &w->r, false);
		if (i == 0) {
			/* Not timed: what round 1 decided. */
			double u0 = _clock_s(CLOCK_MONOTONIC);
			double v0 = _clock_s(CLOCK_PROCESS_CPUTIME_ID);
			long g0 = _faults();

			out->digest = _digest(&w->r);
			out->input = w->r.njobs;
			for (k = 0; k < w->r.nrj; k++) {
				enum copus__action a = w->r.rj[k].action;

				out->starts += a == COPUS__ACT_START;
				out->resizes += a == COPUS__ACT_RESIZE;
				out->asks += a == COPUS__ACT_ASK;
			}
			if (w->r.error[0])
				fprintf(stderr, "bench-round: %s\n",
					w->r.error);
			t0 += _clock_s(CLOCK_MONOTONIC) - u0;
			c0 += _clock_s(CLOCK_PROCESS_CPUTIME_ID) - v0;
			f0 += _faults() - g0;
		}
		copus__round_free(&w->r);
		t[i] = _clock_s(CLOCK_MONOTONIC) - t0;
		cpu[i] = _clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
		if (i == 0)
			out->flt_first = _faults() - f0;
		w->r.when += w->s.params.interval;
	}
	out->first = t[0];
	out->cpu_first = cpu[0];
	/* The median of the warm rounds (after the first). */
	k = rounds > 1 ? 1 : 0;
	qsort(t + k, rounds - k, sizeof(*t), _cmp_double);
	qsort(cpu + k, rounds - k, sizeof(*cpu), _cmp_double);
	out->median = t[k + (rounds - k) / 2];
	out->cpu_median = cpu[k + (rounds - k) / 2];
	out->min = t[k];
	out->max = t[rounds - 1];
out:
	if (w)
		_destroy(w);
	free(w);
	free(t);
	free(cpu);
	return rc;
}

/* One size in a child process: its peak resident set is its own. */
static int _bench(int jobs, int gpus, int max_jobs, int rounds)
{
	struct result res;
	struct rusage ru;
	int fd[2], status = 0;
	ssize_t got;
	pid_t pid;

	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		int rc;

		close(fd[0]);
		rc = _run_size(jobs, gpus, max_jobs, rounds, &res);
		if (rc == COPUS_OK &&
		    write(fd[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			rc = COPUS_EIO;
		if (rc != COPUS_OK)
			fprintf(stderr, "bench-round: %d jobs, %d GPUs: %s\n",
				jobs, gpus, copus_strerror(rc));
		_exit(rc == COPUS_OK ? 0 : 1);
	}
	close(fd[1]);
	got = read(fd[0], &res, sizeof(res));
	close(fd[0]);
	if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || got != (ssize_t)sizeof(res))
		return -1;
	printf("%6d %6d %6d %6d %6d %6d %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f "
	       "%8ld %6d %6d %5d %7.1f %7.1f %016llx\n", jobs, gpus,
	       res.considered, res.over, res.running, res.input,
	       res.first * 1e3, res.median * 1e3, res.min * 1e3,
	       res.max * 1e3, res.cpu_first * 1e3, res.cpu_median * 1e3,
	       res.flt_first, res.starts, res.resizes, res.asks,
	       res.rss_input / 1024.0,
	       ru.ru_maxrss / 1024.0, (unsigned long long)res.digest);
	return 0;
}

static void _usage(void)
{
	fprintf(stderr, "usage: bench-round [--quick] [--rounds R] "
			"[--max-jobs N | --all] [--own-rows] "
			"[JOBS GPUS]...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const int sizes[][2] = {
		{ 1000, 8192 },	  { 1000, 65536 },   { 10000, 8192 },
		{ 10000, 65536 }, { 100000, 8192 }, { 100000, 65536 },
	};
	struct copus__params dflt;
	int rounds = 5, nsizes = 6, i = 1, s, fails = 0, max_jobs;

	copus__params_default(&dflt);
	max_jobs = dflt.max_jobs;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--quick")) {
			nsizes = 2;
			rounds = 3;
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			if ((rounds = atoi(argv[++i])) < 1)
				_usage();
		} else if (!strcmp(argv[i], "--max-jobs") && i + 1 < argc) {
			if ((max_jobs = atoi(argv[++i])) < 1)
				_usage();
		} else if (!strcmp(argv[i], "--all")) {
			max_jobs = INT_MAX;
		} else if (!strcmp(argv[i], "--own-rows")) {
			_shared_rows = false;
		} else {
			_usage();
		}
	}
	if ((argc - i) % 2 != 0)
		_usage();
	printf("# one round's Slurm-free phases, policy %s, %d rounds a size, "
	       "copus_max_jobs %s", dflt.policy, rounds,
	       max_jobs == INT_MAX ? "lifted (every pending job)" : "");
	if (max_jobs != INT_MAX)
		printf("%d%s", max_jobs, max_jobs == dflt.max_jobs ?
		       " (the plugin's default)" : "");
	printf("%s; times in ms, memory in MiB\n", _shared_rows ?
	       ", a partition's jobs share its row of eligible nodes" :
	       ", each job its own row of eligible nodes");
	printf("# first: round 1 (cold); median/min/max: rounds 2..R, wall "
	       "clock; cpu-*: CPU time; flt-frst: page faults of round 1\n");
	printf("# in-rnd: pending jobs in the round; over: left out by "
	       "copus_max_jobs; input: the policy's jobs\n");
	printf("  jobs   GPUs in-rnd   over    run  input    first   median"
	       "      min      max cpu-frst  cpu-med flt-frst starts resize"
	       "  asks  rss-in  rss-pk digest\n");
	if (i < argc) {
		for (; i + 1 < argc; i += 2) {
			int j = atoi(argv[i]), g = atoi(argv[i + 1]);

			if (j < 0 || g < GPUS_PER_NODE)
				_usage();
			fails += _bench(j, g, max_jobs, rounds) != 0;
		}
	} else {
		for (s = 0; s < nsizes; s++)
			fails += _bench(sizes[s][0], sizes[s][1], max_jobs,
					rounds) != 0;
	}
	return fails ? 1 : 0;
}
