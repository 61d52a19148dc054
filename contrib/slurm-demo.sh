#!/usr/bin/env bash
# The main job: sched/copus on a real Slurm cluster on this machine.
#
#   contrib/slurm-demo.sh BUILD_DIR [OUT_DIR]     (as root; OUT_DIR: BUILD_DIR/demo)
#   slurm-demo.sh --installed [OUT_DIR]           (as root; OUT_DIR: ./copus-demo)
#
# Installs the build (make install: the plugins into Slurm's plugin
# directory, copus-trainer, copusctl, libcopus), starts a loopback cluster of
# 4 nodes x 4 GPUs (n1-n2 a100, n3-n4 t4) with SchedulerType=sched/copus,
# submits elastic training jobs (copus-trainer, which sleeps the step times
# the fitted models of cifar10, imagenet, bert and deepspeech2 predict and
# talks to the scheduler through libcopus) and two rigid jobs, shows every
# few seconds a table like squeue's and copusctl's view, and leaves
# OUT_DIR/timeline.csv (time, job, GPUs) and OUT_DIR/timeline.png (GPUs per
# job over time). The cluster is torn down on exit, Ctrl-C included.
# DEMO_SECONDS (default 200) bounds the workload's time.
#
# With --installed (what copus-demo runs) it needs no source or build tree:
# it runs the installed files, loopback-cluster.sh from its own directory,
# the plugins from COPUS_DEMO_PLUGIN_DIR (default: the Slurm plugin
# directory that holds sched_copus.so) and copus-trainer and copusctl from
# COPUS_DEMO_BINDIR (default: where PATH finds them); without gnuplot it
# leaves no plot.
set -euo pipefail

die() { echo "slurm-demo: $*" >&2; exit 1; }

installed=""
if [ "${1:-}" = --installed ]; then
	installed=1
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	cluster=$here/loopback-cluster.sh
	out=${2:-$PWD/copus-demo}
else
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	cluster=$top/contrib/loopback-cluster.sh
	build=$(cd "${1:?usage: slurm-demo.sh BUILD_DIR [OUT_DIR] | slurm-demo.sh --installed [OUT_DIR]}" && pwd)
	out=${2:-$build/demo}
fi
limit=${DEMO_SECONDS:-200}
refresh=3
plot=1

[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd starts the jobs; make install writes into Slurm's plugin directory)"
case $limit in '' | *[!0-9]*) die "DEMO_SECONDS: '$limit' is not a number of seconds" ;; esac
if [ -n "$installed" ]; then
	if ! command -v gnuplot >/dev/null; then
		echo "slurm-demo: gnuplot not found: no timeline.png (install the Debian package gnuplot-nox)" >&2
		plot=""
	fi
else
	[ -f "$build/Makefile" ] || die "$build is not a configured build directory"
	command -v gnuplot >/dev/null || die "gnuplot not found (install the Debian package gnuplot-nox)"
fi

# An installation directory as the build's Makefile names it, expanded the
# way make would (${prefix}, ${exec_prefix}, ${libdir} are shell syntax too).
make_var() {
	local prefix exec_prefix libdir v
	prefix=$(sed -n 's/^prefix = //p' "$build/Makefile")
	exec_prefix=$(sed -n 's/^exec_prefix = //p' "$build/Makefile")
	exec_prefix=$(eval echo "$exec_prefix")
	libdir=$(eval echo "$(sed -n 's/^libdir = //p' "$build/Makefile")")
	v=$(sed -n "s/^$1 = //p" "$build/Makefile")
	eval echo "$v"
}

# The installed files (--installed): Slurm's plugin directory that holds
# sched_copus.so, and the programs beside copus-trainer.
installed_files() {
	local d
	plugindir=${COPUS_DEMO_PLUGIN_DIR:-}
	if [ -z "$plugindir" ]; then
		for d in /usr/lib/*/slurm-wlm /usr/lib64/slurm /usr/lib/slurm; do
			[ -f "$d/sched_copus.so" ] && { plugindir=$d; break; }
		done
		[ -n "$plugindir" ] ||
			die "sched_copus.so not found in Slurm's plugin directory (install copus-slurmctld-plugins, or set COPUS_DEMO_PLUGIN_DIR)"
	fi
	bindir=${COPUS_DEMO_BINDIR:-}
	if [ -z "$bindir" ]; then
		d=$(command -v copus-trainer) || die "copus-trainer not found (install copus-tools)"
		bindir=$(dirname "$d")
	fi
	trainer=$bindir/copus-trainer
	copusctl=$bindir/copusctl
	[ -f "$plugindir/sched_copus.so" ] || die "$plugindir/sched_copus.so not found"
	[ -f "$plugindir/spank_copus.so" ] || die "$plugindir/spank_copus.so not found"
	[ -x "$trainer" ] || die "$trainer not found"
	[ -x "$copusctl" ] || die "$copusctl not found"
	[ -x "$cluster" ] || die "$cluster not found"
	echo "== the installed files: $plugindir/sched_copus.so, $plugindir/spank_copus.so, $trainer"
}

if [ -n "$installed" ]; then
	installed_files
	# Slurm's own plugin directory is the cluster's.
	[ ! -f "$plugindir/auth_none.so" ] || export SLURM_PLUGIN_DIR=$plugindir
	# Only an earlier demo's output is removed.
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	[ -f "$out/job.sh" ] || [ -z "$(ls -A "$out")" ] ||
		die "$out holds files of something other than an earlier demo; name an empty or new OUT_DIR"
else
	echo "== make install (plugins into Slurm's plugin directory)"
	make -s -C "$build" install >"$build/demo-install.log" 2>&1 ||
		{ tail -20 "$build/demo-install.log"; die "make install failed"; }
	ldconfig 2>/dev/null || true
	plugindir=$(make_var SLURM_PLUGIN_DIR)
	bindir=$(make_var bindir)
	trainer=$bindir/copus-trainer
	copusctl=$bindir/copusctl
	[ -f "$plugindir/sched_copus.so" ] ||
		die "$plugindir/sched_copus.so was not installed (configure --with-slurm-src=DIR)"
	[ -x "$trainer" ] || die "$trainer was not installed"
	echo "   $plugindir/sched_copus.so, $plugindir/spank_copus.so, $trainer"
fi

rm -rf "$out"
mkdir -p "$out/logs" "$out/ckpt"
cdir=$out/cluster
export SLURM_CONF=$cdir/etc/slurm.conf

teardown() {
	trap - EXIT INT TERM HUP
	if [ -f "$SLURM_CONF" ]; then
		scancel --quiet --full --signal=KILL -u root 2>/dev/null || true
		sleep 1
		QUIET=1 "$cluster" down "$cdir" >/dev/null 2>&1 || true
		echo "== cluster torn down"
	fi
}
trap teardown EXIT
trap 'echo; echo "== interrupted"; exit 130' INT TERM HUP

echo "== starting the loopback cluster: 4 nodes x 4 GPUs (n1-n2 a100, n3-n4 t4), sched/copus"
params=copus_interval=5,copus_restart_delay=20,copus_restart_cost=10,copus_checkpoint_deadline=20
pd=()
[ "$plugindir" = "${SLURM_PLUGIN_DIR:-/usr/lib/x86_64-linux-gnu/slurm-wlm}" ] ||
	pd=(--plugin-dir "$plugindir")
QUIET=1 "$cluster" up "$cdir" --nodes 4 --gpus a100:4,t4:4 --sched copus \
	--spank "$plugindir/spank_copus.so" "${pd[@]}" --sched-params "$params" ||
	die "the cluster did not come up; logs in $cdir/log"
echo "   SchedulerParameters=sched_interval=-1,$params"

# The batch script: the GPU type of the node it runs on, then the trainer
# in place of the shell, so that the rescale signal reaches libcopus.
cat >"$out/job.sh" <<EOF
#!/bin/bash
t=\$(scontrol -o show node "\$SLURMD_NODENAME" | sed -n 's/.* Gres=gpu:\([A-Za-z0-9_.-]*\):.*/\1/p')
export COPUS_GPU_TYPE=\${t:-default}
exec "$trainer" --checkpoint "$out/ckpt/\$SLURM_JOB_NAME" --print-every 50 "\$@"
EOF
chmod +x "$out/job.sh"

declare -A jobname
submit() {
	local name=$1 id
	shift
	id=$(sbatch --parsable -J "$name" -o "$out/logs/$name.out" \
		--open-mode=append -t 15 "$@") || die "sbatch refused $name"
	jobname[$id]=$name
	printf '   submitted %-14s job %s: %s\n' "$name" "$id" "$*"
}

# The workload. Targets are progress (steps at the job's initial batch)
# that a job reaches in one to three minutes; the trainers run at real speed
# (the step times of the fitted models). Elastic jobs accept either GPU type.
start=$SECONDS
echo "== submitting"
submit cifar10 --gres=gpu:1 --elastic=1-8 "$out/job.sh" --app cifar10 --target 10000
submit imagenet --gres=gpu:2 --elastic=1-8 "$out/job.sh" --app imagenet --target 2000
submit bert --gres=gpu:1 --elastic=1-4 "$out/job.sh" --app bert --target 1000
submit rigid-yolov3 --gres=gpu:t4:4 "$out/job.sh" --app yolov3 --target 250
# Later arrivals: "SECONDS NAME SBATCH-ARGUMENTS".
pending=("20 cifar10-b --gres=gpu:2 --elastic=2-8 $out/job.sh --app cifar10 --target 6000"
	"40 deepspeech2 --gres=gpu:1 --elastic=1-8 $out/job.sh --app deepspeech2 --target 500"
	"100 rigid-cifar10 -N2 --gres=gpu:a100:4 $out/job.sh --app cifar10 --target 2500")

# The GPU type of each node, for the table.
declare -A nodetype
while read -r n g; do
	nodetype[$n]=$(sed -n 's/^gpu:\([A-Za-z0-9_.-]*\):.*/\1/p' <<<"$g")
done < <(sinfo -h -N -o '%N %G')

tl=$out/timeline.csv
echo "time_s,job,name,state,gpus,gpu_type,nodes,nodelist" >"$tl"

# One sample of squeue: "id|name|state|tres per node|nodes|nodelist|comment".
snapshot() {
	squeue -h -a -t all -o '%i|%j|%T|%b|%D|%N|%k' 2>/dev/null | sort -n
}

show() {
	local t=$1 id name state tres nodes nl comment gpus type per prog first
	printf '\n-- t=%3ds ------------------------------------------------------------\n' "$t"
	printf '%-6s %-14s %-10s %4s %-5s %5s %-10s %s\n' JOBID NAME STATE GPUS TYPE NODES NODELIST PROGRESS
	while IFS='|' read -r id name state tres nodes nl comment; do
		[ -n "$id" ] || continue
		# gres:gpu:TYPE:N or gres:gpu:N, per node.
		per=${tres##*:}
		case $per in '' | *[!0-9]*) per=0 ;; esac
		type=$(sed -n 's/^gres[:/]gpu:\([A-Za-z0-9_.-]*\):[0-9]*$/\1/p' <<<"$tres")
		# A running job's type is its nodes' (an elastic job may ask
		# for any).
		if [ -n "$nl" ] && [ "$nl" != "(null)" ]; then
			first=$(scontrol show hostnames "$nl" 2>/dev/null | head -n 1)
			type=${nodetype[$first]:-$type}
		fi
		[ "$tres" = "N/A" ] && per=0
		gpus=$((per * nodes))
		# Progress: the trainer's last line (every 50 steps), else the
		# last hint (every 30 s).
		prog=""
		[ ! -f "$out/logs/$name.out" ] ||
			prog=$(sed -n 's/^step .* (\([0-9]*%\)) .*/\1/p; s/^done .*/100%/p' \
				"$out/logs/$name.out" | tail -n 1)
		[ -n "$prog" ] || prog=$(sed -n 's/.*"prog":\([0-9.e+]*\).*"tgt":\([0-9.e+]*\).*/\1 \2/p' <<<"$comment" |
			awk '{ if ($2 > 0) printf "%.0f%%", 100 * $1 / $2 }')
		printf '%-6s %-14s %-10s %4s %-5s %5s %-10s %s\n' "$id" "$name" "$state" \
			"$gpus" "${type:-any}" "$nodes" "${nl:-}" "${prog:-}"
		if [ "$state" = RUNNING ]; then
			echo "$t,$id,$name,$state,$gpus,${type:-any},$nodes,\"$nl\"" >>"$tl"
		fi
	done < <(snapshot)
	if [ -f "$cdir/state/copus_status" ]; then
		echo "copusctl status:"
		"$copusctl" status --state-dir "$cdir/state" 2>&1 | sed 's/^/  /'
	fi
}

while :; do
	t=$((SECONDS - start))
	# Later arrivals.
	rest=()
	for p in "${pending[@]}"; do
		read -r at name args <<<"$p"
		if [ "$t" -ge "$at" ]; then
			# shellcheck disable=SC2086
			submit "$name" $args
		else
			rest+=("$p")
		fi
	done
	pending=("${rest[@]}")
	show "$t"
	live=$(squeue -h -t PENDING,RUNNING,CONFIGURING,COMPLETING,REQUEUED,RESIZING,SUSPENDED 2>/dev/null | wc -l)
	if [ "$live" -eq 0 ] && [ ${#pending[@]} -eq 0 ]; then
		echo "== every job finished after ${t}s"
		break
	fi
	if [ "$t" -ge "$limit" ]; then
		echo "== ${limit}s are up: cancelling what is left"
		break
	fi
	sleep $refresh
done
end=$((SECONDS - start))

# Per job: its runs, restarts and how it ended.
echo
echo "== jobs"
squeue -h -a -t all -o '%i|%j|%T|%M' 2>/dev/null | sort -n | while IFS='|' read -r id name state el; do
	r=$(scontrol -o show job "$id" 2>/dev/null | tr ' ' '\n' | sed -n 's/^Restarts=//p')
	printf '   %-6s %-14s %-10s restarts %s\n' "$id" "$name" "$state" "${r:-?}"
done
grep -h '^resumed\|^done' "$out"/logs/*.out 2>/dev/null | sed 's/^/   /' | head -n 20 || true

# The plot: GPUs per job over time, stacked. timeline-wide.csv has one
# column per job; in timeline-stack.csv column i is the sum of jobs 1..i.
awk -F, 'NR > 1 { key = $2 " " $3; if (!(key in col)) { col[key] = ++n; name[n] = $3 }
		  g[$1, col[key]] = $5; if (!($1 in seen)) { seen[$1] = 1; ts[++m] = $1 } }
	 END { printf "t"; for (i = 1; i <= n; i++) printf ",%s", name[i]; print ""
	       for (k = 1; k <= m; k++) { printf "%s", ts[k]
		 for (i = 1; i <= n; i++) printf ",%d", g[ts[k], i] + 0; print "" } }' \
	"$tl" >"$out/timeline-wide.csv"
awk -F, -v OFS=, 'NR == 1 { print; next } { s = 0; for (i = 2; i <= NF; i++) { s += $i; $i = s } print }' \
	"$out/timeline-wide.csv" >"$out/timeline-stack.csv"
ncol=$(head -n 1 "$out/timeline-wide.csv" | awk -F, '{ print NF }')
if [ "$ncol" -ge 2 ] && [ -n "$plot" ]; then
	gnuplot <<EOF || echo "slurm-demo: gnuplot failed; the data is in $out/timeline-stack.csv" >&2
set terminal pngcairo size 1000,500 noenhanced
set output "$out/timeline.png"
set datafile separator ","
set title "sched/copus on 4 nodes x 4 GPUs (n1-n2: 4 a100 each, n3-n4: 4 t4 each): GPUs per job"
set xlabel "time (s)"
set ylabel "GPUs in use"
set yrange [0:17]
set key outside right
set style fill solid 0.9 noborder
plot for [i=$ncol:2:-1] "$out/timeline-stack.csv" using 1:i with fillsteps title columnheader(i), \
     16 with lines lt 0 lw 1 title "cluster (16)"
EOF
fi
echo
echo "== results in $out: timeline.csv, ${plot:+timeline.png, }logs/ (${end}s of workload)"
