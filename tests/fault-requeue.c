/*
 * A fault for the loopback tests: preloaded into slurmctld
 * (LD_PRELOAD=tests/.libs/fault_requeue.so), it refuses the first requeues
 * that sched/copus asks of chosen jobs, as slurmctld refuses a job it
 * cannot alter yet (ESLURM_TRANSITION_STATE_NO_UPDATE), and passes every
 * other call to Slurm's own slurm_requeue().
 *
 * COPUS_FAULT_REQUEUE names a file of "JOBID COUNT" lines, read at each
 * call, so a test can name a job after it submitted it: the first COUNT
 * requeues of JOBID are refused. Each refusal is written to stderr
 * (slurmctld.out in a loopback cluster).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>

#define FAULT_JOBS 64

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint32_t id;
	int refused;
} fault_jobs[FAULT_JOBS];

/* How many requeues of job ID the file asks to refuse. */
static int fault_count(uint32_t id)
{
	const char *path = getenv("COPUS_FAULT_REQUEUE");
	unsigned long jid;
	int n, count = 0;
	FILE *f;

	if (!path || !(f = fopen(path, "r")))
		return 0;
	while (fscanf(f, "%lu %d", &jid, &n) == 2)
		if (jid == id)
			count = n;
	fclose(f);
	return count;
}

/* True when this requeue of job ID is one to refuse; counts it. */
static bool fault_refuse(uint32_t id)
{
	int count = fault_count(id), i;
	bool refuse = false;

	if (count <= 0)
		return false;
	pthread_mutex_lock(&fault_lock);
	for (i = 0; i < FAULT_JOBS; i++)
		if (fault_jobs[i].id == id || !fault_jobs[i].id)
			break;
	if (i < FAULT_JOBS && fault_jobs[i].refused < count) {
		fault_jobs[i].id = id;
		fault_jobs[i].refused++;
		refuse = true;
		fprintf(stderr, "fault_requeue: JobId=%" PRIu32 ": requeue "
			"refused (%d of %d)\n", id, fault_jobs[i].refused,
			count);
	}
	pthread_mutex_unlock(&fault_lock);
	return refuse;
}

/*
 * 26.05 names the job by a slurm_step_id_t (and slurm.h may define
 * slurm_requeue as a macro over both forms: the parentheses keep it from
 * expanding here).
 */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
int (slurm_requeue)(slurm_step_id_t step, uint32_t flags)
{
	static int (*next)(slurm_step_id_t, uint32_t);
	uint32_t id = step.job_id;
#define FAULT_ARGS step, flags
#else
int (slurm_requeue)(uint32_t id, uint32_t flags)
{
	static int (*next)(uint32_t, uint32_t);
#define FAULT_ARGS id, flags
#endif
	if (fault_refuse(id)) {
		errno = ESLURM_TRANSITION_STATE_NO_UPDATE;
		return SLURM_ERROR;
	}
	if (!next)
		*(void **)&next = dlsym(RTLD_NEXT, "slurm_requeue");
	if (!next) {
		errno = ENOSYS;
		return SLURM_ERROR;
	}
	return next(FAULT_ARGS);
}
