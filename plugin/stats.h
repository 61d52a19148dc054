/*
 * The counters of sched/copus since slurmctld loaded it, in the spirit of
 * sdiag: one table (COPUS__STATS) gives each its name, kind and meaning, so
 * that the plugin's StateSaveLocation/copus_stats, its Prometheus text file
 * copus_metrics.prom and "copusctl stats" cannot drift apart. Beside them,
 * how long each phase of a round waited for slurmctld's locks and held
 * them (stats.c), like sdiag's figures of the backfill cycle. Plain C:
 * included by sched_copus.h and by copusctl.c.
 */
#ifndef COPUS_PLUGIN_STATS_H
#define COPUS_PLUGIN_STATS_H

#include <stdio.h>

/* X(name, kind, help): kind is "counter" or "gauge". */
#define COPUS__STATS(X)                                                      \
	X(rounds, counter, "Scheduling rounds")                              \
	X(event_rounds, counter,                                             \
	  "Rounds that only started jobs, on a change between full rounds")  \
	X(event_rounds_idle, counter,                                        \
	  "Event rounds that read no job: no free GPU and no job for CPUs")  \
	X(watch_rounds, counter,                                             \
	  "Rounds brought on as a job in a rescale changed (checkpointed, "  \
	  "requeued) or a held job's hold ended")                            \
	X(event_walks, counter,                                              \
	  "Looks through every job for one without GPUs (one a full round)") \
	X(round_phase, gauge,                                                \
	  "Where in the second full rounds begin, so that the requeues of "  \
	  "the jobs they ask fall late in a second (0-1; -1: anywhere, no "  \
	  "requeue measured yet)")                                           \
	X(round_ms_last, gauge, "Time of the last round (milliseconds)")    \
	X(round_ms_mean, gauge, "Mean time of a round (milliseconds)")      \
	X(round_ms_max, gauge, "Longest round (milliseconds)")              \
	X(jobs_running, gauge, "Running GPU jobs in the last round")        \
	X(jobs_pending, gauge, "Pending jobs the last round considered")    \
	X(jobs_beyond, gauge,                                                \
	  "Pending jobs the last round left out (copus_max_jobs)")           \
	X(starts, counter, "Jobs started")                                  \
	X(starts_last, gauge, "Jobs started in the last round")             \
	X(starts_max, gauge, "Most jobs started in one round")              \
	X(rescales_asked, counter, "Jobs asked to checkpoint for a rescale") \
	X(rescales_done, counter, "Rescaled jobs that restarted")           \
	X(rescales_timed_out, counter,                                       \
	  "Jobs that did not checkpoint within the deadline")                \
	X(rescales_measured, counter,                                        \
	  "Rescales whose cost was measured: from the checkpoint request "   \
	  "to the first hint of the run on the new GPUs")                    \
	X(restart_cost_last, gauge,                                          \
	  "The last measured cost of a rescale (seconds)")                   \
	X(restart_cost_counted, gauge,                                       \
	  "The cost of a rescale the policy counts (seconds; "               \
	  "copus_restart_cost)")                                             \
	X(requeued, counter, "Jobs requeued after their checkpoint")        \
	X(requeued_after_end, counter,                                       \
	  "Jobs requeued after they ended of a rescale request")             \
	X(hints_rejected, counter, "Hints ignored as malformed or foreign") \
	X(hints_other_run, counter,                                          \
	  "Hints ignored as coming from another run of their job")           \
	X(decide_errors, counter, "Rounds in which the policy decided nothing")

/*
 * The phases of a round that take slurmctld's locks, each with the locks it
 * takes: X(name, what). The decision takes none.
 */
#define COPUS__LOCK_PHASES(X)                                                \
	X(snapshot, "the snapshot of jobs and nodes (jobs written; "        \
		    "configuration, nodes, partitions, federation read)")    \
	X(actions, "the starts (jobs and nodes written; configuration, "    \
		   "partitions, federation read)")                           \
	X(rescale, "the clearing of a resized job's GPU request (jobs "     \
		   "written)")                                               \
	X(config, "the reading of the settings (configuration and "         \
		  "partitions read)")                                        \
	X(watch, "the look at the jobs of the rescales in flight between "  \
		 "rounds (jobs read)")

enum copus__lock_phase {
#define COPUS__LOCK_ENUM(name, what) COPUS__LOCK_##name,
	COPUS__LOCK_PHASES(COPUS__LOCK_ENUM)
#undef COPUS__LOCK_ENUM
	COPUS__LOCK_NPHASES
};

/*
 * The upper bounds of a histogram's buckets, in microseconds; the last
 * bucket has none (Prometheus' +Inf).
 */
#define COPUS__LOCK_BUCKETS 7
extern const double copus__lock_bounds_us[COPUS__LOCK_BUCKETS - 1];

/* One phase's time waiting for its locks and holding them (microseconds). */
struct copus__lock_time {
	double last, sum, max;
	double le[COPUS__LOCK_BUCKETS];	/* cumulative: at most each bound */
};

/*
 * What the thread did while it held the locks: its CPU time, and how often
 * it left the CPU, taken from it (preempted: another thread's turn) or
 * giving it up (blocked: a sleep, a page in, a mutex). A hold much longer
 * than its CPU time was spent off the CPU.
 */
struct copus__lock_cpu {
	double cpu_us, preempted, blocked;
};

struct copus__lock_stats {
	double cycles;			/* times the phase took its locks */
	double yields;			/* times it let them go midway */
	struct copus__lock_time wait, hold;
	double hold_cpu_sum;		/* CPU microseconds over all holds */
	struct copus__lock_cpu hold_max_cpu;	/* of the longest hold */
};

struct copus__stats {
#define COPUS__STATS_FIELD(name, kind, help) double name;
	COPUS__STATS(COPUS__STATS_FIELD)
#undef COPUS__STATS_FIELD
	double round_ms_sum;	/* for the mean */
	struct copus__lock_stats locks[COPUS__LOCK_NPHASES];
};

/* A phase's name ("snapshot") and what it locks, for the files. */
const char *copus__lock_phase_name(int phase);
const char *copus__lock_phase_what(int phase);

/*
 * Counts one time a phase took its locks: waited wait_us, held hold_us,
 * using cpu meanwhile (NULL: not known, counted as none).
 */
void copus__lock_count(struct copus__lock_stats *l, double wait_us,
		       double hold_us, const struct copus__lock_cpu *cpu);

/*
 * The lock figures as rows of copus_stats (name, value, meaning, by tabs):
 * per phase lock_PHASE_cycles, then for wait and hold _last_us, _mean_us,
 * _max_us and the cumulative histogram _le_100us ... _le_10s, _le_inf;
 * then lock_PHASE_hold_cpu_mean_us and, of the longest hold,
 * lock_PHASE_hold_max_cpu_us, _hold_max_preempted and _hold_max_blocked.
 */
void copus__lock_stats_rows(const struct copus__stats *st, FILE *f);

/*
 * The same as Prometheus histograms copus_lock_wait_seconds and
 * copus_lock_hold_seconds with a label phase, gauges
 * copus_lock_{wait,hold}_max_seconds, and of the longest hold
 * copus_lock_hold_max_cpu_seconds and copus_lock_hold_max_preemptions.
 */
void copus__lock_stats_prom(const struct copus__stats *st, FILE *f);

#endif /* COPUS_PLUGIN_STATS_H */
