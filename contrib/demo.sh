#!/usr/bin/env bash
# The main job: what copus can show on this machine today.
#   contrib/demo.sh BUILD_DIR DATA_DIR
set -euo pipefail
build=$1
data=$2
if [ ! -d "$data/pollux/traces" ]; then
	echo "demo: no Pollux profiles in $data/pollux/traces (set COPUS_DATA)" >&2
	exit 1
fi
echo "copus core model on Pollux's measured profiles (speedup and fit costs):"
"$build/tests/bench-model" "$data"
