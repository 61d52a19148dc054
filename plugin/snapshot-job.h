/*
 * What a sched/copus snapshot reads of one Slurm job, into the round's
 * plain struct (round.h). Included by files that include Slurm's headers.
 */
#ifndef COPUS_PLUGIN_SNAPSHOT_JOB_H
#define COPUS_PLUGIN_SNAPSHOT_JOB_H

#include <stdbool.h>
#include <time.h>

struct copus__memo;
struct copus__round;
struct copus__round_job;
struct job_record;

/* The job's user and Slurm's fair-share factor of that user. */
void copus__job_user(struct job_record *job_ptr, struct copus__round_job *j);

/* GPUs per node and type of the job's request (gres_list_req). */
void copus__job_gpus(struct job_record *job_ptr, struct copus__round_job *j);

/* Its time limit, --elastic, --gpu-types and --gpu-multiple (checked). */
void copus__job_options(struct job_record *job_ptr,
			struct copus__round_job *j);

/* The GPUs a running job holds on each of its nodes (gres_list_alloc). */
void copus__job_alloc(struct copus__round *r, struct job_record *job_ptr,
		      struct copus__round_job *j);

/* Held after its node refused the start the plugin gave it (rescale.c). */
bool copus__job_refused(const struct copus__memo *in,
			struct job_record *job_ptr);

/* Whether Slurm's rules let a pending job start now (job write lock). */
bool copus__job_startable(struct job_record *job_ptr);

/* An elastic job that waits only for the begin time of Slurm's requeue. */
bool copus__job_slurm_requeued(struct job_record *job_ptr, time_t now);

#endif /* COPUS_PLUGIN_SNAPSHOT_JOB_H */
