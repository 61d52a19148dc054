#!/bin/bash
# Elastic jobs under sched/copus and its core policy on a loopback cluster
# (n1: 4 a100, n2: 4 v100), through the checkpoint protocol: the plugin
# sends the rescale signal, the job publishes st="checkpointed" in its hint,
# the plugin requeues it and restarts it in the cell the policy decides.
#  1. An elastic job alone, whose hint says it scales, grows towards its
#     max.
#  2. A rigid job arrives: the elastic job shrinks through the checkpoint
#     protocol so that both run; it resumes from its checkpoint (its step
#     never goes back).
#  3. A job that ignores the checkpoint request is not resized and keeps
#     running.
#  4. A pending job that accepts two GPU types is moved to the free type.
#  5. Moved to the other type's node when that is free, it restarts there at
#     once after its requeue, not in the next second.
# The policy counts what the rescales were measured to cost
# (copus_restart_cost=measured:2): from the request to the restarted run's
# first hint, as the log and copusctl stats show.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 2 --gpus a100:4,v100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=measured:2,copus_checkpoint_deadline=4
hint_job "$TMP/job.sh"


e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-4 -t 10 \
	"$TMP/job.sh" "$TMP/e.out") || fail "sbatch refused the elastic job"
wait_line "$TMP/e.out" '^start restart=0 gpus=1 ' 60 || fail "the elastic job did not start with 1 GPU: $(cat "$TMP/e.out" 2>&1)"
wait_line "$TMP/e.out" '^start restart=[1-9][0-9]* gpus=4 ' 60 ||
	fail "the elastic job did not grow to 4 GPUs: $(cat "$TMP/e.out" 2>&1)"
echo "grew: $(tr '\n' ';' <"$TMP/e.out")"
grep -q "JobId=$e checkpointed at step" "$TMP/c/log/slurmctld.log" ||
	fail "the plugin did not requeue job $e on its checkpointed hint"
end=$((SECONDS + 10))
until grep -Pq "^$e\tRUNNING\telastic:1-4\ta100\t4\t1\t[0-9.]+\t" "$TMP/c/state/copus_status"; do
	[ $SECONDS -lt $end ] || fail "the status file does not show job $e on 4 a100 GPUs with its speedup: $(cat "$TMP/c/state/copus_status")"
	sleep 0.3
done
restarts=$(grep -c '^start ' "$TMP/e.out")
log=$TMP/c/log/slurmctld.log
grep -q "restart cost measured, until then 2s" "$log" ||
	fail "slurmctld's log does not show copus_restart_cost=measured:2: $(grep 'restart cost' "$log")"
wait_line "$log" "JobId=$e steps again [0-9.]+s after it was asked to checkpoint; the last [0-9]+ rescale\\(s\\) cost [0-9.]+s on average" 10 ||
	fail "the plugin did not measure job $e's rescale: $(grep "JobId=$e" "$log" | tail -5)"
mean=$(grep -o 'rescale(s) cost [0-9.]*s on average' "$log" | tail -1 | grep -o '[0-9][0-9.]*' | tail -1)
sleep 2
"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" >"$TMP/stats" || fail "copusctl stats failed"
awk -v m="$mean" '$1 == "restart_cost_counted" && $2 > 0 && $2 - m < 0.002 && m - $2 < 0.002 { ok = 1 } END { exit !ok }' "$TMP/stats" ||
	fail "the policy does not count the measured mean $mean s: $(grep -E '^(restart_cost|rescales_measured)' "$TMP/stats")"
grep -Eq '^rescales_measured +[1-9][0-9]* ' "$TMP/stats" ||
	fail "copusctl stats counts no measured rescale: $(cat "$TMP/stats")"
# The requeue and the restart come as the job reports its checkpoint and
# its requeue completes, in a round the plugin's look at the rescale's job
# brings on, not at the next quarter second.
grep -Eq '^watch_rounds +[1-9][0-9]* ' "$TMP/stats" ||
	fail "copusctl stats counts no round brought on by a rescale's job: $(grep -E '^(watch|lock_watch)' "$TMP/stats")"
# With requeues measured, full rounds begin at a phase of the second.
awk '$1 == "round_phase" && $2 >= 0 && $2 < 1 { ok = 1 } END { exit !ok }' "$TMP/stats" ||
	fail "full rounds are not aligned to a phase of the second after the rescales: $(grep '^round_phase' "$TMP/stats")"

r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 10 --wrap 'sleep 3') ||
	fail "sbatch refused the rigid job"
wait_state "$r" COMPLETED 60 || fail "the rigid job did not run beside the elastic job"
[ "$(job_field "$r" Restarts)" = 0 ] || fail "the rigid job was requeued"
grep -q "JobId=$r asked to checkpoint" "$TMP/c/log/slurmctld.log" && fail "the rigid job was asked to rescale"
[ "$(grep -c '^start ' "$TMP/e.out")" -gt "$restarts" ] ||
	fail "the elastic job was not resized for the rigid job: $(cat "$TMP/e.out")"
grep -Eq '^start restart=[1-9][0-9]* gpus=[12] ' "$TMP/e.out" ||
	fail "the elastic job did not shrink for the rigid job: $(cat "$TMP/e.out")"
echo "shrank: $(tr '\n' ';' <"$TMP/e.out")"
# Every restart resumes at the step its checkpoint holds.
awk '/^checkpoint/ { split($2, a, "="); saved = a[2] }
     /^start/ && NR > 1 { split($4, b, "="); if (b[2] != saved) bad = 1 }
     END { exit bad }' "$TMP/e.out" || fail "a restart did not resume from its checkpoint: $(cat "$TMP/e.out")"
# With the rigid job gone the elastic job may be growing again, not lost.
st=$(job_field "$e" JobState)
case $st in
RUNNING | PENDING | REQUEUED | COMPLETING) ;;
*) fail "the elastic job is '$st'" ;;
esac

s=$(sbatch --parsable -o /dev/null --gres=gpu:v100:1 --elastic=1-4 -t 10 \
	"$TMP/job.sh" "$TMP/s.out" stubborn) || fail "sbatch refused the stubborn job"
end=$((SECONDS + 60))
until grep -q "JobId=$s did not checkpoint" "$TMP/c/log/slurmctld.log"; do
	[ $SECONDS -lt $end ] || fail "the plugin never gave up on job $s"
	sleep 0.3
done
[ "$(job_field "$s" JobState)" = RUNNING ] || fail "the stubborn job is $(job_field "$s" JobState)"
[ "$(job_field "$s" Restarts)" = 0 ] || fail "the stubborn job was restarted"
[ "$(wc -l <"$TMP/s.out")" -eq 1 ] || fail "the stubborn job started twice: $(cat "$TMP/s.out")"
# Having given up, the plugin waits for the restart delay before asking again.
n=$(grep -c "JobId=$s asked to checkpoint" "$TMP/c/log/slurmctld.log")
[ "$n" -eq 1 ] || fail "job $s was asked $n times within the restart delay"
scancel "$e" "$s"

# 4. A job that accepts two GPU types and asked for the busy one is moved to
#    the other: its request changes type (Slurm keeps no trace of the old
#    type) and it starts there.
for j in "$e" "$s"; do wait_state "$j" CANCELLED 30 || fail "job $j did not end"; done
a=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 -t 5 --wrap 'sleep 120') ||
	fail "sbatch refused the a100 job"
wait_state "$a" RUNNING 30 || fail "the a100 job did not start"
t=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --gpu-types=a100,v100 \
	--elastic=1-4 -t 10 "$TMP/job.sh" "$TMP/t.out") || fail "sbatch refused the two-type job"
wait_state "$t" RUNNING 30 || fail "the two-type job did not start on the v100 node: $(job_field "$t" Reason)"
[ "$(job_field "$t" NodeList)" = n2 ] || fail "the two-type job runs on $(job_field "$t" NodeList), not n2"
job_field "$t" TresPerNode | grep -q 'gpu:v100:' ||
	fail "the two-type job's request is $(job_field "$t" TresPerNode)"

# 5. Once the a100 node is free the two-type job moves there (its hint runs
#    it twice as fast on a100): none of the nodes of the run it ends is
#    among those it goes to, so it restarts at once after its requeue,
#    without waiting for the next second (slurmd refuses only a credential
#    of the second in which that run's nodes revoked the last one), and
#    runs there. On a loaded machine the plugin may set the requeued job
#    only after the second of its requeue has passed (or the requeue came
#    in its last 0.1 s, which counts as the next, sched_copus(8)): then
#    there is no second to wait for, the line is not logged, and the job
#    must instead start on n1 within 0.2 s of being set.
scancel "$a"
at_once() {
	grep -q "JobId=$t restarted at once after its requeue, on none of the nodes of the run it ended" "$log" && return 0
	python3 - "$log" "$t" <<'PY'
import datetime, re, sys
log, t = sys.argv[1], sys.argv[2]
ts = lambda l: datetime.datetime.fromisoformat(l[1:24]).timestamp()
rq = st = None
for l in open(log):
    if re.search(r"Requeuing JobId=%s$" % t, l.rstrip()):
        rq, st = ts(l), None
    elif rq is not None and re.search(r"JobId=%s set to .*gpu:a100:.* after its checkpoint$" % t, l.rstrip()):
        st = ts(l)
    elif st is not None and re.search(r"started JobId=%s \(.*\) in \S+ on n1$" % t, l.rstrip()):
        passed = int(st) > int(rq) or rq % 1 >= 0.9
        sys.exit(0 if passed and ts(l) - st < 0.2 else 1)
sys.exit(1)
PY
}
end=$((SECONDS + 60))
until at_once; do
	[ $SECONDS -lt $end ] || fail "the two-type job did not restart at once on the a100 node: $(grep "JobId=$t" "$log" | grep -v 'setting comment\|complete JobId' | tail -8)"
	sleep 0.3
done
wait_line "$TMP/t.out" '^start restart=[1-9][0-9]* ' 30 || fail "the two-type job did not restart: $(cat "$TMP/t.out")"
# (It may grow on n1 once more, through the same protocol.)
end=$((SECONDS + 30))
until [ "$(job_field "$t" JobState)" = RUNNING ] && [ "$(job_field "$t" NodeList)" = n1 ]; do
	[ $SECONDS -lt $end ] || fail "the moved job is $(job_field "$t" JobState) on $(job_field "$t" NodeList), not running on n1: $(job_field "$t" Reason)"
	sleep 0.3
done
grep -q "credential.*revoked\|CREDENTIAL_REVOKED" "$TMP"/c/log/*.log && fail "a node refused a credential: $(grep -h 'revoked' "$TMP"/c/log/*.log | tail -3)"
scancel "$t"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
