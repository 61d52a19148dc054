/* Reading Pollux's measured placement tables, for tests and benchmarks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiles.h"

long read_placements(const char *dir, const char *model,
		     struct placement_row **rows)
{
	char path[4096], line[512];
	long n = 0, cap = 0, lineno = 0;
	struct placement_row *out = NULL;

	snprintf(path, sizeof(path), "%s/%s/placements.csv", dir, model);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (lineno == 1)
			continue; /* header */
		struct placement_row r = { 0 };
		double step, sync;
		if (sscanf(line, "%15[0-9],%d,%lf,%lf", r.placement,
			   &r.obs.local, &step, &sync) != 4 || sync >= step) {
			fprintf(stderr, "%s:%ld: malformed row\n", path, lineno);
			goto fail;
		}
		for (const char *p = r.placement; *p; p++) {
			if (*p == '0')
				continue;
			r.obs.nodes++;
			r.obs.replicas += *p - '0';
		}
		r.obs.step_time = step;
		r.obs.compute_time = step - sync;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			void *grown = realloc(out, cap * sizeof(*out));
			if (grown == NULL)
				goto fail;
			out = grown;
		}
		out[n++] = r;
	}
	fclose(f);
	*rows = out;
	return n;
fail:
	fclose(f);
	free(out);
	return -1;
}
