/*
 * Fuzz target: sim_csv_read() (sim/csv.c), the reader under every trace
 * file of the simulator (workloads, profiles), which come from elsewhere
 * (Pollux's traces, a user's own). The input is written to a file of the
 * process's scratch directory and read back. A file read must be a header
 * and rows of the header's width, fields trimmed, numbers finite.
 */
#include <math.h>

#include "sim.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[512];
	char err[SIM_ERR_LEN] = "";
	struct csv c;
	int rc;

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "%s/input.csv", fuzz_scratch());
	fuzz_write_file(path, data, size);
	rc = sim_csv_read(path, &c, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc == COPUS_EPARSE && err[0] != '\0');
		/* A failed read leaves nothing to free. */
		FUZZ_CHECK(c.header == NULL && c.rows == NULL && c.nrows == 0);
		return 0;
	}
	FUZZ_CHECK(c.header != NULL && c.ncols >= 1);
	for (int i = 0; i < c.ncols; i++) {
		/* The first column of a name is the one sim_csv_col finds. */
		int col = sim_csv_col(&c, c.header[i], err, sizeof(err));

		FUZZ_CHECK(col >= 0 && col <= i);
		FUZZ_CHECK(strcmp(c.header[col], c.header[i]) == 0);
	}
	for (size_t r = 0; r < c.nrows; r++) {
		/* Rows keep their file order, after the header's line. */
		FUZZ_CHECK(c.lines[r] >= 2);
		FUZZ_CHECK(r == 0 || c.lines[r] > c.lines[r - 1]);
		for (int i = 0; i < c.ncols; i++) {
			const char *f = c.rows[r][i];
			size_t n = strlen(f);
			double x;

			FUZZ_CHECK(strchr(f, ',') == NULL);
			FUZZ_CHECK(strpbrk(f, "\n") == NULL);
			FUZZ_CHECK(n == 0 || (f[0] != ' ' && f[0] != '\t' &&
					      f[n - 1] != ' ' &&
					      f[n - 1] != '\t'));
			if (sim_csv_double(&c, r, i, &x, err, sizeof(err)) ==
			    COPUS_OK)
				FUZZ_CHECK(isfinite(x));
			else
				FUZZ_CHECK(err[0] != '\0');
		}
	}
	sim_csv_free(&c);
	return 0;
}
