/*
 * sched/copus's SchedulerParameters keys (see params.h).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

void copus__params_default(struct copus__params *p)
{
	p->interval = 10;
	p->restart_delay = 120;
	p->ckpt_deadline = 120;
	p->restart_cost = 30;
	p->fairness = -1.0;
	p->max_jobs = 1000;
	snprintf(p->policy, sizeof(p->policy), "copus");
}

struct _int_key {
	const char *name;
	size_t off;
	long min, max;
};

static const struct _int_key _int_keys[] = {
	{ "copus_interval", offsetof(struct copus__params, interval), 1, 3600 },
	{ "copus_restart_delay", offsetof(struct copus__params, restart_delay),
	  0, 86400 },
	{ "copus_restart_cost", offsetof(struct copus__params, restart_cost),
	  0, 86400 },
	{ "copus_checkpoint_deadline",
	  offsetof(struct copus__params, ckpt_deadline), 1, 86400 },
	{ "copus_max_jobs", offsetof(struct copus__params, max_jobs), 1,
	  100000 },
};

static void _report(void (*report)(const char *, void *), void *arg,
		    const char *fmt, const char *key, const char *val,
		    long min, long max)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, key, val, min, max);
	if (report)
		report(msg, arg);
}

/* Handles one "key=value" item; returns 1 on a copus_ error, else 0. */
static int _param(const char *item, struct copus__params *p,
		  void (*report)(const char *, void *), void *arg)
{
	char key[64];
	const char *eq = strchr(item, '=');
	const char *val;
	size_t klen;
	unsigned i;

	if (strncmp(item, "copus_", 6) != 0)
		return 0;
	klen = eq ? (size_t)(eq - item) : strlen(item);
	if (klen >= sizeof(key)) {
		_report(report, arg, "SchedulerParameters: unknown key '%s%s'",
			item, "", 0, 0);
		return 1;
	}
	memcpy(key, item, klen);
	key[klen] = '\0';
	val = eq ? eq + 1 : NULL;
	for (i = 0; i < sizeof(_int_keys) / sizeof(_int_keys[0]); i++) {
		const struct _int_key *k = &_int_keys[i];
		char *end;
		long v;

		if (strcmp(key, k->name))
			continue;
		if (!val || !*val) {
			_report(report, arg, "SchedulerParameters: %s needs a "
				"value%s (a whole number from %ld to %ld)",
				key, "", k->min, k->max);
			return 1;
		}
		errno = 0;
		v = strtol(val, &end, 10);
		if (errno || *end || v < k->min || v > k->max) {
			_report(report, arg, "SchedulerParameters: %s=%s is not "
				"a whole number from %ld to %ld; using the "
				"default", key, val, k->min, k->max);
			return 1;
		}
		*(int *)((char *)p + k->off) = (int)v;
		return 0;
	}
	if (!strcmp(key, "copus_policy")) {
		const char *c;

		for (c = val; c && *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
			      *c == ':' || *c == ',' || *c == '-' || *c == '_'))
				break;
		if (!val || !*val || *c || strlen(val) >= sizeof(p->policy)) {
			_report(report, arg, "SchedulerParameters: %s=%s is not "
				"a policy name such as copus, pollux or fifo; "
				"using copus", key, val ? val : "", 0, 0);
			return 1;
		}
		snprintf(p->policy, sizeof(p->policy), "%s", val);
		return 0;
	}
	if (!strcmp(key, "copus_fairness")) {
		char *end;
		double v;

		if (!val || !*val) {
			_report(report, arg, "SchedulerParameters: %s needs a "
				"value%s (a number from %ld to %ld)", key, "",
				-10, 1);
			return 1;
		}
		errno = 0;
		v = strtod(val, &end);
		if (errno || *end || !isfinite(v) || v < -10.0 || v > 1.0) {
			_report(report, arg, "SchedulerParameters: %s=%s is not "
				"a number from %ld to %ld; using the default",
				key, val, -10, 1);
			return 1;
		}
		p->fairness = v;
		return 0;
	}
	_report(report, arg, "SchedulerParameters: unknown key '%s'%s; known: "
		"copus_interval, copus_restart_delay, copus_restart_cost, "
		"copus_checkpoint_deadline, copus_fairness, copus_max_jobs, "
		"copus_policy",
		key, "", 0, 0);
	return 1;
}

int copus__params_parse(const char *sched_params, struct copus__params *p,
			void (*report)(const char *msg, void *arg), void *arg)
{
	char item[256];
	const char *s = sched_params, *comma;
	int errors = 0;
	size_t len;

	copus__params_default(p);
	while (s && *s) {
		comma = strchr(s, ',');
		len = comma ? (size_t)(comma - s) : strlen(s);
		if (len >= sizeof(item)) {
			if (!strncmp(s, "copus_", 6)) {
				_report(report, arg, "SchedulerParameters: "
					"item starting '%.40s'%s is too long",
					s, "", 0, 0);
				errors++;
			}
		} else if (len) {
			memcpy(item, s, len);
			item[len] = '\0';
			errors += _param(item, p, report, arg);
		}
		s = comma ? comma + 1 : NULL;
	}
	return errors;
}
