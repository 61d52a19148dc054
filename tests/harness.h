/*
 * A tiny layer over CUnit: each test program lists its tests once and runs
 * them in one suite. The exit status is 0 when every test passed, 1 when any
 * failed, and 77 (skipped, for automake) when a test program's input data is
 * absent.
 */
#ifndef COPUS_TEST_HARNESS_H
#define COPUS_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

struct test_case {
	const char *name;
	void (*fn)(void);
};

#define TEST(fn) { #fn, fn }

#define EXIT_SKIP 77

/* Fail with both values printed when |a - b| > tol * max(1, |b|). */
#define ASSERT_CLOSE(a, b, tol)                                               \
	do {                                                                  \
		double a_ = (a), b_ = (b);                                    \
		double s_ = fabs(b_) > 1.0 ? fabs(b_) : 1.0;                  \
		if (!(fabs(a_ - b_) <= (tol) * s_))                           \
			fprintf(stderr, "%s:%d: %s = %.10g, expected %.10g\n", \
				__FILE__, __LINE__, #a, a_, b_);              \
		CU_ASSERT(fabs(a_ - b_) <= (tol) * s_);                       \
	} while (0)

/* Fail with the status printed when a call does not return want. */
#define ASSERT_STATUS(call, want)                                             \
	do {                                                                  \
		int rc_ = (call);                                             \
		if (rc_ != (want))                                            \
			fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d\n", \
				__FILE__, __LINE__, #call, rc_,               \
				copus_strerror(rc_), (want));                 \
		CU_ASSERT_EQUAL(rc_, (want));                                 \
	} while (0)

static inline int run_tests(const char *suite_name,
			    const struct test_case *tests, size_t n)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
	for (size_t i = 0; suite != NULL && i < n; i++)
		CU_add_test(suite, tests[i].name, tests[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_tests_failed();
	unsigned run = CU_get_number_of_tests_run();
	CU_cleanup_registry();
	return failed == 0 && run == n ? 0 : 1;
}

#define RUN_TESTS(suite, tests) \
	run_tests((suite), (tests), sizeof(tests) / sizeof((tests)[0]))

#endif /* COPUS_TEST_HARNESS_H */
