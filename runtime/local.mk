# Build rules of runtime/ (included by the top-level Makefile.am).

# ---------------------------------------------------------------------------
# libcopus: the runtime a training job links
# ---------------------------------------------------------------------------
lib_LTLIBRARIES += runtime/libcopus.la
runtime_libcopus_la_SOURCES = \
	runtime/internal.h \
	runtime/common.c \
	runtime/runtime.c \
	runtime/planned.c \
	runtime/measure.c \
	runtime/publish.c \
	runtime/checkpoint.c \
	runtime/checkpoint-format.c \
	runtime/checkpoint-reshard.c \
	runtime/checkpoint-check.c \
	runtime/rescale.c \
	runtime/bootstrap.c \
	runtime/file.c runtime/file.h
runtime_libcopus_la_CPPFLAGS = $(AM_CPPFLAGS) $(PMIX_CFLAGS)
runtime_libcopus_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(ZLIB_CFLAGS) -pthread
runtime_libcopus_la_LIBADD = core/libcopus-core.la $(JSONC_LIBS) $(ZLIB_LIBS) \
	$(PMIX_LIBS) -lpthread -lm
runtime_libcopus_la_LDFLAGS = -version-info 0:0:0 -no-undefined
if HAVE_NCCL
runtime_libcopus_la_SOURCES += runtime/nccl.c
runtime_libcopus_la_CPPFLAGS += $(CUDA_CPPFLAGS)
runtime_libcopus_la_LIBADD += $(CUDA_LIBS)
endif
EXTRA_DIST += runtime/nccl.c

RUNTIME_TEST_LIBS = runtime/libcopus.la core/libcopus-core.la \
	$(CUNIT_LIBS) -lm

check_PROGRAMS += tests/test-runtime
tests_test_runtime_SOURCES = tests/test-runtime.c tests/test-runtime.h \
	tests/test-runtime-planned.c tests/test-runtime-hints.c \
	tests/test-runtime-ranks.c tests/test-runtime-rescale.c \
	tests/test-runtime-manifest.c tests/test-runtime-restore.c \
	tests/harness.h
tests_test_runtime_CFLAGS = $(TEST_CFLAGS)
tests_test_runtime_LDADD = $(RUNTIME_TEST_LIBS) $(ZLIB_LIBS)
tests_test_runtime_CPPFLAGS = $(AM_CPPFLAGS) $(ZLIB_CFLAGS)

# libcopus when memory runs out (replaces malloc; skips under ASan).
check_PROGRAMS += tests/test-runtime-oom
tests_test_runtime_oom_SOURCES = tests/test-runtime-oom.c tests/harness.h
tests_test_runtime_oom_CFLAGS = $(TEST_CFLAGS)
tests_test_runtime_oom_LDADD = $(RUNTIME_TEST_LIBS)

noinst_PROGRAMS += tests/bench-runtime
tests_bench_runtime_SOURCES = tests/bench-runtime.c
tests_bench_runtime_LDADD = runtime/libcopus.la core/libcopus-core.la -lm

noinst_PROGRAMS += tests/bench-runtime-reshard
tests_bench_runtime_reshard_SOURCES = tests/bench-runtime-reshard.c
tests_bench_runtime_reshard_LDADD = runtime/libcopus.la core/libcopus-core.la -lm

# The PyTorch adapter and its test (skipped when torch is not importable).
TESTS += tests/test-pytorch.sh
EXTRA_DIST += tests/test-pytorch.sh tests/test_pytorch.py \
	tests/test_pytorch_pipeline.py tests/test_pytorch_pipeline_checks.py \
	tests/test_pytorch_tensor.py \
	tests/test_pytorch_merge.py tests/test_pytorch_resume.py \
	tests/test_pytorch_examples.py tests/test_pytorch_exit.py \
	contrib/pytorch/copus_torch.py contrib/pytorch/copus_tensor.py \
	contrib/pytorch/copus_lib.py contrib/pytorch/copus_pipeline.py \
	contrib/pytorch/copus_merge.py contrib/pytorch/copus_launch.py

# A stand-in training job for the loopback-cluster test.
noinst_PROGRAMS += tests/test-runtime-job
tests_test_runtime_job_SOURCES = tests/test-runtime-job.c
tests_test_runtime_job_CPPFLAGS = $(AM_CPPFLAGS) $(PMIX_CFLAGS)
tests_test_runtime_job_LDADD = runtime/libcopus.la core/libcopus-core.la \
	$(PMIX_LIBS) -lm
TESTS += tests/test-runtime-slurm.sh
EXTRA_DIST += tests/test-runtime-slurm.sh
EXTRA_DIST += tests/bench-runtime-pytorch.py tests/bench-runtime-agree.py

# The GPU path: built only with NCCL, skipped without a GPU.
TESTS += tests/test-runtime-gpu.sh
EXTRA_DIST += tests/test-runtime-gpu.sh tests/test-runtime-nccl.c
if HAVE_NCCL
noinst_PROGRAMS += tests/test-runtime-nccl
tests_test_runtime_nccl_SOURCES = tests/test-runtime-nccl.c
tests_test_runtime_nccl_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_runtime_nccl_LDADD = runtime/libcopus.la core/libcopus-core.la \
	$(CUDA_LIBS) -lm
endif
# The in-place shrink of four ranks to two (skipped below four GPUs).
TESTS += tests/test-runtime-gpu-shrink.sh
EXTRA_DIST += tests/test-runtime-gpu-shrink.sh tests/test-runtime-nccl-shrink.c
if HAVE_NCCL
noinst_PROGRAMS += tests/test-runtime-nccl-shrink
tests_test_runtime_nccl_shrink_SOURCES = tests/test-runtime-nccl-shrink.c
tests_test_runtime_nccl_shrink_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_runtime_nccl_shrink_LDADD = runtime/libcopus.la \
	core/libcopus-core.la $(CUDA_LIBS) -lm
endif
EXTRA_DIST += tests/bench-runtime-restart.sh

# A node goes down under sched/copus (root only).
TESTS += tests/test-slurm-node-down.sh
EXTRA_DIST += tests/test-slurm-node-down.sh contrib/slurm-demo.sh
