/*
 * Fuzz target: copus__parse_elastic() (plugin/options.h), the value of
 * --elastic as the SPANK plugin reads it from the user's command line and
 * sched/copus reads it again from the job's control environment. It must
 * accept exactly "N" or "MIN-MAX" with 1 <= MIN <= MAX <= 4096, as an
 * independent reading of the same grammar decides.
 */
#include "options.h"

#include "fuzz.h"

/* Up to nine digits at *s; -1 when there is none or more than nine. */
static long digits(const char **s)
{
	long v = 0;
	int n = 0;

	while (**s >= '0' && **s <= '9' && n <= 9) {
		v = v * 10 + (**s - '0');
		(*s)++;
		n++;
	}
	return n == 0 || n > 9 ? -1 : v;
}

/* The grammar, read apart from the plugin's code. */
static int expect_valid(const char *arg, long *lo, long *hi)
{
	const char *s = arg;

	*lo = *hi = digits(&s);
	if (*lo < 0)
		return 0;
	if (*s == '-') {
		s++;
		*hi = digits(&s);
		if (*hi < 0)
			return 0;
	}
	return *s == '\0' && *lo >= 1 && *lo <= *hi && *hi <= COPUS__GPUS_MAX;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *arg = fuzz_text(data, size), why[128] = "";
	int min = -7, max = -7, rc;
	long lo, hi;

	rc = copus__parse_elastic(arg, &min, &max, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -1);
	if (rc == 0) {
		FUZZ_CHECK(min >= 1 && min <= max && max <= COPUS__GPUS_MAX);
	} else {
		/* Refused: the user is told why, and nothing was set. */
		FUZZ_CHECK(why[0] != '\0' && min == -7 && max == -7);
	}
	FUZZ_CHECK((rc == 0) == expect_valid(arg, &lo, &hi));
	FUZZ_CHECK(rc != 0 || (lo == min && hi == max));
	free(arg);
	return 0;
}
