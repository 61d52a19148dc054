#!/bin/sh
# copus against pollux and sia on every workload family of the reference
# data: Pollux's eight workloads at 1.0x and 0.5x load on 16 nodes x 4 GPUs,
# Sia's Philly workloads and Sia's newtrace on Sia's 64-GPU cluster. Per
# family and policy: mean average JCT, mean p99 JCT, mean makespan, the
# largest max_ftf, restarts per job (the mean over every job of the family)
# and the most restarts of any one job (a policy that thrashes a few jobs
# shows there, not in the mean); then copus's average JCT over the better of
# pollux and sia and over backfill, and its restarts per job beside
# pollux's. backfill is Slurm's sched/backfill as a site runs it
# (backfill:limit_factor=2: the users' time limits twice the true run time,
# see core/policy/backfill.c), the baseline copus replaces. Extra copus-sim
# options (e.g. --app-rules sim/examples/sia-rules.csv) go to every run.
# By default the policies know what the plugin knows: each job's models on
# the GPU types it has run on and the plugin's estimates on the others
# (copus_models_estimate); --probes gives every job, on arrival, a probe of
# each type instead, as Sia profiles jobs.
# Usage: sim/compare.sh DATA_DIR [COPUS_SIM [copus-sim options]]
set -eu
data=${1:?usage: sim/compare.sh DATA_DIR [COPUS_SIM [options]]}
sim=${2:-$(dirname "$0")/copus-sim}
[ -x "$sim" ] || sim=copus-sim
[ $# -ge 2 ] && shift 2 || shift $#
extra=$*
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hetero=aws:6x4,rtx:3x8,dgx-ext:2x8
printf '%-10s %-8s %9s %9s %10s %8s %8s %7s\n' family policy avg_jct p99 \
	makespan max_ftf rst/job rst_max
for fam in pollux-1.0 pollux-0.5 sia-philly sia-newtrace; do
	case $fam in
	pollux-1.0) c=16x4 p=$data/pollux/traces
		set -- "$data"/pollux/workloads/workload-[1-8].csv ;;
	pollux-0.5) c=16x4 p=$data/pollux/traces
		set -- "$data"/pollux/workloads-0.5/workload-[1-8].csv ;;
	sia-philly) c=$hetero p=$data/sia/traces
		set -- "$data"/sia/workloads/philly/workload-[1-8].csv ;;
	sia-newtrace) c=$hetero p=$data/sia/traces
		set -- "$data"/sia/workloads/newtrace/workload-[1-5].csv ;;
	esac
	for pol in pollux sia copus backfill; do
		spec=$pol
		[ "$pol" = backfill ] && spec=backfill:limit_factor=2
		"$sim" --cluster "$c" --profiles "$p" --policy "$spec" --jobs 2 \
			--summary "$tmp/$fam-$pol.json" $extra \
			"$@" > /dev/null
	done
	python3 - "$tmp" "$fam" <<'PY'
import json, sys
tmp, fam = sys.argv[1], sys.argv[2]
mean, rst = {}, {}
for pol in ("pollux", "sia", "copus", "backfill"):
    s = json.load(open("%s/%s-%s.json" % (tmp, fam, pol)))
    n = len(s["makespan"])
    # Each job's restarts, from every workload of the family.
    r = [k for w in s["job_restarts"].values() for k in w.values()]
    mean[pol] = s["mean"]
    rst[pol] = sum(r) / len(r)
    print("%-10s %-8s %9.0f %9.0f %10.0f %8.2f %8.2f %7d" % (
        fam[:10], pol, s["mean"], sum(s["p99_jct"].values()) / n,
        sum(s["makespan"].values()) / n, max(s["max_ftf"].values()),
        rst[pol], max(r)))
print("%-10s copus / better of pollux and sia: %.2f, / backfill: %.2f; "
      "restarts per job: copus %.2f, pollux %.2f" % (
    fam[:10], mean["copus"] / min(mean["pollux"], mean["sia"]),
    mean["copus"] / mean["backfill"], rst["copus"], rst["pollux"]))
PY
done
