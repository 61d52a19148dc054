/*
 * copus-sim's Arena world (sim/arena.c): the lookup rules on a tiny table
 * computed by hand, and the readers of the cluster spec, the database and
 * the trace with their errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "harness.h"

static char dir[] = "/tmp/test-arena-XXXXXX";
static char path[512];

/* Write text to a file of the temporary directory; its path in 'path'. */
static const char *put(const char *name, const char *text)
{
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Fail with the message when err does not contain want. */
#define ASSERT_ERR(err, want)                                                 \
	do {                                                                  \
		if (strstr((err), (want)) == NULL)                            \
			fprintf(stderr, "%s:%d: error '%s' does not say "     \
				"'%s'\n", __FILE__, __LINE__, (err), (want)); \
		CU_ASSERT(strstr((err), (want)) != NULL);                     \
	} while (0)

static const char *spec =
	"[{\"g4\": {\"node_num\": 4, \"gpus_per_node\": 4},"
	" \"a40\": {\"node_num\": 4}}]";

/* Sizes listed out of order: the reader orders a family by parameters. */
static const char *db =
	"{\"optimal\": {\n"
	" \"tf_4B_64\": {\"1_a40_1_n_2_d\": 10.0},\n"
	" \"tf_1B_64\": {\"1_g4_1_n_1_d\": 2.0, \"1_g4_1_n_4_d\": 0.8,\n"
	"               \"2_g4_2_n_4_d\": -1, \"1_a40_1_n_1_d\": 301,\n"
	"               \"1_h100_1_n_1_d\": 1.0},\n"
	" \"tf_2B_64\": {\"1_g4_1_n_2_d\": 3.0, \"2_g4_2_n_4_d\": 1.0,\n"
	"               \"1_a40_1_n_1_d\": 300}\n"
	"}}\n";

static void world(struct arena_world *w)
{
	char err[SIM_ERR_LEN] = "";

	memset(w, 0, sizeof(*w));
	ASSERT_STATUS(arena_cluster_read(put("spec.json", spec), w, err,
					 sizeof(err)), COPUS_OK);
	ASSERT_STATUS(arena_db_read(put("db.json", db), w, err, sizeof(err)),
		      COPUS_OK);
	if (err[0])
		fprintf(stderr, "%s\n", err);
}

/* Seconds of tf_<size>_64 on nodes x per GPUs of type t; -1: no fit. */
static double look(const struct arena_world *w, const char *size, int t,
		   int nodes, int per)
{
	int f = -1, s = -1;
	double sec;

	for (int i = 0; i < w->nfamilies; i++)
		if (strcmp(w->families[i].name, "tf") == 0)
			f = i;
	CU_ASSERT_FATAL(f >= 0);
	for (int k = 0; k < w->families[f].nsizes; k++)
		if (strcmp(w->families[f].sizes[k], size) == 0)
			s = k;
	CU_ASSERT_FATAL(s >= 0);
	return arena_lookup(w, f, s, 64, t, nodes, per, &sec) ? sec : -1;
}

static void test_cluster_spec_gives_types_nodes_and_gpus_per_node(void)
{
	struct arena_world w;

	world(&w);
	CU_ASSERT_EQUAL(w.ntypes, 2);
	CU_ASSERT_STRING_EQUAL(w.type_names[0], "g4");
	CU_ASSERT_EQUAL(w.node_num[0], 4);
	CU_ASSERT_EQUAL(w.per_node[0], 4);
	/* a40 is one of Arena's types: 2 GPUs per node. */
	CU_ASSERT_STRING_EQUAL(w.type_names[1], "a40");
	CU_ASSERT_EQUAL(w.per_node[1], 2);
	/* h100 is not in the cluster: its value is not kept. */
	CU_ASSERT_EQUAL(w.ndb, 8);
	arena_world_free(&w);
}

static void test_a_family_is_ordered_by_parameters(void)
{
	struct arena_world w;

	world(&w);
	CU_ASSERT_EQUAL(w.nfamilies, 1);
	CU_ASSERT_EQUAL(w.families[0].nsizes, 3);
	CU_ASSERT_STRING_EQUAL(w.families[0].sizes[0], "1B");
	CU_ASSERT_STRING_EQUAL(w.families[0].sizes[1], "2B");
	CU_ASSERT_STRING_EQUAL(w.families[0].sizes[2], "4B");
	arena_world_free(&w);
}

static void test_a_measured_cell_is_its_value(void)
{
	struct arena_world w;

	world(&w);
	ASSERT_CLOSE(look(&w, "1B", 0, 1, 1), 2.0, 1e-12);
	ASSERT_CLOSE(look(&w, "1B", 0, 1, 4), 0.8, 1e-12);
	arena_world_free(&w);
}

static void test_a_spread_cell_is_the_best_locality_slowed_per_halving(void)
{
	struct arena_world w;

	world(&w);
	/* 4 GPUs on 2 nodes: 1 x 4 at 0.8 s is 80 samples/s, x0.9 = 72,
	 * 64 / 72 = 0.889 s; on 4 nodes x0.81 = 64.8, 0.988 s. */
	ASSERT_CLOSE(look(&w, "1B", 0, 2, 2), 0.889, 1e-12);
	ASSERT_CLOSE(look(&w, "1B", 0, 4, 1), 0.988, 1e-12);
	/* 2B has no best-locality value of 4 GPUs, nor 4B on 2 x 2. */
	CU_ASSERT_EQUAL(look(&w, "2B", 0, 2, 2), -1);
	arena_world_free(&w);
}

static void test_a_missing_size_is_the_next_larger_sped_up_per_step(void)
{
	struct arena_world w;
	char err[256];
	int f;

	world(&w);
	/* 1 x 2 GPUs is its own best locality; 2B on it: 64 / 3 = 21.333
	 * samples/s, x1.8 = 38.3994, 1.667 s. */
	ASSERT_CLOSE(look(&w, "1B", 0, 1, 2), 1.667, 1e-12);
	/* Two steps, to 4B: 6.4 x 1.8^2 = 20.736, 3.086 s. */
	ASSERT_CLOSE(look(&w, "1B", 1, 1, 2), 3.086, 1e-12);
	/* A size the world knows between them is a step too (as from
	 * planner/models.csv): 6.4 x 1.8^3 = 37.3248, 1.715 s. */
	CU_ASSERT(arena_family_size(&w, "tf", "3B", &f, err, sizeof(err)) ==
		  2);
	ASSERT_CLOSE(look(&w, "1B", 1, 1, 2), 1.715, 1e-12);
	/* Smaller sizes are never used: 4B on 1 x 1 has nothing. */
	CU_ASSERT_EQUAL(look(&w, "4B", 0, 1, 1), -1);
	arena_world_free(&w);
}

static void test_minus_one_or_over_a_round_does_not_fit(void)
{
	struct arena_world w;

	world(&w);
	/* -1 is final: 2B's value of the same cell is not used. */
	CU_ASSERT_EQUAL(look(&w, "1B", 0, 2, 4), -1);
	CU_ASSERT_EQUAL(look(&w, "1B", 1, 1, 1), -1); /* 301 s */
	/* A stored 300 s fits, although Arena's rounding makes it 300.469. */
	ASSERT_CLOSE(look(&w, "2B", 1, 1, 1), 300.469, 1e-12);
	arena_world_free(&w);
}

static void test_bad_cluster_specs_are_named(void)
{
	struct arena_world w;
	char err[SIM_ERR_LEN];

	memset(&w, 0, sizeof(w));
	ASSERT_STATUS(arena_cluster_read(put("s.json",
		"{\"g4\": {\"node_num\": 4, \"gpus_per_node\": 4}}"), &w, err,
		sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL(w.ntypes, 1);
	ASSERT_STATUS(arena_cluster_read(put("s.json",
		"[{\"a100\": {\"node_num\": 1.5}}]"), &w, err, sizeof(err)),
		COPUS_EPARSE);
	ASSERT_ERR(err, "s.json: GPU type 'a100': field node_num: '1.5'");
	ASSERT_STATUS(arena_cluster_read(put("s.json",
		"[{\"a100\": {}}]"), &w, err, sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "node_num: '(missing)'");
	ASSERT_STATUS(arena_cluster_read(put("s.json",
		"[{\"xpu\": {\"node_num\": 2}}]"), &w, err, sizeof(err)),
		COPUS_EPARSE);
	ASSERT_ERR(err, "GPU type 'xpu': GPUs per node unknown");
	ASSERT_STATUS(arena_cluster_read(put("s.json",
		"[{\"xpu\": {\"node_num\": 2, \"gpus_per_node\": 0}}]"), &w,
		err, sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "field gpus_per_node: '0'");
	ASSERT_STATUS(arena_cluster_read(put("s.json",
		"[{\"a100\":\n {\"node_num\": 2 x}}]"), &w, err, sizeof(err)),
		COPUS_EPARSE);
	ASSERT_ERR(err, "s.json:2: not JSON");
	ASSERT_STATUS(arena_cluster_read(put("s.json", "{}"), &w, err,
					 sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "no GPU type");
}

static void test_bad_databases_are_named(void)
{
	struct arena_world w;
	char err[SIM_ERR_LEN];

	memset(&w, 0, sizeof(w));
	ASSERT_STATUS(arena_cluster_read(put("spec.json", spec), &w, err,
					 sizeof(err)), COPUS_OK);
	ASSERT_STATUS(arena_db_read(put("d.json",
		"{\"optimal\": {\"tf64\": {}}}"), &w, err, sizeof(err)),
		COPUS_EPARSE);
	ASSERT_ERR(err, "d.json: optimal key 'tf64' is not");
	ASSERT_STATUS(arena_db_read(put("d.json",
		"{\"optimal\": {\"tf_1Q_64\": {}}}"), &w, err, sizeof(err)),
		COPUS_EPARSE);
	ASSERT_ERR(err, "size '1Q' is not a number of parameters");
	ASSERT_STATUS(arena_db_read(put("d.json",
		"{\"optimal\": {\"tf_1B_64\": {\"1_g4_2_n_1_d\": 1}}}"), &w,
		err, sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "optimal.tf_1B_64: cell '1_g4_2_n_1_d' is not");
	ASSERT_STATUS(arena_db_read(put("d.json",
		"{\"optimal\": {\"tf_1B_64\": {\"1_g4_1_n_1_d\": \"x\"}}}"),
		&w, err, sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "optimal.tf_1B_64.1_g4_1_n_1_d: '\"x\"' is not "
		   "seconds");
	ASSERT_STATUS(arena_db_read(put("d.json", "{\"all\": {}}"), &w, err,
				    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "\"optimal\"");
	arena_world_free(&w);
}

static const char *header = "job_id,submission_time,num_iteration,"
			    "model_name,deadline,batch_size,num_gpu,gpu_type\n";

static int trace(struct arena_world *w, const char *rows, char *err,
		 size_t len)
{
	char text[4096];

	snprintf(text, sizeof(text), "%s%s", header, rows);
	world(w);
	return arena_trace_read(put("t.csv", text), w, err, len);
}

static void test_the_trace_is_cut_into_rounds_from_the_first_job(void)
{
	struct arena_world w;
	char err[SIM_ERR_LEN] = "";

	ASSERT_STATUS(trace(&w,
		"a,1000,100,tf__1B,0,64,1,g4\n"
		"b,1300,100,tf__1B,0,64,4,g4\n"
		"c,1301,12,tf__2B,0,64,2,a40\n"
		"d,1900,100,tf__1B,0,64,1,g4\n"
		"e,1901,100,tf__1B,0,64,1,g4\n"
		"f,1000,100,tf__1B,0,32,1,g4\n", err, sizeof(err)), COPUS_OK);
	if (err[0])
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_EQUAL_FATAL(w.njobs, 6);
	CU_ASSERT_EQUAL(w.jobs[0].round, 0);
	CU_ASSERT_EQUAL(w.jobs[1].round, 0); /* at the round's end */
	CU_ASSERT_EQUAL(w.jobs[2].round, 1);
	CU_ASSERT_EQUAL(w.jobs[3].round, 2);
	CU_ASSERT_EQUAL(w.jobs[4].round, 3);
	CU_ASSERT_EQUAL(w.jobs[5].round, 3); /* out of order: the current */
	CU_ASSERT_EQUAL(w.jobs[2].iters, 2); /* a fifth of 12 */
	CU_ASSERT_EQUAL(w.jobs[2].type, 1);
	CU_ASSERT_EQUAL(w.jobs[1].gpus, 4);
	CU_ASSERT_STRING_EQUAL(w.jobs[2].name, "c");
	CU_ASSERT_EQUAL(w.jobs[2].line, 4);
	/* Three models: tf 1B and 2B at batch 64, 1B at 32. */
	CU_ASSERT_EQUAL(w.nmodels, 3);
	CU_ASSERT_EQUAL(w.jobs[0].model, w.jobs[1].model);
	arena_world_free(&w);
}

static void test_bad_traces_are_named_by_line_and_field(void)
{
	struct arena_world w;
	char err[SIM_ERR_LEN];

	world(&w);
	ASSERT_STATUS(arena_trace_read(put("t.csv",
		"job_id,submission_time,num_iteration,model_name,deadline,"
		"batch_size,gpu_type\na,0,10,tf__1B,0,64,g4\n"), &w, err,
		sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "t.csv:1: no column 'num_gpu' in the header");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,0,10,tf__1B,0,64,1,g4\n"
			  "b,0,10,tf__1B,0,64,3,g4\n", err, sizeof(err)),
		      COPUS_EPARSE);
	ASSERT_ERR(err, "t.csv:3: num_gpu: '3' is not 1, 2, 4, 8 or 16");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,soon,10,tf__1B,0,64,1,g4\n", err,
			    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "t.csv:2: submission_time: 'soon' is not a whole");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,0,10,tf__1B,0,64,1,tpu\n", err,
			    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "t.csv:2: gpu_type: 'tpu' is not a type of the "
		   "cluster");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,0,10,tf_1B,0,64,1,g4\n", err,
			    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "t.csv:2: model_name: 'tf_1B' is not "
		   "<family>__<size>");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,0,10,cnn__1B,0,64,1,g4\n", err,
			    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "the database has no model of family 'cnn'");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,0,10,tf__1B,0,64,1,g4,extra\n", err,
			    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "t.csv:2: 9 fields, the header has 8");
	arena_world_free(&w);
	ASSERT_STATUS(trace(&w, "a,0,4,tf__1B,0,64,1,g4\n", err,
			    sizeof(err)), COPUS_EPARSE);
	ASSERT_ERR(err, "num_iteration: '4' is not a whole number in 5..");
	arena_world_free(&w);
}

static void test_a_models_table_holds_every_fitting_cell(void)
{
	struct arena_world w;
	char err[SIM_ERR_LEN] = "";
	const struct arena_model *m;
	double sec;

	ASSERT_STATUS(trace(&w, "a,0,10,tf__1B,0,64,1,g4\n", err,
			    sizeof(err)), COPUS_OK);
	/* arena_world_read builds the tables; do as it does. */
	arena_world_free(&w);
	snprintf(path, sizeof(path), "%s/resources", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/database", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/traces", dir);
	mkdir(path, 0700);
	put("resources/sim_cluster_spec.json", spec);
	put("database/prof_database.json", db);
	put("traces/simulate_trace_philly.csv",
	    "job_id,submission_time,num_iteration,model_name,deadline,"
	    "batch_size,num_gpu,gpu_type\na,0,10,tf__1B,0,64,1,g4\n");
	ASSERT_STATUS(arena_world_read(dir, &w, err, sizeof(err)), COPUS_OK);
	CU_ASSERT_EQUAL_FATAL(w.nmodels, 1);
	m = &w.models[0];
	/* g4: 1x1, 1x2 (from 2B), 1x4, 2x2 and 4x1 (spread); 2x4 is -1;
	 * a40: 1x2 (from 4B). Nothing for 16 GPUs. */
	CU_ASSERT_EQUAL(m->ncells, 6);
	CU_ASSERT(arena_cell_seconds(m, 0, 4, 2, &sec));
	ASSERT_CLOSE(sec, 0.889, 1e-12);
	CU_ASSERT(!arena_cell_seconds(m, 0, 8, 2, &sec));
	CU_ASSERT(arena_cell_seconds(m, 1, 2, 1, &sec));
	ASSERT_CLOSE(sec, 3.086, 1e-12);
	arena_world_free(&w);
	ASSERT_STATUS(arena_world_read("/nonexistent", &w, err, sizeof(err)),
		      COPUS_EIO);
	ASSERT_ERR(err, "/nonexistent/resources/sim_cluster_spec.json: "
		   "cannot open");
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(test_cluster_spec_gives_types_nodes_and_gpus_per_node),
		TEST(test_a_family_is_ordered_by_parameters),
		TEST(test_a_measured_cell_is_its_value),
		TEST(test_a_spread_cell_is_the_best_locality_slowed_per_halving),
		TEST(test_a_missing_size_is_the_next_larger_sped_up_per_step),
		TEST(test_minus_one_or_over_a_round_does_not_fit),
		TEST(test_bad_cluster_specs_are_named),
		TEST(test_bad_databases_are_named),
		TEST(test_the_trace_is_cut_into_rounds_from_the_first_job),
		TEST(test_bad_traces_are_named_by_line_and_field),
		TEST(test_a_models_table_holds_every_fitting_cell),
	};
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	rc = RUN_TESTS("arena", tests);
	if (system(NULL)) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			rc = 1;
	}
	return rc;
}
