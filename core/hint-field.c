/*
 * The hint's members one at a time, for core/hint.c (the message) and
 * core/hint-model.c (its "mdl" member): appending one to the encoder's
 * text, and reading a number or an integer in bounds for the parser, with
 * the error that names the field. Pure: no I/O.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "internal.h"

/* Append to buf at *pos; false when the text does not fit. */
bool copus__hint_put(char *buf, size_t size, size_t *pos, const char *fmt,
		     ...)
{
	va_list ap;
	int n;

	if (*pos >= size)
		return false;
	va_start(ap, fmt);
	n = vsnprintf(buf + *pos, size - *pos, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *pos) {
		*pos = size;
		return false;
	}
	*pos += (size_t)n;
	return true;
}

/* A JSON number (int or real) that is finite and >= 0. */
int copus__hint_number(struct copus__hint_parse *p, struct json_object *v,
		       const char *name, double *out)
{
	double x;

	if (!json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_int)) {
		copus__err_set(p->err, p->errlen, "hint field \"%s\": %s is not a number",
		     name, json_object_to_json_string(v));
		return COPUS_EPARSE;
	}
	x = json_object_get_double(v);
	if (!isfinite(x) || x < 0.0) {
		copus__err_set(p->err, p->errlen,
		     "hint field \"%s\": %g is not a finite number >= 0",
		     name, x);
		return COPUS_EPARSE;
	}
	*out = x;
	return COPUS_OK;
}

/* A JSON integer in [lo, hi]. */
int copus__hint_integer(struct copus__hint_parse *p, struct json_object *v,
			const char *name, int64_t lo, int64_t hi,
			int64_t *out)
{
	int64_t x;

	if (!json_object_is_type(v, json_type_int)) {
		copus__err_set(p->err, p->errlen, "hint field \"%s\": %s is not an integer",
		     name, json_object_to_json_string(v));
		return COPUS_EPARSE;
	}
	errno = 0;
	x = json_object_get_int64(v);
	if (errno != 0 || x < lo || x > hi) {
		copus__err_set(p->err, p->errlen,
		     "hint field \"%s\": %s outside [%lld, %lld]", name,
		     json_object_to_json_string(v), (long long)lo,
		     (long long)hi);
		return COPUS_EPARSE;
	}
	*out = x;
	return COPUS_OK;
}
