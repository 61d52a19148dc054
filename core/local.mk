# Build rules of core/ (included by the top-level Makefile.am).
#
# libcopus-core: models, the predictor, the hint message, the noise
# estimators, the planner and the policies (core/policy/, one file each);
# pure C over plain structs, no Slurm, CUDA or I/O. The simulator, the plugin
# and the runtime all link it.

lib_LTLIBRARIES += core/libcopus-core.la
core_libcopus_core_la_SOURCES = \
	core/internal.h \
	core/error.c \
	core/model.c \
	core/estimate.c \
	core/fit.c \
	core/speedup.c \
	core/predict.c \
	core/history.c \
	core/hint.c \
	core/hint-model.c \
	core/hint-field.c \
	core/noise.c \
	core/policy.c \
	core/plan.c \
	core/planner.c \
	core/planner-cache.c \
	core/planner-fit.c \
	core/planner-gpus.c \
	core/heap.h \
	core/policy/ops.h \
	core/policy/place.h \
	core/policy/place.c \
	core/policy/round.h \
	core/policy/round.c \
	core/policy/fifo.c \
	core/policy/backfill.c \
	core/policy/tiresias.c \
	core/policy/optimus.c \
	core/policy/pollux.c \
	core/policy/sia.h \
	core/policy/sia.c \
	core/policy/copus.h \
	core/policy/copus.c \
	core/policy/copus-work.h \
	core/policy/copus-value.c \
	core/policy/copus-greedy.c \
	core/policy/copus-place.c
core_libcopus_core_la_CFLAGS = $(AM_CFLAGS) $(NLOPT_CFLAGS) $(JSONC_CFLAGS)
core_libcopus_core_la_LIBADD = $(NLOPT_LIBS) $(XGBOOST_LIBS) $(JSONC_LIBS) \
	$(GLPK_LIBS) -lm
core_libcopus_core_la_LDFLAGS = -version-info 0:0:0 -no-undefined

# ---------------------------------------------------------------------------
# Tests (CUnit) and benchmarks of the core
# ---------------------------------------------------------------------------
check_PROGRAMS += \
	tests/test-model \
	tests/test-estimate \
	tests/test-fit \
	tests/test-predict \
	tests/test-hint \
	tests/test-noise \
	tests/test-policy \
	tests/test-policy-place \
	tests/test-policy-backfill \
	tests/test-policy-copus \
	tests/test-policy-copus-place \
	tests/test-policy-copus-cells \
	tests/test-policy-exact \
	tests/test-policy-sia \
	tests/test-plan

tests_test_model_SOURCES = tests/test-model.c tests/harness.h
tests_test_model_CFLAGS = $(TEST_CFLAGS)
tests_test_model_LDADD = $(TEST_LIBS)

tests_test_estimate_SOURCES = tests/test-estimate.c tests/harness.h
tests_test_estimate_CFLAGS = $(TEST_CFLAGS)
tests_test_estimate_LDADD = $(TEST_LIBS)

tests_test_fit_SOURCES = tests/test-fit.c tests/harness.h
tests_test_fit_CFLAGS = $(TEST_CFLAGS)
tests_test_fit_LDADD = $(TEST_LIBS)

tests_test_predict_SOURCES = tests/test-predict.c tests/harness.h
tests_test_predict_CFLAGS = $(TEST_CFLAGS)
tests_test_predict_LDADD = $(TEST_LIBS)

tests_test_hint_SOURCES = tests/test-hint.c tests/harness.h
tests_test_hint_CFLAGS = $(TEST_CFLAGS)
tests_test_hint_LDADD = $(TEST_LIBS)

tests_test_noise_SOURCES = tests/test-noise.c tests/harness.h
tests_test_noise_CFLAGS = $(TEST_CFLAGS)
tests_test_noise_LDADD = $(TEST_LIBS)

tests_test_policy_SOURCES = tests/test-policy.c tests/harness.h
tests_test_policy_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_LDADD = $(TEST_LIBS)

tests_test_policy_place_SOURCES = tests/test-policy-place.c tests/harness.h
tests_test_policy_place_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_place_LDADD = $(TEST_LIBS)

tests_test_policy_backfill_SOURCES = tests/test-policy-backfill.c \
	tests/harness.h
tests_test_policy_backfill_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_backfill_LDADD = $(TEST_LIBS)

# The copus policy in three programs on one shared world (policy-world.h):
# which jobs run on how many GPUs, where they go, and jobs by their cells.
COPUS_POLICY_WORLD = tests/policy-world.c tests/policy-world.h tests/harness.h
tests_test_policy_copus_SOURCES = tests/test-policy-copus.c \
	$(COPUS_POLICY_WORLD)
tests_test_policy_copus_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_copus_LDADD = $(TEST_LIBS)
tests_test_policy_copus_place_SOURCES = tests/test-policy-copus-place.c \
	$(COPUS_POLICY_WORLD)
tests_test_policy_copus_place_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_copus_place_LDADD = $(TEST_LIBS)
tests_test_policy_copus_cells_SOURCES = tests/test-policy-copus-cells.c \
	$(COPUS_POLICY_WORLD)
tests_test_policy_copus_cells_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_copus_cells_LDADD = $(TEST_LIBS)

# The copus policy's greedy against the exact optimum (GLPK).
tests_test_policy_exact_SOURCES = tests/test-policy-exact.c tests/harness.h
tests_test_policy_exact_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_exact_LDADD = $(TEST_LIBS) $(GLPK_LIBS)

# The sia policy's integer program against enumeration, its limits and
# its fallback.
tests_test_policy_sia_SOURCES = tests/test-policy-sia.c tests/harness.h
tests_test_policy_sia_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_sia_LDADD = $(TEST_LIBS)

tests_test_plan_SOURCES = tests/test-plan.c tests/harness.h
tests_test_plan_CFLAGS = $(TEST_CFLAGS)
tests_test_plan_LDADD = $(TEST_LIBS)

# Benchmarks (not tests): the predictor, the policy's decision
# time, Pollux's search against a much longer annealing search.
noinst_PROGRAMS += tests/bench-predict tests/bench-policy \
	tests/bench-sim-search
tests_bench_policy_SOURCES = tests/bench-policy.c
tests_bench_policy_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/core
tests_bench_policy_LDADD = core/libcopus-core.la -lm
tests_bench_predict_SOURCES = tests/bench-predict.c
tests_bench_predict_LDADD = core/libcopus-core.la -lm
tests_bench_sim_search_SOURCES = tests/bench-sim-search.c
tests_bench_sim_search_LDADD = core/libcopus-core.la -lm

# The policy's synthetic instances (tests/bench-policy, tests/test-policy-exact).
EXTRA_DIST += tests/policy-gen.h

# The planner (core/planner.c, core/planner-cache.c, core/planner-fit.c).
check_PROGRAMS += tests/test-planner
tests_test_planner_SOURCES = tests/test-planner.c tests/harness.h
tests_test_planner_CFLAGS = $(TEST_CFLAGS)
tests_test_planner_LDADD = $(TEST_LIBS)

# The shared GPU constants (core/planner-gpus.c): defaults and their text.
check_PROGRAMS += tests/test-planner-gpus
tests_test_planner_gpus_SOURCES = tests/test-planner-gpus.c tests/harness.h
tests_test_planner_gpus_CFLAGS = $(TEST_CFLAGS)
tests_test_planner_gpus_LDADD = $(TEST_LIBS)

# Benchmark (not a test): one model x cell search and a memoised lookup.
noinst_PROGRAMS += tests/bench-planner
tests_bench_planner_SOURCES = tests/bench-planner.c
tests_bench_planner_LDADD = core/libcopus-core.la -lm
