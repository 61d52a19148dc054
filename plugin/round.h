/*
 * What a round of sched/copus works on, and its phase 2, the decision.
 *
 * The snapshot (snapshot.c) copies Slurm's jobs and nodes into these plain
 * structs under slurmctld's locks; the decision (round.c) then runs with no
 * lock and no Slurm call: the policy's input, the predictor, the policy,
 * and the decisions turned into actions; the actions (actions.c) and the
 * requests (rescale.c) carry them out, and statefile.c writes the round to
 * copus_status. Plain C, no Slurm: included by those files and
 * sched_copus.c, and by tests/test-plugin-round.c and
 * tests/test-plugin-sched.c.
 */
#ifndef COPUS_PLUGIN_ROUND_H
#define COPUS_PLUGIN_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "copus/hint.h"
#include "copus/model.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "options.h"
#include "plans.h"

struct copus__sched;

/*
 * slurmd refuses a job credential created in the same second as the
 * revocation of the previous run's (slurm_cred.c: ctime <= revoked) and the
 * job then fails for good. slurmctld stamps the revocation when the run
 * ends (deallocate_nodes), and the requeue completes later, once every node
 * has ended the run (batch_requeue_fini, which sets the job's submit time),
 * so a requeued job is released in the second after that
 * (round_job.requeued), and two seconds after its end at the latest.
 */
#define COPUS__RELEASE_GAP 2

/*
 * How many times a job started again after its stray run was cleared
 * (round_job.strays) may be refused by its node as a second copy of that
 * run, and released from the hold slurmctld then puts on it, before the
 * hold is left to an admin (snapshot.c, _refused).
 */
#define COPUS__REFUSED_MAX 5

/* What the round does with a job (the plan of phase 2). */
enum copus__action {
	COPUS__ACT_NONE,
	COPUS__ACT_START,	/* start it on the decided nodes */
	COPUS__ACT_RESIZE,	/* set its request to the decided cell */
	COPUS__ACT_ASK,		/* ask it to checkpoint (rescale) */
	COPUS__ACT_REQUEUE,	/* requeue it after its checkpoint */
	COPUS__ACT_CLEAR,	/* abort its stray runs on its nodes */
};

/*
 * One job of a round: what the snapshot copied of it under the locks, then
 * what the decision made of it.
 */
struct copus__round_job {
	uint32_t id;
	bool running;
	bool rigid;
	bool silent;			/* elastic, but no valid hint from its
					 * current run: kept as it is, like a
					 * rigid job, and never signalled */
	bool fixed;			/* elastic, kept as it is in an event
					 * round */
	bool in_rescale;		/* in the rescale table, not given up */
	bool waits_release;		/* requeued for a rescale, not yet
					 * allowed to start again */
	bool checkpointed;		/* its hint says so, in this run */
	int64_t ckpt_step;
	int part;			/* partition index */
	uint32_t priority;
	time_t submit, start, end;
	int restarts;
	/*
	 * Pending, and the plugin has started it before (memo.launched). With
	 * restarts == 0 that is a job slurmctld recovered pending after it
	 * died before saving the start. Like a requeued job (restarts > 0), a
	 * run of it may still be on a node: a node that registers reports the
	 * run and slurmctld aborts it, revoking the job's credential there,
	 * so it starts again no earlier than r->reg_quiet.
	 */
	bool ran;
	/*
	 * It ran, started before this slurmctld did, and its nodes have not
	 * been told since to forget it: a run slurmctld never learned of
	 * (it died before saving the start) may have ended on its own while
	 * slurmctld was down, which no node reports, and the node's slurmd,
	 * never told the job ended, refuses its next launch as a second copy
	 * (the job is held, the node drained). Before its next start the
	 * plugin has the nodes of its partition abort the job, as slurmctld
	 * does when a node reports a run of a pending job, and starts it
	 * COPUS__RELEASE_GAP s after that (cleared, its memo.cleared).
	 */
	bool strays;
	time_t cleared;
	/*
	 * When Slurm completed its last requeue (its submit time since,
	 * once no longer completing), no earlier than the revocation of the
	 * credential of the run it ended (0: not known).
	 */
	time_t requeued;
	long limit_s;			/* its time limit, seconds; 0 none,
					 * -1 unlimited */
	int nodes_req, gpn_req;		/* the request now: nodes, GPUs each */
	char type_req[16];		/* its GPU type ("" = any) */
	int gpu_entries;		/* GPU request entries, and those */
	int gpu_entries_other;		/* not a plain count per node */
	int emin, emax;			/* elastic bounds; 0 when rigid */
	int multiple;			/* --gpu-multiple; 0: none */
	char types[COPUS__TYPES_MAX][16]; /* --gpu-types */
	int ntypes;
	copus_slot *alloc;		/* running: its GPUs per node */
	int nalloc, alloc_type, cur_gpus;
	int nrun;			/* running: its nodes, with GPUs or
					 * not */
	char *nodelist;
	char app[64], user[16];		/* the predictor's attributes */
	int user_grp;			/* its user's index in user_left */
	uint32_t uid;			/* its user */
	double fs_slurm;		/* Slurm's fair-share factor of its
					 * user, 0 when Slurm has none */
	uint8_t *eligible;		/* pending: nodes it may use; its
					 * partition's row (in parts_rows)
					 * when it names no nodes of its own */
	bool eligible_shared;

	/* The decision's (phase 2). */
	bool never;			/* can never run here as it asks */
	const char *reason;		/* set when it is not given to the
					 * policy */
	int job;			/* index in the policy's input, -1 */
	enum copus__action action;
	bool launch_marked;		/* copus__round_launches marked it, */
	time_t launched_was;		/* and memo.launched was this, */
	bool launched_before_was;	/* memo.launched_before this */
	int per_node, num_nodes, dtype;
	/*
	 * Requeued for a rescale and held to the cell its round decided
	 * (copus__rescale_pinned): that cell's GPU count and type index;
	 * pin_gpus 0 when not held.
	 */
	int pin_gpus, pin_type;
	/*
	 * Requeued for a rescale and started within its release gap on
	 * nodes outside the run it ended (round.c, _early): it may start on
	 * none of that run's nodes (its rescale's ran), and only on its
	 * decided ones.
	 */
	bool early;
	char reason_buf[96];
	/* Its hint's verdict changed this round: claimed over seen progress,
	 * negative when trusted again; over claim_span seconds. */
	double claim_flip, claim_span;
	/*
	 * A job whose hint describes its model: its cells with a plan (the
	 * policy's table, ncells of them; NULL otherwise), the plan of its
	 * decided cell (NULL: none, or queued), and no_plan when the decided
	 * cell has none and is not applied. plan_rc: why the planner gave
	 * no table (COPUS_OK when it did).
	 */
	bool planned, no_plan;
	copus_cell_time *cells;
	struct copus__plan *plans;
	int ncells, plan_rc;
	const struct copus__plan *plan;
};

/*
 * A job that ended after it was asked to checkpoint in its current run:
 * it died of the rescale signal or exited with something other than the
 * requeue code (its script does not exec its trainer), or it finished
 * after reporting its checkpoint. The requests phase requeues it, so that
 * it resumes from its checkpoint instead of failing.
 */
struct copus__revive {
	uint32_t id;
	int rc;				/* the run that ended: restart count */
	time_t end;			/* and end time */
	bool again;			/* requeued before, and slurmctld came
					 * back on a state older than that */
	char why[48];			/* how it ended, for the log */
};

/*
 * What a round works on: the copies of phase 1, which the snapshot
 * allocates and frees, and the decisions, which the decision allocates and
 * frees.
 */
struct copus__round {
	bool quick;			/* an event round: starts only */
	/*
	 * A full round before its copus_interval (one that follows a
	 * rescale in flight, or a job's request set): it carries the
	 * rescales on (requeues, held cells, starts) and starts pending jobs,
	 * but moves no running job that is not in a rescale. The policy
	 * decides moves once an interval, as copus-sim's rounds do, however
	 * often the rescale protocol needs a round.
	 */
	bool between;
	bool idle;			/* an event round that could start
					 * nothing: no job was read */
	double decay_hl;		/* PriorityDecayHalfLife, seconds */
	int nusers;			/* users with jobs in the round */
	/*
	 * A job that has run before starts no earlier than this: a node that
	 * registers (slurmd or slurmctld restarted) may report a stray run of
	 * a requeued job, which slurmctld then aborts there, revoking the
	 * job's credential on that node; slurmd refuses a credential created
	 * in the second of that revocation or before, and the job would fail
	 * for good. COPUS__RELEASE_GAP seconds after the last registration
	 * the plugin saw, or, after a slurmctld start, after every node's.
	 */
	time_t reg_quiet;
	/*
	 * Slurm's KillWait: a node told to abort a run signals it, and kills
	 * it that many seconds later if it is still there. A stray run the
	 * plugin cleared (round_job.strays) is certainly gone KillWait +
	 * COPUS__RELEASE_GAP seconds after; a start before that can meet it
	 * on its node, which refuses the second copy and is drained.
	 */
	int kill_wait;
	time_t when;
	/*
	 * The decision's: the earliest time a job it held back only for
	 * reg_quiet or the release gap may start (0: none); the plugin runs a
	 * round then instead of waiting for the next one.
	 */
	time_t wake;
	double t_snap, t_decide, t_act;	/* phase times, milliseconds */
	char *state_dir;		/* StateSaveLocation */
	int nnodes;
	/* copus__sched.reconfigs when the snapshot began: the actions stop
	 * if slurmctld was reconfigured since. */
	unsigned reconfigs;
	copus_node *nodes;
	char (*names)[64];		/* node names */
	int *free;			/* GPUs not allocated, per node */
	int *cfg;			/* GPUs configured, per node */
	int ntypes;
	char types[COPUS_MAX_GPU_TYPES][16];
	/* Each type's training speed from its GPU's constants (the site's
	 * copus_planner_gpus or the built-in table; 0: not known), for the
	 * estimates and the policy (copus__round_speeds). */
	double speeds[COPUS_MAX_GPU_TYPES];
	struct copus__round_job *rj;
	int nrj, npending, nrunning;
	copus_history_entry *obs;	/* jobs that completed, to learn */
	int nobs;
	struct copus__revive *revive;	/* jobs that ended of being asked */
	int nrevive;
	uint32_t *ghosts;		/* running jobs their node no longer
					 * runs (snapshot.c, _ghost) */
	int nghosts;
	uint32_t *refused;		/* pending jobs held after their node
					 * refused a start as a second copy of
					 * a cleared run (snapshot.c, _refused) */
	int nrefused;
	uint8_t **parts_rows;		/* each partition's nodes, shared by
					 * its jobs that name none */
	int nparts_rows;
	uint32_t *over;			/* pending jobs beyond the round's */
	int nover, over_cap, max_jobs;	/* max_jobs (copus_max_jobs) */
	int started;			/* jobs the actions started */
	/*
	 * With copus_max_gpus_per_user: per user (round_job.user_grp), the
	 * GPUs the user may still take this round, the cap less what the
	 * user's running jobs hold; NULL without a cap.
	 */
	int *user_left;

	/* The decision's (phase 2). */
	const char *type_ptrs[COPUS_MAX_GPU_TYPES];
	copus_job *jobs;		/* the policy's input */
	copus_model *models;		/* ntypes per input job */
	const copus_model **model_ptrs;
	/*
	 * ntypes per input job: the estimates of its models on the types its
	 * hint does not name (copus_models_estimate), and which are made.
	 */
	copus_model *est_models;
	bool *estimated;
	int *rj_of;			/* rj index of each input job */
	int njobs;
	copus_decision *dec;
	copus_slot *pin_slots;		/* held jobs' cells, where the round
					 * placed them (copus__round_hold_pins) */
	int decided;			/* the policy ran */
	char error[160];		/* why it did not */
	int predict_rc;			/* why the predictor gave nothing */
};

/*
 * Phase 2, outside every lock: builds the policy's input from the
 * snapshot's copies in r (with the jobs' records and the rescales in flight
 * in s), predicts remaining times, runs the policy and turns its decisions
 * into an action and a reason per job. Why the policy did not run, if it
 * did not, is in r->error; why the predictor gave nothing, in
 * r->predict_rc.
 */
void copus__round_decide(struct copus__sched *s, struct copus__round *r);

/*
 * Part of copus__round_decide, after the policy: a job held to the cell its
 * rescale decided (round_job.pin_gpus) that the policy left queued, or
 * placed so that Slurm's request (the same GPU count on each node) is
 * smaller than that cell, is placed on that cell's count and type evenly,
 * on the fewest nodes, on GPUs Slurm has free that no other decision of the
 * round takes, its own decided nodes first; where none fit, the policy's
 * decision stays. A policy that places jobs anew every round (pollux: 4 + 2
 * for a job held to 6) would otherwise restart it on a part of its cell
 * (4), or leave it waiting until the hold ends.
 */
void copus__round_hold_pins(struct copus__round *r);

/* Frees what copus__round_decide() allocated; the snapshot's copies stay. */
void copus__round_free(struct copus__round *r);

/*
 * When a job requeued after its run ended (restarts > 0) may start again:
 * the second after Slurm completed its requeue, and COPUS__RELEASE_GAP s
 * after its end at the latest (COPUS__RELEASE_GAP).
 */
time_t copus__round_release(const struct copus__round_job *j);

/*
 * The least priority a pending job needs to be among the max_jobs that a
 * round considers: the max_jobs-th highest of the n priorities in prio, or
 * 0 when there are no more than max_jobs of them (or max_jobs <= 0).
 * Slurm's job list is in no useful order, so the jobs a round considers are
 * chosen by priority, as Slurm's own schedulers would. Reorders prio; takes
 * time linear in n on average, however many priorities are equal.
 */
uint32_t copus__priority_cut(uint32_t *prio, int n, int max_jobs);

/*
 * The jobs the round starts, in their records (memo.launched), around the
 * actions: before them (before true), each pending job the decision starts
 * is marked started at r->when, so that copus_state, saved then, holds every
 * start before slurmctld's own state can; after them (before false), the
 * mark is taken back from the jobs that did not start, and the jobs whose
 * stray runs the actions cleared are noted (memo.cleared). Returns how many
 * starts it marked or took back.
 */
int copus__round_launches(struct copus__sched *s, struct copus__round *r,
			  bool before);

/* The index of a GPU type among the round's types, or -1. */
int copus__type_index(const struct copus__round *r, const char *name);

/*
 * The per-type goodput models of a job from its last good hint: models[t]
 * (t < ntypes) gets the hint's throughput parameters for type_names[t], or
 * those published as "default" when the job has none for that type, with
 * the hint's gradient statistics and batch limits; ptrs[t] points to it, or
 * is NULL when the hint says nothing about type t or the model does not
 * pass copus_model_check(). Returns the number of types with a model.
 */
int copus__hint_models(const copus_hint *h, const char *const *type_names,
		       int ntypes, copus_model *models,
		       const copus_model **ptrs);

/*
 * Seconds the job still needs, from its hint's progress and target and the
 * progress rate observed since its current run's first hint (rate, in
 * progress units per second): -1 when the target is unknown or the rate is
 * not positive.
 */
double copus__remaining(const copus_hint *h, double rate);

/*
 * A hint is a claim: a running job whose model claims more than
 * COPUS__DISTRUST times the progress rate the plugin sees it make, over at
 * least copus_hint_check seconds of its current run, has its model ignored
 * (it is scheduled as a job without a hint: linear speedup up to its
 * request, not beyond).
 */
#define COPUS__DISTRUST 2.0

/*
 * How many times the progress rate (iterations at its initial batch per
 * second) that model m claims on nodes x gpus GPUs, with its best batch,
 * exceeds seen_rate: 0 when it cannot be told (no model, no GPUs), and
 * HUGE_VAL when the job claims progress but makes none.
 */
double copus__claim_ratio(const copus_model *m, int nodes, int gpus,
			  double seen_rate);

/*
 * Goodput speedup of the model on nodes x per_node GPUs over one GPU, each
 * with its best batch; 0 when it cannot be computed.
 */
double copus__model_speedup(const copus_model *m, int nodes, int per_node);

#endif /* COPUS_PLUGIN_ROUND_H */
