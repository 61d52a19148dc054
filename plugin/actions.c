/*
 * Phase 3 of a sched/copus round (see actions.h): starts and reasons under
 * slurmctld's write locks.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "slurm-compat.h"
#include "locks.h"

#include "options.h"
#include "rescale.h"
#include "round.h"
#include "sched_copus.h"
#include "snapshot.h"

static void _set_reason(job_record_t *job_ptr, uint32_t reason,
			const char *desc);
static void _clear(job_record_t *job_ptr);
static void _missing(uint32_t id);
static int _start(job_record_t *job_ptr, const struct copus__round_job *j,
		  bitstr_t *allow);
static void _off_ran(struct copus__sched *s, const struct copus__round_job *j,
		     bitstr_t **allow);
static bitstr_t *_allowed(struct copus__round *r,
			  const struct copus__round_job *j, bool any);
static int _replace(struct copus__round *r, job_record_t *job_ptr,
		    const struct copus__round_job *j);

/*
 * Whether slurmctld's nodes may have changed since the snapshot: their
 * count, or a reconfiguration (which rebuilds the node table).
 */
static bool _reconfigured(struct copus__sched *s, struct copus__round *r)
{
	return node_record_count != r->nnodes ||
	       __atomic_load_n(&s->reconfigs, __ATOMIC_SEQ_CST) != r->reconfigs;
}

/*
 * Lets the locks go for a moment when they have been held long enough
 * (copus_yield_interval). Returns false when the nodes were reconfigured
 * meanwhile: the decided nodes mean nothing any more, the round stops.
 */
static bool _yield(struct copus__sched *s, struct copus__round *r,
		   struct copus__lock_clock *clk, struct copus__lock_stats *ls)
{
	return !copus__lock_yield(clk, ls, s->params.yield_us,
				  s->params.yield_sleep_us) ||
	       !_reconfigured(s, r);
}

void copus__act(struct copus__sched *s, struct copus__round *r)
{
	/* Jobs and nodes written (a start allocates), the rest read. */
	slurmctld_lock_t locks = { READ_LOCK, WRITE_LOCK, WRITE_LOCK,
				   READ_LOCK, READ_LOCK };
	struct copus__lock_clock clk;
	struct copus__lock_stats *ls = &s->stats.locks[COPUS__LOCK_actions];
	int i, started = 0;

	copus__lock(&clk, locks);
	if (_reconfigured(s, r)) {
		/* Nodes were reconfigured during the decision: next round. */
		copus__unlock(&clk, ls);
		return;
	}
	for (i = 0; i < r->nrj; i++) {
		struct copus__round_job *j = &r->rj[i];
		job_record_t *job_ptr;
		bitstr_t *allow = NULL;

		if (j->running || (j->action != COPUS__ACT_START && !j->reason))
			continue;
		if (!_yield(s, r, &clk, ls))
			break;
		job_ptr = find_job_record(j->id);
		/* Jobs change while the locks are free: check again. */
		if (!job_ptr || !IS_JOB_PENDING(job_ptr) ||
		    job_ptr->priority == 0 || IS_JOB_COMPLETING(job_ptr) ||
		    !job_ptr->details || !job_ptr->part_ptr) {
			j->action = COPUS__ACT_NONE;
			continue;
		}
		if (j->action == COPUS__ACT_CLEAR) {
			_clear(job_ptr);
			_set_reason(job_ptr, WAIT_RESOURCES, j->reason);
			continue;
		}
		if (j->action != COPUS__ACT_START) {
			_set_reason(job_ptr, j->never ? FAIL_BAD_CONSTRAINTS :
				    strstr(j->reason, "higher priority") ?
				    WAIT_PRIORITY : WAIT_RESOURCES, j->reason);
			continue;
		}
		if (j->job >= 0)
			allow = _allowed(r, j, false);
		if (j->early)
			_off_ran(s, j, &allow);
		if (_start(job_ptr, j, allow) == SLURM_SUCCESS ||
		    (!j->early && _replace(r, job_ptr, j) == SLURM_SUCCESS)) {
			started++;
			if (j->early)
				info("%s: %pJ restarted at once after its "
				     "requeue, on none of the nodes of the run "
				     "it ended", plugin_type, job_ptr);
			copus__log_plan(r, j);
		} else if (!IS_JOB_PENDING(job_ptr)) {
			/* Cancelled: its deadline cannot be met. */
			j->action = COPUS__ACT_NONE;
		} else {
			j->action = COPUS__ACT_NONE;
			_set_reason(job_ptr, WAIT_RESOURCES,
				    "copus: its decided nodes were not free");
		}
		FREE_NULL_BITMAP(allow);
	}
	for (i = 0; i < r->nghosts; i++)
		_missing(r->ghosts[i]);
	/*
	 * The jobs beyond copus_max_jobs wait as sched/backfill leaves those
	 * its cycle does not reach: Slurm's reason Priority, no description
	 * (one on each would lengthen every squeue reply, packed under the
	 * job lock, by its length times the queue: 4.6 MB and some 70 ms of
	 * slurmctld's time a squeue at 50,000 pending). A description the
	 * job had from a round that considered it goes.
	 */
	for (i = 0; i < r->nover; i++) {
		job_record_t *job_ptr;

		if (!(i & 15) && !_yield(s, r, &clk, ls))
			break;
		job_ptr = find_job_record(r->over[i]);
		if (job_ptr && IS_JOB_PENDING(job_ptr) && job_ptr->priority)
			_set_reason(job_ptr, WAIT_PRIORITY, NULL);
	}
	copus__unlock(&clk, ls);
	r->started = started;
	if (started) {
		/* Save the started jobs at once, as Slurm's own scheduler
		 * does: a slurmctld that dies before its periodic save would
		 * otherwise recover them as pending while they run. */
		schedule_node_save();
		schedule_job_save();
		debug("%s: round started %d job(s)", plugin_type, started);
	}
}

static void _set_reason(job_record_t *job_ptr, uint32_t reason,
			const char *desc)
{
	/* xstrcmp: NULL equals NULL only. */
	if (job_ptr->state_reason == reason &&
	    !xstrcmp(job_ptr->state_desc, desc))
		return;
	job_ptr->state_reason = reason;
	xfree(job_ptr->state_desc);
	job_ptr->state_desc = xstrdup(desc);
	last_job_update = time(NULL);
}

/*
 * Starts one job on the decided nodes, as backfill's _start_job() does.
 * allow: the nodes it may use (NULL: wherever Slurm places it).
 */
/*
 * The time limit (minutes) a job with a --deadline runs under when it
 * starts now, as Slurm's own schedulers give it: its limit (or its
 * partition's default, or maximum, when it has none) cut to the minutes
 * left before its deadline. 0 when it has no deadline.
 */
static uint32_t _deadline_limit(job_record_t *job_ptr, time_t now)
{
	uint32_t left, lim = job_ptr->time_limit;

	if (!job_ptr->deadline || job_ptr->deadline == NO_VAL ||
	    job_ptr->deadline <= now)
		return 0;
	left = (uint32_t)((job_ptr->deadline - now) / 60);
	if (lim == NO_VAL || lim == INFINITE)
		lim = job_ptr->part_ptr->default_time;
	if (lim == NO_VAL || lim == INFINITE)
		lim = job_ptr->part_ptr->max_time;
	if (lim == NO_VAL || lim == INFINITE)
		return left;
	return left < lim ? left : lim;
}

/*
 * A pending job that ran before slurmctld started (round_job.strays): every
 * node of its partition that is up is told to abort it, as slurmctld tells
 * a node that reports a run of a pending job. A run still going there ends;
 * a node whose run ended while slurmctld was down forgets the job (it would
 * refuse the next launch as a second copy); the job's credential is revoked
 * there now, so the next start comes KillWait + COPUS__RELEASE_GAP s later
 * (round.h, kill_wait): a run still going is killed by then.
 */
static void _clear(job_record_t *job_ptr)
{
	bitstr_t *nodes;

	if (!job_ptr->part_ptr->node_bitmap || !up_node_bitmap)
		return;
	nodes = bit_copy(job_ptr->part_ptr->node_bitmap);
	bit_and(nodes, up_node_bitmap);
	if (bit_ffs(nodes) >= 0) {
		info("%s: %pJ was started before slurmctld restarted; "
		     "its nodes abort what is left of that run before it "
		     "starts again", plugin_type, job_ptr);
		abort_job_on_nodes(job_ptr, nodes);
	}
	FREE_NULL_BITMAP(nodes);
}

/*
 * A running batch job its node registered without since slurmctld started
 * (snapshot.c, _ghost): slurmctld's own verdict on a batch job missing from
 * its node, given now instead of never (it would hold its GPUs until its
 * time limit): requeued when it may be (an elastic job resumes from its
 * checkpoint), else ended NODE_FAIL.
 */
static void _missing(uint32_t id)
{
	job_record_t *job_ptr = find_job_record(id);
	bool requeue;

	if (!job_ptr || !IS_JOB_RUNNING(job_ptr) ||
	    IS_JOB_COMPLETING(job_ptr))
		return;
	requeue = job_ptr->details && job_ptr->details->requeue;
	info("%s: %pJ ran when slurmctld stopped, but its node %s registered "
	     "since without it (it ended while slurmctld was down, or never "
	     "began there); %s, as slurmctld does with a batch job missing "
	     "from its node", plugin_type, job_ptr, job_ptr->batch_host,
	     requeue ? "requeued" : "ended");
	job_ptr->exit_code = 1;
	copus_slurm_job_complete(job_ptr, slurm_conf.slurm_user_id, requeue,
				 true, NO_VAL);
}

static int _start(job_record_t *job_ptr, const struct copus__round_job *j,
		  bitstr_t *allow)
{
	bitstr_t *orig_exc = NULL, *avoid = NULL;
	uint32_t cut, saved = job_ptr->time_limit;
	int rc;

	/* A job whose deadline can no longer be met is cancelled here. */
	if (job_ptr->deadline && job_ptr->deadline != NO_VAL &&
	    !deadline_ok(job_ptr, "sched/copus"))
		return ESLURM_INVALID_TIME_LIMIT;
	cut = _deadline_limit(job_ptr, time(NULL));
	if (cut)
		job_ptr->time_limit = cut;

	if (allow) {
		avoid = bit_copy(allow);
		bit_not(avoid);
		if (job_ptr->details->exc_node_bitmap) {
			orig_exc = bit_copy(job_ptr->details->exc_node_bitmap);
			bit_or(job_ptr->details->exc_node_bitmap, avoid);
		} else {
			job_ptr->details->exc_node_bitmap = bit_copy(avoid);
		}
	}
	rc = copus_slurm_select_nodes(job_ptr);
	if (allow) {
		/* select_nodes() may have replaced the bitmap: restore. */
		FREE_NULL_BITMAP(job_ptr->details->exc_node_bitmap);
		job_ptr->details->exc_node_bitmap = orig_exc;
		FREE_NULL_BITMAP(avoid);
	}
	if (rc != SLURM_SUCCESS) {
		job_ptr->time_limit = saved;
		verbose("%s: %pJ could not start on the chosen nodes: %s",
			plugin_type, job_ptr, slurm_strerror(rc));
		return rc;
	}
	last_job_update = time(NULL);
	if (j->emax)
		info("%s: started %pJ (elastic %d-%d GPUs%s%s) in %s on %s",
		     plugin_type, job_ptr, j->emin, j->emax,
		     j->ntypes ? ", types " : "",
		     j->ntypes ? copus__spank_env(job_ptr, COPUS__ENV_TYPES) :
				 "",
		     job_ptr->part_ptr->name, job_ptr->nodes);
	else
		info("%s: started %pJ in %s on %s", plugin_type, job_ptr,
		     job_ptr->part_ptr->name, job_ptr->nodes);
	if (job_ptr->batch_flag == 0)
		srun_allocate(job_ptr);
	else if (!IS_JOB_CONFIGURING(job_ptr))
		launch_job(job_ptr);
	return SLURM_SUCCESS;
}

/*
 * A job refused on the nodes the policy chose, which count GPUs only (it
 * needs more CPUs or memory per GPU than they have, or a feature they lack):
 * Slurm places it on the nodes of the decided type it may use, as backfill
 * would, instead of the same nodes being tried again every round.
 */
static int _replace(struct copus__round *r, job_record_t *job_ptr,
		    const struct copus__round_job *j)
{
	bitstr_t *any;
	int rc;

	if (!IS_JOB_PENDING(job_ptr) || j->job < 0)
		return SLURM_ERROR;
	any = _allowed(r, j, true);
	rc = _start(job_ptr, j, any);
	FREE_NULL_BITMAP(any);
	if (rc == SLURM_SUCCESS)
		verbose("%s: %pJ was refused on its decided nodes and started "
			"where Slurm placed it", plugin_type, job_ptr);
	return rc;
}

/*
 * A job started within its release gap (round_job.early): the nodes it may
 * start on lose those of the run it ended, which may have revoked its
 * credential in this very second (NULL when it has none left).
 */
static void _off_ran(struct copus__sched *s, const struct copus__round_job *j,
		     bitstr_t **allow)
{
	const struct copus__rescale *x = copus__rescale_find(s, j->id);

	if (!x || !*allow) {
		/* Not known: no node. */
		FREE_NULL_BITMAP(*allow);
		*allow = bit_alloc(node_record_count);
		return;
	}
	for (int i = 0; i < x->nran; i++)
		if (x->ran[i] >= 0 && x->ran[i] < node_record_count)
			bit_clear(*allow, x->ran[i]);
}

/*
 * The nodes a pending job may start on for its decision: the decided ones
 * with at least the GPUs per node it asks (of an uneven decision, the part
 * the round asked Slurm for, copus_even_slots) when they are as many as it
 * asks, else (or with any) every node of the decided type it may use,
 * where Slurm picks.
 */
static bitstr_t *_allowed(struct copus__round *r,
			  const struct copus__round_job *j, bool any)
{
	const copus_decision *d = &r->dec[j->job];
	bitstr_t *b = bit_alloc(node_record_count);
	bool exact = !any;
	int k, n = 0;

	for (k = 0; exact && k < d->num_slots; k++) {
		if (d->slots[k].gpus < j->gpn_req)
			continue;
		n++;
		if (!j->eligible[d->slots[k].node])
			exact = false;
	}
	if (exact && n == j->nodes_req) {
		for (k = 0; k < d->num_slots; k++)
			if (d->slots[k].gpus >= j->gpn_req)
				bit_set(b, d->slots[k].node);
		return b;
	}
	/*
	 * A rigid job placed other than it asked (for example 4 GPUs on two
	 * nodes for 2 nodes x 2, or on a node outside its partition): any
	 * node of the decided type it may use, Slurm picks.
	 */
	for (k = 0; k < r->nnodes; k++)
		if (j->eligible[k] && r->nodes[k].gpu_type == j->dtype)
			bit_set(b, k);
	return b;
}
