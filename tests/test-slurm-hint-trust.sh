#!/bin/bash
# A hint is a claim: a job whose model claims far more progress than it
# makes has its model ignored, slurmctld.log says so and copusctl shows it;
# an honest job keeps its model.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 2 --gpus a100:2 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_hint_check=10,copus_restart_delay=3600
log=$TMP/c/log/slurmctld.log
status=$TMP/c/state/copus_status

# A job that publishes MODEL (perf parameters per a100 GPU) and progress
# growing by RATE iterations a second; run as: sbatch ... FILE RATE MODEL.
cat >"$TMP/claim.sh" <<'JOB'
#!/bin/bash
rate=$1 model=$2 start=$(date +%s)
while :; do
	now=$(date +%s)
	prog=$(awk -v t=$((now - start)) -v r="$rate" 'BEGIN { printf "%d", t * r + 1 }')
	scontrol update jobid="$SLURM_JOB_ID" comment="copus1:{\"v\":1,\"job\":$SLURM_JOB_ID,\"st\":\"running\",\"step\":$prog,\"rc\":${SLURM_RESTART_COUNT:-0},\"t\":$now,\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":$prog,\"tgt\":10000000,\"perf\":{\"a100\":$model}}"
	sleep 1
done
JOB
# The model claims a few iterations a second on one a100 (1.4 at batch 128:
# a step takes 0.05 + 0.005 x 128 s; more with its best batch). The honest
# job makes 20 a second, more than it claims; the rosy one makes steps, but
# only 0.3 a second: at least 2 in any 10 seconds of the plugin's window,
# so that what fires is the ratio of claimed to measured progress (5x or
# more), not the check of a job that makes none.
model='[0.05,0.005,0.05,0.002,0.005,0.0005,1.5]'
honest=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-2 -t 10 \
	"$TMP/claim.sh" 20 "$model") || fail "sbatch refused the honest job"
rosy=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-2 -t 10 \
	"$TMP/claim.sh" 0.3 "$model") || fail "sbatch refused the rosy job"
wait_state "$honest" RUNNING 30 || fail "the honest job did not start"
wait_state "$rosy" RUNNING 30 || fail "the rosy job did not start"

end=$((SECONDS + 40))
until grep -Eq "JobId=$rosy: its hint claims [0-9.]+x the progress it makes" "$log"; do
	[ $SECONDS -lt $end ] || fail "the rosy job's claim was not caught; status: $(cat "$status"); its lines: $(grep "JobId=$rosy" "$log" | grep -v 'setting comment\|_slurm_rpc_update_job' | tail -n 20)"
	sleep 0.5
done
grep "JobId=$rosy: its hint claims" "$log" | tail -n 1
grep -q "JobId=$honest: its hint claims" "$log" &&
	fail "the honest job was distrusted: $(grep "JobId=$honest: its hint claims" "$log")"
sleep 2
grep -Pq "^$rosy\tRUNNING\t.*\tdistrusted: claims [0-9.]+x$" "$status" ||
	fail "the status does not show job $rosy distrusted: $(cat "$status")"
grep -Pq "^$honest\tRUNNING\t.*\tok$" "$status" ||
	fail "the status does not show job $honest's hint as ok: $(cat "$status")"
scancel "$honest" "$rosy"
echo "PASS"
