/*
 * What the files of tests/test-runtime share: the environment and the
 * temporary checkpoint directory of every test (test-runtime.c, which also
 * holds the registry), the ranks that the rescale tests fork
 * (test-runtime-ranks.c), and each file's tests for the registry.
 */
#ifndef COPUS_TEST_RUNTIME_H
#define COPUS_TEST_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <copus/copus.h>

/* test-runtime.c */
/* The temporary directory of a test (make_tmpdir, remove_tmpdir). */
extern char tmpdir[256];
/* Unset every variable of Slurm, PMIx and copus that libcopus reads. */
void clear_env(void);
/* A config with batch limits and no signal handler. */
copus_config base_config(void);
void make_tmpdir(void);
/* A file of tmpdir holding text; its CRC-32, as a manifest lists it. */
unsigned long put_tmp_file(const char *name, const char *text);
/* A load callback that restores nothing. */
int load_ok(void *arg, const char *path, int64_t step);
void remove_tmpdir(void);
/* copus_init fails with want, and copus_errmsg(NULL) names needle. */
void expect_init_error(copus_config *c, int want, const char *needle);
/* An agree callback that agrees with itself (one rank). */
int agree_noop(void *arg, int64_t *v, int n);
/* Busy work standing in for a step's computation (a CPU test model). */
void spin(double seconds);
/* The first line of a file (the test fails without one). */
void read_line(const char *path, char *buf, size_t len);

/* test-runtime-ranks.c */
/* The "model": a value that depends on every step in order. */
struct app {
	double w;
	int64_t step;
	int crash_on_save;   /* write half a file, then die */
	int fail_on_save;    /* return an error */
	int saves;
	int loads;
};
int app_save(void *arg, const char *path, int64_t step);
int app_load(void *arg, const char *path, int64_t step);
/* The model's value after steps steps from zero. */
double expected_w(int64_t steps);

/* The most ranks a run forks. */
#define MAX_RANKS 4
/* What a run's ranks do. */
struct run {
	int world;
	int64_t steps;           /* train until this step */
	int64_t signal_at;       /* raise the signal inside this step (-1: no) */
	int signal_rank;         /* only this rank gets the signal */
	int crash_on_save;       /* rank 0 crashes while saving */
	int fail_on_save;
	int64_t checkpoint_at;   /* an extra plain checkpoint after this step */
	int restart;
	double ckpt_interval;    /* periodic checkpoints (config.ckpt_interval) */
	int step_us;             /* each step sleeps this long */
	int64_t die_at;          /* every rank dies after this step (0: no) */
	int save_all;            /* config.save_all_ranks */
	int distinct;            /* ranks measure different noise and times */
	int pipeline;            /* config.pipeline_degree (0: 1) */
	int rank_state;          /* rank r's model starts at 1000 r */
	int fold;                /* the agreement rides on a sum of the ranks */
	int leftovers_after_init; /* leftovers appear after copus_init */
	int layered;             /* a model of LAYERS layers, split in stages */
	int reshard;             /* with a reshard callback */
	int tensor;              /* config.tensor_degree (0: 1) */
	const char *plans;       /* each rank writes its final plan here.<rank> */
};
/* Fork the ranks of a run; their exit statuses in status[]. */
void launch(const struct run *run, int *status, const char *report);
/* The step of the manifest in tmpdir; -1 without one, -2 without a step. */
int64_t manifest_step(void);
/* What rank 0 of a plain run reported at its end: step, model, loads,
 * restored. */
void read_report(const char *report, int64_t *step, double *w, int *loads,
		 int *restored);

/* test-runtime-planned.c */
void test_planned_degrees_are_the_planners_on_every_rank(void);
void test_planned_degrees_follow_the_world(void);
void test_planned_config_errors(void);
void test_hint_carries_the_model(void);
void test_planned_with_calibrated_constants(void);
void test_ranks_that_plan_differently_stop(void);
void test_config_of_the_older_layout(void);
void test_planned_stages_travel_with_the_checkpoint(void);

/* test-runtime-hints.c */
void test_hints_callback(void);
void test_hints_callback_outside_slurm(void);
void test_hints_first_model_comes_early(void);
void test_hints_model_of_new_placement_comes_early(void);
void test_failed_rescale_checkpoint_tells_the_scheduler(void);
void test_hints_scontrol(void);
void test_hint_model_leaves_out_a_lone_step(void);

/* test-runtime-rescale.c */
void test_rescale_one_process(void);
void test_rescale_three_ranks_to_two(void);
void test_crash_while_writing_keeps_old_checkpoint(void);
void test_failed_save_keeps_running(void);
void test_periodic_checkpoints_survive_a_node_failure(void);
void test_failed_periodic_checkpoint_keeps_training(void);
void test_corrupt_checkpoint_is_refused(void);
void test_leftovers_are_removed_at_start(void);
void test_leftovers_are_removed_after_a_commit(void);
void test_failed_checkpoint_leaves_no_files(void);
void test_all_ranks_refuse_a_layout_they_cannot_load(void);
void test_old_run_does_not_overwrite_the_current_checkpoint(void);
void test_ranks_get_the_same_plan(void);
void test_pipeline_stages_each_save_their_state(void);
void test_another_pipeline_layout_is_refused_by_every_rank(void);
void test_one_rank_failing_to_restore_stops_every_rank(void);
void test_folded_agreement(void);
void test_checkpoints_reshard_between_layouts(void);
void test_checkpoints_reshard_tensor_slices(void);

/* test-runtime-manifest.c */
/*
 * Write tmpdir's manifest of version 4: body, a JSON object without its
 * closing brace, then its checksum.
 */
void put_manifest_v4(const char *body);
void test_bad_manifest(void);
void test_version_1_manifest_loads(void);
void test_version_2_manifest_loads(void);
void test_edited_manifest_is_refused(void);
void test_fingerprint_of_another_model_is_refused(void);
void test_config_without_fingerprint(void);
void test_hint_carries_the_models_of_earlier_types(void);

/* test-runtime-restore.c */
void test_unwritable_checkpoint_dir_fails_init(void);
void test_all_ranks_restore_by_coordinates_from_data_inner(void);
void test_all_ranks_restore_by_coordinates_into_data_inner(void);
void test_all_ranks_of_another_layout_name_both_layouts(void);
void test_resume_is_logged_by_rank_0(void);
void test_manifest_records_when_and_how_it_was_written(void);

#endif /* COPUS_TEST_RUNTIME_H */
