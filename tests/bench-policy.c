/*
 * Benchmark of the copus policy's decision time on synthetic clusters
 * (three GPU types, 8 GPUs a node) and jobs with fitted-model-like speedup
 * curves (tests/policy-gen.h); the policy runs on one thread. For each
 * size it prints the time of the first round (speedup tables cold) and the
 * median of the following rounds, each round applying the previous
 * decision as the jobs' current allocations; and the memory: the peak
 * resident set after building the instance, and after the rounds.
 * Each size runs in a child process so that the peaks are its own. The CPU
 * time of a round is what one core spends on it; on a shared machine the
 * wall clock also counts the time other processes hold the core.
 *
 *   bench-policy [--quick] [--pin] [--rounds R] [--policy NAME]
 *                [--types T] [--equal] [JOBS NODES]...
 *
 * Default sizes: 100/128, 1000/1024, 2000/2048, 4000/4096, 10000/8192
 * (jobs/nodes), 9 rounds each. --quick runs the first two with 3 rounds;
 * --pin keeps the process on the first CPU it may use (on an idle machine
 * only: on a busy one that core may be the busiest). --types sets the
 * number of GPU types (1 to 3; small clusters of one type are where the
 * policy's exact step does the most work). --equal places multi-node jobs
 * with the same GPUs on each node (equal_per_node, the plugin's setting).
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <copus/policy.h>

#include "policy-gen.h"

struct result {
	double first, median, min, max; /* seconds, wall clock */
	double cpu_first, cpu_median;   /* seconds of CPU time */
	int placed, gpus, changed;
	long rss_input;                 /* KiB, after building the input */
};

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static long peak_rss_kib(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_maxrss;
}

/*
 * The instance of a size: most jobs elastic, a fifth restricted to one
 * type, a tenth without a model yet, and about 60% trying to hold GPUs
 * already, which fills the cluster when there are enough jobs.
 */
static int ntypes = 3;
static bool equal;

static struct pgen_params size_params(int jobs, int nodes)
{
	struct pgen_params p = {
		.seed = 42, .jobs = jobs, .nodes = nodes, .node_gpus = 8,
		.types = ntypes, .max_req = 32, .max_gpus = 64, .elastic = 0.8,
		.running = 0.6, .one_type = 0.2, .no_model = 0.1,
	};

	return p;
}

/* Run the rounds of one size; the decisions become the next allocations. */
static int run_size(const char *policy, int jobs, int nodes, int rounds,
		    struct result *out)
{
	struct pgen_params p = size_params(jobs, nodes);
	struct pgen g;
	copus_policy *pol = NULL;
	copus_decision *dec = NULL;
	double *t = NULL, *cpu = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = pgen_create(&p, &g);
	if (rc != COPUS_OK)
		return rc;
	dec = calloc((size_t)jobs + 1, sizeof(*dec));
	t = calloc((size_t)rounds, sizeof(*t));
	cpu = calloc((size_t)rounds, sizeof(*cpu));
	if (!dec || !t || !cpu) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	out->rss_input = peak_rss_kib();
	copus_policy_params prm = COPUS_POLICY_PARAMS_INITIALIZER;
	prm.equal_per_node = equal;
	rc = copus_policy_create(policy, &prm, &pol);
	if (rc != COPUS_OK)
		goto out;
	for (int r = 0; r < rounds; r++) {
		double now = 60.0 * r, t0 = clock_s(CLOCK_MONOTONIC);
		double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		rc = copus_policy_decide(pol, &g.c, g.jobs, g.n, now, dec);
		t[r] = clock_s(CLOCK_MONOTONIC) - t0;
		cpu[r] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
		if (rc != COPUS_OK)
			goto out;
		/* Apply the decision, as the plugin would before the next. */
		size_t used = 0;
		out->placed = out->gpus = out->changed = 0;
		for (size_t j = 0; j < g.n; j++) {
			copus_job *jb = &g.jobs[j];
			out->changed += dec[j].changed;
			/* The old allocations are not read again: the
			 * decision's slots replace them in place. */
			jb->alloc = &g.slots[used];
			jb->alloc_slots = dec[j].num_slots;
			jb->alloc_type = dec[j].gpu_type;
			if (dec[j].gpus > 0) {
				out->placed++;
				out->gpus += dec[j].gpus;
				jb->attained += 60.0 * dec[j].gpus;
				if (dec[j].gpus > jb->max_gpus_had)
					jb->max_gpus_had = dec[j].gpus;
				if (jb->remaining > 60.0)
					jb->remaining -= 60.0;
			}
			jb->restarts += dec[j].changed && dec[j].gpus > 0;
			memcpy(&g.slots[used], dec[j].slots,
			       (size_t)dec[j].num_slots * sizeof(*g.slots));
			used += (size_t)dec[j].num_slots;
		}
	}
	out->first = t[0];
	out->cpu_first = cpu[0];
	/* The median of the warm rounds (after the first). */
	int w = rounds > 1 ? 1 : 0;
	qsort(t + w, (size_t)(rounds - w), sizeof(*t), cmp_double);
	qsort(cpu + w, (size_t)(rounds - w), sizeof(*cpu), cmp_double);
	out->median = t[w + (rounds - w) / 2];
	out->cpu_median = cpu[w + (rounds - w) / 2];
	out->min = t[w];
	out->max = t[rounds - 1];
out:
	copus_policy_destroy(pol);
	pgen_destroy(&g);
	free(dec);
	free(t);
	free(cpu);
	return rc;
}

/* One size in a child process: its peak resident set is its own. */
static int bench(const char *policy, int jobs, int nodes, int rounds)
{
	int fd[2];
	struct result res;
	struct rusage ru;
	int status = 0;

	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(fd[0]);
		int rc = run_size(policy, jobs, nodes, rounds, &res);
		if (rc == COPUS_OK &&
		    write(fd[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			rc = COPUS_EIO;
		if (rc != COPUS_OK)
			fprintf(stderr, "bench-policy: %d jobs, %d nodes: %s\n",
				jobs, nodes, copus_strerror(rc));
		_exit(rc == COPUS_OK ? 0 : 1);
	}
	close(fd[1]);
	ssize_t got = read(fd[0], &res, sizeof(res));
	close(fd[0]);
	if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || got != (ssize_t)sizeof(res))
		return -1;
	printf("%6d %6d %6d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %6d %6d %6d "
	       "%6.1f %6.1f\n", jobs, nodes, nodes * 8, res.first * 1e3,
	       res.median * 1e3, res.min * 1e3, res.max * 1e3,
	       res.cpu_first * 1e3, res.cpu_median * 1e3, res.placed, res.gpus,
	       res.changed, res.rss_input / 1024.0, ru.ru_maxrss / 1024.0);
	return 0;
}

/* Keep the process on one core: the first one it may use. */
static int pin_one_core(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) {
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			return sched_setaffinity(0, sizeof(set), &set) == 0 ?
				       c : -1;
		}
	return -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench-policy [--quick] [--pin] [--rounds R] "
			"[--policy NAME] [--types T] [--equal] [JOBS NODES]...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const int sizes[][2] = { { 100, 128 },   { 1000, 1024 },
					{ 2000, 2048 }, { 4000, 4096 },
					{ 10000, 8192 } };
	const char *policy = "copus";
	int rounds = 9, nsizes = 5, quick = 0, pin = 0, i = 1, fails = 0;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			quick = 1;
		} else if (strcmp(argv[i], "--pin") == 0) {
			pin = 1;
		} else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
			rounds = atoi(argv[++i]);
			if (rounds < 1)
				usage();
		} else if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
			policy = argv[++i];
		} else if (strcmp(argv[i], "--equal") == 0) {
			equal = true;
		} else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc) {
			ntypes = atoi(argv[++i]);
			if (ntypes < 1 || ntypes > 3)
				usage();
		} else {
			usage();
		}
	}
	if ((argc - i) % 2 != 0)
		usage();
	if (quick) {
		nsizes = 2;
		rounds = 3;
	}
	int cpu = pin ? pin_one_core() : -1;
	printf("# policy %s%s, %d GPU type(s), %d rounds a size, ", policy,
	       equal ? " (equal GPUs per node)" : "", ntypes, rounds);
	if (cpu >= 0)
		printf("pinned to CPU %d", cpu);
	else
		printf("%s", pin ? "could not pin" : "not pinned");
	printf("; times in ms, memory in MiB\n");
	printf("# first: round 1 (cold); median/min/max: rounds 2..R, wall "
	       "clock; cpu-*: CPU time\n");
	printf("  jobs  nodes   GPUs    first   median      min      max "
	       "cpu-frst  cpu-med placed   gpus  moved rss-in rss-pk\n");
	if (i < argc) {
		for (; i + 1 < argc; i += 2) {
			int j = atoi(argv[i]), n = atoi(argv[i + 1]);
			if (j < 0 || n < 1)
				usage();
			fails += bench(policy, j, n, rounds) != 0;
		}
	} else {
		for (int s = 0; s < nsizes; s++)
			fails += bench(policy, sizes[s][0], sizes[s][1],
				       rounds) != 0;
	}
	return fails ? 1 : 0;
}
