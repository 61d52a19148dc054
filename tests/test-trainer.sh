#!/bin/bash
# copus-trainer outside Slurm: a few steps on 4 GPUs of 1 node, the plan's
# batch, a checkpoint on SIGUSR1 (exit 75) and the resume from it, the end at
# the target (exit 0), periodic checkpoints that a run killed without warning
# (its node failed) resumes from, and bad arguments (exit 2, the argument
# named).
T=$PWD/contrib/trainer/copus-trainer
[ -x "$T" ] || { echo "SKIP: $T not built"; exit 77; }
TMP=$(mktemp -d /tmp/copus-trainer.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# Outside a job whatever Slurm set for the caller must not leak in.
unset SLURM_JOB_ID SLURM_RESTART_COUNT SLURM_GPUS_ON_NODE SLURM_JOB_NUM_NODES \
	SLURM_NNODES SLURM_NTASKS SLURM_PROCID SLURM_LOCALID CUDA_VISIBLE_DEVICES \
	COPUS_CKPT_DIR COPUS_GPU_TYPE COPUS_CKPT_INTERVAL

# A few steps, 100x faster than the T4 would take.
out=$("$T" --app cifar10 --gpus 4 --speedup 100 --max-steps 20 \
	--print-every 5 --seed 1 2>&1) || fail "20 steps failed: $out"
echo "$out"
grep -q '^started job 0 restart 0: cifar10 on 4 t4 GPUs, 1 nodes' <<<"$out" ||
	fail "no start line: $out"
[ "$(grep -c '^step ' <<<"$out")" -eq 4 ] || fail "expected 4 progress lines: $out"
grep -q '^step 20 progress [0-9.]*/39063 .* gpus 4 nodes 1 t4 batch [0-9]* (4 x ' <<<"$out" ||
	fail "step 20 line: $out"
grep -q '^stopped step 20 ' <<<"$out" || fail "no stop line: $out"

# One GPU, one micro-batch a step: the noise shows only against the last
# step's gradient (copus_grad_dot), as an application gives it; without it
# the job's noise scale stays unknown (phi 0) and a scheduler never sees it
# grow. Its estimate is near the --noise it trains with. The batch is held
# at 128 (--max-batch): with that noise scale the job may grow its batch
# before step 600, to two micro-batches a step, when its first estimates
# come early.
out=$("$T" --app cifar10 --gpus 1 --speedup 1000 --max-steps 600 --noise 2000,1 \
	--max-batch 128 --print-every 200 --seed 3 2>&1) || fail "the one-GPU run failed: $out"
phi=$(grep '^step 600 .* (1 x 128 x 1) ' <<<"$out" | sed -n 's/.* phi \([0-9]*\)$/\1/p')
[ -n "$phi" ] || fail "no step 600 line at batch 128 on one GPU: $out"
[ "$phi" -ge 500 ] && [ "$phi" -le 8000 ] ||
	fail "one GPU, one micro-batch a step: noise scale $phi, not near 2000: $out"

# Steps take the modelled time: 20 steps of cifar10 on 4 T4s at local >= 32
# take at least 20 x (0.017 + 32 x 0.0007) / 100 s; with --speedup 1000 the
# same steps take a tenth (less the loop's own cost).
s=$(date +%s.%N)
"$T" --app cifar10 --gpus 4 --speedup 10 --max-steps 20 --seed 1 >/dev/null ||
	fail "the timed run failed"
e=$(date +%s.%N)
awk -v s="$s" -v e="$e" 'BEGIN { exit !(e - s >= 20 * 0.039 / 10) }' ||
	fail "20 steps at --speedup 10 took $(awk -v s="$s" -v e="$e" 'BEGIN { print e - s }') s, less than modelled"

# A rescale request: checkpoint, exit 75; the next run resumes there and
# runs to the target.
ck=$TMP/ck
"$T" --app bert --gpus 2 --speedup 50 --checkpoint "$ck" --target 1000000 \
	--print-every 1 --seed 2 >"$TMP/a.out" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[ "$(grep -c '^step ' "$TMP/a.out")" -ge 3 ] && break
	sleep 0.1
done
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "after SIGUSR1 the trainer exited $rc, not 75: $(cat "$TMP/a.out")"
[ -f "$ck/copus.manifest" ] || fail "no checkpoint manifest in $ck: $(ls -la "$ck" 2>&1)"
last=$(sed -n 's/^step \([0-9]*\) .*/\1/p' "$TMP/a.out" | tail -n 1)
out=$("$T" --app bert --gpus 2 --speedup 50 --checkpoint "$ck" --target 40 \
	--print-every 1000 --seed 3 2>&1) || fail "the resumed run failed: $out"
echo "$out"
r=$(sed -n 's/^restored step \([0-9]*\) .*/\1/p' <<<"$out")
[ -n "$r" ] || fail "the second run did not restore the checkpoint: $out"
[ "$r" -ge "$last" ] || fail "restored step $r is before the last step printed, $last"
grep -q '^done step [0-9]* progress ' <<<"$out" || fail "no done line: $out"
p=$(sed -n 's/^done step [0-9]* progress \([0-9.]*\) .*/\1/p' <<<"$out")
awk -v p="$p" 'BEGIN { exit !(p >= 40) }' || fail "done below the target: $p"

# Periodic checkpoints: a run killed with SIGKILL (no checkpoint on the way
# out, as when its node fails) leaves the latest periodic one, and the next
# run resumes from it instead of from step 0.
ck=$TMP/periodic
COPUS_CKPT_INTERVAL=0.3 "$T" --app bert --gpus 2 --speedup 50 \
	--checkpoint "$ck" --target 1000000 --print-every 1 --seed 4 \
	>"$TMP/p.out" 2>&1 &
pid=$!
for _ in $(seq 200); do
	[ -f "$ck/copus.manifest" ] && [ "$(grep -c '^step ' "$TMP/p.out")" -ge 5 ] && break
	sleep 0.1
done
kill -KILL $pid
wait $pid 2>/dev/null
[ -f "$ck/copus.manifest" ] || fail "no periodic checkpoint in $ck after $(grep -c '^step ' "$TMP/p.out") steps: $(cat "$TMP/p.out")"
out=$("$T" --app bert --gpus 2 --speedup 50 --checkpoint "$ck" --max-steps 1 \
	--print-every 1000 --seed 5 2>&1) || fail "the run after the kill failed: $out"
r=$(sed -n 's/^restored step \([0-9]*\) .*/\1/p' <<<"$out")
[ -n "$r" ] && [ "$r" -ge 1 ] || fail "the run after the kill did not resume from a periodic checkpoint: $out"
# The interval may be given as an option too, and is checked.
"$T" --app bert --gpus 2 --speedup 50 --checkpoint "$TMP/opt" --max-steps 3 \
	--checkpoint-interval 0.001 >"$TMP/o.out" 2>&1 || fail "--checkpoint-interval run: $(cat "$TMP/o.out")"
[ -f "$TMP/opt/copus.manifest" ] || fail "--checkpoint-interval 0.001 wrote no checkpoint in 3 steps"

# Bad arguments: exit 2 and a message naming the argument.
bad() {
	local want=$1
	shift
	out=$("$T" "$@" 2>&1)
	rc=$?
	[ $rc -eq 2 ] || fail "'$*' exited $rc, not 2: $out"
	grep -q -- "$want" <<<"$out" || fail "'$*' did not name $want: $out"
}
bad "--perf: '1,2,3'" --perf 1,2,3
bad "--perf: 'a100=x'" --perf a100=x
bad "--perf: '0,1,1,1,1,1,1'" --perf 0,1,1,1,1,1,1
bad "--perf: 'bad type=1,1,1,1,1,1,1'" --perf "bad type=1,1,1,1,1,1,1"
bad "--app: 'mnist'" --app mnist
bad "--speedup: '-1'" --speedup -1
bad "--speedup: 'fast'" --speedup fast
bad "--batch: '0'" --batch 0
bad "--local: '8-4'" --local 8-4
bad "--noise: '10'" --noise 10
bad "--noise: '10,0.5'" --noise 10,0.5
bad "--target: 'nan'" --target nan
bad "--gpus: '0'" --gpus 0
bad "--checkpoint-interval: '0'" --checkpoint-interval 0
bad "--max-batch: '64'" --batch 128 --max-batch 64
bad "unknown option '--bogus'" --bogus
bad "option '--app' needs a value" --app
bad "argument: 'extra'" extra
COPUS_GPU_TYPE='a b' "$T" --max-steps 1 >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad COPUS_GPU_TYPE was accepted"
out=$(COPUS_CKPT_INTERVAL=often "$T" --max-steps 1 2>&1)
[ $? -ne 0 ] && grep -q COPUS_CKPT_INTERVAL <<<"$out" ||
	fail "a bad COPUS_CKPT_INTERVAL was accepted or not named: $out"
bad "--fixed-batch: '' needs --profile" --fixed-batch 64
bad "--fixed-batch: '0'" --profile x/cifar10 --fixed-batch 0
out=$("$T" --profile "$TMP/none/cifar10" --max-steps 1 2>&1)
[ $? -eq 2 ] && grep -q "$TMP/none/cifar10/placements.csv" <<<"$out" ||
	fail "a missing profile was accepted or its file not named: $out"

# --profile: the job copus-sim replays. A rigid cifar10 job on 4 T4s trains
# for as long as copus-sim says it does (its JCT less the 30-s start delay
# copus-sim charges), within the stand-in's jitter and sleep overheads.
data=${srcdir:-..}/../shared/data/pollux/traces
sim=$PWD/sim/copus-sim
if [ -d "$data/cifar10" ] && [ -x "$sim" ]; then
	printf 'name,time,application,num_replicas,batch_size\nj,0,cifar10,4,512\n' >"$TMP/one.csv"
	want=$("$sim" --cluster 1x4 --profiles "$data" --policy backfill "$TMP/one.csv" |
		sed -n 's/^one *backfill avg_jct *\([0-9]*\) s.*/\1/p')
	[ -n "$want" ] || fail "copus-sim gave no JCT for the one-job workload"
	out=$("$T" --profile "$data/cifar10" --gpu-type t4 --gpus 4 --fixed-batch 512 \
		--speedup 100 --print-every 100000 --stamp --checkpoint "$TMP/prof" 2>&1) ||
		fail "the profiled job failed: $out"
	echo "$out"
	grep -q '^started job 0 restart 0: cifar10 on 4 t4 GPUs, 1 nodes; target progress 39062.9' <<<"$out" ||
		fail "the profile's target is not copus-sim's: $out"
	grep -q '^first step at [0-9]*\.[0-9]*$' <<<"$out" || fail "no --stamp line: $out"
	got=$(sed -n 's/^done step .* after \([0-9.]*\) s in this run/\1/p' <<<"$out")
	python3 -c "import sys; g = $got * 100; w = $want - 30
print(f'trained {g:.0f} trace s, copus-sim {w} s')
sys.exit(not 0.9 * w <= g <= 1.25 * w)" ||
		fail "the profiled job trained ${got} s x 100, copus-sim says $want - 30 s"
else
	echo "skipped the --profile run: no $data/cifar10 or $sim"
fi
echo PASS
