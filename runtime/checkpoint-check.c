/*
 * The checks of checkpoints at start-up: the directory can be written
 * before the first rescale needs it, a checkpoint is of this job's model
 * (its fingerprint), and rank 0's line about the checkpoint it resumed
 * from. runtime.c calls them from copus_init(), checkpoint.c from the
 * restore and the writing; they call checkpoint-format.c and common.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int copus__ckpt_setup(copus_ctx *ctx, const copus_config *cfg)
{
	const char *s = cfg->ckpt_dir != NULL
				? cfg->ckpt_dir
				: copus__env_text(COPUS__ENV_CKPT_DIR);

	if (s != NULL && *s != '\0' && (ctx->ckpt_dir = strdup(s)) == NULL)
		return COPUS_ENOMEM;
	ctx->cfg.ckpt_dir = ctx->ckpt_dir;
	s = cfg->fingerprint;
	ctx->cfg.fingerprint = NULL;
	if (s == NULL || *s == '\0')
		return COPUS_OK;
	/*
	 * It is printed in errors and stored in the manifest; this error
	 * does not print it (it may hold a line break).
	 */
	if (!copus__fingerprint_ok(s, strnlen(s, COPUS_FINGERPRINT_MAX)))
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: fingerprint (%zu bytes) is not 1 to %d bytes without control characters",
				   strnlen(s, COPUS_FINGERPRINT_MAX),
				   COPUS_FINGERPRINT_MAX - 1);
	ctx->fingerprint = strdup(s);
	if (ctx->fingerprint == NULL)
		return COPUS_ENOMEM;
	ctx->cfg.fingerprint = ctx->fingerprint;
	return COPUS_OK;
}

void copus__ckpt_free(copus_ctx *ctx)
{
	copus__ckpt_names_free(ctx->ckpt_files, ctx->n_ckpt_files);
	ctx->ckpt_files = NULL;
	ctx->n_ckpt_files = 0;
	free(ctx->ckpt_dir);
	ctx->ckpt_dir = NULL;
	free(ctx->fingerprint);
	ctx->fingerprint = NULL;
}

int copus__ckpt_mkdirs(copus_ctx *ctx, const char *dir)
{
	char *p = strdup(dir);
	int rc = COPUS_OK;

	if (p == NULL)
		return COPUS_ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0700) != 0 && errno != EEXIST) {
				rc = copus__fail(ctx, COPUS_EIO,
						 "cannot create checkpoint directory %s: %s",
						 p, strerror(errno));
				break;
			}
			*s = c;
			if (c == '\0')
				break;
		}
	}
	free(p);
	return rc;
}

int copus__ckpt_dir_check(copus_ctx *ctx)
{
	char path[4096];
	int fd, rc;

	if (ctx->ckpt_dir == NULL)
		return COPUS_OK;
	rc = copus__ckpt_mkdirs(ctx, ctx->ckpt_dir);
	if (rc != COPUS_OK)
		return rc;
	/*
	 * Every rank writes a file of its own name (mkstemp): ranks on
	 * several nodes that share the directory never race for one.
	 */
	if (snprintf(path, sizeof(path), "%s/.copus-probe-XXXXXX",
		     ctx->ckpt_dir) >= (int)sizeof(path))
		return copus__fail(ctx, COPUS_EIO,
				   "checkpoint directory %.200s...: the path is too long",
				   ctx->ckpt_dir);
	fd = mkstemp(path);
	if (fd < 0)
		return copus__fail(ctx, COPUS_EIO,
				   "checkpoint directory %s is not writable: cannot create a file in it: %s",
				   ctx->ckpt_dir, strerror(errno));
	rc = write(fd, "copus\n", 6) == 6
		     ? COPUS_OK
		     : copus__fail(ctx, COPUS_EIO,
				   "checkpoint directory %s is not writable: cannot write %s: %s",
				   ctx->ckpt_dir, path, strerror(errno));
	close(fd);
	if (unlink(path) != 0 && rc == COPUS_OK)
		rc = copus__fail(ctx, COPUS_EIO,
				 "checkpoint directory %s: cannot remove %s: %s",
				 ctx->ckpt_dir, path, strerror(errno));
	return rc;
}

int copus__ckpt_compatible(copus_ctx *ctx, const struct copus__manifest *m)
{
	if (m->fingerprint == NULL || ctx->fingerprint == NULL ||
	    strcmp(m->fingerprint, ctx->fingerprint) == 0)
		return COPUS_OK;
	return copus__fail(ctx, COPUS_ESTATE,
			   "checkpoint %s step %lld was written by a model with fingerprint '%s'; this job's model is '%s'",
			   ctx->ckpt_dir, (long long)m->step, m->fingerprint,
			   ctx->fingerprint);
}

const char *copus__layout_name(char *buf, size_t len,
			       const copus_plan_degrees *d, int data_inner)
{
	snprintf(buf, len, "data %d x tensor %d x pipeline %d%s", d->data,
		 d->tensor, d->pipeline,
		 data_inner < 0 ? ""
		 : data_inner	? " (data inner)"
				: " (data outer)");
	return buf;
}

/* " written 2026-11-28T01:02:03Z" (UTC), or that it was not recorded. */
static void _written(char *buf, size_t len, int64_t written)
{
	time_t t = (time_t)written;
	struct tm tm;

	if (written < 0 || gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "written %Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "written at a time it does not record");
}

void copus__resume_log(const copus_ctx *ctx)
{
	const struct copus__origin *o = &ctx->origin;
	char old[96], now[96], when[64], by[64] = "";

	if (!o->restored || ctx->info.rank != 0)
		return;
	copus__layout_name(old, sizeof(old), &o->layout, o->data_inner);
	_written(when, sizeof(when), o->written);
	if (o->job >= 0 && o->restart >= 0)
		snprintf(by, sizeof(by), " by job %lld restart %d",
			 (long long)o->job, o->restart);
	/*
	 * Always shown, as the plan's line is: a job's log says which
	 * state it trains on, so that a wrong one is seen at once.
	 */
	if (memcmp(&o->layout, &ctx->degrees, sizeof(o->layout)) == 0 &&
	    o->world == ctx->info.world)
		copus__log(ctx, 0,
			   "resuming from checkpoint %s at step %lld (layout %s, %d rank%s), %s%s",
			   ctx->ckpt_dir, (long long)o->step, old, o->world,
			   o->world == 1 ? "" : "s", when, by);
	else
		copus__log(ctx, 0,
			   "resuming from checkpoint %s at step %lld (layout %s, %d rank%s), %s%s, into layout %s, %d rank%s",
			   ctx->ckpt_dir, (long long)o->step, old, o->world,
			   o->world == 1 ? "" : "s", when, by,
			   copus__layout_name(now, sizeof(now), &ctx->degrees,
					      copus__data_inner(ctx)),
			   ctx->info.world, ctx->info.world == 1 ? "" : "s");
}
