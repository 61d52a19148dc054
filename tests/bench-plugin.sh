#!/bin/bash
# Benchmarks of sched/copus in a real slurmctld (loopback clusters of
# contrib/loopback-cluster.sh). Not tests; run as root from the build
# directory. The comparisons (churn, depth) run every scheduler in the same
# invocation, one after the other on the same machine, each on a fresh
# cluster, and print one table; sched/backfill and sched/builtin run with
# Slurm's defaults (no SchedulerParameters, no copus plugin in PluginDir),
# sched/copus with only what the cluster script gives it (sched_interval=-1,
# job_submit/copus) and the plugin's defaults, unless COPUS_PARAMS adds
# copus_ keys. Each row ends with the machine's load (1/5/15 min) when it
# was measured. The plugins are copied out of the build tree first, so a
# rebuild during the run does not change what is measured.
#
#   bash ../tests/bench-plugin.sh churn [NODES] [JOBS] [SECONDS]
# Start rate under churn (default 64 nodes x 4 GPUs, 3000 one-GPU jobs of
# "sleep 2"), for sched/builtin (the ceiling: Slurm's FIFO pass with
# nothing else to do, same jobs), sched/backfill and sched/copus (SCHEDS
# overrides the list). The jobs are submitted while the partition is down,
# so that all of them wait however slowly sbatch goes; then it comes up.
# Starts/s come from Slurm's own records (every job's StartTime, whole
# seconds): the jobs started over the seconds from the first start to the
# last, and the same after the first wave of 4*NODES (steady: a start per
# job end). squeue's latency (plain "squeue") is sampled every half second
# until no job is pending (at most CHURN_MAX seconds, default 400).
# "starts", the old name of this mode, runs it.
#
#   bash ../tests/bench-plugin.sh depth [NODES] [DEPTHS]
# RPC latency with a deep queue (default 64 nodes, DEPTHS "10000 50000"),
# for sched/backfill and sched/copus: 4*NODES one-GPU jobs fill every GPU
# and run; then one-GPU jobs are submitted until DEPTHS[0] wait, the RPCs
# are timed, more until DEPTHS[1] wait, timed again, and so on. Each of
# SAMPLES (default 80) samples, spread over SPAN seconds (default 120, four
# cycles of sched/backfill's default bf_interval, twelve of copus_interval's)
# or longer when the calls take longer, times, in a random order, one "squeue", one
# "scontrol show job" of a random pending job (a federation RPC, then the
# job's), one "scontrol ping" (a client's own cost: no job is read), one
# "scontrol --local show job" (the job's RPC alone) and one "sbatch"
# (whose job waits too); the job reads are also reported by the call that
# came just before them. slurmctld's CPU time over the samples and its resident memory,
# slurmctld's own time per RPC (sdiag), the CPU of the slurmd and
# slurmstepd processes and of the whole machine, sdiag's cycle times and
# copus's round times (idle event rounds
# too) and lock figures (snapshot, actions) follow each row, the last
# as counts of holds within each bound over the samples alone.
# MaxJobCount is raised to fit, as a site would; CONF_EXTRA adds slurm.conf
# lines to every cluster of churn and depth.
#
# Both modes check and report: the client calls that failed (sbatch,
# squeue, scontrol; in parentheses the "Socket timed out" among them), and
# the jobs lost: every job sbatch gave an ID for must be in "squeue -t all"
# afterwards (completed, running or pending); a job in another state
# (failed, cancelled, timeout, node fail) counts as bad. The jobs are
# submitted one sbatch each (SUBMIT_P loops in parallel, default 4), not as
# an array: a pending array is one job record in slurmctld until its tasks
# start, so it would not make the queue deep.
#
#   [ELASTIC=1-4] bash ../tests/bench-plugin.sh [NODES] [JOBS]
# sched/copus alone: its round time (from StateSaveLocation/copus_status)
# and squeue's latency with JOBS queued one-GPU jobs on NODES nodes (4
# GPUs each, two types; default 32 5000; the first 4*NODES run, the rest
# wait), each over several samples.
#
#   bash ../tests/bench-plugin.sh rescale
# measures the rescale turnaround instead: from the plugin's decision (its
# "asked to checkpoint" log line) to the job's first step at the new size.
# One node with 4 a100 GPUs; an elastic job (1-4 GPUs, slurm-common.sh's
# hint_job: checkpoints at once, publishes st=checkpointed) grows 1 -> 2 ->
# 4, shrinks to 2 when a rigid 2-GPU job arrives, and grows back to 4 when it
# ends: four rescales. The job's checkpoint itself takes no time here, so the
# figures are the scheduler's and Slurm's share.

if [ "${1:-}" = rescale ]; then
	. "$(dirname "$0")/slurm-common.sh"
	bench_rescale() {
		so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
		spank=$(need_plugin spank_copus) || exit $?
		export INTERVAL=${INTERVAL:-10}
		cluster_up --nodes 1 --gpus a100:4 --sched copus --spank "$spank" \
			--plugin-dir "$(dirname "$so")" \
			--sched-params "copus_interval=$INTERVAL,copus_restart_delay=2,copus_restart_cost=2,copus_checkpoint_deadline=30"
		hint_job "$TMP/job.sh"
		log=$TMP/c/log/slurmctld.log
		now() { date +%s.%N; }

		e=$(sbatch --parsable -o /dev/null --gres=gpu:a100:1 --elastic=1-4 -t 30 \
			"$TMP/job.sh" "$TMP/e.out") || fail "sbatch refused the elastic job"
		# first_step N: waits for the job's N-th start line and prints when it came.
		first_step() {
			local end=$((SECONDS + 120)) n
			while :; do
				n=$(grep -c '^start ' "$TMP/e.out" 2>/dev/null)
				[ "${n:-0}" -lt "$1" ] || break
				[ $SECONDS -lt $end ] || { echo "no start number $1: $(cat "$TMP/e.out")" >&2; return 1; }
				sleep 0.02
			done
			now
		}
		: >"$TMP/samples"
		sample() {
			local n=$1 t1 asked line
			t1=$(first_step "$n") || fail "the job did not restart"
			line=$(grep "JobId=$e asked to checkpoint" "$log" | sed -n "$((n - 1))p")
			asked=$(date -d "$(sed 's/^\[\([^]]*\)\].*/\1/' <<<"$line")" +%s.%N)
			echo "$(echo "$t1 - $asked" | bc) $(sed 's/.*checkpoint to go //' <<<"$line")" | tee -a "$TMP/samples"
		}
		first_step 1 >/dev/null || fail "the job did not start"
		sample 2
		sample 3
		r=$(sbatch --parsable -o /dev/null --gres=gpu:a100:2 -t 5 --wrap 'sleep 8') ||
			fail "sbatch refused the rigid job"
		sample 4
		sample 5
		scancel "$e" "$r" 2>/dev/null
		sort -n "$TMP/samples" | awk '{v[NR] = $1} END {
			printf "rescale turnaround, decision to first step at the new size, %d samples (interval %s s): min %.2f s, median %.2f s, max %.2f s\n",
				NR, ENVIRON["INTERVAL"], v[1], v[int((NR + 1) / 2)], v[NR] }'
		echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	}
	bench_rescale
	exit $?
fi
if [ "${1:-}" = churn ] || [ "${1:-}" = starts ] || [ "${1:-}" = depth ]; then
	MODE=$1
	[ "$MODE" = starts ] && MODE=churn
	. "$(dirname "$0")/slurm-common.sh"
	export LC_ALL=C
	so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
	# A copy of the plugins, made once: others may rebuild the tree
	# while this runs.
	mkdir -p "$TMP/plugins" && cp "$(dirname "$so")"/*.so "$TMP/plugins/" ||
		fail "cannot copy the plugins"
	NODES=${2:-64}
	GPUS=$((4 * NODES))
	SAMPLES=${SAMPLES:-80} SPAN=${SPAN:-120}
	SUBMIT_P=${SUBMIT_P:-4}
	if [ "$MODE" = churn ]; then
		JOBS=${3:-3000} DUR=${4:-2}
		SCHEDS=${SCHEDS:-builtin backfill copus}
		need=$JOBS
	else
		DEPTHS=${3:-10000 50000}
		SCHEDS=${SCHEDS:-backfill copus}
		need=$(echo $DEPTHS | tr ' ' '\n' | sort -n | tail -n 1)
		need=$((need + GPUS + 2 * SAMPLES * $(echo $DEPTHS | wc -w)))
	fi
	# Slurm's default MaxJobCount is 10000; a site with deep queues raises
	# it (a round figure above what the run submits).
	maxjobs=10000
	while [ $maxjobs -lt $((need + 1000)) ]; do maxjobs=$((maxjobs * 2)); done
	conf="MaxJobCount=$maxjobs${CONF_EXTRA:+
$CONF_EXTRA}"
	: >"$TMP/results"

	load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }
	# up SCHED: a fresh cluster (the last one's state is gone).
	up() {
		local before
		before=$(load)
		"$CLUSTER" down "$TMP/c" >/dev/null 2>&1
		rm -rf "$TMP/c"
		local opt=()
		if [ "$1" = copus ]; then
			opt=(--plugin-dir "$TMP/plugins" ${COPUS_PARAMS:+--sched-params "$COPUS_PARAMS"})
		fi
		cluster_up --nodes "$NODES" --gpus a100:4 --cpus 8 --sched "$1" \
			--wait 600 --conf-extra "$conf" "${opt[@]}" >/dev/null
		: >"$TMP/errs"
		: >"$TMP/ids"
		: >"$TMP/fill"
		FAILED=0
		echo "== sched/$1 on $NODES nodes, load before $before ($(grep -E '^(SchedulerType|SchedulerParameters|JobSubmitPlugins|MaxJobCount)=' "$TMP/c/etc/slurm.conf" | tr '\n' ' '))"
	}
	# timed FILE CMD...: runs CMD (its output in $TMP/out, its errors
	# kept) and adds its time in ms to FILE.
	timed() {
		local f=$1 s e rc
		shift
		s=$EPOCHREALTIME
		"$@" >"$TMP/out" 2>>"$TMP/errs"
		rc=$?
		e=$EPOCHREALTIME
		echo $(((${e/./} - ${s/./}) / 100)) | sed 's/.$/.&/' >>"$f"
		[ $rc = 0 ] || { FAILED=$((FAILED + 1)); echo "$1 exited with $rc" >>"$TMP/errs"; }
		return $rc
	}
	# stat FILE: "median/p95" of the samples in FILE (ms).
	stat() {
		sort -n "$1" | awk '{ v[NR] = $1 } END {
			if (NR == 0) { printf "-"; exit }
			p = int(NR * 0.95 + 0.999); if (p > NR) p = NR
			printf "%.0f/%.0f", v[int((NR + 1) / 2)], v[p] }'
	}
	# submit N FILE OPTIONS...: N jobs of "sleep $JOBCMD_S" with the
	# OPTIONS, by SUBMIT_P loops of sbatch in parallel; their IDs are
	# added to FILE, each sbatch that failed to $TMP/errs. Sets RATE to
	# the jobs submitted per second.
	submit() {
		local n=$1 f=$2 t0 t1 before after
		shift 2
		export BENCH_OPT="$*"
		before=$(wc -l <"$f")
		t0=$EPOCHREALTIME
		seq "$n" | xargs -P "$SUBMIT_P" -n 100 sh -c 'for i; do
			sbatch --parsable -o /dev/null $BENCH_OPT --wrap "sleep $JOBCMD_S" ||
				echo "sbatch exited with $?" >&2
		done' sh >>"$f" 2>>"$TMP/errs"
		t1=$EPOCHREALTIME
		after=$(wc -l <"$f")
		FAILED=$((FAILED + n - (after - before)))
		RATE=$(echo "$t0 $t1 $((after - before))" | awk '{ printf "%.0f", $3 / ($2 - $1) }')
	}
	# check: "errors (timed out)" and "lost/bad" of this cluster's jobs.
	# Every ID sbatch printed must be listed by squeue -t all; COMPLETED,
	# RUNNING, PENDING and COMPLETING are fine.
	check() {
		local tout lost bad
		squeue -h -t all -o '%i %T' >"$TMP/all" 2>>"$TMP/errs" || FAILED=$((FAILED + 1))
		tout=$(grep -ci 'timed out' "$TMP/errs")
		lost=$(cut -d';' -f1 "$TMP/ids" "$TMP/fill" | sort -u |
			join -v1 - <(cut -d' ' -f1 "$TMP/all" | sort -u) | wc -l)
		bad=$(awk '$2 !~ /^(COMPLETED|RUNNING|PENDING|COMPLETING)$/' "$TMP/all" | wc -l)
		echo "$FAILED($tout) $lost/$bad"
		if [ "$FAILED" -gt 0 ] || [ "$lost" -gt 0 ] || [ "$bad" -gt 0 ]; then
			echo "   client errors: $(sort "$TMP/errs" | uniq -c | sort -rn | head -n 5 | tr -s ' \n' '  ')" >&2
			echo "   bad end states: $(awk '{ print $2 }' "$TMP/all" | sort | uniq -c | tr -s ' \n' '  ')" >&2
		fi
	}

	# churn_one SCHED: one row of the churn table.
	churn_one() {
		local sched=$1 end pend n steady all span
		up "$sched"
		scontrol update partitionname=gpu state=down || fail "cannot take the partition down"
		export JOBCMD_S=$DUR
		submit "$JOBS" "$TMP/ids" --gres=gpu:1 -t 5
		echo "   submitted $(wc -l <"$TMP/ids") jobs, $RATE per second"
		sleep 2
		: >"$TMP/sq"
		scontrol update partitionname=gpu state=up || fail "cannot bring the partition up"
		end=$((SECONDS + ${CHURN_MAX:-400}))
		while [ $SECONDS -lt $end ]; do
			timed "$TMP/sq" squeue -h
			pend=$(awk '$5 == "PD"' "$TMP/out" | wc -l)
			[ "$pend" -gt 0 ] || break
			sleep 0.5
		done
		# The start times of the jobs that started, in seconds.
		# (A pending job's StartTime is only an estimate.)
		squeue -h -t all -o '%T %S' 2>>"$TMP/errs" |
			awk '$1 != "PENDING" && $2 != "N/A" { print $2 }' | date -f - +%s | sort -n >"$TMP/starts"
		n=$(wc -l <"$TMP/starts")
		read -r all steady span <<<"$(awk -v g="$GPUS" '{ t[NR] = $1 } END {
			if (NR < 2) { print "- - -"; exit }
			a = NR / (t[NR] - t[1] + 1)
			s = (NR > g + 1) ? sprintf("%.1f", (NR - g) / (t[NR] - t[g] + 1)) : "-"
			printf "%.1f %s %d\n", a, s, t[NR] - t[1] + 1 }' "$TMP/starts")"
		echo "churn $sched $n $all $steady $span $(stat "$TMP/sq") $(wc -l <"$TMP/sq") $(check) $(load)" |
			tee -a "$TMP/results"
		[ "$sched" != copus ] ||
			"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" 2>/dev/null |
			grep -E '^(rounds|event_rounds|starts|starts_max|round_ms_mean|round_ms_max) ' | sed 's/^/   /'
		"$CLUSTER" down "$TMP/c" >/dev/null
	}

	# ctld_cpu: slurmctld's CPU seconds so far (user and system).
	ctld_cpu() {
		awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' \
			"/proc/$(cat "$TMP/c/pids/slurmctld.pid")/stat"
	}
	# cpu_split: CPU seconds so far of every slurmd, of every slurmstepd,
	# and of the whole machine (busy: all but idle and iowait).
	cpu_split() {
		local hz p d=0 st=0
		hz=$(getconf CLK_TCK)
		for p in $(pgrep -x slurmd); do
			d=$((d + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
		done
		for p in $(pgrep -x slurmstepd); do
			st=$((st + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
		done
		awk -v hz="$hz" -v d="$d" -v st="$st" '$1 == "cpu" {
			printf "%.2f %.2f %.2f\n", d / hz, st / hz, ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat
	}
	# ctld_rss: slurmctld's resident memory, MiB.
	ctld_rss() {
		awk '/^VmRSS:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$(cat "$TMP/c/pids/slurmctld.pid")/status"
	}

	# depth_one SCHED: the rows of the depth table for SCHED.
	depth_one() {
		local sched=$1 d have=0 i id ids n end t0 c0 left k prev
		up "$sched"
		export JOBCMD_S=100000
		submit "$GPUS" "$TMP/fill" --gres=gpu:1 -t 600
		end=$((SECONDS + 300))
		until [ "$(squeue -h -t R -o %i | wc -l)" -ge "$GPUS" ]; do
			[ $SECONDS -lt $end ] || fail "sched/$sched: the $GPUS filling jobs do not all run after 300 s"
			sleep 1
		done
		export JOBCMD_S=1
		for d in $DEPTHS; do
			submit $((d - have)) "$TMP/ids" --gres=gpu:1 -t 10
			have=$d
			mapfile -t ids < <(cut -d';' -f1 "$TMP/ids")
			n=${#ids[@]}
			# Let the scheduler see the new jobs before timing.
			sleep 10
			: >"$TMP/sq"
			: >"$TMP/sc"
			: >"$TMP/sb"
			: >"$TMP/sp"
			: >"$TMP/sl"
			rm -f "$TMP"/s[cl]-after-*
			t0=${EPOCHREALTIME/./}
			c0=$(ctld_cpu)
			s0=$(cpu_split)
			[ "$sched" != copus ] ||
				"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" >"$TMP/st0" 2>/dev/null
			sdiag >"$TMP/sd0" 2>/dev/null
			for ((i = 0; i < SAMPLES; i++)); do
				# Sample i starts at i/SAMPLES of SPAN seconds (or
				# later, when the calls take longer).
				left=$((t0 + i * SPAN * 1000000 / SAMPLES - ${EPOCHREALTIME/./}))
				[ $left -le 0 ] || sleep "$((left / 1000000)).$(printf %06d $((left % 1000000)))"
				id=${ids[$(((RANDOM * 32768 + RANDOM) % n))]}
				# The five calls in a new random order each sample, so
				# that no call always follows the same one (a call
				# right after squeue meets slurmctld still sending
				# and freeing squeue's reply); the two job reads are
				# also filed apart when squeue came just before.
				prev=
				for k in $(shuf -e sq sc sp sl sb); do
					case $k in
					sq) timed "$TMP/sq" squeue -h ;;
					sc) timed "$TMP/sc" scontrol show job "$id" ;;
					sp) timed "$TMP/sp" scontrol ping ;;
					sl) timed "$TMP/sl" scontrol --local show job "$id" ;;
					sb) timed "$TMP/sb" sbatch --parsable -o /dev/null --gres=gpu:1 -t 10 --wrap "sleep 1" &&
						cat "$TMP/out" >>"$TMP/ids" ;;
					esac
					case $k in sc | sl) tail -n1 "$TMP/$k" >>"$TMP/$k-after-${prev:-none}" ;; esac
					prev=$k
				done
			done
			echo "depth $sched $(squeue -h -t PD -o %i | wc -l) $RATE $(stat "$TMP/sq") $(stat "$TMP/sc") $(stat "$TMP/sb") $(check) $(load)" |
				tee -a "$TMP/results"
			echo "   slurmctld: $(echo "$c0 $(ctld_cpu) $t0 ${EPOCHREALTIME/./}" |
				awk '{ printf "%.2f CPU s in the %.0f s of samples (%.0f%% of a core)", $2 - $1, ($4 - $3) / 1e6, 100 * ($2 - $1) / (($4 - $3) / 1e6) }'), RSS $(ctld_rss) MiB" |
				tee -a "$TMP/ctld"
			echo "   scontrol ping (no job read): $(stat "$TMP/sp") ms; scontrol --local show job (no federation RPC first): $(stat "$TMP/sl") ms"
			echo "   job reads by the call before them: $(for k in sc sl; do for p in sq sc sp sl sb none; do
				[ ! -s "$TMP/$k-after-$p" ] || printf '%s after %s %s (%d); ' "$k" "$p" "$(stat "$TMP/$k-after-$p")" "$(wc -l <"$TMP/$k-after-$p")"
				done; done)(sc scontrol show job, sl --local, sq squeue, sp ping, sb sbatch; median/p95 ms (samples))"
			echo "   CPU in the samples: $(echo "$s0 $(cpu_split)" |
				awk '{ printf "slurmd (all) %.2f s, slurmstepd (all) %.2f s, the machine busy %.2f s", $4 - $1, $5 - $2, $6 - $3 }')"
			sdiag 2>/dev/null | awk '/^Main schedule/ { s = "main" } /^Backfilling/ { s = "backfill" }
				s && /Total (cycles|backfilled jobs \(since last slurm start\))|Mean cycle:|Max cycle:/ {
					sub(/^[ \t]*/, ""); out = out sprintf("%s %s; ", s, $0) }
				END { print "   sdiag: " out }'
			# slurmctld's own time for the RPCs while they were timed
			# (sdiag's per-type totals, from the handler's start to
			# its reply): what the clients' latency spent in slurmctld.
			sdiag 2>/dev/null | awk 'function get() { c = t = ""
					for (k = 2; k <= NF; k++) {
						if ($k ~ /^count:/) c = substr($k, 7)
						if ($k ~ /^total_time:/) t = substr($k, 12)
					}
					return c != "" && t != "" }
				NR == FNR { if (get()) { c0[$1] = c; t0[$1] = t } next }
				$1 ~ /^REQUEST_(JOB_INFO_SINGLE|JOB_INFO|SUBMIT_BATCH_JOB|FED_INFO|PING)$/ && get() {
					n = c - c0[$1]; t -= t0[$1]
					out = out sprintf("%s %d calls, %.2f ms mean; ", $1, n, n ? t / n / 1000 : 0) }
				END { print "   slurmctld time per RPC in the samples: " out }' "$TMP/sd0" -
			[ "$sched" != copus ] ||
				"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" 2>/dev/null |
				awk '/^(rounds|event_rounds|event_rounds_idle|event_walks|round_ms_mean|round_ms_max|lock_(snapshot|actions)_(cycles|hold_mean_us|hold_max_us|hold_cpu_mean_us|hold_max_cpu_us|hold_max_preempted|hold_max_blocked|wait_mean_us)) / { out = out sprintf("%s %s; ", $1, $2) }
					END { print "   copus: " out }'
			# The locks' holds while the RPCs were timed: how many,
			# and how many within each bound (copus_stats' cumulative
			# histogram, the samples' share of it).
			[ "$sched" != copus ] ||
				"$PWD/plugin/copusctl" stats --state-dir "$TMP/c/state" 2>/dev/null |
				awk 'NR == FNR { v0[$1] = $2; next }
					$1 ~ /^lock_(snapshot|actions)_(cycles|hold_le_)/ { out = out sprintf("%s %d; ", $1, $2 - v0[$1]) }
					END { print "   copus in the samples: " out }' "$TMP/st0" -
		done
		"$CLUSTER" down "$TMP/c" >/dev/null
	}

	echo "machine: $(nproc) cores; plugins: $(md5sum "$TMP/plugins/sched_copus.so" | cut -c1-8) built $(date -r "$so" '+%F %T')"
	for s in $SCHEDS; do
		${MODE}_one "$s"
	done

	echo
	if [ "$MODE" = churn ]; then
		echo "churn: $JOBS one-GPU jobs of 'sleep $DUR' on $NODES nodes x 4 GPUs (at most $((GPUS / DUR)) starts/s)"
		awk 'BEGIN { printf "%-9s %7s %9s %9s %6s %15s %12s %10s %s\n", "scheduler", "started",
			"starts/s", "steady/s", "span", "squeue ms", "errors(to)", "lost/bad", "load 1/5/15" }
		$1 == "churn" { printf "%-9s %7s %9s %9s %5ss %10s (%3s) %12s %10s %s\n", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$TMP/results"
		echo "(starts/s: all started jobs over the seconds from the first start to the last; steady/s: after the first $GPUS; squeue ms: median/p95 (samples))"
		awk '$1 == "churn" { r[$2] = $4 } END {
			if (!("copus" in r) || !("builtin" in r)) exit
			t = 50; if (0.9 * r["builtin"] < t) t = 0.9 * r["builtin"]
			printf "target: copus >= min(50, 0.9 x builtin %.1f) = %.1f starts/s: %.1f, %s\n",
				r["builtin"], t, r["copus"], (r["copus"] >= t) ? "met" : "NOT met" }' "$TMP/results"
	else
		echo "depth: pending one-GPU jobs behind $GPUS running ones on $NODES nodes x 4 GPUs; latency median/p95 in ms over $SAMPLES samples"
		awk 'BEGIN { printf "%-9s %8s %9s %12s %12s %12s %11s %9s %s\n", "scheduler", "pending",
			"submit/s", "squeue", "scontrol", "sbatch", "errors(to)", "lost/bad", "load 1/5/15" }
		$1 == "depth" { printf "%-9s %8s %9s %12s %12s %12s %11s %9s %s\n", $2, $3, $4, $5, $6, $7, $8, $9, $10 }' "$TMP/results"
		# The ratios copus/backfill, row by row (the same depth).
		awk '$1 == "depth" { k = ++n[$2]; v[$2, k, 1] = $5; v[$2, k, 2] = $6; v[$2, k, 3] = $7; d[k] = $3 }
		END {
			split("squeue scontrol sbatch", name, " ")
			for (k = 1; k <= n["copus"] && k <= n["backfill"]; k++) {
				line = sprintf("copus/backfill at ~%s pending:", d[k]); ok = 1
				for (c = 1; c <= 3; c++) {
					split(v["copus", k, c], a, "/"); split(v["backfill", k, c], b, "/")
					rm = (b[1] > 0) ? a[1] / b[1] : 0; rp = (b[2] > 0) ? a[2] / b[2] : 0
					line = line sprintf(" %s %.2fx/%.2fx", name[c], rm, rp)
					if (rm > 1.5 || rp > 1.5) ok = 0
				}
				print line "; target <= 1.5x: " (ok ? "met" : "NOT met")
			} }' "$TMP/results"
	fi
	exit 0
fi
NODES=${1:-32}
JOBS=${2:-5000}
. "$(dirname "$0")/slurm-common.sh"
so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
# ELASTIC=MIN-MAX submits elastic jobs instead (every pending one goes to
# the policy), through the SPANK plugin.
spank=()
opt=()
if [ -n "${ELASTIC:-}" ]; then
	spank=(--spank "$(need_plugin spank_copus)") || exit $?
	opt=(--elastic="$ELASTIC")
fi
cluster_up --nodes "$NODES" --gpus a100:4,v100:4 --cpus 8 --sched copus \
	--plugin-dir "$(dirname "$so")" --wait 120 "${spank[@]}" \
	--sched-params "copus_interval=2,copus_max_jobs=$JOBS,copus_restart_delay=86400"
export COPUS_BENCH_OPT="${opt[*]}"

t0=$(date +%s.%N)
seq "$JOBS" | xargs -P 2 -n 50 sh -c 'for i; do
	sbatch -Q -o /dev/null --gres=gpu:1 $COPUS_BENCH_OPT -t 60 --wrap "sleep 3600" || exit 255
done' sh || fail "sbatch failed"
t1=$(date +%s.%N)
echo "submitted $JOBS jobs in $(echo "$t1 - $t0" | bc) s"

# Samples of the round time: one per round (copus_status is replaced every
# round), ten rounds.
status=$TMP/c/state/copus_status
last=""
n=0
end=$((SECONDS + 120))
: >"$TMP/rounds"
while [ $n -lt 10 ] && [ $SECONDS -lt $end ]; do
	line=$(head -n 1 "$status" 2>/dev/null)
	if [ -n "$line" ] && [ "$line" != "$last" ]; then
		last=$line
		echo "$line" >>"$TMP/rounds"
		n=$((n + 1))
	fi
	sleep 0.2
done
# The first sample may predate the last submissions: report from the rest.
tail -n +2 "$TMP/rounds" | sed -n 's/.*: \([0-9]*\) pending considered, \([0-9]*\) running; took \([0-9.]*\) ms (snapshot \([0-9.]*\), decision \([0-9.]*\), actions \([0-9.]*\)).*/\1 \2 \3 \4 \5 \6/p' |
	sort -n -k3 | awk '{p[NR]=$1; r[NR]=$2; t[NR]=$3; s[NR]=$4; d[NR]=$5; a[NR]=$6}
	END { if (NR == 0) { print "no round samples"; exit 1 }
	m = int((NR + 1) / 2);
	printf "plugin round (%d samples): median %.1f ms (snapshot %.1f, decision %.1f, actions %.1f), max %.1f ms; %d pending, %d running\n",
		NR, t[m], s[m], d[m], a[m], t[NR], p[m], r[m] }'

for i in 1 2 3 4 5; do
	s=$(date +%s.%N)
	c=$(squeue -h | wc -l)
	e=$(date +%s.%N)
	echo "$(echo "($e - $s) * 1000" | bc)" >>"$TMP/squeue"
done
sort -n "$TMP/squeue" | awk -v c="$c" '{v[NR]=$1} END {printf "squeue (%d jobs listed), 5 runs: median %.0f ms, max %.0f ms\n", c, v[3], v[5]}'
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
