/*
 * Phase 4 of a sched/copus round (see rescale.h): new requests for pending
 * elastic jobs, checkpoint requests, requeues of checkpointed jobs, and the
 * rescale table's bookkeeping, through slurmctld's RPCs.
 *
 * A rescale: the policy moves a running elastic job to a new cell; the
 * plugin asks it to checkpoint (COPUS_RESCALE_SIGNAL) and records the
 * request (memo.h); when the job reports st="checkpointed" the plugin
 * requeues it (a job that exits with 75 is requeued by Slurm itself,
 * RequeueExit=75); once it is pending, the policy decides its new cell and
 * the plugin sets it. A job that does not checkpoint in time is left
 * running and not asked again until the restart delay has passed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "slurm-compat.h"

#include "copus/hint.h"
#include "intake.h"
#include "rescale.h"
#include "round.h"
#include "locks.h"
#include "sched_copus.h"

static bool _resize_repeated(struct copus__sched *s, uint32_t id,
			     const char *tres, uint32_t nodes, time_t now);
static int _gres_unrequested(void *x, void *key);
static void _clear_gpu_request(struct copus__sched *s, uint32_t id);
static void _release_refused(struct copus__sched *s, uint32_t id);

/* The nodes of the run x asks to checkpoint (copus__rescale.ran). */
static void _note_run(struct copus__rescale *x, const struct copus__round *r,
		      const struct copus__round_job *j)
{
	x->nran = 0;
	/* Every node of the run, GPUs or not, or none. */
	if (j->nalloc < 1 || j->nalloc != j->nrun ||
	    j->nalloc > COPUS__RAN_MAX)
		return;
	for (int k = 0; k < j->nalloc; k++)
		x->ran[k] = j->alloc[k].node;
	x->nran = j->nalloc;
	x->ran_reconfigs = r->reconfigs;
	x->ran_start = j->start;
}

void copus__requests(struct copus__sched *s, struct copus__round *r)
{
	time_t now = time(NULL);
	int i;

	for (i = 0; i < r->nrj; i++) {
		struct copus__round_job *j = &r->rj[i];
		struct copus__rescale *x = copus__rescale_find(s, j->id);
		struct copus__memo *in;
		job_desc_msg_t desc;
		char tres[64];

		switch (j->action) {
		case COPUS__ACT_RESIZE:
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
				_clear_gpu_request(s, j->id);
			slurm_init_job_desc_msg(&desc);
			copus_slurm_desc_job(&desc, j->id);
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
				copus__log_plan(r, j);
				s->again = true;
			}
			break;
		case COPUS__ACT_ASK:
			if (s->nrescales == COPUS__RESCALE_MAX)
				break;
			if (copus_slurm_kill_job(j->id, COPUS_RESCALE_SIGNAL,
					   KILL_FULL_JOB) != SLURM_SUCCESS) {
				error("%s: JobId=%u: cannot ask it to "
				      "checkpoint: %m", plugin_type, j->id);
				break;
			}
			x = &s->rescales[s->nrescales++];
			s->state_dirty = true;
			s->stats.rescales_asked++;
			memset(x, 0, sizeof(*x));
			x->id = j->id;
			x->asked = now;
			x->rc = j->restarts;
			x->from = j->cur_gpus;
			x->to = j->dtype >= 0 ? j->per_node * j->num_nodes : 0;
			snprintf(x->type, sizeof(x->type), "%s",
				 j->dtype >= 0 ? r->types[j->dtype] : "-");
			_note_run(x, r, j);
			x->round_real = s->round_real;
			info("%s: JobId=%u asked to checkpoint to go from %d %s "
			     "GPU(s) to %d %s GPU(s) on %d node(s) (%s)",
			     plugin_type, j->id, j->cur_gpus,
			     r->types[j->alloc_type], x->to, x->type,
			     j->num_nodes, r->dec[j->job].reason);
			copus__log_plan(r, j);
			if ((in = copus__memo_find(s, j->id))) {
				copus__memo_asked(in, now, x->from, x->to,
						  j->dtype >= 0 ? x->type : "");
				/* A move to the queue waits there too: not
				 * a restart's cost alone. */
				in->cost_asked =
					x->to > 0 ? copus__now_real() : 0.0;
				in->cost_rc = j->restarts;
			}
			break;
		case COPUS__ACT_REQUEUE:
			if (!x)
				break;
			x->requeue_sent = true;
			s->stats.requeued++;
			/* Its lead (copus__round_phase); the round's requeue
			 * comes as the watch sees the checkpoint. */
			if (x->round_real > 0.0)
				copus__costs_add(&s->leads,
						 copus__now_real() -
							 x->round_real);
			if (copus_slurm_requeue(j->id, 0) != SLURM_SUCCESS &&
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
	/* Jobs that ended of the request: back to the queue. */
	for (i = 0; i < r->nrevive; i++) {
		const struct copus__revive *v = &r->revive[i];
		struct copus__rescale *x = copus__rescale_find(s, v->id);
		struct copus__memo *in;

		if (x)
			x->requeue_sent = true;
		if (copus_slurm_requeue(v->id, 0) != SLURM_SUCCESS) {
			/* Tried again next round, while its entry lasts. */
			error("%s: JobId=%u %s after it was asked to "
			      "checkpoint, and cannot be requeued yet: %m",
			      plugin_type, v->id, v->why);
			if (x)
				x->revived = x->requeue_sent = false;
			continue;
		}
		if ((in = copus__memo_find(s, v->id))) {
			in->revived_rc = v->rc;
			in->revived_end = v->end;
			s->state_dirty = true;
		}
		if (v->again) {
			info("%s: JobId=%u is back as the run that ended (%s) "
			     "after it was asked to checkpoint, which it had "
			     "requeued before slurmctld restarted (on a state "
			     "saved before that requeue); requeued again",
			     plugin_type, v->id, v->why);
			continue;
		}
		s->stats.requeued_after_end++;
		info("%s: JobId=%u ended (%s) after it was asked to "
		     "checkpoint; requeued to resume from its checkpoint",
		     plugin_type, v->id, v->why);
	}
	for (i = 0; i < r->nrefused; i++)
		_release_refused(s, r->refused[i]);
	/* The rescale table: restarted, vanished, late and stale entries. */
	for (i = 0; i < s->nrescales;) {
		struct copus__rescale *x = &s->rescales[i];
		struct copus__round_job *j = NULL;
		int k;

		for (k = 0; k < r->nrj && !j; k++)
			if (r->rj[k].id == x->id)
				j = &r->rj[k];
		if (x->gave_up) {
			if (now - x->asked > s->params.ckpt_deadline +
					     s->params.restart_delay)
				copus__rescale_drop(s, x);
			else
				i++;
			continue;
		}
		/*
		 * A run begun after the request is a new run, whatever its
		 * restart count: slurmctld, restarted on a state saved
		 * before the requeue, may start the job again with the
		 * count it had when asked.
		 */
		if (j && j->running &&
		    ((x->rc >= 0 && j->restarts > x->rc) ||
		     j->start > x->asked)) {
			info("%s: JobId=%u restarted with %d %s GPU(s) %lds "
			     "after it was asked to checkpoint", plugin_type,
			     x->id, j->cur_gpus, r->types[j->alloc_type],
			     (long)(j->start - x->asked));
			s->stats.rescales_done++;
			copus__rescale_drop(s, x);
			continue;
		}
		if (j && j->running && !j->checkpointed &&
		    now - x->asked > s->params.ckpt_deadline) {
			info("%s: JobId=%u did not checkpoint within %ds; "
			     "left running with %d GPU(s)", plugin_type,
			     x->id, s->params.ckpt_deadline, x->from);
			x->gave_up = true;
			s->state_dirty = true;
			s->stats.rescales_timed_out++;
			struct copus__memo *m = copus__memo_find(s, x->id);
			if (m)
				m->cost_asked = 0.0;
			i++;
			continue;
		}
		if (!j && now - x->asked > 2 * s->params.ckpt_deadline + 60) {
			/* Gone, held or finished: nothing left to do. */
			copus__rescale_drop(s, x);
			continue;
		}
		i++;
	}
}

void copus__log_plan(const struct copus__round *r,
		     const struct copus__round_job *j)
{
	char w[128];

	if (!j->plan)
		return;
	copus__plan_words(j->plan, r->types[j->dtype], w, sizeof(w));
	info("%s: JobId=%u plan %s, %.4g s per iteration", plugin_type, j->id,
	     w, j->plan->seconds);
}

/* True when (id, tres, nodes) was requested within the last interval. */
static bool _resize_repeated(struct copus__sched *s, uint32_t id,
			     const char *tres, uint32_t nodes, time_t now)
{
	unsigned k = id % COPUS__RESIZE_MEMO;

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
static void _clear_gpu_request(struct copus__sched *s, uint32_t id)
{
	slurmctld_lock_t locks = { NO_LOCK, WRITE_LOCK, NO_LOCK, NO_LOCK,
				   NO_LOCK };
	job_desc_msg_t desc;
	struct copus__lock_clock clk;
	job_record_t *job_ptr;
	int dropped = 0;

	slurm_init_job_desc_msg(&desc);
	copus_slurm_desc_job(&desc, id);
	desc.tres_per_node = "";
	desc.tres_per_job = "";
	if (slurm_update_job(&desc) != SLURM_SUCCESS) {
		verbose("%s: JobId=%u: cannot clear its GPU request: %m",
			plugin_type, id);
		return;
	}
	copus__lock(&clk, locks);
	job_ptr = find_job_record(id);
	if (job_ptr && IS_JOB_PENDING(job_ptr) && job_ptr->gres_list_req) {
		dropped = list_delete_all(job_ptr->gres_list_req,
					  _gres_unrequested, NULL);
		if (!list_count(job_ptr->gres_list_req))
			FREE_NULL_LIST(job_ptr->gres_list_req);
	}
	copus__unlock(&clk, &s->stats.locks[COPUS__LOCK_rescale]);
	debug("%s: JobId=%u: GPU request cleared (%d entr%s dropped)",
	      plugin_type, id, dropped, dropped == 1 ? "y" : "ies");
}

bool copus__rescales_changed(struct copus__sched *s)
{
	slurmctld_lock_t locks = { NO_LOCK, READ_LOCK, NO_LOCK, NO_LOCK,
				   NO_LOCK };
	struct copus__lock_clock clk;
	bool changed = false;

	if (!copus__rescales_active(s))
		return false;
	copus__lock(&clk, locks);
	for (int i = 0; i < s->nrescales; i++) {
		struct copus__rescale *x = &s->rescales[i];
		job_record_t *job_ptr;
		uint64_t sig;

		if (x->gave_up)
			continue;
		job_ptr = find_job_record(x->id);
		/* A job gone is a change too: any sign but 0. */
		sig = job_ptr ? copus__job_signature(job_ptr) : 2;
		if (x->watched && sig != x->watched)
			changed = true;
		x->watched = sig;
	}
	copus__unlock(&clk, &s->stats.locks[COPUS__LOCK_watch]);
	return changed;
}

/*
 * A job whose node refused its start as a second copy of the run the
 * plugin cleared (snapshot.c, _refused): slurmctld requeued it held, to
 * begin two minutes later. That hold is released, as "scontrol release"
 * does, and the begin time set to now: the job waits KillWait +
 * COPUS__RELEASE_GAP again before its next start (memo.cleared), which is
 * past the revocation of the refused start's credential.
 */
static void _release_refused(struct copus__sched *s, uint32_t id)
{
	struct copus__memo *in = copus__memo_find(s, id);
	job_desc_msg_t desc;

	if (!in)
		return;
	in->refused++;
	slurm_init_job_desc_msg(&desc);
	copus_slurm_desc_job(&desc, id);
	desc.priority = INFINITE;
	/* Slurm's requeue set it to begin two minutes on; the wait below
	 * is all the node needs. */
	desc.begin_time = time(NULL);
	if (slurm_update_job(&desc) != SLURM_SUCCESS) {
		error("%s: JobId=%u: cannot release the hold of its refused "
		      "start: %m", plugin_type, id);
		return;
	}
	in->cleared = time(NULL);
	info("%s: JobId=%u: its node refused its start, still ending the run "
	     "from before slurmctld restarted; hold released (%d of %d), it "
	     "starts again in a moment", plugin_type, id, in->refused,
	     COPUS__REFUSED_MAX);
}
