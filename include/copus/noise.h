/*
 * copus core: estimators of the gradient noise of a training job.
 * Reader: contributors and the runtime; the statistics reach the scheduler
 * in the hint (copus/hint.h) and the goodput model (copus/model.h).
 *
 * From the squared norms of a step's gradients, copus_noise_estimate() gives
 * unbiased estimates of |G|^2 and of the variance tr(Sigma) at the initial
 * batch M0 (the copus_grad_stats of copus/model.h); a copus_noise keeps their
 * moving averages across steps. Units: squared gradient norms as the caller
 * measures them; batches in samples.
 *
 * The functions are pure: no I/O, no global state. Every function checks its
 * arguments and returns COPUS_OK or a negative copus_status.
 */
#ifndef COPUS_NOISE_H
#define COPUS_NOISE_H

#include <stdint.h>

#include <copus/error.h>
#include <copus/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Unbiased estimates of |G|^2 and of the variance at the initial batch,
 * tr(Sigma) / M0, from count >= 2 gradient estimates of local_batch samples
 * each (micro-batches on several replicas, accumulation steps, or consecutive
 * steps on one GPU): local_sqr is the mean of their squared norms, total_sqr
 * the squared norm of their mean. Either estimate may be negative for one
 * step; average them (copus_noise_update) before taking a ratio.
 */
int copus_noise_estimate(double local_sqr, double total_sqr, int count,
			 double local_batch, double init_batch,
			 copus_grad_stats *out);

/* Exponential moving averages of the estimates, with bias correction. */
typedef struct copus_noise {
	double decay; /* weight of the past per update, 0 <= decay < 1 */
	double sqr;   /* raw (biased) averages */
	double var;
	double bias;  /* decay^count */
	int64_t count;
} copus_noise;

int copus_noise_init(copus_noise *nz, double decay);
int copus_noise_update(copus_noise *nz, const copus_grad_stats *raw);
/* The bias-corrected averages; COPUS_ENODATA before the first update. */
int copus_noise_get(const copus_noise *nz, copus_grad_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* COPUS_NOISE_H */
