/*
 * The lines of copus_state (see statefmt.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "statefmt.h"

#define _FIELDS_MAX 10

/*
 * Splits line (up to an optional final newline) at single spaces into at
 * most max fields, copied into buf. The number of fields, or -1 when a field
 * is empty (two spaces, a leading or trailing space), a byte is a control
 * character, or there are more than max.
 */
static int _split(const char *line, char *buf, size_t len, char **field,
		  int max)
{
	size_t n = strlen(line);
	int nf = 0;

	if (n > 0 && line[n - 1] == '\n')
		n--;
	if (n == 0 || n >= len)
		return -1;
	memcpy(buf, line, n);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < ' ' || buf[i] == 0x7f)
			return -1;
	for (char *p = buf;;) {
		char *sp = strchr(p, ' ');

		if (nf == max || *p == '\0' || p[0] == ' ')
			return -1;
		field[nf++] = p;
		if (!sp)
			return nf;
		*sp = '\0';
		p = sp + 1;
	}
}

/* A decimal integer in [lo, hi], digits only (a minus sign when lo < 0). */
static int _int(const char *s, long long lo, long long hi, long long *out)
{
	char *end;

	if (!((*s >= '0' && *s <= '9') || (*s == '-' && lo < 0)))
		return -1;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* A finite number >= 0. */
static int _nonneg(const char *s, double *out)
{
	char *end;

	if (!((*s >= '0' && *s <= '9') || *s == '.'))
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno == ERANGE && v != 0.0)
		return -1;
	if (*end || !isfinite(v) || v < 0)
		return -1;
	*out = v;
	return 0;
}

static int _rescale(char **f, int nf, struct copus__rescale *x,
		    const char **why)
{
	long long v;

	if (nf != 7 && nf != 8)
		return *why = "rescale: number of fields", -1;
	if (_int(f[1], 1, UINT32_MAX, &v))
		return *why = "rescale: ID", -1;
	x->id = (uint32_t)v;
	if (_int(f[2], 0, INT64_MAX, &v) || (time_t)v != v)
		return *why = "rescale: ASKED", -1;
	x->asked = (time_t)v;
	if (_int(f[3], 1, COPUS__GPUS_MAX, &v))
		return *why = "rescale: FROM", -1;
	x->from = (int)v;
	if (_int(f[4], 0, COPUS__GPUS_MAX, &v))
		return *why = "rescale: TO", -1;
	x->to = (int)v;
	if (strlen(f[5]) >= sizeof(x->type))
		return *why = "rescale: TYPE", -1;
	if (strcmp(f[5], "-"))
		snprintf(x->type, sizeof(x->type), "%s", f[5]);
	if (_int(f[6], 0, 1, &v))
		return *why = "rescale: GAVE_UP", -1;
	x->gave_up = v == 1;
	x->rc = -1;
	if (nf == 8) {
		if (_int(f[7], -1, INT_MAX, &v))
			return *why = "rescale: RC", -1;
		x->rc = (int)v;
	}
	return 0;
}

/* A GPU type name of a line: shorter than size, no blank or control. */
static bool _type_ok(const char *t, size_t size)
{
	size_t n = strnlen(t, size);

	if (n == size)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] <= ' ' || t[i] == 0x7f)
			return false;
	return true;
}

static int _job(char **f, int nf, struct copus__state_job *j,
		const char **why)
{
	long long v;

	if (nf < 5 || nf > 9)
		return *why = "job: number of fields", -1;
	if (_int(f[1], 1, UINT32_MAX, &v))
		return *why = "job: ID", -1;
	j->id = (uint32_t)v;
	if (_int(f[2], 0, COPUS__GPUS_MAX, &v))
		return *why = "job: REQ", -1;
	j->req_gpus = (int)v;
	if (_int(f[3], 0, COPUS__GPUS_MAX, &v))
		return *why = "job: HAD", -1;
	j->max_had = (int)v;
	if (_nonneg(f[4], &j->attained))
		return *why = "job: ATTAINED", -1;
	if (nf >= 6 && _nonneg(f[5], &j->rate))
		return *why = "job: RATE", -1;
	if (nf >= 7) {
		if (_int(f[6], 0, INT64_MAX, &v) || (time_t)v != v)
			return *why = "job: SUBMIT", -1;
		j->submit = (time_t)v;
	}
	if (nf >= 8) {
		if (_int(f[7], 0, INT64_MAX, &v) || (time_t)v != v)
			return *why = "job: LAUNCHED", -1;
		j->launched = (time_t)v;
	}
	if (nf == 9) {
		if (!f[8][0] || !_type_ok(f[8], sizeof(j->type)))
			return *why = "job: TYPE", -1;
		if (strcmp(f[8], "-"))
			snprintf(j->type, sizeof(j->type), "%s", f[8]);
		j->type_known = true;
	}
	return 0;
}

static int _user(char **f, int nf, struct copus__usage *u, const char **why)
{
	long long v;

	if (nf != 3)
		return *why = "user: number of fields", -1;
	if (_int(f[1], 0, UINT32_MAX - 1, &v))
		return *why = "user: UID", -1;
	u->uid = (uint32_t)v;
	if (_nonneg(f[2], &u->gpu_s))
		return *why = "user: USED", -1;
	return 0;
}

static int _revived(char **f, int nf, struct copus__state_revived *v,
		    const char **why)
{
	long long n;

	if (nf != 4)
		return *why = "revived: number of fields", -1;
	if (_int(f[1], 1, UINT32_MAX, &n))
		return *why = "revived: ID", -1;
	v->id = (uint32_t)n;
	if (_int(f[2], 0, INT_MAX, &n))
		return *why = "revived: RC", -1;
	v->rc = (int)n;
	if (_int(f[3], 1, INT64_MAX, &n) || (time_t)n != n)
		return *why = "revived: END", -1;
	v->end = (time_t)n;
	return 0;
}

int copus__state_parse(const char *line, struct copus__state_rec *out,
		       const char **why)
{
	char buf[256], *f[_FIELDS_MAX];
	const char *dummy;
	int nf;

	if (!why)
		why = &dummy;
	memset(out, 0, sizeof(*out));
	out->rescale.rc = -1;
	nf = _split(line, buf, sizeof(buf), f, _FIELDS_MAX);
	if (nf < 0) {
		*why = "the line's layout (one space between fields)";
		return -1;
	}
	if (!strcmp(f[0], "rescale")) {
		out->kind = COPUS__STATE_RESCALE;
		return _rescale(f, nf, &out->rescale, why);
	}
	if (!strcmp(f[0], "job")) {
		out->kind = COPUS__STATE_JOB;
		return _job(f, nf, &out->job, why);
	}
	if (!strcmp(f[0], "user")) {
		out->kind = COPUS__STATE_USER;
		return _user(f, nf, &out->user, why);
	}
	if (!strcmp(f[0], "revived")) {
		out->kind = COPUS__STATE_REVIVED;
		return _revived(f, nf, &out->revived, why);
	}
	*why = "the record kind (rescale, job, user or revived)";
	return -1;
}

/* Whether copus__state_parse would take the record's values. */
static int _valid(const struct copus__state_rec *r)
{
	const struct copus__rescale *x = &r->rescale;
	const struct copus__state_job *j = &r->job;

	if (r->kind == COPUS__STATE_RESCALE) {
		if (!_type_ok(x->type, sizeof(x->type)) ||
		    !strcmp(x->type, "-"))
			return -1;
		return x->id >= 1 && x->asked >= 0 && x->from >= 1 &&
			       x->from <= COPUS__GPUS_MAX && x->to >= 0 &&
			       x->to <= COPUS__GPUS_MAX && x->rc >= -1 ?
			       0 : -1;
	}
	if (r->kind == COPUS__STATE_REVIVED)
		return r->revived.id >= 1 && r->revived.rc >= 0 &&
			       r->revived.end >= 1 ? 0 : -1;
	if (r->kind == COPUS__STATE_USER)
		return r->user.uid != UINT32_MAX && isfinite(r->user.gpu_s) &&
			       r->user.gpu_s >= 0 ? 0 : -1;
	if (r->kind != COPUS__STATE_JOB)
		return -1;
	if (j->type_known && (!_type_ok(j->type, sizeof(j->type)) ||
			      !strcmp(j->type, "-")))
		return -1;
	return j->id >= 1 && j->req_gpus >= 0 &&
		       j->req_gpus <= COPUS__GPUS_MAX && j->max_had >= 0 &&
		       j->max_had <= COPUS__GPUS_MAX && isfinite(j->attained) &&
		       j->attained >= 0 && isfinite(j->rate) && j->rate >= 0 &&
		       j->submit >= 0 && j->launched >= 0 ? 0 : -1;
}

int copus__state_format(const struct copus__state_rec *r, char *buf,
			size_t len)
{
	const struct copus__rescale *x = &r->rescale;
	const struct copus__state_job *j = &r->job;
	int n;

	if (_valid(r))
		return -1;
	/* %.17g: a number read back is the number written. */
	if (r->kind == COPUS__STATE_RESCALE)
		n = snprintf(buf, len, "rescale %" PRIu32 " %lld %d %d %s %d %d\n",
			     x->id, (long long)x->asked, x->from, x->to,
			     x->type[0] ? x->type : "-", x->gave_up ? 1 : 0,
			     x->rc);
	else if (r->kind == COPUS__STATE_USER)
		n = snprintf(buf, len, "user %" PRIu32 " %.17g\n",
			     r->user.uid, r->user.gpu_s);
	else if (r->kind == COPUS__STATE_REVIVED)
		n = snprintf(buf, len, "revived %" PRIu32 " %d %lld\n",
			     r->revived.id, r->revived.rc,
			     (long long)r->revived.end);
	else
		n = snprintf(buf, len,
			     "job %" PRIu32 " %d %d %.17g %.17g %lld %lld%s%s\n",
			     j->id, j->req_gpus, j->max_had, j->attained,
			     j->rate, (long long)j->submit,
			     (long long)j->launched, j->type_known ? " " : "",
			     !j->type_known ? "" : j->type[0] ? j->type : "-");
	return n < 0 || (size_t)n >= len ? -1 : 0;
}
