#!/bin/bash
# spank_copus on a loopback cluster: sbatch accepts good --elastic and
# --gpu-types values and passes them to slurmctld in the job's control
# environment; bad values are refused at submission with a message that
# says what is wrong. The admin's checkpoint_interval (plugstack.conf)
# reaches every job's environment unless the job set its own.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin spank_copus) || exit $?
# With sched/copus built, it reads the values back from the job record and
# logs them when it starts the job; without it only submission is checked.
sched=()
if sched_so=$(need_plugin sched_copus 2>/dev/null); then
	sched=(--sched copus --plugin-dir "$(dirname "$sched_so")"
		--sched-params copus_interval=1)
fi
cluster_up --nodes 2 --gpus a100:2,v100:2 \
	--spank "$so:checkpoint_interval=7" "${sched[@]}"

# Accepted: the values reach the job record (held, so it never runs).
id=$(sbatch --parsable --hold -o /dev/null --gres=gpu:1 --elastic=1-4 \
	--gpu-types=a100,v100 --wrap true 2>"$TMP/err") ||
	fail "sbatch refused a good --elastic: $(cat "$TMP/err")"
scontrol show job "$id" >/dev/null || fail "job $id unknown"
id2=$(sbatch --parsable -o /dev/null --gres=gpu:2 --elastic=2 \
	--gpu-types=v100 --wrap true 2>"$TMP/err") ||
	fail "sbatch refused --elastic=2: $(cat "$TMP/err")"
scancel "$id"

# Rejected, each with its reason.
reject() {
	local want=$1
	shift
	if sbatch --parsable -o /dev/null "$@" --wrap true >"$TMP/out" 2>"$TMP/err"; then
		fail "sbatch accepted $* (job $(cat "$TMP/out"))"
	fi
	grep -qF -- "$want" "$TMP/err" ||
		fail "sbatch $* failed without saying '$want': $(cat "$TMP/err")"
	echo "rejected $*: $(grep -F -- "$want" "$TMP/err" | head -n 1)"
}
reject "MAX (2) is smaller than MIN (8)" --elastic=8-2
reject "MIN must be at least 1" --elastic=0-4
reject "does not start with a number" --elastic=many
reject "unexpected" --elastic=2-4gpus
reject "listed twice" --elastic=1-2 --gpu-types=a100,a100
reject "not allowed in a GPU type" --elastic=1-2 '--gpu-types=a100;v100'
reject "--gpu-types needs --elastic" --gpu-types=a100

# Interactive jobs cannot be requeued, so they cannot be elastic.
for cmd in srun salloc; do
	if $cmd --gres=gpu:1 --elastic=1-2 true >"$TMP/out" 2>"$TMP/err"; then
		fail "$cmd accepted --elastic"
	fi
	grep -qF -- "--elastic works only with sbatch" "$TMP/err" ||
		fail "$cmd --elastic failed without saying why: $(cat "$TMP/err")"
	echo "rejected $cmd --elastic: $(grep -F -- '--elastic works' "$TMP/err" | head -n 1)"
done
# ...while the steps of an elastic batch job still run with srun.
st=$(sbatch --parsable -o "$TMP/step.out" --gres=gpu:1 --elastic=1-2 \
	--wrap 'srun -n1 true; echo "srun rc=$?"') || fail "sbatch of the srun job"
wait_state "$st" COMPLETED 60 || fail "the elastic job with a step did not complete"
grep -qx 'srun rc=0' "$TMP/step.out" ||
	fail "srun inside an elastic batch job failed: $(cat "$TMP/step.out")"

# The admin's checkpoint interval, and a job's own that wins over it.
env1=$(sbatch --parsable -o "$TMP/env1.out" \
	--wrap 'echo "interval=${COPUS_CKPT_INTERVAL:-unset}"') || fail "sbatch env1"
env2=$(COPUS_CKPT_INTERVAL=3 sbatch --parsable -o "$TMP/env2.out" \
	--wrap 'echo "interval=${COPUS_CKPT_INTERVAL:-unset}"') || fail "sbatch env2"
wait_state "$env1" COMPLETED 60 || fail "job $env1 did not complete"
wait_state "$env2" COMPLETED 60 || fail "job $env2 did not complete"
grep -qx 'interval=7' "$TMP/env1.out" ||
	fail "plugstack.conf checkpoint_interval=7 did not reach the job: $(cat "$TMP/env1.out")"
grep -qx 'interval=3' "$TMP/env2.out" ||
	fail "the job's own COPUS_CKPT_INTERVAL=3 was overridden: $(cat "$TMP/env2.out")"
echo "checkpoint interval: the admin's 7 reached job $env1, job $env2 kept its 3"

# The accepted job ran; sched/copus saw what the SPANK plugin exported.
wait_state "$id2" COMPLETED 60 || fail "the elastic job did not complete"
if [ ${#sched[@]} -gt 0 ]; then
	grep -q "started JobId=$id2 (elastic 2-2 GPUs, types v100)" \
		"$TMP/c/log/slurmctld.log" ||
		fail "sched/copus did not log job $id2's --elastic and --gpu-types"
else
	echo "sched_copus.so not built: not checking that slurmctld got the values"
fi
echo "PASS"
