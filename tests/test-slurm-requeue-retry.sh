#!/bin/bash
# A job that ends of being asked to checkpoint, and whose requeue slurmctld
# refuses at first, is requeued by a later round, not lost (one node, 4
# a100 GPUs; a rigid job that needs 2 of them arrives while an elastic job
# holds all 4). The elastic job dies of the rescale signal (its script does
# not exec its trainer), so sched/copus requeues it itself
# (copus__ended_of_request, then copus__requests). Its first two requeues
# are refused by tests/fault-requeue.c, preloaded into slurmctld, with the
# error slurmctld gives a job it cannot alter yet: the plugin must try
# again in the next rounds, and the job resume from its checkpoint with
# restart count 1. Before the fix the job was marked requeued after the
# refusal and left FAILED.
#
# The refusal is injected: sched/copus requeues a job only once it has
# finished completing, and Slurm 22.05 to 26.05 requeue a finished job
# unless its partition is gone, it is not a batch job or it was submitted
# --no-requeue, none of which passes with time. A refusal that passes (a
# lost RPC, a slurmctld too busy to answer) is what the retry is for.
. "$(dirname "$0")/slurm-common.sh"

refused_requeue_setup 2
out=$TMP/c/log/slurmctld.out
grep -q "JobId=$e: requeue refused (1 of 2)" "$out" ||
	fail "the fault did not refuse the first requeue of job $e: $(cat "$out")"
wait_line "$TMP/e.out" '^start restart=1 gpus=[12] step=[1-9]' 30 ||
	fail "job $e was lost: its requeue was refused and it was not requeued again; it is $(job_field "$e" JobState) with $(job_field "$e" Restarts) restart(s) ($(grep -c "JobId=$e: requeue refused" "$out") refusal(s); e.out: $(tr '\n' ';' <"$TMP/e.out"))"
grep -q "JobId=$e: requeue refused (2 of 2)" "$out" ||
	fail "the plugin requeued job $e without trying while it was refused: $(cat "$out")"
n=$(grep -c "JobId=$e .* after it was asked to checkpoint, and cannot be requeued yet" "$log")
[ "$n" = 2 ] || fail "the plugin logged $n refused requeues of job $e, expected 2"
grep -Eq "JobId=$e ended \(died of signal [0-9]+\) after it was asked to checkpoint; requeued" "$log" ||
	fail "the plugin did not log the requeue that worked"
wait_state "$e" RUNNING 10 || fail "the requeued job is not running"
[ "$(job_field "$e" Restarts)" = 1 ] ||
	fail "job $e has $(job_field "$e" Restarts) restarts, expected 1"
grep -c '^start ' "$TMP/e.out" | grep -qx 2 ||
	fail "job $e did not run exactly twice: $(cat "$TMP/e.out")"
wait_state "$r" RUNNING 10 || fail "the rigid job is not running beside it"
scancel "$e" "$r"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
