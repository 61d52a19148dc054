/*
 * Pollux's measured placement tables as model observations, for tests and
 * benchmarks; the file is read by the simulator's CSV reader.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiles.h"
#include "sim.h"

long read_placements(const char *dir, const char *model,
		     struct placement_row **rows)
{
	char path[4096], err[512];
	struct csv c;
	struct placement_row *out = NULL;
	int col[4];
	static const char *const names[] = { "placement", "local_bsz",
					     "step_time", "sync_time" };

	snprintf(path, sizeof(path), "%s/%s/placements.csv", dir, model);
	if (sim_csv_read(path, &c, err, sizeof(err)) != COPUS_OK) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	for (int k = 0; k < 4; k++) {
		col[k] = sim_csv_col(&c, names[k], err, sizeof(err));
		if (col[k] < 0)
			goto fail;
	}
	out = calloc(c.nrows + 1, sizeof(*out));
	if (out == NULL)
		goto fail;
	for (size_t i = 0; i < c.nrows; i++) {
		struct placement_row *r = &out[i];
		const char *pl = c.rows[i][col[0]];
		double local, step, sync;

		if (sim_csv_double(&c, i, col[1], &local, err, sizeof(err)) ||
		    sim_csv_double(&c, i, col[2], &step, err, sizeof(err)) ||
		    sim_csv_double(&c, i, col[3], &sync, err, sizeof(err)))
			goto fail;
		if (strlen(pl) >= sizeof(r->placement) ||
		    strspn(pl, "0123456789") != strlen(pl) || sync >= step) {
			snprintf(err, sizeof(err), "%s:%ld: malformed row",
				 c.path, c.lines[i]);
			goto fail;
		}
		strcpy(r->placement, pl);
		for (const char *p = pl; *p; p++) {
			if (*p == '0')
				continue;
			r->obs.nodes++;
			r->obs.replicas += *p - '0';
		}
		r->obs.local = (int)local;
		r->obs.step_time = step;
		r->obs.compute_time = step - sync;
	}
	*rows = out;
	long n = (long)c.nrows;
	sim_csv_free(&c);
	return n;
fail:
	fprintf(stderr, "%s\n", err);
	free(out);
	sim_csv_free(&c);
	return -1;
}
