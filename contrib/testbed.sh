#!/usr/bin/env bash
# The testbed: a workload trace replayed on a real Slurm cluster on this
# machine, scheduled by sched/backfill or by sched/copus with one of its
# policies, measured from Slurm's accounting, and set beside copus-sim's run
# of the same workload on the same cluster.
#
#   contrib/testbed.sh --policy backfill|pollux|copus --out DIR
#                      [--cluster SPEC] [--scale F] [--profiles DIR]
#                      [--sample N] [--build DIR] [--limit SECONDS]
#                      [--gpus FILE.json] WORKLOAD.csv
#   contrib/testbed.sh compare [--plot FILE.png] DIR...
#
# WORKLOAD.csv is in copus-sim's format (name,time,application,num_replicas,
# batch_size); its first N jobs are replayed (--sample, default 40; 0: all).
# --profiles (default ../shared/data/sia/traces beside the source tree) holds
# the jobs' measured profiles in Pollux's layout: every job is a
# copus-trainer --profile that trains as copus-sim's job of the same model
# does. SPEC is copus-sim's --cluster: "16x4" (one GPU type, named t4 on the
# cluster) or TYPE:NODESxGPUS,... with the same NODES for every type (default
# aws:8x4,dgx-ext:8x4 for typed profiles, 16x4 for untyped ones). Trace time
# runs F times faster than the trace (--scale; default: the F that fits
# copus-sim's backfill makespan of the sample into 12 minutes). --gpus
# names the GPU constants per type (sched_copus(8) copus_planner_gpus)
# that sched/copus and copus-sim read; by default Sia's types are named
# after the GPUs they are (aws: t4, dgx-ext: a100), as a site would.
#
# The cluster is contrib/loopback-cluster.sh's, with slurmdbd on a MariaDB
# server of its own (127.0.0.1 only, under DIR) and priority/multifactor;
# sched/backfill runs with Slurm's default SchedulerParameters; sched/copus
# with the example's settings, the policy named and a round every 60 trace
# seconds. Jobs ask for their workload request on as few nodes as hold it
# (rigid ones on nodes of one GPU type: --constraint="[aws|dgx-ext]"); under
# copus they are elastic from 1 GPU to the whole cluster.
#
# It writes, in trace seconds:
#   DIR/testbed.json  mean, p99, makespan, finished, restarts per job,
#                     GPU-seconds, the overheads (restart gap, idle GPUs
#                     while jobs waited, rounds per minute, how late jobs
#                     were submitted), jcts per job
#   DIR/sim.json      copus-sim's --summary of the same workload, cluster,
#                     policy, round interval and restart costs: its policy
#                     is told the cost sched/copus's was; each allocation
#                     costs one of the costs measured
#                     (DIR/restart-delays.csv), drawn at random; every
#                     figure is the mean over 8 draws (TESTBED_SIM_DRAWS),
#                     each draw's mean JCT under "draws"
#                     (backfill: with sched/backfill's cycle of 30 s, its
#                     jobs on Slurm's uneven GPUs per node; the others:
#                     --equal-per-node, as sched/copus allocates, and
#                     --min-run, its copus_restart_delay)
#   DIR/sim-commands  copus-sim's command line for each draw
#   DIR/solo.json     the floor: each job's JCT alone on the cluster under
#                     the copus policy, and their mean (sim/solo-bound.sh;
#                     its command line in DIR/solo-command)
#   DIR/jobs.csv      sacct's records (one per run of a job)
#   DIR/timeline.csv  GPUs per job every few seconds; DIR/testbed.png the
#                     timeline and the JCT CDF of testbed and simulator
# "compare" prints per run: policy, testbed mean JCT, simulated mean JCT and
# their ratio, and the other figures side by side, and each mean over the
# floor; --plot draws the runs'
# GPUs per job over time side by side, and their JCT distributions.
set -euo pipefail

PROG=testbed.sh
die() { echo "$PROG: $*" >&2; exit 1; }
say() { echo "== $*"; }

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=$top/contrib/testbed.py

if [ "${1:-}" = compare ]; then
	shift
	[ $# -gt 0 ] || die "usage: $PROG compare [--plot FILE.png] DIR..."
	exec python3 "$py" compare "$@"
fi

policy="" out="" spec="" scale="" profiles="" sample=40 build="" limit=900
gpus_file=""
workload=""
while [ $# -gt 0 ]; do
	case $1 in
	--policy) policy=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--cluster) spec=${2:?}; shift 2 ;;
	--scale) scale=${2:?}; shift 2 ;;
	--profiles) profiles=${2:?}; shift 2 ;;
	--sample) sample=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	--limit) limit=${2:?}; shift 2 ;;
	--gpus) gpus_file=${2:?}; shift 2 ;;
	-h | --help) sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option '$1' (--help lists them)" ;;
	*) [ -z "$workload" ] || die "one workload only ('$workload', then '$1')"
	   workload=$1; shift ;;
	esac
done
case $policy in
backfill | pollux | copus) ;;
"") die "--policy is required: backfill, pollux or copus" ;;
*) die "--policy '$policy': not backfill, pollux or copus" ;;
esac
[ -n "$out" ] || die "--out DIR is required"
[ -n "$workload" ] || die "a workload CSV is required"
[ -r "$workload" ] || die "$workload: cannot read"
case $sample in '' | *[!0-9]*) die "--sample '$sample': not a number of jobs" ;; esac
case $limit in '' | *[!0-9]*) die "--limit '$limit': not a number of seconds" ;; esac
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd starts the jobs, mariadbd and slurmdbd run as root)"
profiles=${profiles:-$top/../shared/data/sia/traces}
[ -d "$profiles" ] || die "--profiles $profiles: no such directory"
profiles=$(cd "$profiles" && pwd)
build=${build:-$top/build}
[ -d "$build" ] || die "--build $build: no such directory (a configured and built build tree)"
build=$(cd "$build" && pwd)
trainer=$build/contrib/trainer/copus-trainer
sim=$build/sim/copus-sim
plugins=$build/plugin/.libs
for f in "$trainer" "$sim"; do
	[ -x "$f" ] || die "$f not built (make in $build)"
done
[ "$policy" = backfill ] || [ -f "$plugins/sched_copus.so" ] ||
	die "$plugins/sched_copus.so not built (configure with Slurm's source, then make)"
for c in mariadbd mariadb-install-db mariadb /usr/sbin/slurmdbd sacct gnuplot; do
	command -v "$c" >/dev/null ||
		die "$c not found (Debian packages: mariadb-server, slurmdbd, slurm-client, gnuplot-nox)"
done

# The cluster: one GPU type per group of nodes, the same count in each.
if [ -z "$spec" ]; then
	if ls "$profiles"/*/placements-*.csv >/dev/null 2>&1; then
		spec=aws:8x4,dgx-ext:8x4
	else
		spec=16x4
	fi
fi
nodes=0 gpus_arg="" per="" types=()
IFS=, read -ra groups <<<"$spec"
for g in "${groups[@]}"; do
	if [[ $g =~ ^([A-Za-z0-9_.-]+):([0-9]+)x([0-9]+)$ ]]; then
		t=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]} c=${BASH_REMATCH[3]}
	elif [[ $g =~ ^([0-9]+)x([0-9]+)$ ]] && [ ${#groups[@]} -eq 1 ]; then
		t=t4 n=${BASH_REMATCH[1]} c=${BASH_REMATCH[2]}
	else
		die "--cluster '$spec': '$g' is not NODESxGPUS or TYPE:NODESxGPUS"
	fi
	[ -z "$per" ] || [ "$per" = "$n" ] ||
		die "--cluster '$spec': the loopback cluster gives every GPU type the same number of nodes"
	[ "$c" -ge 1 ] && [ "$c" -le 8 ] || die "--cluster '$spec': $c GPUs a node (1 to 8)"
	per=$n
	nodes=$((nodes + n))
	gpus_arg+="${gpus_arg:+,}$t:$c"
	types+=("$t")
done
[ "$nodes" -ge 1 ] && [ "$nodes" -le 64 ] || die "--cluster '$spec': $nodes nodes (1 to 64)"
gpn=${gpus_arg##*:}
if [ -n "$gpus_file" ]; then
	[ -r "$gpus_file" ] || die "--gpus $gpus_file: cannot read"
	gpus_file=$(cd "$(dirname "$gpus_file")" && pwd)/$(basename "$gpus_file")
fi

rm -rf "$out"
mkdir -p "$out"/{logs,ckpt,db,run,etc}
out=$(cd "$out" && pwd)
log=$out/testbed.log

# What GPU each type is, for the plugin's and the simulator's estimates of
# a job on a type it has not run on: Sia's types by the GPUs they are.
if [ -z "$gpus_file" ]; then
	gpus_file=$out/gpus.json
	python3 - "${types[@]}" >"$gpus_file" <<'PY'
import json, sys
known = {"aws": "t4", "dgx-ext": "a100"}
print(json.dumps({"version": 1,
                  "gpus": {t: known[t] for t in sys.argv[1:] if t in known}}))
PY
fi

# The sample, in copus-sim's format.
python3 "$py" sample "$workload" "$sample" "$out/workload.csv"
njobs=$(($(wc -l <"$out/workload.csv") - 1))
[ "$njobs" -ge 1 ] || die "$workload: no job to replay"

# The time scale: copus-sim's backfill makespan of the sample in 12 minutes.
if [ -z "$scale" ]; then
	"$sim" --cluster "$spec" --profiles "$profiles" --policy backfill \
		--summary "$out/scale.json" "$out/workload.csv" >/dev/null ||
		die "copus-sim could not run the sample (see above)"
	scale=$(python3 "$py" scale "$out/scale.json" 720)
fi
[[ $scale =~ ^[0-9]+(\.[0-9]+)?$ ]] && python3 -c "import sys; sys.exit(not float('$scale') >= 1)" ||
	die "--scale '$scale': not a number of 1 or more"
# A round every 60 trace seconds, at least one a second.
interval=$(python3 -c "print(max(1, round(60 / $scale)))")
say "$njobs jobs of $workload on $spec ($nodes nodes), policy $policy, trace time x $scale, a round every ${interval}s"

ports=($(python3 -c "
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(('127.0.0.1', 0))
print(' '.join(str(x.getsockname()[1]) for x in s))"))
dbport=${ports[0]} dbdport=${ports[1]}
cdir=$out/cluster
export SLURM_CONF=$cdir/etc/slurm.conf

teardown() {
	trap - EXIT INT TERM HUP
	if [ -f "$SLURM_CONF" ]; then
		scancel --quiet --full --signal=KILL -u root 2>/dev/null || true
		sleep 1
		QUIET=1 "$top/contrib/loopback-cluster.sh" down "$cdir" >/dev/null 2>&1 || true
	fi
	local f p
	for f in "$out/run/slurmdbd.pid" "$out/run/mariadb.pid"; do
		p=$(cat "$f" 2>/dev/null) || continue
		kill "$p" 2>/dev/null || continue
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
	done
}
trap teardown EXIT
trap 'echo; say interrupted; exit 130' INT TERM HUP

# MariaDB on 127.0.0.1, its data under DIR, and slurmdbd on it.
say "MariaDB and slurmdbd on 127.0.0.1:$dbport and :$dbdport"
mariadb-install-db --no-defaults --datadir="$out/db" --user=root \
	--auth-root-authentication-method=socket --skip-test-db >>"$log" 2>&1 ||
	die "mariadb-install-db failed (see $log)"
mariadbd --no-defaults --datadir="$out/db" --socket="$out/run/mariadb.sock" \
	--port="$dbport" --bind-address=127.0.0.1 --user=root \
	--pid-file="$out/run/mariadb.pid" --log-error="$out/logs/mariadb.log" \
	--innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 \
	--skip-name-resolve >>"$log" 2>&1 &
for _ in $(seq 100); do
	mariadb --socket="$out/run/mariadb.sock" -e 'select 1' >/dev/null 2>&1 && break
	sleep 0.2
done
mariadb --socket="$out/run/mariadb.sock" -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'testbed'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';" ||
	die "MariaDB did not start (see $out/logs/mariadb.log)"
mkdir -p "$out/dbd"
cat >"$out/dbd/slurmdbd.conf" <<EOF
AuthType=auth/none
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbdport
SlurmUser=root
DebugLevel=info
LogFile=$out/logs/slurmdbd.log
PidFile=$out/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$dbport
StorageUser=slurm
StoragePass=testbed
StorageLoc=testbed
EOF
chmod 600 "$out/dbd/slurmdbd.conf"
# slurmdbd reads slurmdbd.conf beside the SLURM_CONF it is given.
SLURM_CONF=$out/dbd/slurm.conf /usr/sbin/slurmdbd >>"$log" 2>&1 || die "slurmdbd did not start"
for _ in $(seq 100); do
	grep -q 'slurmdbd version .* started' "$out/logs/slurmdbd.log" 2>/dev/null && break
	sleep 0.2
done
grep -q 'started' "$out/logs/slurmdbd.log" || die "slurmdbd did not start (see $out/logs/slurmdbd.log)"

extra="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbdport
AccountingStorageTRES=gres/gpu
PriorityType=priority/multifactor
MaxJobCount=100000"
args=(--nodes "$nodes" --gpus "$gpus_arg" --cpus 8 --mem 64000 --conf-extra "$extra")
restart=""
if [ "$policy" = backfill ]; then
	args+=(--sched backfill)
else
	# The example's settings, with the policy and its round in trace time.
	# The policy counts what the plugin's rescales were measured to cost
	# (copus_restart_cost=measured: 0.5-1.5 s here, from the request to
	# the first step on the new GPUs: the checkpoint, the wait for the
	# second after Slurm's requeue, the launch), and until the first is
	# measured 2 s of wall time, or the example's 30 trace seconds where
	# that is more. copus-sim's policy counts the same
	# (--restart-measured); its allocations cost what they measured here.
	restart=$(python3 -c "print(max(2, round(30 / $scale)))")
	args+=(--sched copus --plugin-dir "$plugins" --spank "$plugins/spank_copus.so"
		--sched-params "copus_policy=$policy,copus_interval=$interval,copus_restart_delay=$interval,copus_restart_cost=measured:$restart,copus_checkpoint_deadline=60,copus_planner_gpus=$gpus_file")
fi
say "the cluster: ${args[*]}"
QUIET=1 "$top/contrib/loopback-cluster.sh" up "$cdir" "${args[@]}" >>"$log" 2>&1 ||
	die "the cluster did not come up (logs in $cdir/log)"

# slurmctld's background loop runs the main scheduler at most once every
# batch_sched_delay (3 s) after its last pass, and its first pass comes a
# few seconds after it starts, with or without jobs. A job submitted
# within 3 s of that pass waits for a grid set by slurmctld's start, which
# copus-sim does not know. The replay starts once that pass is 3 s old.
if [ "$policy" = backfill ]; then
	for ((i = 0; i < 60; i++)); do
		grep -q 'SchedulerParameters=' "$cdir/log/slurmctld.log" 2>/dev/null && break
		sleep 0.5
	done
	sleep 3
fi

# The batch script: the node's GPU type, then the trainer in place of the
# shell, so that the rescale signal reaches libcopus.
fixed=""
[ "$policy" = backfill ] && fixed=1
cat >"$out/job.sh" <<EOF
#!/bin/bash
t=\$(scontrol -o show node "\$SLURMD_NODENAME" | sed -n 's/.* Gres=gpu:\([A-Za-z0-9_.-]*\):.*/\1/p')
export COPUS_GPU_TYPE=\${t:-default}
app=\$1 batch=\$2 gpus=\$3
exec "$trainer" --profile "$profiles/\$app" --speedup $scale \\
	--checkpoint "$out/ckpt/\$SLURM_JOB_NAME" --checkpoint-interval 3600 \\
	--print-every 100000 --stamp ${fixed:+--fixed-batch "\$batch" --gpus "\$gpus"}
EOF
chmod +x "$out/job.sh"

# One job. A rigid one asks for its GPUs on as few nodes as hold them
# (-N, --gpus: Slurm fills the nodes, as copus-sim places a job) and, on a
# cluster of several GPU types, for nodes of one type, any of them (Slurm's
# matching OR), as a user who does not want a job spread over T4s and A100s
# at once would. An elastic one (copus) asks for the same GPUs on each of
# as few nodes as hold them, as sched/copus allocates; the plugin gives
# every job GPUs of one type.
submit() {
	local name=$1 app=$2 gpus=$3 batch=$4 k per id u req=()
	if [ "$policy" = backfill ]; then
		k=$(((gpus + gpn - 1) / gpn))
		((k <= nodes)) || die "job $name asks for $gpus GPUs, more than $spec has"
		req=(-N "$k" --gpus="$gpus")
		[ ${#types[@]} -lt 2 ] || req+=(--constraint="[$(IFS='|'; echo "${types[*]}")]")
	else
		for ((k = 1; k <= nodes; k++)); do
			((gpus % k == 0 && gpus / k <= gpn)) && break
		done
		((k <= nodes)) || die "job $name asks for $gpus GPUs, which $spec cannot hold with equal GPUs per node"
		per=$((gpus / k))
		req=(-N "$k" --gres=gpu:"$per" --elastic=1-$((nodes * gpn)))
	fi
	# A job the cluster can never hold is refused by sbatch: the report
	# lists it and the replay goes on.
	u=$(usec)
	if ! id=$(sbatch --parsable -J "$name" -o "$out/logs/$name.out" --open-mode=append \
		"${req[@]}" "$out/job.sh" "$app" "$batch" "$gpus" 2>"$out/sbatch.err"); then
		echo "$name,$(tr '\n' ' ' <"$out/sbatch.err")" >>"$out/refused.csv"
		echo "$PROG: sbatch refused $name: $(cat "$out/sbatch.err")" >&2
		return 0
	fi
	printf '%s,%s,%d.%06d\n' "$id" "$name" $((u / 1000000)) $((u % 1000000)) >>"$out/submitted.csv"
}

# Wall time now, in microseconds since the epoch (no process per call).
usec() { local t=$EPOCHREALTIME; echo $((10#${t/[.,]/})); }

# A sample every 2 s, until DIR/.replayed appears: GPUs per running job and
# its type, and the pending count. It runs beside the arrivals, so that
# neither waits for the other.
sampler() {
	local now pend id name tres nn nl g first
	set +e
	while [ ! -e "$out/.replayed" ]; do
		now=$((($(usec) - t0us) / 1000))
		now=$(printf '%d.%03d' $((now / 1000)) $((now % 1000)))
		pend=$(squeue -h -t PENDING 2>/dev/null | wc -l)
		while IFS='|' read -r id name tres nn nl; do
			[ -n "$id" ] || continue
			g=$(sed -n 's/.*gres\/gpu=\([0-9]*\).*/\1/p' <<<"$tres")
			first=$(scontrol show hostnames "$nl" 2>/dev/null | head -n 1)
			echo "$now,$id,$name,${g:-0},${nodetype[$first]:-},$pend" >>"$out/timeline.csv"
		done < <(squeue -h -t RUNNING -O 'JobID:|,Name:|,tres-alloc:|,NumNodes:|,NodeList:' 2>/dev/null | tr -d ' ')
		[ "$pend" -gt 0 ] && ! grep -q ",$pend\$" <<<"$(tail -n 1 "$out/timeline.csv")" &&
			echo "$now,,,0,,$pend" >>"$out/timeline.csv"
		sleep 2
	done
}

say "replaying (at most ${limit}s)"
echo "id,name,submit_wall" >"$out/submitted.csv"
echo "wall,job,name,gpus,type,pending" >"$out/timeline.csv"
rm -f "$out/.replayed"
declare -A nodetype
while read -r n g; do
	nodetype[$n]=$(sed -n 's/^gpu:\([A-Za-z0-9_.-]*\):.*/\1/p' <<<"$g")
done < <(sinfo -h -N -o '%N %G')
mapfile -t rows < <(tail -n +2 "$out/workload.csv")
# Each arrival's wall time after the start, in microseconds (trace time / F).
mapfile -t due < <(awk -F, -v f="$scale" 'NR > 1 { printf "%.0f\n", $2 / f * 1e6 }' "$out/workload.csv")
t0us=$(usec)
printf '%d.%06d\n' $((t0us / 1000000)) $((t0us % 1000000)) >"$out/start"
sampler &
spid=$!
# Each job is submitted when it is due: the replay sleeps until then.
endus=$((t0us + limit * 1000000))
left=""
for ((next = 0; next < ${#rows[@]}; next++)); do
	at=$((t0us + due[next]))
	if ((at > endus)); then
		left=1
		break
	fi
	wait_us=$((at - $(usec)))
	((wait_us <= 0)) || sleep "$(printf '%d.%06d' $((wait_us / 1000000)) $((wait_us % 1000000)))"
	IFS=, read -r name _ app reps batch <<<"${rows[$next]}"
	submit "$name" "$app" "$reps" "$batch"
done
# Then until every job has finished, or the time is up.
# A squeue that fails (slurmctld busy or restarting) says nothing about
# the jobs: the loop asks again a second later.
while [ -z "$left" ]; do
	if live=$(squeue -h 2>/dev/null | wc -l) && [ "$live" -eq 0 ]; then
		say "every job finished after $((($(usec) - t0us) / 1000000))s"
		break
	fi
	(($(usec) < endus)) || left=1
	[ -n "$left" ] || sleep 1
done
[ -z "$left" ] || say "${limit}s are up: $(squeue -h 2>/dev/null | wc -l) job(s) left unfinished"
touch "$out/.replayed"
wait "$spid" || true
rm -f "$out/.replayed"

# Let accounting catch up, then read it.
sleep 3
sacct -X -P -D -n --starttime=now-1days -o JobIDRaw,JobName,Submit,Start,End,State,AllocTRES,ExitCode,NodeList \
	>"$out/sacct.txt" || die "sacct failed"
[ "$policy" = backfill ] || "$build/plugin/copusctl" stats --state-dir "$cdir/state" >"$out/copus-stats.txt" 2>&1 || true
cp "$cdir/log/slurmctld.log" "$out/logs/" 2>/dev/null || true

# What copus-sim says of the same workload, with the measured restart costs.
python3 "$py" report --out "$out" --scale "$scale" --policy "$policy" \
	--interval "$interval" --ctld-log "$cdir/log/slurmctld.log" ${restart:+--told-cost "$restart"}
# copus-sim replays the jobs that Slurm took.
awk -F, 'NR == FNR { no[$1] = 1; next } FNR == 1 || !($1 in no)' \
	"$out/refused.csv" "$out/workload.csv" >"$out/sim-workload.csv" 2>/dev/null ||
	cp "$out/workload.csv" "$out/sim-workload.csv"
rdelay=$(python3 -c "import json; print(json.load(open('$out/testbed.json'))['sim_restart_delay'])")
# sched/backfill's cycle (bf_interval, 30 s of wall time) in trace time:
# between cycles only Slurm's main scheduler starts jobs, in order, and
# slurmctld runs it at most every batch_sched_delay (3 s of wall time),
# after a job was submitted or ended: at F = 90 that is 270 trace seconds,
# the difference between a job's starting on one GPU type or the other.
# sched/copus gives a job the same GPUs on each of its nodes and copus-sim
# carries out its decisions so (--equal-per-node), and leaves a job where it
# is for copus_restart_delay after a rescale's run starts (--min-run);
# sched/backfill's jobs ask for -N k --gpus=G, which Slurm may split
# unevenly (6 GPUs as 4 + 2), as copus-sim's backfill places them.
hold=$(python3 -c "print(round($interval * $scale))")
simpol=$policy even=(--equal-per-node --restart-measured --min-run "$hold")
[ "$policy" = backfill ] && even=() &&
	simpol="backfill:bf_interval=$(python3 -c "print(30 * $scale)"),sched_delay=$(python3 -c "print(3 * $scale)")"
# slurmctld's main scheduler runs when its background loop wakes, about
# once a second at a phase of its own (testbed.json's ctld_tick_*): a job
# that arrives just after a wake-up waits for the next, and a 3 s delay
# then decides which GPUs are free for it. copus-sim's backfill rounds fall
# at the same instants, in trace time.
rounds=(--interval "$(python3 -c "print($interval * $scale)")")
if [ "$policy" = backfill ]; then
	ticks=$(python3 -c "import json; t = json.load(open('$out/testbed.json'))
if t.get('ctld_tick_period_wall'):
    i = round(t['ctld_tick_period_wall'] * $scale, 6)
    print(i, round(t['ctld_tick_phase_wall'] * $scale, 6) % i)")
	[ -z "$ticks" ] || rounds=(--interval "${ticks% *}" --round-phase "${ticks#* }")
fi
# Each allocation costs one of the measured costs (first starts apart from
# rescales), drawn at random: the mean over $draws draws is the prediction
# (a 40-job run moves by several percent with the costs' draw alone).
draws=${TESTBED_SIM_DRAWS:-8}
# Each draw's command line goes to DIR/sim-commands, to be run again.
sims=()
: >"$out/sim-commands"
for ((seed = 1; seed <= draws; seed++)); do
	cmd=("$sim" --cluster "$spec" --profiles "$profiles" --policy "$simpol" "${even[@]}"
		--gpus "$gpus_file" "${rounds[@]}"
		--restart-delay "$rdelay" --restart-delays "$out/restart-delays.csv" --seed "$seed"
		--summary "$out/sim-draw-$seed.json" "$out/sim-workload.csv")
	printf '%q ' "${cmd[@]}" >>"$out/sim-commands"
	echo >>"$out/sim-commands"
	"${cmd[@]}" >"$out/sim.txt" 2>&1 || die "copus-sim failed (see $out/sim.txt)"
	sims+=("$out/sim-draw-$seed.json")
done
python3 "$py" merge-sims --out "$out/sim.json" "${sims[@]}"
# The floor: each job alone on the cluster under the copus policy, as
# sched/copus would run it (sim/solo-bound.sh), whatever the run's policy.
solo=(sh "$top/sim/solo-bound.sh" --json "$out/solo.json" "$out/sim-workload.csv"
	"$sim" --cluster "$spec" --profiles "$profiles" --policy copus
	--equal-per-node --restart-measured --min-run "$hold"
	--gpus "$gpus_file" "${rounds[@]}" --restart-delay "$rdelay"
	--restart-delays "$out/restart-delays.csv" --seed 1)
printf '%q ' "${solo[@]}" >"$out/solo-command"
echo >>"$out/solo-command"
"${solo[@]}" >"$out/solo.txt" 2>&1 || die "sim/solo-bound.sh failed (see $out/solo.txt)"
python3 "$py" plot --out "$out"
python3 "$py" compare "$out"
