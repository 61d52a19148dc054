#!/bin/bash
# sched/copus lets slurmctld's locks go midway through a long phase
# (copus_yield_interval, copus_yield_sleep). Where the yields fall changes
# no decision: on a queue that does not change, each job's decision with a
# yield every 16 jobs is the one without yields. Rounds made long by yields
# take at most about a tenth of the time while jobs keep coming (event
# rounds wait nine times a round's length). Jobs that end, are cancelled or
# are submitted during the yields are handled: none is lost, the rest run,
# slurmctld keeps running.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 2 --gpus a100:4,v100:4 --sched copus \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=2,copus_yield_interval=0
conf=$TMP/c/etc/slurm.conf
st=$TMP/c/state
ctl=$PWD/plugin/copusctl

# stat NAME: one counter of copusctl stats.
stat() {
	"$ctl" stats --state-dir "$st" 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'
}
# decisions: each job's id, state, kind, type, GPUs, nodes, decision and
# node list in the last full round (copus_status), sorted.
decisions() {
	awk -F'\t' '!/^#/ && $1 != "JOBID" { print $1, $2, $3, $4, $5, $6, $11, $12 }' \
		"$st/copus_status" | sort
}
# next_full_round: waits for a full round that began after this call.
next_full_round() {
	local before end=$((SECONDS + 30))
	before=$(head -n 1 "$st/copus_status" 2>/dev/null)
	while [ "$(head -n 1 "$st/copus_status" 2>/dev/null)" = "$before" ]; do
		[ $SECONDS -lt $end ] || fail "no full round in 30 s"
		sleep 0.2
	done
}
# set_params LIST: SchedulerParameters, then scontrol reconfigure.
set_params() {
	sed -i "s/^SchedulerParameters=.*/SchedulerParameters=sched_interval=-1,$1/" "$conf"
	scontrol reconfigure || fail "scontrol reconfigure failed"
}

# Every GPU busy for the test's length, then a queue that stays as it is.
fill=()
for t in a100 v100; do
	for i in 1 2 3 4; do
		fill+=("$(sbatch --parsable -o /dev/null --gres=gpu:$t:1 --wrap 'sleep 600')") ||
			fail "sbatch of a job that fills the GPUs"
	done
done
for id in "${fill[@]}"; do
	wait_state "$id" RUNNING 60 || fail "job $id that fills the GPUs did not start"
done
queue=()
for i in $(seq 1 160); do
	g=$((1 + i % 3))
	case $((i % 4)) in
	0) gres=gpu:a100:$g ;;
	1) gres=gpu:v100:$g ;;
	*) gres=gpu:$g ;;
	esac
	queue+=("$(sbatch --parsable -o /dev/null --gres=$gres -t $((5 + i % 7)) --wrap 'sleep 1')") ||
		fail "sbatch of queued job $i"
done
next_full_round
next_full_round
decisions >"$TMP/without"
[ "$(wc -l <"$TMP/without")" -ge 160 ] ||
	fail "the status shows $(wc -l <"$TMP/without") jobs, not the 168 of the queue"
[ "$(stat lock_snapshot_yields)" = 0 ] || fail "yields with copus_yield_interval=0"

# A yield every 16 jobs: the same decisions.
set_params copus_interval=2,copus_yield_interval=1,copus_yield_sleep=1000
end=$((SECONDS + 30))
until [ "${y:=0}" -gt 0 ]; do
	[ $SECONDS -lt $end ] || fail "no yield after copus_yield_interval=1"
	sleep 0.2
	y=$(stat lock_snapshot_yields)
done
next_full_round
next_full_round
decisions >"$TMP/with"
y=$(stat lock_snapshot_yields)
[ "$y" -ge 10 ] || fail "only $y yields of the snapshot in a round over 168 jobs"
diff "$TMP/without" "$TMP/with" >"$TMP/diff" ||
	fail "the decisions differ with yields: $(head -n 20 "$TMP/diff")"
echo "the same $(wc -l <"$TMP/with") decisions with and without yields ($y yields of the snapshot)"

# A partition changed while a snapshot has the locks let go: that round
# decides nothing (what it read of the partitions may be stale) and says
# so; the next ones decide again. Long yields, rounds back to back, and a
# change each second (Slurm keeps last_part_update to the second). With
# copus_max_jobs=1 the starts phase has few jobs to yield over, and most of
# a round is the snapshot's yields.
set_params copus_interval=1,copus_max_jobs=1,copus_yield_interval=1,copus_yield_sleep=50000
part=$(sinfo -h -o %R | head -n 1)
r0=$(stat rounds)
for i in $(seq 1 30); do
	scontrol update partitionname="$part" MaxTime=$((1000 + i)) ||
		fail "scontrol update of partition $part"
	grep -q "reconfigured during the snapshot; nothing decided this round" "$TMP/c/log/slurmctld.log" &&
		break
	sleep 1.1
done
grep -q "the nodes or partitions were reconfigured during the snapshot; nothing decided this round" "$TMP/c/log/slurmctld.log" ||
	fail "no round noticed $i partition changes during its yields ($(($(stat rounds) - r0)) rounds)"
scontrol update partitionname="$part" MaxTime=UNLIMITED || fail "scontrol update of partition $part"
echo "a round with $i partition change(s) during its yields decided nothing"
set_params copus_interval=2,copus_yield_interval=1,copus_yield_sleep=1000
next_full_round
next_full_round

# Long yields make each round of this queue last most of a second; jobs
# submitted every 0.1 s, each an event, with no full round due: the plugin
# spends at most a tenth of the time in event rounds, not a round after
# every poll (that would be most of the time). A job without GPUs waits (on
# a job that fills the GPUs), so that the event rounds read the queue: with
# every GPU taken and no such job they would read none. A round of t ms is
# followed by 9 t ms without one, so the submissions go on for 6 s and then
# until an event round that read the queue has been counted (at most 20 s:
# rounds of a second leave one event round in 10 s).
set_params copus_interval=60,copus_yield_interval=1,copus_yield_sleep=5000
cpu=$(sbatch --parsable -o /dev/null -t 5 --dependency=afterany:"${fill[0]}" --wrap 'sleep 1') ||
	fail "sbatch of the job without GPUs"
sleep 4
busy_ms() { awk '$1 == "rounds" { r = $2 } $1 == "round_ms_mean" { m = $2 } END { printf "%.0f\n", r * m }' <("$ctl" stats --state-dir "$st"); }
b0=$(busy_ms) e0=$(stat event_rounds) i0=$(stat event_rounds_idle) t0=$(date +%s%N)
late=()
for i in $(seq 1 200); do
	late+=("$(sbatch --parsable -o /dev/null --gres=gpu:1 -t 5 --wrap 'sleep 1')") ||
		fail "sbatch of an event job"
	sleep 0.1
	[ "$i" -ge 60 ] && [ $(($(stat event_rounds) - e0 - $(stat event_rounds_idle) + i0)) -gt 0 ] &&
		break
done
b1=$(busy_ms) e1=$(stat event_rounds) i1=$(stat event_rounds_idle) t1=$(date +%s%N)
span=$(((t1 - t0) / 1000000))
share=$(((b1 - b0) * 100 / span))
echo "with rounds of $(stat round_ms_last) ms: $((e1 - e0)) event rounds in $span ms, rounds busy ${share}% of the time"
[ "$share" -le 30 ] || fail "rounds took ${share}% of the time while jobs were submitted"
[ $((e1 - e0 - i1 + i0)) -gt 0 ] ||
	fail "no event round read the queue while jobs were submitted ($((e1 - e0)) event rounds, $((i1 - i0)) idle)"
scancel "$cpu"
set_params copus_interval=2,copus_yield_interval=1,copus_yield_sleep=20000
sleep 1

# The queue changing during long yields: half of it cancelled, more
# submitted, then the GPUs freed so that the rest runs.
cancelled=()
for ((i = 0; i < ${#queue[@]}; i += 2)); do
	cancelled+=("${queue[i]}")
done
for ((i = 0; i < ${#cancelled[@]}; i += 8)); do
	scancel "${cancelled[@]:i:8}" || fail "scancel"
	late+=("$(sbatch --parsable -o /dev/null --gres=gpu:1 -t 5 --wrap 'sleep 1')") ||
		fail "sbatch during the yields"
	sleep 0.1
done
scancel "${fill[@]}" || fail "scancel of the jobs that filled the GPUs"
ran=()
for ((i = 1; i < ${#queue[@]}; i += 2)); do
	ran+=("${queue[i]}")
done
ran+=("${late[@]}")
end=$((SECONDS + 300))
for id in "${ran[@]}"; do
	while :; do
		s=$(job_field "$id" JobState)
		[ "$s" = COMPLETED ] && break
		case $s in
		PENDING | RUNNING | COMPLETING | CONFIGURING) ;;
		'')
			# scontrol got no answer (slurmctld sleeping in long
			# yields): asked again, unless slurmctld does not know
			# the job.
			err=$(scontrol -o show job "$id" 2>&1 >/dev/null)
			case $err in *"Invalid job id"*) fail "job $id is gone: $err" ;; esac
			again=$((${again:-0} + 1))
			;;
		*) fail "job $id is '$s', not run to its end" ;;
		esac
		[ $SECONDS -lt $end ] || fail "job $id still '$s' after 300 s"
		sleep 0.5
	done
done
for id in "${cancelled[@]}"; do
	s=$(job_field "$id" JobState)
	[ "$s" = CANCELLED ] || fail "cancelled job $id is '$s'"
done
echo "${#ran[@]} jobs ran to their end and ${#cancelled[@]} stayed cancelled, $(stat lock_snapshot_yields) yields of the snapshot and $(stat lock_actions_yields) of the starts (scontrol unanswered ${again:-0} times)"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
