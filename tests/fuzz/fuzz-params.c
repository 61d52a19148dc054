/*
 * Fuzz target: sched/copus's reading of slurm.conf (plugin/params.c):
 * copus__params_parse() of SchedulerParameters, copus__config_check() of the
 * settings it relies on, and copus__list_has() of RequeueExit. slurm.conf is
 * the administrator's, but a typo in it must cost a log line, never
 * slurmctld.
 *
 * The input is up to three lines: SchedulerParameters, RequeueExit and
 * JobSubmitPlugins; the first byte, when it is not printable, also sets the
 * view's flags (CR_*_Memory, DefMem*, JobRequeue).
 */
#include <math.h>

#include "params.h"

#include "fuzz.h"

struct reports {
	int n;
};

static void count_report(const char *msg, void *arg)
{
	struct reports *r = arg;

	/* Every message is a sentence for the log, never empty. */
	FUZZ_CHECK(msg != NULL && msg[0] != '\0' && strlen(msg) < 1024);
	r->n++;
}

static int policy_ok(const char *s)
{
	size_t n = strnlen(s, 32);

	return n >= 1 && n < 32 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789:,-_") == n;
}

static void check_params(const char *sched_params)
{
	struct copus__params p;
	struct reports r = { 0 };
	int errors;

	memset(&p, 0, sizeof(p));
	errors = copus__params_parse(sched_params, &p, count_report, &r);
	FUZZ_CHECK(errors == r.n);
	/* Whatever was refused, the values in effect are valid ones. */
	FUZZ_CHECK(p.interval >= 1 && p.interval <= 3600);
	FUZZ_CHECK(p.restart_delay >= 0 && p.restart_delay <= 86400);
	FUZZ_CHECK(p.restart_cost >= 0 && p.restart_cost <= 86400);
	FUZZ_CHECK(p.ckpt_deadline >= 1 && p.ckpt_deadline <= 86400);
	FUZZ_CHECK(isfinite(p.fairness) && p.fairness >= -10 &&
		   p.fairness <= 1);
	FUZZ_CHECK(p.max_jobs >= 1 && p.max_jobs <= 100000);
	FUZZ_CHECK(p.hint_check >= 10 && p.hint_check <= 86400);
	FUZZ_CHECK(p.user_cap >= 0 && p.user_cap <= 1000000);
	FUZZ_CHECK(policy_ok(p.policy));
	/* Without a report callback the parse is the same. */
	FUZZ_CHECK(copus__params_parse(sched_params, &p, NULL, NULL) == errors);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size), *lines[3] = { NULL, NULL, NULL };
	struct copus__slurm_view v = { 0 };
	struct reports r = { 0 };
	unsigned flags = 0;
	char *s = text;
	int warnings;

	if (size > 0 && (data[0] < ' ' || data[0] > '~')) {
		flags = data[0];
		s++;
	}
	for (int i = 0; i < 3 && s != NULL; i++) {
		char *nl = strchr(s, '\n');

		lines[i] = s;
		if (nl != NULL)
			*nl = '\0';
		s = nl != NULL ? nl + 1 : NULL;
	}
	check_params(lines[0]);

	v.sched_params = lines[0];
	v.requeue_exit = lines[1];
	v.job_submit = lines[2];
	v.cr_memory = flags & 1;
	v.def_mem = (flags >> 1) & 1;
	v.job_requeue = (flags >> 2) & 1;
	warnings = copus__config_check(&v, count_report, &r);
	FUZZ_CHECK(warnings == r.n && warnings >= 0 && warnings <= 6);

	if (lines[1] != NULL) {
		static const long probes[] = { -1, 0, 1, 75, 255, 2147483647L };

		for (size_t i = 0; i < sizeof(probes) / sizeof(*probes); i++) {
			int has = copus__list_has(lines[1], probes[i]);
			char one[32];

			FUZZ_CHECK(has == 0 || has == 1);
			/* A list of that one number holds it. */
			snprintf(one, sizeof(one), "%ld", probes[i]);
			FUZZ_CHECK(has || strcmp(lines[1], one) != 0);
		}
	}
	free(text);
	return 0;
}
