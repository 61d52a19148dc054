#!/bin/bash
# copus_max_gpus_per_user: one user's jobs hold at most that many GPUs
# together, so that one user cannot starve another; a job beyond the cap
# waits and says why, another user's job runs.
. "$(dirname "$0")/slurm-common.sh"

need_plugin sched_copus "configure --with-slurm-src" >/dev/null || exit $?
# nobody's sbatch loads PluginDir too.
pdir=$(shared_plugins) || exit 1
cluster_up --nodes 1 --gpus a100:4 --sched copus --plugin-dir "$pdir" \
	--sched-params copus_interval=1,copus_max_gpus_per_user=2
chmod 755 "$TMP"

a=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 5 --wrap 'sleep 120') ||
	fail "sbatch refused the first job"
b=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 5 --wrap 'sleep 120') ||
	fail "sbatch refused the second job"
c=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 5 --wrap 'sleep 120') ||
	fail "sbatch refused the third job"
wait_state "$a" RUNNING 20 || fail "the first job did not start"
wait_state "$b" RUNNING 20 || fail "the second job did not start"
o=$(cd /tmp && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable \
	-o /dev/null --gres=gpu:a100:1 -t 5 --wrap 'sleep 120' 2>&1) ||
	fail "sbatch refused nobody's job: $o"
wait_state "$o" RUNNING 20 || fail "another user's job did not start"
sleep 3
[ "$(job_field "$c" JobState)" = PENDING ] ||
	fail "root's third job is $(job_field "$c" JobState) with two GPUs held: the cap did not hold"
squeue -h -j "$c" -o %r | grep -q copus_max_gpus_per_user ||
	fail "the job beyond the cap does not say why it waits: $(squeue -h -j "$c" -o %r)"
scancel "$a"
wait_state "$c" RUNNING 20 || fail "the third job did not start once its user was under the cap"
scancel "$b" "$c" "$o"
echo "PASS"
