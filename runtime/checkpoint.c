/*
 * Checkpoints: writing one, its manifest, and restoring from it.
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
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#include "internal.h"

/*
 * The largest count a manifest may hold (2^53, where doubles stop counting
 * exactly): a number beyond the range of the integer it becomes would make
 * the conversion undefined.
 */
#define MANIFEST_COUNT_MAX 9007199254740992.0

/* Reading a manifest back and removing leftovers (below the writing). */
static void _remove_leftovers(copus_ctx *ctx,
			      const struct copus__manifest *m);
static int _read_file(copus_ctx *ctx, const char *path, char **out);
static bool _get_num(struct json_object *o, const char *key, double *out);

/* Free n file names and their array (NULL: nothing). */
static void _names_free(char **names, int n)
{
	if (names == NULL)
		return;
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void copus__ckpt_files_free(copus_ctx *ctx)
{
	_names_free(ctx->ckpt_files, ctx->n_ckpt_files);
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
	if (copus__coords(ctx, rank, &at) != COPUS_OK ||
	    at.data_rank != 0)
		return -1;
	return at.data_group;
}

static int _fsync_path(const char *path, bool dir)
{
	int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static int _mkdirs(copus_ctx *ctx, const char *dir)
{
	char *p = strdup(dir);
	int rc = COPUS_OK;

	if (p == NULL)
		return COPUS_ENOMEM;
	for (char *s = p + 1; ; s++) {
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
		return copus__fail(ctx, COPUS_EIO, "cannot fsync directory %s: %s",
				   ctx->ckpt_dir, strerror(errno));
	return COPUS_OK;
}

/* The CRC-32 of a whole file (zlib's polynomial). */
static int _crc_file(copus_ctx *ctx, const char *path, uint32_t *out)
{
	static const size_t chunk = 1 << 20;
	unsigned char *buf = malloc(chunk);
	uLong crc = crc32(0L, Z_NULL, 0);
	int fd, rc = COPUS_OK;

	if (buf == NULL)
		return COPUS_ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return copus__fail(ctx, COPUS_EIO, "cannot open %s: %s", path,
				   strerror(errno));
	}
	for (;;) {
		ssize_t n = read(fd, buf, chunk);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = copus__fail(ctx, COPUS_EIO, "cannot read %s: %s",
					 path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
	}
	close(fd);
	free(buf);
	*out = (uint32_t)crc;
	return rc;
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
	rc = _crc_file(ctx, tmp, crc);
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

/* The runtime's state and the checkpoint's files, as JSON. */
static char *_manifest_text(copus_ctx *ctx, int64_t step, char **files,
			    const long long *sizes, const uint32_t *crcs,
			    int nfiles)
{
	struct json_object *o = json_object_new_object(), *a, *e;
	char *text = NULL;

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "copus_ckpt",
			       json_object_new_int(COPUS_MANIFEST_VERSION));
	json_object_object_add(o, "job", json_object_new_int64(ctx->info.job_id));
	json_object_object_add(o, "restart",
			       json_object_new_int(ctx->info.restart_count));
	json_object_object_add(o, "step", json_object_new_int64(step));
	json_object_object_add(o, "samples",
			       json_object_new_int64(ctx->info.samples));
	json_object_object_add(o, "progress",
			       json_object_new_double(ctx->info.progress));
	json_object_object_add(o, "world", json_object_new_int(ctx->info.world));
	json_object_object_add(o, "save_all_ranks",
			       json_object_new_int(ctx->cfg.save_all_ranks ? 1 : 0));
	a = json_object_new_array();
	json_object_array_add(a, json_object_new_int(ctx->degrees.data));
	json_object_array_add(a, json_object_new_int(ctx->degrees.tensor));
	json_object_array_add(a, json_object_new_int(ctx->degrees.pipeline));
	json_object_object_add(o, "layout", a);
	json_object_object_add(o, "layers",
			       json_object_new_int(ctx->cfg.n_layers));
	/*
	 * The first layer of every stage and the end: a planned job's
	 * stages depend on its cell, so a restart compares them, not only
	 * the degrees.
	 */
	if (ctx->cfg.n_layers > 0) {
		a = json_object_new_array();
		for (int st = 0; st < ctx->degrees.pipeline; st++) {
			int first, count;

			copus__stage_layers(ctx, ctx->degrees.pipeline, st,
					    &first, &count);
			json_object_array_add(a, json_object_new_int(first));
		}
		json_object_array_add(a, json_object_new_int(ctx->cfg.n_layers));
		json_object_object_add(o, "stages", a);
	}
	a = json_object_new_array();
	for (int i = 0; i < nfiles; i++) {
		e = json_object_new_array();
		json_object_array_add(e, json_object_new_string(files[i]));
		json_object_array_add(e, json_object_new_int64(sizes[i]));
		json_object_array_add(e, json_object_new_int64(crcs[i]));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "files", a);
	a = json_object_new_array();
	json_object_array_add(a, json_object_new_double(ctx->noise.decay));
	json_object_array_add(a, json_object_new_double(ctx->noise.sqr));
	json_object_array_add(a, json_object_new_double(ctx->noise.var));
	json_object_array_add(a, json_object_new_double(ctx->noise.bias));
	json_object_array_add(a, json_object_new_int64(ctx->noise.count));
	json_object_object_add(o, "noise", a);
	a = json_object_new_array();
	for (int i = 0; i < ctx->n_obs; i++) {
		const struct copus__obs *ob = &ctx->obs[i];
		e = json_object_new_array();
		json_object_array_add(e, json_object_new_string(ob->type));
		json_object_array_add(e, json_object_new_int(ob->nodes));
		json_object_array_add(e, json_object_new_int(ob->replicas));
		json_object_array_add(e, json_object_new_int(ob->local));
		json_object_array_add(e, json_object_new_int(ob->accum_steps));
		json_object_array_add(e, json_object_new_double(ob->sum_compute));
		json_object_array_add(e, json_object_new_double(ob->sum_step));
		json_object_array_add(e, json_object_new_int64(ob->n));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "obs", a);
	text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return text;
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
	rc = _read_file(ctx, path, &text);
	if (rc == COPUS_ENODATA)
		return COPUS_OK;
	if (rc != COPUS_OK)
		return rc;
	o = json_tokener_parse(text);
	free(text);
	rc = COPUS_OK;
	if (o != NULL && _get_num(o, "restart", &restart) &&
	    restart > ctx->info.restart_count)
		rc = copus__fail(ctx, COPUS_ESTATE,
				 "the checkpoint in %s belongs to restart %.0f of this job; this run is restart %d, an old run: it does not overwrite it",
				 ctx->ckpt_dir, restart, ctx->info.restart_count);
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
		rc = _mkdirs(ctx, ctx->ckpt_dir);
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
				sizes[nfiles] = q == 0 ? size : (long long)st.st_size;
				crcs[nfiles] = (uint32_t)(got[1 + r] - 1);
				if (files[nfiles++] == NULL)
					rc = COPUS_ENOMEM;
			}
		}
		/* Once more: a later run may have started meanwhile. */
		if (rc == COPUS_OK)
			rc = _check_current(ctx);
		if (rc == COPUS_OK) {
			text = _manifest_text(ctx, step, files, sizes, crcs,
					      nfiles);
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
					 strcmp(files[k], ctx->ckpt_files[i]) == 0;
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
	_names_free(files, nfiles);
	free(sizes);
	free(crcs);
	free(got);
	free(text);
	return rc;
}

/* ------------------------------------------------------------------------
 * Restore
 * ------------------------------------------------------------------------ */

static int _read_file(copus_ctx *ctx, const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n;
	int rc = COPUS_OK;

	*out = NULL;
	if (f == NULL)
		return errno == ENOENT ? COPUS_ENODATA
			: copus__fail(ctx, COPUS_EIO, "cannot open %s: %s",
				      path, strerror(errno));
	buf = malloc(COPUS_MANIFEST_MAX + 1);
	if (buf == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	n = fread(buf, 1, COPUS_MANIFEST_MAX + 1, f);
	if (ferror(f) || n > COPUS_MANIFEST_MAX) {
		rc = copus__fail(ctx, COPUS_EIO,
				 "%s: unreadable or larger than %d bytes", path,
				 COPUS_MANIFEST_MAX);
		goto out;
	}
	buf[n] = '\0';
	*out = buf;
	buf = NULL;
out:
	free(buf);
	fclose(f);
	return rc;
}

static bool _get_num(struct json_object *o, const char *key, double *out)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !(json_object_is_type(v, json_type_int) ||
	      json_object_is_type(v, json_type_double)))
		return false;
	*out = json_object_get_double(v);
	return isfinite(*out);
}

static bool _arr_num(struct json_object *a, size_t i, double *out)
{
	struct json_object *v = json_object_array_get_idx(a, i);

	if (v == NULL || !(json_object_is_type(v, json_type_int) ||
			   json_object_is_type(v, json_type_double)))
		return false;
	*out = json_object_get_double(v);
	return isfinite(*out);
}

void copus__manifest_free(struct copus__manifest *m)
{
	_names_free(m->files, m->nfiles);
	free(m->sizes);
	free(m->crcs);
	free(m->stages);
	memset(m, 0, sizeof(*m));
}

int copus__parse_manifest(copus_ctx *ctx, const char *path, const char *text,
			  struct copus__manifest *m)
{
	struct json_object *o = json_tokener_parse(text), *a, *e;
	double x, version, step, samples, progress, world, all = 0;
	char **files = NULL;
	long long *sizes = NULL;
	int64_t *crcs = NULL;
	int nfiles = 0, rc = COPUS_EPARSE;
	size_t width;
	const char *field = "the top level";

	memset(m, 0, sizeof(*m));
	if (o == NULL || !json_object_is_type(o, json_type_object))
		goto bad;
	field = "copus_ckpt";
	if (!_get_num(o, "copus_ckpt", &version) ||
	    (version != 1 && version != COPUS_MANIFEST_VERSION))
		goto bad;
	/* Version 1 named each file with its size; 2 adds its CRC-32. */
	width = version == 1 ? 2 : 3;
	field = "step";
	if (!_get_num(o, "step", &step) || step < 0 || step > COPUS_HINT_STEP_MAX)
		goto bad;
	field = "samples";
	if (!_get_num(o, "samples", &samples) || samples < 0 ||
	    samples > MANIFEST_COUNT_MAX)
		goto bad;
	field = "progress";
	if (!_get_num(o, "progress", &progress) || progress < 0)
		goto bad;
	field = "world";
	if (!_get_num(o, "world", &world) || world < 1 || world > 1 << 20 ||
	    world != floor(world))
		goto bad;
	field = "save_all_ranks";
	if (version >= 2 &&
	    (!_get_num(o, "save_all_ranks", &all) || (all != 0 && all != 1)))
		goto bad;
	field = "layout";
	m->layout = (copus_plan_degrees){ .data = (int)world, .pipeline = 1,
					  .tensor = 1 };
	if (version >= 3) {
		double d[3];

		if (!json_object_object_get_ex(o, "layout", &a) ||
		    !json_object_is_type(a, json_type_array) ||
		    json_object_array_length(a) != 3)
			goto bad;
		for (int k = 0; k < 3; k++)
			if (!_arr_num(a, (size_t)k, &d[k]) || d[k] < 1 ||
			    d[k] > world || d[k] != floor(d[k]))
				goto bad;
		if (d[0] * d[1] * d[2] != world)
			goto bad;
		m->layout = (copus_plan_degrees){ .data = (int)d[0],
						  .tensor = (int)d[1],
						  .pipeline = (int)d[2] };
		field = "layers";
		if (!_get_num(o, "layers", &x) || x < 0 || x > INT_MAX ||
		    x != floor(x))
			goto bad;
		m->n_layers = (int)x;
		/* Optional: the stages' first layers and the end, in
		 * order, from 0 to the model's layers. */
		field = "stages";
		if (json_object_object_get_ex(o, "stages", &a)) {
			size_t ns = (size_t)m->layout.pipeline + 1;

			if (!json_object_is_type(a, json_type_array) ||
			    json_object_array_length(a) != ns)
				goto bad;
			m->stages = calloc(ns, sizeof(int));
			if (m->stages == NULL)
				goto bad;
			for (size_t k = 0; k < ns; k++) {
				if (!_arr_num(a, k, &x) || x != floor(x) ||
				    x < (k > 0 ? m->stages[k - 1] : 0) ||
				    x > m->n_layers)
					goto bad;
				m->stages[k] = (int)x;
			}
			if (m->stages[0] != 0 ||
			    m->stages[ns - 1] != m->n_layers)
				goto bad;
		}
	}
	field = "files";
	if (!json_object_object_get_ex(o, "files", &a) ||
	    !json_object_is_type(a, json_type_array))
		goto bad;
	nfiles = (int)json_object_array_length(a);
	/*
	 * One file per rank when every rank saved, else one per shard
	 * (pipeline stage and tensor slice); none without a save callback.
	 * Version 1 did not say which.
	 */
	if (nfiles > 0 &&
	    (version >= 2 ? nfiles != (all ? (int)world
					   : m->layout.pipeline *
						     m->layout.tensor)
			  : (nfiles > 1 && nfiles != (int)world)))
		goto bad;
	if (version == 1)
		all = nfiles > 1;
	files = calloc((size_t)nfiles + 1, sizeof(char *));
	sizes = calloc((size_t)nfiles + 1, sizeof(long long));
	crcs = calloc((size_t)nfiles + 1, sizeof(*crcs));
	if (files == NULL || sizes == NULL || crcs == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (int i = 0; i < nfiles; i++) {
		const char *s;
		double c = -1;

		e = json_object_array_get_idx(a, (size_t)i);
		if (e == NULL || !json_object_is_type(e, json_type_array) ||
		    json_object_array_length(e) != width ||
		    !json_object_is_type(json_object_array_get_idx(e, 0),
					 json_type_string) ||
		    !_arr_num(e, 1, &x) || x < 0 || x > MANIFEST_COUNT_MAX ||
		    (width == 3 && (!_arr_num(e, 2, &c) || c < 0 ||
				    c > 4294967295.0 || c != floor(c))))
			goto bad;
		s = json_object_get_string(json_object_array_get_idx(e, 0));
		/* A file name, never a path out of the directory. */
		if (strchr(s, '/') != NULL || s[0] == '.' || strlen(s) > 200)
			goto bad;
		files[i] = strdup(s);
		sizes[i] = (long long)x;
		crcs[i] = (int64_t)c;
		if (files[i] == NULL) {
			nfiles = i;
			rc = COPUS_ENOMEM;
			goto out;
		}
	}
	field = "noise";
	if (!json_object_object_get_ex(o, "noise", &a) ||
	    !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) != 5)
		goto bad;
	{
		double d, s, v, b, c;
		if (!_arr_num(a, 0, &d) || !_arr_num(a, 1, &s) ||
		    !_arr_num(a, 2, &v) || !_arr_num(a, 3, &b) ||
		    !_arr_num(a, 4, &c) || c < 0 || c > MANIFEST_COUNT_MAX ||
		    b < 0 || b > 1)
			goto bad;
		/* The decay is the new run's; the averages carry over. */
		ctx->noise.sqr = s;
		ctx->noise.var = v;
		ctx->noise.bias = b;
		ctx->noise.count = (int64_t)c;
		(void)d;
	}
	field = "obs";
	if (!json_object_object_get_ex(o, "obs", &a) ||
	    !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) > COPUS_MAX_OBS)
		goto bad;
	ctx->n_obs = 0;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct copus__obs *ob = &ctx->obs[ctx->n_obs];
		double v[7];

		e = json_object_array_get_idx(a, i);
		if (e == NULL || !json_object_is_type(e, json_type_array) ||
		    json_object_array_length(e) != 8 ||
		    !json_object_is_type(json_object_array_get_idx(e, 0),
					 json_type_string))
			goto bad;
		for (int k = 0; k < 7; k++)
			if (!_arr_num(e, (size_t)k + 1, &v[k]) || v[k] < 0 ||
			    (k < 4 && v[k] > INT_MAX) ||
			    (k == 6 && v[k] > MANIFEST_COUNT_MAX))
				goto bad;
		snprintf(ob->type, sizeof(ob->type), "%s",
			 json_object_get_string(json_object_array_get_idx(e, 0)));
		ob->nodes = (int)v[0];
		ob->replicas = (int)v[1];
		ob->local = (int)v[2];
		ob->accum_steps = (int)v[3];
		ob->sum_compute = v[4];
		ob->sum_step = v[5];
		ob->n = (int64_t)v[6];
		if (ob->nodes < 1 || ob->replicas < ob->nodes || ob->local < 1)
			goto bad;
		ctx->n_obs++;
	}
	ctx->obs_dirty = ctx->n_obs > 0;
	ctx->info.samples = (int64_t)samples;
	ctx->info.progress = progress;
	m->step = (int64_t)step;
	m->world = (int)world;
	m->all_ranks = all != 0;
	m->nfiles = nfiles;
	m->files = files;
	m->sizes = sizes;
	m->crcs = crcs;
	files = NULL;
	sizes = NULL;
	crcs = NULL;
	rc = COPUS_OK;
	goto out;
bad:
	rc = copus__fail(ctx, COPUS_EPARSE,
			 "checkpoint manifest %s: field \"%s\" is missing or invalid",
			 path, field);
	free(m->stages);
	m->stages = NULL;
out:
	_names_free(files, nfiles);
	free(sizes);
	free(crcs);
	if (o != NULL)
		json_object_put(o);
	return rc;
}

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
static void _remove_leftovers(copus_ctx *ctx,
			      const struct copus__manifest *m)
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
			copus__log(ctx, 1, "removed %s, left by a checkpoint that did not commit",
				   path);
	}
	closedir(d);
}

/* File idx of the manifest: there, of its size and CRC-32; its path. */
static int _check_file(copus_ctx *ctx, const struct copus__manifest *m,
		       int idx, char *path, size_t len)
{
	struct stat st;
	uint32_t crc;
	int rc;

	snprintf(path, len, "%s/%s", ctx->ckpt_dir, m->files[idx]);
	if (stat(path, &st) != 0 || (long long)st.st_size != m->sizes[idx])
		return copus__fail(ctx, COPUS_EIO,
				   "checkpoint file %s is missing or not %lld bytes",
				   path, m->sizes[idx]);
	if (m->crcs[idx] < 0)
		return COPUS_OK;
	rc = _crc_file(ctx, path, &crc);
	if (rc != COPUS_OK)
		return rc;
	if (crc != (uint32_t)m->crcs[idx])
		return copus__fail(ctx, COPUS_EIO,
				   "checkpoint file %s is corrupt: CRC-32 %08x, the manifest says %08x",
				   path, crc, (uint32_t)m->crcs[idx]);
	return COPUS_OK;
}

/*
 * Whether the checkpoint's stages hold other layers than this run's (same
 * pipeline degree, another split: a planned job on another cell).
 */
static bool _stages_differ(const copus_ctx *ctx,
			   const struct copus__manifest *m)
{
	if (m->stages == NULL || m->layout.pipeline != ctx->degrees.pipeline ||
	    m->n_layers != ctx->cfg.n_layers)
		return false;
	for (int st = 0; st < m->layout.pipeline; st++) {
		int first, count;

		copus__stage_layers(ctx, m->layout.pipeline, st, &first,
				    &count);
		if (first != m->stages[st] ||
		    first + count != m->stages[st + 1])
			return true;
	}
	return false;
}

/*
 * Restore under another layout: every shard of the old layout whose layers
 * and tensor slice overlap this rank's new ones is checked and handed to
 * the reshard callback; the others are not read.
 */
static int _reshard(copus_ctx *ctx, const struct copus__manifest *m)
{
	const copus_plan_degrees *o = &m->layout, *d = &ctx->degrees;
	int nshards = o->pipeline * o->tensor, first, count, rc = COPUS_OK;
	copus_ckpt_layout old = { o->data, o->tensor, o->pipeline };
	copus_ckpt_layout now = { d->data, d->tensor, d->pipeline };
	copus_ckpt_shard *shards;
	char (*paths)[4096];
	copus_plan_coords at;

	if (m->n_layers != ctx->cfg.n_layers)
		return copus__fail(ctx, COPUS_ESTATE,
				   "checkpoint of step %lld in %s is of a model of %d layers; this run has %d",
				   (long long)m->step, ctx->ckpt_dir,
				   m->n_layers, ctx->cfg.n_layers);
	if (m->nfiles < nshards)
		return copus__fail(ctx, COPUS_EPARSE,
				   "checkpoint of step %lld in %s names %d files for %d shards",
				   (long long)m->step, ctx->ckpt_dir, m->nfiles,
				   nshards);
	rc = copus__coords(ctx, ctx->info.rank, &at);
	if (rc != COPUS_OK)
		return rc;
	copus__stage_layers(ctx, d->pipeline, at.pipeline_rank, &first, &count);
	shards = calloc((size_t)nshards, sizeof(*shards));
	paths = calloc((size_t)nshards, sizeof(*paths));
	if (shards == NULL || paths == NULL) {
		free(shards);
		free(paths);
		return COPUS_ENOMEM;
	}
	for (int i = 0; i < nshards && rc == COPUS_OK; i++) {
		copus_ckpt_shard *sh = &shards[i];
		bool layers, slice;

		/* Shard i is data group i; its file, by rank or by shard. */
		sh->pipeline_rank = i / o->tensor;
		sh->tensor_rank = i % o->tensor;
		if (m->stages != NULL) {
			sh->first_layer = m->stages[sh->pipeline_rank];
			sh->n_layers = m->stages[sh->pipeline_rank + 1] -
				       sh->first_layer;
		} else {
			copus__stage_layers(ctx, o->pipeline, sh->pipeline_rank,
					    &sh->first_layer, &sh->n_layers);
		}
		layers = ctx->cfg.n_layers == 0 ||
			 (sh->first_layer < first + count &&
			  first < sh->first_layer + sh->n_layers);
		/* Slices j / t_old .. (j + 1) / t_old against k / t_new ... */
		slice = (long)sh->tensor_rank * d->tensor <
				(long)(at.tensor_rank + 1) * o->tensor &&
			(long)at.tensor_rank * o->tensor <
				(long)(sh->tensor_rank + 1) * d->tensor;
		if (!layers || !slice)
			continue;
		rc = _check_file(ctx, m, i, paths[i], sizeof(paths[i]));
		sh->path = paths[i];
	}
	if (rc == COPUS_OK) {
		copus_ckpt_shard mine = { NULL, at.pipeline_rank,
					  at.tensor_rank, first, count };
		int cb = ctx->cfg.reshard(ctx->cfg.cb_arg, m->step, &old, &now,
					  &mine, shards, nshards);
		if (cb != 0)
			rc = copus__fail(ctx, COPUS_EIO,
					 "the reshard callback failed (%d) loading step %lld from pipeline %d x tensor %d into pipeline %d x tensor %d",
					 cb, (long long)m->step, o->pipeline,
					 o->tensor, d->pipeline, d->tensor);
	}
	if (rc == COPUS_OK)
		copus__log(ctx, 1, "resharded step %lld from data %d x pipeline %d x tensor %d to data %d x pipeline %d x tensor %d",
			   (long long)m->step, o->data, o->pipeline, o->tensor,
			   d->data, d->pipeline, d->tensor);
	free(shards);
	free(paths);
	return rc;
}

int copus__restore(copus_ctx *ctx)
{
	char path[4096], *text = NULL;
	struct copus__manifest m = { 0 };
	bool other;
	int rc, idx;

	if (ctx->ckpt_dir == NULL)
		return COPUS_OK;
	snprintf(path, sizeof(path), "%s/" COPUS_MANIFEST, ctx->ckpt_dir);
	rc = _read_file(ctx, path, &text);
	if (rc == COPUS_ENODATA) {
		if (ctx->info.restart_count > 0)
			copus__log(ctx, 0, "restart %d but no checkpoint in %s: starting from scratch",
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
	/*
	 * Rank r loads its own file when every rank saved, else its shard's
	 * (its pipeline stage and tensor slice, any data degree). Files of
	 * another layout go through the reshard callback, or are refused:
	 * every rank reads the same manifest and decides alike.
	 */
	other = m.nfiles > 0 &&
		(m.layout.pipeline != ctx->degrees.pipeline ||
		 m.layout.tensor != ctx->degrees.tensor ||
		 (m.all_ranks && m.world != ctx->info.world) ||
		 _stages_differ(ctx, &m));
	if (other && ctx->cfg.reshard != NULL) {
		rc = _reshard(ctx, &m);
		if (rc != COPUS_OK)
			goto out;
	} else if (other) {
		rc = copus__fail(ctx, COPUS_ESTATE,
				 "checkpoint of step %lld in %s was written by %d ranks (data %d x pipeline %d x tensor %d%s%s); this run has %d ranks (data %d x pipeline %d x tensor %d) and no reshard callback to load it",
				 (long long)m.step, ctx->ckpt_dir, m.world,
				 m.layout.data, m.layout.pipeline,
				 m.layout.tensor,
				 m.all_ranks ? ", a file per rank" : "",
				 _stages_differ(ctx, &m)
					 ? ", stages of other layers"
					 : "",
				 ctx->info.world, ctx->degrees.data,
				 ctx->degrees.pipeline, ctx->degrees.tensor);
		goto out;
	} else if (m.nfiles > 0) {
		copus_plan_coords at;

		idx = 0;
		if (m.all_ranks)
			idx = ctx->info.rank;
		else if (copus__coords(ctx,
						   ctx->info.rank, &at) ==
			 COPUS_OK)
			idx = at.data_group;
		rc = _check_file(ctx, &m, idx, path, sizeof(path));
		if (rc != COPUS_OK)
			goto out;
		if (ctx->cfg.load == NULL) {
			rc = copus__fail(ctx, COPUS_ESTATE,
					 "a checkpoint of step %lld exists but config.load is NULL",
					 (long long)m.step);
			goto out;
		}
		rc = ctx->cfg.load(ctx->cfg.cb_arg, path, m.step);
		if (rc != 0) {
			rc = copus__fail(ctx, COPUS_EIO,
					 "the load callback failed (%d) reading %s",
					 rc, path);
			goto out;
		}
	}
	_remove_leftovers(ctx, &m);
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
