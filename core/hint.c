/*
 * The hint message between a job and the scheduler (see copus/hint.h):
 * encoding with snprintf, strict parsing with json-c. Its "mdl" member is
 * in core/hint-model.c, the writer and readers of one member in
 * core/hint-field.c. Pure: no I/O.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include <copus/hint.h>

#include "internal.h"

/* Nesting of a valid hint: the object, "perf", a type's array ("mdl" is
 * one level less deep). */
#define HINT_JSON_DEPTH 4

static const char *const state_names[] = {
	[COPUS_STATE_RUNNING] = "running",
	[COPUS_STATE_CHECKPOINTING] = "checkpointing",
	[COPUS_STATE_CHECKPOINTED] = "checkpointed",
};

static const char *const perf_names[7] = {
	"alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma",
};

const char *copus_job_state_name(copus_job_state s)
{
	if ((int)s < 0 || (size_t)s >= sizeof(state_names) / sizeof(*state_names))
		return NULL;
	return state_names[s];
}


/* A GPU type name: 1..15 characters of [A-Za-z0-9_.-]. */
static bool _type_ok(const char *s)
{
	size_t n = 0;

	if (s == NULL)
		return false;
	for (; s[n] != '\0'; n++) {
		char c = s[n];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '.' ||
			  c == '-';
		if (!ok || n + 1 >= COPUS_HINT_TYPE_LEN)
			return false;
	}
	return n > 0;
}

static void _perf_array(const copus_perf_params *p, double v[7])
{
	v[0] = p->alpha_c;
	v[1] = p->beta_c;
	v[2] = p->alpha_n;
	v[3] = p->beta_n;
	v[4] = p->alpha_r;
	v[5] = p->beta_r;
	v[6] = p->gamma;
}

static void _perf_struct(const double v[7], copus_perf_params *p)
{
	p->alpha_c = v[0];
	p->beta_c = v[1];
	p->alpha_n = v[2];
	p->beta_n = v[3];
	p->alpha_r = v[4];
	p->beta_r = v[5];
	p->gamma = v[6];
}

static bool _finite_nonneg(double x)
{
	return isfinite(x) && x >= 0.0;
}


/* Check what the encoder must never send; the bounds match the parser's. */
static int _encode_check(const copus_hint *h, char *err, size_t errlen)
{
	const copus_batch_limits *l = &h->limits;

	if (h->version != COPUS_HINT_VERSION) {
		copus__err_set(err, errlen, "hint field \"v\": version %d, expected %d",
		     h->version, COPUS_HINT_VERSION);
		return COPUS_EVERSION;
	}
	if (h->job_id == 0) {
		copus__err_set(err, errlen, "hint field \"job\": job id 0");
		return COPUS_EINVAL;
	}
	if (copus_job_state_name(h->state) == NULL) {
		copus__err_set(err, errlen, "hint field \"st\": unknown state %d",
		     (int)h->state);
		return COPUS_EINVAL;
	}
	if (h->step < 0 || h->step > COPUS_HINT_STEP_MAX) {
		copus__err_set(err, errlen, "hint field \"step\": %lld out of range",
		     (long long)h->step);
		return COPUS_EINVAL;
	}
	if (h->restart_count < 0 || h->restart_count > COPUS_HINT_RESTART_MAX) {
		copus__err_set(err, errlen, "hint field \"rc\": %d out of range",
		     h->restart_count);
		return COPUS_EINVAL;
	}
	if (h->time < 0) {
		copus__err_set(err, errlen, "hint field \"t\": %lld is negative",
		     (long long)h->time);
		return COPUS_EINVAL;
	}
	if (!isfinite(l->init_batch) || l->init_batch < 1.0 ||
	    l->init_batch > COPUS_HINT_BATCH_MAX ||
	    !isfinite(l->max_batch) || l->max_batch < l->init_batch ||
	    l->max_batch > COPUS_HINT_BATCH_MAX) {
		copus__err_set(err, errlen,
		     "hint fields \"b0\", \"bmax\": %g, %g out of range",
		     l->init_batch, l->max_batch);
		return COPUS_EINVAL;
	}
	if (l->min_local < 1 || l->max_local < l->min_local ||
	    l->max_local > COPUS_HINT_LOCAL_MAX) {
		copus__err_set(err, errlen,
		     "hint fields \"lmin\", \"lmax\": %d, %d out of range",
		     l->min_local, l->max_local);
		return COPUS_EINVAL;
	}
	if (!_finite_nonneg(h->grad.sqr) || !_finite_nonneg(h->grad.var) ||
	    h->grad.sqr > COPUS_HINT_GRAD_MAX ||
	    h->grad.var > COPUS_HINT_GRAD_MAX) {
		copus__err_set(err, errlen, "hint fields \"sqr\", \"var\": %g, %g out of range",
		     h->grad.sqr, h->grad.var);
		return COPUS_EINVAL;
	}
	if (!_finite_nonneg(h->progress) || h->progress > COPUS_HINT_PROGRESS_MAX ||
	    !_finite_nonneg(h->target) || h->target > COPUS_HINT_PROGRESS_MAX) {
		copus__err_set(err, errlen, "hint fields \"prog\", \"tgt\": %g, %g out of range",
		     h->progress, h->target);
		return COPUS_EINVAL;
	}
	if (h->granularity < 0 || h->granularity > COPUS_HINT_GRAN_MAX) {
		copus__err_set(err, errlen, "hint field \"gran\": %d out of range",
		     h->granularity);
		return COPUS_EINVAL;
	}
	if (h->n_perf < 0 || h->n_perf > COPUS_HINT_MAX_TYPES) {
		copus__err_set(err, errlen, "hint field \"perf\": %d types (at most %d)",
		     h->n_perf, COPUS_HINT_MAX_TYPES);
		return COPUS_EINVAL;
	}
	for (int i = 0; i < h->n_perf; i++) {
		double v[7];

		if (!_type_ok(h->perf[i].type)) {
			copus__err_set(err, errlen, "hint field \"perf\": bad GPU type name");
			return COPUS_EINVAL;
		}
		_perf_array(&h->perf[i].perf, v);
		for (int k = 0; k < 7; k++) {
			double lo = k == 6 ? COPUS_HINT_GAMMA_MIN : 0.0;
			double hi = k == 6 ? COPUS_HINT_GAMMA_MAX : COPUS_HINT_TIME_MAX;
			if (!isfinite(v[k]) || v[k] < lo || v[k] > hi) {
				copus__err_set(err, errlen,
				     "hint field \"perf.%s.%s\": %g out of range",
				     h->perf[i].type, perf_names[k], v[k]);
				return COPUS_EINVAL;
			}
		}
	}
	if (h->has_model)
		return copus__hint_model_check(&h->model, err, errlen);
	return COPUS_OK;
}


int copus_hint_encode(const copus_hint *h, char *buf, size_t size,
		      size_t *len, char *err, size_t errlen)
{
	const copus_batch_limits *l;
	size_t pos = 0, cap;
	bool ok;
	int rc;

	if (h == NULL || buf == NULL || size == 0) {
		copus__err_set(err, errlen, "copus_hint_encode: NULL argument or empty buffer");
		return COPUS_EINVAL;
	}
	buf[0] = '\0';
	rc = _encode_check(h, err, errlen);
	if (rc != COPUS_OK)
		return rc;
	l = &h->limits;
	/* The message may use at most COPUS_HINT_MAX_LEN bytes and the NUL. */
	cap = size < COPUS_HINT_MAX_LEN + 1 ? size : COPUS_HINT_MAX_LEN + 1;
	/* %.10g keeps ten significant digits: plenty for a model, and short. */
	ok = copus__hint_put(buf, cap, &pos,
		  COPUS_HINT_PREFIX "{\"v\":%d,\"job\":%u,\"st\":\"%s\","
		  "\"step\":%lld,\"rc\":%d,\"t\":%lld,"
		  "\"b0\":%.10g,\"bmax\":%.10g,\"lmin\":%d,\"lmax\":%d,"
		  "\"acc\":%s,\"sqr\":%.10g,\"var\":%.10g,\"prog\":%.10g",
		  h->version, (unsigned)h->job_id,
		  copus_job_state_name(h->state), (long long)h->step,
		  h->restart_count, (long long)h->time, l->init_batch,
		  l->max_batch, l->min_local, l->max_local,
		  l->accumulation ? "true" : "false", h->grad.sqr,
		  h->grad.var, h->progress);
	if (ok && h->target > 0.0)
		ok = copus__hint_put(buf, cap, &pos, ",\"tgt\":%.10g",
				     h->target);
	if (ok && h->granularity > 1)
		ok = copus__hint_put(buf, cap, &pos, ",\"gran\":%d",
				     h->granularity);
	if (ok && h->n_perf > 0) {
		ok = copus__hint_put(buf, cap, &pos, ",\"perf\":{");
		for (int i = 0; ok && i < h->n_perf; i++) {
			double v[7];

			_perf_array(&h->perf[i].perf, v);
			ok = copus__hint_put(buf, cap, &pos,
				  "%s\"%s\":[%.10g,%.10g,%.10g,%.10g,%.10g,"
				  "%.10g,%.10g]", i > 0 ? "," : "",
				  h->perf[i].type, v[0], v[1], v[2], v[3],
				  v[4], v[5], v[6]);
		}
		if (ok)
			ok = copus__hint_put(buf, cap, &pos, "}");
	}
	if (ok && h->has_model)
		ok = copus__hint_model_encode(&h->model, buf, cap, &pos);
	if (ok)
		ok = copus__hint_put(buf, cap, &pos, "}");
	if (!ok) {
		buf[0] = '\0';
		copus__err_set(err, errlen, "hint longer than %d bytes (or than the buffer)",
		     COPUS_HINT_MAX_LEN);
		return COPUS_ERANGE;
	}
	if (len != NULL)
		*len = pos;
	return COPUS_OK;
}

int copus_hint_is_hint(const char *text)
{
	return text != NULL && strncmp(text, "copus", 5) == 0;
}

/* ------------------------------------------------------------------------
 * Parsing
 * ------------------------------------------------------------------------ */

/* The member key of the root object, or NULL with an error when absent. */
static struct json_object *_member(struct copus__hint_parse *p,
				   const char *key, bool required)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(p->root, key, &v) || v == NULL) {
		if (required)
			copus__err_set(p->err, p->errlen, "hint field \"%s\" is missing",
			     key);
		return NULL;
	}
	return v;
}

static double _clamp(struct copus__hint_parse *p, double x, double lo,
		     double hi)
{
	if (x < lo) {
		p->clamped++;
		return lo;
	}
	if (x > hi) {
		p->clamped++;
		return hi;
	}
	return x;
}

static int _num_key(struct copus__hint_parse *p, const char *key,
		    double *out)
{
	struct json_object *v = _member(p, key, true);

	return v == NULL ? COPUS_EPARSE : copus__hint_number(p, v, key, out);
}

static int _int_key(struct copus__hint_parse *p, const char *key,
		    int64_t lo, int64_t hi, int64_t *out)
{
	struct json_object *v = _member(p, key, true);

	return v == NULL ? COPUS_EPARSE
			 : copus__hint_integer(p, v, key, lo, hi, out);
}

static int _parse_perf(struct copus__hint_parse *p,
		       struct json_object *perf, copus_hint *out)
{
	char name[64];

	if (!json_object_is_type(perf, json_type_object)) {
		copus__err_set(p->err, p->errlen, "hint field \"perf\" is not an object");
		return COPUS_EPARSE;
	}
	if (json_object_object_length(perf) > COPUS_HINT_MAX_TYPES) {
		copus__err_set(p->err, p->errlen, "hint field \"perf\": %d GPU types (at most %d)",
		     json_object_object_length(perf), COPUS_HINT_MAX_TYPES);
		return COPUS_EPARSE;
	}
	json_object_object_foreach(perf, key, arr) {
		copus_hint_perf *hp = &out->perf[out->n_perf];
		double v[7];

		if (!_type_ok(key)) {
			copus__err_set(p->err, p->errlen,
			     "hint field \"perf\": GPU type \"%.32s\" is not 1..%d characters of [A-Za-z0-9_.-]",
			     key, COPUS_HINT_TYPE_LEN - 1);
			return COPUS_EPARSE;
		}
		if (arr == NULL || !json_object_is_type(arr, json_type_array) ||
		    json_object_array_length(arr) != 7) {
			copus__err_set(p->err, p->errlen,
			     "hint field \"perf.%s\": not an array of 7 numbers",
			     key);
			return COPUS_EPARSE;
		}
		for (int k = 0; k < 7; k++) {
			int rc;

			snprintf(name, sizeof(name), "perf.%s.%s", key,
				 perf_names[k]);
			rc = copus__hint_number(p,
						json_object_array_get_idx(arr, k),
						name, &v[k]);
			if (rc != COPUS_OK)
				return rc;
			if (k == 6)
				v[k] = _clamp(p, v[k], COPUS_HINT_GAMMA_MIN,
					      COPUS_HINT_GAMMA_MAX);
			else
				v[k] = _clamp(p, v[k], COPUS_HINT_TIME_MIN,
					      COPUS_HINT_TIME_MAX);
		}
		snprintf(hp->type, sizeof(hp->type), "%s", key);
		_perf_struct(v, &hp->perf);
		out->n_perf++;
	}
	return COPUS_OK;
}


static const char *const known_keys[] = {
	"v", "job", "st", "step", "rc", "t", "b0", "bmax", "lmin", "lmax",
	"acc", "sqr", "var", "prog", "tgt", "gran", "perf", "mdl",
};

static int _parse_root(struct copus__hint_parse *p, copus_hint *out)
{
	struct json_object *v;
	copus_batch_limits *l = &out->limits;
	int64_t i64;
	double x;
	int rc;

	json_object_object_foreach(p->root, key, val) {
		bool known = false;

		(void)val;
		for (size_t k = 0; k < sizeof(known_keys) / sizeof(*known_keys); k++)
			known = known || strcmp(key, known_keys[k]) == 0;
		if (!known) {
			copus__err_set(p->err, p->errlen, "hint field \"%.32s\" is unknown",
			     key);
			return COPUS_EPARSE;
		}
	}

	/* The version first: another version may differ in anything else. */
	if ((v = _member(p, "v", true)) == NULL)
		return COPUS_EPARSE;
	if (!json_object_is_type(v, json_type_int)) {
		copus__err_set(p->err, p->errlen, "hint field \"v\": %s is not an integer",
		     json_object_to_json_string(v));
		return COPUS_EPARSE;
	}
	if (json_object_get_int64(v) != COPUS_HINT_VERSION) {
		copus__err_set(p->err, p->errlen, "hint field \"v\": version %s, expected %d",
		     json_object_to_json_string(v), COPUS_HINT_VERSION);
		return COPUS_EVERSION;
	}
	out->version = COPUS_HINT_VERSION;

	if ((rc = _int_key(p, "job", 1, UINT32_MAX, &i64)) != COPUS_OK)
		return rc;
	out->job_id = (uint32_t)i64;

	if ((v = _member(p, "st", true)) == NULL)
		return COPUS_EPARSE;
	if (!json_object_is_type(v, json_type_string)) {
		copus__err_set(p->err, p->errlen, "hint field \"st\": %s is not a string",
		     json_object_to_json_string(v));
		return COPUS_EPARSE;
	}
	rc = COPUS_EPARSE;
	for (int s = 0; s < (int)(sizeof(state_names) / sizeof(*state_names)); s++) {
		if (strcmp(json_object_get_string(v), state_names[s]) == 0) {
			out->state = (copus_job_state)s;
			rc = COPUS_OK;
		}
	}
	if (rc != COPUS_OK) {
		copus__err_set(p->err, p->errlen, "hint field \"st\": unknown state %.40s",
		     json_object_to_json_string(v));
		return rc;
	}

	if ((rc = _int_key(p, "step", 0, COPUS_HINT_STEP_MAX, &i64)) != COPUS_OK)
		return rc;
	out->step = i64;
	if ((rc = _int_key(p, "rc", 0, COPUS_HINT_RESTART_MAX, &i64)) != COPUS_OK)
		return rc;
	out->restart_count = (int)i64;
	if ((rc = _int_key(p, "t", 0, INT64_MAX, &i64)) != COPUS_OK)
		return rc;
	out->time = i64;

	if ((rc = _num_key(p, "b0", &x)) != COPUS_OK)
		return rc;
	l->init_batch = _clamp(p, x, 1.0, COPUS_HINT_BATCH_MAX);
	if ((rc = _num_key(p, "bmax", &x)) != COPUS_OK)
		return rc;
	l->max_batch = _clamp(p, x, l->init_batch, COPUS_HINT_BATCH_MAX);

	if ((rc = _int_key(p, "lmin", 0, INT64_MAX, &i64)) != COPUS_OK)
		return rc;
	l->min_local = (int)_clamp(p, (double)i64, 1, COPUS_HINT_LOCAL_MAX);
	if ((rc = _int_key(p, "lmax", 0, INT64_MAX, &i64)) != COPUS_OK)
		return rc;
	l->max_local = (int)_clamp(p, (double)i64, l->min_local,
				   COPUS_HINT_LOCAL_MAX);

	if ((v = _member(p, "acc", true)) == NULL)
		return COPUS_EPARSE;
	if (!json_object_is_type(v, json_type_boolean)) {
		copus__err_set(p->err, p->errlen, "hint field \"acc\": %s is not a boolean",
		     json_object_to_json_string(v));
		return COPUS_EPARSE;
	}
	l->accumulation = json_object_get_boolean(v);

	if ((rc = _num_key(p, "sqr", &x)) != COPUS_OK)
		return rc;
	out->grad.sqr = _clamp(p, x, 0.0, COPUS_HINT_GRAD_MAX);
	if ((rc = _num_key(p, "var", &x)) != COPUS_OK)
		return rc;
	out->grad.var = _clamp(p, x, 0.0, COPUS_HINT_GRAD_MAX);
	if ((rc = _num_key(p, "prog", &x)) != COPUS_OK)
		return rc;
	out->progress = _clamp(p, x, 0.0, COPUS_HINT_PROGRESS_MAX);

	if ((v = _member(p, "tgt", false)) != NULL) {
		if ((rc = copus__hint_number(p, v, "tgt", &x)) != COPUS_OK)
			return rc;
		out->target = _clamp(p, x, 0.0, COPUS_HINT_PROGRESS_MAX);
	}
	if ((v = _member(p, "gran", false)) != NULL) {
		if ((rc = copus__hint_integer(p, v, "gran", 1,
					       COPUS_HINT_GRAN_MAX,
					       &i64)) != COPUS_OK)
			return rc;
		out->granularity = i64 > 1 ? (int)i64 : 0;
	}
	if ((v = _member(p, "perf", false)) != NULL) {
		if ((rc = _parse_perf(p, v, out)) != COPUS_OK)
			return rc;
	}
	if ((v = _member(p, "mdl", false)) != NULL) {
		if ((rc = copus__hint_model_parse(p, v, out)) != COPUS_OK)
			return rc;
	}
	return COPUS_OK;
}

/*
 * Members in the text: the colons outside strings. json-c keeps only the
 * last of duplicate keys; comparing this count with the members it kept
 * finds them.
 */
static int _members_in_text(const char *s, size_t n)
{
	bool in_str = false, esc = false;
	int colons = 0;

	for (size_t i = 0; i < n; i++) {
		if (in_str) {
			if (esc)
				esc = false;
			else if (s[i] == '\\')
				esc = true;
			else if (s[i] == '"')
				in_str = false;
		} else if (s[i] == '"') {
			in_str = true;
		} else if (s[i] == ':') {
			colons++;
		}
	}
	return colons;
}

int copus_hint_parse(const char *text, copus_hint *out, char *err,
		     size_t errlen)
{
	struct json_tokener *tok = NULL;
	struct copus__hint_parse p = { .err = err, .errlen = errlen };
	size_t n, plen = strlen(COPUS_HINT_PREFIX);
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (text == NULL || out == NULL) {
		copus__err_set(err, errlen, "copus_hint_parse: NULL argument");
		return COPUS_EINVAL;
	}
	memset(out, 0, sizeof(*out));
	/* Never read past the largest message, whatever the caller hands in. */
	n = strnlen(text, COPUS_HINT_MAX_LEN + 1);
	if (n > COPUS_HINT_MAX_LEN) {
		copus__err_set(err, errlen, "hint longer than %d bytes", COPUS_HINT_MAX_LEN);
		return COPUS_EPARSE;
	}
	if (strncmp(text, COPUS_HINT_PREFIX, plen) != 0) {
		if (copus_hint_is_hint(text)) {
			copus__err_set(err, errlen, "hint prefix \"%.12s\" is not \"%s\"",
			     text, COPUS_HINT_PREFIX);
			return COPUS_EVERSION;
		}
		copus__err_set(err, errlen, "text does not start with \"%s\"",
		     COPUS_HINT_PREFIX);
		return COPUS_EPARSE;
	}
	tok = json_tokener_new_ex(HINT_JSON_DEPTH);
	if (tok == NULL) {
		rc = COPUS_ENOMEM;
		copus__err_set(err, errlen, "out of memory");
		goto out;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	p.root = json_tokener_parse_ex(tok, text + plen, (int)(n - plen));
	if (p.root == NULL ||
	    json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != n - plen) {
		enum json_tokener_error e = json_tokener_get_error(tok);
		copus__err_set(err, errlen, "hint is not valid JSON at offset %zu: %s",
		     json_tokener_get_parse_end(tok) + plen,
		     e == json_tokener_success ? "trailing characters"
						: json_tokener_error_desc(e));
		rc = COPUS_EPARSE;
		goto out;
	}
	if (!json_object_is_type(p.root, json_type_object)) {
		copus__err_set(err, errlen, "hint is not a JSON object");
		rc = COPUS_EPARSE;
		goto out;
	}
	rc = _parse_root(&p, out);
	if (rc == COPUS_OK) {
		struct json_object *perf = NULL, *mdl = NULL;
		int kept = json_object_object_length(p.root);

		if (json_object_object_get_ex(p.root, "perf", &perf))
			kept += json_object_object_length(perf);
		if (json_object_object_get_ex(p.root, "mdl", &mdl))
			kept += json_object_object_length(mdl);
		if (_members_in_text(text + plen, n - plen) != kept) {
			copus__err_set(err, errlen, "hint has a duplicate key");
			rc = COPUS_EPARSE;
		}
	}
	out->clamped = p.clamped;
out:
	if (rc != COPUS_OK)
		memset(out, 0, sizeof(*out));
	if (p.root != NULL)
		json_object_put(p.root);
	if (tok != NULL)
		json_tokener_free(tok);
	return rc;
}
