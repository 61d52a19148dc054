/*
 * The backfill policy (core/policy/backfill.c), Slurm's sched/backfill: its
 * order, its reservations against the jobs' time limits, rigid sizes and
 * GPU types, on small hand-made clusters.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <copus/policy.h>

#include "harness.h"

#define MAXN 4
#define MAXJ 8

/* A cluster, its jobs and their allocations: one scheduling world. */
struct world {
	copus_node nodes[MAXN];
	copus_cluster c;
	copus_job j[MAXJ];
	copus_slot alloc[MAXJ][MAXN];
	copus_decision d[MAXJ];
	size_t n;
	copus_policy *p;
};

/* nn nodes of g GPUs each, of type types[k] (NULL: all type 0). */
static void world_init(struct world *w, const char *policy, int nn,
		       const int *g, const int *types, int ntypes)
{
	memset(w, 0, sizeof(*w));
	for (int k = 0; k < nn; k++) {
		w->nodes[k].gpu_type = types != NULL ? types[k] : 0;
		w->nodes[k].gpus = g[k];
		w->nodes[k].usable = true;
	}
	w->c.num_nodes = nn;
	w->c.nodes = w->nodes;
	w->c.num_types = ntypes;
	ASSERT_STATUS(copus_policy_create(policy, NULL, &w->p), COPUS_OK);
}

/* A rigid job of gpus GPUs with a time limit (0: none). */
static copus_job *add(struct world *w, uint64_t id, int gpus, double submit,
		      double limit)
{
	copus_job *jb = &w->j[w->n++];

	memset(jb, 0, sizeof(*jb));
	jb->id = id;
	jb->min_gpus = 1;
	jb->max_gpus = gpus;
	jb->req_gpus = gpus;
	jb->req_batch = 128;
	jb->submit_time = submit;
	jb->remaining = -1;
	jb->time_limit = limit;
	return jb;
}

/* Job i runs on gpus GPUs of node k (of the node's type). */
static void running(struct world *w, size_t i, int k, int gpus)
{
	int s = w->j[i].alloc_slots;

	w->alloc[i][s] = (copus_slot){ k, gpus };
	w->j[i].alloc = w->alloc[i];
	w->j[i].alloc_slots = s + 1;
	w->j[i].alloc_type = w->nodes[k].gpu_type;
}

static void decide(struct world *w, double now)
{
	ASSERT_STATUS(copus_policy_decide(w->p, &w->c, w->j, w->n, now, w->d),
		      COPUS_OK);
}

/* The decisions become the jobs' allocations, as the caller applies them. */
static void apply(struct world *w)
{
	for (size_t i = 0; i < w->n; i++) {
		w->j[i].alloc_slots = 0;
		w->j[i].alloc = w->alloc[i];
		for (int k = 0; k < w->d[i].num_slots; k++)
			w->alloc[i][k] = w->d[i].slots[k];
		w->j[i].alloc_slots = w->d[i].num_slots;
		w->j[i].alloc_type = w->d[i].gpu_type;
	}
}

/* Job i has ended: it leaves the world. */
static void leave(struct world *w, size_t i)
{
	for (size_t k = i; k + 1 < w->n; k++) {
		w->j[k] = w->j[k + 1];
		memcpy(w->alloc[k], w->alloc[k + 1], sizeof(w->alloc[k]));
		w->j[k].alloc = w->alloc[k];
	}
	w->n--;
}

static size_t index_of(const struct world *w, uint64_t id)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->j[i].id == id)
			return i;
	return (size_t)-1;
}

static int gpus_of(const struct world *w, uint64_t id)
{
	size_t i = index_of(w, id);

	return i == (size_t)-1 ? -1 : w->d[i].gpus;
}

#define ASSERT_GPUS(w, id, want)                                              \
	do {                                                                  \
		int g_ = gpus_of((w), (id));                                  \
		if (g_ != (want))                                             \
			fprintf(stderr, "%s:%d: job %d has %d GPUs, expected " \
				"%d (%s)\n", __FILE__, __LINE__, (int)(id),   \
				g_, (want),                                   \
				g_ < 0 ? "gone" :                             \
				(w)->d[index_of((w), (id))].reason);          \
		CU_ASSERT_EQUAL(g_, (want));                                  \
	} while (0)

static const int four[MAXN] = { 4, 4, 4, 4 };

/*
 * Submit order, then id; the caller's priority before both; multifactor's
 * job-size term when asked for.
 */
static void jobs_start_in_submit_order(void)
{
	struct world w;
	copus_policy *p;

	world_init(&w, "backfill", 1, four, NULL, 1);
	add(&w, 7, 4, 10, 3600);
	add(&w, 3, 4, 20, 3600);
	add(&w, 5, 4, 10, 3600); /* same submit time as 7: lower id first */
	decide(&w, 100);
	ASSERT_GPUS(&w, 5, 4);
	ASSERT_GPUS(&w, 7, 0);
	ASSERT_GPUS(&w, 3, 0);
	/* Slurm's own priority, when the caller has it, goes first. */
	w.j[1].priority = 10;
	decide(&w, 100);
	ASSERT_GPUS(&w, 3, 4);
	copus_policy_destroy(w.p);

	/* size=W: the larger job first, as multifactor's favour-large. */
	world_init(&w, "backfill:size=1000", 2, four, NULL, 1);
	add(&w, 1, 2, 0, 3600);
	add(&w, 2, 8, 50, 3600);
	decide(&w, 100);
	ASSERT_GPUS(&w, 2, 8);
	ASSERT_GPUS(&w, 1, 0);
	copus_policy_destroy(w.p);
	/* age=W: an old small job before a new large one of equal weight. */
	world_init(&w, "backfill:size=1,age=1,max_age=100", 2, four, NULL, 1);
	add(&w, 1, 2, 0, 3600);
	add(&w, 2, 8, 99, 3600);
	decide(&w, 100);
	ASSERT_GPUS(&w, 1, 2);
	ASSERT_GPUS(&w, 2, 0);
	copus_policy_destroy(w.p);

	ASSERT_STATUS(copus_policy_create("backfill:bogus", NULL, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("backfill:window=-1", NULL, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("backfill:max_test=0", NULL, &p),
		      COPUS_EINVAL);
	ASSERT_STATUS(copus_policy_create("backfill:default_time=x", NULL, &p),
		      COPUS_EINVAL);
}

/*
 * The head (8 GPUs) waits for a running job whose limit ends at 100 s; a
 * 2-GPU job whose limit ends by then starts in the hole, a 2-GPU job of a
 * longer limit does not. Replayed round by round, every job running to
 * its limit, the head starts at 100 s exactly: the backfilled job never
 * delays it.
 */
static void a_short_job_backfills_without_delaying_the_head(void)
{
	struct world w;
	double now;

	world_init(&w, "backfill", 2, four, NULL, 1);
	add(&w, 1, 4, 0, 100);
	add(&w, 2, 8, 1, 1000);
	add(&w, 3, 2, 2, 50);
	add(&w, 4, 2, 3, 500);
	running(&w, 0, 0, 4);
	decide(&w, 0);
	ASSERT_GPUS(&w, 1, 4);
	CU_ASSERT_FALSE(w.d[0].changed);
	ASSERT_GPUS(&w, 2, 0);
	CU_ASSERT(strstr(w.d[1].reason, "reserved in 100 s") != NULL);
	ASSERT_GPUS(&w, 3, 2);
	CU_ASSERT(strstr(w.d[2].reason, "backfilled") != NULL);
	ASSERT_GPUS(&w, 4, 0);
	apply(&w);
	for (now = 10; now <= 100; now += 10) {
		if (now == 50)
			leave(&w, index_of(&w, 3));
		if (now == 100)
			leave(&w, index_of(&w, 1));
		decide(&w, now);
		ASSERT_GPUS(&w, 4, 0);
		if (gpus_of(&w, 2) != 0)
			break;
		apply(&w);
	}
	CU_ASSERT_EQUAL(now, 100);
	ASSERT_GPUS(&w, 2, 8);
	copus_policy_destroy(w.p);
}

/*
 * bf_interval=30: the backfill pass runs at 0 s and again from 30 s on;
 * the rounds between are the main scheduler's, which starts jobs in order
 * and stops at the first that cannot start. A short job submitted at 10 s
 * behind the blocked head waits until the pass at 30 s, where it is
 * backfilled; without the option it is backfilled at once.
 */
static void between_backfill_cycles_only_jobs_in_order_start(void)
{
	struct world w;

	for (int cycles = 0; cycles < 2; cycles++) {
		world_init(&w, cycles ? "backfill:bf_interval=30" : "backfill",
			   2, four, NULL, 1);
		add(&w, 1, 4, 0, 100);
		add(&w, 2, 8, 1, 1000);
		running(&w, 0, 0, 4);
		decide(&w, 0);
		ASSERT_GPUS(&w, 2, 0);
		apply(&w);
		add(&w, 3, 2, 10, 50);
		decide(&w, 10);
		ASSERT_GPUS(&w, 2, 0);
		ASSERT_GPUS(&w, 3, cycles ? 0 : 2);
		if (cycles) {
			CU_ASSERT(strstr(w.d[2].reason,
					 "waits for the next backfill cycle") !=
				  NULL);
			apply(&w);
			decide(&w, 29);
			ASSERT_GPUS(&w, 3, 0);
			apply(&w);
			decide(&w, 30);
			ASSERT_GPUS(&w, 3, 2);
			CU_ASSERT(strstr(w.d[2].reason, "backfilled") != NULL);
		}
		/* The head starts in order, in a main scheduler's round too,
		 * once the others have ended. */
		apply(&w);
		leave(&w, index_of(&w, 3));
		leave(&w, index_of(&w, 1));
		decide(&w, 40);
		ASSERT_GPUS(&w, 2, 8);
		copus_policy_destroy(w.p);
	}
	ASSERT_STATUS(copus_policy_create("backfill:bf_interval=x", NULL, NULL),
		      COPUS_EINVAL);
}

/*
 * sched_delay=3: slurmctld's main scheduler runs at most once every
 * batch_sched_delay, when a job was submitted or ended since its last run.
 * A job submitted at 1 s, a second after a pass, starts at 3 s, not at 1
 * or 2; the end of the jobs at 20 s starts the next one at once. Without
 * the option every round is a pass. The backfill cycle (bf_interval=100)
 * runs at 0 s only.
 */
static void the_main_scheduler_waits_for_sched_delay(void)
{
	struct world w;

	for (int delay = 0; delay < 2; delay++) {
		world_init(&w,
			   delay ? "backfill:bf_interval=100,sched_delay=3" :
				   "backfill:bf_interval=100",
			   2, four, NULL, 1);
		add(&w, 1, 4, 0, 0);
		decide(&w, 0);
		ASSERT_GPUS(&w, 1, 4);
		apply(&w);
		add(&w, 2, 2, 1, 0);
		decide(&w, 1);
		ASSERT_GPUS(&w, 2, delay ? 0 : 2);
		if (delay) {
			CU_ASSERT(strstr(w.d[1].reason,
					 "waits for Slurm's next scheduling "
					 "pass") != NULL);
			apply(&w);
			decide(&w, 2);
			ASSERT_GPUS(&w, 2, 0);
			apply(&w);
			decide(&w, 3);
			ASSERT_GPUS(&w, 2, 2);
		}
		apply(&w);
		add(&w, 3, 8, 4, 0);
		decide(&w, 10);
		ASSERT_GPUS(&w, 3, 0);
		apply(&w);
		leave(&w, index_of(&w, 2));
		leave(&w, index_of(&w, 1));
		decide(&w, 20);
		ASSERT_GPUS(&w, 3, 8);
		copus_policy_destroy(w.p);
	}
	ASSERT_STATUS(copus_policy_create("backfill:sched_delay=-1", NULL,
					  NULL),
		      COPUS_EINVAL);
}

/*
 * Spare GPUs: a long job that uses only GPUs the head's reservation leaves
 * free starts; one that would take reserved GPUs waits.
 */
static void a_long_job_runs_only_on_gpus_the_head_leaves(void)
{
	struct world w;

	world_init(&w, "backfill", 3, four, NULL, 1);
	add(&w, 1, 8, 0, 100);
	add(&w, 2, 8, 1, 1000); /* reserved at 100, 4 GPUs to spare */
	add(&w, 3, 2, 2, 5000); /* fits beside it */
	add(&w, 4, 4, 3, 5000); /* would take 2 of the head's */
	running(&w, 0, 0, 4);
	running(&w, 0, 1, 4);
	decide(&w, 0);
	ASSERT_GPUS(&w, 2, 0);
	ASSERT_GPUS(&w, 3, 2);
	ASSERT_GPUS(&w, 4, 0);
	copus_policy_destroy(w.p);
}

/*
 * As Slurm, every waiting job within the window gets a reservation, not
 * only the first: a job that fits beside the first reservation but would
 * delay the second waits; with easy (one reservation) it starts.
 */
static void every_waiting_job_is_reserved_unless_easy(void)
{
	static const char *const names[] = { "backfill", "backfill:easy" };

	for (int e = 0; e < 2; e++) {
		struct world w;

		world_init(&w, names[e], 3, four, NULL, 1);
		add(&w, 1, 8, 0, 100);
		add(&w, 2, 8, 1, 100);   /* reserved at [100, 200) */
		add(&w, 3, 12, 2, 100);  /* reserved at [200, 300) */
		add(&w, 4, 4, 3, 1000);  /* beside 2, through 3 */
		running(&w, 0, 0, 4);
		running(&w, 0, 1, 4);
		decide(&w, 0);
		ASSERT_GPUS(&w, 2, 0);
		ASSERT_GPUS(&w, 3, 0);
		ASSERT_GPUS(&w, 4, e == 0 ? 0 : 4);
		if (e == 0)
			CU_ASSERT(strstr(w.d[2].reason, "reserved in 200 s") !=
				  NULL);
		copus_policy_destroy(w.p);
	}
}

/*
 * Limits: without one (Slurm's unlimited MaxTime) no job can be reserved
 * within the window, so every job that fits starts in order (first fit);
 * default_time=S gives every job without a limit S, and limit_factor=F F
 * times its run time as copus_job.remaining first says it.
 */
static void limits_come_from_the_job_the_default_or_the_factor(void)
{
	static const char *const names[] = {
		"backfill", "backfill:default_time=100",
		"backfill:limit_factor=2"
	};

	for (int v = 0; v < 3; v++) {
		struct world w;
		copus_job *jb;

		world_init(&w, names[v], 2, four, NULL, 1);
		jb = add(&w, 1, 4, 0, 0);
		jb->remaining = 50; /* x 2 = 100 */
		add(&w, 2, 8, 1, 0)->remaining = 400;
		add(&w, 3, 2, 2, 0)->remaining = 3000;
		running(&w, 0, 0, 4);
		decide(&w, 0);
		ASSERT_GPUS(&w, 2, 0);
		/* Unlimited: job 3 fits, so it starts; by the default it
		 * ends with job 1, in time; by the factor it would delay
		 * job 2's reservation at 100 s. */
		ASSERT_GPUS(&w, 3, v == 2 ? 0 : 2);
		CU_ASSERT(strstr(w.d[1].reason, v > 0 ? "reserved in 100 s" :
				 "beyond the window") != NULL);
		/* The job's own limit wins over the default and the
		 * factor: 40 s ends before the reservation. */
		w.j[2].time_limit = 40;
		w.j[2].remaining = 20;
		decide(&w, 0);
		ASSERT_GPUS(&w, 3, 2);
		copus_policy_destroy(w.p);
	}
}

/*
 * Rigid: an elastic job gets its request, never more on an empty cluster,
 * and waits rather than starting on fewer.
 */
static void an_elastic_job_runs_at_its_request(void)
{
	struct world w;
	copus_job *jb;

	world_init(&w, "backfill", 2, four, NULL, 1);
	jb = add(&w, 1, 2, 0, 100);
	jb->elastic = true;
	jb->max_gpus = 8;
	decide(&w, 0);
	ASSERT_GPUS(&w, 1, 2);
	add(&w, 2, 6, 1, 100);
	jb = add(&w, 3, 4, 2, 100);
	jb->elastic = true;
	jb->min_gpus = 1;
	jb->max_gpus = 8;
	apply(&w);
	decide(&w, 10);
	ASSERT_GPUS(&w, 1, 2);
	ASSERT_GPUS(&w, 2, 6);
	ASSERT_GPUS(&w, 3, 0);
	copus_policy_destroy(w.p);
}

/*
 * GPU types: a job runs only on a type it accepts; one that accepts
 * several is reserved on the type that frees first, and a job that would
 * take that type's reserved GPUs waits while one that ends in time starts
 * there; a job no type can hold waits with that reason.
 */
static void a_job_runs_and_is_reserved_on_its_types(void)
{
	static const int g[2] = { 4, 8 }, types[2] = { 0, 1 };
	static const char *const tn[2] = { "a", "b" };
	struct world w;
	copus_job *jb;

	world_init(&w, "backfill", 2, g, types, 2);
	w.c.type_names = tn;
	add(&w, 1, 2, 0, 100);   /* on a until 100 */
	add(&w, 2, 8, 0, 500);   /* on b until 500 */
	add(&w, 3, 4, 1, 1000);  /* any type: a at 100, b at 500 */
	jb = add(&w, 4, 2, 2, 500);
	jb->type_mask = 1u << 0; /* a only: would delay job 3 */
	add(&w, 5, 2, 3, 50);    /* any type, ends before 100 */
	jb = add(&w, 6, 8, 4, 10);
	jb->type_mask = 1u << 0; /* a has 4 GPUs */
	running(&w, 0, 0, 2);
	running(&w, 1, 1, 8);
	decide(&w, 0);
	ASSERT_GPUS(&w, 3, 0);
	CU_ASSERT(strstr(w.d[2].reason, "reserved in 100 s on a") != NULL);
	ASSERT_GPUS(&w, 4, 0);
	ASSERT_GPUS(&w, 5, 2);
	CU_ASSERT_EQUAL(w.d[4].gpu_type, 0);
	ASSERT_GPUS(&w, 6, 0);
	CU_ASSERT(strstr(w.d[5].reason, "no type has room") != NULL);
	/* A job for b only goes to b when b has room. */
	w.n = 0;
	jb = add(&w, 7, 4, 0, 100);
	jb->type_mask = 1u << 1;
	decide(&w, 0);
	ASSERT_GPUS(&w, 7, 4);
	CU_ASSERT_EQUAL(w.d[0].gpu_type, 1);
	copus_policy_destroy(w.p);
}

/* A negative or NaN time limit is inconsistent input. */
static void a_bad_time_limit_is_refused(void)
{
	struct world w;

	world_init(&w, "backfill", 1, four, NULL, 1);
	add(&w, 1, 2, 0, -1);
	ASSERT_STATUS(copus_policy_decide(w.p, &w.c, w.j, w.n, 0, w.d),
		      COPUS_EINVAL);
	w.j[0].time_limit = NAN;
	ASSERT_STATUS(copus_policy_decide(w.p, &w.c, w.j, w.n, 0, w.d),
		      COPUS_EINVAL);
	w.j[0].time_limit = INFINITY; /* unlimited */
	decide(&w, 0);
	ASSERT_GPUS(&w, 1, 2);
	copus_policy_destroy(w.p);
}

static const struct test_case tests[] = {
	TEST(jobs_start_in_submit_order),
	TEST(a_short_job_backfills_without_delaying_the_head),
	TEST(a_long_job_runs_only_on_gpus_the_head_leaves),
	TEST(every_waiting_job_is_reserved_unless_easy),
	TEST(limits_come_from_the_job_the_default_or_the_factor),
	TEST(an_elastic_job_runs_at_its_request),
	TEST(a_job_runs_and_is_reserved_on_its_types),
	TEST(a_bad_time_limit_is_refused),
		TEST(between_backfill_cycles_only_jobs_in_order_start),
		TEST(the_main_scheduler_waits_for_sched_delay),
};

int main(void)
{
	return RUN_TESTS("policy-backfill", tests);
}
