#!/bin/bash
# The loopback cluster: 4 nodes x 4 GPUs of two types come up, a batch job
# sees the GPUs it asked for on a node of the type it asked for, the script
# is safe to run twice, and "down" stops every daemon it started and every
# process of the jobs still running (a job's srun outlives its slurmstepd).
. "$(dirname "$0")/slurm-common.sh"

cluster_up --nodes 4 --gpus a100:4,v100:4
"$CLUSTER" up "$TMP/c" >/dev/null || fail "a second 'up' on a running cluster failed"

n=$(sinfo -h -N -o '%N %t %G' | sort -u | grep -c ' idle gpu:')
[ "$n" -eq 4 ] || fail "expected 4 idle GPU nodes, sinfo says: $(sinfo -N -o '%N %t %G')"
sinfo -h -N -o '%N %G' | grep -q '^n1 gpu:a100:4' || fail "n1 is not an a100 x 4 node"
sinfo -h -N -o '%N %G' | grep -q '^n4 gpu:v100:4' || fail "n4 is not a v100 x 4 node"

id=$(sbatch --parsable -o "$TMP/out.%j" --gres=gpu:v100:3 -N1 -t 1 \
	--wrap 'echo "gpus=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME"') ||
	fail "sbatch refused a job"
wait_state "$id" COMPLETED 60 || fail "the GPU job did not complete"
out=$(cat "$TMP/out.$id")
echo "job output: $out"
gpus=${out#gpus=}
gpus=${gpus%% *}
count=$(tr ',' '\n' <<<"$gpus" | grep -c .)
[ "$count" -eq 3 ] || fail "job saw $count GPUs ($gpus), asked for 3"
case $out in *node=n3 | *node=n4) ;; *) fail "v100 job ran on the wrong node: $out" ;; esac

# A job still running at "down", with a step started by srun.
mark=copus-loopback-$$
run=$(sbatch --parsable -o /dev/null -t 5 --wrap "srun bash -c 'sleep 300; : $mark'") ||
	fail "sbatch refused the running job"
wait_state "$run" RUNNING 30 || fail "the srun job did not start"
end=$((SECONDS + 20))
until pgrep -f "$mark" >/dev/null; do
	[ $SECONDS -lt $end ] || fail "the srun job's step did not start"
	sleep 0.3
done
pids=$(cat "$TMP"/c/pids/*.pid)
"$CLUSTER" down "$TMP/c" >/dev/null || fail "down failed"
for p in $pids; do
	if [ -d "/proc/$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -qF "$TMP/c/"; then
		fail "process $p still runs after down"
	fi
done
sleep 0.5
left=$(pgrep -f "$mark" | grep -vx "$$")
[ -z "$left" ] || {
	ps -o pid,args -p $left
	pkill -KILL -f "$mark"
	fail "the running job's processes outlived down"
}
"$CLUSTER" down "$TMP/c" >/dev/null || fail "a second 'down' failed"
echo "PASS"
