#!/bin/bash
# Benchmark of sched/copus in a real slurmctld: round time and squeue
# latency with many queued jobs. Not a test; run as root from the build
# directory:
#   bash ../main/tests/bench-plugin.sh [NODES] [JOBS]     (default 32 5000)
# Starts a loopback cluster of NODES nodes (4 GPUs each, two types),
# submits JOBS one-GPU jobs (the first 4*NODES run, the rest wait), then
# reports the plugin's round time (from StateSaveLocation/copus_status) and
# how long squeue takes, each over several samples.
NODES=${1:-32}
JOBS=${2:-5000}
. "$(dirname "$0")/slurm-common.sh"
so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes "$NODES" --gpus a100:4,v100:4 --cpus 8 --sched copus \
	--plugin-dir "$(dirname "$so")" --wait 120 \
	--sched-params "copus_interval=2,copus_max_jobs=$JOBS,copus_restart_delay=86400"

t0=$(date +%s.%N)
seq "$JOBS" | xargs -P 2 -n 50 sh -c 'for i; do
	sbatch -Q -o /dev/null --gres=gpu:1 -t 60 --wrap "sleep 3600" || exit 255
done' sh || fail "sbatch failed"
t1=$(date +%s.%N)
echo "submitted $JOBS jobs in $(echo "$t1 - $t0" | bc) s"

# Samples of the round time: one per round (copus_status is replaced every
# round), ten rounds.
status=$TMP/c/state/copus_status
last=""
n=0
end=$((SECONDS + 120))
: >"$TMP/rounds"
while [ $n -lt 10 ] && [ $SECONDS -lt $end ]; do
	line=$(head -n 1 "$status" 2>/dev/null)
	if [ -n "$line" ] && [ "$line" != "$last" ]; then
		last=$line
		echo "$line" >>"$TMP/rounds"
		n=$((n + 1))
	fi
	sleep 0.2
done
# The first sample may predate the last submissions: report from the rest.
tail -n +2 "$TMP/rounds" | sed -n 's/.*: \([0-9]*\) pending considered, \([0-9]*\) running; took \([0-9.]*\) ms (snapshot \([0-9.]*\), decision \([0-9.]*\), actions \([0-9.]*\)).*/\1 \2 \3 \4 \5 \6/p' |
	sort -n -k3 | awk '{p[NR]=$1; r[NR]=$2; t[NR]=$3; s[NR]=$4; d[NR]=$5; a[NR]=$6}
	END { if (NR == 0) { print "no round samples"; exit 1 }
	m = int((NR + 1) / 2);
	printf "plugin round (%d samples): median %.1f ms (snapshot %.1f, decision %.1f, actions %.1f), max %.1f ms; %d pending, %d running\n",
		NR, t[m], s[m], d[m], a[m], t[NR], p[m], r[m] }'

for i in 1 2 3 4 5; do
	s=$(date +%s.%N)
	c=$(squeue -h | wc -l)
	e=$(date +%s.%N)
	echo "$(echo "($e - $s) * 1000" | bc)" >>"$TMP/squeue"
done
sort -n "$TMP/squeue" | awk -v c="$c" '{v[NR]=$1} END {printf "squeue (%d jobs listed), 5 runs: median %.0f ms, max %.0f ms\n", c, v[3], v[5]}'
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
