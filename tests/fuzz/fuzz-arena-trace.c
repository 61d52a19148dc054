/*
 * Fuzz target: arena_world_read() (sim/arena.c) on its job trace,
 * traces/simulate_trace_philly.csv, with a small fixed cluster spec and
 * database (fuzz-arena.h). The input is the trace. An accepted world holds
 * jobs of the cluster's types and the database's families, in rounds that
 * do not go back, and models whose cells fit the cluster at a finite,
 * positive time; a rejection names the file.
 */
#include "fuzz-arena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fixed;

	if (!fixed) {
		fuzz_arena_put("resources/sim_cluster_spec.json",
			       (const uint8_t *)FUZZ_ARENA_SPEC,
			       sizeof(FUZZ_ARENA_SPEC) - 1);
		fuzz_arena_put("database/prof_database.json",
			       (const uint8_t *)FUZZ_ARENA_DB,
			       sizeof(FUZZ_ARENA_DB) - 1);
		fixed = 1;
	}
	fuzz_arena_put("traces/simulate_trace_philly.csv", data, size);
	fuzz_arena_read();
	return 0;
}
