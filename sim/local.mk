# Build rules of sim/ (included by the top-level Makefile.am).

# The policies live in the core: the simulator and the plugin call them.
copusinclude_HEADERS += include/copus/policy.h
core_libcopus_core_la_SOURCES += core/policy.c core/policy-internal.h

# The simulator's engine, shared by copus-sim and its tests.
noinst_LTLIBRARIES += sim/libsim.la
sim_libsim_la_SOURCES = sim/sim.h sim/csv.c sim/trace.c sim/engine.c
sim_libsim_la_CFLAGS = $(AM_CFLAGS)
sim_libsim_la_LIBADD = core/libcopus-core.la -lm

bin_PROGRAMS += sim/copus-sim
sim_copus_sim_SOURCES = sim/main.c
sim_copus_sim_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) -DGNUPLOT='"$(GNUPLOT)"'
sim_copus_sim_LDADD = sim/libsim.la core/libcopus-core.la $(JSONC_LIBS) -lm

dist_noinst_SCRIPTS += sim/fidelity.sh sim/ablation.sh

check_PROGRAMS += tests/test-policy tests/test-sim
tests_test_policy_SOURCES = tests/test-policy.c tests/harness.h
tests_test_policy_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_LDADD = $(TEST_LIBS)

tests_test_sim_SOURCES = tests/test-sim.c tests/harness.h
tests_test_sim_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/sim
tests_test_sim_LDADD = sim/libsim.la $(TEST_LIBS)

TESTS += tests/test-sim-cli.sh
EXTRA_DIST += tests/test-sim-cli.sh

# Pollux's search against a much longer annealing search (not a test).
noinst_PROGRAMS += tests/bench-sim-search
tests_bench_sim_search_SOURCES = tests/bench-sim-search.c
tests_bench_sim_search_LDADD = core/libcopus-core.la -lm

# The copus policy's greedy against the exact optimum (GLPK).
check_PROGRAMS += tests/test-policy-exact
tests_test_policy_exact_SOURCES = tests/test-policy-exact.c tests/harness.h
tests_test_policy_exact_CFLAGS = $(TEST_CFLAGS)
tests_test_policy_exact_LDADD = $(TEST_LIBS) $(GLPK_LIBS)
