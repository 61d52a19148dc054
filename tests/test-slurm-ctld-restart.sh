#!/bin/bash
# slurmctld is killed (SIGKILL) and started again while elastic jobs run:
# until their nodes have registered again (or SlurmdTimeout has passed since
# the start), sched/copus leaves the running jobs alone: none is asked to
# checkpoint, none is moved or queued, none restarts.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 2 --gpus a100:2 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=1

# Two jobs that publish hints (they would checkpoint on SIGUSR1 and say so
# in their output), one on each node.
hint_job "$TMP/job.sh"
a=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 --elastic=1-2 -t 10 \
	"$TMP/job.sh" "$TMP/a.out") || fail "sbatch refused job a"
b=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 --elastic=1-2 -t 10 \
	"$TMP/job.sh" "$TMP/b.out") || fail "sbatch refused job b"
wait_state "$a" RUNNING 60 || fail "job $a did not start"
wait_state "$b" RUNNING 60 || fail "job $b did not start"
# Both have published a hint and slurmctld has saved them as running.
sleep 7

"$CLUSTER" restart-ctld "$TMP/c" --kill || fail "slurmctld did not come back"
# The first rounds after the start come before the slurmd daemons
# register again; give the plugin many of them.
sleep 12
for j in a b; do
	id=${!j}
	grep -q '^checkpoint' "$TMP/$j.out" &&
		fail "job $id was asked to checkpoint after the slurmctld restart: $(cat "$TMP/$j.out")"
	[ "$(grep -c '^start' "$TMP/$j.out")" -eq 1 ] ||
		fail "job $id restarted: $(cat "$TMP/$j.out")"
	[ "$(job_field "$id" JobState)" = RUNNING ] ||
		fail "job $id is $(job_field "$id" JobState) after the slurmctld restart"
done
grep -q 'leaving running jobs alone until' "$TMP/c/log/slurmctld.log" ||
	echo "note: every node had registered before the plugin's first round"
scancel "$a" "$b"
echo "PASS"
