/*
 * Phase 1 of a sched/copus round (see snapshot.h): under slurmctld's locks,
 * copy what the decision needs into the round's plain structs, and bring
 * each job's record up to date (its service, its hint, its completion).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "slurm-compat.h"

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/predict.h"
#include "options.h"
#include "round.h"
#include "locks.h"
#include "sched_copus.h"
#include "intake.h"
#include "snapshot.h"

/*
 * The partitions of a snapshot's jobs, numbered as they come: the round
 * compares a job's partition by its number only.
 */
struct _parts {
	part_record_t **v;
	int n;
};

/* Nodes and partitions */
static void _node_gpus(struct copus__round *r, node_record_t *node_ptr, int i);
static int _part_index(struct _parts *parts, part_record_t *part_ptr);
static uint8_t *_part_row(struct copus__round *r, int k,
			  part_record_t *part_ptr);

/*
 * The job's user, and Slurm's fair-share factor of that user when
 * priority/multifactor has one (its factor times PriorityWeightFairshare is
 * what the job's priority factors hold).
 */
static void _job_user(job_record_t *job_ptr, struct copus__round_job *j)
{
	double fs = 0.0;

	j->uid = job_ptr->user_id;
	if (job_ptr->prio_factors && slurm_conf.priority_weight_fs > 0)
		fs = job_ptr->prio_factors->priority_fs /
		     (double)slurm_conf.priority_weight_fs;
	j->fs_slurm = fs > 0.0 && fs <= 1.0 ? fs : 0.0;
}

/* A job's request, options and allocation */
static void _job_gpus(job_record_t *job_ptr, struct copus__round_job *j);
static void _job_options(job_record_t *job_ptr, struct copus__round_job *j);
static void _job_alloc(struct copus__round *r, job_record_t *job_ptr,
		       struct copus__round_job *j);
static bool _job_startable(job_record_t *job_ptr);
static bool _slurm_requeued(job_record_t *job_ptr, time_t now);

/* The round's jobs */
static int _job_ids(struct copus__sched *s, struct copus__round *r,
		    struct copus__lock_clock *clk, time_t parts_at,
		    uint32_t **ids, uint32_t **prio, int *nprio);
static bool _yield(struct copus__sched *s, struct copus__round *r,
		   struct copus__lock_clock *clk, time_t parts_at);
static bool _reconfigured(struct copus__round *r, time_t parts_at);
static bool _refused(const struct copus__memo *in, job_record_t *job_ptr);
static void _overflow(struct copus__round *r, uint32_t id);
static struct copus__round_job *_rj_new(struct copus__round *r, int *cap);
static void _rj_free(struct copus__round_job *j);
static void _snapshot_running(struct copus__sched *s, struct copus__round *r,
			      job_record_t *job_ptr, int *cap,
			      const bool *unheard);
static void _registered(struct copus__sched *s, struct copus__round *r,
			node_record_t *node_ptr, int i);
static bool _ghost(const struct copus__sched *s, job_record_t *job_ptr);
static bool _nothing_to_start(struct copus__sched *s, struct copus__round *r,
			      struct copus__lock_clock *clk, time_t parts_at);
static bool _unheard(const struct copus__sched *s, node_record_t *node_ptr,
		     int i, time_t now);

/*
 * Phase 1. job_independent() may update a job's dependency state and
 * reason, so the job lock is a write lock here (as in Slurm's own
 * scheduler); nodes and partitions are only read.
 */
void copus__snapshot(struct copus__sched *s, struct copus__round *r)
{
	slurmctld_lock_t locks = { READ_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK,
				   READ_LOCK };
	struct _parts parts = { 0 };
	struct copus__lock_clock clk;
	struct copus__lock_stats *ls = &s->stats.locks[COPUS__LOCK_snapshot];
	node_record_t *node_ptr;
	job_record_t *job_ptr;
	int i, k, n, nids, nprio = 0, cap = 0, *managed;
	uint32_t *ids = NULL, *prio = NULL, cut = 0;
	time_t parts_at;
	bool *unheard;

	copus__lock(&clk, locks);
	parts_at = last_part_update;
	r->when = time(NULL);
	r->max_jobs = s->params.max_jobs;
	r->state_dir = xstrdup(slurm_conf.state_save_location);
	r->decay_hl = (double)slurm_conf.priority_decay_hl;
	r->kill_wait = (int)slurm_conf.kill_wait;
	r->nnodes = node_record_count;
	if (s->nreg != r->nnodes) {
		xrecalloc(s->reg, r->nnodes + 1, sizeof(*s->reg));
		s->nreg = r->nnodes;
	}
	r->nodes = xcalloc(r->nnodes + 1, sizeof(*r->nodes));
	r->names = xcalloc(r->nnodes + 1, sizeof(*r->names));
	r->free = xcalloc(r->nnodes + 1, sizeof(*r->free));
	r->cfg = xcalloc(r->nnodes + 1, sizeof(*r->cfg));
	managed = xcalloc(r->nnodes + 1, sizeof(*managed));
	unheard = xcalloc(r->nnodes + 1, sizeof(*unheard));
	for (i = 0; (node_ptr = next_node(&i)); i++) {
		snprintf(r->names[i], sizeof(r->names[i]), "%s",
			 node_ptr->name);
		_node_gpus(r, node_ptr, i);
		r->nodes[i].usable = avail_node_bitmap &&
				     bit_test(avail_node_bitmap, i) &&
				     !IS_NODE_DRAIN(node_ptr) &&
				     !IS_NODE_FAIL(node_ptr) &&
				     !IS_NODE_NO_RESPOND(node_ptr);
		unheard[i] = !r->nodes[i].usable &&
			     _unheard(s, node_ptr, i, r->when);
		_registered(s, r, node_ptr, i);
	}
	if (r->ntypes == 0) {
		r->ntypes = 1;
		snprintf(r->types[0], sizeof(r->types[0]), "gpu");
	}
	if (r->quick && _nothing_to_start(s, r, &clk, parts_at)) {
		r->idle = true;
		copus__unlock(&clk, ls);
		xfree(managed);
		xfree(unheard);
		return;
	}
	/*
	 * The jobs by id, so that the walk below may let the locks go midway
	 * (copus_yield_interval) and find each job again: one that ended
	 * meanwhile is gone, one that changed is read as it is now, and one
	 * submitted meanwhile waits for the next round. The walk that lists
	 * them yields too, and the choice of the copus_max_jobs pending jobs
	 * with the highest priorities is made with the locks let go.
	 */
	nids = _job_ids(s, r, &clk, parts_at, &ids, &prio, &nprio);
	if (s->params.yield_us <= 0) {
		cut = copus__priority_cut(prio, nprio, s->params.max_jobs);
	} else if (!r->error[0]) {
		copus__unlock(&clk, ls);
		ls->yields++;
		cut = copus__priority_cut(prio, nprio, s->params.max_jobs);
		copus__lock(&clk, locks);
		_reconfigured(r, parts_at);
	}
	xfree(prio);
	for (n = 0; n < nids; n++) {
		job_details_t *d;
		struct copus__rescale *x;
		struct copus__memo *in;
		struct copus__round_job *j;
		bool startable, requeued = false;

		if (r->error[0] ||
		    (!(n & 15) && !_yield(s, r, &clk, parts_at)))
			break;
		if (!(job_ptr = find_job_record(ids[n])))
			continue;
		d = job_ptr->details;
		if (!d)
			continue;
		if (IS_JOB_RUNNING(job_ptr)) {
			if (_ghost(s, job_ptr)) {
				xrecalloc(r->ghosts, r->nghosts + 1,
					  sizeof(*r->ghosts));
				r->ghosts[r->nghosts++] = job_ptr->job_id;
			}
			_snapshot_running(s, r, job_ptr, &cap, unheard);
			continue;
		}
		if (IS_JOB_FINISHED(job_ptr) && !IS_JOB_COMPLETING(job_ptr) &&
		    copus__ended_of_request(s, r, job_ptr))
			continue;
		if (IS_JOB_COMPLETE(job_ptr) && !IS_JOB_COMPLETING(job_ptr)) {
			copus__learn(s, r, job_ptr);
			continue;
		}
		if (!IS_JOB_PENDING(job_ptr))
			continue;
		/* As Slurm's schedulers do: a job whose --deadline can no
		 * longer be met is cancelled (state DEADLINE). */
		if (job_ptr->deadline && job_ptr->deadline != NO_VAL &&
		    !IS_JOB_COMPLETING(job_ptr) &&
		    !deadline_ok(job_ptr, "sched/copus"))
			continue;
		if ((in = copus__memo_find(s, job_ptr->job_id)))
			in->seen = true;
		if (in && _refused(in, job_ptr)) {
			xrecalloc(r->refused, r->nrefused + 1,
				  sizeof(*r->refused));
			r->refused[r->nrefused++] = job_ptr->job_id;
			continue;
		}
		x = copus__rescale_find(s, job_ptr->job_id);
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
			if (!_job_startable(job_ptr))
				continue;
			if (r->npending >= s->params.max_jobs ||
			    job_ptr->priority < cut) {
				_overflow(r, job_ptr->job_id);
				continue;
			}
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
		copus__job_attrs(job_ptr, j->app, sizeof(j->app), j->user,
				 sizeof(j->user));
		_job_user(job_ptr, j);
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
		if (!d->exc_node_bitmap && !d->req_node_bitmap &&
		    !job_ptr->resv_ptr) {
			j->eligible = _part_row(r, j->part,
						job_ptr->part_ptr);
			j->eligible_shared = true;
		} else
			j->eligible = xcalloc(r->nnodes + 1, 1);
		for (i = 0; !j->eligible_shared && i < r->nnodes; i++) {
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
		in = j->gpn_req > 0 ? copus__job_info(s, job_ptr, j, r->when)
				    : copus__memo_find(s, j->id);
		j->ran = in && in->launched;
		j->strays = copus__memo_strays(in);
		j->cleared = in ? in->cleared : 0;
		r->npending++;
	}
	copus__unlock(&clk, ls);
	xfree(ids);
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
	xfree(unheard);
	xfree(parts.v);
}

/*
 * A node that is unusable only because slurmctld has not heard from it
 * since the plugin was loaded (not down, drained or failed), within
 * SlurmdTimeout of the load: after a slurmctld restart every node is such a
 * node until its slurmd registers again. Its jobs are left alone meanwhile.
 */
/*
 * Notes a node's registration (a new slurmd start time, or the first word
 * from it since the plugin started) and moves r->reg_quiet past it; a node
 * not heard from since the plugin started, until SlurmdTimeout has passed,
 * keeps restarted jobs waiting (round.h, reg_quiet).
 */
static void _registered(struct copus__sched *s, struct copus__round *r,
			node_record_t *node_ptr, int i)
{
	struct copus__node_reg *g = &s->reg[i];
	time_t wait = slurm_conf.slurmd_timeout ? slurm_conf.slurmd_timeout
						: COPUS__REGISTER_WAIT;
	bool heard = node_ptr->last_response >= s->started;

	if (heard && (!g->seen || g->slurmd_start !=
				 node_ptr->slurmd_start_time)) {
		g->slurmd_start = node_ptr->slurmd_start_time;
		g->seen = r->when;
	}
	/* Only a registration sets a node's version (a drain, a ping
	 * and slurmctld's own bookkeeping move last_response too). */
	if (!node_ptr->version)
		g->unreg_seen = r->when;
	else
		g->registered = true;
	if (g->seen && g->seen + COPUS__RELEASE_GAP > r->reg_quiet)
		r->reg_quiet = g->seen + COPUS__RELEASE_GAP;
	if (!g->seen && r->when < s->started + wait &&
	    !IS_NODE_DOWN(node_ptr) && !IS_NODE_DRAIN(node_ptr) &&
	    !IS_NODE_FAIL(node_ptr) && r->reg_quiet <= r->when)
		r->reg_quiet = r->when + 1;
}

/*
 * A batch job slurmctld recovered running (it started before this
 * slurmctld did) whose batch node has registered since without it: its run
 * ended while slurmctld was down (slurmctld died before saving the end) or
 * never began. A node's registration refreshes the time_last_active of each
 * job it reports, and slurmctld's own check of missing batch jobs looks only
 * at registrations that come long after its start, so the job would hold its
 * GPUs until its time limit. The registration is known by the node's version
 * (set by registrations alone); it came after the last round that saw the
 * node unregistered, so a job it reported was refreshed to that second or
 * later. With a Prolog, a job's first seconds on its node are not reported
 * either: only a job started BatchStartTimeout before counts then.
 */
static bool _ghost(const struct copus__sched *s, job_record_t *job_ptr)
{
	node_record_t *node_ptr;
	const struct copus__node_reg *g;
	time_t grace = slurm_conf.prolog ? slurm_conf.batch_start_timeout : 0;

	if (!job_ptr->batch_flag || IS_JOB_CONFIGURING(job_ptr) ||
	    IS_JOB_COMPLETING(job_ptr) || job_ptr->het_job_id ||
	    job_ptr->start_time >= s->started || !job_ptr->batch_host ||
	    !(node_ptr = find_node_record(job_ptr->batch_host)))
		return false;
	if ((int)node_ptr->index >= s->nreg)
		return false;
	g = &s->reg[node_ptr->index];
	return g->registered && g->unreg_seen > s->started &&
	       job_ptr->time_last_active < g->unreg_seen &&
	       job_ptr->start_time + grace < g->unreg_seen;
}

static bool _unheard(const struct copus__sched *s, node_record_t *node_ptr,
		     int i, time_t now)
{
	time_t wait = slurm_conf.slurmd_timeout ? slurm_conf.slurmd_timeout
						: COPUS__REGISTER_WAIT;

	if (now >= s->started + wait || IS_NODE_DOWN(node_ptr) ||
	    IS_NODE_DRAIN(node_ptr) || IS_NODE_FAIL(node_ptr))
		return false;
	if (node_ptr->last_response >= s->started)
		return false;
	return IS_NODE_NO_RESPOND(node_ptr) ||
	       !(avail_node_bitmap && bit_test(avail_node_bitmap, i));
}

/*
 * Whether an event round can start nothing, before it reads the jobs: no
 * usable node has a free GPU, no rescale is in flight, and no pending job
 * asks for no generic resource at all (the plugin starts such jobs on
 * CPUs). On a full cluster with a deep queue, where every submission is an
 * event, the round then lets the locks go at once instead of walking every
 * job; the next full round does what waits (deadlines, holds it caused,
 * completions).
 */
static bool _nothing_to_start(struct copus__sched *s, struct copus__round *r,
			      struct copus__lock_clock *clk, time_t parts_at)
{
	job_record_t *job_ptr;
	list_itr_t *it;
	bool cpu_job = false;
	int i, n = 0;

	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i].usable && r->nodes[i].gpus > 0 && r->free[i] > 0)
			return false;
	if (copus__rescales_active(s))
		return false;
	/* Slurm's list iterators outlive the yields (_job_ids). */
	it = list_iterator_create(job_list);
	while (!cpu_job && (job_ptr = list_next(it))) {
		cpu_job = IS_JOB_PENDING(job_ptr) && !job_ptr->gres_list_req;
		if (!(++n & 15) && !_yield(s, r, clk, parts_at))
			break;
	}
	list_iterator_destroy(it);
	/* Reconfigured meanwhile: not idle, and the snapshot stops there. */
	return !cpu_job && !r->error[0];
}

static void _snapshot_running(struct copus__sched *s, struct copus__round *r,
			      job_record_t *job_ptr, int *cap,
			      const bool *unheard)
{
	struct copus__round_job *j = _rj_new(r, cap);
	struct copus__rescale *x;
	struct copus__memo *in;
	int k;

	/*
	 * What the plugin knows of the job stays while the job runs, even in
	 * a round that leaves it out (no GPUs seen, its node not heard from
	 * since a slurmctld restart, mixed types): its attained service, its
	 * request, its progress measurement and the verdict on its hint.
	 */
	if ((in = copus__memo_find(s, job_ptr->job_id)))
		in->seen = true;
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
	x = copus__rescale_find(s, job_ptr->job_id);
	for (k = 0; !(x && !x->gave_up) && k < j->nalloc; k++) {
		if (!unheard[j->alloc[k].node])
			continue;
		/* Not heard from since the start: not a reason to move it.
		 * Its GPUs count as taken. */
		if (!s->grace_logged)
			info("%s: leaving running jobs alone until their nodes register again (at most %lds after the start), e.g. JobId=%u on %s",
			     plugin_type,
			     (long)(slurm_conf.slurmd_timeout ?
				    slurm_conf.slurmd_timeout :
				    COPUS__REGISTER_WAIT),
			     job_ptr->job_id, r->names[j->alloc[k].node]);
		s->grace_logged = true;
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
	copus__job_attrs(job_ptr, j->app, sizeof(j->app), j->user,
			 sizeof(j->user));
	_job_user(job_ptr, j);
	in = copus__job_info(s, job_ptr, j, r->when);
	if (!j->rigid && !(x && !x->gave_up) &&
	    !(in && in->have_hint && in->hint.restart_count == j->restarts)) {
		/*
		 * It has not spoken the protocol in this run (no libcopus, or
		 * not yet): the rescale signal could kill it. It keeps its
		 * GPUs as a rigid job does until it publishes a hint.
		 */
		j->rigid = j->silent = true;
		j->reason = "copus: no hint from its current run: keeps its "
			    "GPUs";
	}
	if (r->quick && !j->rigid && !(x && !x->gave_up)) {
		/* An event round places pending jobs only. */
		j->rigid = j->fixed = true;
		j->reason = "copus: keeps its GPUs until the next full round";
	}
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
 * Lets slurmctld's locks go when they have been held for
 * copus_yield_interval. False when the nodes or partitions were
 * reconfigured meanwhile (r->error then says so).
 */
static bool _yield(struct copus__sched *s, struct copus__round *r,
		   struct copus__lock_clock *clk, time_t parts_at)
{
	if (!copus__lock_yield(clk, &s->stats.locks[COPUS__LOCK_snapshot],
			       s->params.yield_us, s->params.yield_sleep_us))
		return true;
	return !_reconfigured(r, parts_at);
}

/*
 * Whether the nodes or partitions changed since the snapshot began (at
 * parts_at): the node and partition records read so far may be stale, and
 * r->error says so.
 */
static bool _reconfigured(struct copus__round *r, time_t parts_at)
{
	if (node_record_count == r->nnodes && last_part_update == parts_at)
		return false;
	snprintf(r->error, sizeof(r->error), "the nodes or partitions were "
		 "reconfigured during the snapshot");
	return true;
}

/*
 * Every job's id (*ids, the count returned), and the priorities of the
 * pending jobs that may start (*prio, *nprio: copus_max_jobs's cut is
 * taken from them), in one walk of Slurm's job list that lets the locks go
 * every copus_yield_interval. Slurm's list iterators outlive that: a job
 * purged meanwhile is skipped, one submitted meanwhile is read at the
 * list's tail (slurmctld never reorders its job list).
 */
static int _job_ids(struct copus__sched *s, struct copus__round *r,
		    struct copus__lock_clock *clk, time_t parts_at,
		    uint32_t **ids, uint32_t **prio, int *nprio)
{
	list_itr_t *it = list_iterator_create(job_list);
	job_record_t *job_ptr;
	int n = 0, cap = list_count(job_list) + 16;

	*ids = xcalloc(cap, sizeof(**ids));
	*prio = xcalloc(cap, sizeof(**prio));
	*nprio = 0;
	while ((job_ptr = list_next(it))) {
		if (n == cap) {
			cap *= 2;
			xrecalloc(*ids, cap, sizeof(**ids));
			xrecalloc(*prio, cap, sizeof(**prio));
		}
		(*ids)[n++] = job_ptr->job_id;
		if (IS_JOB_PENDING(job_ptr) && job_ptr->priority != 0)
			(*prio)[(*nprio)++] = job_ptr->priority;
		if (!(n & 15) && !_yield(s, r, clk, parts_at))
			break;
	}
	list_iterator_destroy(it);
	return n;
}

/* A pending job that this round does not consider (r->over). */
static void _overflow(struct copus__round *r, uint32_t id)
{
	if (r->nover == r->over_cap) {
		r->over_cap = r->over_cap ? 2 * r->over_cap : 256;
		xrecalloc(r->over, r->over_cap, sizeof(*r->over));
	}
	r->over[r->nover++] = id;
}

static struct copus__round_job *_rj_new(struct copus__round *r, int *cap)
{
	struct copus__round_job *j;

	if (r->nrj == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		xrecalloc(r->rj, *cap, sizeof(*r->rj));
	}
	j = &r->rj[r->nrj++];
	memset(j, 0, sizeof(*j));
	j->job = -1;
	return j;
}

static void _rj_free(struct copus__round_job *j)
{
	xfree(j->alloc);
	xfree(j->nodelist);
	if (!j->eligible_shared)
		xfree(j->eligible);
}

/*
 * The nodes of partition number k (part_ptr), made once per round and
 * shared by its jobs that name no nodes and no reservation of their own:
 * a row a job would otherwise hold, of one byte a node, for 100,000 jobs
 * on 8,192 nodes.
 */
static uint8_t *_part_row(struct copus__round *r, int k,
			  part_record_t *part_ptr)
{
	int i;

	if (k >= r->nparts_rows) {
		xrecalloc(r->parts_rows, k + 1, sizeof(*r->parts_rows));
		r->nparts_rows = k + 1;
	}
	if (!r->parts_rows[k]) {
		r->parts_rows[k] = xcalloc(r->nnodes + 1, 1);
		for (i = 0; i < r->nnodes; i++)
			r->parts_rows[k][i] =
				bit_test(part_ptr->node_bitmap, i);
	}
	return r->parts_rows[k];
}

void copus__snapshot_free(struct copus__round *r)
{
	int i;

	for (i = 0; i < r->nrj; i++)
		_rj_free(&r->rj[i]);
	xfree(r->rj);
	for (i = 0; i < r->nparts_rows; i++)
		xfree(r->parts_rows[i]);
	xfree(r->parts_rows);
	xfree(r->names);
	xfree(r->free);
	xfree(r->cfg);
	xfree(r->state_dir);
	xfree(r->nodes);
	xfree(r->revive);
	xfree(r->ghosts);
	xfree(r->refused);
	xfree(r->over);
	xfree(r->obs);
	memset(r, 0, sizeof(*r));
}

/* The node's GPUs: configured, allocated, type (first type only). */
static void _node_gpus(struct copus__round *r, node_record_t *node_ptr, int i)
{
	char type[16] = "gpu";
	int avail = 0, alloc = 0, t;
	list_itr_t *it;
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
	t = copus__type_index(r, type);
	if (t < 0 && avail > 0 && r->ntypes < COPUS_MAX_GPU_TYPES) {
		t = r->ntypes++;
		snprintf(r->types[t], sizeof(r->types[t]), "%s", type);
	}
	r->nodes[i].gpu_type = t < 0 ? 0 : t;
	if (t < 0)
		r->nodes[i].gpus = 0;
}

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

const char *copus__spank_env(job_record_t *job_ptr, const char *name)
{
	return copus__env_value(job_ptr->spank_job_env,
				job_ptr->spank_job_env_size, name);
}

/* GPUs per node and type of a job's request (gres_list_req). */
static void _job_gpus(job_record_t *job_ptr, struct copus__round_job *j)
{
	list_itr_t *it;
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

/*
 * The job's --elastic, --gpu-types and --gpu-multiple, checked again (they
 * are input).
 */
static void _job_options(job_record_t *job_ptr, struct copus__round_job *j)
{
	if (job_ptr->time_limit == INFINITE)
		j->limit_s = -1;
	else if (job_ptr->time_limit != NO_VAL)
		j->limit_s = 60L * (long)job_ptr->time_limit;
	const char *v;
	char why[128];

	if ((v = copus__spank_env(job_ptr, COPUS__ENV_ELASTIC)) &&
	    copus__parse_elastic(v, &j->emin, &j->emax, why, sizeof(why)))
		error("%s: %pJ: ignoring %s=%s: %s", plugin_type, job_ptr,
		      COPUS__ENV_ELASTIC, v, why);
	if ((v = copus__spank_env(job_ptr, COPUS__ENV_MULTIPLE)) &&
	    copus__parse_multiple(v, &j->multiple, why, sizeof(why)))
		error("%s: %pJ: ignoring %s=%s: %s", plugin_type, job_ptr,
		      COPUS__ENV_MULTIPLE, v, why);
	if ((v = copus__spank_env(job_ptr, COPUS__ENV_TYPES))) {
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

/* The GPUs a running job holds on each of its nodes (gres_list_alloc). */
static void _job_alloc(struct copus__round *r, job_record_t *job_ptr,
		       struct copus__round_job *j)
{
	list_itr_t *it;
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
 * Whether a pending job is held because its node refused the start the
 * plugin gave it after clearing its stray run (memo.cleared): the node was
 * still ending that run (its processes slow to die, its Epilog still
 * running) and took the launch for a second copy; slurmd then has
 * slurmctld requeue the job held, "launch failed requeued held". That hold
 * comes of the plugin's start, not of the user or an admin, so the plugin
 * releases it (rescale.c), at most COPUS__REFUSED_MAX times a job.
 */
static bool _refused(const struct copus__memo *in, job_record_t *job_ptr)
{
	return in->cleared && in->launched >= in->cleared &&
	       in->refused < COPUS__REFUSED_MAX && job_ptr->priority == 0 &&
	       !IS_JOB_COMPLETING(job_ptr) &&
	       job_ptr->state_reason == WAIT_HELD_USER &&
	       job_ptr->state_desc &&
	       !strcmp(job_ptr->state_desc, "launch failed requeued held");
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
 * a cell and the plugin releases it COPUS__RELEASE_GAP seconds after its end,
 * which is all slurmd needs. Held jobs, rigid jobs and begin times that
 * users set are left alone.
 */
static bool _slurm_requeued(job_record_t *job_ptr, time_t now)
{
	job_details_t *d = job_ptr->details;
	int lifetime;
	time_t wait;

	if (!d || !job_ptr->restart_cnt || job_ptr->priority == 0 ||
	    !job_ptr->part_ptr || IS_JOB_COMPLETING(job_ptr) ||
	    IS_JOB_REVOKED(job_ptr) || job_ptr->het_job_id ||
	    d->begin_time <= now ||
	    (d->depend_list && list_count(d->depend_list)) ||
	    !copus__spank_env(job_ptr, COPUS__ENV_ELASTIC))
		return false;
	lifetime = copus_slurm_cred_lifetime();
	/* Requeue: begin = now + lifetime + 1, submit = now (or now + 1). */
	wait = d->begin_time - d->submit_time;
	return wait >= lifetime && wait <= lifetime + 1;
}
