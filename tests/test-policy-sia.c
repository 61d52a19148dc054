/* The sia policy: its integer program, its limits and its fallback. */
#include <copus/policy.h>

#include "harness.h"
#include "policy/sia.h"

static void placeholder(void)
{
}

int main(void)
{
	static const struct test_case tests[] = {
		TEST(placeholder),
	};

	return RUN_TESTS("policy-sia", tests);
}
