/*
 * The GPU time each user has used, decayed with Slurm's
 * PriorityDecayHalfLife, and the fair-share factor it gives when Slurm has
 * none (priority/multifactor without accounting, or priority/basic). Plain
 * C, no Slurm: the round's tests link it.
 *
 * A user's factor is Slurm's classic one, F = 2^(-U / S): U the user's
 * share of all the decayed usage, S = 1 / N the equal share of each of the
 * N users who have jobs in the round. A user who used nothing has F = 1,
 * one who used exactly their share 0.5, one who used everything 2^-N.
 */
#ifndef COPUS_PLUGIN_USAGE_H
#define COPUS_PLUGIN_USAGE_H

#include <stdint.h>
#include <time.h>

/* One user's decayed usage. */
struct copus__usage {
	uint32_t uid;
	double gpu_s; /* GPU-seconds, decayed */
};

/* The users' usage, sorted by uid. */
struct copus__usage_tab {
	struct copus__usage *u;
	int n, cap;
	time_t decayed; /* when the usage was last decayed (0: never) */
	time_t saved;   /* when it was last written to copus_state */
};

/* Adds gpu_s (> 0) to uid's usage. 0, or -1 without memory. */
int copus__usage_charge(struct copus__usage_tab *t, uint32_t uid,
			double gpu_s);

/*
 * Decays every user's usage to now with the half-life in seconds (0: no
 * decay); the first call only notes the time.
 */
void copus__usage_decay(struct copus__usage_tab *t, time_t now,
			double half_life);

/* uid's usage (0 when unknown). */
double copus__usage_of(const struct copus__usage_tab *t, uint32_t uid);

/*
 * uid's fair-share factor among n_active users (1 when nobody has used
 * anything yet).
 */
double copus__usage_factor(const struct copus__usage_tab *t, uint32_t uid,
			   int n_active);

void copus__usage_free(struct copus__usage_tab *t);

#endif /* COPUS_PLUGIN_USAGE_H */
