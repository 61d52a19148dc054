/*
 * Fuzz target: sim_workload_read() (sim/engine-input.c), a Pollux workload CSV
 * (name,time,application,num_replicas,batch_size) as copus-sim reads it.
 * The input is written to a file of the process's scratch directory. An
 * accepted workload must hold only jobs the simulator can run: names that
 * survive its JSON result and the tab-separated lines between its
 * processes, application names that cannot leave the profile directory,
 * and times, GPU counts and batches within range.
 */
#include <math.h>

#include "sim.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[512];
	char err[SIM_ERR_LEN] = "";
	struct sim_jobspec *jobs = NULL;
	size_t n = 7;
	int rc;

	if (path[0] == '\0')
		snprintf(path, sizeof(path), "%s/workload.csv",
			 fuzz_scratch());
	fuzz_write_file(path, data, size);
	rc = sim_workload_read(path, &jobs, &n, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc == COPUS_EPARSE && err[0] != '\0');
		FUZZ_CHECK(jobs == NULL && n == 0);
		return 0;
	}
	FUZZ_CHECK(jobs != NULL);
	for (size_t i = 0; i < n; i++) {
		const struct sim_jobspec *j = &jobs[i];
		size_t nl = strnlen(j->name, sizeof(j->name));
		size_t al = strnlen(j->app_name, sizeof(j->app_name));

		FUZZ_CHECK(nl >= 1 && nl < sizeof(j->name));
		FUZZ_CHECK(strpbrk(j->name, "\"\\") == NULL);
		/* Results travel tab-separated between processes (main.c). */
		for (const char *c = j->name; *c; c++)
			FUZZ_CHECK((unsigned char)*c >= ' ' && *c != 0x7f);
		FUZZ_CHECK(al >= 1 && al < sizeof(j->app_name));
		FUZZ_CHECK(strpbrk(j->app_name, "/.") == NULL);
		FUZZ_CHECK(j->app == -1);
		FUZZ_CHECK(isfinite(j->submit) && j->submit >= 0 &&
			   j->submit <= 60.0 * 86400.0);
		FUZZ_CHECK(j->replicas >= 1 && j->replicas <= 4096);
		FUZZ_CHECK(isfinite(j->batch) && j->batch >= 1 &&
			   j->batch <= 1e8);
	}
	free(jobs);
	return 0;
}
