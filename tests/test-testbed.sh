#!/bin/bash
# contrib/testbed.sh end to end, small: four jobs of a Sia workload replayed
# on a loopback cluster with slurmdbd under sched/copus, then the report:
# every job finished once, none lost or run twice (from sacct), and the
# summary, copus-sim's runs (draws of the measured restart costs) and the
# comparison are written; then two jobs under sched/backfill, which copus-sim
# predicts on the GPUs Slurm gave them. Run from the build
# directory (srcdir: the source tree); needs ../shared/data beside the
# source tree, MariaDB and slurmdbd.
set -u
. "${srcdir:-$(dirname "$0")/..}/tests/slurm-common.sh"

data=$TOP/../shared/data
[ -d "$data/sia/traces" ] || skip "$data/sia not found (the reference data beside the source tree)"
command -v mariadbd >/dev/null || skip "mariadbd not installed (Debian package mariadb-server)"
[ -x /usr/sbin/slurmdbd ] || skip "slurmdbd not installed (Debian package slurmdbd)"
command -v gnuplot >/dev/null || skip "gnuplot not installed (Debian package gnuplot-nox)"
need_plugin sched_copus
need_plugin spank_copus

# Four short cifar10 jobs, two at once, on 2 + 2 nodes of two types.
cat >"$TMP/w.csv" <<W
name,time,application,num_replicas,batch_size
a,0,cifar10,4,512
b,30,cifar10,2,256
c,60,cifar10,4,512
d,90,cifar10,1,128
W
out=$TMP/tb
"$TOP/contrib/testbed.sh" --policy copus --out "$out" --build "$PWD" \
	--cluster aws:2x4,dgx-ext:2x4 --scale 20 --limit 240 "$TMP/w.csv" >"$TMP/run.log" 2>&1 ||
	{ cat "$TMP/run.log"; fail "testbed.sh failed"; }
cat "$TMP/run.log"
grep -q "floor: each job alone (sim/solo-bound.sh)" "$TMP/run.log" ||
	fail "compare printed no floor"
for f in testbed.json sim.json jobs.csv timeline.csv testbed.png solo.json; do
	[ -s "$out/$f" ] || fail "$out/$f was not written"
done
python3 - "$out" <<'P' || fail "the report is not what the run did"
import json, sys
d = sys.argv[1]
t = json.load(open(d + "/testbed.json"))
s = json.load(open(d + "/sim.json"))
assert t["jobs"] == 4, t["jobs"]
assert t["finished"] == 4, f"{t['finished']} of 4 jobs finished"
assert not t["problems"], t["problems"]
assert set(t["jcts"]) == {"a", "b", "c", "d"}, t["jcts"]
assert all(v > 0 for v in t["jcts"].values()), t["jcts"]
# sacct's times are whole seconds: a JCT may exceed the makespan (from the
# replay's start, to the millisecond) by one second of wall time.
assert t["mean"] > 0, t
assert t["makespan"] + t["scale"] >= max(t["jcts"].values()), t
# Each job went to sbatch when it was due (b, c and d 1.5, 3 and 4.5 s in),
# not at the next of the replay's samples, which are 2 s apart.
assert len(t["jcts"]) == 4 and t["submit_late_wall_max"] < 0.75, t
sim = next(iter(s["jcts"].values()))
assert set(sim) == {"a", "b", "c", "d"}, sim
# copus-sim drew each allocation's cost from the costs measured (4 first
# starts at least, marked first), 8 times: sim.json's mean is the mean of
# the draws' means.
costs = [l.split(",") for l in open(d + "/restart-delays.csv").read().split("\n")[1:] if l]
assert sum(1 for c in costs if c[1] == "1") == 4, costs
assert len(s["draws"]) == 8, s["draws"]
# A first start costs from the job's start in slurmctld's log (to the
# millisecond, not sacct's whole second) to its first step.
import datetime, re
started = {}
for l in open(d + "/cluster/log/slurmctld.log", errors="replace"):
    m = re.search(r"sched/copus: started JobId=(\d+)", l)
    if m and m.group(1) not in started:
        started[m.group(1)] = datetime.datetime.fromisoformat(l[1:24]).timestamp()
ids = dict(l.split(",")[:2] for l in open(d + "/submitted.csv").read().split("\n")[1:] if l)
want = []
for jid, name in ids.items():
    steps = [float(l.split()[-1]) for l in open(f"{d}/logs/{name}.out") if l.startswith("first step at")]
    want.append(round((min(x for x in steps if x >= started[jid]) - started[jid]) * t["scale"], 1))
got = sorted(float(c[0]) for c in costs if c[1] == "1")
assert len(want) == 4 and all(abs(a - b) < 0.11 for a, b in zip(sorted(want), got)), (sorted(want), got)
draws = [json.load(open(f"{d}/sim-draw-{k}.json"))["mean"] for k in range(1, 9)]
assert abs(s["mean"] - sum(draws) / 8) < 1e-6, (s["mean"], draws)
# copus-sim's policy counts what sched/copus's did: until a move is
# measured, copus_restart_cost=measured:2 (2 s of wall time, 40 trace seconds
# at x 20), then the mean of the measured (--restart-measured).
assert t["sim_restart_delay"] == 2 * t["scale"], t["sim_restart_delay"]
# It holds a moved job where it is for one round after its new run starts,
# as copus_restart_delay does (3 s of wall time at x 20: 60 trace seconds).
cmds = open(d + "/sim-commands").read().splitlines()
assert len(cmds) == 8 and all("--restart-delay 40 " in c for c in cmds), cmds
assert all("--equal-per-node --restart-measured --min-run 60 " in c for c in cmds), cmds
# The plugin counted what its rescales cost: copusctl stats' figure, in
# trace seconds, near the mean request-to-first-step gap measured here
# (the plugin notices the first hint up to a poll later).
assert t["rescales_measured"] is not None and t["restart_cost_counted"] is not None, t
if t["rescales_measured"] and t["rescales_measured"] == t["restart_gaps"]:
    assert 0.5 * t["restart_gap_mean"] <= t["restart_cost_counted"] <= t["restart_gap_mean"] + 0.5 * t["scale"], (t["restart_cost_counted"], t["restart_gap_mean"])
# The floor: each of the four jobs alone on the cluster under the copus
# policy (sim/solo-bound.sh), not above copus-sim's mean of all four
# together but for the restart costs' draw (each job alone draws its own
# from restart-delays.csv): within one round, 60 trace seconds.
solo = json.load(open(d + "/solo.json"))
assert solo["jobs"] == 4 and set(solo["jcts"]) == {"a", "b", "c", "d"}, solo
assert all(v > 0 for v in solo["jcts"].values()), solo
assert solo["mean"] <= s["mean"] + 60, (solo["mean"], s["mean"])
assert "sim/solo-bound.sh" in open(d + "/solo-command").read()
# One line per run of a job in jobs.csv, each run of a finished job ended.
rows = [l.split(",") for l in open(d + "/jobs.csv").read().split("\n")[1:] if l]
assert {r[1] for r in rows} == {"a", "b", "c", "d"}, rows
assert all(r[5] for r in rows), rows
print("PASS: 4 of 4 finished, testbed mean %.0f s, copus-sim %.0f s" %
      (t["mean"], s["mean"]))
P
grep -q "copus " "$TMP/run.log" || fail "compare printed no copus line"

# sched/backfill: two rigid jobs of 6 GPUs on nodes of 4, which Slurm gives
# 4 + 2 GPUs. The trainer steps at the speed of 4 + 2 (of 3 + 3, the testbed
# ran 30% faster) and copus-sim's prediction places them so too (cut to an
# even 4 on one node, as sched/copus would ask, they were predicted 30% faster).
cat >"$TMP/w6.csv" <<W
name,time,application,num_replicas,batch_size
e,0,cifar10,6,768
f,0,cifar10,6,768
W
# The first three times the replay asks whether any job is left, squeue
# fails as it does while slurmctld does not answer: the replay asks again
# and still waits for both jobs.
mkdir -p "$TMP/bin"
cat >"$TMP/bin/squeue" <<S
#!/bin/bash
if [ "\$*" = "-h" ]; then
	n=\$(cat "$TMP/squeue-failed" 2>/dev/null || echo 0)
	if [ "\$n" -lt 3 ]; then
		echo \$((n + 1)) >"$TMP/squeue-failed"
		echo "squeue: error: Unable to contact slurm controller (connect failure)" >&2
		exit 1
	fi
fi
exec $(command -v squeue) "\$@"
S
chmod +x "$TMP/bin/squeue"
bf=$TMP/tb-backfill
PATH=$TMP/bin:$PATH "$TOP/contrib/testbed.sh" --policy backfill --out "$bf" --build "$PWD" \
	--cluster aws:2x4,dgx-ext:2x4 --scale 20 --limit 240 "$TMP/w6.csv" >"$TMP/bf.log" 2>&1 ||
	{ cat "$TMP/bf.log"; fail "testbed.sh --policy backfill failed"; }
cat "$TMP/bf.log"
python3 - "$bf" <<'P' || fail "backfill's prediction is not what Slurm ran"
import json, sys
d = sys.argv[1]
t = json.load(open(d + "/testbed.json"))
s = json.load(open(d + "/sim.json"))
assert t["finished"] == 2 and not t["problems"], t
assert open(d + "/../squeue-failed").read().strip() == "3", "the replay's squeue did not fail 3 times"
# The replay began once slurmctld's first main-scheduler pass was
# batch_sched_delay (3 s) old: its first job was not held to a grid set by
# slurmctld's start.
import datetime
def stamp(line):
    return datetime.datetime.fromisoformat(line[1:24]).timestamp()
log = open(d + "/cluster/log/slurmctld.log", errors="replace").read().splitlines()
first_pass = next(stamp(l) for l in log if "SchedulerParameters=" in l)
first_job = next(stamp(l) for l in log if "_slurm_rpc_submit_batch_job" in l)
assert first_job - first_pass >= 3.0, f"the first job came {first_job - first_pass:.2f} s after slurmctld's first pass"
# slurmctld's background loop wakes about once a second, at a phase read
# from its log; copus-sim's backfill rounds fall at the same instants, in
# trace time (x 20).
P, ph = t["ctld_tick_period_wall"], t["ctld_tick_phase_wall"]
assert 0.99 < P < 1.02 and 0 <= ph < P, (P, ph)
cmd = open(d + "/sim-commands").readline().split()
i, r = float(cmd[cmd.index("--interval") + 1]), float(cmd[cmd.index("--round-phase") + 1])
assert abs(i - 20 * P) < 1e-3 and abs(r - 20 * ph) < 1e-3, (i, r, P, ph)
rows = [l.split(",") for l in open(d + "/jobs.csv").read().split("\n")[1:] if l]
assert sorted((r[1], r[7]) for r in rows) == [("e", "6"), ("f", "6")], rows
r = t["mean"] / s["mean"]
assert 0.8 <= r <= 1.25, f"testbed {t['mean']:.0f} s, copus-sim {s['mean']:.0f} s"
print("PASS: backfill, testbed mean %.0f s, copus-sim %.0f s" % (t["mean"], s["mean"]))
P
# copus-sim's backfill runs Slurm's cycles in trace time: bf_interval 30 s
# and batch_sched_delay 3 s, at F = 20 (the command is written with
# printf %q, which escapes the comma).
grep -Eq -- '--policy backfill:bf_interval=600\\?,sched_delay=60 ' "$bf/sim-commands" ||
	fail "copus-sim's backfill is not told Slurm's cycles: $(head -n 1 "$bf/sim-commands")"

# The runs side by side, and a directory that is not a run.
"$TOP/contrib/testbed.sh" compare --plot "$TMP/cmp.png" "$out" "$bf" "$TMP/none" >"$TMP/cmp.log" 2>&1 ||
	{ cat "$TMP/cmp.log"; fail "compare --plot failed"; }
[ -s "$TMP/cmp.png" ] || fail "compare --plot wrote no $TMP/cmp.png"
grep -q "$TMP/none: not plotted" "$TMP/cmp.log" || { cat "$TMP/cmp.log"; fail "compare --plot: the directory that is no run"; }
