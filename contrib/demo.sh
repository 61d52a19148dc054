#!/usr/bin/env bash
# The main job: replay a small workload on a 4-node x 4-GPU cluster under
# today's Slurm behaviour (fifo with backfill) and under the elastic
# schedulers, with job profiles measured on real GPUs, and compare.
#   contrib/demo.sh BUILD_DIR DATA_DIR [OUT_DIR]
set -euo pipefail
build=$1
data=$2
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${3:-$build/demo}
if [ ! -d "$data/pollux/traces" ]; then
	echo "demo: no Pollux profiles in $data/pollux/traces (set COPUS_DATA)" >&2
	exit 1
fi
mkdir -p "$out"
workload=$top/sim/examples/demo-workload.csv
echo "copus-sim: $(($(wc -l < "$workload") - 1)) training jobs over 100 minutes on 4 nodes x 4 GPUs"
echo "(job profiles: $data/pollux/traces; results in $out)"
echo
for policy in fifo tiresias pollux copus; do
	"$build/sim/copus-sim" --cluster 4x4 --profiles "$data/pollux/traces" \
		--policy "$policy" --summary "$out/$policy.json" \
		--timeline "$out/$policy-timeline.csv" \
		--plot "$out/$policy.png" "$workload" | grep -v '^mean'
done
echo
echo "Plots of GPUs in use and queue length: $out/<policy>.png"
