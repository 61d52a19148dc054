#!/bin/bash
# A node goes down under sched/copus (4 nodes x 4 GPUs, two types): the jobs
# on it, a rigid one and an elastic one that publishes copus hints, are
# requeued (and restarted elsewhere when GPUs of their type are free) or
# resized; the jobs on the other nodes are untouched: the same job ids still
# RUNNING on the same nodes, never restarted. When the node returns, the
# requeued jobs run again.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 4 --gpus a100:4,v100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=2,copus_checkpoint_deadline=4
hint_job "$TMP/job.sh"
# ReturnToService=2 (the loopback default) would put a node an admin set
# down back in service at its next message; production clusters use 1.
sed -i 's/^ReturnToService=.*/ReturnToService=1/' "$TMP/c/etc/slurm.conf"
scontrol reconfigure || fail "scontrol reconfigure"

sub() { sbatch --parsable -o /dev/null -t 10 "$@" || fail "sbatch $* refused"; }

# One a100 node filled by a rigid job, one v100 node half used by another;
# on the second a100 node a rigid job (requeueable) and an elastic one.
a=$(sub -N1 --gres=gpu:a100:4 --wrap 'sleep 600')
wait_state "$a" RUNNING 60 || fail "rigid job $a did not start"
b=$(sub -N1 --gres=gpu:v100:2 --wrap 'sleep 600')
wait_state "$b" RUNNING 60 || fail "rigid job $b did not start"
v=$(sub -N1 --requeue --gres=gpu:a100:2 --wrap 'sleep 600')
wait_state "$v" RUNNING 60 || fail "rigid job $v did not start"
e=$(sub -N1 --gres=gpu:a100:1 --elastic=1-2 "$TMP/job.sh" "$TMP/e.out")
wait_state "$e" RUNNING 60 || fail "elastic job $e did not start"
node=$(job_field "$v" NodeList)
na=$(job_field "$a" NodeList)
nb=$(job_field "$b" NodeList)
[ "$node" != "$na" ] || fail "jobs $v and $a share node $node"
# Let the elastic job settle: it grows to 2 GPUs on the node of job $v.
end=$((SECONDS + 60))
until grep -q '^start restart=[1-9][0-9]* gpus=2 ' "$TMP/e.out" 2>/dev/null &&
	[ "$(job_field "$e" JobState)" = RUNNING ]; do
	[ $SECONDS -lt $end ] || fail "the elastic job did not grow to 2 GPUs: $(cat "$TMP/e.out" 2>&1)"
	sleep 0.3
done
ne=$(job_field "$e" NodeList)
[ "$ne" = "$node" ] || fail "the elastic job runs on '$ne', not beside job $v on $node"
echo "before: $a on $na, $b on $nb, $v on $node, $e on $ne ($(job_field "$e" JobState))"

scontrol update nodename="$node" state=down reason=test ||
	fail "cannot set $node down"

# Every job that ran on the node leaves it: requeued (pending, or running
# again elsewhere with a restart counted) or resized onto other nodes.
gone() {
	local id=$1 s n
	s=$(job_field "$id" JobState)
	n=$(job_field "$id" NodeList)
	case $s in
	PENDING | REQUEUED | CONFIGURING) return 0 ;;
	RUNNING) [ "$n" != "$node" ] && [ "$(job_field "$id" Restarts)" -ge 1 ] ;;
	*) return 1 ;;
	esac
}
for id in $v $e; do
	end=$((SECONDS + 30))
	until gone "$id"; do
		[ $SECONDS -lt $end ] ||
			fail "job $id is $(job_field "$id" JobState) on $(job_field "$id" NodeList) 30 s after $node went down"
		sleep 0.3
	done
	echo "after: job $id is $(job_field "$id" JobState) (restarts $(job_field "$id" Restarts), nodes '$(job_field "$id" NodeList)')"
done
# A few scheduling rounds later the others have not moved.
sleep 5
for pair in "$a $na" "$b $nb"; do
	set -- $pair
	[ "$(job_field "$1" JobState)" = RUNNING ] ||
		fail "job $1 on $2 is $(job_field "$1" JobState) after $node went down"
	[ "$(job_field "$1" NodeList)" = "$2" ] ||
		fail "job $1 moved from $2 to $(job_field "$1" NodeList)"
	[ "$(job_field "$1" Restarts)" = 0 ] || fail "job $1 was restarted"
done
# Nothing runs on the down node.
[ -z "$(squeue -h -t R -w "$node" -o %i)" ] ||
	fail "jobs still run on $node: $(squeue -h -t R -w "$node" -o %i)"
sinfo -h -n "$node" -o %t | grep -q down || fail "$node is not down: $(sinfo -h -n "$node" -o %t)"

# The node returns: the requeued rigid job runs again (Slurm holds a job
# requeued by a node failure for two minutes; an admin releases it now).
scontrol update nodename="$node" state=resume || fail "cannot resume $node"
scontrol update jobid="$v" starttime=now || fail "cannot release job $v"
wait_state "$v" RUNNING 60 || fail "job $v did not run again after $node returned"
echo "resumed: $v on $(job_field "$v" NodeList), restarts $(job_field "$v" Restarts)"
scancel "$a" "$b" "$v" "$e"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo PASS
