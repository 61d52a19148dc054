/*
 * The one place where sched/copus and job_submit/copus meet the Slurm
 * version they are compiled against (22.05, 24.11 or 26.05): every
 * internal Slurm header the plugins use, under its path in that version,
 * and every name, field or call that differs between the versions, behind
 * one spelling. The rest of plugin/ includes this file instead of Slurm's
 * headers and has no version test of its own; sched_copus(8) lists the
 * differences under "SLURM VERSIONS".
 */
#ifndef COPUS_SLURM_COMPAT_H
#define COPUS_SLURM_COMPAT_H

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "slurm/slurm_version.h"

#define COPUS_SLURM_22_05 SLURM_VERSION_NUM(22, 5, 0)
#define COPUS_SLURM_23_02 SLURM_VERSION_NUM(23, 2, 0)
#define COPUS_SLURM_23_11 SLURM_VERSION_NUM(23, 11, 0)
#define COPUS_SLURM_24_05 SLURM_VERSION_NUM(24, 5, 0)
#define COPUS_SLURM_24_11 SLURM_VERSION_NUM(24, 11, 0)
#define COPUS_SLURM_25_11 SLURM_VERSION_NUM(25, 11, 0)
#define COPUS_SLURM_26_05 SLURM_VERSION_NUM(26, 5, 0)

#if SLURM_VERSION_NUMBER < COPUS_SLURM_22_05
#error "sched/copus needs Slurm 22.05 or later"
#endif

/* The public API (libslurm), which the plugins call too. */

/* 25.11 put a job's id in job_desc_msg_t's step_id, not in job_id. */
static inline void copus_slurm_desc_job(job_desc_msg_t *desc, uint32_t id)
{
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_25_11
	desc->step_id.job_id = id;
#else
	desc->job_id = id;
#endif
}

/* 26.05 names a job to slurm_kill_job() and slurm_requeue() by a
 * slurm_step_id_t, no longer by its number. */
static inline int copus_slurm_kill_job(uint32_t id, uint16_t sig,
				       uint16_t flags)
{
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_26_05
	slurm_step_id_t step = SLURM_STEP_ID_INITIALIZER;

	step.job_id = id;
	return slurm_kill_job(step, sig, flags);
#else
	return slurm_kill_job(id, sig, flags);
#endif
}

static inline int copus_slurm_requeue(uint32_t id, uint32_t flags)
{
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_26_05
	slurm_step_id_t step = SLURM_STEP_ID_INITIALIZER;

	step.job_id = id;
	return slurm_requeue(step, flags);
#else
	return slurm_requeue(id, flags);
#endif
}


#include "src/common/bitstring.h"
#include "src/common/list.h"
#include "src/common/log.h"
#include "src/common/macros.h"
#include "src/common/node_conf.h"
#include "src/common/read_config.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"

/* 23.02 moved the plugin interfaces (gres, credentials) to src/interfaces. */
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_23_02
#include "src/interfaces/cred.h"
#include "src/interfaces/gres.h"
#else
#include "src/common/gres.h"
#include "src/common/slurm_cred.h"
#endif

/* 26.05 creates slurmctld's threads through a thread pool, each named. */
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_26_05
#include "src/common/threadpool.h"
#define copus_slurm_thread_create(name, id, func, arg) \
	slurm_thread_create(name, id, func, arg)
#else
#define copus_slurm_thread_create(name, id, func, arg) \
	slurm_thread_create(id, func, arg)
#endif

#include "src/slurmctld/job_scheduler.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/node_scheduler.h"
#include "src/slurmctld/slurmctld.h"
#include "src/slurmctld/state_save.h"

/* 24.05 moved the messages to srun into the step manager (src/stepmgr),
 * and the one that tells srun of its allocation into proc_req.h. */
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_24_05
#include "src/slurmctld/proc_req.h"
#include "src/stepmgr/srun_comm.h"
#else
#include "src/slurmctld/srun_comm.h"
#endif

/* 23.02 named the list types list_t and list_itr_t; 22.05 has only the
 * pointer typedefs List and ListIterator. */
#if SLURM_VERSION_NUMBER < COPUS_SLURM_23_02
typedef struct xlist list_t;
typedef struct listIterator list_itr_t;
/* 23.02 gave the job's details a typedef. */
typedef struct job_details job_details_t;
#endif

/*
 * The seconds a job credential stays valid (AuthInfo=cred_expire, 120 by
 * default): Slurm requeues a job to begin that much later. 22.05 keeps it
 * in slurmctld's credential context, 23.11 and later in cred_expiration().
 */
extern int copus_slurm_cred_lifetime(void);

/*
 * select_nodes() for a job the scheduler starts (SLURMDB_JOB_FLAG_SCHED),
 * not a test: 22.05 takes the job and its arguments, 24.11 and later a
 * job_node_select_t around the job. Caller holds slurmctld's job, node and
 * partition write locks.
 */
extern int copus_slurm_select_nodes(job_record_t *job_ptr);

/* 25.11 named CR_MEMORY of SelectTypeParameters SELECT_MEMORY. */
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_25_11
#define COPUS_SLURM_CR_MEMORY SELECT_MEMORY
#else
#define COPUS_SLURM_CR_MEMORY CR_MEMORY
#endif

/*
 * job_complete() on a job slurmctld holds: 25.11 and later name the job by
 * a slurm_step_id_t, earlier ones by its number. Caller holds the job
 * write lock.
 */
extern int copus_slurm_job_complete(job_record_t *job_ptr, uid_t uid,
				    bool requeue, bool node_fail,
				    uint32_t rc);


#endif
