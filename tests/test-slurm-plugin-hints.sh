#!/bin/bash
# Hints under sched/copus: a job's Comment carries its goodput model; the
# plugin parses it strictly. Malformed, out-of-range, foreign, other runs'
# and oversized hints are ignored and logged once (the message names the field and the
# value), clamped values are logged, the last good hint is kept, and the
# plugin keeps scheduling.
. "$(dirname "$0")/slurm-common.sh"

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=3600
log=$TMP/c/log/slurmctld.log
status=$TMP/c/state/copus_status

e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-4 -t 10 \
	--wrap 'sleep 300') || fail "sbatch refused the elastic job"
wait_state "$e" RUNNING 30 || fail "the elastic job did not start"

# hint JSON-BODY-AFTER-THE-JOB-ID: sets the job's Comment.
good='"st":"running","step":10,"rc":0,"t":1790000000,"b0":128,"bmax":4096,"lmin":8,"lmax":256,"acc":true,"sqr":0.01,"var":10,"prog":10,"perf":{"a100":[0.02,0.002,0.05,0.002,0.005,0.0005,1.5]}'
set_comment() { scontrol update jobid="$e" comment="$1"; }

set_comment "copus1:{\"v\":1,\"job\":$e,$good}" || fail "cannot set a hint"
end=$((SECONDS + 10))
until grep -Pq "^$e\t[A-Z]+\telastic:1-4\ta100\t1\t1\t1.00\t" "$status"; do
	[ $SECONDS -lt $end ] || fail "the good hint did not reach the status: $(cat "$status")"
	sleep 0.2
done

set_comment "copus1:{\"v\":1,\"job\":$e,\"st\":" || fail "cannot set a comment"
wait_log "JobId=$e: ignoring its hint .*not valid JSON"
set_comment "copus1:{\"v\":1,\"job\":$e,${good/\"sqr\":0.01/\"sqr\":-5}}"
wait_log "JobId=$e: ignoring its hint .*sqr.*-5"
set_comment "copus1:{\"v\":2,\"job\":$e,$good}"
wait_log "JobId=$e: ignoring its hint .*\"v\": version 2"
set_comment "copus1:{\"v\":1,\"job\":$e,\"evil\":1,$good}"
wait_log "JobId=$e: ignoring its hint .*evil"
set_comment "copus1:{\"v\":1,\"job\":$((e + 1000)),$good}"
wait_log "JobId=$e: ignoring its hint: it names job $((e + 1000))"
# A hint from another run of the job (an old run still going on a node
# Slurm gave up on, or a forgery) is not the current run's.
set_comment "copus1:{\"v\":1,\"job\":$e,${good/\"rc\":0/\"rc\":5}}"
wait_log "JobId=$e: ignoring its hint: it comes from run 5 \\(rc\\), the job's current run is 0"
set_comment "copus1:{\"v\":1,\"job\":$e,${good/1.5]/50]}}"
wait_log "JobId=$e: its hint had 1 value\\(s\\) out of range, clamped"
# Oversized: Slurm itself refuses a Comment over 1024 bytes.
big="copus1:{\"v\":1,\"job\":$e,$good,\"pad\":\"$(printf '%01100d' 0)\"}"
if set_comment "$big" 2>/dev/null; then
	wait_log "JobId=$e: ignoring its hint .*longer than 1024"
else
	echo "Slurm refused a ${#big}-byte comment"
fi
# A bad hint seen over several rounds is logged once.
set_comment "copus1:[1,2,3]"
wait_log "JobId=$e: ignoring its hint .*not a JSON object"
sleep 3
n=$(grep -c "JobId=$e: ignoring its hint .*not a JSON object" "$log")
[ "$n" -eq 1 ] || fail "the same bad hint was logged $n times"
# The last good hint (the clamped one) is still the job's model.
grep -Pq "^$e\t[A-Z]+\telastic:1-4\ta100\t1\t1\t1.00\t" "$status" ||
	fail "the last good hint was dropped: $(cat "$status")"
# And the plugin keeps scheduling.
r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 5 --wrap 'sleep 1') ||
	fail "sbatch refused the rigid job"
wait_state "$r" COMPLETED 30 || fail "the rigid job did not run"
scancel "$e"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
