# Shared by the loopback-cluster test scripts (sourced, not run).
# Sets TOP (source tree), CLUSTER (the script), TMP (a fresh directory) and
# installs a trap that always tears the cluster down and removes TMP.

TOP=$(cd "${srcdir:-$(dirname "$0")/..}" && pwd)
CLUSTER=$TOP/contrib/loopback-cluster.sh

skip() { echo "SKIP: $*"; exit 77; }
fail() {
	echo "FAIL: $*"
	if [ -n "${TMP:-}" ] && [ -d "$TMP/c/log" ]; then
		echo "--- last lines of slurmctld.log"
		tail -n 30 "$TMP/c/log/slurmctld.log" 2>/dev/null
	fi
	exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root to run slurmctld and slurmd"
[ -x "${SLURM_SBIN:-/usr/sbin}/slurmctld" ] || skip "slurmctld not installed (Debian package slurmctld)"
[ -x "${SLURM_SBIN:-/usr/sbin}/slurmd" ] || skip "slurmd not installed (Debian package slurmd)"
command -v sbatch >/dev/null || skip "sbatch not installed (Debian package slurm-client)"
command -v ss >/dev/null || skip "ss not installed (Debian package iproute2)"

TMP=$(mktemp -d /tmp/copus-test.XXXXXX) || fail "mktemp"
_cleanup() {
	"$CLUSTER" down "$TMP/c" >/dev/null 2>&1
	if [ -n "${KEEP_TMP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap _cleanup EXIT
trap 'exit 1' INT TERM HUP

cluster_up() {
	"$CLUSTER" up "$TMP/c" "$@" || fail "the cluster did not come up"
	export SLURM_CONF=$TMP/c/etc/slurm.conf
}

# job_field ID FIELD: one field of "scontrol show job".
job_field() {
	scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_state ID STATE SECONDS: polls until the job is in STATE.
wait_state() {
	local id=$1 want=$2 limit=$3 s end=$((SECONDS + $3))
	while :; do
		s=$(job_field "$id" JobState)
		[ "$s" = "$want" ] && return 0
		[ $SECONDS -lt $end ] || {
			echo "job $id is '$s' after ${limit}s, expected $want"
			scontrol show job "$id"
			return 1
		}
		sleep 0.2
	done
}

# wait_line FILE REGEX SECONDS: polls until a line of FILE matches.
wait_line() {
	local end=$((SECONDS + $3))
	until grep -Eq "$2" "$1" 2>/dev/null; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.3
	done
}

# wait_checkpoint FILE: hint_job's job wrote its first periodic checkpoint
# (FILE.ckpt) within 30 s, or the test fails.
wait_checkpoint() {
	local end=$((SECONDS + 30))
	until [ -s "$1.ckpt" ]; do
		[ $SECONDS -lt $end ] || fail "the elastic job wrote no checkpoint"
		sleep 0.3
	done
}

# wait_log REGEX: slurmctld logged it (in $log) within 15 s, or the test
# fails; prints the line.
wait_log() {
	wait_line "$log" "$1" 15 || fail "slurmctld did not log /$1/"
	echo "logged: $(grep -E "$1" "$log" | tail -n 1 | cut -d' ' -f2-)"
}

# The plugins built in this build tree (libtool keeps them in plugin/.libs).
# A plugin linked with the sanitizers cannot be loaded by Debian's Slurm
# programs (the ASan runtime must come first), so tests that need one skip.
need_plugin() {
	local so=$PWD/plugin/.libs/$1.so
	[ -f "$so" ] || skip "$so not built${2:+ ($2)}"
	if ldd "$so" 2>/dev/null | grep -q 'libasan\|libubsan'; then
		skip "$1.so is linked with the sanitizers; Debian's Slurm cannot load it (run this test in the plain build)"
	fi
	echo "$so"
}

# shared_plugins: copies this build's plugins into $TMP/plugins (readable by
# every user) and prints that directory, for tests that submit jobs as
# another user: Slurm's commands load PluginDir as the user who runs them,
# and the build tree may be readable by root alone.
shared_plugins() {
	mkdir -p "$TMP/plugins" || fail "mkdir $TMP/plugins"
	cp "$PWD"/plugin/.libs/*.so "$TMP/plugins/" || fail "cannot copy the plugins"
	chmod 755 "$TMP" "$TMP/plugins"
	chmod 644 "$TMP"/plugins/*.so
	echo "$TMP/plugins"
}

# hint_job FILE: writes a batch script that acts like a training job with
# libcopus: it counts steps, publishes a copus hint (a goodput model for the
# a100 and v100 types, its progress and a far target) in its Comment, and
# resumes from its checkpoint.
# Run as: sbatch ... FILE OUT [MODE]; it appends "start restart=R gpus=G
# step=S" and "checkpoint step=S" lines to OUT. MODE: "hint" (default:
# on SIGUSR1 checkpoint, publish st=checkpointed and wait to be requeued),
# "exit75" (checkpoint after 3 s, exit with 75), "stubborn" (ignore
# SIGUSR1) or "die" (checkpoint every 10 steps and die of SIGUSR1, as a
# script that does not exec its trainer does). While OUT.hold exists the job
# publishes no hint.
hint_job() {
	cat >"$1" <<'JOB'
#!/bin/bash
out=$1 mode=${2:-hint} ckpt=$1.ckpt
step=0
[ -f "$ckpt" ] && step=$(cat "$ckpt")
n=$(tr , '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
echo "start restart=${SLURM_RESTART_COUNT:-0} gpus=$n step=$step" >>"$out"
hint() {
	scontrol update jobid="$SLURM_JOB_ID" comment="copus1:{\"v\":1,\"job\":$SLURM_JOB_ID,\"st\":\"$1\",\"step\":$step,\"rc\":${SLURM_RESTART_COUNT:-0},\"t\":$(date +%s),\"b0\":128,\"bmax\":4096,\"lmin\":8,\"lmax\":256,\"acc\":true,\"sqr\":0.01,\"var\":10,\"prog\":$step,\"tgt\":100000,\"perf\":{\"a100\":[0.02,0.002,0.05,0.002,0.005,0.0005,1.5],\"v100\":[0.04,0.004,0.05,0.002,0.005,0.0005,1.5]}}" 2>>"$out.err"
}
ask=0
case $mode in
stubborn) trap '' USR1 ;;
die) trap - USR1 ;;
*) trap 'ask=1' USR1 ;;
esac
# Requeued by the scheduler: the checkpoint is on disk already.
trap 'exit 0' TERM
# No hint while OUT.hold exists: the scheduler leaves the job as it started.
while [ -e "$out.hold" ]; do sleep 0.1; done
hint running
while :; do
	if [ $ask = 1 ]; then
		ask=2
		[ "$mode" = exit75 ] && sleep 3
		echo "$step" >"$ckpt.new" && mv "$ckpt.new" "$ckpt"
		echo "checkpoint step=$step" >>"$out"
		[ "$mode" = exit75 ] && exit 75
		hint checkpointed
	fi
	if [ $ask = 0 ]; then
		step=$((step + 1))
		# A progress report every second or so (libcopus: every 30 s).
		[ $((step % 10)) = 0 ] && hint running
		if [ "$mode" = die ] && [ $((step % 10)) = 0 ]; then
			echo "$step" >"$ckpt.new" && mv "$ckpt.new" "$ckpt"
		fi
	fi
	sleep 0.1
done
JOB
}

# refused_requeue_setup COUNT: one node of 4 a100 GPUs under sched/copus
# with tests/fault-requeue.c preloaded into slurmctld; an elastic job
# (hint_job's "die" mode: it dies of the rescale signal, so sched/copus
# requeues it itself) runs on all 4 to its first checkpoint, then a rigid
# job of 2 GPUs makes the plugin ask it to checkpoint. The fault refuses
# the elastic job's first COUNT requeues (COUNT may change later through
# $refuse). Returns once the job has died of the request and its first
# requeue was refused. Sets e, r (the two job IDs), log (slurmctld.log),
# refuse (the fault's file) and job.sh in $TMP.
refused_requeue_setup() {
	local so spank fault end
	so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
	spank=$(need_plugin spank_copus) || exit $?
	fault=$PWD/tests/.libs/fault_requeue.so
	[ -f "$fault" ] || skip "$fault not built (make check builds it)"
	FAULT=$fault
	refuse=$TMP/refuse
	: >"$refuse"
	LD_PRELOAD=$fault COPUS_FAULT_REQUEUE=$refuse \
		cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
		--plugin-dir "$(dirname "$so")" \
		--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=1,copus_checkpoint_deadline=4
	log=$TMP/c/log/slurmctld.log
	hint_job "$TMP/job.sh"
	e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:4 --elastic=1-4 -t 10 \
		"$TMP/job.sh" "$TMP/e.out" die) || fail "sbatch refused the elastic job"
	echo "$e $1" >"$refuse"
	wait_line "$TMP/e.out" '^start restart=0 gpus=4 ' 30 ||
		fail "the elastic job did not start on 4 GPUs: $(cat "$TMP/e.out" 2>&1)"
	wait_checkpoint "$TMP/e.out"
	r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 10 --wrap 'sleep 300') ||
		fail "sbatch refused the rigid job"
	wait_line "$log" "JobId=$e asked to checkpoint" 30 ||
		fail "job $e was not asked to checkpoint for the rigid job"
	wait_line "$log" "JobId=$e .* after it was asked to checkpoint, and cannot be requeued" 30 ||
		fail "the plugin did not try to requeue job $e once it died of the signal ($(scontrol -o show job "$e"); $(cat "$TMP/c/log/slurmctld.out"))"
}
