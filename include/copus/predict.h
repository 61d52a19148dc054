/*
 * copus core: predicting how much work a job has left.
 * Reader: contributors (the plugin and the simulator feed it finished jobs).
 *
 * Most training jobs on a shared cluster recur: the same user trains the same
 * application with the same GPU count and batch size again and again, and
 * such jobs need similar amounts of work. The predictor learns from finished
 * jobs (their attributes and the total work they needed, in any unit the
 * caller keeps consistent, such as scale-invariant iterations or GPU-seconds)
 * with a random-forest regressor (XGBoost in random-forest mode), and answers
 * for a running job with its remaining work given the progress it has made.
 *
 * The predictor only computes on what it is handed: no I/O, no global state.
 * It is not thread-safe; one predictor belongs to one caller thread.
 */
#ifndef COPUS_PREDICT_H
#define COPUS_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include <copus/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What is known about a job when it is submitted. */
typedef struct copus_job_attrs {
	const char *application; /* model or program name; may be NULL */
	const char *user;        /* owner; may be NULL */
	int gpus;                /* requested GPUs, >= 1 */
	double batch;            /* requested batch size, > 0 (or 0: unknown) */
} copus_job_attrs;

#define COPUS_PREDICTOR_PARAMS_VERSION 1

typedef struct copus_predictor_params {
	size_t size;       /* sizeof(copus_predictor_params) */
	unsigned version;  /* COPUS_PREDICTOR_PARAMS_VERSION */
	int trees;         /* trees in the forest */
	int max_depth;     /* depth of each tree */
	/* Fraction of the finished jobs each tree sees. The default, 1, leaves
	 * the trees to differ by the features they may split on: a recurring
	 * configuration seen once or twice would otherwise be missing from
	 * some trees, which then answer with unrelated jobs' work. */
	double subsample;
	int min_samples;   /* finished jobs needed before the forest is used */
	int retrain_every; /* retrain after at most this many new finished
			    * jobs (sooner while the history is small) */
	size_t history;    /* finished jobs kept (the most recent ones) */
	unsigned seed;     /* random seed, for repeatable forests */
} copus_predictor_params;

#define COPUS_PREDICTOR_PARAMS_INITIALIZER                                    \
	{                                                                     \
		.size = sizeof(copus_predictor_params),                       \
		.version = COPUS_PREDICTOR_PARAMS_VERSION, .trees = 64,       \
		.max_depth = 8, .subsample = 1.0, .min_samples = 8,           \
		.retrain_every = 8, .history = 4096, .seed = 1                \
	}

typedef struct copus_predictor copus_predictor;

/* params may be NULL for the defaults. */
int copus_predictor_create(const copus_predictor_params *params,
			   copus_predictor **out);
void copus_predictor_destroy(copus_predictor *p);

/*
 * Record a finished job and the total work it needed (> 0). Retrains the
 * forest when retrain_every new jobs have been added, or earlier while the
 * new jobs are at least a quarter of the history (a young history changes
 * most with each job, and training on it is cheap).
 */
int copus_predictor_add(copus_predictor *p, const copus_job_attrs *job,
			double total_work);

/*
 * Record n finished jobs at once (a history saved earlier) and train once.
 * Checks them all first: COPUS_EINVAL, and nothing recorded, if any is
 * invalid.
 */
int copus_predictor_add_many(copus_predictor *p, const copus_job_attrs *jobs,
			     const double *total_work, size_t n);

/* Finished jobs recorded (up to the history size). */
size_t copus_predictor_count(const copus_predictor *p);

/* Times the forest has been trained so far (its cost grows with this). */
size_t copus_predictor_trainings(const copus_predictor *p);

/*
 * Predicted total work of a job. Before min_samples finished jobs the
 * prediction is the median total work seen so far; with no finished job at
 * all it is COPUS_ENODATA.
 */
int copus_predictor_total(copus_predictor *p, const copus_job_attrs *job,
			  double *total_work);

/*
 * Predicted total work of n jobs at once (one pass through the forest, much
 * cheaper per job than n calls of copus_predictor_total).
 */
int copus_predictor_total_many(copus_predictor *p, const copus_job_attrs *jobs,
			       size_t n, double *total_work);

/*
 * Remaining work of a running job that has done `done` units. When the
 * target is known (target > 0, for example a fixed number of epochs) it is
 * target - done. Otherwise the forest answers as a quantile regression
 * forest: the finished jobs that fall in the same leaves as this one are
 * a sample of its total, and it needs the median of that total less done,
 * given a total above done. So a job past its prediction is nearly done
 * when jobs like it recur with the same total, and has long to go when
 * such totals are heavy-tailed. A job with no such total in its sample,
 * or any job while fewer than min_samples jobs have finished, needs its
 * predicted total less done, or as much again as it has done once it has
 * outlived that (the policies' guess when nothing is known), so it is
 * never predicted to be finished.
 */
int copus_predictor_remaining(copus_predictor *p, const copus_job_attrs *job,
			      double done, double target, double *remaining);

/*
 * Remaining work of n running jobs without known targets, done[i] units
 * done by jobs[i], with the same rule. The jobs are taken to be all the
 * jobs still running: each joins the samples of the jobs it shares leaves
 * with as a censored total (more than it has done; the samples' totals
 * are Kaplan-Meier estimates), so that long jobs that have not finished
 * yet count. COPUS_ENODATA while no job has finished.
 */
int copus_predictor_remaining_many(copus_predictor *p,
				   const copus_job_attrs *jobs,
				   const double *done, size_t n,
				   double *remaining);

/*
 * History files: one finished job per line, "WORK GPUS BATCH USER NAME"
 * (USER "-" when unknown; NAME last, as it may hold spaces), after a first
 * line COPUS_HISTORY_MAGIC. The plugin keeps the jobs its predictor learned
 * from in one (StateSaveLocation/copus_history); copus-sim reads and writes
 * the same format (--history, --save-history). These functions only turn
 * lines into entries and back; the callers do the I/O.
 */
#define COPUS_HISTORY_MAGIC "copus-history 1"

typedef struct copus_history_entry {
	double work;   /* total work, in the unit of the file's writer */
	int gpus;      /* GPUs requested */
	double batch;  /* batch size requested (0: none) */
	char user[16]; /* "" when unknown */
	char app[64];  /* job or application name */
} copus_history_entry;

/*
 * Parses one line, its newline included: a line without one was cut short
 * by a crash. COPUS_EINVAL with *why set (a static phrase naming the field)
 * when it is not a history line.
 */
int copus_history_parse(const char *line, copus_history_entry *e,
			const char **why);

/*
 * Writes e as one line, newline included, into buf (len bytes). Control
 * characters in the name become spaces. COPUS_ERANGE when it does not fit,
 * COPUS_EINVAL when e is not a valid entry.
 */
int copus_history_format(const copus_history_entry *e, char *buf, size_t len);

/* The predictor's view of an entry (pointers into e). */
copus_job_attrs copus_history_attrs(const copus_history_entry *e);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_PREDICT_H */
