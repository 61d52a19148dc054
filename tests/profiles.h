/* Reading Pollux's measured placement tables, for tests and benchmarks. */
#ifndef COPUS_TEST_PROFILES_H
#define COPUS_TEST_PROFILES_H

#include <stddef.h>

#include <copus/model.h>

struct placement_row {
	char placement[16]; /* GPUs per node, one digit a node */
	copus_observation obs;
};

/*
 * Read <dir>/<model>/placements.csv. Returns the number of rows (and a
 * malloc'd array in *rows) or -1 with a message on stderr naming the file
 * and line.
 */
long read_placements(const char *dir, const char *model,
		     struct placement_row **rows);

#endif
