#!/bin/bash
# The policy counts GPUs; Slurm also counts CPUs, memory and features. A job
# that its decided nodes refuse (here 2 GPUs with 8 CPUs each, on nodes of
# 8 CPUs: it needs two nodes) is placed by Slurm on the nodes it may use,
# as backfill would, instead of waiting on an idle cluster for ever.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 2 --gpus a100:2 --cpus 8 --sched copus \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=1

j=$(sbatch --parsable -o /dev/null --gpus=2 --cpus-per-gpu=8 --mem-per-cpu=10 \
	-t 5 --wrap 'sleep 1') || fail "sbatch refused the job"
wait_state "$j" COMPLETED 20 ||
	fail "a job that needs two nodes' CPUs for its 2 GPUs did not run on an idle cluster: $(job_field "$j" Reason)"
echo "ran on $(job_field "$j" NodeList)"
srun --gpus=2 --cpus-per-gpu=8 --mem-per-cpu=10 -t 5 true ||
	fail "srun --gpus=2 --cpus-per-gpu=8 did not run"
echo "PASS"
