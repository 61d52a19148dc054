/*
 * Publishing hints. With an application callback, the hint is delivered at
 * once in the caller's thread. Otherwise, inside a Slurm job, a publisher
 * thread runs "scontrol update JobId=<id> Comment=<hint>" (see copus/hint.h
 * for why the Comment). scontrol runs in its own process on purpose: libslurm
 * reads slurm.conf on first use and calls fatal() (exit) when it cannot, and
 * an RPC may block for the MessageTimeout; neither may touch the training
 * process. The thread keeps only the latest hint: an older one still queued
 * is replaced, never sent late.
 */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

/* Seconds scontrol may take before it is killed. */
#define SCONTROL_TIMEOUT 30.0

struct copus__publisher {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool started;
	char pending[COPUS_HINT_MAX_LEN + 1];
	uint64_t queued; /* sequence number of the latest queued hint */
	uint64_t done;	 /* sequence number of the latest delivered one */
	int last_rc;
	char scontrol[256];
	uint32_t job_id;
	const copus_ctx *ctx; /* for the logger only */
};

/* Run scontrol; COPUS_OK when it exits with 0 in time. */
static int _scontrol(struct copus__publisher *p, const char *hint)
{
	char jobarg[32], *cmt = NULL;
	char *argv[5];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc = COPUS_EIO, st = 0;
	double t0;

	snprintf(jobarg, sizeof(jobarg), "JobId=%u", (unsigned)p->job_id);
	if (asprintf(&cmt, "Comment=%s", hint) < 0)
		return COPUS_ENOMEM;
	argv[0] = p->scontrol;
	argv[1] = "update";
	argv[2] = jobarg;
	argv[3] = cmt;
	argv[4] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (posix_spawnp(&pid, p->scontrol, &fa, NULL, argv, environ) != 0) {
		copus__log(p->ctx, 0, "cannot run %s: %s", p->scontrol,
			   strerror(errno));
		goto out;
	}
	t0 = copus__now();
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			goto out;
		if (copus__now() - t0 > SCONTROL_TIMEOUT) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			copus__log(p->ctx, 0,
				   "%s update took over %.0f s; killed",
				   p->scontrol, SCONTROL_TIMEOUT);
			goto out;
		}
		usleep(5000);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		rc = COPUS_OK;
	else
		copus__log(p->ctx, 0, "%s update JobId=%u failed (status %d)",
			   p->scontrol, (unsigned)p->job_id,
			   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
out:
	posix_spawn_file_actions_destroy(&fa);
	free(cmt);
	return rc;
}

static void *_run(void *arg)
{
	struct copus__publisher *p = arg;
	char hint[COPUS_HINT_MAX_LEN + 1];
	sigset_t all;

	/* Signals belong to the application's threads, not this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->done == p->queued)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->done == p->queued)
			break;
		uint64_t seq = p->queued;
		memcpy(hint, p->pending, sizeof(hint));
		pthread_mutex_unlock(&p->lock);
		int rc = _scontrol(p, hint);
		pthread_mutex_lock(&p->lock);
		p->done = seq;
		p->last_rc = rc;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int copus__publisher_start(copus_ctx *ctx)
{
	struct copus__publisher *p;

	ctx->hint_interval = ctx->cfg.hint_interval > 0 ? ctx->cfg.hint_interval
							: COPUS_HINT_INTERVAL;
	if (ctx->info.rank != 0)
		return COPUS_OK;
	if (ctx->no_hints)
		return COPUS_OK;
	if (ctx->cfg.publish == NULL && ctx->info.job_id == 0) {
		copus__log(ctx, 1, "not in a Slurm job: no hints");
		return COPUS_OK;
	}
	/* A hint names its job: the callback alone cannot make one. */
	if (ctx->info.job_id == 0)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: a publish callback needs the job's id: set SLURM_JOB_ID or COPUS_JOB_ID (or COPUS_HINTS=0)");
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return COPUS_ENOMEM;
	p->ctx = ctx;
	p->job_id = ctx->info.job_id;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	ctx->pub = p;
	if (ctx->cfg.publish != NULL)
		return COPUS_OK;
	/* Slurm's own rate: never more often than COPUS_HINT_INTERVAL. */
	if (ctx->hint_interval < COPUS_HINT_INTERVAL)
		ctx->hint_interval = COPUS_HINT_INTERVAL;
	snprintf(p->scontrol, sizeof(p->scontrol), "%s",
		 copus__env_text(COPUS__ENV_SCONTROL));
	if (pthread_create(&p->thread, NULL, _run, p) != 0) {
		ctx->pub = NULL;
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->cond);
		free(p);
		return copus__fail(ctx, COPUS_EIO,
				   "cannot start the hint publisher thread");
	}
	p->started = true;
	return COPUS_OK;
}

void copus__publisher_stop(copus_ctx *ctx)
{
	struct copus__publisher *p = ctx->pub;

	if (p == NULL)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		/* The last queued hint still goes out: the thread drains it. */
		pthread_join(p->thread, NULL);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
	ctx->pub = NULL;
}

int copus__publish_text(copus_ctx *ctx, const char *text, uint64_t *seq)
{
	struct copus__publisher *p = ctx->pub;
	int rc;

	if (p == NULL)
		return copus__fail(ctx, COPUS_ESTATE,
				   "no hint channel (rank %d, job %u)",
				   ctx->info.rank, (unsigned)ctx->info.job_id);
	if (!p->started) {
		rc = ctx->cfg.publish(ctx->cfg.publish_arg, text);
		p->queued++;
		p->done = p->queued;
		p->last_rc = rc == 0 ? COPUS_OK : COPUS_EIO;
		*seq = p->queued;
		if (rc != 0)
			return copus__fail(ctx, COPUS_EIO,
					   "the publish callback failed (%d)",
					   rc);
		return COPUS_OK;
	}
	pthread_mutex_lock(&p->lock);
	snprintf(p->pending, sizeof(p->pending), "%s", text);
	*seq = ++p->queued;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return COPUS_OK;
}

int copus__publish_wait(copus_ctx *ctx, uint64_t seq, double timeout)
{
	struct copus__publisher *p = ctx->pub;
	struct timespec until;
	int rc;

	if (p == NULL)
		return COPUS_ESTATE;
	if (!p->started)
		return p->done >= seq ? p->last_rc : COPUS_ESTATE;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)timeout;
	pthread_mutex_lock(&p->lock);
	while (p->done < seq) {
		if (pthread_cond_timedwait(&p->cond, &p->lock, &until) ==
		    ETIMEDOUT)
			break;
	}
	/* A newer hint replaced ours: its status stands for both. */
	rc = p->done >= seq ? p->last_rc : COPUS_EIO;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int copus__publish_hint(copus_ctx *ctx, copus_job_state state, bool wait)
{
	char buf[COPUS_HINT_MAX_LEN + 1], err[256];
	copus_hint h;
	uint64_t seq = 0;
	int rc;

	if (ctx->pub == NULL)
		return COPUS_ESTATE;
	rc = copus_hint_get(ctx, &h);
	if (rc != COPUS_OK)
		return copus__fail(ctx, rc, "no hint outside a Slurm job");
	h.state = state;
	if (state == COPUS_STATE_CHECKPOINTED)
		h.step = ctx->ckpt_step;
	rc = copus_hint_encode(&h, buf, sizeof(buf), NULL, err, sizeof(err));
	if (rc != COPUS_OK)
		return copus__fail(ctx, rc, "cannot encode the hint: %s", err);
	ctx->last_hint = copus__now();
	rc = copus__publish_text(ctx, buf, &seq);
	if (rc != COPUS_OK)
		return rc;
	copus__log(ctx, 2, "hint: %s", buf);
	if (wait)
		return copus__publish_wait(ctx, seq, COPUS_ACK_TIMEOUT);
	return COPUS_OK;
}

int copus_publish(copus_ctx *ctx)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	if (ctx->info.rank != 0 || ctx->pub == NULL)
		return copus__fail(ctx, COPUS_ESTATE,
				   "only rank 0 of a job with a hint channel publishes");
	copus__fit(ctx);
	return copus__publish_hint(ctx, ctx->state, true);
}
