#!/bin/sh
# The PyTorch adapter (contrib/pytorch) on CPU with gloo; see test_pytorch.py,
# test_pytorch_pipeline.py, test_pytorch_tensor.py, test_pytorch_merge.py,
# test_pytorch_resume.py, test_pytorch_examples.py (etc/pytorch's examples)
# and test_pytorch_exit.py.
# Debian's python3-torch is visible to /usr/bin/python3 only.
PYTHON=${COPUS_PYTHON:-/usr/bin/python3}
srcdir=${srcdir:-.}
lib=$(pwd)/runtime/.libs/libcopus.so

if ! "$PYTHON" -c 'import torch, torch.distributed' 2>/dev/null; then
	echo "SKIP: torch is not importable by $PYTHON (apt-get install python3-torch)"
	exit 77
fi
if [ ! -f "$lib" ]; then
	echo "SKIP: $lib not built (shared libraries disabled?)"
	exit 77
fi
# A sanitizer build of libcopus cannot be loaded into an uninstrumented Python.
if ldd "$lib" | grep -q 'libasan'; then
	echo "SKIP: libcopus is built with sanitizers; the adapter test needs a plain build"
	exit 77
fi
export COPUS_LIB=$lib
rc=0
"$PYTHON" "$srcdir/tests/test_pytorch.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_pipeline.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_pipeline_checks.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_tensor.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_merge.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_resume.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_examples.py" run || rc=1
"$PYTHON" "$srcdir/tests/test_pytorch_exit.py" run || rc=1
exit $rc
