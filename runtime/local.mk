# Build rules of runtime/ (included by the top-level Makefile.am).

copusinclude_HEADERS += include/copus/hint.h include/copus/copus.h

# The hint message and the gradient noise estimators are pure: core library.
core_libcopus_core_la_SOURCES += core/hint.c core/noise.c
core_libcopus_core_la_CFLAGS += $(JSONC_CFLAGS)
core_libcopus_core_la_LIBADD += $(JSONC_LIBS)

check_PROGRAMS += tests/test-hint tests/test-noise

tests_test_hint_SOURCES = tests/test-hint.c tests/harness.h
tests_test_hint_CFLAGS = $(TEST_CFLAGS)
tests_test_hint_LDADD = $(TEST_LIBS)

tests_test_noise_SOURCES = tests/test-noise.c tests/harness.h
tests_test_noise_CFLAGS = $(TEST_CFLAGS)
tests_test_noise_LDADD = $(TEST_LIBS)
