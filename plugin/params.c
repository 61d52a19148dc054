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
	p->restart_measured = false;
	p->fairness = -1.0;
	p->fairshare = 1.0;
	p->max_jobs = 1000;
	p->hint_check = 120;
	p->user_cap = 0;
	p->yield_us = 5000;
	p->yield_sleep_us = 500;
	snprintf(p->policy, sizeof(p->policy), "copus");
	p->planner_gpus[0] = '\0';
}

void copus__policy_params(const struct copus__params *p,
			  copus_policy_params *prm)
{
	*prm = (copus_policy_params)COPUS_POLICY_PARAMS_INITIALIZER;
	prm->interval = p->interval;
	prm->restart_delay = p->restart_cost;
	prm->fairness_p = p->fairness;
	prm->fairshare = p->fairshare;
	/* Slurm gives every node of a job the same GPU count. */
	prm->equal_per_node = true;
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
	{ "copus_checkpoint_deadline",
	  offsetof(struct copus__params, ckpt_deadline), 1, 86400 },
	{ "copus_max_jobs", offsetof(struct copus__params, max_jobs), 1,
	  100000 },
	{ "copus_hint_check", offsetof(struct copus__params, hint_check), 10,
	  86400 },
	{ "copus_max_gpus_per_user", offsetof(struct copus__params, user_cap),
	  0, 1000000 },
	{ "copus_yield_interval", offsetof(struct copus__params, yield_us), 0,
	  10000000 },
	{ "copus_yield_sleep", offsetof(struct copus__params, yield_sleep_us),
	  0, 1000000 },
};

struct _real_key {
	const char *name;
	size_t off;
	double min, max;
};

static const struct _real_key _real_keys[] = {
	{ "copus_fairness", offsetof(struct copus__params, fairness), -10.0,
	  1.0 },
	{ "copus_fairshare", offsetof(struct copus__params, fairshare), 0.0,
	  10.0 },
};

static void _report(void (*report)(const char *, void *), void *arg,
		    const char *fmt, const char *key, const char *val,
		    long min, long max)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, key, val, min, max);
	if (report)
		report(msg, arg);
}

/* Reports a bad value of key, and the value that stays (stays_fmt). */
static void _report_stays(void (*report)(const char *, void *), void *arg,
			  const char *what, const char *key, const char *val,
			  const char *stays)
{
	char msg[640];

	snprintf(msg, sizeof(msg), "SchedulerParameters: %s%s%s %s; %s stays "
		 "%s", key, val ? "=" : "", val ? val : "", what, key, stays);
	if (report)
		report(msg, arg);
}

/* Handles one "key=value" item; returns 1 on a copus_ error, else 0. */
static int _param(const char *item, struct copus__params *p,
		  void (*report)(const char *, void *), void *arg)
{
	char key[64], what[96], stays[40];
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
		snprintf(what, sizeof(what), "%s a whole number from %ld to "
			 "%ld%s", val && *val ? "is not" : "needs a value (",
			 k->min, k->max, val && *val ? "" : ")");
		snprintf(stays, sizeof(stays), "%d",
			 *(int *)((char *)p + k->off));
		if (!val || !*val) {
			_report_stays(report, arg, what, key, NULL, stays);
			return 1;
		}
		errno = 0;
		v = strtol(val, &end, 10);
		if (errno || *end || v < k->min || v > k->max) {
			_report_stays(report, arg, what, key, val, stays);
			return 1;
		}
		*(int *)((char *)p + k->off) = (int)v;
		return 0;
	}
	if (!strcmp(key, "copus_restart_cost")) {
		const char *num = val;
		bool measured = false;
		char *end = NULL;
		double v = p->restart_cost;

		if (val && !strncmp(val, "measured", 8) &&
		    (val[8] == '\0' || val[8] == ':')) {
			measured = true;
			num = val[8] ? val + 9 : NULL;
		}
		if (num) {
			errno = 0;
			v = strtod(num, &end);
		}
		if (!val || (num && (!*num || errno || *end || !isfinite(v) ||
				     v < 0.0 || v > 86400.0))) {
			snprintf(stays, sizeof(stays), "%s%g",
				 p->restart_measured ? "measured:" : "",
				 p->restart_cost);
			_report_stays(report, arg, "is not a number of seconds "
				      "from 0 to 86400, \"measured\" or "
				      "\"measured:SECONDS\"", key, val, stays);
			return 1;
		}
		p->restart_cost = v;
		p->restart_measured = measured;
		return 0;
	}
	if (!strcmp(key, "copus_policy")) {
		const char *c;
		char *o;

		/*
		 * NAME or NAME:OPT:OPT...: commas separate SchedulerParameters'
		 * items, so the options come separated by colons here and by
		 * commas to the core ("backfill:easy,default_time=3600").
		 */
		for (c = val; c && *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
			      *c == ':' || *c == '-' || *c == '_' || *c == '=' ||
			      *c == '.'))
				break;
		if (!val || !*val || *c || strlen(val) >= sizeof(p->policy)) {
			_report_stays(report, arg, "is not a policy name such "
				      "as copus, pollux or fifo, with options "
				      "after colons (backfill:easy:"
				      "default_time=3600)", key,
				      val ? val : "", p->policy);
			return 1;
		}
		snprintf(p->policy, sizeof(p->policy), "%s", val);
		if ((o = strchr(p->policy, ':')))
			while ((o = strchr(o + 1, ':')))
				*o = ',';
		return 0;
	}
	if (!strcmp(key, "copus_planner_gpus")) {
		/* A relative path would depend on slurmctld's directory. */
		if (!val || val[0] != '/' ||
		    strlen(val) >= sizeof(p->planner_gpus)) {
			_report_stays(report, arg, "is not an absolute path of "
				      "at most 255 bytes", key, val ? val : "",
				      p->planner_gpus[0] ? p->planner_gpus :
				      "unset (the built-in constants)");
			return 1;
		}
		snprintf(p->planner_gpus, sizeof(p->planner_gpus), "%s", val);
		return 0;
	}
	for (i = 0; i < sizeof(_real_keys) / sizeof(_real_keys[0]); i++) {
		const struct _real_key *k = &_real_keys[i];
		double *field = (double *)((char *)p + k->off);
		char *end;
		double v;

		if (strcmp(key, k->name))
			continue;
		snprintf(what, sizeof(what), "%s a number from %g to %g%s",
			 val && *val ? "is not" : "needs a value (", k->min,
			 k->max, val && *val ? "" : ")");
		snprintf(stays, sizeof(stays), "%g", *field);
		if (!val || !*val) {
			_report_stays(report, arg, what, key, NULL, stays);
			return 1;
		}
		errno = 0;
		v = strtod(val, &end);
		if (errno || *end || !isfinite(v) || v < k->min ||
		    v > k->max) {
			_report_stays(report, arg, what, key, val, stays);
			return 1;
		}
		*field = v;
		return 0;
	}
	_report(report, arg, "SchedulerParameters: unknown key '%s'%s; known: "
		"copus_interval, copus_restart_delay, copus_restart_cost, "
		"copus_checkpoint_deadline, copus_fairness, copus_fairshare, "
		"copus_max_jobs, copus_hint_check, copus_max_gpus_per_user, "
		"copus_yield_interval, copus_yield_sleep, "
		"copus_planner_gpus, copus_policy",
		key, "", 0, 0);
	return 1;
}

static int _has_item(const char *params, const char *item);

int copus__params_parse(const char *sched_params, struct copus__params *p,
			void (*report)(const char *msg, void *arg), void *arg)
{
	char item[320];
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
	p->fifo_off = _has_item(sched_params, "sched_interval=-1");
	return errors;
}

int copus__list_has(const char *list, long n)
{
	const char *s = list;
	char *end;

	while (s && *s) {
		long lo = strtol(s, &end, 10), hi = lo;

		if (end == s)
			return 0;
		if (*end == '-') {
			s = end + 1;
			hi = strtol(s, &end, 10);
			if (end == s)
				return 0;
		}
		if (lo <= n && n <= hi)
			return 1;
		if (*end != ',')
			return 0;
		s = end + 1;
	}
	return 0;
}

/* Whether SchedulerParameters holds the item exactly. */
static int _has_item(const char *params, const char *item)
{
	size_t n = strlen(item);
	const char *s = params;

	while (s && *s) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);

		if (len == n && !strncmp(s, item, n))
			return 1;
		s = comma ? comma + 1 : NULL;
	}
	return 0;
}

int copus__config_check(const struct copus__slurm_view *v,
			void (*report)(const char *msg, void *arg), void *arg)
{
	static const struct {
		int code;
		const char *msg;
	} warnings[] = {
		{ 1, "SchedulerParameters has no sched_interval=-1: Slurm's "
		     "own FIFO pass starts jobs too, on nodes that sched/copus "
		     "did not choose for them" },
		{ 3, "SelectTypeParameters has CR_*_Memory, but there is no "
		     "DefMemPerCPU, DefMemPerGPU or DefMemPerNode: a job that "
		     "asks for no memory gets all of a node's, and the node's "
		     "other GPUs stay idle" },
		{ 4, "RequeueExit does not hold 75: Slurm does not requeue a "
		     "job that exits with 75 after its checkpoint; sched/copus "
		     "requeues it a round later" },
		{ 5, "JobRequeue=0: an elastic job submitted without "
		     "--requeue cannot be requeued, so it is never rescaled" },
		{ 6, "JobSubmitPlugins has no copus: jobs that can never run "
		     "(--elastic outside its GPU request, a GPU type no node "
		     "has) are accepted and wait for ever" },
	};
	int bad[7] = { 0 }, n = 0;
	unsigned i;

	bad[1] = !_has_item(v->sched_params, "sched_interval=-1");
	bad[3] = v->cr_memory && !v->def_mem;
	bad[4] = !v->requeue_exit || !copus__list_has(v->requeue_exit, 75);
	bad[5] = !v->job_requeue;
	bad[6] = !_has_item(v->job_submit, "copus") &&
		 !_has_item(v->job_submit, "job_submit/copus");
	for (i = 0; i < sizeof(warnings) / sizeof(warnings[0]); i++) {
		if (!bad[warnings[i].code])
			continue;
		n++;
		if (report)
			report(warnings[i].msg, arg);
	}
	return n;
}
