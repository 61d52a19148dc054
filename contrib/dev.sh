#!/usr/bin/env bash
# copus developer entry point for a fresh Debian 12 machine (run as root).
#
#   contrib/dev.sh demo    install what is needed, build, run the main job
#                          (sched/copus on a loopback Slurm cluster)
#   contrib/dev.sh demo-sim  install, build, replay a workload in copus-sim
#                          under each scheduler
#   contrib/dev.sh test    install what is needed, build, run every test;
#                          the loopback Slurm tests also on Debian 13's
#                          Slurm 24.11 and unstable's 26.05, each in a root
#                          of that suite (contrib/slurm-root.sh)
#   contrib/dev.sh test-suite SUITE   only the loopback tests on SUITE's
#                          Slurm (trixie: 24.11, sid: 26.05); COPUS_SUITE_TESTS
#                          may name some ("tests/test-slurm-chaos.sh ...")
#   contrib/dev.sh deps    only install the Debian packages and the Slurm source
#
# The reference data is expected in ../shared/data beside the project root, or
# wherever COPUS_DATA points.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
data=${COPUS_DATA:-$top/../shared/data}
jobs=$(nproc 2>/dev/null || echo 2)

# Debian packages the build, the tests and the demo need.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$top/contrib/debian-packages")

# Where the matching Slurm source is unpacked (plugin headers).
srcroot=${COPUS_SLURM_SRC_ROOT:-/var/cache/copus}
# The other Slurm versions the tests run on: Debian suites, each in a root
# kept under $roots (made again after a week).
suites=${COPUS_SLURM_SUITES-trixie sid}
roots=${COPUS_ROOTS:-/var/cache/copus/roots}

say() { printf '== %s\n' "$*" >&2; }

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "contrib/dev.sh: installing packages needs root; run it as root" >&2
		exit 1
	fi
}

install_packages() {
	local missing=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		need_root
		say "installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

# apt-get source needs deb-src entries for the suites that hold slurm-wlm.
enable_deb_src() {
	if apt-cache showsrc slurm-wlm 2>/dev/null | grep -q '^Package: slurm-wlm'; then
		return
	fi
	need_root
	say "adding deb-src entries for the configured Debian suites"
	local out=/etc/apt/sources.list.d/copus-deb-src.sources
	: > "$out"
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ "$f" = "$out" ] && continue
		awk 'BEGIN { RS = ""; ORS = "\n\n" }
		     /Types:[^\n]*deb/ && !/deb-src/ { sub(/Types:[^\n]*/, "Types: deb-src"); print }' \
			"$f" >> "$out"
	done
	if [ -f /etc/apt/sources.list ]; then
		sed -n 's/^deb \(.*\)/deb-src \1/p' /etc/apt/sources.list \
			> /etc/apt/sources.list.d/copus-deb-src.list
	fi
	apt-get update -qq
}

# Unpack the Slurm source matching the installed libslurm-dev.
slurm_source() {
	local ver
	ver=$(dpkg-query -W -f='${Version}' libslurm-dev)
	local upstream=${ver#*:}
	upstream=${upstream%-*}
	local dir
	dir=$(ls -d "$srcroot"/slurm-wlm-"$upstream" 2>/dev/null || true)
	if [ -z "$dir" ] || [ ! -f "$srcroot/.version" ] ||
		[ "$(cat "$srcroot/.version")" != "$ver" ]; then
		enable_deb_src >&2
		need_root
		say "fetching the Slurm $ver source into $srcroot"
		rm -rf "$srcroot"
		mkdir -p "$srcroot"
		# _apt fetches into the current directory when it may write there.
		chown _apt "$srcroot" 2>/dev/null || true
		(cd "$srcroot" && apt-get source -qq "slurm-wlm=$ver" >/dev/null)
		echo "$ver" > "$srcroot/.version"
		dir=$(ls -d "$srcroot"/slurm-wlm-"$upstream")
	fi
	echo "$dir"
}

configure_build() {
	local slurm_src=$1 builddir=$2
	shift 2
	[ -x configure ] || autoreconf -fi >/dev/null 2>&1
	mkdir -p "$builddir"
	(cd "$builddir" && "$top/configure" -q --with-slurm-src="$slurm_src" "$@")
	make -s -C "$builddir" -j"$jobs"
}

cmd_deps() {
	install_packages
	slurm_source >/dev/null
}

# Print each failed test's log and one closing line for the whole run:
# "N passed, N failed", counting CUnit tests inside the test programs and
# every test script as one.
summarize() {
	local dir log trs passed=0 failed=0 skipped=0
	for dir in "$@"; do
		for trs in "$dir"/tests/*.trs "$dir"/*/tests/*.trs; do
			[ -f "$trs" ] || continue
			log=${trs%.trs}.log
			local result
			result=$(sed -n 's/^:test-result: //p' "$trs")
			if [ "$result" = FAIL ] || [ "$result" = ERROR ]; then
				echo "---- $log"
				cat "$log"
			fi
			local counts
			counts=$(awk '$1 == "tests" && NF == 6 { print $4, $5 }' "$log")
			if [ -n "$counts" ]; then
				passed=$((passed + ${counts% *}))
				failed=$((failed + ${counts#* }))
				# A program that died before its summary still failed.
				if [ "$result" != PASS ] && [ "${counts#* }" = 0 ]; then
					failed=$((failed + 1))
				fi
			else
				case $result in
				PASS) passed=$((passed + 1)) ;;
				SKIP) skipped=$((skipped + 1)) ;;
				*) failed=$((failed + 1)) ;;
				esac
			fi
		done
	done
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
}

# deb_test SUITE BUILD_DIR: BUILD_DIR/deb's packages installed in a fresh
# root of SUITE, running the demo cluster (tests/test-deb.sh); prints
# "installed and ran the demo, lintian 0 errors" or why not.
deb_test() {
	local suite=$1 b=$2 out rc=0
	out=$("$top/tests/test-deb.sh" "$suite" "$b/deb" 2>&1) || rc=$?
	echo "$out" >"$b/deb-test.log"
	case $rc in
	0) echo "installed and ran the demo in a fresh $suite root, lintian 0 errors" ;;
	77) echo "$(tail -1 "$b/deb-test.log")" ;;
	*) echo "failed (see $b/deb-test.log)"; return 1 ;;
	esac
}

# suite_test SUITE: build in SUITE's root against its Slurm and run the
# loopback tests there (make check-slurm, in build-SUITE); prints one line
# "Slurm V (SUITE): N passed, N failed, N skipped in Ts; packages: ..." or
# "Slurm (SUITE): skipped (reason)"; then builds the Debian packages there
# and installs them in a fresh root (deb_test). Returns 1 when a test failed.
suite_test() {
	local suite=$1 dir=$roots/$1 b=$top/build-$1 t0=$SECONDS rc=0
	local src prefix flags="" ver debver line bind=()
	mkdir -p "$b"
	[ -d "$data" ] && bind=(--bind "$data:/data")
	"$top/contrib/slurm-root.sh" make "$suite" "$dir" >"$b/root.log" 2>&1 || rc=$?
	if [ $rc -eq 3 ]; then
		echo "Slurm ($suite): skipped ($(tail -1 "$b/root.log" | sed 's/^slurm-root.sh: //'))"
		return 0
	elif [ $rc -ne 0 ]; then
		echo "Slurm ($suite): failed to make its root (see $b/root.log)"
		return 1
	fi
	ver=$("$top/contrib/slurm-root.sh" version "$dir")
	ver=${ver%-*}
	read -r src prefix <<<"$("$top/contrib/slurm-root.sh" srcdir "$dir")"
	local env=() note=""
	if [ -n "$prefix" ]; then
		# The suite's own Slurm has no source to build the plugins
		# against: the tests run on the release built from git.
		note=", on ${prefix#/opt/} built from git (no source of Debian's $ver is served)"
		debver=$ver
		ver=${prefix#/opt/slurm-}
		env=(--env "PATH=$prefix/bin:$prefix/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
			--env "SLURM_SBIN=$prefix/sbin" --env "SLURM_PLUGIN_DIR=$prefix/lib/slurm")
		flags="CPPFLAGS=-I$prefix/include LDFLAGS=-L$prefix/lib --with-slurm-plugindir=$prefix/lib/slurm"
	fi
	local target=check-slurm
	[ -z "${COPUS_SUITE_TESTS:-}" ] || target="check TESTS='$COPUS_SUITE_TESTS'"
	rm -f "$b"/tests/*.trs "$b"/tests/*.log
	"$top/contrib/slurm-root.sh" run "$dir" --bind "$top:/src" --bind "$b:/build" \
		${bind[@]+"${bind[@]}"} ${env[@]+"${env[@]}"} -- sh -c "cd /build &&
		want='--with-slurm-src=$src $flags --without-cuda' &&
		{ [ \"\$(cat .configured 2>/dev/null)\" = \"\$want\" ] ||
		  { make -s clean >/dev/null 2>&1; true; }; } &&
		/src/configure -q \$want && echo \"\$want\" >.configured &&
		make -s -j$jobs && make -s -j$jobs $target" >"$b/check.log" 2>&1 || rc=1
	summarize "$b" >"$b/summary.log" || { rc=1; cat "$b/summary.log" >&2; }
	line=$(tail -1 "$b/summary.log")
	[ -n "$line" ] || line="the build failed (see $b/check.log)"
	local pkg
	if [ -n "${COPUS_SUITE_TESTS:-}" ]; then
		pkg="skipped (only COPUS_SUITE_TESTS ran)"
	elif [ -n "$prefix" ]; then
		pkg="skipped (a package for Debian's Slurm $debver needs that release's source)"
	elif [ -f "$b/Makefile" ] && "$top/contrib/slurm-root.sh" run "$dir" \
		--bind "$top:/src" --bind "$b:/build" -- /src/contrib/deb.sh /build \
		>"$b/deb.log" 2>&1; then
		pkg=$(deb_test "$suite" "$b") || rc=1
	else
		pkg="failed (contrib/deb.sh; see $b/deb.log)"
		rc=1
	fi
	echo "Slurm $ver ($suite): $line in $((SECONDS - t0))s$note; packages: $pkg"
	return $rc
}

cmd_test() {
	install_packages
	local slurm_src rc=0 t0=$SECONDS lines=() suite
	slurm_src=$(slurm_source)
	export COPUS_DATA="$data"

	say "build and test (plain)"
	configure_build "$slurm_src" build
	make -s -C build check -j"$jobs" >/dev/null 2>&1 || rc=1

	say "build and test (AddressSanitizer + UndefinedBehaviorSanitizer)"
	configure_build "$slurm_src" build-san --enable-sanitizers
	make -s -C build-san check -j"$jobs" >/dev/null 2>&1 || rc=1

	local distcheck=0
	if [ $rc -eq 0 ]; then
		distcheck=1
		say "make distcheck"
		# The loopback suite ran on this tree just now; the dist tree
		# runs every other test and two loopback ones. The tests that
		# read the reference data ran on it twice already (plain and
		# ASan): here they run without it, as on a site that has none.
		COPUS_DATA=/nonexistent make -s -C build distcheck -j"$jobs" \
			DISTCHECK_CONFIGURE_FLAGS="--with-slurm-src=$slurm_src" \
			SLURM_CHECK="tests/test-slurm-loopback.sh tests/test-slurm-examples.sh" \
			>build/distcheck.log 2>&1 || { tail -40 build/distcheck.log; rc=1; }
	fi

	local pkg
	say "Debian packages (contrib/deb.sh) and their install test"
	if "$top/contrib/deb.sh" build >build/deb.log 2>&1; then
		pkg=$(deb_test "$(. /etc/os-release && echo "$VERSION_CODENAME")" "$top/build") || rc=1
	else
		pkg="failed (contrib/deb.sh; see build/deb.log)"
		rc=1
	fi
	# Each part on its own: an assignment's status is its last command
	# substitution's, and summarize fails when a test did, which would end
	# this script (set -e) before the results are printed.
	local ver sum dist="distcheck included (loopback: first job, examples)"
	ver=$(dpkg-query -W -f='${Version}' libslurm-dev | sed 's/-[^-]*$//') || ver="?"
	sum=$(summarize build build-san | tail -1) || true
	[ "$distcheck" = 1 ] || dist="distcheck not run (a test failed)"
	lines+=("Slurm $ver (this machine): $sum in $((SECONDS - t0))s, ASan included, $dist; packages: $pkg")

	for suite in $suites; do
		say "loopback tests on $suite's Slurm"
		lines+=("$(suite_test "$suite")") || rc=1
	done

	say "results"
	# (A failing command inside the braces would end the script: set -e.)
	summarize build build-san >/dev/null || { summarize build build-san || true; rc=1; }
	printf '%s\n' "${lines[@]}"
	return $rc
}

cmd_demo() {
	install_packages
	need_root
	local slurm_src
	slurm_src=$(slurm_source)
	configure_build "$slurm_src" build
	"$top/contrib/slurm-demo.sh" "$top/build"
}

cmd_demo_sim() {
	install_packages
	local slurm_src
	slurm_src=$(slurm_source)
	configure_build "$slurm_src" build
	"$top/contrib/demo.sh" "$top/build" "$data"
}

case ${1:-} in
deps) cmd_deps ;;
test-suite)
	[ $# -eq 2 ] || { echo "usage: contrib/dev.sh test-suite SUITE" >&2; exit 2; }
	install_packages
	export COPUS_DATA="$data"
	[ -x configure ] || autoreconf -fi >/dev/null 2>&1
	suite_test "$2"
	;;
test) cmd_test ;;
demo) cmd_demo ;;
demo-sim) cmd_demo_sim ;;
*)
	echo "usage: contrib/dev.sh demo|demo-sim|test|test-suite SUITE|deps" >&2
	exit 2
	;;
esac
