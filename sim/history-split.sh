#!/bin/sh
# copus with and without a cluster's history, on every workload family of
# the reference data (as sim/compare.sh): each family's workloads cut in
# two halves, each half run with the jobs the other half finished as the
# predictor's history (--save-history from one, --history into the other),
# against a cold predictor and the true remaining time (--remaining oracle).
# Prints, per family, the mean average JCT over all its workloads.
# Usage: sim/history-split.sh DATA_DIR [COPUS_SIM]
set -eu
data=${1:?usage: sim/history-split.sh DATA_DIR [COPUS_SIM]}
sim=${2:-$(dirname "$0")/copus-sim}
[ -x "$sim" ] || sim=copus-sim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hetero=aws:6x4,rtx:3x8,dgx-ext:2x8

# run NAME CLUSTER PROFILES [options] -- WORKLOADS...: one summary
run() {
	name=$1 c=$2 p=$3
	shift 3
	opts=
	while [ "$1" != -- ]; do
		opts="$opts $1"
		shift
	done
	shift
	"$sim" --cluster "$c" --profiles "$p" --policy copus --jobs 2 \
		--summary "$tmp/$name.json" $opts "$@" > /dev/null
}

printf '%-13s %10s %10s %10s\n' family cold history oracle
for fam in pollux-1.0 pollux-0.5 sia-philly sia-newtrace; do
	case $fam in
	pollux-1.0) c=16x4 p=$data/pollux/traces w=$data/pollux/workloads
		a="$w/workload-1.csv $w/workload-2.csv $w/workload-3.csv $w/workload-4.csv"
		b="$w/workload-5.csv $w/workload-6.csv $w/workload-7.csv $w/workload-8.csv" ;;
	pollux-0.5) c=16x4 p=$data/pollux/traces w=$data/pollux/workloads-0.5
		a="$w/workload-1.csv $w/workload-2.csv $w/workload-3.csv $w/workload-4.csv"
		b="$w/workload-5.csv $w/workload-6.csv $w/workload-7.csv $w/workload-8.csv" ;;
	sia-philly) c=$hetero p=$data/sia/traces w=$data/sia/workloads/philly
		a="$w/workload-1.csv $w/workload-2.csv $w/workload-3.csv $w/workload-4.csv"
		b="$w/workload-5.csv $w/workload-6.csv $w/workload-7.csv $w/workload-8.csv" ;;
	sia-newtrace) c=$hetero p=$data/sia/traces w=$data/sia/workloads/newtrace
		a="$w/workload-1.csv $w/workload-2.csv"
		b="$w/workload-3.csv $w/workload-4.csv $w/workload-5.csv" ;;
	esac
	for half in a b; do
		eval "files=\$$half"
		run "$half-cold" "$c" "$p" --save-history "$tmp/$half.hist" -- $files
		run "$half-oracle" "$c" "$p" --remaining oracle -- $files
	done
	run a-history "$c" "$p" --history "$tmp/b.hist" -- $a
	run b-history "$c" "$p" --history "$tmp/a.hist" -- $b
	python3 - "$tmp" "$fam" <<'PY'
import json, sys
tmp, fam = sys.argv[1], sys.argv[2]
out = []
for how in ("cold", "history", "oracle"):
    total = count = 0
    for half in ("a", "b"):
        s = json.load(open("%s/%s-%s.json" % (tmp, half, how)))
        for avg in s["avgs"].values():
            total += avg
            count += 1
    out.append(total / count)
print("%-13s %10.0f %10.0f %10.0f" % (fam, *out))
PY
done
