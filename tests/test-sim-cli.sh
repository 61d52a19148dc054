#!/bin/sh
# copus-sim from the command line: the summary's keys, the timeline, two
# workloads in parallel, copus's remaining-work modes, a history saved and
# given back, what the policies know of other GPU types with and without
# --probes, measured restart costs drawn at random, --min-run's hold, the
# error messages of a malformed workload, a malformed history and of bad
# options, and sim/solo-bound.sh's floor (each job alone).
set -u
sim=${COPUS_SIM:-sim/copus-sim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# refused WHAT MESSAGE ARG...: copus-sim ARG... on the cluster 1x2 and
# the toy profiles fails, and its error says MESSAGE.
refused() {
	what=$1 msg=$2
	shift 2
	"$sim" --cluster 1x2 --profiles "$tmp/p" "$@" > /dev/null 2> "$tmp/err" &&
		fail "$what was accepted"
	grep -qF -- "$msg" "$tmp/err" || { cat "$tmp/err"; fail "$what: no \"$msg\""; }
}

mkdir -p "$tmp/p/toy"
printf 'placement,local_bsz,step_time,sync_time\n1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.5,0.5\n' \
	> "$tmp/p/toy/placements.csv"
printf 'num_nodes,num_replicas,local_bsz,step_time,sync_time\n6,6,10,5.0,4.0\n' \
	> "$tmp/p/toy/scalability.csv"
printf 'progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1,0\n200,200,0.6,1,0\n' \
	> "$tmp/p/toy/validation-10.csv"
printf 'progress,iteration,metric,grad_sqr,grad_var\n110,55,0.5,2,4\n220,110,0.6,2,4\n' \
	> "$tmp/p/toy/validation-20.csv"
printf 'name,time,application,num_replicas,batch_size\na,0,toy,1,10\nb,10,toy,1,10\n' \
	> "$tmp/w1.csv"
printf 'name,time,application,num_replicas,batch_size\nc,0,toy,1,10\n' \
	> "$tmp/w2.csv"

for pol in fifo tiresias optimus pollux; do
	"$sim" --cluster 1x2 --profiles "$tmp/p" --policy $pol --jobs 2 \
		--summary "$tmp/s.json" --timeline "$tmp/t.csv" \
		"$tmp/w1.csv" "$tmp/w2.csv" > "$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "copus-sim --policy $pol failed"; }
	for key in '"jcts"' '"avgs"' '"mean"' '"makespan"' '"p99_jct"' \
		'"max_ftf"' '"gpu_hours"' '"restarts"' '"job_restarts"' '"decide_ms"' '"w1"' \
		'"w2"' '"a"' '"c"'; do
		grep -q "$key" "$tmp/s.json" || fail "$pol: no $key in the summary"
	done
	head -1 "$tmp/t.csv" | grep -q '^workload,time,job,gpus,nodes,batch,goodput,progress' ||
		fail "$pol: timeline header"
	grep -q '^w2,' "$tmp/t.csv" || fail "$pol: no rows of w2 in the timeline"
done
# On two GPUs both jobs of w1 start at the round at 60 s: JCTs 290 and
# 280 (60 s wait, 30 s restart, 200 s of training).
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy fifo --summary "$tmp/s.json" \
	"$tmp/w1.csv" > /dev/null || fail "fifo run"
if command -v python3 > /dev/null; then
	python3 - "$tmp/s.json" <<'PY' || fail "summary values"
import json, sys
s = json.load(open(sys.argv[1]))
assert abs(s["jcts"]["w1"]["a"] - 290) < 1e-6, s
assert abs(s["jcts"]["w1"]["b"] - 280) < 1e-6, s
assert abs(s["avgs"]["w1"] - 285) < 1e-6 and abs(s["mean"] - 285) < 1e-6
assert s["restarts"]["w1"] == 0 and abs(s["makespan"]["w1"] - 290) < 1e-6
assert s["job_restarts"]["w1"] == {"a": 0, "b": 0}, s["job_restarts"]
d = s["decide_ms"]["w1"]
assert 0 <= d["median"] <= d["p95"] <= d["max"], d
PY
fi
# Per-model rules: toy trains twice as slowly as profiled and restarts in
# 10 s (JCTs 60 + 10 + 400 and 50 + 10 + 400); a rule for a model not in
# the run is ignored; a bad value or a missing column is named.
printf 'application,slowdown,restart_delay\ntoy,2,10\nother,3,5\n' > "$tmp/r.csv"
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy fifo --app-rules "$tmp/r.csv" \
	--summary "$tmp/s.json" "$tmp/w1.csv" > /dev/null || fail "--app-rules run"
if command -v python3 > /dev/null; then
	python3 - "$tmp/s.json" <<'PY' || fail "--app-rules values"
import json, sys
s = json.load(open(sys.argv[1]))
assert abs(s["jcts"]["w1"]["a"] - 470) < 1e-6, s
assert abs(s["jcts"]["w1"]["b"] - 460) < 1e-6, s
PY
fi
printf 'application,slowdown,restart_delay\ntoy,-1,10\n' > "$tmp/r.csv"
refused "a negative slowdown" "r.csv:2: column 2 (slowdown): '-1'" \
	--app-rules "$tmp/r.csv" "$tmp/w1.csv"
printf 'application,slowdown\ntoy,2\n' > "$tmp/r.csv"
refused "rules without restart_delay" "no column 'restart_delay'" \
	--app-rules "$tmp/r.csv" "$tmp/w1.csv"
# Measured restart costs (--restart-delays): a first start costs one of the
# rows marked first (here 10 s: JCTs 60 + 10 + 200 and 50 + 10 + 200), not
# one of the rescales'; without the first column every row serves both
# (30 s: as --restart-delay's default). Draws from several costs follow
# --seed: the same seed gives the same run, and the costs drawn are the
# file's (0 or 100 s). A bad value, a bad first and a file without rows are
# named.
printf 'restart_delay,first\n10,1\n99,0\n' > "$tmp/d.csv"
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy fifo --restart-delays "$tmp/d.csv" \
	--summary "$tmp/s.json" "$tmp/w1.csv" > /dev/null || fail "--restart-delays run"
printf 'restart_delay\n30\n' > "$tmp/d1.csv"
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy fifo --restart-delays "$tmp/d1.csv" \
	--summary "$tmp/s1.json" "$tmp/w1.csv" > /dev/null || fail "--restart-delays one column"
printf 'restart_delay,first\n0,1\n100,1\n' > "$tmp/d2.csv"
for seed in 1 2 3 4 5 6 7 8 1; do
	"$sim" --cluster 1x2 --profiles "$tmp/p" --policy fifo --restart-delays "$tmp/d2.csv" \
		--seed $seed --summary "$tmp/s2-$seed.json" "$tmp/w1.csv" > /dev/null ||
		fail "--restart-delays --seed $seed"
	[ -e "$tmp/s2-first.json" ] || cp "$tmp/s2-$seed.json" "$tmp/s2-first.json"
done
if command -v python3 > /dev/null; then
	python3 - "$tmp" <<'PY' || fail "--restart-delays values"
import json, sys
t = sys.argv[1]
s = json.load(open(t + "/s.json"))
assert abs(s["jcts"]["w1"]["a"] - 270) < 1e-6, s
assert abs(s["jcts"]["w1"]["b"] - 260) < 1e-6, s
s = json.load(open(t + "/s1.json"))
assert abs(s["jcts"]["w1"]["a"] - 290) < 1e-6, s
assert abs(s["jcts"]["w1"]["b"] - 280) < 1e-6, s
seen = set()
for seed in range(1, 9):
    j = json.load(open(f"{t}/s2-{seed}.json"))["jcts"]["w1"]
    assert j["a"] in (260, 360) and j["b"] in (250, 350), j
    seen.add((j["a"], j["b"]))
assert len(seen) > 1, seen
a = json.load(open(t + "/s2-first.json"))["jcts"]
b = json.load(open(t + "/s2-1.json"))["jcts"]
assert a == b, (a, b)
PY
fi
printf 'restart_delay,first\n-5,0\n' > "$tmp/d.csv"
refused "a negative restart cost" "d.csv:2: column 1 (restart_delay): '-5'" \
	--restart-delays "$tmp/d.csv" "$tmp/w1.csv"
printf 'restart_delay,first\n5,yes\n' > "$tmp/d.csv"
refused "first 'yes'" "d.csv:2: column 2 (first): 'yes' is not 0 or 1" \
	--restart-delays "$tmp/d.csv" "$tmp/w1.csv"
printf 'restart_delay\n' > "$tmp/d.csv"
refused "a file without costs" "d.csv: no restart_delay rows" \
	--restart-delays "$tmp/d.csv" "$tmp/w1.csv"
refused "--seed x" "--seed: 'x'" --seed x "$tmp/w1.csv"
# A malformed workload: file, line and column in the message.
printf 'name,time,application,num_replicas,batch_size\na,0,toy,x,10\n' > "$tmp/bad.csv"
if "$sim" --cluster 1x2 --profiles "$tmp/p" "$tmp/bad.csv" 2> "$tmp/err"; then
	fail "a malformed workload was accepted"
fi
grep -q 'bad.csv:2: column 4 (num_replicas)' "$tmp/err" || { cat "$tmp/err"; fail "error message"; }
# copus in each remaining-work mode: the summary says which; a bad mode is
# refused with a message that names it.
for rem in predict oracle none; do
	"$sim" --cluster 1x2 --profiles "$tmp/p" --policy copus --remaining $rem \
		--summary "$tmp/s.json" "$tmp/w1.csv" "$tmp/w2.csv" > "$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "copus --remaining $rem failed"; }
	grep -q "\"remaining\": *\"$rem\"" "$tmp/s.json" ||
		fail "--remaining $rem not in the summary"
	if [ $rem = predict ]; then
		for key in '"prediction_error"' '"samples"' '"unknown"' \
			'"trainings"' '"cpu_seconds"'; do
			grep -q "$key" "$tmp/s.json" || fail "predict: no $key"
		done
	fi
done
# The other policies' summaries say what they really get.
for pol in fifo:oracle optimus:oracle pollux:none; do
	"$sim" --cluster 1x2 --profiles "$tmp/p" --policy ${pol%:*} \
		--remaining predict --summary "$tmp/s.json" "$tmp/w1.csv" \
		> "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "${pol%:*} run"; }
	grep -q "\"remaining\": *\"${pol#*:}\"" "$tmp/s.json" ||
		fail "${pol%:*}: remaining is not ${pol#*:} in the summary"
done
# A history: the finished jobs of one run, in the plugin's format, given to
# the predictor of another before its first round (no job-round without a
# prediction then); a bad line is refused with its file and number.
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy copus --save-history "$tmp/h" \
	"$tmp/w1.csv" "$tmp/w2.csv" > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--save-history run"; }
[ "$(head -1 "$tmp/h")" = "copus-history 1" ] || fail "history: first line"
[ "$(grep -c '^200 1 10 - toy$' "$tmp/h")" = 3 ] || { cat "$tmp/h"; fail "history: three toy jobs of 200 s"; }
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy copus --history "$tmp/h" \
	--summary "$tmp/s.json" "$tmp/w1.csv" > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--history run"; }
grep -q '"unknown": *0' "$tmp/s.json" || { cat "$tmp/s.json"; fail "--history: job-rounds without a prediction"; }
printf 'copus-history 1\n200 1 10 - toy\n200 x 10 - toy\n' > "$tmp/bad-h"
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy copus --history "$tmp/bad-h" \
	"$tmp/w1.csv" > /dev/null 2> "$tmp/err" && fail "a bad history was accepted"
grep -q 'bad-h line 3: expected WORK GPUS BATCH USER NAME' "$tmp/err" || { cat "$tmp/err"; fail "history error message"; }
"$sim" --cluster 1x2 --profiles "$tmp/p" --policy copus --remaining psychic \
	"$tmp/w1.csv" 2> "$tmp/err" && fail "--remaining psychic accepted"
grep -q "remaining: 'psychic'" "$tmp/err" || { cat "$tmp/err"; fail "--remaining error message"; }
"$sim" --cluster 3y4 --profiles "$tmp/p" "$tmp/w1.csv" 2> "$tmp/err" && fail "bad --cluster accepted"
grep -q -- '--cluster' "$tmp/err" || fail "--cluster error message"
# Two GPU types, one node of one GPU each: fast computes four times faster
# than slow. A long job starts on slow, the first type. With --probes a
# policy that learns models knows from its arrival how fast it would be on
# fast and moves it there; by default it is told only what the plugin
# learns, its model on slow, and keeps it there. The summary says which.
mkdir -p "$tmp/q/toy"
for t in slow:1 fast:0.25; do
	awk -v f=${t#*:} 'BEGIN {
		print "placement,local_bsz,step_time,sync_time"
		print "1,10," f ",0"; print "1,20," 2 * f ",0"
		print "2,10," f + 0.5 ",0.5"; print "11,10," f + 2 ",2" }' \
		> "$tmp/q/toy/placements-${t%:*}.csv"
	printf 'num_nodes,num_replicas,local_bsz,step_time,sync_time\n6,6,10,5.0,4.0\n' \
		> "$tmp/q/toy/scalability-${t%:*}.csv"
done
printf 'progress,iteration,metric,grad_sqr,grad_var\n3000,3000,0.5,1,0\n6000,6000,0.6,1,0\n' \
	> "$tmp/q/toy/validation-10.csv"
printf 'progress,iteration,metric,grad_sqr,grad_var\n3300,1650,0.5,2,4\n6600,3300,0.6,2,4\n' \
	> "$tmp/q/toy/validation-20.csv"
printf 'name,time,application,num_replicas,batch_size\na,0,toy,1,10\n' > "$tmp/w3.csv"
for pol in copus sia; do
	for probes in --probes --no-probes ''; do
		"$sim" --cluster slow:1x1,fast:1x1 --profiles "$tmp/q" --policy $pol \
			$probes --summary "$tmp/s.json" --timeline "$tmp/t.csv" \
			"$tmp/w3.csv" > "$tmp/out" 2>&1 ||
			{ cat "$tmp/out"; fail "$pol $probes run"; }
		types=$(tail -n +2 "$tmp/t.csv" | cut -d, -f10 | uniq | tr '\n' ' ')
		if [ "$probes" = --probes ]; then
			[ "$types" = "slow fast " ] ||
				fail "$pol --probes: the job ran on '$types', not slow then fast"
			grep -q '"probes": *true' "$tmp/s.json" || fail "$pol --probes: not in the summary"
		else
			[ "$types" = "slow " ] ||
				fail "$pol ${probes:-by default}: the job ran on '$types', not on slow only"
			grep -q '"probes": *false' "$tmp/s.json" || fail "$pol ${probes:-by default}: probes in the summary"
		fi
	done
done
# --gpus: constants that name the site's types after built-in ones. Told
# that slow is a T4 and fast an A100, the copus policy starts the job,
# which has run nowhere yet, on fast, as the plugin does with
# copus_planner_gpus, and keeps it there. A second job that arrives with it
# starts on slow, and once the first has ended moves to fast: its speed
# there is estimated from its model on slow and the constants, without a
# probe. A type the table does not know is refused with the file and the
# type.
printf '{"version": 1, "gpus": {"slow": "t4", "fast": "a100"}}\n' > "$tmp/gpus.json"
"$sim" --cluster slow:1x1,fast:1x1 --profiles "$tmp/q" --policy copus \
	--gpus "$tmp/gpus.json" --summary "$tmp/s.json" --timeline "$tmp/t.csv" \
	"$tmp/w3.csv" > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--gpus run"; }
types=$(tail -n +2 "$tmp/t.csv" | cut -d, -f10 | uniq | tr '\n' ' ')
[ "$types" = "fast " ] || fail "--gpus: the job ran on '$types', not on fast only"
printf 'name,time,application,num_replicas,batch_size\na,0,toy,1,10\nb,0,toy,1,10\n' > "$tmp/w4.csv"
"$sim" --cluster slow:1x1,fast:1x1 --profiles "$tmp/q" --policy copus \
	--gpus "$tmp/gpus.json" --timeline "$tmp/t.csv" "$tmp/w4.csv" > "$tmp/out" 2>&1 ||
	{ cat "$tmp/out"; fail "--gpus run of two jobs"; }
for j in a:"fast " b:"slow fast "; do
	types=$(grep ",${j%%:*}," "$tmp/t.csv" | cut -d, -f10 | uniq | tr '\n' ' ')
	[ "$types" = "${j#*:}" ] || fail "--gpus: job ${j%%:*} ran on '$types', not on '${j#*:}'"
done
grep -q '"probes": *false' "$tmp/s.json" || fail "--gpus: probes in the summary"
printf '{"version": 1, "gpus": {"slow": "t5"}}\n' > "$tmp/bad-gpus.json"
"$sim" --cluster slow:1x1,fast:1x1 --profiles "$tmp/q" --policy copus \
	--gpus "$tmp/bad-gpus.json" "$tmp/w3.csv" > /dev/null 2> "$tmp/err" && fail "a bad --gpus file was accepted"
grep -q 'bad-gpus.json: GPU type "slow": "t5" is not a type of the built-in table' "$tmp/err" ||
	{ cat "$tmp/err"; fail "--gpus error message"; }
"$sim" --cluster slow:1x1,fast:1x1 --profiles "$tmp/q" --gpus "$tmp/none.json" \
	"$tmp/w3.csv" > /dev/null 2> "$tmp/err" && fail "a missing --gpus file was accepted"
grep -q 'none.json' "$tmp/err" || { cat "$tmp/err"; fail "--gpus missing file message"; }
# A policy that learns no models is given no probes, and says so.
"$sim" --cluster slow:1x1,fast:1x1 --profiles "$tmp/q" --policy fifo --probes \
	--summary "$tmp/s.json" "$tmp/w3.csv" > /dev/null || fail "fifo --probes run"
grep -q '"probes": *false' "$tmp/s.json" || fail "fifo --probes: the summary says probes"
"$sim" --arena "$tmp" --policy fifo --probes 2> "$tmp/err" && fail "--probes accepted with --arena"
grep -q -- '--probes is for workloads' "$tmp/err" || { cat "$tmp/err"; fail "--probes --arena message"; }
# The workloads' options are refused with --arena (its replay has its own
# rounds, cluster and trace), and Arena's options without it.
for o in "--round-phase 10" "--interval 30" "--min-run 60" "--cluster 2x4" "--jobs 2"; do
	"$sim" --arena "$tmp" --policy fifo $o 2> "$tmp/err" && fail "$o accepted with --arena"
	grep -q -- "${o%% *} is for workloads" "$tmp/err" || { cat "$tmp/err"; fail "$o --arena message"; }
done
for o in "--max-rounds 5" "--cell-choice none" "--throughput planner" "--arena-rules honest"; do
	"$sim" --policy fifo --profiles "$tmp" $o "$tmp/w.csv" 2> "$tmp/err" && fail "$o accepted without --arena"
	grep -q -- "${o%% *} is for --arena" "$tmp/err" || { cat "$tmp/err"; fail "$o without --arena: message"; }
done

# An option's check: with the option (OPTION not empty) COUNT, the cases it
# rules out, must be 0; without it above 0, or the check shows nothing.
none_only_with() { # OPTION COUNT MESSAGE-WITH MESSAGE-WITHOUT
	if [ -n "$1" ]; then
		[ "$2" -eq 0 ] || fail "$3"
	else
		[ "$2" -gt 0 ] || fail "$4: the check shows nothing"
	fi
}

# --equal-per-node: on nodes of 3 GPUs, the copus policy spreads some jobs
# unevenly (3 + 1) by default and never with it, as Slurm allocates; pollux,
# which places unevenly whatever it is told, is applied as sched/copus asks
# Slurm for its decisions (their largest even part).
sia=${srcdir:-..}/../shared/data/sia
if [ -d "$sia/traces" ]; then
	head -n 41 "$sia/workloads/philly/workload-1.csv" > "$tmp/w40.csv"
	for pol in copus pollux; do
	for e in '' --equal-per-node; do
		"$sim" --cluster aws:4x3 --profiles "$sia/traces" --policy $pol $e \
			--timeline "$tmp/t.csv" "$tmp/w40.csv" > "$tmp/out" 2>&1 ||
			{ cat "$tmp/out"; fail "$pol $e run"; }
		uneven=$(awk -F, 'NR > 1 && $5 > 0 && $4 % $5 != 0' "$tmp/t.csv" | wc -l)
		none_only_with "$e" "$uneven" \
			"$pol --equal-per-node: $uneven rows of unequal GPUs per node" \
			"$pol without --equal-per-node: no job was spread unevenly"
	done
	done
else
	echo "skipped --equal-per-node: no $sia"
fi

# --min-run: a job that has been moved is not moved (or stopped) again
# until it has trained that long on its GPUs, its restart paid, as
# sched/copus holds it for copus_restart_delay after a rescale: with a
# restart of 30 s and --min-run 120, no job's GPUs change within 150 s of a
# change that followed its first start (the first run is not held). Without
# it pollux moves jobs a round (60 s) apart, so the check can fail.
if [ -d "$sia/traces" ]; then
	for m in '' 120; do
		"$sim" --cluster aws:4x4 --profiles "$sia/traces" --policy pollux \
			--equal-per-node ${m:+--min-run $m} --restart-delay 30 \
			--timeline "$tmp/t.csv" "$tmp/w40.csv" > "$tmp/out" 2>&1 ||
			{ cat "$tmp/out"; fail "--min-run '$m' run"; }
		soon=$(awk -F, 'NR > 1 {
			k = $4 "," $5 "," $10
			if ($3 in had && k != had[$3] && gpus[$3] > 0 && moved[$3] && $2 - at[$3] < 150) n++
			if (!($3 in had) || k != had[$3]) {
				if (started[$3]) moved[$3] = 1
				if ($4 > 0) started[$3] = 1
				had[$3] = k; at[$3] = $2
			}
			gpus[$3] = $4
		} END { print n + 0 }' "$tmp/t.csv")
		none_only_with "$m" "$soon" \
			"--min-run 120: $soon moves within 150 s of a job's last move" \
			"without --min-run no job moved within 150 s"
	done
else
	echo "skipped --min-run: no $sia"
fi
refused "--min-run without --equal-per-node" \
	"--min-run holds jobs as sched/copus carries decisions out: it needs --equal-per-node" \
	--min-run 60 "$tmp/w1.csv"
refused "--min-run 1.5" "--min-run: '1.5' is not a whole number of seconds" \
	--equal-per-node --min-run 1.5 "$tmp/w1.csv"
# fifo_jcts A B ARG...: fifo on w1 with ARG... ends a and b with JCTs A and B.
fifo_jcts() {
	ja=$1 jb=$2
	shift 2
	"$sim" --cluster 1x2 --profiles "$tmp/p" --policy fifo "$@" \
		--summary "$tmp/s.json" "$tmp/w1.csv" > /dev/null || fail "fifo $* run"
	command -v python3 > /dev/null || return 0
	python3 - "$tmp/s.json" "$ja" "$jb" <<'PY' || fail "fifo $*: JCTs not $ja and $jb"
import json, sys
s = json.load(open(sys.argv[1]))
a, b = float(sys.argv[2]), float(sys.argv[3])
assert abs(s["jcts"]["w1"]["a"] - a) < 1e-6 and abs(s["jcts"]["w1"]["b"] - b) < 1e-6, s
PY
}
# --round-phase 15: the rounds at 15, 75, 135...: a (due at 0) and b (due
# at 10) start at 15, not at the round at 60, and end 45 s sooner (JCTs
# 245 and 235: the wait to 15, 30 s restart, 200 s of training).
fifo_jcts 245 235 --round-phase 15
refused "--round-phase of the interval" "--round-phase: 60 is not less than --interval (60)" \
	--round-phase 60 "$tmp/w1.csv"
# Fractions: rounds every 60.5 s from 14.2 (14.2, 74.7, 135.2, 195.7).
# Both jobs start at 14.2 and train from 44.2; the last round finishes the
# 48.5 s left in whole seconds (49), as copus-sim ends an epoch: at 244.7.
fifo_jcts 244.7 234.7 --round-phase 14.2 --interval 60.5
refused "--round-phase -1" "--round-phase: '-1' is not a number from 0 to 86400 of seconds" \
	--round-phase -1 "$tmp/w1.csv"
# --event-rounds 5: a (due at 0) starts in the event round at 5 and b (due
# at 10) in the one at 10, not at the round at 60 (JCTs 235 and 230: the
# wait, 30 s restart, 200 s of training); every 25 s, at 25 (235 - 25 + 25
# = 255 and 245). Without arrivals nothing changes: the default's 290, 280.
fifo_jcts 290 280
fifo_jcts 235 230 --event-rounds 5
fifo_jcts 255 245 --event-rounds 25
refused "--event-rounds 0" "--event-rounds: '0' is not a number of seconds from 0 (excluded) to 86400" \
	--event-rounds 0 "$tmp/w1.csv"
refused "--interval 0.5" "--interval: '0.5' is not a number from 1 to 86400 of seconds" \
	--interval 0.5 "$tmp/w1.csv"

# sim/solo-bound.sh: each job alone. On one GPU, a and b together wait for
# each other; alone each starts at the first round (60), restarts 30 s and
# trains 200 s: 290 for a, 280 for b, which arrives at 10. Their mean is the
# floor, below the mean of any policy that runs them together.
solo=${srcdir:-..}/sim/solo-bound.sh
sh "$solo" --json "$tmp/solo.json" "$tmp/w1.csv" "$sim" --cluster 1x1 \
	--profiles "$tmp/p" > "$tmp/solo.out" 2>&1 || { cat "$tmp/solo.out"; fail "solo-bound.sh"; }
grep -qx "a 290" "$tmp/solo.out" && grep -qx "b 280" "$tmp/solo.out" &&
	grep -qx "mean 285.0 over 2 jobs, each alone" "$tmp/solo.out" ||
	{ cat "$tmp/solo.out"; fail "solo-bound.sh's lines"; }
for pol in fifo copus; do
	"$sim" --cluster 1x1 --profiles "$tmp/p" --policy $pol \
		--summary "$tmp/together.json" "$tmp/w1.csv" > /dev/null 2>&1 ||
		fail "$pol on 1x1"
	python3 - "$tmp/solo.json" "$tmp/together.json" <<'PY' || fail "solo-bound.sh against $pol"
import json, sys
solo, both = (json.load(open(f)) for f in sys.argv[1:3])
assert solo["jobs"] == 2 and solo["jcts"] == {"a": 290.0, "b": 280.0}, solo
assert abs(solo["mean"] - 285.0) < 1e-9, solo
j = both["jcts"]["w1"]
assert all(solo["jcts"][k] <= j[k] + 1e-9 for k in j), (solo, j)
assert solo["mean"] < both["mean"], (solo, both)
PY
done
# What it cannot run is named: a workload without names, and a job that
# copus-sim refuses (here: profiles it cannot read).
printf 'x,y\n1,2\n' > "$tmp/nameless.csv"
sh "$solo" "$tmp/nameless.csv" "$sim" > /dev/null 2> "$tmp/err" && fail "nameless workload accepted"
grep -qF "nameless.csv: line 1: no header with a name column" "$tmp/err" ||
	{ cat "$tmp/err"; fail "solo-bound.sh: no line 1 error"; }
sh "$solo" "$tmp/w1.csv" "$sim" --cluster 1x1 --profiles "$tmp/none" > /dev/null 2> "$tmp/err" &&
	fail "missing profiles accepted"
grep -qF "copus-sim failed on job a alone" "$tmp/err" ||
	{ cat "$tmp/err"; fail "solo-bound.sh: the job is not named"; }
echo "PASS"
