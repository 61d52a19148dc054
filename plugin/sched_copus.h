/*
 * sched/copus: the plugin's state, handed to each phase of a round. Included
 * by every file of the scheduler plugin and by tests/test-plugin-round.c;
 * plain C, no Slurm.
 */
#ifndef COPUS_PLUGIN_SCHED_COPUS_H
#define COPUS_PLUGIN_SCHED_COPUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "copus/model.h"
#include "copus/policy.h"
#include "copus/predict.h"
#include "memo.h"
#include "params.h"
#include "plans.h"
#include "stats.h"
#include "usage.h"

/* "sched/copus": slurmctld's name of the plugin, which starts its messages. */
extern const char plugin_type[];

/*
 * The last request set for a pending job (rescale.c), so that a request
 * Slurm accepts but does not reflect (or a job it then finds never
 * runnable) is not set again every round: an identical request waits a
 * whole interval, and does not trigger an immediate round.
 */
#define COPUS__RESIZE_MEMO 1024
struct copus__resize_memo {
	uint32_t id;
	char tres[64];
	uint32_t nodes;
	time_t when;
};

/*
 * The plugin's state. init(), fini() and sched_p_reconfig() run in
 * slurmctld's threads and touch only the agent's control, under its locks;
 * the rest belongs to the plugin's own thread, which hands it to each phase
 * of a round. The one instance is _sched in sched_copus.c.
 */
/*
 * Seconds the plugin waits for the nodes to register after it is loaded
 * when SlurmdTimeout is 0 (never time out): Slurm's default SlurmdTimeout.
 */
#define COPUS__REGISTER_WAIT 300

/*
 * Milliseconds between two looks for changed jobs and nodes, and so the
 * least time between two event rounds (sched_copus.c).
 */
#define COPUS__EVENT_MS 200
/* Event rounds that start nothing take at most 1 / (1 + COPUS__EVENT_IDLE)
 * of the time. */
#define COPUS__EVENT_IDLE 9
/*
 * While a rescale is in flight: milliseconds between two looks at its jobs
 * (rescale.h, copus__rescales_changed), and between two rounds when none
 * of them changed.
 */
#define COPUS__WATCH_MS 20
#define COPUS__RESCALE_MS 250
/*
 * Seconds before a second's end within which a requeue may count as one in
 * the next second: the node revokes the job's credential a moment after
 * slurmctld requeues it (copus__round_phase).
 */
#define COPUS__PHASE_MARGIN 0.1

struct copus__sched {
	/* The agent's control. */
	pthread_t thread;		/* under thread_lock */
	pthread_mutex_t thread_lock;
	pthread_mutex_t term_lock;
	pthread_cond_t term_cond;	/* signalled under term_lock */
	bool stop;			/* under term_lock: fini() */
	bool reconfig;			/* under term_lock: re-read the keys */
	/* Slurm's reconfigurations so far (atomic): a snapshot that let the
	 * locks go sees one that came meanwhile even within the second of
	 * an earlier change (last_part_update counts seconds). */
	unsigned reconfigs;
	/* A job's request was just set for its decided cell: start it at
	 * once. */
	bool again;

	struct copus__params params;
	/* The core policy. */
	copus_policy *policy;
	/*
	 * The predictor of a job's total work (GPU-seconds) from its name,
	 * user, request and batch, trained on the jobs that completed (kept
	 * across restarts in copus_history).
	 */
	copus_predictor *predictor;
	struct copus__memo *memo;	/* the jobs' records, sorted by id */
	int nmemo, memo_cap;
	struct copus__rescale rescales[COPUS__RESCALE_MAX];
	int nrescales;
	struct copus__costs costs;	/* the last rescales' measured costs */
	/*
	 * The last rescales' leads, each from the beginning of the round that
	 * asked the job to checkpoint to its requeue (copus__round_phase),
	 * and when the current full round began (wall clock; s).
	 */
	struct copus__costs leads;
	double round_real;
	/* copus_state would differ from the file: save it. */
	bool state_dirty;
	/* Lines in the history file (after the first) since it was last
	 * read. */
	long history_lines;
	struct copus__resize_memo resize_memo[COPUS__RESIZE_MEMO];
	/*
	 * The GPU types' relative speeds that jobs measured on two types
	 * showed (copus_models_estimate_mem), kept across rounds for the
	 * types named in ratio_types, in their order; forgotten when the
	 * cluster's types change.
	 */
	struct copus_type_ratios ratios;
	char ratio_types[COPUS_MAX_GPU_TYPES][16];
	int ratio_ntypes;
	/*
	 * When the plugin was loaded. Until a node that slurmctld has not
	 * heard from since then registers (or SlurmdTimeout has passed), the
	 * jobs running on it are left alone: after a slurmctld restart every
	 * node looks unresponsive for a moment.
	 */
	time_t started;
	bool grace_logged;
	/* Since the plugin was loaded (copusctl stats). */
	struct copus__stats stats;
	/* When the last round began (wall clock, seconds). */
	time_t round_began;
	/*
	 * What the event rounds' look for a pending job without GPUs
	 * (snapshot.c, _nothing_to_start) knows: whether it has read every
	 * job since the last full round (cpu_walked), whether a job without
	 * GPUs was pending then or has been submitted since (cpu_pending),
	 * and the id Slurm was to give its next job at the last look.
	 */
	bool cpu_walked, cpu_pending;
	uint32_t cpu_next_id;
	time_t wake_at;			/* a round's r.wake: a held job may
					 * start then (0: none) */
	/*
	 * Per node (by index): the slurmd start time it last registered
	 * with, and when the plugin first saw that registration (or the node
	 * heard from after the plugin's start); nreg entries.
	 */
	struct copus__node_reg {
		time_t slurmd_start, seen;
		/* Before its first registration since the plugin
		 * started (node_record.version is NULL until then,
		 * slurmctld does not save it): the last round that saw
		 * it unregistered. 0: registered before any round. */
		time_t unreg_seen;
		bool registered;
	} *reg;
	int nreg;
	/* The GPU time each user has used (the fair-share factor of users
	 * Slurm gives none; kept in copus_state). */
	struct copus__usage_tab usage;
	/* The planner's GPU constants and cache (jobs with a model). */
	struct copus__planner planner;
};

/* The wall clock in seconds, to the nanosecond: what a rescale cost, and
 * when the agent wakes. */
static inline double copus__now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif /* COPUS_PLUGIN_SCHED_COPUS_H */
