#!/bin/bash
# copus-emulate outside Slurm: bad arguments exit 2 with a message; a run of
# a few steps on a measured profile; a rescale request (SIGUSR1) checkpoints
# and exits 75; the next run resumes from the checkpoint (its step and
# progress never go back) and exits 0 at the target.
EMU=$PWD/runtime/copus-emulate
DATA=${COPUS_DATA:-${srcdir:-$(dirname "$0")/..}/../shared/data}
PROF=$DATA/pollux/traces/cifar10
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$EMU" ] || fail "$EMU not built"
[ -f "$PROF/placements.csv" ] || { echo "SKIP: no profile in $PROF"; exit 77; }
TMP=$(mktemp -d /tmp/copus-emulate.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES SLURM_GPUS_ON_NODE CUDA_VISIBLE_DEVICES

# bad_args EXPECTED-TEXT ARGS...: exit status 2 and a message naming the problem.
bad_args() {
	local want=$1 out rc
	shift
	out=$("$EMU" "$@" 2>&1)
	rc=$?
	[ $rc -eq 2 ] || fail "'$*' exited $rc, expected 2: $out"
	grep -qF -- "$want" <<<"$out" || fail "'$*': expected '$want' in: $out"
}
bad_args "--profile DIR is required" --target 10
bad_args "cannot open the profile directory" --profile "$TMP/none"
bad_args "--speedup: 'fast'" --profile "$PROF" --speedup fast
bad_args "--perf: '1,2'" --profile "$PROF" --perf 1,2
bad_args "--local: '9-3'" --profile "$PROF" --local 9-3
bad_args "exclude each other" --profile "$PROF" --target 5 --epochs 1
bad_args "unrecognized option" --profile "$PROF" --frobnicate
bad_args "unexpected argument 'extra'" --profile "$PROF" extra
mkdir -p "$TMP/bad"
printf 'progress,iteration,metric,grad_sqr,grad_var\n1,1,0,abc,1\n' >"$TMP/bad/validation-8.csv"
bad_args "validation-8.csv:2: column grad_sqr: 'abc'" --profile "$TMP/bad"

# A few steps on 4 emulated GPUs.
out=$("$EMU" --profile "$PROF" --gpus 4 --steps 20 --speedup 50 --target 1e6 2>&1) ||
	fail "a 20-step run failed: $out"
grep -q '^start job=0 restart=0 gpus=4 nodes=1 ' <<<"$out" || fail "no start line: $out"
grep -q '^stopped step=20 ' <<<"$out" || fail "did not stop after 20 steps: $out"

# Rescale request: checkpoint, exit 75, resume on 8 GPUs over 2 nodes.
"$EMU" --profile "$PROF" --gpus 2 --speedup 20 --target 1500 --report 0.2 \
	--ckpt-dir "$TMP/ckpt" >"$TMP/run1" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q '^step=' "$TMP/run1" && break
	sleep 0.1
done
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 75 ] || fail "the rescale request gave exit $rc, expected 75: $(cat "$TMP/run1")"
[ -f "$TMP/ckpt/copus.manifest" ] || fail "no checkpoint manifest after the request"
last=$(sed -n 's/^step=\([0-9]*\) progress=\([0-9.]*\).*/\1 \2/p' "$TMP/run1" | tail -n 1)
[ -n "$last" ] || fail "no progress line in the first run: $(cat "$TMP/run1")"
out=$(timeout 60 "$EMU" --profile "$PROF" --gpus 8 --nodes 2 --speedup 40 \
	--target 1500 --report 1 --ckpt-dir "$TMP/ckpt" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "the resumed run exited $rc"
read -r s p <<<"$(sed -n 's/^start .* step=\([0-9]*\) progress=\([0-9.]*\) .*(restored)$/\1 \2/p' <<<"$out")"
[ -n "$s" ] || fail "the second run did not restore the checkpoint"
awk -v s="$s" -v p="$p" -v l="$last" 'BEGIN { split(l, a, " ");
	exit !(s >= a[1] && p >= a[2] - 1e-6) }' ||
	fail "resumed at step $s progress $p, before the last reported ($last)"
grep -q '^done step=[0-9]* progress=\(150[0-9]\|15[1-9][0-9]\)' <<<"$out" ||
	fail "the resumed run did not finish at its target"
# The gradient noise scale the runtime measures grows with progress.
awk -F'noise_scale=' '/^step=/ { split($2, a, " "); n[++k] = a[1] }
	END { exit !(k >= 2 && n[k] > n[1]) }' <<<"$(cat "$TMP/run1"; echo "$out")" ||
	fail "the measured noise scale did not grow with progress"
echo PASS
