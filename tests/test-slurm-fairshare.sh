#!/bin/bash
# Fair share without Slurm's accounting: sched/copus counts each user's
# GPU-seconds (kept in copus_state), and when two users' jobs want the same
# GPUs, the job of the user who has used less starts first. The two jobs
# are alike, and root's comes first: without the fair-share term
# (copus_fairshare=0) root's starts.
. "$(dirname "$0")/slurm-common.sh"

need_plugin sched_copus "configure --with-slurm-src" >/dev/null || exit $?
# nobody's sbatch loads PluginDir too.
pdir=$(shared_plugins) || exit 1
cluster_up --nodes 1 --gpus a100:2 --sched copus --plugin-dir "$pdir" \
	--spank "$pdir/spank_copus.so" \
	--sched-params copus_interval=1
chmod 755 "$TMP"

# Root uses both GPUs for a while. (Root's jobs fail, so that the predictor
# of remaining work learns nothing from them and the two jobs below stay
# alike.)
u=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 5 --wrap 'sleep 6; exit 1') ||
	fail "sbatch refused root's first job"
wait_state "$u" RUNNING 20 || fail "root's first job did not start"
# A rigid job holds the GPUs while both users submit.
blk=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 5 --wrap 'sleep 8; exit 1') ||
	fail "sbatch refused the blocker"
wait_state "$blk" RUNNING 30 || fail "the blocker did not start"
a=$(sbatch --parsable -o /dev/null --elastic=2-2 --gres=gpu:a100:2 -t 5 \
	--wrap 'sleep 120') || fail "sbatch refused root's elastic job"
sleep 1
b=$(cd /tmp && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" sbatch \
	--parsable -o /dev/null --elastic=2-2 --gres=gpu:a100:2 -t 5 \
	--wrap 'sleep 120' 2>&1) || fail "sbatch refused nobody's job: $b"
grep -q '^user 0 ' "$TMP/c/state/copus_state" 2>/dev/null ||
	sleep 2
wait_state "$b" RUNNING 40 ||
	fail "nobody's job did not start first: root's is $(job_field "$a" JobState), nobody's $(job_field "$b" JobState) ($(squeue -h -j "$b" -o %r))"
[ "$(job_field "$a" JobState)" = PENDING ] ||
	fail "root's job is $(job_field "$a" JobState) beside nobody's"
grep -q '^user 0 [0-9]' "$TMP/c/state/copus_state" ||
	fail "copus_state keeps no usage for root: $(cat "$TMP/c/state/copus_state")"
scancel "$b"
wait_state "$a" RUNNING 30 || fail "root's job did not start after nobody's"
scancel "$a"
echo "PASS"
