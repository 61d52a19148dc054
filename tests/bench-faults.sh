#!/bin/bash
# A fault at every step of a job's life, under sched/copus on a loopback
# cluster (3 nodes x 4 a100):
#   bash ../tests/bench-faults.sh [--steps LIST] [--faults LIST]
#                                 [--cells STEP:FAULT,...]
# from the build directory (every step x every fault by default; LIST is
# comma-separated names from the two lists below; --cells runs just those).
#
# Each cell of the matrix submits three jobs at once and drives them through
# their lives: E, an elastic training job with libcopus (copus-trainer,
# --elastic=1-4 from 1 GPU: sched/copus grows it through the rescale
# protocol), P, an elastic job without libcopus (it publishes no hint, so it
# is never moved), and R, a rigid job. P and R run until E has ended.
# When E reaches the cell's step, the script injects the cell's fault:
#
#   steps:  submitted first-start first-hint asked checkpointed exited-75
#           requeued restarted finished
#   faults: ctld (slurmctld SIGKILL and restart), slurmd (E's node's slurmd
#           SIGKILL and restart), drain (E's node drained, resumed 15 s
#           later), kill (E's processes SIGKILLed: the training itself
#           crashes; a no-op at a step where E has no process, which the
#           cell's line says)
#
# Each step is reached by waiting for its evidence: sbatch's answer, the job
# RUNNING, its Comment holding a hint, the plugin's "asked to checkpoint"
# line, the checkpoint's manifest on disk, slurmctld's "WEXITSTATUS 75"
# line or the plugin's "checkpointed ... requeued" (whichever ends the run
# first: the job exits with 75 as it publishes its checkpoint, and the
# plugin requeues it as it sees that), the job PENDING with a restart, RUNNING again with a restart, and
# slurmctld's "WEXITSTATUS 0" line. Then, once every job has ended, it
# checks the invariants:
#   - each job ran to completion exactly once (one run printed its end and
#     Slurm says COMPLETED), except E under "kill" outside a rescale, which
#     must end FAILED once and never run again (its training died: Slurm
#     reports that; the plugin revives only a job it asked to checkpoint);
#   - no run overlapped another of the same job, no GPU was held by two runs
#     (each run flocks its job's file and its GPUs' files);
#   - no checkpoint lost or torn (every resume restores at least the step of
#     the last checkpoint libcopus wrote, no run starts from scratch after
#     one was written, and the trainer read every checkpoint);
#   - copus_state agrees with Slurm (no rescale in flight for a job that has
#     ended; while the jobs run, copus_status names the running jobs that
#     squeue does), slurmctld is alive and no node was drained by Slurm.
# Prints the matrix (step x fault, pass or FAIL), with the jobs' lines on a
# failure, and "N passed, N failed"; exits non-zero on a failure. A cell
# where slurmctld died between logging a job's end and saving it (it saves
# its jobs at most every few seconds, under any scheduler) reads "slurm":
# slurmctld comes back with the job running (the plugin finds it missing
# from its node once the node registers and has it requeued, as slurmctld
# does with a missing batch job) or pending after an earlier requeue, so the
# job runs to its end a second time; every other invariant still holds
# there.
. "$(dirname "$0")/slurm-common.sh"

ALL_STEPS="submitted first-start first-hint asked checkpointed exited-75 requeued restarted finished"
ALL_FAULTS="ctld slurmd drain kill"
STEPS=$ALL_STEPS
FAULTS=$ALL_FAULTS
CELLS=""
while [ $# -gt 0 ]; do
	case $1 in
	--steps) STEPS=${2//,/ }; shift 2 ;;
	--faults) FAULTS=${2//,/ }; shift 2 ;;
	--cells) CELLS=${2//,/ }; shift 2 ;;
	*) echo "usage: bench-faults.sh [--steps LIST] [--faults LIST] [--cells STEP:FAULT,...]" >&2; exit 2 ;;
	esac
done
if [ -n "$CELLS" ]; then
	STEPS="" FAULTS=""
	for c in $CELLS; do
		[[ " $STEPS " == *" ${c%%:*} "* ]] || STEPS+=" ${c%%:*}"
		[[ " $FAULTS " == *" ${c#*:} "* ]] || FAULTS+=" ${c#*:}"
	done
fi
for s in $STEPS; do
	[[ " $ALL_STEPS " == *" $s "* ]] || { echo "bench-faults.sh: no step '$s' (steps: $ALL_STEPS)" >&2; exit 2; }
done
for f in $FAULTS; do
	[[ " $ALL_FAULTS " == *" $f "* ]] || { echo "bench-faults.sh: no fault '$f' (faults: $ALL_FAULTS)" >&2; exit 2; }
done

so=$(need_plugin sched_copus "configure --with-slurm-src") || exit $?
spank=$(need_plugin spank_copus) || exit $?
trainer=$PWD/contrib/trainer/copus-trainer
[ -x "$trainer" ] || skip "$trainer not built"
cluster_up --nodes 3 --gpus a100:4 --sched copus --spank "$spank" \
	--plugin-dir "$(dirname "$so")" \
	--sched-params copus_interval=2,copus_restart_delay=3,copus_restart_cost=1,copus_checkpoint_deadline=10
log=$TMP/c/log/slurmctld.log
chmod 755 "$TMP"

# The jobs' script: faults.job DIR KIND (KIND: elastic, plain or rigid).
cat >"$TMP/faults.job" <<'JOB'
#!/bin/bash
dir=$1 kind=$2 out=$1/$2
rc=${SLURM_RESTART_COUNT:-0}
bad() { echo "$* (run $rc, $(date +%s.%N))" >>"$out.bad"; }
# One run of the job at a time, each GPU to one run at a time: the locks
# are held by this process and, after exec, by the trainer.
exec 8>>"$out.lock"
flock -n 8 || bad "DOUBLE: another run of job $SLURM_JOB_ID holds its lock"
for d in $(tr , ' ' <<<"$CUDA_VISIBLE_DEVICES"); do
	exec {fd}>>"$dir/../gpu.$SLURMD_NODENAME.$d"
	flock -n $fd || bad "GPU-TWICE: $SLURMD_NODENAME GPU $d is held by another run"
done
echo "run restart=$rc node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES at $(date +%s.%N)" >>"$out.runs"
if [ "$kind" = elastic ]; then
	# COPUS_DEBUG=1: libcopus says when it exits for a requeue.
	COPUS_DEBUG=1 exec "$TRAINER" --app imagenet --gpu-type a100 --speedup "$SPEEDUP" \
		--target "$TARGET" --checkpoint "$dir/ckpt" --print-every 20 \
		>>"$out" 2>&1
fi
trap '' USR1
# P and R run until E has ended, so that they face the same faults.
until [ -e "$dir/stop" ]; do
	sleep 0.2
done
echo "end restart=$rc" >>"$out"
JOB
chmod 755 "$TMP/faults.job"

# The trainer's speed and run length (progress steps at its initial batch):
# about 14 s on one a100 (imagenet's fitted model, 20 times faster), less
# once grown.
SPEEDUP=${COPUS_FAULTS_SPEEDUP:-20}
TARGET=${COPUS_FAULTS_TARGET:-1000}

# field ID FIELD: one field of scontrol show job.
field() { job_field "$1" "$2"; }

# reached STEP: whether E has reached the step (its evidence).
reached() {
	local e=${ids[E]}
	case $1 in
	submitted) [ -n "$e" ] ;;
	first-start) [ "$(squeue -h -j "$e" -o %T 2>/dev/null)" = RUNNING ] ;;
	first-hint) scontrol -o show job "$e" 2>/dev/null | grep -q 'Comment=copus1:' ;;
	asked) grep -q "sched/copus: JobId=$e asked to checkpoint" "$log" ;;
	checkpointed) [ -f "$cell/ckpt/copus.manifest" ] ;;
	exited-75)
		# Its run ended for the requeue: it exited with 75, or the
		# plugin, which saw its checkpoint first, requeued it.
		grep -Eq "_job_complete: JobId=$e WEXITSTATUS 75|sched/copus: JobId=$e checkpointed at step .*; requeued\$" "$log" ;;
	requeued)
		[ "$(field "$e" JobState)" = PENDING ] && [ "$(field "$e" Restarts)" -ge 1 ] 2>/dev/null ;;
	restarted)
		[ "$(field "$e" JobState)" = RUNNING ] && [ "$(field "$e" Restarts)" -ge 1 ] 2>/dev/null ;;
	finished) grep -q "_job_complete: JobId=$e WEXITSTATUS 0" "$log" ;;
	esac
}

# enode: E's node now, or n1 when it has none.
enode() {
	local n
	n=$(squeue -h -j "${ids[E]}" -o %N 2>/dev/null)
	n=${n%%,*}
	[[ $n =~ ^n[0-9]+$ ]] && echo "$n" || echo n1
}

# release: lets the three jobs go (again after a slurmctld crash, which may
# have lost the release, as it loses any change it had not saved).
release() {
	scontrol release "${ids[E]},${ids[P]},${ids[R]}" 2>/dev/null
}

# inject FAULT: sets why when the fault itself could not be made.
inject() {
	case $1 in
	ctld)
		"$CLUSTER" restart-ctld "$TMP/c" --kill >/dev/null 2>&1 ||
			why="slurmctld did not come back"
		release ;;
	slurmd)
		"$CLUSTER" restart-slurmd "$TMP/c" --node "$(enode)" --kill >/dev/null 2>&1 ||
			why="slurmd did not come back" ;;
	drain)
		drained=$(enode)
		scontrol update nodename="$drained" state=drain reason=faults ;;
	kill)
		# The batch script (Slurm's copy, slurm_script) or the trainer
		# it exec'd (through libtool's wrapper in a build tree),
		# wherever it runs. At the steps where E runs for a while, the
		# kill waits (up to 3 s) for its processes to be there; at the
		# others there may be none (it has exited, or waits requeued).
		local tries=1
		case $step in first-start | first-hint | restarted) tries=30 ;; esac
		while [ $tries -gt 0 ] &&
			! pkill -KILL -f "slurm_script $cell elastic|copus-trainer .*--checkpoint $cell/ckpt"; do
			tries=$((tries - 1))
			[ $tries = 0 ] || sleep 0.1
		done
		if [ $tries -gt 0 ]; then
			killed=1
			# Asked to checkpoint in the run it killed: the
			# plugin's last word on E since its last start.
			grep -E "sched/copus: (started JobId=${ids[E]} |JobId=${ids[E]} asked to checkpoint)" "$log" |
				tail -n 1 | grep -q "asked to checkpoint" && killed_asked=1
		fi ;;
	esac
}

# final ID: whether the job has ended for good (or Slurm has forgotten it).
final() {
	case $(field "$1" JobState) in
	"" | COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | DEADLINE | BOOT_FAIL) return 0 ;;
	esac
	return 1
}

# lost_end ID: slurmctld logged the job's end (exit 0), died, and recovered
# the job as not ended (running, or pending after a requeue it had saved):
# after that start of slurmctld the plugin found it missing from its node,
# or started it again (an ended job is recovered too, but never started).
lost_end() {
	awk -v id="$1" '
		index($0, "_job_complete: JobId=" id " WEXITSTATUS 0") { ended = 1 }
		/slurmctld version .* started/ && ended { crashed = 1 }
		crashed && (index($0, "sched/copus: started JobId=" id " ") ||
			    index($0, "sched/copus: JobId=" id " ran when slurmctld stopped")) { lost = 1 }
		END { exit !lost }' "$log"
}

# agree: copus_status names as RUNNING the jobs squeue shows running.
agree() {
	local sq st
	sq=$(squeue -h -t R -o %i 2>/dev/null | sort -n | tr '\n' ' ')
	st=$(awk -F'\t' '$2 == "RUNNING" { print $1 }' "$TMP/c/state/copus_status" 2>/dev/null | sort -n | tr '\n' ' ')
	[ "$sq" = "$st" ]
}

declare -A ids result
passed=0 failed=0 slurm_lost=0
cellno=0
for step in $STEPS; do
	for fault in $FAULTS; do
		if [ -n "$CELLS" ] && [[ " $CELLS " != *" $step:$fault "* ]]; then
			continue
		fi
		cellno=$((cellno + 1))
		cell=$TMP/cell$cellno
		mkdir -p "$cell/ckpt"
		chmod -R 777 "$cell"
		why="" lost=""
		killed="" killed_asked="" drained=""
		ids=()
		export TRAINER=$trainer TARGET SPEEDUP
		# Held until slurmctld has saved the three submissions (its
		# job state file written after the last sbatch answered): a
		# submission slurmctld dies before saving is lost by Slurm
		# itself, under any scheduler (tests/test-slurm-crash-start.sh).
		ids[E]=$(sbatch --parsable -o /dev/null -J E -t 10 --gres=gpu:a100:1 \
			--elastic=1-4 --hold "$TMP/faults.job" "$cell" elastic)
		ids[P]=$(sbatch --parsable -o /dev/null -J P -t 10 --gres=gpu:a100:2 \
			--elastic=1-2 --hold "$TMP/faults.job" "$cell" plain)
		ids[R]=$(sbatch --parsable -o /dev/null -J R -t 10 --gres=gpu:a100:2 \
			--hold "$TMP/faults.job" "$cell" rigid)
		touch "$cell/ref"
		t0=$SECONDS
		until [ -n "$(find "$TMP/c/state/job_state" -newer "$cell/ref" 2>/dev/null)" ]; do
			[ $((SECONDS - t0)) -lt 30 ] || break
			sleep 0.05
		done
		[ "$step" != submitted ] || inject "$fault"
		release
		t0=$SECONDS
		until reached "$step"; do
			if [ $((SECONDS - t0)) -ge 90 ] || final "${ids[E]}"; then
				reached "$step" && break
				touch "$cell/stop"
				why="E never reached the step ($(field "${ids[E]}" JobState))"
				break
			fi
			sleep 0.05
		done
		[ -n "$why" ] || [ "$step" = submitted ] || inject "$fault"
		# Every job to its end (P and R end with E).
		t1=$SECONDS
		seen_agree=""
		while [ -z "$why" ]; do
			final "${ids[E]}" && touch "$cell/stop"
			all=1
			for k in E P R; do final "${ids[$k]}" || all=""; done
			[ -n "$all" ] && break
			# While all three run, the plugin's status agrees
			# with squeue (a full round after a change at most).
			if [ -z "$seen_agree" ] && agree; then seen_agree=1; fi
			if [ -n "$drained" ] && [ $((SECONDS - t1)) -ge 15 ]; then
				scontrol update nodename="$drained" state=resume
				drained=""
			fi
			if [ $((SECONDS - t1)) -ge 150 ]; then
				why="not all jobs ended within 150 s of the fault: E $(field "${ids[E]}" JobState), P $(field "${ids[P]}" JobState), R $(field "${ids[R]}" JobState)"
				break
			fi
			sleep 0.3
		done
		[ -z "$drained" ] || scontrol update nodename="$drained" state=resume
		# The invariants.
		if [ -z "$why" ]; then
			for k in E P R; do
				id=${ids[$k]}
				st=$(field "$id" JobState)
				case $k in
				E) ends=$(grep -c '^done step' "$cell/elastic" 2>/dev/null) ;;
				*) ends=$(grep -c '^end ' "$cell/$([ $k = P ] && echo plain || echo rigid)" 2>/dev/null) ;;
				esac
				if [ $k = E ] && [ -n "$killed" ] && [ -z "$killed_asked" ] && [ "$st" = FAILED ]; then
					[ "${ends:-0}" = 0 ] || why+="$k ($id) FAILED after its kill but also ran to its end; "
					continue
				fi
				[ "$st" = COMPLETED ] || why+="$k ($id) is $st; "
				if [ "${ends:-0}" = 2 ] && [ "$st" = COMPLETED ] &&
					lost_end "$id"; then
					# slurmctld died before it saved the
					# end it had logged: its own loss.
					lost+="$k "
					continue
				fi
				[ "${ends:-0}" = 1 ] || why+="$k ($id) ran to its end $ends times; "
			done
			bads=$(cat "$cell"/*.bad 2>/dev/null | head -n 3 | tr '\n' ';')
			[ -z "$bads" ] || why+="$bads "
			# Checkpoints: every one read, no resume going back,
			# and none lost: once E has checkpointed (exited 75
			# or resumed), no run of it starts from scratch.
			if grep -q 'copus-trainer: checkpoint\|copus_init:' "$cell/elastic" 2>/dev/null; then
				why+="the trainer could not read its checkpoint: $(grep 'copus-trainer: checkpoint\|copus_init:' "$cell/elastic" | head -n 1); "
			fi
			awk 'match($0, /checkpoint of step [0-9]+ written/) {
				split(substr($0, RSTART, RLENGTH), w, " "); saved = w[4] + 0 }
			     /^restored step/ { if ($3 + 0 < saved) bad = 1 }
			     END { exit bad }' "$cell/elastic" 2>/dev/null ||
				why+="E resumed from an older checkpoint than its last one: $(grep -E '^restored|checkpoint of step' "$cell/elastic" | tr '\n' ';'); "
			awk '/exiting with 75 for the requeue|^resumed job/ { ck = 1 }
			     /^started job/ && ck { bad = 1 }
			     END { exit bad }' "$cell/elastic" ||
				why+="E started from scratch after it had checkpointed: $(grep -E '^(started|resumed) job|exiting with' "$cell/elastic" | tr '\n' ';'); "
			for k in E P R; do
				grep -q "^rescale ${ids[$k]} " "$TMP/c/state/copus_state" 2>/dev/null &&
					why+="copus_state holds a rescale of the ended job $k (${ids[$k]}); "
			done
			# While they ran (given two full rounds to catch up)
			# and once they have ended.
			[ -z "$seen_agree" ] && [ $((SECONDS - t1)) -ge 6 ] &&
				why+="copus_status never agreed with squeue on the running jobs; "
			t2=$SECONDS
			until agree; do
				[ $((SECONDS - t2)) -lt 6 ] || {
					why+="copus_status still shows jobs running that squeue does not: $(awk -F'\t' '$2 == "RUNNING" { print $1 }' "$TMP/c/state/copus_status" | tr '\n' ' '); "
					break
				}
				sleep 0.3
			done
			"$CLUSTER" status "$TMP/c" | grep -q '^slurmctld: running' ||
				why+="slurmctld is not running; "
			if sinfo -h -o '%T %E' | grep -q '^drain'; then
				why+="a node was drained: $(sinfo -h -R -o '%n %E' | head -n 1); "
			fi
		fi
		if [ -z "$why" ] && [ -n "$lost" ]; then
			result[$step.$fault]=slurm
			slurm_lost=$((slurm_lost + 1))
			echo "$step x $fault: slurmctld died between logging the end of ${lost% } and saving it, and recovered it unfinished: it ran again"
		elif [ -z "$why" ]; then
			result[$step.$fault]=pass
			passed=$((passed + 1))
		else
			result[$step.$fault]=FAIL
			failed=$((failed + 1))
			echo "FAIL: $step x $fault: $why"
			for k in E P R; do
				echo "  $k ${ids[$k]}: $(scontrol -o show job "${ids[$k]}" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobState|Reason|ExitCode|Restarts|NodeList)=' | tr '\n' ' ')"
				grep -E "JobId=${ids[$k]}[^0-9]" "$log" | tail -n 8 | sed 's/^/    /'
			done
			echo "  E's output: $(tail -n 8 "$cell/elastic" 2>/dev/null | tr '\n' ';')"
			echo "  E's runs: $(tr '\n' ';' <"$cell/elastic.runs" 2>/dev/null)"
			KEEP_TMP=1
		fi
		echo "cell $cellno: $step x $fault: ${result[$step.$fault]} ($((SECONDS - t0)) s; E $(field "${ids[E]}" JobState), $(grep -c . "$cell/elastic.runs" 2>/dev/null) run(s)${killed:+, killed}${killed_asked:+ while asked})"
		# The next cell starts on a quiet cluster.
		scancel "${ids[@]}" 2>/dev/null
		for n in n1 n2 n3; do
			scontrol update nodename=$n state=resume 2>/dev/null
		done
		end=$((SECONDS + 30))
		while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $SECONDS -lt $end ]; do
			sleep 0.3
		done
	done
done

echo
printf '%-14s' step
for f in $FAULTS; do printf ' %-7s' "$f"; done
echo
for s in $STEPS; do
	printf '%-14s' "$s"
	for f in $FAULTS; do printf ' %-7s' "${result[$s.$f]:--}"; done
	echo
done
echo "$passed passed, $failed failed$([ "$slurm_lost" = 0 ] || echo ", $slurm_lost where slurmctld lost an end it had not saved (slurm)")"
[ "$failed" = 0 ]
