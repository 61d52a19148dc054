#!/bin/bash
# A job that exits with 75 to be rescaled is not pending until its Epilog
# has run: slurmctld requeues it only then (RequeueExit=75). sched/copus's
# record of the job (its first submission, the most GPUs it held, the GPU
# type of its request) outlives that wait, however many rounds it spans:
# the job restarts as the same job, not as one submitted at its requeue
# with the GPU type the plugin last gave it.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
# Every run's Epilog takes 3 s: rounds come four times a second meanwhile.
cat >"$TMP/epilog" <<'EOS'
#!/bin/sh
sleep 3
EOS
chmod 755 "$TMP/epilog"
cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" --conf-extra "Epilog=$TMP/epilog" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=2,copus_checkpoint_deadline=30
hint_job "$TMP/job.sh"

# An elastic job of any GPU type, alone: the plugin grows it.
j=$(sbatch --parsable -o /dev/null --gres=gpu:1 --elastic=1-4 -t 10 \
	"$TMP/job.sh" "$TMP/j.out" exit75) || fail "sbatch refused the job"
state=$TMP/c/state/copus_state
# copus_state: job ID REQ MAX_HAD ATTAINED RATE SUBMIT LAUNCHED TYPE
end=$((SECONDS + 60))
until before=$(grep "^job $j " "$state" 2>/dev/null) && [ "$(awk '{print $4}' <<<"$before")" -ge 1 ]; do
	[ $SECONDS -lt $end ] || fail "the plugin recorded no run of job $j: $(cat "$state" 2>&1)"
	sleep 0.2
done
echo "before: $before"
wait_line "$TMP/j.out" '^start restart=1 ' 90 ||
	fail "job $j did not restart after its checkpoint: $(cat "$TMP/j.out" 2>&1)"
grep -q "JobId=$j asked to checkpoint" "$TMP/c/log/slurmctld.log" ||
	fail "job $j restarted without a rescale request"
# The plugin saves its records every round that changes them.
end=$((SECONDS + 10))
until after=$(grep "^job $j " "$state") && [ "$after" != "$before" ]; do
	[ $SECONDS -lt $end ] || break
	sleep 0.2
done
echo "after:  $after"
read -r _ _ req0 had0 _ _ sub0 _ type0 <<<"$before"
read -r _ _ req1 had1 _ _ sub1 _ type1 <<<"$after"
[ "$sub1" = "$sub0" ] ||
	fail "job $j's first submission became $sub1 (was $sub0): its record was lost while its Epilog ran"
[ "$type1" = "$type0" ] && [ "$type0" = - ] ||
	fail "job $j's request type became '$type1' (was '$type0'): the type the plugin gave it ties it"
[ "$req1" = "$req0" ] || fail "job $j's request became $req1 (was $req0)"
[ "$had1" -ge "$had0" ] || fail "the most GPUs job $j held fell from $had0 to $had1"
scancel "$j"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
