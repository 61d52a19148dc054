#!/bin/bash
# Chaos soak of sched/copus on a loopback cluster, bounded in time:
#   [CHAOS_CYCLE=1] bash ../tests/chaos.sh [SECONDS] [SEED]
# from the build directory (default 600 s). While elastic jobs that speak the protocol (two of them
# checkpoint when asked, one dies of the request after checkpointing every
# few steps), a plain elastic job that publishes no hint and rigid jobs of
# two users (root and nobody) run, it kills slurmctld (SIGKILL) and a
# node's slurmd (SIGKILL) and starts them again, drains and resumes nodes,
# and kills the processes of two of the jobs (once each), at random every
# few seconds. Half of the faults are aimed: they fall 0-3 s after the next
# start, requeue or rescale request slurmctld logs (the moments a job's life
# is most fragile), the rest at random times. At the end,
# after a quiet spell, it checks:
#  - no job lost: every job is pending or running, except those it killed;
#  - no job run twice at once, no GPU held by two runs (each run locks its
#    job's file and each of its GPUs' files with flock);
#  - no checkpoint lost or corrupted (each holds a step count, and a run
#    never resumes before the step its predecessor saved);
#  - slurmctld alive, the plugin's files readable, no error of the plugin's
#    about its state.
# Prints the counts and "N passed, N failed"; exits non-zero on a failure.
. "$(dirname "$0")/slurm-common.sh"

DURATION=${1:-600}
SEED=${2:-$$}
RANDOM=$SEED
need_plugin sched_copus "configure --with-slurm-src" >/dev/null || exit $?
need_plugin spank_copus >/dev/null || exit $?
# Jobs of nobody: its sbatch loads PluginDir and the SPANK plugin too.
pdir=$(shared_plugins) || exit 1
cluster_up --nodes 3 --gpus a100:4 --sched copus --spank "$pdir/spank_copus.so" \
	--plugin-dir "$pdir" \
	--sched-params copus_interval=2,copus_restart_delay=6,copus_restart_cost=1,copus_checkpoint_deadline=10
log=$TMP/c/log/slurmctld.log
chmod 755 "$TMP"
jobs=$TMP/jobs
mkdir -p "$jobs" "$jobs/gpu"
chmod 1777 "$jobs" "$jobs/gpu"
echo "chaos soak: $DURATION s, seed $SEED"

# The job: chaos.job OUT KIND (KIND: hint, die, plain or rigid).
cat >"$jobs/chaos.job" <<'JOB'
#!/bin/bash
out=$1 kind=$2 ckpt=$1.ckpt
gpudir=$(dirname "$1")/gpu
rc=${SLURM_RESTART_COUNT:-0}
bad() { echo "$* (run $rc, $(date +%s.%N))" >>"$out.bad"; }
# One run of the job at a time, each GPU to one run at a time.
exec 8>>"$out.lock"
flock -n 8 || bad "DOUBLE: another run of job $SLURM_JOB_ID holds its lock"
for d in $(tr , ' ' <<<"$CUDA_VISIBLE_DEVICES"); do
	exec {fd}>>"$gpudir/$SLURMD_NODENAME.$d"
	flock -n $fd || bad "GPU-TWICE: $SLURMD_NODENAME GPU $d is held by another run"
done
step=0
if [ -f "$ckpt" ]; then
	step=$(cat "$ckpt")
	[[ $step =~ ^[0-9]+$ ]] || { bad "CORRUPT checkpoint: '$step'"; step=0; }
fi
n=$(tr , '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
echo "start restart=$rc gpus=$n step=$step node=$SLURMD_NODENAME" >>"$out"
save() { echo "$step" >"$ckpt.new.$$" && mv "$ckpt.new.$$" "$ckpt"; }
hint() {
	scontrol update jobid="$SLURM_JOB_ID" comment="copus1:{\"v\":1,\"job\":$SLURM_JOB_ID,\"st\":\"$1\",\"step\":$step,\"rc\":$rc,\"t\":$(date +%s),\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":$step,\"tgt\":100000000,\"perf\":{\"a100\":[0.02,0.002,0.05,0.002,0.005,0.0005,1.5]}}" 2>/dev/null
}
ask=0
case $kind in
hint) trap 'ask=1' USR1 ;;
die) trap - USR1 ;;
*) trap '' USR1 ;;
esac
trap 'exit 0' TERM
[ "$kind" = hint ] || [ "$kind" = die ] && hint running
while :; do
	if [ $ask = 1 ]; then
		ask=2
		save
		echo "checkpoint step=$step" >>"$out"
		hint checkpointed
	fi
	if [ $ask = 0 ]; then
		step=$((step + 1))
		if [ $((step % 10)) = 0 ]; then
			save
			[ "$kind" = hint ] || [ "$kind" = die ] && hint running
		fi
	fi
	sleep 0.2
done
JOB
chmod 755 "$jobs/chaos.job"

# submit NAME USER KIND SBATCH-OPTIONS...: the job's id into ids[NAME].
declare -A ids
submit() {
	local name=$1 user=$2 kind=$3 id
	shift 3
	id=$(runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable \
		-o /dev/null -J "$name" -t 600 "$@" "$jobs/chaos.job" "$jobs/$name" "$kind") ||
		fail "sbatch refused $name"
	ids[$name]=$id
}
submit e1 root hint --gres=gpu:a100:2 --elastic=1-4
submit e2 nobody hint --gres=gpu:a100:1 --elastic=1-4
submit d1 root die --gres=gpu:a100:2 --elastic=1-4
submit p1 nobody plain --gres=gpu:a100:2 --elastic=1-4
submit r1 root rigid --gres=gpu:a100:2
submit r2 nobody rigid --gres=gpu:a100:1
# Starts to aim at: a short rigid job is submitted again whenever the last
# one has ended (its runs are not checked; it only makes events).
(
	while :; do
		[ -n "$(squeue -h -n churn -o %i 2>/dev/null)" ] ||
			sbatch -Q -o /dev/null -J churn -t 5 --gres=gpu:a100:1 \
				--wrap 'sleep 6' >/dev/null 2>&1
		sleep 1
	done
) &
churn=$!
trap 'kill $churn 2>/dev/null; _cleanup' EXIT
sleep 8

# aim: waits (up to 15 s) for the next start, requeue or rescale request in
# slurmctld's log after line $seen (the log's end when it is called), then
# 0-2.9 s more; prints its kind, or nothing when none came.
AIM_RE='sched/copus: started JobId=|Requeuing JobId=|_job_complete: requeue JobId=|sched/copus: JobId=[0-9]+ asked to checkpoint'
aim() {
	local t_end=$((SECONDS + 15)) line
	while [ $SECONDS -lt $t_end ]; do
		line=$(tail -n +"$((seen + 1))" "$log" 2>/dev/null | grep -E -m 1 "$AIM_RE")
		if [ -n "$line" ]; then
			sleep "$((RANDOM % 30 / 10)).$((RANDOM % 10))"
			case $line in
			*started*) echo start ;;
			*asked*) echo request ;;
			*) echo requeue ;;
			esac
			return
		fi
		sleep 0.1
	done
}

declare -A acts killed aimed
end=$((SECONDS + DURATION))
i=0
while [ $SECONDS -lt $end ]; do
	# Every other fault waits for one of the moments it aims at (after
	# a second or two, so that it is not the last fault's own restart).
	if [ $((RANDOM % 2)) = 0 ]; then
		sleep $((1 + RANDOM % 2))
		seen=$(wc -l <"$log")
		at=$(aim)
		aimed[${at:-none}]=$((${aimed[${at:-none}]:-0} + 1))
	else
		sleep $((3 + RANDOM % 5))
		aimed[random]=$((${aimed[random]:-0} + 1))
	fi
	node=n$((1 + RANDOM % 3))
	# CHAOS_CYCLE=1 takes the four kinds in turn (the short test's way
	# of meeting each), else one at random.
	kind=$((RANDOM % 4))
	[ -z "${CHAOS_CYCLE:-}" ] || kind=$((i % 4))
	i=$((i + 1))
	case $kind in
	0)
		"$CLUSTER" restart-ctld "$TMP/c" --kill >/dev/null 2>&1 ||
			fail "slurmctld did not come back after a kill"
		acts[slurmctld]=$((${acts[slurmctld]:-0} + 1)) ;;
	1)
		"$CLUSTER" restart-slurmd "$TMP/c" --node "$node" --kill >/dev/null 2>&1 ||
			fail "slurmd $node did not come back after a kill"
		acts[slurmd]=$((${acts[slurmd]:-0} + 1)) ;;
	2)
		scontrol update nodename="$node" state=drain reason=chaos 2>/dev/null &&
			acts[drain]=$((${acts[drain]:-0} + 1))
		sleep $((2 + RANDOM % 6))
		scontrol update nodename="$node" state=resume 2>/dev/null ;;
	3)
		# A job's processes die (a crash of the training itself):
		# one elastic and one rigid job, once each; they are out of
		# the "lost" count, the other four stay in it.
		names=(e2 r2)
		name=${names[RANDOM % 2]}
		if [ -z "${killed[$name]:-}" ]; then
			pkill -KILL -f "$jobs/$name " && killed[$name]=1 &&
				acts[job]=$((${acts[job]:-0} + 1))
		fi ;;
	esac
done

kill $churn 2>/dev/null
# A quiet spell: every node back, every job settled.
for n in n1 n2 n3; do
	scontrol update nodename="$n" state=resume 2>/dev/null
done
sleep 25
# A job ending or requeued on a node whose slurmd the soak restarted stays
# COMPLETING until Slurm hears from that node again, or marks it down
# after SlurmdTimeout (60 s on the loopback cluster): that much longer for
# such jobs to settle. A job still COMPLETING after it fails the check.
end=$((SECONDS + 90))
while [ $SECONDS -lt $end ]; do
	busy=0
	for id in "${ids[@]}"; do
		[ "$(job_field "$id" JobState)" = COMPLETING ] && busy=1
	done
	[ $busy = 1 ] || break
	sleep 2
done

passed=0 failed=0
check() { # DESCRIPTION CONDITION-RESULT(0 ok)
	if [ "$2" = 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL: $1"
	fi
}
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running'
check "slurmctld is running at the end" $?
for name in e1 e2 d1 p1 r1 r2; do
	id=${ids[$name]}
	st=$(job_field "$id" JobState)
	restarts=$(grep -c '^start ' "$jobs/$name" 2>/dev/null)
	echo "job $name ($id): $st, $restarts run(s)${killed[$name]:+, killed once by the soak}"
	if [ -z "${killed[$name]:-}" ]; then
		case $st in
		RUNNING | PENDING | REQUEUED | CONFIGURING) r=0 ;;
		*)
			r=1
			echo "  $(scontrol -o show job "$id" | tr ' ' '\n' | grep -E '^(JobState|Reason|ExitCode|Restarts|EndTime)=' | tr '\n' ' ')"
			echo "  its runs: $(tr '\n' ';' <"$jobs/$name")"
			grep -E "JobId=$id[^0-9]" "$log" | tail -n 12 | sed 's/^/  /'
			echo "  the plugin's lines about it:"
			grep -E "sched/copus: .*JobId=$id[^0-9]" "$log" | tail -n 8 | sed 's/^/  /'
			echo "  the log's last lines: $(tail -n 1 "$log")"
			KEEP_TMP=1
			;;
		esac
		check "job $name ($id) is not lost (state $st)" $r
	fi
	[ ! -s "$jobs/$name.bad" ]
	check "job $name: $(cat "$jobs/$name.bad" 2>/dev/null | head -n 3 | tr '\n' ';')" $?
	awk '/^checkpoint/ { split($2, a, "="); if (a[2] + 0 > saved) saved = a[2] + 0 }
	     /^start/ { split($4, b, "="); if (b[2] + 0 < last) bad = 1; last = b[2] + 0 }
	     END { exit bad }' "$jobs/$name" 2>/dev/null
	check "job $name never resumed before a saved step: $(tr '\n' ';' <"$jobs/$name" 2>/dev/null | tail -c 300)" $?
done
! grep -E "sched/copus: .*(copus_state|copus_history|copus_status)" "$log" | grep -Eqi "error|cannot|bad|corrupt"
check "the plugin reported no trouble with its files: $(grep -E 'sched/copus: .*(copus_state|copus_history)' "$log" | grep -Ei 'error|cannot|bad|corrupt' | head -n 2)" $?
"$PWD/plugin/copusctl" status --state-dir "$TMP/c/state" >/dev/null
check "copusctl reads the plugin's status" $?
grep -q "sched/copus: loaded" "$log"
check "the plugin was loaded" $?
echo "chaos: $(for k in "${!acts[@]}"; do printf '%s=%s ' "$k" "${acts[$k]}"; done)"
echo "aimed: within 3 s after a start ${aimed[start]:-0}, a requeue ${aimed[requeue]:-0}, a rescale request ${aimed[request]:-0}; none came within 15 s ${aimed[none]:-0}; at random ${aimed[random]:-0}"
"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" 2>/dev/null |
	grep -E '^(rescales_asked|rescales_done|rescales_timed_out|requeued|requeued_after_end|hints_other_run) '
echo "slurmctld starts: $(grep -c 'sched/copus: loaded' "$log")"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
