#!/bin/bash
# Who sched/copus asks to checkpoint, and what becomes of a job that dies
# of being asked (one node, 4 a100 GPUs; a rigid job that needs 2 of them
# arrives while an elastic job holds all 4):
#  1. An elastic job that has published no hint in its current run (it
#     does not link libcopus) is never sent the rescale signal: it keeps its
#     GPUs, the rigid job waits, and the status says why.
#  2. An elastic job that publishes hints but dies of the rescale signal
#     (its script does not exec its trainer) is requeued instead of
#     failing, and resumes from its last checkpoint with fewer GPUs; copusctl
#     stats, job and status --json, and the Prometheus text file, show it.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=1,copus_checkpoint_deadline=4
log=$TMP/c/log/slurmctld.log
status=$TMP/c/state/copus_status
hint_job "$TMP/job.sh"


# 1. No hint, no signal.
p=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 --elastic=2-4 -t 10 \
	--wrap 'sleep 600') || fail "sbatch refused the plain elastic job"
wait_state "$p" RUNNING 30 || fail "the plain elastic job did not start"
r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 10 --wrap 'sleep 2') ||
	fail "sbatch refused the rigid job"
sleep 10
grep -q "JobId=$p asked to checkpoint" "$log" &&
	fail "job $p, which published no hint, was asked to checkpoint"
[ "$(job_field "$p" JobState)" = RUNNING ] ||
	fail "the plain elastic job is $(job_field "$p" JobState), expected RUNNING"
[ "$(job_field "$r" JobState)" = PENDING ] ||
	fail "the rigid job is $(job_field "$r" JobState), expected PENDING"
grep -Pq "^$p\tRUNNING\telastic:2-4\ta100\t4\t1\t.*no hint from its current run" "$status" ||
	fail "the status does not say why job $p keeps its GPUs: $(cat "$status")"
scancel "$p"
wait_state "$r" COMPLETED 30 || fail "the rigid job did not run once the GPUs were free"

# 2. Dies of the signal: requeued from its checkpoint.
e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 --elastic=1-4 -t 10 \
	"$TMP/job.sh" "$TMP/e.out" die) || fail "sbatch refused the elastic job"
wait_line "$TMP/e.out" '^start restart=0 gpus=4 ' 30 ||
	fail "the elastic job did not start on 4 GPUs: $(cat "$TMP/e.out" 2>&1)"
wait_checkpoint "$TMP/e.out"
r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 10 --wrap 'sleep 300') ||
	fail "sbatch refused the second rigid job"
wait_line "$log" "JobId=$e asked to checkpoint" 30 ||
	fail "job $e was not asked to checkpoint for the rigid job"
wait_line "$TMP/e.out" '^start restart=1 gpus=[12] step=[1-9]' 60 ||
	fail "job $e did not restart from its checkpoint with fewer GPUs after dying of the signal: $(cat "$TMP/e.out") ($(scontrol -o show job "$e"))"
grep -Eq "JobId=$e ended .* after it was asked to checkpoint; requeued" "$log" ||
	fail "the plugin did not log why it requeued job $e"
wait_state "$e" RUNNING 10 || fail "the requeued job is not running"
wait_state "$r" RUNNING 10 || fail "the rigid job is not running beside it"

# What an admin sees of it: counters, the job, JSON and metrics.
ctl=$PWD/plugin/copusctl
st=$TMP/c/state
sleep 2
"$ctl" stats --state-dir "$st" >"$TMP/stats" || fail "copusctl stats failed"
for k in rescales_asked requeued_after_end rescales_done starts rounds; do
	grep -Eq "^$k +[1-9][0-9]* " "$TMP/stats" ||
		fail "copusctl stats does not count $k: $(cat "$TMP/stats")"
done
# How long the phases of a round waited for slurmctld's locks and held
# them: the snapshot and the starts took them, each hold a time above zero,
# and every taking is in the histogram's last bucket.
for p in snapshot actions config; do
	grep -Eq "^lock_${p}_cycles +[1-9][0-9]* " "$TMP/stats" ||
		fail "copusctl stats does not count the $p's locks: $(grep "^lock_$p" "$TMP/stats")"
	n=$(awk -v k="lock_${p}_cycles" '$1 == k { print $2 }' "$TMP/stats")
	grep -Eq "^lock_${p}_hold_le_inf +$n " "$TMP/stats" ||
		fail "the $p's hold histogram does not end at its $n cycles: $(grep "^lock_${p}_hold_le" "$TMP/stats")"
	awk -v k="lock_${p}_hold_max_us" '$1 == k && $2 > 0 { ok = 1 } END { exit !ok }' "$TMP/stats" ||
		fail "the $p held its locks no time at all: $(grep "^lock_${p}_hold" "$TMP/stats")"
	# What the thread did in its longest hold: no more CPU time than
	# the hold lasted (1 ms for the clocks' grain).
	awk -v h="lock_${p}_hold_max_us" -v c="lock_${p}_hold_max_cpu_us" \
		'$1 == h { hold = $2 } $1 == c { cpu = $2; seen = 1 }
		END { exit !(seen && cpu >= 0 && cpu <= hold + 1000) }' "$TMP/stats" ||
		fail "the $p's longest hold has no CPU time, or more than it lasted: $(grep "^lock_${p}_hold_max" "$TMP/stats")"
done
"$ctl" job "$e" --state-dir "$st" >"$TMP/job" || fail "copusctl job $e failed"
grep -Eq '^STATE +RUNNING$' "$TMP/job" && grep -Eq '^KIND +elastic:1-4$' "$TMP/job" ||
	fail "copusctl job $e: $(cat "$TMP/job")"
# Its rescale history: asked to go from 4 a100 GPUs to fewer.
grep -Eq '^RESCALES +4>[123]:a100@[0-9]{2}:[0-9]{2}:[0-9]{2}$' "$TMP/job" ||
	fail "copusctl job $e shows no rescale history: $(cat "$TMP/job")"
grep -Eq '^FAIRSHARE +(0\.[0-9]+|1\.000)$' "$TMP/job" ||
	fail "copusctl job $e shows no fair-share factor: $(cat "$TMP/job")"
"$ctl" job 999999 --state-dir "$st" 2>/dev/null && fail "copusctl job found a job that does not exist"
"$ctl" status --json --state-dir "$st" |
	/usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin)
assert d["round"].startswith("sched/copus round at"), d["round"]
assert any(j["jobid"] == sys.argv[1] and j["state"] == "RUNNING" for j in d["jobs"]), d' "$e" ||
	fail "copusctl status --json does not show job $e running"
prom=$st/copus_metrics.prom
grep -Eq '^copus_rescales_asked_total [1-9]' "$prom" ||
	fail "no rescales in $prom: $(cat "$prom")"
# A sample: a name, labels or none, a value.
sample='^copus_[a-z_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? [0-9.e+-]+$'
grep -v '^#' "$prom" | grep -Evq "$sample" &&
	fail "$prom has a line that is not a sample: $(grep -v '^#' "$prom" | grep -Ev "$sample")"
grep -Eq '^copus_lock_hold_seconds_bucket\{phase="snapshot",le="\+Inf"\} [1-9]' "$prom" &&
	grep -Eq '^copus_lock_hold_seconds_count\{phase="snapshot"\} [1-9]' "$prom" ||
	fail "no snapshot lock histogram in $prom: $(grep snapshot "$prom")"
"$ctl" --version | grep -q '^copusctl (copus) ' || fail "copusctl --version"
scancel "$e" "$r"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
