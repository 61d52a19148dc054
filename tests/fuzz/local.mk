# Build rules of tests/fuzz/ (included by the top-level Makefile.am).
#
# One fuzz target per parser of untrusted input (tests/fuzz/fuzz-<name>.c).
# tests/fuzz/run.sh builds them with clang's libFuzzer and the sanitizers
# and fuzzes them; here each is linked with replay.c instead, into
# tests/fuzz/replay-<name>, a test that runs the target's seed corpus
# tests/fuzz/corpus/<name>/ (compiled in as FUZZ_CORPUS). Every input that
# once broke a parser stays in its corpus, so make check keeps the fix.
# "make check-fuzz" runs these tests alone.

FUZZ_REPLAY = \
	tests/fuzz/replay-hint \
	tests/fuzz/replay-planner-gpus \
	tests/fuzz/replay-history \
	tests/fuzz/replay-params \
	tests/fuzz/replay-state \
	tests/fuzz/replay-elastic \
	tests/fuzz/replay-types \
	tests/fuzz/replay-csv \
	tests/fuzz/replay-workload \
	tests/fuzz/replay-profile \
	tests/fuzz/replay-manifest \
	tests/fuzz/replay-plan-query \
	tests/fuzz/replay-plan-prof \
	tests/fuzz/replay-plan-data \
	tests/fuzz/replay-arena-trace \
	tests/fuzz/replay-arena-spec
check_PROGRAMS += $(FUZZ_REPLAY)

FUZZ_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h
FUZZ_CORPUS_DIR = $(abs_top_srcdir)/tests/fuzz/corpus

tests_fuzz_replay_hint_SOURCES = tests/fuzz/fuzz-hint.c $(FUZZ_SOURCES)
tests_fuzz_replay_hint_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/hint"'
tests_fuzz_replay_hint_LDADD = core/libcopus-core.la -lm

tests_fuzz_replay_planner_gpus_SOURCES = tests/fuzz/fuzz-planner-gpus.c \
	$(FUZZ_SOURCES)
tests_fuzz_replay_planner_gpus_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/planner-gpus"'
tests_fuzz_replay_planner_gpus_LDADD = core/libcopus-core.la -lm

tests_fuzz_replay_history_SOURCES = tests/fuzz/fuzz-history.c $(FUZZ_SOURCES)
tests_fuzz_replay_history_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/history"'
tests_fuzz_replay_history_LDADD = core/libcopus-core.la -lm

# The plugin's Slurm-free parsers, compiled in as test-plugin-sched does.
tests_fuzz_replay_params_SOURCES = tests/fuzz/fuzz-params.c $(FUZZ_SOURCES) \
	plugin/params.c plugin/params.h
tests_fuzz_replay_params_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/params"'
tests_fuzz_replay_params_LDADD = -lm

tests_fuzz_replay_state_SOURCES = tests/fuzz/fuzz-state.c $(FUZZ_SOURCES) \
	plugin/statefmt.c plugin/statefmt.h plugin/memo.h plugin/options.h
tests_fuzz_replay_state_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/state"'
tests_fuzz_replay_state_LDADD = -lm

tests_fuzz_replay_elastic_SOURCES = tests/fuzz/fuzz-elastic.c \
	$(FUZZ_SOURCES) plugin/options.h
tests_fuzz_replay_elastic_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/elastic"'

tests_fuzz_replay_types_SOURCES = tests/fuzz/fuzz-types.c $(FUZZ_SOURCES) \
	plugin/options.h
tests_fuzz_replay_types_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugin \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/types"'

tests_fuzz_replay_csv_SOURCES = tests/fuzz/fuzz-csv.c $(FUZZ_SOURCES)
tests_fuzz_replay_csv_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/csv"'
tests_fuzz_replay_csv_LDADD = sim/libsim.la core/libcopus-core.la -lm

tests_fuzz_replay_workload_SOURCES = tests/fuzz/fuzz-workload.c \
	$(FUZZ_SOURCES)
tests_fuzz_replay_workload_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/workload"'
tests_fuzz_replay_workload_LDADD = sim/libsim.la core/libcopus-core.la -lm

tests_fuzz_replay_profile_SOURCES = tests/fuzz/fuzz-profile.c \
	$(FUZZ_SOURCES)
tests_fuzz_replay_profile_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/profile"'
tests_fuzz_replay_profile_LDADD = sim/libsim.la core/libcopus-core.la -lm

# The manifest parser is internal to libcopus (runtime/internal.h).
tests_fuzz_replay_manifest_SOURCES = tests/fuzz/fuzz-manifest.c \
	$(FUZZ_SOURCES)
tests_fuzz_replay_manifest_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/runtime \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/manifest"'
tests_fuzz_replay_manifest_LDADD = runtime/libcopus.la core/libcopus-core.la \
	-lm

# copus-plan's readers (sim/plan-data.h) and copus-sim --arena's
# (sim/arena.c), each against small fixed files of the others (fuzz-plan.h,
# fuzz-arena.h).
tests_fuzz_replay_plan_query_SOURCES = tests/fuzz/fuzz-plan-query.c \
	tests/fuzz/fuzz-plan.h $(FUZZ_SOURCES)
tests_fuzz_replay_plan_query_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/plan-query"'
tests_fuzz_replay_plan_query_LDADD = sim/libsim.la core/libcopus-core.la \
	$(JSONC_LIBS) -lm

tests_fuzz_replay_plan_prof_SOURCES = tests/fuzz/fuzz-plan-prof.c \
	tests/fuzz/fuzz-plan.h $(FUZZ_SOURCES)
tests_fuzz_replay_plan_prof_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/plan-prof"'
tests_fuzz_replay_plan_prof_LDADD = sim/libsim.la core/libcopus-core.la \
	$(JSONC_LIBS) -lm

tests_fuzz_replay_plan_data_SOURCES = tests/fuzz/fuzz-plan-data.c \
	tests/fuzz/fuzz-plan.h $(FUZZ_SOURCES)
tests_fuzz_replay_plan_data_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/plan-data"'
tests_fuzz_replay_plan_data_LDADD = sim/libsim.la core/libcopus-core.la \
	$(JSONC_LIBS) -lm

tests_fuzz_replay_arena_trace_SOURCES = tests/fuzz/fuzz-arena-trace.c \
	tests/fuzz/fuzz-arena.h $(FUZZ_SOURCES)
tests_fuzz_replay_arena_trace_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/arena-trace"'
tests_fuzz_replay_arena_trace_LDADD = sim/libsim.la core/libcopus-core.la \
	$(JSONC_LIBS) -lm

tests_fuzz_replay_arena_spec_SOURCES = tests/fuzz/fuzz-arena-spec.c \
	tests/fuzz/fuzz-arena.h $(FUZZ_SOURCES)
tests_fuzz_replay_arena_spec_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim \
	-DFUZZ_CORPUS='"$(FUZZ_CORPUS_DIR)/arena-spec"'
tests_fuzz_replay_arena_spec_LDADD = sim/libsim.la core/libcopus-core.la \
	$(JSONC_LIBS) -lm

dist_noinst_SCRIPTS += tests/fuzz/run.sh
EXTRA_DIST += tests/fuzz/corpus

.PHONY: check-fuzz
check-fuzz:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(FUZZ_REPLAY)'
