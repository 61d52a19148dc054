/* The calls whose form differs between Slurm versions (slurm-compat.h). */
#include "slurm-compat.h"

int copus_slurm_cred_lifetime(void)
{
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_23_11
	return cred_expiration();
#else
	int lifetime = 120;

	(void) slurm_cred_ctx_get(slurmctld_config.cred_ctx,
				  SLURM_CRED_OPT_EXPIRY_WINDOW, &lifetime);
	return lifetime;
#endif
}

int copus_slurm_select_nodes(job_record_t *job_ptr)
{
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_24_11
	job_node_select_t sel = { .job_ptr = job_ptr };

	return select_nodes(&sel, false, false, SLURMDB_JOB_FLAG_SCHED);
#else
	return select_nodes(job_ptr, false, NULL, NULL, false,
			    SLURMDB_JOB_FLAG_SCHED);
#endif
}

int copus_slurm_job_complete(job_record_t *job_ptr, uid_t uid, bool requeue,
			     bool node_fail, uint32_t rc)
{
#if SLURM_VERSION_NUMBER >= COPUS_SLURM_25_11
	slurm_step_id_t step = SLURM_STEP_ID_INITIALIZER;

	step.job_id = job_ptr->job_id;
	return job_complete(&step, uid, requeue, node_fail, rc);
#else
	return job_complete(job_ptr->job_id, uid, requeue, node_fail, rc);
#endif
}
