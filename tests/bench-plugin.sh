#!/bin/bash
# Benchmark of sched/copus in a real slurmctld: round time and squeue
# latency with many queued jobs. Not a test; run as root from the build
# directory:
#   [ELASTIC=1-4] bash ../main/tests/bench-plugin.sh [NODES] [JOBS]
# (default 32 5000, rigid one-GPU jobs).
# Starts a loopback cluster of NODES nodes (4 GPUs each, two types),
# submits JOBS one-GPU jobs (the first 4*NODES run, the rest wait), then
# reports the plugin's round time (from StateSaveLocation/copus_status) and
# how long squeue takes, each over several samples.
#
#   bash ../main/tests/bench-plugin.sh rescale
# measures the rescale turnaround instead: from the plugin's decision (its
# "asked to checkpoint" log line) to the job's first step at the new size.
# One node with 4 a100 GPUs; an elastic job (1-4 GPUs, slurm-common.sh's
# hint_job: checkpoints at once, publishes st=checkpointed) grows 1 -> 2 ->
# 4, shrinks to 2 when a rigid 2-GPU job arrives, and grows back to 4 when it
# ends: four rescales. The job's checkpoint itself takes no time here, so the
# figures are the scheduler's and Slurm's share.
#
#   bash ../main/tests/bench-plugin.sh starts [NODES] [JOBS] [SECONDS]
# measures how many jobs start per second (see below).

if [ "${1:-}" = rescale ]; then
	. "$(dirname "$0")/slurm-common.sh"
	bench_rescale() {
		so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
		spank=$(need_plugin spank_copus) || exit $?
		export INTERVAL=${INTERVAL:-10}
		cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
			--plugin-dir "$(dirname "$so")" \
			--sched-params "copus_interval=$INTERVAL,copus_restart_delay=2,copus_restart_cost=2,copus_checkpoint_deadline=30"
		hint_job "$TMP/job.sh"
		log=$TMP/c/log/slurmctld.log
		now() { date +%s.%N; }

		e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-4 -t 30 \
			"$TMP/job.sh" "$TMP/e.out") || fail "sbatch refused the elastic job"
		# first_step N: waits for the job's N-th start line and prints when it came.
		first_step() {
			local end=$((SECONDS + 120)) n
			while :; do
				n=$(grep -c '^start ' "$TMP/e.out" 2>/dev/null)
				[ "${n:-0}" -lt "$1" ] || break
				[ $SECONDS -lt $end ] || { echo "no start number $1: $(cat "$TMP/e.out")" >&2; return 1; }
				sleep 0.02
			done
			now
		}
		: >"$TMP/samples"
		sample() {
			local n=$1 t1 asked line
			t1=$(first_step "$n") || fail "the job did not restart"
			line=$(grep "JobId=$e asked to checkpoint" "$log" | sed -n "$((n - 1))p")
			asked=$(date -d "$(sed 's/^\[\([^]]*\)\].*/\1/' <<<"$line")" +%s.%N)
			echo "$(echo "$t1 - $asked" | bc) $(sed 's/.*checkpoint to go //' <<<"$line")" | tee -a "$TMP/samples"
		}
		first_step 1 >/dev/null || fail "the job did not start"
		sample 2
		sample 3
		r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 5 --wrap 'sleep 8') ||
			fail "sbatch refused the rigid job"
		sample 4
		sample 5
		scancel "$e" "$r" 2>/dev/null
		sort -n "$TMP/samples" | awk '{v[NR] = $1} END {
			printf "rescale turnaround, decision to first step at the new size, %d samples (interval %s s): min %.2f s, median %.2f s, max %.2f s\n",
				NR, ENVIRON["INTERVAL"], v[1], v[int((NR + 1) / 2)], v[NR] }'
		echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	}
	bench_rescale
	exit $?
fi
if [ "${1:-}" = starts ]; then
	# bash ../main/tests/bench-plugin.sh starts [NODES] [JOBS] [SECONDS]
	# Start throughput: NODES nodes x 4 GPUs, JOBS queued one-GPU jobs of
	# SECONDS each (default 32, 5000, 2), rounds 10 s apart. The jobs are
	# submitted to the partition while it is down, so that all of them
	# wait however slowly sbatch goes; then the partition comes up.
	# Reports the jobs started per second over the next 30 s (the pending
	# jobs that left the queue) and squeue's latency meanwhile.
	. "$(dirname "$0")/slurm-common.sh"
	NODES=${2:-32} JOBS=${3:-5000} DUR=${4:-2}
	so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
	# SCHED=backfill (or builtin) measures Slurm's own scheduler on the
	# same machine, for comparison.
	SCHED=${SCHED:-copus}
	params="copus_interval=10,copus_max_jobs=1000"
	[ "$SCHED" = copus ] || params=
	cluster_up --nodes "$NODES" --gpus a100:4 --cpus 8 --sched "$SCHED" \
		--plugin-dir "$(dirname "$so")" --wait 120 \
		${params:+--sched-params "$params"}
	log=$TMP/c/log/slurmctld.log
	export DUR
	scontrol update partitionname=gpu state=down || fail "cannot take the partition down"
	t0=$(date +%s.%N)
	seq "$JOBS" | xargs -P 2 -n 50 sh -c 'for i; do
		sbatch -Q -o /dev/null --gres=gpu:1 -t 5 --wrap "sleep $DUR" || exit 255
	done' sh || fail "sbatch failed"
	echo "submitted $JOBS jobs in $(echo "$(date +%s.%N) - $t0" | bc) s"
	sleep 2
	p0=$(squeue -h -t PD -o %i | wc -l)
	t1=$(date +%s.%N)
	scontrol update partitionname=gpu state=up || fail "cannot bring the partition up"
	: >"$TMP/squeue"
	for i in 1 2 3 4 5; do
		sleep 5
		s=$(date +%s.%N)
		squeue -h >/dev/null
		e=$(date +%s.%N)
		echo "$(echo "($e - $s) * 1000" | bc)" >>"$TMP/squeue"
	done
	sleep $(echo "$t1 + 30 - $(date +%s.%N)" | bc | sed 's/^-.*/0/')
	p1=$(squeue -h -t PD -o %i | wc -l)
	n=$((p0 - p1))
	echo "jobs started in the 30 s after the partition came up: $n ($(echo "scale=1; $n / 30" | bc) per second)"
	sort -n "$TMP/squeue" | awk '{v[NR]=$1} END {printf "squeue under that load, 5 runs: median %.0f ms, max %.0f ms\n", v[3], v[5]}'
	[ "$SCHED" != copus ] ||
		"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" | grep -E '^(rounds|event_rounds|starts|starts_max|round_ms_mean|round_ms_max) '
	echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	exit 0
fi
NODES=${1:-32}
JOBS=${2:-5000}
. "$(dirname "$0")/slurm-common.sh"
so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
# ELASTIC=MIN-MAX submits elastic jobs instead (every pending one goes to
# the policy), through the SPANK plugin.
spank=()
opt=()
if [ -n "${ELASTIC:-}" ]; then
	spank=(--spank "$(need_plugin spank_copus)") || exit $?
	opt=(--elastic="$ELASTIC")
fi
cluster_up --nodes "$NODES" --gpus a100:4,v100:4 --cpus 8 --sched copus \
	--plugin-dir "$(dirname "$so")" --wait 120 "${spank[@]}" \
	--sched-params "copus_interval=2,copus_max_jobs=$JOBS,copus_restart_delay=86400"
export COPUS_BENCH_OPT="${opt[*]}"

t0=$(date +%s.%N)
seq "$JOBS" | xargs -P 2 -n 50 sh -c 'for i; do
	sbatch -Q -o /dev/null --gres=gpu:1 $COPUS_BENCH_OPT -t 60 --wrap "sleep 3600" || exit 255
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
