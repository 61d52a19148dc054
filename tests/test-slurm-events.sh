#!/bin/bash
# Jobs start on events, not only at round boundaries: with rounds a minute
# apart, a job submitted to an idle cluster starts within a few seconds,
# and a job waiting for GPUs starts within a few seconds of the job that
# held them ending.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 1 --gpus a100:2 --sched copus \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=60
log=$TMP/c/log/slurmctld.log
# The first full round, at the start.
end=$((SECONDS + 15))
until grep -q "sched/copus: policy copus" "$log"; do
	[ $SECONDS -lt $end ] || fail "sched/copus did not start"
	sleep 0.2
done
sleep 2

t0=$SECONDS
a=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 1 --wrap 'sleep 4') ||
	fail "sbatch refused the first job"
wait_state "$a" RUNNING 10 || fail "a job submitted to an idle cluster did not start within 10 s (rounds are 60 s apart)"
echo "started $((SECONDS - t0)) s after its submission"
b=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 1 --wrap 'sleep 1') ||
	fail "sbatch refused the second job"
wait_state "$a" COMPLETED 15 || fail "the first job did not end"
t1=$SECONDS
wait_state "$b" RUNNING 10 || fail "the waiting job did not start within 10 s of the GPUs coming free"
echo "the waiting job started $((SECONDS - t1)) s after the GPUs came free"
wait_state "$b" COMPLETED 15 || fail "the second job did not end"
n=$(sed -n 's/^event_rounds\t\([0-9]*\)\t.*/\1/p' "$TMP/c/state/copus_stats")
[ "${n:-0}" -ge 1 ] || fail "no event round counted: $(cat "$TMP/c/state/copus_stats")"
echo "PASS"
