/*
 * The counters of sched/copus since slurmctld loaded it, in the spirit of
 * sdiag: one table (COPUS__STATS) gives each its name, kind and meaning, so
 * that the plugin's StateSaveLocation/copus_stats, its Prometheus text file
 * copus_metrics.prom and "copusctl stats" cannot drift apart. Plain C:
 * included by sched_copus.h and by copusctl.c.
 */
#ifndef COPUS_PLUGIN_STATS_H
#define COPUS_PLUGIN_STATS_H

/* X(name, kind, help): kind is "counter" or "gauge". */
#define COPUS__STATS(X)                                                      \
	X(rounds, counter, "Scheduling rounds")                              \
	X(event_rounds, counter,                                             \
	  "Rounds that only started jobs, on a change between full rounds")  \
	X(round_ms_last, gauge, "Time of the last round (milliseconds)")    \
	X(round_ms_mean, gauge, "Mean time of a round (milliseconds)")      \
	X(round_ms_max, gauge, "Longest round (milliseconds)")              \
	X(jobs_running, gauge, "Running GPU jobs in the last round")        \
	X(jobs_pending, gauge, "Pending jobs the last round considered")    \
	X(starts, counter, "Jobs started")                                  \
	X(starts_last, gauge, "Jobs started in the last round")             \
	X(starts_max, gauge, "Most jobs started in one round")              \
	X(rescales_asked, counter, "Jobs asked to checkpoint for a rescale") \
	X(rescales_done, counter, "Rescaled jobs that restarted")           \
	X(rescales_timed_out, counter,                                       \
	  "Jobs that did not checkpoint within the deadline")                \
	X(requeued, counter, "Jobs requeued after their checkpoint")        \
	X(requeued_after_end, counter,                                       \
	  "Jobs requeued after they ended of a rescale request")             \
	X(hints_rejected, counter, "Hints ignored as malformed or foreign") \
	X(hints_other_run, counter,                                          \
	  "Hints ignored as coming from another run of their job")           \
	X(decide_errors, counter, "Rounds in which the policy decided nothing")

struct copus__stats {
#define COPUS__STATS_FIELD(name, kind, help) double name;
	COPUS__STATS(COPUS__STATS_FIELD)
#undef COPUS__STATS_FIELD
	double round_ms_sum;	/* for the mean */
};

#endif /* COPUS_PLUGIN_STATS_H */
