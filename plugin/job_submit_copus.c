/*
 * job_submit/copus: refuses at submission the jobs that sched/copus could
 * never run as they ask, with a message that says why (plugin/submit.h):
 * --elastic without a GPU request or with a GPU request outside its range,
 * a GPU type no node has, heterogeneous jobs.
 *
 * slurm.conf:
 *   JobSubmitPlugins=copus
 *
 * slurmctld calls job_submit() with the configuration, jobs, nodes and
 * partitions read-locked. Built like sched/copus, against the Slurm source
 * of exactly the installed version.
 */
#include <stdio.h>
#include <string.h>

#include "slurm-compat.h"

#include "options.h"
#include "submit.h"

const char plugin_name[] = "copus job submit checks";
const char plugin_type[] = "job_submit/copus";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

#define _TYPES_MAX 64

/* The GPU types of the cluster's nodes, into types (at most max). */
static int _cluster_types(char types[][32], int max)
{
	node_record_t *node_ptr;
	int i, k, n = 0;

	for (i = 0; (node_ptr = next_node(&i)); i++) {
		list_itr_t *it;
		gres_state_t *gs;

		if (!node_ptr->gres_list)
			continue;
		it = list_iterator_create(node_ptr->gres_list);
		while ((gs = list_next(it))) {
			gres_node_state_t *g = gs->gres_data;
			int t;

			if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g)
				continue;
			for (t = 0; t < g->type_cnt; t++) {
				const char *name = g->type_name ?
						   g->type_name[t] : NULL;

				if (!name || !name[0])
					continue;
				for (k = 0; k < n && strcmp(types[k], name); k++)
					;
				if (k == n && n < max)
					snprintf(types[n++], 32, "%s", name);
			}
		}
		list_iterator_destroy(it);
	}
	return n;
}

extern int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid,
		      char **err_msg)
{
	char types[_TYPES_MAX][32], why[384];
	const char *ptrs[_TYPES_MAX];
	struct copus__submit sub = { 0 };
	int i;

	sub.elastic = copus__env_value(job_desc->spank_job_env,
				       job_desc->spank_job_env_size,
				       COPUS__ENV_ELASTIC);
	sub.types = copus__env_value(job_desc->spank_job_env,
				     job_desc->spank_job_env_size,
				     COPUS__ENV_TYPES);
	sub.multiple = copus__env_value(job_desc->spank_job_env,
					job_desc->spank_job_env_size,
					COPUS__ENV_MULTIPLE);
	sub.tres_per_node = job_desc->tres_per_node;
	sub.tres_per_job = job_desc->tres_per_job;
	sub.tres_per_task = job_desc->tres_per_task;
	sub.tres_per_socket = job_desc->tres_per_socket;
	sub.min_nodes = job_desc->min_nodes == NO_VAL ? 0 :
			(int)job_desc->min_nodes;
	sub.het = job_desc->het_job_offset != NO_VAL;
	sub.ntypes = _cluster_types(types, _TYPES_MAX);
	for (i = 0; i < sub.ntypes; i++)
		ptrs[i] = types[i];
	sub.cluster_types = ptrs;
	if (copus__submit_check(&sub, why, sizeof(why)) == 0)
		return SLURM_SUCCESS;
	info("%s: refused a job of uid %u: %s", plugin_type, submit_uid, why);
	if (err_msg)
		*err_msg = xstrdup(why);
	return sub.het ? ESLURM_NOT_SUPPORTED : ESLURM_INVALID_GRES;
}

/* Updates are sched/copus's own way to resize a pending job: allowed. */
extern int job_modify(job_desc_msg_t *job_desc, job_record_t *job_ptr,
		      uint32_t submit_uid)
{
	return SLURM_SUCCESS;
}
