#!/bin/bash
# Time from the release of a requeued job to its first step at the restored
# state, on the loopback cluster (run as root from a build directory):
#   bash $srcdir/tests/bench-runtime-restart.sh [ROUNDS]
# Prints, per round, the time from "scontrol update StartTime=now" to the
# first step's line in the job's output (Slurm's launch, libcopus init,
# restore, one 20 ms step; the stand-in application loads nothing), and the
# part inside the process (main to the end of the first step).
srcdir=${srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
. "$srcdir/tests/slurm-common.sh"

JOB=$PWD/tests/test-runtime-job
[ -x "$JOB" ] || skip "$JOB not built (run from the build directory)"
rounds=${1:-5}

cluster_up --nodes 2 --cpus 4
echo "RequeueExit=75" >>"$TMP/c/etc/slurm.conf"
scontrol reconfigure || fail "scontrol reconfigure"
sleep 1

now() { date +%s.%N; }
id=$(sbatch --parsable -N1 -n1 -t 10 -o "$TMP/job.out" \
	--wrap "exec $JOB train 10000000 $TMP/ckpt 20") || fail "sbatch"
wait_state "$id" RUNNING 30 || fail "the job did not start"
for r in $(seq "$rounds"); do
	while ! grep -q '^first-step' "$TMP/job.out" 2>/dev/null; do sleep 0.02; done
	sleep 0.5
	scancel --batch --signal=USR1 "$id"
	while [ "$(job_field "$id" JobState)" != PENDING ]; do sleep 0.02; done
	: >"$TMP/job.out"
	# A release in the second of the requeue fails (credential revoked).
	sleep 1.5
	t0=$(now)
	scontrol update JobId="$id" StartTime=now || fail "release"
	while ! grep -q '^first-step' "$TMP/job.out" 2>/dev/null; do sleep 0.005; done
	t1=$(now)
	inside=$(sed -n 's/^first-step //p' "$TMP/job.out")
	printf 'round %d: release to first step %.3f s (inside the process %.3f s)\n' \
		"$r" "$(echo "$t1 - $t0" | bc)" "$inside"
done
scancel "$id"
