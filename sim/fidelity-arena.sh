#!/bin/sh
# Fidelity check of copus-sim's fifo:arena against Arena's own simulator
# (Crius, EuroSys'26) run with its fcfs on Arena's Philly trace and 1,280-GPU
# cluster (data/README.md): jobs finished and mean JCT at the 1,500-round
# horizon, of the finished jobs and of every submitted job (an unfinished
# one counted to the horizon), and over the whole trace (6,000 rounds).
# Usage: sim/fidelity-arena.sh DATA_DIR [COPUS_SIM]
set -eu
data=${1:?usage: sim/fidelity-arena.sh DATA_DIR [COPUS_SIM]}
sim=${2:-$(dirname "$0")/copus-sim}
[ -x "$sim" ] || sim=copus-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rounds in 1500 6000; do
	"$sim" --arena "$data/arena" --policy fifo:arena --max-rounds $rounds \
		--summary "$tmp/s-$rounds.json" > /dev/null
done
python3 - "$tmp" <<'PY'
import json, sys
# Arena's fcfs (data/README.md): finished, mean JCT finished, all (hours).
arena = {1500: (496, 17.88, 25.08), 6000: (1441, 64.1, None)}
print("%-7s %-22s %10s %9s %8s" % ("rounds", "figure", "copus-sim", "Arena",
                                   "diff"))
for rounds, ref in arena.items():
    s = json.load(open("%s/s-%d.json" % (sys.argv[1], rounds)))
    ours = (s["finished"], s["mean_jct_finished"] / 3600,
            s["mean_jct_all"] / 3600)
    names = ("jobs finished", "mean JCT finished (h)", "mean JCT all (h)")
    for name, o, r in zip(names, ours, ref):
        if r is None:
            print("%-7d %-22s %10.2f %9s %8s" % (rounds, name, o, "-", "-"))
        else:
            print("%-7d %-22s %10.2f %9.2f %+7.2f%%" % (
                rounds, name, o, r, 100 * (o - r) / r))
    print("%-7d %-22s %10.2f" % (rounds, "wall (s)", s["wall"]))
PY
