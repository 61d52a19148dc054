/*
 * sched/copus: a slurmctld scheduler plugin that gives GPUs to jobs by the
 * core policy of copus (include/copus/policy.h).
 *
 * slurm.conf:
 *   SchedulerType=sched/copus
 *   SchedulerParameters=sched_interval=-1,copus_interval=10,...
 * (sched_interval=-1 turns Slurm's own FIFO pass off, so that this plugin
 * alone starts jobs; see sched_copus(8) for the copus_ keys.)
 *
 * This file holds the plugin's ABI (init, fini, sched_p_reconfig) and its
 * agent: the thread that runs the rounds. Every round runs in that thread
 * in four phases, each in its own file:
 *  1. snapshot.c: under the slurmctld locks, copy what the decision needs:
 *     usable nodes and their GPUs (less those held by jobs the policy does
 *     not see), running GPU jobs with their allocation, pending jobs that
 *     may start now, and each job's hint (its Comment, parsed only when it
 *     changed; the last good one is kept; intake.c);
 *  2. round.c, the decision: outside the locks and without Slurm,
 *     copus_policy_decide() on the copies, its decisions turned into an
 *     action per job;
 *  3. actions.c: under the write locks, check each job again and start it
 *     on the decided nodes as the backfill plugin does (exclude every other
 *     node, select_nodes(), launch), or give it a readable pending reason;
 *  4. rescale.c, the requests: outside the locks, through slurmctld's own
 *     RPCs as scontrol would: set a pending elastic job's request to its
 *     decided cell, ask a running elastic job to checkpoint (the rescale
 *     protocol), requeue a job that reported its checkpoint.
 * Between rounds the plugin keeps each job's record and the rescales in
 * flight (memo.c) and its files in StateSaveLocation (statefile.c); its
 * state is one struct (sched_copus.h), handed to each phase.
 *
 * Built against the Slurm source of exactly the installed version
 * (plugin_version must equal SLURM_VERSION_NUMBER); Slurm's symbols resolve
 * from slurmctld when it loads the plugin, the core's from libcopus-core.
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "slurm-compat.h"

#include "copus/error.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "actions.h"
#include "params.h"
#include "rescale.h"
#include "round.h"
#include "locks.h"
#include "sched_copus.h"
#include "snapshot.h"
#include "statefile.h"

const char plugin_name[] = "copus co-adaptive GPU scheduler";
const char plugin_type[] = "sched/copus";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static struct copus__sched _sched = {
	.thread_lock = PTHREAD_MUTEX_INITIALIZER,
	.term_lock = PTHREAD_MUTEX_INITIALIZER,
	.term_cond = PTHREAD_COND_INITIALIZER,
};

static void _report_param(const char *msg, void *arg)
{
	error("%s: %s", plugin_type, msg);
}

static void _report_config(const char *msg, void *arg)
{
	error("%s: slurm.conf: %s", plugin_type, msg);
}

/* A job_defaults_t list holds a default memory per GPU. */
static int _mem_per_gpu(void *x, void *key)
{
	job_defaults_t *d = x;

	return d->type == JOB_DEF_MEM_PER_GPU && d->value;
}

/*
 * Whether every partition gets a default memory (DefMemPerCPU,
 * DefMemPerNode or DefMemPerGPU), its own or the cluster's.
 */
static bool _def_mem_everywhere(void)
{
	list_itr_t *it;
	part_record_t *part_ptr;
	bool all = true;

	if (slurm_conf.def_mem_per_cpu ||
	    (slurm_conf.job_defaults_list &&
	     list_find_first(slurm_conf.job_defaults_list, _mem_per_gpu,
			     NULL)))
		return true;
	if (!part_list || !list_count(part_list))
		return false;
	it = list_iterator_create(part_list);
	while ((part_ptr = list_next(it)))
		if (!part_ptr->def_mem_per_cpu &&
		    !(part_ptr->job_defaults_list &&
		      list_find_first(part_ptr->job_defaults_list,
				      _mem_per_gpu, NULL)))
			all = false;
	list_iterator_destroy(it);
	return all;
}

/*
 * Reads the copus_ keys and checks the rest of slurm.conf (called with the
 * configuration and partitions read-locked).
 */
static void _load_params(struct copus__sched *s)
{
	struct copus__slurm_view v = {
		.sched_params = slurm_conf.sched_params,
		.cr_memory = (slurm_conf.select_type_param & COPUS_SLURM_CR_MEMORY) != 0,
		.def_mem = _def_mem_everywhere(),
		.requeue_exit = slurm_conf.requeue_exit,
		.job_requeue = slurm_conf.job_requeue != 0,
		.job_submit = slurm_conf.job_submit_plugins,
	};

	copus__params_parse(slurm_conf.sched_params, &s->params, _report_param,
			    NULL);
	copus__config_check(&v, _report_config, NULL);
	info("%s: policy %s, interval %ds, restart delay %ds, restart cost "
	     "%s%gs, checkpoint deadline %ds, fairness %.2f, at most %d "
	     "pending jobs per round", plugin_type, s->params.policy,
	     s->params.interval, s->params.restart_delay,
	     s->params.restart_measured ? "measured, until then " : "",
	     s->params.restart_cost, s->params.ckpt_deadline,
	     s->params.fairness, s->params.max_jobs);
}

/* (Re)creates the core policy from the parameters. */
static void _policy_setup(struct copus__sched *s)
{
	copus_policy_params prm;
	copus_policy *p = NULL;
	int rc;

	copus__policy_params(&s->params, &prm);
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

/*
 * (Re)reads the planner's GPU constants (copus_planner_gpus); a bad file
 * is logged and the constants in effect stay. The cache of plans starts
 * afresh either way.
 */
static void _planner_setup(struct copus__sched *s)
{
	char err[512];
	int rc;

	rc = copus__planner_load(&s->planner, s->params.planner_gpus, err,
				 sizeof(err));
	if (rc != COPUS_OK)
		error("%s: SchedulerParameters: copus_planner_gpus: %s; the "
		      "planner's constants stay %s%s", plugin_type, err,
		      s->planner.path[0] ? "those of " :
					   "the built-in ones",
		      s->planner.path);
	else if (s->planner.path[0])
		info("%s: the planner's constants of %d GPU type(s) from %s; "
		     "other types get the built-in ones", plugin_type,
		     s->planner.ntypes, s->planner.path);
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

/* Hints whose verdict changed this round (round.c: a hint is a claim). */
static void _log_claims(const struct copus__round *r)
{
	int i;

	for (i = 0; i < r->nrj; i++) {
		const struct copus__round_job *j = &r->rj[i];

		if (j->claim_flip > 0 && !isfinite(j->claim_flip))
			error("%s: JobId=%u: its hint claims progress, but it "
			      "made none on %d GPU(s) in %.0f s; its model is "
			      "ignored until its progress bears it out",
			      plugin_type, j->id, j->cur_gpus, j->claim_span);
		else if (j->claim_flip > 0)
			error("%s: JobId=%u: its hint claims %.1fx the progress "
			      "it makes on %d GPU(s) (seen over %.0f s); its "
			      "model is ignored until its progress bears it "
			      "out", plugin_type, j->id, j->claim_flip,
			      j->cur_gpus, j->claim_span);
		else if (j->claim_flip < 0)
			info("%s: JobId=%u: its progress now bears out its "
			     "hint (it claims %.1fx); its model is used again",
			     plugin_type, j->id, -j->claim_flip);
	}
}

/*
 * Jobs with a model whose decided cell has no plan (the decision is not
 * applied), or for which the planner gave no table.
 */
static void _log_plans(const struct copus__round *r)
{
	int i;

	for (i = 0; i < r->nrj; i++) {
		const struct copus__round_job *j = &r->rj[i];

		if (j->no_plan)
			info("%s: JobId=%u: %d %s GPU(s) on %d node(s) were "
			     "decided for it, but no plan of its model fits "
			     "them; not applied", plugin_type, j->id,
			     j->per_node * j->num_nodes, r->types[j->dtype],
			     j->num_nodes);
		else if (j->planned && j->plan_rc != COPUS_OK)
			error("%s: JobId=%u: the planner gives no plan of its "
			      "model: %s", plugin_type, j->id,
			      copus_strerror(j->plan_rc));
	}
}

/* The round's figures, into the counters. */
static void _count_round(struct copus__sched *s, const struct copus__round *r)
{
	struct copus__stats *st = &s->stats;
	double ms = r->t_snap + r->t_decide + r->t_act;

	st->rounds++;
	st->round_ms_last = ms;
	st->round_ms_sum += ms;
	st->round_ms_mean = st->round_ms_sum / st->rounds;
	if (ms > st->round_ms_max)
		st->round_ms_max = ms;
	st->jobs_running = r->nrunning;
	st->jobs_pending = r->npending;
	st->jobs_beyond = r->nover;
	st->starts += r->started;
	st->starts_last = r->started;
	if (r->started > st->starts_max)
		st->starts_max = r->started;
	if (r->error[0])
		st->decide_errors++;
}

/*
 * Whether Slurm's job or node records changed in or after the second the
 * last round began (Slurm keeps those times to the second): a job was
 * submitted, ended or updated, a node changed state. The plugin's own
 * starts count too, so one event is followed by a few event rounds at
 * most, within that second. The two times are read without a lock, as
 * single words that only grow: at worst a change is seen a poll late.
 */
static bool _changed(struct copus__sched *s)
{
	time_t j = last_job_update, n = last_node_update;

	return j >= s->round_began || n >= s->round_began;
}

/*
 * One round: the four phases, timed (see the top of this file). An event
 * round (quick) only starts pending jobs on what is free: running jobs keep
 * their GPUs, and reallocation waits for the full round. Returns its
 * milliseconds when it started no job, else 0.
 */
static double _round(struct copus__sched *s, bool quick, bool between)
{
	struct copus__round r;
	struct timespec t, began;
	double ms;

	memset(&r, 0, sizeof(r));
	r.quick = quick;
	r.between = between;
	s->round_began = time(NULL);
	if (quick)
		s->stats.event_rounds++;
	clock_gettime(CLOCK_MONOTONIC, &t);
	began = t;
	copus__snapshot(s, &r);
	/* A job made pending without GPUs by a requeue or an update, which
	 * no submission announces, is seen at the next look after this. */
	if (!quick)
		s->cpu_walked = false;
	if (r.idle) {
		/* Nothing read, nothing to decide: the records stay. */
		s->stats.event_rounds_idle++;
		copus__snapshot_free(&r);
		return _ms_since(&began);
	}
	/* A snapshot cut short (a reconfigure) did not see every job. */
	if (!r.error[0])
		copus__memo_sweep(s, r.when < r.reg_quiet);
	r.t_snap = _ms_since(&t);
	copus__history_learn(s, r.state_dir, r.obs, r.nobs);
	copus__round_decide(s, &r);
	if (r.predict_rc != COPUS_OK)
		verbose("%s: predictor: %s", plugin_type,
			copus_strerror(r.predict_rc));
	if (r.error[0])
		error("%s: %s; nothing decided this round", plugin_type,
		      r.error);
	r.t_decide = _ms_since(&t);
	_log_claims(&r);
	_log_plans(&r);
	if (copus__round_launches(s, &r, true))
		copus__state_save(s, r.state_dir);
	copus__act(s, &r);
	copus__round_launches(s, &r, false);
	r.t_act = _ms_since(&t);
	copus__requests(s, &r);
	s->wake_at = r.wake;
	_count_round(s, &r);
	copus__state_save(s, r.state_dir);
	/* The status shows the full rounds' decisions. */
	if (!quick)
		copus__status_write(s, &r);
	copus__stats_write(s, r.state_dir);
	ms = r.started ? 0.0 : _ms_since(&began);
	copus__round_free(&r);
	copus__snapshot_free(&r);
	return ms;
}

/* Milliseconds from a to b (negative when b is earlier). */
static double _ms_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1e3 + (b->tv_nsec - a->tv_nsec) / 1e6;
}

/*
 * After a round that started nothing and took round_ms: the earliest time of
 * the next event round, so that such rounds take at most a tenth of the time (a
 * round of t ms is followed by 9 t ms without an event round). On a deep queue,
 * where every submission is an event and each look walks every job, this keeps
 * slurmctld's locks free for the RPCs. A round that started jobs is followed by
 * the next at the next poll, as Slurm's schedulers run on each job's end: under
 * churn, on a busy machine, a wait after each round kept a quarter of the
 * starts back. Full rounds keep their interval.
 */
static void _event_gap(double round_ms, struct timespec *after)
{
	double gap_ms = COPUS__EVENT_IDLE * round_ms;

	clock_gettime(CLOCK_MONOTONIC, after);
	after->tv_sec += (time_t)(gap_ms / 1e3);
	after->tv_nsec += (long)(fmod(gap_ms, 1e3) * 1e6);
	if (after->tv_nsec >= 1000000000L) {
		after->tv_sec++;
		after->tv_nsec -= 1000000000L;
	}
}

/*
 * The agent's next wake-up: ms from now, or sooner the beginning of the
 * next full round (full_at, wall clock) or the start of the second a held
 * job may start in (s->wake_at, a millisecond in, when time() has turned),
 * so that each comes on time, not at the next look.
 */
static void _wake_time(const struct copus__sched *s, long ms, double full_at,
		       struct timespec *ts)
{
	double now = copus__now_real(), at = now + ms / 1e3;

	if (s->wake_at > now && (double)s->wake_at + 1e-3 < at)
		at = (double)s->wake_at + 1e-3;
	if (full_at > now && full_at < at)
		at = full_at;
	ts->tv_sec = (time_t)at;
	ts->tv_nsec = (long)((at - (double)ts->tv_sec) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/*
 * When the full round after one that began at began comes: interval
 * seconds later, moved by at most half a second to the phase within the
 * second that the rescales' leads call for (copus__round_phase), so that
 * the jobs it asks to checkpoint are requeued late in a second and those
 * that restart on their nodes wait least for the next.
 */
static double _next_full(struct copus__sched *s, double began)
{
	double at = began + s->params.interval,
	       phase = copus__round_phase(&s->leads, COPUS__PHASE_MARGIN),
	       aligned;

	s->stats.round_phase = isnan(phase) ? -1.0 : phase;
	if (isnan(phase))
		return at;
	aligned = floor(at - 0.5) + phase;
	if (aligned < at - 0.5)
		aligned += 1.0;
	return aligned;
}

/* Whether a held job's hold has ended (copus__round.wake). */
static bool _wake_due(const struct copus__sched *s)
{
	return s->wake_at && time(NULL) >= s->wake_at;
}

static void *_agent(void *arg)
{
	struct copus__sched *s = arg;
	struct timespec ts;
	/* The configuration and partitions, read (_load_params). */
	slurmctld_lock_t conf = { READ_LOCK, NO_LOCK, NO_LOCK, READ_LOCK,
				  NO_LOCK };
	struct timespec now, event_after = { 0 }, rescale_after = { 0 };
	double next_full = 0.0, began;
	struct copus__lock_clock clk;
	bool full, reconfig, on_interval, watched;
	char *dir;
	int i;

	s->stats.round_phase = -1.0;
	copus__lock(&clk, conf);
	_load_params(s);
	dir = xstrdup(slurm_conf.state_save_location);
	copus__unlock(&clk, &s->stats.locks[COPUS__LOCK_config]);
	_policy_setup(s);
	_planner_setup(s);
	if ((i = copus_predictor_create(NULL, &s->predictor)) != COPUS_OK)
		error("%s: no predictor of remaining times: %s", plugin_type,
		      copus_strerror(i));
	copus__state_load(s, dir);
	copus__history_load(s, dir, true);
	xfree(dir);
	while (1) {
		slurm_mutex_lock(&s->term_lock);
		if (!s->stop && !s->again) {
			/*
			 * Between full rounds, every COPUS__EVENT_MS the
			 * plugin looks whether a job or a node changed (a job
			 * was submitted or ended, a node returned) and, if so,
			 * starts what fits in an event round. While a rescale
			 * is in flight it looks at the rescales' jobs every
			 * COPUS__WATCH_MS (below).
			 */
			_wake_time(s, copus__rescales_active(s) ?
				   COPUS__WATCH_MS : COPUS__EVENT_MS, next_full,
				   &ts);
			pthread_cond_timedwait(&s->term_cond, &s->term_lock,
					       &ts);
		}
		full = s->again || s->reconfig;
		reconfig = s->reconfig;
		s->again = false;
		if (s->stop) {
			slurm_mutex_unlock(&s->term_lock);
			break;
		}
		if (s->reconfig) {
			s->reconfig = false;
			slurm_mutex_unlock(&s->term_lock);
			copus__lock(&clk, conf);
			_load_params(s);
			copus__unlock(&clk,
				      &s->stats.locks[COPUS__LOCK_config]);
			_policy_setup(s);
			_planner_setup(s);
		} else {
			slurm_mutex_unlock(&s->term_lock);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		/*
		 * A round on its interval (or after a reconfigure) decides
		 * every job; one that a rescale in flight or a request set
		 * brings sooner carries the rescales on and moves no other
		 * running job (copus__round.between). While a rescale is in
		 * flight such a round comes as soon as one of its jobs
		 * changed (it checkpointed, its requeue completed) or a held
		 * job's hold ended, and every COPUS__RESCALE_MS regardless.
		 */
		/* (A wall clock set back does not hold the rounds back.) */
		began = copus__now_real();
		on_interval = reconfig || began >= next_full ||
			      next_full - began > s->params.interval + 1.0;
		watched = false;
		if (!on_interval && !full && copus__rescales_active(s) &&
		    _ms_between(&rescale_after, &now) < 0)
			watched = copus__rescales_changed(s) || _wake_due(s);
		if (on_interval || full || watched ||
		    (copus__rescales_active(s) &&
		     _ms_between(&rescale_after, &now) >= 0)) {
			if (watched)
				s->stats.watch_rounds++;
			if (on_interval) {
				s->round_real = began;
				next_full = _next_full(s, began);
			}
			rescale_after = now;
			rescale_after.tv_nsec += COPUS__RESCALE_MS * 1000000L;
			rescale_after.tv_sec += rescale_after.tv_nsec /
						1000000000L;
			rescale_after.tv_nsec %= 1000000000L;
			_event_gap(_round(s, false, !on_interval),
				   &event_after);
		} else if ((_changed(s) || _wake_due(s)) &&
			   _ms_between(&event_after, &now) >= 0) {
			/* Something changed, or a held job may start. */
			_event_gap(_round(s, true, false), &event_after);
		}
	}
	if (s->policy)
		copus_policy_destroy(s->policy);
	s->policy = NULL;
	if (s->predictor)
		copus_predictor_destroy(s->predictor);
	s->predictor = NULL;
	copus__memo_free(s);
	copus__usage_free(&s->usage);
	xfree(s->reg);
	s->nreg = 0;
	copus__planner_free(&s->planner);
	return NULL;
}

extern int init(void)
{
	struct copus__sched *s = &_sched;

	if (slurmctld_config.scheduling_disabled)
		return SLURM_SUCCESS;
	slurm_mutex_lock(&s->thread_lock);
	if (s->thread) {
		slurm_mutex_unlock(&s->thread_lock);
		error("%s: scheduler thread already running", plugin_type);
		return SLURM_ERROR;
	}
	s->stop = false;
	s->started = time(NULL);
	s->grace_logged = false;
	copus_slurm_thread_create("copus", &s->thread, _agent, s);
	slurm_mutex_unlock(&s->thread_lock);
	info("%s: loaded", plugin_type);
	return SLURM_SUCCESS;
}

extern void fini(void)
{
	struct copus__sched *s = &_sched;

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
	struct copus__sched *s = &_sched;

	__atomic_add_fetch(&s->reconfigs, 1, __ATOMIC_SEQ_CST);
	slurm_mutex_lock(&s->term_lock);
	s->reconfig = true;
	pthread_cond_signal(&s->term_cond);
	slurm_mutex_unlock(&s->term_lock);
	return SLURM_SUCCESS;
}
