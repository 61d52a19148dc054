/*
 * A job's speed on the GPU types it has not run on, as sched/copus's round
 * estimates it (plugin/round-models.c) on rounds built by hand
 * (plugin-round-world.h): from the GPU constants, from a job of the same
 * application measured on both types, and under a site's own type names;
 * and what the policy then decides with those models.
 */
#include <stdio.h>
#include <string.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/policy.h"
#include "plugin-round-world.h"

/*
 * Gives the job a hint whose model is measured on the types named (a JSON
 * "perf" member's inside: "t4":[...]), the rest as rw_hint's.
 */
static void _hint_perf(const struct copus__round_job *j, const char *perf)
{
	char rest[COPUS_HINT_MAX_LEN + 1];

	snprintf(rest, sizeof(rest), "\"b0\":128,\"bmax\":4096,\"lmin\":8,"
		 "\"lmax\":256,\"acc\":true,\"sqr\":0.01,\"var\":10,"
		 "\"prog\":10,\"tgt\":100000,\"perf\":{%s}", perf);
	rw_hint_text(j, rest);
}

/* The compute time of a micro-batch of 128 in the model the job got on t. */
static double _compute_on(const struct copus__round_job *j, int t)
{
	const copus_model *m;

	CU_ASSERT_FATAL(j->job >= 0 && W.r.jobs[j->job].models != NULL);
	m = W.r.jobs[j->job].models[t];
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	return m->perf.alpha_c + 128 * m->perf.beta_c;
}

#define T4_PERF "[0.08,0.008,0.05,0.002,0.005,0.0005,1.5]"

/*
 * Node 1 of t4 GPUs, node 2 of a100s (type 0), all free. A job whose hint
 * has a model on the t4 only gets one on the a100 too, estimated from the
 * GPU constants: faster there, as an a100 is faster than a t4; the policy
 * then starts it on the a100s. Its t4 model stays the measured one.
 */
static void a_job_measured_on_one_type_gets_an_estimate_on_another(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	W.r.ntypes = 2;
	strcpy(W.r.types[1], "t4");
	W.nodes[0].gpu_type = 1;
	j = rw_pending(1, 1, 4, 1, 4);
	_hint_perf(j, "\"t4\":" T4_PERF);
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_EQUAL(j->dtype, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(W.r.estimated);
	CU_ASSERT_TRUE(W.r.estimated[j->job * 2 + 0]);
	CU_ASSERT_FALSE(W.r.estimated[j->job * 2 + 1]);
	ASSERT_CLOSE(_compute_on(j, 1), 0.08 + 128 * 0.008, 1e-12);
	if (!(_compute_on(j, 0) < _compute_on(j, 1)))
		fprintf(stderr, "a100 %g s, t4 %g s\n", _compute_on(j, 0),
			_compute_on(j, 1));
	CU_ASSERT_TRUE(_compute_on(j, 0) < _compute_on(j, 1));
	ASSERT_ACTION(j, COPUS__ACT_START);
}

/*
 * Two nodes, one of a100 GPUs and one of t4s, both free, in either order of
 * the types. A job with no hint yet starts on the a100s: the policy gets
 * the types' speeds from their constants.
 */
static void a_job_with_no_hint_starts_on_the_faster_type(void)
{
	struct copus__round_job *j;

	for (int a100 = 0; a100 < 2; a100++) {
		rw_cluster(2, 4);
		W.r.ntypes = 2;
		strcpy(W.r.types[a100], "a100");
		strcpy(W.r.types[1 - a100], "t4");
		W.nodes[0].gpu_type = 1 - a100;
		W.nodes[1].gpu_type = a100;
		j = rw_pending(1, 1, 4, 1, 4);
		rw_decide();
		CU_ASSERT_FATAL(j->job >= 0);
		ASSERT_ACTION(j, COPUS__ACT_START);
		CU_ASSERT_EQUAL(j->dtype, a100);
	}
}

/*
 * What the round's jobs measured comes before the constants: another job
 * of the same application measured the a100 twice as slow as the t4 here,
 * so the job measured on the t4 only gets an a100 estimate twice as slow.
 * A job whose claims the round distrusts is no evidence.
 */
static void a_ratio_measured_by_a_job_of_the_same_application_comes_first(void)
{
	struct copus__round_job *a, *b;

	rw_cluster(2, 4);
	W.r.ntypes = 2;
	strcpy(W.r.types[1], "t4");
	W.nodes[0].gpu_type = 1;
	a = rw_pending(1, 1, 4, 1, 4);
	b = rw_pending(2, 1, 4, 1, 4);
	strcpy(a->app, "bert");
	strcpy(b->app, "bert");
	_hint_perf(a, "\"t4\":" T4_PERF);
	_hint_perf(b, "\"t4\":[0.01,0.001,0.05,0.002,0.005,0.0005,1.5],"
		   "\"a100\":[0.02,0.002,0.05,0.002,0.005,0.0005,1.5]");
	rw_decide();
	CU_ASSERT_FATAL(a->job >= 0 && b->job >= 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(W.r.estimated);
	CU_ASSERT_TRUE(W.r.estimated[a->job * 2 + 0]);
	CU_ASSERT_FALSE(W.r.estimated[b->job * 2 + 0]);
	ASSERT_CLOSE(_compute_on(a, 0), 2 * (0.08 + 128 * 0.008), 1e-9);
	/* b's claims distrusted: a is back to the constants. */
	copus__round_free(&W.r);
	a->job = b->job = -1;
	copus__memo_find(&W.s, b->id)->claim_ratio = 2 * COPUS__DISTRUST;
	rw_decide();
	CU_ASSERT_FATAL(a->job >= 0);
	CU_ASSERT_TRUE(_compute_on(a, 0) < _compute_on(a, 1));
}

/*
 * A site whose GRES types have names of its own (aws for its T4s, dgx-ext
 * for its A100s): without a constants file the plugin knows neither, and a
 * job measured on aws gets no estimate on dgx-ext; with a file that names
 * them after the built-in types, it gets one, faster there.
 */
static void site_type_names_get_estimates_from_the_constants_file(void)
{
	struct copus__round_job *j;

	rw_cluster(2, 4);
	rw_site_types();
	W.nodes[0].gpu_type = 1;
	j = rw_pending(1, 1, 4, 1, 4);
	_hint_perf(j, "\"aws\":" T4_PERF);
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_TRUE(W.r.estimated == NULL || !W.r.estimated[j->job * 2 + 0]);

	rw_site_constants(true);
	copus__round_free(&W.r);
	j->job = -1;
	rw_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(W.r.estimated);
	CU_ASSERT_TRUE(W.r.estimated[j->job * 2 + 0]);
	/* As much faster as an a100 is than a t4 by the table. */
	ASSERT_CLOSE(_compute_on(j, 1) / _compute_on(j, 0),
		     copus_gpu_type_speed("a100") / copus_gpu_type_speed("t4"),
		     1e-9);
	rw_site_constants(false);
}

/*
 * An elastic job the plugin resized on aws has its request set to aws
 * (gres:gpu:aws:N); that must not tie it to aws. Submitted with no type,
 * it moves to the free dgx-ext GPUs, faster by the constants, as a job
 * first seen on aws would; a job that asked for aws itself stays there.
 */
static void a_type_the_plugin_set_does_not_tie_an_elastic_job(void)
{
	struct copus__round_job *j;
	struct copus__memo *in;

	for (int asked = 0; asked < 2; asked++) {
		rw_cluster(4, 4);
		rw_site_types();
		W.nodes[0].gpu_type = W.nodes[1].gpu_type = 1;
		rw_site_constants(true);
		j = rw_running(1, 0, 2, 4, 1, 16, NOW - 600);
		j->alloc_type = 1;
		strcpy(j->type_req, "aws");
		strcpy(j->app, "imagenet");
		_hint_perf(j, "\"aws\":" T4_PERF);
		in = copus__memo_find(&W.s, j->id);
		CU_ASSERT_PTR_NOT_NULL_FATAL(in);
		in->rate = 10.0; /* 9999 s left */
		in->type_known = true;
		strcpy(in->type_req, asked ? "aws" : "");
		rw_decide();
		if (asked) {
			ASSERT_ACTION(j, COPUS__ACT_NONE);
		} else {
			ASSERT_ACTION(j, COPUS__ACT_ASK);
			CU_ASSERT_EQUAL(j->dtype, 0);
		}
	}
	rw_site_constants(false);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(a_job_measured_on_one_type_gets_an_estimate_on_another),
		TEST(a_job_with_no_hint_starts_on_the_faster_type),
		TEST(a_ratio_measured_by_a_job_of_the_same_application_comes_first),
		TEST(site_type_names_get_estimates_from_the_constants_file),
		TEST(a_type_the_plugin_set_does_not_tie_an_elastic_job),
	};
	int rc = RUN_TESTS("plugin-types", tests);

	rw_free();
	return rc;
}
