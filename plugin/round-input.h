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

#endif /* COPUS_PLUGIN_ROUND_INPUT_H */
