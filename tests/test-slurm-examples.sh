#!/bin/bash
# The examples in etc/ work as written: a cluster whose scheduling settings
# are those of etc/slurm.conf.example and whose spank_copus line is that of
# etc/plugstack.conf.example (loopback-cluster.sh --example) runs eight
# one-GPU jobs that ask for no memory side by side on one 8-GPU node (an
# example without a default memory ran one job per node), refuses what it
# cannot run and accepts elastic jobs.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
need_plugin job_submit_copus >/dev/null || exit $?
cluster_up --nodes 2 --gpus a100:8 --cpus 64 --mem 512000 --sched copus \
	--spank "$spank" --plugin-dir "$(dirname "$so")" --example "$TOP/etc"
conf=$TMP/c/etc/slurm.conf
for line in $(grep -E '^(SchedulerType|SchedulerParameters|JobSubmitPlugins|SelectTypeParameters|DefMemPerGPU|RequeueExit)=' "$TOP/etc/slurm.conf.example"); do
	grep -qxF -- "$line" "$conf" || fail "the cluster does not run with the example's $line"
done
grep -q 'spank_copus.so checkpoint_interval=' "$TMP/c/etc/plugstack.conf" ||
	fail "the example's plugstack.conf line is not in use: $(cat "$TMP/c/etc/plugstack.conf")"

ids=()
for i in 1 2 3 4 5 6 7 8; do
	ids+=("$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 5 --wrap 'sleep 60')") ||
		fail "sbatch refused job $i"
done
for id in "${ids[@]}"; do
	wait_state "$id" RUNNING 40 ||
		fail "job $id did not start beside the others: $(squeue -h -o '%i %t %N %r')"
done
n=$(squeue -h -t R -o %N | sort -u | wc -l)
echo "8 one-GPU jobs run on $n node(s): $(squeue -h -t R -o %N | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
if out=$(sbatch -o /dev/null --elastic=3-4 --gres=gpu:a100:1 --wrap true 2>&1); then
	fail "the example configuration accepted a job outside its --elastic range"
fi
e=$(sbatch --parsable -o /dev/null --elastic=1-2 --gres=gpu:a100:1 -t 5 --wrap 'sleep 1') ||
	fail "the example configuration refused an elastic job"
wait_state "$e" COMPLETED 40 || fail "the elastic job did not run"
scancel "${ids[@]}"
echo "PASS"
