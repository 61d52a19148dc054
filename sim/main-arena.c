/*
 * copus-sim --arena: Arena's world replayed under a policy (sim/arena.h),
 * its figures printed and its summary and timeline written.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "cli.h"

/* copus-sim --arena: read the world, replay it, report. */
int arena_main(const char *dir, struct arena_opts *o, const char *summary,
	       const char *timeline)
{
	struct arena_world w;
	struct arena_result r;
	char err[SIM_ERR_LEN];
	int status = 0;

	char pdir[4096];

	if (arena_world_read(dir, &w, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		return 2;
	}
	snprintf(pdir, sizeof(pdir), "%s/planner", dir);
	o->planner_dir = pdir;
	if (timeline != NULL) {
		if ((o->timeline = fopen(timeline, "w")) == NULL) {
			fprintf(stderr, "copus-sim: %s: %s\n", timeline,
				strerror(errno));
			arena_world_free(&w);
			return 2;
		}
		fprintf(o->timeline,
			"time,job,gpu_type,gpus,nodes,"
			"seconds_per_iteration,remaining_iterations\n");
	}
	if (arena_run(&w, o, &r, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		if (o->timeline != NULL)
			fclose(o->timeline);
		arena_world_free(&w);
		return 2;
	}
	printf("arena %s (%s rules): %zu of %zu submitted jobs finished in "
	       "%ld rounds, mean JCT %.2f h finished, %.2f h all (an "
	       "unfinished job counted to the horizon); %zu never started, "
	       "%ld restarts, %.0f GPU-hours\n",
	       o->policy, o->rules == ARENA_RULES_ARENA ? "Arena's" : "honest",
	       r.finished, r.submitted, r.rounds, r.mean_jct_finished / 3600,
	       r.mean_jct_all / 3600, r.never_started, r.restarts, r.gpu_hours);
	printf("arena %s bounds (each job alone on its fastest cell from its "
	       "submission): mean JCT %.2f h all; %.2f h for the jobs "
	       "finished here; %.2f h for any %zu finished\n",
	       o->policy, r.bound_all / 3600, r.bound_these / 3600,
	       r.bound_any / 3600, r.finished);
	printf("arena %s decisions: median %.2f ms, p95 %.2f ms, max %.2f ms "
	       "of CPU; wall %.2f s\n",
	       o->policy, r.decide_ms_median, r.decide_ms_p95, r.decide_ms_max,
	       r.wall);
	if (r.refused > 0)
		printf("arena %s: %ld decisions put a job on a cell it does "
		       "not fit (left waiting)\n",
		       o->policy, r.refused);
	if (o->timeline != NULL &&
	    (fflush(o->timeline) != 0 || ferror(o->timeline))) {
		fprintf(stderr, "copus-sim: --timeline: write error\n");
		status = 1;
	}
	if (summary && arena_summary_write(summary, &w, o, &r, err,
					   sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "copus-sim: %s\n", err);
		status = 1;
	}
	if (o->timeline != NULL && fclose(o->timeline) != 0)
		status = 1;
	arena_result_free(&r);
	arena_world_free(&w);
	return status;
}
