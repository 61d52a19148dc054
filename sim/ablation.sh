#!/bin/sh
# The copus policy without each of its ingredients, against pollux and fifo:
# mean average JCT, mean makespan and the largest finish-time fairness over
# Pollux's eight workloads on 16 nodes x 4 GPUs, at 1.0x and 0.5x load.
# "copus, warm history" starts its predictor with the finished jobs of the
# other load's workloads (other jobs sampled from the same trace), as a
# cluster that has kept its history (the plugin's copus_history).
# Usage: sim/ablation.sh DATA_DIR [COPUS_SIM]
set -eu
data=${1:?usage: sim/ablation.sh DATA_DIR [COPUS_SIM]}
sim=${2:-$(dirname "$0")/copus-sim}
[ -x "$sim" ] || sim=copus-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Remaining-work sources and histories, when this copus-sim offers them.
rem= hist=
"$sim" --help 2>&1 | grep -q -- --remaining && rem="predict oracle none"
"$sim" --help 2>&1 | grep -q -- --save-history && hist=yes
run() ( # NAME POLICY LOAD [copus-sim options]
	name=$1 pol=$2 load=$3
	shift 3
	dir=$data/pollux/workloads
	[ "$load" = 0.5 ] && dir=$data/pollux/workloads-0.5
	"$sim" --cluster 16x4 --profiles "$data/pollux/traces" --policy "$pol" \
		--jobs 2 --summary "$tmp/s.json" "$@" "$dir"/workload-[1-8].csv \
		> /dev/null
	python3 - "$tmp/s.json" "$name" "$load" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ms = list(s["makespan"].values())
print("%-32s %-4s %8.0f %10.0f %8.2f" % (sys.argv[2], sys.argv[3], s["mean"],
      sum(ms) / len(ms), max(s["max_ftf"].values())))
PY
)
printf '%-32s %-4s %8s %10s %8s\n' variant load avg_jct makespan max_ftf
for load in 1.0 0.5; do
	run pollux pollux $load
	run fifo fifo $load
	if [ -n "$rem" ]; then
		for r in $rem; do
			run "copus, remaining=$r" copus $load --remaining $r
		done
		if [ -n "$hist" ]; then
			other=0.5
			[ "$load" = 0.5 ] && other=1.0
			run "(history of $other)" copus $other \
				--save-history "$tmp/history" > /dev/null
			run "copus, warm history" copus $load \
				--history "$tmp/history"
		fi
	else
		run copus copus $load
	fi
	for opt in no-srpt no-restart-cost no-fairness no-placement no-spread; do
		run "copus:$opt" "copus:$opt" $load
	done
done
