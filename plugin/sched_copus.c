/*
 * sched/copus: a slurmctld scheduler plugin that gives GPUs to jobs by the
 * core policy of copus (include/copus/policy.h).
 *
 * slurm.conf:
 *   SchedulerType=sched/copus
 *   SchedulerParameters=sched_interval=-1,defer,copus_interval=10,...
 * (sched_interval=-1 turns Slurm's own FIFO pass off, so that this plugin
 * alone starts jobs; see sched_copus(8) for the copus_ keys.)
 *
 * Every round runs in the plugin's own thread in four phases:
 *  1. snapshot: under the slurmctld locks, copy what the decision needs:
 *     usable nodes and their GPUs (less those held by jobs the policy does
 *     not see), running GPU jobs with their allocation, pending jobs that
 *     may start now, and each job's hint (its Comment, parsed only when it
 *     changed; the last good one is kept);
 *  2. decision: outside the locks, copus_policy_decide() on the copies;
 *  3. actions: under the write locks, check each job again and start it on
 *     the decided nodes as the backfill plugin does (exclude every other
 *     node, select_nodes(), launch), or give it a readable pending reason;
 *  4. requests: outside the locks, through slurmctld's own RPCs as scontrol
 *     would: set a pending elastic job's request to its decided cell, ask a
 *     running elastic job to checkpoint (the rescale protocol), requeue a
 *     job that reported its checkpoint.
 *
 * Built against the Slurm source of exactly the installed version
 * (plugin_version must equal SLURM_VERSION_NUMBER); Slurm's symbols resolve
 * from slurmctld when it loads the plugin, the core's from libcopus-core.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"

#include "src/common/bitstring.h"
#include "src/common/gres.h"
#include "src/common/list.h"
#include "src/common/log.h"
#include "src/common/macros.h"
#include "src/common/node_conf.h"
#include "src/common/read_config.h"
#include "src/common/slurm_cred.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/job_scheduler.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/node_scheduler.h"
#include "src/slurmctld/slurmctld.h"
#include "src/slurmctld/srun_comm.h"
#include "src/slurmctld/state_save.h"

#include "copus/hint.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "options.h"
#include "sched.h"

const char plugin_name[] = "copus co-adaptive GPU scheduler";
const char plugin_type[] = "sched/copus";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/*
 * What the plugin remembers about a job between rounds (only the plugin's
 * thread touches it): its original request, its last good hint, the
 * progress rate seen in its current run, the service it received. Kept
 * sorted by id (copus_sched.info); entries of jobs that left the queue are
 * dropped.
 */
struct _info {
	uint32_t id;
	bool seen;			/* in this round's snapshot */
	int req_gpus;			/* the request when first seen */
	int max_had;			/* most GPUs it has held */
	double attained;		/* GPU-seconds */
	time_t last;			/* when attained was last counted */
	int last_gpus;			/* GPUs it held then */
	bool learned;			/* given to the predictor */
	uint64_t comment_hash;		/* the Comment last parsed */
	bool have_hint;
	copus_hint hint;		/* last good hint */
	int rate_rc;			/* run the rate was measured in */
	double base_prog, base_t, rate;	/* first hint of that run, rate */
	char reason[64];		/* last decision's reason */
};

/*
 * A rescale in flight: the job was asked to checkpoint
 * (COPUS_RESCALE_SIGNAL). When it reports st="checkpointed" the plugin
 * requeues it; a job that exits with 75 is requeued by Slurm itself
 * (RequeueExit=75). Once it is pending, the policy decides its new cell and
 * the plugin sets it, no earlier than _RELEASE_GAP seconds after the job
 * ended. Only the plugin's thread touches the table
 * (copus_sched.rescales).
 */
#define _RESCALE_MAX 256
/*
 * slurmd refuses a job credential created in the same second as the
 * revocation of the previous run's (slurm_cred.c: ctime <= revoked) and the
 * job then fails for good, so a requeued job is released two seconds after
 * its end at the earliest.
 */
#define _RELEASE_GAP 2
struct _rescale {
	uint32_t id;
	time_t asked;
	int rc;				/* restart count when asked */
	int from, to;			/* GPUs in total */
	char type[16];			/* the decided type */
	bool gave_up;			/* no answer: not asked again until
					 * the restart delay has passed */
	bool requeue_sent;		/* the plugin requeued it */
	time_t pending_since;		/* first seen requeued (not saved) */
};

/*
 * The last request set for a pending job, so that a request Slurm accepts
 * but does not reflect (or a job it then finds never runnable) is not set
 * again every round: an identical request waits a whole interval, and does
 * not trigger an immediate round.
 */
#define _RESIZE_MEMO 1024
struct _resize_memo {
	uint32_t id;
	char tres[64];
	uint32_t nodes;
	time_t when;
};

/*
 * The plugin's state. init(), fini() and sched_p_reconfig() run in
 * slurmctld's threads and touch only the agent's control, under its locks;
 * the rest belongs to the plugin's own thread, which hands it to each phase
 * of a round. The one instance is _sched.
 */
struct copus_sched {
	/* The agent's control. */
	pthread_t thread;		/* under thread_lock */
	pthread_mutex_t thread_lock;
	pthread_mutex_t term_lock;
	pthread_cond_t term_cond;	/* signalled under term_lock */
	bool stop;			/* under term_lock: fini() */
	bool reconfig;			/* under term_lock: re-read the keys */
	/* A job's request was just set for its decided cell: start it at
	 * once. */
	bool again;

	struct copus__params params;
	/* The core policy. */
	copus_policy *policy;
	/*
	 * The predictor of a job's total work (GPU-seconds) from its name,
	 * user, request and batch, trained on the jobs that completed (kept
	 * across restarts in copus_history).
	 */
	copus_predictor *predictor;
	struct _info *info;		/* the jobs, sorted by id */
	int ninfo, info_cap;
	struct _rescale rescales[_RESCALE_MAX];
	int nrescales;
	/* copus_state would differ from the file: save it. */
	bool state_dirty;
	/* Lines in the history file (after the first) since it was last
	 * read. */
	long history_lines;
	struct _resize_memo resize_memo[_RESIZE_MEMO];
};

static struct copus_sched _sched = {
	.thread_lock = PTHREAD_MUTEX_INITIALIZER,
	.term_lock = PTHREAD_MUTEX_INITIALIZER,
	.term_cond = PTHREAD_COND_INITIALIZER,
};

static int _info_cmp(const void *a, const void *b)
{
	const struct _info *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static struct _info *_info_find(struct copus_sched *s, uint32_t id)
{
	struct _info key = { .id = id };

	if (!s->ninfo)
		return NULL;
	return bsearch(&key, s->info, s->ninfo, sizeof(*s->info), _info_cmp);
}

/*
 * The entry of a job, created (zeroed, sorted in) when missing; NULL when
 * there is no memory for it.
 */
static struct _info *_info_get(struct copus_sched *s, uint32_t id)
{
	struct _info *x = _info_find(s, id);
	int lo = 0, hi = s->ninfo;

	if (x)
		return x;
	if (s->ninfo == s->info_cap) {
		int cap = s->info_cap ? 2 * s->info_cap : 256;

		if (!(x = realloc(s->info, cap * sizeof(*x))))
			return NULL;
		s->info = x;
		s->info_cap = cap;
	}
	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (s->info[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&s->info[lo + 1], &s->info[lo],
		(s->ninfo - lo) * sizeof(*s->info));
	memset(&s->info[lo], 0, sizeof(*s->info));
	s->info[lo].id = id;
	s->ninfo++;
	return &s->info[lo];
}

/* Forgets the jobs not seen in the last snapshot, clears the marks. */
static void _info_sweep(struct copus_sched *s)
{
	int i, n = 0;

	for (i = 0; i < s->ninfo; i++) {
		if (!s->info[i].seen)
			continue;
		s->info[i].seen = false;
		s->info[n++] = s->info[i];
	}
	s->ninfo = n;
}

static struct _rescale *_rescale_find(struct copus_sched *s,
				       uint32_t id)
{
	int i;

	for (i = 0; i < s->nrescales; i++)
		if (s->rescales[i].id == id)
			return &s->rescales[i];
	return NULL;
}

static bool _rescales_active(struct copus_sched *s)
{
	int i;

	for (i = 0; i < s->nrescales; i++)
		if (!s->rescales[i].gave_up)
			return true;
	return false;
}

static void _rescale_drop(struct copus_sched *s, struct _rescale *x)
{
	*x = s->rescales[--s->nrescales];
	s->state_dirty = true;
}

/*
 * The files the plugin replaces whole (copus_state, copus_status, the
 * compacted copus_history) are written beside as NAME.new, flushed to
 * disk and renamed over NAME: a reader, or slurmctld after a crash, finds
 * the old file or the new one, never a part of one.
 */
static FILE *_replace_begin(const char *path)
{
	char *tmp = xstrdup_printf("%s.new", path);
	FILE *f = fopen(tmp, "w");

	if (!f)
		error("%s: cannot write %s: %m", plugin_type, tmp);
	xfree(tmp);
	return f;
}

/* Ends _replace_begin (f is closed): 0, or -1 and the old file stays. */
static int _replace_end(FILE *f, const char *path)
{
	char *tmp = xstrdup_printf("%s.new", path);
	int rc = fflush(f) || fsync(fileno(f));

	rc = fclose(f) || rc;
	if (rc || rename(tmp, path)) {
		error("%s: cannot replace %s: %m", plugin_type, path);
		rc = -1;
	}
	xfree(tmp);
	return rc;
}

#define _STATE_FILE "copus_state"
#define _STATE_MAGIC1 "copus-state 1"
#define _STATE_MAGIC "copus-state 2"

/*
 * The rescales in flight and what the plugin learned about each job (its
 * original request, service received, most GPUs held) survive a slurmctld
 * restart in StateSaveLocation/copus_state, replaced atomically (written
 * beside, flushed, renamed): a job that checkpoints while slurmctld is down
 * is still given its new cell when it comes back. The hints themselves
 * need no saving: they live in the jobs' Comments, which Slurm saves.
 */
static void _state_save(struct copus_sched *s, const char *dir)
{
	char *path;
	FILE *f;
	int i;

	if (!s->state_dirty || !dir)
		return;
	path = xstrdup_printf("%s/%s", dir, _STATE_FILE);
	if (!(f = _replace_begin(path))) {
		xfree(path);
		return;
	}
	fprintf(f, "%s\n", _STATE_MAGIC);
	for (i = 0; i < s->nrescales; i++) {
		const struct _rescale *x = &s->rescales[i];

		fprintf(f, "rescale %u %lld %d %d %s %d %d\n", x->id,
			(long long)x->asked, x->from, x->to,
			x->type[0] ? x->type : "-", x->gave_up ? 1 : 0, x->rc);
	}
	/* A job already learned from is in copus_history: not again. */
	for (i = 0; i < s->ninfo; i++)
		if (s->info[i].req_gpus > 0 && !s->info[i].learned)
			fprintf(f, "job %u %d %d %.0f %.9g\n", s->info[i].id,
				s->info[i].req_gpus, s->info[i].max_had,
				s->info[i].attained, s->info[i].rate);
	if (_replace_end(f, path) == 0)
		s->state_dirty = false;
	xfree(path);
}

static void _state_load(struct copus_sched *s, const char *dir)
{
	char *path, line[256], type[16];
	FILE *f;
	int lineno = 0, njobs = 0;

	if (!dir)
		return;
	path = xstrdup_printf("%s/%s", dir, _STATE_FILE);
	f = fopen(path, "r");
	if (!f) {
		xfree(path);
		return;
	}
	s->nrescales = 0;
	while (fgets(line, sizeof(line), f)) {
		struct _rescale x;
		long long asked;
		double att, rate = 0.0;
		unsigned id;
		int gave_up, n = 0, req, had;

		lineno++;
		if (lineno == 1) {
			if (strcmp(line, _STATE_MAGIC "\n") &&
			    strcmp(line, _STATE_MAGIC1 "\n")) {
				error("%s: %s:1: not a copus state file "
				      "(expected '%s'); ignoring it",
				      plugin_type, path, _STATE_MAGIC);
				break;
			}
			continue;
		}
		if (!strncmp(line, "job ", 4)) {
			if (sscanf(line, "job %u %d %d %lf%n", &id, &req, &had,
				   &att, &n) != 4 ||
			    (line[n] == ' ' && sscanf(line + n, " %lf%n",
						      &rate, &gave_up) != 1) ||
			    (line[n] != ' ' && line[n] != '\n') ||
			    !isfinite(rate) || rate < 0 ||
			    id == 0 || req < 1 || req > COPUS__GPUS_MAX ||
			    had < 0 || had > COPUS__GPUS_MAX ||
			    !isfinite(att) || att < 0) {
				error("%s: %s:%d: bad job record '%.60s'; "
				      "ignoring it", plugin_type, path, lineno,
				      line);
				continue;
			}
			struct _info *in = _info_get(s, id);

			if (!in)
				continue;
			in->req_gpus = req;
			in->max_had = had;
			in->attained = att;
			in->rate = rate;
			njobs++;
			continue;
		}
		memset(&x, 0, sizeof(x));
		x.rc = -1;
		if (sscanf(line, "rescale %u %lld %d %d %15s %d%n", &x.id,
			   &asked, &x.from, &x.to, type, &gave_up, &n) != 6 ||
		    (line[n] == ' ' && sscanf(line + n, " %d%n", &x.rc,
					      &req) != 1) ||
		    x.id == 0 || asked < 0 || x.from < 1 || x.to < 0 ||
		    x.from > COPUS__GPUS_MAX || x.to > COPUS__GPUS_MAX ||
		    (gave_up != 0 && gave_up != 1) ||
		    s->nrescales == _RESCALE_MAX) {
			error("%s: %s:%d: bad rescale record '%.60s'; "
			      "ignoring it", plugin_type, path, lineno, line);
			continue;
		}
		x.asked = (time_t)asked;
		x.gave_up = gave_up;
		if (strcmp(type, "-"))
			snprintf(x.type, sizeof(x.type), "%s", type);
		s->rescales[s->nrescales++] = x;
	}
	fclose(f);
	if (s->nrescales || njobs)
		info("%s: recovered %d rescale(s) in flight and %d job "
		     "record(s) from %s", plugin_type, s->nrescales, njobs,
		     path);
	xfree(path);
}

/* One job of a round, as copied under the locks. */
struct _rj {
	uint32_t id;
	bool running;
	bool rigid;
	bool in_rescale;		/* in the rescale table, not given up */
	bool waits_release;		/* requeued for a rescale, not yet
					 * allowed to start again */
	bool checkpointed;		/* its hint says so, in this run */
	bool never;			/* can never run here as it asks */
	int64_t ckpt_step;
	int part;			/* partition index */
	uint32_t priority;
	time_t submit, start, end;
	int restarts;
	int nodes_req, gpn_req;		/* the request now: nodes, GPUs each */
	char type_req[16];		/* its GPU type ("" = any) */
	int gpu_entries;		/* GPU request entries, and those */
	int gpu_entries_other;		/* not a plain count per node */
	int emin, emax;			/* elastic bounds; 0 when rigid */
	char types[COPUS__TYPES_MAX][16]; /* --gpu-types */
	int ntypes;
	copus_slot *alloc;		/* running: its GPUs per node */
	int nalloc, alloc_type, cur_gpus;
	char *nodelist;
	char app[64], user[16];		/* the predictor's attributes */
	uint8_t *eligible;		/* pending: nodes it may use */
	const char *reason;		/* set when it is not given to the
					 * policy */
	int job;			/* index in the policy's input, -1 */
	/* The plan of phase 2. */
	enum { _NONE, _START, _RESIZE, _ASK, _REQUEUE } action;
	int per_node, num_nodes, dtype;
	char reason_buf[96];
};

/* What a round works on: the copies of phase 1 and the decisions. */
struct _round {
	time_t when;
	double t_snap, t_decide, t_act;	/* phase times, milliseconds */
	char *state_dir;		/* StateSaveLocation */
	int nnodes;
	copus_node *nodes;
	char (*names)[64];		/* node names */
	int *free;			/* GPUs not allocated, per node */
	int *cfg;			/* GPUs configured, per node */
	int ntypes;
	char types[COPUS_MAX_GPU_TYPES][16];
	const char *type_ptrs[COPUS_MAX_GPU_TYPES];
	struct _rj *rj;
	int nrj, npending, nrunning;
	copus_job *jobs;		/* the policy's input */
	copus_model *models;		/* ntypes per input job */
	const copus_model **model_ptrs;
	int *rj_of;			/* rj index of each input job */
	copus_history_entry *obs;	/* jobs that completed, to learn */
	int nobs;
	int njobs;
	copus_decision *dec;
	int decided;			/* the policy ran */
	char error[160];		/* why it did not */
	int predict_rc;			/* why the predictor gave nothing */
};

static void _report_param(const char *msg, void *arg)
{
	error("%s: %s", plugin_type, msg);
}

static void _load_params(struct copus_sched *s)
{
	copus__params_parse(slurm_conf.sched_params, &s->params, _report_param,
			    NULL);
	info("%s: policy %s, interval %ds, restart delay %ds, restart cost "
	     "%ds, checkpoint deadline %ds, fairness %.2f, at most %d pending "
	     "jobs per round", plugin_type, s->params.policy,
	     s->params.interval, s->params.restart_delay,
	     s->params.restart_cost, s->params.ckpt_deadline,
	     s->params.fairness, s->params.max_jobs);
}

/* (Re)creates the core policy from the parameters. */
static void _policy_setup(struct copus_sched *s)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	copus_policy *p = NULL;
	int rc;

	prm.interval = s->params.interval;
	prm.restart_delay = s->params.restart_cost;
	prm.fairness_p = s->params.fairness;
	/* Slurm gives every node of a job the same GPU count. */
	prm.equal_per_node = true;
	rc = copus_policy_create(s->params.policy, &prm, &p);
	if (rc != COPUS_OK) {
		error("%s: SchedulerParameters: copus_policy=%s: %s; using "
		      "copus", plugin_type, s->params.policy,
		      copus_strerror(rc));
		snprintf(s->params.policy, sizeof(s->params.policy), "copus");
		rc = copus_policy_create("copus", &prm, &p);
		if (rc != COPUS_OK) {
			error("%s: cannot create the copus policy: %s",
			      plugin_type, copus_strerror(rc));
			return;
		}
	}
	if (s->policy)
		copus_policy_destroy(s->policy);
	s->policy = p;
}

/* The value of NAME in the job's control environment (SPANK options). */
static const char *_spank_env(job_record_t *job_ptr, const char *name)
{
	size_t len = strlen(name);
	uint32_t i;

	for (i = 0; i < job_ptr->spank_job_env_size; i++) {
		const char *e = job_ptr->spank_job_env[i];

		if (!e)
			continue;
		if (!strncmp(e, "SPANK_", 6) && !strncmp(e + 6, name, len) &&
		    e[6 + len] == '=')
			return e + 7 + len;
		if (!strncmp(e, name, len) && e[len] == '=')
			return e + len + 1;
	}
	return NULL;
}

/* GPUs per node and type of a job's request (gres_list_req). */
static void _job_gpus(job_record_t *job_ptr, struct _rj *j)
{
	ListIterator it;
	gres_state_t *gs;

	if (!job_ptr->gres_list_req)
		return;
	it = list_iterator_create(job_ptr->gres_list_req);
	while ((gs = list_next(it))) {
		gres_job_state_t *g = gs->gres_data;
		uint64_t per_node = 0;

		if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g)
			continue;
		if (g->gres_per_node)
			per_node = g->gres_per_node;
		else if (g->gres_per_job)
			per_node = (g->gres_per_job + j->nodes_req - 1) /
				   j->nodes_req;
		else if (g->gres_per_task)
			per_node = g->gres_per_task *
				   (job_ptr->details->num_tasks ?
				    job_ptr->details->num_tasks : 1) /
				   j->nodes_req;
		j->gpn_req += (int)per_node;
		j->gpu_entries++;
		if (g->gres_per_job || g->gres_per_socket || g->gres_per_task)
			j->gpu_entries_other++;
		if (g->type_name)
			snprintf(j->type_req, sizeof(j->type_req), "%s",
				 g->type_name);
	}
	list_iterator_destroy(it);
}

/* The GPUs a running job holds on each of its nodes (gres_list_alloc). */
static void _job_alloc(struct _round *r, job_record_t *job_ptr,
		       struct _rj *j)
{
	ListIterator it;
	gres_state_t *gs;
	int *per = NULL, k, n, i;

	if (!job_ptr->gres_list_alloc || !job_ptr->node_bitmap)
		return;
	n = bit_set_count(job_ptr->node_bitmap);
	if (n <= 0)
		return;
	per = xcalloc(n, sizeof(*per));
	it = list_iterator_create(job_ptr->gres_list_alloc);
	while ((gs = list_next(it))) {
		gres_job_state_t *g = gs->gres_data;

		if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g ||
		    !g->gres_cnt_node_alloc)
			continue;
		for (k = 0; k < n && k < (int)g->node_cnt; k++)
			per[k] += (int)g->gres_cnt_node_alloc[k];
	}
	list_iterator_destroy(it);
	j->alloc = xcalloc(n, sizeof(*j->alloc));
	k = 0;
	for (i = 0; i < r->nnodes && k < n; i++) {
		if (!bit_test(job_ptr->node_bitmap, i))
			continue;
		if (per[k] > 0) {
			j->alloc[j->nalloc].node = i;
			j->alloc[j->nalloc].gpus = per[k];
			j->cur_gpus += per[k];
			j->nalloc++;
		}
		k++;
	}
	xfree(per);
}

/*
 * The partitions of a snapshot's jobs, numbered as they come: the round
 * compares a job's partition by its number only.
 */
struct _parts {
	part_record_t **v;
	int n;
};

static int _part_index(struct _parts *parts, part_record_t *part_ptr)
{
	int i;

	for (i = 0; i < parts->n; i++)
		if (parts->v[i] == part_ptr)
			return i;
	xrecalloc(parts->v, parts->n + 1, sizeof(*parts->v));
	parts->v[parts->n] = part_ptr;
	return parts->n++;
}

/*
 * Whether a pending job may be started now as far as Slurm's rules go:
 * not held, dependencies satisfied and begin time reached (job_independent
 * also records the reason), within its partition's limits, partition up.
 */
static bool _job_startable(job_record_t *job_ptr)
{
	if (!IS_JOB_PENDING(job_ptr) || IS_JOB_COMPLETING(job_ptr) ||
	    IS_JOB_REVOKED(job_ptr) || !job_ptr->details || !job_ptr->part_ptr)
		return false;
	if (job_ptr->priority == 0)	/* held */
		return false;
	if (job_ptr->het_job_id)	/* heterogeneous jobs: not handled */
		return false;
	if (!job_independent(job_ptr))
		return false;
	if (!(job_ptr->part_ptr->state_up & PARTITION_SCHED) ||
	    !job_ptr->part_ptr->node_bitmap) {
		job_ptr->state_reason = WAIT_PART_DOWN;
		return false;
	}
	if (job_limits_check(&job_ptr, false) != WAIT_NO_REASON)
		return false;
	return true;
}

/*
 * Whether a pending elastic job waits only for the begin time Slurm set when
 * it requeued the job itself (its node failed, or an admin ran scontrol
 * requeue): the requeue time plus the credential lifetime, about two
 * minutes, so that its next launch credential postdates the revocation of
 * the last one. An elastic job resumes from its checkpoint wherever it
 * restarts, so the plugin treats it as one it requeued: the policy gives it
 * a cell and the plugin releases it _RELEASE_GAP seconds after its end,
 * which is all slurmd needs. Held jobs, rigid jobs and begin times that
 * users set are left alone.
 */
static bool _slurm_requeued(job_record_t *job_ptr, time_t now)
{
	struct job_details *d = job_ptr->details;
	int lifetime = 1200;
	time_t wait;

	if (!d || !job_ptr->restart_cnt || job_ptr->priority == 0 ||
	    !job_ptr->part_ptr || IS_JOB_COMPLETING(job_ptr) ||
	    IS_JOB_REVOKED(job_ptr) || job_ptr->het_job_id ||
	    d->begin_time <= now ||
	    (d->depend_list && list_count(d->depend_list)) ||
	    !_spank_env(job_ptr, COPUS__ENV_ELASTIC))
		return false;
	(void) slurm_cred_ctx_get(slurmctld_config.cred_ctx,
				  SLURM_CRED_OPT_EXPIRY_WINDOW, &lifetime);
	/* Requeue: begin = now + lifetime + 1, submit = now (or now + 1). */
	wait = d->begin_time - d->submit_time;
	return wait >= lifetime && wait <= lifetime + 1;
}

/* The job's --elastic and --gpu-types, checked again (they are input). */
static void _job_options(job_record_t *job_ptr, struct _rj *j)
{
	const char *v;
	char why[128];

	if ((v = _spank_env(job_ptr, COPUS__ENV_ELASTIC)) &&
	    copus__parse_elastic(v, &j->emin, &j->emax, why, sizeof(why)))
		error("%s: %pJ: ignoring %s=%s: %s", plugin_type, job_ptr,
		      COPUS__ENV_ELASTIC, v, why);
	if ((v = _spank_env(job_ptr, COPUS__ENV_TYPES))) {
		char list[COPUS__TYPES_MAX * (COPUS__TYPE_LEN + 1)];
		char *save = NULL, *t;

		if (copus__parse_types(v, list, sizeof(list), why,
				       sizeof(why))) {
			error("%s: %pJ: ignoring %s=%s: %s", plugin_type,
			      job_ptr, COPUS__ENV_TYPES, v, why);
			return;
		}
		for (t = strtok_r(list, ",", &save);
		     t && j->ntypes < COPUS__TYPES_MAX;
		     t = strtok_r(NULL, ",", &save))
			snprintf(j->types[j->ntypes++], sizeof(j->types[0]),
				 "%s", t);
	}
	j->rigid = j->emax == 0;
}

/* FNV-1a: tells whether a Comment changed since it was last parsed. */
static uint64_t _hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/*
 * Reads the job's hint from its Comment when the Comment changed: a good
 * one replaces the last good one (and feeds the progress rate), a rejected
 * or clamped one is logged once with the parser's message.
 */
static void _job_hint(struct copus_sched *s, job_record_t *job_ptr,
		      struct _info *in)
{
	const char *c = job_ptr->comment;
	char err[256];
	copus_hint h;
	uint64_t hash;
	int rc;

	if (!c || !copus_hint_is_hint(c))
		return;
	hash = _hash(c);
	if (hash == in->comment_hash)
		return;
	in->comment_hash = hash;
	err[0] = '\0';
	rc = copus_hint_parse(c, &h, err, sizeof(err));
	if (rc != COPUS_OK) {
		error("%s: %pJ: ignoring its hint (%s): %s; keeping the last "
		      "good one", plugin_type, job_ptr, copus_strerror(rc),
		      err[0] ? err : "rejected");
		return;
	}
	if (h.job_id != job_ptr->job_id) {
		error("%s: %pJ: ignoring its hint: it names job %u",
		      plugin_type, job_ptr, h.job_id);
		return;
	}
	if (h.clamped)
		error("%s: %pJ: its hint had %d value(s) out of range, "
		      "clamped into range", plugin_type, job_ptr, h.clamped);
	/*
	 * A new run (or the first hint this slurmctld sees) starts a new
	 * measurement; the last rate stands until it has one, so that a job
	 * just restarted keeps its predicted remaining time.
	 */
	if (h.restart_count != in->rate_rc || !in->have_hint ||
	    h.progress < in->base_prog) {
		in->rate_rc = h.restart_count;
		in->base_prog = h.progress;
		in->base_t = (double)h.time;
	} else if ((double)h.time > in->base_t) {
		double rate = (h.progress - in->base_prog) /
			      ((double)h.time - in->base_t);

		/* The rate is saved: again when it moves by a fifth. */
		if (fabs(rate - in->rate) > 0.2 * in->rate)
			s->state_dirty = true;
		in->rate = rate;
	}
	in->hint = h;
	in->have_hint = true;
}

static int _type_index(struct _round *r, const char *name)
{
	int t;

	for (t = 0; t < r->ntypes; t++)
		if (!strcmp(r->types[t], name))
			return t;
	return -1;
}

/* The node's GPUs: configured, allocated, type (first type only). */
static void _node_gpus(struct _round *r, node_record_t *node_ptr, int i)
{
	char type[16] = "gpu";
	int avail = 0, alloc = 0, t;
	ListIterator it;
	gres_state_t *gs;

	if (node_ptr->gres_list) {
		it = list_iterator_create(node_ptr->gres_list);
		while ((gs = list_next(it))) {
			gres_node_state_t *g = gs->gres_data;

			if (!gs->gres_name || strcmp(gs->gres_name, "gpu") ||
			    !g)
				continue;
			avail += (int)g->gres_cnt_avail;
			alloc += (int)g->gres_cnt_alloc;
			if (g->type_cnt > 0 && g->type_name &&
			    g->type_name[0] && g->type_name[0][0])
				snprintf(type, sizeof(type), "%s",
					 g->type_name[0]);
		}
		list_iterator_destroy(it);
	}
	r->nodes[i].gpus = avail;
	r->cfg[i] = avail;
	r->free[i] = avail > alloc ? avail - alloc : 0;
	t = _type_index(r, type);
	if (t < 0 && avail > 0 && r->ntypes < COPUS_MAX_GPU_TYPES) {
		t = r->ntypes++;
		snprintf(r->types[t], sizeof(r->types[t]), "%s", type);
	}
	r->nodes[i].gpu_type = t < 0 ? 0 : t;
	if (t < 0)
		r->nodes[i].gpus = 0;
}

/* The mask of GPU types a job accepts (0: any; -1: none here). */
static int64_t _type_mask(struct _round *r, const struct _rj *j)
{
	uint32_t m = 0;
	int k, t;

	if (j->ntypes) {
		for (k = 0; k < j->ntypes; k++)
			if ((t = _type_index(r, j->types[k])) >= 0)
				m |= 1u << t;
		/* None of its types exists here: it can never run. */
		return m ? (int64_t)m : -1;
	}
	if (j->type_req[0]) {
		t = _type_index(r, j->type_req);
		return t >= 0 ? (int64_t)(1u << t) : -1;
	}
	return 0;
}

static struct _rj *_rj_new(struct _round *r, int *cap)
{
	struct _rj *j;

	if (r->nrj == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		xrecalloc(r->rj, *cap, sizeof(*r->rj));
	}
	j = &r->rj[r->nrj++];
	memset(j, 0, sizeof(*j));
	j->job = -1;
	return j;
}

static void _rj_free(struct _rj *j)
{
	xfree(j->alloc);
	xfree(j->nodelist);
	xfree(j->eligible);
}

/* Frees the snapshot's copies (after _decision_free()). */
static void _snapshot_free(struct _round *r)
{
	int i;

	for (i = 0; i < r->nrj; i++)
		_rj_free(&r->rj[i]);
	xfree(r->rj);
	xfree(r->names);
	xfree(r->free);
	xfree(r->cfg);
	xfree(r->state_dir);
	xfree(r->nodes);
	xfree(r->obs);
	memset(r, 0, sizeof(*r));
}

/* Frees what the decision allocated (the snapshot's copies stay). */
static void _decision_free(struct _round *r)
{
	free(r->jobs);
	free(r->models);
	free(r->model_ptrs);
	free(r->rj_of);
	free(r->dec);
	r->jobs = NULL;
	r->models = NULL;
	r->model_ptrs = NULL;
	r->rj_of = NULL;
	r->dec = NULL;
	r->njobs = 0;
}

/*
 * What the plugin keeps of a job seen in this round; NULL when there is no
 * memory for it.
 */
static struct _info *_job_info(struct copus_sched *s,
			       job_record_t *job_ptr, struct _rj *j,
			       time_t now)
{
	struct _info *in = _info_get(s, job_ptr->job_id);

	if (!in)
		return NULL;
	in->seen = true;
	if (!in->req_gpus) {
		in->req_gpus = j->running && j->rigid ? j->cur_gpus :
			       j->gpn_req * j->nodes_req;
		s->state_dirty = true;
	}
	if (j->running) {
		if (in->last && now > in->last)
			in->attained += (double)j->cur_gpus *
					(double)(now - in->last);
		in->last = now;
		in->last_gpus = j->cur_gpus;
		if (j->cur_gpus > in->max_had) {
			in->max_had = j->cur_gpus;
			s->state_dirty = true;
		}
	} else {
		in->last = 0;
	}
	_job_hint(s, job_ptr, in);
	return in;
}

/* The predictor's attributes of a job: its name and its user. */
static void _job_attrs(job_record_t *job_ptr, char *app, size_t alen,
		       char *user, size_t ulen)
{
	snprintf(app, alen, "%s", job_ptr->name ? job_ptr->name : "");
	/* One line each in the history file. */
	for (; *app; app++)
		if ((unsigned char)*app < ' ')
			*app = ' ';
	snprintf(user, ulen, "%u", (unsigned)job_ptr->user_id);
}

/*
 * A job that completed (exit 0) while the plugin watched it: its total work
 * (the GPU-seconds counted, plus its last stretch) is queued for the
 * predictor, once.
 */
static void _learn(struct copus_sched *s, struct _round *r,
		   job_record_t *job_ptr)
{
	struct _info *in = _info_find(s, job_ptr->job_id);
	copus_history_entry *o;
	double work;

	if (!in)
		return;
	in->seen = true;
	if (in->learned)
		return;
	in->learned = true;
	s->state_dirty = true;
	work = in->attained;
	if (in->last && job_ptr->end_time > in->last)
		work += (double)in->last_gpus *
			(double)(job_ptr->end_time - in->last);
	if (!(work > 0.0) || in->req_gpus < 1)
		return;
	xrecalloc(r->obs, r->nobs + 1, sizeof(*r->obs));
	o = &r->obs[r->nobs++];
	_job_attrs(job_ptr, o->app, sizeof(o->app), o->user, sizeof(o->user));
	o->gpus = in->req_gpus;
	o->batch = in->have_hint ? in->hint.limits.init_batch : 0.0;
	o->work = work;
}

static void _snapshot_running(struct copus_sched *s, struct _round *r,
			      job_record_t *job_ptr, int *cap)
{
	struct _rj *j = _rj_new(r, cap);
	struct _rescale *x;
	struct _info *in;
	int k;

	j->id = job_ptr->job_id;
	j->running = true;
	j->nodes_req = job_ptr->node_cnt ? (int)job_ptr->node_cnt : 1;
	_job_gpus(job_ptr, j);
	_job_options(job_ptr, j);
	_job_alloc(r, job_ptr, j);
	if (j->nalloc == 0) {
		/* No GPUs: nothing for the policy. */
		_rj_free(j);
		r->nrj--;
		return;
	}
	j->alloc_type = r->nodes[j->alloc[0].node].gpu_type;
	for (k = 1; k < j->nalloc; k++)
		if (r->nodes[j->alloc[k].node].gpu_type != j->alloc_type) {
			/* Mixed types (not the plugin's doing): the policy
			 * cannot describe it; its GPUs count as taken. */
			_rj_free(j);
			r->nrj--;
			return;
		}
	j->priority = job_ptr->priority;
	j->submit = job_ptr->details->submit_time;
	j->start = job_ptr->start_time;
	j->restarts = job_ptr->restart_cnt;
	j->nodelist = xstrdup(job_ptr->nodes);
	_job_attrs(job_ptr, j->app, sizeof(j->app), j->user, sizeof(j->user));
	in = _job_info(s, job_ptr, j, r->when);
	x = _rescale_find(s, j->id);
	if (x && !x->gave_up) {
		j->in_rescale = true;
		if (in && in->have_hint &&
		    in->hint.state == COPUS_STATE_CHECKPOINTED &&
		    in->hint.restart_count == j->restarts &&
		    (x->rc < 0 || x->rc == j->restarts)) {
			j->checkpointed = true;
			j->ckpt_step = in->hint.step;
		}
	}
	r->nrunning++;
}

/*
 * Phase 1. job_independent() may update a job's dependency state and
 * reason, so the job lock is a write lock here (as in Slurm's own
 * scheduler); nodes and partitions are only read.
 */
static void _snapshot(struct copus_sched *s, struct _round *r)
{
	slurmctld_lock_t locks = { READ_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK,
				   READ_LOCK };
	struct _parts parts = { 0 };
	node_record_t *node_ptr;
	job_record_t *job_ptr;
	ListIterator it;
	int i, k, cap = 0, *managed;

	lock_slurmctld(locks);
	r->when = time(NULL);
	r->state_dir = xstrdup(slurm_conf.state_save_location);
	r->nnodes = node_record_count;
	r->nodes = xcalloc(r->nnodes + 1, sizeof(*r->nodes));
	r->names = xcalloc(r->nnodes + 1, sizeof(*r->names));
	r->free = xcalloc(r->nnodes + 1, sizeof(*r->free));
	r->cfg = xcalloc(r->nnodes + 1, sizeof(*r->cfg));
	managed = xcalloc(r->nnodes + 1, sizeof(*managed));
	for (i = 0; (node_ptr = next_node(&i)); i++) {
		snprintf(r->names[i], sizeof(r->names[i]), "%s",
			 node_ptr->name);
		_node_gpus(r, node_ptr, i);
		r->nodes[i].usable = avail_node_bitmap &&
				     bit_test(avail_node_bitmap, i) &&
				     !IS_NODE_DRAIN(node_ptr) &&
				     !IS_NODE_FAIL(node_ptr) &&
				     !IS_NODE_NO_RESPOND(node_ptr);
	}
	if (r->ntypes == 0) {
		r->ntypes = 1;
		snprintf(r->types[0], sizeof(r->types[0]), "gpu");
	}
	it = list_iterator_create(job_list);
	while ((job_ptr = list_next(it))) {
		struct job_details *d = job_ptr->details;
		struct _rescale *x;
		struct _info *in;
		struct _rj *j;
		bool startable, requeued = false;

		if (!d)
			continue;
		if (IS_JOB_RUNNING(job_ptr)) {
			_snapshot_running(s, r, job_ptr, &cap);
			continue;
		}
		if (IS_JOB_COMPLETE(job_ptr) && !IS_JOB_COMPLETING(job_ptr)) {
			_learn(s, r, job_ptr);
			continue;
		}
		if (!IS_JOB_PENDING(job_ptr))
			continue;
		if ((in = _info_find(s, job_ptr->job_id)))
			in->seen = true;
		x = _rescale_find(s, job_ptr->job_id);
		if (x && !x->gave_up) {
			/* Requeued for a rescale: the policy decides its
			 * new cell even before it may start again. */
			if (IS_JOB_COMPLETING(job_ptr) ||
			    job_ptr->priority == 0 || !job_ptr->part_ptr)
				continue;
			startable = _job_startable(job_ptr);
		} else if (r->npending < s->params.max_jobs &&
			   _slurm_requeued(job_ptr, r->when)) {
			startable = false;
			requeued = true;
		} else {
			if (r->npending >= s->params.max_jobs ||
			    !_job_startable(job_ptr))
				continue;
			startable = true;
		}
		j = _rj_new(r, &cap);
		j->id = job_ptr->job_id;
		j->priority = job_ptr->priority;
		j->submit = d->submit_time;
		j->end = job_ptr->end_time;
		j->restarts = job_ptr->restart_cnt;
		j->part = _part_index(&parts, job_ptr->part_ptr);
		j->nodes_req = d->min_nodes ? (int)d->min_nodes : 1;
		_job_gpus(job_ptr, j);
		_job_options(job_ptr, j);
		_job_attrs(job_ptr, j->app, sizeof(j->app), j->user,
			   sizeof(j->user));
		/* Slurm's requeue sets the submit time to when it was. */
		if (requeued && j->end < d->submit_time)
			j->end = d->submit_time;
		j->in_rescale = x && !x->gave_up;
		if (j->in_rescale) {
			if (!x->pending_since)
				x->pending_since = r->when;
			/* Requeue sets end_time; should it not, use when the
			 * plugin first saw the job requeued. */
			if (!j->end)
				j->end = x->pending_since;
		}
		j->waits_release = !startable;
		j->eligible = xcalloc(r->nnodes + 1, 1);
		for (i = 0; i < r->nnodes; i++) {
			j->eligible[i] =
				bit_test(job_ptr->part_ptr->node_bitmap, i) &&
				!(d->exc_node_bitmap &&
				  bit_test(d->exc_node_bitmap, i)) &&
				!(d->req_node_bitmap &&
				  !bit_test(d->req_node_bitmap, i));
			if (job_ptr->resv_ptr && job_ptr->resv_ptr->node_bitmap &&
			    !bit_test(job_ptr->resv_ptr->node_bitmap, i))
				j->eligible[i] = 0;
		}
		if (j->gpn_req > 0)
			_job_info(s, job_ptr, j, r->when);
		r->npending++;
	}
	list_iterator_destroy(it);
	unlock_slurmctld(locks);
	/*
	 * The policy may use the free GPUs and those of the elastic jobs it
	 * moves. Running rigid jobs are never moved, so it does not see them
	 * (it would otherwise be free to queue them): their GPUs are taken.
	 */
	for (i = 0; i < r->nrj; i++)
		for (k = 0; !r->rj[i].rigid && k < r->rj[i].nalloc; k++)
			managed[r->rj[i].alloc[k].node] += r->rj[i].alloc[k].gpus;
	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i].gpus > r->free[i] + managed[i])
			r->nodes[i].gpus = r->free[i] + managed[i];
	xfree(managed);
	xfree(parts.v);
}

/* Sorts pointers to a round's jobs: partition, priority, submission, id. */
static int _rj_order(const void *a, const void *b)
{
	const struct _rj *x = *(const struct _rj *const *)a;
	const struct _rj *y = *(const struct _rj *const *)b;

	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Whether a rigid pending job could ever run on its eligible nodes. */
static bool _ever_fits(struct _round *r, const struct _rj *j, int64_t mask)
{
	int i, n = 0;

	for (i = 0; i < r->nnodes; i++) {
		if (j->eligible[i] && r->cfg[i] >= j->gpn_req &&
		    (!mask || (mask & (1LL << r->nodes[i].gpu_type))))
			n++;
	}
	return n >= j->nodes_req;
}

/* Fills the policy's input entry of rj[i]. */
static void _input_job(struct copus_sched *s, struct _round *r, int i,
		       uint32_t mask)
{
	struct _rj *j = &r->rj[i];
	copus_job *c = &r->jobs[r->njobs];
	struct _info *in = _info_find(s, j->id);

	memset(c, 0, sizeof(*c));
	c->id = j->id;
	c->elastic = !j->rigid;
	if (j->rigid) {
		c->req_gpus = j->running ? j->cur_gpus :
					   j->gpn_req * j->nodes_req;
		c->min_gpus = c->max_gpus = c->req_gpus;
	} else {
		c->min_gpus = j->emin;
		c->max_gpus = j->emax;
		c->req_gpus = in && in->req_gpus > 0 ? in->req_gpus :
			      j->gpn_req * j->nodes_req;
		if (c->req_gpus < 1)
			c->req_gpus = j->emin;
	}
	c->type_mask = mask;
	c->submit_time = (double)j->submit;
	c->restarts = j->restarts;
	c->attained = in ? in->attained : 0.0;
	c->priority = (double)j->priority;
	c->remaining = -1.0;
	c->max_gpus_had = in ? in->max_had : 0;
	if (in && in->have_hint) {
		const copus_model **ptrs = &r->model_ptrs[(size_t)r->njobs *
							  r->ntypes];

		c->req_batch = in->hint.limits.init_batch;
		c->remaining = copus__remaining(&in->hint, in->rate);
		if (copus__hint_models(&in->hint, r->type_ptrs, r->ntypes,
				       &r->models[(size_t)r->njobs * r->ntypes],
				       ptrs) > 0)
			c->models = (const copus_model *const *)ptrs;
	}
	if (j->running) {
		c->alloc = j->alloc;
		c->alloc_slots = j->nalloc;
		c->alloc_type = j->alloc_type;
	} else {
		c->alloc_type = -1;
	}
	j->job = r->njobs;
	r->rj_of[r->njobs++] = i;
}

/*
 * The completed jobs the predictor learned from, kept across slurmctld
 * restarts in StateSaveLocation/copus_history: a first line naming the
 * format, then one line per job, "WORK GPUS BATCH USER NAME" (the name last,
 * as it may hold spaces), appended and flushed as jobs complete. At start
 * the most recent _HISTORY_KEEP jobs go back to the predictor in one
 * training; a line that does not parse (a write cut short by a crash) is
 * logged with its number and skipped; a file grown to twice that many lines
 * (at start or as jobs complete) is rewritten with the kept jobs (beside,
 * flushed, renamed).
 */
#define _HISTORY_FILE "copus_history"
#define _HISTORY_KEEP 4096

static void _history_load(struct copus_sched *s, const char *dir,
			  bool learn);

/* One history line. */
static void _history_fmt(char **buf, const copus_history_entry *o)
{
	char line[160];

	if (copus_history_format(o, line, sizeof(line)) == COPUS_OK)
		xstrcat(*buf, line);
}

static void _history_append(struct copus_sched *s, const char *dir,
			    const copus_history_entry *o, int n)
{
	char *path, *buf = NULL;
	int fd, i;
	struct stat st;

	if (!dir || n <= 0)
		return;
	path = xstrdup_printf("%s/%s", dir, _HISTORY_FILE);
	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &st)) {
		error("%s: cannot record completed jobs in %s: %m",
		      plugin_type, path);
		goto out;
	}
	if (st.st_size == 0) {
		xstrfmtcat(buf, "%s\n", COPUS_HISTORY_MAGIC);
	} else {
		/* After a write cut short, start on a line of its own. */
		char last = '\n';

		if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
			xstrcat(buf, "\n");
	}
	for (i = 0; i < n; i++)
		_history_fmt(&buf, &o[i]);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf) || fsync(fd))
		error("%s: cannot record completed jobs in %s: %m",
		      plugin_type, path);
	s->history_lines += n;
out:
	if (fd >= 0)
		close(fd);
	xfree(buf);
	xfree(path);
	if (s->history_lines > 2 * _HISTORY_KEEP)
		_history_load(s, dir, false);
}

/*
 * Reads the history: gives it to the predictor when learn is set, and
 * rewrites the file with the kept jobs when it holds more than twice as
 * many lines.
 */
static void _history_load(struct copus_sched *s, const char *dir,
			  bool learn)
{
	char *path, *buf = NULL, line[256];
	copus_history_entry *ring = NULL;
	copus_job_attrs *attrs = NULL;
	double *work = NULL;
	long total = 0, bad = 0;
	int lineno = 0, n, i, rc;
	FILE *f;

	if (!dir || (learn && !s->predictor))
		return;
	path = xstrdup_printf("%s/%s", dir, _HISTORY_FILE);
	if (!(f = fopen(path, "r"))) {
		if (errno != ENOENT)
			error("%s: cannot read %s: %m", plugin_type, path);
		xfree(path);
		return;
	}
	ring = xcalloc(_HISTORY_KEEP, sizeof(*ring));
	while (fgets(line, sizeof(line), f)) {
		const char *why = NULL;
		copus_history_entry o;

		if (++lineno == 1) {
			if (strcmp(line, COPUS_HISTORY_MAGIC "\n")) {
				error("%s: %s line 1: not a copus history "
				      "(expected \"%s\"); not used",
				      plugin_type, path, COPUS_HISTORY_MAGIC);
				s->history_lines = 0;
				goto out;
			}
			continue;
		}
		if (copus_history_parse(line, &o, &why) != COPUS_OK) {
			if (++bad <= 10 && learn)
				error("%s: %s line %d: %s; skipped", plugin_type,
				      path, lineno, why);
			/* The rest of an over-long line. */
			while (!strchr(line, '\n') &&
			       fgets(line, sizeof(line), f))
				;
			continue;
		}
		ring[total++ % _HISTORY_KEEP] = o;
	}
	n = total < _HISTORY_KEEP ? (int)total : _HISTORY_KEEP;
	s->history_lines = total + bad;
	attrs = xcalloc(n + 1, sizeof(*attrs));
	work = xcalloc(n + 1, sizeof(*work));
	for (i = 0; i < n; i++) {
		copus_history_entry *o = &ring[(total - n + i) %
					       _HISTORY_KEEP];

		attrs[i] = copus_history_attrs(o);
		work[i] = o->work;
		if (s->history_lines > 2 * _HISTORY_KEEP)
			_history_fmt(&buf, o);
	}
	if (learn) {
		rc = copus_predictor_add_many(s->predictor, attrs, work,
					      (size_t)n);
		if (rc != COPUS_OK)
			error("%s: %s: the predictor refused the history: %s",
			      plugin_type, path, copus_strerror(rc));
		else
			info("%s: predictor: %d completed job(s) from %s (%ld "
			     "line(s) skipped)", plugin_type, n, path, bad);
	}
	if (s->history_lines > 2 * _HISTORY_KEEP) {
		FILE *w = _replace_begin(path);

		if (w) {
			fprintf(w, "%s\n%s", COPUS_HISTORY_MAGIC, buf ? buf : "");
			if (_replace_end(w, path) == 0)
				s->history_lines = n;
		}
	}
out:
	fclose(f);
	xfree(ring);
	xfree(attrs);
	xfree(work);
	xfree(buf);
	xfree(path);
}

/*
 * Gives the predictor the jobs that completed (obs, from the snapshot) and
 * appends them to copus_history.
 */
static void _history_learn(struct copus_sched *s, const char *dir,
			   const copus_history_entry *obs, int nobs)
{
	int i, rc;

	if (!s->predictor)
		return;
	for (i = 0; i < nobs; i++) {
		copus_job_attrs a = copus_history_attrs(&obs[i]);

		rc = copus_predictor_add(s->predictor, &a, obs[i].work);
		if (rc != COPUS_OK)
			verbose("%s: predictor: cannot learn a job of %s: %s",
				plugin_type, obs[i].app, copus_strerror(rc));
	}
	_history_append(s, dir, obs, nobs);
	if (nobs)
		debug("%s: predictor: %zu completed job(s) known, trained %zu "
		      "time(s)", plugin_type,
		      copus_predictor_count(s->predictor),
		      copus_predictor_trainings(s->predictor));
}

/*
 * Predicts the remaining time of the input jobs whose hints give none: the
 * predicted total work minus the GPU-seconds received, in seconds on the
 * job's request. Nothing before the predictor has seen a completed job (the
 * jobs stay "unknown"). r->predict_rc tells why the predictor gave nothing.
 */
static void _predict(struct copus_sched *s, struct _round *r)
{
	copus_job_attrs *attrs;
	double *done, *left;
	int *which, i, n = 0;

	if (!s->predictor || !copus_predictor_count(s->predictor) ||
	    !r->njobs)
		return;
	attrs = calloc(r->njobs, sizeof(*attrs));
	done = calloc(r->njobs, sizeof(*done));
	left = calloc(r->njobs, sizeof(*left));
	which = calloc(r->njobs, sizeof(*which));
	if (!attrs || !done || !left || !which) {
		r->predict_rc = COPUS_ENOMEM;
		goto out;
	}
	for (i = 0; i < r->njobs; i++) {
		copus_job *c = &r->jobs[i];
		const struct _rj *j = &r->rj[r->rj_of[i]];

		if (c->remaining >= 0.0)
			continue;
		attrs[n].application = j->app;
		attrs[n].user = j->user;
		attrs[n].gpus = c->req_gpus;
		attrs[n].batch = c->req_batch;
		done[n] = c->attained;
		which[n++] = i;
	}
	if (n)
		r->predict_rc = copus_predictor_remaining_many(s->predictor,
							       attrs, done, n,
							       left);
	if (n && r->predict_rc == COPUS_OK)
		for (i = 0; i < n; i++)
			if (isfinite(left[i]) && left[i] >= 0.0)
				r->jobs[which[i]].remaining =
					left[i] / r->jobs[which[i]].req_gpus;
out:
	free(attrs);
	free(done);
	free(left);
	free(which);
}

/*
 * Whether a rigid job fits the free GPUs left in avail[] (usable nodes it
 * may use, of a type it accepts), best fit; if so they are taken from
 * avail[]. pick: room for the nodes picked, one per node at most.
 */
static bool _reserve(struct _round *r, const struct _rj *j, int64_t mask,
		     int *avail, int *pick)
{
	int k, i, got = 0;

	for (k = 0; k < j->nodes_req; k++) {
		int best = -1;

		for (i = 0; i < r->nnodes; i++) {
			bool taken = false;
			int m;

			for (m = 0; m < got; m++)
				taken |= pick[m] == i;
			if (taken || !r->nodes[i].usable || !j->eligible[i] ||
			    avail[i] < j->gpn_req ||
			    (mask && !(mask & (1LL << r->nodes[i].gpu_type))))
				continue;
			if (best < 0 || avail[i] < avail[best])
				best = i;
		}
		if (best < 0)
			break;
		pick[got++] = best;
	}
	if (got == j->nodes_req)
		for (k = 0; k < got; k++)
			avail[pick[k]] -= j->gpn_req;
	return got == j->nodes_req;
}

/*
 * Builds the policy's input: every running GPU job, every pending elastic
 * job, and per partition the rigid pending jobs in priority order as long
 * as they fit the free GPUs together (each the GPUs of its type on nodes it
 * may use), plus the first that does not when it heads its partition (the
 * policy may shrink elastic jobs for it). All the rigid jobs handed to the
 * policy can start at once, so the policy cannot start one before a job of
 * higher priority; the others wait with a reason.
 */
static void _build_input(struct copus_sched *s, struct _round *r)
{
	struct _rj **order;
	int n = 0, i, t, part = -1, *avail, *pick;
	bool blocked = false, head = true;

	for (t = 0; t < r->ntypes; t++)
		r->type_ptrs[t] = r->types[t];
	r->jobs = calloc(r->nrj + 1, sizeof(*r->jobs));
	r->rj_of = calloc(r->nrj + 1, sizeof(*r->rj_of));
	r->models = calloc((size_t)(r->nrj + 1) * r->ntypes,
			   sizeof(*r->models));
	r->model_ptrs = calloc((size_t)(r->nrj + 1) * r->ntypes,
			       sizeof(*r->model_ptrs));
	order = calloc(r->nrj + 1, sizeof(*order));
	avail = calloc(r->nnodes + 1, sizeof(*avail));
	pick = calloc(r->nnodes + 1, sizeof(*pick));
	if (!r->jobs || !r->rj_of || !r->models || !r->model_ptrs || !order ||
	    !avail || !pick) {
		snprintf(r->error, sizeof(r->error), "out of memory for the "
			 "policy's input");
		goto out;
	}
	for (i = 0; i < r->nrj; i++) {
		struct _rj *j = &r->rj[i];
		int64_t mask;

		if (j->running && j->rigid)
			continue;
		if (j->running) {
			mask = _type_mask(r, j);
			/* It runs where it runs: its own type is allowed. */
			if (mask > 0)
				mask |= 1LL << j->alloc_type;
			_input_job(s, r, i, mask < 0 ? 0 : (uint32_t)mask);
			continue;
		}
		if (j->gpn_req == 0) {
			j->action = _START;	/* no GPUs: Slurm places it */
			continue;
		}
		mask = _type_mask(r, j);
		if (mask < 0) {
			j->reason = "copus: none of its GPU types is in the "
				    "cluster";
			j->never = true;
			continue;
		}
		if (j->rigid && !_ever_fits(r, j, mask)) {
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: no %d node(s) it may use have %d "
				 "GPU(s) of its type each", j->nodes_req,
				 j->gpn_req);
			j->reason = j->reason_buf;
			j->never = true;
			continue;
		}
		if (!j->rigid) {
			_input_job(s, r, i, (uint32_t)mask);
			continue;
		}
		order[n++] = j;
	}
	qsort(order, n, sizeof(*order), _rj_order);
	memcpy(avail, r->free, r->nnodes * sizeof(*avail));
	for (i = 0; i < n; i++) {
		struct _rj *j = order[i];
		int64_t mask = _type_mask(r, j);

		if (j->part != part) {
			part = j->part;
			blocked = false;
			head = true;
		}
		if (!blocked && !_reserve(r, j, mask, avail, pick)) {
			/* The first job that does not fit ends the list. */
			blocked = true;
			if (head) {
				_input_job(s, r, j - r->rj, (uint32_t)mask);
				continue;
			}
		}
		head = false;
		if (blocked) {
			j->reason = "copus: a job of higher priority in the "
				    "partition starts first";
			continue;
		}
		_input_job(s, r, j - r->rj, (uint32_t)mask);
	}
	_predict(s, r);
out:
	free(pick);
	free(avail);
	free(order);
}

/*
 * Phase 2: the decision, outside every lock. Why the policy did not run,
 * if it did not, is in r->error.
 */
static void _decide(struct copus_sched *s, struct _round *r)
{
	copus_cluster c;
	long bad = -1;
	int rc;

	_build_input(s, r);
	if (!r->njobs || !s->policy)
		return;
	memset(&c, 0, sizeof(c));
	c.num_nodes = r->nnodes;
	c.nodes = r->nodes;
	c.num_types = r->ntypes;
	c.type_names = r->type_ptrs;
	r->dec = calloc(r->njobs + 1, sizeof(*r->dec));
	if (!r->dec) {
		snprintf(r->error, sizeof(r->error), "out of memory for the "
			 "decisions");
		return;
	}
	rc = copus_policy_decide(s->policy, &c, r->jobs, r->njobs,
				 (double)r->when, r->dec);
	if (rc != COPUS_OK) {
		copus_policy_check_input(&c, r->jobs, r->njobs, &bad);
		snprintf(r->error, sizeof(r->error), "the %s policy failed "
			 "(%s) on job %u", s->params.policy, copus_strerror(rc),
			 bad >= 0 ? (unsigned)r->jobs[bad].id : 0u);
		return;
	}
	r->decided = 1;
}

/*
 * Whether the policy moves a running job to other nodes in the same shape
 * only when that is worth its restart (copus: to make room for a job that
 * does not fit otherwise). Other policies may place a job anew every round;
 * for them such a move is not worth a restart and is left undone.
 */
static bool _policy_moves(struct copus_sched *s)
{
	return copus_policy_traits(s->policy)->moves_jobs;
}

static bool _rj_same_cell(struct _round *r, const struct _rj *j)
{
	return j->per_node * j->num_nodes == j->cur_gpus &&
	       j->num_nodes == j->nalloc && j->dtype == j->alloc_type;
}

/* Turns the decisions into actions and reasons (no locks). */
static void _plan(struct copus_sched *s, struct _round *r)
{
	int i;

	for (i = 0; r->decided && i < r->njobs; i++) {
		const copus_decision *d = &r->dec[i];
		struct _rj *j = &r->rj[r->rj_of[i]];
		struct _info *in = _info_find(s, j->id);
		struct _rescale *x = _rescale_find(s, j->id);

		if (in)
			snprintf(in->reason, sizeof(in->reason), "%s",
				 d->reason);
		j->dtype = d->gpu_type;
		j->per_node = copus__slots_per_node(d->slots, d->num_slots);
		j->num_nodes = d->num_slots;
		if (j->running) {
			/* Queued (d->gpu_type < 0): it checkpoints and waits
			 * in the queue for the policy to start it again. */
			if (!d->changed || (d->gpu_type >= 0 && j->per_node < 1))
				continue;
			if (j->checkpointed) {
				if (x && !x->requeue_sent)
					j->action = _REQUEUE;
				continue;
			}
			if (x || (d->gpu_type >= 0 && _rj_same_cell(r, j) &&
				  !_policy_moves(s)) ||
			    r->when - j->start < s->params.restart_delay)
				continue;
			j->action = _ASK;
			continue;
		}
		if (d->gpu_type < 0) {
			snprintf(j->reason_buf, sizeof(j->reason_buf),
				 "copus: %s", d->reason);
			j->reason = j->reason_buf;
			continue;
		}
		if (j->rigid ||
		    (j->per_node == j->gpn_req && j->num_nodes == j->nodes_req &&
		     (!j->type_req[0] ||
		      !strcmp(j->type_req, r->types[j->dtype])))) {
			if (!j->waits_release) {
				j->action = _START;
				continue;
			}
		}
		if (j->restarts > 0 && r->when < j->end + _RELEASE_GAP) {
			j->reason = "copus: requeued, restarts in a moment";
			continue;
		}
		if (j->rigid) {
			j->reason = "copus: waiting for its begin time";
			continue;
		}
		j->action = _RESIZE;
		snprintf(j->reason_buf, sizeof(j->reason_buf),
			 "copus: starts with %d %s GPU(s) on %d node(s)",
			 j->per_node * j->num_nodes, r->types[j->dtype],
			 j->num_nodes);
		j->reason = j->reason_buf;
	}
	/* Running jobs the policy ran without: rescale bookkeeping. */
	for (i = 0; i < r->nrj; i++) {
		struct _rj *j = &r->rj[i];
		struct _rescale *x;

		if (!j->running || !j->in_rescale || j->action != _NONE)
			continue;
		x = _rescale_find(s, j->id);
		if (j->checkpointed && x && !x->requeue_sent)
			j->action = _REQUEUE;
	}
}

static void _set_reason(job_record_t *job_ptr, uint32_t reason,
			const char *desc)
{
	if (job_ptr->state_reason == reason && job_ptr->state_desc &&
	    !xstrcmp(job_ptr->state_desc, desc))
		return;
	job_ptr->state_reason = reason;
	xfree(job_ptr->state_desc);
	job_ptr->state_desc = xstrdup(desc);
	last_job_update = time(NULL);
}

/*
 * Starts one job on the decided nodes, as backfill's _start_job() does.
 * allow: the nodes it may use (NULL: wherever Slurm places it).
 */
static int _start(job_record_t *job_ptr, const struct _rj *j,
		  bitstr_t *allow)
{
	bitstr_t *orig_exc = NULL, *avoid = NULL;
	int rc;

	if (allow) {
		avoid = bit_copy(allow);
		bit_not(avoid);
		if (job_ptr->details->exc_node_bitmap) {
			orig_exc = bit_copy(job_ptr->details->exc_node_bitmap);
			bit_or(job_ptr->details->exc_node_bitmap, avoid);
		} else {
			job_ptr->details->exc_node_bitmap = bit_copy(avoid);
		}
	}
	rc = select_nodes(job_ptr, false, NULL, NULL, false,
			  SLURMDB_JOB_FLAG_SCHED);
	if (allow) {
		/* select_nodes() may have replaced the bitmap: restore. */
		FREE_NULL_BITMAP(job_ptr->details->exc_node_bitmap);
		job_ptr->details->exc_node_bitmap = orig_exc;
		FREE_NULL_BITMAP(avoid);
	}
	if (rc != SLURM_SUCCESS) {
		verbose("%s: %pJ could not start on the chosen nodes: %s",
			plugin_type, job_ptr, slurm_strerror(rc));
		return rc;
	}
	last_job_update = time(NULL);
	if (j->emax)
		info("%s: started %pJ (elastic %d-%d GPUs%s%s) in %s on %s",
		     plugin_type, job_ptr, j->emin, j->emax,
		     j->ntypes ? ", types " : "",
		     j->ntypes ? _spank_env(job_ptr, COPUS__ENV_TYPES) : "",
		     job_ptr->part_ptr->name, job_ptr->nodes);
	else
		info("%s: started %pJ in %s on %s", plugin_type, job_ptr,
		     job_ptr->part_ptr->name, job_ptr->nodes);
	if (job_ptr->batch_flag == 0)
		srun_allocate(job_ptr);
	else if (!IS_JOB_CONFIGURING(job_ptr))
		launch_job(job_ptr);
	return SLURM_SUCCESS;
}

/* The nodes a pending job may start on for its decision. */
static bitstr_t *_allowed(struct _round *r, const struct _rj *j)
{
	const copus_decision *d = &r->dec[j->job];
	bitstr_t *b = bit_alloc(node_record_count);
	bool exact = d->num_slots == j->nodes_req;
	int k;

	for (k = 0; exact && k < d->num_slots; k++)
		if (d->slots[k].gpus < j->gpn_req ||
		    !j->eligible[d->slots[k].node])
			exact = false;
	if (exact) {
		for (k = 0; k < d->num_slots; k++)
			bit_set(b, d->slots[k].node);
		return b;
	}
	/*
	 * A rigid job placed other than it asked (for example 4 GPUs on two
	 * nodes for 2 nodes x 2, or on a node outside its partition): any
	 * node of the decided type it may use, Slurm picks.
	 */
	for (k = 0; k < r->nnodes; k++)
		if (j->eligible[k] && r->nodes[k].gpu_type == j->dtype)
			bit_set(b, k);
	return b;
}

/* Phase 3: starts and reasons under the write locks. */
static void _act(struct _round *r)
{
	slurmctld_lock_t locks = { READ_LOCK, WRITE_LOCK, WRITE_LOCK,
				   READ_LOCK, READ_LOCK };
	int i, started = 0;

	lock_slurmctld(locks);
	if (node_record_count != r->nnodes) {
		/* Nodes were reconfigured during the decision: next round. */
		unlock_slurmctld(locks);
		return;
	}
	for (i = 0; i < r->nrj; i++) {
		struct _rj *j = &r->rj[i];
		job_record_t *job_ptr;
		bitstr_t *allow = NULL;

		if (j->running || (j->action != _START && !j->reason))
			continue;
		job_ptr = find_job_record(j->id);
		/* Jobs change while the locks are free: check again. */
		if (!job_ptr || !IS_JOB_PENDING(job_ptr) ||
		    job_ptr->priority == 0 || IS_JOB_COMPLETING(job_ptr) ||
		    !job_ptr->details || !job_ptr->part_ptr) {
			j->action = _NONE;
			continue;
		}
		if (j->action != _START) {
			_set_reason(job_ptr, j->never ? FAIL_BAD_CONSTRAINTS :
				    strstr(j->reason, "higher priority") ?
				    WAIT_PRIORITY : WAIT_RESOURCES, j->reason);
			continue;
		}
		if (j->job >= 0)
			allow = _allowed(r, j);
		if (_start(job_ptr, j, allow) == SLURM_SUCCESS) {
			started++;
		} else {
			j->action = _NONE;
			_set_reason(job_ptr, WAIT_RESOURCES,
				    "copus: its decided nodes were not free");
		}
		FREE_NULL_BITMAP(allow);
	}
	unlock_slurmctld(locks);
	if (started) {
		/* Save the started jobs at once, as Slurm's own scheduler
		 * does: a slurmctld that dies before its periodic save would
		 * otherwise recover them as pending while they run. */
		schedule_node_save();
		schedule_job_save();
		debug("%s: round started %d job(s)", plugin_type, started);
	}
}

/* True when (id, tres, nodes) was requested within the last interval. */
static bool _resize_repeated(struct copus_sched *s, uint32_t id,
			     const char *tres, uint32_t nodes, time_t now)
{
	unsigned k = id % _RESIZE_MEMO;

	if (s->resize_memo[k].id == id && s->resize_memo[k].nodes == nodes &&
	    !strcmp(s->resize_memo[k].tres, tres) &&
	    now - s->resize_memo[k].when < s->params.interval)
		return true;
	s->resize_memo[k].id = id;
	s->resize_memo[k].nodes = nodes;
	snprintf(s->resize_memo[k].tres, sizeof(s->resize_memo[k].tres), "%s",
		 tres);
	s->resize_memo[k].when = now;
	return false;
}

/* A GPU request entry with no count left (list_delete_all callback). */
static int _gres_unrequested(void *x, void *key)
{
	gres_state_t *gs = x;
	gres_job_state_t *g = gs->gres_data;

	return g && !g->gres_per_job && !g->gres_per_node &&
	       !g->gres_per_socket && !g->gres_per_task;
}

/*
 * Clears a pending job's GPU request so that a request of another GPU type
 * (or an untyped one) can be set. A job update that clears tres_per_node
 * keeps every entry of gres_list_req with a count of zero, and a zero entry
 * of the old type still makes the job need that type on every node: a job
 * moved from a100 to t4 would be "never runnable" on the t4 nodes. The
 * update clears the counts (and Slurm's own bookkeeping); the entries left
 * with no count are then dropped under the job write lock.
 */
static void _clear_gpu_request(uint32_t id)
{
	slurmctld_lock_t locks = { NO_LOCK, WRITE_LOCK, NO_LOCK, NO_LOCK,
				   NO_LOCK };
	job_desc_msg_t desc;
	job_record_t *job_ptr;
	int dropped = 0;

	slurm_init_job_desc_msg(&desc);
	desc.job_id = id;
	desc.tres_per_node = "";
	desc.tres_per_job = "";
	if (slurm_update_job(&desc) != SLURM_SUCCESS) {
		verbose("%s: JobId=%u: cannot clear its GPU request: %m",
			plugin_type, id);
		return;
	}
	lock_slurmctld(locks);
	job_ptr = find_job_record(id);
	if (job_ptr && IS_JOB_PENDING(job_ptr) && job_ptr->gres_list_req) {
		dropped = list_delete_all(job_ptr->gres_list_req,
					  _gres_unrequested, NULL);
		if (!list_count(job_ptr->gres_list_req))
			FREE_NULL_LIST(job_ptr->gres_list_req);
	}
	unlock_slurmctld(locks);
	debug("%s: JobId=%u: GPU request cleared (%d entr%s dropped)",
	      plugin_type, id, dropped, dropped == 1 ? "y" : "ies");
}

/*
 * Phase 4, outside every lock (slurmctld's own RPCs, as scontrol would):
 * new requests for pending elastic jobs, checkpoint requests, requeues of
 * checkpointed jobs, and the rescale table's bookkeeping.
 */
static void _requests(struct copus_sched *s, struct _round *r)
{
	time_t now = time(NULL);
	int i;

	for (i = 0; i < r->nrj; i++) {
		struct _rj *j = &r->rj[i];
		struct _rescale *x = _rescale_find(s, j->id);
		job_desc_msg_t desc;
		char tres[64];

		switch (j->action) {
		case _RESIZE:
			snprintf(tres, sizeof(tres), "gres:gpu:%s:%d",
				 r->types[j->dtype], j->per_node);
			if (_resize_repeated(s, j->id, tres,
					     (uint32_t)j->num_nodes, now)) {
				debug("%s: JobId=%u: %d node(s) x %s was set "
				      "already; waiting", plugin_type, j->id,
				      j->num_nodes, tres);
				break;
			}
			/*
			 * An update merges a GPU request into the old one: a
			 * new type, or a request that was not a plain count
			 * per node (--gpus, --gpus-per-task), is set on a
			 * cleared request.
			 */
			if (strcmp(j->type_req, r->types[j->dtype]) ||
			    j->gpu_entries > 1 || j->gpu_entries_other)
				_clear_gpu_request(j->id);
			slurm_init_job_desc_msg(&desc);
			desc.job_id = j->id;
			desc.tres_per_node = tres;
			desc.min_nodes = desc.max_nodes = j->num_nodes;
			/* Without this a requeued job waits two minutes. */
			desc.begin_time = now;
			if (slurm_update_job(&desc) != SLURM_SUCCESS)
				error("%s: JobId=%u: cannot set its request to "
				      "%d node(s) x %s: %m", plugin_type, j->id,
				      j->num_nodes, tres);
			else {
				info("%s: JobId=%u set to %d node(s) x %s%s",
				     plugin_type, j->id, j->num_nodes, tres,
				     x ? " after its checkpoint" : "");
				s->again = true;
			}
			break;
		case _ASK:
			if (s->nrescales == _RESCALE_MAX)
				break;
			if (slurm_kill_job(j->id, COPUS_RESCALE_SIGNAL,
					   KILL_FULL_JOB) != SLURM_SUCCESS) {
				error("%s: JobId=%u: cannot ask it to "
				      "checkpoint: %m", plugin_type, j->id);
				break;
			}
			x = &s->rescales[s->nrescales++];
			s->state_dirty = true;
			memset(x, 0, sizeof(*x));
			x->id = j->id;
			x->asked = now;
			x->rc = j->restarts;
			x->from = j->cur_gpus;
			x->to = j->dtype >= 0 ? j->per_node * j->num_nodes : 0;
			snprintf(x->type, sizeof(x->type), "%s",
				 j->dtype >= 0 ? r->types[j->dtype] : "-");
			info("%s: JobId=%u asked to checkpoint to go from %d %s "
			     "GPU(s) to %d %s GPU(s) on %d node(s) (%s)",
			     plugin_type, j->id, j->cur_gpus,
			     r->types[j->alloc_type], x->to, x->type,
			     j->num_nodes, r->dec[j->job].reason);
			break;
		case _REQUEUE:
			if (!x)
				break;
			x->requeue_sent = true;
			if (slurm_requeue(j->id, 0) != SLURM_SUCCESS &&
			    errno != ESLURM_JOB_PENDING)
				verbose("%s: JobId=%u: requeue: %m (it may "
					"have requeued itself)", plugin_type,
					j->id);
			info("%s: JobId=%u checkpointed at step %lld %lds "
			     "after the request; requeued", plugin_type, j->id,
			     (long long)j->ckpt_step, (long)(now - x->asked));
			break;
		default:
			break;
		}
	}
	/* The rescale table: restarted, vanished, late and stale entries. */
	for (i = 0; i < s->nrescales;) {
		struct _rescale *x = &s->rescales[i];
		struct _rj *j = NULL;
		int k;

		for (k = 0; k < r->nrj && !j; k++)
			if (r->rj[k].id == x->id)
				j = &r->rj[k];
		if (x->gave_up) {
			if (now - x->asked > s->params.ckpt_deadline +
					     s->params.restart_delay)
				_rescale_drop(s, x);
			else
				i++;
			continue;
		}
		if (j && j->running &&
		    (x->rc >= 0 ? j->restarts > x->rc : j->start > x->asked)) {
			info("%s: JobId=%u restarted with %d %s GPU(s) %lds "
			     "after it was asked to checkpoint", plugin_type,
			     x->id, j->cur_gpus, r->types[j->alloc_type],
			     (long)(j->start - x->asked));
			_rescale_drop(s, x);
			continue;
		}
		if (j && j->running && !j->checkpointed &&
		    now - x->asked > s->params.ckpt_deadline) {
			info("%s: JobId=%u did not checkpoint within %ds; "
			     "left running with %d GPU(s)", plugin_type,
			     x->id, s->params.ckpt_deadline, x->from);
			x->gave_up = true;
			s->state_dirty = true;
			i++;
			continue;
		}
		if (!j && now - x->asked > 2 * s->params.ckpt_deadline + 60) {
			/* Gone, held or finished: nothing left to do. */
			_rescale_drop(s, x);
			continue;
		}
		i++;
	}
}

/* Text of the job's kind: "rigid" or "elastic:MIN-MAX". */
static void _kind(const struct _rj *j, char *buf, size_t len)
{
	if (j->rigid)
		snprintf(buf, len, "rigid");
	else
		snprintf(buf, len, "elastic:%d-%d", j->emin, j->emax);
}

/*
 * The admin's view of the last round: StateSaveLocation/copus_status, a
 * comment line with the round's figures, a header, then one line per job
 * (running, then pending), tab-separated (copusctl prints it as a table);
 * replaced atomically (written beside, flushed, renamed) so that a reader
 * never sees half a file.
 */
static void _write_status(struct copus_sched *s, struct _round *r)
{
	char *path = NULL, when[32], kind[32], nodes[256];
	char speed[16], left[16];
	struct tm tm;
	FILE *f = NULL;
	int i, k, pass;

	if (!r->state_dir)
		return;
	path = xstrdup_printf("%s/copus_status", r->state_dir);
	if (!(f = _replace_begin(path))) {
		xfree(path);
		return;
	}
	localtime_r(&r->when, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "# sched/copus round at %s (every %d s, policy %s): %d "
		"pending considered, %d running; took %.3f ms (snapshot %.3f, "
		"decision %.3f, actions %.3f)%s%s\n", when, s->params.interval,
		s->params.policy, r->npending, r->nrunning,
		r->t_snap + r->t_decide + r->t_act, r->t_snap, r->t_decide,
		r->t_act, r->error[0] ? "; " : "", r->error);
	fprintf(f, "JOBID\tSTATE\tKIND\tTYPE\tGPUS\tNODES\tSPEEDUP\t"
		"REMAINING\tDECISION\tNODELIST\n");
	for (pass = 0; pass < 2; pass++)
	for (i = 0; i < r->nrj; i++) {
		const struct _rj *j = &r->rj[i];
		const copus_decision *d =
			r->decided && j->job >= 0 ? &r->dec[j->job] : NULL;
		const copus_job *c = j->job >= 0 ? &r->jobs[j->job] : NULL;
		const char *state, *type, *reason;
		int gpus, nn, t;

		if (j->running != (pass == 0))
			continue;
		_kind(j, kind, sizeof(kind));
		snprintf(nodes, sizeof(nodes), "-");
		if (j->running) {
			state = j->in_rescale ? "RESCALING" : "RUNNING";
			t = j->alloc_type;
			gpus = j->cur_gpus;
			nn = j->nalloc;
			snprintf(nodes, sizeof(nodes), "%s",
				 j->nodelist ? j->nodelist : "-");
		} else if (d && d->gpu_type >= 0) {
			state = j->action == _START ? "STARTING" : "PENDING";
			t = d->gpu_type;
			gpus = j->per_node * j->num_nodes;
			nn = j->num_nodes;
			if (j->action == _START) {
				nodes[0] = '\0';
				for (k = 0; k < d->num_slots; k++)
					snprintf(nodes + strlen(nodes),
						 sizeof(nodes) - strlen(nodes),
						 "%s%s", k ? "," : "",
						 r->names[d->slots[k].node]);
			}
		} else {
			state = j->action == _START ? "STARTING" : "PENDING";
			t = -1;
			gpus = j->gpn_req * j->nodes_req;
			nn = j->nodes_req;
		}
		type = t >= 0 ? r->types[t] :
		       j->type_req[0] ? j->type_req : "-";
		snprintf(speed, sizeof(speed), "-");
		snprintf(left, sizeof(left), "-");
		if (c && c->models && t >= 0 && c->models[t] && nn > 0) {
			double up = copus__model_speedup(c->models[t], nn,
							 gpus / nn);

			if (up > 0)
				snprintf(speed, sizeof(speed), "%.2f", up);
		}
		if (c && c->remaining >= 0)
			snprintf(left, sizeof(left), "%.0fs", c->remaining);
		reason = d ? d->reason : j->reason ? j->reason :
			 j->running ? "rigid: keeps its GPUs" : "-";
		if (j->reason && !j->running)
			reason = j->reason;
		if (!strncmp(reason, "copus: ", 7))
			reason += 7;
		fprintf(f, "%u\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", j->id,
			state, kind, type, gpus, nn, speed, left,
			reason[0] ? reason : "-", nodes);
	}
	_replace_end(f, path);
	xfree(path);
}

static double _ms_since(struct timespec *t0)
{
	struct timespec t1;
	double ms;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
	*t0 = t1;
	return ms;
}

static void _round(struct copus_sched *s)
{
	struct _round r;
	struct timespec t;

	memset(&r, 0, sizeof(r));
	clock_gettime(CLOCK_MONOTONIC, &t);
	_snapshot(s, &r);
	_info_sweep(s);
	r.t_snap = _ms_since(&t);
	_history_learn(s, r.state_dir, r.obs, r.nobs);
	_decide(s, &r);
	_plan(s, &r);
	if (r.predict_rc != COPUS_OK)
		verbose("%s: predictor: %s", plugin_type,
			copus_strerror(r.predict_rc));
	if (r.error[0])
		error("%s: %s; nothing decided this round", plugin_type,
		      r.error);
	r.t_decide = _ms_since(&t);
	_act(&r);
	r.t_act = _ms_since(&t);
	_requests(s, &r);
	_state_save(s, r.state_dir);
	_write_status(s, &r);
	_decision_free(&r);
	_snapshot_free(&r);
}

static void *_agent(void *arg)
{
	struct copus_sched *s = arg;
	struct timespec ts;
	slurmctld_lock_t conf = { READ_LOCK, NO_LOCK, NO_LOCK, NO_LOCK,
				  NO_LOCK };
	char *dir;
	int i;

	lock_slurmctld(conf);
	_load_params(s);
	dir = xstrdup(slurm_conf.state_save_location);
	unlock_slurmctld(conf);
	_policy_setup(s);
	if ((i = copus_predictor_create(NULL, &s->predictor)) != COPUS_OK)
		error("%s: no predictor of remaining times: %s", plugin_type,
		      copus_strerror(i));
	_state_load(s, dir);
	_history_load(s, dir, true);
	xfree(dir);
	while (1) {
		slurm_mutex_lock(&s->term_lock);
		if (!s->stop && !s->again) {
			clock_gettime(CLOCK_REALTIME, &ts);
			/*
			 * While a rescale is in flight, rounds come four times
			 * a second: the job's checkpoint is noticed, and the
			 * job restarted, within a moment, not an interval.
			 */
			if (_rescales_active(s)) {
				ts.tv_nsec += 250000000L;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
			} else {
				ts.tv_sec += s->params.interval;
			}
			pthread_cond_timedwait(&s->term_cond, &s->term_lock,
					       &ts);
		}
		s->again = false;
		if (s->stop) {
			slurm_mutex_unlock(&s->term_lock);
			break;
		}
		if (s->reconfig) {
			s->reconfig = false;
			slurm_mutex_unlock(&s->term_lock);
			lock_slurmctld(conf);
			_load_params(s);
			unlock_slurmctld(conf);
			_policy_setup(s);
		} else {
			slurm_mutex_unlock(&s->term_lock);
		}
		_round(s);
	}
	if (s->policy)
		copus_policy_destroy(s->policy);
	s->policy = NULL;
	if (s->predictor)
		copus_predictor_destroy(s->predictor);
	s->predictor = NULL;
	free(s->info);
	s->info = NULL;
	s->ninfo = s->info_cap = 0;
	return NULL;
}

extern int init(void)
{
	struct copus_sched *s = &_sched;

	if (slurmctld_config.scheduling_disabled)
		return SLURM_SUCCESS;
	slurm_mutex_lock(&s->thread_lock);
	if (s->thread) {
		slurm_mutex_unlock(&s->thread_lock);
		error("%s: scheduler thread already running", plugin_type);
		return SLURM_ERROR;
	}
	s->stop = false;
	slurm_thread_create(&s->thread, _agent, s);
	slurm_mutex_unlock(&s->thread_lock);
	info("%s: loaded", plugin_type);
	return SLURM_SUCCESS;
}

extern void fini(void)
{
	struct copus_sched *s = &_sched;

	slurm_mutex_lock(&s->thread_lock);
	if (s->thread) {
		slurm_mutex_lock(&s->term_lock);
		s->stop = true;
		pthread_cond_signal(&s->term_cond);
		slurm_mutex_unlock(&s->term_lock);
		pthread_join(s->thread, NULL);
		s->thread = 0;
		info("%s: stopped", plugin_type);
	}
	slurm_mutex_unlock(&s->thread_lock);
}

/* Called after "scontrol reconfigure": re-read the copus_ keys. */
extern int sched_p_reconfig(void)
{
	struct copus_sched *s = &_sched;

	slurm_mutex_lock(&s->term_lock);
	s->reconfig = true;
	pthread_cond_signal(&s->term_cond);
	slurm_mutex_unlock(&s->term_lock);
	return SLURM_SUCCESS;
}
