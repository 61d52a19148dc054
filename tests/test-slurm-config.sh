#!/bin/bash
# sched/copus checks the slurm.conf settings it relies on, at start and at
# "scontrol reconfigure", and logs a warning for each one missing; a bad
# copus_ key names the value that stays in effect.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
cluster_up --nodes 1 --gpus a100:2 --sched copus \
	--plugin-dir "$(dirname "$so")" --sched-params copus_interval=7
log=$TMP/c/log/slurmctld.log
conf=$TMP/c/etc/slurm.conf

wait_log "sched/copus: policy copus, interval 7s"
grep -q "sched/copus: slurm.conf:" "$log" &&
	fail "warnings about a complete slurm.conf: $(grep 'sched/copus: slurm.conf:' "$log")"

# Take away what the plugin relies on, and give it a bad key.
sed -i -e '/^DefMemPerCPU=/d' -e '/^RequeueExit=/d' \
	-e 's/^SchedulerParameters=.*/SchedulerParameters=defer,copus_interval=7,copus_interval=0/' \
	"$conf"
grep -q '^SelectTypeParameters=CR_Core_Memory' "$conf" ||
	skip "the loopback cluster does not count memory"
scontrol reconfigure || fail "scontrol reconfigure failed"
wait_log "sched/copus: slurm.conf: SchedulerParameters has no sched_interval=-1"
wait_log "sched/copus: slurm.conf: SelectTypeParameters has CR_\\*_Memory, but there is no DefMemPerCPU"
wait_log "sched/copus: slurm.conf: RequeueExit does not hold 75"
wait_log "copus_interval=0 is not a whole number from 1 to 3600; copus_interval stays 7"
grep -q "sched/copus: slurm.conf: JobRequeue=0" "$log" &&
	fail "a warning about JobRequeue, which is 1"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
