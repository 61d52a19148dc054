#!/bin/bash
# Plans travel: sched/copus plans a job whose hint describes its model with
# the core planner, and the job plans itself the same way, end to end on a
# loopback cluster (one node, 4 a100) with a real libcopus job:
# tests/test-runtime-job train-planned, one rank per GPU under srun
# --mpi=pmix, whose degrees the planner chooses on its allocation (rank 0
# logs "copus: plan type=a100 gpus=G nodes=N dp=D tp=T pp=P mb=M"). The job
# starts on 4 GPUs; when a rigid one-GPU job arrives, sched/copus moves it
# to another cell where its model has a plan, and it restarts there. After
# each start the plan in the job's log is the plan copusctl shows for the
# job (type, GPUs, nodes, dp, tp, pp, mb), and the one slurmctld.log gives
# for its decided cell, in the same words. Before the move the planner's
# constants of both sides come from a file (copus_planner_gpus, read at
# scontrol reconfigure; COPUS_PLANNER_GPUS for the job) that makes
# collectives other than sends costly: the job's new plan is a pipeline.
. "$(dirname "$0")/slurm-common.sh"

JOB=$PWD/tests/test-runtime-job
[ -x "$JOB" ] || skip "$JOB not built"
"$JOB" 2>&1 | grep -q train-planned || skip "$JOB has no train-planned"
so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=1,copus_restart_delay=2,copus_restart_cost=1,copus_checkpoint_deadline=8
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no PMIx plugin (srun --mpi=list)"
log=$TMP/c/log/slurmctld.log
st=$TMP/c/state
ctl=$PWD/plugin/copusctl
out=$TMP/e.out

# One rank per GPU of the allocation, whatever the scheduler gave (the job
# has one CPU: the ranks mostly sleep).
cat >"$TMP/job.sh" <<EOF
#!/bin/bash
n=\$(tr , '\n' <<<"\$CUDA_VISIBLE_DEVICES" | grep -c .)
echo "start restart=\${SLURM_RESTART_COUNT:-0} gpus=\$n"
export COPUS_GPU_TYPE=a100
# The planner's constants of the scheduler, once it has them from a file.
[ -s "$TMP/gpus.ok" ] && export COPUS_PLANNER_GPUS=$TMP/gpus.json
exec srun --mpi=pmix -n "\$n" --overcommit "$JOB" train-planned 1000000 "$TMP/ckpt" 100
EOF
mkdir -p "$TMP/ckpt"

# plan_of RUN: the fields of the job's plan line after its start number RUN
# (0, 1, ...), as "type=T gpus=G nodes=N dp=D tp=T pp=P mb=M".
plan_of() {
	awk -v run="$1" '/^start restart=/ { n++ } n == run + 1 && /copus: plan type=/ {
		sub(/.*copus: plan /, ""); print; exit }' "$out"
}

# same_plan RUN [LOGGED]: the job's plan line after start RUN is what
# copusctl says of the job, and with LOGGED what slurmctld.log gave for its
# decided cell (a job that starts as submitted, before its first hint, has
# no plan in slurmctld.log); prints the plan.
same_plan() {
	local p row words end=$((SECONDS + 20))
	until p=$(plan_of "$1") && [ -n "$p" ]; do
		[ $SECONDS -lt $end ] || fail "no plan line after start $1: $(cat "$out")"
		sleep 0.3
	done
	# type=a100 gpus=4 nodes=1 dp=2 tp=1 pp=2 mb=4 -> a100 4 1 dp2.tp1.pp2.mb4
	words=$(sed -E 's/^type=([^ ]+) gpus=([0-9]+) nodes=([0-9]+) dp=([0-9]+) tp=([0-9]+) pp=([0-9]+) mb=([0-9]+)$/\1 \2 \3 dp\4.tp\5.pp\6.mb\7/' <<<"$p")
	[ "$words" != "$p" ] || fail "cannot read the job's plan line: $p"
	# The status of a full round after the start shows the job running.
	end=$((SECONDS + 15))
	while :; do
		row=$("$ctl" job "$e" --state-dir "$st" 2>/dev/null |
			awk '$1 == "STATE" || $1 == "TYPE" || $1 == "GPUS" || $1 == "NODES" || $1 == "PLAN" { printf "%s ", $2 }')
		[ "$row" = "RUNNING $words " ] && break
		[ $SECONDS -lt $end ] ||
			fail "copusctl shows job $e as '$row', its log as 'RUNNING $words': $("$ctl" job "$e" --state-dir "$st")"
		sleep 0.3
	done
	[ -z "$2" ] || grep -q "JobId=$e plan $p, " "$log" ||
		fail "slurmctld.log never gives job $e the plan '$p': $(grep "JobId=$e plan" "$log")"
	"$ctl" job "$e" --state-dir "$st" | grep -Eq '^ITER_S +[0-9.e+-]+$' ||
		fail "copusctl job $e shows no time per iteration: $("$ctl" job "$e" --state-dir "$st")"
	echo "$p"
}

e=$(sbatch --parsable -o "$out" --open-mode=append --gres=gpu:a100:4 --elastic=1-4 -t 10 \
	"$TMP/job.sh") || fail "sbatch refused the elastic job"
wait_line "$out" '^start restart=0 gpus=4$' 30 ||
	fail "the job did not start on 4 GPUs: $(cat "$out" 2>&1)"
first=$(same_plan 0) || { echo "$first"; exit 1; }
echo "run 0: $first"
[[ $first == "type=a100 gpus=4 nodes=1 "* ]] || fail "the first plan is not on 4 a100: $first"
end=$((SECONDS + 15))
until job_field "$e" Comment | grep -q '"mdl":{'; do
	[ $SECONDS -lt $end ] || fail "the job's hint does not carry its model: $(job_field "$e" Comment)"
	sleep 0.3
done
"$ctl" status --json --state-dir "$st" |
	/usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin)
j = [j for j in d["jobs"] if j["jobid"] == sys.argv[1]][0]
assert j["plan"] == sys.argv[2], j
assert float(j["iter_s"]) > 0, j' "$e" "$(sed -E 's/.* dp=([0-9]+) tp=([0-9]+) pp=([0-9]+) mb=([0-9]+)$/dp\1.tp\2.pp\3.mb\4/' <<<"$first")" ||
	fail "copusctl status --json does not show job $e's plan: $("$ctl" status --json --state-dir "$st")"

# The planner's constants from a file, for sched/copus (copus_planner_gpus,
# read at reconfigure) and for the job (COPUS_PLANNER_GPUS, read as it
# starts): within a node every collective but a send costs a thousand times
# the default, so plans favour pipelines. A broken file first: logged,
# naming the file and its line, and the built-in constants stay.
gpus=$TMP/gpus.json
printf '{"version": 1,\n"gpus": {\n"a100": [,\n' >"$gpus"
sed -i "s|^SchedulerParameters=.*|&,copus_planner_gpus=$gpus|" "$SLURM_CONF"
scontrol reconfigure || fail "scontrol reconfigure"
wait_log "copus_planner_gpus: $gpus: .*line.*; the planner's constants stay the built-in ones"
slow='{"all_reduce": 1e-2, "all_gather": 1e-2, "reduce_scatter": 1e-2, "all_to_all": 1e-2, "send": 1e-5}'
slowb='{"all_reduce": 4e-9, "all_gather": 4e-9, "reduce_scatter": 4e-9, "all_to_all": 4e-9, "send": 4e-12}'
inter='{"all_reduce": 2e-05, "all_gather": 2e-05, "reduce_scatter": 2e-05, "all_to_all": 2e-05, "send": 2e-05}'
interb='{"all_reduce": 5e-11, "all_gather": 5e-11, "reduce_scatter": 5e-11, "all_to_all": 5e-11, "send": 5e-11}'
cat >"$gpus" <<JSON
{"version": 1, "gpus": {"a100": {
  "peak_flops": 19500000000000, "memory_bytes": 40000000000,
  "efficiency": [2, 2, 0.5, 2], "param_s": [0, 0, 0, 0],
  "comm_scale": {"intra": 1, "inter": 1}, "overhead_s": 0, "layer_s": 0,
  "alpha": {"intra": $slow, "inter": $inter},
  "inv_beta": {"intra": $slowb, "inter": $interb}}}}
JSON
echo ok >"$TMP/gpus.ok"
scontrol reconfigure || fail "scontrol reconfigure"
wait_log "the planner's constants of 1 GPU type\\(s\\) from $gpus"

# A rigid job that needs one of the four GPUs: the policy moves the planned
# job to a cell of its table, planned with the file's constants.
r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 -t 1 --wrap 'sleep 300') ||
	fail "sbatch refused the rigid job"
wait_line "$log" "JobId=$e asked to checkpoint" 30 ||
	fail "job $e was never asked to make room for the rigid job: $(grep -v '^#' "$st/copus_status")"
ask=$(grep "JobId=$e asked to checkpoint" "$log" | head -n 1 | cut -d' ' -f2-)
echo "$ask"
to=$(sed -n 's/.* to \([0-9]*\) a100 GPU(s) on .*/\1/p' <<<"$ask")
[ -n "$to" ] && [ "$to" -lt 4 ] && [ "$to" -ge 1 ] || fail "cannot read a new size below 4 in: $ask"
wait_line "$out" "^start restart=1 gpus=$to\$" 30 ||
	fail "the job did not restart on $to GPUs: $(cat "$out")"
second=$(same_plan 1 logged) || { echo "$second"; exit 1; }
echo "run 1: $second"
[[ $second == "type=a100 gpus=$to nodes=1 "* ]] || fail "the second plan is not on $to a100: $second"
[[ $second == *" pp=1 "* ]] && [ "$to" -gt 1 ] &&
	fail "the file's costly collectives did not give the job a pipeline on $to GPUs: $second"
wait_state "$r" RUNNING 10 || fail "the rigid job does not run beside the planned job"
grep -q 'no plan of its model fits' "$log" &&
	fail "a decision without a plan reached the safety net: $(grep 'no plan of its model' "$log")"
cat "$out"
scancel "$e" "$r"
"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' || fail "slurmctld died"
echo "PASS"
