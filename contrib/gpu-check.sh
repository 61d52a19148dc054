#!/usr/bin/env bash
# copus on a machine with one NVIDIA GPU, CUDA and PyTorch, no network:
#
#   contrib/gpu-check.sh [--tarball copus-X.tar.gz] [--steps N]
#                        [--tolerance PCT] [--jobs N] [--keep]
#
# builds libcopus with CUDA and NCCL from a `make dist` tarball (made here
# from the source tree this script lives in unless --tarball names one),
# out of tree in a temporary directory, with NCCL from the system or else
# from PyTorch's NCCL package; runs the runtime's GPU tests; all-reduces
# over a one-rank NCCL communicator of torch.distributed; and times
# training steps of a small transformer through copus_torch's Trainer,
# comparing the step time libcopus measured with CUDA events around the
# same steps (contrib/gpu-check.py holds the Python). The GPU, driver,
# CUDA, torch and NCCL versions come first.
#
# One line per check: "ok   ...", "FAIL ..." or "skip ...", with its
# figures, then the elapsed seconds. Exit 0 when every check passed or was
# skipped, 1 on any failure (the logs are then kept and named), 2 on a
# wrong argument. Without a GPU the checks on it are skipped and the rest
# (the tarball, the CUDA build) still runs. Every step runs under timeout,
# the whole within 8 minutes.
#
# The machine needs copus's own build dependencies too (configure names a
# missing one), and autoreconf with libtool to make the tarball from a git
# checkout; --tarball needs neither of the latter.
#
# Environment: PYTHON (default: python3, else /usr/bin/python3, the first
# that imports torch),
# CUDA_HOME (default: nvcc's installation, else /usr/local/cuda).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
# The Python that imports torch: $PYTHON, else python3, else Debian's.
if [ -z "${PYTHON:-}" ]; then
	PYTHON=python3
	for p in python3 /usr/bin/python3; do
		if timeout 60 "$p" -c 'import torch' >/dev/null 2>&1; then
			PYTHON=$p
			break
		fi
	done
fi
tarball=
steps=50
tolerance=10
jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 16 ] && jobs=16
keep=0
# The whole run's limit, s; the steps' own limits are below it.
budget=470

usage() { sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--tarball) tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	--tolerance) tolerance=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	*) echo "gpu-check.sh: unknown argument $1" >&2; usage ;;
	esac
done

start=$(date +%s)
# The builds here are this script's own, not part of a make that runs it.
unset MAKEFLAGS MFLAGS MAKELEVEL
deadline=$((start + budget))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/copus-gpu-check.XXXXXX") || exit 1
logs=$tmp/logs
mkdir -p "$logs"

n_ok=0 n_fail=0 n_skip=0
ok() { printf 'ok   %s\n' "$*"; n_ok=$((n_ok + 1)); }
fail() { printf 'FAIL %s\n' "$*"; n_fail=$((n_fail + 1)); }
skip() { printf 'skip %s\n' "$*"; n_skip=$((n_skip + 1)); }

# run LIMIT LOG COMMAND...: COMMAND under timeout, within LIMIT seconds and
# what is left of the budget, its output in LOG. 124: it timed out; 125:
# no time was left to start it.
run() {
	local limit=$1 log=$2 left
	shift 2
	left=$((deadline - $(date +%s)))
	[ "$left" -lt "$limit" ] && limit=$left
	if [ "$limit" -lt 5 ]; then
		echo "the ${budget}s budget is spent" >"$log"
		return 125
	fi
	echo "$limit" >"$log.limit"
	timeout -k 10 "$limit" "$@" >"$log" 2>&1
}

# why RC LOG: the reason a step failed, in a few words.
why() {
	local rc=$1 log=$2 line
	case $rc in
	124|137) echo "timed out after $(cat "$log.limit")s (log: $log)"; return ;;
	125) echo "not started: the ${budget}s budget is spent"; return ;;
	esac
	line=$(grep -E -m1 'error:|Error|ERROR|FAIL|cannot|not found' "$log")
	[ -n "$line" ] || line=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
	echo "exit $rc: ${line:0:240} (log: $log)"
}

since() { echo $(($(date +%s) - $1)); }

# --- what the machine has ----------------------------------------------------
gpus=0 gpu_name='' driver='' driver_cuda='' smi_why="nvidia-smi not found"
if command -v nvidia-smi >/dev/null 2>&1; then
	if run 30 "$logs/nvidia-smi.log" nvidia-smi -L; then
		gpus=$(grep -c '^GPU ' "$logs/nvidia-smi.log")
		gpu_name=$(sed -n '1s/^GPU 0: \(.*\) (UUID.*/\1/p' "$logs/nvidia-smi.log")
		driver=$(timeout 30 nvidia-smi --query-gpu=driver_version \
			--format=csv,noheader 2>/dev/null | head -n 1)
		driver_cuda=$(timeout 30 nvidia-smi 2>/dev/null |
			sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
	else
		smi_why="nvidia-smi -L: $(why $? "$logs/nvidia-smi.log")"
	fi
fi

cuda=${CUDA_HOME:-}
if [ -z "$cuda" ] && command -v nvcc >/dev/null 2>&1; then
	cuda=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
fi
cuda=${cuda:-/usr/local/cuda}
nvcc_version=
if [ -x "$cuda/bin/nvcc" ]; then
	nvcc_version=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
fi

torch='' torch_cuda='' torch_nccl='' torch_gpus=0 torch_why='' nccl_pkg=''
if run 90 "$logs/torch-info.log" "$PYTHON" "$here/gpu-check.py" info; then
	val() { sed -n "s/^$1=//p" "$logs/torch-info.log" | head -n 1; }
	torch=$(val torch)
	torch_cuda=$(val torch_cuda)
	torch_nccl=$(val torch_nccl)
	torch_gpus=$(val devices)
	torch_why=$(val torch_error)
	nccl_pkg=$(val nccl_dir)
	[ -z "$gpu_name" ] && gpu_name=$(val device)
else
	torch_why=$(why $? "$logs/torch-info.log")
fi
torch_gpus=${torch_gpus:-0}
# A container may see the GPU without nvidia-smi.
[ "$gpus" -eq 0 ] && gpus=$torch_gpus

# On a machine with a GPU a missing piece is a failure; without one, the
# reason the cheap parts are skipped.
missing() { if [ "$gpus" -gt 0 ]; then fail "$@"; else skip "$@"; fi; }

if [ "$gpus" -gt 0 ]; then
	ok "gpu: $gpus x ${gpu_name:-?}, driver ${driver:-?} (CUDA ${driver_cuda:-?} at most)"
else
	skip "gpu: none ($smi_why; torch sees none): the checks on a GPU are skipped"
fi
if [ -n "$nvcc_version" ] && [ -f "$cuda/include/cuda_runtime.h" ]; then
	ok "cuda: nvcc $nvcc_version in $cuda"
else
	missing "cuda: no CUDA toolkit in $cuda (no bin/nvcc or include/cuda_runtime.h; set CUDA_HOME)"
fi
torch_usable=0
if [ -z "$torch" ]; then
	skip "torch: not importable by $PYTHON (${torch_why:-?}): the PyTorch checks are skipped"
elif [ "$gpus" -gt 0 ] && [ "$torch_gpus" -eq 0 ]; then
	fail "torch: $torch (CUDA ${torch_cuda:-none}) sees no GPU: a CPU build, or a driver too old for its CUDA"
else
	torch_usable=$((torch_gpus > 0))
	ok "torch: $torch (CUDA ${torch_cuda:-none}, NCCL ${torch_nccl:-none}), $torch_gpus GPU(s) visible"
fi

# NCCL: the system's, else PyTorch's package (include/, lib/libnccl.so.2),
# put beside CUDA in one prefix, since configure takes one for both.
nccl_h='' nccl_from='' with_cuda=$cuda
if [ -f "$cuda/include/nccl.h" ]; then
	nccl_h=$cuda/include/nccl.h nccl_from="CUDA's $cuda"
elif [ -f /usr/include/nccl.h ]; then
	nccl_h=/usr/include/nccl.h nccl_from="the system's /usr/include"
elif [ -n "$nccl_pkg" ] && [ -f "$nccl_pkg/include/nccl.h" ]; then
	nccl_h=$nccl_pkg/include/nccl.h nccl_from="PyTorch's package $nccl_pkg"
	with_cuda=$tmp/cuda-nccl
	mkdir -p "$with_cuda/include" "$with_cuda/lib64"
	ln -s "$cuda"/include/* "$with_cuda/include/" 2>/dev/null
	ln -s "$cuda"/lib64/* "$with_cuda/lib64/" 2>/dev/null
	ln -sfn "$nccl_pkg"/include/* "$with_cuda/include/"
	ln -sf "$nccl_pkg/lib/libnccl.so.2" "$with_cuda/lib64/libnccl.so.2"
	ln -sf "$nccl_pkg/lib/libnccl.so.2" "$with_cuda/lib64/libnccl.so"
fi
nccl_version=
if [ -n "$nccl_h" ]; then
	nccl_version=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$nccl_h" |
		head -n 3 | paste -sd.)
	ok "nccl: ${nccl_version:-?} from $nccl_from"
else
	missing "nccl: no nccl.h in $cuda/include, /usr/include or PyTorch's NCCL package (pip's nvidia-nccl-cu*)"
fi

# --- the tarball ----------------------------------------------------------------
t0=$(date +%s)
if [ -n "$tarball" ]; then
	if [ -f "$tarball" ]; then
		ok "tarball: $tarball (given)"
	else
		fail "tarball: $tarball does not exist"
		tarball=
	fi
else
	mkdir -p "$tmp/dist"
	# A git checkout: its tracked files and new ones not ignored, copied
	# and bootstrapped. An unpacked tarball: configured where it is.
	if git -C "$src" ls-files --error-unmatch configure.ac >/dev/null 2>&1; then
		mkdir -p "$tmp/tree"
		(cd "$src" && git ls-files -co --exclude-standard -z |
			tar -cf - --null -T - 2>/dev/null) | tar -xf - -C "$tmp/tree"
		tree=$tmp/tree
	else
		tree=$src
	fi
	step="cd '$tree' && { [ -x configure ] || autoreconf -fi; } &&
		cd '$tmp/dist' && '$tree/configure' --without-cuda --without-slurm-src &&
		make dist"
	if run 180 "$logs/dist.log" bash -c "$step"; then
		tarball=$(ls "$tmp"/dist/copus-*.tar.gz | head -n 1)
		ok "tarball: $(basename "$tarball") by make dist of $src ($(since "$t0")s)"
	else
		fail "tarball: make dist of $src: $(why $? "$logs/dist.log")"
	fi
fi

# --- libcopus with CUDA and NCCL, out of tree ----------------------------------
built=0 build=$tmp/build srcdir=''
if [ -z "$tarball" ]; then
	fail "build: no tarball to build"
elif [ -z "$nvcc_version" ] || [ -z "$nccl_h" ]; then
	missing "build: libcopus with CUDA and NCCL needs both (above)"
else
	t0=$(date +%s)
	mkdir -p "$tmp/unpacked" "$build"
	tar -xzf "$tarball" -C "$tmp/unpacked"
	srcdir=$(ls -d "$tmp"/unpacked/copus-* | head -n 1)
	# Only the runtime and its GPU tests: the Slurm plugin needs no GPU.
	step="cd '$build' && '$srcdir/configure' --with-cuda='$with_cuda' --without-slurm-src &&
		grep -q '^#define HAVE_NCCL 1' copus_config.h &&
		make -j$jobs runtime/libcopus.la tests/test-runtime-nccl tests/test-runtime-nccl-shrink"
	if run 300 "$logs/build.log" bash -c "$step"; then
		built=1
		links=$(ldd "$build/runtime/.libs/libcopus.so.0" |
			awk '/libnccl|libcudart/ {print $3}' | xargs -r readlink -f | paste -sd' ')
		ok "build: libcopus with CUDA ${nvcc_version} and NCCL ${nccl_version} from $(basename "$tarball"), out of tree ($(since "$t0")s); it links $links"
	else
		rc=$?
		if [ "$rc" -eq 1 ] && grep -q 'CUDA + NCCL: *no' "$logs/build.log"; then
			fail "build: configure found no CUDA and NCCL in $with_cuda (log: $logs/build.log, $build/config.log)"
		else
			fail "build: $(why "$rc" "$logs/build.log")"
		fi
	fi
fi

# --- the runtime's GPU tests ------------------------------------------------------
# Run even without a GPU: they then skip themselves, which shows that the
# CUDA build's programs load.
for t in test-runtime-gpu test-runtime-gpu-shrink; do
	if [ "$built" -eq 0 ]; then
		missing "runtime test $t: libcopus was not built"
		continue
	fi
	t0=$(date +%s)
	run 120 "$logs/$t.log" bash -c "cd '$build' && sh '$srcdir/tests/$t.sh'"
	rc=$?
	said=$(grep -v '^[[:space:]]*$' "$logs/$t.log" | tail -n 1)
	case $rc in
	0)
		n=$(grep -c 'all-reduce ok' "$logs/$t.log")
		ok "runtime test $t: $said ($n NCCL all-reduces through libcopus's communicators checked, $(since "$t0")s)" ;;
	77)
		# A GPU that the test does not see is a failure, unless the test
		# wants more GPUs than there are.
		if [ "$gpus" -gt 0 ] && ! grep -q 'needs [0-9]' "$logs/$t.log"; then
			fail "runtime test $t: $said, with $gpus GPU(s) present (CUDA $nvcc_version with a driver for CUDA ${driver_cuda:-?}?)"
		else
			skip "runtime test $t: $said"
		fi ;;
	*) fail "runtime test $t: $(why "$rc" "$logs/$t.log")" ;;
	esac
done

# --- PyTorch on the GPU ---------------------------------------------------------
# py NAME LIMIT ARGS...: gpu-check.py's one line, or why it gave none.
py() {
	local name=$1 limit=$2 line rc
	shift 2
	run "$limit" "$logs/$name.log" env COPUS_LIB="$build/runtime/.libs/libcopus.so.0" \
		"$PYTHON" "$here/gpu-check.py" "$@"
	rc=$?
	line=$(grep -E '^(ok   |FAIL )' "$logs/$name.log" | tail -n 1)
	case $rc:$line in
	0:ok*) ok "${line#ok   }" ;;
	*:FAIL*) fail "${line#FAIL }" ;;
	*) fail "$name: $(why "$rc" "$logs/$name.log")" ;;
	esac
}

if [ "$gpus" -eq 0 ]; then
	skip "torch.distributed NCCL all-reduce: no GPU"
elif [ "$torch_usable" -eq 0 ]; then
	skip "torch.distributed NCCL all-reduce: no torch that sees the GPU"
else
	py torch-allreduce 90 allreduce
fi

if [ "$gpus" -eq 0 ]; then
	skip "adapter step time: no GPU"
elif [ "$torch_usable" -eq 0 ]; then
	skip "adapter step time: no torch that sees the GPU"
elif [ "$built" -eq 0 ]; then
	fail "adapter step time: libcopus was not built"
else
	py adapter-timing 240 timing "$srcdir/contrib/pytorch" --steps "$steps" \
		--tolerance "$tolerance"
fi

# --- the end --------------------------------------------------------------------
summary="$n_ok ok, $n_fail FAIL, $n_skip skip"
if [ "$n_fail" -gt 0 ] || [ "$keep" -eq 1 ]; then
	echo "elapsed $(since "$start")s: $summary; logs in $logs"
else
	rm -rf "$tmp"
	echo "elapsed $(since "$start")s: $summary"
fi
[ "$n_fail" -eq 0 ]
