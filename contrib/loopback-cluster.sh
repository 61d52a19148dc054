#!/bin/bash
# A real Slurm cluster (22.05, 24.11 or 26.05) on 127.0.0.1: one slurmctld and one "slurmd -N"
# per node, fake typed GPUs (character devices that gres.conf points at),
# auth/none + cred/none (or munge), and optionally the copus plugins.
#
#   loopback-cluster.sh up DIR [--nodes N] [--gpus TYPE:COUNT,...]
#                              [--cpus N] [--mem MB] [--munge]
#                              [--sched NAME] [--sched-params LIST]
#                              [--plugin-dir DIR] [--spank PATH[:ARGS]]
#                              [--wait SECONDS] [--example DIR]
#                              [--conf-extra LINES]
#   loopback-cluster.sh down DIR
#   loopback-cluster.sh status DIR
#   loopback-cluster.sh env DIR      (prints "export SLURM_CONF=...")
#   loopback-cluster.sh restart-ctld DIR [--kill] [--job-state FILE]
#                                    (stops slurmctld, with SIGKILL when
#                                    --kill, and starts it again on its state;
#                                    with FILE, a copy of an earlier
#                                    DIR/state/job_state, as its saved jobs:
#                                    a crash that lost the saves since)
#   loopback-cluster.sh restart-slurmd DIR --node NAME [--kill]
#                                    (the same for one node's slurmd; the
#                                    node's running jobs go on)
#
# --gpus lists one GPU type per group of nodes: with --nodes 4 and
# --gpus a100:4,v100:4, nodes n1-n2 get 4 a100 each and n3-n4 get 4 v100;
# each node has its GPU type as a feature too.
# --example DIR runs the cluster with the scheduling settings of
# DIR/slurm.conf.example and the spank_copus line of
# DIR/plugstack.conf.example (e.g. etc/ of the source tree).
# --conf-extra LINES adds KEY=VALUE lines (newline-separated) to slurm.conf
# last, as a site would (e.g. "MaxJobCount=100000"); a key this harness or
# --example sets is replaced. SchedulerParameters is --sched-params's.
# Everything lives under DIR (configuration, state, logs, PID files, device
# files); the daemons listen on free ports of 127.0.0.1 only, so several
# clusters can run side by side. "down" stops exactly the processes that "up"
# started (their PIDs are kept in DIR/pids) and is safe to run twice; "up" on a
# running cluster only reports it. Must run as root (slurmd starts jobs as
# their users).
set -u

PROG=loopback-cluster.sh
SLURM_SBIN=${SLURM_SBIN:-/usr/sbin}
SLURM_PLUGIN_DIR=${SLURM_PLUGIN_DIR:-/usr/lib/x86_64-linux-gnu/slurm-wlm}

die() { echo "$PROG: $*" >&2; exit 1; }
say() { [ -n "${QUIET:-}" ] || echo "$PROG: $*"; }

usage() {
	sed -n '5,/^set -u$/{/^set -u$/d;p}' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# A process we started is still ours when it is alive and its command line
# names this cluster's configuration (a recycled PID would not).
_ours() {
	local pid=$1
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/" || return 1
}

_pids() {
	[ -d "$DIR/pids" ] || return 0
	local f
	for f in "$DIR"/pids/*.pid; do
		[ -e "$f" ] || continue
		echo "$(basename "$f" .pid) $(cat "$f" 2>/dev/null)"
	done
}

# Free TCP ports on 127.0.0.1: a random start so that clusters started at
# the same time rarely race, then every candidate checked against the
# listening sockets.
_free_ports() {
	local want=$1 out=() port used
	used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
	port=$((20000 + (RANDOM * 32768 + RANDOM + $$) % 35000))
	while [ ${#out[@]} -lt "$want" ]; do
		port=$((port + 1))
		[ $port -lt 60000 ] || port=20000
		if ! grep -qx "$port" <<<"$used"; then
			out+=("$port")
		fi
	done
	echo "${out[@]}"
}

_write_conf() {
	local ports=($(_free_ports $((NODES + 1))))
	local ctld_port=${ports[0]} host i g t c first last
	host=$(hostname -s)
	local auth="AuthType=auth/none
CredType=cred/none"
	if [ -n "$MUNGE" ]; then
		auth="AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket"
	fi
	local plugindir=$SLURM_PLUGIN_DIR
	[ -z "$PLUGIN_DIR" ] || plugindir="$PLUGIN_DIR:$SLURM_PLUGIN_DIR"
	# sched/copus turns Slurm's own FIFO pass off; the other schedulers
	# run with Slurm's defaults, as sites run them.
	local sched_params=""
	[ "$SCHED" = copus ] && sched_params="sched_interval=-1"
	[ -z "$SCHED_PARAMS" ] || sched_params="${sched_params:+$sched_params,}$SCHED_PARAMS"
	local schedtype=sched/$SCHED
	[ "$SCHED" = builtin ] && schedtype=sched/builtin
	# sched/copus's submission checks, when they are built beside it.
	local jobsubmit=""
	[ "$SCHED" = copus ] && [ -f "${PLUGIN_DIR:-$SLURM_PLUGIN_DIR}/job_submit_copus.so" ] &&
		jobsubmit=JobSubmitPlugins=copus

	cat >"$DIR/etc/slurm.conf" <<EOF
# Written by $PROG for a loopback test cluster; do not edit.
ClusterName=loop$$
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
$auth
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
PluginDir=$plugindir
StateSaveLocation=$DIR/state
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdSpoolDir=$DIR/spool/%n
SlurmdPidFile=$DIR/run/slurmd.%n.pid
SlurmdLogFile=$DIR/log/slurmd.%n.log
TmpFS=$DIR/tmp/%n
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Slurm 23.11 and later default to priority/multifactor, which gives
# every job priority 1 when no weight is set; 22.05 defaulted to this.
PriorityType=priority/basic
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
JobRequeue=1
RequeueExit=75
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
KillWait=5
MinJobAge=600
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=60
InactiveLimit=0
SchedulerType=$schedtype
${sched_params:+SchedulerParameters=$sched_params}
$jobsubmit
PlugStackConfig=$DIR/etc/plugstack.conf
EOF
	# slurmd of Slurm 24.05 and later sets up a cgroup plugin whatever the
	# proctrack plugin; this cluster tracks processes without cgroups.
	local ver
	ver=$("$SLURM_SBIN/slurmctld" -V 2>/dev/null |
		awk '{ split($2, v, "."); printf "%d%02d\n", v[1], v[2] }')
	if [ "${ver:-0}" -ge 2405 ]; then
		echo "CgroupPlugin=disabled" >"$DIR/etc/cgroup.conf"
	fi
	: >"$DIR/etc/gres.conf"
	echo "AutoDetect=off" >>"$DIR/etc/gres.conf"
	local ntypes=${#GPU_TYPES[@]}
	for ((i = 1; i <= NODES; i++)); do
		local gres=""
		if [ "$ntypes" -gt 0 ]; then
			g=$(((i - 1) * ntypes / NODES))
			t=${GPU_TYPES[$g]}
			c=${GPU_COUNTS[$g]}
			# The GPU type is also the node's feature, so that a job
			# can ask for nodes of one type: --constraint="[a100|v100]".
			gres="Gres=gpu:$t:$c Features=$t"
			echo "NodeName=n$i Name=gpu Type=$t File=$DIR/dev/$t/nvidia[0-$((c - 1))]" \
				>>"$DIR/etc/gres.conf"
		fi
		echo "NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$CPUS RealMemory=$MEM $gres State=UNKNOWN" \
			>>"$DIR/etc/slurm.conf"
	done
	echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP" \
		>>"$DIR/etc/slurm.conf"
	: >"$DIR/etc/plugstack.conf"
	[ -z "$SPANK" ] || echo "required ${SPANK//:/ }" >>"$DIR/etc/plugstack.conf"
	[ -z "$EXAMPLE" ] || _use_example
	[ -z "$CONF_EXTRA" ] || _conf_extra
}

# --conf-extra LINES: each KEY=VALUE line replaces the line of its key, or
# is added.
_conf_extra() {
	local line key
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		key=${line%%=*}
		sed -i "/^$key=/d" "$DIR/etc/slurm.conf"
		echo "$line" >>"$DIR/etc/slurm.conf"
	done <<<"$CONF_EXTRA"
}

# --example DIR: the scheduling settings of DIR/slurm.conf.example replace
# this harness's own (every key it sets but the cluster's paths, nodes and
# partitions; the default memory too, set or not), and the spank_copus line of DIR/plugstack.conf.example
# replaces --spank's, its plugin path pointed at --spank's file.
_use_example() {
	local ex=$EXAMPLE/slurm.conf.example key keys line
	[ -f "$ex" ] || die "--example: no $ex"
	keys=$(sed -n 's/^\([A-Za-z]*\)=.*/\1/p' "$ex" |
		grep -Ev '^(NodeName|PartitionName|PlugStackConfig|StateSaveLocation|SlurmctldHost|ClusterName)$')
	# The default memory is the example's to set, or to leave out.
	sed -i '/^DefMemPer\(CPU\|GPU\|Node\)=/d' "$DIR/etc/slurm.conf"
	for key in $keys; do
		sed -i "/^$key=/d" "$DIR/etc/slurm.conf"
		grep "^$key=" "$ex" >>"$DIR/etc/slurm.conf"
	done
	if [ -n "$SPANK" ] && [ -f "$EXAMPLE/plugstack.conf.example" ]; then
		line=$(grep -E '^(required|optional) .*spank_copus\.so' "$EXAMPLE/plugstack.conf.example" | head -n 1)
		[ -n "$line" ] || die "--example: no spank_copus line in $EXAMPLE/plugstack.conf.example"
		echo "$line" | awk -v so="${SPANK%%:*}" '{ $2 = so; print }' \
			>"$DIR/etc/plugstack.conf"
	fi
}

_make_devices() {
	local i t c
	for ((i = 0; i < ${#GPU_TYPES[@]}; i++)); do
		t=${GPU_TYPES[$i]}
		c=${GPU_COUNTS[$i]}
		mkdir -p "$DIR/dev/$t"
		for ((k = 0; k < c; k++)); do
			[ -c "$DIR/dev/$t/nvidia$k" ] ||
				mknod "$DIR/dev/$t/nvidia$k" c 1 3 ||
				die "cannot make the fake GPU device $DIR/dev/$t/nvidia$k"
		done
	done
}

# Starts one daemon in the foreground mode (-D) in the background and keeps
# its PID; the daemons' own PID files are written too, but ours are what
# "down" trusts.
_start() {
	local name=$1
	shift
	SLURM_CONF=$DIR/etc/slurm.conf setsid "$@" </dev/null \
		>"$DIR/log/$name.out" 2>&1 &
	echo $! >"$DIR/pids/$name.pid"
}

_start_munge() {
	mkdir -p "$DIR/munge"
	chown munge: "$DIR/munge" 2>/dev/null || true
	if [ ! -f "$DIR/munge/munge.key" ]; then
		dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 2>/dev/null
		chown munge: "$DIR/munge/munge.key" 2>/dev/null || true
		chmod 400 "$DIR/munge/munge.key"
	fi
	command -v munged >/dev/null || die "munged not found (install the Debian package munge)"
	runuser -u munge -- munged --foreground --key-file="$DIR/munge/munge.key" \
		--socket="$DIR/munge/munge.socket" --pid-file="$DIR/munge/munged.pid" \
		--seed-file="$DIR/munge/seed" --log-file="$DIR/log/munged.log" \
		</dev/null >"$DIR/log/munged.out" 2>&1 &
	echo $! >"$DIR/pids/munged.pid"
	local n=0
	until [ -S "$DIR/munge/munge.socket" ]; do
		n=$((n + 1))
		[ $n -lt 100 ] || die "munged did not start; see $DIR/log/munged.log"
		sleep 0.1
	done
}

_alive_count() {
	local n=0 name pid
	while read -r name pid; do
		_ours "$pid" && n=$((n + 1))
	done < <(_pids)
	echo $n
}

cmd_status() {
	[ -f "$DIR/etc/slurm.conf" ] || { echo "$PROG: no cluster in $DIR"; return 3; }
	local name pid dead=0
	while read -r name pid; do
		if _ours "$pid"; then
			echo "$name: running (pid $pid)"
		else
			echo "$name: not running"
			dead=1
		fi
	done < <(_pids)
	if [ "$(_alive_count)" -gt 0 ]; then
		SLURM_CONF=$DIR/etc/slurm.conf sinfo -N -o '%N %t %G' 2>&1
	fi
	return $dead
}

cmd_down() {
	[ -d "$DIR/pids" ] || { say "nothing to stop in $DIR"; return 0; }
	local name pid list=() n
	while read -r name pid; do
		if _ours "$pid"; then
			kill -TERM "$pid" 2>/dev/null && list+=("$pid")
		fi
	done < <(_pids)
	# slurmd and slurmctld leave within a second or two; slurmstepd
	# processes of running jobs are children of slurmd's session.
	for ((n = 0; n < 150; n++)); do
		local alive=()
		for pid in "${list[@]}"; do
			_ours "$pid" && alive+=("$pid")
		done
		[ ${#alive[@]} -gt 0 ] || break
		list=("${alive[@]}")
		sleep 0.1
	done
	for pid in "${list[@]}"; do
		_ours "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	# Job steps (slurmstepd and the job's processes) run in their own
	# sessions; stop those whose command line or environment names this
	# cluster, and only those, with every process under them (a job's
	# srun would outlive its slurmstepd).
	local p
	for p in $(pgrep -x slurmstepd 2>/dev/null); do
		# (Slurm 24.11 and later: neither names it; the slurmd log file
		# it keeps open does.)
		if tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qF "$DIR/" ||
			tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$DIR/" ||
			find "/proc/$p/fd" -mindepth 1 -maxdepth 1 -lname "$DIR/*" 2>/dev/null | grep -q .; then
			kill -KILL $(_tree "$p") 2>/dev/null
		fi
	done
	rm -f "$DIR"/pids/*.pid
	say "stopped the cluster in $DIR"
}

# _tree PID: PID and every process under it, children first.
_tree() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		_tree "$c"
	done
	echo "$1"
}

# _stop NAME: stops the daemon whose PID DIR/pids/NAME.pid keeps (SIGKILL
# with --kill, else SIGTERM) and waits up to 15 s for it to go.
_stop() {
	local pid sig=TERM n
	[ "$KILL" ] && sig=KILL
	pid=$(cat "$DIR/pids/$1.pid" 2>/dev/null)
	_ours "$pid" || return 0
	kill -$sig "$pid"
	for ((n = 0; n < 150; n++)); do
		_ours "$pid" || return 0
		sleep 0.1
	done
	die "$1 (pid $pid) did not stop"
}

cmd_restart_ctld() {
	local n
	[ -f "$DIR/etc/slurm.conf" ] || die "no cluster in $DIR"
	_stop slurmctld
	if [ -n "$JOB_STATE" ]; then
		cp "$JOB_STATE" "$DIR/state/job_state" ||
			die "--job-state: cannot copy $JOB_STATE"
		rm -f "$DIR/state/job_state.old"
	fi
	_start slurmctld "$SLURM_SBIN/slurmctld" -D -f "$DIR/etc/slurm.conf"
	export SLURM_CONF=$DIR/etc/slurm.conf
	for ((n = 0; n < WAIT * 5; n++)); do
		# Alive is enough (see cmd_up).
		kill -0 "$(cat "$DIR/pids/slurmctld.pid")" 2>/dev/null ||
			die "slurmctld exited during restart; see $DIR/log/slurmctld.log"
		scontrol ping 2>/dev/null | grep -q 'is UP' && {
			say "slurmctld restarted in $DIR"
			return 0
		}
		sleep 0.2
	done
	die "slurmctld does not answer ${WAIT}s after its restart"
}

cmd_restart_slurmd() {
	local name=slurmd.$NODE
	[ -f "$DIR/pids/$name.pid" ] || die "--node: no slurmd for '$NODE' in $DIR"
	_stop "$name"
	_start "$name" "$SLURM_SBIN/slurmd" -D -N "$NODE" -f "$DIR/etc/slurm.conf"
	say "slurmd $NODE restarted in $DIR"
}

cmd_up() {
	[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd starts jobs as their users)"
	local b
	for b in slurmctld slurmd slurmstepd; do
		[ -x "$SLURM_SBIN/$b" ] ||
			die "$SLURM_SBIN/$b not found (install the Debian packages slurmctld and slurmd)"
	done
	command -v sinfo >/dev/null || die "sinfo not found (install the Debian package slurm-client)"
	if [ -d "$DIR/pids" ] && [ "$(_alive_count)" -gt 0 ]; then
		say "a cluster is already running in $DIR (run '$0 down $DIR' first to restart it)"
		return 0
	fi
	mkdir -p "$DIR"/{etc,state,log,run,pids,spool,tmp,dev} || die "cannot create $DIR"
	DIR=$(cd "$DIR" && pwd)
	local i
	for ((i = 1; i <= NODES; i++)); do
		mkdir -p "$DIR/spool/n$i" "$DIR/tmp/n$i"
	done
	_make_devices
	_write_conf
	[ -z "$MUNGE" ] || _start_munge
	# The daemons must run under their own names: slurmctld started as
	# slurmctld-wlm drops every node's Gres=.
	_start slurmctld "$SLURM_SBIN/slurmctld" -D -f "$DIR/etc/slurm.conf"
	for ((i = 1; i <= NODES; i++)); do
		_start "slurmd.n$i" "$SLURM_SBIN/slurmd" -D -N "n$i" -f "$DIR/etc/slurm.conf"
	done
	# Wait until every node is idle.
	export SLURM_CONF=$DIR/etc/slurm.conf
	local deadline=$((SECONDS + WAIT)) states
	while :; do
		# Alive is enough here: the PID was just recorded, and until
		# the child has exec'd slurmctld its command line is still
		# this script's.
		if ! kill -0 "$(cat "$DIR/pids/slurmctld.pid")" 2>/dev/null; then
			tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmctld.out" >&2 2>/dev/null
			cmd_down >/dev/null
			die "slurmctld exited during start; see $DIR/log/slurmctld.log"
		fi
		states=$(sinfo -h -N -o '%t' 2>/dev/null | sort | uniq -c | tr -s ' \n' '  ')
		if [ -n "$states" ] && ! sinfo -h -N -o '%t' 2>/dev/null | grep -qv '^idle$'; then
			break
		fi
		if [ $SECONDS -ge $deadline ]; then
			sinfo -N -o '%N %t %E' >&2 2>/dev/null
			tail -n 20 "$DIR/log/slurmctld.log" >&2 2>/dev/null
			cmd_down >/dev/null
			die "nodes not idle after ${WAIT}s (states: ${states:-none}); logs in $DIR/log"
		fi
		sleep 0.2
	done
	say "cluster up in $DIR: $NODES nodes; export SLURM_CONF=$DIR/etc/slurm.conf"
}

[ $# -ge 2 ] || usage
CMD=$1
DIR=$2
shift 2
NODES=4 CPUS=8 MEM=16000 WAIT=60 MUNGE="" SCHED=builtin SCHED_PARAMS=""
PLUGIN_DIR="" SPANK="" GPUS="" KILL="" NODE="" EXAMPLE="" CONF_EXTRA=""
JOB_STATE=""
while [ $# -gt 0 ]; do
	case $1 in
	--nodes) NODES=${2:-}; shift 2 ;;
	--gpus) GPUS=${2:-}; shift 2 ;;
	--cpus) CPUS=${2:-}; shift 2 ;;
	--mem) MEM=${2:-}; shift 2 ;;
	--wait) WAIT=${2:-}; shift 2 ;;
	--munge) MUNGE=1; shift ;;
	--kill) KILL=1; shift ;;
	--job-state) JOB_STATE=${2:-}; shift 2 ;;
	--node) NODE=${2:-}; shift 2 ;;
	--example) EXAMPLE=${2:-}; shift 2 ;;
	--conf-extra) CONF_EXTRA="$CONF_EXTRA${CONF_EXTRA:+
}${2:-}"; shift 2 ;;
	--sched) SCHED=${2:-}; shift 2 ;;
	--sched-params) SCHED_PARAMS=${2:-}; shift 2 ;;
	--plugin-dir) PLUGIN_DIR=${2:-}; shift 2 ;;
	--spank) SPANK=${2:-}; shift 2 ;;
	*) die "unknown option '$1'" ;;
	esac
done
case $NODES in '' | *[!0-9]* | 0) die "--nodes: '$NODES' is not a positive integer" ;; esac
[ "$NODES" -le 64 ] || die "--nodes: $NODES is more than 64"
case $CPUS in '' | *[!0-9]* | 0) die "--cpus: '$CPUS' is not a positive integer" ;; esac
case $MEM in '' | *[!0-9]* | 0) die "--mem: '$MEM' is not a positive integer" ;; esac
case $WAIT in '' | *[!0-9]* | 0) die "--wait: '$WAIT' is not a positive integer" ;; esac
case $SCHED in '' | *[!a-z0-9_]*) die "--sched: '$SCHED' is not a plugin name such as copus or builtin" ;; esac
GPU_TYPES=() GPU_COUNTS=()
if [ -n "$GPUS" ]; then
	IFS=, read -ra _g <<<"$GPUS"
	for e in "${_g[@]}"; do
		[[ $e =~ ^([A-Za-z0-9_.-]{1,15}):([0-9]{1,2})$ ]] ||
			die "--gpus: '$e' is not TYPE:COUNT (a type name and 1..16 GPUs)"
		[ "${BASH_REMATCH[2]}" -ge 1 ] && [ "${BASH_REMATCH[2]}" -le 16 ] ||
			die "--gpus: count in '$e' must be 1..16"
		GPU_TYPES+=("${BASH_REMATCH[1]}")
		GPU_COUNTS+=("${BASH_REMATCH[2]}")
	done
	[ ${#GPU_TYPES[@]} -le "$NODES" ] || die "--gpus: more GPU types than nodes"
fi
while IFS= read -r _l; do
	[ -z "$_l" ] || [[ $_l =~ ^[A-Za-z][A-Za-z0-9]*= ]] ||
		die "--conf-extra: '$_l' is not a KEY=VALUE line"
	[[ $_l != SchedulerParameters=* ]] ||
		die "--conf-extra: give SchedulerParameters with --sched-params"
done <<<"$CONF_EXTRA"
[ -z "$PLUGIN_DIR" ] || [ -d "$PLUGIN_DIR" ] || die "--plugin-dir: $PLUGIN_DIR is not a directory"
[ -z "$SPANK" ] || [ -f "${SPANK%%:*}" ] || die "--spank: ${SPANK%%:*} not found"
[ -z "$JOB_STATE" ] || [ -f "$JOB_STATE" ] || die "--job-state: $JOB_STATE not found"
[ -n "$PLUGIN_DIR" ] && PLUGIN_DIR=$(cd "$PLUGIN_DIR" && pwd)

case $CMD in
up) mkdir -p "$DIR" || die "cannot create $DIR"; DIR=$(cd "$DIR" && pwd); cmd_up ;;
down) [ -d "$DIR" ] || { say "nothing in $DIR"; exit 0; }; DIR=$(cd "$DIR" && pwd); cmd_down ;;
status) [ -d "$DIR" ] || { echo "$PROG: no cluster in $DIR"; exit 3; }; DIR=$(cd "$DIR" && pwd); cmd_status ;;
restart-ctld) [ -d "$DIR" ] || die "no cluster in $DIR"; DIR=$(cd "$DIR" && pwd); cmd_restart_ctld ;;
restart-slurmd) [ -d "$DIR" ] || die "no cluster in $DIR"; DIR=$(cd "$DIR" && pwd); cmd_restart_slurmd ;;
env) [ -d "$DIR" ] || die "no cluster in $DIR"; DIR=$(cd "$DIR" && pwd); echo "export SLURM_CONF=$DIR/etc/slurm.conf" ;;
*) usage ;;
esac
