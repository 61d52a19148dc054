#!/bin/bash
# A job on several nodes gets the same GPUs on each (Slurm allocates GPUs
# per node), on a loopback cluster of 3 nodes x 4 a100 with one GPU taken on
# n1 and one on n2: an elastic job asking for 2 nodes x 4 (at least 2 GPUs)
# runs on 6, three on n1 and three on n2, not on 4 + 3 + 1 of all three
# nodes (which Slurm could only give as 1 + 1 + 1).
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 3 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=1

r1=$(sbatch --parsable -o /dev/null -w n1 --gres=gpu:a100:1 -t 5 --wrap 'sleep 300') ||
	fail "sbatch refused the job for n1"
r2=$(sbatch --parsable -o /dev/null -w n2 --gres=gpu:a100:1 -t 5 --wrap 'sleep 300') ||
	fail "sbatch refused the job for n2"
wait_state "$r1" RUNNING 60 || fail "the job for n1 did not start"
wait_state "$r2" RUNNING 60 || fail "the job for n2 did not start"
e=$(sbatch --parsable -o /dev/null -N2 --gres=gpu:a100:4 --elastic=2-8 -t 5 \
	--wrap 'sleep 300') || fail "sbatch refused the elastic job"
wait_state "$e" RUNNING 60 || fail "the elastic job did not start: $(job_field "$e" Reason)"
nl=$(job_field "$e" NodeList)
tres=$(job_field "$e" TresPerNode)
echo "elastic job $e on $nl with $tres"
[ "$nl" = "n[1-2]" ] || fail "the elastic job runs on $nl, not on n1 and n2"
echo "$tres" | grep -q 'gpu:a100:3' || fail "the elastic job has $tres, not 3 GPUs per node"
[ "$(job_field "$e" NumNodes)" = 2 ] || fail "the elastic job has $(job_field "$e" NumNodes) nodes"
scancel "$r1" "$r2" "$e"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
