#!/bin/bash
# copus_max_jobs bounds the pending jobs a round considers: they are the
# ones of highest priority (not the first in Slurm's job list); every other
# pending job waits with Slurm's reason Priority and no description (as
# sched/backfill leaves those it does not reach), and the plugin's counters
# say how many.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 1 --gpus a100:1 --sched copus \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_max_jobs=1

# The GPU is busy, so that nothing below starts.
b=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 10 --wrap 'sleep 300') ||
	fail "sbatch refused the first job"
wait_state "$b" RUNNING 30 || fail "the first job did not start"
# Submitted first, but of the least priority.
low=$(sbatch --parsable -o /dev/null --nice=10000 --gres=gpu:a100:1 -t 10 \
	--wrap 'sleep 1') || fail "sbatch refused the nice job"
high=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 10 --wrap 'sleep 1') ||
	fail "sbatch refused the second job"
next=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 10 --wrap 'sleep 1') ||
	fail "sbatch refused the third job"
[ "$(job_field "$high" Priority)" -gt "$(job_field "$low" Priority)" ] ||
	fail "--nice did not lower the priority: $(job_field "$low" Priority) >= $(job_field "$high" Priority)"

# reason ID: the job's pending reason as squeue shows it (its description
# when it has one).
reason() { squeue -h -j "$1" -o %r; }
# stat NAME: a counter of StateSaveLocation/copus_stats.
stat() { sed -n "s/^$1\t\([0-9]*\)\t.*/\1/p" "$TMP/c/state/copus_stats"; }
end=$((SECONDS + 15))
until [ "$(reason "$low")" = Priority ] && [ "$(reason "$next")" = Priority ] &&
	[ "$(stat jobs_beyond)" = 2 ]; do
	[ $SECONDS -lt $end ] || fail "the jobs beyond copus_max_jobs do not wait as jobs of lower priority: $low: '$(reason "$low")', $next: '$(reason "$next")'; jobs_beyond '$(stat jobs_beyond)'"
	sleep 0.3
done
case $(reason "$high") in
copus:*) ;;
*) fail "the job of highest priority was not considered: '$(reason "$high")'" ;;
esac
echo "high: '$(reason "$high")'; low: '$(reason "$low")'; jobs_beyond $(stat jobs_beyond)"
# Its time limit (10 minutes) bounds the remaining time the policy uses.
end=$((SECONDS + 10))
until grep -Pq "^$high\tPENDING\t.*\t600s\t" "$TMP/c/state/copus_status"; do
	[ $SECONDS -lt $end ] || fail "the time limit does not bound job $high's remaining time: $(cat "$TMP/c/state/copus_status")"
	sleep 0.3
done
scancel "$b"
wait_state "$high" COMPLETED 30 || fail "the job of highest priority did not run next"
scancel "$low" "$next"
echo "PASS"
