/*
 * What sched/copus remembers between rounds: a record per job and the
 * rescales in flight. Plain C, no Slurm. Included by sched_copus.h, whose
 * state holds both tables, and by memo.c.
 */
#ifndef COPUS_PLUGIN_MEMO_H
#define COPUS_PLUGIN_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "copus/hint.h"
#include "copus/planner.h"

struct copus__sched;

/* Rescale requests a job's record keeps. */
#define COPUS__HISTORY_MAX 4

/*
 * What the plugin remembers about a job between rounds (only the plugin's
 * thread touches it): its original request, its last good hint, the
 * progress rate seen in its current run, the service it received. Kept
 * sorted by id (copus__sched.memo); entries of jobs that left the queue are
 * dropped.
 */
struct copus__memo {
	uint32_t id;
	bool seen;			/* in this round's snapshot */
	int req_gpus;			/* the request when first seen */
	/*
	 * The GPU type of its request when first seen ("" any), known or
	 * not: the plugin sets the type of a job it resizes, and that must
	 * not tie an elastic job to it from then on.
	 */
	char type_req[16];
	bool type_known;
	time_t submit;			/* first submission (0: not seen) */
	int max_had;			/* most GPUs it has held */
	/*
	 * When the plugin last started it (0: never), saved before the
	 * start itself: slurmctld may die before its own state holds the
	 * job as running, recover it pending, and a node then reports a run
	 * of a job that never restarted (round_job.ran).
	 */
	time_t launched;
	/*
	 * launched was read from copus_state: the last start was made by an
	 * earlier slurmctld, whose life may have ended in the same second as
	 * this one's began (so the times alone cannot tell).
	 */
	bool launched_before;
	/*
	 * When the plugin last cleared what may be left of a run of it
	 * started before this slurmctld did (round_job.strays); not saved.
	 */
	time_t cleared;
	/*
	 * How many times the plugin released the hold slurmctld put on it
	 * after its node refused a start as a second copy of the cleared
	 * run (snapshot.c, _refused); at most COPUS__REFUSED_MAX.
	 */
	int refused;
	/*
	 * The run the plugin last requeued after it ended of a rescale
	 * request: its restart count and end time (revived_end 0: none).
	 * Saved: slurmctld saves its jobs at most every 5 s, and one that
	 * dies soon after that requeue comes back with the job as that
	 * ended run, which must be requeued again (copus__memo_revived).
	 */
	int revived_rc;
	time_t revived_end;
	double attained;		/* GPU-seconds */
	time_t last;			/* when attained was last counted */
	int last_gpus;			/* GPUs it held then */
	bool learned;			/* given to the predictor */
	uint64_t comment_hash;		/* the Comment last parsed */
	bool have_hint;
	copus_hint hint;		/* last good hint */
	int stale_rc;			/* run of the last stale hint logged,
					 * -1 none */
	/*
	 * The progress the plugin saw in the job's current run, on its own
	 * clock (a hint's time is the job's claim): at its first hint and at
	 * its latest; and how many times the rate its model claims exceeds
	 * the rate seen (0: not told yet). Above COPUS__DISTRUST its model is
	 * ignored.
	 */
	int seen_rc;
	time_t seen_t0, seen_t1;
	double seen_p0, seen_p1;
	double claim_ratio;
	int rate_rc;			/* run the rate was measured in */
	double base_prog, base_t, rate;	/* first hint of that run, rate */
	char reason[64];		/* last decision's reason */
	/*
	 * The last rescale request that moved it to a cell (not to the
	 * queue), for its measured cost (copus__costs): when it was made,
	 * on slurmctld's clock to the microsecond, and the run it asked;
	 * cost_asked 0 once measured or given up (not saved).
	 */
	double cost_asked;
	int cost_rc;
	/*
	 * The model its hint describes ("mdl") and the id the planner's
	 * cache keys its plans by: a new id whenever the model changes
	 * (0: none yet).
	 */
	int32_t model_id;
	copus_planner_desc model;
	/* Its last COPUS__HISTORY_MAX rescale requests, oldest first. */
	struct copus__asked {
		time_t when;
		int from, to;		/* GPUs; to 0: to the queue */
		char type[16];		/* the decided type, "" queue */
	} asked[COPUS__HISTORY_MAX];
	int nasked;
};

/*
 * The job's first submission, given its submit time now: Slurm sets a
 * requeued job's submit time to the requeue, and a job rescaled by a
 * requeue has still been in the system since it was first submitted. The
 * earliest time seen is kept and returned.
 */
time_t copus__memo_submit(struct copus__memo *in, time_t submit);

/* Notes a rescale request in the job's history (the oldest drops out). */
void copus__memo_asked(struct copus__memo *in, time_t when, int from, int to,
		       const char *type);

/*
 * The history as text, oldest first: "4>2:a100@HH:MM:SS;..." in local
 * time, "-" when empty.
 */
void copus__memo_history(const struct copus__memo *in, char *buf,
			 size_t len);

/*
 * A rescale in flight: the job was asked to checkpoint
 * (COPUS_RESCALE_SIGNAL). When it reports st="checkpointed" the plugin
 * requeues it; a job that exits with 75 is requeued by Slurm itself
 * (RequeueExit=75). Once it is pending, the policy decides its new cell and
 * the plugin sets it, no earlier than the second after Slurm finished its
 * requeue (copus__round_release), or at once on nodes outside the run it
 * ended (round.c, _early). Only the plugin's thread touches the table
 * (copus__sched.rescales).
 */
#define COPUS__RESCALE_MAX 256
/* Nodes of the asked run a rescale keeps (copus__rescale.ran). */
#define COPUS__RAN_MAX 32
struct copus__rescale {
	uint32_t id;
	time_t asked;
	int rc;				/* restart count when asked */
	int from, to;			/* GPUs in total */
	char type[16];			/* the decided type */
	bool gave_up;			/* no answer: not asked again until
					 * the restart delay has passed */
	bool requeue_sent;		/* the plugin requeued it */
	bool revived;			/* requeued after it ended of the
					 * request (not saved) */
	time_t pending_since;		/* first seen requeued (not saved) */
	time_t ready;			/* the first round in which its job,
					 * requeued, could restart: past its
					 * release gap, the registrations
					 * settled, no run of it left to
					 * clear (round.c _hold; not saved);
					 * 0 again when a later round holds
					 * it */
	/*
	 * The run it was asked in (not saved): its nodes (indices in
	 * slurmctld's node table, nran of them; 0: not known, or more than
	 * COPUS__RAN_MAX), the table's version then (copus__sched.reconfigs)
	 * and when the run started. slurmd refuses a credential created in
	 * the second its node revoked the job's last one, or before; a node
	 * outside that run revoked none since the run began (round.c,
	 * _early).
	 */
	int ran[COPUS__RAN_MAX];
	int nran;
	unsigned ran_reconfigs;
	time_t ran_start;
	/* When the round that asked it began (wall clock, in seconds to
	 * the microsecond; 0: not known; not saved). */
	double round_real;
	/* Its job as the last watch saw it (copus__job_signature; 0: not
	 * looked at yet; not saved). */
	uint64_t watched;
};

/* The record of a job, or NULL. */
struct copus__memo *copus__memo_find(struct copus__sched *s, uint32_t id);

/*
 * The record of a job, created (zeroed, sorted in) when missing; NULL when
 * there is no memory for it.
 */
struct copus__memo *copus__memo_get(struct copus__sched *s, uint32_t id);

/*
 * Forgets the jobs not seen in the last snapshot, clears the marks. With
 * keep_launched, a job the plugin started that Slurm no longer has is kept:
 * a slurmctld that died before saving a job's submission gives its id to
 * the next job submitted, while a node may still run the lost one; until
 * the nodes have registered again, the new job with that id is held back
 * as one that has run (round_job.ran).
 */
void copus__memo_sweep(struct copus__sched *s, bool keep_launched);

/*
 * Whether what may be left of the job's last run must be cleared before it
 * starts again (round_job.strays): an earlier slurmctld started it, and
 * this one has not had its nodes forget that run yet.
 */
bool copus__memo_strays(const struct copus__memo *in);

/*
 * The job is seen running since start by this slurmctld. When that run is
 * the plugin's last start of it (started at or after in->launched, not a
 * run older than that from a state saved before it; the plugin saves a
 * start before it makes it, so no later run can exist), slurmctld sees
 * that run end as any other, whether its nodes have registered yet or
 * not (an end reported when slurmctld is back, or the run missing at the
 * registration), and nothing of it is left to clear when it is requeued:
 * it is no longer launched_before.
 */
void copus__memo_seen_running(struct copus__memo *in, time_t start);

/*
 * Whether a finished run of the job (its restart count, its end time) is
 * the one the plugin requeued after it ended of a rescale request: a
 * slurmctld restarted on a state saved before that requeue.
 */
bool copus__memo_revived(const struct copus__memo *in, int rc, time_t end);

/* Forgets every job. */
void copus__memo_free(struct copus__sched *s);

/* The rescale in flight of a job, or NULL. */
struct copus__rescale *copus__rescale_find(struct copus__sched *s, uint32_t id);

/* Whether a rescale in flight waits for its job (one not given up). */
bool copus__rescales_active(struct copus__sched *s);
/*
 * Whether a rescale's cost waits for the first hint of the job's new run
 * (a memo's cost_asked, asked less than copus_checkpoint_deadline before
 * now, real seconds): the event round that hint brings must read it, or
 * the cost would count the wait for the next full round.
 */
bool copus__costs_awaited(const struct copus__sched *s, double now);

/*
 * Whether a job requeued for the rescale x (ended at end) is still held to
 * the cell that round decided for it: the cell may be made of GPUs that
 * other jobs asked in the same round give up. It is held while any of them
 * has not yet been seen requeued (at most copus_checkpoint_deadline after
 * the request; one that did not checkpoint by then gave up), and for one
 * round interval after the last of them (or the job itself) may restart,
 * COPUS__RELEASE_GAP s after it was requeued. It is held too until a round
 * has found the job itself able to restart (x->ready), and for one round
 * interval after: a round that comes late (a loaded slurmctld) or a job
 * held back while the nodes register after a slurmctld restart (again after
 * a round found it able to restart: a node that registers late) does not
 * lose its cell before any round could place it there. Then the policy
 * decides anew.
 */
bool copus__rescale_pinned(const struct copus__sched *s,
			   const struct copus__rescale *x, time_t end,
			   time_t now);

/*
 * What the plugin's last rescales cost, each from its checkpoint request to
 * the first hint of the run that followed it (the job stepping again on
 * its new GPUs): the cost that copus_restart_cost=measured counts.
 */
#define COPUS__COSTS_MAX 16
struct copus__costs {
	double v[COPUS__COSTS_MAX];
	int n, next;			/* how many, where the next goes */
};

/* Notes one measured cost (seconds; a cost that is not a finite number
 * >= 0 is not noted); the oldest drops out. */
void copus__costs_add(struct copus__costs *c, double seconds);

/* The mean of the costs noted, or dflt when none is. */
double copus__costs_mean(const struct copus__costs *c, double dflt);

/*
 * Where in the second (0 to 1) a round that may ask jobs to checkpoint
 * should begin, given leads (seconds from the beginning of such a round to
 * the requeue of a job it asked, as copus__costs): a job requeued in one
 * second restarts on the nodes of its last run from the next (slurmd
 * refuses a credential created in the second the node revoked the last
 * one), so the phase is the one, in hundredths, that leaves the least wait
 * from the leads' requeues to the next second. A requeue within margin
 * seconds of a second's end counts as one in the next second (the node
 * revokes the credential a moment after the requeue). NaN when no lead is
 * noted.
 */
double copus__round_phase(const struct copus__costs *leads, double margin);

/* Drops a rescale from the table (which copus_state then saves). */
void copus__rescale_drop(struct copus__sched *s, struct copus__rescale *x);

#endif /* COPUS_PLUGIN_MEMO_H */
