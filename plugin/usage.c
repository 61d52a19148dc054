/*
 * The users' decayed GPU time and their fair-share factors (usage.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usage.h"

/* Index of uid, or where it goes (-1 - index) when absent. */
static int _find(const struct copus__usage_tab *t, uint32_t uid)
{
	int lo = 0, hi = t->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (t->u[mid].uid == uid)
			return mid;
		if (t->u[mid].uid < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1 - lo;
}

int copus__usage_charge(struct copus__usage_tab *t, uint32_t uid,
			double gpu_s)
{
	int i = _find(t, uid);

	if (!(gpu_s > 0.0) || !isfinite(gpu_s))
		return 0;
	if (i < 0) {
		i = -1 - i;
		if (t->n == t->cap) {
			int cap = t->cap ? 2 * t->cap : 16;
			struct copus__usage *u = realloc(t->u,
							 cap * sizeof(*u));

			if (!u)
				return -1;
			t->u = u;
			t->cap = cap;
		}
		memmove(&t->u[i + 1], &t->u[i], (t->n - i) * sizeof(*t->u));
		t->u[i] = (struct copus__usage){ .uid = uid };
		t->n++;
	}
	t->u[i].gpu_s += gpu_s;
	return 0;
}

void copus__usage_decay(struct copus__usage_tab *t, time_t now,
			double half_life)
{
	double keep;

	if (t->decayed && now > t->decayed && half_life > 0.0) {
		keep = exp2(-(double)(now - t->decayed) / half_life);
		for (int i = 0; i < t->n; i++)
			t->u[i].gpu_s *= keep;
	}
	if (!t->decayed || now > t->decayed)
		t->decayed = now;
}

double copus__usage_of(const struct copus__usage_tab *t, uint32_t uid)
{
	int i = _find(t, uid);

	return i < 0 ? 0.0 : t->u[i].gpu_s;
}

double copus__usage_factor(const struct copus__usage_tab *t, uint32_t uid,
			   int n_active)
{
	double total = 0.0;

	for (int i = 0; i < t->n; i++)
		total += t->u[i].gpu_s;
	if (!(total > 0.0) || n_active < 1)
		return 1.0;
	return exp2(-(double)n_active * copus__usage_of(t, uid) / total);
}

void copus__usage_free(struct copus__usage_tab *t)
{
	free(t->u);
	memset(t, 0, sizeof(*t));
}
