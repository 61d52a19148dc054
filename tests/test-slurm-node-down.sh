#!/bin/bash
# A node goes down under sched/copus (issue 5, test 7) on a loopback cluster
# of 4 nodes x 4 a100: three jobs fill three nodes, one node is free.
#  0. The node of an elastic job is drained: the job checkpoints and moves
#     to the free node (same GPUs, other node); the rigid jobs stay. The
#     node is resumed and is the free one.
#  1. The node of the elastic job goes down (scontrol update state=down): the
#     job is requeued and runs again on the free node within seconds (Slurm
#     alone would hold it until its BeginTime, the credential lifetime
#     later); the two rigid jobs on the other nodes are untouched (same id,
#     still RUNNING, same nodes, never restarted).
#  2. The node of a rigid job goes down too: that job is requeued and waits
#     for Slurm's BeginTime (a rigid job is restarted as Slurm would); the
#     other jobs are still untouched.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 4 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=2,copus_checkpoint_deadline=4
# The loopback cluster returns any DOWN node to service when its slurmd
# answers (ReturnToService=2); as in most production clusters, a node an
# admin sets down must stay down.
echo "ReturnToService=1" >>"$TMP/c/etc/slurm.conf"
scontrol reconfigure || fail "scontrol reconfigure"
sleep 1
hint_job "$TMP/job.sh"


# untouched ID NODES: still running where it started, never restarted.
untouched() {
	local s n r
	s=$(job_field "$1" JobState)
	n=$(job_field "$1" NodeList)
	r=$(job_field "$1" Restarts)
	[ "$s" = RUNNING ] || fail "job $1 on another node is $s, not RUNNING"
	[ "$n" = "$2" ] || fail "job $1 moved from $2 to $n"
	[ "$r" = 0 ] || fail "job $1 on another node was restarted ($r)"
}

# The elastic job asks for its maximum, so that the policy has no reason
# to resize it while the nodes are up.
e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 --elastic=2-4 -t 10 \
	"$TMP/job.sh" "$TMP/e.out") || fail "sbatch refused the elastic job"
wait_line "$TMP/e.out" '^start restart=0 gpus=4 ' 60 ||
	fail "the elastic job did not start on 4 GPUs: $(cat "$TMP/e.out" 2>&1)"
r1=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 -N1 -t 10 --wrap 'sleep 300') ||
	fail "sbatch refused rigid job 1"
r2=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 -N1 -t 10 --wrap 'sleep 300') ||
	fail "sbatch refused rigid job 2"
wait_state "$r1" RUNNING 60 || fail "rigid job 1 did not start"
wait_state "$r2" RUNNING 60 || fail "rigid job 2 did not start"
ne=$(job_field "$e" NodeList)
n1=$(job_field "$r1" NodeList)
n2=$(job_field "$r2" NodeList)
echo "elastic $e on $ne, rigid $r1 on $n1, rigid $r2 on $n2"
[ "$ne" != "$n1" ] && [ "$ne" != "$n2" ] && [ "$n1" != "$n2" ] ||
	fail "the three jobs do not hold three different nodes"
# Let the elastic job make progress so that a resume can be checked.
sleep 2

# requeued ID RESTARTS DOWN...: the job was requeued (Restarts >= RESTARTS)
# and is pending, or running again on none of the down nodes.
requeued() {
	local id=$1 min=$2 s r nl d end=$((SECONDS + 30))
	shift 2
	while :; do
		s=$(job_field "$id" JobState)
		r=$(job_field "$id" Restarts)
		[ "${r:-0}" -ge "$min" ] && { [ "$s" = PENDING ] || [ "$s" = RUNNING ]; } && break
		[ $SECONDS -lt $end ] || fail "job $id was not requeued after $* went down: $s, restarts $r"
		sleep 0.3
	done
	if [ "$s" = RUNNING ]; then
		nl=$(job_field "$id" NodeList)
		for d in "$@"; do
			[ "$nl" != "$d" ] || fail "job $id runs on the down node $d"
		done
	fi
	echo "job $id after $* went down: $s, restarts $r, reason $(job_field "$id" Reason)"
}

# back_on_free_node START WHAT: within 30 s of t0 the elastic job starts
# again (its START-th restart) on 4 GPUs of the free node (none of $ne, $n1,
# $n2), which it then holds in nf.
back_on_free_node() {
	wait_line "$TMP/e.out" "^start restart=$1 gpus=4 " 30 ||
		fail "the elastic job did not run again on 4 GPUs within 30 s after $2: $(cat "$TMP/e.out"); $(job_field "$e" Reason)"
	echo "the elastic job runs again $((SECONDS - t0)) s after $2"
	wait_state "$e" RUNNING 10 || fail "the elastic job is not running"
	nf=$(job_field "$e" NodeList)
	[ "$nf" != "$ne" ] && [ "$nf" != "$n1" ] && [ "$nf" != "$n2" ] ||
		fail "the elastic job runs on $nf, not on the free node"
}

# --- 0. the elastic job's node is drained ---------------------------------
scontrol update nodename="$ne" state=drain reason=copus-test ||
	fail "scontrol could not drain $ne"
t0=$SECONDS
back_on_free_node 1 "its node was drained"
grep -q "JobId=$e asked to checkpoint" "$TMP/c/log/slurmctld.log" ||
	fail "the elastic job was not moved through the checkpoint protocol"
awk '/^checkpoint/ { split($2, a, "="); saved = a[2] }
     /^start/ && NR > 1 { split($4, b, "="); if (b[2] != saved) bad = 1 }
     END { exit bad }' "$TMP/e.out" || fail "the move did not resume from the checkpoint: $(cat "$TMP/e.out")"
untouched "$r1" "$n1"
untouched "$r2" "$n2"
scontrol update nodename="$ne" state=resume || fail "scontrol could not resume $ne"
ne=$nf
sleep 2

# --- 1. the elastic job's node goes down -----------------------------------
scontrol update nodename="$ne" state=down reason=copus-test ||
	fail "scontrol could not set $ne down"
sinfo -h -n "$ne" -o '%t' | grep -q '^down' || fail "$ne is not down: $(sinfo -h -n "$ne" -o '%t')"
t0=$SECONDS
requeued "$e" 2 "$ne"
back_on_free_node 2 "its node went down"
untouched "$r1" "$n1"
untouched "$r2" "$n2"
sinfo -h -n "$ne" -o '%t' | grep -q '^down' || fail "$ne came back: $(sinfo -h -n "$ne" -o '%t')"

# --- 2. a rigid job's node goes down -----------------------------------------
scontrol update nodename="$n1" state=down reason=copus-test ||
	fail "scontrol could not set $n1 down"
requeued "$r1" 1 "$ne" "$n1"
[ "$(job_field "$r1" JobState)" = PENDING ] ||
	fail "the requeued rigid job is $(job_field "$r1" JobState) before its BeginTime"
untouched "$r2" "$n2"
# Still scheduling: the plugin's rounds go on and leave the others alone.
sleep 3
untouched "$r2" "$n2"
[ "$(job_field "$e" JobState)" = RUNNING ] && [ "$(job_field "$e" NodeList)" = "$nf" ] ||
	fail "the elastic job was moved: $(job_field "$e" JobState) on $(job_field "$e" NodeList)"
scancel "$e" "$r1" "$r2"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
