#!/bin/sh
# contrib/gpu-check.sh as it runs on this machine: exit 0, only ok and skip
# lines; where this build found CUDA and NCCL, its own CUDA build of a make
# dist tarball is "ok". On a machine with a GPU that is the whole GPU check.
set -u
srcdir=${srcdir:-.}
# The script builds and checks its own make dist tarball, whatever this
# build's flags: the plain build runs it, a sanitizer build would only
# repeat the same minutes.
if ldd runtime/.libs/libcopus.so 2>/dev/null | grep -q 'libasan'; then
	echo "SKIP: a sanitizer build; contrib/gpu-check.sh builds its own tarball (the plain build runs it)"
	exit 77
fi
out=$(bash "$srcdir/contrib/gpu-check.sh" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "contrib/gpu-check.sh exited $rc"
printf '%s\n' "$out" | grep -q '^elapsed [0-9]*s: ' ||
	fail "contrib/gpu-check.sh printed no elapsed line"
bad=$(printf '%s\n' "$out" | grep -v -E '^(ok   |skip |elapsed )')
[ -z "$bad" ] || fail "lines that are not ok, skip or elapsed: $bad"
if grep -q '^#define HAVE_NCCL 1' copus_config.h 2>/dev/null; then
	printf '%s\n' "$out" | grep -q '^ok   build: libcopus with CUDA' ||
		fail "this build has CUDA and NCCL, but gpu-check.sh's build is not ok"
fi
exit 0
