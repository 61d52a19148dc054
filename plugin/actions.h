/*
 * Phase 3 of a sched/copus round, under slurmctld's write locks: the
 * decided jobs started, the others given a reason. Included by
 * sched_copus.c.
 */
#ifndef COPUS_PLUGIN_ACTIONS_H
#define COPUS_PLUGIN_ACTIONS_H

struct copus__round;
struct copus__sched;

/*
 * Checks each pending job of r again and starts it on the decided nodes as
 * the backfill plugin does (exclude every other node, select_nodes(),
 * launch), or gives it a readable pending reason.
 */
void copus__act(struct copus__sched *s, struct copus__round *r);

#endif /* COPUS_PLUGIN_ACTIONS_H */
