/*
 * Fuzz target: copus__parse_types() (plugin/options.h), the value of
 * --gpu-types from the user's command line, read again by sched/copus from
 * the job's control environment. It must accept exactly a list of 1 to 8
 * distinct names of 1 to 15 characters of [A-Za-z0-9_.-], as an
 * independent reading of the grammar decides, and copy it unchanged into
 * a buffer the size both plugins give it.
 */
#include "options.h"

#include "fuzz.h"

/* The grammar, read apart from the plugin's code. */
static int expect_valid(const char *arg)
{
	char names[COPUS__TYPES_MAX][COPUS__TYPE_LEN + 1];
	int n = 0;

	for (const char *s = arg;;) {
		size_t len = strcspn(s, ",");

		if (len == 0 || len > COPUS__TYPE_LEN || n == COPUS__TYPES_MAX)
			return 0;
		for (size_t i = 0; i < len; i++)
			if (!strchr("abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
				    s[i]))
				return 0;
		memcpy(names[n], s, len);
		names[n][len] = '\0';
		for (int k = 0; k < n; k++)
			if (strcmp(names[k], names[n]) == 0)
				return 0;
		n++;
		if (s[len] == '\0')
			return 1;
		s += len + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The buffer of plugin/spank_copus.c and plugin/snapshot.c. */
	char out[COPUS__TYPES_MAX * (COPUS__TYPE_LEN + 1)], why[128] = "";
	char *arg = fuzz_text(data, size);
	int rc;

	memset(out, 'x', sizeof(out));
	rc = copus__parse_types(arg, out, sizeof(out), why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -1);
	if (rc == 0)
		FUZZ_CHECK(strcmp(out, arg) == 0);
	else
		FUZZ_CHECK(why[0] != '\0');
	/* The longest valid list fits the buffer: no valid list is refused. */
	FUZZ_CHECK((rc == 0) == expect_valid(arg));
	free(arg);
	return 0;
}
