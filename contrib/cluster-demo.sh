#!/bin/bash
# The main job: a real Slurm cluster on this machine (4 nodes x 4 GPUs: n1-n2
# a100, n3-n4 v100, fake devices) scheduled by sched/copus, running elastic
# and rigid training jobs (copus-emulate: measured step times and gradient
# noise, libcopus hints and checkpoints). Prints a live table of the jobs,
# records a timeline and leaves a PNG of GPUs per job over time; the cluster
# is torn down on exit, Ctrl-C included.
#
#   contrib/cluster-demo.sh DATA_DIR OUT_DIR [--plugin-dir DIR] [--spank SO]
#                           [--emulate PROGRAM] [--speedup S] [--limit SECONDS]
#
# Defaults: the plugins installed in Slurm's plugin directory (make install),
# copus-emulate from PATH, speedup 10 (a job sleeps a tenth of its
# modelled step time), at most 360 s. Must run as root.
set -u

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster=$top/contrib/loopback-cluster.sh
die() { echo "cluster-demo: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: $0 DATA_DIR OUT_DIR [--plugin-dir DIR] [--spank SO] [--emulate PROGRAM] [--speedup S] [--limit SECONDS]"
data=$1
out=$2
shift 2
plugindir=${SLURM_PLUGIN_DIR:-/usr/lib/x86_64-linux-gnu/slurm-wlm}
spank="" emulate="" speedup=10 limit=360
while [ $# -gt 0 ]; do
	case $1 in
	--plugin-dir) plugindir=${2:-}; shift 2 ;;
	--spank) spank=${2:-}; shift 2 ;;
	--emulate) emulate=${2:-}; shift 2 ;;
	--speedup) speedup=${2:-}; shift 2 ;;
	--limit) limit=${2:-}; shift 2 ;;
	*) die "unknown option '$1'" ;;
	esac
done
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd starts the jobs)"
[ -d "$data/pollux/traces" ] || die "no Pollux profiles in $data/pollux/traces (set COPUS_DATA)"
[ -f "$plugindir/sched_copus.so" ] || die "$plugindir/sched_copus.so not found (make install, or --plugin-dir)"
spank=${spank:-$plugindir/spank_copus.so}
[ -f "$spank" ] || die "$spank not found"
emulate=${emulate:-$(command -v copus-emulate)}
[ -x "$emulate" ] || die "copus-emulate not found (make install, or --emulate)"
case $limit in '' | *[!0-9]*) die "--limit: '$limit' is not a number of seconds" ;; esac
command -v gnuplot >/dev/null || die "gnuplot not found (Debian package gnuplot-nox)"

mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
rm -rf "$out/cluster" "$out/jobs" "$out/ckpt"
mkdir -p "$out/jobs" "$out/ckpt"
cl=$out/cluster
timeline=$out/timeline.csv

finish() {
	trap '' INT TERM
	"$cluster" down "$cl" >/dev/null 2>&1
	plot
	echo "cluster-demo: cluster stopped; timeline $timeline, plot $out/gpus.png, job logs $out/jobs/"
}
trap finish EXIT
trap 'echo; echo "cluster-demo: interrupted"; exit 130' INT TERM

echo "== starting a Slurm cluster with sched/copus: n1-n2 4 x a100, n3-n4 4 x v100"
"$cluster" up "$cl" --nodes 4 --gpus a100:4,v100:4 --sched copus \
	--plugin-dir "$plugindir" --spank "$spank" \
	--sched-params copus_interval=5,copus_restart_delay=20,copus_restart_cost=5,copus_checkpoint_deadline=10 ||
	die "the cluster did not come up"
export SLURM_CONF=$cl/etc/slurm.conf

# The batch script: the GPU type is the node's, the checkpoints go to a
# directory per job, and copus-emulate runs with exec so that it gets the
# rescale signal. The demo assumes an a100 twice as fast as a v100 (the
# profiles were measured on T4s; the ratio is the demo's, not a measurement).
cat >"$out/job.sh" <<EOF
#!/bin/bash
type=\$(scontrol show node "\$SLURMD_NODENAME" | sed -n 's/.*Gres=gpu:\([^:(]*\):.*/\1/p' | head -n 1)
export COPUS_GPU_TYPE=\${type:-default}
export COPUS_CKPT_DIR=$out/ckpt/\$SLURM_JOB_ID
exec "$emulate" --speedup $speedup --type-speed a100=2,v100=1 --report 3 "\$@"
EOF
chmod +x "$out/job.sh"

names=()
# submit NAME SBATCH-OPTIONS... -- EMULATE-OPTIONS...
submit() {
	local name=$1 id opts=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	id=$(sbatch --parsable -J "$name" -t 30 --open-mode=append \
		-o "$out/jobs/$name.out" "${opts[@]}" "$out/job.sh" "$@") ||
		die "sbatch refused $name"
	names+=("$id:$name")
	printf '   submitted %-10s job %s: %s\n' "$name" "$id" "${opts[*]}"
}

# The workload: four elastic jobs of different models and sizes, two rigid
# ones; (arrival second, job). Each elastic job stays on the GPU type it asks
# for: sched/copus can move a job between types (--gpu-types=a100,v100), but
# in this version such a move can leave the job pending for good.
p=$data/pollux/traces
arrivals=(
	"0 cifar10 --gres=gpu:a100:1 --elastic=1-8 -- --profile $p/cifar10 --target 9000"
	"0 deepspeech2 --gres=gpu:v100:1 --elastic=1-8 -- --profile $p/deepspeech2 --target 3500"
	"30 rigid-v100 -N1 --gres=gpu:v100:4 -- --profile $p/yolov3 --target 2500"
	"45 yolov3 --gres=gpu:v100:1 --elastic=1-4 -- --profile $p/yolov3 --target 5000"
	"60 imagenet --gres=gpu:a100:2 --elastic=2-8 -- --profile $p/imagenet --target 4000"
	"90 rigid-a100 -N1 --gres=gpu:a100:2 -- --profile $p/cifar10 --target 6000"
)

# One refresh: squeue's view plus the copus decision and the job's progress.
table() {
	local now=$1 id name state tpn nodes nl gpus type prog dec t
	printf '\n[%4ds] %-6s %-12s %-9s %-5s %4s %5s %-9s %-9s %s\n' "$now" JOBID NAME STATE TYPE GPUS NODES NODELIST PROGRESS "COPUS DECISION"
	while IFS='|' read -r id name state tpn nodes nl; do
		gpus=0 type=-
		if [[ $tpn =~ gpu:([A-Za-z0-9_.-]+):([0-9]+) ]]; then
			type=${BASH_REMATCH[1]}
			gpus=$((BASH_REMATCH[2] * nodes))
		elif [[ $tpn =~ gpu:([0-9]+) ]]; then
			gpus=$((BASH_REMATCH[1] * nodes))
		fi
		# An elastic job's type is the one copus chose: its last start.
		if [ "$state" = RUNNING ] || [ "$state" = COMPLETED ]; then
			t=$(sed -n 's/^start .* type=\([^ ]*\) .*/\1/p' "$out/jobs/$name.out" 2>/dev/null | tail -n 1)
			type=${t:-$type}
		fi
		prog=$(sed -n 's/^step=[0-9]* progress=\([0-9.]*\)\/\([0-9.]*\).*/\1 \2/p' \
			"$out/jobs/$name.out" 2>/dev/null | tail -n 1 |
			awk '{ printf "%d%%", 100 * $1 / $2 }')
		[ "$state" != COMPLETED ] || prog=done
		dec=$(awk -F'\t' -v id="$id" '$1 == id { print $9 }' "$cl/state/copus_status" 2>/dev/null)
		[ "$state" = RUNNING ] || { nodes=0; nl=-; [ "$state" = PENDING ] && gpus=0; }
		printf '       %-6s %-12s %-9s %-5s %4s %5s %-9s %-9s %s\n' "$id" "$name" "$state" "$type" "$gpus" "$nodes" "$nl" "${prog:--}" "${dec:--}"
		[ "$state" = RUNNING ] && echo "$now,$id,$name,$type,$gpus" >>"$timeline"
	done < <(squeue -h -t all -o '%i|%j|%T|%b|%D|%N' 2>/dev/null | sort -n)
}

# GPUs per job over time, stacked (gnuplot).
plot() {
	[ -s "$timeline" ] || return 0
	# Columns: time, then the GPUs of each job in the order they first ran.
	awk -F, 'NR > 1 { if (!($1 in t)) { t[$1] = 1; ts[++m] = $1 }
			g[$1, $3] = $5; if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
		END {
			printf "t"; for (i = 1; i <= n; i++) printf " %s", order[i]; printf "\n"
			for (k = 1; k <= m; k++) {
				printf "%s", ts[k]
				for (i = 1; i <= n; i++) printf " %d", g[ts[k], order[i]] + 0
				printf "\n"
			}
		}' "$timeline" >"$out/gpus.dat"
	local n
	n=$(head -n 1 "$out/gpus.dat" | awk '{ print NF - 1 }')
	gnuplot <<EOF 2>"$out/gnuplot.err" || echo "cluster-demo: gnuplot failed: $(cat "$out/gnuplot.err")"
set terminal pngcairo size 1000,500
set output "$out/gpus.png"
set title "sched/copus on a 16-GPU loopback Slurm cluster: GPUs per job"
set xlabel "seconds"
set ylabel "GPUs"
set yrange [0:18]
set key outside right
set style fill solid 0.8 border -1
plot for [i=$n:1:-1] "$out/gpus.dat" using 1:(sum [c=2:i+1] column(c)) with filledcurves x1 title columnhead(i+1), \
     16 with lines dashtype 2 lc rgb "black" title "cluster"
EOF
}

echo "time,job,name,type,gpus" >"$timeline"
echo "== submitting 4 elastic and 2 rigid jobs over 90 s; the table refreshes every 3 s"
start=$SECONDS
next=0
while :; do
	now=$((SECONDS - start))
	while [ $next -lt ${#arrivals[@]} ]; do
		read -r at rest <<<"${arrivals[$next]}"
		[ "$now" -ge "$at" ] || break
		# shellcheck disable=SC2086
		submit $rest
		next=$((next + 1))
	done
	table "$now"
	if [ $next -eq ${#arrivals[@]} ] &&
		[ -z "$(squeue -h -t PENDING,RUNNING,CONFIGURING,COMPLETING,REQUEUED -o %i 2>/dev/null)" ]; then
		echo "== every job finished in ${now} s"
		break
	fi
	if [ "$now" -ge "$limit" ]; then
		echo "== stopping at the ${limit} s limit"
		break
	fi
	sleep 3
done
echo
echo "== job results (from their logs)"
for e in "${names[@]}"; do
	name=${e#*:}
	printf '   %-12s %s starts, %s\n' "$name" "$(grep -c '^start ' "$out/jobs/$name.out" 2>/dev/null)" \
		"$(grep -E '^(done|stopped) ' "$out/jobs/$name.out" 2>/dev/null | tail -n 1 || true)"
done
