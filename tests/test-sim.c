/*
 * The simulator: profile interpolation, progress and completion rules,
 * a short replay against hand-computed JCTs, malformed input, and what a
 * policy is told of a job's speed on each GPU type, with and without
 * probes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine-apply.h"
#include "engine-job.h"
#include "harness.h"
#include "sim.h"

static char dir[64];

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/*
 * A toy model "toy": step time 1 s at micro-batch 10 on one GPU, no
 * gradient variance at batch 10 (gain 1), 100 units of progress an epoch,
 * two epochs (it has no completion epochs of its own, so the validation
 * files' length decides).
 */
/* A new dir holding the profile folder of one model, named name. */
static void model_dir(const char *name)
{
	char sub[128];

	snprintf(dir, sizeof(dir), "/tmp/copus-test-sim-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/%s", dir, name);
	mkdir(sub, 0700);
}

static void make_toy(void)
{
	model_dir("toy");
	put("toy/placements.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.5,0.5\n2,20,2.5,0.5\n"
	    "11,10,3.0,2.0\n");
	put("toy/scalability.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "6,6,10,5.0,4.0\n");
	put("toy/validation-10.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "100,100,0.5,1,0\n200,200,0.6,1,0\n");
	put("toy/validation-20.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "110,55,0.5,2,4\n220,110,0.6,2,4\n");
}

static void rm_toy(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static const char *const untyped[1] = { "" };

static void test_cluster_spec(void)
{
	struct sim_cluster c;
	char err[SIM_ERR_LEN];

	ASSERT_STATUS(sim_cluster_parse("16x4", &c, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(c.nnodes, 16);
	CU_ASSERT_EQUAL(c.ntypes, 1);
	CU_ASSERT_EQUAL(c.nodes[15].gpus, 4);
	sim_cluster_free(&c);
	ASSERT_STATUS(sim_cluster_parse("aws:6x4,rtx:3x8", &c, err,
					sizeof(err)), 0);
	CU_ASSERT_EQUAL(c.nnodes, 9);
	CU_ASSERT_EQUAL(c.ntypes, 2);
	CU_ASSERT_STRING_EQUAL(c.type_names[1], "rtx");
	CU_ASSERT_EQUAL(c.nodes[8].gpu_type, 1);
	CU_ASSERT_EQUAL(c.nodes[8].gpus, 8);
	sim_cluster_free(&c);
	ASSERT_STATUS(sim_cluster_parse("16", &c, err, sizeof(err)),
		      COPUS_EINVAL);
	ASSERT_STATUS(sim_cluster_parse("0x4", &c, err, sizeof(err)),
		      COPUS_EINVAL);
	ASSERT_STATUS(sim_cluster_parse("aws:6x4,3x8", &c, err, sizeof(err)),
		      COPUS_EINVAL);
	ASSERT_STATUS(sim_cluster_parse("aws:6x4,aws:3x8", &c, err,
					sizeof(err)), COPUS_EINVAL);
}

static void test_interpolation(void)
{
	struct app a;
	char err[SIM_ERR_LEN];
	double st, sy, sqr, var;
	int p1[1] = { 1 }, p2[1] = { 2 }, p11[2] = { 1, 1 };
	int p111[3] = { 1, 1, 1 };

	make_toy();
	ASSERT_STATUS(sim_app_load(&a, dir, "toy", untyped, 1, err,
				   sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(a.max_epochs, 2);
	ASSERT_CLOSE(a.init_batch, 10, 1e-12);
	ASSERT_CLOSE(a.max_batch, 20, 1e-12);
	CU_ASSERT_EQUAL(a.min_local, 10);
	CU_ASSERT_EQUAL(a.max_local, 20);
	/* Measured placement: linear in the local batch. */
	ASSERT_STATUS(sim_app_throughput(&a, 0, p1, 1, 15, &st, &sy), 0);
	ASSERT_CLOSE(st, 1.5, 1e-12);
	ASSERT_CLOSE(sy, 0.0, 1e-12);
	ASSERT_STATUS(sim_app_throughput(&a, 0, p2, 1, 15, &st, &sy), 0);
	ASSERT_CLOSE(st, 2.0, 1e-12);
	ASSERT_CLOSE(sy, 0.5, 1e-12);
	/* Outside the measured local batches: the nearest measurement. */
	ASSERT_STATUS(sim_app_throughput(&a, 0, p11, 2, 40, &st, &sy), 0);
	ASSERT_CLOSE(st, 3.0, 1e-12);
	/* Not measured: between 2 nodes (3.0) and 6 nodes (5.0). */
	ASSERT_STATUS(sim_app_throughput(&a, 0, p111, 3, 10, &st, &sy), 0);
	ASSERT_CLOSE(st, 3.5, 1e-12);
	ASSERT_CLOSE(sy, 2.5, 1e-12);
	/* Gradient statistics between batch sizes, per epoch. */
	sim_app_grad(&a, 15, 0, &sqr, &var);
	ASSERT_CLOSE(sqr, 1.5, 1e-12);
	ASSERT_CLOSE(var, 2.0, 1e-12);
	sim_app_grad(&a, 40, 1, &sqr, &var);
	ASSERT_CLOSE(sqr, 2.0, 1e-12);
	/* Progress of an epoch: the smallest over the validation runs. */
	ASSERT_CLOSE(sim_app_progress(&a, 0), 0, 1e-12);
	ASSERT_CLOSE(sim_app_progress(&a, 1), 100, 1e-12);
	ASSERT_CLOSE(sim_app_progress(&a, 2), 200, 1e-12);
	ASSERT_CLOSE(sim_app_iteration(&a, 15, 0), 77.5, 1e-12);
	/* Alone on one GPU: 200 units at 1 unit per second. */
	ASSERT_CLOSE(sim_solo_time(&a, 0, 4, 1, 10, 0, 0), 200, 1e-9);
	ASSERT_CLOSE(sim_solo_time(&a, 0, 4, 1, 10, 1, 150), 50, 1e-9);
	sim_app_free(&a);
	rm_toy();
}

static void test_batch_split(void)
{
	struct app a = { 0 };
	int at, ac;

	a.init_batch = 128;
	a.max_batch = 4096;
	a.max_local = 64;
	sim_split_batch(&a, 1024, 4, &at, &ac);
	CU_ASSERT_EQUAL(at, 64);
	CU_ASSERT_EQUAL(ac, 3);
	/* One GPU beyond the initial batch always accumulates. */
	a.max_local = 256;
	sim_split_batch(&a, 192, 1, &at, &ac);
	CU_ASSERT_EQUAL(ac, 1);
	CU_ASSERT_EQUAL(at, 96);
}

/*
 * Two jobs on one GPU: the first runs from the round at 60 s, pays 30 s of
 * restart, trains 200 s and ends at 290 s; the second waits for the round
 * at 300 s and ends at 530 s, 520 s after its submission at 10 s.
 */
static void replay(const char *policy)
{
	struct app a;
	struct sim_cluster c;
	struct sim_jobspec *jobs;
	struct sim_result res;
	struct sim_opts o = { .policy = policy, .interval = 60,
			      .restart_delay = 30, .workload_name = "w" };
	char err[SIM_ERR_LEN], path[128];
	size_t n;

	make_toy();
	put("w.csv", "name,time,application,num_replicas,batch_size\n"
		     "a,0,toy,1,10\nb,10,toy,1,10\n");
	snprintf(path, sizeof(path), "%s/w.csv", dir);
	ASSERT_STATUS(sim_app_load(&a, dir, "toy", untyped, 1, err,
				   sizeof(err)), COPUS_OK);
	ASSERT_STATUS(sim_cluster_parse("1x1", &c, err, sizeof(err)), 0);
	ASSERT_STATUS(sim_workload_read(path, &jobs, &n, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	jobs[0].app = jobs[1].app = 0;
	ASSERT_STATUS(sim_run(&c, &a, jobs, n, &o, &res, err, sizeof(err)), 0);
	ASSERT_CLOSE(res.jct[0], 290, 1e-9);
	ASSERT_CLOSE(res.jct[1], 520, 1e-9);
	ASSERT_CLOSE(res.avg_jct, 405, 1e-9);
	ASSERT_CLOSE(res.makespan, 530, 1e-9);
	ASSERT_CLOSE(res.gpu_hours, 2 * 230 / 3600.0, 1e-9);
	CU_ASSERT_EQUAL(res.restarts, 0);
	/* Alone, a job takes 30 + 200 s: b waited 290 s more. */
	ASSERT_CLOSE(res.max_ftf, 520.0 / 230.0, 1e-9);
	sim_result_free(&res);
	free(jobs);
	sim_cluster_free(&c);
	sim_app_free(&a);
	rm_toy();
}

/*
 * --restart-measured: the copus policy is told the mean cost of the moves
 * charged so far (7 s each here; first starts cost 3 s and are not moves),
 * and --restart-delay (20 s) until the first; without it, --restart-delay
 * throughout. Told what moves cost, it moved jobs less often here (8
 * restarts against 21) and the mean JCT was lower.
 */
static void test_the_policy_is_told_the_measured_cost_of_moves(void)
{
	double first = 3, move = 7;
	const struct sim_delays d = { &first, &move, 1, 1 };
	struct app a;
	struct sim_cluster c;
	struct sim_jobspec *jobs;
	struct sim_result res;
	char err[SIM_ERR_LEN], path[128];
	double jct = 0;
	size_t n;

	make_toy();
	/* "lin" scales nearly linearly up to a node's 4 GPUs, and its
	 * gradients are noisy enough for 4 GPUs' batch: alone, a job of it
	 * grows; when others arrive, it gives GPUs back. */
	mkdir(strcat(strcpy(path, dir), "/lin"), 0700);
	put("lin/placements.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.02,0.02\n2,20,2.02,0.02\n"
	    "3,10,1.03,0.03\n3,20,2.03,0.03\n4,10,1.04,0.04\n"
	    "4,20,2.04,0.04\n11,10,3.0,2.0\n");
	put("lin/scalability.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "6,6,10,5.0,4.0\n");
	put("lin/validation-10.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "1000,1000,0.5,1,400\n2000,2000,0.6,1,400\n");
	for (int b = 20; b <= 40; b *= 2) {
		char f[64];
		snprintf(f, sizeof(f), "lin/validation-%d.csv", b);
		put(f, "progress,iteration,metric,grad_sqr,grad_var\n"
		       "1000,500,0.5,1,400\n2000,1000,0.6,1,400\n");
	}
	put("w.csv", "name,time,application,num_replicas,batch_size\n"
		     "a,0,lin,1,10\nb,300,lin,1,10\nc,600,lin,1,10\n"
		     "d,900,lin,1,10\n");
	snprintf(path, sizeof(path), "%s/w.csv", dir);
	ASSERT_STATUS(sim_app_load(&a, dir, "lin", untyped, 1, err,
				   sizeof(err)), COPUS_OK);
	ASSERT_STATUS(sim_cluster_parse("1x4", &c, err, sizeof(err)), 0);
	ASSERT_STATUS(sim_workload_read(path, &jobs, &n, err, sizeof(err)), 0);
	for (size_t i = 0; i < n; i++)
		jobs[i].app = 0;
	for (int measured = 0; measured < 2; measured++) {
		struct sim_opts o = { .policy = "copus", .interval = 60,
				      .restart_delay = 20, .delays = &d,
				      .seed = 1, .workload_name = "w",
				      .restart_measured = measured };
		ASSERT_STATUS(sim_run(&c, &a, jobs, n, &o, &res, err,
				      sizeof(err)), 0);
		CU_ASSERT(res.restarts > 0);
		ASSERT_CLOSE(res.restart_counted, measured ? move : 20, 1e-12);
		if (measured) {
			CU_ASSERT(res.avg_jct < jct);
		} else {
			jct = res.avg_jct;
		}
		sim_result_free(&res);
	}
	free(jobs);
	sim_cluster_free(&c);
	sim_app_free(&a);
	rm_toy();
}

static void test_replay_fifo(void)
{
	replay("fifo");
}

static void test_replay_tiresias(void)
{
	replay("tiresias");
}

/* Malformed input names the file, the line and the column. */
static void test_malformed_input(void)
{
	struct sim_jobspec *jobs;
	struct app a;
	char err[SIM_ERR_LEN], path[128];
	size_t n;

	make_toy();
	snprintf(path, sizeof(path), "%s/w.csv", dir);
	put("w.csv", "name,time,application,num_replicas,batch_size\n"
		     "a,0,toy,1,10\nb,10,toy,abc,10\n");
	ASSERT_STATUS(sim_workload_read(path, &jobs, &n, err, sizeof(err)),
		      COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "w.csv:3: column 4 (num_replicas)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'abc'"));
	put("w.csv", "name,time,application,num_replicas,batch_size\n"
		     "a,0,toy,1\n");
	ASSERT_STATUS(sim_workload_read(path, &jobs, &n, err, sizeof(err)),
		      COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "w.csv:2: 4 fields"));
	put("w.csv", "name,when,application,num_replicas,batch_size\n");
	ASSERT_STATUS(sim_workload_read(path, &jobs, &n, err, sizeof(err)),
		      COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no column 'time'"));
	put("w.csv", "name,time,application,num_replicas,batch_size\n"
		     "a,-5,toy,1,10\n");
	ASSERT_STATUS(sim_workload_read(path, &jobs, &n, err, sizeof(err)),
		      COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "column 2 (time)"));
	put("toy/placements.csv",
	    "placement,local_bsz,step_time,sync_time\n1,10,1.0,0.0\n"
	    "1x,10,1.0,0.0\n");
	ASSERT_STATUS(sim_app_load(&a, dir, "toy", untyped, 1, err,
				   sizeof(err)), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "placements.csv:3: column 1"));
	put("toy/placements.csv",
	    "placement,local_bsz,step_time,sync_time\n1,10,nan,0.0\n");
	ASSERT_STATUS(sim_app_load(&a, dir, "toy", untyped, 1, err,
				   sizeof(err)), COPUS_EPARSE);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "placements.csv:2: column 3"));
	ASSERT_STATUS(sim_app_load(&a, dir, "missing", untyped, 1, err,
				   sizeof(err)), COPUS_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "missing/placements.csv"));
	rm_toy();
}

/* The real Pollux profiles load, and a measured point is reproduced. */
static void test_pollux_profiles(void)
{
	const char *data = getenv("COPUS_DATA");
	char d[512], err[SIM_ERR_LEN];
	struct app a;
	int p4[1] = { 4 };
	double st, sy;

	if (data == NULL)
		return;
	snprintf(d, sizeof(d), "%s/pollux/traces", data);
	if (access(d, R_OK) != 0)
		return;
	ASSERT_STATUS(sim_app_load(&a, d, "cifar10", untyped, 1, err,
				   sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(a.max_epochs, 100);
	CU_ASSERT(a.has_oracle[0]);
	ASSERT_STATUS(sim_app_throughput(&a, 0, p4, 1, a.min_local, &st, &sy),
		      0);
	CU_ASSERT(st > 0 && sy >= 0 && sy < st);
	sim_app_free(&a);
	ASSERT_STATUS(sim_app_load(&a, d, "yolov3", untyped, 1, err,
				   sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(a.max_local, 8);
	CU_ASSERT_EQUAL(a.max_epochs, 50);
	sim_app_free(&a);
}

/*
 * The toy on two GPU types, "slow" as make_toy's and "fast" computing four
 * times faster (the synchronisation alike): one step of micro-batch 10 on
 * one GPU takes 1 s on slow and 0.25 s on fast.
 */
static void make_typed_toy(void)
{
	make_toy();
	put("toy/placements-slow.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.5,0.5\n2,20,2.5,0.5\n"
	    "11,10,3.0,2.0\n");
	put("toy/scalability-slow.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "6,6,10,5.0,4.0\n");
	put("toy/placements-fast.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,0.25,0.0\n1,20,0.5,0.0\n2,10,0.75,0.5\n2,20,1.0,0.5\n"
	    "11,10,2.25,2.0\n");
	put("toy/scalability-fast.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "6,6,10,4.25,4.0\n");
}

/*
 * Without probes a policy is told what the plugin learns from a job's
 * hints: its model on each type it has run on (its last hint carries them
 * all), none on a type it has not run on (or its last run's model on every
 * type when that type is named "default", as copus__hint_models reads a
 * hint's "default"). With probes, a type it has not run on gets its model
 * scaled by the one-GPU steps timed there.
 */
static void test_only_probes_tell_its_speed_on_types_it_never_ran_on(void)
{
	static const char names[2][32] = { "slow", "fast" };
	static const char dflt[2][32] = { "default", "fast" };
	static const char *const types[2] = { "slow", "fast" };
	const copus_model_source L = COPUS_MODELS_LEARNED;
	struct sjob *j = calloc(1, sizeof(*j));
	const copus_model *m;
	struct app a;
	char err[SIM_ERR_LEN];

	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	make_typed_toy();
	ASSERT_STATUS(sim_app_load(&a, dir, "toy", types, 2, err,
				   sizeof(err)), COPUS_OK);
	CU_ASSERT_FATAL(a.has_oracle[0] && a.has_oracle[1]);
	j->app = &a;
	j->hint_type = -1;
	/* Before it has run: nothing, with probes or without. */
	for (int t = 0; t < 2; t++) {
		CU_ASSERT_PTR_NULL(copus__sim_job_model(j, L, t, false, names));
		CU_ASSERT_PTR_NULL(copus__sim_job_model(j, L, t, true, names));
	}
	/* It has run on slow (its model there: the slow table's fit). */
	j->model[0] = a.oracle[0];
	j->has_model[0] = true;
	j->nobs[0] = 3;
	j->hint_type = 0;
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, L, 0, false, names),
			    &j->model[0]);
	CU_ASSERT_PTR_NULL(copus__sim_job_model(j, L, 1, false, names));
	m = copus__sim_job_model(j, L, 1, true, names);
	CU_ASSERT_PTR_EQUAL_FATAL(m, &j->boot[1]);
	ASSERT_CLOSE(m->perf.alpha_c, 0.25 * j->model[0].perf.alpha_c, 1e-12);
	ASSERT_CLOSE(m->perf.beta_c, 0.25 * j->model[0].perf.beta_c, 1e-12);
	ASSERT_CLOSE(m->perf.alpha_n, j->model[0].perf.alpha_n, 1e-12);
	/* A type named "default": the plugin gives its model to every type. */
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, L, 1, false, dflt),
			    &j->model[0]);
	/* Then it ran on fast: its hints carry fast's model first and slow's
	 * after it (the runtime fits every type its checkpoint kept
	 * observations of), so the plugin keeps both, with probes or
	 * without. */
	j->model[1] = a.oracle[1];
	j->has_model[1] = true;
	j->nobs[1] = 1;
	j->hint_type = 1;
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, L, 0, false, names),
			    &j->model[0]);
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, L, 1, false, names),
			    &j->model[1]);
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, L, 0, true, names),
			    &j->model[0]);
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, L, 1, true, names),
			    &j->model[1]);
	/* A policy with oracle models gets the table's fit either way. */
	CU_ASSERT_PTR_EQUAL(copus__sim_job_model(j, COPUS_MODELS_ORACLE, 0,
						 false, names), &a.oracle[0]);
	CU_ASSERT_PTR_NULL(copus__sim_job_model(j, COPUS_MODELS_NONE, 0, true,
						names));
	sim_app_free(&a);
	free(j);
	rm_toy();
}

/*
 * A GPU type with more memory holds larger micro-batches: the model "mem"
 * is measured up to micro-batch 20 on "small" and up to 40 on "big" (each
 * type's table within its own GPU's memory). A job that keeps batch 80 on
 * two GPUs accumulates two micro-batches of 20 a GPU on small and takes one
 * of 40 on big, whichever type comes first; the models it learns and the
 * ones probes give it carry the same limits.
 */
static void test_each_gpu_type_holds_its_own_micro_batches(void)
{
	static const char *const types[2][2] = { { "small", "big" },
						 { "big", "small" } };
	static const char names[2][2][32] = { { "small", "big" },
					      { "big", "small" } };
	char err[SIM_ERR_LEN];

	model_dir("mem");
	put("mem/placements-small.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.5,0.5\n2,20,2.5,0.5\n");
	put("mem/scalability-small.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "2,2,10,3.0,2.0\n2,2,20,4.0,2.0\n");
	put("mem/placements-big.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,0.5,0.0\n1,40,2.0,0.0\n2,10,1.0,0.5\n2,40,2.5,0.5\n");
	put("mem/scalability-big.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "2,2,10,2.5,2.0\n2,2,40,4.0,2.0\n");
	put("mem/validation-10.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "100,100,0.5,1,0\n200,200,0.6,1,0\n");
	put("mem/validation-80.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "110,55,0.5,2,4\n220,110,0.6,2,4\n");
	for (int order = 0; order < 2; order++) {
		int big = order == 0 ? 1 : 0, small = 1 - big;
		struct sjob *j = calloc(1, sizeof(*j));
		int place[1] = { 2 };
		struct app a;
		const copus_model *m;

		CU_ASSERT_PTR_NOT_NULL_FATAL(j);
		ASSERT_STATUS(sim_app_load(&a, dir, "mem", types[order], 2,
					   err, sizeof(err)), COPUS_OK);
		j->app = &a;
		j->hint_type = -1;
		j->place = place;
		j->gpus = 2;
		j->nodes = 1;
		j->target_batch = 80;
		j->type = small;
		copus__sim_update_local(j);
		CU_ASSERT_EQUAL(j->atomic, 20);
		CU_ASSERT_EQUAL(j->accum, 1);
		j->type = big;
		copus__sim_update_local(j);
		CU_ASSERT_EQUAL(j->atomic, 40);
		CU_ASSERT_EQUAL(j->accum, 0);
		/* A minute on big: its learned model holds 40 there. */
		j->learn = true;
		j->restarts = 0;
		j->completion = -1;
		copus__sim_job_step(j, 0, 60, 1);
		CU_ASSERT_FATAL(j->has_model[big]);
		CU_ASSERT_EQUAL(j->model[big].limits.max_local, 40);
		/* Probed on small from big's model: small's memory. */
		m = copus__sim_job_model(j, COPUS_MODELS_LEARNED, small, true,
					 names[order]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(m);
		CU_ASSERT_EQUAL(m->limits.max_local, 20);
		for (int t = 0; t < SIM_MAX_TYPES; t++)
			free(j->obs[t]);
		free(j);
		sim_app_free(&a);
	}
	rm_toy();
}

/*
 * A job that ran on one node of 2, then 4 GPUs, of a model whose sync grows
 * with the GPUs: a policy is told the model its jobs' agents fit. The copus
 * policy's (libcopus's prior) puts the sync across nodes at 1.1 x the sync
 * of 4 GPUs in a node at any number of nodes; a baseline's (Pollux's agent)
 * grows it across nodes by the in-node growth per GPU.
 */
static void test_the_policy_is_told_its_agents_fit(void)
{
	static const char *const policies[3] = { "copus", "pollux", "sia" };
	char err[SIM_ERR_LEN];
	struct app a;

	model_dir("ring");
	put("ring/placements.csv",
	    "placement,local_bsz,step_time,sync_time\n"
	    "1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.5,0.5\n2,20,2.5,0.5\n"
	    "4,10,2.0,1.0\n4,20,3.0,1.0\n");
	put("ring/scalability.csv",
	    "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
	    "8,8,10,9.0,8.0\n");
	put("ring/validation-10.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "100,100,0.5,1,0\n200,200,0.6,1,0\n");
	put("ring/validation-20.csv",
	    "progress,iteration,metric,grad_sqr,grad_var\n"
	    "110,55,0.5,2,4\n220,110,0.6,2,4\n");
	ASSERT_STATUS(sim_app_load(&a, dir, "ring", untyped, 1, err,
				   sizeof(err)), COPUS_OK);
	for (int p = 0; p < 3; p++) {
		copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
		copus_policy *pol = NULL;
		struct sjob *j = calloc(1, sizeof(*j));
		int place[1] = { 2 };
		copus_step_times in4, two, many;

		CU_ASSERT_PTR_NOT_NULL_FATAL(j);
		ASSERT_STATUS(copus_policy_create(policies[p], &prm, &pol),
			      COPUS_OK);
		j->fit_prior = copus_policy_traits(pol)->fit_prior;
		CU_ASSERT_EQUAL(j->fit_prior, p == 0 ? COPUS_FIT_PRIOR_RING
						     : COPUS_FIT_PRIOR_POLLUX);
		copus_policy_destroy(pol);
		j->app = &a;
		j->hint_type = -1;
		j->place = place;
		j->learn = true;
		j->completion = -1;
		j->target_batch = 20;
		for (int k = 2; k <= 4; k += 2) {
			place[0] = j->gpus = k;
			j->nodes = 1;
			copus__sim_update_local(j);
			copus__sim_job_step(j, 0, 60, 1);
		}
		CU_ASSERT_FATAL(j->has_model[0] && j->nobs[0] >= 2);
		const copus_perf_params *m = &j->model[0].perf;
		CU_ASSERT(m->beta_r > 1e-6);
		ASSERT_STATUS(copus_step_time(m, 1, 4, 10, 0, &in4), COPUS_OK);
		ASSERT_STATUS(copus_step_time(m, 2, 2, 10, 0, &two), COPUS_OK);
		ASSERT_STATUS(copus_step_time(m, 8, 32, 10, 0, &many),
			      COPUS_OK);
		if (p == 0) {
			ASSERT_CLOSE(two.sync, 1.1 * in4.sync, 1e-6);
			ASSERT_CLOSE(many.sync, two.sync, 1e-6);
		} else {
			ASSERT_CLOSE(many.sync,
				     1.1 * (m->alpha_r + 30 * m->beta_r),
				     1e-6);
			CU_ASSERT(many.sync > 2.0 * 1.1 * in4.sync);
		}
		for (int t = 0; t < SIM_MAX_TYPES; t++)
			free(j->obs[t]);
		free(j);
	}
	sim_app_free(&a);
	rm_toy();
}

/*
 * --min-run holds a job that has been moved for that long after its
 * restart, as sched/copus's copus_restart_delay does; a job's first run
 * (restarts 0) is not held, nor a job that has no GPUs.
 */
static void test_min_run_holds_a_moved_job_not_a_first_run(void)
{
	struct sjob j = { .gpus = 4, .run_start = 100.0, .restarts = 1 };

	CU_ASSERT(copus__sim_held(62.0, 130.0, &j));
	CU_ASSERT(!copus__sim_held(62.0, 162.0, &j));
	CU_ASSERT(!copus__sim_held(0.0, 130.0, &j));
	j.restarts = 0;
	CU_ASSERT(!copus__sim_held(62.0, 130.0, &j));
	j.restarts = 1;
	j.gpus = 0;
	CU_ASSERT(!copus__sim_held(62.0, 130.0, &j));
}

static const struct test_case tests[] = {
	TEST(test_cluster_spec),
	TEST(test_interpolation),
	TEST(test_batch_split),
	TEST(test_replay_fifo),
	TEST(test_the_policy_is_told_the_measured_cost_of_moves),
	TEST(test_replay_tiresias),
	TEST(test_malformed_input),
	TEST(test_pollux_profiles),
	TEST(test_only_probes_tell_its_speed_on_types_it_never_ran_on),
	TEST(test_each_gpu_type_holds_its_own_micro_batches),
	TEST(test_the_policy_is_told_its_agents_fit),
	TEST(test_min_run_holds_a_moved_job_not_a_first_run),
};

int main(void)
{
	return RUN_TESTS("sim", tests);
}
