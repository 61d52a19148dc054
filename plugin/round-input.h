/*
 * A round's input to its policy (round-input.c): from the snapshot's plain
 * copies of the jobs to copus_job records, with the jobs' models, remaining
 * times and time limits. Private to round.c; no Slurm header, no Slurm
 * call, no lock.
 */
#ifndef COPUS_PLUGIN_ROUND_INPUT_H
#define COPUS_PLUGIN_ROUND_INPUT_H

#include "round.h"

struct copus__sched;

/*
 * Builds the policy's input (r->jobs, r->rj_of, the models): every running
 * GPU job, every pending elastic job, and per partition the rigid pending
 * jobs in priority order as long as they fit the free GPUs together, plus
 * the first that does not when it heads its partition. A job left out gets
 * its reason; a round that runs out of memory says so in r->error.
 */
void copus__round_input(struct copus__sched *s, struct copus__round *r);

/*
 * Whether running job j is within copus_restart_delay of the start of a
 * run that a rescale or a requeue began (restart count > 0): the policy
 * keeps it where it runs. A job's first run is not held: started on the
 * GPUs that were free when it came, it may be rescaled once it reports, as
 * its start cost it no checkpoint.
 */
bool copus__round_held(const struct copus__sched *s,
		       const struct copus__round *r,
		       const struct copus__round_job *j);

#endif /* COPUS_PLUGIN_ROUND_INPUT_H */
