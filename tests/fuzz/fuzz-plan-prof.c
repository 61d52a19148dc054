/*
 * Fuzz target: plan_prof_load() (sim/plan-measured.c), measured iteration
 * times in the format of Arena's prof_database.json
 * ({"optimal": {"<family>_<size>_<batch>": {"<cell>": seconds}}}), which
 * copus-plan calibrates and evaluates on. The input is written to a file of
 * the scratch directory and read against a small fixed planner directory
 * (fuzz-plan.h). An accepted row names a model and GPU type of the planner
 * data, a positive batch, a cell of whole nodes and a positive time or -1;
 * a rejection names the file.
 */
#include "fuzz-plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[512];
	const struct plan_data *d = fuzz_plan_fixture();
	char err[SIM_ERR_LEN] = "";
	struct plan_row *rows = NULL;
	size_t n = 7;
	int rc;

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "%s/prof.json", fuzz_scratch());
	fuzz_write_file(path, data, size);
	rc = plan_prof_load(path, d, &rows, &n, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc < 0 && strstr(err, path) == err);
		FUZZ_CHECK(fuzz_error_line_ok(err, path,
					      fuzz_lines(data, size)));
		FUZZ_CHECK(rows == NULL && n == 0);
		return 0;
	}
	FUZZ_CHECK(n == 0 || rows != NULL);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(rows[i].seconds != 0);
		fuzz_plan_check_row(d, &rows[i]);
		/* One time a model, batch and cell. */
		for (size_t k = 0; k < i; k++)
			FUZZ_CHECK(rows[k].model != rows[i].model ||
				   rows[k].batch != rows[i].batch ||
				   rows[k].gpu != rows[i].gpu ||
				   rows[k].cell.nodes != rows[i].cell.nodes ||
				   rows[k].cell.gpus_per_node !=
					   rows[i].cell.gpus_per_node);
	}
	free(rows);
	return 0;
}
