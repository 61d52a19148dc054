/*
 * The tables of memo.h: the per-job records (sorted by id) and the rescales
 * in flight. Plain C, no Slurm, so that the round's tests link it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memo.h"
#include "round.h"
#include "sched_copus.h"

static int _memo_cmp(const void *a, const void *b)
{
	const struct copus__memo *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

struct copus__memo *copus__memo_find(struct copus__sched *s, uint32_t id)
{
	struct copus__memo key = { .id = id };

	if (!s->nmemo)
		return NULL;
	return bsearch(&key, s->memo, s->nmemo, sizeof(*s->memo), _memo_cmp);
}

struct copus__memo *copus__memo_get(struct copus__sched *s, uint32_t id)
{
	struct copus__memo *x = copus__memo_find(s, id);
	int lo = 0, hi = s->nmemo;

	if (x)
		return x;
	if (s->nmemo == s->memo_cap) {
		int cap = s->memo_cap ? 2 * s->memo_cap : 256;

		if (!(x = realloc(s->memo, cap * sizeof(*x))))
			return NULL;
		s->memo = x;
		s->memo_cap = cap;
	}
	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (s->memo[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&s->memo[lo + 1], &s->memo[lo],
		(s->nmemo - lo) * sizeof(*s->memo));
	memset(&s->memo[lo], 0, sizeof(*s->memo));
	s->memo[lo].id = id;
	s->memo[lo].stale_rc = -1;
	s->nmemo++;
	return &s->memo[lo];
}

time_t copus__memo_submit(struct copus__memo *in, time_t submit)
{
	if (submit > 0 && (!in->submit || submit < in->submit))
		in->submit = submit;
	return in->submit ? in->submit : submit;
}

bool copus__memo_strays(const struct copus__memo *in)
{
	return in && in->launched && in->launched_before && !in->cleared;
}

void copus__memo_seen_running(struct copus__memo *in, time_t start)
{
	if (in && in->launched_before && start >= in->launched)
		in->launched_before = false;
}

bool copus__memo_revived(const struct copus__memo *in, int rc, time_t end)
{
	return in && in->revived_end && end == in->revived_end &&
	       rc == in->revived_rc;
}

void copus__memo_sweep(struct copus__sched *s, bool keep_launched)
{
	int i, n = 0;

	for (i = 0; i < s->nmemo; i++) {
		if (!s->memo[i].seen &&
		    !(keep_launched && s->memo[i].launched))
			continue;
		s->memo[i].seen = false;
		s->memo[n++] = s->memo[i];
	}
	s->nmemo = n;
}

void copus__memo_free(struct copus__sched *s)
{
	free(s->memo);
	s->memo = NULL;
	s->nmemo = s->memo_cap = 0;
}

struct copus__rescale *copus__rescale_find(struct copus__sched *s, uint32_t id)
{
	int i;

	for (i = 0; i < s->nrescales; i++)
		if (s->rescales[i].id == id)
			return &s->rescales[i];
	return NULL;
}

bool copus__rescales_active(struct copus__sched *s)
{
	int i;

	for (i = 0; i < s->nrescales; i++)
		if (!s->rescales[i].gave_up)
			return true;
	return false;
}

bool copus__costs_awaited(const struct copus__sched *s, double now)
{
	for (int i = 0; i < s->nmemo; i++)
		if (s->memo[i].cost_asked > 0.0 &&
		    now - s->memo[i].cost_asked < s->params.ckpt_deadline)
			return true;
	return false;
}

bool copus__rescale_pinned(const struct copus__sched *s,
			   const struct copus__rescale *x, time_t end,
			   time_t now)
{
	time_t last = end;
	int i;

	for (i = 0; i < s->nrescales; i++) {
		const struct copus__rescale *y = &s->rescales[i];

		if (y->asked != x->asked || y->gave_up)
			continue;
		if (!y->pending_since) {
			/* Still running: its GPUs are part of the cell. */
			if (now - y->asked <= s->params.ckpt_deadline)
				return true;
			continue;
		}
		if (y->pending_since > last)
			last = y->pending_since;
	}
	if (!x->ready)
		return true;
	last += COPUS__RELEASE_GAP;
	if (x->ready > last)
		last = x->ready;
	return now < last + s->params.interval;
}

void copus__rescale_drop(struct copus__sched *s, struct copus__rescale *x)
{
	*x = s->rescales[--s->nrescales];
	s->state_dirty = true;
}

void copus__costs_add(struct copus__costs *c, double seconds)
{
	if (!isfinite(seconds) || seconds < 0.0)
		return;
	c->v[c->next] = seconds;
	c->next = (c->next + 1) % COPUS__COSTS_MAX;
	if (c->n < COPUS__COSTS_MAX)
		c->n++;
}

double copus__costs_mean(const struct copus__costs *c, double dflt)
{
	double sum = 0.0;

	if (c->n <= 0)
		return dflt;
	for (int i = 0; i < c->n; i++)
		sum += c->v[i];
	return sum / c->n;
}

double copus__round_phase(const struct copus__costs *leads, double margin)
{
	double best = NAN, best_wait = INFINITY;

	if (leads->n <= 0)
		return NAN;
	for (int k = 0; k < 100; k++) {
		double phase = k / 100.0, wait = 0.0;

		for (int i = 0; i < leads->n; i++) {
			double f = fmod(phase + leads->v[i], 1.0);

			wait += f <= 1.0 - margin ? 1.0 - f : 2.0 - f;
		}
		if (wait < best_wait - 1e-9) {
			best_wait = wait;
			best = phase;
		}
	}
	return best;
}

void copus__memo_asked(struct copus__memo *in, time_t when, int from, int to,
		       const char *type)
{
	struct copus__asked *a;

	if (in->nasked == COPUS__HISTORY_MAX) {
		memmove(&in->asked[0], &in->asked[1],
			(COPUS__HISTORY_MAX - 1) * sizeof(in->asked[0]));
		in->nasked--;
	}
	a = &in->asked[in->nasked++];
	a->when = when;
	a->from = from;
	a->to = to;
	snprintf(a->type, sizeof(a->type), "%s", type ? type : "");
}

void copus__memo_history(const struct copus__memo *in, char *buf,
			 size_t len)
{
	size_t n = 0;

	snprintf(buf, len, "-");
	for (int i = 0; in && i < in->nasked && n < len; i++) {
		const struct copus__asked *a = &in->asked[i];
		char at[16];
		struct tm tm;

		localtime_r(&a->when, &tm);
		strftime(at, sizeof(at), "%H:%M:%S", &tm);
		n += snprintf(buf + n, len - n, "%s%d>%d%s%s@%s",
			      i ? ";" : "", a->from, a->to,
			      a->type[0] ? ":" : "", a->type, at);
	}
}
