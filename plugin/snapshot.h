/*
 * Phase 1 of a sched/copus round, under slurmctld's locks: Slurm's jobs and
 * nodes copied into the round's plain structs (round.h), and each job's
 * record (memo.h) brought up to date. Included by the files that include
 * Slurm's headers: sched_copus.c and actions.c.
 */
#ifndef COPUS_PLUGIN_SNAPSHOT_H
#define COPUS_PLUGIN_SNAPSHOT_H

struct copus__round;
struct copus__sched;
struct job_record;

/*
 * Fills r from slurmctld's jobs and nodes: usable nodes and their GPUs
 * (less those held by jobs the policy does not see), running GPU jobs with
 * their allocation, pending jobs that may start now, and each job's hint
 * (its Comment, parsed only when it changed; the last good one is kept).
 */
void copus__snapshot(struct copus__sched *s, struct copus__round *r);

/* Frees the snapshot's copies (after copus__round_free()). */
void copus__snapshot_free(struct copus__round *r);

/*
 * The value of NAME in the job's control environment (SPANK options); the
 * caller holds the job read lock.
 */
const char *copus__spank_env(struct job_record *job_ptr, const char *name);

#endif /* COPUS_PLUGIN_SNAPSHOT_H */
