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
[ -x /usr/sbin/slurmctld ] || skip "slurmctld not installed (Debian package slurmctld)"
[ -x /usr/sbin/slurmd ] || skip "slurmd not installed (Debian package slurmd)"
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
