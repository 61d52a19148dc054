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
#include "snapshot-job.h"
#include "snapshot-node.h"

/*
 * The partitions of a snapshot's jobs, numbered as they come: the round
 * compares a job's partition by its number only.
 */
struct _parts {
	part_record_t **v;
	int n;
};

/*
 * What the snapshot read the nodes and partitions at: a change of any of
 * these during a yield makes what it read of them stale.
 */
struct _epoch {
	time_t parts;		/* last_part_update */
	unsigned reconfigs;	/* copus__sched.reconfigs */
	int nnodes;		/* node_record_count */
};

/* Nodes and partitions */
static int _part_index(struct _parts *parts, part_record_t *part_ptr);


/* The round's jobs */
static int _job_ids(struct copus__sched *s, struct copus__round *r,
		    struct copus__lock_clock *clk, const struct _epoch *at,
		    uint32_t **ids, uint32_t **prio, int *nprio);
static bool _yield(struct copus__sched *s, struct copus__round *r,
		   struct copus__lock_clock *clk, const struct _epoch *at);
static bool _reconfigured(struct copus__sched *s, struct copus__round *r,
			  const struct _epoch *at);
static void _overflow(struct copus__round *r, uint32_t id);
static struct copus__round_job *_rj_new(struct copus__round *r, int *cap);
static void _rj_free(struct copus__round_job *j);
static void _snapshot_running(struct copus__sched *s, struct copus__round *r,
			      job_record_t *job_ptr, int *cap,
			      const bool *unheard);
static void _snapshot_pending(struct copus__sched *s, struct copus__round *r,
			      job_record_t *job_ptr, uint32_t cut,
			      struct _parts *parts, int *cap);
static void _registered(struct copus__sched *s, struct copus__round *r,
			node_record_t *node_ptr, int i);
static bool _ghost(const struct copus__sched *s, job_record_t *job_ptr);
static bool _nothing_to_start(struct copus__sched *s);
static void _snapshot(struct copus__sched *s, struct copus__round *r);

void copus__snapshot(struct copus__sched *s, struct copus__round *r)
{
	if (r->quick && _nothing_to_start(s)) {
		r->idle = true;
		return;
	}
	_snapshot(s, r);
}

/*
 * Phase 1. job_independent() may update a job's dependency state and
 * reason, so the job lock is a write lock here (as in Slurm's own
 * scheduler); nodes and partitions are only read.
 */
static void _snapshot(struct copus__sched *s, struct copus__round *r)
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
	struct _epoch at;
	bool *unheard;

	copus__lock(&clk, locks);
	at.parts = last_part_update;
	at.reconfigs = __atomic_load_n(&s->reconfigs, __ATOMIC_SEQ_CST);
	at.nnodes = node_record_count;
	r->reconfigs = at.reconfigs;
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
		copus__node_gpus(r, node_ptr, i);
		r->nodes[i].usable = copus__node_usable(node_ptr, i);
		unheard[i] = !r->nodes[i].usable &&
			     copus__node_unheard(s, node_ptr, i, r->when);
		_registered(s, r, node_ptr, i);
	}
	if (r->ntypes == 0) {
		r->ntypes = 1;
		snprintf(r->types[0], sizeof(r->types[0]), "gpu");
	}
	/*
	 * The jobs by id, so that the walk below may let the locks go midway
	 * (copus_yield_interval) and find each job again: one that ended
	 * meanwhile is gone, one that changed is read as it is now, and one
	 * submitted meanwhile waits for the next round. The walk that lists
	 * them yields too, and the choice of the copus_max_jobs pending jobs
	 * with the highest priorities is made with the locks let go.
	 */
	nids = _job_ids(s, r, &clk, &at, &ids, &prio, &nprio);
	if (s->params.yield_us <= 0) {
		cut = copus__priority_cut(prio, nprio, s->params.max_jobs);
	} else if (!r->error[0]) {
		copus__unlock(&clk, ls);
		ls->yields++;
		cut = copus__priority_cut(prio, nprio, s->params.max_jobs);
		copus__lock(&clk, locks);
		_reconfigured(s, r, &at);
	}
	xfree(prio);
	for (n = 0; n < nids; n++) {
		if (r->error[0] ||
		    (!(n & 15) && !_yield(s, r, &clk, &at)))
			break;
		if (!(job_ptr = find_job_record(ids[n])))
			continue;
		if (!job_ptr->details)
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
		/*
		 * A run ending, its epilog still running: one that exited to
		 * be rescaled (RequeueExit) is requeued only after it. What
		 * the plugin knows of the job (first submission, service,
		 * request, rescales) stays for its next run.
		 */
		if (IS_JOB_COMPLETING(job_ptr) && !IS_JOB_PENDING(job_ptr)) {
			struct copus__memo *in =
				copus__memo_find(s, job_ptr->job_id);

			if (in)
				in->seen = true;
			continue;
		}
		if (IS_JOB_FINISHED(job_ptr) && !IS_JOB_COMPLETING(job_ptr) &&
		    copus__ended_of_request(s, r, job_ptr))
			continue;
		if (IS_JOB_COMPLETE(job_ptr) && !IS_JOB_COMPLETING(job_ptr)) {
			copus__learn(s, r, job_ptr);
			continue;
		}
		if (IS_JOB_PENDING(job_ptr))
			_snapshot_pending(s, r, job_ptr, cut, &parts, &cap);
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

/*
 * Whether a pending job asks for no generic resource at all (the plugin
 * starts such jobs on CPUs): after each full round by reading every job,
 * then only the jobs submitted since the last look (by id, from the one
 * Slurm was to give next then to the one it will give next now). A job
 * made pending without GPUs otherwise (a requeue, an update) is thus seen
 * within one copus_interval. Under the read locks of clk, let go every
 * copus_yield_interval; false also when Slurm was reconfigured meanwhile.
 */
static bool _no_cpu_job(struct copus__sched *s, struct copus__round *r,
			struct copus__lock_clock *clk, const struct _epoch *at)
{
	uint32_t next = get_next_job_id(true), id;
	job_record_t *job_ptr;
	list_itr_t *it;
	bool none = true, cut = false;
	int n = 0;

	/* One waits already: the round reads the jobs. */
	if (s->cpu_walked && s->cpu_pending)
		return false;
	/* The ids went round (MaxJobId), or jumped: every job is read. */
	if (s->cpu_walked && next >= s->cpu_next_id &&
	    next - s->cpu_next_id <= (uint32_t)list_count(job_list)) {
		for (id = s->cpu_next_id; none && id < next; id++) {
			job_ptr = find_job_record(id);
			if (job_ptr && IS_JOB_PENDING(job_ptr) &&
			    !job_ptr->gres_list_req)
				s->cpu_pending = true;
			none = !s->cpu_pending;
			if (!(++n & 15) && !_yield(s, r, clk, at))
				none = false;
		}
		if (none)
			s->cpu_next_id = next;
		return none;
	}
	s->stats.event_walks++;
	/* Slurm's list iterators outlive the yields (_job_ids). */
	it = list_iterator_create(job_list);
	while (none && (job_ptr = list_next(it))) {
		none = !IS_JOB_PENDING(job_ptr) || job_ptr->gres_list_req;
		/* Reconfigured meanwhile: not idle, and no finding. */
		if (!(++n & 15) && !_yield(s, r, clk, at)) {
			cut = true;
			break;
		}
	}
	list_iterator_destroy(it);
	if (cut)
		return false;
	s->cpu_walked = true;
	s->cpu_pending = !none;
	s->cpu_next_id = next;
	return none;
}

/*
 * Whether an event round can start nothing, before it reads the jobs: no
 * usable node has a free GPU, no rescale is in flight or waits for the
 * first hint of the job's new run to count its cost (a job's hint is an
 * event: this round reads it as it comes), and no pending job asks for no
 * generic resource at all (_no_cpu_job). On a full cluster
 * with a deep queue, where every submission is an event, the round then
 * reads no job further; the next full round does what waits (deadlines,
 * holds it caused, completions). The look takes read locks only, so that
 * squeue and scontrol go on meanwhile, and lets them go every
 * copus_yield_interval; the round takes the job write lock only when it
 * may start something.
 */
static bool _nothing_to_start(struct copus__sched *s)
{
	slurmctld_lock_t locks = { READ_LOCK, READ_LOCK, READ_LOCK, READ_LOCK,
				   READ_LOCK };
	struct copus__lock_clock clk;
	struct copus__lock_stats *ls = &s->stats.locks[COPUS__LOCK_snapshot];
	struct copus__round r = { 0 };
	node_record_t *node_ptr;
	struct _epoch at;
	bool idle = !copus__rescales_active(s);
	int i;

	if (!idle || copus__costs_awaited(s, copus__now_real()))
		return false;
	copus__lock(&clk, locks);
	at.parts = last_part_update;
	at.reconfigs = __atomic_load_n(&s->reconfigs, __ATOMIC_SEQ_CST);
	at.nnodes = node_record_count;
	r.when = time(NULL);
	r.nnodes = node_record_count;
	if (s->nreg != r.nnodes) {
		xrecalloc(s->reg, r.nnodes + 1, sizeof(*s->reg));
		s->nreg = r.nnodes;
	}
	for (i = 0; (node_ptr = next_node(&i)); i++) {
		char type[16];
		int avail, alloc;

		/* Every round notes the nodes' registrations: a node not
		 * yet registered after a restart is seen so (_ghost). */
		_registered(s, &r, node_ptr, i);
		copus__node_gres(node_ptr, &avail, &alloc, type, sizeof(type));
		if (copus__node_usable(node_ptr, i) && avail > 0 &&
		    alloc < avail)
			idle = false;
	}
	if (idle)
		idle = _no_cpu_job(s, &r, &clk, &at);
	copus__unlock(&clk, ls);
	return idle;
}

/*
 * A pending job: into the round (r->jobs) if the policy may place it, or
 * among those the round leaves out (refused, over copus_max_jobs), or
 * cancelled when its --deadline can no longer be met.
 */
static void _snapshot_pending(struct copus__sched *s, struct copus__round *r,
			      job_record_t *job_ptr, uint32_t cut,
			      struct _parts *parts, int *cap)
{
	job_details_t *d = job_ptr->details;
	struct copus__rescale *x;
	struct copus__memo *in;
	struct copus__round_job *j;
	bool startable, requeued = false;
	int i;

	/* As Slurm's schedulers do: a job whose --deadline can no
	 * longer be met is cancelled (state DEADLINE). */
	if (job_ptr->deadline && job_ptr->deadline != NO_VAL &&
	    !IS_JOB_COMPLETING(job_ptr) &&
	    !deadline_ok(job_ptr, "sched/copus"))
		return;
	if ((in = copus__memo_find(s, job_ptr->job_id)))
		in->seen = true;
	if (in && copus__job_refused(in, job_ptr)) {
		xrecalloc(r->refused, r->nrefused + 1,
			  sizeof(*r->refused));
		r->refused[r->nrefused++] = job_ptr->job_id;
		return;
	}
	x = copus__rescale_find(s, job_ptr->job_id);
	if (x && !x->gave_up) {
		/* Requeued for a rescale: the policy decides its
		 * new cell even before it may start again. */
		if (IS_JOB_COMPLETING(job_ptr) ||
		    job_ptr->priority == 0 || !job_ptr->part_ptr)
			return;
		startable = copus__job_startable(job_ptr);
	} else if (r->npending < s->params.max_jobs &&
		   copus__job_slurm_requeued(job_ptr, r->when)) {
		startable = false;
		requeued = true;
	} else {
		if (!copus__job_startable(job_ptr))
			return;
		if (r->npending >= s->params.max_jobs ||
		    job_ptr->priority < cut) {
			_overflow(r, job_ptr->job_id);
			return;
		}
		startable = true;
	}
	j = _rj_new(r, cap);
	j->id = job_ptr->job_id;
	j->priority = job_ptr->priority;
	j->submit = d->submit_time;
	j->end = job_ptr->end_time;
	j->restarts = job_ptr->restart_cnt;
	j->part = _part_index(parts, job_ptr->part_ptr);
	j->nodes_req = d->min_nodes ? (int)d->min_nodes : 1;
	copus__job_gpus(job_ptr, j);
	copus__job_options(job_ptr, j);
	copus__job_attrs(job_ptr, j->app, sizeof(j->app), j->user,
			 sizeof(j->user));
	copus__job_user(job_ptr, j);
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
		j->eligible = copus__part_row(r, j->part,
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
	/* Set by batch_requeue_fini, once every node ended the run. */
	if (j->restarts > 0 && !IS_JOB_COMPLETING(job_ptr))
		j->requeued = d->submit_time;
	r->npending++;
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
	copus__job_gpus(job_ptr, j);
	copus__job_options(job_ptr, j);
	copus__job_alloc(r, job_ptr, j);
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
	copus__job_user(job_ptr, j);
	in = copus__job_info(s, job_ptr, j, r->when);
	/* This slurmctld runs it: it sees that run end. */
	copus__memo_seen_running(in, j->start);
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
	if ((r->quick || r->between) && !j->rigid && !(x && !x->gave_up)) {
		/* An event round, or one between two on copus_interval,
		 * moves no running job. */
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
		   struct copus__lock_clock *clk, const struct _epoch *at)
{
	if (!copus__lock_yield(clk, &s->stats.locks[COPUS__LOCK_snapshot],
			       s->params.yield_us, s->params.yield_sleep_us))
		return true;
	return !_reconfigured(s, r, at);
}

/*
 * Whether the nodes or partitions changed since the snapshot began (at):
 * the node and partition records read so far may be stale, and r->error
 * says so.
 */
static bool _reconfigured(struct copus__sched *s, struct copus__round *r,
			  const struct _epoch *at)
{
	if (node_record_count == at->nnodes && last_part_update == at->parts &&
	    __atomic_load_n(&s->reconfigs, __ATOMIC_SEQ_CST) == at->reconfigs)
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
		    struct copus__lock_clock *clk, const struct _epoch *at,
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
		if (!(n & 15) && !_yield(s, r, clk, at))
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

