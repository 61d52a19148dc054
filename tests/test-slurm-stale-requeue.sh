#!/bin/bash
# slurmctld dies soon after sched/copus requeued a job that ended of a
# rescale request, and comes back on a state saved before that requeue
# (slurmctld saves its jobs at most every 5 s): the job is back as the run
# that ended (FAILED, its restart count before the requeue), while its next
# run, already started, still runs on its node. The plugin must requeue it
# again: the job is not lost, resumes from its checkpoint, and runs once.
# Before the fix it stayed FAILED (the plugin had dropped the rescale once
# the job restarted) and slurmctld killed the run on the node as an orphan.
#
# The stale state is made, not waited for: the job's requeues are refused
# (tests/fault-requeue.c, preloaded into slurmctld) until slurmctld has
# saved it FAILED; that job_state is copied, the requeue let through, and
# slurmctld killed and started on the copy (loopback-cluster.sh
# restart-ctld --job-state), as a crash within 5 s of the requeue leaves it.
. "$(dirname "$0")/slurm-common.sh"

refused_requeue_setup 1000
state=$TMP/c/state
fault=$FAULT

# runs JOB: the number of its batch scripts running on the node (slurmd
# runs a copy of job.sh as slurm_script).
runs() {
	pgrep -f "slurm_script $TMP/$1.out" | wc -l
}

[ "$(job_field "$e" JobState)" = FAILED ] ||
	fail "job $e is $(job_field "$e" JobState), expected FAILED while its requeue is refused"

# slurmctld's state with the job FAILED: a save begun after this point.
touch "$TMP/ref"
sleep 1
end=$((SECONDS + 30))
until [ -n "$(find "$state/job_state" -newer "$TMP/ref" 2>/dev/null)" ]; do
	[ $SECONDS -lt $end ] || fail "slurmctld did not save its jobs"
	sleep 0.1
done
cp "$state/job_state" "$TMP/stale" || fail "cannot copy the job state"
[ "$(job_field "$e" JobState)" = FAILED ] || fail "job $e left FAILED before the copy"

# The requeue goes through; the job starts its next run.
: >"$refuse"
wait_line "$TMP/e.out" '^start restart=1 ' 30 ||
	fail "job $e was not requeued once its requeue went through: $(tr '\n' ';' <"$TMP/e.out")"
wait_line "$log" "JobId=$e ended \(died of signal [0-9]+\) after it was asked to checkpoint; requeued" 5 ||
	fail "the plugin did not log the requeue"
# The plugin has seen the new run and dropped the rescale from its own
# state (a crash before that finds the rescale there, which is no test).
wait_line "$log" "JobId=$e restarted with" 10 || fail "the plugin did not see job $e restart"
end=$((SECONDS + 10))
while grep -q "^rescale $e " "$state/copus_state"; do
	[ $SECONDS -lt $end ] || fail "the plugin kept the rescale of job $e in copus_state"
	sleep 0.1
done

LD_PRELOAD=$fault COPUS_FAULT_REQUEUE=$refuse \
	"$CLUSTER" restart-ctld "$TMP/c" --kill --job-state "$TMP/stale" >/dev/null ||
	fail "slurmctld did not come back"
grep -q "Recovered JobId=$e " "$log" || fail "slurmctld did not recover job $e"
wait_line "$log" "JobId=$e is back as the run that ended .*requeued again" 20 ||
	fail "job $e was lost: slurmctld came back with it $(job_field "$e" JobState) (restarts $(job_field "$e" Restarts)) and the plugin did not requeue it: $(grep -E "JobId=$e[^0-9]" "$log" | tail -n 8)"

# It runs again, from its checkpoint, once.
end=$((SECONDS + 60))
until [ "$(job_field "$e" JobState)" = RUNNING ] &&
	[ "$(grep -c '^start ' "$TMP/e.out")" -ge 3 ]; do
	st=$(job_field "$e" JobState)
	# (COMPLETING, REQUEUED: on its way back to the queue.)
	case $st in PENDING | RUNNING | CONFIGURING | COMPLETING | REQUEUED) ;; *)
		fail "job $e is $st after its requeue: $(grep -E "JobId=$e[^0-9]" "$log" | tail -n 8)" ;;
	esac
	[ $SECONDS -lt $end ] ||
		fail "job $e did not run again: $st ($(job_field "$e" Reason)); e.out: $(tr '\n' ';' <"$TMP/e.out")"
	sleep 0.3
done
tail -n 1 "$TMP/e.out" | grep -Eq '^start restart=1 gpus=[1-4] step=[1-9]' ||
	fail "job $e did not resume from its checkpoint as restart 1: $(tr '\n' ';' <"$TMP/e.out")"
sleep 3
[ "$(job_field "$e" JobState)" = RUNNING ] || fail "job $e is $(job_field "$e" JobState)"
n=$(runs e)
[ "$n" = 1 ] || fail "job $e has $n runs on its node"
! grep -q "Duplicate jobid" "$log" || fail "slurmctld found a duplicate job"
! sinfo -h -o %T | grep -q drain || fail "a node was drained: $(sinfo -h -o '%N %T %E')"
echo "job $e: back FAILED after the restart on a state older than its requeue; requeued again, runs once ($(grep -c '^start ' "$TMP/e.out") starts)"
scancel "$e" "$r"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo PASS
