#!/bin/bash
# sched/copus in a real slurmctld (4 nodes x 4 GPUs, two types): rigid jobs
# start in priority order on nodes of the type they ask for, held jobs and
# jobs with unmet dependencies wait, a drained node gets nothing, pending
# jobs carry a readable reason, and slurmctld keeps running throughout.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 4 --gpus a100:4,v100:4 --sched copus \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=1
grep -q 'sched/copus: loaded' "$TMP/c/log/slurmctld.log" ||
	fail "slurmctld did not load sched/copus"

sub() { sbatch --parsable -o /dev/null "$@" || fail "sbatch $* refused"; }

# Fill both a100 nodes with a long job, then queue three one-node a100 jobs
# (they wait for it) and give them distinct priorities, the first submitted
# the lowest.
big=$(sub -N2 --gres=gpu:a100:4 -t 5 --wrap 'sleep 300')
wait_state "$big" RUNNING 60 || fail "the first job did not start"
low=$(sub -N1 --gres=gpu:a100:4 -t 5 --wrap 'sleep 1')
mid=$(sub -N1 --gres=gpu:a100:4 -t 5 --wrap 'sleep 1')
high=$(sub -N1 --gres=gpu:a100:4 -t 5 --wrap 'sleep 1')
scontrol update job="$low" priority=100 || fail "cannot set a priority"
scontrol update job="$mid" priority=200
scontrol update job="$high" priority=300
# A v100 job runs at once next to them; one that depends on the big job
# and one that stays held do not.
v=$(sub -N1 --gres=gpu:v100:2 -t 5 --wrap 'sleep 2')
dep=$(sub -N1 --gres=gpu:v100:1 -t 5 --dependency=afterok:"$big" --wrap true)
held=$(sub --hold -N1 --gres=gpu:v100:1 -t 5 --wrap true)
wait_state "$v" COMPLETED 60 || fail "the v100 job did not run"
case $(job_field "$v" NodeList) in n3 | n4) ;; *) fail "v100 job ran on $(job_field "$v" NodeList)" ;; esac
[ "$(job_field "$high" Priority)" = 300 ] || fail "job $high has priority $(job_field "$high" Priority), not 300"
# Within a few rounds the highest job waits for GPUs with a readable reason
# and the lower ones wait for it.
end=$((SECONDS + 30))
until job_field "$high" Reason | grep -q copus &&
	job_field "$low" Reason | grep -q copus; do
	[ $SECONDS -lt $end ] || fail "no copus reason on jobs $high and $low: '$(job_field "$high" Reason)', '$(job_field "$low" Reason)'"
	sleep 0.3
done
[ "$(job_field "$high" JobState)" = PENDING ] || fail "job $high did not wait for GPUs"
echo "pending reason of $high: $(job_field "$high" Reason)"
echo "pending reason of $low: $(job_field "$low" Reason)"
job_field "$low" Reason | grep -q 'higher.priority' ||
	fail "job $low does not say it waits for a job of higher priority"
# The status file shows the running job and the decisions.
status=$TMP/c/state/copus_status
[ -f "$status" ] || fail "no $status"
cat "$status"
grep -Pq "^$big\tRUNNING\trigid\ta100\t8\t2\t" "$status" || fail "$status does not show job $big running on 2 a100 nodes"
grep -Pq "^$high\tPENDING\trigid\ta100\t4\t1\t.*\tqueued" "$status" || fail "$status does not show job $high queued by the policy"
grep -Pq "^$low\tPENDING\t.*higher priority" "$status" || fail "$status does not show job $low waiting for a job of higher priority"
# Once a job has completed (the v100 one), the predictor gives the pending
# jobs a remaining time.
end=$((SECONDS + 10))
until grep -Pq "^$high\tPENDING\trigid\ta100\t4\t1\t-\t[0-9]+s\t" "$status"; do
	[ $SECONDS -lt $end ] || fail "no predicted remaining time for job $high: $(cat "$status")"
	sleep 0.3
done
# copusctl finds the file through slurmctld (StateSaveLocation) and aligns it.
if [ -x plugin/copusctl ]; then
	plugin/copusctl status >"$TMP/ctl" || fail "copusctl status failed: $(cat "$TMP/ctl")"
	cat "$TMP/ctl"
	grep -Eq "^$big +RUNNING +rigid +a100 +8 +2 " "$TMP/ctl" || fail "copusctl does not show job $big"
fi
[ "$(job_field "$dep" JobState)" = PENDING ] || fail "job $dep ignored its dependency"
[ "$(job_field "$held" JobState)" = PENDING ] || fail "held job $held started"

# Drain n1, free the a100 nodes: the jobs start one after the other on n2,
# highest priority first.
scontrol update nodename=n1 state=drain reason=test || fail "cannot drain n1"
scancel "$big"
wait_state "$high" COMPLETED 90 || fail "the highest-priority job did not run"
wait_state "$mid" COMPLETED 90 || fail "the middle job did not run"
wait_state "$low" COMPLETED 90 || fail "the lowest-priority job did not run"
for j in "$high" "$mid" "$low"; do
	[ "$(job_field "$j" NodeList)" = n2 ] || fail "job $j ran on $(job_field "$j" NodeList), not n2 (n1 is drained)"
done
t_high=$(date -d "$(job_field "$high" StartTime)" +%s)
t_mid=$(date -d "$(job_field "$mid" StartTime)" +%s)
t_low=$(date -d "$(job_field "$low" StartTime)" +%s)
[ "$t_high" -le "$t_mid" ] && [ "$t_mid" -le "$t_low" ] ||
	fail "start order not by priority: high $t_high, mid $t_mid, low $t_low"
[ "$(job_field "$held" JobState)" = PENDING ] || fail "held job $held started"
scancel "$held" "$dep" 2>/dev/null
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
