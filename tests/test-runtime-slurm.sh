#!/bin/bash
# libcopus inside real Slurm jobs on the loopback cluster:
#  - PMIx bootstrap under srun --mpi=pmix on 2 nodes x 2 tasks;
#  - hints land in the job's Comment through scontrol;
#  - a rescale request (SIGUSR1 to the batch step) is acknowledged in the
#    Comment ("checkpointed" at step k), the job exits 75 and Slurm
#    requeues it (RequeueExit=75); the restarted job resumes at step k.
. "$(dirname "$0")/slurm-common.sh"

JOB=$PWD/tests/test-runtime-job
[ -x "$JOB" ] || skip "$JOB not built"

cluster_up --nodes 2 --cpus 4
# Requeue a batch job that exits with the rescale code.
echo "RequeueExit=75" >>"$TMP/c/etc/slurm.conf"
scontrol reconfigure || fail "scontrol reconfigure"
sleep 1

# --- PMIx bootstrap -------------------------------------------------------
# (A Slurm built without PMIx, as the 26.05 release built from git for these
# tests is, has no mpi/pmix: that part alone is left out, and says so.)
if srun --mpi=list 2>&1 | grep -qw pmix; then
	out=$(srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 -t 1 "$JOB" pmix 2>&1)
	echo "$out"
	n=$(grep -c '^pmix [0-3]/4 ok$' <<<"$out")
	[ "$n" -eq 4 ] || fail "PMIx bootstrap: $n of 4 ranks got rank 0's blob"
else
	echo "NOTE: this Slurm has no mpi/pmix; the PMIx bootstrap is not tested"
fi

# Without PMIx (srun --mpi=none) four ranks have no way to bootstrap: a
# clear error, not a hang.
out=$(srun --mpi=none -N1 -n2 -t 1 "$JOB" pmix 2>&1)
grep -q 'no bcast callback' <<<"$out" ||
	fail "bootstrap without PMIx: expected a clear error, got: $out"

# --- hints and rescale ----------------------------------------------------
ckpt=$TMP/ckpt
id=$(sbatch --parsable -N1 -n1 -t 5 -o "$TMP/job.%j.out" \
	--wrap "exec $JOB train 100000 $ckpt 20") || fail "sbatch"
wait_state "$id" RUNNING 30 || fail "the training job did not start"
for _ in $(seq 100); do
	c=$(job_field "$id" Comment)
	case $c in copus1:*) break ;; esac
	sleep 0.1
done
echo "first hint: $c"
case $c in copus1:*'"st":"running"'*) ;; *) fail "no running hint in the Comment: '$c'" ;; esac
case $c in *"\"job\":$id,"*) ;; *) fail "the hint names another job: '$c'" ;; esac

sleep 1
scancel --batch --signal=USR1 "$id" || fail "scancel --signal=USR1"
for _ in $(seq 150); do
	c=$(job_field "$id" Comment)
	case $c in *'"st":"checkpointed"'*) break ;; esac
	sleep 0.1
done
echo "acknowledgement: $c"
case $c in *'"st":"checkpointed"'*) ;; *) fail "no checkpointed acknowledgement: '$c'" ;; esac
k=$(sed -n 's/.*"step":\([0-9]*\).*/\1/p' <<<"$c")
[ -n "$k" ] && [ "$k" -gt 0 ] || fail "acknowledgement without a step: '$c'"

# Slurm requeues the job; start it now rather than after the requeue delay.
for _ in $(seq 100); do
	s=$(job_field "$id" JobState)
	[ "$s" = PENDING ] && break
	sleep 0.1
done
[ "$s" = PENDING ] || fail "the job was not requeued after exit 75 (state $s)"
[ "$(job_field "$id" Restarts)" = 1 ] || fail "restart count is not 1"
# slurmd refuses a credential created in the same second as the revocation
# of the previous run's (slurm_cred.c: ctime <= revoked), and the job then
# fails for good: release it at least a second after the requeue.
sleep 1.5
scontrol update JobId="$id" StartTime=now || fail "scontrol update StartTime"
for _ in $(seq 150); do
	grep -q '^restored ' "$TMP/job.$id.out" 2>/dev/null && break
	sleep 0.1
done
cat "$TMP/job.$id.out"
r=$(sed -n 's/^restored //p' "$TMP/job.$id.out" | tail -n 1)
[ "$r" = "$k" ] || fail "the restarted job resumed at '$r', the checkpoint holds $k"
for _ in $(seq 100); do
	grep -c '^first-step ' "$TMP/job.$id.out" | grep -q 2 && break
	sleep 0.1
done
c=$(job_field "$id" Comment)
echo "after restart: $c"
scancel "$id"
echo "PASS"
