#!/bin/bash
# slurmctld is killed (SIGKILL) in the middle of a rescale: the job, which
# is still writing its checkpoint, exits with 75 while slurmctld is away or
# coming back; sched/copus recovers the rescale from StateSaveLocation and
# restarts the job at its new size (well before Slurm's two-minute requeue
# delay), the job resumes from its checkpoint (its step never goes back) and
# no job is lost. The predictor's history of completed jobs survives too.
#
# The job publishes its first hint, and so can be asked to rescale, only
# once slurmctld has saved it running (its state saves coalesce for up to
# 5 s; a slurmctld killed sooner recovers a just-started job as pending, or
# forgets it if its submission was not saved either, which is Slurm's
# behaviour under any scheduler and not what this test is about:
# test-slurm-crash-start).
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=7,copus_restart_cost=2,copus_checkpoint_deadline=60

# The job counts steps and publishes hints; on SIGUSR1 it takes 3 s to
# checkpoint, saves the step atomically and exits with 75 (Slurm requeues
# it: RequeueExit=75); on start it resumes from the checkpoint.
hint_job "$TMP/job.sh"

# A job that completes is recorded for the predictor in
# StateSaveLocation/copus_history; a write cut short (a line without its
# end) is skipped when slurmctld comes back. The plugin learns only from a
# job it saw running for at least a second, so the job ends only once the
# plugin's state shows it has seen it hold its GPU (copus_state's job line,
# most GPUs held: 1), and a second later: a fixed-length job can start and
# end between two rounds on a loaded machine.
w=$(sbatch --parsable -o /dev/null -J warmup --gres=gpu:a100:1 -t 1 \
	--wrap "while [ ! -e '$TMP/go' ]; do sleep 0.2; done") ||
	fail "sbatch refused the first job"
end=$((SECONDS + 60))
until grep -Eq "^job $w [0-9]+ 1 " "$TMP/c/state/copus_state" 2>/dev/null; do
	[ $SECONDS -lt $end ] || fail "the plugin never recorded job $w running: $(cat "$TMP/c/state/copus_state" 2>&1)"
	sleep 0.2
done
sleep 1.1
touch "$TMP/go"
wait_state "$w" COMPLETED 60 || fail "the first job did not complete"
history=$TMP/c/state/copus_history
end=$((SECONDS + 30))
until grep -Eq '^[0-9.e+]+ 1 0 [0-9]+ warmup$' "$history" 2>/dev/null; do
	[ $SECONDS -lt $end ] || fail "the completed job is not in $history: $(cat "$history" 2>&1)"
	sleep 0.2
done
# 8200 more jobs (of a name no job here has): more than twice the 4096 the
# plugin keeps, so it rewrites the file with the newest 4096.
awk 'BEGIN { for (i = 0; i < 8200; i++) printf "%d 1 0 0 synthetic\n", 100 + i }' >>"$history"
printf '17 1' >>"$history"

touch "$TMP/j.out.hold"
j=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 --elastic=2-4 -t 10 \
	"$TMP/job.sh" "$TMP/j.out" exit75) || fail "sbatch refused the job"
wait_state "$j" RUNNING 60 || fail "job $j did not start"
# An update of the running job makes slurmctld save its jobs (within 5 s).
touch "$TMP/ref"
sleep 0.1
scontrol update jobid="$j" comment=started || fail "scontrol update $j"
end=$((SECONDS + 30))
until [ -n "$(find "$TMP/c/state/job_state" -newer "$TMP/ref" 2>/dev/null)" ]; do
	[ $SECONDS -lt $end ] || fail "slurmctld did not save job $j running"
	sleep 0.1
done
rm "$TMP/j.out.hold"
end=$((SECONDS + 60))
until grep -q "^rescale $j " "$TMP/c/state/copus_state" 2>/dev/null; do
	[ $SECONDS -lt $end ] || fail "no rescale of job $j recorded: $(cat "$TMP/j.out" 2>&1)"
	sleep 0.2
done
"$CLUSTER" restart-ctld "$TMP/c" --kill || fail "slurmctld did not come back"
t0=$SECONDS
end=$((SECONDS + 90))
until grep -q '^start restart=1 ' "$TMP/j.out"; do
	[ $SECONDS -lt $end ] || fail "job $j did not restart after the slurmctld restart: $(cat "$TMP/j.out")"
	sleep 0.3
done
echo "restarted $((SECONDS - t0))s after slurmctld came back"
cat "$TMP/j.out"
grep -q "recovered 1 rescale" "$TMP/c/log/slurmctld.log" ||
	fail "the plugin did not recover its rescale"
grep -q "predictor: 4096 completed job(s) from $history (1 line(s) skipped)" "$TMP/c/log/slurmctld.log" ||
	fail "the plugin did not give the predictor its history back"
grep -q "$history line 8203: incomplete line; skipped" "$TMP/c/log/slurmctld.log" ||
	fail "the plugin did not report the line cut short"
[ "$(wc -l <"$history")" -eq 4097 ] && [ "$(tail -n 1 "$history")" = "8299 1 0 0 synthetic" ] ||
	fail "$history was not rewritten with the newest 4096 jobs: $(wc -l <"$history") lines, last '$(tail -n 1 "$history")'"
grep -q '^start restart=1 gpus=4 ' "$TMP/j.out" ||
	fail "job $j restarted at the wrong size: $(grep '^start restart=1' "$TMP/j.out")"
saved=$(sed -n 's/^checkpoint step=//p' "$TMP/j.out" | head -n 1)
resumed=$(sed -n 's/^start restart=1 gpus=[0-9]* step=//p' "$TMP/j.out")
[ -n "$saved" ] && [ "$resumed" = "$saved" ] && [ "$saved" -gt 0 ] ||
	fail "job resumed at step '$resumed', checkpoint holds '$saved'"
[ "$(job_field "$j" JobState)" = RUNNING ] || fail "job $j is $(job_field "$j" JobState)"
scancel "$j"
echo "PASS"
