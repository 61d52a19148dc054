/*
 * A round's users (round-users.c): their usage and, with
 * copus_max_gpus_per_user, what each may still take. Private to round.c,
 * which calls them while it builds the policy's input and turns the
 * decisions into actions; round-users.c calls nothing of round.c.
 */
#ifndef COPUS_PLUGIN_ROUND_USERS_H
#define COPUS_PLUGIN_ROUND_USERS_H

#include <stdbool.h>

#include "round.h"

struct copus__sched;

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

#endif /* COPUS_PLUGIN_ROUND_USERS_H */
