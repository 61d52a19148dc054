/*
 * copus-sim: replay Pollux-format workloads on a simulated cluster.
 *
 *   copus-sim --cluster 16x4 --profiles DIR --policy pollux \
 *             [--interval 60] [--restart-delay 30] [--restart-delays FILE] \
 *             [--seed N] [--jobs 2] [--probes] \
 *             [--summary FILE.json] [--timeline FILE.csv] [--plot FILE.png] \
 *             [--history FILE] [--save-history FILE] WORKLOAD.csv...
 *   copus-sim --arena DIR --policy fifo:arena --max-rounds 1500 \
 *             [--arena-rules arena|honest] [--summary FILE.json]
 *
 * This file holds the options and the usage; the modes they choose are in
 * main-arena.c and main-workloads.c (see cli.h).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "cli.h"
#include "sim.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: copus-sim --cluster SPEC --profiles DIR [options] "
		"WORKLOAD.csv...\n"
		"  --cluster SPEC       16x4 (nodes x GPUs) or aws:6x4,rtx:3x8\n"
		"  --profiles DIR       job profiles in Pollux's layout\n"
		"  --policy NAME        ");
	for (size_t i = 0; copus_policy_name_at(i) != NULL; i++)
		fprintf(f, "%s%s", i > 0 ? ", " : "", copus_policy_name_at(i));
	fprintf(f,
		" (pollux);\n"
		"                       copus:no-srpt,no-restart-cost,"
		"no-fairness,no-placement,no-spread\n"
		"                       runs copus without those ingredients;\n"
		"                       fifo:arena is Arena's fcfs (--arena)\n"
		"  --remaining HOW      what copus knows of the work left: "
		"predict\n"
		"                       (its predictor, trained on the jobs "
		"finished so\n"
		"                       far; default), oracle (the truth) or "
		"none;\n"
		"                       fifo's backfill and optimus always "
		"get the oracle,\n"
		"                       as in Pollux's evaluation\n"
		"  --history FILE       finished jobs the predictor knows "
		"before the first\n"
		"                       round (a cluster's history, the "
		"plugin's format)\n"
		"  --save-history FILE  write the jobs that finished, in "
		"that format\n"
		"  --probes             on a typed cluster, tell a policy that "
		"learns models\n"
		"                       each job's speed on the types it has "
		"not run on,\n"
		"                       from a one-GPU step timed on each at "
		"its arrival\n"
		"                       (as Sia profiles jobs); the plugin "
		"learns none\n"
		"  --no-probes          only what the plugin learns: a job's "
		"model on the\n"
		"                       type of its last run (the default)\n"
		"  --equal-per-node     give every job the same GPUs on each "
		"of its nodes,\n"
		"                       as Slurm and sched/copus do (the copus "
		"policy\n"
		"                       follows it; others' uneven decisions "
		"are cut to\n"
		"                       their largest even part, as sched/copus "
		"asks\n"
		"                       Slurm; contrib/testbed.sh sets it but\n"
		"                       for backfill)\n"
		"  --round-phase S      the rounds at S, S + interval, ... "
		"seconds, S less\n"
		"                       than the interval, as slurmctld "
		"ticks at its own\n"
		"                       phase (0: at interval, 2 interval, "
		"...)\n"
		"  --min-run S          with --equal-per-node: a job trains S "
		"seconds on its\n"
		"                       GPUs before it is moved again, as "
		"sched/copus's\n"
		"                       copus_restart_delay holds it (0)\n"
		"  --gpus FILE.json     GPU constants per type (copus-plan's "
		"text, or a\n"
		"                       type named after a built-in one: "
		"\"dgx-ext\": \"a100\"),\n"
		"                       whose speeds estimate a job on a type "
		"it has not\n"
		"                       run on, as sched/copus's "
		"copus_planner_gpus\n"
		"  --interval S         seconds between rounds (60)\n"
		"  --restart-delay S    seconds a reallocation costs (30)\n"
		"  --restart-delays FILE\n"
		"                       each allocation costs one of FILE's\n"
		"                       measured costs (CSV: restart_delay and\n"
		"                       optional first, 1 for a first start's),\n"
		"                       drawn at random with --seed N (1); the\n"
		"                       policy is told --restart-delay\n"
		"  --event-rounds S     between rounds, every S s in which a "
		"job arrived\n"
		"                       or finished, start pending jobs on the "
		"free GPUs\n"
		"                       (running jobs keep theirs), as "
		"sched/copus's\n"
		"                       event rounds do\n"
		"  --restart-measured   the policy is told the mean cost of "
		"the last 16\n"
		"                       moves once each job trains again, "
		"--restart-delay\n"
		"                       until then, as sched/copus's\n"
		"                       copus_restart_cost=measured\n"
		"  --app-rules FILE     per model (CSV application,slowdown,\n"
		"                       restart_delay): it trains slowdown times\n"
		"                       slower than profiled, and a restart costs\n"
		"                       it restart_delay s (the policy is not told)\n"
		"  --jobs N             workloads simulated at once (2)\n"
		"  --summary FILE.json  JCTs and summary figures\n"
		"  --timeline FILE.csv  per round and job: GPUs, nodes, "
		"batch, goodput, progress, epoch, GPU type\n"
		"  --plot FILE.png      cluster allocation and queue over "
		"time (gnuplot)\n"
		"or:    copus-sim --arena DIR --policy NAME [options]\n"
		"  --arena DIR          replay Arena's trace, cluster and table "
		"of iteration\n"
		"                       times (DIR: traces/, resources/, "
		"database/)\n"
		"  --max-rounds N       rounds of 300 s to replay (6000)\n"
		"  --arena-rules R      arena (progress re-valued at the "
		"current speed, a\n"
		"                       restart over 300 s loses a round) or "
		"honest (progress\n"
		"                       kept, a restart costs its time)\n"
		"  --throughput T       what the policy knows of each cell's "
		"speed: oracle\n"
		"                       (the table) or planner\n"
		"  --cell-choice C      what a policy that picks cells may "
		"change: all\n"
		"                       (type, count, locality; default), "
		"count (on the\n"
		"                       requested type) or none (the request)\n"
		"  --summary FILE.json  finished jobs, mean JCTs and more\n"
		"  --timeline FILE.csv  per round and job: cell and work "
		"left\n");
}

/* The long name of the option whose getopt value is C. */
static const char *long_name(const struct option *opts, int c)
{
	for (; opts->name != NULL; opts++)
		if (opts->val == c)
			return opts->name;
	return "?";
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "profiles", required_argument, NULL, 'p' },
		{ "policy", required_argument, NULL, 'P' },
		{ "remaining", required_argument, NULL, 'R' },
		{ "interval", required_argument, NULL, 'i' },
		{ "restart-delay", required_argument, NULL, 'r' },
		{ "restart-delays", required_argument, NULL, 'D' },
		{ "seed", required_argument, NULL, 'e' },
		{ "app-rules", required_argument, NULL, 'A' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "summary", required_argument, NULL, 's' },
		{ "timeline", required_argument, NULL, 't' },
		{ "plot", required_argument, NULL, 'g' },
		{ "history", required_argument, NULL, 'H' },
		{ "save-history", required_argument, NULL, 'S' },
		{ "arena", required_argument, NULL, 'a' },
		{ "arena-rules", required_argument, NULL, 'L' },
		{ "throughput", required_argument, NULL, 'T' },
		{ "cell-choice", required_argument, NULL, 'C' },
		{ "max-rounds", required_argument, NULL, 'm' },
		{ "probes", no_argument, NULL, 'B' },
		{ "no-probes", no_argument, NULL, 'b' },
		{ "equal-per-node", no_argument, NULL, 'E' },
		{ "min-run", required_argument, NULL, 'M' },
		{ "restart-measured", no_argument, NULL, 'K' },
		{ "round-phase", required_argument, NULL, 'F' },
		{ "event-rounds", required_argument, NULL, 'V' },
		{ "gpus", required_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_opts o = { .cluster = "16x4",
			      .policy = "pollux",
			      .interval = 60,
			      .delay = 30,
			      .seed = 1,
			      .rem = SIM_REMAINING_PREDICT,
			      .par = 2 };
	int opt;
	struct timespec ts0;
	const char *arena = NULL;
	struct arena_opts ao = { .rules = ARENA_RULES_ARENA,
				 .throughput = ARENA_THROUGHPUT_ORACLE,
				 .max_rounds = 6000 };

	/* Which options were given: the workloads' options mean nothing to
	 * --arena's replay and Arena's to a workload, so either is refused
	 * rather than silently ignored. */
	bool given[128] = { false };
	static const char workload_only[] = "cpirDeAjgHSEMFGK";
	static const char arena_only[] = "LTCm";

	clock_gettime(CLOCK_MONOTONIC, &ts0);
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;

		if (opt > 0 && opt < 128)
			given[opt] = true;

		switch (opt) {
		case 'c': o.cluster = optarg; break;
		case 'p': o.profiles = optarg; break;
		case 'P': o.policy = optarg; break;
		case 'R':
			if (strcmp(optarg, "predict") == 0) {
				o.rem = SIM_REMAINING_PREDICT;
			} else if (strcmp(optarg, "oracle") == 0) {
				o.rem = SIM_REMAINING_ORACLE;
			} else if (strcmp(optarg, "none") == 0) {
				o.rem = SIM_REMAINING_NONE;
			} else {
				fprintf(stderr,
					"copus-sim: --remaining: '%s' "
					"is not predict, oracle or none\n",
					optarg);
				return 2;
			}
			break;
		case 's': o.summary = optarg; break;
		case 't': o.timeline = optarg; break;
		case 'g': o.png = optarg; break;
		case 'H': o.history_in = optarg; break;
		case 'A': o.rules = optarg; break;
		case 'S': o.history_out = optarg; break;
		case 'i':
		case 'r':
		case 'M':
		case 'F':
			errno = 0;
			{
				double v = strtod(optarg, &end);

				/* The round's interval and phase may be
				 * fractions, as a testbed's slurmctld ticks
				 * every 1.001 s: F times that in trace
				 * seconds. */
				bool frac = opt == 'i' || opt == 'F';
				if (*end || errno || !(v >= (opt == 'i')) ||
				    v > 86400 || (!frac && v != floor(v))) {
					fprintf(stderr,
						"copus-sim: --%s: '%s' "
						"is not a %s of "
						"seconds\n",
						opt == 'i'   ? "interval"
						: opt == 'r' ? "restart-delay"
						: opt == 'M' ? "min-run"
							     : "round-phase",
						optarg,
						opt == 'i'
							? "number from 1 to 86400"
						: opt == 'F'
							? "number from 0 to 86400"
							: "whole number");
					return 2;
				}
				if (opt == 'i')
					o.interval = v;
				else if (opt == 'r')
					o.delay = v;
				else if (opt == 'M')
					o.min_run = v;
				else
					o.phase = v;
			}
			break;
		case 'D': o.delays_file = optarg; break;
		case 'V':
			errno = 0;
			o.event_rounds = strtod(optarg, &end);
			if (*end || errno || !(o.event_rounds > 0) ||
			    o.event_rounds > 86400) {
				fprintf(stderr,
					"copus-sim: --event-rounds: '%s' is "
					"not a number of seconds from 0 "
					"(excluded) to 86400\n",
					optarg);
				return 2;
			}
			break;
		case 'e':
			errno = 0;
			o.seed = strtoul(optarg, &end, 10);
			if (*end || errno || !isdigit((unsigned char)*optarg)) {
				fprintf(stderr,
					"copus-sim: --seed: '%s' is not a "
					"whole number\n",
					optarg);
				return 2;
			}
			break;
		case 'j':
			o.par = strtol(optarg, &end, 10);
			if (*end || o.par < 1 || o.par > 256) {
				fprintf(stderr,
					"copus-sim: --jobs: '%s' is not "
					"in 1..256\n",
					optarg);
				return 2;
			}
			break;
		case 'B': o.probes = true; break;
		case 'b': o.probes = false; break;
		case 'E': o.equal_per_node = true; break;
		case 'K': o.restart_measured = true; break;
		case 'G': o.gpus = optarg; break;
		case 'a': arena = optarg; break;
		case 'L':
			if (strcmp(optarg, "arena") == 0) {
				ao.rules = ARENA_RULES_ARENA;
			} else if (strcmp(optarg, "honest") == 0) {
				ao.rules = ARENA_RULES_HONEST;
			} else {
				fprintf(stderr,
					"copus-sim: --arena-rules: '%s' "
					"is not arena or honest\n",
					optarg);
				return 2;
			}
			break;
		case 'T':
			if (strcmp(optarg, "oracle") == 0) {
				ao.throughput = ARENA_THROUGHPUT_ORACLE;
			} else if (strcmp(optarg, "planner") == 0) {
				ao.throughput = ARENA_THROUGHPUT_PLANNER;
			} else {
				fprintf(stderr,
					"copus-sim: --throughput: '%s' "
					"is not oracle or planner\n",
					optarg);
				return 2;
			}
			break;
		case 'C':
			if (strcmp(optarg, "all") == 0) {
				ao.choice = ARENA_CHOICE_ALL;
			} else if (strcmp(optarg, "count") == 0) {
				ao.choice = ARENA_CHOICE_COUNT;
			} else if (strcmp(optarg, "none") == 0) {
				ao.choice = ARENA_CHOICE_NONE;
			} else {
				fprintf(stderr,
					"copus-sim: --cell-choice: '%s' "
					"is not all, count or none\n",
					optarg);
				return 2;
			}
			break;
		case 'm':
			errno = 0;
			ao.max_rounds = strtol(optarg, &end, 10);
			if (*end || errno || ao.max_rounds < 1 ||
			    ao.max_rounds > 10000000) {
				fprintf(stderr,
					"copus-sim: --max-rounds: '%s' "
					"is not a number of rounds >= 1\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (arena != NULL) {
		if (o.probes) {
			fprintf(stderr,
				"copus-sim: --probes is for workloads; "
				"with --arena, --throughput says what the "
				"policy knows of each cell\n");
			return 2;
		}
		for (const char *c = workload_only; *c; c++) {
			if (given[(unsigned char)*c]) {
				fprintf(stderr,
					"copus-sim: --%s is for workloads; "
					"--arena replays Arena's own trace "
					"on its own cluster and rounds\n",
					long_name(opts, *c));
				return 2;
			}
		}
		if (optind < argc) {
			fprintf(stderr,
				"copus-sim: --arena reads its own trace; "
				"'%s' is not used\n",
				argv[optind]);
			return 2;
		}
		ao.policy = o.policy;
		ao.remaining = o.rem;
		return arena_main(arena, &ao, o.summary, o.timeline);
	}
	for (const char *c = arena_only; *c; c++) {
		if (given[(unsigned char)*c]) {
			fprintf(stderr, "copus-sim: --%s is for --arena DIR\n",
				long_name(opts, *c));
			return 2;
		}
	}
	if (o.profiles == NULL || optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (o.phase >= o.interval) {
		fprintf(stderr,
			"copus-sim: --round-phase: %g is not less than "
			"--interval (%g)\n",
			o.phase, o.interval);
		return 2;
	}
	if (o.min_run > 0 && !o.equal_per_node) {
		fprintf(stderr,
			"copus-sim: --min-run holds jobs as sched/copus "
			"carries decisions out: it needs "
			"--equal-per-node\n");
		return 2;
	}
	return workloads_main(&o, argv + optind, (size_t)(argc - optind), &ts0);
}
