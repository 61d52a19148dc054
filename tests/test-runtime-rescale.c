/*
 * tests/test-runtime: the rescale state machine with real processes
 * (test-runtime-ranks.c): a request during a step is honoured at its end,
 * the checkpoint is complete or absent, a restart resumes, and checkpoints
 * move between layouts.
 */
#include <copus_config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <copus/copus.h>

#include "harness.h"
#include "test-runtime.h"

void test_rescale_one_process(void)
{
	struct run run = { .world = 1, .steps = 40, .signal_at = 12,
			   .signal_rank = 0, .checkpoint_at = -1 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* The signal arrives inside step 13: it ends, then the exit. */
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 13);
	CU_ASSERT(access(report, F_OK) != 0);
	/* The restart loads step 13 and finishes with the same result. */
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 40);
	CU_ASSERT_EQUAL(loads, 1);
	CU_ASSERT_EQUAL(restored, 1);
	ASSERT_CLOSE(w, expected_w(40), 1e-12);
	remove_tmpdir();
}

void test_rescale_three_ranks_to_two(void)
{
	struct run run = { .world = 3, .steps = 30, .signal_at = 7,
			   .signal_rank = 2, .checkpoint_at = -1 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* Only rank 2 is signalled; all three agree and stop after step 8. */
	launch(&run, st, report);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 8);
	/* Restart on two ranks: both resume from step 8. */
	run.world = 2;
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 30);
	CU_ASSERT_EQUAL(loads, 1);
	ASSERT_CLOSE(w, expected_w(30), 1e-12);
	remove_tmpdir();
}

void test_crash_while_writing_keeps_old_checkpoint(void)
{
	struct run run = { .world = 1, .steps = 20, .signal_at = -1,
			   .checkpoint_at = 5 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* A plain checkpoint after step 5, a rescale that crashes in save. */
	run.steps = 5;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	run.steps = 20;
	run.checkpoint_at = -1;
	run.restart = 1;
	run.signal_at = 11;
	run.crash_on_save = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 9);
	/* The crash left the checkpoint of step 5, complete. */
	CU_ASSERT_EQUAL(manifest_step(), 5);
	run.signal_at = -1;
	run.crash_on_save = 0;
	run.restart = 2;
	unlink(report);
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 20);
	CU_ASSERT_EQUAL(loads, 1);
	ASSERT_CLOSE(w, expected_w(20), 1e-12);
	remove_tmpdir();
}

void test_failed_save_keeps_running(void)
{
	struct run run = { .world = 2, .steps = 15, .signal_at = 4,
			   .signal_rank = 1, .fail_on_save = 1,
			   .checkpoint_at = -1 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	launch(&run, st, report);
	/* No checkpoint, no exit: both ranks trained to the end. */
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), -1);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 15);
	ASSERT_CLOSE(w, expected_w(15), 1e-12);
	remove_tmpdir();
}

/*
 * With a checkpoint interval, a run that dies without warning (its node
 * failed) restarts from its latest periodic checkpoint, not from step 0,
 * and ends with the same result as an uninterrupted run.
 */
void test_periodic_checkpoints_survive_a_node_failure(void)
{
	struct run run = { .world = 2, .steps = 40, .signal_at = -1,
			   .checkpoint_at = -1, .ckpt_interval = 0.05,
			   .step_us = 10000, .die_at = 30 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step, at;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	/* 30 steps of 10 ms: several intervals of 50 ms have passed. */
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 31);
	CU_ASSERT_EQUAL(st[1], 31);
	at = manifest_step();
	if (!(at >= 1 && at <= 30))
		fprintf(stderr, "periodic checkpoint at step %lld\n",
			(long long)at);
	CU_ASSERT(at >= 1 && at <= 30);
	run.die_at = 0;
	run.restart = 1;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 40);
	CU_ASSERT_EQUAL(loads, 1);
	CU_ASSERT_EQUAL(restored, 1);
	ASSERT_CLOSE(w, expected_w(40), 1e-12);
	remove_tmpdir();
}

/* A periodic checkpoint that fails is logged; training goes on. */
void test_failed_periodic_checkpoint_keeps_training(void)
{
	struct run run = { .world = 2, .steps = 20, .signal_at = -1,
			   .checkpoint_at = -1, .fail_on_save = 1,
			   .ckpt_interval = 0.02, .step_us = 10000 };
	char report[512];
	int st[MAX_RANKS], loads, restored;
	int64_t step;
	double w;

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/report", tmpdir);
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), -1);
	read_report(report, &step, &w, &loads, &restored);
	CU_ASSERT_EQUAL(step, 20);
	ASSERT_CLOSE(w, expected_w(20), 1e-12);
	remove_tmpdir();
}

/* Files of the checkpoint directory whose name starts with prefix. */
static int count_files(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void touch(const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("left over\n", f);
	fclose(f);
}

static bool exists(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return access(path, F_OK) == 0;
}

/* One byte of a checkpoint file flipped: the size is right, the CRC not. */
void test_corrupt_checkpoint_is_refused(void)
{
	struct run run = { .world = 1, .steps = 5, .signal_at = -1,
			   .checkpoint_at = 5 };
	char path[512];
	int st[MAX_RANKS], c;
	FILE *f;

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	snprintf(path, sizeof(path), "%s/ckpt-5.r0", tmpdir);
	f = fopen(path, "r+");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	c = fgetc(f);
	fseek(f, 0, SEEK_SET);
	fputc(c ^ 0x01, f);
	fclose(f);
	run.restart = 1;
	run.checkpoint_at = -1;
	run.steps = 8;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 20); /* copus_init refused it */
	/* The same file with the byte back loads. */
	f = fopen(path, "r+");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputc(c, f);
	fclose(f);
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	remove_tmpdir();
}

/* A new run removes what crashes and failed checkpoints left behind. */
void test_leftovers_are_removed_at_start(void)
{
	struct run run = { .world = 1, .steps = 5, .signal_at = -1,
			   .checkpoint_at = 5 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	touch("ckpt-9.r0.tmp");
	touch("ckpt-7.r0");
	touch("ckpt-7.r3"); /* of a rank this job no longer has */
	touch("copus.manifest.tmp");
	touch("notes.txt"); /* not copus's */
	run.restart = 1;
	run.checkpoint_at = -1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT(!exists("ckpt-9.r0.tmp"));
	CU_ASSERT(!exists("ckpt-7.r0"));
	CU_ASSERT(!exists("ckpt-7.r3"));
	CU_ASSERT(!exists("copus.manifest.tmp"));
	CU_ASSERT(exists("notes.txt"));
	CU_ASSERT(exists("ckpt-5.r0"));
	CU_ASSERT_EQUAL(manifest_step(), 5);
	remove_tmpdir();
}

/*
 * Leftovers that appear while a run trains (as an earlier attempt's would
 * if it crashed mid-write) go at its next checkpoint, not only at the next
 * start.
 */
void test_leftovers_are_removed_after_a_commit(void)
{
	struct run run = { .world = 2, .steps = 8, .signal_at = -1,
			   .checkpoint_at = 3, .save_all = 1,
			   .leftovers_after_init = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), 3);
	for (int r = 0; r < 2; r++) {
		char name[64];

		snprintf(name, sizeof(name), "ckpt-6.r%d", r);
		CU_ASSERT(!exists(name));
		snprintf(name, sizeof(name), "ckpt-7.r%d.tmp", r);
		CU_ASSERT(!exists(name));
		snprintf(name, sizeof(name), "ckpt-3.r%d", r);
		CU_ASSERT(exists(name));
	}
	remove_tmpdir();
}

/*
 * Every rank saves; rank 0's save fails while rank 1's file is complete:
 * nothing commits, and rank 1's file does not stay behind.
 */
void test_failed_checkpoint_leaves_no_files(void)
{
	struct run run = { .world = 2, .steps = 10, .signal_at = 4,
			   .signal_rank = 1, .fail_on_save = 1,
			   .checkpoint_at = -1, .save_all = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(manifest_step(), -1);
	CU_ASSERT_EQUAL(count_files("ckpt-"), 0);
	remove_tmpdir();
}

/*
 * A checkpoint with one file per rank of 2 ranks cannot be loaded by 3:
 * every rank of the new run refuses it alike, none starts training.
 */
void test_all_ranks_refuse_a_layout_they_cannot_load(void)
{
	struct run run = { .world = 2, .steps = 20, .signal_at = 3,
			   .signal_rank = 0, .checkpoint_at = -1,
			   .save_all = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	run.world = 3;
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], 20);
	/* The same two ranks resume. */
	run.world = 2;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	remove_tmpdir();
}

/*
 * An old run of the job still alive (its node was given up on, the job
 * restarted elsewhere) never overwrites the current run's checkpoint.
 */
void test_old_run_does_not_overwrite_the_current_checkpoint(void)
{
	struct run run = { .world = 1, .steps = 5, .signal_at = -1,
			   .checkpoint_at = 5, .restart = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	/* Restart 0 reaches step 8 and tries to checkpoint: refused. */
	run.restart = 0;
	run.steps = 8;
	run.checkpoint_at = 8;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 23);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	CU_ASSERT(exists("ckpt-5.r0"));
	CU_ASSERT_EQUAL(count_files("ckpt-8"), 0);
	/* The current run (and any later one) checkpoints as before. */
	run.restart = 2;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 8);
	remove_tmpdir();
}

/*
 * Two ranks that measure different gradient noise and step times get the
 * same plan: batch, micro-batch, accumulation and learning-rate gain.
 */
void test_ranks_get_the_same_plan(void)
{
	char plans[512], path[600], p0[256], p1[256];
	struct run run = { .world = 2, .steps = 12, .signal_at = -1,
			   .checkpoint_at = -1, .distinct = 1,
			   .plans = plans };
	int st[MAX_RANKS];
	double batch, gain;

	clear_env();
	make_tmpdir();
	snprintf(plans, sizeof(plans), "%s/plan", tmpdir);
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0);
	snprintf(path, sizeof(path), "%s.0", plans);
	read_line(path, p0, sizeof(p0));
	snprintf(path, sizeof(path), "%s.1", plans);
	read_line(path, p1, sizeof(p1));
	if (strcmp(p0, p1) != 0)
		fprintf(stderr, "rank 0's plan %s differs from rank 1's %s",
			p0, p1);
	CU_ASSERT_STRING_EQUAL(p0, p1);
	/* The plan uses the measured noise: the gain is not the default. */
	CU_ASSERT_EQUAL(sscanf(p0, "%lg %*d %*d %lg", &batch, &gain), 2);
	CU_ASSERT(gain > 1.0);
	remove_tmpdir();
}

/*
 * Two pipeline stages hold different state: each stage's is saved (by the
 * first replica of the stage), and after the restart each stage loads its
 * own, whatever the default saving mode.
 */
void test_pipeline_stages_each_save_their_state(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = 3,
			   .signal_rank = 1, .checkpoint_at = -1,
			   .pipeline = 2, .rank_state = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	CU_ASSERT(exists("ckpt-4.r0"));
	CU_ASSERT(exists("ckpt-4.r1"));
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(st[1], 0); /* 25: stage 1 got stage 0's state */
	remove_tmpdir();
}

/*
 * A checkpoint of two pipeline stages restarted without a pipeline: the
 * files cannot serve the new layout, and every rank refuses it alike.
 */
void test_another_pipeline_layout_is_refused_by_every_rank(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = 3,
			   .signal_rank = 0, .checkpoint_at = -1,
			   .pipeline = 2, .rank_state = 1 };
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	run.signal_at = -1;
	run.restart = 1;
	run.pipeline = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 20);
	CU_ASSERT_EQUAL(st[1], 20);
	remove_tmpdir();
}

/*
 * One rank cannot restore (its file is corrupt): no rank starts training,
 * every rank's copus_init fails.
 */
void test_one_rank_failing_to_restore_stops_every_rank(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = -1,
			   .checkpoint_at = 4, .save_all = 1 };
	char path[512];
	int st[MAX_RANKS];
	FILE *f;

	clear_env();
	make_tmpdir();
	run.steps = 4;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0);
	CU_ASSERT_EQUAL(manifest_step(), 4);
	snprintf(path, sizeof(path), "%s/ckpt-4.r1", tmpdir);
	f = fopen(path, "r+");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputc('9', f);
	fclose(f);
	run.steps = 12;
	run.checkpoint_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 20); /* 22 when rank 0 trained alone */
	CU_ASSERT_EQUAL(st[1], 20);
	remove_tmpdir();
}

/*
 * The agreement carried by the application's sum (its gradient
 * all-reduce): a request on one rank stops both after the step, and
 * without one the runtime calls no collective of its own after init.
 */
void test_folded_agreement(void)
{
	struct run run = { .world = 2, .steps = 12, .signal_at = 4,
			   .signal_rank = 1, .checkpoint_at = -1, .fold = 1 };
	copus_config c = base_config();
	copus_ctx *ctx;
	double v[COPUS_AGREE_LEN];
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 5);
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, NULL);
	CU_ASSERT_EQUAL(st[0], 0); /* 27: an agree call per step */
	CU_ASSERT_EQUAL(st[1], 0);
	remove_tmpdir();

	/* Sums that are not of the job's ranks, or rounded, are refused. */
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	ASSERT_STATUS(copus_agree_pack(ctx, v, COPUS_AGREE_LEN), COPUS_ESTATE);
	ASSERT_STATUS(copus_step_begin(ctx), COPUS_OK);
	ASSERT_STATUS(copus_agree_pack(ctx, v, 3), COPUS_EINVAL);
	ASSERT_STATUS(copus_agree_pack(ctx, v, COPUS_AGREE_LEN), COPUS_OK);
	v[COPUS_AGREE_LEN - 2] = 2;
	ASSERT_STATUS(copus_agree_unpack(ctx, v, COPUS_AGREE_LEN), COPUS_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(copus_errmsg(ctx), "ranks"));
	v[COPUS_AGREE_LEN - 2] = 1;
	v[5] += 0.5;
	ASSERT_STATUS(copus_agree_unpack(ctx, v, COPUS_AGREE_LEN), COPUS_EINVAL);
	v[5] -= 0.5;
	ASSERT_STATUS(copus_agree_unpack(ctx, v, COPUS_AGREE_LEN), COPUS_OK);
	ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	copus_finalize(ctx);
}

static int read_count(const char *report, int rank)
{
	char path[600];
	int n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", report, rank);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

/*
 * Four ranks (data 2 x pipeline 2) of a six-layer model checkpoint; the
 * job resumes on three ranks in three stages and on two ranks in one
 * stage, each rank reading only the old stages that hold its layers, and
 * every layer ends as in an uninterrupted run.
 */
void test_checkpoints_reshard_between_layouts(void)
{
	struct run run = { .world = 4, .steps = 5, .signal_at = 2,
			   .signal_rank = 3, .checkpoint_at = -1,
			   .pipeline = 2, .layered = 1, .reshard = 1 };
	char report[512];
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/read", tmpdir);
	launch(&run, st, report);
	for (int r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(st[r], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 3);
	/* Three stages of two layers from two of three: 1, 2 and 1 files. */
	run.world = 3;
	run.pipeline = 3;
	run.signal_at = 6;
	run.signal_rank = 0;
	run.steps = 12;
	run.restart = 1;
	launch(&run, st, report);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(read_count(report, 0), 1);
	CU_ASSERT_EQUAL(read_count(report, 1), 2);
	CU_ASSERT_EQUAL(read_count(report, 2), 1);
	CU_ASSERT_EQUAL(manifest_step(), 7);
	/* One stage on two replicas: each reads all three files. */
	run.world = 2;
	run.pipeline = 1;
	run.signal_at = -1;
	run.restart = 2;
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], 0); /* 25: a layer lost or mixed up */
	CU_ASSERT_EQUAL(st[1], 0);
	CU_ASSERT_EQUAL(read_count(report, 0), 3);
	/* Without the callback the same checkpoint is refused by all. */
	run.world = 4;
	run.pipeline = 2;
	run.reshard = 0;
	run.restart = 3;
	unlink(report);
	launch(&run, st, report);
	for (int r = 0; r < 4; r++)
		CU_ASSERT_EQUAL(st[r], 20);
	remove_tmpdir();
}

/*
 * Tensor slices: two slices restored as three, each new slice reading the
 * old slices it overlaps (1/3 of the first, both, 1/3 of the second).
 */
void test_checkpoints_reshard_tensor_slices(void)
{
	struct run run = { .world = 2, .steps = 5, .signal_at = 2,
			   .signal_rank = 1, .checkpoint_at = -1,
			   .tensor = 2, .layered = 1, .reshard = 1 };
	char report[512];
	int st[MAX_RANKS];

	clear_env();
	make_tmpdir();
	snprintf(report, sizeof(report), "%s/read", tmpdir);
	launch(&run, st, report);
	CU_ASSERT_EQUAL(st[0], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(st[1], COPUS_EXIT_REQUEUE);
	CU_ASSERT_EQUAL(manifest_step(), 3);
	run.world = 3;
	run.tensor = 3;
	run.signal_at = -1;
	run.restart = 1;
	launch(&run, st, report);
	for (int r = 0; r < 3; r++)
		CU_ASSERT_EQUAL(st[r], 0);
	CU_ASSERT_EQUAL(read_count(report, 0), 1);
	CU_ASSERT_EQUAL(read_count(report, 1), 2);
	CU_ASSERT_EQUAL(read_count(report, 2), 1);
	remove_tmpdir();
}

