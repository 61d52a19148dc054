/*
 * The Slurm-free parts of sched/copus and spank_copus: SchedulerParameters
 * keys, the --elastic and --gpu-types checks, and the interim priority-order
 * placement.
 */
#include <string.h>

#include "copus/error.h"
#include "harness.h"
#include "options.h"
#include "sched.h"

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
				"copus_checkpoint_deadline=30,copus_max_jobs=7",
				&p, _collect, NULL);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(_reports, 0);
	CU_ASSERT_EQUAL(p.interval, 3);
	CU_ASSERT_EQUAL(p.restart_delay, 0);
	CU_ASSERT_EQUAL(p.ckpt_deadline, 30);
	CU_ASSERT_EQUAL(p.max_jobs, 7);
	ASSERT_CLOSE(p.fairness, -0.5, 1e-12);
	CU_ASSERT_EQUAL(copus__params_parse(NULL, &p, _collect, NULL), 0);
	CU_ASSERT_EQUAL(p.interval, 10);
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

static void _nodes(struct copus__node *n, int count, const char *type,
		   int gpus)
{
	int i;

	for (i = 0; i < count; i++) {
		memset(&n[i], 0, sizeof(n[i]));
		snprintf(n[i].type, sizeof(n[i].type), "%s", type);
		n[i].gpus = n[i].gpus_free = gpus;
		n[i].usable = 1;
	}
}

static struct copus__job _job(uint32_t id, uint32_t prio, int nodes, int gpn,
			      const char *type)
{
	struct copus__job j;

	memset(&j, 0, sizeof(j));
	j.id = id;
	j.priority = prio;
	j.submit = id;
	j.nodes = nodes;
	j.gpus_per_node = gpn;
	snprintf(j.type, sizeof(j.type), "%s", type);
	return j;
}

static void jobs_start_in_priority_order_and_block_lower_ones(void)
{
	struct copus__node n[2];
	struct copus__job j[4];
	struct copus__decision d[4];
	int buf[16];

	_nodes(n, 2, "a100", 4);
	j[0] = _job(1, 10, 1, 4, "");	/* low priority, would fit */
	j[1] = _job(2, 30, 2, 3, "");	/* highest: both nodes */
	j[2] = _job(3, 20, 1, 2, "");	/* does not fit after job 2 */
	j[3] = _job(4, 5, 1, 1, "");
	ASSERT_STATUS(copus__place_priority(n, 2, j, 4, d, buf, 16), 4);
	/* The jobs are sorted in place: decision i is job i's. */
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(d[i].id, j[i].id);
	CU_ASSERT_EQUAL(d[0].id, 2);
	CU_ASSERT_EQUAL(d[0].verdict, COPUS__START);
	CU_ASSERT(d[0].nodes[0] != d[0].nodes[1]);
	CU_ASSERT_EQUAL(d[1].id, 3);
	CU_ASSERT_EQUAL(d[1].verdict, COPUS__WAIT_RESOURCES);
	/* Job 1 would fit nowhere anyway; job 4 would fit but must wait. */
	CU_ASSERT_EQUAL(d[3].id, 4);
	CU_ASSERT_EQUAL(d[3].verdict, COPUS__WAIT_PRIORITY);
	CU_ASSERT_EQUAL(n[0].gpus_free + n[1].gpus_free, 2);
}

static void types_nodes_and_partitions_are_honoured(void)
{
	struct copus__node n[4];
	struct copus__job j[4];
	struct copus__decision d[4];
	uint8_t only_n4[4] = { 0, 0, 0, 1 };
	int buf[16];

	_nodes(n, 2, "a100", 4);
	_nodes(n + 2, 2, "v100", 4);
	n[2].usable = 0;		/* drained */
	j[0] = _job(1, 50, 1, 4, "v100");
	j[1] = _job(2, 40, 1, 1, "v100");
	j[1].part = 1;
	j[2] = _job(3, 30, 1, 8, "a100");	/* never: 8 GPUs per node */
	j[3] = _job(4, 20, 1, 2, "");
	j[3].eligible = only_n4;
	ASSERT_STATUS(copus__place_priority(n, 4, j, 4, d, buf, 16), 4);
	CU_ASSERT_EQUAL(d[0].verdict, COPUS__START);
	CU_ASSERT_EQUAL(d[0].nodes[0], 3);	/* the only usable v100 */
	/* Another partition is not blocked by the first one's wait. */
	CU_ASSERT_EQUAL(d[1].verdict, COPUS__WAIT_RESOURCES);
	CU_ASSERT_EQUAL(d[2].verdict, COPUS__NEVER);
	CU_ASSERT_EQUAL(d[3].verdict, COPUS__WAIT_RESOURCES);
}

static void elastic_types_and_best_fit(void)
{
	struct copus__node n[3];
	struct copus__job j[1];
	struct copus__decision d[1];
	int buf[4];

	_nodes(n, 3, "a100", 4);
	snprintf(n[2].type, sizeof(n[2].type), "h100");
	n[0].gpus_free = 1;
	n[1].gpus_free = 3;
	j[0] = _job(1, 1, 1, 2, "");
	j[0].ntypes = 2;
	snprintf(j[0].types[0], 16, "a100");
	snprintf(j[0].types[1], 16, "l4");
	ASSERT_STATUS(copus__place_priority(n, 3, j, 1, d, buf, 4), 1);
	CU_ASSERT_EQUAL(d[0].verdict, COPUS__START);
	CU_ASSERT_EQUAL(d[0].nodes[0], 1);	/* fewest free that fits */
	ASSERT_STATUS(copus__place_priority(n, 3, j, 1, d, buf, 0),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus__place_priority(NULL, 3, j, 1, d, buf, 4),
		      COPUS_EINVAL);
}

static void elastic_jobs_grow_when_idle_and_shrink_for_waiters(void)
{
	struct copus__node n[2];
	struct copus__running r[3];
	struct copus__job w;
	int t[3];

	_nodes(n, 2, "a100", 4);
	n[0].gpus_free = 3;		/* r[0] holds 1 */
	n[1].gpus_free = 0;		/* r[1] holds 2, rigid r[2] holds 2 */
	memset(r, 0, sizeof(r));
	r[0] = (struct copus__running){ 1, 0, 1, 1, 1, 8, 0 };
	r[1] = (struct copus__running){ 2, 1, 1, 2, 1, 2, 0 };
	r[2] = (struct copus__running){ 3, 1, 1, 2, 0, 0, 0 };
	/* Nothing waits: job 1 grows to its node's 4 GPUs, job 2 is at max. */
	ASSERT_STATUS(copus__rescale_interim(n, 2, r, 3, NULL, 100, 10, t), 1);
	CU_ASSERT_EQUAL(t[0], 4);
	CU_ASSERT_EQUAL(t[1], 0);
	CU_ASSERT_EQUAL(t[2], 0);
	/* Too soon after its last change: left alone. */
	ASSERT_STATUS(copus__rescale_interim(n, 2, r, 3, NULL, 5, 10, t), 0);
	/* A one-node job needing 2 GPUs waits: job 1 (now at 4 on node 0,
	 * none free) shrinks to 2; job 2 could only go to 0 and is kept. */
	r[0].gpus_per_node = 4;
	n[0].gpus_free = 0;
	w = _job(9, 1, 1, 2, "a100");
	ASSERT_STATUS(copus__rescale_interim(n, 2, r, 3, &w, 100, 10, t), 1);
	CU_ASSERT_EQUAL(t[0], 2);
	CU_ASSERT_EQUAL(t[1], 0);
	/* Never below the minimum. */
	r[0].elastic_min = 3;
	ASSERT_STATUS(copus__rescale_interim(n, 2, r, 3, &w, 100, 10, t), 0);
	/* A waiter of another type does not shrink anyone. */
	r[0].elastic_min = 1;
	w = _job(9, 1, 1, 2, "v100");
	ASSERT_STATUS(copus__rescale_interim(n, 2, r, 3, &w, 100, 10, t), 0);
	ASSERT_STATUS(copus__rescale_interim(NULL, 2, r, 3, NULL, 0, 0, t),
		      COPUS_EINVAL);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(params_are_parsed_and_slurm_keys_skipped),
		TEST(bad_params_are_reported_by_key_and_value),
		TEST(elastic_values_are_checked),
		TEST(gpu_type_lists_are_checked),
		TEST(jobs_start_in_priority_order_and_block_lower_ones),
		TEST(types_nodes_and_partitions_are_honoured),
		TEST(elastic_types_and_best_fit),
		TEST(elastic_jobs_grow_when_idle_and_shrink_for_waiters),
	};
	return RUN_TESTS("plugin-sched", tests);
}
