/*
 * The files of sched/copus in StateSaveLocation: copus_state (the rescales
 * in flight and the jobs' records, across slurmctld restarts),
 * copus_history (the completed jobs the predictor learned from) and
 * copus_status (the admin's view of the last round, which copusctl
 * prints). Included by sched_copus.c.
 */
#ifndef COPUS_PLUGIN_STATEFILE_H
#define COPUS_PLUGIN_STATEFILE_H

#include <stdbool.h>

#include "copus/predict.h"

struct copus__round;
struct copus__sched;

/* Writes copus_state in dir when it would change; nothing when dir is NULL. */
void copus__state_save(struct copus__sched *s, const char *dir);

/* Reads copus_state from dir, if there is one. */
void copus__state_load(struct copus__sched *s, const char *dir);

/*
 * Reads copus_history from dir: gives it to the predictor when learn is
 * set, and rewrites the file with the kept jobs when it holds more than
 * twice as many lines.
 */
void copus__history_load(struct copus__sched *s, const char *dir, bool learn);

/*
 * Gives the predictor the jobs that completed (obs, from the snapshot) and
 * appends them to copus_history in dir.
 */
void copus__history_learn(struct copus__sched *s, const char *dir,
			  const copus_history_entry *obs, int nobs);

/* Writes the round to copus_status in its StateSaveLocation. */
void copus__status_write(struct copus__sched *s, struct copus__round *r);

/*
 * The counters (stats.h) into dir/copus_stats, for copusctl stats, and
 * dir/copus_metrics.prom in Prometheus' text exposition format, for a node
 * exporter's textfile collector; both replaced atomically.
 */
void copus__stats_write(struct copus__sched *s, const char *dir);

#endif /* COPUS_PLUGIN_STATEFILE_H */
