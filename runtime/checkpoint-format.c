/*
 * The on-disk format of checkpoints: the manifest (its text as the runtime
 * writes it, and reading and parsing it back), the CRC-32 of a file, and
 * the check of a file against the manifest before a load sees it.
 * checkpoint.c (the write and restore protocol) and checkpoint-reshard.c
 * read it; tests/fuzz/fuzz-manifest.c calls its parser.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* Free n file names and their array (NULL: nothing). */
void copus__ckpt_names_free(char **names, int n)
{
	if (names == NULL)
		return;
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The CRC-32 of a whole file (zlib's polynomial). */
int copus__ckpt_crc(copus_ctx *ctx, const char *path, uint32_t *out)
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

/* The member that ends a manifest of version 4, before its checksum. */
#define CHECKSUM_KEY ",\"checksum\":\""

/*
 * The text of a manifest object with its checksum appended as the last
 * member: the CRC-32 of the text before it (the object without its
 * closing brace), as 8 hexadecimal digits. NULL when out of memory.
 */
static char *_with_checksum(const char *json)
{
	size_t n = json != NULL ? strlen(json) : 0, len;
	char *text;
	uLong crc;

	if (n < 2 || json[n - 1] != '}')
		return NULL;
	n--;
	len = n + sizeof(CHECKSUM_KEY) + 8 + 2;
	text = malloc(len);
	if (text == NULL)
		return NULL;
	crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)json, (uInt)n);
	snprintf(text, len, "%.*s" CHECKSUM_KEY "%08lx\"}", (int)n, json,
		 (unsigned long)crc);
	return text;
}

/*
 * A manifest of version 4 ends with its checksum (_with_checksum): the
 * text before it must have that CRC-32. An edited field (progress, noise,
 * a file's CRC) or a corrupt byte is refused, naming the manifest.
 */
static int _check_checksum(copus_ctx *ctx, const char *path, const char *text)
{
	const char *at = NULL, *p = text, *end;
	unsigned long want;
	uLong crc;
	char *stop;

	while ((p = strstr(p, CHECKSUM_KEY)) != NULL)
		at = p++;
	if (at == NULL)
		goto bad;
	p = at + sizeof(CHECKSUM_KEY) - 1;
	for (int i = 0; i < 8; i++)
		if (!isxdigit((unsigned char)p[i]))
			goto bad;
	want = strtoul(p, &stop, 16);
	end = p + 8;
	if (stop != end || strncmp(end, "\"}", 2) != 0)
		goto bad;
	for (end += 2; *end != '\0'; end++)
		if (!isspace((unsigned char)*end))
			goto bad;
	crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text,
		    (uInt)(at - text));
	if (crc != want)
		return copus__fail(ctx, COPUS_EPARSE,
				   "checkpoint manifest %s: checksum %08lx does not match its content (edited or corrupt), whose CRC-32 is %08lx",
				   path, want, (unsigned long)crc);
	return COPUS_OK;
bad:
	return copus__fail(ctx, COPUS_EPARSE,
			   "checkpoint manifest %s: field \"checksum\" is missing, invalid or not its last member",
			   path);
}

/* The runtime's state and the checkpoint's files, as JSON. */
char *copus__manifest_text(copus_ctx *ctx, int64_t step, char **files,
			   const long long *sizes, const uint32_t *crcs,
			   int nfiles)
{
	struct json_object *o = json_object_new_object(), *a, *e;
	char *text = NULL;

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "copus_ckpt",
			       json_object_new_int(COPUS_MANIFEST_VERSION));
	json_object_object_add(o, "job",
			       json_object_new_int64(ctx->info.job_id));
	json_object_object_add(o, "restart",
			       json_object_new_int(ctx->info.restart_count));
	json_object_object_add(o, "step", json_object_new_int64(step));
	json_object_object_add(o, "samples",
			       json_object_new_int64(ctx->info.samples));
	json_object_object_add(o, "progress",
			       json_object_new_double(ctx->info.progress));
	json_object_object_add(o, "world",
			       json_object_new_int(ctx->info.world));
	json_object_object_add(o, "save_all_ranks",
			       json_object_new_int(
				       ctx->cfg.save_all_ranks ? 1 : 0));
	a = json_object_new_array();
	json_object_array_add(a, json_object_new_int(ctx->degrees.data));
	json_object_array_add(a, json_object_new_int(ctx->degrees.tensor));
	json_object_array_add(a, json_object_new_int(ctx->degrees.pipeline));
	json_object_object_add(o, "layout", a);
	json_object_object_add(o, "data_inner",
			       json_object_new_int(copus__data_inner(ctx)));
	json_object_object_add(o, "written",
			       json_object_new_int64((int64_t)time(NULL)));
	if (ctx->fingerprint != NULL)
		json_object_object_add(o, "fingerprint",
				       json_object_new_string(
					       ctx->fingerprint));
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
		json_object_array_add(a,
				      json_object_new_int(ctx->cfg.n_layers));
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
		json_object_array_add(e,
				      json_object_new_double(ob->sum_compute));
		json_object_array_add(e, json_object_new_double(ob->sum_step));
		json_object_array_add(e, json_object_new_int64(ob->n));
		json_object_array_add(a, e);
	}
	json_object_object_add(o, "obs", a);
	text = _with_checksum(
		json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return text;
}

int copus__manifest_read(copus_ctx *ctx, const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n;
	int rc = COPUS_OK;

	*out = NULL;
	if (f == NULL)
		return errno == ENOENT ? COPUS_ENODATA
				       : copus__fail(ctx, COPUS_EIO,
						     "cannot open %s: %s", path,
						     strerror(errno));
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

bool copus__manifest_num(struct json_object *o, const char *key, double *out)
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
	copus__ckpt_names_free(m->files, m->nfiles);
	free(m->sizes);
	free(m->crcs);
	free(m->stages);
	free(m->fingerprint);
	memset(m, 0, sizeof(*m));
}

bool copus__fingerprint_ok(const char *s, size_t len)
{
	if (s == NULL || len == 0 || len >= COPUS_FINGERPRINT_MAX ||
	    strlen(s) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/*
 * The run that wrote the manifest (optional in every version: -1 when
 * absent); *field names the one that is invalid.
 */
static bool _parse_writer(struct json_object *o, struct copus__manifest *m,
			  const char **field)
{
	double x;

	m->job = -1;
	m->restart = -1;
	*field = "job";
	if (json_object_object_get_ex(o, "job", NULL)) {
		if (!copus__manifest_num(o, "job", &x) || x < 0 ||
		    x > UINT32_MAX || x != floor(x))
			return false;
		m->job = (int64_t)x;
	}
	*field = "restart";
	if (json_object_object_get_ex(o, "restart", NULL)) {
		if (!copus__manifest_num(o, "restart", &x) || x < 0 ||
		    x > COPUS_HINT_RESTART_MAX || x != floor(x))
			return false;
		m->restart = (int)x;
	}
	return true;
}

/*
 * What version 4 adds: the layout's data_inner, when the manifest was
 * written (UTC seconds), and the model's fingerprint (optional); *field
 * names the one that is invalid.
 */
static bool _parse_v4(struct json_object *o, struct copus__manifest *m,
		      const char **field)
{
	struct json_object *v;
	double x;

	*field = "data_inner";
	if (!copus__manifest_num(o, "data_inner", &x) || (x != 0 && x != 1))
		return false;
	m->data_inner = (int)x;
	*field = "written";
	if (!copus__manifest_num(o, "written", &x) || x < 0 ||
	    x > MANIFEST_COUNT_MAX || x != floor(x))
		return false;
	m->written = (int64_t)x;
	*field = "fingerprint";
	if (!json_object_object_get_ex(o, "fingerprint", &v))
		return true;
	if (!json_object_is_type(v, json_type_string) ||
	    !copus__fingerprint_ok(json_object_get_string(v),
				   (size_t)json_object_get_string_len(v)))
		return false;
	m->fingerprint = strdup(json_object_get_string(v));
	return m->fingerprint != NULL;
}

/*
 * The top-level numbers of a manifest, read before the parser commits any
 * of them to m and ctx (only a whole manifest is taken).
 */
struct manifest_top {
	double version, step, samples, progress, world;
	double all; /* save_all_ranks: 0 or 1 (0 before version 2) */
};

/*
 * The training's counts (step, samples, progress), the ranks of the run
 * that wrote it and whether each saved a file (from version 2); *field
 * names the one that is invalid.
 */
static bool _parse_counts(struct json_object *o, struct manifest_top *t,
			  const char **field)
{
	*field = "step";
	if (!copus__manifest_num(o, "step", &t->step) || t->step < 0 ||
	    t->step > COPUS_HINT_STEP_MAX)
		return false;
	*field = "samples";
	if (!copus__manifest_num(o, "samples", &t->samples) || t->samples < 0 ||
	    t->samples > MANIFEST_COUNT_MAX)
		return false;
	*field = "progress";
	if (!copus__manifest_num(o, "progress", &t->progress) ||
	    t->progress < 0)
		return false;
	*field = "world";
	if (!copus__manifest_num(o, "world", &t->world) || t->world < 1 ||
	    t->world > 1 << 20 || t->world != floor(t->world))
		return false;
	*field = "save_all_ranks";
	if (t->version >= 2 &&
	    (!copus__manifest_num(o, "save_all_ranks", &t->all) ||
	     (t->all != 0 && t->all != 1)))
		return false;
	return true;
}

/*
 * The optional stages of version 3: the stages' first layers and the end,
 * in order, from 0 to the model's layers; *field stays "stages".
 */
static bool _parse_stages(struct json_object *o, struct copus__manifest *m)
{
	struct json_object *a;
	size_t ns = (size_t)m->layout.pipeline + 1;
	double x;

	if (!json_object_object_get_ex(o, "stages", &a))
		return true;
	if (!json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) != ns)
		return false;
	m->stages = calloc(ns, sizeof(int));
	if (m->stages == NULL)
		return false;
	for (size_t k = 0; k < ns; k++) {
		if (!_arr_num(a, k, &x) || x != floor(x) ||
		    x < (k > 0 ? m->stages[k - 1] : 0) || x > m->n_layers)
			return false;
		m->stages[k] = (int)x;
	}
	return m->stages[0] == 0 && m->stages[ns - 1] == m->n_layers;
}

/*
 * The layout of the ranks into m: from version 3 its degrees (data,
 * tensor, pipeline; their product the world), the model's layers and its
 * stages; before, world x 1 x 1. *field names the one that is invalid.
 */
static bool _parse_layout(struct json_object *o, const struct manifest_top *t,
			  struct copus__manifest *m, const char **field)
{
	struct json_object *a;
	double d[3], x;

	*field = "layout";
	m->layout = (copus_plan_degrees){ .data = (int)t->world,
					  .pipeline = 1,
					  .tensor = 1 };
	if (t->version < 3)
		return true;
	if (!json_object_object_get_ex(o, "layout", &a) ||
	    !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) != 3)
		return false;
	for (int k = 0; k < 3; k++)
		if (!_arr_num(a, (size_t)k, &d[k]) || d[k] < 1 ||
		    d[k] > t->world || d[k] != floor(d[k]))
			return false;
	if (d[0] * d[1] * d[2] != t->world)
		return false;
	m->layout = (copus_plan_degrees){ .data = (int)d[0],
					  .tensor = (int)d[1],
					  .pipeline = (int)d[2] };
	*field = "layers";
	if (!copus__manifest_num(o, "layers", &x) || x < 0 || x > INT_MAX ||
	    x != floor(x))
		return false;
	m->n_layers = (int)x;
	*field = "stages";
	return _parse_stages(o, m);
}

/* A manifest's files: n names, their sizes and CRC-32s (-1: none). */
struct manifest_files {
	char **files;
	long long *sizes;
	int64_t *crcs;
	int n;
};

/*
 * The files into f (which the caller frees, whatever this returns): one
 * per rank when every rank saved, else one per shard (pipeline stage and
 * tensor slice), none without a save callback; version 1 did not say
 * which (t->all then says whether more than one was). Each is a name,
 * never a path out of the directory, with its size and, from version 2,
 * its CRC-32. COPUS_EPARSE with *field "files" when invalid.
 */
static int _parse_files(struct json_object *o, struct manifest_top *t,
			const struct copus__manifest *m,
			struct manifest_files *f, const char **field)
{
	/* Version 1 named each file with its size; 2 adds its CRC-32. */
	size_t width = t->version == 1 ? 2 : 3;
	struct json_object *a, *e;
	double x;
	int world = (int)t->world;

	*field = "files";
	if (!json_object_object_get_ex(o, "files", &a) ||
	    !json_object_is_type(a, json_type_array))
		return COPUS_EPARSE;
	f->n = (int)json_object_array_length(a);
	if (f->n > 0 &&
	    (t->version >= 2
		     ? f->n != (t->all ? world
				       : m->layout.pipeline * m->layout.tensor)
		     : (f->n > 1 && f->n != world)))
		return COPUS_EPARSE;
	if (t->version == 1)
		t->all = f->n > 1;
	f->files = calloc((size_t)f->n + 1, sizeof(char *));
	f->sizes = calloc((size_t)f->n + 1, sizeof(long long));
	f->crcs = calloc((size_t)f->n + 1, sizeof(*f->crcs));
	if (f->files == NULL || f->sizes == NULL || f->crcs == NULL)
		return COPUS_ENOMEM;
	for (int i = 0; i < f->n; i++) {
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
			return COPUS_EPARSE;
		s = json_object_get_string(json_object_array_get_idx(e, 0));
		if (strchr(s, '/') != NULL || s[0] == '.' || strlen(s) > 200)
			return COPUS_EPARSE;
		f->files[i] = strdup(s);
		f->sizes[i] = (long long)x;
		f->crcs[i] = (int64_t)c;
		if (f->files[i] == NULL) {
			f->n = i;
			return COPUS_ENOMEM;
		}
	}
	return COPUS_OK;
}

/*
 * The gradient noise's averages into ctx (the decay is the new run's; the
 * averages carry over); *field stays "noise".
 */
static bool _parse_noise(copus_ctx *ctx, struct json_object *o,
			 const char **field)
{
	struct json_object *a;
	double d, s, v, b, c;

	*field = "noise";
	if (!json_object_object_get_ex(o, "noise", &a) ||
	    !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) != 5)
		return false;
	if (!_arr_num(a, 0, &d) || !_arr_num(a, 1, &s) || !_arr_num(a, 2, &v) ||
	    !_arr_num(a, 3, &b) || !_arr_num(a, 4, &c) || c < 0 ||
	    c > MANIFEST_COUNT_MAX || b < 0 || b > 1)
		return false;
	ctx->noise.sqr = s;
	ctx->noise.var = v;
	ctx->noise.bias = b;
	ctx->noise.count = (int64_t)c;
	(void)d;
	return true;
}

/*
 * The step times the job observed (per GPU type and cell) into ctx's
 * observations, which are to be published again; *field stays "obs".
 */
static bool _parse_obs(copus_ctx *ctx, struct json_object *o,
		       const char **field)
{
	struct json_object *a, *e;

	*field = "obs";
	if (!json_object_object_get_ex(o, "obs", &a) ||
	    !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) > COPUS_MAX_OBS)
		return false;
	ctx->n_obs = 0;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct copus__obs *ob = &ctx->obs[ctx->n_obs];
		double v[7];

		e = json_object_array_get_idx(a, i);
		if (e == NULL || !json_object_is_type(e, json_type_array) ||
		    json_object_array_length(e) != 8 ||
		    !json_object_is_type(json_object_array_get_idx(e, 0),
					 json_type_string))
			return false;
		for (int k = 0; k < 7; k++)
			if (!_arr_num(e, (size_t)k + 1, &v[k]) || v[k] < 0 ||
			    (k < 4 && v[k] > INT_MAX) ||
			    (k == 6 && v[k] > MANIFEST_COUNT_MAX))
				return false;
		snprintf(ob->type, sizeof(ob->type), "%s",
			 json_object_get_string(
				 json_object_array_get_idx(e, 0)));
		ob->nodes = (int)v[0];
		ob->replicas = (int)v[1];
		ob->local = (int)v[2];
		ob->accum_steps = (int)v[3];
		ob->sum_compute = v[4];
		ob->sum_step = v[5];
		ob->n = (int64_t)v[6];
		if (ob->nodes < 1 || ob->replicas < ob->nodes || ob->local < 1)
			return false;
		ctx->n_obs++;
	}
	ctx->obs_dirty = ctx->n_obs > 0;
	return true;
}

/*
 * The parser (internal.h): the version and the checksum first (an edited
 * manifest is refused as such, not for the field an edit happened to
 * break), then each part in turn; m's counts and files are set only once
 * all of it parsed.
 */
int copus__parse_manifest(copus_ctx *ctx, const char *path, const char *text,
			  struct copus__manifest *m)
{
	struct json_object *o = json_tokener_parse(text);
	struct manifest_top t = { .all = 0 };
	struct manifest_files f = { 0 };
	int rc = COPUS_EPARSE;
	const char *field = "the top level";

	memset(m, 0, sizeof(*m));
	m->data_inner = -1;
	m->written = -1;
	if (o == NULL || !json_object_is_type(o, json_type_object))
		goto bad;
	field = "copus_ckpt";
	if (!copus__manifest_num(o, "copus_ckpt", &t.version) ||
	    t.version < 1 || t.version > COPUS_MANIFEST_VERSION ||
	    t.version != floor(t.version))
		goto bad;
	/* Before version 4 there is no checksum; one there means a newer
	 * manifest's version was edited. */
	field = "checksum";
	if (t.version >= 4) {
		rc = _check_checksum(ctx, path, text);
		if (rc != COPUS_OK)
			goto out;
		rc = COPUS_EPARSE;
		if (!_parse_v4(o, m, &field))
			goto bad;
	} else if (json_object_object_get_ex(o, "checksum", NULL)) {
		goto bad;
	}
	if (!_parse_writer(o, m, &field) || !_parse_counts(o, &t, &field) ||
	    !_parse_layout(o, &t, m, &field))
		goto bad;
	rc = _parse_files(o, &t, m, &f, &field);
	if (rc == COPUS_EPARSE)
		goto bad;
	if (rc != COPUS_OK)
		goto out;
	if (!_parse_noise(ctx, o, &field) || !_parse_obs(ctx, o, &field))
		goto bad;
	ctx->info.samples = (int64_t)t.samples;
	ctx->info.progress = t.progress;
	m->step = (int64_t)t.step;
	m->world = (int)t.world;
	m->all_ranks = t.all != 0;
	m->nfiles = f.n;
	m->files = f.files;
	m->sizes = f.sizes;
	m->crcs = f.crcs;
	f = (struct manifest_files){ 0 };
	rc = COPUS_OK;
	goto out;
bad:
	rc = copus__fail(ctx, COPUS_EPARSE,
			 "checkpoint manifest %s: field \"%s\" is missing or invalid",
			 path, field);
out:
	if (rc != COPUS_OK) {
		/* Whatever failed (a field, memory): m keeps nothing. */
		free(m->stages);
		m->stages = NULL;
		free(m->fingerprint);
		m->fingerprint = NULL;
	}
	copus__ckpt_names_free(f.files, f.n);
	free(f.sizes);
	free(f.crcs);
	if (o != NULL)
		json_object_put(o);
	return rc;
}

/* File idx of the manifest: there, of its size and CRC-32; its path. */
int copus__ckpt_check_file(copus_ctx *ctx, const struct copus__manifest *m,
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
	rc = copus__ckpt_crc(ctx, path, &crc);
	if (rc != COPUS_OK)
		return rc;
	if (crc != (uint32_t)m->crcs[idx])
		return copus__fail(ctx, COPUS_EIO,
				   "checkpoint file %s is corrupt: CRC-32 %08x, the manifest says %08x",
				   path, crc, (uint32_t)m->crcs[idx]);
	return COPUS_OK;
}
