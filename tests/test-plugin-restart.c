/*
 * sched/copus's rounds for a job in a rescale and for jobs that slurmctld's
 * restart caught (plugin/round.c, plugin/memo.c), run on rounds built by
 * hand the way the snapshot fills them (plugin-round-world.h): a job asked
 * to move is requeued once it has checkpointed and restarts on the cell it
 * was moved to; a job that ran before a restart waits for the nodes'
 * registrations, and a run that slurmctld lost is cleared before the job
 * starts again.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/planner.h"
#include "copus/policy.h"
#include "plugin-round-world.h"

static void a_rescale_in_flight_is_not_asked_again(void)
{
	struct copus__round_job *j;
	struct copus__rescale *x = &W.s.rescales[0];

	rw_cluster(2, 4);
	j = rw_running(1, 0, 1, 4, 1, 4, NOW - 1000);
	W.nodes[0].usable = false;
	memset(x, 0, sizeof(*x));
	x->id = 1;
	x->asked = NOW - 5;
	x->rc = 0;
	W.s.nrescales = 1;
	j->in_rescale = true;
	rw_decide();
	CU_ASSERT(W.r.dec[j->job].changed);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * Running job j, asked 5 s ago to move, has checkpointed: the only entry
 * of the rescale table.
 */
static void _checkpointed(struct copus__round_job *j)
{
	struct copus__rescale *x = &W.s.rescales[0];

	memset(x, 0, sizeof(*x));
	x->id = j->id;
	x->asked = NOW - 5;
	W.s.nrescales = 1;
	j->in_rescale = true;
	j->checkpointed = true;
}

static void a_checkpointed_job_is_requeued_once(void)
{
	struct copus__round_job *j;
	struct copus__rescale *x = &W.s.rescales[0];

	rw_cluster(2, 4);
	j = rw_running(1, 0, 1, 4, 1, 4, NOW - 1000);
	_checkpointed(j);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_REQUEUE);
	/* Once the plugin has requeued it, it waits. */
	x->requeue_sent = true;
	copus__round_free(&W.r);
	j->action = COPUS__ACT_NONE;
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * A round between two on copus_interval (one that a rescale in flight
 * brings sooner) asks no running job to move, not even one the policy
 * moves off a node that went away, while it requeues a job that has
 * checkpointed and starts a pending one; the next round on its interval
 * asks the move.
 */
static void a_round_between_intervals_moves_no_running_job(void)
{
	struct copus__round_job *j, *c, *p;
	struct copus__rescale *x = &W.s.rescales[0];

	rw_cluster(4, 4);
	j = rw_running(1, 0, 1, 4, 1, 4, NOW - 1000);
	W.nodes[0].usable = false;
	c = rw_running(2, 1, 1, 4, 1, 4, NOW - 1000);
	_checkpointed(c);
	p = rw_pending(3, 1, 2, 0, 0);
	W.r.between = true;
	rw_decide();
	CU_ASSERT(W.r.dec[j->job].changed);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	ASSERT_ACTION(c, COPUS__ACT_REQUEUE);
	ASSERT_ACTION(p, COPUS__ACT_START);
	copus__round_free(&W.r);
	j->action = c->action = p->action = COPUS__ACT_NONE;
	x->requeue_sent = true;
	W.r.between = false;
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_ASK);
	W.s.nrescales = 0;
}

/*
 * On a new cluster of 2 x 4 GPUs, job 1 (1-4 GPUs, with a hint), requeued
 * for a rescale: its run ended at end, Slurm completed its requeue at
 * requeued (0: not known).
 */
static struct copus__round_job *_requeued_pending(time_t end, time_t requeued)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	j = rw_pending(1, 1, 1, 1, 4);
	rw_hint(j);
	j->restarts = 1;
	j->in_rescale = true;
	j->waits_release = true;
	j->end = end;
	j->requeued = requeued;
	return j;
}

static void a_requeued_job_is_resized_after_the_release_gap(void)
{
	struct copus__round_job *j;

	j = _requeued_pending(NOW - COPUS__RELEASE_GAP + 1, 0);
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT_STRING_EQUAL(j->reason,
			       "copus: requeued, restarts in a moment");
	copus__round_free(&W.r);
	j->reason = NULL;
	j->end = NOW - COPUS__RELEASE_GAP;
	rw_decide();
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_PTR_NOT_NULL(strstr(j->reason, "copus: starts with"));
}

/*
 * A requeued job the round resized to restart (starts), or held for its
 * release gap, with the agent woken for it in the second it may start.
 */
static void _assert_released(const struct copus__round_job *j, bool starts)
{
	if (starts) {
		ASSERT_ACTION(j, COPUS__ACT_RESIZE);
		return;
	}
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT_STRING_EQUAL(j->reason,
			       "copus: requeued, restarts in a moment");
	CU_ASSERT_EQUAL(W.r.wake, copus__round_release(j));
}

/*
 * slurmctld stamps the revocation of a run's credential when the run ends,
 * before its requeue completes, so a job whose requeue completed in the
 * second its run ended starts in the next second, not COPUS__RELEASE_GAP s
 * after its end; one requeued a second later waits for the gap as before,
 * and so does one whose requeue time is not known.
 */
static void a_requeued_job_starts_the_second_after_its_requeue(void)
{
	struct copus__round_job *j;
	/* { end, requeued, may it start at NOW } */
	static const struct {
		time_t end, requeued;
		bool starts;
	} cases[] = {
		{ NOW - 1, NOW - 1, true },  { NOW, NOW, false },
		{ NOW - 1, NOW, false },     { NOW - 2, NOW - 1, true },
		{ NOW - 1, 0, false },	     { NOW - 2, 0, true },
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		j = _requeued_pending(cases[k].end, cases[k].requeued);
		CU_ASSERT_EQUAL(copus__round_release(j) <= NOW,
				cases[k].starts);
		rw_decide();
		_assert_released(j, cases[k].starts);
		copus__round_free(&W.r);
	}
}

/*
 * A job requeued for a rescale restarts on the cell the round that asked
 * it decided (2 aws GPUs here), not on what the policy would give it as a
 * new job (its request, 4 dgx-ext GPUs), for one round interval after it
 * may restart (the release gap after its requeue, however short the
 * interval), and longer while another job asked in the same round has not
 * given up its GPUs yet (still running, or requeued later), or while no
 * round has yet found it able to restart (rounds that came late, UNSEEN;
 * nodes registering after a slurmctld restart, SETTLING; a node that
 * registers after a round found it able to, HELD_AGAIN); then the policy
 * decides anew. A job asked in another round, or one that gave up, does not
 * hold it.
 */
/*
 * Job j, pending, was asked 10 s ago to go from `from` GPUs to `to` of the
 * type, checkpointed and was requeued by the plugin, its run ending at
 * end: the only entry of the rescale table.
 */
static void _requeued(struct copus__round_job *j, time_t end, int from,
		      int to, const char *type)
{
	struct copus__rescale *x = &W.s.rescales[0];

	j->restarts = 1;
	j->in_rescale = true;
	j->end = end;
	memset(x, 0, sizeof(*x));
	x->id = j->id;
	x->asked = NOW - 10;
	x->from = from;
	x->to = to;
	snprintf(x->type, sizeof(x->type), "%s", type);
	x->requeue_sent = true;
	x->pending_since = end;
	/* The round it could restart in saw it. */
	x->ready = end + COPUS__RELEASE_GAP;
	W.s.nrescales = 1;
}

static void a_requeued_job_restarts_on_the_cell_it_was_moved_to(void)
{
	enum { ALONE, LATE, SHORT, UNSEEN, SETTLING, HELD_AGAIN, MATE_RUNS,
	       MATE_LATER, MATE_GAVE_UP, OTHER_ROUND, CASES };
	struct copus__round_job *j;
	struct copus__rescale *x = &W.s.rescales[0], *y = &W.s.rescales[1];

	for (int k = 0; k < CASES; k++) {
		int late = k != ALONE && k != SHORT;
		int held = k == ALONE || k == SHORT || k == UNSEEN ||
			   k == SETTLING || k == HELD_AGAIN ||
			   k == MATE_RUNS || k == MATE_LATER;

		rw_cluster(2, 4);
		/* A round interval as short as the release gap. */
		if (k == SHORT)
			W.s.params.interval = COPUS__RELEASE_GAP;
		rw_site_types();
		W.nodes[1].gpu_type = 1;
		j = rw_pending(1, 1, 4, 1, 4);
		rw_hint(j);
		/* Late: a round interval after it could restart. */
		_requeued(j, NOW - COPUS__RELEASE_GAP -
			     (late ? W.s.params.interval : 0), 4, 2, "aws");
		if (k == UNSEEN || k == SETTLING)
			x->ready = 0;
		if (k == SETTLING)
			W.r.reg_quiet = NOW + 1;
		/* An earlier round of this second could restart it; a node
		 * has registered since (late, after a slurmctld restart). */
		if (k == HELD_AGAIN) {
			x->ready = NOW;
			W.r.reg_quiet = NOW + COPUS__RELEASE_GAP;
		}
		if (k >= MATE_RUNS) {
			/* Job 9, not in this round's queue: asked with it
			 * (or, OTHER_ROUND, a round later), still running
			 * or requeued only now. */
			memset(y, 0, sizeof(*y));
			y->id = 9;
			y->asked = x->asked + (k == OTHER_ROUND);
			y->from = 2;
			y->to = 1;
			strcpy(y->type, "aws");
			if (k == MATE_LATER) {
				y->requeue_sent = true;
				y->pending_since = NOW - COPUS__RELEASE_GAP;
			}
			y->gave_up = k == MATE_GAVE_UP;
			W.s.nrescales = 2;
		}
		rw_decide();
		CU_ASSERT_EQUAL(j->pin_gpus, held ? 2 : 0);
		if (k == SETTLING || k == HELD_AGAIN) {
			/* Not placed yet, and still held the next round (the
			 * one interval counts again from a round that could
			 * restart it). */
			ASSERT_ACTION(j, COPUS__ACT_NONE);
			CU_ASSERT_EQUAL(x->ready, 0);
			continue;
		}
		/* This round could restart it: one interval more. */
		if (k == UNSEEN)
			CU_ASSERT_EQUAL(x->ready, NOW);
		/* Not held: as a new job, on its request (a start as it
		 * is). */
		ASSERT_ACTION(j, held ? COPUS__ACT_RESIZE : COPUS__ACT_START);
		CU_ASSERT_EQUAL(j->per_node * j->num_nodes, held ? 2 : 4);
		CU_ASSERT_EQUAL(j->dtype, held ? 1 : 0);
	}
	W.s.nrescales = 0;
}

/*
 * A job requeued for a rescale in the second its run ended restarts at once
 * when the round places it on none of that run's nodes and only the plugin
 * starts jobs (sched_interval=-1): slurmd refuses a credential of the
 * second in which its node revoked the job's last one, and only that run's
 * nodes did (MOVED, from dgx-ext to aws). It waits for its release gap when
 * the round places it on a node of that run (SAME), when Slurm's FIFO pass
 * could start it anywhere (FIFO), when that run's nodes are not known (a
 * rescale slurmctld read back from its state: UNKNOWN), when the node table
 * changed since (RECONFIG), when it ran again since (LATER_RUN: that run's
 * nodes are not known), and when that run began in this very second, when
 * an earlier run may have revoked the credential elsewhere (SAME_SECOND).
 */
static void a_job_moved_off_its_nodes_restarts_without_the_release_gap(void)
{
	enum { MOVED, SAME, FIFO, UNKNOWN, RECONFIG, LATER_RUN, SAME_SECOND,
	       SET_BEFORE, CASES };
	struct copus__round_job *j;
	struct copus__rescale *x = &W.s.rescales[0];

	for (int k = 0; k < CASES; k++) {
		rw_cluster(2, 4);
		W.s.params.fifo_off = k != FIFO;
		rw_site_types();
		W.nodes[1].gpu_type = 1;
		j = rw_pending(1, 1, 4, 1, 4);
		rw_hint(j);
		_requeued(j, NOW, 4, 2, "aws");
		j->requeued = NOW;
		CU_ASSERT(copus__round_release(j) > NOW);
		x->rc = 0;
		x->ran[0] = k == SAME || k == SET_BEFORE ? 1 : 0;
		x->nran = k == UNKNOWN ? 0 : 1;
		x->ran_reconfigs = W.r.reconfigs + (k == RECONFIG);
		x->ran_start = k == SAME_SECOND ? NOW : NOW - 100;
		if (k == LATER_RUN)
			j->restarts = 2;
		if (k == SET_BEFORE) {
			/*
			 * An earlier round, which placed it off its nodes, set
			 * its request to the cell (and its begin time to
			 * then); this one places it on a node of its run: it
			 * waits for the gap as any other.
			 */
			j->gpn_req = 2;
			snprintf(j->type_req, sizeof(j->type_req), "aws");
			j->waits_release = false;
		}
		if (k == SAME || k == SET_BEFORE) {
			/* Moved within aws: node 0 is aws too. */
			W.nodes[0].gpu_type = 1;
			W.nodes[0].usable = false;
		}
		rw_decide();
		CU_ASSERT_EQUAL(j->dtype, 1);
		CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
		CU_ASSERT_EQUAL(j->early, k == MOVED);
		_assert_released(j, k == MOVED);
		copus__round_free(&W.r);
	}
	W.s.nrescales = 0;
}

/*
 * A job held to the cell it was moved to (6 a100 GPUs) that the policy
 * places as 4 + 2 (pollux does; Slurm would be asked for 4) or leaves
 * queued: the round places it as 3 + 3 on GPUs Slurm has free, its own
 * decided nodes first (UNEVEN, QUEUED); on node 2 where node 1's GPUs are
 * still held (TAKEN); and leaves the policy's decision as it is where no
 * even placement of 6 fits (NO_ROOM: node 1 still held, node 2 running a
 * rigid job).
 */
static void a_held_job_is_placed_on_its_whole_cell(void)
{
	enum { UNEVEN, QUEUED, TAKEN, NO_ROOM, CASES };
	static const copus_slot four_two[2] = { { 0, 4 }, { 1, 2 } };
	struct copus__round_job *j;
	copus_decision *d;

	for (int k = 0; k < CASES; k++) {
		int other = k == UNEVEN || k == QUEUED ? 1 : 2;

		rw_cluster(3, 4);
		j = rw_pending(1, 1, 4, 1, 8);
		rw_hint(j);
		_requeued(j, NOW - COPUS__RELEASE_GAP, 4, 6, "a100");
		if (k == TAKEN)
			W.free[1] = 2;
		if (k == NO_ROOM) {
			W.free[1] = 1;
			rw_running(2, 2, 1, 3, 0, 0, NOW - 1000);
		}
		rw_decide();
		CU_ASSERT_EQUAL(j->pin_gpus, 6);
		CU_ASSERT_EQUAL(j->pin_type, 0);
		CU_ASSERT_FATAL(j->job >= 0 && W.r.decided);
		/* The policy's decision, as pollux makes it. */
		d = &W.r.dec[j->job];
		memset(d->reason, 0, sizeof(d->reason));
		d->gpu_type = k == QUEUED ? -1 : 0;
		d->gpus = k == QUEUED ? 0 : 6;
		d->slots = k == QUEUED ? NULL : four_two;
		d->num_slots = k == QUEUED ? 0 : 2;
		copus__round_hold_pins(&W.r);
		if (k == NO_ROOM) {
			CU_ASSERT_PTR_EQUAL(d->slots, four_two);
			CU_ASSERT_EQUAL(d->num_slots, 2);
			CU_ASSERT_EQUAL(d->reason[0], '\0');
			continue;
		}
		CU_ASSERT_EQUAL(d->gpu_type, 0);
		CU_ASSERT_EQUAL(d->gpus, 6);
		CU_ASSERT(d->changed);
		CU_ASSERT_EQUAL_FATAL(d->num_slots, 2);
		CU_ASSERT(d->slots[0].node == 0 && d->slots[0].gpus == 3);
		CU_ASSERT(d->slots[1].node == other && d->slots[1].gpus == 3);
		CU_ASSERT_STRING_EQUAL(d->reason, "restarts on the cell it was "
				       "moved to");
	}
	/* Not held: the policy's decision stays, whatever it is. */
	W.s.nrescales = 0;
	rw_cluster(3, 4);
	j = rw_pending(1, 1, 4, 1, 8);
	rw_hint(j);
	rw_decide();
	CU_ASSERT_EQUAL(j->pin_gpus, 0);
	d = &W.r.dec[j->job];
	d->slots = four_two;
	d->num_slots = 2;
	d->gpu_type = 0;
	copus__round_hold_pins(&W.r);
	CU_ASSERT_PTR_EQUAL(d->slots, four_two);
}

/*
 * A node has just registered (slurmd or slurmctld restarted): slurmctld
 * may have aborted a stray run of a requeued job there, revoking its
 * credential, so a job that has run before waits until reg_quiet; a new
 * job does not. Both as its own cell and resized to another.
 */
static void a_restarted_job_waits_until_registrations_settle(void)
{
	struct copus__round_job *again, *cell, *fresh;

	rw_cluster(3, 4);
	again = rw_pending(1, 1, 2, 1, 4);
	cell = rw_pending(2, 1, 4, 4, 4);
	fresh = rw_pending(3, 1, 2, 2, 2);
	rw_hint(again);
	rw_hint(cell);
	again->restarts = cell->restarts = 1;
	again->end = cell->end = NOW - 60;
	W.r.reg_quiet = NOW + 1;
	rw_decide();
	ASSERT_ACTION(again, COPUS__ACT_NONE);
	ASSERT_ACTION(cell, COPUS__ACT_NONE);
	CU_ASSERT_PTR_NOT_NULL(again->reason ? strstr(again->reason,
		"has run before, restarts once the nodes that registered "
		"have settled") : NULL);
	ASSERT_ACTION(fresh, COPUS__ACT_START);
	copus__round_free(&W.r);
	again->reason = cell->reason = fresh->reason = NULL;
	again->action = cell->action = fresh->action = COPUS__ACT_NONE;
	W.r.reg_quiet = NOW;
	rw_decide();
	CU_ASSERT(again->action == COPUS__ACT_START ||
		  again->action == COPUS__ACT_RESIZE);
	ASSERT_ACTION(cell, COPUS__ACT_START);
}

/*
 * slurmctld died moments after the plugin started a job, before its own
 * state held the job as running: it recovers the job pending with no
 * restart, and the job's node, when it registers, reports the run, which
 * slurmctld aborts there, revoking the job's credential. The plugin, which
 * saved the start in its own state first, holds the job back like a
 * requeued one until the registrations have settled; a job it never
 * started is not held.
 */
static void a_job_started_before_a_crash_waits_until_registrations_settle(void)
{
	struct copus__round_job *lost, *rigid, *fresh;

	rw_cluster(3, 4);
	lost = rw_pending(1, 1, 2, 1, 2);
	rigid = rw_pending(2, 1, 2, 0, 0);
	fresh = rw_pending(3, 1, 2, 2, 2);
	lost->ran = rigid->ran = true;
	W.r.reg_quiet = NOW + 1;
	rw_decide();
	ASSERT_ACTION(lost, COPUS__ACT_NONE);
	ASSERT_ACTION(rigid, COPUS__ACT_NONE);
	CU_ASSERT_PTR_NOT_NULL(lost->reason ? strstr(lost->reason,
		"has run before, restarts once the nodes that registered "
		"have settled") :
		NULL);
	ASSERT_ACTION(fresh, COPUS__ACT_START);
	copus__round_free(&W.r);
	lost->reason = rigid->reason = fresh->reason = NULL;
	lost->action = rigid->action = fresh->action = COPUS__ACT_NONE;
	W.r.reg_quiet = NOW;
	rw_decide();
	CU_ASSERT(lost->action == COPUS__ACT_START ||
		  lost->action == COPUS__ACT_RESIZE);
	ASSERT_ACTION(rigid, COPUS__ACT_START);
}

/* The round decided again: its decisions dropped, the two jobs' cleared. */
static void _again(struct copus__round_job *a, struct copus__round_job *b)
{
	copus__round_free(&W.r);
	a->reason = b->reason = NULL;
	a->action = b->action = COPUS__ACT_NONE;
}

/*
 * A job started before this slurmctld did, recovered pending: once the
 * registrations have settled, its nodes are first told to abort that run
 * (a run that ended while slurmctld was down would make the node refuse the
 * next launch as a second copy); it starts COPUS__RELEASE_GAP s after that,
 * and Slurm's KillWait more (the longest a node takes to kill the run).
 * A fresh job is not held.
 */
static void a_job_started_before_a_crash_is_cleared_before_it_starts(void)
{
	struct copus__round_job *lost, *fresh;

	rw_cluster(2, 4);
	lost = rw_pending(1, 1, 2, 0, 0);
	fresh = rw_pending(2, 1, 2, 0, 0);
	lost->ran = lost->strays = true;
	W.r.reg_quiet = NOW;
	rw_decide();
	ASSERT_ACTION(lost, COPUS__ACT_CLEAR);
	CU_ASSERT_PTR_NOT_NULL(lost->reason ? strstr(lost->reason,
		"its nodes forget that run first") : NULL);
	ASSERT_ACTION(fresh, COPUS__ACT_START);
	CU_ASSERT_EQUAL(W.r.wake, NOW + COPUS__RELEASE_GAP);
	/* The actions cleared it: noted in its record. */
	CU_ASSERT_PTR_NOT_NULL_FATAL(copus__memo_get(&W.s, 1));
	copus__round_launches(&W.s, &W.r, false);
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 1)->cleared, NOW);
	/* Within the gap it waits, then it starts. */
	_again(lost, fresh);
	lost->strays = false;
	lost->cleared = NOW - COPUS__RELEASE_GAP + 1;
	W.r.wake = 0;
	rw_decide();
	ASSERT_ACTION(lost, COPUS__ACT_NONE);
	CU_ASSERT_EQUAL(W.r.wake, NOW + 1);
	_again(lost, fresh);
	lost->cleared = NOW - COPUS__RELEASE_GAP;
	rw_decide();
	ASSERT_ACTION(lost, COPUS__ACT_START);
	/* With KillWait, the run may last that much longer on its node. */
	_again(lost, fresh);
	W.r.kill_wait = 5;
	W.r.wake = 0;
	rw_decide();
	ASSERT_ACTION(lost, COPUS__ACT_NONE);
	CU_ASSERT_EQUAL(W.r.wake, NOW + 5);
	_again(lost, fresh);
	lost->cleared = NOW - COPUS__RELEASE_GAP - 5;
	rw_decide();
	ASSERT_ACTION(lost, COPUS__ACT_START);
	copus__memo_free(&W.s);
}

/*
 * The round marks the jobs it starts in their records before the actions
 * (so that the mark is saved before the start), and takes the mark back
 * from those the actions did not start; a job without GPUs gets a record.
 */
static void the_round_marks_its_starts_before_acting(void)
{
	struct copus__round_job *a, *b, *c;
	struct copus__memo *m;

	rw_cluster(2, 4);
	a = rw_pending(1, 1, 1, 0, 0);
	b = rw_pending(2, 1, 1, 0, 0);
	c = rw_pending(3, 1, 1, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(copus__memo_get(&W.s, 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(m = copus__memo_get(&W.s, 2));
	m->launched = NOW - 100;
	a->action = b->action = c->action = COPUS__ACT_START;
	W.s.state_dirty = false;
	CU_ASSERT_EQUAL(copus__round_launches(&W.s, &W.r, true), 3);
	CU_ASSERT_TRUE(W.s.state_dirty);
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 1)->launched, NOW);
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 2)->launched, NOW);
	CU_ASSERT_PTR_NOT_NULL_FATAL(copus__memo_find(&W.s, 3));
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 3)->launched, NOW);
	/* b's nodes were taken meanwhile: its earlier start is what stays. */
	b->action = COPUS__ACT_NONE;
	CU_ASSERT_EQUAL(copus__round_launches(&W.s, &W.r, false), 1);
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 1)->launched, NOW);
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 2)->launched, NOW - 100);
	CU_ASSERT_EQUAL(copus__memo_find(&W.s, 3)->launched, NOW);
	copus__memo_free(&W.s);
}

/*
 * A start recorded by an earlier slurmctld (read from copus_state) leaves
 * a stray run to clear, even when that slurmctld died in the second this
 * one began (a restart in under a second); a start made by this one does
 * not, in the same second or later; taken back, the earlier start's stray
 * run is to clear again; once cleared, it is not.
 */
static void a_start_by_an_earlier_slurmctld_is_a_stray_in_the_same_second(void)
{
	struct copus__round_job *a;
	struct copus__memo *m;

	rw_cluster(2, 4);
	a = rw_pending(1, 1, 1, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m = copus__memo_get(&W.s, 1));
	CU_ASSERT_FALSE(copus__memo_strays(m));
	m->launched = NOW;
	m->launched_before = true;
	CU_ASSERT_TRUE(copus__memo_strays(m));
	a->action = COPUS__ACT_START;
	copus__round_launches(&W.s, &W.r, true);
	m = copus__memo_find(&W.s, 1);
	CU_ASSERT_EQUAL(m->launched, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	a->action = COPUS__ACT_NONE;
	copus__round_launches(&W.s, &W.r, false);
	CU_ASSERT_TRUE(copus__memo_strays(m));
	a->action = COPUS__ACT_CLEAR;
	copus__round_launches(&W.s, &W.r, false);
	CU_ASSERT_EQUAL(m->cleared, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	copus__memo_free(&W.s);
}

/*
 * A job started by an earlier slurmctld that this one has seen running,
 * on nodes registered with it, since that start (a rescale that
 * slurmctld's restart caught: the job checkpoints and exits while the new
 * slurmctld runs it) has nothing left to clear when it is requeued; one
 * seen running from before that start (a state saved before it) still
 * has.
 */
static void a_run_the_new_slurmctld_saw_leaves_no_stray(void)
{
	struct copus__memo *m;

	rw_cluster(1, 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m = copus__memo_get(&W.s, 1));
	m->launched = NOW;
	m->launched_before = true;
	copus__memo_seen_running(m, NOW - 30);
	CU_ASSERT_TRUE(copus__memo_strays(m));
	copus__memo_seen_running(m, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	/* Not started by the plugin: nothing to clear, nothing changes. */
	m->launched = 0;
	m->launched_before = false;
	copus__memo_seen_running(m, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	copus__memo_seen_running(NULL, NOW);
	copus__memo_free(&W.s);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(a_rescale_in_flight_is_not_asked_again),
		TEST(a_checkpointed_job_is_requeued_once),
		TEST(a_round_between_intervals_moves_no_running_job),
		TEST(a_requeued_job_is_resized_after_the_release_gap),
		TEST(a_requeued_job_starts_the_second_after_its_requeue),
		TEST(a_requeued_job_restarts_on_the_cell_it_was_moved_to),
		TEST(a_job_moved_off_its_nodes_restarts_without_the_release_gap),
		TEST(a_held_job_is_placed_on_its_whole_cell),
		TEST(a_restarted_job_waits_until_registrations_settle),
		TEST(a_job_started_before_a_crash_waits_until_registrations_settle),
		TEST(the_round_marks_its_starts_before_acting),
		TEST(a_start_by_an_earlier_slurmctld_is_a_stray_in_the_same_second),
		TEST(a_job_started_before_a_crash_is_cleared_before_it_starts),
		TEST(a_run_the_new_slurmctld_saw_leaves_no_stray),
	};
	int rc = RUN_TESTS("plugin-restart", tests);

	rw_free();
	return rc;
}
