/*
 * Fuzz target: plan_query_load() and plan_crius_load() (sim/plan-measured.c),
 * the query CSV of copus-plan (model,batch,cell) and Crius's estimates
 * (model,cell,total_s), and plan_cell_parse(), the cell names both carry.
 * The input is written to a file of the scratch directory and read as a
 * query file against a small fixed planner directory (fuzz-plan.h), then as
 * estimates matched against the queries; its first line is also parsed as
 * a cell name. An accepted query names a model and GPU type of the planner
 * data, a positive batch and a cell of whole nodes; an estimate is a
 * positive time or -1; a rejection names the file.
 */
#include "fuzz-plan.h"

/* The first line of the input as a cell name. */
static void check_cell(const struct plan_data *d, const uint8_t *data,
		       size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	char *name = fuzz_text(data, nl ? (size_t)(nl - data) : size);
	char err[SIM_ERR_LEN] = "";
	copus_planner_cell cell = { 0 };
	int gpu = -1, rc;

	rc = plan_cell_parse(d, name, &gpu, &cell, err, sizeof(err));
	if (rc == COPUS_OK) {
		FUZZ_CHECK(gpu >= 0 && gpu < d->n_gpus);
		FUZZ_CHECK(cell.nodes >= 1 && cell.gpus_per_node >= 1);
		FUZZ_CHECK(fuzz_plan_canonical(d, gpu, &cell, name));
	} else {
		FUZZ_CHECK(rc == COPUS_EPARSE || rc == COPUS_EINVAL);
		FUZZ_CHECK(strncmp(err, "cell '", 6) == 0);
	}
	free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[512];
	const struct plan_data *d = fuzz_plan_fixture();
	char err[SIM_ERR_LEN] = "";
	struct plan_row *rows = NULL;
	size_t n = 7;
	double *est;
	int rc;

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "%s/query.csv", fuzz_scratch());
	fuzz_write_file(path, data, size);
	check_cell(d, data, size);
	rc = plan_query_load(path, d, &rows, &n, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc < 0 && strstr(err, path) == err);
		FUZZ_CHECK(fuzz_error_line_ok(err, path,
					      fuzz_lines(data, size)));
		FUZZ_CHECK(rows == NULL && n == 0);
	} else {
		FUZZ_CHECK(n == 0 || rows != NULL);
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(rows[i].seconds == 0);
			FUZZ_CHECK(rows[i].line >= 2 &&
				   (i == 0 || rows[i].line > rows[i - 1].line));
			fuzz_plan_check_row(d, &rows[i]);
		}
	}
	est = malloc((n ? n : 1) * sizeof(*est));
	FUZZ_CHECK(est != NULL);
	err[0] = '\0';
	rc = plan_crius_load(path, d, rows, n, est, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc < 0 && strstr(err, path) == err);
		FUZZ_CHECK(fuzz_error_line_ok(err, path,
					      fuzz_lines(data, size)));
	}
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(est[i] == -1 || (isfinite(est[i]) && est[i] > 0));
	free(est);
	free(rows);
	return 0;
}
