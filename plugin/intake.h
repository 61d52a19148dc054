/*
 * A job's record as sched/copus's snapshot brings it up to date under
 * slurmctld's locks (intake.c): its hint, its service, its completion.
 * Included by the files that include Slurm's headers: snapshot.c and
 * intake.c.
 */
#ifndef COPUS_PLUGIN_INTAKE_H
#define COPUS_PLUGIN_INTAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct copus__round;
struct copus__round_job;
struct copus__sched;
struct copus__memo;
struct job_record;

/* The predictor's attributes of a job: its name and its user. */
void copus__job_attrs(struct job_record *job_ptr, char *app, size_t alen,
		      char *user, size_t ulen);

/*
 * The record of a job seen in this round (NULL when there is no memory for
 * it): its original request, the service it received while running, and
 * its hint, read from its Comment when that changed.
 */
struct copus__memo *copus__job_info(struct copus__sched *s,
				    struct job_record *job_ptr,
				    struct copus__round_job *j, time_t now);

/*
 * A job that completed (exit 0) while the plugin watched it: its total work
 * is queued for the predictor in r->obs, once.
 */
void copus__learn(struct copus__sched *s, struct copus__round *r,
		  struct job_record *job_ptr);

/*
 * Whether a finished job ended of a rescale request in its last run; if
 * so it is queued for a requeue in r->revive, once. A job that restarted
 * after the request and has ended since completes its rescale (the entry
 * goes).
 */
bool copus__ended_of_request(struct copus__sched *s, struct copus__round *r,
			     struct job_record *job_ptr);

/*
 * What a look at a job tells of its progress through a rescale: its state
 * (with its flags), its restart count and its Comment (its hint), folded
 * into a number that changes when any of them does; never 0.
 */
uint64_t copus__job_signature(struct job_record *job_ptr);

#endif /* COPUS_PLUGIN_INTAKE_H */
