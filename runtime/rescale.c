/*
 * The step boundary: the signals that request a rescale, the ranks'
 * agreement on it and on a periodic checkpoint, and the state machine from
 * running through checkpointing to checkpointed (see copus/hint.h for the
 * protocol).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

static volatile sig_atomic_t rescale_requested;

static void _on_signal(int sig)
{
	(void)sig;
	rescale_requested = 1;
}

int copus__signals_install(copus_ctx *ctx)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = _on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (int i = 0; i < 2; i++) {
		if (i == 1 && ctx->signals[1] == ctx->signals[0]) {
			ctx->signals[1] = 0;
			continue;
		}
		if (sigaction(ctx->signals[i], &sa, &ctx->old_act[i]) != 0)
			return copus__fail(ctx, COPUS_EIO,
					   "cannot install a handler for signal %d: %s",
					   ctx->signals[i], strerror(errno));
	}
	ctx->handlers_installed = true;
	return COPUS_OK;
}

void copus__signals_restore(copus_ctx *ctx)
{
	if (!ctx->handlers_installed)
		return;
	for (int i = 0; i < 2; i++)
		if (ctx->signals[i] > 0)
			sigaction(ctx->signals[i], &ctx->old_act[i], NULL);
	ctx->handlers_installed = false;
}

int copus_request_rescale(copus_ctx *ctx)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	rescale_requested = 1;
	return COPUS_OK;
}

/*
 * Checkpoint for the rescale and tell the scheduler. A failed checkpoint
 * (a full or read-only directory, a failed save callback) drops the request
 * and the job keeps running: the step succeeds, the reason is logged, and
 * the scheduler sees the job running at its size. The previous checkpoint
 * stays as it was.
 */
static int _rescale(copus_ctx *ctx, bool *checkpointed)
{
	int rc;

	copus__log(ctx, 1, "rescale requested: checkpointing after step %lld",
		   (long long)ctx->info.step);
	ctx->state = COPUS_STATE_CHECKPOINTING;
	if (ctx->info.rank == 0 && ctx->pub != NULL)
		copus__publish_hint(ctx, COPUS_STATE_CHECKPOINTING, false);
	rc = copus_checkpoint(ctx);
	if (rc != COPUS_OK) {
		/* No checkpoint, no exit: the job keeps running. */
		ctx->state = COPUS_STATE_RUNNING;
		rescale_requested = 0;
		copus__log(ctx, 0, "rescale checkpoint failed, continuing: %s",
			   copus_errmsg(ctx));
		if (ctx->info.rank == 0 && ctx->pub != NULL)
			copus__publish_hint(ctx, COPUS_STATE_RUNNING, false);
		return COPUS_OK;
	}
	ctx->state = COPUS_STATE_CHECKPOINTED;
	if (ctx->info.rank == 0 && ctx->pub != NULL) {
		rc = copus__publish_hint(ctx, COPUS_STATE_CHECKPOINTED, true);
		if (rc != COPUS_OK)
			copus__log(ctx, 0, "acknowledgement not delivered: %s",
				   copus_errmsg(ctx));
	}
	*checkpointed = true;
	return COPUS_OK;
}

/*
 * A periodic checkpoint. Its failure costs only the work since the previous
 * one: it is logged, the next is tried an interval later, training goes on.
 */
static void _periodic(copus_ctx *ctx)
{
	int rc;

	copus__log(ctx, 1, "periodic checkpoint after step %lld",
		   (long long)ctx->info.step);
	rc = copus_checkpoint(ctx);
	ctx->last_ckpt = copus__now();
	if (rc != COPUS_OK)
		copus__log(ctx, 0, "periodic checkpoint failed, continuing: %s",
			   copus_errmsg(ctx));
}

/* Seconds between two fits of rank 0 for the plan's agreed inputs. */
#define REFIT_INTERVAL 1.0

void copus__boundary_local(copus_ctx *ctx, struct copus__boundary *b)
{
	const copus_perf_params *p;

	memset(b, 0, sizeof(*b));
	b->rescale = rescale_requested != 0;
	b->ckpt_due = ctx->ckpt_interval > 0 &&
		      copus__now() - ctx->last_ckpt >= ctx->ckpt_interval;
	if (ctx->info.rank != 0)
		return;
	b->have_grad = copus_noise_get(&ctx->noise, &b->grad) == COPUS_OK;
	/* A fit costs more than a step of a small model: not every step. */
	if (ctx->info.world > 1 && ctx->obs_dirty &&
	    copus__now() - ctx->last_refit >= REFIT_INTERVAL) {
		ctx->last_refit = copus__now();
		copus__fit(ctx);
	}
	p = copus__perf_of_type(ctx);
	if (p != NULL) {
		b->have_perf = true;
		b->perf = *p;
	}
}

void copus__boundary_apply(copus_ctx *ctx, const struct copus__boundary *b)
{
	if (b->have_grad)
		ctx->plan_grad = b->grad;
	if (b->have_perf) {
		ctx->plan_perf = b->perf;
		ctx->plan_have_perf = true;
	}
}

/*
 * The values of a boundary, in the order both encodings use: two flags of
 * any rank, then rank 0's plan inputs.
 */
#define N_FLAGS 2
#define N_RANK0 (2 + 2 + 7)

static void _rank0_values(const struct copus__boundary *b, double *v)
{
	const copus_perf_params *p = &b->perf;

	v[0] = b->have_grad;
	v[1] = b->grad.sqr;
	v[2] = b->grad.var;
	v[3] = b->have_perf;
	v[4] = p->alpha_c;
	v[5] = p->beta_c;
	v[6] = p->alpha_n;
	v[7] = p->beta_n;
	v[8] = p->alpha_r;
	v[9] = p->beta_r;
	v[10] = p->gamma;
}

static void _rank0_set(struct copus__boundary *b, const double *v)
{
	copus_perf_params *p = &b->perf;

	b->have_grad = v[0] == 1;
	b->grad.sqr = v[1];
	b->grad.var = v[2];
	b->have_perf = v[3] == 1;
	p->alpha_c = v[4];
	p->beta_c = v[5];
	p->alpha_n = v[6];
	p->beta_n = v[7];
	p->alpha_r = v[8];
	p->beta_r = v[9];
	p->gamma = v[10];
}

/*
 * The agreement through the application's maximum all-reduce: the flags
 * as 0 or 1, rank 0's values as their bits while every other rank sends
 * the least int64, so that the maximum is rank 0's.
 */
static int _agree_max(copus_ctx *ctx, struct copus__boundary *b)
{
	int64_t v[N_FLAGS + N_RANK0];
	double d[N_RANK0];
	int rc;

	v[0] = b->rescale;
	v[1] = b->ckpt_due;
	_rank0_values(b, d);
	for (int i = 0; i < N_RANK0; i++) {
		if (ctx->info.rank == 0)
			memcpy(&v[N_FLAGS + i], &d[i], sizeof(double));
		else
			v[N_FLAGS + i] = INT64_MIN;
	}
	rc = copus__agree(ctx, v, N_FLAGS + N_RANK0);
	if (rc != COPUS_OK)
		return rc;
	b->rescale = v[0] != 0;
	b->ckpt_due = v[1] != 0;
	for (int i = 0; i < N_RANK0; i++)
		memcpy(&d[i], &v[N_FLAGS + i], sizeof(double));
	/* An agree callback that exchanged nothing: no plan inputs. */
	if (ctx->info.rank != 0 && v[N_FLAGS] == INT64_MIN)
		d[0] = d[3] = 0;
	_rank0_set(b, d);
	return COPUS_OK;
}

/* Each of rank 0's doubles travels as four 16-bit pieces of its bits. */
#define PIECES 4
#if COPUS_AGREE_LEN != N_FLAGS + PIECES * N_RANK0 + 2
#error "COPUS_AGREE_LEN does not match the boundary's values"
#endif

int copus_agree_pack(copus_ctx *ctx, double *out, int n)
{
	struct copus__boundary b;
	double d[N_RANK0];

	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	if (n != COPUS_AGREE_LEN)
		return copus__fail(ctx, COPUS_EINVAL,
				   "agree_pack: %d values, expected COPUS_AGREE_LEN (%d)",
				   n, COPUS_AGREE_LEN);
	if (!ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "agree_pack outside a step");
	copus__boundary_local(ctx, &b);
	memset(out, 0, sizeof(double) * (size_t)n);
	out[0] = b.rescale;
	out[1] = b.ckpt_due;
	/* A check that the sums are of all ranks: each adds one. */
	out[n - 2] = 1;
	out[n - 1] = ctx->info.rank == 0;
	if (ctx->info.rank != 0)
		return COPUS_OK;
	_rank0_values(&b, d);
	for (int i = 0; i < N_RANK0; i++) {
		uint64_t bits;

		memcpy(&bits, &d[i], sizeof(bits));
		for (int k = 0; k < PIECES; k++)
			out[N_FLAGS + PIECES * i + k] =
				(double)((bits >> (16 * k)) & 0xffff);
	}
	return COPUS_OK;
}

int copus_agree_unpack(copus_ctx *ctx, const double *sums, int n)
{
	struct copus__boundary b;
	double d[N_RANK0];

	if (ctx == NULL || sums == NULL)
		return COPUS_EINVAL;
	if (n != COPUS_AGREE_LEN)
		return copus__fail(ctx, COPUS_EINVAL,
				   "agree_unpack: %d values, expected COPUS_AGREE_LEN (%d)",
				   n, COPUS_AGREE_LEN);
	if (!ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "agree_unpack outside a step");
	if (sums[n - 2] != ctx->info.world || sums[n - 1] != 1)
		return copus__fail(ctx, COPUS_EINVAL,
				   "agree_unpack: the values are a sum over %g ranks with %g rank 0, not over the job's %d ranks",
				   sums[n - 2], sums[n - 1], ctx->info.world);
	memset(&b, 0, sizeof(b));
	b.rescale = sums[0] > 0;
	b.ckpt_due = sums[1] > 0;
	for (int i = 0; i < N_RANK0; i++) {
		uint64_t bits = 0;

		for (int k = 0; k < PIECES; k++) {
			double x = sums[N_FLAGS + PIECES * i + k];

			if (!(x >= 0 && x <= 65535 && x == (double)(int)x))
				return copus__fail(ctx, COPUS_EINVAL,
						   "agree_unpack: value %d is %g, not a piece rank 0 sent (summed in a type that rounds?)",
						   N_FLAGS + PIECES * i + k, x);
			bits |= (uint64_t)x << (16 * k);
		}
		memcpy(&d[i], &bits, sizeof(double));
	}
	_rank0_set(&b, d);
	ctx->folded = b;
	ctx->have_folded = true;
	return COPUS_OK;
}

int copus__step_boundary(copus_ctx *ctx, bool *checkpointed)
{
	struct copus__boundary b;
	int rc;

	*checkpointed = false;
	if (ctx->have_folded) {
		/* The application carried the agreement with its gradients. */
		b = ctx->folded;
		ctx->have_folded = false;
		ctx->since_agree = 0;
	} else {
		if (++ctx->since_agree < ctx->cfg.agree_interval)
			return COPUS_OK;
		/*
		 * A request that reached any rank is honoured by all, after
		 * this step; so is a periodic checkpoint that is due on any
		 * rank (their clocks started at slightly different times).
		 */
		ctx->since_agree = 0;
		copus__boundary_local(ctx, &b);
		if (ctx->info.world > 1) {
			rc = _agree_max(ctx, &b);
			if (rc != COPUS_OK)
				return rc;
		}
	}
	copus__boundary_apply(ctx, &b);
	if (b.rescale)
		return _rescale(ctx, checkpointed);
	if (b.ckpt_due)
		_periodic(ctx);
	return COPUS_OK;
}
