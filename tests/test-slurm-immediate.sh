#!/bin/bash
# Slurm's own test of srun --immediate (testsuite/python/tests/commands/
# srun/test_--immediate.py in the Slurm source the plugin is built
# against), run by Slurm's test harness (atf, pytest) on a cluster under
# sched/copus with job_submit/copus: it passes, as under sched/backfill. With
# defer added to SchedulerParameters the same test fails: what defer costs.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
src=$(sed -n 's/^SLURM_SRC = //p' Makefile)
test=tests/commands/srun/test_--immediate.py
[ -f "$src/testsuite/python/$test" ] ||
	skip "the Slurm source ${src:-(none)} has no testsuite/python/$test"
/usr/bin/python3 -c 'import pytest' 2>/dev/null ||
	skip "pytest not installed (Debian package python3-pytest)"
cluster_up --nodes 2 --gpus a100:2,v100:2 --sched copus \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=10

# The harness reads where Slurm is from testsuite.conf; its files are
# copied so that nothing is written into the Slurm source.
cp -r "$src/testsuite/python" "$TMP/py" || fail "cannot copy Slurm's python testsuite"
printf 'SlurmInstallDir=/usr\nSlurmConfigDir=%s\nSlurmSourceDir=%s\n' \
	"$TMP/c/etc" "$src" >"$TMP/testsuite.conf"
slurm_test() {
	(cd "$TMP/py" && SLURM_TESTSUITE_CONF=$TMP/testsuite.conf \
		timeout 300 /usr/bin/python3 -m pytest -q -p no:cacheprovider "$test" 2>&1)
}
out=$(slurm_test) || fail "Slurm's $test failed under sched/copus: $out"
grep -q '1 passed' <<<"$out" || fail "Slurm's $test did not pass: $out"
echo "Slurm's $test: $(grep passed <<<"$out")"

conf=$TMP/c/etc/slurm.conf
# Slurm notices a new configuration by its time, to the second
# (slurm_conf.last_update, job_allocate()): a reconfigure within the second
# of the start would leave defer unseen.
sleep 1.1
sed -i 's/^SchedulerParameters=sched_interval=-1/&,defer/' "$conf"
grep -q '^SchedulerParameters=sched_interval=-1,defer' "$conf" || fail "no defer in $conf"
scontrol reconfigure || fail "scontrol reconfigure failed"
sleep 1
out=$(slurm_test) && fail "Slurm's $test passed with defer: $out"
grep -q 'Immediate execution impossible' <<<"$out" ||
	fail "with defer, Slurm's $test failed for another reason: $out"
echo "with defer it fails: Immediate execution impossible"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
