/*
 * The policy's input of a job whose hint describes its model
 * (round-plans.c): its cells with a plan, from the planner. Private to
 * round.c, which calls it for each such job of the input; round-plans.c
 * calls nothing of round.c.
 */
#ifndef COPUS_PLUGIN_ROUND_PLANS_H
#define COPUS_PLUGIN_ROUND_PLANS_H

#include "copus/policy.h"
#include "memo.h"
#include "round.h"

struct copus__sched;

/*
 * The cells of a job whose hint describes its model, by the planner, in
 * its entry c of the policy's input (in: its record).
 */
void copus__round_input_plans(struct copus__sched *s, struct copus__round *r,
			      struct copus__round_job *j, copus_job *c,
			      struct copus__memo *in);

#endif /* COPUS_PLUGIN_ROUND_PLANS_H */
