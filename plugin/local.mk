# Build rules of plugin/ (included by the top-level Makefile.am).
#
# spank_copus.so: the --elastic and --gpu-types job options (public spank.h).
# sched_copus.so: the slurmctld scheduler plugin, built only when configure
# was given the matching Slurm source (--with-slurm-src). Both are installed
# into Slurm's plugin directory (configure --with-slurm-plugindir).
# Neither is built with the sanitizers' instrumentation: they are loaded by
# Debian's uninstrumented Slurm programs.

slurmplugindir = @SLURM_PLUGIN_DIR@
slurmplugin_LTLIBRARIES = plugin/spank_copus.la
PLUGIN_CFLAGS = -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
	-Wno-sign-compare -Wno-missing-field-initializers -fno-strict-aliasing
PLUGIN_LDFLAGS = -module -avoid-version -shared

plugin_spank_copus_la_SOURCES = plugin/spank_copus.c plugin/options.h
plugin_spank_copus_la_CFLAGS = $(PLUGIN_CFLAGS)
plugin_spank_copus_la_LDFLAGS = $(PLUGIN_LDFLAGS)

if HAVE_SLURM_SRC
slurmplugin_LTLIBRARIES += plugin/sched_copus.la
endif
plugin_sched_copus_la_SOURCES = \
	plugin/sched_copus.c plugin/sched_copus.h \
	plugin/snapshot.c plugin/snapshot.h plugin/snapshot-job.c \
	plugin/snapshot-job.h plugin/snapshot-node.c plugin/snapshot-node.h \
	plugin/intake.c plugin/intake.h \
	plugin/round.c plugin/round.h plugin/round-input.c plugin/round-input.h \
	plugin/round-users.c plugin/round-plans.c plugin/round-launches.c \
	plugin/round-models.c plugin/round-models.h \
	plugin/round-users.h plugin/round-plans.h \
	plugin/actions.c plugin/actions.h \
	plugin/rescale.c plugin/rescale.h \
	plugin/statefile.c plugin/statefile.h \
	plugin/statefmt.c plugin/statefmt.h \
	plugin/memo.c plugin/memo.h \
	plugin/usage.c plugin/usage.h \
	plugin/params.c plugin/params.h \
	plugin/plans.c plugin/plans.h runtime/file.c runtime/file.h \
	plugin/options.h plugin/stats.h plugin/stats.c \
	plugin/locks.c plugin/locks.h plugin/slurm-config/config.h \
	plugin/slurm-compat.h plugin/slurm-compat.c
plugin_sched_copus_la_CPPFLAGS = -DHAVE_CONFIG_H \
	-I$(top_srcdir)/plugin/slurm-config -I$(SLURM_SRC) \
	-I$(SLURM_SRC)/src/common -I$(top_srcdir)/include
plugin_sched_copus_la_CFLAGS = $(PLUGIN_CFLAGS)
plugin_sched_copus_la_LDFLAGS = $(PLUGIN_LDFLAGS)
# The core policy and the hint parser; Slurm's own symbols still resolve
# from slurmctld.
plugin_sched_copus_la_LIBADD = core/libcopus-core.la

# job_submit_copus.so: refuses at submission what sched/copus could never
# run (plugin/submit.h), with the same build as sched_copus.so.
if HAVE_SLURM_SRC
slurmplugin_LTLIBRARIES += plugin/job_submit_copus.la
endif
plugin_job_submit_copus_la_SOURCES = plugin/job_submit_copus.c \
	plugin/slurm-compat.c \
	plugin/submit.c plugin/submit.h plugin/options.h plugin/slurm-compat.h \
	plugin/slurm-config/config.h
plugin_job_submit_copus_la_CPPFLAGS = $(plugin_sched_copus_la_CPPFLAGS)
plugin_job_submit_copus_la_CFLAGS = $(PLUGIN_CFLAGS)
plugin_job_submit_copus_la_LDFLAGS = $(PLUGIN_LDFLAGS)

# The plugin's Slurm-free parts, unit-tested without slurmctld: the
# parameters (test-plugin-params), the job options and hint models
# (test-plugin-sched), and the round (test-plugin-round, test-plugin-types,
# test-plugin-restart). PLUGIN_ROUND_SOURCES: the round and the Slurm-free
# files it needs.
PLUGIN_ROUND_SOURCES = plugin/round.c plugin/round.h plugin/round-input.c \
	plugin/round-input.h plugin/round-users.c \
	plugin/round-launches.c plugin/round-models.c plugin/round-models.h \
	plugin/round-plans.c plugin/round-plans.h plugin/round-users.h \
	plugin/memo.c \
	plugin/memo.h plugin/params.c plugin/params.h plugin/sched_copus.h \
	plugin/options.h plugin/submit.c plugin/submit.h plugin/stats.h \
	plugin/stats.c \
	plugin/statefmt.c plugin/statefmt.h plugin/plans.c plugin/plans.h \
	runtime/file.c runtime/file.h \
	plugin/usage.c plugin/usage.h
check_PROGRAMS += tests/test-plugin-sched
tests_test_plugin_sched_SOURCES = tests/test-plugin-sched.c \
	$(PLUGIN_ROUND_SOURCES) tests/harness.h
tests_test_plugin_sched_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/plugin
tests_test_plugin_sched_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test-plugin-params
tests_test_plugin_params_SOURCES = tests/test-plugin-params.c \
	plugin/params.c plugin/params.h plugin/memo.c plugin/memo.h \
	tests/harness.h
tests_test_plugin_params_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/plugin
tests_test_plugin_params_LDADD = $(TEST_LIBS)
# The round's decision (test-plugin-round), a job's models on types it has
# not run on (test-plugin-types) and the rescales and restarts
# (test-plugin-restart), on one world of rounds built by hand.
PLUGIN_ROUND_WORLD = tests/plugin-round-world.c tests/plugin-round-world.h \
	tests/harness.h $(PLUGIN_ROUND_SOURCES)
check_PROGRAMS += tests/test-plugin-round
tests_test_plugin_round_SOURCES = tests/test-plugin-round.c \
	$(PLUGIN_ROUND_WORLD)
tests_test_plugin_round_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/plugin
tests_test_plugin_round_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test-plugin-types
tests_test_plugin_types_SOURCES = tests/test-plugin-types.c \
	$(PLUGIN_ROUND_WORLD)
tests_test_plugin_types_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/plugin
tests_test_plugin_types_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test-plugin-restart
tests_test_plugin_restart_SOURCES = tests/test-plugin-restart.c \
	$(PLUGIN_ROUND_WORLD)
tests_test_plugin_restart_CFLAGS = $(TEST_CFLAGS) -I$(top_srcdir)/plugin
tests_test_plugin_restart_LDADD = $(TEST_LIBS)
# Benchmark (not a test): the round's Slurm-free phases at up to 100,000
# pending jobs on 65,536 GPUs.
noinst_PROGRAMS += tests/bench-round
tests_bench_round_SOURCES = tests/bench-round.c $(PLUGIN_ROUND_SOURCES)
tests_bench_round_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir)/plugin \
	-I$(top_srcdir)/core
tests_bench_round_LDADD = core/libcopus-core.la -lm

# copusctl: sched/copus's status and counters for admins (scontrol for
# StateSaveLocation, json-c for status --json).
bin_PROGRAMS += plugin/copusctl
plugin_copusctl_SOURCES = plugin/copusctl.c
plugin_copusctl_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
plugin_copusctl_LDADD = $(JSONC_LIBS)
dist_man_MANS += etc/copusctl.1

# Loopback-cluster integration tests (root only; they skip otherwise).
SLURM_TESTS = tests/test-slurm-loopback.sh tests/test-slurm-spank.sh \
	tests/test-slurm-elastic.sh tests/test-slurm-restart.sh \
	tests/test-slurm-sched.sh tests/test-slurm-plugin-hints.sh \
	tests/test-slurm-shape.sh tests/test-slurm-ctld-restart.sh \
	tests/test-slurm-ask.sh tests/test-slurm-max-jobs.sh \
	tests/test-slurm-config.sh tests/test-slurm-deadline.sh \
	tests/test-slurm-submit.sh tests/test-slurm-hint-trust.sh \
	tests/test-slurm-events.sh tests/test-slurm-cpus.sh \
	tests/test-slurm-chaos.sh tests/test-slurm-user-cap.sh \
	tests/test-slurm-examples.sh tests/test-slurm-granularity.sh \
	tests/test-slurm-plan.sh tests/test-slurm-fairshare.sh \
	tests/test-slurm-crash-start.sh tests/test-slurm-faults.sh \
	tests/test-slurm-requeue-retry.sh tests/test-slurm-yield.sh \
	tests/test-slurm-immediate.sh tests/test-slurm-stale-requeue.sh \
	tests/test-slurm-epilog.sh
# make check runs them all; contrib/dev.sh's make distcheck, which follows
# a make check of the same tree, names fewer on its command line (the dist
# tree's examples and a first job; it checks what the tarball holds).
SLURM_CHECK = $(SLURM_TESTS)
TESTS += $(SLURM_CHECK)
# A fault the loopback tests preload into slurmctld: refused requeues
# (tests/fault-requeue.c). -rpath makes libtool build it shared.
check_LTLIBRARIES = tests/fault_requeue.la
tests_fault_requeue_la_SOURCES = tests/fault-requeue.c
tests_fault_requeue_la_CFLAGS = $(PLUGIN_CFLAGS)
tests_fault_requeue_la_LDFLAGS = $(PLUGIN_LDFLAGS) -rpath $(abs_builddir)/tests

# Only the tests that run a loopback Slurm cluster (contrib/dev.sh runs
# them on each Slurm version).
check-slurm:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS="$(SLURM_TESTS) \
		tests/test-runtime-slurm.sh tests/test-slurm-node-down.sh"
.PHONY: check-slurm
dist_noinst_SCRIPTS += contrib/loopback-cluster.sh tests/bench-plugin.sh \
	tests/chaos.sh tests/bench-faults.sh
EXTRA_DIST += $(SLURM_TESTS) tests/slurm-common.sh

# make distcheck installs into its own prefix, never into Slurm's directory.
AM_DISTCHECK_CONFIGURE_FLAGS = --with-slurm-plugindir='$${libdir}/slurm-wlm'

dist_man_MANS += etc/sched_copus.8
dist_noinst_DATA += etc/slurm.conf.example etc/gres.conf.example \
	etc/plugstack.conf.example
