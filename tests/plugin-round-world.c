/*
 * The world of sched/copus's round tests (plugin-round-world.h).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copus/error.h"
#include "copus/hint.h"
#include "copus/planner.h"
#include "copus/policy.h"
#include "plugin-round-world.h"

struct round_world W;

/* A cluster of n nodes with gpus a100 GPUs each, all free and usable. */
void rw_cluster(int n, int gpus)
{
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	int i;

	if (W.s.policy)
		copus_policy_destroy(W.s.policy);
	copus__memo_free(&W.s);
	copus__usage_free(&W.s.usage);
	copus__round_free(&W.r);
	copus__planner_free(&W.s.planner);
	memset(&W.s, 0, sizeof(W.s));
	memset(&W.r, 0, sizeof(W.r));
	memset(W.rj, 0, sizeof(W.rj));
	copus__params_default(&W.s.params);
	/* The policy as sched_copus.c creates it. */
	prm.interval = W.s.params.interval;
	prm.restart_delay = W.s.params.restart_cost;
	prm.fairness_p = W.s.params.fairness;
	prm.equal_per_node = true;
	ASSERT_STATUS(copus_policy_create("copus", &prm, &W.s.policy),
		      COPUS_OK);
	W.r.when = NOW;
	W.r.nnodes = n;
	W.r.nodes = W.nodes;
	W.r.names = W.names;
	W.r.free = W.free;
	W.r.cfg = W.cfg;
	W.r.ntypes = 1;
	strcpy(W.r.types[0], "a100");
	W.r.rj = W.rj;
	for (i = 0; i < n; i++) {
		W.nodes[i].gpu_type = 0;
		W.nodes[i].gpus = gpus;
		W.nodes[i].usable = true;
		W.free[i] = W.cfg[i] = gpus;
		snprintf(W.names[i], sizeof(W.names[i]), "n%d", i + 1);
	}
}

struct copus__round_job *rw_job(uint32_t id, int emin, int emax)
{
	struct copus__round_job *j = &W.rj[W.r.nrj++];

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
struct copus__round_job *rw_pending(uint32_t id, int nodes, int gpn,
				    int emin, int emax)
{
	struct copus__round_job *j = rw_job(id, emin, emax);
	int i;

	j->nodes_req = nodes;
	j->gpn_req = gpn;
	j->eligible = W.eligible[j - W.rj];
	for (i = 0; i < W.r.nnodes; i++)
		j->eligible[i] = 1;
	W.r.npending++;
	return j;
}

/*
 * A job running since start with gpn GPUs on each of nodes nodes from
 * node first on. Its GPUs are not free; those of an elastic job are the
 * policy's to use, those of a rigid one are not (as the snapshot counts
 * them).
 */
struct copus__round_job *rw_running(uint32_t id, int first, int nodes,
				    int gpn, int emin, int emax,
				    time_t start)
{
	struct copus__round_job *j = rw_job(id, emin, emax);
	int k;

	j->running = true;
	j->start = start;
	j->nodes_req = nodes;
	j->gpn_req = gpn;
	j->alloc = W.alloc[j - W.rj];
	for (k = 0; k < nodes; k++) {
		j->alloc[k].node = first + k;
		j->alloc[k].gpus = gpn;
		W.free[first + k] -= gpn;
		if (j->rigid)
			W.nodes[first + k].gpus -= gpn;
	}
	j->nalloc = j->nrun = nodes;
	j->cur_gpus = nodes * gpn;
	W.r.nrunning++;
	return j;
}

/*
 * Gives the job a record with a running job's hint: its id, restarts and
 * time, then the members in rest (a JSON object's inside).
 */
void rw_hint_text(const struct copus__round_job *j, const char *rest)
{
	char text[COPUS_HINT_MAX_LEN + 1], err[128];
	struct copus__memo *in = copus__memo_get(&W.s, j->id);

	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	snprintf(text, sizeof(text), "copus1:{\"v\":1,\"job\":%u,"
		 "\"st\":\"running\",\"step\":10,\"rc\":%d,\"t\":%d,%s}",
		 j->id, j->restarts, NOW - 10, rest);
	ASSERT_STATUS(copus_hint_parse(text, &in->hint, err, sizeof(err)),
		      COPUS_OK);
	in->have_hint = true;
	in->req_gpus = j->running ? j->cur_gpus : j->nodes_req * j->gpn_req;
}

/*
 * Gives the job a record with a hint that has a model for a100, and a
 * granularity when gran > 1.
 */
void rw_hint_gran(const struct copus__round_job *j, int gran)
{
	char rest[COPUS_HINT_MAX_LEN + 1], g[32] = "";

	if (gran > 1)
		snprintf(g, sizeof(g), ",\"gran\":%d", gran);
	snprintf(rest, sizeof(rest), "\"b0\":128,\"bmax\":4096,\"lmin\":8,"
		 "\"lmax\":256,\"acc\":true,\"sqr\":0.01,\"var\":10,"
		 "\"prog\":10,\"tgt\":100000%s,\"perf\":{\"a100\":[0.02,"
		 "0.002,0.05,0.002,0.005,0.0005,1.5]}", g);
	rw_hint_text(j, rest);
}

void rw_hint(const struct copus__round_job *j)
{
	rw_hint_gran(j, 1);
}

/* Gives the job a record with a hint that describes its model (no perf). */
void rw_hint_model(const struct copus__round_job *j, const char *mdl)
{
	char rest[COPUS_HINT_MAX_LEN + 1];

	snprintf(rest, sizeof(rest), "\"b0\":16,\"bmax\":16,\"lmin\":1,"
		 "\"lmax\":16,\"acc\":true,\"sqr\":0,\"var\":0,"
		 "\"prog\":10,\"tgt\":100000,\"mdl\":%s", mdl);
	rw_hint_text(j, rest);
	if (!copus__memo_find(&W.s, j->id)->hint.has_model)
		fprintf(stderr, "the hint has no model: %s\n", rest);
}

/* The plan of a job's table for count GPUs on one node, or NULL. */
const struct copus__plan *rw_plan_on(const struct copus__round_job *j,
				     int count)
{
	return copus__plan_find(j->plans, j->ncells, 0, count, 1);
}

void rw_decide(void)
{
	copus__round_decide(&W.s, &W.r);
}

/* Writes text to a fresh file; its path in path (len bytes). */
void rw_write_file(const char *text, char *path, size_t len)
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
void rw_site_types(void)
{
	W.r.ntypes = 2;
	strcpy(W.r.types[0], "dgx-ext");
	strcpy(W.r.types[1], "aws");
}

/*
 * copus_planner_gpus: a file that names the site's types after the built-in
 * a100 and t4 (named), or none.
 */
void rw_site_constants(bool named)
{
	char path[64], err[256];

	if (!named) {
		ASSERT_STATUS(copus__planner_load(&W.s.planner, "", err,
						  sizeof(err)), COPUS_OK);
		return;
	}
	rw_write_file("{\"version\": 1, \"gpus\": {\"dgx-ext\": \"a100\", "
		      "\"aws\": \"t4\"}}\n", path, sizeof(path));
	ASSERT_STATUS(copus__planner_load(&W.s.planner, path, err, sizeof(err)),
		      COPUS_OK);
	unlink(path);
}

const char *const rw_action[] = {
	[COPUS__ACT_NONE] = "none",
	[COPUS__ACT_START] = "start",
	[COPUS__ACT_RESIZE] = "resize",
	[COPUS__ACT_ASK] = "ask",
	[COPUS__ACT_REQUEUE] = "requeue",
	[COPUS__ACT_CLEAR] = "clear",
};

/* What the round made of a job, for messages. */
void rw_show(const struct copus__round_job *j)
{
	fprintf(stderr, "job %u: %s, %d x %d GPUs, type %d, input %d, "
		"reason '%s'%s%s\n", j->id, rw_action[j->action], j->num_nodes,
		j->per_node, j->dtype, j->job, j->reason ? j->reason : "",
		j->job >= 0 && W.r.dec ? ", policy: " : "",
		j->job >= 0 && W.r.dec ? W.r.dec[j->job].reason : "");
}

void rw_free(void)
{
	copus_policy_destroy(W.s.policy);
	copus__memo_free(&W.s);
	copus__usage_free(&W.s.usage);
	copus__round_free(&W.r);
	copus__planner_free(&W.s.planner);
}
