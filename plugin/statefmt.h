/*
 * The lines of StateSaveLocation/copus_state, read and written without
 * Slurm, so that the reader can be tested and fuzzed on its own
 * (tests/test-plugin-sched.c, tests/fuzz/fuzz-state.c). statefile.c reads
 * and writes the file with these.
 *
 * A line is one record, its fields separated by single spaces:
 *
 *	rescale ID ASKED FROM TO TYPE GAVE_UP [RC]
 *	job ID REQ HAD ATTAINED [RATE [SUBMIT [LAUNCHED [TYPE]]]]
 *	user UID USED
 *	revived ID RC END
 *
 * ID the Slurm job id (1 .. 2^32-1), ASKED when the rescale was asked
 * (seconds since the epoch, >= 0), FROM (1 ..) and TO (0 .. : queue) the
 * GPUs, TYPE the decided GPU type or "-", GAVE_UP 0 or 1, RC the job's
 * restart count when asked (-1: unknown; missing in files of format 1);
 * REQ (0 ..: a job without GPUs) the job's original request, HAD (0 ..)
 * the most GPUs it held, ATTAINED its GPU-seconds and RATE its progress rate
 * (finite, >= 0; missing in files of format 1), SUBMIT its first submission
 * (seconds since the epoch, 0: not known; Slurm moves a requeued job's
 * submit time to the requeue; missing in older files), LAUNCHED when the
 * plugin last started it (seconds since the epoch, 0: never; missing in
 * older files), TYPE the GPU type of its request when the plugin first saw it
 * ("-": any; missing in older files: not known); UID a user id (0 .. 2^32-2)
 * and USED the GPU-seconds that user has used, decayed (finite, >= 0); a
 * revived line names the run of a job the plugin requeued after it ended of a
 * rescale request: its restart count RC (0 ..) and end time END (seconds since
 * the epoch, >= 1). GPU counts are at most COPUS__GPUS_MAX.
 */
#ifndef COPUS_PLUGIN_STATEFMT_H
#define COPUS_PLUGIN_STATEFMT_H

#include <stddef.h>
#include <stdint.h>

#include "memo.h"
#include "usage.h"

/* A job's line: what the plugin keeps of its memo across restarts. */
struct copus__state_job {
	uint32_t id;
	int req_gpus;
	int max_had;
	double attained;
	double rate;
	time_t submit;	/* first submission; 0: not known */
	time_t launched; /* the plugin's last start of it; 0: never */
	/* The GPU type of its request when first seen ("" any), when
	 * type_known (a line written before the plugin kept it has none). */
	char type[16];
	bool type_known;
};

/* A revived line: the run the plugin requeued after it ended of a rescale
 * request (memo.revived_rc, revived_end). */
struct copus__state_revived {
	uint32_t id;
	int rc;
	time_t end;
};

/* One parsed line. */
struct copus__state_rec {
	enum {
		COPUS__STATE_RESCALE,
		COPUS__STATE_JOB,
		COPUS__STATE_USER,
		COPUS__STATE_REVIVED
	} kind;
	struct copus__rescale rescale; /* id, asked, from, to, type, gave_up,
					* rc; the rest zero */
	struct copus__state_job job;
	struct copus__usage user;
	struct copus__state_revived revived;
};

/*
 * Parses one line (with or without its newline). 0, or -1 with *why naming
 * the first field that is wrong ("rescale: TO", ...) for the log.
 */
int copus__state_parse(const char *line, struct copus__state_rec *out,
		       const char **why);

/*
 * Writes r as one line with its newline into buf of len bytes. 0, or -1 when
 * it does not fit or r holds what copus__state_parse would refuse.
 */
int copus__state_format(const struct copus__state_rec *r, char *buf,
			size_t len);

#endif /* COPUS_PLUGIN_STATEFMT_H */
