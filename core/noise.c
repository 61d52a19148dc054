/*
 * Gradient noise estimators (see copus/noise.h). Pure: no I/O.
 *
 * n micro-batch gradients g_1..g_n, each over b samples, estimate the true
 * gradient G with covariance Sigma_1 / b, where Sigma_1 is the per-sample
 * covariance. With L the mean of |g_i|^2 and T = |mean g_i|^2:
 *
 *   E[L] = |G|^2 + tr(Sigma_1) / b
 *   E[T] = |G|^2 + tr(Sigma_1) / (n b)
 *
 * so (n T - L) / (n - 1) is an unbiased estimate of |G|^2 and
 * n (L - T) / (n - 1) one of tr(Sigma_1) / b. The model wants the variance
 * at the initial batch M0, tr(Sigma_1) / M0, hence the factor b / M0.
 */
#include <math.h>
#include <string.h>

#include <copus/noise.h>

int copus_noise_estimate(double local_sqr, double total_sqr, int count,
			 double local_batch, double init_batch,
			 copus_grad_stats *out)
{
	double n = count;

	if (out == NULL || count < 2 || !isfinite(local_sqr) ||
	    !isfinite(total_sqr) || local_sqr < 0.0 || total_sqr < 0.0 ||
	    !isfinite(local_batch) || local_batch <= 0.0 ||
	    !isfinite(init_batch) || init_batch <= 0.0)
		return COPUS_EINVAL;
	out->sqr = (n * total_sqr - local_sqr) / (n - 1.0);
	out->var = n * (local_sqr - total_sqr) / (n - 1.0) *
		   (local_batch / init_batch);
	return COPUS_OK;
}

int copus_noise_init(copus_noise *nz, double decay)
{
	if (nz == NULL || !isfinite(decay) || decay < 0.0 || decay >= 1.0)
		return COPUS_EINVAL;
	memset(nz, 0, sizeof(*nz));
	nz->decay = decay;
	nz->bias = 1.0;
	return COPUS_OK;
}

int copus_noise_update(copus_noise *nz, const copus_grad_stats *raw)
{
	if (nz == NULL || raw == NULL || !isfinite(raw->sqr) ||
	    !isfinite(raw->var) || !(nz->decay >= 0.0 && nz->decay < 1.0))
		return COPUS_EINVAL;
	/*
	 * Each step's estimates are unbiased but noisy (and may be negative);
	 * the moving averages of the two are what the ratio is taken of.
	 */
	nz->sqr = nz->decay * nz->sqr + (1.0 - nz->decay) * raw->sqr;
	nz->var = nz->decay * nz->var + (1.0 - nz->decay) * raw->var;
	nz->bias *= nz->decay;
	nz->count++;
	return COPUS_OK;
}

int copus_noise_get(const copus_noise *nz, copus_grad_stats *out)
{
	double w;

	if (nz == NULL || out == NULL)
		return COPUS_EINVAL;
	if (nz->count == 0)
		return COPUS_ENODATA;
	/* Bias correction: the averages start at zero, as in Adam. */
	w = 1.0 - nz->bias;
	if (!(w > 0.0))
		return COPUS_ENODATA;
	/*
	 * A short or unlucky run can average to a negative value; the model
	 * needs sqr > 0 for a finite noise scale, so both are floored at a
	 * tiny positive value rather than reported as garbage.
	 */
	out->sqr = fmax(nz->sqr / w, 1e-30);
	out->var = fmax(nz->var / w, 0.0);
	return COPUS_OK;
}
