#!/bin/sh
# Fuzzes the parsers of untrusted input with clang's libFuzzer, one target
# after the other, each for EXECUTIONS inputs (default 10 million).
#
#   tests/fuzz/run.sh [EXECUTIONS] [TARGET...]
#
# TARGET: hint planner-gpus history params state elastic types csv workload
# profile manifest plan-query plan-prof plan-data arena-trace arena-spec
# (default: all). Needs clang and its libFuzzer runtime (Debian: clang-14,
# libclang-rt-14-dev) and the libraries the build uses (json-c, nlopt,
# xgboost, zlib). The targets are built with the address and undefined
# behaviour sanitizers, every report fatal, into FUZZ_WORK (default: a new
# directory under /tmp, kept for its logs). Each target starts from a copy of
# its seed corpus tests/fuzz/corpus/<target>/, so the repository is left as
# it is; the inputs the fuzzer finds go to FUZZ_WORK/corpus/<target>/ and an
# input that crashes to FUZZ_WORK/crash-<target>-*, to be minimised
# (-minimize_crash=1) and added to the seed corpus with the fix.
#
# The fuzzers run niced (FUZZ_NICE, default 10): a long run shares the
# machine. Exit status: 0 when every target ran all its executions without
# a crash, a leak or a sanitizer report.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-10000000}
[ $# -gt 0 ] && shift
targets=${*:-hint planner-gpus history params state elastic types csv workload profile manifest
	plan-query plan-prof plan-data arena-trace arena-spec}
work=${FUZZ_WORK:-$(mktemp -d /tmp/copus-fuzz-run.XXXXXX)}
# FUZZ_CC, not CC: a CC=gcc left in the environment has no libFuzzer.
cc=${FUZZ_CC:-clang}
nice=${FUZZ_NICE:-10}
# The targets that read files write each input to a scratch directory:
# on a tmpfs (FUZZ_TMPDIR, default /dev/shm) that is several times faster
# than on a disk.
scratch=${FUZZ_TMPDIR:-/dev/shm}
[ -d "$scratch" ] && [ -w "$scratch" ] || scratch=${TMPDIR:-/tmp}

case $runs in
*[!0-9]* | '') echo "usage: $0 [EXECUTIONS] [TARGET...]" >&2; exit 2 ;;
esac
command -v "$cc" >/dev/null || {
	echo "$0: $cc not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
	exit 2
}
jsonc_cflags=$(pkg-config --cflags json-c 2>/dev/null || echo -I/usr/include/json-c)
jsonc_libs=$(pkg-config --libs json-c 2>/dev/null || echo -ljson-c)

# The normal build's language and warnings (configure.ac), the sanitizers
# of the fuzzing build, and every report fatal so that libFuzzer keeps the
# input.
cflags="-std=gnu11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra
	-Wno-unused-parameter -fsanitize=address,undefined
	-fno-sanitize-recover=all -I$top/include $jsonc_cflags"
libs="$jsonc_libs -lnlopt -lxgboost -lz -lm"

# Each target's max_len fits its input: a hint is at most 1024 bytes (a
# little more reaches the length check), a history line or an option is
# short, a trace file, a manifest or a planner's file is a few kilobytes.
max_len() {
	case $1 in
	hint) echo 1100 ;;
	planner-gpus) echo 8192 ;;
	history | state) echo 256 ;;
	params) echo 1024 ;;
	elastic) echo 64 ;;
	types) echo 256 ;;
	csv | workload) echo 4096 ;;
	profile | manifest) echo 8192 ;;
	plan-query | arena-trace) echo 4096 ;;
	plan-prof | plan-data | arena-spec) echo 8192 ;;
	*) return 1 ;;
	esac
}

# The project's sources a target links; the core library is an archive,
# from which the linker takes only what the target calls.
sources() {
	case $1 in
	hint) echo core/hint.c ;;
	planner-gpus) echo core/planner-gpus.c ;;
	history) echo core/history.c ;;
	params) echo plugin/params.c ;;
	state) echo plugin/statefmt.c ;;
	elastic | types) ;;
	csv) echo sim/csv.c ;;
	workload) echo sim/csv.c sim/engine-input.c ;;
	profile) echo sim/csv.c sim/trace.c ;;
	manifest) echo runtime/checkpoint-format.c runtime/common.c ;;
	plan-*) echo sim/csv.c sim/plan-data.c sim/plan-parse.c sim/plan-comm.c \
		sim/plan-measured.c ;;
	arena-*) echo sim/csv.c sim/arena.c ;;
	esac
}

# The directory of the private headers a target includes.
part() {
	case $1 in
	params | state | elastic | types) echo plugin ;;
	csv | workload | profile | plan-* | arena-*) echo sim ;;
	manifest) echo runtime ;;
	*) echo core ;;
	esac
}

for t in $targets; do
	max_len "$t" >/dev/null || { echo "$0: unknown target $t" >&2; exit 2; }
done

mkdir -p "$work/obj" "$work/bin" "$work/corpus" || exit 1
echo "fuzz: building in $work with $($cc --version | head -n 1)"

# The core library, instrumented for coverage but without libFuzzer's main;
# built again when a source changed since (FUZZ_WORK may be reused).
if [ ! -f "$work/obj/libcore.a" ] ||
	[ -n "$(find "$top/core" -name '*.[ch]' -newer "$work/obj/libcore.a" |
		head -n 1)" ]; then
	objs=
	for src in "$top"/core/*.c "$top"/core/policy/*.c; do
		obj=$work/obj/core-$(basename "$(dirname "$src")")-$(basename "$src" .c).o
		# shellcheck disable=SC2086
		$cc $cflags -fsanitize=fuzzer-no-link -c "$src" -o "$obj" ||
			exit 1
		objs="$objs $obj"
	done
	# shellcheck disable=SC2086
	ar rcs "$work/obj/libcore.a" $objs || exit 1
fi

status=0
summary=
for t in $targets; do
	srcs=
	for s in $(sources "$t"); do
		srcs="$srcs $top/$s"
	done
	# shellcheck disable=SC2086
	if ! $cc $cflags -I"$top/$(part "$t")" -fsanitize=fuzzer \
		-o "$work/bin/fuzz-$t" \
		"$top/tests/fuzz/fuzz-$t.c" $srcs "$work/obj/libcore.a" $libs \
		2>"$work/build-$t.log"; then
		cat "$work/build-$t.log" >&2
		echo "fuzz-$t: build failed"
		summary="$summary
fuzz-$t: build failed"
		status=1
		continue
	fi
	rm -rf "$work/corpus/$t"
	cp -R "$top/tests/fuzz/corpus/$t" "$work/corpus/$t" || exit 1
	chmod -R u+w "$work/corpus/$t"
	start=$(date +%s)
	# One process, one input at a time, every report fatal; -timeout
	# makes an input that hangs a parser a crash too.
	TMPDIR=$scratch nice -n "$nice" "$work/bin/fuzz-$t" -runs="$runs" \
		-max_len="$(max_len "$t")" -timeout=25 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/crash-$t-" \
		"$work/corpus/$t" >"$work/fuzz-$t.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	# "Done N runs" ends a clean run; after a crash, the last status line
	# ("#N ...") says how far it got.
	done_runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$work/fuzz-$t.log")
	[ -n "$done_runs" ] || done_runs=$(sed -n 's/^#\([0-9]*\)[[:space:]].*/\1/p' \
		"$work/fuzz-$t.log" | tail -n 1)
	if [ "$rc" -eq 0 ]; then
		result="no crash, leak or sanitizer report"
	else
		result="FAILED (exit $rc): see $work/fuzz-$t.log and $work/crash-$t-*"
		status=1
	fi
	line="fuzz-$t: ${done_runs:-?} executions in ${secs} s: $result"
	echo "$line"
	summary="$summary
$line"
done
echo "fuzz: summary (logs and corpora in $work)$summary"
exit $status
