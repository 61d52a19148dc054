#!/bin/bash
# copus's Debian packages, for the Slurm installed on this machine.
#
#   contrib/deb.sh BUILD_DIR      (as root, where libslurm-dev, slurmctld and
#                                 the packages of contrib/debian/control's
#                                 Build-Depends are installed)
#
# BUILD_DIR is a build directory configured with --with-slurm-src=DIR (the
# Slurm source tree that matches the installed Slurm). deb.sh makes the
# source tarball there (make dist), unpacks it into BUILD_DIR/deb/src with
# contrib/debian as its debian/, writes debian/changelog with a version that
# names the Slurm it is built for (0.1.0-1+slurm22.05.8), builds the binary
# packages (dpkg-buildpackage -b, without the tests), and leaves the .deb
# files, the .buildinfo and the .changes in BUILD_DIR/deb, with the build's
# log (build.log) and lintian's (lintian.log). It fails when lintian
# reports an error (E:); its warnings are printed.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "deb.sh: $*" >&2; exit 1; }
say() { echo "== $*"; }

[ $# -eq 1 ] || die "usage: contrib/deb.sh BUILD_DIR"
build=$(cd "$1" && pwd) || die "no directory $1"
[ -f "$build/Makefile" ] || die "$build is not a configured build directory"
for tool in dpkg-buildpackage dh lintian; do
	command -v "$tool" >/dev/null ||
		die "$tool not found (install the Debian packages dpkg-dev, debhelper and lintian)"
done

# What the build directory was configured with.
make_value() { sed -n "s/^$1 = //p" "$build/Makefile" | head -n 1; }
slurm_src=$(make_value SLURM_SRC)
[ -n "$slurm_src" ] ||
	die "$build was configured without --with-slurm-src: the slurmctld plugin would be missing"
version=$(make_value PACKAGE_VERSION)
[ -n "$version" ] || die "no PACKAGE_VERSION in $build/Makefile"

# The installed Slurm (slurmctld, else libslurm-dev, of the same source
# package), as debian/rules reads it for the plugins' dependencies.
slurm_deb=$(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || true)
[ -n "$slurm_deb" ] || slurm_deb=$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null || true)
[ -n "$slurm_deb" ] || die "neither slurmctld nor libslurm-dev is installed"
slurm_up=${slurm_deb#*:}
slurm_up=${slurm_up%-*}
deb_version=$version-1+slurm$slurm_up

out=$build/deb
src=$out/src
rm -rf "$out"
mkdir -p "$src"

say "make dist in $build"
make -C "$build" dist >"$out/dist.log" 2>&1 || { tail -n 20 "$out/dist.log"; die "make dist failed (log: $out/dist.log)"; }
tarball=$build/copus-$version.tar.gz
[ -f "$tarball" ] || die "make dist left no $tarball"
cp "$tarball" "$src/copus_$version.orig.tar.gz"
tar -xzf "$tarball" -C "$src"
pkg=$src/copus-$version
cp -r "$top/contrib/debian" "$pkg/debian"

# The distribution this machine runs (the changelog names one).
dist=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null | tr -d '"')
cat >"$pkg/debian/changelog" <<CHANGELOG
copus ($deb_version) ${dist:-unstable}; urgency=medium

  * Built for Slurm $slurm_up (the installed slurmctld is $slurm_deb).

 -- copus developers <copus@example.org>  $(date -R)
CHANGELOG

say "dpkg-buildpackage -b: copus $deb_version (log: $out/build.log)"
jobs=$(nproc 2>/dev/null || echo 2)
if ! (cd "$pkg" && COPUS_SLURM_SRC=$slurm_src \
	DEB_BUILD_OPTIONS="nocheck parallel=$jobs ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log"
	die "dpkg-buildpackage failed (log: $out/build.log)"
fi
mv "$src"/*.deb "$src"/*.buildinfo "$src"/*.changes "$out"/
rm -rf "$src"
changes=$(ls "$out"/*.changes)
ls -1 "$out"/*.deb | sed 's|.*/|   |'

say "lintian $(basename "$changes")"
lintian "$changes" >"$out/lintian.log" 2>&1 || true
sed 's/^/   /' "$out/lintian.log"
errors=$(grep -c '^E: ' "$out/lintian.log" || true)
warnings=$(grep -c '^W: ' "$out/lintian.log" || true)
[ "$errors" -eq 0 ] || die "lintian reports $errors errors (log: $out/lintian.log)"
say "packages in $out ($warnings lintian warnings)"
