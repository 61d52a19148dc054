/*
 * The starts of a round in the jobs' records, around the actions (round.h,
 * copus__round_launches): marked before, so that copus_state holds every
 * start before slurmctld's own state can; taken back after, for the starts
 * that did not happen; and the jobs whose stray runs were cleared, noted.
 * No Slurm, no locks.
 */
#include "round.h"
#include "sched_copus.h"

int copus__round_launches(struct copus__sched *s, struct copus__round *r,
			  bool before)
{
	int i, n = 0;

	for (i = 0; i < r->nrj; i++) {
		struct copus__round_job *j = &r->rj[i];
		struct copus__memo *in;

		if (j->running)
			continue;
		/* A job without GPUs has no record until it starts. */
		in = before && j->action == COPUS__ACT_START ?
			     copus__memo_get(s, j->id) :
			     copus__memo_find(s, j->id);
		if (!in)
			continue;
		if (before && j->action == COPUS__ACT_START) {
			j->launch_marked = true;
			j->launched_was = in->launched;
			j->launched_before_was = in->launched_before;
			in->launched = r->when;
			in->launched_before = false;
			n++;
		} else if (!before && j->action == COPUS__ACT_CLEAR) {
			in->cleared = r->when;
		} else if (!before && j->launch_marked &&
			   j->action != COPUS__ACT_START) {
			/* The actions took its start back (a job that
			 * changed meanwhile, nodes no longer free). */
			j->launch_marked = false;
			in->launched = j->launched_was;
			in->launched_before = j->launched_before_was;
			n++;
		}
	}
	if (n)
		s->state_dirty = true;
	return n;
}
