#!/usr/bin/env bash
# A Debian root of another suite, with that suite's Slurm, for building and
# testing copus against the Slurm a site on that Debian release runs.
#
#   contrib/slurm-root.sh make SUITE DIR     (as root) debootstrap SUITE into
#                              DIR, install the build dependencies, the
#                              suite's Slurm (slurmctld, slurmd, libslurm-dev)
#                              and unpack its source in DIR/var/cache/copus
#   contrib/slurm-root.sh base SUITE DIR     only debootstrap SUITE into DIR
#                              (a fresh root for installing packages into)
#   contrib/slurm-root.sh run DIR [--bind SRC:DST]... [--env N=V]... -- COMMAND...
#                              run COMMAND inside DIR with /proc, /sys and
#                              /dev mounted, each SRC bound at DIR/DST and
#                              the environment N=V;
#                              everything is unmounted when it returns
#   contrib/slurm-root.sh source DIR         fetch the source of DIR's Slurm
#                              again into DIR/var/cache/copus
#   contrib/slurm-root.sh srcdir DIR         print where in DIR that source
#                              is and, when the tests use a Slurm built from
#                              it (see below), that Slurm's prefix
#   contrib/slurm-root.sh version DIR        print the root's Slurm version
#
# SUITE is a Debian suite name: bookworm (Slurm 22.05), trixie (24.11),
# sid (26.05). "make" on a DIR it already made, for the same suite and with
# the same package list, does nothing; a root older than COPUS_ROOT_DAYS
# (default 7) days is made again so that its packages stay current.
# The Slurm source comes from apt-get source, else from the upstream tarball
# apt names (checked against its SHA256 sum), else from a Slurm git
# repository (COPUS_SLURM_GIT): the release's tag, or when it has none the
# newest release of the same series. The plugins need the exact release's
# source (the job record's layout changes between micro releases too), so
# in that last case "make" builds that release of Slurm into
# DIR/opt/slurm-VERSION, and the tests run on it instead of the suite's own.
# Exit status 3 means the suite's packages could not be fetched (no route to
# the package registry, or the suite lacks a package): callers report such a
# version as skipped.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mounts=()
mirror=${COPUS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
max_days=${COPUS_ROOT_DAYS:-7}

die() { echo "slurm-root.sh: $*" >&2; exit 1; }
unreachable() { echo "slurm-root.sh: $*" >&2; exit 3; }
say() { echo "slurm-root.sh: $*" >&2; }

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mounts)"

# The packages a root needs: the host's list (contrib/debian-packages)
# without the lines tagged "host-only".
root_packages() {
	grep -v 'host-only' "$top/contrib/debian-packages" |
		sed -e 's/#.*//' -e '/^[[:space:]]*$/d' | tr '\n' ' '
}

# apt options for a root: sid's Release file as the registry serves it is
# past its Valid-Until date, which apt refuses unless told otherwise.
apt_conf() {
	local dir=$1
	mkdir -p "$dir/etc/apt/apt.conf.d"
	cat >"$dir/etc/apt/apt.conf.d/90copus" <<'EOF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
APT::Get::Assume-Yes "true";
quiet "2";
EOF
}

cmd_base() {
	local suite=$1 dir=$2
	command -v debootstrap >/dev/null ||
		die "debootstrap not found (install the Debian package debootstrap)"
	rm -rf "$dir"
	mkdir -p "$(dirname "$dir")"
	say "debootstrap $suite into $dir"
	if ! debootstrap --variant=minbase "$suite" "$dir" "$mirror" \
		>"$dir.debootstrap.log" 2>&1; then
		tail -5 "$dir.debootstrap.log" >&2
		rm -rf "$dir"
		unreachable "debootstrap $suite from $mirror failed (log: $dir.debootstrap.log)"
	fi
	apt_conf "$dir"
	# Source entries, for apt-get source slurm-wlm.
	sed -n 's/^deb \(.*\)/deb-src \1/p' "$dir/etc/apt/sources.list" \
		>>"$dir/etc/apt/sources.list"
	echo "$suite" >"$dir/.copus-suite"
}

# Mount what the daemons and the build need, run the command, unmount.
cmd_run() {
	local dir=$1
	shift
	[ -f "$dir/.copus-suite" ] || die "$dir is not a root made by slurm-root.sh"
	local binds=() envs=()
	mounts=()
	while [ $# -gt 0 ]; do
		case $1 in
		--bind) binds+=("$2"); shift 2 ;;
		--env) envs+=("$2"); shift 2 ;;
		--) shift; break ;;
		*) die "run: unknown option '$1'" ;;
		esac
	done
	[ $# -gt 0 ] || die "run: no command"
	local m
	cleanup() {
		local i
		for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
			umount -l "${mounts[$i]}" 2>/dev/null || true
		done
	}
	trap cleanup EXIT
	for m in proc sys dev dev/pts; do
		mkdir -p "$dir/$m"
		if ! mountpoint -q "$dir/$m"; then
			case $m in
			proc) mount -t proc proc "$dir/proc" ;;
			*) mount --bind "/$m" "$dir/$m" ;;
			esac
			mounts+=("$dir/$m")
		fi
	done
	for m in ${binds[@]+"${binds[@]}"}; do
		local src=${m%%:*} dst=${m#*:}
		if [ -d "$src" ]; then
			mkdir -p "$dir/$dst"
		else
			mkdir -p "$(dirname "$dir/$dst")"
			touch "$dir/$dst"
		fi
		mount --bind "$src" "$dir/$dst"
		mounts+=("$dir/$dst")
	done
	# The daemons resolve this machine's name as the host does.
	local f
	for f in resolv.conf hosts hostname; do
		cp -L "/etc/$f" "$dir/etc/$f" 2>/dev/null || true
	done
	local rc=0
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
		${COPUS_DATA:+COPUS_DATA=/data} ${KEEP_TMP:+KEEP_TMP=$KEEP_TMP} \
		${envs[@]+"${envs[@]}"} "$@" || rc=$?
	cleanup
	trap - EXIT
	return $rc
}

# Unpack the source of the root's Slurm in DIR/var/cache/copus. apt-get
# source needs the Debian part (.dsc, .debian.tar.xz); when the registry does
# not serve it (a point release's revision can lack it), the upstream
# tarball that apt names for that version is fetched and checked against the
# SHA256 sum apt's index gives: the plugin is compiled against upstream's
# headers, which Debian's patches to slurm-wlm leave alone.
fetch_source() {
	local dir=$1 ver upstream cache
	ver=$(chroot "$dir" dpkg-query -W -f='${Version}' libslurm-dev)
	upstream=${ver#*:}
	upstream=${upstream%-*}
	cache=$dir/var/cache/copus
	rm -rf "$cache"
	mkdir -p "$cache"
	chroot "$dir" chown _apt /var/cache/copus
	if cmd_run "$dir" -- sh -c "cd /var/cache/copus && apt-get source 'slurm-wlm=$ver'"; then
		echo "$ver" >"$cache/.version"
		return 0
	fi
	echo "apt-get source failed; fetching the upstream tarball alone"
	local line url file sum
	line=$(chroot "$dir" apt-get source --print-uris "slurm-wlm=$ver" |
		grep "\\.orig\\.tar\\.")
	url=$(echo "$line" | awk '{ gsub("\x27", "", $1); print $1 }')
	file=$(echo "$line" | awk '{ print $2 }')
	sum=$(echo "$line" | awk '{ sub("SHA256:", "", $4); print $4 }')
	if [ -n "$url" ] && [ -n "$sum" ] && command -v curl >/dev/null &&
		curl -fsS -o "$cache/$file" "$url" &&
		echo "$sum  $cache/$file" | sha256sum -c -; then
		mkdir -p "$cache/slurm-wlm-$upstream"
		tar -xf "$cache/$file" -C "$cache/slurm-wlm-$upstream" --strip-components=1
		echo "$ver (upstream source only)" >"$cache/.version"
		return 0
	fi
	rm -f "$cache/$file"
	echo "the registry serves no source of slurm-wlm $ver; looking for a Slurm git repository"
	from_git "$cache" "$upstream"
}

# A Slurm git repository (SchedMD's), where the registry serves no source:
# COPUS_SLURM_GIT, else /var/cache/copus/slurm.git (a clone, or a link to
# one).
slurm_git() {
	local g
	for g in ${COPUS_SLURM_GIT:-} /var/cache/copus/slurm.git; do
		git --git-dir="$g" rev-parse --verify -q HEAD >/dev/null 2>&1 &&
			{ echo "$g"; return 0; }
	done
	return 1
}

# Export release VERSION (a.b.c) from the repository's tag slurm-a-b-c-*,
# or, when it lacks that tag, the newest release of the same series
# (slurm-a-b-*); .version then says "build" and which release it holds.
from_git() {
	local cache=$1 version=$2 g major minor micro ref
	g=$(slurm_git) || { echo "no Slurm git repository (set COPUS_SLURM_GIT)"; return 1; }
	IFS=. read -r major minor micro <<<"$version"
	minor=$(printf %02d "$((10#$minor))")
	ref=$(git --git-dir="$g" tag -l "slurm-$major-$minor-$micro-*" | sort -V | tail -1)
	[ -n "$ref" ] || ref=$(git --git-dir="$g" tag -l "slurm-$major-$minor-*" |
		grep -v rc | sort -V | tail -1)
	[ -n "$ref" ] || { echo "$g has no Slurm $major.$minor release"; return 1; }
	local meta dirv
	meta=$(git --git-dir="$g" show "$ref:META") || return 1
	dirv=$(echo "$meta" | awk '$1 == "Major:" { a = $2 } $1 == "Minor:" { b = $2 }
		$1 == "Micro:" { c = $2 } END { print a "." b "." c }')
	mkdir -p "$cache/slurm-$dirv"
	git --git-dir="$g" archive "$ref" | tar -x -C "$cache/slurm-$dirv"
	if [ "$dirv" = "$version" ]; then
		echo "$version (git $ref)" >"$cache/.version"
	else
		echo "$version build $dirv (git $ref)" >"$cache/.version"
	fi
	echo "exported $ref of $g as Slurm $dirv"
}

# Build the release whose source from_git exported into DIR/opt/slurm-V,
# with what the loopback tests use (auth/none, cred/none, cons_tres,
# gres/gpu, the schedulers, several slurmd per host as Debian builds it);
# without PMIx, which Debian's PMIx may be too
# new for.
build_slurm() {
	local dir=$1 v
	local flags="--without-pmix --disable-debug --enable-multiple-slurmd"
	v=$(awk '$2 == "build" { print $3 }' "$dir/var/cache/copus/.version")
	[ -n "$v" ] || return 0
	[ "$(cat "$dir/opt/slurm-$v/.copus-build" 2>/dev/null)" = "$flags" ] && return 0
	say "building Slurm $v into $dir/opt/slurm-$v (its suite's source is not served)"
	rm -rf "$dir/opt/slurm-$v"
	cmd_run "$dir" -- sh -c "set -e; rm -rf /var/cache/copus/slurm-build
		mkdir -p /var/cache/copus/slurm-build; cd /var/cache/copus/slurm-build
		/var/cache/copus/slurm-$v/configure -q --prefix=/opt/slurm-$v \
			--sysconfdir=/opt/slurm-$v/etc $flags
		make -s -j$(nproc) && make -s install" >"$dir.slurm-build.log" 2>&1 || {
		tail -20 "$dir.slurm-build.log" >&2
		die "building Slurm $v failed (log: $dir.slurm-build.log)"
	}
	echo "$flags" >"$dir/opt/slurm-$v/.copus-build"
	rm -rf "$dir/var/cache/copus/slurm-build"
}

cmd_make() {
	local suite=$1 dir=$2
	local want pkgs
	want="$suite $(root_packages | md5sum | cut -c1-12)"
	pkgs=$(root_packages)
	if [ -f "$dir/.copus-made" ] &&
		[ -n "$(find "$dir/.copus-made" -mtime -"$max_days")" ]; then
		[ "$(cat "$dir/.copus-made")" = "$want" ] && return 0
		# Same suite, another package list: install it in place.
		if [ "$(cut -d' ' -f1 "$dir/.copus-made")" = "$suite" ] &&
			cmd_run "$dir" -- sh -c "apt-get update && \
			DEBIAN_FRONTEND=noninteractive apt-get install $pkgs" \
			>"$dir.apt.log" 2>&1; then
			echo "$want" >"$dir/.copus-made"
			return 0
		fi
	fi
	cmd_base "$suite" "$dir"
	say "installing $suite's Slurm and the build dependencies"
	if ! cmd_run "$dir" -- sh -c "apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install $pkgs" \
		>"$dir.apt.log" 2>&1; then
		tail -5 "$dir.apt.log" >&2
		unreachable "installing the packages into the $suite root failed (log: $dir.apt.log)"
	fi
	say "fetching $suite's Slurm source"
	fetch_source "$dir" >"$dir.source.log" 2>&1 || {
		tail -5 "$dir.source.log" >&2
		unreachable "no source of the $suite root's Slurm could be fetched (log: $dir.source.log)"
	}
	build_slurm "$dir"
	echo "$want" >"$dir/.copus-made"
}

# The source tree of DIR's Slurm, as the root sees it, and when the tests
# use a Slurm built from it, that Slurm's prefix: "PATH [PREFIX]".
cmd_srcdir() {
	local dir=$1 v
	v=$(cat "$dir/var/cache/copus/.version" 2>/dev/null) || die "no Slurm source in $dir"
	local d
	d=$(cd "$dir/var/cache/copus" && ls -d slurm-[0-9]*/ slurm-wlm-[0-9]*/ 2>/dev/null | head -1) || true
	case $v in
	*" build "*) echo "/var/cache/copus/${d%/} /opt/slurm-$(echo "$v" | awk '{ print $3 }')" ;;
	*) echo "/var/cache/copus/${d%/}" ;;
	esac
}

cmd_version() {
	local dir=$1
	chroot "$dir" dpkg-query -W -f='${Version}\n' libslurm-dev
}

case ${1:-} in
make) [ $# -eq 3 ] || die "usage: slurm-root.sh make SUITE DIR"; cmd_make "$2" "$3" ;;
base) [ $# -eq 3 ] || die "usage: slurm-root.sh base SUITE DIR"; cmd_base "$2" "$3" ;;
run) [ $# -ge 3 ] || die "usage: slurm-root.sh run DIR [--bind SRC:DST]... [--env N=V]... -- COMMAND..."
	shift; cmd_run "$@" ;;
source) [ $# -eq 2 ] || die "usage: slurm-root.sh source DIR"; fetch_source "$2"; build_slurm "$2" ;;
srcdir) [ $# -eq 2 ] || die "usage: slurm-root.sh srcdir DIR"; cmd_srcdir "$2" ;;
version) [ $# -eq 2 ] || die "usage: slurm-root.sh version DIR"; cmd_version "$2" ;;
*) sed -n '5,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
