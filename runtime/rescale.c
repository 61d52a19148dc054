/*
 * The step boundary: the signals that request a rescale, the ranks'
 * agreement on it and on a periodic checkpoint, and the state machine from
 * running through checkpointing to checkpointed (see copus/hint.h for the
 * protocol).
 */
#include <errno.h>
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

int copus__step_boundary(copus_ctx *ctx, bool *checkpointed)
{
	bool due = ctx->ckpt_interval > 0 &&
		   copus__now() - ctx->last_ckpt >= ctx->ckpt_interval;
	int64_t v[3] = { rescale_requested != 0 ? 1 : 0, ctx->info.step,
			 due ? 1 : 0 };
	int rc;

	*checkpointed = false;
	if (++ctx->since_agree < ctx->cfg.agree_interval)
		return COPUS_OK;
	/*
	 * A request that reached any rank is honoured by all, after this
	 * step; so is a periodic checkpoint that is due on any rank (their
	 * clocks started at slightly different times).
	 */
	ctx->since_agree = 0;
	rc = copus__agree(ctx, v, 3);
	if (rc != COPUS_OK)
		return rc;
	if (v[0] != 0)
		return _rescale(ctx, checkpointed);
	if (v[2] != 0)
		_periodic(ctx);
	return COPUS_OK;
}
