/*
 * How long each phase of a sched/copus round waited for slurmctld's locks
 * and held them (stats.h): counted here, and written as rows of
 * StateSaveLocation/copus_stats (copusctl stats) and as Prometheus
 * histograms in copus_metrics.prom. Plain C, no Slurm: test-plugin-sched
 * runs it.
 */
#include <stdbool.h>
#include <stdio.h>

#include "stats.h"

/* 100 us, 1 ms, 10 ms, 100 ms, 1 s, 10 s; then the rest. */
const double copus__lock_bounds_us[COPUS__LOCK_BUCKETS - 1] = {
	1e2, 1e3, 1e4, 1e5, 1e6, 1e7
};

static const char *const _names[] = {
#define COPUS__LOCK_NAME(name, what) #name,
	COPUS__LOCK_PHASES(COPUS__LOCK_NAME)
#undef COPUS__LOCK_NAME
};

static const char *const _whats[] = {
#define COPUS__LOCK_WHAT(name, what) what,
	COPUS__LOCK_PHASES(COPUS__LOCK_WHAT)
#undef COPUS__LOCK_WHAT
};

const char *copus__lock_phase_name(int phase)
{
	return phase >= 0 && phase < COPUS__LOCK_NPHASES ? _names[phase] : "?";
}

const char *copus__lock_phase_what(int phase)
{
	return phase >= 0 && phase < COPUS__LOCK_NPHASES ? _whats[phase] : "?";
}

static void _time(struct copus__lock_time *t, double us)
{
	int b;

	if (us < 0)
		us = 0;
	t->last = us;
	t->sum += us;
	if (us > t->max)
		t->max = us;
	for (b = 0; b < COPUS__LOCK_BUCKETS; b++)
		if (b == COPUS__LOCK_BUCKETS - 1 ||
		    us <= copus__lock_bounds_us[b])
			t->le[b]++;
}

void copus__lock_count(struct copus__lock_stats *l, double wait_us,
		       double hold_us, const struct copus__lock_cpu *cpu)
{
	static const struct copus__lock_cpu none;
	bool longest;

	if (!cpu)
		cpu = &none;
	l->cycles++;
	longest = l->cycles == 1 || hold_us > l->hold.max;
	_time(&l->wait, wait_us);
	_time(&l->hold, hold_us);
	l->hold_cpu_sum += cpu->cpu_us > 0 ? cpu->cpu_us : 0;
	if (longest)
		l->hold_max_cpu = *cpu;
}

/* "100us", "1ms", "1s", "inf": the bucket's bound in a row's name. */
static void _bound(int b, char *buf, size_t len)
{
	double us;

	if (b == COPUS__LOCK_BUCKETS - 1) {
		snprintf(buf, len, "inf");
		return;
	}
	us = copus__lock_bounds_us[b];
	if (us < 1e3)
		snprintf(buf, len, "%gus", us);
	else if (us < 1e6)
		snprintf(buf, len, "%gms", us / 1e3);
	else
		snprintf(buf, len, "%gs", us / 1e6);
}

static void _rows(FILE *f, const char *phase, const char *which,
		  const struct copus__lock_time *t, double cycles)
{
	char bound[16];
	int b;

	fprintf(f, "lock_%s_%s_last_us\t%.6g\tLast time the %s %s its "
		"locks (microseconds)\n", phase, which, t->last, phase,
		*which == 'w' ? "waited for" : "held");
	fprintf(f, "lock_%s_%s_mean_us\t%.6g\tMean time the %s %s its "
		"locks (microseconds)\n", phase, which,
		cycles > 0 ? t->sum / cycles : 0, phase,
		*which == 'w' ? "waited for" : "held");
	fprintf(f, "lock_%s_%s_max_us\t%.6g\tLongest time the %s %s its "
		"locks (microseconds)\n", phase, which, t->max, phase,
		*which == 'w' ? "waited for" : "held");
	for (b = 0; b < COPUS__LOCK_BUCKETS; b++) {
		_bound(b, bound, sizeof(bound));
		fprintf(f, "lock_%s_%s_le_%s\t%.6g\tTimes the %s %s its "
			"locks at most %s\n", phase, which, bound, t->le[b],
			phase, *which == 'w' ? "waited for" : "held",
			b == COPUS__LOCK_BUCKETS - 1 ? "any time" : bound);
	}
}

void copus__lock_stats_rows(const struct copus__stats *st, FILE *f)
{
	int p;

	for (p = 0; p < COPUS__LOCK_NPHASES; p++) {
		const struct copus__lock_stats *l = &st->locks[p];

		fprintf(f, "lock_%s_cycles\t%.6g\tTimes the %s took its locks: "
			"%s\n", _names[p], l->cycles, _names[p], _whats[p]);
		fprintf(f, "lock_%s_yields\t%.6g\tTimes the %s let its locks "
			"go midway (copus_yield_interval)\n", _names[p],
			l->yields, _names[p]);
		_rows(f, _names[p], "wait", &l->wait, l->cycles);
		_rows(f, _names[p], "hold", &l->hold, l->cycles);
		fprintf(f, "lock_%s_hold_cpu_mean_us\t%.6g\tMean CPU time the "
			"%s used while it held its locks (microseconds)\n",
			_names[p], l->cycles > 0 ? l->hold_cpu_sum / l->cycles
						 : 0, _names[p]);
		fprintf(f, "lock_%s_hold_max_cpu_us\t%.6g\tCPU time the %s "
			"used in its longest hold (microseconds; the rest "
			"it spent off the CPU)\n", _names[p],
			l->hold_max_cpu.cpu_us, _names[p]);
		fprintf(f, "lock_%s_hold_max_preempted\t%.6g\tTimes the %s "
			"was taken off the CPU in its longest hold\n",
			_names[p], l->hold_max_cpu.preempted, _names[p]);
		fprintf(f, "lock_%s_hold_max_blocked\t%.6g\tTimes the %s "
			"gave up the CPU in its longest hold (waiting for "
			"memory, a file or a mutex)\n", _names[p],
			l->hold_max_cpu.blocked, _names[p]);
	}
}

static void _histogram(FILE *f, const struct copus__stats *st,
		       const char *which, const char *help)
{
	int p, b;

	fprintf(f, "# HELP copus_lock_%s_seconds %s.\n"
		"# TYPE copus_lock_%s_seconds histogram\n", which, help, which);
	for (p = 0; p < COPUS__LOCK_NPHASES; p++) {
		const struct copus__lock_stats *l = &st->locks[p];
		const struct copus__lock_time *t =
			*which == 'w' ? &l->wait : &l->hold;

		for (b = 0; b < COPUS__LOCK_BUCKETS; b++) {
			if (b == COPUS__LOCK_BUCKETS - 1)
				fprintf(f, "copus_lock_%s_seconds_bucket{phase="
					"\"%s\",le=\"+Inf\"} %.6g\n", which,
					_names[p], t->le[b]);
			else
				fprintf(f, "copus_lock_%s_seconds_bucket{phase="
					"\"%s\",le=\"%g\"} %.6g\n", which,
					_names[p],
					copus__lock_bounds_us[b] / 1e6,
					t->le[b]);
		}
		fprintf(f, "copus_lock_%s_seconds_sum{phase=\"%s\"} %.6g\n"
			"copus_lock_%s_seconds_count{phase=\"%s\"} %.6g\n",
			which, _names[p], t->sum / 1e6, which, _names[p],
			l->cycles);
	}
	fprintf(f, "# HELP copus_lock_%s_max_seconds Longest of those "
		"times.\n# TYPE copus_lock_%s_max_seconds gauge\n", which,
		which);
	for (p = 0; p < COPUS__LOCK_NPHASES; p++) {
		const struct copus__lock_stats *l = &st->locks[p];

		fprintf(f, "copus_lock_%s_max_seconds{phase=\"%s\"} %.6g\n",
			which, _names[p],
			(*which == 'w' ? l->wait.max : l->hold.max) / 1e6);
	}
}

void copus__lock_stats_prom(const struct copus__stats *st, FILE *f)
{
	int p;

	fprintf(f, "# HELP copus_lock_yields_total Times a phase of a round "
		"let slurmctld's locks go midway (copus_yield_interval).\n"
		"# TYPE copus_lock_yields_total counter\n");
	for (p = 0; p < COPUS__LOCK_NPHASES; p++)
		fprintf(f, "copus_lock_yields_total{phase=\"%s\"} %.6g\n",
			_names[p], st->locks[p].yields);
	_histogram(f, st, "wait", "Time a phase of a round waited for "
		   "slurmctld's locks");
	_histogram(f, st, "hold", "Time a phase of a round held slurmctld's "
		   "locks");
	fprintf(f, "# HELP copus_lock_hold_max_cpu_seconds CPU time a phase "
		"used in its longest hold.\n"
		"# TYPE copus_lock_hold_max_cpu_seconds gauge\n");
	for (p = 0; p < COPUS__LOCK_NPHASES; p++)
		fprintf(f, "copus_lock_hold_max_cpu_seconds{phase=\"%s\"} "
			"%.6g\n", _names[p],
			st->locks[p].hold_max_cpu.cpu_us / 1e6);
	fprintf(f, "# HELP copus_lock_hold_max_preemptions Times a phase was "
		"taken off the CPU in its longest hold.\n"
		"# TYPE copus_lock_hold_max_preemptions gauge\n");
	for (p = 0; p < COPUS__LOCK_NPHASES; p++)
		fprintf(f, "copus_lock_hold_max_preemptions{phase=\"%s\"} "
			"%.6g\n", _names[p],
			st->locks[p].hold_max_cpu.preempted);
}
