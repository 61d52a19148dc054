#!/usr/bin/env python3
"""contrib/testbed.sh's arithmetic: the sample, the time scale, the report
from Slurm's accounting, the plot and the comparison with copus-sim.

  testbed.py sample WORKLOAD.csv N OUT.csv
  testbed.py scale SIM_SUMMARY.json SECONDS
  testbed.py report --out DIR --scale F --policy P --interval S --ctld-log F
  testbed.py plot --out DIR
  testbed.py compare DIR...

Every figure it writes is in trace seconds (wall seconds times F)."""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import time


def die(msg):
    sys.exit("testbed.py: " + msg)


def quantile(v, q):
    """Nearest rank, as copus-sim's sim_quantile."""
    if not v:
        return float("nan")
    v = sorted(v)
    k = math.ceil(q * len(v))
    return v[k - 1 if k > 0 else 0]


def sample(args):
    path, n, out = args[0], int(args[1]), args[2]
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][:5] != ["name", "time", "application",
                                   "num_replicas", "batch_size"]:
        die(f"{path}:1: not a workload (name,time,application,"
            "num_replicas,batch_size)")
    body = rows[1:]
    for i, r in enumerate(body, 2):
        if len(r) < 5:
            die(f"{path}:{i}: {len(r)} fields, 5 expected")
        try:
            float(r[1]), int(r[3]), float(r[4])
        except ValueError:
            die(f"{path}:{i}: time, num_replicas or batch_size is not a number")
    body.sort(key=lambda r: float(r[1]))
    if n > 0:
        body = body[:n]
    with open(out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(rows[0][:5])
        for r in body:
            w.writerow(r[:5])


def scale(args):
    d = json.load(open(args[0]))
    seconds = float(args[1])
    mk = max(d["makespan"].values())
    print(max(1, math.ceil(mk / seconds)))


def stamp(s):
    """sacct's local time, to seconds since the epoch (None: Unknown)."""
    if not s or s in ("Unknown", "None"):
        return None
    return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%S"))


def ctld_stamp(line):
    m = re.match(r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?\]", line)
    if not m:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + \
        float(m.group(2) or 0)


def ctld_ticks(log, t0):
    """The wake-ups of slurmctld's background loop, which runs the main
    scheduler, from the main scheduler's starts in its log ("sched:
    Allocate"): (period, first), wall seconds, with every wake-up at
    t0 + first + k * period (a period of 1 s after a single pass; None
    with none). The loop
    sleeps ten times 100 ms and then works, so its period is a little over
    a second and its phase is its own; each pass is counted in whole
    periods from the one before, and a least-squares line through them
    gives both."""
    ts = []
    try:
        for line in open(log, errors="replace"):
            if "sched: Allocate" in line:
                t = ctld_stamp(line)
                # A pass logs every job it starts, within milliseconds.
                if t is not None and (not ts or t - t0 - ts[-1] > 0.3):
                    ts.append(t - t0)
    except OSError:
        return None
    if not ts:
        return None
    if len(ts) == 1:
        # One pass: its phase, and the loop's nominal second.
        return 1.0, ts[0] % 1.0
    n = [0]
    for a, b in zip(ts, ts[1:]):
        n.append(n[-1] + max(1, round(b - a)))
    mn, mt = sum(n) / len(n), sum(ts) / len(ts)
    period = (sum((x - mn) * (y - mt) for x, y in zip(n, ts)) /
              sum((x - mn) ** 2 for x in n))
    return period, (mt - period * mn) % period


START_RE = re.compile(r"(?:sched: Allocate|sched/backfill: _start_job: "
                      r"Started|sched/copus: started) JobId=(\d+)\b")


def ctld_starts(log):
    """Each job's first start, to the millisecond, from slurmctld's log:
    its main scheduler's "sched: Allocate", the backfill thread's "Started"
    or sched/copus's "started" ({job id: wall seconds}). sacct's start is
    the whole second, which would add its fraction to every start's cost:
    slurmctld starts jobs when its loop wakes, at a phase of its own."""
    first = {}
    try:
        for line in open(log, errors="replace"):
            m = START_RE.search(line)
            if m and m.group(1) not in first:
                t = ctld_stamp(line)
                if t is not None:
                    first[m.group(1)] = t
    except OSError:
        pass
    return first


def report(argv):
    ap = argparse.ArgumentParser(prog="testbed.py report")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, required=True)
    ap.add_argument("--policy", required=True)
    ap.add_argument("--interval", type=float, required=True)
    ap.add_argument("--ctld-log", required=True)
    ap.add_argument("--told-cost", type=float, metavar="S",
                    help="the restart cost sched/copus's policy counted "
                    "until it measured one (copus_restart_cost=measured:S, "
                    "wall seconds)")
    a = ap.parse_args(argv)
    out, F = a.out, a.scale
    t0 = float(open(os.path.join(out, "start")).read())
    with open(os.path.join(out, "workload.csv"), newline="") as f:
        trace = {r["name"]: float(r["time"]) for r in csv.DictReader(f)}
    submitted = {}
    with open(os.path.join(out, "submitted.csv"), newline="") as f:
        for r in csv.DictReader(f):
            submitted[r["id"]] = (r["name"], float(r["submit_wall"]))
    # How late the replay handed each job to sbatch, in wall seconds after
    # its arrival (trace time / F).
    late = [sw - t0 - trace[name] / F for name, sw in submitted.values()
            if name in trace]
    runs = {}
    with open(os.path.join(out, "sacct.txt")) as f:
        for line in f:
            p = line.rstrip("\n").split("|")
            if len(p) < 9:
                continue
            jid, name, sub, st, en, state, tres = p[:7]
            g = re.search(r"gres/gpu=(\d+)", tres)
            runs.setdefault(jid, []).append({
                "submit": stamp(sub), "start": stamp(st), "end": stamp(en),
                "state": state.split()[0], "gpus": int(g.group(1)) if g else 0,
                "nodes": p[8]})
    # jobs.csv: one line per run, times in trace seconds from the start.
    def tr(w):
        return None if w is None else round((w - t0) * F, 1)
    with open(os.path.join(out, "jobs.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["job", "name", "run", "submit", "start", "end", "state",
                    "gpus", "nodes"])
        for jid, rs in sorted(runs.items(), key=lambda x: int(x[0])):
            for k, r in enumerate(rs):
                w.writerow([jid, submitted.get(jid, ("?",))[0], k,
                            tr(r["submit"]), tr(r["start"]), tr(r["end"]),
                            r["state"], r["gpus"], r["nodes"]])
    jcts, restarts, problems = {}, {}, []
    try:
        for line in open(os.path.join(out, "refused.csv")):
            name, _, why = line.rstrip("\n").partition(",")
            problems.append(f"{name}: refused by sbatch: {why.strip()}")
    except OSError:
        pass
    gpu_s = 0.0
    last_end = None
    for jid, (name, sw) in submitted.items():
        rs = runs.get(jid)
        if not rs:
            problems.append(f"{name} (job {jid}): no record in sacct: lost")
            continue
        ran = [r for r in rs if r["start"] is not None]
        done = [r for r in rs if r["state"] == "COMPLETED"]
        if len(done) > 1:
            problems.append(f"{name} (job {jid}): completed {len(done)} times: run twice")
        spans = sorted((r["start"], r["end"] or float("inf")) for r in ran)
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            if s2 < e1:
                problems.append(f"{name} (job {jid}): two runs overlap: run twice")
        for r in ran:
            if r["end"] is not None:
                gpu_s += (r["end"] - r["start"]) * r["gpus"] * F
        restarts[name] = max(len(ran) - 1, 0)
        final = rs[-1]
        if final["state"] == "COMPLETED":
            first = min(r["submit"] for r in rs if r["submit"] is not None)
            jcts[name] = (final["end"] - first) * F
            last_end = max(last_end or 0, final["end"])
        elif final["state"] not in ("PENDING", "RUNNING", "REQUEUED"):
            problems.append(f"{name} (job {jid}): ended {final['state']}")
    # Start overheads, in wall seconds: for a job's first run, from its
    # start (slurmctld's log, to the millisecond; sacct's second where the
    # log has none) to its first step; for each rescale, from
    # the plugin's "asked to checkpoint" to the job's next first step (the
    # trainer's --stamp lines). copus-sim charges one delay for every
    # allocation, first ones included, so it gets the mean over both.
    asked = {}
    try:
        for line in open(a.ctld_log, errors="replace"):
            m = re.search(r"JobId=(\d+) asked to checkpoint", line)
            if m:
                asked.setdefault(m.group(1), []).append(ctld_stamp(line))
    except OSError:
        pass
    gaps, first_gaps = [], []
    started = ctld_starts(a.ctld_log)
    for jid, (name, sw) in submitted.items():
        firsts = []
        try:
            for line in open(os.path.join(out, "logs", name + ".out"),
                             errors="replace"):
                m = re.match(r"first step at ([0-9.]+)", line)
                if m:
                    firsts.append(float(m.group(1)))
        except OSError:
            continue
        ran = [r for r in runs.get(jid, []) if r["start"] is not None]
        if ran and firsts:
            s0 = started.get(jid, ran[0]["start"])
            g = min((x for x in firsts if x >= s0), default=None)
            if g is not None:
                first_gaps.append(g - s0)
        for t in asked.get(jid, []):
            nxt = [x for x in firsts if t is not None and x > t]
            if nxt:
                gaps.append(min(nxt) - t)
    samples = {}
    with open(os.path.join(out, "timeline.csv"), newline="") as f:
        for r in csv.DictReader(f):
            s = samples.setdefault(float(r["wall"]), [0, 0])
            s[0] += int(r["gpus"] or 0)
            s[1] = int(r["pending"] or 0)
    cap = 0
    spec = open(os.path.join(out, "cluster", "etc", "slurm.conf")).read()
    for m in re.finditer(r"Gres=gpu:[^:\s]+:(\d+)", spec):
        cap += int(m.group(1))
    idle = 0.0
    ts = sorted(samples)
    for t1, t2 in zip(ts, ts[1:]):
        used, pend = samples[t1]
        if pend > 0:
            idle += max(cap - used, 0) * (t2 - t1) * F
    rounds = events = counted = measured = None
    try:
        st = open(os.path.join(out, "copus-stats.txt")).read()
        c = re.search(r"^restart_cost_counted\s+([0-9.eE+-]+)", st, re.M)
        counted = float(c.group(1)) * F if c else None
        c = re.search(r"^rescales_measured\s+(\d+)", st, re.M)
        measured = int(c.group(1)) if c else None
        m = re.search(r"^rounds\s+(\d+)", st, re.M)
        e = re.search(r"^event_rounds\s+(\d+)", st, re.M)
        if m and e and len(ts) > 1:
            minutes = (ts[-1] - ts[0]) / 60.0
            rounds = (int(m.group(1)) - int(e.group(1))) / minutes
            events = int(e.group(1)) / minutes
    except OSError:
        pass
    v = sorted(jcts.values())
    # A job still running or waiting when the replay stopped counts as the
    # time it had had by then: a lower bound of the mean over every job.
    bound = list(v)
    stop = ts[-1] + t0 if ts else None
    for jid, (name, sw) in submitted.items():
        if name not in jcts and stop is not None:
            firsts = [r["submit"] for r in runs.get(jid, []) if r["submit"]]
            bound.append((stop - (min(firsts) if firsts else sw)) * F)
    mean_gap = sum(gaps) / len(gaps) if gaps else None
    every = gaps + first_gaps
    mean_every = sum(every) / len(every) if every else None
    # Each measured cost, in trace seconds, for copus-sim's
    # --restart-delays: first starts apart from rescales.
    with open(os.path.join(out, "restart-delays.csv"), "w") as f:
        f.write("restart_delay,first\n")
        for g in first_gaps:
            f.write(f"{max(g, 0.0) * F:.1f},1\n")
        for g in gaps:
            f.write(f"{max(g, 0.0) * F:.1f},0\n")
    ticks = ctld_ticks(a.ctld_log, t0)
    res = {
        "policy": a.policy,
        "scale": F,
        "round_interval": a.interval * F,
        "jobs": len(submitted),
        "finished": len(jcts),
        "mean": sum(v) / len(v) if v else None,
        "p99_jct": quantile(v, 0.99) if v else None,
        "mean_all_at_least": sum(bound) / len(bound) if bound else None,
        "makespan": (last_end - t0) * F if last_end else None,
        "restarts_per_job": (sum(restarts.values()) / len(restarts)
                             if restarts else 0),
        "gpu_hours": gpu_s / 3600,
        "restart_gap_mean": mean_gap * F if mean_gap is not None else None,
        "restart_gap_wall_mean": mean_gap,
        "restart_gaps": len(gaps),
        "first_start_gap_mean": (sum(first_gaps) / len(first_gaps) * F
                                 if first_gaps else None),
        "idle_gpu_seconds_while_pending": idle,
        "submit_late_wall_mean": sum(late) / len(late) if late else None,
        "submit_late_wall_max": max(late) if late else None,
        # sched/copus's full and event rounds per minute of wall time.
        "rounds_per_minute_wall": rounds,
        # The cost of a move sched/copus's policy counted at the end
        # (copus_restart_cost=measured: the mean of the last measured).
        "restart_cost_counted": counted,
        "rescales_measured": measured,
        "event_rounds_per_minute_wall": events,
        # What copus-sim's policy is told an allocation costs until it has
        # measured one (what each costs is drawn from restart-delays.csv):
        # what sched/copus's policy was told, so that both weigh a move
        # alike; else (backfill, which moves nothing) the measured mean,
        # else copus-sim's 30 s.
        "sim_restart_delay": (round(a.told_cost * F) if a.told_cost
                              else max(1, round(mean_every * F))
                              if every else 30),
        # slurmctld's background loop: its wake-ups, at
        # ctld_tick_phase_wall + k * ctld_tick_period_wall after the start
        # (null where its main scheduler started no job).
        "ctld_tick_period_wall": ticks[0] if ticks else None,
        "ctld_tick_phase_wall": ticks[1] if ticks else None,
        "problems": problems,
        "jcts": jcts,
        "job_restarts": restarts,
    }
    json.dump(res, open(os.path.join(out, "testbed.json"), "w"), indent=1)
    for p in problems:
        print("testbed: " + p, file=sys.stderr)


def merge_sims(argv):
    """copus-sim's summaries of one workload under several draws of the
    measured restart costs, as one summary: every figure the mean over the
    draws (a job's JCT only when it finished in every draw, else -1), and
    the draws' mean JCTs under "draws"."""
    ap = argparse.ArgumentParser(prog="testbed.py merge-sims")
    ap.add_argument("--out", required=True)
    ap.add_argument("sims", nargs="+", metavar="SIM.json")
    a = ap.parse_args(argv)
    runs = [json.load(open(p)) for p in a.sims]

    def avg(vals):
        if any(v is None or (isinstance(v, (int, float)) and v < 0)
               for v in vals):
            return -1
        return sum(vals) / len(vals)

    def merge(vals):
        if all(isinstance(v, dict) for v in vals):
            return {k: merge([v.get(k) for v in vals]) for k in vals[0]}
        if all(isinstance(v, (int, float)) and not isinstance(v, bool)
               for v in vals):
            return avg(vals)
        return vals[0]

    res = {k: merge([r.get(k) for r in runs]) for k in runs[0]}
    res["draws"] = [r["mean"] for r in runs]
    json.dump(res, open(a.out, "w"), indent=1)


def plot(argv):
    ap = argparse.ArgumentParser(prog="testbed.py plot")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    out = a.out
    tb = json.load(open(os.path.join(out, "testbed.json")))
    F = tb["scale"]
    sim = json.load(open(os.path.join(out, "sim.json")))
    simj = list(next(iter(sim["jcts"].values())).values())
    # GPUs per job over time, stacked; and the two CDFs.
    rows = {}
    names = []
    with open(os.path.join(out, "timeline.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if not r["name"]:
                rows.setdefault(float(r["wall"]), {})
                continue
            if r["name"] not in names:
                names.append(r["name"])
            rows.setdefault(float(r["wall"]), {})[r["name"]] = int(r["gpus"])
    with open(os.path.join(out, "timeline-stack.dat"), "w") as f:
        for t in sorted(rows):
            s, line = 0, [f"{t * F:.0f}"]
            for n in names:
                s += rows[t].get(n, 0)
                line.append(str(s))
            f.write(" ".join(line) + "\n")
    for tag, v in (("testbed", list(tb["jcts"].values())), ("sim", simj)):
        v = sorted(x for x in v if x is not None and x >= 0)
        with open(os.path.join(out, f"cdf-{tag}.dat"), "w") as f:
            for i, x in enumerate(v, 1):
                f.write(f"{x:.0f} {i / len(v):.4f}\n")
    n = len(names)
    if n == 0:
        return
    g = f"""set terminal pngcairo size 1200,500 noenhanced
set output "{out}/testbed.png"
set multiplot layout 1,2 title "{tb['policy']}: {tb['jobs']} jobs, trace time x {F:g}"
set xlabel "trace time (s)"
set ylabel "GPUs in use"
set key off
set style fill solid 0.9 noborder
plot for [i={n + 1}:2:-1] "{out}/timeline-stack.dat" using 1:i with fillsteps
set xlabel "JCT (trace s)"
set ylabel "fraction of jobs"
set logscale x
set key bottom right
plot "{out}/cdf-testbed.dat" using 1:2 with steps title "testbed", \\
     "{out}/cdf-sim.dat" using 1:2 with steps title "copus-sim"
unset multiplot
"""
    subprocess.run(["gnuplot"], input=g, text=True, check=False)


def compare_plot(dirs, png):
    """The runs side by side: each run's GPUs per job over time (stacked,
    as in its own testbed.png), and the testbed JCT distributions of all
    runs in one panel."""
    runs = []
    for d in dirs:
        stack = os.path.join(d, "timeline-stack.dat")
        cdf = os.path.join(d, "cdf-testbed.dat")
        try:
            tb = json.load(open(os.path.join(d, "testbed.json")))
            with open(stack) as f:
                cols = max((len(l.split()) for l in f), default=0)
        except (OSError, ValueError) as e:
            print(f"{d}: not plotted: {e}")
            continue
        if cols < 2 or not os.path.exists(cdf):
            print(f"{d}: not plotted: no timeline or JCTs")
            continue
        name = os.path.basename(os.path.normpath(d))
        runs.append((name, tb["policy"], stack, cdf, cols))
    if not runs:
        die("compare --plot: no run to plot")
    n = len(runs)
    g = [f"set terminal pngcairo size {400 * (n + 1)},450 noenhanced",
         f'set output "{png}"',
         f'set multiplot layout 1,{n + 1} title "GPUs per job over time,'
         ' and the JCTs of each run"',
         "set style fill solid 0.9 noborder",
         "set key off",
         'set xlabel "trace time (s)"', 'set format x "%.0s%c"',
         'set ylabel "GPUs in use"']
    ymax = 0
    for name, pol, stack, cdf, cols in runs:
        with open(stack) as f:
            for l in f:
                v = l.split()
                if len(v) > 1:
                    ymax = max(ymax, int(v[-1]))
    g.append(f"set yrange [0:{max(ymax, 1) * 1.05:.0f}]")
    for name, pol, stack, cdf, cols in runs:
        g.append(f'set title "{name} ({pol})"')
        g.append(f'plot for [i={cols}:2:-1] "{stack}" using 1:i'
                 " with fillsteps")
    g += ["unset title", "set autoscale y", "set yrange [0:1]",
          'set xlabel "JCT (trace s)"', 'set ylabel "fraction of jobs"',
          'set format x "%g"',
          "set logscale x", "set key bottom right",
          "plot " + ", ".join(f'"{cdf}" using 1:2 with steps title'
                              f' "{name} ({pol})"'
                              for name, pol, stack, cdf, cols in runs),
          "unset multiplot"]
    subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True,
                   check=False)
    if not os.path.exists(png):
        die(f"compare --plot: gnuplot wrote no {png}")
    print(f"plotted {n} run(s) into {png}")


def compare(argv):
    ap = argparse.ArgumentParser(prog="testbed.sh compare")
    ap.add_argument("--plot", metavar="FILE.png",
                    help="also plot the runs side by side")
    ap.add_argument("dirs", nargs="+", metavar="DIR")
    a = ap.parse_args(argv)
    dirs = a.dirs
    print(f"{'run':<28} {'policy':<9} {'testbed':>9} {'sim':>9} {'ratio':>6}"
          f" {'p99 tb/sim':>15} {'makespan tb/sim':>17} {'fin':>7}"
          f" {'rst/job tb/sim':>15} {'gap s':>6}")
    for d in dirs:
        try:
            tb = json.load(open(os.path.join(d, "testbed.json")))
            sim = json.load(open(os.path.join(d, "sim.json")))
        except (OSError, ValueError) as e:
            print(f"{d}: {e}")
            continue
        sm = sim["mean"]
        w = next(iter(sim["jcts"]))
        sj = sim["jcts"][w]
        srs = sim.get("job_restarts", {}).get(w, {})
        srpj = sum(srs.values()) / len(srs) if srs else float("nan")
        fin_sim = sum(1 for x in sj.values() if x is not None and x >= 0)
        tm = tb["mean"]
        if tb["finished"] < tb["jobs"]:
            # Not every job finished: the mean over all of them, with the
            # unfinished ones at the time they had had (a lower bound),
            # against copus-sim's over all.
            tm = tb.get("mean_all_at_least") or tm
        ratio = tm / sm if tm and sm else float("nan")
        gap = tb.get("restart_gap_mean")
        print(f"{os.path.basename(os.path.normpath(d)):<28} {tb['policy']:<9}"
              f" {tm or float('nan'):>9.0f} {sm:>9.0f} {ratio:>6.2f}"
              f" {tb['p99_jct'] or float('nan'):>7.0f}/{sim['p99_jct'][w]:<7.0f}"
              f" {tb['makespan'] or float('nan'):>8.0f}/{sim['makespan'][w]:<8.0f}"
              f" {tb['finished']:>3}/{fin_sim:<3}"
              f" {tb['restarts_per_job']:>6.2f}/{srpj:<7.2f}"
              f" {gap if gap is not None else float('nan'):>6.0f}")
        dr = sim.get("draws")
        if dr and len(dr) > 1:
            print(f"   sim: the mean of {len(dr)} draws of the measured"
                  f" restart costs, {min(dr):.0f} to {max(dr):.0f}")
        try:
            floor = json.load(open(os.path.join(d, "solo.json")))["mean"]
        except (OSError, ValueError, KeyError):
            floor = None
        if floor and tm:
            print(f"   floor: each job alone (sim/solo-bound.sh) {floor:.0f};"
                  f" testbed {tm / floor:.2f}x, sim {sm / floor:.2f}x it")
        for p in tb.get("problems", []):
            print("   " + p)
        if tb["finished"] < tb["jobs"]:
            print(f"   {tb['jobs'] - tb['finished']} job(s) unfinished at the"
                  f" limit: the testbed mean is at least {tm:.0f} s over all"
                  f" {tb['jobs']} (finished ones: {tb['mean']:.0f} s)")
    if a.plot:
        compare_plot(dirs, a.plot)


def main():
    if len(sys.argv) < 2:
        die("usage: testbed.py sample|scale|report|plot|merge-sims|compare"
            " ...")
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "sample":
        sample(rest)
    elif cmd == "scale":
        scale(rest)
    elif cmd == "report":
        report(rest)
    elif cmd == "plot":
        plot(rest)
    elif cmd == "merge-sims":
        merge_sims(rest)
    elif cmd == "compare":
        compare(rest)
    else:
        die(f"unknown command '{cmd}'")


if __name__ == "__main__":
    main()
