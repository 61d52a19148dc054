#!/bin/sh
# The NCCL path (communicators, all-reduce, rebuild) where a GPU is present;
# skipped on machines without one or in builds without NCCL.
prog=./tests/test-runtime-nccl
[ -x "$prog" ] || { echo "SKIP: built without CUDA and NCCL"; exit 77; }
exec "$prog"
