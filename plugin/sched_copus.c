/*
 * sched/copus: a slurmctld scheduler plugin that starts pending jobs on the
 * nodes copus chooses.
 *
 * slurm.conf:
 *   SchedulerType=sched/copus
 *   SchedulerParameters=sched_interval=-1,defer,copus_interval=10,...
 * (sched_interval=-1 turns Slurm's own FIFO pass off, so that this plugin
 * alone starts jobs; see sched_copus(8) for the copus_ keys.)
 *
 * Every round runs in the plugin's own thread in three phases:
 *  1. snapshot: under the slurmctld locks, copy what the decision needs
 *     (pending jobs that may start now, nodes and their free GPUs);
 *  2. decision: outside the locks, on the copies only;
 *  3. actions: under the write locks, check each job again and start it on
 *     the chosen nodes as the backfill plugin does (exclude every other
 *     node, select_nodes(), launch), or give it a readable pending reason.
 *
 * Built against the Slurm source of exactly the installed version
 * (plugin_version must equal SLURM_VERSION_NUMBER), linked against nothing:
 * Slurm's symbols resolve from slurmctld when it loads the plugin.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/job_scheduler.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/node_scheduler.h"
#include "src/slurmctld/slurmctld.h"
#include "src/slurmctld/srun_comm.h"
#include "src/slurmctld/state_save.h"

#include "copus/hint.h"
#include "options.h"
#include "sched.h"

const char plugin_name[] = "copus co-adaptive GPU scheduler";
const char plugin_type[] = "sched/copus";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static pthread_t _thread;
static pthread_mutex_t _thread_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t _term_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t _term_cond = PTHREAD_COND_INITIALIZER;
static bool _stop;
static bool _reconfig;
static struct copus__params _params;

/* A running job as the status file shows it. */
struct _run {
	uint32_t id;
	struct copus__job cell;		/* nodes, GPUs per node, type, range */
	char *nodelist;
	int node;			/* first node's index */
	time_t start;
};

/*
 * A rescale in flight: the job was asked to checkpoint (COPUS_RESCALE_SIGNAL)
 * and is expected to exit with 75, which RequeueExit=75 turns into a requeue;
 * the plugin then sets the new size and lets it start again. Only the
 * plugin's thread touches this table.
 */
#define _RESCALE_MAX 256
struct _rescale {
	uint32_t id;
	time_t asked;
	int from, to;			/* GPUs per node */
	char type[16];
	bool gave_up;			/* no answer: not asked again until
					 * the restart delay has passed */
};
static struct _rescale _rescales[_RESCALE_MAX];
static int _nrescales;

static struct _rescale *_rescale_find(uint32_t id)
{
	int i;

	for (i = 0; i < _nrescales; i++)
		if (_rescales[i].id == id)
			return &_rescales[i];
	return NULL;
}

static bool _rescales_dirty;

static void _rescale_drop(struct _rescale *x)
{
	*x = _rescales[--_nrescales];
	_rescales_dirty = true;
}

#define _STATE_FILE "copus_state"
#define _STATE_MAGIC "copus-state 1"

/*
 * The rescales in flight survive a slurmctld restart in
 * StateSaveLocation/copus_state, replaced atomically (written beside,
 * flushed, renamed): a job that checkpoints while slurmctld is down is still
 * given its new size when it comes back.
 */
static void _state_save(const char *dir)
{
	char *path = NULL, *tmp = NULL;
	FILE *f = NULL;
	int i;

	if (!_rescales_dirty || !dir)
		return;
	path = xstrdup_printf("%s/%s", dir, _STATE_FILE);
	tmp = xstrdup_printf("%s/%s.new", dir, _STATE_FILE);
	if (!(f = fopen(tmp, "w")))
		goto fail;
	fprintf(f, "%s\n", _STATE_MAGIC);
	for (i = 0; i < _nrescales; i++) {
		const struct _rescale *x = &_rescales[i];

		fprintf(f, "rescale %u %lld %d %d %s %d\n", x->id,
			(long long)x->asked, x->from, x->to,
			x->type[0] ? x->type : "-", x->gave_up ? 1 : 0);
	}
	if (fflush(f) || fsync(fileno(f)))
		goto fail;
	i = fclose(f);
	f = NULL;
	if (i || rename(tmp, path))
		goto fail;
	_rescales_dirty = false;
	goto out;
fail:
	error("%s: cannot save %s: %m", plugin_type, path);
out:
	if (f)
		fclose(f);
	xfree(path);
	xfree(tmp);
}

static void _state_load(const char *dir)
{
	char *path, line[256], type[16];
	FILE *f;
	int lineno = 0;

	if (!dir)
		return;
	path = xstrdup_printf("%s/%s", dir, _STATE_FILE);
	f = fopen(path, "r");
	if (!f) {
		xfree(path);
		return;
	}
	_nrescales = 0;
	while (fgets(line, sizeof(line), f)) {
		struct _rescale x;
		long long asked;
		int gave_up, n = 0;

		lineno++;
		if (lineno == 1) {
			if (strncmp(line, _STATE_MAGIC "\n",
				    sizeof(_STATE_MAGIC))) {
				error("%s: %s:1: not a copus state file "
				      "(expected '%s'); ignoring it",
				      plugin_type, path, _STATE_MAGIC);
				break;
			}
			continue;
		}
		memset(&x, 0, sizeof(x));
		if (sscanf(line, "rescale %u %lld %d %d %15s %d%n", &x.id,
			   &asked, &x.from, &x.to, type, &gave_up, &n) != 6 ||
		    line[n] != '\n' || x.id == 0 || asked < 0 ||
		    x.from < 1 || x.to < 1 || x.from > COPUS__GPUS_MAX ||
		    x.to > COPUS__GPUS_MAX || (gave_up != 0 && gave_up != 1) ||
		    _nrescales == _RESCALE_MAX) {
			error("%s: %s:%d: bad rescale record '%.60s'; "
			      "ignoring it", plugin_type, path, lineno, line);
			continue;
		}
		x.asked = (time_t)asked;
		x.gave_up = gave_up;
		if (strcmp(type, "-"))
			snprintf(x.type, sizeof(x.type), "%s", type);
		_rescales[_nrescales++] = x;
	}
	fclose(f);
	if (_nrescales)
		info("%s: recovered %d rescale(s) in flight from %s",
		     plugin_type, _nrescales, path);
	xfree(path);
}

/* What a round works on: the copies of phase 1 and the decisions. */
struct _round {
	time_t when;
	double t_snap, t_decide, t_act;	/* phase times, milliseconds */
	char *state_dir;		/* StateSaveLocation */
	struct copus__node *nodes;
	char (*names)[64];		/* node names */
	int nnodes;
	struct _run *run;
	int nrun;
	uint32_t *requeued;		/* rescaling jobs now pending */
	int nrequeued;
	struct copus__job *jobs;
	int njobs;
	uint8_t *eligible;		/* njobs x nnodes flags */
	part_record_t **parts;		/* partition of each index (compared
					 * only, never dereferenced unlocked) */
	int nparts;
	struct copus__decision *dec;
	int *node_buf;
	size_t node_buf_len;
};

static void _report_param(const char *msg, void *arg)
{
	error("%s: %s", plugin_type, msg);
}

static void _load_params(void)
{
	copus__params_parse(slurm_conf.sched_params, &_params, _report_param,
			    NULL);
	info("%s: interval %ds, restart delay %ds, checkpoint deadline %ds, "
	     "fairness %.2f, at most %d pending jobs per round", plugin_type,
	     _params.interval, _params.restart_delay, _params.ckpt_deadline,
	     _params.fairness, _params.max_jobs);
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
static void _job_gpus(job_record_t *job_ptr, struct copus__job *j)
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
			per_node = (g->gres_per_job + j->nodes - 1) / j->nodes;
		else if (g->gres_per_task)
			per_node = g->gres_per_task *
				   (job_ptr->details->num_tasks ?
				    job_ptr->details->num_tasks : 1) / j->nodes;
		j->gpus_per_node += (int)per_node;
		if (g->type_name)
			snprintf(j->type, sizeof(j->type), "%s", g->type_name);
	}
	list_iterator_destroy(it);
}

/* The node's GPUs: configured, free and type (first type only). */
static void _node_gpus(node_record_t *node_ptr, struct copus__node *n)
{
	ListIterator it;
	gres_state_t *gs;

	if (!node_ptr->gres_list)
		return;
	it = list_iterator_create(node_ptr->gres_list);
	while ((gs = list_next(it))) {
		gres_node_state_t *g = gs->gres_data;

		if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g)
			continue;
		n->gpus += (int)g->gres_cnt_avail;
		n->gpus_free += (int)(g->gres_cnt_avail > g->gres_cnt_alloc ?
				      g->gres_cnt_avail - g->gres_cnt_alloc : 0);
		if (g->type_cnt > 0 && g->type_name && g->type_name[0])
			snprintf(n->type, sizeof(n->type), "%s",
				 g->type_name[0]);
	}
	list_iterator_destroy(it);
}

static int _part_index(struct _round *r, part_record_t *part_ptr)
{
	int i;

	for (i = 0; i < r->nparts; i++)
		if (r->parts[i] == part_ptr)
			return i;
	xrecalloc(r->parts, r->nparts + 1, sizeof(*r->parts));
	r->parts[r->nparts] = part_ptr;
	return r->nparts++;
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

/* The job's --elastic and --gpu-types, checked again (they are input). */
static void _job_options(job_record_t *job_ptr, struct copus__job *j)
{
	const char *v;
	char why[128];

	if ((v = _spank_env(job_ptr, COPUS__ENV_ELASTIC)) &&
	    copus__parse_elastic(v, &j->elastic_min, &j->elastic_max, why,
				 sizeof(why)))
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
		for (t = strtok_r(list, ",", &save); t && j->ntypes < 8;
		     t = strtok_r(NULL, ",", &save))
			snprintf(j->types[j->ntypes++], sizeof(j->types[0]),
				 "%s", t);
	}
}

static void _snapshot_running(struct _round *r, job_record_t *job_ptr)
{
	struct _run *x;

	xrecalloc(r->run, r->nrun + 1, sizeof(*r->run));
	x = &r->run[r->nrun++];
	x->id = job_ptr->job_id;
	x->cell.nodes = job_ptr->node_cnt ? (int)job_ptr->node_cnt : 1;
	_job_gpus(job_ptr, &x->cell);
	_job_options(job_ptr, &x->cell);
	x->nodelist = xstrdup(job_ptr->nodes);
	x->node = job_ptr->node_bitmap ? bit_ffs(job_ptr->node_bitmap) : -1;
	x->start = job_ptr->start_time;
	if (!x->cell.type[0] && x->node >= 0 && x->node < r->nnodes)
		snprintf(x->cell.type, sizeof(x->cell.type), "%s",
			 r->nodes[x->node].type);
}

static void _round_free(struct _round *r)
{
	int i;

	for (i = 0; i < r->nrun; i++)
		xfree(r->run[i].nodelist);
	xfree(r->run);
	xfree(r->requeued);
	xfree(r->names);
	xfree(r->state_dir);
	xfree(r->nodes);
	xfree(r->jobs);
	xfree(r->eligible);
	xfree(r->parts);
	xfree(r->dec);
	xfree(r->node_buf);
	memset(r, 0, sizeof(*r));
}

/*
 * Phase 1. job_independent() may update a job's dependency state and
 * reason, so the job lock is a write lock here (as in Slurm's own
 * scheduler); nodes and partitions are only read.
 */
static void _snapshot(struct _round *r)
{
	slurmctld_lock_t locks = { READ_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK,
				   READ_LOCK };
	node_record_t *node_ptr;
	job_record_t *job_ptr;
	ListIterator it;
	int i, nj, cap;

	lock_slurmctld(locks);
	r->when = time(NULL);
	r->state_dir = xstrdup(slurm_conf.state_save_location);
	r->nnodes = node_record_count;
	r->nodes = xcalloc(r->nnodes + 1, sizeof(*r->nodes));
	r->names = xcalloc(r->nnodes + 1, sizeof(*r->names));
	for (i = 0; (node_ptr = next_node(&i)); i++) {
		struct copus__node *n = &r->nodes[i];

		snprintf(r->names[i], sizeof(r->names[i]), "%s",
			 node_ptr->name);
		_node_gpus(node_ptr, n);
		n->usable = avail_node_bitmap &&
			    bit_test(avail_node_bitmap, i) &&
			    !IS_NODE_DRAIN(node_ptr) && !IS_NODE_FAIL(node_ptr) &&
			    !IS_NODE_NO_RESPOND(node_ptr);
	}
	cap = list_count(job_list);
	if (cap > _params.max_jobs)
		cap = _params.max_jobs;
	r->jobs = xcalloc(cap + 1, sizeof(*r->jobs));
	r->eligible = xcalloc((size_t)(cap + 1) * (r->nnodes + 1), 1);
	nj = 0;
	it = list_iterator_create(job_list);
	while ((job_ptr = list_next(it))) {
		struct copus__job *j = &r->jobs[nj];
		uint8_t *el = &r->eligible[(size_t)nj * (r->nnodes + 1)];
		struct job_details *d = job_ptr->details;
		struct _rescale *x;

		if (IS_JOB_RUNNING(job_ptr) && d) {
			_snapshot_running(r, job_ptr);
			continue;
		}
		/* A job requeued for a rescale waits for its new size. */
		if (IS_JOB_PENDING(job_ptr) &&
		    (x = _rescale_find(job_ptr->job_id)) && !x->gave_up) {
			if (!IS_JOB_COMPLETING(job_ptr)) {
				xrecalloc(r->requeued, r->nrequeued + 1,
					  sizeof(*r->requeued));
				r->requeued[r->nrequeued++] = job_ptr->job_id;
			}
			continue;
		}
		if (nj >= cap || !IS_JOB_PENDING(job_ptr) ||
		    !_job_startable(job_ptr))
			continue;
		memset(j, 0, sizeof(*j));
		j->id = job_ptr->job_id;
		j->priority = job_ptr->priority;
		j->submit = d->submit_time;
		j->part = _part_index(r, job_ptr->part_ptr);
		j->nodes = d->min_nodes ? (int)d->min_nodes : 1;
		_job_gpus(job_ptr, j);
		_job_options(job_ptr, j);
		for (i = 0; i < r->nnodes; i++) {
			el[i] = bit_test(job_ptr->part_ptr->node_bitmap, i) &&
				!(d->exc_node_bitmap &&
				  bit_test(d->exc_node_bitmap, i));
			if (job_ptr->resv_ptr && job_ptr->resv_ptr->node_bitmap &&
			    !bit_test(job_ptr->resv_ptr->node_bitmap, i))
				el[i] = 0;
		}
		/* Required nodes: the job runs there or nowhere. */
		if (d->req_node_bitmap)
			for (i = 0; i < r->nnodes; i++)
				if (!bit_test(d->req_node_bitmap, i))
					el[i] = 0;
		j->eligible = el;
		r->node_buf_len += (size_t)j->nodes;
		nj++;
	}
	list_iterator_destroy(it);
	r->njobs = nj;
	unlock_slurmctld(locks);
}

/* Phase 2: the decision, outside every lock. */
static int _decide(struct _round *r)
{
	int rc;

	r->dec = xcalloc(r->njobs + 1, sizeof(*r->dec));
	r->node_buf = xcalloc(r->node_buf_len + 1, sizeof(*r->node_buf));
	/*
	 * copus__place_priority is the interim policy: strict priority order
	 * with best-fit placement. It is replaced by the core policy
	 * (include/copus/policy.h) once that interface exists.
	 */
	rc = copus__place_priority(r->nodes, r->nnodes, r->jobs, r->njobs,
				   r->dec, r->node_buf, r->node_buf_len);
	if (rc < 0)
		error("%s: placement failed (status %d)", plugin_type, rc);
	return rc;
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

/* Starts one job on the chosen nodes, as backfill's _start_job() does. */
static int _start(job_record_t *job_ptr, const struct copus__job *j,
		  const struct copus__decision *d)
{
	bitstr_t *orig_exc = NULL, *avoid;
	int k, rc;

	avoid = bit_alloc(node_record_count);
	for (k = 0; k < j->nodes; k++)
		bit_set(avoid, d->nodes[k]);
	bit_not(avoid);
	if (job_ptr->details->exc_node_bitmap) {
		orig_exc = bit_copy(job_ptr->details->exc_node_bitmap);
		bit_or(job_ptr->details->exc_node_bitmap, avoid);
	} else {
		job_ptr->details->exc_node_bitmap = bit_copy(avoid);
	}
	rc = select_nodes(job_ptr, false, NULL, NULL, false,
			  SLURMDB_JOB_FLAG_SCHED);
	/* select_nodes() may have replaced the bitmap: restore the job's. */
	FREE_NULL_BITMAP(job_ptr->details->exc_node_bitmap);
	job_ptr->details->exc_node_bitmap = orig_exc;
	FREE_NULL_BITMAP(avoid);
	if (rc != SLURM_SUCCESS) {
		verbose("%s: %pJ could not start on the chosen nodes: %s",
			plugin_type, job_ptr, slurm_strerror(rc));
		return rc;
	}
	last_job_update = time(NULL);
	if (j->elastic_max)
		info("%s: started %pJ (elastic %d-%d GPUs%s%s) in %s on %s",
		     plugin_type, job_ptr, j->elastic_min, j->elastic_max,
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

/* Phase 3: act on the decisions under the write locks. */
static void _act(struct _round *r, int ndec)
{
	slurmctld_lock_t locks = { READ_LOCK, WRITE_LOCK, WRITE_LOCK,
				   READ_LOCK, READ_LOCK };
	char desc[160];
	int i, started = 0;

	lock_slurmctld(locks);
	if (node_record_count != r->nnodes) {
		/* Nodes were reconfigured during the decision: next round. */
		unlock_slurmctld(locks);
		return;
	}
	for (i = 0; i < ndec; i++) {
		struct copus__decision *d = &r->dec[i];
		/* The placement sorted the jobs: decision i is job i's. */
		const struct copus__job *j = &r->jobs[i];
		job_record_t *job_ptr = find_job_record(d->id);

		/* Jobs change while the locks are free: check again. */
		if (!job_ptr || j->id != d->id || !IS_JOB_PENDING(job_ptr) ||
		    job_ptr->priority == 0 || IS_JOB_COMPLETING(job_ptr) ||
		    !job_ptr->details)
			continue;
		switch (d->verdict) {
		case COPUS__START:
			if (_start(job_ptr, j, d) == SLURM_SUCCESS)
				started++;
			else
				d->verdict = COPUS__WAIT_RESOURCES;
			break;
		case COPUS__WAIT_RESOURCES:
			snprintf(desc, sizeof(desc),
				 "copus: waiting for %d node(s) with %d free "
				 "%s GPU(s) each", j->nodes, j->gpus_per_node,
				 j->type[0] ? j->type : "");
			_set_reason(job_ptr, WAIT_RESOURCES, desc);
			break;
		case COPUS__WAIT_PRIORITY:
			_set_reason(job_ptr, WAIT_PRIORITY,
				    "copus: a job of higher priority in the "
				    "partition starts first");
			break;
		case COPUS__NEVER:
			snprintf(desc, sizeof(desc),
				 "copus: no %d node(s) in the partition have "
				 "%d %s GPU(s) each", j->nodes,
				 j->gpus_per_node, j->type[0] ? j->type : "");
			_set_reason(job_ptr, FAIL_BAD_CONSTRAINTS, desc);
			break;
		}
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

static const char *_verdict_name(enum copus__verdict v)
{
	switch (v) {
	case COPUS__START:
		return "started";
	case COPUS__WAIT_RESOURCES:
		return "wait:resources";
	case COPUS__WAIT_PRIORITY:
		return "wait:priority";
	case COPUS__NEVER:
		return "never-fits";
	}
	return "?";
}

static void _cell_text(const struct copus__job *c, char *type, size_t tlen,
		       char *range, size_t rlen)
{
	int k;

	snprintf(type, tlen, "%s", c->type[0] ? c->type : "-");
	if (!c->type[0] && c->ntypes) {
		type[0] = '\0';
		for (k = 0; k < c->ntypes; k++)
			snprintf(type + strlen(type), tlen - strlen(type),
				 "%s%s", k ? "," : "", c->types[k]);
	}
	if (c->elastic_max)
		snprintf(range, rlen, "%d-%d", c->elastic_min, c->elastic_max);
	else
		snprintf(range, rlen, "-");
}

/*
 * The admin's view of the last round: StateSaveLocation/copus_status, one
 * line per job (running, then pending in decision order), replaced
 * atomically (written beside, flushed, renamed) so a reader never sees half
 * a file.
 */
static void _write_status(struct _round *r, int ndec)
{
	char *path = NULL, *tmp = NULL, type[160], range[32], when[32];
	struct tm tm;
	FILE *f = NULL;
	int i, k;

	if (!r->state_dir)
		return;
	path = xstrdup_printf("%s/copus_status", r->state_dir);
	tmp = xstrdup_printf("%s/copus_status.new", r->state_dir);
	f = fopen(tmp, "w");
	if (!f) {
		error("%s: cannot write %s: %m", plugin_type, tmp);
		goto out;
	}
	localtime_r(&r->when, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "# sched/copus round at %s (every %d s): %d pending "
		"considered, %d running; took %.3f ms (snapshot %.3f, decision "
		"%.3f, actions %.3f)\n", when, _params.interval, r->njobs,
		r->nrun, r->t_snap + r->t_decide + r->t_act, r->t_snap,
		r->t_decide, r->t_act);
	fprintf(f, "%-10s %-8s %5s %9s %-12s %-9s %-15s %s\n", "JOBID",
		"STATE", "NODES", "GPUS/NODE", "TYPE", "ELASTIC", "DECISION",
		"NODELIST");
	for (i = 0; i < r->nrun; i++) {
		const struct _run *x = &r->run[i];

		_cell_text(&x->cell, type, sizeof(type), range, sizeof(range));
		fprintf(f, "%-10u %-8s %5d %9d %-12s %-9s %-15s %s\n", x->id,
			"RUNNING", x->cell.nodes, x->cell.gpus_per_node, type,
			range, "running", x->nodelist ? x->nodelist : "-");
	}
	for (i = 0; i < ndec; i++) {
		const struct copus__decision *d = &r->dec[i];
		const struct copus__job *j = &r->jobs[i];
		char nodes[256] = "-";

		if (j->id != d->id)
			continue;
		if (d->verdict == COPUS__START) {
			nodes[0] = '\0';
			for (k = 0; k < j->nodes; k++)
				snprintf(nodes + strlen(nodes),
					 sizeof(nodes) - strlen(nodes), "%s%s",
					 k ? "," : "", r->names[d->nodes[k]]);
		}
		_cell_text(j, type, sizeof(type), range, sizeof(range));
		fprintf(f, "%-10u %-8s %5d %9d %-12s %-9s %-15s %s\n", d->id,
			d->verdict == COPUS__START ? "STARTING" : "PENDING",
			j->nodes, j->gpus_per_node, type, range,
			_verdict_name(d->verdict), nodes);
	}
	if (fflush(f) || fsync(fileno(f))) {
		error("%s: cannot write %s: %m", plugin_type, tmp);
		goto out;
	}
	if (fclose(f)) {
		f = NULL;
		error("%s: cannot write %s: %m", plugin_type, tmp);
		goto out;
	}
	f = NULL;
	if (rename(tmp, path))
		error("%s: cannot rename %s to %s: %m", plugin_type, tmp, path);
out:
	if (f)
		fclose(f);
	xfree(path);
	xfree(tmp);
}

/*
 * Rescales, outside every lock (they go through slurmctld's own RPCs, as
 * scontrol would): give requeued jobs their new size, give up on jobs that
 * did not answer in time, forget jobs that ended.
 */
static void _rescale_progress(struct _round *r)
{
	time_t now = time(NULL);
	int i, k;

	for (i = 0; i < _nrescales;) {
		struct _rescale *x = &_rescales[i];
		bool requeued = false, running = false;
		job_desc_msg_t desc;
		char tres[64];

		if (x->gave_up) {
			if (now - x->asked > _params.ckpt_deadline +
					     _params.restart_delay)
				_rescale_drop(x);
			else
				i++;
			continue;
		}
		for (k = 0; k < r->nrequeued; k++)
			if (r->requeued[k] == x->id)
				requeued = true;
		for (k = 0; k < r->nrun; k++)
			if (r->run[k].id == x->id)
				running = true;
		if (requeued) {
			slurm_init_job_desc_msg(&desc);
			desc.job_id = x->id;
			snprintf(tres, sizeof(tres), "gres:gpu:%s%s%d", x->type,
				 x->type[0] ? ":" : "", x->to);
			desc.tres_per_node = tres;
			desc.min_nodes = 1;
			desc.max_nodes = 1;
			/* Without this a requeued job waits two minutes. */
			desc.begin_time = now;
			if (slurm_update_job(&desc) != SLURM_SUCCESS)
				error("%s: JobId=%u: cannot set its new size "
				      "(%s): %m; it restarts at its old size",
				      plugin_type, x->id, tres);
			else
				info("%s: JobId=%u checkpointed and requeued "
				     "after %lds; restarts with %d GPU(s) "
				     "instead of %d", plugin_type, x->id,
				     (long)(now - x->asked), x->to, x->from);
			_rescale_drop(x);
			continue;
		}
		if (running && now - x->asked > _params.ckpt_deadline) {
			info("%s: JobId=%u did not checkpoint within %ds; "
			     "left running with %d GPU(s)", plugin_type,
			     x->id, _params.ckpt_deadline, x->from);
			x->gave_up = true;
			_rescales_dirty = true;
			i++;
			continue;
		}
		if (!running) {
			bool pending = false;

			/* Still completing its requeue: wait. */
			for (k = 0; k < r->njobs; k++)
				if (r->jobs[k].id == x->id)
					pending = true;
			if (!pending && now - x->asked >
					_params.ckpt_deadline * 2 + 60) {
				_rescale_drop(x);
				continue;
			}
		}
		i++;
	}
}

/* Asks elastic jobs to change size (the interim rule in sched.c). */
static void _rescale_start(struct _round *r, int ndec)
{
	struct copus__running *run;
	const struct copus__job *blocked = NULL;
	int *target, i, n;
	time_t now = time(NULL);

	if (!r->nrun)
		return;
	for (i = 0; i < ndec && !blocked; i++)
		if (r->dec[i].verdict == COPUS__WAIT_RESOURCES)
			blocked = &r->jobs[i];
	run = xcalloc(r->nrun, sizeof(*run));
	target = xcalloc(r->nrun, sizeof(*target));
	for (i = 0; i < r->nrun; i++) {
		const struct _run *x = &r->run[i];

		run[i].id = x->id;
		run[i].node = x->node;
		run[i].nodes = x->cell.nodes;
		run[i].gpus_per_node = x->cell.gpus_per_node;
		/* A job being rescaled is not asked again. */
		if (!_rescale_find(x->id)) {
			run[i].elastic_min = x->cell.elastic_min;
			run[i].elastic_max = x->cell.elastic_max;
		}
		run[i].since = x->start;
	}
	n = copus__rescale_interim(r->nodes, r->nnodes, run, r->nrun, blocked,
				   now, _params.restart_delay, target);
	for (i = 0; n > 0 && i < r->nrun; i++) {
		struct _rescale *x;

		if (!target[i] || _nrescales == _RESCALE_MAX)
			continue;
		if (slurm_kill_job(run[i].id, COPUS_RESCALE_SIGNAL,
				   KILL_FULL_JOB) != SLURM_SUCCESS) {
			error("%s: JobId=%u: cannot ask it to checkpoint: %m",
			      plugin_type, run[i].id);
			continue;
		}
		x = &_rescales[_nrescales++];
		_rescales_dirty = true;
		memset(x, 0, sizeof(*x));
		x->id = run[i].id;
		x->asked = now;
		x->from = run[i].gpus_per_node;
		x->to = target[i];
		snprintf(x->type, sizeof(x->type), "%s", r->run[i].cell.type);
		info("%s: JobId=%u asked to checkpoint to go from %d to %d "
		     "GPU(s)%s", plugin_type, x->id, x->from, x->to,
		     blocked ? " (a job waits for GPUs)" : "");
	}
	xfree(run);
	xfree(target);
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

static void _round(void)
{
	struct _round r;
	struct timespec t;
	int ndec = 0;

	memset(&r, 0, sizeof(r));
	clock_gettime(CLOCK_MONOTONIC, &t);
	_snapshot(&r);
	r.t_snap = _ms_since(&t);
	_rescale_progress(&r);
	if (r.njobs > 0) {
		ndec = _decide(&r);
		r.t_decide = _ms_since(&t);
		if (ndec > 0)
			_act(&r, ndec);
		r.t_act = _ms_since(&t);
	}
	_rescale_start(&r, ndec > 0 ? ndec : 0);
	_state_save(r.state_dir);
	_write_status(&r, ndec > 0 ? ndec : 0);
	_round_free(&r);
}

static void *_agent(void *arg)
{
	struct timespec ts;
	slurmctld_lock_t conf = { READ_LOCK, NO_LOCK, NO_LOCK, NO_LOCK,
				  NO_LOCK };
	char *dir;

	lock_slurmctld(conf);
	_load_params();
	dir = xstrdup(slurm_conf.state_save_location);
	unlock_slurmctld(conf);
	_state_load(dir);
	xfree(dir);
	while (1) {
		slurm_mutex_lock(&_term_lock);
		if (!_stop) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += _params.interval;
			pthread_cond_timedwait(&_term_cond, &_term_lock, &ts);
		}
		if (_stop) {
			slurm_mutex_unlock(&_term_lock);
			break;
		}
		if (_reconfig) {
			_reconfig = false;
			slurm_mutex_unlock(&_term_lock);
			lock_slurmctld(conf);
			_load_params();
			unlock_slurmctld(conf);
		} else {
			slurm_mutex_unlock(&_term_lock);
		}
		_round();
	}
	return NULL;
}

extern int init(void)
{
	if (slurmctld_config.scheduling_disabled)
		return SLURM_SUCCESS;
	slurm_mutex_lock(&_thread_lock);
	if (_thread) {
		slurm_mutex_unlock(&_thread_lock);
		error("%s: scheduler thread already running", plugin_type);
		return SLURM_ERROR;
	}
	_stop = false;
	slurm_thread_create(&_thread, _agent, NULL);
	slurm_mutex_unlock(&_thread_lock);
	info("%s: loaded", plugin_type);
	return SLURM_SUCCESS;
}

extern void fini(void)
{
	slurm_mutex_lock(&_thread_lock);
	if (_thread) {
		slurm_mutex_lock(&_term_lock);
		_stop = true;
		pthread_cond_signal(&_term_cond);
		slurm_mutex_unlock(&_term_lock);
		pthread_join(_thread, NULL);
		_thread = 0;
		info("%s: stopped", plugin_type);
	}
	slurm_mutex_unlock(&_thread_lock);
}

/* Called after "scontrol reconfigure": re-read the copus_ keys. */
extern int sched_p_reconfig(void)
{
	slurm_mutex_lock(&_term_lock);
	_reconfig = true;
	pthread_cond_signal(&_term_cond);
	slurm_mutex_unlock(&_term_lock);
	return SLURM_SUCCESS;
}
