/*
 * Fuzz target: copus__state_parse(), one line of sched/copus's
 * StateSaveLocation/copus_state (rescales in flight, jobs' records, users'
 * usage, runs requeued after a rescale request), read back at every slurmctld start: a file
 * that outlives crashes, upgrades and an admin's editor. An accepted line
 * must hold values in range, which copus__state_format() must write as a
 * line that parses back to the same record, and that stays the same when
 * written again.
 */
#include <math.h>

#include "fuzz.h"
#include "options.h"
#include "statefmt.h"

static void check_rec(const struct copus__state_rec *r)
{
	if (r->kind == COPUS__STATE_RESCALE) {
		const struct copus__rescale *x = &r->rescale;

		FUZZ_CHECK(x->id >= 1);
		FUZZ_CHECK(x->asked >= 0);
		FUZZ_CHECK(x->from >= 1 && x->from <= COPUS__GPUS_MAX);
		FUZZ_CHECK(x->to >= 0 && x->to <= COPUS__GPUS_MAX);
		FUZZ_CHECK(x->rc >= -1);
		FUZZ_CHECK(memchr(x->type, '\0', sizeof(x->type)) != NULL);
		FUZZ_CHECK(strchr(x->type, ' ') == NULL);
		FUZZ_CHECK(!x->requeue_sent && !x->revived &&
			   x->pending_since == 0);
		return;
	}
	if (r->kind == COPUS__STATE_REVIVED) {
		FUZZ_CHECK(r->revived.id >= 1);
		FUZZ_CHECK(r->revived.rc >= 0 && r->revived.end >= 1);
		return;
	}
	if (r->kind == COPUS__STATE_USER) {
		FUZZ_CHECK(r->user.uid != UINT32_MAX);
		FUZZ_CHECK(isfinite(r->user.gpu_s) && r->user.gpu_s >= 0);
		return;
	}
	FUZZ_CHECK(r->kind == COPUS__STATE_JOB);
	FUZZ_CHECK(r->job.id >= 1);
	/* 0: a job without GPUs that the plugin started (its LAUNCHED). */
	FUZZ_CHECK(r->job.req_gpus >= 0 && r->job.req_gpus <= COPUS__GPUS_MAX);
	FUZZ_CHECK(r->job.submit >= 0 && r->job.launched >= 0);
	FUZZ_CHECK(r->job.max_had >= 0 && r->job.max_had <= COPUS__GPUS_MAX);
	FUZZ_CHECK(isfinite(r->job.attained) && r->job.attained >= 0);
	FUZZ_CHECK(isfinite(r->job.rate) && r->job.rate >= 0);
}

static int same(const struct copus__state_rec *a,
		const struct copus__state_rec *b)
{
	if (a->kind != b->kind)
		return 0;
	if (a->kind == COPUS__STATE_RESCALE)
		return a->rescale.id == b->rescale.id &&
		       a->rescale.asked == b->rescale.asked &&
		       a->rescale.from == b->rescale.from &&
		       a->rescale.to == b->rescale.to &&
		       a->rescale.gave_up == b->rescale.gave_up &&
		       a->rescale.rc == b->rescale.rc &&
		       strcmp(a->rescale.type, b->rescale.type) == 0;
	if (a->kind == COPUS__STATE_REVIVED)
		return a->revived.id == b->revived.id &&
		       a->revived.rc == b->revived.rc &&
		       a->revived.end == b->revived.end;
	if (a->kind == COPUS__STATE_USER)
		return a->user.uid == b->user.uid &&
		       a->user.gpu_s == b->user.gpu_s;
	return a->job.id == b->job.id && a->job.req_gpus == b->job.req_gpus &&
	       a->job.max_had == b->job.max_had &&
	       a->job.attained == b->job.attained &&
	       a->job.rate == b->job.rate && a->job.submit == b->job.submit &&
	       a->job.launched == b->job.launched;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = fuzz_text(data, size), out[256], again[256];
	struct copus__state_rec r, back;
	const char *why = NULL;

	if (copus__state_parse(line, &r, &why) != 0) {
		/* A rejection names the field, for the log line. */
		FUZZ_CHECK(why != NULL && why[0] != '\0');
		free(line);
		return 0;
	}
	check_rec(&r);
	FUZZ_CHECK(copus__state_format(&r, out, sizeof(out)) == 0);
	FUZZ_CHECK(strchr(out, '\n') == out + strlen(out) - 1);
	FUZZ_CHECK(copus__state_parse(out, &back, &why) == 0);
	FUZZ_CHECK(same(&r, &back));
	FUZZ_CHECK(copus__state_format(&back, again, sizeof(again)) == 0);
	FUZZ_CHECK(strcmp(out, again) == 0);
	free(line);
	return 0;
}
