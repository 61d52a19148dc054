#!/bin/bash
# Jobs start on events, not only at round boundaries: with rounds a minute
# apart, a job submitted to an idle cluster starts within a few seconds,
# and a job waiting for GPUs starts within a few seconds of the job that
# held them ending. With every GPU taken, an event round reads no job,
# unless a job without GPUs waits.
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

# Every GPU taken: a GPU job's submission starts nothing, and its event
# round reads no job (event_rounds_idle); a job without GPUs still starts
# on its event, and the GPU job on the GPUs coming free.
stat() { sed -n "s/^$1\t\([0-9]*\)\t.*/\1/p" "$TMP/c/state/copus_stats"; }
x=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 1 --wrap 'sleep 60') ||
	fail "sbatch refused the job that takes every GPU"
wait_state "$x" RUNNING 10 || fail "the job that takes every GPU did not start"
idle0=$(stat event_rounds_idle)
walks0=$(stat event_walks)
full0=$(($(stat rounds) - $(stat event_rounds)))
c=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 1 --wrap 'sleep 1') ||
	fail "sbatch refused the GPU job"
for k in 1 2 3; do
	sleep 0.5
	sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 1 --wrap 'sleep 1' >>"$TMP/more" ||
		fail "sbatch refused GPU job $k of 3 more"
done
sleep 2
[ "$(job_field "$c" JobState)" = PENDING ] || fail "the GPU job is $(job_field "$c" JobState) with every GPU taken"
# Each submission's event round looked only at the jobs submitted since the
# last look: one look through every job after each full round at most.
walks1=$(stat event_walks)
full1=$(($(stat rounds) - $(stat event_rounds)))
[ -n "$walks1" ] && [ $((walks1 - ${walks0:-0})) -le $((1 + full1 - full0)) ] ||
	fail "event rounds read every job $((walks1 - ${walks0:-0})) times for 4 submissions and $((full1 - full0)) full round(s) (event_walks ${walks0:-none} -> ${walks1:-none})"
echo "looks through every job for 4 submissions with every GPU taken: $((walks1 - ${walks0:-0})) (full rounds meanwhile: $((full1 - full0)))"
d=$(sbatch --parsable -o /dev/null -t 1 --wrap 'sleep 1') ||
	fail "sbatch refused the job without GPUs"
wait_state "$d" RUNNING 10 >/dev/null || wait_state "$d" COMPLETED 1 ||
	fail "a job without GPUs did not start on its event with every GPU taken"
sleep 1
idle1=$(stat event_rounds_idle)
[ "${idle1:-0}" -gt "${idle0:-0}" ] ||
	fail "no event round was idle with every GPU taken (event_rounds_idle ${idle0:-none} -> ${idle1:-none})"
echo "event rounds that read no job with every GPU taken: $((idle1 - ${idle0:-0}))"
t2=$SECONDS
scancel "$x"
wait_state "$c" RUNNING 10 >/dev/null || wait_state "$c" COMPLETED 1 ||
	fail "the GPU job did not start within 10 s of the GPUs coming free"
echo "the GPU job started $((SECONDS - t2)) s after the GPUs came free"
echo "PASS"
