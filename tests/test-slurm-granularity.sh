#!/bin/bash
# A job whose model is split over several GPUs runs only on whole replicas
# of it, end to end on a loopback cluster (one node, 4 a100) with a real
# libcopus job: tests/test-runtime-job train-pipeline, pipeline_degree 2,
# one rank per GPU under srun --mpi=pmix. Its hint says "gran":2; when a
# rigid one-GPU job arrives, sched/copus shrinks the elastic job from 4 GPUs
# to 2, not to 3 (the most that leaves room, on which every rank refuses to
# start: "world size 3 is not a multiple of pipeline_degree 2"), and the job
# restarts on 2 ranks from its checkpoint and trains on. A job submitted
# with --gpu-multiple=2 starts on a multiple before its first hint.
. "$(dirname "$0")/slurm-common.sh"

JOB=$PWD/tests/test-runtime-job
[ -x "$JOB" ] || skip "$JOB not built"
so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=1,copus_checkpoint_deadline=8
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no PMIx plugin (srun --mpi=list)"
log=$TMP/c/log/slurmctld.log
status=$TMP/c/state/copus_status
out=$TMP/e.out

# One rank per GPU of the allocation, whatever the scheduler gave (the job
# has one CPU: the ranks mostly sleep).
cat >"$TMP/job.sh" <<EOF
#!/bin/bash
n=\$(tr , '\n' <<<"\$CUDA_VISIBLE_DEVICES" | grep -c .)
echo "start restart=\${SLURM_RESTART_COUNT:-0} gpus=\$n"
export COPUS_GPU_TYPE=a100
exec srun --mpi=pmix -n "\$n" --overcommit "$JOB" train-pipeline 1000000 "$TMP/ckpt" 100
EOF
mkdir -p "$TMP/ckpt"

e=$(sbatch --parsable -o "$out" --open-mode=append --gres=gpu:a100:4 --elastic=1-4 -t 10 \
	"$TMP/job.sh") || fail "sbatch refused the elastic job"
wait_line "$out" '^ranks 4 data 2 pipeline 2 step 0$' 30 ||
	fail "the job did not start on 4 ranks (2 replicas of 2 stages): $(cat "$out" 2>&1)"
end=$((SECONDS + 15))
until job_field "$e" Comment | grep -q '"gran":2[,}]'; do
	[ $SECONDS -lt $end ] || fail "the job's hint does not carry its granularity: $(job_field "$e" Comment)"
	sleep 0.3
done
echo "hint: $(job_field "$e" Comment)"

# A rigid job that needs one of the four GPUs. Once the elastic job's hint
# holds a model of its throughput (its second hint, 30 s after its start),
# the policy shrinks it.
r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 1 --wrap 'sleep 300') ||
	fail "sbatch refused the rigid job"
wait_line "$log" "JobId=$e asked to checkpoint" 60 ||
	fail "job $e was never asked to make room for the rigid job: $(grep -v '^#' "$status")"
ask=$(grep "JobId=$e asked to checkpoint" "$log" | head -n 1 | cut -d' ' -f2-)
echo "$ask"
to=$(sed -n 's/.* to \([0-9]*\) a100 GPU(s) on .*/\1/p' <<<"$ask")
[ -n "$to" ] || fail "cannot read the new size in: $ask"
[ $((to % 2)) = 0 ] ||
	fail "job $e, which runs on multiples of 2 GPUs, was moved to $to: $ask"

wait_line "$out" '^ranks 2 data 1 pipeline 2 step [1-9][0-9]*$' 30 ||
	fail "the job did not restart on 2 ranks: $(cat "$out")"
wait_state "$r" RUNNING 10 || fail "the rigid job does not run beside the elastic job"
s=$(sed -n "s/^ranks 2 data 1 pipeline 2 step //p" "$out" | tail -n 1)
# Every rank restored the step its stage's checkpoint holds, then trains on.
# (Each rank's lines reach the file through srun on their own: rank 1's may
# come after rank 0's "ranks" line.)
end=$((SECONDS + 20))
until [ "$(grep -c "^restored $s\$" "$out")" -ge 2 ]; do
	[ $SECONDS -lt $end ] ||
		fail "the 2 ranks did not both restore step $s: $(cat "$out")"
	sleep 0.3
done
[ "$(grep -c "^restored $s\$" "$out")" = 2 ] ||
	fail "more than 2 ranks restored step $s: $(cat "$out")"
wait_line "$out" "^ranks 2 step $(((s / 20 + 2) * 20))\$" 20 ||
	fail "the job does not train on 2 ranks after step $s: $(cat "$out")"
cat "$out"

# What Slurm and copusctl say of it.
[ "$(job_field "$e" JobState)" = RUNNING ] || fail "the elastic job is $(job_field "$e" JobState)"
[ "$(job_field "$e" Restarts)" = 1 ] || fail "the elastic job restarted $(job_field "$e" Restarts) times"
[ "$(job_field "$e" NumNodes)" = 1 ] || fail "the elastic job has $(job_field "$e" NumNodes) nodes"
# (Slurm 22.05 writes it gres:gpu:a100:2, 24.11 and later gres/gpu:a100:2.)
job_field "$e" TresPerNode | grep -qx 'gres[:/]gpu:a100:2' ||
	fail "the elastic job's request is $(job_field "$e" TresPerNode), not 2 a100"
sleep 3
grep -Pq "^$e\tRUNNING\telastic:1-4\ta100\t2\t1\t" "$status" ||
	fail "the status does not show job $e on 2 GPUs: $(cat "$status")"
# One GPU stays idle: 3 is no size for the job, and it was asked once.
[ "$(grep -c "JobId=$e asked to checkpoint" "$log")" = 1 ] ||
	fail "job $e was asked again: $(grep "JobId=$e asked to checkpoint" "$log")"
grep -E '^start ' "$out" | grep -Ev ' gpus=[24]$' &&
	fail "the job started on a size that is not a multiple of 2"
grep -q 'not a multiple of pipeline_degree' "$out" &&
	fail "a rank refused its world size: $(cat "$out")"
scancel "$e" "$r"
end=$((SECONDS + 30))
while [ -n "$(squeue -h -o %i)" ]; do
	[ $SECONDS -lt $end ] || fail "jobs $e and $r did not end: $(squeue)"
	sleep 0.5
done

# Before its first hint the scheduler knows the job's granularity only from
# --gpu-multiple: with 3 of the 4 GPUs free it starts on 2, not on 3 (or
# 1), where every rank would refuse to start and the job would fail.
r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 1 --wrap 'sleep 300') ||
	fail "sbatch refused the rigid job"
wait_state "$r" RUNNING 15 || fail "the rigid job did not start"
out2=$TMP/m.out
mkdir -p "$TMP/ckpt2"
sed "s|$TMP/ckpt|$TMP/ckpt2|" "$TMP/job.sh" > "$TMP/job2.sh"
m=$(sbatch --parsable -o "$out2" --gres=gpu:a100:4 --elastic=1-4 \
	--gpu-multiple=2 -t 10 "$TMP/job2.sh") ||
	fail "sbatch refused the job with --gpu-multiple=2"
wait_line "$out2" '^ranks 2 data 1 pipeline 2 step 0$' 30 ||
	fail "the job did not start on 2 ranks: $(cat "$out2" 2>&1)"
grep -E '^start ' "$out2" | grep -Ev ' gpus=[24]$' &&
	fail "the job started on a size that is not a multiple of 2"
[ "$(job_field "$m" JobState)" = RUNNING ] ||
	fail "the job is $(job_field "$m" JobState): $(cat "$out2")"
# A request off the multiples cannot run: refused at submission.
sbatch --parsable -o /dev/null --gres=gpu:a100:3 --elastic=1-4 \
	--gpu-multiple=2 -t 1 --wrap true > "$TMP/refused" 2>&1 &&
	fail "a request of 3 GPUs with --gpu-multiple=2 was accepted"
grep -q 'asks for 3 GPU(s), not a multiple of --gpu-multiple=2' "$TMP/refused" ||
	fail "the refusal does not say why: $(cat "$TMP/refused")"
scancel "$m" "$r"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
