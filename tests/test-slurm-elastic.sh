#!/bin/bash
# Elastic jobs under sched/copus on a loopback cluster (n1: 4 a100, n2: 4
# v100), through the checkpoint protocol: the plugin sends the rescale
# signal, the job exits with 75, Slurm requeues it (RequeueExit=75) and the
# plugin restarts it at the new size.
#  1. An elastic job alone grows into the free GPUs of its node.
#  2. A rigid job arrives: the elastic job shrinks so that both run.
#  3. A job that ignores the checkpoint request is not resized and keeps
#     running.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 2 --gpus a100:4,v100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_checkpoint_deadline=4

cat >"$TMP/elastic.sh" <<'JOB'
#!/bin/bash
# A job that speaks the protocol: checkpoint (here: nothing to save) and
# exit with 75 when asked.
out=$1
trap 'echo "checkpoint restart=${SLURM_RESTART_COUNT:-0}" >>"$out"; exit 75' USR1
n=$(tr , '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
echo "start restart=${SLURM_RESTART_COUNT:-0} gpus=$n" >>"$out"
while :; do sleep 0.2; done
JOB
cat >"$TMP/stubborn.sh" <<'JOB'
#!/bin/bash
trap '' USR1
n=$(tr , '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
echo "start restart=${SLURM_RESTART_COUNT:-0} gpus=$n" >>"$1"
while :; do sleep 0.2; done
JOB

# wait_line FILE REGEX SECONDS
wait_line() {
	local end=$((SECONDS + $3))
	until grep -Eq "$2" "$1" 2>/dev/null; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.3
	done
}

e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-4 -t 10 \
	"$TMP/elastic.sh" "$TMP/e.out") || fail "sbatch refused the elastic job"
wait_line "$TMP/e.out" '^start restart=0 gpus=1$' 60 || fail "the elastic job did not start with 1 GPU: $(cat "$TMP/e.out" 2>&1)"
wait_line "$TMP/e.out" '^start restart=1 gpus=4$' 90 ||
	fail "the elastic job did not grow to 4 GPUs: $(cat "$TMP/e.out" 2>&1)"
echo "grew: $(tr '\n' ';' <"$TMP/e.out")"

r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 10 --wrap 'sleep 3') ||
	fail "sbatch refused the rigid job"
wait_line "$TMP/e.out" '^start restart=2 gpus=2$' 90 ||
	fail "the elastic job did not shrink to 2 GPUs for the rigid job: $(cat "$TMP/e.out")"
wait_state "$r" COMPLETED 90 || fail "the rigid job did not run beside the shrunk job"
echo "shrank: $(tr '\n' ';' <"$TMP/e.out")"
# With the rigid job gone the elastic job may already be growing again
# (pending between its checkpoint and its restart), but it is not lost.
case $(job_field "$e" JobState) in
RUNNING | PENDING) ;;
*) fail "the elastic job is $(job_field "$e" JobState)" ;;
esac

s=$(sbatch --parsable -o /dev/null --gres=gpu:v100:1 --elastic=1-4 -t 10 \
	"$TMP/stubborn.sh" "$TMP/s.out") || fail "sbatch refused the stubborn job"
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
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
