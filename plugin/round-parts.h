/*
 * What the parts of a round's decision share (round.c, the decision;
 * round-users.c, the users' usage and cap; round-plans.c, the input of a
 * job whose hint describes its model). Private to them: round.c calls the
 * other two, which call nothing of round.c.
 */
#ifndef COPUS_PLUGIN_ROUND_PARTS_H
#define COPUS_PLUGIN_ROUND_PARTS_H

#include <stdbool.h>

#include "copus/policy.h"
#include "memo.h"
#include "round.h"

struct copus__sched;

/* round-users.c */
/* The users' usage decayed to the round, and how many users have jobs. */
void copus__round_users(struct copus__sched *s, struct copus__round *r);
/*
 * With copus_max_gpus_per_user, groups the round's jobs by user and sets
 * what each user may still take: the cap less the GPUs the user's running
 * jobs hold (rigid ones included).
 */
void copus__round_user_room(struct copus__sched *s, struct copus__round *r);
/*
 * Whether job j's user may take more GPUs this round under the cap (and
 * if so they are counted); true without a cap or when more <= 0.
 */
bool copus__round_user_takes(struct copus__round *r,
			     struct copus__round_job *j, int more, int cap);

/* round-plans.c */
/*
 * The cells of a job whose hint describes its model, by the planner, in
 * its entry c of the policy's input (in: its record).
 */
void copus__round_input_plans(struct copus__sched *s, struct copus__round *r,
			      struct copus__round_job *j, copus_job *c,
			      struct copus__memo *in);

#endif /* COPUS_PLUGIN_ROUND_PARTS_H */
