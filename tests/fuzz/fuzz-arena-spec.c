/*
 * Fuzz target: arena_world_read() (sim/arena.c) on its JSON files, the
 * cluster spec (resources/sim_cluster_spec.json) and the database of
 * measured times (database/prof_database.json), and on the optional
 * planner/models.csv that orders each family's sizes; the trace is a fixed
 * job of family tf on type g4 (fuzz-arena.h).
 *
 * The input holds the spec, the database and models.csv in that order,
 * separated by lines "%%"; a file the input does not reach is missing. An
 * accepted world holds types, families, entries and cells in range; a
 * rejection names the file.
 */
#define _GNU_SOURCE /* memmem */
#include "fuzz-arena.h"

/* The fuzzed files, in the input's order (fuzz_arena_files). */
static const int files[3] = { 0, 1, 3 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fixed;
	const uint8_t *p = data, *end = data + size;

	if (!fixed) {
		fuzz_arena_put("traces/simulate_trace_philly.csv",
			       (const uint8_t *)FUZZ_ARENA_TRACE,
			       sizeof(FUZZ_ARENA_TRACE) - 1);
		fixed = 1;
	}
	for (int i = 0; i < 3; i++) {
		const uint8_t *sep;

		if (p == NULL) {
			fuzz_arena_put(fuzz_arena_files[files[i]], NULL, 0);
			continue;
		}
		sep = memmem(p, (size_t)(end - p), "\n%%\n", 4);
		fuzz_arena_put(fuzz_arena_files[files[i]], p,
			       (size_t)((sep ? sep + 1 : end) - p));
		p = sep ? sep + 4 : NULL;
	}
	fuzz_arena_read();
	return 0;
}
