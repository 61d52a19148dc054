/*
 * Checkpoints: the protocol that writes one and restores from it. The
 * manifest's format is in checkpoint-format.c, the restore under another
 * layout in checkpoint-reshard.c.
 *
 * A checkpoint of step k is the application's file(s) ckpt-<k>.r<rank>
 * plus the manifest copus.manifest that names them and holds the runtime's
 * own state. Each file is written under a temporary name, fsynced, renamed,
 * and the directory fsynced; the manifest is replaced last, the same way.
 * A crash at any point leaves either the old manifest with its old files
 * (which are removed only after the new manifest is durable) or the new one
 * with its complete files. The manifest holds each file's size and CRC-32,
 * checked before the load callback sees the file; what a crash or a failed
 * checkpoint left behind (temporary files, files no manifest names) is
 * removed when the next run starts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "internal.h"

/* Removing leftovers (below the writing). */
static void _remove_leftovers(copus_ctx *ctx, const struct copus__manifest *m);

void copus__ckpt_files_free(copus_ctx *ctx)
{
	copus__ckpt_names_free(ctx->ckpt_files, ctx->n_ckpt_files);
	ctx->ckpt_files = NULL;
	ctx->n_ckpt_files = 0;
}

int copus__ckpt_slot(const copus_ctx *ctx, int rank, int *nslots)
{
	copus_plan_coords at;

	if (ctx->cfg.save_all_ranks) {
		*nslots = ctx->info.world;
		return rank;
	}
	*nslots = ctx->degrees.pipeline * ctx->degrees.tensor;
	if (copus__coords(ctx, rank, &at) != COPUS_OK || at.data_rank != 0)
		return -1;
	return at.data_group;
}

static int _fsync_path(const char *path, bool dir)
{
	int fd = open(path,
		      (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Make a file durable under its final name. */
static int _commit_file(copus_ctx *ctx, const char *tmp, const char *final)
{
	if (_fsync_path(tmp, false) != 0)
		return copus__fail(ctx, COPUS_EIO, "cannot fsync %s: %s", tmp,
				   strerror(errno));
	if (rename(tmp, final) != 0)
		return copus__fail(ctx, COPUS_EIO, "cannot rename %s to %s: %s",
				   tmp, final, strerror(errno));
	if (_fsync_path(ctx->ckpt_dir, true) != 0)
		return copus__fail(ctx, COPUS_EIO,
				   "cannot fsync directory %s: %s",
				   ctx->ckpt_dir, strerror(errno));
	return COPUS_OK;
}

/* The application's file of this rank: write, make durable; its size. */
static int _save_app(copus_ctx *ctx, int64_t step, char *name, size_t nlen,
		     long long *size, uint32_t *crc)
{
	char tmp[4096], final[4096];
	struct stat st;
	int rc;

	snprintf(name, nlen, "ckpt-%lld.r%d", (long long)step, ctx->info.rank);
	snprintf(final, sizeof(final), "%s/%s", ctx->ckpt_dir, name);
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", ctx->ckpt_dir, name);
	unlink(tmp);
	rc = ctx->cfg.save(ctx->cfg.cb_arg, tmp, step);
	if (rc != 0)
		return copus__fail(ctx, COPUS_EIO,
				   "the save callback failed (%d) writing %s",
				   rc, tmp);
	if (stat(tmp, &st) != 0)
		return copus__fail(ctx, COPUS_EIO,
				   "the save callback wrote no file %s", tmp);
	*size = (long long)st.st_size;
	rc = copus__ckpt_crc(ctx, tmp, crc);
	if (rc != COPUS_OK)
		return rc;
	return _commit_file(ctx, tmp, final);
}

/*
 * This rank's leftovers of a checkpoint that did not commit: its file of
 * that step, finished or not.
 */
static void _unlink_uncommitted(copus_ctx *ctx, int64_t step)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/ckpt-%lld.r%d", ctx->ckpt_dir,
		 (long long)step, ctx->info.rank);
	unlink(path);
	snprintf(path, sizeof(path), "%s/ckpt-%lld.r%d.tmp", ctx->ckpt_dir,
		 (long long)step, ctx->info.rank);
	unlink(path);
}

static int _write_manifest(copus_ctx *ctx, const char *text)
{
	char tmp[4096], final[4096];
	size_t len = strlen(text), off = 0;
	int fd, rc = COPUS_OK;

	snprintf(final, sizeof(final), "%s/" COPUS_MANIFEST, ctx->ckpt_dir);
	snprintf(tmp, sizeof(tmp), "%s/" COPUS_MANIFEST ".tmp", ctx->ckpt_dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return copus__fail(ctx, COPUS_EIO, "cannot create %s: %s", tmp,
				   strerror(errno));
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = copus__fail(ctx, COPUS_EIO, "cannot write %s: %s",
					 tmp, strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 && rc == COPUS_OK)
		rc = copus__fail(ctx, COPUS_EIO, "cannot close %s: %s", tmp,
				 strerror(errno));
	if (rc == COPUS_OK)
		rc = _commit_file(ctx, tmp, final);
	return rc;
}

/*
 * Does the directory hold the checkpoint of a later run of this job (a
 * higher restart count)? Then this run is an old one still alive, on a node
 * Slurm gave up on, and must not overwrite what the current run wrote.
 */
static int _check_current(copus_ctx *ctx)
{
	char path[4096], *text = NULL;
	struct json_object *o;
	double restart;
	int rc;

	snprintf(path, sizeof(path), "%s/" COPUS_MANIFEST, ctx->ckpt_dir);
	rc = copus__manifest_read(ctx, path, &text);
	if (rc == COPUS_ENODATA)
		return COPUS_OK;
	if (rc != COPUS_OK)
		return rc;
	o = json_tokener_parse(text);
	free(text);
	rc = COPUS_OK;
	if (o != NULL && copus__manifest_num(o, "restart", &restart) &&
	    restart > ctx->info.restart_count)
		rc = copus__fail(ctx, COPUS_ESTATE,
				 "the checkpoint in %s belongs to restart %.0f of this job; this run is restart %d, an old run: it does not overwrite it",
				 ctx->ckpt_dir, restart,
				 ctx->info.restart_count);
	if (o != NULL)
		json_object_put(o);
	return rc;
}

int copus_checkpoint(copus_ctx *ctx)
{
	char name[256], **files = NULL, *text = NULL;
	long long *sizes = NULL, size = 0;
	uint32_t crc = 0, *crcs = NULL;
	int64_t step, v[2], *got = NULL;
	int nfiles = 0, nsave, rc = COPUS_OK, saver, slot;
	bool saved = false;

	if (ctx == NULL)
		return COPUS_EINVAL;
	if (ctx->ckpt_dir == NULL)
		return copus__fail(ctx, COPUS_ESTATE,
				   "no checkpoint directory (config.ckpt_dir or COPUS_CKPT_DIR)");
	if (ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "checkpoint inside a step; call it after step_end");
	step = ctx->info.step;
	/*
	 * The latest checkpoint is of this step already (every rank knows
	 * it): writing the same files again could only put it at risk.
	 */
	if (ctx->ckpt_step == step) {
		copus__log(ctx, 1, "checkpoint of step %lld exists in %s",
			   (long long)step, ctx->ckpt_dir);
		return COPUS_OK;
	}
	/*
	 * One file per shard (pipeline stage and tensor slice), written by
	 * the shard's first replica; or one per rank with save_all_ranks.
	 */
	slot = copus__ckpt_slot(ctx, ctx->info.rank, &nsave);
	saver = slot >= 0;
	if (ctx->cfg.save == NULL)
		nsave = 0;
	got = calloc((size_t)nsave + 1, sizeof(*got));
	if (got == NULL)
		return COPUS_ENOMEM;
	if (saver)
		rc = copus__ckpt_mkdirs(ctx, ctx->ckpt_dir);
	if (rc == COPUS_OK && ctx->info.rank == 0)
		rc = _check_current(ctx);
	if (rc == COPUS_OK && saver && ctx->cfg.save != NULL)
		rc = _save_app(ctx, step, name, sizeof(name), &size, &crc);

	/*
	 * Every rank's file is durable, or nobody commits. The same maximum
	 * gathers the saving ranks' checksums: rank r's slot holds its CRC
	 * plus one, every other rank's zero.
	 */
	got[0] = rc != COPUS_OK;
	if (rc == COPUS_OK && saver && nsave > 0)
		got[1 + slot] = (int64_t)crc + 1;
	if (copus__agree(ctx, got, nsave + 1) != COPUS_OK || got[0] != 0) {
		if (rc == COPUS_OK)
			rc = copus__fail(ctx, COPUS_EIO,
					 "another rank failed to save its checkpoint");
		goto out;
	}
	saved = true;
	if (ctx->info.rank == 0) {
		int n = nsave;

		files = calloc((size_t)n + 1, sizeof(char *));
		sizes = calloc((size_t)n + 1, sizeof(long long));
		crcs = calloc((size_t)n + 1, sizeof(*crcs));
		if (files == NULL || sizes == NULL || crcs == NULL) {
			rc = COPUS_ENOMEM;
		} else {
			/* The files in slot order: by rank or by shard. */
			for (int r = 0; r < n && rc == COPUS_OK; r++) {
				char f[256], path[4096];
				struct stat st;
				int q = 0, ns;

				while (q < ctx->info.world &&
				       copus__ckpt_slot(ctx, q, &ns) != r)
					q++;
				snprintf(f, sizeof(f), "ckpt-%lld.r%d",
					 (long long)step, q);
				snprintf(path, sizeof(path), "%s/%s",
					 ctx->ckpt_dir, f);
				/* Other ranks' files: the size they have now. */
				if (stat(path, &st) != 0) {
					rc = copus__fail(ctx, COPUS_EIO,
							 "checkpoint file %s is missing",
							 path);
					break;
				}
				if (got[1 + r] < 1) {
					rc = copus__fail(ctx, COPUS_EIO,
							 "rank %d sent no checksum of %s",
							 q, path);
					break;
				}
				files[nfiles] = strdup(f);
				sizes[nfiles] =
					q == 0 ? size : (long long)st.st_size;
				crcs[nfiles] = (uint32_t)(got[1 + r] - 1);
				if (files[nfiles++] == NULL)
					rc = COPUS_ENOMEM;
			}
		}
		/* Once more: a later run may have started meanwhile. */
		if (rc == COPUS_OK)
			rc = _check_current(ctx);
		if (rc == COPUS_OK) {
			text = copus__manifest_text(ctx, step, files, sizes,
						    crcs, nfiles);
			rc = text == NULL ? COPUS_ENOMEM
					  : _write_manifest(ctx, text);
		}
	}
	v[0] = rc != COPUS_OK;
	v[1] = 0;
	if (copus__agree(ctx, v, 2) != COPUS_OK || v[0] != 0) {
		if (rc == COPUS_OK)
			rc = copus__fail(ctx, COPUS_EIO,
					 "rank 0 failed to commit the checkpoint");
		goto out;
	}
	/* The new checkpoint is durable: the files of the old one can go. */
	if (ctx->info.rank == 0) {
		for (int i = 0; i < ctx->n_ckpt_files; i++) {
			char path[4096];
			bool reused = false;

			for (int k = 0; k < nfiles; k++)
				reused = reused ||
					 strcmp(files[k], ctx->ckpt_files[i]) ==
						 0;
			snprintf(path, sizeof(path), "%s/%s", ctx->ckpt_dir,
				 ctx->ckpt_files[i]);
			if (!reused)
				unlink(path);
		}
		copus__ckpt_files_free(ctx);
		ctx->ckpt_files = files;
		ctx->n_ckpt_files = nfiles;
		files = NULL;
	}
	ctx->ckpt_step = step;
	/*
	 * What earlier failed attempts of this run left (their temporary
	 * files, files no manifest names) goes now, not only at the next
	 * start: on a small disk it could make the next checkpoint fail.
	 */
	{
		char *own = saver && ctx->cfg.save != NULL ? name : NULL;
		struct copus__manifest now = {
			.nfiles = ctx->info.rank == 0 ? ctx->n_ckpt_files
						      : own != NULL,
			.files = ctx->info.rank == 0 ? ctx->ckpt_files : &own,
		};

		_remove_leftovers(ctx, &now);
	}
	copus__log(ctx, 1, "checkpoint of step %lld written to %s",
		   (long long)step, ctx->ckpt_dir);
out:
	/*
	 * A checkpoint that failed before rank 0 could commit it leaves
	 * nothing behind. Later, rank 0 may have committed it; what a failed
	 * commit left is removed when the next run starts.
	 */
	if (rc != COPUS_OK && !saved && saver && ctx->cfg.save != NULL)
		_unlink_uncommitted(ctx, step);
	copus__ckpt_names_free(files, nfiles);
	free(sizes);
	free(crcs);
	free(got);
	free(text);
	return rc;
}

/* ------------------------------------------------------------------------
 * Restore
 * ------------------------------------------------------------------------ */

/*
 * Is name a file of copus's checkpoints: ckpt-<step>.r<rank>, with
 * ".tmp" while it is written, or the manifest's temporary file? *rank:
 * the rank that writes it (0 for the manifest).
 */
static bool _ckpt_name(const char *name, int *rank, bool *tmp)
{
	unsigned long long step;
	int r, n = -1;

	if (strcmp(name, COPUS_MANIFEST ".tmp") == 0) {
		*rank = 0;
		*tmp = true;
		return true;
	}
	if (sscanf(name, "ckpt-%llu.r%d%n", &step, &r, &n) != 2 || n < 0 ||
	    r < 0)
		return false;
	*rank = r;
	*tmp = strcmp(name + n, ".tmp") == 0;
	return name[n] == '\0' || *tmp;
}

/*
 * Remove what a crash or a failed checkpoint left in the directory: the
 * temporary files and the files no manifest names. Each rank removes its
 * own (rank 0 also those of ranks the job no longer has), so that ranks on
 * other nodes never race for a file.
 */
static void _remove_leftovers(copus_ctx *ctx, const struct copus__manifest *m)
{
	DIR *d = opendir(ctx->ckpt_dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[4096];
		bool tmp, named = false;
		int r;

		if (!_ckpt_name(e->d_name, &r, &tmp))
			continue;
		if (r != ctx->info.rank &&
		    !(ctx->info.rank == 0 && r >= ctx->info.world))
			continue;
		for (int i = 0; !tmp && i < m->nfiles; i++)
			named = named || strcmp(m->files[i], e->d_name) == 0;
		if (named)
			continue;
		snprintf(path, sizeof(path), "%s/%s", ctx->ckpt_dir, e->d_name);
		if (unlink(path) == 0)
			copus__log(ctx, 1,
				   "removed %s, left by a checkpoint that did not commit",
				   path);
	}
	closedir(d);
}

/*
 * A checkpoint of another layout and no reshard callback: refused on every
 * rank, naming both layouts (the old one's data_inner as recorded).
 */
static int _refuse_layout(copus_ctx *ctx, const struct copus__manifest *m,
			  int data_inner)
{
	char old[96], now[96];

	copus__layout_name(old, sizeof(old), &m->layout, data_inner);
	copus__layout_name(now, sizeof(now), &ctx->degrees,
			   copus__data_inner(ctx));
	return copus__fail(ctx, COPUS_ESTATE,
			   "checkpoint %s step %lld was saved %s under %s, %d ranks%s; this job runs %s, %d ranks, and has no reshard callback to load it",
			   ctx->ckpt_dir, (long long)m->step,
			   m->all_ranks ? "by every rank"
					: "by the first replica of each shard",
			   old, m->world,
			   copus__ckpt_stages_differ(ctx, m)
				   ? ", with stages of other layers"
				   : "",
			   now, ctx->info.world);
}

/*
 * The checkpoint's layout is this job's: this rank loads the file of its
 * coordinates (its shard's, or with a file per rank that of the old rank
 * that had them, whichever layout of ranks either run had).
 */
static int _load_own(copus_ctx *ctx, const struct copus__manifest *m)
{
	char path[4096];
	copus_plan_coords at;
	int rc, idx;

	rc = copus__coords(ctx, ctx->info.rank, &at);
	if (rc != COPUS_OK)
		return copus__fail(ctx, rc,
				   "rank %d has no coordinates in the job's layout",
				   ctx->info.rank);
	idx = copus__ckpt_file_at(m, at.data_rank, at.pipeline_rank,
				  at.tensor_rank);
	if (idx < 0 || idx >= m->nfiles)
		return copus__fail(ctx, COPUS_ESTATE,
				   "checkpoint %s step %lld has no file of rank %d",
				   ctx->ckpt_dir, (long long)m->step,
				   ctx->info.rank);
	rc = copus__ckpt_check_file(ctx, m, idx, path, sizeof(path));
	if (rc != COPUS_OK)
		return rc;
	if (ctx->cfg.load == NULL)
		return copus__fail(ctx, COPUS_ESTATE,
				   "a checkpoint of step %lld exists but config.load is NULL",
				   (long long)m->step);
	rc = ctx->cfg.load(ctx->cfg.cb_arg, path, m->step);
	if (rc != 0)
		return copus__fail(ctx, COPUS_EIO,
				   "the load callback failed (%d) reading %s",
				   rc, path);
	return COPUS_OK;
}

/* What rank 0's line at the start says of the restored checkpoint. */
static void _keep_origin(copus_ctx *ctx, const struct copus__manifest *m,
			 int data_inner)
{
	ctx->origin = (struct copus__origin){
		.restored = true,
		.step = m->step,
		.world = m->world,
		.layout = m->layout,
		.data_inner = data_inner,
		.written = m->written,
		.job = m->job,
		.restart = m->restart,
	};
}

int copus__restore(copus_ctx *ctx)
{
	char path[4096], *text = NULL;
	struct copus__manifest m = { 0 };
	bool other, same;
	int rc, recorded;

	if (ctx->ckpt_dir == NULL)
		return COPUS_OK;
	snprintf(path, sizeof(path), "%s/" COPUS_MANIFEST, ctx->ckpt_dir);
	rc = copus__manifest_read(ctx, path, &text);
	if (rc == COPUS_ENODATA) {
		if (ctx->info.restart_count > 0)
			copus__log(ctx, 0,
				   "restart %d but no checkpoint in %s: starting from scratch",
				   ctx->info.restart_count, ctx->ckpt_dir);
		_remove_leftovers(ctx, &m);
		return COPUS_OK;
	}
	if (rc != COPUS_OK)
		return rc;
	rc = copus__parse_manifest(ctx, path, text, &m);
	free(text);
	if (rc != COPUS_OK)
		return rc;
	rc = copus__ckpt_compatible(ctx, &m);
	if (rc != COPUS_OK)
		goto out;
	same = memcmp(&m.layout, &ctx->degrees, sizeof(m.layout)) == 0;
	/*
	 * Before version 4 a manifest did not say how its ranks were laid
	 * out: it is read as it was then, rank r's file for rank r under
	 * the same degrees, copus/plan.h's layout under others.
	 */
	recorded = m.data_inner;
	if (m.data_inner < 0)
		m.data_inner = same ? copus__data_inner(ctx) : 0;
	/*
	 * Rank r loads the file of its coordinates: its shard's (its
	 * pipeline stage and tensor slice, any data degree), or with a file
	 * per rank that of the old rank at its coordinates. Files of another
	 * layout go through the reshard callback, or are refused: every rank
	 * reads the same manifest and decides alike.
	 */
	other = m.nfiles > 0 && (m.layout.pipeline != ctx->degrees.pipeline ||
				 m.layout.tensor != ctx->degrees.tensor ||
				 (m.all_ranks && m.world != ctx->info.world) ||
				 copus__ckpt_stages_differ(ctx, &m));
	if (other && ctx->cfg.reshard != NULL)
		rc = copus__ckpt_reshard(ctx, &m);
	else if (other)
		rc = _refuse_layout(ctx, &m, recorded);
	else if (m.nfiles > 0)
		rc = _load_own(ctx, &m);
	if (rc != COPUS_OK)
		goto out;
	_remove_leftovers(ctx, &m);
	_keep_origin(ctx, &m, recorded);
	ctx->info.step = m.step;
	ctx->info.restored = 1;
	ctx->ckpt_step = m.step;
	ctx->ckpt_files = m.files;
	ctx->n_ckpt_files = m.nfiles;
	m.files = NULL;
	m.nfiles = 0;
	copus__log(ctx, 1, "restored step %lld from %s", (long long)m.step,
		   ctx->ckpt_dir);
	rc = COPUS_OK;
out:
	copus__manifest_free(&m);
	return rc;
}
