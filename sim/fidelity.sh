#!/bin/sh
# Fidelity check of copus-sim against the Pollux simulator's published
# results: all 8 workloads at 1.0x and 0.5x load for each baseline policy on
# 16 nodes x 4 GPUs. Usage: sim/fidelity.sh DATA_DIR [COPUS_SIM]
set -eu
data=${1:?usage: sim/fidelity.sh DATA_DIR [COPUS_SIM]}
sim=${2:-$(dirname "$0")/copus-sim}
[ -x "$sim" ] || sim=copus-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Published mean average JCTs (s) of the Pollux simulator (data/README.md).
published() {
	case "$1-$2" in
	pollux-1.0) echo 2751 ;; tiresias-1.0) echo 4038 ;;
	optimus-1.0) echo 5682 ;; pollux-0.5) echo 1533 ;;
	tiresias-0.5) echo 2092 ;; optimus-0.5) echo 2394 ;;
	*) echo - ;;
	esac
}
start=$(date +%s.%N)
printf '%-9s %-5s %10s %10s %8s %8s\n' policy load copus-sim published diff wall_s
for load in 1.0 0.5; do
	dir=$data/pollux/workloads
	[ "$load" = 0.5 ] && dir=$data/pollux/workloads-0.5
	for pol in pollux tiresias optimus fifo; do
		t0=$(date +%s.%N)
		"$sim" --cluster 16x4 --profiles "$data/pollux/traces" \
			--policy "$pol" --jobs 2 \
			--summary "$tmp/$pol-$load.json" \
			"$dir"/workload-[1-8].csv > "$tmp/$pol-$load.out"
		t1=$(date +%s.%N)
		mean=$(sed -n 's/^mean avg_jct \([0-9]*\) s.*/\1/p' "$tmp/$pol-$load.out")
		pub=$(published "$pol" "$load")
		if [ "$pub" = - ]; then diff=-; else
			diff=$(awk -v a="$mean" -v b="$pub" 'BEGIN{printf "%+.1f%%", 100*(a-b)/b}')
		fi
		printf '%-9s %-5s %10s %10s %8s %8.1f\n' "$pol" "$load" "$mean" \
			"$pub" "$diff" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')"
	done
done
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" 'BEGIN{printf "total wall time %.1f s\n", b-a}'
