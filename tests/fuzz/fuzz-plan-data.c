/*
 * Fuzz target: plan_data_load() (sim/plan-data.c), copus-plan's and
 * copus-sim's planner directory: models.csv, devices.json and comm.csv,
 * files a user writes or measures.
 *
 * The input holds the three files in that order, separated by lines "%%";
 * a file the input does not reach is missing from the directory. Loaded
 * data must hold models the planner can describe, GPU types with positive
 * peaks and memories, and finite, non-negative collective constants; a
 * rejection names the file at fault (and a line it has), and freeing
 * after either leaks nothing.
 */
#define _GNU_SOURCE /* memmem */
#include "fuzz-plan.h"

static const char *const files[3] = { "models.csv", "devices.json",
				      "comm.csv" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char dir[512];
	const uint8_t *p = data, *end = data + size;
	char err[SIM_ERR_LEN] = "";
	struct plan_data d;
	long lines[3] = { 0, 0, 0 };
	char path[600];
	int rc, named = -1;

	if (dir[0] == '\0') {
		snprintf(dir, sizeof(dir), "%s/planner", fuzz_scratch());
		FUZZ_CHECK(mkdir(dir, 0700) == 0);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (p == NULL) {
			unlink(path);
			continue;
		}
		const uint8_t *sep = memmem(p, (size_t)(end - p), "\n%%\n", 4);
		const uint8_t *e = sep ? sep + 1 : end;

		fuzz_write_file(path, p, (size_t)(e - p));
		lines[i] = fuzz_lines(p, (size_t)(e - p));
		p = sep ? sep + 4 : NULL;
	}
	rc = plan_data_load(dir, &d, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc < 0 && strstr(err, dir) == err);
		const char *at = err + strlen(dir) + 1;

		for (int i = 0; i < 3; i++)
			if (strncmp(at, files[i], strlen(files[i])) == 0)
				named = i;
		FUZZ_CHECK(named >= 0);
		/* A line an error names is a line of the file. */
		snprintf(path, sizeof(path), "%s/%s", dir, files[named]);
		FUZZ_CHECK(fuzz_error_line_ok(err, path, lines[named]));
		FUZZ_CHECK(d.models == NULL && d.n_models == 0 &&
			   d.n_gpus == 0);
		return 0;
	}
	fuzz_plan_check_data(&d);
	plan_data_free(&d);
	return 0;
}
