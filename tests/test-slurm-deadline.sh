#!/bin/bash
# --deadline keeps Slurm's meaning under sched/copus: a job starts with its
# time limit cut to the time left before its deadline, and a job whose
# deadline can no longer be met is cancelled (state DEADLINE), as Slurm's
# own schedulers do.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 1 --gpus a100:2 --sched copus \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=1

# No time limit of its own (the partition has none), at least a minute.
cut=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --time-min=1 \
	--deadline=now+5minutes --wrap 'sleep 300') || fail "sbatch refused the job with a deadline"
wait_state "$cut" RUNNING 30 || fail "the job with a deadline did not start"
lim=$(job_field "$cut" TimeLimit)
case $lim in
00:0[1-5]:00) echo "time limit cut to $lim" ;;
*) fail "the job with a deadline 5 minutes away runs with TimeLimit=$lim" ;;
esac

# Ten minutes of work cannot end within three. Slurm 22.05 queues such a
# job; 24.11 and later refuse it at submission (time limit past the
# deadline, no --time-min), which meets the deadline rule as well.
if late=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 10 \
	--deadline=now+3minutes --wrap 'sleep 300' 2>"$TMP/late.err"); then
	wait_state "$late" DEADLINE 30 || fail "the job that cannot meet its deadline was not cancelled"
else
	grep -q 'time limit is invalid' "$TMP/late.err" ||
		fail "sbatch refused the late job: $(cat "$TMP/late.err")"
	echo "Slurm refused the late job at submission"
fi

# A job held until less than its minimum time is left before its deadline.
held=$(sbatch --parsable -H -o /dev/null --gres=gpu:a100:1 --time-min=1 -t 10 \
	--deadline=now+75seconds --wrap 'sleep 300') || fail "sbatch refused the held job"
sleep 20
# (It may be cancelled already, held as it is.)
scontrol release "$held" 2>/dev/null || true
wait_state "$held" DEADLINE 30 ||
	fail "the job released too late for its deadline was not cancelled ($(job_field "$held" JobState))"
scancel "$cut"
echo "PASS"
