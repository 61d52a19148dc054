#!/bin/bash
# copus's Debian packages, installed on a fresh root of a Debian suite, run
# the demo cluster from the installed files alone.
#
#   tests/test-deb.sh SUITE DEB_DIR [WORK_DIR]     (as root)
#
# Makes a fresh root of SUITE (contrib/slurm-root.sh base), installs the
# packages of DEB_DIR there with apt (which pulls in the suite's Slurm), and
# checks, inside the root with nothing of the source or build tree:
# copus-demo (DEMO_SECONDS, default 40) runs with sched/copus loaded by
# slurmctld and at least one elastic job given GPUs; copusctl answers;
# pkg-config finds copus and a small C program builds and runs against
# libcopus; the PyTorch adapter is installed and finds libcopus.so.0 (with
# a stand-in for torch, which is too large to install here). Exits 77
# ("skipped") when the suite cannot be fetched. The root lives in WORK_DIR
# (default: a new directory under /tmp), which is removed at the end unless
# KEEP_TMP is set.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
skip() { echo "skipped ($*)"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: tests/test-deb.sh SUITE DEB_DIR [WORK_DIR]" >&2; exit 2; }
suite=$1
debdir=$(cd "$2" && pwd) || fail "no directory $2"
[ "$(id -u)" -eq 0 ] || skip "needs root: debootstrap, chroot and a Slurm cluster"
command -v debootstrap >/dev/null || skip "debootstrap not found (install the Debian package debootstrap)"
debs=()
for f in "$debdir"/*.deb; do
	case $f in *-dbgsym_*) ;; *) [ -f "$f" ] && debs+=("$f") ;; esac
done
[ ${#debs[@]} -gt 0 ] || fail "no .deb files in $debdir (contrib/deb.sh BUILD_DIR makes them)"
demo_seconds=${DEMO_SECONDS:-40}

made_work="" sys_bound=""
if [ $# -eq 3 ]; then
	work=$3
	mkdir -p "$work"
	work=$(cd "$work" && pwd)
else
	work=$(mktemp -d /tmp/copus-test-deb.XXXXXX)
	made_work=1
fi
root=$work/root
# A copy: bash reads a script as it runs it, and this run should not see
# an edit of the source tree's.
slurm_root=$work/slurm-root.sh
cp "$top/contrib/slurm-root.sh" "$slurm_root"

# Processes still running inside the root (a daemon the demo left behind):
# only those, each by its PID.
stop_root_processes() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] || continue
		echo "test-deb: stopping ${p#/proc/} ($(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)), still running in the root" >&2
		kill -KILL "${p#/proc/}" 2>/dev/null || true
	done
}

cleanup() {
	stop_root_processes
	[ -z "$sys_bound" ] || umount -R "$root/sys" 2>/dev/null || umount -R -l "$root/sys" 2>/dev/null || true
	if [ -n "${KEEP_TMP:-}" ]; then
		echo "test-deb: kept $work"
		return
	fi
	# Never into a file system still mounted in the root.
	if grep -qF " $root/" /proc/mounts; then
		echo "test-deb: $root still has mounts; left in place" >&2
		return
	fi
	rm -rf --one-file-system "$root" "$root".*.log "$slurm_root"
	[ -z "$made_work" ] || rm -rf --one-file-system "$work"
}
trap cleanup EXIT

start=$SECONDS
echo "== a fresh $suite root in $root"
rc=0
"$slurm_root" base "$suite" "$root" || rc=$?
[ "$rc" -ne 3 ] || skip "the $suite packages cannot be fetched"
[ "$rc" -eq 0 ] || fail "contrib/slurm-root.sh base $suite failed"

mkdir -p "$root/root/debs"
cp "${debs[@]}" "$root/root/debs/"
# The daemons' packages must not start services in the root.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"

# What runs inside the root: the checks, each printing "ok: ..." or
# "FAIL: ...".
cat >"$root/root/check.sh" <<CHECK
#!/bin/bash
set -u
export DEBIAN_FRONTEND=noninteractive
failed=0
ok() { echo "ok: \$*"; }
bad() { echo "FAIL: \$*"; failed=1; }

echo "== apt-get install the packages (and $suite's Slurm)"
apt-get update >/root/apt.log 2>&1 || { tail -n 5 /root/apt.log; echo "FAIL: apt-get update"; exit 3; }
cd /root/debs
if ! apt-get install ./*.deb gcc libc6-dev pkg-config >>/root/apt.log 2>&1; then
	tail -n 20 /root/apt.log
	echo "FAIL: apt-get install of the packages"
	exit 1
fi
cd /root
echo "   Slurm \$(dpkg-query -W -f='\${Version}' slurmctld), copus \$(dpkg-query -W -f='\${Version}' copus-tools)"

echo "== libcopus-dev: pkg-config and a C program"
if flags=\$(pkg-config --cflags --libs copus); then
	ok "pkg-config --cflags --libs copus: \$flags"
else
	bad "pkg-config does not know copus"
fi
cat >/root/job.c <<'C'
#include <stdio.h>
#include <copus/copus.h>

int main(void)
{
	copus_config cfg;

	if (copus_config_init(&cfg, sizeof cfg) != COPUS_OK)
		return 1;
	printf("copus_strerror(COPUS_OK): %s\n", copus_strerror(COPUS_OK));
	return 0;
}
C
if gcc -o /root/job /root/job.c \$(pkg-config --cflags --libs copus) && /root/job; then
	ok "a C program builds, links and runs against libcopus"
else
	bad "a C program does not build or run against libcopus"
fi

echo "== python3-copus: the adapter finds libcopus.so.0"
# torch is too large to install here: a stand-in that copus_torch imports,
# whose every attribute (torch.float32, ...) is a placeholder.
mkdir -p /root/stub/torch
printf 'def __getattr__(name):\n    return name\n' >/root/stub/torch/__init__.py
cp /root/stub/torch/__init__.py /root/stub/torch/distributed.py
if out=\$(PYTHONPATH=/root/stub python3 -c '
import copus_torch
assert copus_torch.__file__.startswith("/usr/lib/python3/dist-packages/"), copus_torch.__file__
lib = copus_torch.library()
print(copus_torch.__file__, lib._name)' 2>&1); then
	ok "import copus_torch, library(): \$out"
else
	bad "copus_torch does not load libcopus: \$out"
fi
if out=\$(python3 -c 'import ctypes, ctypes.util; n = ctypes.util.find_library("copus"); ctypes.CDLL(n); print(n)' 2>&1) &&
	[ "\$out" = libcopus.so.0 ]; then
	ok "ctypes.util.find_library(\"copus\"): \$out"
else
	bad "ctypes.util.find_library(\"copus\") gives '\$out', not libcopus.so.0"
fi

echo "== copus-demo (DEMO_SECONDS=$demo_seconds)"
DEMO_SECONDS=$demo_seconds copus-demo /root/demo >/root/demo.log 2>&1
rc=\$?
sed 's/^/   | /' /root/demo.log | tail -n 40
[ \$rc -eq 0 ] && ok "copus-demo exited 0" || bad "copus-demo exited \$rc"
log=/root/demo/cluster/log/slurmctld.log
if grep -q 'sched/copus: loaded' "\$log" 2>/dev/null; then
	ok "slurmctld loaded sched/copus"
else
	bad "no 'sched/copus: loaded' in \$log"
fi
grep -q '^SchedulerType=sched/copus' /root/demo/cluster/etc/slurm.conf 2>/dev/null ||
	bad "the demo's slurm.conf does not name sched/copus"
# timeline.csv: time_s,job,name,state,gpus,...; the rigid jobs are rigid-*.
elastic=\$(awk -F, 'NR > 1 && \$3 !~ /^rigid/ && \$5 > 0 { print \$3 }' /root/demo/timeline.csv 2>/dev/null | sort -u | tr '\n' ' ')
if [ -n "\$elastic" ]; then
	ok "elastic jobs given GPUs: \$elastic"
else
	bad "no elastic job ran on GPUs (timeline.csv)"
fi
done=\$(grep -l '^done' /root/demo/logs/*.out 2>/dev/null | wc -l)
echo "   jobs done: \$done"
if grep -q '^copusctl status:' /root/demo.log && [ -f /root/demo/cluster/state/copus_status ]; then
	ok "copusctl status showed the plugin's rounds"
else
	bad "copusctl status showed nothing"
fi
exit \$failed
CHECK

# slurmd needs the cgroup file systems mounted under /sys, which a plain
# bind of /sys leaves out: /sys with its submounts, bound before
# slurm-root.sh run (which then leaves a mounted /sys alone), and none of
# the root's mounts seen outside it.
mkdir -p "$root/sys"
mount --rbind /sys "$root/sys"
sys_bound=1
mount --make-rslave "$root/sys"

echo "== checks inside the root"
rc=0
"$slurm_root" run "$root" -- bash /root/check.sh || rc=$?
stop_root_processes
[ "$rc" -ne 3 ] || skip "the $suite package lists cannot be fetched"
echo "== $((SECONDS - start))s"
[ "$rc" -eq 0 ] || fail "the packages failed on $suite (root: $root; KEEP_TMP=1 keeps it)"
echo "PASS: the packages install and run on $suite"
