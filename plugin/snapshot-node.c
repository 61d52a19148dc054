/*
 * What a sched/copus snapshot reads of one Slurm node (snapshot-node.h):
 * its GPUs, whether jobs may start on it, whether it has not been heard
 * from since slurmctld started, and the nodes of a partition. The caller
 * holds the node read lock.
 */
#include <stdio.h>
#include <string.h>

#include "slurm-compat.h"

#include "round.h"
#include "sched_copus.h"
#include "snapshot-node.h"

bool copus__node_unheard(const struct copus__sched *s, node_record_t *node_ptr,
			 int i, time_t now)
{
	time_t wait = slurm_conf.slurmd_timeout ? slurm_conf.slurmd_timeout
						: COPUS__REGISTER_WAIT;

	if (now >= s->started + wait || IS_NODE_DOWN(node_ptr) ||
	    IS_NODE_DRAIN(node_ptr) || IS_NODE_FAIL(node_ptr))
		return false;
	if (node_ptr->last_response >= s->started)
		return false;
	return IS_NODE_NO_RESPOND(node_ptr) ||
	       !(avail_node_bitmap && bit_test(avail_node_bitmap, i));
}

/*
 * The nodes of partition number k (part_ptr), made once per round and
 * shared by its jobs that name no nodes and no reservation of their own:
 * a row a job would otherwise hold, of one byte a node, for 100,000 jobs
 * on 8,192 nodes.
 */
uint8_t *copus__part_row(struct copus__round *r, int k, part_record_t *part_ptr)
{
	int i;

	if (k >= r->nparts_rows) {
		xrecalloc(r->parts_rows, k + 1, sizeof(*r->parts_rows));
		r->nparts_rows = k + 1;
	}
	if (!r->parts_rows[k]) {
		r->parts_rows[k] = xcalloc(r->nnodes + 1, 1);
		for (i = 0; i < r->nnodes; i++)
			r->parts_rows[k][i] =
				bit_test(part_ptr->node_bitmap, i);
	}
	return r->parts_rows[k];
}

/* Whether slurmctld may start jobs on a node now. */
bool copus__node_usable(node_record_t *node_ptr, int i)
{
	return avail_node_bitmap && bit_test(avail_node_bitmap, i) &&
	       !IS_NODE_DRAIN(node_ptr) && !IS_NODE_FAIL(node_ptr) &&
	       !IS_NODE_NO_RESPOND(node_ptr);
}

/*
 * A node's GPUs from its gres_list: configured (*avail), allocated
 * (*alloc), and their type (the first type named; "gpu" when none).
 */
void copus__node_gres(node_record_t *node_ptr, int *avail, int *alloc,
		      char *type, size_t tlen)
{
	list_itr_t *it;
	gres_state_t *gs;

	*avail = *alloc = 0;
	snprintf(type, tlen, "gpu");
	if (!node_ptr->gres_list)
		return;
	it = list_iterator_create(node_ptr->gres_list);
	while ((gs = list_next(it))) {
		gres_node_state_t *g = gs->gres_data;

		if (!gs->gres_name || strcmp(gs->gres_name, "gpu") || !g)
			continue;
		*avail += (int)g->gres_cnt_avail;
		*alloc += (int)g->gres_cnt_alloc;
		if (g->type_cnt > 0 && g->type_name && g->type_name[0] &&
		    g->type_name[0][0])
			snprintf(type, tlen, "%s", g->type_name[0]);
	}
	list_iterator_destroy(it);
}

void copus__node_gpus(struct copus__round *r, node_record_t *node_ptr, int i)
{
	char type[16];
	int avail, alloc, t;

	copus__node_gres(node_ptr, &avail, &alloc, type, sizeof(type));
	r->nodes[i].gpus = avail;
	r->cfg[i] = avail;
	r->free[i] = avail > alloc ? avail - alloc : 0;
	t = copus__type_index(r, type);
	if (t < 0 && avail > 0 && r->ntypes < COPUS_MAX_GPU_TYPES) {
		t = r->ntypes++;
		snprintf(r->types[t], sizeof(r->types[t]), "%s", type);
	}
	r->nodes[i].gpu_type = t < 0 ? 0 : t;
	if (t < 0)
		r->nodes[i].gpus = 0;
}
