#!/bin/bash
# job_submit/copus refuses at submission, with a message that says why, the
# jobs sched/copus could never run: --elastic without a GPU request or with
# one outside its range, GPU types no node has (Slurm itself refuses
# heterogeneous jobs). Jobs it can run are accepted and run; srun
# --immediate starts at once or is refused at once, as under sched/backfill.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
need_plugin job_submit_copus >/dev/null || exit $?
cluster_up --nodes 2 --gpus a100:2,v100:2 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=1
grep -q '^JobSubmitPlugins=copus' "$TMP/c/etc/slurm.conf" ||
	fail "the loopback cluster does not load job_submit/copus"

# refused MESSAGE-REGEX COMMAND...: the command fails and says so.
refused() {
	local want=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "accepted: $*: $out"
	fi
	grep -Eq -- "$want" <<<"$out" || fail "refused without saying /$want/: $*: $out"
	echo "refused: $* -> $(grep -E -- "$want" <<<"$out" | head -n 1)"
}
w='sleep 1'
refused 'copus: --gres asks for 2 GPU\(s\), outside --elastic=3-4' \
	sbatch -o /dev/null --elastic=3-4 --gres=gpu:a100:2 --wrap "$w"
refused 'copus: --gres asks for 4 GPU\(s\) in all, outside --elastic=1-2' \
	sbatch -o /dev/null --elastic=1-2 -N 2 --gres=gpu:2 --wrap "$w"
refused 'copus: --elastic=1-2 needs a GPU request' \
	sbatch -o /dev/null --elastic=1-2 --wrap "$w"
refused "GPU|gres|h100" \
	sbatch -o /dev/null --gres=gpu:h100:1 --wrap "$w"
refused "copus: --gpu-types=h100,t4 names no GPU type that a node has \\(the cluster has a100, v100\\)" \
	sbatch -o /dev/null --elastic=1-2 --gpu-types=h100,t4 --gres=gpu:1 --wrap "$w"
cat >"$TMP/het.sh" <<'JOB'
#!/bin/bash
#SBATCH --gres=gpu:a100:1
#SBATCH hetjob
#SBATCH --gres=gpu:v100:1
true
JOB
# Slurm itself refuses a heterogeneous job under any scheduler but
# sched/backfill, before job_submit plugins see it.
refused 'not supported' sbatch -o /dev/null "$TMP/het.sh"
# srun --immediate starts at submission or is refused then, as under
# sched/backfill. Slurm's own test (testsuite/python/tests/commands/srun/
# test_--immediate.py) asks the first two: a held job is refused, and on a
# free cluster the job runs, within 2 s there (at most 15 s on a loaded
# machine here; srun --immediate has no way to wait for a round at all).
refused 'Unable to allocate resources' timeout 30 srun --immediate --hold true
t0=$SECONDS
timeout 30 srun --immediate pwd >/dev/null ||
	fail "srun --immediate pwd did not run on an idle cluster"
timeout 30 srun --immediate --gres=gpu:a100:1 true ||
	fail "srun --immediate --gres=gpu:a100:1 did not run on an idle cluster"
[ $((SECONDS - t0)) -le 15 ] || fail "two srun --immediate took $((SECONDS - t0)) s"
echo "srun --immediate: ran twice in $((SECONDS - t0)) s"
# srun --immediate=N waits N seconds on its side.
timeout 60 srun --immediate=10 --gres=gpu:a100:1 true ||
	fail "srun --immediate=10 did not run on an idle cluster"
# Every a100 taken: refused at once, and nothing of it left in the queue.
busy=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 --wrap 'sleep 300') ||
	fail "sbatch of the job that takes every a100"
wait_state "$busy" RUNNING 30 || fail "the job that takes every a100 did not start"
t0=$SECONDS
refused 'Unable to allocate resources' timeout 30 srun --immediate --gres=gpu:a100:1 true
[ $((SECONDS - t0)) -le 15 ] || fail "srun --immediate on busy GPUs took $((SECONDS - t0)) s to be refused"
left=$(squeue -h -t PD -o %i)
[ -z "$left" ] || fail "srun --immediate left a pending job: $left"
scancel "$busy"
wait_state "$busy" CANCELLED 30 || fail "the job that took every a100 was not cancelled"

ok=$(sbatch --parsable -o /dev/null --elastic=1-4 --gpu-types=a100,t4 \
	--gres=gpu:a100:2 --wrap "$w") || fail "a good elastic job was refused"
r=$(sbatch --parsable -o /dev/null --gres=gpu:v100:2 --wrap "$w") ||
	fail "a good rigid job was refused"
wait_state "$ok" COMPLETED 30 || fail "the good elastic job did not run"
wait_state "$r" COMPLETED 30 || fail "the good rigid job did not run"
grep -q 'sched/copus: slurm.conf: JobSubmitPlugins' "$TMP/c/log/slurmctld.log" &&
	fail "sched/copus warns about JobSubmitPlugins=copus"
echo "PASS"
