#!/bin/sh
# Fidelity check of copus-sim's sia policy against Sia's own simulator run
# on Sia's Philly workloads 1-8 and its 64-GPU cluster (data/README.md),
# under Sia's simulator's rules (sim/examples/sia-rules.csv: its per-model
# slowdowns and restart times), with --probes: Sia's simulator profiles every
# job on every GPU type before it starts, which the plugin does not. Prints
# each workload's average JCT in hours next to Sia's, and the means.
# Usage: sim/fidelity-sia.sh DATA_DIR [COPUS_SIM]
set -eu
data=${1:?usage: sim/fidelity-sia.sh DATA_DIR [COPUS_SIM]}
sim=${2:-$(dirname "$0")/copus-sim}
[ -x "$sim" ] || sim=copus-sim
rules=$(dirname "$0")/examples/sia-rules.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sim" --cluster aws:6x4,rtx:3x8,dgx-ext:2x8 --profiles "$data/sia/traces" \
	--policy sia --probes --app-rules "$rules" --jobs 2 --summary "$tmp/s.json" \
	"$data"/sia/workloads/philly/workload-[1-8].csv > /dev/null
python3 - "$tmp/s.json" <<'PY'
import json, sys
# Sia's simulator, workloads 1-8 (data/README.md), hours.
sia = [0.542, 0.722, 0.583, 0.685, 0.672, 0.569, 0.844, 0.635]
s = json.load(open(sys.argv[1]))["avgs"]
print("%-11s %9s %9s %8s" % ("workload", "copus-sim", "Sia", "diff"))
ours = []
for i, ref in enumerate(sia, 1):
    h = s["workload-%d" % i] / 3600
    ours.append(h)
    print("%-11s %9.3f %9.3f %+7.1f%%" % ("workload-%d" % i, h, ref,
                                          100 * (h - ref) / ref))
m, r = sum(ours) / len(ours), sum(sia) / len(sia)
print("%-11s %9.3f %9.3f %+7.1f%%" % ("mean", m, r, 100 * (m - r) / r))
PY
