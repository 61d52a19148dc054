# Build rules of sim/ (included by the top-level Makefile.am).

# The simulator's engine, shared by copus-sim and its tests.
noinst_LTLIBRARIES += sim/libsim.la
sim_libsim_la_SOURCES = sim/sim.h sim/csv.c sim/trace.c sim/engine.c \
	sim/engine-job.h sim/engine-job.c sim/engine-input.c \
	sim/engine-apply.h sim/engine-apply.c sim/engine-predict.h \
	sim/engine-predict.c sim/engine-round.h sim/engine-round.c \
	sim/arena.h sim/arena.c sim/arena-run.c sim/arena-summary.c \
	sim/plan-data.c sim/plan-data.h sim/plan-read.h sim/plan-parse.c \
	sim/plan-comm.c sim/plan-measured.c runtime/file.c runtime/file.h
sim_libsim_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
sim_libsim_la_LIBADD = core/libcopus-core.la $(JSONC_LIBS) -lm

bin_PROGRAMS += sim/copus-sim
# copus-sim's command line: main.c (options) and its parts (cli.h).
sim_copus_sim_SOURCES = sim/main.c sim/cli.h sim/main-arena.c \
	sim/main-workloads.c sim/main-run.c sim/main-history.c \
	sim/main-report.c
sim_copus_sim_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) -DGNUPLOT='"$(GNUPLOT)"'
sim_copus_sim_LDADD = sim/libsim.la core/libcopus-core.la $(JSONC_LIBS) -lm
dist_man_MANS += etc/copus-sim.1

dist_noinst_SCRIPTS += sim/fidelity.sh sim/fidelity-sia.sh sim/ablation.sh \
	sim/compare.sh sim/fidelity-arena.sh sim/history-split.sh \
	sim/solo-bound.sh

check_PROGRAMS += tests/test-sim tests/test-profiles tests/test-arena
tests_test_sim_SOURCES = tests/test-sim.c tests/harness.h
tests_test_sim_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/sim
tests_test_sim_LDADD = sim/libsim.la $(TEST_LIBS)

# Arena's world: the lookup rules and the readers.
tests_test_arena_SOURCES = tests/test-arena.c tests/harness.h
tests_test_arena_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/sim
tests_test_arena_LDADD = sim/libsim.la $(TEST_LIBS)

TESTS += tests/test-sim-cli.sh tests/test-sim-arena.sh
EXTRA_DIST += tests/test-sim-cli.sh tests/test-sim-arena.sh

# The measured job profiles against the fitted models.
tests_test_profiles_SOURCES = tests/test-profiles.c tests/harness.h \
	tests/profiles.c tests/profiles.h
tests_test_profiles_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/sim
tests_test_profiles_LDADD = sim/libsim.la $(TEST_LIBS)

noinst_PROGRAMS += tests/bench-model
tests_bench_model_SOURCES = tests/bench-model.c tests/profiles.c \
	tests/profiles.h
tests_bench_model_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/core -I$(top_srcdir)/sim
tests_bench_model_LDADD = sim/libsim.la core/libcopus-core.la -lm

# ---------------------------------------------------------------------------
# copus-plan: the planner from the command line (predict, show, evaluate).
# ---------------------------------------------------------------------------
bin_PROGRAMS += sim/copus-plan
sim_copus_plan_SOURCES = sim/copus-plan.c
sim_copus_plan_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
sim_copus_plan_LDADD = sim/libsim.la core/libcopus-core.la $(JSONC_LIBS) -lm
dist_man_MANS += etc/copus-plan.1

TESTS += tests/test-copus-plan.sh
EXTRA_DIST += tests/test-copus-plan.sh
