/*
 * sched/copus's SchedulerParameters (plugin/params.c): the keys it reads,
 * the values it refuses with the key and value named, the restart costs
 * and requeue timing they set, the settings of slurm.conf it warns about,
 * and the policy and fair-share weight they hand to the core.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "memo.h"
#include "params.h"

static char _last[256];
static int _reports;

static void _collect(const char *msg, void *arg)
{
	snprintf(_last, sizeof(_last), "%s", msg);
	_reports++;
}

static void params_are_parsed_and_slurm_keys_skipped(void)
{
	struct copus__params p;
	int n;

	_reports = 0;
	n = copus__params_parse("sched_interval=-1,defer,copus_interval=3,"
				"copus_restart_delay=0,copus_fairness=-0.5,"
				"copus_checkpoint_deadline=30,copus_max_jobs=7,"
				"copus_hint_check=15,copus_fairshare=2.5",
				&p, _collect, NULL);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(_reports, 0);
	CU_ASSERT_EQUAL(p.interval, 3);
	CU_ASSERT_EQUAL(p.hint_check, 15);
	CU_ASSERT_EQUAL(p.restart_delay, 0);
	CU_ASSERT_EQUAL(p.ckpt_deadline, 30);
	CU_ASSERT_EQUAL(p.max_jobs, 7);
	ASSERT_CLOSE(p.fairness, -0.5, 1e-12);
	ASSERT_CLOSE(p.fairshare, 2.5, 1e-12);
	CU_ASSERT_EQUAL(copus__params_parse(NULL, &p, _collect, NULL), 0);
	CU_ASSERT_EQUAL(p.interval, 10);
	ASSERT_CLOSE(p.fairshare, 1.0, 1e-12);
	/* A key removed at reconfigure goes back to its default. */
	CU_ASSERT_EQUAL(copus__params_parse("copus_max_gpus_per_user=8", &p,
					    _collect, NULL), 0);
	CU_ASSERT_EQUAL(p.user_cap, 8);
	CU_ASSERT_EQUAL(copus__params_parse(NULL, &p, _collect, NULL), 0);
	CU_ASSERT_EQUAL(p.user_cap, 0);
	CU_ASSERT_EQUAL(p.hint_check, 120);
	CU_ASSERT_STRING_EQUAL(p.planner_gpus, "");
	/* The locks' yield: 5 ms held, then 0.5 ms free; 0: never. */
	CU_ASSERT_EQUAL(p.yield_us, 5000);
	CU_ASSERT_EQUAL(p.yield_sleep_us, 500);
	CU_ASSERT_EQUAL(copus__params_parse("copus_yield_interval=0,"
					    "copus_yield_sleep=20000", &p,
					    _collect, NULL), 0);
	CU_ASSERT_EQUAL(p.yield_us, 0);
	CU_ASSERT_EQUAL(p.yield_sleep_us, 20000);
	CU_ASSERT_EQUAL(copus__params_parse("copus_yield_interval=-1", &p,
					    _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_yield_interval"));
	CU_ASSERT_EQUAL(p.yield_us, 5000);
}

/*
 * copus_planner_gpus names the planner's constants file by an absolute
 * path (slurmctld's directory is no place to look for it); a bad value
 * names the file that stays.
 */
static void the_planner_constants_file_is_an_absolute_path(void)
{
	struct copus__params p;

	_reports = 0;
	CU_ASSERT_EQUAL(copus__params_parse("copus_planner_gpus=/etc/slurm/"
					    "gpus.json,defer", &p, _collect,
					    NULL), 0);
	CU_ASSERT_STRING_EQUAL(p.planner_gpus, "/etc/slurm/gpus.json");
	CU_ASSERT_EQUAL(copus__params_parse("copus_planner_gpus=/a.json,"
					    "copus_planner_gpus=gpus.json", &p,
					    _collect, NULL), 1);
	CU_ASSERT_STRING_EQUAL(p.planner_gpus, "/a.json");
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_planner_gpus=gpus.json"));
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_planner_gpus stays "
				      "/a.json"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_planner_gpus=", &p,
					    _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "stays unset"));
	CU_ASSERT_EQUAL(_reports, 2);
}

static void bad_params_are_reported_by_key_and_value(void)
{
	struct copus__params p;

	_reports = 0;
	CU_ASSERT_EQUAL(copus__params_parse("copus_interval=0", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_interval=0"));
	CU_ASSERT_EQUAL(p.interval, 10);
	CU_ASSERT_EQUAL(copus__params_parse("copus_interval=5s", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_interval=5s"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_fairness=2", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_fairness=2"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_intreval=5", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "unknown key 'copus_intreval'"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_max_jobs", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "needs a value"));
	CU_ASSERT_EQUAL(copus__params_parse("defer,copus_interval=,x", &p,
					    NULL, NULL), 1);
	CU_ASSERT_EQUAL(_reports, 5);
}

static void a_rejected_key_names_the_value_that_stays(void)
{
	struct copus__params p;

	_reports = 0;
	CU_ASSERT_EQUAL(copus__params_parse("copus_interval=5,copus_interval=x",
					    &p, _collect, NULL), 1);
	CU_ASSERT_EQUAL(p.interval, 5);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_interval=x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_interval stays 5"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_max_jobs=", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_max_jobs stays 1000"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_fairness=0.5,"
					    "copus_fairness=7", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_fairness stays 0.5"));
	ASSERT_CLOSE(p.fairness, 0.5, 1e-12);
	CU_ASSERT_EQUAL(copus__params_parse("copus_fairshare=11", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_fairshare=11 is not a "
					     "number from 0 to 10"));
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_fairshare stays 1"));
	CU_ASSERT_EQUAL(copus__params_parse("copus_policy=pollux,"
					    "copus_policy=a/b", &p, _collect,
					    NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_policy stays pollux"));
	CU_ASSERT_STRING_EQUAL(p.policy, "pollux");
	CU_ASSERT_EQUAL(_reports, 5);
}

/*
 * copus_restart_cost: seconds (a fraction too), or "measured", which
 * counts the plugin's measured rescales and until then the seconds in
 * effect, or "measured:S", which counts S until then.
 */
static void the_restart_cost_is_seconds_or_measured(void)
{
	struct copus__params p;

	_reports = 0;
	CU_ASSERT_EQUAL(copus__params_parse(NULL, &p, _collect, NULL), 0);
	ASSERT_CLOSE(p.restart_cost, 30, 0);
	CU_ASSERT(!p.restart_measured);
	CU_ASSERT_EQUAL(copus__params_parse("copus_restart_cost=0.75", &p,
					    _collect, NULL), 0);
	ASSERT_CLOSE(p.restart_cost, 0.75, 1e-12);
	CU_ASSERT(!p.restart_measured);
	CU_ASSERT_EQUAL(copus__params_parse("copus_restart_cost=measured", &p,
					    _collect, NULL), 0);
	ASSERT_CLOSE(p.restart_cost, 30, 0);
	CU_ASSERT(p.restart_measured);
	CU_ASSERT_EQUAL(copus__params_parse("copus_restart_cost=measured:2.5",
					    &p, _collect, NULL), 0);
	ASSERT_CLOSE(p.restart_cost, 2.5, 1e-12);
	CU_ASSERT(p.restart_measured);
	CU_ASSERT_EQUAL(_reports, 0);
	/* Each bad value is named, and what stays. */
	const char *bad[] = { "copus_restart_cost=measured:2.5,"
			      "copus_restart_cost=measuredx",
			      "copus_restart_cost=measured:2.5,"
			      "copus_restart_cost=measured:",
			      "copus_restart_cost=measured:2.5,"
			      "copus_restart_cost=-1",
			      "copus_restart_cost=measured:2.5,"
			      "copus_restart_cost=nan",
			      "copus_restart_cost=measured:2.5,"
			      "copus_restart_cost=86401",
			      "copus_restart_cost=measured:2.5,"
			      "copus_restart_cost" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(copus__params_parse(bad[i], &p, _collect,
						    NULL), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_restart_cost "
					      "stays measured:2.5"));
		CU_ASSERT(p.restart_measured);
		ASSERT_CLOSE(p.restart_cost, 2.5, 1e-12);
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "is not a number of seconds"));
}

/* The measured costs: the mean of the last 16; nonsense is not noted. */
static void the_last_rescale_costs_are_averaged(void)
{
	struct copus__costs c = { 0 };

	ASSERT_CLOSE(copus__costs_mean(&c, 30), 30, 0);
	copus__costs_add(&c, NAN);
	copus__costs_add(&c, -1.0);
	copus__costs_add(&c, INFINITY);
	CU_ASSERT_EQUAL(c.n, 0);
	copus__costs_add(&c, 2.0);
	copus__costs_add(&c, 4.0);
	ASSERT_CLOSE(copus__costs_mean(&c, 30), 3.0, 1e-12);
	for (int i = 0; i < COPUS__COSTS_MAX; i++)
		copus__costs_add(&c, 1.0);
	CU_ASSERT_EQUAL(c.n, COPUS__COSTS_MAX);
	ASSERT_CLOSE(copus__costs_mean(&c, 30), 1.0, 1e-12);
	copus__costs_add(&c, 1.0 + COPUS__COSTS_MAX);
	ASSERT_CLOSE(copus__costs_mean(&c, 30), 2.0, 1e-12);
}

/* Where the requeue of a job asked at phase p with lead l falls. */
static double _requeued_at(double p, double l)
{
	return fmod(p + l, 1.0);
}

/*
 * Full rounds begin where the jobs they ask are requeued late in a second,
 * short of its last margin seconds, after the most of the leads.
 */
static void rounds_begin_where_requeues_fall_late_in_a_second(void)
{
	struct copus__costs c = { 0 };
	double p;

	CU_ASSERT_TRUE(isnan(copus__round_phase(&c, 0.1)));
	copus__costs_add(&c, 0.12);
	p = copus__round_phase(&c, 0.1);
	CU_ASSERT_TRUE(p >= 0.0 && p < 1.0);
	CU_ASSERT_TRUE(_requeued_at(p, 0.12) >= 0.88 &&
		       _requeued_at(p, 0.12) <= 0.9 + 1e-9);
	p = copus__round_phase(&c, 0.3);
	CU_ASSERT_TRUE(_requeued_at(p, 0.12) >= 0.68 &&
		       _requeued_at(p, 0.12) <= 0.7 + 1e-9);
	/* Leads of more than a second. */
	c = (struct copus__costs){ 0 };
	copus__costs_add(&c, 2.37);
	p = copus__round_phase(&c, 0.1);
	CU_ASSERT_TRUE(_requeued_at(p, 2.37) >= 0.88 &&
		       _requeued_at(p, 2.37) <= 0.9 + 1e-9);
	/* Eight jobs that checkpoint in 0.12 s outweigh one in 0.62 s. */
	c = (struct copus__costs){ 0 };
	for (int i = 0; i < 8; i++)
		copus__costs_add(&c, 0.12);
	copus__costs_add(&c, 0.62);
	p = copus__round_phase(&c, 0.1);
	CU_ASSERT_TRUE(_requeued_at(p, 0.12) >= 0.88 &&
		       _requeued_at(p, 0.12) <= 0.9 + 1e-9);
}

static void requeue_exit_lists_are_read(void)
{
	CU_ASSERT_TRUE(copus__list_has("75", 75));
	CU_ASSERT_TRUE(copus__list_has("1-10,75", 75));
	CU_ASSERT_TRUE(copus__list_has("70-80", 75));
	CU_ASSERT_FALSE(copus__list_has("1-10,76", 75));
	CU_ASSERT_FALSE(copus__list_has("", 75));
	CU_ASSERT_FALSE(copus__list_has(NULL, 75));
	CU_ASSERT_FALSE(copus__list_has("x75", 75));
}

static void missing_settings_are_warned_about(void)
{
	struct copus__slurm_view good = {
		.sched_params = "sched_interval=-1,copus_interval=10",
		.cr_memory = 1, .def_mem = 1, .requeue_exit = "75",
		.job_requeue = 1, .job_submit = "lua,copus",
	}, v;

	_reports = 0;
	CU_ASSERT_EQUAL(copus__config_check(&good, _collect, NULL), 0);
	CU_ASSERT_EQUAL(_reports, 0);
	v = good;
	v.sched_params = "defer,sched_interval=60";
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "sched_interval=-1"));
	/* defer is the site's choice (sched_copus(8)): no warning either way. */
	v = good;
	v.sched_params = "sched_interval=-1,defer";
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 0);
	v = good;
	v.def_mem = 0;
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "DefMemPerCPU"));
	v.cr_memory = 0;
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 0);
	v = good;
	v.requeue_exit = NULL;
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "RequeueExit"));
	v.requeue_exit = "1-74";
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
	v = good;
	v.job_requeue = 0;
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "JobRequeue=0"));
	v.sched_params = NULL;
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 2);
	v = good;
	v.job_submit = "job_submit/copus";
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 0);
	v.job_submit = "copusx";
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "JobSubmitPlugins has no copus"));
	v.job_submit = NULL;
	CU_ASSERT_EQUAL(copus__config_check(&v, _collect, NULL), 1);
}

static void policy_key_takes_a_name(void)
{
	struct copus__params p;

	_reports = 0;
	CU_ASSERT_EQUAL(copus__params_parse("copus_policy=pollux", &p,
					    _collect, NULL), 0);
	CU_ASSERT_STRING_EQUAL(p.policy, "pollux");
	CU_ASSERT_EQUAL(copus__params_parse("copus_policy=copus:no-srpt", &p,
					    _collect, NULL), 0);
	CU_ASSERT_STRING_EQUAL(p.policy, "copus:no-srpt");
	/* Options with values, after colons; the core gets them by commas. */
	CU_ASSERT_EQUAL(copus__params_parse("sched_interval=-1,copus_policy="
					    "backfill:easy:default_time=3600,"
					    "copus_interval=5", &p, _collect,
					    NULL), 0);
	CU_ASSERT_STRING_EQUAL(p.policy, "backfill:easy,default_time=3600");
	CU_ASSERT_EQUAL(copus__params_parse("copus_policy=sia:p=-0.5:"
					    "lambda_n=1.1", &p, _collect,
					    NULL), 0);
	CU_ASSERT_STRING_EQUAL(p.policy, "sia:p=-0.5,lambda_n=1.1");
	CU_ASSERT_EQUAL(copus__params_parse("copus_policy=Bad/Name", &p,
					    _collect, NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "copus_policy=Bad/Name"));
	CU_ASSERT_STRING_EQUAL(p.policy, "copus");
	CU_ASSERT_EQUAL(copus__params_parse(NULL, &p, _collect, NULL), 0);
	CU_ASSERT_STRING_EQUAL(p.policy, "copus");
}

/*
 * The weight of the users' fair-share factors (copus_fairshare) reaches
 * whatever policy is named, as a parameter, and the policy gets its name
 * as the admin wrote it: the plugin matches no policy's name.
 */
static void the_fairshare_weight_reaches_every_policy(void)
{
	const char *names[] = { "copus", "copus:no-srpt", "pollux",
				"backfill:easy", "sia:p=-0.5" };
	char sp[256];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct copus__params p;
		copus_policy_params prm;
		copus_policy *pol = NULL;

		snprintf(sp, sizeof(sp), "copus_policy=%s,copus_fairshare=2.5,"
			 "copus_interval=7,copus_restart_cost=9,"
			 "copus_fairness=-2", names[i]);
		CU_ASSERT_EQUAL(copus__params_parse(sp, &p, _collect, NULL), 0);
		copus__policy_params(&p, &prm);
		CU_ASSERT_EQUAL(prm.size, sizeof(prm));
		CU_ASSERT_EQUAL(prm.version, COPUS_POLICY_PARAMS_VERSION);
		ASSERT_CLOSE(prm.fairshare, 2.5, 0);
		ASSERT_CLOSE(prm.interval, 7, 0);
		ASSERT_CLOSE(prm.restart_delay, 9, 0);
		ASSERT_CLOSE(prm.fairness_p, -2, 0);
		CU_ASSERT(prm.equal_per_node);
		ASSERT_STATUS(copus_policy_create(p.policy, &prm, &pol),
			      COPUS_OK);
		CU_ASSERT_STRING_EQUAL(copus_policy_name(pol), p.policy);
		copus_policy_destroy(pol);
	}
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(params_are_parsed_and_slurm_keys_skipped),
		TEST(the_planner_constants_file_is_an_absolute_path),
		TEST(bad_params_are_reported_by_key_and_value),
		TEST(a_rejected_key_names_the_value_that_stays),
		TEST(the_restart_cost_is_seconds_or_measured),
		TEST(the_last_rescale_costs_are_averaged),
		TEST(rounds_begin_where_requeues_fall_late_in_a_second),
		TEST(requeue_exit_lists_are_read),
		TEST(missing_settings_are_warned_about),
		TEST(policy_key_takes_a_name),
		TEST(the_fairshare_weight_reaches_every_policy),
	};
	return RUN_TESTS("plugin-params", tests);
}
