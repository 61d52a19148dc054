/*
 * A round's users (see round-users.h): their decayed usage and how many
 * have jobs, for the fair-share factor of a user Slurm gives none
 * (usage.h), and with copus_max_gpus_per_user what each user may still
 * take. round.c calls them while it builds the policy's input and turns
 * the decisions into actions. No Slurm header, no Slurm call, no lock.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "round-users.h"
#include "round.h"
#include "sched_copus.h"

static int _cmp_uid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The users' usage decayed to the round, and how many users have jobs. */
void copus__round_users(struct copus__sched *s, struct copus__round *r)
{
	uint32_t *uid = calloc(r->nrj + 1, sizeof(*uid));
	int i;

	copus__usage_decay(&s->usage, r->when, r->decay_hl);
	/* The usage reaches copus_state at least once a minute. */
	if (s->usage.n && r->when - s->usage.saved >= 60)
		s->state_dirty = true;
	r->nusers = 0;
	if (!uid)
		return;
	for (i = 0; i < r->nrj; i++)
		uid[i] = r->rj[i].uid;
	qsort(uid, r->nrj, sizeof(*uid), _cmp_uid);
	for (i = 0; i < r->nrj; i++)
		if (i == 0 || uid[i] != uid[i - 1])
			r->nusers++;
	free(uid);
}

static int _cmp_user(const void *a, const void *b)
{
	const struct copus__round_job *x =
		*(const struct copus__round_job *const *)a;
	const struct copus__round_job *y =
		*(const struct copus__round_job *const *)b;

	return strcmp(x->user, y->user);
}

/*
 * With copus_max_gpus_per_user, groups the round's jobs by user and sets
 * what each user may still take: the cap less the GPUs the user's running
 * jobs hold (rigid ones included).
 */
void copus__round_user_room(struct copus__sched *s, struct copus__round *r)
{
	struct copus__round_job **by;
	int i, g = -1;

	if (s->params.user_cap <= 0 || r->nrj == 0)
		return;
	by = calloc(r->nrj, sizeof(*by));
	r->user_left = calloc(r->nrj, sizeof(*r->user_left));
	if (!by || !r->user_left) {
		free(by);
		free(r->user_left);
		r->user_left = NULL;
		return;
	}
	for (i = 0; i < r->nrj; i++)
		by[i] = &r->rj[i];
	qsort(by, r->nrj, sizeof(*by), _cmp_user);
	for (i = 0; i < r->nrj; i++) {
		if (i == 0 || strcmp(by[i]->user, by[i - 1]->user))
			r->user_left[++g] = s->params.user_cap;
		by[i]->user_grp = g;
		if (by[i]->running)
			r->user_left[g] -= by[i]->cur_gpus;
	}
	free(by);
}

/*
 * Whether job j's user may take more GPUs this round under the cap (and
 * if so they are counted); true without a cap or when more <= 0.
 */
bool copus__round_user_takes(struct copus__round *r,
			     struct copus__round_job *j, int more, int cap)
{
	int *left;

	if (!r->user_left || more <= 0)
		return true;
	left = &r->user_left[j->user_grp];
	if (more > *left) {
		snprintf(j->reason_buf, sizeof(j->reason_buf),
			 "copus: its user's jobs hold or take the %d GPUs of "
			 "copus_max_gpus_per_user", cap);
		j->reason = j->reason_buf;
		return false;
	}
	*left -= more;
	return true;
}
