#!/bin/sh
# copus_comms_shrink of four ranks to two where four GPUs are present;
# skipped on machines with fewer or in builds without NCCL.
prog=./tests/test-runtime-nccl-shrink
[ -x "$prog" ] || { echo "SKIP: built without CUDA and NCCL"; exit 77; }
exec "$prog"
