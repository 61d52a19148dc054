/*
 * Fuzz target: copus_planner_gpus_parse(), the calibrated GPU constants a
 * job reads from the file COPUS_PLANNER_GPUS names (and copus-plan
 * calibrate writes). Accepted constants must be ones the planner takes,
 * and must format and parse back to the same doubles.
 */
#include <copus/planner.h>

#include "fuzz.h"

#define MAX_TYPES 8

static void check_planner_takes(const copus_planner_gpu *g)
{
	static const copus_planner_layer layer = { .flops = 1e6,
						   .params = 1e3,
						   .out_elems = 1e3,
						   .work_elems = 1e3,
						   .tensor_elems = 1e3 };
	copus_planner_model m = { &layer, 1, 2, 0 };
	copus_planner_cell cell = { 1, 1 };
	copus_planner_plan p;
	int rc = copus_planner_best(&m, 1, g, &cell, NULL, &p);

	/* Not COPUS_EINVAL: the constants are valid; a tiny GPU may hold
	 * nothing. */
	FUZZ_CHECK(rc == COPUS_OK || rc == COPUS_ERANGE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size), err[256];
	copus_planner_gpu_type t[MAX_TYPES], back[MAX_TYPES];
	int n = -1, m = -1, rc;

	err[0] = 'x';
	rc = copus_planner_gpus_parse(text, t, MAX_TYPES, &n, err, sizeof(err));
	FUZZ_CHECK(rc == COPUS_OK || rc == COPUS_EPARSE ||
		   rc == COPUS_EVERSION || rc == COPUS_ERANGE);
	if (rc != COPUS_OK) {
		FUZZ_CHECK(n == 0);
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0]);
	} else {
		size_t cap = 4096 + 4096 * (size_t)n;
		char *buf = malloc(cap);

		FUZZ_CHECK(n >= 0 && n <= MAX_TYPES && buf != NULL);
		for (int i = 0; i < n; i++)
			check_planner_takes(&t[i].gpu);
		FUZZ_CHECK(copus_planner_gpus_format(t, n, buf, cap, NULL, err,
						     sizeof(err)) == COPUS_OK);
		FUZZ_CHECK(copus_planner_gpus_parse(buf, back, MAX_TYPES, &m,
						    err, sizeof(err)) ==
			   COPUS_OK);
		FUZZ_CHECK(m == n);
		for (int i = 0; i < n; i++) {
			FUZZ_CHECK(strcmp(back[i].name, t[i].name) == 0);
			FUZZ_CHECK(memcmp(&back[i].gpu, &t[i].gpu,
					  sizeof(t[i].gpu)) == 0);
		}
		free(buf);
	}
	free(text);
	return 0;
}
