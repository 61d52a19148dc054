#!/bin/sh
# What a training job's build sees after 'make install': copus.pc gives the
# flags to compile against every installed public header and to link libcopus,
# and the program runs. Installs into a scratch DESTDIR, never into the system.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }

${MAKE:-make} -s install DESTDIR="$tmp" > "$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; fail "make install DESTDIR=$tmp failed"; }
pc=$(find "$tmp" -name copus.pc | head -n 1)
[ -n "$pc" ] || fail "make install put no copus.pc under $tmp"
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$tmp"
cflags=$(pkg-config --cflags copus) || fail "pkg-config --cflags copus"
libs=$(pkg-config --libs copus) || fail "pkg-config --libs copus"
# pkgconf puts the sysroot in front of the variables too.
incdir=$(pkg-config --variable=includedir copus)
libdir=$(pkg-config --variable=libdir copus)

# Every installed public header compiles on its own.
n=0
for h in "$incdir"/copus/*.h; do
	printf '#include <copus/%s>\nint main(void) { return 0; }\n' \
		"$(basename "$h")" > "$tmp/h.c"
	${CC:-cc} $cflags -c "$tmp/h.c" -o "$tmp/h.o" 2> "$tmp/cc.log" ||
		{ cat "$tmp/cc.log"; fail "copus/$(basename "$h") does not compile alone"; }
	n=$((n + 1))
done
[ "$n" -ge 6 ] || fail "only $n public headers installed"

cat > "$tmp/job.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <copus/copus.h>
#include <copus/error.h>

int main(void)
{
	const char *name = copus_status_name(COPUS_EINVAL);

	printf("%s: %s\n", name, copus_strerror(COPUS_EINVAL));
	return strcmp(name, "COPUS_EINVAL") != 0;
}
C
${CC:-cc} $cflags "$tmp/job.c" -o "$tmp/job" $libs \
	-Wl,-rpath-link,"$libdir" 2> "$tmp/cc.log" ||
	{ cat "$tmp/cc.log"; fail "cc job.c \$(pkg-config --cflags --libs copus) failed"; }
# A sanitizer build's libraries need the sanitizer runtime loaded first.
if ldd "$libdir/libcopus.so" 2>/dev/null | grep -q libasan; then
	echo "linked; not run (libcopus is built with the sanitizers)"
	exit 0
fi
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/job") || fail "the job exited $?: $out"
[ "$out" = "COPUS_EINVAL: invalid argument" ] || fail "the job printed '$out'"
echo "ok: $n headers, $libs"
