/*
 * What sched/copus keeps of each job while it snapshots Slurm's records
 * (see intake.h): its hint (parsed when its Comment changed, checked as a
 * claim of its current run), the service it received, what it teaches the
 * predictor when it completes, and whether it ended of a rescale request.
 * Called under the snapshot's locks.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "slurm-compat.h"

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/predict.h"
#include "intake.h"
#include "round.h"
#include "sched_copus.h"

static uint64_t _hash(const char *s);
static bool _hint_run_ok(job_record_t *job_ptr, const copus_hint *h);
static void _job_hint(struct copus__sched *s, job_record_t *job_ptr,
		      struct copus__memo *in);
static void _cost_measured(struct copus__sched *s, job_record_t *job_ptr,
			   struct copus__memo *in);

/*
 * A job that ended after it was asked to checkpoint in the run that
 * ended: it failed (died of the rescale signal, or its script went on
 * after its trainer exited with the requeue code and then failed), or it
 * completed after reporting its checkpoint (its script does not exec its
 * trainer). Such a job is queued for a requeue (r->revive), once. A job
 * that completed without reporting a checkpoint is done; a cancelled one
 * stays cancelled; Slurm requeues a node failure itself. A run the plugin
 * requeued before (copus__memo_revived) is queued again: slurmctld, dead
 * within 5 s of that requeue, came back on a state saved before it.
 */
bool copus__ended_of_request(struct copus__sched *s, struct copus__round *r,
			     job_record_t *job_ptr)
{
	struct copus__rescale *x = copus__rescale_find(s, job_ptr->job_id);
	struct copus__memo *in = copus__memo_find(s, job_ptr->job_id);
	struct copus__revive *v;
	uint32_t ec = job_ptr->exit_code;
	bool ckpt, again = false;

	if (x && !x->revived && !x->gave_up &&
	    ((x->rc >= 0 && (int)job_ptr->restart_cnt > x->rc) ||
	     job_ptr->start_time > x->asked)) {
		/* It restarted after the request and has ended since, too
		 * soon for a round to see it running: the rescale is done. */
		info("%s: JobId=%u restarted after it was asked to checkpoint "
		     "and has ended", plugin_type, job_ptr->job_id);
		s->stats.rescales_done++;
		copus__rescale_drop(s, x);
		return false;
	}
	if (!x && copus__memo_revived(in, (int)job_ptr->restart_cnt,
				      job_ptr->end_time)) {
		/* Requeued before: slurmctld came back on a state saved
		 * before that requeue, with the job as the run that ended. */
		again = true;
	} else {
		if (!x || x->revived || x->rc != (int)job_ptr->restart_cnt)
			return false;
		ckpt = in && in->have_hint &&
		       in->hint.state == COPUS_STATE_CHECKPOINTED &&
		       in->hint.restart_count == (int)job_ptr->restart_cnt;
		if (!IS_JOB_FAILED(job_ptr) &&
		    !(IS_JOB_COMPLETE(job_ptr) && ckpt))
			return false;
		x->revived = true;
	}
	if (in)
		in->seen = true;
	xrecalloc(r->revive, r->nrevive + 1, sizeof(*r->revive));
	v = &r->revive[r->nrevive++];
	v->id = job_ptr->job_id;
	v->rc = (int)job_ptr->restart_cnt;
	v->end = job_ptr->end_time;
	v->again = again;
	if (IS_JOB_COMPLETE(job_ptr))
		snprintf(v->why, sizeof(v->why), "completed after its "
			 "checkpoint");
	else if (WIFSIGNALED(ec))
		snprintf(v->why, sizeof(v->why), "died of signal %d",
			 WTERMSIG(ec));
	else
		snprintf(v->why, sizeof(v->why), "failed with exit code %d",
			 WEXITSTATUS(ec));
	return true;
}

/* The predictor's attributes of a job: its name and its user. */
void copus__job_attrs(job_record_t *job_ptr, char *app, size_t alen,
		      char *user, size_t ulen)
{
	snprintf(app, alen, "%s", job_ptr->name ? job_ptr->name : "");
	/* One line each in the history file. */
	for (; *app; app++)
		if ((unsigned char)*app < ' ')
			*app = ' ';
	snprintf(user, ulen, "%u", (unsigned)job_ptr->user_id);
}

/* FNV-1a: tells whether a Comment changed since it was last parsed. */
static uint64_t _hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

uint64_t copus__job_signature(job_record_t *job_ptr)
{
	uint64_t h = _hash(job_ptr->comment ? job_ptr->comment : "");

	h = (h ^ job_ptr->job_state) * 1099511628211ULL;
	h = (h ^ job_ptr->restart_cnt) * 1099511628211ULL;
	return h ? h : 1;
}

/*
 * Whether a hint may come from the job's current run: a running job's
 * hint must carry its restart count; a pending job's may also come from
 * the run before (its last words before it was requeued). Anything else
 * is a run that is not the job's (an old run still going on a node that
 * Slurm gave up on) or a forgery.
 */
static bool _hint_run_ok(job_record_t *job_ptr, const copus_hint *h)
{
	int rc = (int)job_ptr->restart_cnt;

	if (h->restart_count == rc)
		return true;
	return IS_JOB_PENDING(job_ptr) && h->restart_count + 1 == rc;
}

/*
 * Reads the job's hint from its Comment when the Comment changed: a good
 * one replaces the last good one (and feeds the progress rate), a rejected
 * or clamped one is logged once with the parser's message.
 */
static void _job_hint(struct copus__sched *s, job_record_t *job_ptr,
		      struct copus__memo *in)
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
		s->stats.hints_rejected++;
		error("%s: %pJ: ignoring its hint (%s): %s; keeping the last "
		      "good one", plugin_type, job_ptr, copus_strerror(rc),
		      err[0] ? err : "rejected");
		return;
	}
	if (h.job_id != job_ptr->job_id) {
		s->stats.hints_rejected++;
		error("%s: %pJ: ignoring its hint: it names job %u",
		      plugin_type, job_ptr, h.job_id);
		return;
	}
	if (!_hint_run_ok(job_ptr, &h)) {
		/* Logged once per run that writes them. */
		s->stats.hints_other_run++;
		if (h.restart_count != in->stale_rc)
			error("%s: %pJ: ignoring its hint: it comes from run "
			      "%d (rc), the job's current run is %u",
			      plugin_type, job_ptr, h.restart_count,
			      job_ptr->restart_cnt);
		in->stale_rc = h.restart_count;
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
	if (h.restart_count != in->seen_rc || !in->seen_t0 ||
	    h.progress < in->seen_p1) {
		in->seen_rc = h.restart_count;
		in->seen_t0 = in->seen_t1 = time(NULL);
		in->seen_p0 = in->seen_p1 = h.progress;
	} else {
		in->seen_t1 = time(NULL);
		in->seen_p1 = h.progress;
	}
	if (in->cost_asked > 0.0 && h.restart_count > in->cost_rc &&
	    h.state == COPUS_STATE_RUNNING)
		_cost_measured(s, job_ptr, in);
	in->hint = h;
	in->have_hint = true;
}

/*
 * The first hint of the run that followed a rescale request: what that
 * rescale cost the job, from the request to its stepping again on the new
 * GPUs (the hint comes after its first step), for copus_restart_cost=
 * measured and copusctl stats.
 */
static void _cost_measured(struct copus__sched *s, job_record_t *job_ptr,
			   struct copus__memo *in)
{
	double cost = copus__now_real() - in->cost_asked;
	in->cost_asked = 0.0;
	if (!(cost >= 0.0))
		return;	/* the clock was set back */
	copus__costs_add(&s->costs, cost);
	s->stats.rescales_measured++;
	s->stats.restart_cost_last = cost;
	info("%s: %pJ steps again %.3fs after it was asked to checkpoint; "
	     "the last %d rescale(s) cost %.3fs on average", plugin_type,
	     job_ptr, cost, s->costs.n, copus__costs_mean(&s->costs, 0.0));
}

/*
 * What the plugin keeps of a job seen in this round; NULL when there is no
 * memory for it.
 */
struct copus__memo *copus__job_info(struct copus__sched *s,
				    job_record_t *job_ptr,
				    struct copus__round_job *j, time_t now)
{
	struct copus__memo *in = copus__memo_get(s, job_ptr->job_id);
	time_t before;

	if (!in)
		return NULL;
	in->seen = true;
	before = in->submit;
	j->submit = copus__memo_submit(in, j->submit);
	if (in->submit != before)
		s->state_dirty = true;
	if (!in->req_gpus) {
		in->req_gpus = j->running && j->rigid ? j->cur_gpus :
			       j->gpn_req * j->nodes_req;
		s->state_dirty = true;
	}
	if (!in->type_known) {
		snprintf(in->type_req, sizeof(in->type_req), "%s", j->type_req);
		in->type_known = true;
		s->state_dirty = true;
	}
	if (j->running) {
		if (in->last && now > in->last) {
			double used = (double)j->cur_gpus *
				      (double)(now - in->last);

			in->attained += used;
			copus__usage_charge(&s->usage, j->uid, used);
		}
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

/*
 * A job that completed (exit 0) while the plugin watched it: its total work
 * (the GPU-seconds counted, plus its last stretch) is queued for the
 * predictor, once.
 */
void copus__learn(struct copus__sched *s, struct copus__round *r,
		  job_record_t *job_ptr)
{
	struct copus__memo *in = copus__memo_find(s, job_ptr->job_id);
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
	copus__job_attrs(job_ptr, o->app, sizeof(o->app), o->user, sizeof(o->user));
	o->gpus = in->req_gpus;
	o->batch = in->have_hint ? in->hint.limits.init_batch : 0.0;
	o->work = work;
}
