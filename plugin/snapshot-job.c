/*
 * What a sched/copus snapshot reads of one Slurm job (snapshot-job.h): its
 * user, its GPU request and allocation, its copus options, and whether
 * Slurm's rules let it start now. The caller holds the job read lock
 * (copus__job_startable() the write lock).
 */
#include <stdio.h>
#include <string.h>

#include "slurm-compat.h"

#include "memo.h"
#include "options.h"
#include "round.h"
#include "sched_copus.h"
#include "snapshot.h"
#include "snapshot-job.h"

/*
 * The job's user, and Slurm's fair-share factor of that user when
 * priority/multifactor has one (its factor times PriorityWeightFairshare is
 * what the job's priority factors hold).
 */
void copus__job_user(job_record_t *job_ptr, struct copus__round_job *j)
{
	double fs = 0.0;

	j->uid = job_ptr->user_id;
	if (job_ptr->prio_factors && slurm_conf.priority_weight_fs > 0)
		fs = job_ptr->prio_factors->priority_fs /
		     (double)slurm_conf.priority_weight_fs;
	j->fs_slurm = fs > 0.0 && fs <= 1.0 ? fs : 0.0;
}

const char *copus__spank_env(job_record_t *job_ptr, const char *name)
{
	return copus__env_value(job_ptr->spank_job_env,
				job_ptr->spank_job_env_size, name);
}

/* GPUs per node and type of a job's request (gres_list_req). */
void copus__job_gpus(job_record_t *job_ptr, struct copus__round_job *j)
{
	list_itr_t *it;
	gres_state_t *gs;

	if (!job_ptr->gres_list_req)
		return;
	it = list_iterator_create(job_ptr->gres_list_req);
	while ((gs = list_next(it))) {
		gres_job_state_t *g = gs->gres_data;
		uint64_t per_node = 0;

		if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g)
			continue;
		if (g->gres_per_node)
			per_node = g->gres_per_node;
		else if (g->gres_per_job)
			per_node = (g->gres_per_job + j->nodes_req - 1) /
				   j->nodes_req;
		else if (g->gres_per_task)
			per_node = g->gres_per_task *
				   (job_ptr->details->num_tasks ?
				    job_ptr->details->num_tasks : 1) /
				   j->nodes_req;
		j->gpn_req += (int)per_node;
		j->gpu_entries++;
		if (g->gres_per_job || g->gres_per_socket || g->gres_per_task)
			j->gpu_entries_other++;
		if (g->type_name)
			snprintf(j->type_req, sizeof(j->type_req), "%s",
				 g->type_name);
	}
	list_iterator_destroy(it);
}

/*
 * The job's --elastic, --gpu-types and --gpu-multiple, checked again (they
 * are input).
 */
void copus__job_options(job_record_t *job_ptr, struct copus__round_job *j)
{
	if (job_ptr->time_limit == INFINITE)
		j->limit_s = -1;
	else if (job_ptr->time_limit != NO_VAL)
		j->limit_s = 60L * (long)job_ptr->time_limit;
	const char *v;
	char why[128];

	if ((v = copus__spank_env(job_ptr, COPUS__ENV_ELASTIC)) &&
	    copus__parse_elastic(v, &j->emin, &j->emax, why, sizeof(why)))
		error("%s: %pJ: ignoring %s=%s: %s", plugin_type, job_ptr,
		      COPUS__ENV_ELASTIC, v, why);
	if ((v = copus__spank_env(job_ptr, COPUS__ENV_MULTIPLE)) &&
	    copus__parse_multiple(v, &j->multiple, why, sizeof(why)))
		error("%s: %pJ: ignoring %s=%s: %s", plugin_type, job_ptr,
		      COPUS__ENV_MULTIPLE, v, why);
	if ((v = copus__spank_env(job_ptr, COPUS__ENV_TYPES))) {
		char list[COPUS__TYPES_MAX * (COPUS__TYPE_LEN + 1)];
		char *save = NULL, *t;

		if (copus__parse_types(v, list, sizeof(list), why,
				       sizeof(why))) {
			error("%s: %pJ: ignoring %s=%s: %s", plugin_type,
			      job_ptr, COPUS__ENV_TYPES, v, why);
			return;
		}
		for (t = strtok_r(list, ",", &save);
		     t && j->ntypes < COPUS__TYPES_MAX;
		     t = strtok_r(NULL, ",", &save))
			snprintf(j->types[j->ntypes++], sizeof(j->types[0]),
				 "%s", t);
	}
	j->rigid = j->emax == 0;
}

/* The GPUs a running job holds on each of its nodes (gres_list_alloc). */
void copus__job_alloc(struct copus__round *r, job_record_t *job_ptr,
		      struct copus__round_job *j)
{
	list_itr_t *it;
	gres_state_t *gs;
	int *per = NULL, k, n, i;

	if (!job_ptr->gres_list_alloc || !job_ptr->node_bitmap)
		return;
	n = bit_set_count(job_ptr->node_bitmap);
	if (n <= 0)
		return;
	j->nrun = n;
	per = xcalloc(n, sizeof(*per));
	it = list_iterator_create(job_ptr->gres_list_alloc);
	while ((gs = list_next(it))) {
		gres_job_state_t *g = gs->gres_data;

		if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g ||
		    !g->gres_cnt_node_alloc)
			continue;
		for (k = 0; k < n && k < (int)g->node_cnt; k++)
			per[k] += (int)g->gres_cnt_node_alloc[k];
	}
	list_iterator_destroy(it);
	j->alloc = xcalloc(n, sizeof(*j->alloc));
	k = 0;
	for (i = 0; i < r->nnodes && k < n; i++) {
		if (!bit_test(job_ptr->node_bitmap, i))
			continue;
		if (per[k] > 0) {
			j->alloc[j->nalloc].node = i;
			j->alloc[j->nalloc].gpus = per[k];
			j->cur_gpus += per[k];
			j->nalloc++;
		}
		k++;
	}
	xfree(per);
}

/*
 * Whether a pending job is held because its node refused the start the
 * plugin gave it after clearing its stray run (memo.cleared): the node was
 * still ending that run (its processes slow to die, its Epilog still
 * running) and took the launch for a second copy; slurmd then has
 * slurmctld requeue the job held, "launch failed requeued held". That hold
 * comes of the plugin's start, not of the user or an admin, so the plugin
 * releases it (rescale.c), at most COPUS__REFUSED_MAX times a job.
 */
bool copus__job_refused(const struct copus__memo *in, job_record_t *job_ptr)
{
	return in->cleared && in->launched >= in->cleared &&
	       in->refused < COPUS__REFUSED_MAX && job_ptr->priority == 0 &&
	       !IS_JOB_COMPLETING(job_ptr) &&
	       job_ptr->state_reason == WAIT_HELD_USER &&
	       job_ptr->state_desc &&
	       !strcmp(job_ptr->state_desc, "launch failed requeued held");
}

/*
 * Whether a pending job may be started now as far as Slurm's rules go:
 * not held, dependencies satisfied and begin time reached (job_independent
 * also records the reason), within its partition's limits, partition up.
 */
bool copus__job_startable(job_record_t *job_ptr)
{
	if (!IS_JOB_PENDING(job_ptr) || IS_JOB_COMPLETING(job_ptr) ||
	    IS_JOB_REVOKED(job_ptr) || !job_ptr->details || !job_ptr->part_ptr)
		return false;
	if (job_ptr->priority == 0)	/* held */
		return false;
	if (job_ptr->het_job_id)	/* heterogeneous jobs: not handled */
		return false;
	if (!job_independent(job_ptr))
		return false;
	if (!(job_ptr->part_ptr->state_up & PARTITION_SCHED) ||
	    !job_ptr->part_ptr->node_bitmap) {
		job_ptr->state_reason = WAIT_PART_DOWN;
		return false;
	}
	if (job_limits_check(&job_ptr, false) != WAIT_NO_REASON)
		return false;
	return true;
}

/*
 * Whether a pending elastic job waits only for the begin time Slurm set when
 * it requeued the job itself (its node failed, or an admin ran scontrol
 * requeue): the requeue time plus the credential lifetime, about two
 * minutes, so that its next launch credential postdates the revocation of
 * the last one. An elastic job resumes from its checkpoint wherever it
 * restarts, so the plugin treats it as one it requeued: the policy gives it
 * a cell and the plugin releases it as one of its own requeues
 * (copus__round_release), which is all slurmd needs. Held jobs, rigid jobs
 * and begin times that
 * users set are left alone.
 */
bool copus__job_slurm_requeued(job_record_t *job_ptr, time_t now)
{
	job_details_t *d = job_ptr->details;
	int lifetime;
	time_t wait;

	if (!d || !job_ptr->restart_cnt || job_ptr->priority == 0 ||
	    !job_ptr->part_ptr || IS_JOB_COMPLETING(job_ptr) ||
	    IS_JOB_REVOKED(job_ptr) || job_ptr->het_job_id ||
	    d->begin_time <= now ||
	    (d->depend_list && list_count(d->depend_list)) ||
	    !copus__spank_env(job_ptr, COPUS__ENV_ELASTIC))
		return false;
	lifetime = copus_slurm_cred_lifetime();
	/* Requeue: begin = now + lifetime + 1, submit = now (or now + 1). */
	wait = d->begin_time - d->submit_time;
	return wait >= lifetime && wait <= lifetime + 1;
}
