/*
 * What a sched/copus snapshot reads of one Slurm node, into the round's
 * plain structs (round.h). Included by files that include Slurm's headers
 * (slurm-compat.h), whose node_record_t and part_record_t it names.
 */
#ifndef COPUS_PLUGIN_SNAPSHOT_NODE_H
#define COPUS_PLUGIN_SNAPSHOT_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct copus__round;
struct copus__sched;

/* Whether slurmctld may start jobs on node i now. */
bool copus__node_usable(node_record_t *node_ptr, int i);

/*
 * Whether node i is one slurmctld has not heard from since it started and
 * may yet register: within SlurmdTimeout of the start (COPUS__REGISTER_WAIT
 * when none), not down, drained or failed, and not responding.
 */
bool copus__node_unheard(const struct copus__sched *s, node_record_t *node_ptr,
			 int i, time_t now);

/*
 * The node's GPUs from its gres_list: configured (*avail), allocated
 * (*alloc), and their type (the first type named; "gpu" when none).
 */
void copus__node_gres(node_record_t *node_ptr, int *avail, int *alloc,
		      char *type, size_t tlen);

/* Node i's GPUs, free GPUs and GPU type into the round (a new type added). */
void copus__node_gpus(struct copus__round *r, node_record_t *node_ptr, int i);

/* The nodes of partition number k (part_ptr), one byte a node, shared. */
uint8_t *copus__part_row(struct copus__round *r, int k,
			 part_record_t *part_ptr);

#endif /* COPUS_PLUGIN_SNAPSHOT_NODE_H */
