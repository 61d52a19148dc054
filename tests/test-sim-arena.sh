#!/bin/sh
# copus-sim --arena end to end on a tiny Arena world written here (one node
# of 4 GPUs, four jobs, JCTs computed by hand under Arena's rules and under
# honest ones), its refusals and errors, and a short run on Arena's own data
# when $COPUS_DATA has it.
set -u
sim=${COPUS_SIM:-sim/copus-sim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }

w=$tmp/world
mkdir -p "$w/resources" "$w/database" "$w/traces"
echo '[{"g4": {"node_num": 1, "gpus_per_node": 4}}]' \
	> "$w/resources/sim_cluster_spec.json"
echo '{"optimal": {"tf_1B_64": {"1_g4_1_n_1_d": 10.0, "1_g4_1_n_4_d": 2.0,
	"1_g4_1_n_2_d": -1}}}' > "$w/database/prof_database.json"
# a: 60 iterations of 10 s on 1 GPU; b: 200 of 2 s on 4 GPUs; c: asks for
# 2 GPUs, where the model does not fit; d: 1 iteration, a round later.
cat > "$w/traces/simulate_trace_philly.csv" <<'EOF'
job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type
a,0,300,tf__1B,0,64,1,g4
b,0,1000,tf__1B,0,64,4,g4
c,10,300,tf__1B,0,64,2,g4
d,301,5,tf__1B,0,64,1,g4
EOF

run() {
	"$sim" --arena "$w" --summary "$tmp/s.json" "$@" > "$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "copus-sim --arena $*"; }
}
check() {
	python3 - "$tmp/s.json" "$@" <<'PY' || fail "summary of $*"
import json, sys
s = json.load(open(sys.argv[1]))
want = dict(a.split("=") for a in sys.argv[2:])
for k, v in want.items():
    if k in ("a", "b", "c", "d"):
        got = s["jcts"]["arena"][k]
    else:
        got = s[k]
    if abs(float(got) - float(v)) > 1e-6:
        sys.exit("%s: %r, expected %s" % (k, got, v))
for k in ("finished", "mean_jct_finished", "mean_jct_all", "submitted",
          "jcts", "avgs", "mean", "p99_jct", "makespan", "gpu_hours", "restarts",
          "decide_ms", "rules", "policy"):
    if k not in s:
        sys.exit("no %s in the summary" % k)
PY
}

# Arena's rules: a runs 2 rounds (a restart of 150 s costs it nothing);
# b waits for a, starts at round 2 and loses round 3 to its 600 s restart,
# ends at round 5; c is dropped; d waits behind b, starts when b ends,
# ends at round 6. An unfinished job counts to the horizon.
run --policy fifo:arena --max-rounds 10
check a=600 b=1500 c=-1 d=1500 finished=3 submitted=4 never_started=1 \
	mean_jct_finished=1200 mean_jct_all=1650 restarts=0
# The bounds: each job alone on the 4-GPU cell (2 s an iteration) from its
# submission, in whole rounds: a 60 iterations in 1 round, b 200 in 2, c
# 60 in 1, d 1 in 1; the finished ones are a, b and d; any 3 at best
# those of 1 round.
check bound_jct_all=375 bound_jct_finished=400 bound_jct_any_finished=300
grep -q "bounds (each job alone on its fastest cell" "$tmp/out" ||
	fail "the bounds are not printed"
# The timeline: a's cell and work left after each round's decision.
run --policy fifo:arena --max-rounds 3 --timeline "$tmp/t.csv"
head -1 "$tmp/t.csv" | grep -q '^time,job,gpu_type,gpus,nodes,seconds_per_iteration,remaining_iterations$' ||
	fail "timeline header"
grep -q '^0,a,g4,1,1,10,60$' "$tmp/t.csv" || fail "timeline: a at 0 s"
grep -q '^300,a,g4,1,1,10,30$' "$tmp/t.csv" || fail "timeline: a at 300 s"
grep -q '^600,b,g4,4,1,2,200$' "$tmp/t.csv" || fail "timeline: b at 600 s"
grep -q '^0,b,,0,0,0,200$' "$tmp/t.csv" || fail "timeline: b waits at 0 s"
run --policy fifo:arena --max-rounds 6
check a=600 b=1500 c=-1 d=-1 finished=2 mean_jct_finished=1050 \
	mean_jct_all=1350 horizon=1800
# Honest rules: a pays 150 s and ends at 750 s; b starts at round 3, pays
# 600 s and ends at 1900 s; d starts at round 7, pays 150 s, ends at 2260 s.
run --policy fifo:arena --max-rounds 10 --arena-rules honest
check a=750 b=1900 d=1960 finished=3 mean_jct_all=1902.5
grep -q "honest rules" "$tmp/out" || fail "the rules are not named"
# Tiresias runs on Arena's jobs.
run --policy tiresias --max-rounds 10
check finished=3

# copus picks cells: c, whose requested 2 GPUs fit no plan, runs on a cell
# that fits it, so every job ends, and sooner on average than under fifo;
# never on a cell the job does not fit. Held to the request
# (--cell-choice none), c never starts.
run --policy copus --max-rounds 10
check finished=4 never_started=0 refused=0
python3 -c "import json,sys; s=json.load(open('$tmp/s.json'));
sys.exit(0 if s['mean_jct_all'] < 1650 else 'copus: %r' % s['mean_jct_all'])" ||
	fail "copus is not ahead of fifo on the tiny world"
run --policy copus --max-rounds 10 --cell-choice none
check finished=3 never_started=1
"$sim" --arena "$w" --policy copus --cell-choice some > "$tmp/out" 2>&1 &&
	fail "--cell-choice some accepted"
grep -q "'some' is not all, count or none" "$tmp/out" ||
	fail "--cell-choice message"

# Policies that need a goodput model are refused by name.
for pol in pollux optimus sia; do
	"$sim" --arena "$w" --policy $pol --max-rounds 5 > "$tmp/out" 2>&1 &&
		fail "$pol ran on Arena's jobs"
	grep -q "policy '$pol' needs a goodput model" "$tmp/out" ||
		{ cat "$tmp/out"; fail "$pol: no clear refusal"; }
done
# --throughput planner needs the planner's data beside the world's.
"$sim" --arena "$w" --policy copus --throughput planner > "$tmp/out" 2>&1 &&
	fail "--throughput planner ran without planner data"
grep -q "$w/planner/models.csv" "$tmp/out" ||
	{ cat "$tmp/out"; fail "--throughput planner: message"; }
"$sim" --arena "$w" --policy fifo:arena --arena-rules crius > "$tmp/out" 2>&1 &&
	fail "--arena-rules crius accepted"
grep -q "'crius' is not arena or honest" "$tmp/out" || fail "--arena-rules message"
"$sim" --arena "$w" --policy fifo:arena --max-rounds 0 > "$tmp/out" 2>&1 &&
	fail "--max-rounds 0 accepted"
"$sim" --arena "$w" --policy fifo:arena x.csv > "$tmp/out" 2>&1 &&
	fail "a workload with --arena accepted"
# A bad trace line is named with its file, line, field and value.
sed -i 's/^c,10,300,tf__1B,0,64,2,g4$/c,10,300,tf__1B,0,64,3,g4/' \
	"$w/traces/simulate_trace_philly.csv"
"$sim" --arena "$w" --policy fifo:arena > "$tmp/out" 2>&1 && fail "bad trace ran"
grep -q "simulate_trace_philly.csv:4: num_gpu: '3' is not 1, 2, 4, 8 or 16" \
	"$tmp/out" || { cat "$tmp/out"; fail "bad trace: message"; }

# Arena's own data: 200 rounds of fifo:arena (the full figures are checked
# by sim/fidelity-arena.sh).
data=${COPUS_DATA:-}
if [ -n "$data" ] && [ -f "$data/arena/traces/simulate_trace_philly.csv" ]; then
	"$sim" --arena "$data/arena" --policy fifo:arena --max-rounds 200 \
		--summary "$tmp/s.json" > "$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "fifo:arena on Arena's data"; }
	# copus with the planner's predictions, refined as jobs run: it
	# decides without the table, and jobs finish.
	"$sim" --arena "$data/arena" --policy copus --throughput planner \
		--max-rounds 100 --summary "$tmp/p.json" > "$tmp/out" 2>&1 ||
		{ cat "$tmp/out"; fail "copus --throughput planner"; }
	python3 -c "import json,sys; s=json.load(open('$tmp/p.json'));
sys.exit(0 if s['finished'] > 0 and s['submitted'] > s['finished'] and
         s['throughput'] == 'planner' else s)" ||
		fail "copus --throughput planner: summary"
	python3 - "$tmp/s.json" <<'PY' || fail "Arena's data: summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["rounds"] == 200 and 0 < s["submitted"] < 1938, s["submitted"]
assert s["throughput"] == "oracle", s["throughput"]
assert 0 < s["finished"] < s["submitted"], s["finished"]
# Arena's rules end a job at a round: every JCT is a multiple of 300 s.
for name, jct in s["jcts"]["arena"].items():
    assert jct < 0 or jct % 300 == 0, (name, jct)
assert s["mean_jct_finished"] <= s["mean_jct_all"]
PY
else
	echo "no Arena data in \$COPUS_DATA: the run on it is skipped"
fi
echo "PASS"
