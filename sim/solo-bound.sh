#!/bin/sh
# Each job of a workload alone on the cluster: its JCT when no other job
# shares the GPUs, and the mean over the jobs. A job alone waits for no
# one and may take every GPU it can use, so a policy's mean JCT on the
# whole workload stays above this mean unless it sizes a lone job better
# than the policy run here: the mean is the floor against which a policy's
# mean, and a target such as "half of backfill's", are read.
#
# Usage: sim/solo-bound.sh [--json FILE] WORKLOAD.csv COPUS_SIM [copus-sim options]
#
# The options are copus-sim's for one workload (--cluster, --profiles,
# --policy, ...; by default the copus policy), without --summary, which
# the script gives each job's run. It prints one line per job (name, its
# JCT alone) and the mean; --json FILE also writes {"jcts": {name: JCT},
# "mean": M, "jobs": N}. A job copus-sim cannot run alone (it fails, or the
# job does not finish) is an error that names it.
set -eu
json=""
if [ "${1:-}" = --json ]; then
	json=${2:?--json needs a file}
	shift 2
fi
[ $# -ge 2 ] || {
	echo "usage: sim/solo-bound.sh [--json FILE] WORKLOAD.csv COPUS_SIM [copus-sim options]" >&2
	exit 2
}
workload=$1 sim=$2
shift 2
[ -r "$workload" ] || { echo "solo-bound.sh: cannot read $workload" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case " $* " in
*" --policy "*) ;;
*) set -- --policy copus "$@" ;;
esac
# One workload file per job: the header and the job's own line.
python3 - "$workload" "$tmp" <<'PY'
import csv, sys
path, tmp = sys.argv[1], sys.argv[2]
with open(path, newline="") as f:
    rows = list(csv.reader(f))
if not rows or "name" not in rows[0]:
    sys.exit(f"solo-bound.sh: {path}: line 1: no header with a name column")
body = [r for r in rows[1:] if r and any(c.strip() for c in r)]
if not body:
    sys.exit(f"solo-bound.sh: {path}: no job")
with open(f"{tmp}/names", "w") as names:
    for i, r in enumerate(body):
        with open(f"{tmp}/job-{i}.csv", "w", newline="") as f:
            csv.writer(f).writerows([rows[0], r])
        names.write(r[rows[0].index("name")] + "\n")
PY
i=0
while read -r name; do
	"$sim" "$@" --summary "$tmp/job-$i.json" "$tmp/job-$i.csv" > "$tmp/out" 2>&1 || {
		cat "$tmp/out" >&2
		echo "solo-bound.sh: copus-sim failed on job $name alone" >&2
		exit 1
	}
	i=$((i + 1))
done < "$tmp/names"
python3 - "$tmp" "$i" "$json" <<'PY'
import json, sys
tmp, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = open(f"{tmp}/names").read().split("\n")[:n]
jcts = {}
for i, name in enumerate(names):
    s = json.load(open(f"{tmp}/job-{i}.json"))
    w = next(iter(s["jcts"]))
    v = s["jcts"][w].get(name)
    if v is None or v < 0:
        sys.exit(f"solo-bound.sh: job {name} did not finish alone")
    jcts[name] = v
    print(f"{name} {v:.0f}")
mean = sum(jcts.values()) / len(jcts)
print(f"mean {mean:.1f} over {len(jcts)} jobs, each alone")
if out:
    with open(out, "w") as f:
        json.dump({"jcts": jcts, "mean": mean, "jobs": len(jcts)}, f,
                  indent=1)
PY
