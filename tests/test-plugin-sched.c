/*
 * The Slurm-free parts of sched/copus and spank_copus (their
 * SchedulerParameters are in test-plugin-params): the submission,
 * --elastic and --gpu-types checks, what the plugin derives from a job's
 * hint for the core policy, its state lines, users' usage, lock times and
 * whole-file reads.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copus/error.h"
#include "../runtime/file.h"
#include "harness.h"
#include "memo.h"
#include "options.h"
#include "params.h"
#include "round.h"
#include "statefmt.h"
#include "stats.h"
#include "submit.h"

static char _last[256];

/* copus__submit_check() on sub; returns its result, the message in _last. */
static int _submit(const struct copus__submit *sub)
{
	return copus__submit_check(sub, _last, sizeof(_last));
}

static void submissions_that_can_never_run_are_refused(void)
{
	static const char *const types[] = { "a100", "v100" };
	struct copus__submit ok = {
		.elastic = "1-4", .tres_per_node = "gres:gpu:a100:2",
		.cluster_types = types, .ntypes = 2,
	}, s;

	CU_ASSERT_EQUAL(_submit(&ok), 0);
	s = ok;
	s.tres_per_node = NULL;
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--elastic=1-4 needs a GPU "
					     "request"));
	s.tres_per_node = "gres:mps:100";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	s = ok;
	s.tres_per_node = "gres:gpu:a100:8";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--gres asks for 8 GPU(s), "
					     "outside --elastic=1-4"));
	s.tres_per_node = "gres:gpu:2";
	s.min_nodes = 3;
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "6 GPU(s) in all"));
	s.min_nodes = 2;
	CU_ASSERT_EQUAL(_submit(&s), 0);
	s = ok;
	s.tres_per_node = NULL;
	s.tres_per_job = "gres:gpu:5";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--gpus asks for 5 GPU(s)"));
	s.tres_per_job = "gres/gpu:v100=3";
	CU_ASSERT_EQUAL(_submit(&s), 0);
	/* A GPU type no node has, for rigid and elastic jobs alike. */
	s = ok;
	s.elastic = NULL;
	s.tres_per_node = "gres:gpu:h100:1";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "'h100', which no node has "
					     "(the cluster has a100, v100)"));
	s.tres_per_node = "gres:gpu:h100";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	s.tres_per_node = "gres:gpu:4,gres:mps:10";
	CU_ASSERT_EQUAL(_submit(&s), 0);
	s = ok;
	s.types = "h100,t4";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--gpu-types=h100,t4 names no "
					     "GPU type"));
	s.types = "h100,v100";
	CU_ASSERT_EQUAL(_submit(&s), 0);
	/* Nothing known of the cluster: no type is refused. */
	s = ok;
	s.tres_per_node = "gres:gpu:h100:1";
	s.ntypes = 0;
	CU_ASSERT_EQUAL(_submit(&s), 0);
	/* What sched/copus does not support. */
	s = ok;
	s.het = 1;
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "heterogeneous"));
	s = ok;
	s.elastic = "4-1";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--elastic=4-1"));
}

static void a_rosy_model_is_caught_by_the_progress_it_makes(void)
{
	copus_model m = { 0 };
	copus_batch_plan one, four;
	double honest;

	m.perf = (copus_perf_params){ 0.01, 4e-4, 0.05, 1e-3, 0.02, 5e-4, 1.5 };
	m.grad.sqr = 1e-2;
	m.grad.var = 10.0;
	m.limits.init_batch = 128;
	m.limits.max_batch = 4096;
	m.limits.min_local = 8;
	m.limits.max_local = 256;
	CU_ASSERT_EQUAL_FATAL(copus_best_batch(&m, 1, 4, &four), COPUS_OK);
	CU_ASSERT_EQUAL_FATAL(copus_best_batch(&m, 1, 1, &one), COPUS_OK);
	honest = four.goodput / 128;
	/* A job that makes what its model says is believed. */
	ASSERT_CLOSE(copus__claim_ratio(&m, 1, 4, honest), 1.0, 1e-9);
	CU_ASSERT_TRUE(copus__claim_ratio(&m, 1, 4, 0.9 * honest) <
		       COPUS__DISTRUST);
	/* One that makes on 4 GPUs what the model gives 1 claims too much. */
	CU_ASSERT_TRUE(copus__claim_ratio(&m, 1, 4, 0.4 * honest) >
		       COPUS__DISTRUST);
	CU_ASSERT_TRUE(isinf(copus__claim_ratio(&m, 1, 4, 0.0)));
	/* Nothing to tell without a model or GPUs. */
	CU_ASSERT_EQUAL(copus__claim_ratio(NULL, 1, 4, honest), 0.0);
	CU_ASSERT_EQUAL(copus__claim_ratio(&m, 0, 0, honest), 0.0);
	CU_ASSERT_TRUE(one.goodput < four.goodput);
}

static void control_environment_values_are_found(void)
{
	char *env[] = { "A=1", "SPANK_COPUS_ELASTIC=2-4", "COPUS_GPU_TYPES=t4",
			NULL };

	CU_ASSERT_STRING_EQUAL(copus__env_value(env, 3, "COPUS_ELASTIC"),
			       "2-4");
	CU_ASSERT_STRING_EQUAL(copus__env_value(env, 3, "COPUS_GPU_TYPES"),
			       "t4");
	CU_ASSERT_PTR_NULL(copus__env_value(env, 3, "COPUS"));
	CU_ASSERT_PTR_NULL(copus__env_value(NULL, 0, "A"));
}

static void elastic_values_are_checked(void)
{
	char why[128];
	int lo = 0, hi = 0;

	CU_ASSERT_EQUAL(copus__parse_elastic("2-8", &lo, &hi, why,
					     sizeof(why)), 0);
	CU_ASSERT(lo == 2 && hi == 8);
	CU_ASSERT_EQUAL(copus__parse_elastic("4", &lo, &hi, why,
					     sizeof(why)), 0);
	CU_ASSERT(lo == 4 && hi == 4);
	CU_ASSERT_EQUAL(copus__parse_elastic("8-2", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "smaller than MIN"));
	CU_ASSERT_EQUAL(copus__parse_elastic("0-2", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "at least 1"));
	CU_ASSERT_EQUAL(copus__parse_elastic("a-b", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_elastic("2-", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_elastic("2-4x", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "unexpected 'x'"));
	CU_ASSERT_EQUAL(copus__parse_elastic("-3", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_elastic("", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_elastic(NULL, &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_elastic("1-99999", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_elastic("1-9999999999", &lo, &hi, why,
					     sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "too large"));
}

static void gpu_type_lists_are_checked(void)
{
	char out[160], why[128];

	CU_ASSERT_EQUAL(copus__parse_types("a100,v100", out, sizeof(out), why,
					   sizeof(why)), 0);
	CU_ASSERT_STRING_EQUAL(out, "a100,v100");
	CU_ASSERT_EQUAL(copus__parse_types("a100,,v100", out, sizeof(out), why,
					   sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "empty GPU type"));
	CU_ASSERT_EQUAL(copus__parse_types("a100,a100", out, sizeof(out), why,
					   sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "twice"));
	CU_ASSERT_EQUAL(copus__parse_types("a1 00", out, sizeof(out), why,
					   sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "character ' '"));
	CU_ASSERT_EQUAL(copus__parse_types("abcdefghijklmnopq", out,
					   sizeof(out), why, sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_types("a,b,c,d,e,f,g,h,i", out,
					   sizeof(out), why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "more than 8"));
	CU_ASSERT_EQUAL(copus__parse_types("", out, sizeof(out), why,
					   sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_types("a100,", out, sizeof(out), why,
					   sizeof(why)), -1);
}

/* A hint with a model for a100 and one published as "default". */
static copus_hint _hint(void)
{
	copus_hint h;
	copus_perf_params a = { 0.01, 4e-4, 0.05, 1e-3, 0.02, 5e-4, 1.5 };
	copus_perf_params d = { 0.03, 9e-4, 0.07, 2e-3, 0.04, 7e-4, 2.0 };

	memset(&h, 0, sizeof(h));
	h.version = 1;
	h.job_id = 7;
	h.limits.init_batch = 128;
	h.limits.max_batch = 4096;
	h.limits.min_local = 8;
	h.limits.max_local = 256;
	h.limits.accumulation = true;
	h.grad.sqr = 0.5;
	h.grad.var = 3.0;
	h.progress = 100;
	h.n_perf = 2;
	strcpy(h.perf[0].type, "a100");
	h.perf[0].perf = a;
	strcpy(h.perf[1].type, "default");
	h.perf[1].perf = d;
	return h;
}

static void hint_models_follow_type_names_with_default(void)
{
	const char *const names[3] = { "v100", "a100", "t4" };
	copus_hint h = _hint();
	copus_model m[3];
	const copus_model *p[3];

	CU_ASSERT_EQUAL(copus__hint_models(&h, names, 3, m, p), 3);
	CU_ASSERT_PTR_EQUAL(p[1], &m[1]);
	ASSERT_CLOSE(p[1]->perf.gamma, 1.5, 1e-12);
	ASSERT_CLOSE(p[0]->perf.gamma, 2.0, 1e-12);
	ASSERT_CLOSE(p[2]->grad.var, 3.0, 1e-12);
	ASSERT_CLOSE(p[2]->limits.max_batch, 4096, 1e-12);
	/* Without "default", types the job has not seen have no model. */
	h.n_perf = 1;
	CU_ASSERT_EQUAL(copus__hint_models(&h, names, 3, m, p), 1);
	CU_ASSERT_PTR_NULL(p[0]);
	CU_ASSERT_PTR_NULL(p[2]);
	CU_ASSERT_PTR_NOT_NULL(p[1]);
	/* A model that does not pass the check is left out. */
	h.limits.max_local = 0;
	CU_ASSERT_EQUAL(copus__hint_models(&h, names, 3, m, p), 0);
	CU_ASSERT_PTR_NULL(p[1]);
}

/*
 * A job that ran on several types publishes a model for each, its current
 * type's first: every entry goes to its own type, not only the first.
 */
static void hint_models_give_each_type_its_own_model(void)
{
	const char *const names[3] = { "v100", "a100", "t4" };
	copus_hint h = _hint();
	copus_model m[3];
	const copus_model *p[3];

	strcpy(h.perf[1].type, "t4");
	h.perf[1].perf.gamma = 2.5;
	strcpy(h.perf[2].type, "v100");
	h.perf[2].perf = h.perf[0].perf;
	h.perf[2].perf.gamma = 1.25;
	h.n_perf = 3;
	CU_ASSERT_EQUAL(copus__hint_models(&h, names, 3, m, p), 3);
	CU_ASSERT_PTR_EQUAL_FATAL(p[0], &m[0]);
	CU_ASSERT_PTR_EQUAL_FATAL(p[1], &m[1]);
	CU_ASSERT_PTR_EQUAL_FATAL(p[2], &m[2]);
	ASSERT_CLOSE(p[0]->perf.gamma, 1.25, 1e-12);
	ASSERT_CLOSE(p[1]->perf.gamma, 1.5, 1e-12);
	ASSERT_CLOSE(p[2]->perf.gamma, 2.5, 1e-12);
}

static void remaining_time_needs_a_target_and_a_rate(void)
{
	copus_hint h = _hint();

	ASSERT_CLOSE(copus__remaining(&h, 2.0), -1.0, 0);
	h.target = 300;
	ASSERT_CLOSE(copus__remaining(&h, 2.0), 100.0, 1e-9);
	ASSERT_CLOSE(copus__remaining(&h, 0.0), -1.0, 0);
	ASSERT_CLOSE(copus__remaining(&h, -1.0), -1.0, 0);
	h.progress = 400;
	ASSERT_CLOSE(copus__remaining(&h, 2.0), 0.0, 0);
}

static void model_speedup_grows_with_gpus(void)
{
	copus_hint h = _hint();
	const char *const names[1] = { "a100" };
	copus_model m[1];
	const copus_model *p[1];
	double s1, s4, s8;

	CU_ASSERT_EQUAL(copus__hint_models(&h, names, 1, m, p), 1);
	s1 = copus__model_speedup(p[0], 1, 1);
	s4 = copus__model_speedup(p[0], 1, 4);
	s8 = copus__model_speedup(p[0], 2, 4);
	ASSERT_CLOSE(s1, 1.0, 1e-9);
	CU_ASSERT(s4 > 1.0 && s4 <= 4.0 + 1e-9);
	CU_ASSERT(s8 > 1.0 && s8 <= 8.0 + 1e-9);
	ASSERT_CLOSE(copus__model_speedup(NULL, 1, 1), 0.0, 0);
	ASSERT_CLOSE(copus__model_speedup(p[0], 0, 1), 0.0, 0);
}

/* Usage accrues, halves every half-life, and gives Slurm's factor. */
static void users_usage_decays_and_gives_a_fair_share_factor(void)
{
	struct copus__usage_tab t = { 0 };

	CU_ASSERT_DOUBLE_EQUAL(copus__usage_factor(&t, 5, 2), 1.0, 1e-12);
	copus__usage_decay(&t, 1000, 100);
	CU_ASSERT_EQUAL(copus__usage_charge(&t, 7, 300), 0);
	CU_ASSERT_EQUAL(copus__usage_charge(&t, 5, 100), 0);
	CU_ASSERT_EQUAL(copus__usage_charge(&t, 7, 100), 0);
	CU_ASSERT_EQUAL(copus__usage_charge(&t, 9, -5), 0);
	CU_ASSERT_EQUAL(t.n, 2);
	CU_ASSERT_EQUAL(t.u[0].uid, 5);
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_of(&t, 7), 400, 1e-9);
	/* Shares of 1/2 each: 2^(-2 x 0.8) and 2^(-2 x 0.2). */
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_factor(&t, 7, 2), exp2(-1.6),
			       1e-12);
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_factor(&t, 5, 2), exp2(-0.4),
			       1e-12);
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_factor(&t, 9, 2), 1.0, 1e-12);
	copus__usage_decay(&t, 1200, 100);
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_of(&t, 7), 100, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_of(&t, 5), 25, 1e-9);
	/* No half-life: no decay. */
	copus__usage_decay(&t, 5000, 0);
	CU_ASSERT_DOUBLE_EQUAL(copus__usage_of(&t, 7), 100, 1e-9);
	copus__usage_free(&t);
	CU_ASSERT_EQUAL(t.n, 0);
}

/*
 * Slurm sets a requeued job's submit time to the requeue: the job's record
 * keeps the first, so that a job rescaled by a requeue has still been in
 * the system since it was submitted (its waiting, its age).
 */
static void a_requeued_job_keeps_its_first_submission(void)
{
	struct copus__memo in = { .id = 77 };

	CU_ASSERT_EQUAL(copus__memo_submit(&in, 1000), 1000);
	CU_ASSERT_EQUAL(copus__memo_submit(&in, 5000), 1000);
	CU_ASSERT_EQUAL(in.submit, 1000);
	CU_ASSERT_EQUAL(copus__memo_submit(&in, 0), 1000);
}

/*
 * The run the plugin requeued after it ended of a rescale request is known
 * again by its restart count and end time, and only that run: slurmctld,
 * restarted on a state saved before the requeue, brings it back ended.
 */
static void a_run_requeued_before_is_known_again(void)
{
	struct copus__memo in = { .id = 77 };

	CU_ASSERT_FALSE(copus__memo_revived(NULL, 0, 1000));
	CU_ASSERT_FALSE(copus__memo_revived(&in, 0, 0));
	CU_ASSERT_FALSE(copus__memo_revived(&in, 0, 1000));
	in.revived_rc = 1;
	in.revived_end = 1000;
	CU_ASSERT_TRUE(copus__memo_revived(&in, 1, 1000));
	/* The run after it, and its run before, are other runs. */
	CU_ASSERT_FALSE(copus__memo_revived(&in, 2, 1000));
	CU_ASSERT_FALSE(copus__memo_revived(&in, 0, 1000));
	CU_ASSERT_FALSE(copus__memo_revived(&in, 1, 1001));
}

/*
 * copus_state's lines (statefmt.h): every line the plugin writes reads back
 * as the same record, lines of the previous format still read, and a line
 * with anything out of place (a field too many, a sign, trailing characters,
 * a number out of range) is refused with the field named, not half read.
 */
static void state_lines_read_back_and_refuse_what_is_out_of_place(void)
{
	struct copus__state_rec r, back;
	const char *why = NULL;
	char buf[256];

	CU_ASSERT_EQUAL(copus__state_parse("rescale 17 1764000000 4 2 a100 0 3\n",
					   &r, &why), 0);
	CU_ASSERT_EQUAL(r.kind, COPUS__STATE_RESCALE);
	CU_ASSERT_EQUAL(r.rescale.id, 17);
	CU_ASSERT_EQUAL(r.rescale.asked, 1764000000);
	CU_ASSERT_EQUAL(r.rescale.from, 4);
	CU_ASSERT_EQUAL(r.rescale.to, 2);
	CU_ASSERT_STRING_EQUAL(r.rescale.type, "a100");
	CU_ASSERT_FALSE(r.rescale.gave_up);
	CU_ASSERT_EQUAL(r.rescale.rc, 3);
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_STRING_EQUAL(buf, "rescale 17 1764000000 4 2 a100 0 3\n");

	/* Format 1: no restart count, no rate. */
	CU_ASSERT_EQUAL(copus__state_parse("rescale 5 10 2 0 - 1", &r, &why), 0);
	CU_ASSERT_EQUAL(r.rescale.rc, -1);
	CU_ASSERT_STRING_EQUAL(r.rescale.type, "");
	CU_ASSERT_TRUE(r.rescale.gave_up);
	CU_ASSERT_EQUAL(copus__state_parse("job 9 4 8 123456\n", &r, &why), 0);
	CU_ASSERT_EQUAL(r.kind, COPUS__STATE_JOB);
	CU_ASSERT_EQUAL(r.job.rate, 0.0);

	/* A user's usage comes back exactly. */
	CU_ASSERT_EQUAL(copus__state_parse("user 1000 0.1\n", &r, &why), 0);
	CU_ASSERT_EQUAL(r.kind, COPUS__STATE_USER);
	CU_ASSERT_EQUAL(r.user.uid, 1000);
	r.user.gpu_s = 1e6 / 7.0;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(copus__state_parse(buf, &back, &why), 0);
	CU_ASSERT_EQUAL(back.user.gpu_s, r.user.gpu_s);
	CU_ASSERT_EQUAL(copus__state_parse("job 9 4 8 123456\n", &r, &why), 0);

	/* Attained service and rate come back exactly. */
	r.job.attained = 1234.5678901234567;
	r.job.rate = 1.0 / 3.0;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(copus__state_parse(buf, &back, &why), 0);
	CU_ASSERT_EQUAL(back.job.attained, r.job.attained);
	CU_ASSERT_EQUAL(back.job.rate, r.job.rate);

	/* And the first submission (0 in a line without it). */
	CU_ASSERT_EQUAL(r.job.submit, 0);
	r.job.submit = 1764000123;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(copus__state_parse(buf, &back, &why), 0);
	CU_ASSERT_EQUAL(back.job.submit, 1764000123);

	/* And the plugin's last start of it (0 in a line without it). */
	CU_ASSERT_EQUAL(r.job.launched, 0);
	r.job.launched = 1764000200;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(copus__state_parse(buf, &back, &why), 0);
	CU_ASSERT_EQUAL(back.job.launched, 1764000200);
	/* A job without GPUs that the plugin started has a record too. */
	CU_ASSERT_EQUAL(copus__state_parse("job 9 0 0 0 0 17 18\n", &r, &why),
			0);
	CU_ASSERT_EQUAL(r.job.req_gpus, 0);
	CU_ASSERT_EQUAL(r.job.launched, 18);
	/* The type of its first request: not known in a line without it,
	 * "-" for any, else the type, each back as it went. */
	CU_ASSERT_FALSE(r.job.type_known);
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_STRING_EQUAL(buf, "job 9 0 0 0 0 17 18\n");
	CU_ASSERT_EQUAL(copus__state_parse("job 9 4 0 0 0 17 18 -\n", &r,
					   &why), 0);
	CU_ASSERT_TRUE(r.job.type_known);
	CU_ASSERT_STRING_EQUAL(r.job.type, "");
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_STRING_EQUAL(buf, "job 9 4 0 0 0 17 18 -\n");
	snprintf(r.job.type, sizeof(r.job.type), "a100");
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(copus__state_parse(buf, &back, &why), 0);
	CU_ASSERT_TRUE(back.job.type_known);
	CU_ASSERT_STRING_EQUAL(back.job.type, "a100");
	snprintf(r.job.type, sizeof(r.job.type), "a 100");
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), -1);

	/* The run requeued after it ended of a rescale request. */
	CU_ASSERT_EQUAL(copus__state_parse("revived 9 2 1764000300\n", &r,
					   &why), 0);
	CU_ASSERT_EQUAL(r.kind, COPUS__STATE_REVIVED);
	CU_ASSERT_EQUAL(r.revived.id, 9);
	CU_ASSERT_EQUAL(r.revived.rc, 2);
	CU_ASSERT_EQUAL(r.revived.end, 1764000300);
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), 0);
	CU_ASSERT_STRING_EQUAL(buf, "revived 9 2 1764000300\n");
	r.revived.end = 0;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), -1);

	static const struct {
		const char *line, *field;
	} bad[] = {
		{ "rescale 17 1764000000 4 2 a100 0 3 junk\n", "number of fields" },
		{ "rescale 17 1764000000 4 2 a100 0x\n", "GAVE_UP" },
		{ "rescale 17 1764000000 4 2 a100 2 3\n", "GAVE_UP" },
		{ "rescale 17 -5 4 2 a100 0 3\n", "ASKED" },
		{ "rescale 17 5 0 2 a100 0 3\n", "FROM" },
		{ "rescale 17 5 4 4097 a100 0 3\n", "TO" },
		{ "rescale 17 5 4 2 a100xxxxxxxxxxxxxxx 0 3\n", "TYPE" },
		{ "rescale 17 5 4 2 a100 0 -2\n", "RC" },
		{ "job -1 4 8 1 0\n", "ID" },
		{ "job 4294967296 4 8 1 0\n", "ID" },
		{ "job +9 4 8 1 0\n", "ID" },
		{ "job 9 -1 8 1 0\n", "REQ" },
		{ "job 9 4 8 nan 0\n", "ATTAINED" },
		{ "job 9 4 8 -1 0\n", "ATTAINED" },
		{ "job 9 4 8 1 1e999\n", "RATE" },
		{ "job 9 4 8 1 0.5x\n", "RATE" },
		{ "job 9 4 8 1 0 -5\n", "SUBMIT" },
		{ "job 9 4 8 1 0 17x\n", "SUBMIT" },
		{ "job 9 4 8 1 0 17 -1\n", "LAUNCHED" },
		{ "job 9 4 8 1 0 17 1x\n", "LAUNCHED" },
		{ "job 9 4 8 1 0 17 1 a100 2\n", "number of fields" },
		{ "job 9 4 8 1 0 17 1 abcdefghijklmnop\n", "TYPE" },
		{ "job 9 4 8 1 0 17 1 a\x01\n", "layout" },
		{ "job  9 4 8 1 0\n", "layout" },
		{ "job 9 4 8 1 0 \n", "layout" },
		{ "job 9 4\t8 1 0\n", "layout" },
		{ "task 9 4 8 1 0\n", "kind" },
		{ "user 4294967295 1\n", "UID" },
		{ "user -1 1\n", "UID" },
		{ "user 7 -1\n", "USED" },
		{ "user 7 inf\n", "USED" },
		{ "user 7 1 2\n", "number of fields" },
		{ "revived 9 2\n", "number of fields" },
		{ "revived 0 2 17\n", "ID" },
		{ "revived 9 -1 17\n", "RC" },
		{ "revived 9 2 0\n", "END" },
		{ "revived 9 2 17x\n", "END" },
		{ "\n", "layout" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		CU_ASSERT_EQUAL(copus__state_parse(bad[i].line, &r, &why), -1);
		CU_ASSERT_PTR_NOT_NULL(why);
		if (why && !strstr(why, bad[i].field))
			fprintf(stderr, "%s: why '%s', expected '%s'\n",
				bad[i].line, why, bad[i].field);
		CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, bad[i].field) : NULL);
	}

	/* What the reader would refuse is not written either. */
	memset(&r, 0, sizeof(r));
	r.kind = COPUS__STATE_JOB;
	r.job.id = 3;
	r.job.req_gpus = 1;
	r.job.rate = INFINITY;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, sizeof(buf)), -1);
	r.job.rate = 0.0;
	CU_ASSERT_EQUAL(copus__state_format(&r, buf, 8), -1);
}

/*
 * --gpu-multiple=N: a number of GPUs; a request off its multiples, or an
 * elastic range that holds none, is refused at submission.
 */
static void gpu_multiples_are_checked(void)
{
	static const char *const types[] = { "a100" };
	struct copus__submit ok = {
		.elastic = "2-8", .multiple = "2",
		.tres_per_node = "gres:gpu:a100:4",
		.cluster_types = types, .ntypes = 1,
	}, s;
	char why[128];
	int n = 0;

	CU_ASSERT_EQUAL(copus__parse_multiple("2", &n, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_EQUAL(copus__parse_multiple("0", &n, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "between 1 and 4096"));
	CU_ASSERT_EQUAL(copus__parse_multiple("2x", &n, why, sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_multiple("", &n, why, sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_multiple("9999999999", &n, why,
					      sizeof(why)), -1);
	CU_ASSERT_EQUAL(copus__parse_multiple("5000", &n, why, sizeof(why)),
			-1);

	CU_ASSERT_EQUAL(_submit(&ok), 0);
	s = ok;
	s.tres_per_node = "gres:gpu:a100:3";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--gres asks for 3 GPU(s), not "
					     "a multiple of --gpu-multiple=2"));
	s = ok;
	s.elastic = "3-3";
	s.tres_per_node = "gres:gpu:a100:3";
	s.multiple = "4";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	s.multiple = "2";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	s = ok;
	s.elastic = "5-7";
	s.multiple = "4";
	s.tres_per_node = "gres:gpu:a100:4";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--elastic=5-7 holds no multiple "
					     "of --gpu-multiple=4"));
	s = ok;
	s.multiple = "two";
	CU_ASSERT_EQUAL(_submit(&s), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(_last, "--gpu-multiple=two"));
	/* A rigid job on a multiple is fine. */
	s = ok;
	s.elastic = NULL;
	CU_ASSERT_EQUAL(_submit(&s), 0);
}

/* The line of text that starts with start, or NULL. */
static const char *_row(const char *text, const char *start)
{
	const char *p = text;

	while ((p = strstr(p, start))) {
		if (p == text || p[-1] == '\n')
			return p;
		p++;
	}
	return NULL;
}

static void lock_times_are_counted_by_phase_with_a_histogram(void)
{
	struct copus__stats st = { 0 };
	struct copus__lock_stats *l = &st.locks[COPUS__LOCK_snapshot];
	struct copus__lock_cpu worked = { 2400, 0, 0 }, off = { 1e4, 3, 1 };
	struct copus__lock_cpu later = { 900, 7, 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	CU_ASSERT_STRING_EQUAL(copus__lock_phase_name(COPUS__LOCK_actions),
			       "actions");
	CU_ASSERT_STRING_EQUAL(copus__lock_phase_name(COPUS__LOCK_NPHASES),
			       "?");
	copus__lock_count(l, 5, 50, NULL);	/* 50 us held */
	copus__lock_count(l, 20, 2500, &worked);	/* 2.5 ms, on the CPU */
	copus__lock_count(l, 0, 2e7, &off);	/* 20 s: beyond every bound */
	copus__lock_count(l, -1, 1000, &later);	/* a clock step: wait 0 */
	CU_ASSERT_EQUAL(l->cycles, 4);
	CU_ASSERT_DOUBLE_EQUAL(l->hold.max, 2e7, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(l->hold.last, 1000, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(l->wait.max, 20, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(l->wait.last, 0, 1e-9);
	/* Cumulative: 100 us, 1 ms, 10 ms, 100 ms, 1 s, 10 s, any. */
	CU_ASSERT_EQUAL(l->hold.le[0], 1);
	CU_ASSERT_EQUAL(l->hold.le[1], 2);	/* 1 ms is at most 1 ms */
	CU_ASSERT_EQUAL(l->hold.le[2], 3);
	CU_ASSERT_EQUAL(l->hold.le[5], 3);
	CU_ASSERT_EQUAL(l->hold.le[COPUS__LOCK_BUCKETS - 1], 4);
	CU_ASSERT_EQUAL(l->wait.le[0], 4);
	l->yields = 2;

	f = open_memstream(&text, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	copus__lock_stats_rows(&st, f);
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_cycles\t4\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_mean_us\t"
					  "5.00089e+06\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_max_us\t"
					  "2e+07\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_le_1ms\t2\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_le_10s\t3\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_le_inf\t4\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_actions_cycles\t0\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_yields\t2\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_config_wait_max_us\t0\t"));
	/* The longest hold (20 s) used 10 ms of CPU, preempted 3 times;
	 * the mean is over all four holds (NULL counts as none). */
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_max_cpu_us\t"
					  "10000\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_max_preempted"
					  "\t3\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_max_blocked"
					  "\t1\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_snapshot_hold_cpu_mean_us\t"
					  "3325\t"));
	CU_ASSERT_PTR_NOT_NULL(_row(text, "lock_actions_hold_max_cpu_us\t0\t"));
	free(text);

	text = NULL;
	f = open_memstream(&text, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	copus__lock_stats_prom(&st, f);
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "# TYPE copus_lock_hold_seconds "
					    "histogram\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_hold_seconds_bucket"
					    "{phase=\"snapshot\",le=\"0.001\"} "
					    "2\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_hold_seconds_bucket"
					    "{phase=\"snapshot\",le=\"+Inf\"} "
					    "4\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_hold_max_cpu_seconds"
					    "{phase=\"snapshot\"} 0.01\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_hold_max_preemptions"
					    "{phase=\"snapshot\"} 3\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_hold_seconds_count"
					    "{phase=\"snapshot\"} 4\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_hold_seconds_sum"
					    "{phase=\"snapshot\"} 20.0036\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_wait_max_seconds"
					    "{phase=\"snapshot\"} 2e-05\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_wait_seconds_count"
					    "{phase=\"rescale\"} 0\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncopus_lock_yields_total"
					    "{phase=\"snapshot\"} 2\n"));
	free(text);
}

/* path holds the n bytes of data (sparse past them up to size). */
static void _file(const char *path, const char *data, size_t n, off_t size)
{
	FILE *f = fopen(path, "wb");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(data, 1, n, f), n);
	CU_ASSERT_EQUAL(fflush(f), 0);
	if (size > (off_t)n)
		CU_ASSERT_EQUAL(ftruncate(fileno(f), size), 0);
	fclose(f);
}

/*
 * The one whole-file reader of the planner's constants and the simulator's
 * inputs: text comes back NUL-terminated; a missing file, one with a NUL
 * byte and one over 64 MiB are refused by name, saying why.
 */
static void whole_files_are_read_by_one_rule(void)
{
	char dir[] = "/tmp/copus-file-XXXXXX", path[64], err[256], *text;
	size_t len = 99;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	_file(path, "{\"a\": 1}\n", 9, 0);
	ASSERT_STATUS(copus__file_read(path, &text, &len, err, sizeof(err)),
		      COPUS_OK);
	CU_ASSERT_EQUAL(len, 9);
	CU_ASSERT_STRING_EQUAL(text, "{\"a\": 1}\n");
	free(text);
	_file(path, "", 0, 0);
	ASSERT_STATUS(copus__file_read(path, &text, &len, err, sizeof(err)),
		      COPUS_OK);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_STRING_EQUAL(text, "");
	free(text);
	_file(path, "ab\0cd", 5, 0);
	ASSERT_STATUS(copus__file_read(path, &text, NULL, err, sizeof(err)),
		      COPUS_EIO);
	CU_ASSERT_PTR_NULL(text);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/f: a NUL byte at offset 2"));
	_file(path, "x", 1, (off_t)COPUS__FILE_MAX + 1);
	ASSERT_STATUS(copus__file_read(path, &text, NULL, err, sizeof(err)),
		      COPUS_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/f: larger than 64 MiB"));
	unlink(path);
	ASSERT_STATUS(copus__file_read(path, &text, NULL, err, sizeof(err)),
		      COPUS_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/f: cannot open: No such file"));
	rmdir(dir);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(submissions_that_can_never_run_are_refused),
		TEST(gpu_multiples_are_checked),
		TEST(control_environment_values_are_found),
		TEST(a_rosy_model_is_caught_by_the_progress_it_makes),
		TEST(elastic_values_are_checked),
		TEST(gpu_type_lists_are_checked),
		TEST(hint_models_follow_type_names_with_default),
		TEST(hint_models_give_each_type_its_own_model),
		TEST(remaining_time_needs_a_target_and_a_rate),
		TEST(model_speedup_grows_with_gpus),
		TEST(a_run_requeued_before_is_known_again),
		TEST(state_lines_read_back_and_refuse_what_is_out_of_place),
		TEST(a_requeued_job_keeps_its_first_submission),
		TEST(users_usage_decays_and_gives_a_fair_share_factor),
		TEST(lock_times_are_counted_by_phase_with_a_histogram),
		TEST(whole_files_are_read_by_one_rule),
	};
	return RUN_TESTS("plugin-sched", tests);
}
