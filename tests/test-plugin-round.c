/*
 * The decision phase of sched/copus (plugin/round.c), run on rounds built
 * by hand the way the snapshot fills them: no root, no Slurm daemons, the
 * copus policy as the plugin creates it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/planner.h"
#include "copus/policy.h"
#include "harness.h"
#include "round.h"
#include "sched_copus.h"

#define NODES 4
#define JOBS 8
#define NOW 1000000

/* A round and the plugin state it is decided with. */
static struct copus__sched _s;
static struct copus__round _r;
static copus_node _nodes[NODES];
static char _names[NODES][64];
static int _free[NODES], _cfg[NODES];
static struct copus__round_job _rj[JOBS];
static uint8_t _eligible[JOBS][NODES];
static copus_slot _alloc[JOBS][NODES];

/* A cluster of n nodes with gpus a100 GPUs each, all free and usable. */
static void _cluster(int n, int gpus)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	int i;

	if (_s.policy)
		copus_policy_destroy(_s.policy);
	copus__memo_free(&_s);
	copus__usage_free(&_s.usage);
	copus__round_free(&_r);
	copus__planner_free(&_s.planner);
	memset(&_s, 0, sizeof(_s));
	memset(&_r, 0, sizeof(_r));
	memset(_rj, 0, sizeof(_rj));
	copus__params_default(&_s.params);
	/* The policy as sched_copus.c creates it. */
	prm.interval = _s.params.interval;
	prm.restart_delay = _s.params.restart_cost;
	prm.fairness_p = _s.params.fairness;
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create("copus", &prm, &_s.policy), COPUS_OK);
	_r.when = NOW;
	_r.nnodes = n;
	_r.nodes = _nodes;
	_r.names = _names;
	_r.free = _free;
	_r.cfg = _cfg;
	_r.ntypes = 1;
	strcpy(_r.types[0], "a100");
	_r.rj = _rj;
	for (i = 0; i < n; i++) {
		_nodes[i].gpu_type = 0;
		_nodes[i].gpus = gpus;
		_nodes[i].usable = true;
		_free[i] = _cfg[i] = gpus;
		snprintf(_names[i], sizeof(_names[i]), "n%d", i + 1);
	}
}

static struct copus__round_job *_job(uint32_t id, int emin, int emax)
{
	struct copus__round_job *j = &_rj[_r.nrj++];

	memset(j, 0, sizeof(*j));
	j->id = id;
	j->emin = emin;
	j->emax = emax;
	j->rigid = emax == 0;
	j->priority = 1000 - id;
	j->submit = NOW - 600 + id;
	j->job = -1;
	return j;
}

/*
 * A pending job asking for nodes x gpn GPUs, elastic within [emin, emax]
 * (0, 0: rigid), that may use every node.
 */
static struct copus__round_job *_pending(uint32_t id, int nodes, int gpn,
					 int emin, int emax)
{
	struct copus__round_job *j = _job(id, emin, emax);
	int i;

	j->nodes_req = nodes;
	j->gpn_req = gpn;
	j->eligible = _eligible[j - _rj];
	for (i = 0; i < _r.nnodes; i++)
		j->eligible[i] = 1;
	_r.npending++;
	return j;
}

/*
 * A job running since start with gpn GPUs on each of nodes nodes from
 * node first on. Its GPUs are not free; those of an elastic job are the
 * policy's to use, those of a rigid one are not (as the snapshot counts
 * them).
 */
static struct copus__round_job *_running(uint32_t id, int first, int nodes,
					 int gpn, int emin, int emax,
					 time_t start)
{
	struct copus__round_job *j = _job(id, emin, emax);
	int k;

	j->running = true;
	j->start = start;
	j->nodes_req = nodes;
	j->gpn_req = gpn;
	j->alloc = _alloc[j - _rj];
	for (k = 0; k < nodes; k++) {
		j->alloc[k].node = first + k;
		j->alloc[k].gpus = gpn;
		_free[first + k] -= gpn;
		if (j->rigid)
			_nodes[first + k].gpus -= gpn;
	}
	j->nalloc = nodes;
	j->cur_gpus = nodes * gpn;
	_r.nrunning++;
	return j;
}

/*
 * Gives the job a record with a hint that has a model for a100, and a
 * granularity when gran > 1.
 */
static void _hint_gran(const struct copus__round_job *j, int gran)
{
	char text[COPUS_HINT_MAX_LEN + 1], err[128], g[32] = "";
	struct copus__memo *in = copus__memo_get(&_s, j->id);

	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	if (gran > 1)
		snprintf(g, sizeof(g), ",\"gran\":%d", gran);
	snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":%u,"
		 "\"st\":\"running\",\"step\":10,\"rc\":%d,\"t\":%d,"
		 "\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,"
		 "\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":10,"
		 "\"tgt\":100000%s,\"perf\":{\"a100\":[0.02,0.002,0.05,0.002,"
		 "0.005,0.0005,1.5]}}", j->id, j->restarts, NOW - 10, g);
	ASSERT_STATUS(copus_hint_parse(text, &in->hint, err, sizeof(err)),
		      COPUS_OK);
	in->have_hint = true;
	in->req_gpus = j->running ? j->cur_gpus : j->nodes_req * j->gpn_req;
}

static void _hint(const struct copus__round_job *j)
{
	_hint_gran(j, 1);
}

/*
 * A model too big for one GPU: a 2.5-billion-parameter transformer (32
 * layers of hidden size 2560), whose weights, gradients and Adam's state
 * take 16 bytes a parameter, 40 GB, more than one a100 holds; on two GPUs
 * its tensor or pipeline split, or ZeRO's split of the optimizer's state
 * over data ranks, brings it within reach.
 */
#define BIG_MODEL "{\"a\":\"tf\",\"dt\":2,\"l\":32,\"h\":2560," \
		  "\"n\":32,\"s\":512,\"v\":50000}"

/* Gives the job a record with a hint that describes its model (no perf). */
static void _hint_model(const struct copus__round_job *j, const char *mdl)
{
	char text[COPUS_HINT_MAX_LEN + 1], err[128];
	struct copus__memo *in = copus__memo_get(&_s, j->id);

	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":%u,"
		 "\"st\":\"running\",\"step\":10,\"rc\":%d,\"t\":%d,"
		 "\"b0\":16,\"bmax\":16,\"lmin\":1,\"lmax\":16,"
		 "\"acc\":true,\"sqr\":0,\"var\":0,\"prog\":10,"
		 "\"tgt\":100000,\"mdl\":%s}", j->id, j->restarts, NOW - 10,
		 mdl);
	ASSERT_STATUS(copus_hint_parse(text, &in->hint, err, sizeof(err)),
		      COPUS_OK);
	if (!in->hint.has_model)
		fprintf(stderr, "the hint has no model: %s\n", err);
	in->have_hint = true;
	in->req_gpus = j->running ? j->cur_gpus : j->nodes_req * j->gpn_req;
}

/* The plan of a job's table for count GPUs on one node, or NULL. */
static const struct copus__plan *_plan_on(const struct copus__round_job *j,
					  int count)
{
	return copus__plan_find(j->plans, j->ncells, 0, count, 1);
}

static void _decide(void)
{
	copus__round_decide(&_s, &_r);
}

/* Writes text to a fresh file; its path in path (len bytes). */
static void _write_file(const char *text, char *path, size_t len)
{
	FILE *f;
	int fd;

	snprintf(path, len, "/tmp/copus-test-gpus.XXXXXX");
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/* Two GPU types under a site's own names: dgx-ext (index 0) and aws. */
static void _site_types(void)
{
	_r.ntypes = 2;
	strcpy(_r.types[0], "dgx-ext");
	strcpy(_r.types[1], "aws");
}

/*
 * copus_planner_gpus: a file that names the site's types after the built-in
 * a100 and t4 (named), or none.
 */
static void _site_constants(bool named)
{
	char path[64], err[256];

	if (!named) {
		ASSERT_STATUS(copus__planner_load(&_s.planner, "", err,
						  sizeof(err)), COPUS_OK);
		return;
	}
	_write_file("{\"version\": 1, \"gpus\": {\"dgx-ext\": \"a100\", "
		    "\"aws\": \"t4\"}}\n", path, sizeof(path));
	ASSERT_STATUS(copus__planner_load(&_s.planner, path, err, sizeof(err)),
		      COPUS_OK);
	unlink(path);
}

static const char *const _action[] = {
	[COPUS__ACT_NONE] = "none",
	[COPUS__ACT_START] = "start",
	[COPUS__ACT_RESIZE] = "resize",
	[COPUS__ACT_ASK] = "ask",
	[COPUS__ACT_REQUEUE] = "requeue",
	[COPUS__ACT_CLEAR] = "clear",
};

/* What the round made of a job, for messages. */
static void _show(const struct copus__round_job *j)
{
	fprintf(stderr, "job %u: %s, %d x %d GPUs, type %d, input %d, "
		"reason '%s'%s%s\n", j->id, _action[j->action], j->num_nodes,
		j->per_node, j->dtype, j->job, j->reason ? j->reason : "",
		j->job >= 0 && _r.dec ? ", policy: " : "",
		j->job >= 0 && _r.dec ? _r.dec[j->job].reason : "");
}

/* Fails with what the round made of the job when the action differs. */
#define ASSERT_ACTION(j, want)                                                \
	do {                                                                  \
		if ((j)->action != (want)) {                                  \
			fprintf(stderr, "%s:%d: expected %s; ",               \
				__FILE__, __LINE__, _action[want]);           \
			_show(j);                                             \
		}                                                             \
		CU_ASSERT_EQUAL((j)->action, (want));                         \
	} while (0)

/*
 * Elastic jobs whose request lies outside their range (1 x 1 GPU for 2-3,
 * 1 x 4 for 2-3): the policy gives each a cell within the range, and the
 * round sets the request to it before the job starts.
 */
static void a_pending_elastic_job_gets_gpus_within_its_range(void)
{
	struct copus__round_job *small, *large;

	_cluster(2, 4);
	small = _pending(1, 1, 1, 2, 3);
	large = _pending(2, 1, 4, 2, 3);
	_decide();
	CU_ASSERT_EQUAL(_r.decided, 1);
	ASSERT_ACTION(small, COPUS__ACT_RESIZE);
	ASSERT_ACTION(large, COPUS__ACT_RESIZE);
	CU_ASSERT(small->per_node * small->num_nodes >= 2);
	CU_ASSERT(small->per_node * small->num_nodes <= 3);
	CU_ASSERT(large->per_node * large->num_nodes >= 2);
	CU_ASSERT(large->per_node * large->num_nodes <= 3);
	CU_ASSERT_EQUAL(small->dtype, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(large->reason, "copus: starts with"));
}

/*
 * A job whose hint says its model spans two GPUs per replica (pipeline x
 * tensor 2) starts on an even count: on a node of 3 free GPUs, 2 of its
 * 1-3, where without it it would take all 3.
 */
static void a_job_of_two_gpus_per_replica_gets_an_even_count(void)
{
	struct copus__round_job *j;

	_cluster(1, 3);
	j = _pending(1, 1, 3, 1, 3);
	_hint(j);
	_decide();
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 3);
	_cluster(1, 3);
	j = _pending(1, 1, 3, 1, 3);
	_hint_gran(j, 2);
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
}

/*
 * Before its first hint, a job submitted with --gpu-multiple=2 starts on an
 * even count: on a node of 3 free GPUs, 2 of its 1-3.
 */
static void a_job_of_a_gpu_multiple_starts_on_a_multiple(void)
{
	struct copus__round_job *j;

	_cluster(1, 3);
	j = _pending(1, 1, 3, 1, 3);
	j->multiple = 2;
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
	/* Its hint may say more: 3 GPUs per replica. */
	_cluster(1, 4);
	j = _pending(1, 1, 4, 1, 4);
	j->multiple = 2;
	_hint_gran(j, 3);
	_decide();
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 3);
}

static void a_pending_elastic_job_on_its_request_starts_as_it_is(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _pending(1, 1, 2, 1, 4);
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_START);
	CU_ASSERT_EQUAL(j->per_node, 2);
	CU_ASSERT_EQUAL(j->num_nodes, 1);
	CU_ASSERT_PTR_NULL(j->reason);
}

static void a_running_rigid_job_is_never_moved(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _running(1, 0, 1, 4, 0, 0, NOW - 1000);
	_nodes[0].usable = false;
	_decide();
	/* The policy never sees it: its GPUs are simply taken. */
	CU_ASSERT_EQUAL(j->job, -1);
	CU_ASSERT_EQUAL(_r.njobs, 0);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

static void a_job_on_an_unusable_node_is_asked_to_move(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _running(1, 0, 1, 4, 1, 4, NOW - 1000);
	_nodes[0].usable = false;
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_ASK);
	CU_ASSERT_EQUAL(_r.dec[j->job].num_slots, 1);
	CU_ASSERT_EQUAL(_r.dec[j->job].slots[0].node, 1);
}

static void a_job_is_not_asked_again_within_its_restart_delay(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _running(1, 0, 1, 4, 1, 4, NOW - _s.params.restart_delay + 1);
	_nodes[0].usable = false;
	_decide();
	CU_ASSERT(_r.dec[j->job].changed);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * A job of exactly 4 GPUs on a node that went down: the same cell on the
 * other node. The copus policy makes such a move when it is worth the
 * restart; a policy that places jobs anew every round does not, and the
 * round leaves that move undone.
 */
static void _same_shape_move(const char *policy, enum copus__action want)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	_cluster(2, 4);
	copus_policy_destroy(_s.policy);
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create(policy, &prm, &_s.policy),
		      COPUS_OK);
	CU_ASSERT_EQUAL(copus_policy_traits(_s.policy)->moves_jobs,
			want == COPUS__ACT_ASK);
	j = _running(1, 0, 1, 4, 4, 4, NOW - 1000);
	_nodes[0].usable = false;
	_decide();
	CU_ASSERT_FATAL(j->job >= 0 && _r.decided);
	CU_ASSERT(_r.dec[j->job].changed);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 4);
	CU_ASSERT_EQUAL(j->num_nodes, 1);
	ASSERT_ACTION(j, want);
}

/*
 * Decisions Slurm cannot be asked for as they are: pollux gives a job on
 * node 0 a third GPU on node 1, 2 + 1, where Slurm's request is the same
 * count on every node. The round asks for the largest part of it Slurm
 * can be asked for: 2 GPUs on node 0. For a job that has 2 there, that is
 * its own cell, and a restart that gains nothing is not asked for; a job
 * that has 1 there is asked to grow to 2 on that one node (not to 1 + 1 on
 * two nodes).
 */
static struct copus__round_job *_pollux_two_plus_one(int gpus)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	_cluster(2, 4);
	copus_policy_destroy(_s.policy);
	prm.equal_per_node = false;
	ASSERT_STATUS(copus_policy_create("pollux", &prm, &_s.policy),
		      COPUS_OK);
	j = _running(1, 0, 1, gpus, 1, 8, NOW - 1000);
	{
		char text[COPUS_HINT_MAX_LEN + 1], err[128];
		struct copus__memo *in = copus__memo_get(&_s, j->id);

		/* Compute-bound: more GPUs are worth it, even on two nodes. */
		snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":1,"
			 "\"st\":\"running\",\"step\":10,\"rc\":0,\"t\":%d,"
			 "\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,"
			 "\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":10,"
			 "\"tgt\":100000,\"perf\":{\"a100\":[0.02,0.01,0.0001,"
			 "0.00001,0.0001,0.00001,1.5]}}", NOW - 10);
		ASSERT_STATUS(copus_hint_parse(text, &in->hint, err,
					       sizeof(err)), COPUS_OK);
		in->have_hint = true;
		in->req_gpus = gpus;
		in->max_had = 2;
	}
	_running(2, 0, 1, 2, 0, 0, NOW - 1000);
	_running(3, 1, 1, 3, 0, 0, NOW - 1000);
	_decide();
	CU_ASSERT_FATAL(j->job >= 0 && _r.decided);
	/* The case at hand: 3 GPUs as 2 on node 0 + 1 on node 1. */
	CU_ASSERT(_r.dec[j->job].changed);
	CU_ASSERT_EQUAL(_r.dec[j->job].gpus, 3);
	CU_ASSERT_EQUAL(_r.dec[j->job].num_slots, 2);
	CU_ASSERT_EQUAL(j->per_node, 2);
	CU_ASSERT_EQUAL(j->num_nodes, 1);
	return j;
}

static void a_move_slurm_cannot_express_is_asked_as_its_largest_part(void)
{
	ASSERT_ACTION(_pollux_two_plus_one(2), COPUS__ACT_NONE);
	ASSERT_ACTION(_pollux_two_plus_one(1), COPUS__ACT_ASK);
}

static void a_same_shape_move_needs_a_policy_that_moves_jobs(void)
{
	_same_shape_move("copus", COPUS__ACT_ASK);
	_same_shape_move("fifo", COPUS__ACT_NONE);
}

/*
 * Two elastic jobs fill the cluster, each with twice its request; a rigid
 * job of 2 GPUs waits. The policy takes the GPUs from the job whose hint
 * says what they are worth (without a model a job's speedup counts as
 * linear, so its extra GPUs look worth more), and only that job is asked
 * to checkpoint, whichever of the two published the hint.
 */
static void _two_elastic_jobs_and_a_rigid_one(uint32_t hinted)
{
	struct copus__round_job *a, *b, *c, *with, *without;

	_cluster(2, 4);
	a = _running(1, 0, 1, 4, 1, 4, NOW - 1000);
	b = _running(2, 1, 1, 4, 1, 4, NOW - 1000);
	with = hinted == 1 ? a : b;
	without = hinted == 1 ? b : a;
	_hint(with);
	copus__memo_get(&_s, 1)->req_gpus = 2;
	copus__memo_get(&_s, 2)->req_gpus = 2;
	copus__memo_get(&_s, 1)->attained = 40000;
	copus__memo_get(&_s, 2)->attained = 40000;
	c = _pending(3, 1, 2, 0, 0);
	_decide();
	ASSERT_ACTION(with, COPUS__ACT_ASK);
	CU_ASSERT_EQUAL(with->per_node * with->num_nodes, 2);
	ASSERT_ACTION(without, COPUS__ACT_NONE);
	CU_ASSERT_FALSE(_r.dec[without->job].changed);
	/* The rigid job is to start on the GPUs the shrink frees. */
	ASSERT_ACTION(c, COPUS__ACT_START);
}

static void a_shrink_asks_the_job_with_a_hint_not_the_one_without(void)
{
	_two_elastic_jobs_and_a_rigid_one(1);
	_two_elastic_jobs_and_a_rigid_one(2);
}

static void a_rescale_in_flight_is_not_asked_again(void)
{
	struct copus__round_job *j;
	struct copus__rescale *x = &_s.rescales[0];

	_cluster(2, 4);
	j = _running(1, 0, 1, 4, 1, 4, NOW - 1000);
	_nodes[0].usable = false;
	memset(x, 0, sizeof(*x));
	x->id = 1;
	x->asked = NOW - 5;
	x->rc = 0;
	_s.nrescales = 1;
	j->in_rescale = true;
	_decide();
	CU_ASSERT(_r.dec[j->job].changed);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * Running job j, asked 5 s ago to move, has checkpointed: the only entry
 * of the rescale table.
 */
static void _checkpointed(struct copus__round_job *j)
{
	struct copus__rescale *x = &_s.rescales[0];

	memset(x, 0, sizeof(*x));
	x->id = j->id;
	x->asked = NOW - 5;
	_s.nrescales = 1;
	j->in_rescale = true;
	j->checkpointed = true;
}

static void a_checkpointed_job_is_requeued_once(void)
{
	struct copus__round_job *j;
	struct copus__rescale *x = &_s.rescales[0];

	_cluster(2, 4);
	j = _running(1, 0, 1, 4, 1, 4, NOW - 1000);
	_checkpointed(j);
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_REQUEUE);
	/* Once the plugin has requeued it, it waits. */
	x->requeue_sent = true;
	copus__round_free(&_r);
	j->action = COPUS__ACT_NONE;
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * A round between two on copus_interval (one that a rescale in flight
 * brings sooner) asks no running job to move, not even one the policy
 * moves off a node that went away, while it requeues a job that has
 * checkpointed and starts a pending one; the next round on its interval
 * asks the move.
 */
static void a_round_between_intervals_moves_no_running_job(void)
{
	struct copus__round_job *j, *c, *p;
	struct copus__rescale *x = &_s.rescales[0];

	_cluster(4, 4);
	j = _running(1, 0, 1, 4, 1, 4, NOW - 1000);
	_nodes[0].usable = false;
	c = _running(2, 1, 1, 4, 1, 4, NOW - 1000);
	_checkpointed(c);
	p = _pending(3, 1, 2, 0, 0);
	_r.between = true;
	_decide();
	CU_ASSERT(_r.dec[j->job].changed);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	ASSERT_ACTION(c, COPUS__ACT_REQUEUE);
	ASSERT_ACTION(p, COPUS__ACT_START);
	copus__round_free(&_r);
	j->action = c->action = p->action = COPUS__ACT_NONE;
	x->requeue_sent = true;
	_r.between = false;
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_ASK);
	_s.nrescales = 0;
}

static void a_requeued_job_is_resized_after_the_release_gap(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _pending(1, 1, 1, 1, 4);
	_hint(j);
	j->restarts = 1;
	j->in_rescale = true;
	j->waits_release = true;
	j->end = NOW - COPUS__RELEASE_GAP + 1;
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT_STRING_EQUAL(j->reason,
			       "copus: requeued, restarts in a moment");
	copus__round_free(&_r);
	j->reason = NULL;
	j->end = NOW - COPUS__RELEASE_GAP;
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_PTR_NOT_NULL(strstr(j->reason, "copus: starts with"));
}

/*
 * A job requeued for a rescale restarts on the cell the round that asked
 * it decided (2 aws GPUs here), not on what the policy would give it as a
 * new job (its request, 4 dgx-ext GPUs), for one round interval after it
 * may restart (the release gap after its requeue, however short the
 * interval), and longer while another job asked in the same round has not
 * given up its GPUs yet (still running, or requeued later), or while no
 * round has yet found it able to restart (rounds that came late, UNSEEN;
 * nodes registering after a slurmctld restart, SETTLING); then the policy
 * decides anew. A job asked in another round, or one that gave up, does not
 * hold it.
 */
/*
 * Job j, pending, was asked 10 s ago to go from `from` GPUs to `to` of the
 * type, checkpointed and was requeued by the plugin, its run ending at
 * end: the only entry of the rescale table.
 */
static void _requeued(struct copus__round_job *j, time_t end, int from,
		      int to, const char *type)
{
	struct copus__rescale *x = &_s.rescales[0];

	j->restarts = 1;
	j->in_rescale = true;
	j->end = end;
	memset(x, 0, sizeof(*x));
	x->id = j->id;
	x->asked = NOW - 10;
	x->from = from;
	x->to = to;
	snprintf(x->type, sizeof(x->type), "%s", type);
	x->requeue_sent = true;
	x->pending_since = end;
	/* The round it could restart in saw it. */
	x->ready = end + COPUS__RELEASE_GAP;
	_s.nrescales = 1;
}

static void a_requeued_job_restarts_on_the_cell_it_was_moved_to(void)
{
	enum { ALONE, LATE, SHORT, UNSEEN, SETTLING, MATE_RUNS, MATE_LATER,
	       MATE_GAVE_UP, OTHER_ROUND, CASES };
	struct copus__round_job *j;
	struct copus__rescale *x = &_s.rescales[0], *y = &_s.rescales[1];

	for (int k = 0; k < CASES; k++) {
		int late = k != ALONE && k != SHORT;
		int held = k == ALONE || k == SHORT || k == UNSEEN ||
			   k == SETTLING || k == MATE_RUNS || k == MATE_LATER;

		_cluster(2, 4);
		/* A round interval as short as the release gap. */
		if (k == SHORT)
			_s.params.interval = COPUS__RELEASE_GAP;
		_site_types();
		_nodes[1].gpu_type = 1;
		j = _pending(1, 1, 4, 1, 4);
		_hint(j);
		/* Late: a round interval after it could restart. */
		_requeued(j, NOW - COPUS__RELEASE_GAP -
			     (late ? _s.params.interval : 0), 4, 2, "aws");
		if (k == UNSEEN || k == SETTLING)
			x->ready = 0;
		if (k == SETTLING)
			_r.reg_quiet = NOW + 1;
		if (k >= MATE_RUNS) {
			/* Job 9, not in this round's queue: asked with it
			 * (or, OTHER_ROUND, a round later), still running
			 * or requeued only now. */
			memset(y, 0, sizeof(*y));
			y->id = 9;
			y->asked = x->asked + (k == OTHER_ROUND);
			y->from = 2;
			y->to = 1;
			strcpy(y->type, "aws");
			if (k == MATE_LATER) {
				y->requeue_sent = true;
				y->pending_since = NOW - COPUS__RELEASE_GAP;
			}
			y->gave_up = k == MATE_GAVE_UP;
			_s.nrescales = 2;
		}
		_decide();
		CU_ASSERT_EQUAL(j->pin_gpus, held ? 2 : 0);
		if (k == SETTLING) {
			/* Not placed yet, and still held the next round. */
			ASSERT_ACTION(j, COPUS__ACT_NONE);
			CU_ASSERT_EQUAL(x->ready, 0);
			continue;
		}
		/* This round could restart it: one interval more. */
		if (k == UNSEEN)
			CU_ASSERT_EQUAL(x->ready, NOW);
		/* Not held: as a new job, on its request (a start as it
		 * is). */
		ASSERT_ACTION(j, held ? COPUS__ACT_RESIZE : COPUS__ACT_START);
		CU_ASSERT_EQUAL(j->per_node * j->num_nodes, held ? 2 : 4);
		CU_ASSERT_EQUAL(j->dtype, held ? 1 : 0);
	}
	_s.nrescales = 0;
}

/*
 * A job held to the cell it was moved to (6 a100 GPUs) that the policy
 * places as 4 + 2 (pollux does; Slurm would be asked for 4) or leaves
 * queued: the round places it as 3 + 3 on GPUs Slurm has free, its own
 * decided nodes first (UNEVEN, QUEUED); on node 2 where node 1's GPUs are
 * still held (TAKEN); and leaves the policy's decision as it is where no
 * even placement of 6 fits (NO_ROOM: node 1 still held, node 2 running a
 * rigid job).
 */
static void a_held_job_is_placed_on_its_whole_cell(void)
{
	enum { UNEVEN, QUEUED, TAKEN, NO_ROOM, CASES };
	static const copus_slot four_two[2] = { { 0, 4 }, { 1, 2 } };
	struct copus__round_job *j;
	copus_decision *d;

	for (int k = 0; k < CASES; k++) {
		int other = k == UNEVEN || k == QUEUED ? 1 : 2;

		_cluster(3, 4);
		j = _pending(1, 1, 4, 1, 8);
		_hint(j);
		_requeued(j, NOW - COPUS__RELEASE_GAP, 4, 6, "a100");
		if (k == TAKEN)
			_free[1] = 2;
		if (k == NO_ROOM) {
			_free[1] = 1;
			_running(2, 2, 1, 3, 0, 0, NOW - 1000);
		}
		_decide();
		CU_ASSERT_EQUAL(j->pin_gpus, 6);
		CU_ASSERT_EQUAL(j->pin_type, 0);
		CU_ASSERT_FATAL(j->job >= 0 && _r.decided);
		/* The policy's decision, as pollux makes it. */
		d = &_r.dec[j->job];
		memset(d->reason, 0, sizeof(d->reason));
		d->gpu_type = k == QUEUED ? -1 : 0;
		d->gpus = k == QUEUED ? 0 : 6;
		d->slots = k == QUEUED ? NULL : four_two;
		d->num_slots = k == QUEUED ? 0 : 2;
		copus__round_hold_pins(&_r);
		if (k == NO_ROOM) {
			CU_ASSERT_PTR_EQUAL(d->slots, four_two);
			CU_ASSERT_EQUAL(d->num_slots, 2);
			CU_ASSERT_EQUAL(d->reason[0], '\0');
			continue;
		}
		CU_ASSERT_EQUAL(d->gpu_type, 0);
		CU_ASSERT_EQUAL(d->gpus, 6);
		CU_ASSERT(d->changed);
		CU_ASSERT_EQUAL_FATAL(d->num_slots, 2);
		CU_ASSERT(d->slots[0].node == 0 && d->slots[0].gpus == 3);
		CU_ASSERT(d->slots[1].node == other && d->slots[1].gpus == 3);
		CU_ASSERT_STRING_EQUAL(d->reason, "restarts on the cell it was "
				       "moved to");
	}
	/* Not held: the policy's decision stays, whatever it is. */
	_s.nrescales = 0;
	_cluster(3, 4);
	j = _pending(1, 1, 4, 1, 8);
	_hint(j);
	_decide();
	CU_ASSERT_EQUAL(j->pin_gpus, 0);
	d = &_r.dec[j->job];
	d->slots = four_two;
	d->num_slots = 2;
	d->gpu_type = 0;
	copus__round_hold_pins(&_r);
	CU_ASSERT_PTR_EQUAL(d->slots, four_two);
}

/*
 * A node has just registered (slurmd or slurmctld restarted): slurmctld
 * may have aborted a stray run of a requeued job there, revoking its
 * credential, so a job that has run before waits until reg_quiet; a new
 * job does not. Both as its own cell and resized to another.
 */
static void a_restarted_job_waits_until_registrations_settle(void)
{
	struct copus__round_job *again, *cell, *fresh;

	_cluster(3, 4);
	again = _pending(1, 1, 2, 1, 4);
	cell = _pending(2, 1, 4, 4, 4);
	fresh = _pending(3, 1, 2, 2, 2);
	_hint(again);
	_hint(cell);
	again->restarts = cell->restarts = 1;
	again->end = cell->end = NOW - 60;
	_r.reg_quiet = NOW + 1;
	_decide();
	ASSERT_ACTION(again, COPUS__ACT_NONE);
	ASSERT_ACTION(cell, COPUS__ACT_NONE);
	CU_ASSERT_PTR_NOT_NULL(again->reason ? strstr(again->reason,
		"has run before, restarts once the nodes that registered "
		"have settled") : NULL);
	ASSERT_ACTION(fresh, COPUS__ACT_START);
	copus__round_free(&_r);
	again->reason = cell->reason = fresh->reason = NULL;
	again->action = cell->action = fresh->action = COPUS__ACT_NONE;
	_r.reg_quiet = NOW;
	_decide();
	CU_ASSERT(again->action == COPUS__ACT_START ||
		  again->action == COPUS__ACT_RESIZE);
	ASSERT_ACTION(cell, COPUS__ACT_START);
}

/*
 * slurmctld died moments after the plugin started a job, before its own
 * state held the job as running: it recovers the job pending with no
 * restart, and the job's node, when it registers, reports the run, which
 * slurmctld aborts there, revoking the job's credential. The plugin, which
 * saved the start in its own state first, holds the job back like a
 * requeued one until the registrations have settled; a job it never
 * started is not held.
 */
static void a_job_started_before_a_crash_waits_until_registrations_settle(void)
{
	struct copus__round_job *lost, *rigid, *fresh;

	_cluster(3, 4);
	lost = _pending(1, 1, 2, 1, 2);
	rigid = _pending(2, 1, 2, 0, 0);
	fresh = _pending(3, 1, 2, 2, 2);
	lost->ran = rigid->ran = true;
	_r.reg_quiet = NOW + 1;
	_decide();
	ASSERT_ACTION(lost, COPUS__ACT_NONE);
	ASSERT_ACTION(rigid, COPUS__ACT_NONE);
	CU_ASSERT_PTR_NOT_NULL(lost->reason ? strstr(lost->reason,
		"has run before, restarts once the nodes that registered "
		"have settled") :
		NULL);
	ASSERT_ACTION(fresh, COPUS__ACT_START);
	copus__round_free(&_r);
	lost->reason = rigid->reason = fresh->reason = NULL;
	lost->action = rigid->action = fresh->action = COPUS__ACT_NONE;
	_r.reg_quiet = NOW;
	_decide();
	CU_ASSERT(lost->action == COPUS__ACT_START ||
		  lost->action == COPUS__ACT_RESIZE);
	ASSERT_ACTION(rigid, COPUS__ACT_START);
}

/* The round decided again: its decisions dropped, the two jobs' cleared. */
static void _again(struct copus__round_job *a, struct copus__round_job *b)
{
	copus__round_free(&_r);
	a->reason = b->reason = NULL;
	a->action = b->action = COPUS__ACT_NONE;
}

/*
 * A job started before this slurmctld did, recovered pending: once the
 * registrations have settled, its nodes are first told to abort that run
 * (a run that ended while slurmctld was down would make the node refuse the
 * next launch as a second copy); it starts COPUS__RELEASE_GAP s after that,
 * and Slurm's KillWait more (the longest a node takes to kill the run).
 * A fresh job is not held.
 */
static void a_job_started_before_a_crash_is_cleared_before_it_starts(void)
{
	struct copus__round_job *lost, *fresh;

	_cluster(2, 4);
	lost = _pending(1, 1, 2, 0, 0);
	fresh = _pending(2, 1, 2, 0, 0);
	lost->ran = lost->strays = true;
	_r.reg_quiet = NOW;
	_decide();
	ASSERT_ACTION(lost, COPUS__ACT_CLEAR);
	CU_ASSERT_PTR_NOT_NULL(lost->reason ? strstr(lost->reason,
		"its nodes forget that run first") : NULL);
	ASSERT_ACTION(fresh, COPUS__ACT_START);
	CU_ASSERT_EQUAL(_r.wake, NOW + COPUS__RELEASE_GAP);
	/* The actions cleared it: noted in its record. */
	CU_ASSERT_PTR_NOT_NULL_FATAL(copus__memo_get(&_s, 1));
	copus__round_launches(&_s, &_r, false);
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 1)->cleared, NOW);
	/* Within the gap it waits, then it starts. */
	_again(lost, fresh);
	lost->strays = false;
	lost->cleared = NOW - COPUS__RELEASE_GAP + 1;
	_r.wake = 0;
	_decide();
	ASSERT_ACTION(lost, COPUS__ACT_NONE);
	CU_ASSERT_EQUAL(_r.wake, NOW + 1);
	_again(lost, fresh);
	lost->cleared = NOW - COPUS__RELEASE_GAP;
	_decide();
	ASSERT_ACTION(lost, COPUS__ACT_START);
	/* With KillWait, the run may last that much longer on its node. */
	_again(lost, fresh);
	_r.kill_wait = 5;
	_r.wake = 0;
	_decide();
	ASSERT_ACTION(lost, COPUS__ACT_NONE);
	CU_ASSERT_EQUAL(_r.wake, NOW + 5);
	_again(lost, fresh);
	lost->cleared = NOW - COPUS__RELEASE_GAP - 5;
	_decide();
	ASSERT_ACTION(lost, COPUS__ACT_START);
	copus__memo_free(&_s);
}

/*
 * The round marks the jobs it starts in their records before the actions
 * (so that the mark is saved before the start), and takes the mark back
 * from those the actions did not start; a job without GPUs gets a record.
 */
static void the_round_marks_its_starts_before_acting(void)
{
	struct copus__round_job *a, *b, *c;
	struct copus__memo *m;

	_cluster(2, 4);
	a = _pending(1, 1, 1, 0, 0);
	b = _pending(2, 1, 1, 0, 0);
	c = _pending(3, 1, 1, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(copus__memo_get(&_s, 1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(m = copus__memo_get(&_s, 2));
	m->launched = NOW - 100;
	a->action = b->action = c->action = COPUS__ACT_START;
	_s.state_dirty = false;
	CU_ASSERT_EQUAL(copus__round_launches(&_s, &_r, true), 3);
	CU_ASSERT_TRUE(_s.state_dirty);
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 1)->launched, NOW);
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 2)->launched, NOW);
	CU_ASSERT_PTR_NOT_NULL_FATAL(copus__memo_find(&_s, 3));
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 3)->launched, NOW);
	/* b's nodes were taken meanwhile: its earlier start is what stays. */
	b->action = COPUS__ACT_NONE;
	CU_ASSERT_EQUAL(copus__round_launches(&_s, &_r, false), 1);
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 1)->launched, NOW);
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 2)->launched, NOW - 100);
	CU_ASSERT_EQUAL(copus__memo_find(&_s, 3)->launched, NOW);
	copus__memo_free(&_s);
}

/*
 * A start recorded by an earlier slurmctld (read from copus_state) leaves
 * a stray run to clear, even when that slurmctld died in the second this
 * one began (a restart in under a second); a start made by this one does
 * not, in the same second or later; taken back, the earlier start's stray
 * run is to clear again; once cleared, it is not.
 */
static void a_start_by_an_earlier_slurmctld_is_a_stray_in_the_same_second(void)
{
	struct copus__round_job *a;
	struct copus__memo *m;

	_cluster(2, 4);
	a = _pending(1, 1, 1, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m = copus__memo_get(&_s, 1));
	CU_ASSERT_FALSE(copus__memo_strays(m));
	m->launched = NOW;
	m->launched_before = true;
	CU_ASSERT_TRUE(copus__memo_strays(m));
	a->action = COPUS__ACT_START;
	copus__round_launches(&_s, &_r, true);
	m = copus__memo_find(&_s, 1);
	CU_ASSERT_EQUAL(m->launched, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	a->action = COPUS__ACT_NONE;
	copus__round_launches(&_s, &_r, false);
	CU_ASSERT_TRUE(copus__memo_strays(m));
	a->action = COPUS__ACT_CLEAR;
	copus__round_launches(&_s, &_r, false);
	CU_ASSERT_EQUAL(m->cleared, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	copus__memo_free(&_s);
}

/*
 * A job started by an earlier slurmctld that this one has seen running,
 * on nodes registered with it, since that start (a rescale that
 * slurmctld's restart caught: the job checkpoints and exits while the new
 * slurmctld runs it) has nothing left to clear when it is requeued; one
 * seen running from before that start (a state saved before it) still
 * has.
 */
static void a_run_the_new_slurmctld_saw_leaves_no_stray(void)
{
	struct copus__memo *m;

	_cluster(1, 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m = copus__memo_get(&_s, 1));
	m->launched = NOW;
	m->launched_before = true;
	copus__memo_seen_running(m, NOW - 30);
	CU_ASSERT_TRUE(copus__memo_strays(m));
	copus__memo_seen_running(m, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	/* Not started by the plugin: nothing to clear, nothing changes. */
	m->launched = 0;
	m->launched_before = false;
	copus__memo_seen_running(m, NOW);
	CU_ASSERT_FALSE(copus__memo_strays(m));
	copus__memo_seen_running(NULL, NOW);
	copus__memo_free(&_s);
}

static void a_rigid_job_waits_for_one_of_higher_priority(void)
{
	struct copus__round_job *first, *second;

	_cluster(2, 4);
	first = _pending(1, 2, 4, 0, 0);
	second = _pending(2, 1, 4, 0, 0);
	_decide();
	ASSERT_ACTION(first, COPUS__ACT_START);
	/* The second does not fit beside the first: not even offered. */
	CU_ASSERT_EQUAL(second->job, -1);
	ASSERT_ACTION(second, COPUS__ACT_NONE);
	CU_ASSERT_STRING_EQUAL(second->reason, "copus: a job of higher "
			       "priority in the partition starts first");
}

/*
 * copus_max_gpus_per_user=3: a user whose running job holds 2 GPUs gets one
 * more, not the idle rest; another user is not held back.
 */
static void one_user_cannot_take_more_than_the_cap(void)
{
	struct copus__round_job *run, *rigid, *elastic, *other;

	_cluster(2, 4);
	_s.params.user_cap = 3;
	run = _running(1, 0, 1, 2, 0, 0, NOW - 1000);
	rigid = _pending(2, 1, 2, 0, 0);
	elastic = _pending(3, 1, 1, 1, 4);
	other = _pending(4, 1, 2, 0, 0);
	strcpy(run->user, "100");
	strcpy(rigid->user, "100");
	strcpy(elastic->user, "100");
	strcpy(other->user, "200");
	_decide();
	ASSERT_ACTION(run, COPUS__ACT_NONE);
	/* 2 + 2 > 3: the rigid job waits, and says why. */
	ASSERT_ACTION(rigid, COPUS__ACT_NONE);
	CU_ASSERT_PTR_NOT_NULL(rigid->reason);
	if (rigid->reason)
		CU_ASSERT_PTR_NOT_NULL(strstr(rigid->reason,
					      "copus_max_gpus_per_user"));
	/* The elastic job starts within what is left: one GPU. */
	CU_ASSERT(elastic->action == COPUS__ACT_START ||
		  elastic->action == COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(elastic->per_node * elastic->num_nodes, 1);
	/* The other user's job is not held back. */
	ASSERT_ACTION(other, COPUS__ACT_START);
	/* Without the cap the same round gives user 100 more. */
	_cluster(2, 4);
	run = _running(1, 0, 1, 2, 0, 0, NOW - 1000);
	rigid = _pending(2, 1, 2, 0, 0);
	strcpy(run->user, "100");
	strcpy(rigid->user, "100");
	_decide();
	ASSERT_ACTION(rigid, COPUS__ACT_START);
}

/*
 * Two users' jobs want the same two GPUs. The one whose user has used the
 * cluster (copus's own tally) waits, though it is first in every other
 * order; Slurm's fair-share factor, when it has one, is used instead.
 */
static void the_less_served_user_starts_first(void)
{
	struct copus__round_job *heavy, *light;

	for (int slurm = 0; slurm < 2; slurm++) {
		_cluster(1, 2);
		heavy = _pending(2, 1, 2, 2, 2);
		light = _pending(3, 1, 2, 2, 2);
		heavy->uid = 100;
		light->uid = 200;
		_hint(heavy);
		_hint(light);
		CU_ASSERT_EQUAL(copus__usage_charge(&_s.usage, 100, 3.6e6), 0);
		CU_ASSERT_EQUAL(copus__usage_charge(&_s.usage, 200, 1e3), 0);
		if (slurm) {
			/* Slurm's factors say the opposite: they win. */
			heavy->fs_slurm = 0.9;
			light->fs_slurm = 0.1;
		}
		_decide();
		ASSERT_ACTION(slurm ? heavy : light, COPUS__ACT_START);
		ASSERT_ACTION(slurm ? light : heavy, COPUS__ACT_NONE);
		CU_ASSERT_EQUAL(_r.nusers, 2);
	}
}

static void a_job_that_can_never_run_here_says_why(void)
{
	struct copus__round_job *big, *typed;

	_cluster(2, 4);
	big = _pending(1, 3, 4, 0, 0);
	typed = _pending(2, 1, 1, 1, 4);
	strcpy(typed->types[0], "v100");
	typed->ntypes = 1;
	_decide();
	CU_ASSERT(big->never);
	CU_ASSERT_STRING_EQUAL(big->reason, "copus: no 3 node(s) it may use "
			       "have 4 GPU(s) of its type each");
	CU_ASSERT(typed->never);
	CU_ASSERT_STRING_EQUAL(typed->reason, "copus: none of its GPU types "
			       "is in the cluster");
	CU_ASSERT_EQUAL(_r.njobs, 0);
}

static void a_job_without_gpus_is_left_to_slurm(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _pending(1, 1, 0, 0, 0);
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_START);
	CU_ASSERT_EQUAL(j->job, -1);
}

static void a_policy_failure_decides_nothing_and_names_the_job(void)
{
	struct copus__round_job *j;

	_cluster(2, 4);
	j = _running(7, 0, 1, 4, 1, 4, NOW - 1000);
	/* An allocation on a node the cluster does not have. */
	j->alloc[0].node = 5;
	_decide();
	CU_ASSERT_EQUAL(_r.decided, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(_r.error, "the copus policy failed"));
	CU_ASSERT_PTR_NOT_NULL(strstr(_r.error, "on job 7"));
	ASSERT_ACTION(j, COPUS__ACT_NONE);
}

/*
 * A job whose hint describes a model too big for one GPU: the policy gets
 * its table of cells from the planner (2 to 4 GPUs, never 1), at its own
 * batch and with its remaining iterations, and the job starts on a count
 * with a plan although it asks for one GPU. With one GPU free it does not
 * start at all, where a job without a model starts on that one GPU.
 */
static void a_job_with_a_model_gets_only_counts_with_a_plan(void)
{
	struct copus__round_job *j;
	const copus_job *c;
	int k, n;

	_cluster(1, 4);
	j = _pending(1, 1, 1, 1, 4);
	_hint_model(j, BIG_MODEL);
	_decide();
	CU_ASSERT_FATAL(j->planned && j->job >= 0);
	CU_ASSERT_EQUAL(j->plan_rc, COPUS_OK);
	c = &_r.jobs[j->job];
	CU_ASSERT_PTR_EQUAL(c->cells, j->cells);
	CU_ASSERT_EQUAL(c->num_cells, j->ncells);
	CU_ASSERT(c->fixed_batch);
	ASSERT_CLOSE(c->remaining_iters, 100000 - 10, 1e-12);
	CU_ASSERT(j->ncells >= 1);
	CU_ASSERT_PTR_NULL(_plan_on(j, 1));
	for (k = 0; k < j->ncells; k++) {
		if (j->cells[k].gpus < 2)
			fprintf(stderr, "a cell of %d GPU(s) in the table\n",
				j->cells[k].gpus);
		CU_ASSERT(j->cells[k].gpus >= 2);
		CU_ASSERT(j->cells[k].seconds > 0);
		ASSERT_CLOSE(j->cells[k].seconds, j->plans[k].seconds, 0);
		CU_ASSERT_EQUAL(j->plans[k].dp * j->plans[k].tp * j->plans[k].pp,
				j->cells[k].gpus);
	}
	CU_ASSERT(j->action == COPUS__ACT_RESIZE ||
		  j->action == COPUS__ACT_START);
	n = j->per_node * j->num_nodes;
	if (n < 2)
		_show(j);
	CU_ASSERT(n >= 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->plan);
	CU_ASSERT_EQUAL(j->plan->gpus, n);
	CU_ASSERT_PTR_EQUAL(j->plan, _plan_on(j, n));
	CU_ASSERT_FALSE(j->no_plan);

	/* One GPU free, three held by a rigid job. */
	_cluster(1, 4);
	_running(2, 0, 1, 3, 0, 0, NOW - 100);
	j = _pending(1, 1, 1, 1, 4);
	_hint_model(j, BIG_MODEL);
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT_EQUAL(j->ncells, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->reason);
	CU_ASSERT_PTR_NOT_NULL(strstr(j->reason, "has a plan that fits its "
				      "model"));
	/* The same job without a model takes the GPU. */
	_cluster(1, 4);
	_running(2, 0, 1, 3, 0, 0, NOW - 100);
	j = _pending(1, 1, 1, 1, 4);
	_hint(j);
	_decide();
	ASSERT_ACTION(j, COPUS__ACT_START);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 1);
}

/*
 * A policy that does not choose among cells (fifo) sees a job with a model
 * rigid on the count with a plan nearest its request: 2 GPUs for a request
 * of 1, where it would start the job on 1.
 */
static void a_policy_without_cells_gets_a_count_with_a_plan(void)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	_cluster(1, 4);
	copus_policy_destroy(_s.policy);
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create("fifo", &prm, &_s.policy), COPUS_OK);
	j = _pending(1, 1, 1, 1, 4);
	_hint_model(j, BIG_MODEL);
	_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_FALSE(_r.jobs[j->job].elastic);
	CU_ASSERT_EQUAL(_r.jobs[j->job].req_gpus, 2);
	ASSERT_ACTION(j, COPUS__ACT_RESIZE);
	CU_ASSERT_EQUAL(j->per_node * j->num_nodes, 2);
	CU_ASSERT_PTR_NOT_NULL(j->plan);
}

/*
 * A cell without a plan is never applied: under tiresias (no cells) a job
 * rigid on 2 GPUs, the count with a plan nearest its request, placed on
 * the free GPU of each of two nodes (its plan of 2 GPUs is on one node:
 * the other GPU of each node is held by another job) waits, and says why.
 */
static void a_decided_cell_without_a_plan_is_not_applied(void)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	struct copus__round_job *j;

	_cluster(2, 2);
	copus_policy_destroy(_s.policy);
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create("tiresias", &prm, &_s.policy),
		      COPUS_OK);
	_running(2, 0, 2, 1, 1, 4, NOW - 100);
	j = _pending(1, 1, 1, 1, 4);
	_hint_model(j, BIG_MODEL);
	_decide();
	CU_ASSERT_FATAL(j->job >= 0 && _r.decided);
	CU_ASSERT_EQUAL(_r.jobs[j->job].req_gpus, 2);
	/* The policy placed it on one GPU of each node. */
	CU_ASSERT_EQUAL(_r.dec[j->job].gpus, 2);
	CU_ASSERT_EQUAL(_r.dec[j->job].num_slots, 2);
	ASSERT_ACTION(j, COPUS__ACT_NONE);
	CU_ASSERT(j->no_plan);
	CU_ASSERT_PTR_NULL(j->plan);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->reason);
	CU_ASSERT_STRING_EQUAL(j->reason, "copus: no plan of its model fits 2 "
			       "a100 GPU(s) on 2 node(s)");
}

/*
 * The constants text with the value of member replaced by value, into out
 * (len bytes).
 */
static void _bad_member(const char *text, const char *member,
			const char *value, char *out, size_t len)
{
	const char *at = strstr(text, member), *end;

	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	at = strchr(at, ':');
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	end = at + 1 + strcspn(at + 1, ",}");
	snprintf(out, len, "%.*s %s%s", (int)(at + 1 - text), text, value,
		 end);
}

/* Decides the round again, as the next round would (same jobs). */
static void _decide_again(struct copus__round_job *j)
{
	copus__round_free(&_r);
	j->action = COPUS__ACT_NONE;
	j->reason = NULL;
	j->planned = j->no_plan = false;
	_decide();
}

/*
 * A reconfigure with a constants file (copus_planner_gpus) changes the
 * plans: an a100 with eight times the memory and twice the speed holds the
 * model on one GPU, and the plan on two GPUs is faster. A bad file is
 * refused with the file, line or field named, and the constants in effect
 * stay; without the key the built-in constants come back.
 */
/*
 * Each job's --time reaches the policy (backfill plans with it): seconds,
 * INFINITY when unlimited, 0 when none was given.
 */
static void time_limits_reach_the_policy(void)
{
	struct copus__round_job *a, *b, *c;

	_cluster(1, 4);
	a = _pending(1, 1, 1, 1, 1);
	a->limit_s = 600;
	b = _pending(2, 1, 1, 1, 1);
	b->limit_s = -1;
	c = _pending(3, 1, 1, 1, 1);
	_decide();
	CU_ASSERT_FATAL(a->job >= 0 && b->job >= 0 && c->job >= 0);
	ASSERT_CLOSE(_r.jobs[a->job].time_limit, 600, 0);
	CU_ASSERT(isinf(_r.jobs[b->job].time_limit));
	ASSERT_CLOSE(_r.jobs[c->job].time_limit, 0, 0);
}

static void a_reconfigure_with_a_constants_file_changes_the_plan(void)
{
	copus_planner_gpu_type g;
	struct copus__round_job *j;
	struct copus__plan before;
	char good[64], bad[64], syntax[64], err[512], text[8192];
	char wrong[8300];
	const struct copus__plan *p2;

	_cluster(1, 4);
	j = _pending(1, 1, 2, 1, 4);
	_hint_model(j, BIG_MODEL);
	_decide();
	CU_ASSERT_PTR_NULL(_plan_on(j, 1));
	p2 = _plan_on(j, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
	before = *p2;

	memset(&g, 0, sizeof(g));
	snprintf(g.name, sizeof(g.name), "a100");
	ASSERT_STATUS(copus_planner_gpu_default("a100", &g.gpu), COPUS_OK);
	g.gpu.memory_bytes *= 8;
	g.gpu.peak_flops *= 2;
	ASSERT_STATUS(copus_planner_gpus_format(&g, 1, text, sizeof(text), NULL,
						err, sizeof(err)), COPUS_OK);
	_write_file(text, good, sizeof(good));
	snprintf(_s.params.planner_gpus, sizeof(_s.params.planner_gpus), "%s",
		 good);
	ASSERT_STATUS(copus__planner_load(&_s.planner, _s.params.planner_gpus,
					  err, sizeof(err)), COPUS_OK);
	_decide_again(j);
	CU_ASSERT_PTR_NOT_NULL(_plan_on(j, 1));
	p2 = _plan_on(j, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
	if (!(p2->seconds < before.seconds))
		fprintf(stderr, "plan on 2 GPUs: %g s before, %g s after\n",
			before.seconds, p2->seconds);
	CU_ASSERT(p2->seconds < before.seconds);

	/* A member of the wrong type, and a file that is not JSON. */
	_bad_member(text, "peak_flops", "\"fast\"", wrong, sizeof(wrong));
	_write_file(wrong, bad, sizeof(bad));
	CU_ASSERT(copus__planner_load(&_s.planner, bad, err, sizeof(err)) !=
		  COPUS_OK);
	if (!strstr(err, bad) || !strstr(err, "peak_flops"))
		fprintf(stderr, "the error does not name the file and the "
			"field: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, bad));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "peak_flops"));
	_write_file("{\"version\": 1,\n\"gpus\": {\n\"a100\": [,\n", syntax,
		    sizeof(syntax));
	CU_ASSERT(copus__planner_load(&_s.planner, syntax, err,
				      sizeof(err)) != COPUS_OK);
	if (!strstr(err, syntax) || !strstr(err, "line"))
		fprintf(stderr, "the error does not name the file and the "
			"line: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, syntax));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line"));
	CU_ASSERT_STRING_EQUAL(_s.planner.path, good);
	_decide_again(j);
	CU_ASSERT_PTR_NOT_NULL(_plan_on(j, 1));

	/* The key removed: the built-in constants. */
	ASSERT_STATUS(copus__planner_load(&_s.planner, "", err, sizeof(err)),
		      COPUS_OK);
	_decide_again(j);
	CU_ASSERT_PTR_NULL(_plan_on(j, 1));
	p2 = _plan_on(j, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
	ASSERT_CLOSE(p2->seconds, before.seconds, 1e-12);
	unlink(good);
	unlink(bad);
	unlink(syntax);
}

/*
 * Gives the job a hint whose model is measured on the types named (a JSON
 * "perf" member's inside: "t4":[...]), the rest as _hint's.
 */
static void _hint_perf(const struct copus__round_job *j, const char *perf)
{
	char text[COPUS_HINT_MAX_LEN + 1], err[128];
	struct copus__memo *in = copus__memo_get(&_s, j->id);

	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":%u,"
		 "\"st\":\"running\",\"step\":10,\"rc\":%d,\"t\":%d,"
		 "\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,"
		 "\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":10,"
		 "\"tgt\":100000,\"perf\":{%s}}", j->id, j->restarts, NOW - 10,
		 perf);
	ASSERT_STATUS(copus_hint_parse(text, &in->hint, err, sizeof(err)),
		      COPUS_OK);
	in->have_hint = true;
	in->req_gpus = j->running ? j->cur_gpus : j->nodes_req * j->gpn_req;
}

/* The compute time of a micro-batch of 128 in the model the job got on t. */
static double _compute_on(const struct copus__round_job *j, int t)
{
	const copus_model *m;

	CU_ASSERT_FATAL(j->job >= 0 && _r.jobs[j->job].models != NULL);
	m = _r.jobs[j->job].models[t];
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

	_cluster(2, 4);
	_r.ntypes = 2;
	strcpy(_r.types[1], "t4");
	_nodes[0].gpu_type = 1;
	j = _pending(1, 1, 4, 1, 4);
	_hint_perf(j, "\"t4\":" T4_PERF);
	_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_EQUAL(j->dtype, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(_r.estimated);
	CU_ASSERT_TRUE(_r.estimated[j->job * 2 + 0]);
	CU_ASSERT_FALSE(_r.estimated[j->job * 2 + 1]);
	ASSERT_CLOSE(_compute_on(j, 1), 0.08 + 128 * 0.008, 1e-12);
	if (!(_compute_on(j, 0) < _compute_on(j, 1)))
		fprintf(stderr, "a100 %g s, t4 %g s\n", _compute_on(j, 0),
			_compute_on(j, 1));
	CU_ASSERT_TRUE(_compute_on(j, 0) < _compute_on(j, 1));
	ASSERT_ACTION(j, COPUS__ACT_START);
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

	_cluster(2, 4);
	_r.ntypes = 2;
	strcpy(_r.types[1], "t4");
	_nodes[0].gpu_type = 1;
	a = _pending(1, 1, 4, 1, 4);
	b = _pending(2, 1, 4, 1, 4);
	strcpy(a->app, "bert");
	strcpy(b->app, "bert");
	_hint_perf(a, "\"t4\":" T4_PERF);
	_hint_perf(b, "\"t4\":[0.01,0.001,0.05,0.002,0.005,0.0005,1.5],"
		   "\"a100\":[0.02,0.002,0.05,0.002,0.005,0.0005,1.5]");
	_decide();
	CU_ASSERT_FATAL(a->job >= 0 && b->job >= 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(_r.estimated);
	CU_ASSERT_TRUE(_r.estimated[a->job * 2 + 0]);
	CU_ASSERT_FALSE(_r.estimated[b->job * 2 + 0]);
	ASSERT_CLOSE(_compute_on(a, 0), 2 * (0.08 + 128 * 0.008), 1e-9);
	/* b's claims distrusted: a is back to the constants. */
	copus__round_free(&_r);
	a->job = b->job = -1;
	copus__memo_find(&_s, b->id)->claim_ratio = 2 * COPUS__DISTRUST;
	_decide();
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

	_cluster(2, 4);
	_site_types();
	_nodes[0].gpu_type = 1;
	j = _pending(1, 1, 4, 1, 4);
	_hint_perf(j, "\"aws\":" T4_PERF);
	_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_TRUE(_r.estimated == NULL || !_r.estimated[j->job * 2 + 0]);

	_site_constants(true);
	copus__round_free(&_r);
	j->job = -1;
	_decide();
	CU_ASSERT_FATAL(j->job >= 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(_r.estimated);
	CU_ASSERT_TRUE(_r.estimated[j->job * 2 + 0]);
	/* As much faster as an a100 is than a t4 by the table. */
	ASSERT_CLOSE(_compute_on(j, 1) / _compute_on(j, 0),
		     copus_gpu_type_speed("a100") / copus_gpu_type_speed("t4"),
		     1e-9);
	_site_constants(false);
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
		_cluster(4, 4);
		_site_types();
		_nodes[0].gpu_type = _nodes[1].gpu_type = 1;
		_site_constants(true);
		j = _running(1, 0, 2, 4, 1, 16, NOW - 600);
		j->alloc_type = 1;
		strcpy(j->type_req, "aws");
		strcpy(j->app, "imagenet");
		_hint_perf(j, "\"aws\":" T4_PERF);
		in = copus__memo_find(&_s, j->id);
		CU_ASSERT_PTR_NOT_NULL_FATAL(in);
		in->rate = 10.0; /* 9999 s left */
		in->type_known = true;
		strcpy(in->type_req, asked ? "aws" : "");
		_decide();
		if (asked) {
			ASSERT_ACTION(j, COPUS__ACT_NONE);
		} else {
			ASSERT_ACTION(j, COPUS__ACT_ASK);
			CU_ASSERT_EQUAL(j->dtype, 0);
		}
	}
	_site_constants(false);
}

static int _desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x > y ? -1 : x < y;
}

/*
 * copus_max_jobs: the cut is the max_jobs-th highest priority, as a full
 * sort finds it, with few or many equal priorities, and 0 when no more
 * jobs than that are pending.
 */
static void the_priority_cut_is_the_max_jobs_th_highest(void)
{
	static const int spreads[] = { 1, 3, 50, 1000000 };
	static const int counts[] = { 1, 2, 7, 100, 5000 };
	uint32_t *v = malloc(5000 * sizeof(*v)), *w = malloc(5000 * sizeof(*w));
	uint32_t two[] = { 9, 4 };
	unsigned seed = 7;
	int a, b, k, i;

	CU_ASSERT_EQUAL(copus__priority_cut(two, 2, 2), 0);
	CU_ASSERT_EQUAL(copus__priority_cut(two, 2, 0), 0);
	CU_ASSERT_EQUAL(copus__priority_cut(two, 2, 1), 9);
	CU_ASSERT_EQUAL(copus__priority_cut(NULL, 0, 5), 0);
	for (a = 0; a < 4; a++)
		for (b = 0; b < 5; b++) {
			int n = counts[b];

			for (i = 0; i < n; i++)
				v[i] = 1 + (uint32_t)(rand_r(&seed) % spreads[a]);
			memcpy(w, v, n * sizeof(*v));
			qsort(w, n, sizeof(*w), _desc);
			for (k = 1; k < n; k += 1 + n / 7) {
				uint32_t got = copus__priority_cut(v, n, k);

				CU_ASSERT_EQUAL(got, w[k - 1]);
				if (got != w[k - 1])
					fprintf(stderr, "spread %d, %d jobs, "
						"max_jobs %d: cut %u, not %u\n",
						spreads[a], n, k, got,
						w[k - 1]);
			}
		}
	/* Sorted either way: the median of three keeps it linear. */
	for (i = 0; i < 5000; i++)
		v[i] = (uint32_t)i;
	CU_ASSERT_EQUAL(copus__priority_cut(v, 5000, 1000), 4000);
	for (i = 0; i < 5000; i++)
		v[i] = (uint32_t)(5000 - i);
	CU_ASSERT_EQUAL(copus__priority_cut(v, 5000, 1000), 4001);
	free(v);
	free(w);
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(a_pending_elastic_job_gets_gpus_within_its_range),
		TEST(a_pending_elastic_job_on_its_request_starts_as_it_is),
		TEST(a_job_of_two_gpus_per_replica_gets_an_even_count),
		TEST(a_job_of_a_gpu_multiple_starts_on_a_multiple),
		TEST(a_running_rigid_job_is_never_moved),
		TEST(a_job_on_an_unusable_node_is_asked_to_move),
		TEST(a_job_is_not_asked_again_within_its_restart_delay),
		TEST(a_same_shape_move_needs_a_policy_that_moves_jobs),
		TEST(a_move_slurm_cannot_express_is_asked_as_its_largest_part),
		TEST(a_shrink_asks_the_job_with_a_hint_not_the_one_without),
		TEST(a_rescale_in_flight_is_not_asked_again),
		TEST(a_checkpointed_job_is_requeued_once),
		TEST(a_round_between_intervals_moves_no_running_job),
		TEST(a_requeued_job_is_resized_after_the_release_gap),
		TEST(a_requeued_job_restarts_on_the_cell_it_was_moved_to),
		TEST(a_held_job_is_placed_on_its_whole_cell),
		TEST(a_rigid_job_waits_for_one_of_higher_priority),
		TEST(one_user_cannot_take_more_than_the_cap),
		TEST(the_less_served_user_starts_first),
		TEST(a_restarted_job_waits_until_registrations_settle),
		TEST(a_job_started_before_a_crash_waits_until_registrations_settle),
		TEST(the_round_marks_its_starts_before_acting),
		TEST(a_start_by_an_earlier_slurmctld_is_a_stray_in_the_same_second),
		TEST(a_job_started_before_a_crash_is_cleared_before_it_starts),
		TEST(a_run_the_new_slurmctld_saw_leaves_no_stray),
		TEST(a_job_that_can_never_run_here_says_why),
		TEST(a_job_without_gpus_is_left_to_slurm),
		TEST(a_policy_failure_decides_nothing_and_names_the_job),
		TEST(a_job_with_a_model_gets_only_counts_with_a_plan),
		TEST(a_policy_without_cells_gets_a_count_with_a_plan),
		TEST(a_reconfigure_with_a_constants_file_changes_the_plan),
		TEST(a_decided_cell_without_a_plan_is_not_applied),
		TEST(time_limits_reach_the_policy),
		TEST(a_job_measured_on_one_type_gets_an_estimate_on_another),
		TEST(a_ratio_measured_by_a_job_of_the_same_application_comes_first),
		TEST(site_type_names_get_estimates_from_the_constants_file),
		TEST(a_type_the_plugin_set_does_not_tie_an_elastic_job),
		TEST(the_priority_cut_is_the_max_jobs_th_highest),
	};
	int rc = RUN_TESTS("plugin-round", tests);

	copus_policy_destroy(_s.policy);
	copus__memo_free(&_s);
	copus__round_free(&_r);
	copus__planner_free(&_s.planner);
	return rc;
}
