/*
 * The job options of copus (--elastic, --gpu-types, --gpu-multiple) as the
 * SPANK plugin
 * checks them at submission and sched/copus checks them again when it reads
 * them back from the job's control environment. Plain C, no Slurm: both
 * plugins include it (static functions, so the two shared objects never
 * share a symbol).
 */
#ifndef COPUS_PLUGIN_OPTIONS_H
#define COPUS_PLUGIN_OPTIONS_H

#include <stdio.h>
#include <string.h>

/* Job control environment names (slurmctld may prefix them with SPANK_). */
#define COPUS__ENV_ELASTIC "COPUS_ELASTIC"
#define COPUS__ENV_TYPES "COPUS_GPU_TYPES"
#define COPUS__ENV_MULTIPLE "COPUS_GPU_MULTIPLE"

/*
 * The value of name in a job's control environment (env, n entries of
 * "NAME=value", where slurmctld may have prefixed the name with SPANK_), or
 * NULL.
 */
static inline const char *copus__env_value(char *const *env, unsigned n,
					   const char *name)
{
	size_t len = strlen(name);
	unsigned i;

	for (i = 0; env && i < n; i++) {
		const char *e = env[i];

		if (!e)
			continue;
		if (!strncmp(e, "SPANK_", 6) && !strncmp(e + 6, name, len) &&
		    e[6 + len] == '=')
			return e + 7 + len;
		if (!strncmp(e, name, len) && e[len] == '=')
			return e + len + 1;
	}
	return NULL;
}

/* Largest GPU count of --elastic, and the limits of --gpu-types. */
#define COPUS__GPUS_MAX 4096
#define COPUS__TYPES_MAX 8
#define COPUS__TYPE_LEN 15

/*
 * Parses a positive decimal integer of at most 9 digits at *p and advances
 * *p past it. Returns -1 when there is no digit.
 */
static inline int copus__parse_count(const char **p)
{
	const char *s = *p;
	int v = 0, n = 0;

	while (*s >= '0' && *s <= '9') {
		if (n == 9)
			return -2;
		v = v * 10 + (*s - '0');
		s++;
		n++;
	}
	if (n == 0)
		return -1;
	*p = s;
	return v;
}

/*
 * "MIN-MAX" or "N" (MIN = MAX = N), 1 <= MIN <= MAX <= COPUS__GPUS_MAX.
 * Returns 0, or -1 with a reason in why.
 */
static inline int copus__parse_elastic(const char *arg, int *min, int *max,
				       char *why, size_t len)
{
	const char *p = arg;
	int lo, hi;

	if (!arg || !*arg) {
		snprintf(why, len, "empty; expected MIN-MAX GPUs, e.g. 2-8");
		return -1;
	}
	lo = copus__parse_count(&p);
	if (lo < 0) {
		snprintf(why, len, "%s; expected MIN-MAX GPUs, e.g. 2-8",
			 lo == -2 ? "number too large" :
				    "does not start with a number");
		return -1;
	}
	hi = lo;
	if (*p == '-') {
		p++;
		hi = copus__parse_count(&p);
		if (hi < 0) {
			snprintf(why, len, "%s after '-'; expected MIN-MAX "
				 "GPUs, e.g. 2-8", hi == -2 ?
				 "number too large" : "no number");
			return -1;
		}
	}
	if (*p) {
		snprintf(why, len, "unexpected '%c'; expected MIN-MAX GPUs "
			 "(whole numbers), e.g. 2-8", *p);
		return -1;
	}
	if (lo < 1) {
		snprintf(why, len, "MIN must be at least 1 GPU");
		return -1;
	}
	if (hi < lo) {
		snprintf(why, len, "MAX (%d) is smaller than MIN (%d)", hi, lo);
		return -1;
	}
	if (hi > COPUS__GPUS_MAX) {
		snprintf(why, len, "MAX (%d) is more than %d GPUs", hi,
			 COPUS__GPUS_MAX);
		return -1;
	}
	*min = lo;
	*max = hi;
	return 0;
}

/*
 * "N": the job runs only on a multiple of N GPUs (its model spans N GPUs
 * per replica), 1 <= N <= COPUS__GPUS_MAX. Returns 0, or -1 with a reason
 * in why.
 */
static inline int copus__parse_multiple(const char *arg, int *n, char *why,
					size_t len)
{
	const char *p = arg;
	int v;

	if (!arg || !*arg) {
		snprintf(why, len, "empty; expected a number of GPUs, e.g. 2");
		return -1;
	}
	v = copus__parse_count(&p);
	if (v < 0 || *p) {
		snprintf(why, len, "%s; expected a number of GPUs, e.g. 2",
			 v == -2 ? "number too large" : "not a whole number");
		return -1;
	}
	if (v < 1 || v > COPUS__GPUS_MAX) {
		snprintf(why, len, "%d is not between 1 and %d GPUs", v,
			 COPUS__GPUS_MAX);
		return -1;
	}
	*n = v;
	return 0;
}

/*
 * "t1,t2,...": 1..COPUS__TYPES_MAX distinct names of 1..COPUS__TYPE_LEN
 * characters of [A-Za-z0-9_.-]. Copies the list to out (same text).
 * Returns 0, or -1 with a reason in why.
 */
static inline int copus__parse_types(const char *arg, char *out,
				     size_t outlen, char *why, size_t len)
{
	char names[COPUS__TYPES_MAX][COPUS__TYPE_LEN + 1];
	const char *p = arg;
	int n = 0, i, k;

	if (!arg || !*arg) {
		snprintf(why, len, "empty; expected GPU types such as a100,v100");
		return -1;
	}
	while (1) {
		k = 0;
		while (*p && *p != ',') {
			char c = *p;

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
			      c == '-')) {
				snprintf(why, len, "character '%c' is not "
					 "allowed in a GPU type (letters, "
					 "digits, _ . -)", c);
				return -1;
			}
			if (k == COPUS__TYPE_LEN) {
				snprintf(why, len, "a GPU type is longer than "
					 "%d characters", COPUS__TYPE_LEN);
				return -1;
			}
			if (n == COPUS__TYPES_MAX) {
				snprintf(why, len, "more than %d GPU types",
					 COPUS__TYPES_MAX);
				return -1;
			}
			names[n][k++] = c;
			p++;
		}
		if (k == 0) {
			snprintf(why, len, "empty GPU type in the list");
			return -1;
		}
		names[n][k] = '\0';
		for (i = 0; i < n; i++) {
			if (!strcmp(names[i], names[n])) {
				snprintf(why, len, "GPU type '%.15s' is listed "
					 "twice", names[n]);
				return -1;
			}
		}
		n++;
		if (!*p)
			break;
		p++;
	}
	if (strlen(arg) >= outlen) {
		snprintf(why, len, "list too long");
		return -1;
	}
	memcpy(out, arg, strlen(arg) + 1);
	return 0;
}

#endif /* COPUS_PLUGIN_OPTIONS_H */
